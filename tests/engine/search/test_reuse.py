"""The capacity-traffic term of zero-measurement greedy (engine/search/reuse.py)."""

import pytest

from engine import zoo
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
