"""The offline-trained value function (engine/search/value_offline.py) and zero-measurement
greedy (engine/search/greedy.py): training reduces V's loss on a fixed set of states, greedy
with V alone measures nothing (its measure function fails the test if called), the same seed
gives the same schedule, and V's files load back only when whole."""

from __future__ import annotations

import json
import random

import pytest
import torch

from engine import zoo
from engine.costmodel import AnalyticModel
from engine.costmodel.files import ModelFileError
from engine.costmodel.gnn import TorchCostModel
from engine.randpipe import random_pipeline
from engine.schedule import Schedule, validate
from engine.search import Budget, run_search
from engine.search.greedy import zero_measure_search
from engine.search.space import order, seed_schedule
from engine.search.value_offline import (
    KINDS,
    OfflineValue,
    TrainConfig,
    TrainingPipeline,
    collect,
    fit,
    load_value,
    loss,
    make_net,
    shipped_value,
    value_greedy,
)

# A tiny configuration: two small random pipelines, the analytic model as the cost model
# (deterministic, no trained files), few epochs.
CFG = TrainConfig(trajectories=2, rollouts=1, epochs=80, hidden=16, layers=1, rank_weight=0.0)


@pytest.fixture(scope="module")
def states():
    torch.set_num_threads(1)
    model, rng = AnalyticModel(), random.Random(0)
    out = []
    for seed in (3, 4):
        out += collect(TrainingPipeline(random_pipeline(seed, max_stages=4)), model, rng, CFG)
    return model, out


def never_measure(p, s, **_):
    pytest.fail(f"zero-measurement greedy measured a schedule of {p.name}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_training_reduces_the_loss_on_a_fixed_set(states, kind):
    model, samples = states
    assert len(samples) >= 8 and all(s.time_ms > 0 for s in samples)
    cfg = TrainConfig(**{**CFG.__dict__, "kind": kind})
    untrained = make_net(cfg)
    untrained.norm.fit(samples)
    before = loss(OfflineValue(TorchCostModel(untrained, "untrained", {}), model), samples)
    after = loss(fit(cfg, samples, model), samples)
    assert after < 0.7 * before, (before, after)


def test_zero_measurement_greedy_measures_nothing_and_is_deterministic(tmp_path):
    p = zoo.get("blur", "small")
    a = zero_measure_search(p, 5, measure_fn=never_measure)
    b = zero_measure_search(p, 5, measure_fn=never_measure)
    validate(p, a.schedule)
    assert set(a.schedule.stages) == set(order(p))  # every stage decided by V, from an empty schedule
    assert a.schedule.content_hash() == b.schedule.content_hash() and a.value_ms > 0
    # Through the strategy interface: a budget of 0 measurements measures nothing either.
    res = run_search(p, "greedy", Budget(trials=0, wall_s=60), seed=5, measure_fn=never_measure)
    assert res.trials == [] and res.best is None


def test_value_files_round_trip_and_a_damaged_one_is_refused(tmp_path):
    v = shipped_value()
    p = zoo.get("matmul", "small")
    rng = random.Random(0)
    s = value_greedy(p, v, rng, k=4)
    v.save(tmp_path)
    back = load_value(tmp_path)
    assert back.values(p, [s, Schedule()]) == pytest.approx(v.values(p, [s, Schedule()]), rel=1e-6)
    meta = json.loads((tmp_path / "value.json").read_text())
    meta["value_version"] = -1
    (tmp_path / "value.json").write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match="state encoding"):
        load_value(tmp_path)
    (tmp_path / "value.json").write_text(json.dumps({**meta, "value_version": 1}))
    (tmp_path / "value.pt").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="value.pt"):
        load_value(tmp_path)


def test_training_states_include_the_heuristic_trajectory_and_template_siblings():
    # Offline only: the training pipeline's heuristic schedule is a trajectory and a rollout
    # guide, so the best target is at most the model's time of that schedule, and the template
    # alternatives along it are states of their own (greedy with V never sees the heuristic).
    p, model = random_pipeline(7, max_stages=4), AnalyticModel()
    plain = collect(TrainingPipeline(p), model, random.Random(0), CFG)
    guided = collect(TrainingPipeline(p), model, random.Random(0), TrainConfig(**{**CFG.__dict__, "heuristic_guide": True}))
    assert len(guided) >= len(plain) + len(order(p))  # the heuristic's prefixes, and its siblings
    h_ms = model.predict_many(p, [seed_schedule(p)])[0].total_ms
    assert min(s.time_ms for s in guided) <= h_ms * (1 + 1e-6)


def test_a_step_keeps_the_beam_and_the_best_of_further_structured_decisions():
    """keep_states: the `beam` lowest-scored distinct states, then the best-scored state of
    each further distinct template decision (never a random option's), at most `diverse`."""
    from engine.schedule import Directive, Kind, StageSchedule
    from engine.search.space import with_decision
    from engine.search.value_offline import keep_states

    p = zoo.get("matmul", "small")
    st = order(p)[0]
    root = Directive(Kind.COMPUTE_ROOT)
    decs = [StageSchedule((root,)), StageSchedule((root, Directive(Kind.PARALLEL, loop="i")))]
    decs += [StageSchedule((root, Directive(Kind.VECTORIZE, loop="j", factor=f))) for f in (2, 4, 8)]
    kids = [with_decision(Schedule(name="s"), st, d) for d in decs]
    vals = [0.0, 1.0, 3.0, 2.0, 4.0]
    assert keep_states(kids, vals, set(), st, 1) == [kids[0]]
    assert keep_states(kids, vals, {1, 2, 3}, st, 1, diverse=2) == [kids[0], kids[1], kids[3]]  # best first: 1.0, 2.0
    assert keep_states(kids, vals, {2, 4}, st, 2, diverse=5) == [kids[0], kids[1], kids[2], kids[4]]  # only templates; 3 is random
    again = [*kids, kids[0]]
    assert keep_states(again, [*vals, -1.0], {5}, st, 1, diverse=3) == [kids[0]]  # the same state twice: kept once
