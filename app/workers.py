"""Measurement off the GUI thread.

`MeasureService` is the GUI-side handle: it queues requests (one runs at a time, so
timings never compete for the cores) and hands them one by one to its `Background`
thread (app/background.py), which owns a long-lived engine Runner (a warm worker process)
and the measurement Database; both are created lazily in that thread, because a sqlite
connection may only be used by the thread that opened it, and closed there at shutdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from engine import api
from engine.database import Database
from engine.ir import Pipeline
from engine.measure import Measurement, Runner, autoscheduler_key
from engine.schedule import Schedule

if TYPE_CHECKING:
    from engine.bench.peers import PeerTiming

from .background import Background, Job, Outcome

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
    force: bool = False  # run the worker even when the database holds a result ("Measure again")
    peers: bool = False  # also time ONNX Runtime / PyTorch on the same input, right after (implies force)

    @property
    def schedule_key(self) -> str:
        """What the database and the session history key the result by."""
        if self.autoscheduler:
            return autoscheduler_key(self.autoscheduler)
        assert self.schedule is not None
        return self.schedule.content_hash()


NOT_STARTED = "cancelled before it started"


@dataclass(frozen=True)
class PeersResult:
    """The peers timed right after a schedule's measurement, in the same job on the same
    thread and input (engine/bench/peers.py): `measurement` is the schedule's, fresh."""

    measurement: Measurement
    timings: list[PeerTiming]


def _failed(req: MeasureRequest, error: str) -> Measurement:
    """A measurement that did not happen, as the result panel shows it."""
    p = req.pipeline
    return Measurement(p.name, p.content_hash(), req.schedule_key, False, error=error, error_kind="error")


class _Measurer:
    """The measurement thread's state: one Runner and one Database, made by the first job and
    closed by shutdown, both on that thread only."""

    def __init__(self) -> None:
        self._runner: Runner | None = None
        self._db: Database | None = None

    def _open(self) -> tuple[Runner, Database]:
        if self._runner is None:
            self._runner = Runner()
        if self._db is None:
            self._db = Database()
        return self._runner, self._db

    def measure(self, request: MeasureRequest, job: Job) -> tuple[Measurement, list[PeerTiming] | None]:
        runner, db = self._open()
        options = dict(request.options) | ({"autoscheduler": request.autoscheduler} if request.autoscheduler else {})
        # A cancel kills the running job's worker process (the Runner starts a new one).
        # Peers are compared with a timing of this run, never with a stored one (other load).
        force = request.force or request.peers
        m = api.measure(request.pipeline, request.schedule, runner, db, force=force, should_cancel=job.cancel.is_set, **options)
        if not request.peers or not m.ok or job.cancel.is_set():
            return m, None
        from engine.bench.peers import measure_peers  # noqa: PLC0415  # onnxruntime / torch load only when asked

        job.report("peers")
        return m, measure_peers(request.pipeline, runner.threads, float(options.get("min_time_s", 0.3)))

    def forget(self, pipeline: Pipeline) -> tuple[int, int]:
        """Clear the database's results for one pipeline (on the thread that owns it)."""
        return api.forget_measurements(pipeline, self._open()[1])

    def close(self) -> None:
        """Stop the worker process and close the database."""
        try:
            if self._runner is not None:
                self._runner.close()
            if self._db is not None:
                self._db.close()
        finally:
            self._runner = self._db = None


class MeasureService(QObject):
    """GUI-thread handle on the measurement thread: a queue, one measurement at a time."""

    started = Signal(object)  # MeasureRequest, when it starts running
    peers_measured = Signal(object, object)  # MeasureRequest, PeersResult (before `finished`)
    forgotten = Signal(object, object)  # Pipeline, (measurements, failures) removed, or the error text
    finished = Signal(object, object, bool)  # MeasureRequest, Measurement, cancelled
    busy_changed = Signal(bool)  # something is running or queued

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background("measure", parent=self)
        self._measurer = _Measurer()  # used on the background thread only
        self._running: MeasureRequest | None = None
        self._job: Job | None = None  # the running request's job (its cancel flag)
        self._queue: list[MeasureRequest] = []
        self._next_id = 1
        self._closed = False

    @property
    def busy(self) -> bool:
        return self._running is not None or bool(self._queue)

    @property
    def running(self) -> bool:
        """Whether the measurement thread is alive (it starts with the first measurement and
        ends at shutdown)."""
        return self._background.alive

    @property
    def current(self) -> MeasureRequest | None:
        """The request being measured now."""
        return self._running

    def pending(self) -> list[MeasureRequest]:
        """Running first, then queued, in order."""
        return ([self._running] if self._running else []) + list(self._queue)

    def measure(
        self,
        pipeline: Pipeline,
        schedule: Schedule | None,
        label: str,
        autoscheduler: str | None = None,
        force: bool = False,
        peers: bool = False,
    ) -> MeasureRequest:
        """Queue a measurement (it starts at once when nothing runs). `force`: measure even
        when a result is stored; `peers`: time ONNX Runtime / PyTorch right after it."""
        if self._closed:
            raise RuntimeError("the measurement service is shut down")
        # A snapshot: the document's schedule may be edited while this one waits or runs.
        snap = schedule.copy() if schedule is not None and not autoscheduler else None
        req = MeasureRequest(self._next_id, pipeline, snap, label, autoscheduler=autoscheduler, force=force, peers=peers)
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
        if self._running is not None and self._job is not None and request_id in (None, self._running.id):
            self._job.cancel.set()
        elif removed and not self.busy:
            self.busy_changed.emit(False)
        for req in removed:
            self._emit_cancelled(req)

    def forget(self, pipeline: Pipeline) -> None:
        """Clear the stored results of `pipeline` on the measurement thread (after the running
        measurement, whose result would otherwise be stored again); `forgotten` says how it went."""
        if self._closed:
            raise RuntimeError("the measurement service is shut down")
        self._background.submit(lambda _job: self._measurer.forget(pipeline), lambda out: self._on_forgotten(pipeline, out))

    def _on_forgotten(self, pipeline: Pipeline, out: Outcome) -> None:
        if not self._closed:
            self.forgotten.emit(pipeline, out.error_text if out.error is not None else out.value)

    def drop_queued(self, which: Callable[[MeasureRequest], bool]) -> None:
        """Forget queued requests that no longer matter (e.g. an older edit's), silently."""
        self._queue = [r for r in self._queue if not which(r)]

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel what runs, close the runner and database in their thread, and join it.
        Idempotent; returns whether the thread ended within the timeout."""
        if self._closed:
            return not self.running
        self._closed = True
        self._queue.clear()
        # Cancels what runs; then the runner and database are closed on their own thread.
        return self._background.shutdown(timeout_ms / 1000, finally_=self._measurer.close)

    def _dispatch(self) -> None:
        if self._running is not None or not self._queue or self._closed:
            return
        req = self._running = self._queue.pop(0)
        self.started.emit(req)
        self._job = self._background.submit(lambda job: self._measurer.measure(req, job), lambda out: self._on_finished(req, out))

    def _emit_cancelled(self, req: MeasureRequest) -> None:
        self.finished.emit(req, _failed(req, NOT_STARTED), True)

    def _on_finished(self, request: MeasureRequest, out: Outcome) -> None:
        if self._closed or self._running is None or request.id != self._running.id:
            return
        if out.error is not None:  # anything raised reaches the panel as a failed measurement
            m = _failed(request, out.error_text)
        elif out.value is None:  # cancelled before the thread picked it up
            m = _failed(request, NOT_STARTED)
        else:
            m, peers = out.value
            if peers is not None:
                self.peers_measured.emit(request, PeersResult(m, peers))
        cancelled = out.cancelled and not m.ok
        self._running = self._job = None
        if not self._queue:
            self.busy_changed.emit(False)
        self.finished.emit(request, m, cancelled)
        self._dispatch()  # the next one (a slot above may have queued it already)
