"""Schedule search off the GUI thread.

`SearchWorker` lives in its own QThread and runs one `engine.search.run_search` at a time
with its own Runner (a worker process separate from the MeasureService's, so a search and a
measurement can coexist) and its own Database connection (sqlite connections belong to the
thread that opened them); both are closed when the search ends. Before the search it
measures the baselines the panel does not know yet (the schedule that was current, Halide's
Adams2019). Progress reaches the GUI as plain records (engine.search.Progress / Trial)
through queued signals. `SearchService` is the GUI-side handle: start, pause, cancel, shutdown.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine import api
from engine.costmodel import CostModel, default_model
from engine.database import Database
from engine.halide_backend import AUTOSCHEDULERS
from engine.ir import Pipeline
from engine.measure import Measurement, Runner, autoscheduler_key
from engine.schedule import Schedule
from engine.search import Budget, Progress, SearchResult, run_search, runner_measure

from ..workers import MEASURE_OPTIONS

ADAMS = "Adams2019"
PROGRESS_INTERVAL_S = 0.2  # reports without a trial (prediction batches) are thinned to this

MeasureFn = Callable[[Pipeline, Schedule], Measurement]


def measure_function(runner: Runner, db: Database | None, should_cancel: Callable[[], bool] | None = None) -> MeasureFn:
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


class SearchWorker(QObject):
    """Runs in the search thread; one search at a time."""

    progress = Signal(int, object)  # request id, Progress
    baseline = Signal(int, str, object)  # request id, "current" or an autoscheduler's name, Measurement
    finished = Signal(int, object, str)  # request id, SearchResult (None on error), error text

    def __init__(self, cancel: threading.Event, pause: threading.Event) -> None:
        super().__init__()
        self._cancel, self._pause = cancel, pause
        self._last_report = 0.0

    @Slot(object)
    def run(self, req: SearchRequest) -> None:
        runner: Runner | None = None
        db: Database | None = None
        result: SearchResult | None = None
        error = ""
        try:
            runner = Runner()
            db = Database()
            self._baselines(req, runner, db)
            model: CostModel = default_model()
            result = run_search(
                req.pipeline, req.strategy, req.budget, req.seed, model=model,
                measure_fn=measure_function(runner, db, self._cancel.is_set),  # a cancel kills the running job's process at once
                progress=lambda pr: self._report(req.id, pr), cancel=self._cancel, pause=self._pause,
                confirm=False,  # the table shows each candidate's own measurement; Apply + Measure re-times one
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001  # a failing strategy must reach the panel, not kill the thread
            error = f"{type(exc).__name__}: {exc}"
        finally:
            if runner is not None:
                runner.close()
            if db is not None:
                db.close()
        self.finished.emit(req.id, result, error)

    def _baselines(self, req: SearchRequest, runner: Runner, db: Database) -> None:
        p = req.pipeline
        todo: list[tuple[str, Schedule | None, str | None]] = []
        if req.current is not None:
            todo.append(("current", req.current, None))
        if req.adams:
            todo.append((ADAMS, None, ADAMS))
        for key, sched, auto in todo:
            if self._cancel.is_set():
                return
            try:
                m = api.measure(p, sched, runner, db, autoscheduler=auto, should_cancel=self._cancel.is_set, **MEASURE_OPTIONS)
            except Exception as exc:  # noqa: BLE001  # a failed baseline is reported; the search still runs
                m = Measurement(
                    p.name, p.content_hash(), autoscheduler_key(auto) if auto else "", False, error=str(exc), error_kind="error"
                )
            if not self._cancel.is_set():  # a cancelled job's "error" is not a result
                self.baseline.emit(req.id, key, m)
        # Other autoschedulers' results already stored (e.g. by `bench core`) are shown too, never run here.
        for name in AUTOSCHEDULERS:
            if name != ADAMS or not req.adams:
                hit = api.stored_measurement(p, db, autoscheduler_key(name), runner.threads)
                if hit is not None and hit.ok and hit.verified:
                    self.baseline.emit(req.id, name, hit)

    def _report(self, request_id: int, pr: Progress) -> None:
        # Strategies report after every prediction batch; the GUI needs every trial but not every batch.
        now = time.monotonic()
        if pr.trial is None and now - self._last_report < PROGRESS_INTERVAL_S:
            return
        if pr.trial is not None and self._cancel.is_set() and not pr.trial.verified:
            return  # the job the cancel killed: not a failed candidate
        self._last_report = now
        self.progress.emit(request_id, pr)


class SearchService(QObject):
    """GUI-thread handle on the search thread (created on the first search)."""

    started = Signal(object)  # SearchRequest
    progress = Signal(object)  # Progress
    baseline = Signal(str, object)  # "current" or an autoscheduler's name, Measurement
    finished = Signal(object, str)  # SearchResult or None, error text ("" when it ran)
    busy_changed = Signal(bool)

    _run = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cancel, self._pause = threading.Event(), threading.Event()
        self._thread: QThread | None = None
        self._worker: SearchWorker | None = None
        self.current: SearchRequest | None = None
        self._next_id = 1
        self._closed = False

    @property
    def busy(self) -> bool:
        return self.current is not None

    @property
    def paused(self) -> bool:
        return self._pause.is_set()

    @property
    def thread_running(self) -> bool:
        return self._thread is not None and self._thread.isRunning()

    def start(
        self, p: Pipeline, strategy: str, budget: Budget, seed: int, current: Schedule | None = None, adams: bool = False
    ) -> SearchRequest:
        if self._closed:
            raise RuntimeError("the search service is shut down")
        if self.busy:
            raise RuntimeError("a search is already running")
        if self._thread is None:
            self._thread = QThread()  # no parent: shutdown() ends it explicitly
            self._thread.setObjectName("schedule-explorer-search")
            self._worker = SearchWorker(self._cancel, self._pause)
            self._worker.moveToThread(self._thread)
            self._run.connect(self._worker.run)
            self._worker.progress.connect(self._on_progress)
            self._worker.baseline.connect(self._on_baseline)
            self._worker.finished.connect(self._on_finished)
            self._thread.start()
        # Snapshots: the document may be edited while the search runs.
        snap = current.copy() if current is not None else None
        req = SearchRequest(self._next_id, p, strategy, Budget(budget.trials, budget.wall_s), seed, snap, adams)
        self._next_id += 1
        self._cancel.clear()  # the worker is idle: no search can see the flags change under it
        self._pause.clear()
        self.current = req
        self.busy_changed.emit(True)
        self.started.emit(req)
        self._run.emit(req)
        return req

    def set_paused(self, on: bool) -> None:
        """Pause after the running measurement (the wall-time budget keeps counting)."""
        if on and self.busy:
            self._pause.set()
        else:
            self._pause.clear()

    def cancel(self) -> None:
        """Stop the search; the running measurement's worker process is killed."""
        if self.busy:
            self._cancel.set()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel what runs and join the thread. Idempotent; whether it ended in time."""
        if self._closed:
            return not self.thread_running
        self._closed = True
        self._cancel.set()
        if self._thread is None:
            return True
        self._thread.quit()  # the event loop ends once the running search returns
        ended = self._thread.wait(timeout_ms)
        if not ended:
            print("schedule-explorer: the search thread did not stop in time", file=sys.stderr)
        return ended

    def _mine(self, request_id: int) -> bool:
        return not self._closed and self.current is not None and self.current.id == request_id

    @Slot(int, object)
    def _on_progress(self, request_id: int, pr: Progress) -> None:
        if self._mine(request_id):
            self.progress.emit(pr)

    @Slot(int, str, object)
    def _on_baseline(self, request_id: int, key: str, m: Measurement) -> None:
        if self._mine(request_id):
            self.baseline.emit(key, m)

    @Slot(int, object, str)
    def _on_finished(self, request_id: int, result: SearchResult | None, error: str) -> None:
        if not self._mine(request_id):
            return
        self.current = None
        self._pause.clear()
        self.busy_changed.emit(False)
        self.finished.emit(result, error)
