"""Measurement off the GUI thread.

`MeasureWorker` lives in a QThread and owns a long-lived engine Runner (a warm worker
process) and the measurement Database; both are created lazily in that thread because a
sqlite connection may only be used by the thread that opened it. `MeasureService` is the
GUI-side handle: it queues requests to the worker and re-emits its results.
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
from engine.measure import Job, Measurement, Runner
from engine.schedule import Schedule

# What every app measurement asks for: a per-stage profile and a short timing window.
MEASURE_OPTIONS: dict[str, Any] = {"profile": True, "min_time_s": 0.3}


@dataclass(frozen=True)
class MeasureRequest:
    id: int
    pipeline: Pipeline
    schedule: Schedule
    label: str  # what the result panel says was measured, e.g. "blur (small) · hand"
    options: dict[str, Any] = field(default_factory=lambda: dict(MEASURE_OPTIONS))


class _CancellableRunner(Runner):
    """A Runner whose jobs poll a cancel flag: api.measure has no cancel callback, but
    Runner.run does, and cancelling there kills and replaces the worker process."""

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__()
        self._cancel = cancel

    def run(self, job: Job, should_cancel: Callable[[], bool] | None = None) -> Measurement:
        return super().run(job, should_cancel or self._cancel.is_set)


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
                self._runner = _CancellableRunner(self._cancel)
            if self._db is None:
                self._db = Database()
            m = api.measure(request.pipeline, request.schedule, self._runner, self._db, **request.options)
        except Exception as exc:  # noqa: BLE001  # anything raised here must reach the panel, not kill the thread
            p, s = request.pipeline, request.schedule
            m = Measurement(p.name, p.content_hash(), s.content_hash(), False, error=f"{type(exc).__name__}: {exc}", error_kind="error")
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
    """GUI-thread handle on the measurement thread. One measurement at a time."""

    started = Signal(object)  # MeasureRequest
    finished = Signal(object, object, bool)  # MeasureRequest, Measurement, cancelled
    busy_changed = Signal(bool)

    _request = Signal(object)
    _close = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cancel = threading.Event()
        self._pending: MeasureRequest | None = None
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
        return self._pending is not None

    @property
    def running(self) -> bool:
        """Whether the measurement thread is still alive (False after shutdown)."""
        return self._thread.isRunning()

    def measure(self, pipeline: Pipeline, schedule: Schedule, label: str) -> MeasureRequest:
        if self._closed:
            raise RuntimeError("the measurement service is shut down")
        if self._pending is not None:
            raise RuntimeError("a measurement is already running")
        # A snapshot: the document's schedule may be edited while this one is measured.
        req = MeasureRequest(self._next_id, pipeline, Schedule.from_json(schedule.to_json()), label)
        self._next_id += 1
        self._cancel.clear()
        self._pending = req
        self.busy_changed.emit(True)
        self.started.emit(req)
        self._request.emit(req)
        return req

    def cancel(self) -> None:
        if self._pending is not None:
            self._cancel.set()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel what runs, close the runner and database in their thread, and join it.
        Idempotent; returns whether the thread ended within the timeout."""
        if self._closed:
            return not self._thread.isRunning()
        self._closed = True
        self._cancel.set()
        self._close.emit()
        ended = self._thread.wait(timeout_ms)
        if not ended:
            print("schedule-explorer: the measurement thread did not stop in time", file=sys.stderr)
        return ended

    @Slot(object, object)
    def _on_finished(self, request: MeasureRequest, m: Measurement) -> None:
        if self._closed or self._pending is None or request.id != self._pending.id:
            return
        cancelled = self._cancel.is_set() and not m.ok
        self._pending = None
        self.busy_changed.emit(False)
        self.finished.emit(request, m, cancelled)
