"""Each placement heuristic on a case whose answer is known: independent work spread over
devices, a chain whose transfers cost more than it computes kept on one device, a device too
small for everything avoided by the memory-aware ones."""

import pytest

from engine.placement.costs import CostTable, roofline_costs
from engine.placement.devices import load_profile, parse_profile
from engine.placement.graph import OpGraph, OpNode, random_graph
from engine.placement.policies import HEURISTICS, PlacementResult, PolicyError, Problem, favourite_children, place, placers
from engine.placement.simulator import simulate


def profile(n_dev=2, bandwidth=1e9, memory=10**12):
    names = [f"d{k}" for k in range(n_dev)]
    return parse_profile(
        {
            "name": "hand",
            "simulated": True,
            "description": "test figures",
            "devices": [{"name": x, "kind": "gpu", "peak_flops": 1e12, "mem_bandwidth": 1e12, "memory_bytes": memory} for x in names],
            "links": [{"a": names, "b": names, "latency_s": 1e-6, "bandwidth": bandwidth}],
        },
        "hand.json",
    )


def problem(sizes, edges, seconds, prof, weights=None):
    weights = weights or [0] * len(sizes)
    nodes = tuple(OpNode(f"n{i}", "generic", 1.0, 1.0, s, w) for i, (s, w) in enumerate(zip(sizes, weights)))
    g = OpGraph("g", nodes, tuple(edges))
    n_dev = len(prof.devices)
    return Problem(g, prof, CostTable(tuple((float(t),) * n_dev for t in seconds), ("roofline",) * n_dev))


def two_chains(bandwidth=1e12):
    """Nodes 0-3 one chain, 4-7 another, 1 s each, small tensors: on two devices they run in parallel (4 s), on one 8 s."""
    edges = [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7)]
    return problem([1000] * 8, edges, [1.0] * 8, profile(2, bandwidth))


@pytest.mark.parametrize("policy", ["etf", "sct", "tfgreedy", "topo", "chunks", "kl"])
def test_two_independent_chains_run_in_parallel(policy):
    res = place(two_chains(), policy)
    assert res.simulation.makespan_s == pytest.approx(4.0, rel=1e-3)
    first, second = set(res.placement[:4]), set(res.placement[4:])
    assert len(first) == len(second) == 1 and first != second  # each chain whole, on its own device
    assert res.policy == policy and res.simulation.valid


def test_roundrobin_and_single_on_the_two_chains():
    rr = place(two_chains(), "roundrobin")
    assert rr.placement == (0, 1, 0, 1, 0, 1, 0, 1)
    single = place(two_chains(), "single")
    assert len(set(single.placement)) == 1 and single.simulation.makespan_s == pytest.approx(8.0)


def chain_with_huge_transfers():
    """A 6-node chain (1 s each) with 1 GB between nodes over a 1 GB/s link: any cut costs over 1 s."""
    edges = [(i, i + 1) for i in range(5)]
    return problem([10**9] * 6, edges, [1.0] * 6, profile(2, bandwidth=1e9))


@pytest.mark.parametrize("policy", ["etf", "sct", "tfgreedy", "single"])
def test_a_chain_with_huge_transfers_stays_on_one_device(policy):
    res = place(chain_with_huge_transfers(), policy)
    assert len(set(res.placement)) == 1
    assert res.simulation.transfers == 0 and res.simulation.makespan_s == pytest.approx(6.0)


def test_roundrobin_pays_for_the_transfers_it_makes():
    res = place(chain_with_huge_transfers(), "roundrobin")
    assert res.simulation.transfers == 5
    assert res.simulation.makespan_s == pytest.approx(6.0 + 5 * (1.0 + 1e-6))


def test_sct_makes_every_child_of_a_chain_its_parents_favourite():
    assert favourite_children(chain_with_huge_transfers()) == {i + 1: i for i in range(5)}
    # A fork: a parent has at most one favourite child.
    fork = problem([10**9] * 3, [(0, 1), (0, 2)], [1.0] * 3, profile(2, bandwidth=1e9))
    fav = favourite_children(fork)
    assert list(fav.values()).count(0) <= 1


def test_a_heterogeneous_pair_puts_a_chain_on_the_fast_device():
    prof = load_profile("cpu_gpu")
    g = random_graph(1, 0)
    chain = OpGraph("chain", tuple(OpNode(f"c{i}", "conv", 1e10, 1e7, 10**7, 0) for i in range(4)), ((0, 1), (1, 2), (2, 3)))
    for graph in (g, chain):
        pr = Problem(graph, prof, roofline_costs(graph, prof))
        for policy in ("single", "tfgreedy", "etf", "sct"):
            assert set(place(pr, policy).placement) == {prof.index("gpu0")}, policy


def test_memory_aware_policies_split_what_does_not_fit_on_one_device():
    # Eight independent-ish nodes of 30 bytes each (weights), devices of 128 bytes: at most 4 per device.
    edges = [(i, i + 1) for i in range(7)]
    pr = problem([1] * 8, edges, [1.0] * 8, profile(2, bandwidth=1e12, memory=128), weights=[30] * 8)
    assert not place(pr, "single").simulation.valid
    for policy in ("topo", "etf", "sct"):
        res = place(pr, policy)
        assert res.simulation.valid, (policy, res.simulation.reason)
        assert max(res.simulation.peak_memory_bytes) <= 128


def test_every_heuristic_gives_a_valid_complete_placement_of_a_random_graph():
    prof = load_profile("cpu_4gpu_pcie")
    g = random_graph(80, 3)
    pr = Problem(g, prof, roofline_costs(g, prof))
    assert set(HEURISTICS) == {"single", "roundrobin", "chunks", "tfgreedy", "topo", "etf", "sct", "kl"}
    for policy in HEURISTICS:
        res = place(pr, policy)
        assert isinstance(res, PlacementResult) and len(res.placement) == len(g)
        again = simulate(g, prof, pr.costs, res.placement)
        assert again.makespan_s == res.simulation.makespan_s  # the result is the placement's own simulation
    assert place(pr, "kl", seed=1).placement == place(pr, "kl", seed=1).placement  # seeded


def test_unknown_policies_and_options_are_refused():
    pr = two_chains()
    with pytest.raises(PolicyError, match="unknown placement policy 'nope'"):
        place(pr, "nope")
    with pytest.raises(PolicyError, match="takes no options, got train_s"):
        place(pr, "etf", train_s=3)
    assert set(HEURISTICS) <= set(placers())
