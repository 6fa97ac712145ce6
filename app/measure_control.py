"""When to measure: on request, after edits (debounced, so a burst of edits costs one
measurement), and Halide's Adams2019 baseline on request. Results go to the session
history; the measurement itself runs in the MeasureService's thread."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from engine.ir import Pipeline
from engine.measure import Measurement, autoscheduler_key

from .model.document import Document
from .model.history import SessionHistory
from .workers import MeasureRequest, MeasureService, PeersResult

AUTO_MEASURE_MS = 800
ADAMS = "Adams2019"


class MeasureController(QObject):
    adams_changed = Signal(bool)  # an Adams2019 measurement is queued or running
    forgotten = Signal(str)  # the stored results of the open pipeline were cleared: what happened, in words

    def __init__(self, doc: Document, history: SessionHistory, service: MeasureService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.doc, self.history, self.service = doc, history, service
        self.auto = True
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(AUTO_MEASURE_MS)
        self.timer.timeout.connect(self._auto_measure)
        self.adams_request: MeasureRequest | None = None
        self.auto_peers = True  # an imported model's first measurement also times its peers
        service.finished.connect(self._on_finished)
        service.peers_measured.connect(self._on_peers)
        service.forgotten.connect(self._on_forgotten)

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

    def measure_current(self, force: bool = False, peers: bool | None = None) -> MeasureRequest | None:
        """Queue the document's schedule, unless it is already queued or running. `force`
        ("Measure again"): run the worker even when a result is stored. `peers`: time ONNX
        Runtime and PyTorch in the same run; by default on an imported model's first
        measurement of the session, so the panel can show them beside the schedule."""
        doc = self.doc
        if doc.pipeline is None or self.is_queued(doc.schedule_hash):
            return None
        if peers is None:
            peers = self.auto_peers and doc.is_model and self.history.peers_of is None and not self._peers_queued()
        return self.service.measure(doc.pipeline, doc.schedule, doc.title, force=force, peers=peers)

    def _peers_queued(self) -> bool:
        return any(r.peers for r in self.service.pending())

    def clear_stored(self) -> bool:
        """Clear the database's results for the open pipeline (every schedule; others' are kept)
        and the session's; the service reports through `forgotten`."""
        if self.doc.pipeline is None:
            return False
        self.service.forget(self.doc.pipeline)
        return True

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
        # "vs Adams2019" needs the current schedule's time too.
        if self.history.measurement(self.doc.schedule_hash) is None:
            self.measure_current()
        name = p.name + (f" ({self.doc.size})" if self.doc.is_builtin else "")
        self.adams_request = self.service.measure(p, None, f"{name} · Halide {ADAMS}", autoscheduler=ADAMS)
        self.adams_changed.emit(True)
        return self.adams_request

    def autoschedule(self, name: str) -> MeasureRequest | None:
        """Queue one of Halide's autoschedulers on this pipeline (Adams2019 goes through
        `compare_adams`); its measurement carries the schedule source it produced."""
        if name == ADAMS:
            return self.compare_adams()
        p = self.doc.pipeline
        key = autoscheduler_key(name)
        if p is None or any(r.schedule_key == key for r in self.service.pending()):
            return None
        return self.service.measure(p, None, f"{p.name} · Halide {name}", autoscheduler=name)

    def cancel_adams(self) -> None:
        if self.adams_request is not None:
            self.service.cancel(self.adams_request.id)

    @Slot(object, object, bool)
    def _on_finished(self, request: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        self.history.attach(m, cancelled)
        if self.adams_request is not None and request.id == self.adams_request.id:
            self.adams_request = None
            self.adams_changed.emit(False)

    @Slot(object, object)
    def _on_peers(self, _request: MeasureRequest, result: PeersResult) -> None:
        self.history.attach_peers(result.measurement, result.timings)

    @Slot(object, object)
    def _on_forgotten(self, pipeline: Pipeline, result: object) -> None:
        if isinstance(result, str):  # the database could not be changed: nothing was forgotten
            self.forgotten.emit(f"Could not clear the stored results of {pipeline.name}: {result}")
            return
        gone, failed = result if isinstance(result, tuple) else (0, 0)
        if pipeline.content_hash() == self.history.pipeline_hash:
            self.history.forget_measurements()
        self.forgotten.emit(
            f"Cleared the stored results of {pipeline.name}: {gone} measurement{'s' if gone != 1 else ''}, "
            f"{failed} failure record{'s' if failed != 1 else ''}"
        )
