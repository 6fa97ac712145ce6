"""The contract every search strategy keeps, checked for each one in engine.search.STRATEGIES:
legal proposals, the seed measured first, never worse than the seed, the same seed giving
the same measurements, prompt cancellation, a crashing candidate skipped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from engine import api, loopnest, zoo
from engine.costmodel import AnalyticModel
from engine.ir import Pipeline
from engine.measure import Measurement, Runner
from engine.schedule import Schedule, validate
from engine.search import JOB_OPTIONS, STRATEGIES, Budget, run_search
from engine.search.space import seed_schedule

ALL = sorted(STRATEGIES)


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


class ValidatingModel(AnalyticModel):
    """The analytic model, validating every schedule a strategy asks about (an exception here
    would surface as the search's failure, not be swallowed) and counting them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def predict_many(self, p, schedules, nests=None):  # predict is its batch of one (BatchedModel)
        for s in schedules:
            validate(p, s)
            loopnest.build(p, s)
            self.seen.add(s.content_hash())
        return super().predict_many(p, schedules, nests)


def recording(measure_fn: Callable[[Pipeline, Schedule], Measurement]) -> tuple[Callable[..., Measurement], list[str]]:
    log: list[str] = []

    def fn(p: Pipeline, s: Schedule) -> Measurement:
        validate(p, s)
        log.append(s.content_hash())
        return measure_fn(p, s)

    return fn, log


def analytic_measure(p: Pipeline, s: Schedule) -> Measurement:
    # A deterministic stand-in for hardware, for the determinism test only: real timings are
    # noisy, and a search's later choices rightly follow what it measured.
    return Measurement(p.name, p.content_hash(), s.content_hash(), True, True, median_ms=AnalyticModel().predict(p, s).total_ms)


def test_every_registered_strategy_is_covered() -> None:
    assert set(ALL) >= {"greedy", "beam", "random", "lamcts", "evolution", "plalam", "cmaes"}


@pytest.mark.parametrize("strategy", ALL)
def test_proposals_are_legal_the_seed_comes_first_and_the_result_is_no_worse(runner, strategy):
    p = zoo.get("unsharp", "small")
    model = ValidatingModel()
    real = lambda p_, s: api.measure(p_, s, runner, None, **JOB_OPTIONS)
    fn, log = recording(real)
    res = run_search(p, strategy, Budget(trials=4, wall_s=90), seed=1, model=model, measure_fn=fn, confirm=False)
    assert len(res.trials) == 4 and len(model.seen) >= 4
    assert log[0] == seed_schedule(p).content_hash() and res.trials[0].verified
    assert res.verified and res.best is not None
    validate(p, res.best)
    assert res.best_ms is not None and res.best_ms <= res.trials[0].measured_ms  # never worse than the seed


@pytest.mark.parametrize("strategy", ALL)
def test_the_same_seed_gives_the_same_measured_sequence(strategy):
    p = zoo.get("conv_relu", "small")
    runs = []
    for _ in range(2):
        fn, log = recording(analytic_measure)
        run_search(p, strategy, Budget(trials=6, wall_s=120), seed=7, model=AnalyticModel(), measure_fn=fn)
        runs.append(log)
    assert runs[0] == runs[1] and len(runs[0]) == 6


@pytest.mark.parametrize("strategy", ALL)
def test_cancel_stops_promptly(runner, strategy):
    p = zoo.get("conv_relu", "small")
    cancel = threading.Event()
    stamp: list[float] = []

    def progress(pr):
        if pr.trial is not None and pr.measured >= 2 and not cancel.is_set():
            cancel.set()
            stamp.append(time.monotonic())

    res = run_search(p, strategy, Budget(trials=50, wall_s=120), model=AnalyticModel(), runner=runner, progress=progress, cancel=cancel)
    assert res.cancelled and len(res.trials) == 2
    assert time.monotonic() - stamp[0] < 3.0
    assert res.verified  # what was measured before the cancel still counts


@pytest.mark.parametrize("strategy", ALL)
def test_a_crashing_candidate_is_skipped(runner, strategy):
    p = zoo.get("blur", "small")
    calls: list[str] = []

    def crash_second(p_, s):
        calls.append(s.content_hash())
        fault = "crash" if len(calls) == 2 else None  # a real worker crash (SIGSEGV) on the second candidate
        return api.measure(p_, s, runner, None, **JOB_OPTIONS, fault=fault)

    res = run_search(p, strategy, Budget(trials=4, wall_s=60), seed=3, model=AnalyticModel(), measure_fn=crash_second)
    failed = [t for t in res.trials if not t.verified]
    assert len(failed) == 1 and failed[0].index == 1 and "SIGSEGV" in (failed[0].error or "")
    assert len(res.trials) == 4 and res.verified
    assert res.best_ms == min(t.measured_ms for t in res.trials if t.verified and t.measured_ms is not None)


def test_confirmation_timeouts_keep_the_verified_best_and_wrong_results_drop_it() -> None:
    # A busy machine makes the confirming re-measurements time out: the search still reports
    # its verified best (not an infinite median). A re-measurement that is wrong unconfirms.
    p = zoo.get("blur", "small")

    def run(fail_kind: str):
        first: dict[str, float] = {}

        def fn(p_: Pipeline, s: Schedule, force: bool = False, timeout_s: float | None = None) -> Measurement:
            m = analytic_measure(p_, s)
            if not force:
                first[s.content_hash()] = m.median_ms or 0.0
                return m
            return Measurement(p_.name, p_.content_hash(), s.content_hash(), False, error="busy", error_kind=fail_kind)

        return run_search(p, "random", Budget(trials=6, wall_s=60), seed=3, model=AnalyticModel(), measure_fn=fn), first

    res, first = run("timeout")
    assert res.best_ms is not None and res.best_ms == min(first.values())
    res, first = run("verification")
    confirmed = [t for t in res.trials if t.confirmed_ms is not None]
    assert confirmed and all(t.confirmed_ms == float("inf") for t in confirmed)
