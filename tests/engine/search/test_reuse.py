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
    h = heuristic_schedule(p)
    assert reuse.conflict_bytes(p, h) > 0.0
    assert reuse.penalty_ms(p, h) == pytest.approx(reuse.excess_bytes(p, h) / (DRAM_GBS * 1e9) * 1e3)


def test_an_intermediate_at_root_that_does_not_fit_in_cache_pays_its_round_trip_to_dram():
    from engine.loopnest import build
    from engine.schedule import Directive, Kind, StageSchedule

    p = zoo.get("harris", "full")  # gray: 2052 x 2052 floats (16 MiB)
    h = heuristic_schedule(p)  # gray computed per 32-row strip of the output: fits
    assert reuse.stage_spill_bytes(build(p, h), "gray") == 0.0
    root = h.copy("root gray")
    root.stages["gray"] = StageSchedule((Directive(Kind.COMPUTE_ROOT), Directive(Kind.VECTORIZE, loop="x", factor=16)))
    n = build(p, root)
    assert reuse.stage_spill_bytes(n, "gray") == 2 * n.placements["gray"].points_total * 4  # written, read back
    assert reuse.stage_spill_bytes(n, "harris") == 0.0  # an output's write is compulsory
    assert reuse.penalty_ms(p, root) > reuse.penalty_ms(p, h) + 1.0
