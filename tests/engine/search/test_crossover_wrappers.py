"""Crossover keeps the parents' wrappers that still apply to the child (a search seeded with
the packed heuristic keeps exploring packed schedules)."""

import random

from engine.heuristic import heuristic_schedule
from engine.sampler import sample_schedule
from engine.schedule import validate
from engine.search.evolution import crossover
from tests.wrapper_pipelines import two_dense_layers


def test_a_child_keeps_the_wrappers_of_the_stages_it_took_from_a_packed_parent():
    p = two_dense_layers()
    packed = heuristic_schedule(p)
    assert set(packed.wrappers) == {"w0_in_fc0", "w1_in_fc1"}
    assert crossover(p, packed, packed, random.Random(0)).wrappers == packed.wrappers
    kept = 0
    for seed in range(16):
        rng = random.Random(seed)
        child = crossover(p, packed, sample_schedule(p, rng), rng)
        for k, w in packed.wrappers.items():
            at = w.compute().consumer
            untouched = child.of(w.consumer) == packed.of(w.consumer) and child.of(at) == packed.of(at)
            assert not untouched or child.wrappers.get(k) == w, (seed, k)
            kept += k in child.wrappers
        validate(p, child)
    assert kept > 0


def test_guided_completions_and_searches_keep_the_guides_copies():
    """A completion, and every schedule greedy and beam searches guided by the packed heuristic
    measure, keep its copies where the stages they apply to follow the guide (no option makes
    copies of its own)."""
    from engine.costmodel import AnalyticModel
    from engine.measure import Runner
    from engine.search import Budget, run_search, space

    p = two_dense_layers()
    packed = heuristic_schedule(p)
    done = space.complete(p, space.Schedule(name="empty"), random.Random(0), packed)
    assert done.wrappers == packed.wrappers and done.stages == packed.stages
    with Runner() as runner:
        for strategy in ("greedy", "beam"):
            res = run_search(p, strategy, Budget(trials=4, wall_s=60), seed=0, model=AnalyticModel(), runner=runner, confirm=False)
            assert res.verified and res.trials
            for t in res.trials:
                for k, w in packed.wrappers.items():
                    at = w.compute().consumer
                    if t.schedule.of(w.consumer) == packed.of(w.consumer) and t.schedule.of(at) == packed.of(at):
                        assert t.schedule.wrappers.get(k) == w, (strategy, k)
