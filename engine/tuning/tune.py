"""Whole-model tuning: the model's distinct tasks (tasks.py) tuned once each by local moves
(moves.py), the measurement budget spent by Ansor's gradient task scheduler
(scheduler.py), records kept per task in the database (records.py), and the result
applied to every occurrence.

Every trial is one task's candidate schedule measured on the task's own small pipeline (a
unit of the model; a few ms to compile and run, where the whole model takes seconds),
verified by the worker against the reference (the IR interpreter in float64): only verified
times count. A task's trials start with its heuristic schedule (the "start" time), then its
stored record (a resume), records of similar tasks (same operators, other shapes) that
validate on it, then moves from its best. With a runner of several slots (a Ray cluster)
that many trials run at once. `measure_end_to_end` times whole-model schedules against each
other in rounds, verified.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import api
from ..database import Database
from ..heuristic import heuristic_schedule
from ..ir import Pipeline
from ..measure import Measurement, MeasureRunner
from ..schedule import Schedule
from . import moves, records
from .scheduler import GradientScheduler, TaskState
from .tasks import Task, apply_tasks, extract_tasks, transfer

# A candidate's measurement: short, a few runs (ranking needs no last percent; see search.JOB_OPTIONS).
TRIAL_OPTIONS: dict[str, Any] = {"min_time_s": 0.1, "min_runs": 3, "warmup": 1, "profile": False}
MAX_TRIAL_TIMEOUT_S = 60.0
CONFIRM_BELOW = 0.97  # a candidate this much faster than the task's best is measured twice


@dataclass
class TaskResult:
    """One task after tuning (or so far): where it occurs and what its trials gave."""

    index: int
    key: str
    label: str
    signature: str
    occurrences: int
    stages: int
    gflop: float
    start_ms: float | None = None  # the heuristic schedule's verified time on the task
    best_ms: float | None = None
    trials: int = 0
    failed: int = 0
    seconds: float = 0.0
    best_from: str = "heuristic"  # heuristic, record (resumed), similar (another task's record), moves
    resumed_trials: int = 0  # trials the stored record had already spent

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TuneProgress:
    """Sent after every trial: the task it was, what every task stands at, and the
    end-to-end estimate (occurrences x best task time, summed: an estimate, labelled so)."""

    elapsed_s: float
    trials: int
    task: int
    verified: bool
    tasks: list[TaskResult]
    estimate_ms: float | None
    start_estimate_ms: float | None


@dataclass
class TuneResult:
    pipeline: str
    tasks: list[TaskResult]
    start: Schedule  # the heuristic schedule of the whole model
    schedule: Schedule  # every task's best applied to all its occurrences
    tuning_s: float
    trials: int
    budget_s: float
    max_trials: int
    cancelled: bool
    start_estimate_ms: float | None
    estimate_ms: float | None
    curve: list[tuple[float, int, float]] = field(default_factory=list)  # (elapsed s, trials, estimate ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline, "tuning_s": round(self.tuning_s, 2), "trials": self.trials, "budget_s": self.budget_s,
            "max_trials": self.max_trials, "cancelled": self.cancelled, "distinct_tasks": len(self.tasks),
            "units": sum(t.occurrences for t in self.tasks), "start_estimate_ms": self.start_estimate_ms,
            "estimate_ms": self.estimate_ms, "estimate_note": "sum over tasks of occurrences x best task ms (an estimate)",
            "tasks": [t.to_json() for t in self.tasks],
            "curve": [{"elapsed_s": round(e, 2), "trials": n, "estimate_ms": ms} for e, n, ms in self.curve],
        }  # fmt: skip


class _TaskTuner:
    """One task's candidates and bookkeeping."""

    def __init__(self, task: Task, rng: random.Random) -> None:
        self.task, self.rng = task, rng
        self.best: Schedule = task.start
        self.best_ms: float | None = None
        self.tried: set[str] = set()
        self.queue: list[tuple[str, Schedule]] = [("heuristic", task.start)]

    def add_start(self, source: str, s: Schedule) -> None:
        got = transfer(s, self.task)
        if got is None:
            return  # a schedule that does not fit this task (another shape): not a start
        s = got
        if s.content_hash() not in self.tried and all(s.content_hash() != q.content_hash() for _, q in self.queue):
            self.queue.append((source, s))

    def candidate(self) -> tuple[str, Schedule] | None:
        while self.queue:
            src, s = self.queue.pop(0)
            if s.content_hash() not in self.tried:
                self.tried.add(s.content_hash())
                return src, s
        steps = 2 if self.rng.random() < 0.3 else 1
        got = moves.neighbours(self.task.pipeline, self.best, self.rng, 1, self.tried, steps)
        if not got:
            return None
        self.tried.add(got[0].content_hash())
        return "moves", got[0]


def where_of(runner: MeasureRunner) -> records.Where:
    return records.Where(runner.target, runner.host, runner.threads)


def tune(
    p: Pipeline,
    runner: MeasureRunner,
    *,
    budget_s: float = 120.0,
    trials: int = 10**6,
    db: Database | None = None,
    start: Schedule | None = None,
    seed: int = 0,
    progress: Callable[[TuneProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> TuneResult:
    """Tune `p`'s tasks within `budget_s` seconds and `trials` measurements, from `start`
    (default: the heuristic schedule). Records in `db` are read (resume, similar tasks) and
    written after every improvement."""
    t0 = time.monotonic()
    cancel = cancel or threading.Event()
    base = start or heuristic_schedule(p)
    tasks = extract_tasks(p, base)
    rng = random.Random(seed)
    tuners = [_TaskTuner(t, random.Random(rng.random())) for t in tasks]
    where = where_of(runner)
    results = [
        TaskResult(t.index, t.key, t.label, t.signature, t.weight, len(t.pipeline.stages), t.flops() / 1e9) for t in tasks
    ]  # fmt: skip
    if db is not None:
        for tu, res in zip(tuners, results, strict=True):
            rec = records.load(db, tu.task.key, where)
            if rec is not None:
                tu.add_start("record", rec.schedule)
                res.resumed_trials = rec.trials
            for sim in records.similar(db, tu.task.signature, where, tu.task.key):
                tu.add_start("similar", sim.schedule)
    states = [TaskState(t.weight, t.flops(), t.signature) for t in tasks]
    sched = GradientScheduler(states, seed=seed)
    curve: list[tuple[float, int, float]] = []
    done = 0
    lock = threading.Lock()

    def estimate() -> float | None:
        return sched.objective_ms()

    def start_estimate() -> float | None:
        if any(r.start_ms is None for r in results):
            return None
        return sum(r.occurrences * (r.start_ms or 0.0) for r in results)

    def timeout_for(i: int) -> float:
        b = tuners[i].best_ms
        left = budget_s - (time.monotonic() - t0)
        base_t = MAX_TRIAL_TIMEOUT_S if b is None else min(MAX_TRIAL_TIMEOUT_S, 10.0 + 0.05 * b)
        return max(2.0, min(base_t, left + 5.0))

    def run_trial(i: int, src: str, s: Schedule) -> tuple[int, str, Schedule, Measurement, float]:
        t = time.monotonic()
        m = api.measure(tasks[i].pipeline, s, runner, None, should_cancel=cancel.is_set, timeout_s=timeout_for(i), **TRIAL_OPTIONS)
        b = tuners[i].best_ms
        if b is not None and m.ok and m.verified and m.median_ms is not None and m.median_ms < CONFIRM_BELOW * b:
            # A new best is measured again and counts at the slower of the two: the best of many
            # short, noisy measurements is otherwise a lucky one (most of all on a loaded machine).
            again = api.measure(tasks[i].pipeline, s, runner, None, force=True, should_cancel=cancel.is_set, **TRIAL_OPTIONS)
            m = again if not (again.ok and again.verified and again.median_ms is not None) or again.median_ms > m.median_ms else m
        return i, src, s, m, time.monotonic() - t

    def record(i: int, src: str, s: Schedule, m: Measurement, secs: float) -> None:
        nonlocal done
        ok = bool(m.ok and m.verified and m.median_ms is not None)
        ms = float(m.median_ms) if ok and m.median_ms is not None else None
        with lock:
            done += 1
            tu, res = tuners[i], results[i]
            states[i].add(ms, secs)
            res.trials += 1
            res.seconds += secs
            res.failed += 0 if ok else 1
            if src == "heuristic":
                res.start_ms = ms
            if ms is not None and (tu.best_ms is None or ms < tu.best_ms):
                tu.best, tu.best_ms = s, ms
                res.best_ms, res.best_from = ms, src
                if src != "heuristic":  # a result transfers to similar tasks (same operators, other shapes) as a start
                    for other in tuners:
                        if other is not tu and other.task.signature == tu.task.signature:
                            other.add_start("similar", s)
            if db is not None and tu.best_ms is not None:  # after every trial: the count is part of the record
                records.save(db, tasks[i].key, where, tasks[i].signature, tu.best_ms, res.trials + res.resumed_trials, tu.best)
            est = estimate()
            if est is not None:
                curve.append((time.monotonic() - t0, done, est))
        if progress is not None:
            progress(TuneProgress(time.monotonic() - t0, done, i, ok, [TaskResult(**asdict(r)) for r in results], est, start_estimate()))

    slots = max(1, int(getattr(runner, "slots", 1)))
    with ThreadPoolExecutor(max_workers=slots) as pool:
        while not cancel.is_set() and done < trials and time.monotonic() - t0 < budget_s:
            batch: list[tuple[int, str, Schedule]] = []
            while len(batch) < min(slots, trials - done):
                i = sched.next()
                if i is None:
                    break
                got = tuners[i].candidate()
                if got is None:
                    states[i].exhausted = True
                    continue
                batch.append((i, *got))
            if not batch:
                break
            for fut in [pool.submit(run_trial, *b) for b in batch]:
                record(*fut.result())
    chosen = {tu.task.key: tu.best for tu in tuners if tu.best_ms is not None}
    tuned = apply_tasks(p, base, tasks, chosen, name="tuned")
    return TuneResult(
        p.name, results, base, tuned, time.monotonic() - t0, done, budget_s, trials, cancel.is_set(),
        start_estimate(), estimate(), curve,
    )  # fmt: skip


def keep_faster(start: Schedule, tuned: Schedule, row: dict[str, Any]) -> tuple[Schedule, str]:
    """The schedule to keep after tuning, and which it is ("tuned" or "heuristic"), from an
    end-to-end comparison `row` (compare_tuned's: cells "heuristic" and "tuned" with "ok" and
    "median_ms"). Each task's best is timed alone, with its inputs hot in cache, so the tuned
    whole model can measure slower than its start: then the start is kept. Without two
    verified whole-model times the tuned schedule is kept (nothing contradicts it)."""
    h, t = row.get("heuristic") or {}, row.get("tuned") or {}
    hm, tm = h.get("median_ms"), t.get("median_ms")
    if h.get("ok") and t.get("ok") and hm is not None and tm is not None and tm >= hm:
        return start, "heuristic"
    return tuned, "tuned"


def measure_end_to_end(
    p: Pipeline, schedules: dict[str, Schedule], runner: MeasureRunner, rounds: int = 3, min_time_s: float = 0.5, timeout_s: float = 900.0
) -> dict[str, dict[str, Any]]:
    """Each whole-model schedule measured `rounds` times, interleaved (rounds outside, so
    every schedule sees the same stretch of machine load), verified by the runner: per
    label the median of the round medians, their spread, verified, and the error if any."""
    runs: dict[str, list[Measurement]] = {k: [] for k in schedules}
    for _ in range(rounds):
        for label, s in schedules.items():
            runs[label].append(api.measure(p, s, runner, None, force=True, min_time_s=min_time_s, profile=False, timeout_s=timeout_s))
    out: dict[str, dict[str, Any]] = {}
    for label, ms in runs.items():
        bad = next((m for m in ms if not (m.ok and m.verified and m.median_ms is not None)), None)
        if bad is not None:
            out[label] = {"ok": False, "verified": bool(bad.verified), "error": bad.error or "not verified"}
            continue
        med = [float(m.median_ms or 0.0) for m in ms]
        mid = statistics.median(med)
        out[label] = {
            "ok": True, "verified": True, "median_ms": mid, "spread": (max(med) - min(med)) / mid if len(med) > 1 else 0.0,
            "round_medians_ms": med, "compile_s": ms[0].compile_s,
        }  # fmt: skip
    return out
