"""The capacity-traffic term of zero-measurement greedy (engine/search/reuse.py)."""

import pytest

from engine import zoo
from engine.costmodel.analytic import DRAM_GBS
from engine.heuristic import heuristic_schedule
from engine.schedule import Schedule
from engine.search import reuse


def test_a_product_that_rereads_all_of_b_per_row_costs_more_traffic_than_a_blocked_one():
    p = zoo.get("matmul", "full")  # 1024^3: B (4 MiB) does not fit in the 1 MiB the term assumes
    naive = reuse.excess_bytes(p, Schedule(name="naive"))  # rows outside, B's columns walked per output element
    blocked = reuse.excess_bytes(p, heuristic_schedule(p))
    assert naive > 1e9  # about all of B once per output row: 1024 x 4 MiB
    assert blocked < naive / 10


def test_a_pipeline_that_fits_in_cache_has_no_capacity_traffic():
    p = zoo.get("blur", "small")
    assert reuse.penalty_ms(p, Schedule(name="naive")) == 0.0
    assert reuse.penalty_ms(p, heuristic_schedule(p)) == 0.0


def test_only_the_decided_stages_count_for_a_partial_schedule():
    p = zoo.get("matmul", "full")
    assert reuse.excess_bytes(p, Schedule(name="empty"), decided_only=True) == 0.0


@pytest.mark.slow  # two greedy descents of V over a 1024^3 matmul: ~11 s under the session's load
def test_zero_measurement_greedy_with_the_term_chooses_less_capacity_traffic():
    import random

    from engine.search.value_offline import BEAM, BEAM_V_ALONE, shipped_value, value_greedy

    p, v = zoo.get("matmul", "full"), shipped_value()
    alone = value_greedy(p, v, random.Random(0), 4, beam=BEAM_V_ALONE, reuse=False)
    scored = value_greedy(p, v, random.Random(0), 4, beam=BEAM, reuse=True)
    assert reuse.excess_bytes(p, scored) < reuse.excess_bytes(p, alone) / 4


def _softmax_max(rows: int | None):
    """softmax (2048 x 1024, rows 4 KiB apart) with its row max vectorized across `rows` rows
    (columns outside the vector, outer rows parallel); None: the whole column walked, serial."""
    from engine.schedule import Directive, Kind, StageSchedule
    from engine.search.space import seed_schedule

    p = zoo.get("softmax", "full")
    s = seed_schedule(p)
    if rows is None:
        upd = (Directive(Kind.REORDER, loops=("i", "r")), Directive(Kind.VECTORIZE, loop="i", factor=4))
    else:
        upd = (
            Directive(Kind.SPLIT, loop="i", factor=rows, outer="io", inner="ii"),
            Directive(Kind.REORDER, loops=("ii", "r", "io")),
            Directive(Kind.VECTORIZE, loop="ii"),
            Directive(Kind.PARALLEL, loop="io"),
        )
    s.stages["softmax_max"] = StageSchedule((Directive(Kind.COMPUTE_ROOT),), upd)
    return p, s


def test_strided_vectors_over_more_rows_than_l1_ways_cost_conflict_traffic():
    p, eight = _softmax_max(8)  # 8 lines in one set: the 8 ways hold them
    assert reuse.conflict_bytes(p, eight) == 0.0
    for rows in (16, 128, None):  # 16 / 128 lines in one set, or 2048 rows of one line each (beyond L1)
        p, s = _softmax_max(rows)
        assert reuse.conflict_bytes(p, s) > 100e6  # about a line per element of the 8 MiB input
        assert reuse.penalty_ms(p, s) > 1.0  # a max is too little arithmetic to hide it


def test_wide_rows_and_a_blocked_matmul_pay_no_conflict_time():
    p = zoo.get("unsharp", "full")  # 7-row stencil over 2054-float rows: a stream beyond L1, not a conflict
    assert reuse.conflict_bytes(p, heuristic_schedule(p)) == 0.0
    p = zoo.get("matmul", "full")  # its B block conflicts in L1, but re-reading it from L2 hides under the FMAs
    h = _blocked_matmul()
    assert reuse.conflict_bytes(p, h) > 0.0
    assert reuse.penalty_ms(p, h) == pytest.approx(reuse.excess_bytes(p, h) / (DRAM_GBS * 1e9) * 1e3)


def _blocked_matmul() -> Schedule:
    """1024^3 matmul: 64 x 128 output tiles, the product per tile in 8 x 2-vector register
    blocks with k blocked by 128 (B's 128 x 32 block: 128 rows 4 KiB apart in two L1 sets)."""
    from engine.schedule import S

    s = Schedule(name="blocked")
    S(s, "C").split("i", "io", "ii", 64).split("j", "jo", "ji", 128).reorder("ji", "ii", "jo", "io").vectorize("ji", 16).parallel("io")
    S(s, "prod").compute_at("C", "jo").vectorize("j", 16)
    u = S(s, "prod").update().split("k", "ko", "ki", 128).split("i", "i", "i_u", 8).split("j", "j", "j_v", 16).split("j", "j", "j_u", 2)
    u.reorder("j_v", "j_u", "i_u", "ki", "i", "j", "ko").vectorize("j_v").unroll("j_u").unroll("i_u")
    return s


def test_conflict_time_does_not_depend_on_the_hosts_core_count(monkeypatch):
    """Cache time and the arithmetic that hides it are both per core, and shared by the cores
    a stage's parallel loops use (as in the analytic model): the blocked matmul's B block
    hides under its FMAs on any host, and the strided max's charge is its one-core time over
    the cores it uses."""
    mm, blocked = zoo.get("matmul", "full"), _blocked_matmul()
    sm, strided = _softmax_max(16)
    one = None
    for cores in (1, 2, 64):
        monkeypatch.setattr(reuse, "CORES", cores)
        assert reuse.penalty_ms(mm, blocked) == pytest.approx(reuse.excess_bytes(mm, blocked) / (DRAM_GBS * 1e9) * 1e3)
        charged = reuse.penalty_ms(sm, strided) - reuse.excess_bytes(sm, strided) / (DRAM_GBS * 1e9) * 1e3
        one = charged if one is None else one
        assert charged > 0 and charged == pytest.approx(one / cores)
