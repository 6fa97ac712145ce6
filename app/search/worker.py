"""Schedule search off the GUI thread.

`search_job` runs one `engine.search.run_search` on the service's `Background` thread
(app/background.py) with its own Runner (a worker process separate from the MeasureService's, so a search and a
measurement can coexist) and its own Database connection (sqlite connections belong to the
thread that opened them); both are closed when the search ends. Before the search it
measures the baselines the panel does not know yet (the schedule that was current, Halide's
Adams2019). Progress reaches the GUI as plain records (engine.search.Progress / Trial, and
`Baseline`) through the helper's queued signal. `SearchService` is the GUI-side handle:
start, pause, cancel, shutdown. Its `cluster` (the app's cluster setting) says where a
search measures: this machine, or one host kind of a Ray cluster (engine/cluster).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine import api
from engine.cluster import make_runner
from engine.costmodel import CostModel, default_model
from engine.database import Database
from engine.halide_backend import AUTOSCHEDULERS
from engine.ir import Pipeline
from engine.measure import Measurement, MeasureRunner, autoscheduler_key
from engine.schedule import Schedule
from engine.search import Budget, Progress, SearchResult, run_search, runner_measure

from ..background import Background, Job, Outcome
from ..workers import MEASURE_OPTIONS

ADAMS = "Adams2019"
PROGRESS_INTERVAL_S = 0.2  # reports without a trial (prediction batches) are thinned to this

MeasureFn = Callable[[Pipeline, Schedule], Measurement]


def measure_function(runner: MeasureRunner, db: Database | None, should_cancel: Callable[[], bool] | None = None) -> MeasureFn:
    """How candidates are measured (tests replace it to inject a crashing candidate);
    `should_cancel` returning True kills the running candidate's worker process."""
    return runner_measure(runner, db, should_cancel=should_cancel)


@dataclass(frozen=True)
class SearchRequest:
    id: int
    pipeline: Pipeline
    strategy: str
    budget: Budget
    seed: int
    current: Schedule | None = None  # the schedule to measure as the reference, when not measured yet
    adams: bool = False  # measure Halide's Adams2019 before the search (cached results are instant)
    cluster: str = "local"  # where it measures (engine/cluster: local, ray, ray://HOST:PORT, HOST:PORT)


@dataclass(frozen=True)
class Baseline:
    """A reference measurement reported before (or beside) the search's trials."""

    key: str  # "current" or an autoscheduler's name
    measurement: Measurement


def search_job(req: SearchRequest, pause: threading.Event, job: Job) -> SearchResult:
    """Run on the search thread: the baselines, then the search; `job.cancel` stops both."""
    cancel = job.cancel
    runner = make_runner(req.cluster)  # a cluster's measures on one host kind; an unreachable one fails the search with its reason
    db: Database | None = None
    try:
        db = Database()
        _baselines(req, runner, db, job)
        model: CostModel = default_model()
        last_report = 0.0

        def report(pr: Progress) -> None:
            # Strategies report after every prediction batch; the GUI needs every trial but not every batch.
            nonlocal last_report
            now = time.monotonic()
            if pr.trial is None and now - last_report < PROGRESS_INTERVAL_S:
                return
            if pr.trial is not None and cancel.is_set() and not pr.trial.verified:
                return  # the job the cancel killed: not a failed candidate
            last_report = now
            job.report(pr)

        return run_search(
            req.pipeline, req.strategy, req.budget, req.seed, model=model,
            measure_fn=measure_function(runner, db, cancel.is_set),  # a cancel kills the running job's process at once
            progress=report, cancel=cancel, pause=pause,
            confirm=False,  # the table shows each candidate's own measurement; Apply + Measure re-times one
        )  # fmt: skip
    finally:
        runner.close()
        if db is not None:
            db.close()


def _baselines(req: SearchRequest, runner: MeasureRunner, db: Database, job: Job) -> None:
    p, cancel = req.pipeline, job.cancel
    todo: list[tuple[str, Schedule | None, str | None]] = []
    if req.current is not None:
        todo.append(("current", req.current, None))
    if req.adams:
        todo.append((ADAMS, None, ADAMS))
    for key, sched, auto in todo:
        if cancel.is_set():
            return
        try:
            m = api.measure(p, sched, runner, db, autoscheduler=auto, should_cancel=cancel.is_set, **MEASURE_OPTIONS)
        except Exception as exc:  # noqa: BLE001  # a failed baseline is reported; the search still runs
            m = Measurement(p.name, p.content_hash(), autoscheduler_key(auto) if auto else "", False, error=str(exc), error_kind="error")
        if not cancel.is_set():  # a cancelled job's "error" is not a result
            job.report(Baseline(key, m))
    # Other autoschedulers' results already stored (e.g. by `bench core`) are shown too, never run here.
    for name in AUTOSCHEDULERS:
        if name != ADAMS or not req.adams:
            hit = api.stored_measurement(p, db, autoscheduler_key(name), runner.threads, runner)
            if hit is not None and hit.ok and hit.verified:
                job.report(Baseline(name, hit))


class SearchService(QObject):
    """GUI-thread handle on the search thread (created on the first search)."""

    started = Signal(object)  # SearchRequest
    progress = Signal(object)  # Progress
    baseline = Signal(str, object)  # "current" or an autoscheduler's name, Measurement
    finished = Signal(object, str)  # SearchResult or None, error text ("" when it ran)
    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pause = threading.Event()
        self._background = Background("search", parent=self)  # its thread starts with the first search
        self._job: Job | None = None  # the running search's job (its cancel flag)
        self.current: SearchRequest | None = None
        self._next_id = 1
        self._closed = False
        self.cluster = "local"  # Tools → Cluster… (app/cluster_dialog.py) sets it; the next search uses it

    @property
    def busy(self) -> bool:
        return self.current is not None

    @property
    def paused(self) -> bool:
        return self._pause.is_set()

    @property
    def thread_running(self) -> bool:
        return self._background.alive

    def start(
        self, p: Pipeline, strategy: str, budget: Budget, seed: int, current: Schedule | None = None, adams: bool = False
    ) -> SearchRequest:
        if self._closed:
            raise RuntimeError("the search service is shut down")
        if self.busy:
            raise RuntimeError("a search is already running")
        # Snapshots: the document may be edited while the search runs.
        snap = current.copy() if current is not None else None
        req = SearchRequest(self._next_id, p, strategy, Budget(budget.trials, budget.wall_s), seed, snap, adams, self.cluster)
        self._next_id += 1
        self._pause.clear()  # the thread is idle: no search can see the flag change under it
        self.current = req
        self.busy_changed.emit(True)
        self.started.emit(req)
        pause = self._pause
        self._job = self._background.submit(
            lambda job: search_job(req, pause, job), lambda out: self._on_finished(req, out), lambda rec: self._on_progress(req, rec)
        )
        return req

    def set_paused(self, on: bool) -> None:
        """Pause after the running measurement (the wall-time budget keeps counting)."""
        if on and self.busy:
            self._pause.set()
        else:
            self._pause.clear()

    def cancel(self) -> None:
        """Stop the search; the running measurement's worker process is killed."""
        if self.busy and self._job is not None:
            self._job.cancel.set()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel what runs and join the thread. Idempotent; whether it ended in time."""
        if self._closed:
            return not self.thread_running
        self._closed = True
        return self._background.shutdown(timeout_ms / 1000)  # cancels the running search, joins once it returns

    def _mine(self, req: SearchRequest) -> bool:
        return not self._closed and self.current is not None and self.current.id == req.id

    def _on_progress(self, req: SearchRequest, record: Any) -> None:
        if not self._mine(req):
            return
        if isinstance(record, Baseline):
            self.baseline.emit(record.key, record.measurement)
        else:
            self.progress.emit(record)

    def _on_finished(self, req: SearchRequest, out: Outcome) -> None:
        if not self._mine(req):
            return
        self.current = self._job = None
        self._pause.clear()
        self.busy_changed.emit(False)
        self.finished.emit(out.value if out.error is None else None, out.error_text)
