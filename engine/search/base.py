"""The search framework: one context every strategy runs in, and the records it reports.

A strategy is a function `run(ctx: SearchContext) -> None` that proposes schedules, asks
`ctx.predict` for the cost model's estimates, and sends the most promising to
`ctx.measure`, until `ctx.done()` says the budget is spent. The context owns everything a
strategy must not get wrong on its own: the budgets (hardware measurements and wall time),
the seed (`ctx.rng` is the only randomness a strategy may use, so a run is a function of the
seed and of the measured times), cancellation and pause, progress reports, the bookkeeping
of what was seen and measured (a schedule is never measured twice), online updates of the
model from measurements, and the best verified result. A candidate whose job crashes, hangs
or fails verification is recorded with its error and skipped: the search goes on.
"""

from __future__ import annotations

import inspect
import math
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..costmodel import CostModel
from ..ir import Pipeline
from ..measure import Measurement
from ..schedule import Schedule

MeasureFn = Callable[..., Measurement]  # (pipeline, schedule[, timeout_s=...]) -> Measurement
MAX_TIMEOUT_S = 30.0
CONFIRM_WITHIN = 1.5  # confirm() re-measures candidates within this factor of the best
# ...and the search's start (its first trial: the heuristic's or V's seed) within this factor:
# a result is meant never to end worse than its measured start, and one short measurement of
# the start on a loaded machine can be 2x off (softmax, full, Zen 5 at load 3: V's seed 1.95
# ms once, 1.05-1.45 for its near-equals), which would drop it from the confirmation.
CONFIRM_START_WITHIN = 3.0
PREDICT_CHUNK = 64  # schedules per predict_many call: cancel is checked between chunks


class Cancelled(Exception):
    """Raised inside a strategy when the user cancelled or the wall-time budget ran out."""


@dataclass
class Budget:
    """What a search may spend: hardware measurements and wall-clock seconds (model time
    and measurements together). The search stops at whichever runs out first."""

    trials: int = 32
    wall_s: float = 60.0


@dataclass
class Progress:
    """One progress report (sent after every prediction batch and every measurement)."""

    strategy: str
    seen: int  # distinct schedules the model has predicted
    measured: int  # hardware measurements made (failed ones included)
    best_predicted_ms: float | None
    best_measured_ms: float | None  # verified only
    elapsed_s: float
    model_s: float  # time spent proposing and predicting (measurements excluded)
    trial: Trial | None = None  # the measurement this report is about, if any


@dataclass
class Trial:
    """One measured candidate: its schedule, the prediction that chose it and the result."""

    index: int
    schedule: Schedule
    predicted_ms: float
    measured_ms: float | None
    verified: bool
    error: str | None = None
    elapsed_s: float = 0.0  # since the search started
    confirmed_ms: float | None = None  # median of this and the confirming re-measurements (top candidates only)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "schedule_hash": self.schedule.content_hash(), "predicted_ms": self.predicted_ms,
            "measured_ms": self.measured_ms, "verified": self.verified, "error": self.error, "elapsed_s": round(self.elapsed_s, 3),
            "confirmed_ms": self.confirmed_ms,
        }  # fmt: skip


@dataclass
class SearchResult:
    strategy: str
    pipeline: str
    seed: int
    best: Schedule | None
    best_ms: float | None
    verified: bool
    search_s: float
    model_s: float
    measure_s: float
    seen: int
    trials: list[Trial] = field(default_factory=list)
    cancelled: bool = False
    model: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "pipeline": self.pipeline, "seed": self.seed, "model": self.model,
            "best_ms": self.best_ms, "verified": self.verified, "search_s": round(self.search_s, 3),
            "model_s": round(self.model_s, 3), "measure_s": round(self.measure_s, 3), "seen": self.seen,
            "trials": len(self.trials), "failed_trials": sum(1 for t in self.trials if not t.verified),
            "cancelled": self.cancelled, "schedule": self.best.to_json() if self.best is not None else None,
            "history": [t.to_json() for t in self.trials],
        }  # fmt: skip


class SearchContext:
    """Budgets, randomness, prediction and measurement for one search (see the module doc)."""

    def __init__(
        self,
        p: Pipeline,
        model: CostModel,
        measure_fn: MeasureFn,
        budget: Budget,
        seed: int = 0,
        *,
        strategy: str = "",
        progress: Callable[[Progress], None] | None = None,
        cancel: threading.Event | None = None,
        pause: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.p, self.model, self.budget, self.seed, self.strategy = p, model, budget, seed, strategy
        self.rng = random.Random(seed)
        self._measure_fn, self._progress = measure_fn, progress
        params = inspect.signature(measure_fn).parameters
        self._timeout_kw, self._force_kw = "timeout_s" in params, "force" in params
        self._cancel, self._pause = cancel or threading.Event(), pause
        self._clock = clock
        self.t0 = clock()
        self.model_s = self.measure_s = 0.0
        self.predicted: dict[str, float] = {}  # schedule hash -> predicted ms (current model)
        self.seen: set[str] = set()  # every schedule hash ever predicted
        self.trials: list[Trial] = []
        self.measured: dict[str, Trial] = {}  # schedule hash -> its trial
        self.best: Trial | None = None
        self.best_predicted: float | None = None
        self.cancelled = False

    @property
    def best_measured_ms(self) -> float | None:
        """The best verified trial's measured ms; None before there is one."""
        return self.best.measured_ms if self.best is not None else None

    # --- budget ----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self._clock() - self.t0

    def trials_left(self) -> int:
        return max(0, self.budget.trials - len(self.trials))

    def time_left(self) -> float:
        return self.budget.wall_s - self.elapsed()

    def done(self) -> bool:
        """True when the search should stop: cancelled, out of measurements or of time."""
        return self._cancel.is_set() or self.trials_left() <= 0 or self.time_left() <= 0

    def check(self) -> None:
        """Wait while paused; raise Cancelled when cancelled or out of wall time. Strategies
        call it in their inner loops (predict and measure call it too)."""
        while self._pause is not None and self._pause.is_set() and not self._cancel.is_set():
            time.sleep(0.05)
        if self._cancel.is_set():
            self.cancelled = True
            raise Cancelled("cancelled")
        if self.time_left() <= 0:
            raise Cancelled("out of wall time")

    def timeout_s(self) -> float:
        """Seconds a candidate's job may take (compile, verify, time): a candidate far slower
        than the best so far is killed early instead of eating the wall budget."""
        base = MAX_TIMEOUT_S if self.best is None else min(MAX_TIMEOUT_S, 10.0 + 0.05 * float(self.best.measured_ms or 0.0))
        return max(1.0, min(base, self.time_left() + 5.0))

    # --- model -----------------------------------------------------------------------------
    def predict(self, scheds: Sequence[Schedule]) -> list[float]:
        """The model's predicted ms of each schedule (cached by schedule hash), the ones not
        predicted yet in batches of PREDICT_CHUNK (one `predict_many` each; cancel and pause
        are checked between them). A schedule the model cannot predict (should not happen
        for sampled ones) gets +inf: a batch that raises is redone one schedule at a time, so
        only the failing schedules get it."""
        self.check()
        t = time.perf_counter()
        todo: dict[str, Schedule] = {}
        hashes = [s.content_hash() for s in scheds]  # once each: a hash costs about what a cached prediction does
        for s, h in zip(scheds, hashes):
            self.seen.add(h)
            if h not in self.predicted:
                todo.setdefault(h, s)
        items = list(todo.items())
        try:
            for i in range(0, len(items), PREDICT_CHUNK):
                if i:
                    self.check()
                chunk = items[i : i + PREDICT_CHUNK]
                for (h, _), v in zip(chunk, self._predict_chunk([s for _, s in chunk]), strict=True):
                    self.predicted[h] = v if math.isfinite(v) and v > 0 else math.inf
                    if self.best_predicted is None or self.predicted[h] < self.best_predicted:
                        self.best_predicted = self.predicted[h]
        finally:
            self.model_s += time.perf_counter() - t
        self._report(None)
        return [self.predicted[h] for h in hashes]

    def _predict_chunk(self, scheds: list[Schedule]) -> list[float]:
        """Predicted ms of each schedule: one batch, or one by one when the batch raises."""
        try:  # no nests passed: models build them only on their own cache misses
            return [float(pr.total_ms) for pr in self.model.predict_many(self.p, scheds)]
        except Exception:  # noqa: BLE001  # an unbuildable candidate is just a bad one: find which
            out = []
            for s in scheds:
                try:
                    out.append(float(self.model.predict(self.p, s).total_ms))
                except Exception:  # noqa: BLE001
                    out.append(math.inf)
            return out

    def charge_model_time(self, seconds: float) -> None:
        """Count time a strategy spent on its own models (value function, partitions)."""
        self.model_s += seconds

    # --- hardware --------------------------------------------------------------------------
    def measure(self, scheds: Sequence[Schedule]) -> list[Trial]:
        """Measure the schedules not measured yet, in order, while the budget lasts; return
        the trials of all of them that have one (already measured ones included)."""
        out: list[Trial] = []
        for s in scheds:
            h = s.content_hash()
            if h in self.measured:
                out.append(self.measured[h])
                continue
            if self.done():
                break
            self.check()
            pred = self.predict([s])[0]
            t = time.perf_counter()
            m = self._measure_fn(self.p, s, **({"timeout_s": self.timeout_s()} if self._timeout_kw else {}))
            self.measure_s += time.perf_counter() - t
            ms = m.median_ms if m.ok and m.verified else None  # None: failed, not verified or not timed
            ok = ms is not None
            err = None if ok else (m.error or "not verified")
            trial = Trial(len(self.trials), s, pred, ms, ok, err, self.elapsed())
            self.trials.append(trial)
            self.measured[h] = trial
            best_ms = self.best_measured_ms
            if ms is not None and (best_ms is None or ms < best_ms):
                self.best = trial
            if ms is not None and hasattr(self.model, "observe"):
                t = time.perf_counter()
                self.model.observe(self.p, s, float(ms))
                self.model_s += time.perf_counter() - t
                self.predicted.clear()  # the model changed: predictions are stale
            self._report(trial)
            out.append(trial)
        return out

    def confirm(self, k: int = 3, repeats: int = 2) -> None:
        """Measure the `k` fastest verified candidates (those within CONFIRM_WITHIN of the
        best, and the first trial, the search's start, within CONFIRM_START_WITHIN) `repeats`
        more times and rank them by the median: a search's best is otherwise the minimum of
        single short measurements, which on a noisy machine picks lucky runs. Not counted
        against the trial budget (the compiled code is cached by the worker, so this is
        timing only)."""
        if not self._force_kw:
            return
        timed = [(t.measured_ms, t) for t in self.trials if t.verified and t.measured_ms is not None]
        top = sorted(timed, key=lambda mt: mt[0])[:k]
        # Noise reorders close candidates, not ones several times slower: on a big model those
        # re-measurements would cost minutes past the budget and cannot change the winner.
        top = [(ms, t) for ms, t in top if ms <= CONFIRM_WITHIN * top[0][0]]
        start = self.trials[0] if self.trials else None
        if top and start is not None and start.verified and start.measured_ms is not None and all(t is not start for _, t in top):
            if start.measured_ms <= CONFIRM_START_WITHIN * top[0][0]:
                top.append((start.measured_ms, start))
        timeout = {"timeout_s": 10.0 + 0.05 * top[0][0]} if top and self._timeout_kw else {}
        confirmed: list[tuple[float, Trial]] = []
        for first, t in top:
            runs = [first]
            for _ in range(repeats):
                if self._cancel.is_set():
                    return
                t0 = time.perf_counter()
                m = self._measure_fn(self.p, t.schedule, force=True, **timeout)
                self.measure_s += time.perf_counter() - t0
                if m.ok and m.verified and m.median_ms is not None:
                    runs.append(m.median_ms)
                elif m.error_kind != "timeout":
                    runs.append(math.inf)  # a candidate that fails now (wrong, crashed) is not confirmed
                # a timeout says the machine is busy, not that the verified first run was wrong
            t.confirmed_ms = statistics.median(runs)
            confirmed.append((t.confirmed_ms, t))
        best = min(confirmed, key=lambda mt: mt[0], default=None)
        if best is not None and math.isfinite(best[0]):
            self.best = best[1]

    def _report(self, trial: Trial | None) -> None:
        if self._progress is None:
            return
        self._progress(
            Progress(
                self.strategy,
                len(self.seen),
                len(self.trials),
                self.best_predicted,
                self.best.measured_ms if self.best else None,
                self.elapsed(),
                self.model_s,
                trial,
            )  # fmt: skip
        )

    def result(self) -> SearchResult:
        b = self.best
        best_ms = (b.confirmed_ms or b.measured_ms) if b else None
        return SearchResult(
            self.strategy, self.p.name, self.seed, b.schedule if b else None, best_ms, b is not None,
            self.elapsed(), self.model_s, self.measure_s, len(self.seen), list(self.trials), self.cancelled or self._cancel.is_set(),
            getattr(self.model, "name", type(self.model).__name__),
        )  # fmt: skip
