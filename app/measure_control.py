"""When to measure: on request, after edits (debounced, so a burst of edits costs one
measurement), and Halide's Adams2019 baseline on request. Results go to the session
history; the measurement itself runs in the MeasureService's thread."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from engine.measure import Measurement

from .model.document import Document
from .model.history import SessionHistory
from .workers import MeasureRequest, MeasureService

AUTO_MEASURE_MS = 800
ADAMS = "Adams2019"


class MeasureController(QObject):
    adams_changed = Signal(bool)  # an Adams2019 measurement is queued or running

    def __init__(self, doc: Document, history: SessionHistory, service: MeasureService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.doc, self.history, self.service = doc, history, service
        self.auto = True
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(AUTO_MEASURE_MS)
        self.timer.timeout.connect(self._auto_measure)
        self.adams_request: MeasureRequest | None = None
        service.finished.connect(self._on_finished)

    def set_auto(self, on: bool) -> None:
        self.auto = on
        if not on:
            self.timer.stop()

    @Slot()
    def schedule_edited(self) -> None:
        """Called after every edit, undo and redo: (re)start the debounce timer."""
        if self.auto:
            self.timer.start()

    def is_queued(self, schedule_hash: str) -> bool:
        ph = self.doc.pipeline.content_hash() if self.doc.pipeline is not None else ""
        return any(r.schedule_key == schedule_hash and r.pipeline.content_hash() == ph for r in self.service.pending())

    def measure_current(self) -> MeasureRequest | None:
        """Queue the document's schedule, unless it is already queued or running."""
        doc = self.doc
        if doc.pipeline is None or self.is_queued(doc.schedule_hash):
            return None
        return self.service.measure(doc.pipeline, doc.schedule, doc.title)

    @Slot()
    def _auto_measure(self) -> None:
        if not self.auto or self.doc.pipeline is None or self.history.measurement(self.doc.schedule_hash) is not None:
            return
        # An older edit still waiting in the queue is not worth measuring any more.
        self.service.drop_queued(lambda r: r.autoscheduler is None and r.schedule_key != self.doc.schedule_hash)
        self.measure_current()

    # --- Halide's Adams2019 baseline --------------------------------------------------
    def compare_adams(self) -> MeasureRequest | None:
        """Queue Halide's Adams2019 on this pipeline, after the default schedule when that
        has no measurement yet (both are the baselines speedups are quoted against)."""
        p = self.doc.pipeline
        if p is None or self.adams_request is not None:
            return None
        if self.history.baseline_ms("default") is None and not self.is_queued(self.history.default_hash):
            self.service.measure(p, self.doc.load_spec("default"), f"{p.name} · default")
        name = p.name + (f" ({self.doc.size})" if self.doc.is_builtin else "")
        self.adams_request = self.service.measure(p, None, f"{name} · Halide {ADAMS}", autoscheduler=ADAMS)
        self.adams_changed.emit(True)
        return self.adams_request

    def cancel_adams(self) -> None:
        if self.adams_request is not None:
            self.service.cancel(self.adams_request.id)

    @Slot(object, object, bool)
    def _on_finished(self, request: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        self.history.attach(m, cancelled)
        if self.adams_request is not None and request.id == self.adams_request.id:
            self.adams_request = None
            self.adams_changed.emit(False)
