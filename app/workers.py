"""Measurement off the GUI thread.

`MeasureWorker` lives in a QThread and owns a long-lived engine Runner (a warm worker
process) and the measurement Database; both are created lazily in that thread because a
sqlite connection may only be used by the thread that opened it. `MeasureService` is the
GUI-side handle: it queues requests (one runs at a time, so timings never compete for the
cores), hands them to the worker one by one and re-emits the results.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine import api
from engine.database import Database
from engine.ir import Pipeline
from engine.measure import Measurement, Runner, autoscheduler_key
from engine.schedule import Schedule

# What every app measurement asks for: a per-stage profile and a short timing window.
MEASURE_OPTIONS: dict[str, Any] = {"profile": True, "min_time_s": 0.3}


@dataclass(frozen=True)
class MeasureRequest:
    id: int
    pipeline: Pipeline
    schedule: Schedule | None  # None with `autoscheduler`
    label: str  # what the result panel says was measured, e.g. "blur (small) · hand"
    options: dict[str, Any] = field(default_factory=lambda: dict(MEASURE_OPTIONS))
    autoscheduler: str | None = None  # e.g. "Adams2019": Halide schedules it, then it is measured

    @property
    def schedule_key(self) -> str:
        """What the database and the session history key the result by."""
        if self.autoscheduler:
            return autoscheduler_key(self.autoscheduler)
        assert self.schedule is not None
        return self.schedule.content_hash()


class MeasureWorker(QObject):
    """Runs in the measurement thread; one request at a time, in arrival order."""

    finished = Signal(object, object)  # MeasureRequest, Measurement

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__()
        self._cancel = cancel
        self._runner: Runner | None = None
        self._db: Database | None = None

    @Slot(object)
    def measure(self, request: MeasureRequest) -> None:
        try:
            if self._runner is None:
                self._runner = Runner()
            if self._db is None:
                self._db = Database()
            options = dict(request.options) | ({"autoscheduler": request.autoscheduler} if request.autoscheduler else {})
            # A cancel kills the running job's worker process (the Runner starts a new one).
            m = api.measure(request.pipeline, request.schedule, self._runner, self._db, should_cancel=self._cancel.is_set, **options)
        except Exception as exc:  # noqa: BLE001  # anything raised here must reach the panel, not kill the thread
            p = request.pipeline
            m = Measurement(p.name, p.content_hash(), request.schedule_key, False, error=f"{type(exc).__name__}: {exc}", error_kind="error")
        self.finished.emit(request, m)

    @Slot()
    def close(self) -> None:
        """Stop the worker process and close the database, then end the thread's event loop."""
        try:
            if self._runner is not None:
                self._runner.close()
            if self._db is not None:
                self._db.close()
        finally:
            self._runner = self._db = None
            thread = QThread.currentThread()
            thread.quit()


class MeasureService(QObject):
    """GUI-thread handle on the measurement thread: a queue, one measurement at a time."""

    started = Signal(object)  # MeasureRequest, when it starts running
    finished = Signal(object, object, bool)  # MeasureRequest, Measurement, cancelled
    busy_changed = Signal(bool)  # something is running or queued

    _request = Signal(object)
    _close = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cancel = threading.Event()
        self._running: MeasureRequest | None = None
        self._queue: list[MeasureRequest] = []
        self._next_id = 1
        self._closed = False
        self._thread = QThread()  # no parent: its lifetime is ended explicitly by shutdown()
        self._thread.setObjectName("schedule-explorer-measure")
        self._worker = MeasureWorker(self._cancel)
        self._worker.moveToThread(self._thread)
        self._request.connect(self._worker.measure)
        self._close.connect(self._worker.close)
        self._worker.finished.connect(self._on_finished)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._running is not None or bool(self._queue)

    @property
    def running(self) -> bool:
        """Whether the measurement thread is still alive (False after shutdown)."""
        return self._thread.isRunning()

    @property
    def current(self) -> MeasureRequest | None:
        """The request being measured now."""
        return self._running

    def pending(self) -> list[MeasureRequest]:
        """Running first, then queued, in order."""
        return ([self._running] if self._running else []) + list(self._queue)

    def measure(self, pipeline: Pipeline, schedule: Schedule | None, label: str, autoscheduler: str | None = None) -> MeasureRequest:
        """Queue a measurement (it starts at once when nothing runs)."""
        if self._closed:
            raise RuntimeError("the measurement service is shut down")
        # A snapshot: the document's schedule may be edited while this one waits or runs.
        snap = schedule.copy() if schedule is not None and not autoscheduler else None
        req = MeasureRequest(self._next_id, pipeline, snap, label, autoscheduler=autoscheduler)
        self._next_id += 1
        was_busy = self.busy
        self._queue.append(req)
        if not was_busy:
            self.busy_changed.emit(True)
        self._dispatch()
        return req

    def cancel(self, request_id: int | None = None) -> None:
        """Cancel one request (queued: dropped; running: its worker is stopped), or with no
        id the running one and everything queued."""
        removed = [r for r in self._queue if request_id is None or r.id == request_id]
        self._queue = [r for r in self._queue if r not in removed]
        if self._running is not None and request_id in (None, self._running.id):
            self._cancel.set()
        elif removed and not self.busy:
            self.busy_changed.emit(False)
        for req in removed:
            self._emit_cancelled(req)

    def drop_queued(self, which: Callable[[MeasureRequest], bool]) -> None:
        """Forget queued requests that no longer matter (e.g. an older edit's), silently."""
        self._queue = [r for r in self._queue if not which(r)]

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel what runs, close the runner and database in their thread, and join it.
        Idempotent; returns whether the thread ended within the timeout."""
        if self._closed:
            return not self._thread.isRunning()
        self._closed = True
        self._queue.clear()
        self._cancel.set()
        self._close.emit()
        ended = self._thread.wait(timeout_ms)
        if not ended:
            print("schedule-explorer: the measurement thread did not stop in time", file=sys.stderr)
        return ended

    def _dispatch(self) -> None:
        if self._running is not None or not self._queue or self._closed:
            return
        self._running = self._queue.pop(0)
        self._cancel.clear()  # the worker is idle: no job can see the flag change under it
        self.started.emit(self._running)
        self._request.emit(self._running)

    def _emit_cancelled(self, req: MeasureRequest) -> None:
        p = req.pipeline
        m = Measurement(p.name, p.content_hash(), req.schedule_key, False, error="cancelled before it started", error_kind="error")
        self.finished.emit(req, m, True)

    @Slot(object, object)
    def _on_finished(self, request: MeasureRequest, m: Measurement) -> None:
        if self._closed or self._running is None or request.id != self._running.id:
            return
        cancelled = self._cancel.is_set() and not m.ok
        self._running = None
        if not self._queue:
            self.busy_changed.emit(False)
        self.finished.emit(request, m, cancelled)
        self._dispatch()  # the next one (a slot above may have queued it already)
