"""Halide's lowered Stmt for the current schedule, computed off the GUI thread and only
while someone looks at it (lowering takes a fraction of a second for the zoo, longer for
big pipelines, and is not needed for anything else)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from engine import isolated
from engine.ir import Pipeline
from engine.schedule import Schedule

from .background import Background, Outcome


def lowered_stmt(p: Pipeline, s: Schedule) -> str:
    """Lowered in a child process: a schedule that crashes Halide's compiler cannot take the app down."""
    return isolated.lowered_stmt(p, s)


class StmtLoader(QObject):
    """`request(p, s)` lowers in a worker thread; `ready(key, text)` arrives on the GUI
    thread. Only the latest request's result is delivered (older ones still waiting never run)."""

    ready = Signal(str, str)  # key (pipeline hash + schedule hash), text

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background("stmt", latest_only=True, parent=self)
        self.latest = ""
        self.busy = False

    @staticmethod
    def key(p: Pipeline, s: Schedule) -> str:
        return f"{p.content_hash()}:{s.content_hash()}"

    def request(self, p: Pipeline, s: Schedule) -> str:
        key = self.key(p, s)
        if key == self.latest:
            return key
        self.latest, self.busy = key, True
        snap = s.copy()
        self._background.submit(lambda _job: lowered_stmt(p, snap), lambda out: self._deliver(key, out))
        return key

    def _deliver(self, key: str, out: Outcome) -> None:
        if key != self.latest:
            return
        # Halide's message is what the user needs to see.
        text = out.value if out.error is None else f"# Halide could not lower this schedule:\n# {out.error_text}\n"
        self.busy = False
        self.ready.emit(key, text)

    def shutdown(self) -> None:
        self._background.shutdown()
