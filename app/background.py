"""Work off the GUI thread: the one helper the measurement queue, the search and the Stmt
loading share.

A `Background` owns one worker thread and runs the callables handed to `submit` on it, one
at a time, in the order they came. Everything a caller hears back arrives on the GUI
thread through one queued signal, in the order it was sent: progress reports while the
callable runs, then its `Outcome` (the value or the exception it raised, never both).
Each job gets its own cancel `Event` (the callable decides how to stop early); a job
cancelled before it starts never runs. With `latest_only`, a new submission supersedes the
older ones: those still waiting never run, and only the newest job's outcome and
progress are delivered.

One thread, not a pool, because the callers keep thread-bound state between jobs (an
SQLite connection belongs to the thread that opened it; a warm worker process is reused
for the next measurement) and `shutdown(finally_=...)` closes it on that same thread.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot


@dataclass(frozen=True)
class Job:
    """What the callable gets: its id, its cancel flag and how to report progress (any
    plain record; it reaches `on_progress` on the GUI thread)."""

    id: int
    cancel: threading.Event
    report: Callable[[Any], None]


@dataclass(frozen=True)
class Outcome:
    """How a job ended: `value` when it returned, `error` when it raised; `cancelled` when
    its cancel flag was set by then (the value may still be a partial result)."""

    id: int
    value: Any = None
    error: BaseException | None = None
    cancelled: bool = False

    @property
    def error_text(self) -> str:
        """The exception as one line ("" when it returned)."""
        return "" if self.error is None else f"{type(self.error).__name__}: {self.error}"


@dataclass
class _Entry:
    job: Job
    fn: Callable[[Job], Any]
    on_done: Callable[[Outcome], None] | None
    on_progress: Callable[[Any], None] | None


_STOP = object()  # the worker thread's last queue item


class Background(QObject):
    """One worker thread; `submit(fn)` runs `fn(job)` there and calls `on_done(outcome)`
    (and `on_progress(record)` for each report) on the GUI thread."""

    _post = Signal(object)  # ("progress", id, record) or ("done", Outcome), from the worker thread

    def __init__(self, name: str, latest_only: bool = False, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.latest_only = latest_only
        self._entries: dict[int, _Entry] = {}  # submitted and not delivered yet (GUI thread only)
        self._latest = 0
        self._next_id = 1
        self._closed = False
        # The worker thread reads only what comes through this queue (entries, shutdown's
        # `finally_`, the stop mark); `_entries` belongs to the GUI thread.
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started on the first submission
        # Queued even within one thread: a caller never hears back inside its own `submit`.
        self._post.connect(self._on_post, Qt.ConnectionType.QueuedConnection)

    @property
    def alive(self) -> bool:
        """Whether the worker thread runs (False before the first job and after shutdown)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def busy(self) -> bool:
        """Something submitted has not been delivered yet."""
        return bool(self._entries)

    def submit(
        self,
        fn: Callable[[Job], Any],
        on_done: Callable[[Outcome], None] | None = None,
        on_progress: Callable[[Any], None] | None = None,
    ) -> Job:
        """Queue `fn` behind what is already queued; returns its `Job` (id and cancel flag)."""
        if self._closed:
            raise RuntimeError(f"the {self.name} background thread is shut down")
        job_id = self._next_id
        self._next_id += 1
        job = Job(job_id, threading.Event(), lambda record: self._post.emit(("progress", job_id, record)))
        if self.latest_only:
            for old in self._entries.values():
                old.job.cancel.set()  # superseded: its result would not be delivered anyway
        entry = _Entry(job, fn, on_done, on_progress)
        self._entries[job_id] = entry
        self._latest = job_id
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"schedule-explorer-{self.name}", daemon=True)
            self._thread.start()
        self._queue.put(entry)
        return job

    def cancel(self, job_id: int | None = None) -> None:
        """Set the cancel flag of one job, or with no id of every job not delivered yet."""
        for e in list(self._entries.values()):
            if job_id is None or e.job.id == job_id:
                e.job.cancel.set()

    def shutdown(self, timeout_s: float = 30.0, finally_: Callable[[], None] | None = None) -> bool:
        """Cancel everything, run `finally_` on the worker thread after the running job (to
        close what the jobs kept there), and join the thread. Nothing is delivered
        afterwards. Idempotent; returns whether the thread ended within the timeout."""
        if self._closed:
            return not self.alive
        self._closed = True
        self.cancel()
        if self._thread is None:
            if finally_ is not None:
                finally_()
            return True
        if finally_ is not None:
            self._queue.put(finally_)
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        ended = not self._thread.is_alive()
        if not ended:
            print(f"schedule-explorer: the {self.name} thread did not stop in time", file=sys.stderr)
        return ended

    # --- the worker thread ---------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if not isinstance(item, _Entry):  # shutdown's finally_
                self._run_finally(item)
                continue
            entry = item
            if entry.job.cancel.is_set():  # cancelled or superseded before it started: never runs
                self._post.emit(("done", Outcome(entry.job.id, cancelled=True)))
                continue
            value: Any = None
            error: BaseException | None = None
            try:
                value = entry.fn(entry.job)
            except Exception as exc:  # noqa: BLE001  # delivered to the caller, which shows it; the thread lives on
                error = exc
            self._post.emit(("done", Outcome(entry.job.id, value, error, entry.job.cancel.is_set())))

    def _run_finally(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001  # closing must not keep the thread from ending
            print(f"schedule-explorer: closing the {self.name} thread: {type(exc).__name__}: {exc}", file=sys.stderr)

    # --- the GUI thread ------------------------------------------------------------------

    @Slot(object)
    def _on_post(self, message: tuple[Any, ...]) -> None:
        if self._closed:
            self._entries.clear()
            return
        if message[0] == "progress":
            _, job_id, record = message
            entry = self._entries.get(job_id)
            if entry is not None and entry.on_progress is not None and self._wanted(job_id):
                entry.on_progress(record)
            return
        outcome: Outcome = message[1]
        entry = self._entries.pop(outcome.id, None)
        if entry is not None and entry.on_done is not None and self._wanted(outcome.id):
            entry.on_done(outcome)

    def _wanted(self, job_id: int) -> bool:
        return not self.latest_only or job_id == self._latest
