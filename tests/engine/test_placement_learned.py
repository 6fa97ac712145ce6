"""The learned placers (engine/placement/learned): REINFORCE on toy graphs with an obvious optimum, on the real simulator.

The toy: two independent chains of equally heavy nodes (1 ms each), listed interleaved, on two
identical devices joined by a slow link (a 1 MB tensor takes 2 ms). One chain per device halves
the single-device time; a chain cut over both devices pays a transfer per cut.
"""

import math
import threading

import pytest

from engine.placement.costs import roofline_costs
from engine.placement.devices import Device, DeviceProfile, Link
from engine.placement.graph import OpGraph, OpNode, random_graph
from engine.placement.learned.common import INVALID_COST, Clock, Evaluator, colocation_groups
from engine.placement.policies import PLACERS, Problem, place
from engine.placement.simulator import simulate

CHAIN = 4
NODE_FLOPS = 1e9  # 1 ms on a 1 TFLOP/s device


def two_chains(memory_bytes: int = 1 << 34, weight_bytes: int = 0) -> Problem:
    nodes, edges = [], []
    for k in range(2 * CHAIN):
        chain, pos = "ab"[k % 2], k // 2
        nodes.append(OpNode(f"{chain}{pos}", "generic", NODE_FLOPS, 1e3, 1 << 20, weight_bytes, colocate=chain))
        if pos:
            edges.append((k - 2, k))
    g = OpGraph("two_chains", tuple(nodes), tuple(edges))
    devs = tuple(Device(f"d{i}", "gpu", 1e12, 1e12, memory_bytes) for i in range(2))
    prof = DeviceProfile("toy", True, "two identical devices, a slow link", devs, (Link("d0", "d1", 1e-3, 1e9),))
    return Problem(g, prof, roofline_costs(g, prof))


def optimum_s(problem: Problem) -> float:
    split = tuple(k % 2 for k in range(2 * CHAIN))  # chain a on d0, chain b on d1
    return simulate(problem.graph, problem.profile, problem.costs, split).makespan_s


def one_chain_per_device(placement) -> bool:
    a, b = placement[0::2], placement[1::2]
    return len(set(a)) == 1 and len(set(b)) == 1 and a[0] != b[0]


@pytest.fixture(scope="module")
def toy() -> Problem:
    return two_chains()


def test_the_toy_has_the_obvious_optimum(toy):
    # The premise of the tests below, checked on the simulator: splitting the chains halves the time,
    # and cutting a chain over the slow link loses most of that.
    single = simulate(toy.graph, toy.profile, toy.costs, (0,) * 8).makespan_s
    cut = simulate(toy.graph, toy.profile, toy.costs, (0, 1, 1, 1, 0, 0, 0, 1)).makespan_s
    assert optimum_s(toy) == pytest.approx(single / 2, rel=0.01)
    assert cut > 1.5 * optimum_s(toy)


def test_reinforce_reaches_the_optimum_and_its_curve_improves(toy):
    from engine.placement.learned.rl import train_rl

    run = train_rl(toy, seed=0, steps=80, samples=16, warm_start=False)  # the paper's cold start: no heuristic to copy
    assert run.source == "policy"
    assert one_chain_per_device(run.result.placement)
    assert run.result.simulation.makespan_s == pytest.approx(optimum_s(toy), rel=1e-6)
    curve = run.result.curve
    assert len(curve) == 80
    # The policy itself moves: its late samples are much faster on average than its first ones.
    assert sum(curve[-10:]) < 0.7 * sum(curve[:10])
    assert min(curve[-10:]) < 1.1 * optimum_s(toy)


def test_the_same_seed_gives_the_same_training(toy):
    from engine.placement.learned.rl import train_rl

    a = train_rl(toy, seed=7, steps=12, warm_start=False)
    b = train_rl(toy, seed=7, steps=12, warm_start=False)
    c = train_rl(toy, seed=8, steps=12, warm_start=False)
    assert a.result.curve == b.result.curve and a.result.placement == b.result.placement
    assert a.result.curve != c.result.curve


def test_invalid_placements_cost_more_than_the_valid_ones_of_their_batch_and_are_never_the_answer():
    from engine.placement.learned.rl import train_rl

    # 1 MiB of weights per node and 8 MiB per device: one device peaks at 8 MiB of weights plus live
    # tensors (over), one chain per device at 4 + 2 (under).
    mib = 1 << 20
    tight = two_chains(memory_bytes=8 * mib, weight_bytes=mib)
    ev = Evaluator(tight)
    assert not ev.simulate((0,) * 8).valid
    all_on_one, seven_on_one = (0,) * 8, (0,) * 7 + (1,)
    slow_valid, split = (0, 1, 1, 0, 0, 1, 1, 0), tuple(k % 2 for k in range(8))
    assert ev.simulate(slow_valid).valid and not ev.simulate(seven_on_one).valid
    costs = ev.costs([all_on_one, seven_on_one, slow_valid, split])
    assert costs[3] < costs[2] < costs[1] < costs[0]  # valid by speed, then the less-over invalid one
    run = train_rl(tight, seed=0, steps=40, warm_start=False)
    assert run.result.simulation.valid
    assert run.result.simulation.makespan_s == pytest.approx(optimum_s(tight), rel=1e-6)
    # The penalty shows in the curve (an invalid sample at its penalty's makespan) until the policy avoids it.
    assert max(run.result.curve[:5]) > min(run.result.curve[-5:])


def slow_link_pair() -> Problem:
    """Two 1 ms nodes, 6 MiB of weights each, on two 8 MiB devices: no single device fits, and the
    only valid placement sends the 1 MiB tensor over a slow link (10 ms): 6x the single-device time."""
    mib = 1 << 20
    nodes = tuple(OpNode(name, "generic", NODE_FLOPS, 1e3, mib, 6 * mib) for name in ("a", "b"))
    g = OpGraph("slow_link_pair", nodes, ((0, 1),))
    devs = tuple(Device(f"d{i}", "gpu", 1e12, 1e12, 8 * mib) for i in range(2))
    prof = DeviceProfile("toy", True, "two small devices, a slow link", devs, (Link("d0", "d1", 1e-4, 1e8),))
    return Problem(g, prof, roofline_costs(g, prof))


def test_where_no_single_device_fits_a_slow_valid_placement_still_costs_less_than_an_invalid_one():
    pr = slow_link_pair()
    ev = Evaluator(pr)
    single, split = ev.simulate((0, 0)), ev.simulate((0, 1))
    assert not single.valid and split.valid and split.makespan_s > 4 * single.makespan_s  # beyond the old fixed penalty
    assert INVALID_COST < math.sqrt(split.makespan_s / ev.reference)
    for batch in ([(0, 0), (0, 1)], [(0, 1), (1, 1)]):
        costs = ev.costs(batch)
        assert costs[batch.index((0, 1))] < min(c for p, c in zip(batch, costs) if p != (0, 1))
    assert ev.cost((1, 1)) > ev.cost((0, 1))  # alone too: against the last batch's worst valid placement


def test_a_policy_that_sampled_no_valid_placement_answers_the_heuristics_valid_one():
    pr = slow_link_pair()
    ev = Evaluator(pr)  # it has simulated the two single-device placements only: both over memory
    assert ev.best is None
    result = ev.result("rl", 0.0, ())
    assert result.simulation.valid and set(result.placement) == {0, 1}
    assert ev.best_source.startswith("warm start: ")


def test_hierarchical_planner_learns_the_grouping_and_the_placement(toy):
    from engine.placement.learned.hrl import train_hrl

    run = train_hrl(toy, seed=0, steps=80, samples=16, n_groups=4, warm_start=False)
    assert run.result.simulation.makespan_s == pytest.approx(optimum_s(toy), rel=1e-6)
    assert sum(run.result.curve[-10:]) < 0.7 * sum(run.result.curve[:10])


def test_colocation_groups_merge_keys_then_chains_to_the_limit():
    g = random_graph(60, 3)
    groups = colocation_groups(g, 8)
    assert max(groups) + 1 <= 8
    assert groups[0] == 0 and all(groups[i] <= max(groups[:i], default=-1) + 1 for i in range(len(groups)))  # numbered in order
    assert colocation_groups(g, 100) == list(range(60))  # small enough: every node its own group


def test_warm_started_rl_is_never_worse_than_the_best_heuristic():
    from engine.placement.devices import load_profile
    from engine.placement.learned.rl import train_rl

    g = random_graph(40, 5)
    prof = load_profile("memory_tight")
    pr = Problem(g, prof, roofline_costs(g, prof))
    run = train_rl(pr, seed=0, steps=15)
    heuristics = [place(pr, name).simulation for name in ("etf", "sct", "topo", "tfgreedy", "single")]
    best = min(s.makespan_s for s in heuristics if s.valid)
    assert run.result.simulation.valid
    assert run.result.simulation.makespan_s <= best * (1 + 1e-9)
    assert run.warm_best_s == pytest.approx(best, rel=1e-9)


def test_the_registry_finds_the_learned_placers(toy):
    result = place(toy, "rl", seed=0, steps=30, warm_start=False)
    assert {"rl", "hrl", "gnn"} <= set(PLACERS)
    assert result.policy == "rl" and len(result.curve) == 30
    assert result.train_s > 0
    assert math.isclose(result.simulation.makespan_s, optimum_s(toy), rel_tol=1e-6)
    from engine.placement.policies import PolicyError

    with pytest.raises(PolicyError, match="policy 'hrl': unknown option trian_s"):
        place(toy, "hrl", trian_s=1.0)


def test_a_briefly_trained_graph_network_places_an_unseen_toy_sensibly_and_fine_tunes(toy):
    from engine.placement.learned.gnn import run_gnn, train_gnn, training_problems

    # Trained on small random graphs only (never the toy), a few dozen steps.
    model, curve = train_gnn(training_problems(6, 1, sizes=(8, 20)), seed=0, steps=20, rounds=2)
    assert len(curve) == 20
    single = simulate(toy.graph, toy.profile, toy.costs, (0,) * 8).makespan_s
    before = {k: v.clone() for k, v in model.state_dict().items()}
    zero_shot = run_gnn(toy, seed=0, model=model, init="single", rounds=2)
    assert zero_shot.init_s == single
    assert zero_shot.source == "policy"  # it moved work off the start, and that was faster
    assert zero_shot.result.simulation.makespan_s < 0.8 * single
    tuned = run_gnn(toy, seed=0, model=model, init="single", rounds=2, fine_tune_steps=40)
    assert len(tuned.result.curve) == 40
    assert tuned.result.simulation.makespan_s <= zero_shot.result.simulation.makespan_s
    # Fine-tuning trains a copy: the network given stays as it was.
    assert all(v.equal(before[k]) for k, v in model.state_dict().items())


def test_shipped_graph_network_weights_load_and_place_a_random_graph():
    import torch

    from engine.placement.learned.common import FEATURES_VERSION
    from engine.placement.learned.gnn import WEIGHTS, load_policy, run_gnn

    blob = torch.load(WEIGHTS, weights_only=True)
    assert blob["features_version"] == FEATURES_VERSION
    model = load_policy()
    g = random_graph(30, 12345)
    from engine.placement.devices import load_profile

    prof = load_profile("2hosts_2gpu")
    pr = Problem(g, prof, roofline_costs(g, prof))
    run = run_gnn(pr, seed=0, model=model)
    assert run.result.simulation.valid
    assert run.result.simulation.makespan_s <= run.init_s  # never worse than where it started (the best heuristic)
    assert place(pr, "gnn").placement == run.result.placement  # the registry's gnn is the shipped network, deterministic


def test_weights_of_another_feature_version_are_refused(tmp_path):
    import torch

    from engine.placement.learned.gnn import GNNPlacer, load_policy

    path = tmp_path / "old.pt"
    torch.save({"features_version": -1, "hidden": 8, "layers": 1, "state": GNNPlacer(8, 1).state_dict()}, path)
    with pytest.raises(ValueError, match="features version -1"):
        load_policy(path)


@pytest.mark.parametrize("policy", ["rl", "hrl", "gnn"])
def test_a_learned_placer_reports_its_curve_while_it_trains_and_stops_when_cancelled(toy, policy):
    """What the app's Placement tab relies on: `progress` gets the curve so far during
    training, and setting `cancel` ends the training early with a valid placement."""
    import threading
    import time

    seen: list[int] = []
    cancel = threading.Event()

    def progress(curve: tuple[float, ...]) -> None:
        seen.append(len(curve))
        if len(seen) == 2:
            cancel.set()  # the user pressed Cancel while it trained

    budget = {"rl": "train_s", "hrl": "train_s", "gnn": "fine_tune_s"}[policy]
    t0 = time.perf_counter()
    result = place(toy, policy, 0, **{budget: 60.0}, progress=progress, cancel=cancel)
    assert time.perf_counter() - t0 < 30.0, "cancel did not stop a 60 s training"
    assert len(seen) >= 2 and seen == sorted(seen) and seen[0] > 0
    assert result.simulation.valid and len(result.placement) == len(toy.graph.nodes)
    assert len(result.curve) >= seen[-1]


@pytest.fixture(scope="module")
def big() -> tuple[Problem, float]:
    """A 315-node random graph (the lstm_lm sample's size, without TensorFlow) on memory_tight, and its best heuristic's makespan."""
    from engine.placement.devices import load_profile
    from engine.placement.policies import HEURISTICS

    g = random_graph(315, 0)
    prof = load_profile("memory_tight")
    pr = Problem(g, prof, roofline_costs(g, prof))
    sims = [place(pr, name).simulation for name in HEURISTICS]  # also loads what the heuristics import (scipy's LP)
    return pr, min(s.makespan_s for s in sims if s.valid)


@pytest.mark.parametrize("policy", ["rl", "hrl", "gnn"])
def test_a_learned_placer_keeps_a_short_time_budget_on_a_big_graph(big, policy):
    """--train-s is the user's budget: warm start, imitation, sampling and fine-tuning all fit in it
    (loosely bounded: a loaded CI machine), and the answer is still no worse than the best heuristic."""
    import time

    from engine.placement.policies import budget_options

    pr, best_heuristic_s = big
    budget = 1.0
    t0 = time.perf_counter()
    result = place(pr, policy, 0, **budget_options(policy, budget))
    wall = time.perf_counter() - t0
    assert wall <= 1.5 * budget + 2.0, f"{policy} took {wall:.1f} s on a {budget} s budget"
    assert result.simulation.valid
    assert result.simulation.makespan_s <= best_heuristic_s * (1 + 1e-9)


def test_the_clock_ends_at_its_share_of_the_budget_or_never_or_when_cancelled():
    c = Clock(10.0)
    assert c.end(0.5) == pytest.approx(c.started + 5.0) and c.end() == pytest.approx(c.started + 10.0) and not c.over()
    assert Clock(None).end() == math.inf and not Clock(None).over()
    neg = Clock(-1.0)  # a negative budget: spent at the start, not before it
    assert neg.over() and neg.end() == neg.started
    ev = threading.Event()
    c, go = Clock(None, ev), Clock(None, ev).loop(steps=3)
    assert [go(k) for k in range(4)] == [True, True, True, False]
    ev.set()
    assert c.over() and not c.loop()(0)
