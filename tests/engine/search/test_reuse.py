"""The capacity-traffic term of zero-measurement greedy (engine/search/reuse.py)."""

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
