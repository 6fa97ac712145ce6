"""The search's batched predictions equal one-at-a-time ones: SearchContext.predict (chunks of
`predict_many`, dedup, +inf for a schedule the model cannot predict) and OnlineCorrected's
`predict_many` (the base model batched, the online correction per schedule)."""

import math
import random

import pytest

from engine import zoo
from engine.costmodel import SHIPPED, AnalyticModel, load_model
from engine.ir import Pipeline
from engine.measure import Measurement
from engine.sampler import mutate, sample_schedule
from engine.schedule import Schedule
from engine.search import Budget
from engine.search.base import PREDICT_CHUNK, SearchContext
from engine.search.online import OnlineCorrected


def _never_measure(p: Pipeline, s: Schedule) -> Measurement:
    raise AssertionError("these tests only predict")


def _schedules(p: Pipeline, n: int, seed: int) -> list[Schedule]:
    """Fresh samples and one-stage mutations of them (what search asks about), with repeats."""
    rng = random.Random(seed)
    out: list[Schedule] = []
    while len(out) < n:
        s = sample_schedule(p, rng)
        out += [s, mutate(p, s, rng)]
    return out[:n] + out[:3]  # repeats: predicted once, reported at every position


@pytest.fixture(scope="module", params=["analytic", "tvm"])
def base_model(request):
    return AnalyticModel() if request.param == "analytic" else load_model(SHIPPED, "tvm")


def test_search_context_predict_equals_one_at_a_time(base_model) -> None:
    p = zoo.get("harris", "small")
    scheds = _schedules(p, PREDICT_CHUNK + 6, seed=1)  # more than one chunk
    ctx = SearchContext(p, OnlineCorrected(base_model), _never_measure, Budget(trials=1, wall_s=600), seed=0)
    got = ctx.predict(scheds)
    want = [OnlineCorrected(base_model).predict(p, s).total_ms for s in scheds]
    assert got == want
    assert len(ctx.seen) == len({s.content_hash() for s in scheds}) < len(scheds)
    assert ctx.best_predicted == min(want)
    assert ctx.predict(scheds[:5]) == want[:5]  # cached


def test_a_schedule_the_model_cannot_predict_gets_inf_alone() -> None:
    p = zoo.get("harris", "small")
    good = _schedules(p, 4, seed=2)[:4]
    foreign = sample_schedule(zoo.get("unsharp", "small"), random.Random(0))  # stages harris does not have
    ctx = SearchContext(p, OnlineCorrected(AnalyticModel()), _never_measure, Budget(trials=1, wall_s=600), seed=0)
    got = ctx.predict([good[0], foreign, *good[1:]])
    assert math.isinf(got[1])
    assert [got[0], *got[2:]] == [AnalyticModel().predict(p, s).total_ms for s in good]


def test_online_corrected_predict_many_equals_predict(base_model) -> None:
    p = zoo.get("harris", "small")
    scheds = _schedules(p, 12, seed=3)
    batched, single = OnlineCorrected(base_model), OnlineCorrected(base_model)
    for m in (batched, single):  # measurements: the correction is not zero and differs per schedule
        for s, ms in zip(scheds[:3], (1.0, 5.0, 2.0)):
            m.observe(p, s, ms)
    got = batched.predict_many(p, scheds)
    want = [single.predict(p, s) for s in scheds]
    assert [g.total_ms for g in got] == [w.total_ms for w in want]
    assert [g.stages for g in got] == [w.stages for w in want]
    assert len({round(g.total_ms / base_model.predict(p, s).total_ms, 9) for g, s in zip(got, scheds)}) > 1
    with pytest.raises(ValueError, match="2 loop nests for 3 schedules"):
        batched.predict_many(p, scheds[:3], [None, None])
