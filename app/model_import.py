"""Model import off the GUI thread, with progress, a busy cursor and Cancel.

`ModelImporter.run` hands the import (engine.frontends.import_onnx, then the schedule the
model opens with: the rule-based one by default, which takes a second on a ResNet-50) to
its own `Background` thread and waits in a local event loop, so the window keeps painting
and the progress dialog's Cancel button works; callers still get the outcome as a return
value. Cancel abandons the import at once: its result, when the thread finishes, is
dropped, and the document the window shows is never touched.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QElapsedTimer, QEventLoop, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QApplication, QProgressDialog, QWidget

from engine import api
from engine.schedule import Schedule

from .background import Background, Job, Outcome
from .model.document import load_schedule

SHOW_AFTER_MS = 300  # a small model imports in a fraction of a second: no dialog flashes up


@dataclass(frozen=True)
class ImportedModel:
    """A model imported and its opening schedule chosen, ready for Document.load."""

    result: Any  # engine.frontends.common.ImportResult (pipeline and report)
    schedule_spec: str
    schedule: Schedule
    note: str | None  # why the schedule fell back to the default, if it did
    thread: str  # the thread that imported it (never the GUI thread)


@dataclass(frozen=True)
class ImportOutcome:
    """How `run` ended: `model` when imported, `error` (one line) when it failed, neither when cancelled."""

    model: ImportedModel | None = None
    error: str = ""

    @property
    def cancelled(self) -> bool:
        return self.model is None and not self.error


def _import(path: Path, wanted: str, job: Job) -> ImportedModel | None:
    """On the import thread: import, then choose the schedule (between them a cancel stops it)."""
    from engine.frontends import import_model  # noqa: PLC0415  # onnx / tensorflow load only when used

    job.report(f"Importing {path.name}: reading the model and mapping its operators…")
    result = import_model(path)
    if job.cancel.is_set():
        return None
    job.report(f"Choosing the {wanted} schedule for {len(result.pipeline.stages)} stages…")
    note = None
    try:
        sched = load_schedule(result.pipeline, wanted)
    except api.InputError as exc:
        note = f"{exc}; showing the default schedule"
        wanted, sched = "default", load_schedule(result.pipeline, "default")
    return ImportedModel(result, wanted, sched, note, threading.current_thread().name)


class ModelImporter(QObject):
    """One import at a time, on its own thread; `run` returns when it ends or is cancelled."""

    progress = Signal(str)  # what the import is doing now
    finished = Signal(object)  # ImportOutcome

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background("import", parent=self)
        self._job: Job | None = None
        self._loop: QEventLoop | None = None
        self._outcome: ImportOutcome | None = None
        self.dialog: QProgressDialog | None = None

    @property
    def busy(self) -> bool:
        return self._loop is not None

    def run(self, path: Path, wanted: str, parent: QWidget | None = None) -> ImportOutcome:
        """Import `path` off the GUI thread; the window stays responsive meanwhile."""
        if self._loop is not None:
            return ImportOutcome(error=f"{path.name}: another model is being imported; wait for it or cancel it")
        self._outcome = None
        loop = self._loop = QEventLoop()
        dialog = self.dialog = QProgressDialog(f"Importing {path.name}…", "Cancel", 0, 0, parent)
        dialog.setWindowTitle("Importing model")
        dialog.setObjectName("import_progress")
        dialog.setWindowModality(Qt.WindowModality.WindowModal)  # the window paints; only Cancel takes input
        dialog.setMinimumDuration(SHOW_AFTER_MS)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.canceled.connect(self.cancel)
        dialog.setValue(0)  # starts the dialog's own timer: shown once the import has taken SHOW_AFTER_MS
        clock = QElapsedTimer()
        clock.start()
        stage = [f"Importing {path.name}…"]
        live = [True]  # progress still queued when `run` has returned is dropped
        tick = QTimer(self)
        tick.setInterval(200)
        tick.timeout.connect(lambda: dialog.setLabelText(f"{stage[0]}\n{clock.elapsed() / 1000:.1f} s"))
        tick.start()

        def on_progress(text: object) -> None:
            if not live[0]:
                return
            stage[0] = str(text)
            dialog.setLabelText(f"{stage[0]}\n{clock.elapsed() / 1000:.1f} s")
            self.progress.emit(stage[0])

        QApplication.setOverrideCursor(Qt.CursorShape.BusyCursor)
        try:
            self._job = self._background.submit(lambda job: _import(path, wanted, job), self._on_done, on_progress)
            if self._outcome is None:
                loop.exec()
        finally:
            live[0] = False
            QApplication.restoreOverrideCursor()
            tick.stop()
            tick.deleteLater()
            dialog.canceled.disconnect(self.cancel)
            dialog.reset()  # stops that timer: a finished import's dialog never shows late
            dialog.close()
            dialog.deleteLater()
            self.dialog = None
            self._loop = self._job = None
        outcome = self._outcome or ImportOutcome()
        self.finished.emit(outcome)
        return outcome

    def cancel(self) -> None:
        """Abandon the running import: `run` returns at once, its result is dropped."""
        if self._job is None or self._loop is None:
            return
        self._job.cancel.set()
        self._outcome = ImportOutcome()
        self._loop.quit()

    def _on_done(self, out: Outcome) -> None:
        job = self._job
        if job is None or out.id != job.id or job.cancel.is_set():
            return  # cancelled (or from an earlier, abandoned import): dropped
        if out.error is not None:
            self._outcome = ImportOutcome(error=str(out.error) if _is_import_error(out.error) else out.error_text)
        elif out.value is None:
            self._outcome = ImportOutcome()
        else:
            self._outcome = ImportOutcome(model=out.value)
        if self._loop is not None:
            self._loop.quit()

    def shutdown(self) -> None:
        """Cancel a running import and let its thread go (an import cannot be interrupted
        midway: the daemon thread ends with it or with the process)."""
        self.cancel()
        self._background.shutdown(timeout_s=0.2)


def _is_import_error(exc: BaseException) -> bool:
    """The importer's own errors already name the file and what is wrong."""
    from engine.frontends import ModelImportError  # noqa: PLC0415

    return isinstance(exc, (ModelImportError, api.InputError))
