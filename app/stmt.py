"""Halide's lowered Stmt for the current schedule, computed off the GUI thread and only
while someone looks at it (lowering takes a fraction of a second for the zoo, longer for
big pipelines, and is not needed for anything else)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from PySide6.QtCore import QObject, Signal, Slot

from engine import isolated
from engine.ir import Pipeline
from engine.schedule import Schedule


def lowered_stmt(p: Pipeline, s: Schedule) -> str:
    """Lowered in a child process: a schedule that crashes Halide's compiler cannot take the app down."""
    return isolated.lowered_stmt(p, s)


class StmtLoader(QObject):
    """`request(p, s)` lowers in a worker thread; `ready(key, text)` arrives on the GUI
    thread. Only the latest request's result is delivered."""

    ready = Signal(str, str)  # key (pipeline hash + schedule hash), text
    _done = Signal(str, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="schedule-explorer-stmt")
        self.latest = ""
        self.busy = False
        self._done.connect(self._deliver)  # queued across threads: delivered in the GUI thread

    @staticmethod
    def key(p: Pipeline, s: Schedule) -> str:
        return f"{p.content_hash()}:{s.content_hash()}"

    def request(self, p: Pipeline, s: Schedule) -> str:
        key = self.key(p, s)
        if key == self.latest:
            return key
        self.latest, self.busy = key, True
        snap = s.copy()
        fut = self._pool.submit(lowered_stmt, p, snap)
        fut.add_done_callback(partial(self._finished, key))
        return key

    def _finished(self, key: str, fut: Future[str]) -> None:
        try:
            text = fut.result()
        except Exception as exc:  # noqa: BLE001  # Halide's message is what the user needs to see
            text = f"# Halide could not lower this schedule:\n# {type(exc).__name__}: {exc}\n"
        self._done.emit(key, text)

    @Slot(str, str)
    def _deliver(self, key: str, text: str) -> None:
        if key == self.latest:
            self.busy = False
            self.ready.emit(key, text)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
