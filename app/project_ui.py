"""The window side of project files: Open/Save/Save As, recent files (QSettings), notes,
dropping a file on the window, and the unsaved-changes question on close."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QSettings, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QPlainTextEdit

from engine import api
from engine.schedule import ScheduleError

from .folders import remember_folder, start_folder
from .model import project
from .model.history import Variant
from .model.project import SUFFIX, ProjectError
from .schedule_files import is_schedule_file

if TYPE_CHECKING:
    from .main_window import MainWindow

RECENT_KEY, MAX_RECENT = "recentProjects", 8
FILTER = f"Schedule Explorer project (*{SUFFIX});;JSON (*.json);;All files (*)"


class ProjectController(QObject):
    recent_changed = Signal()  # the recent-projects list was written (the start page shows it)

    def __init__(self, window: MainWindow, settings: tuple[str, str]) -> None:
        super().__init__(window)
        self.w = window
        self.settings = settings
        self.path: Path | None = None
        self.notes = QPlainTextEdit()
        self.notes.setObjectName("notes")
        self.notes.setPlaceholderText("Notes on this pipeline and its schedules (saved in the project file)")
        self.open_action = self._action("Open &Project…", self.open_dialog, "Ctrl+Shift+O", "Open a saved project")
        self.save_action = self._action("&Save Project", self.save, QKeySequence.StandardKey.Save, "Save the session as a project")
        self.save_as_action = self._action("Save Project &As…", self.save_as, "Ctrl+Shift+S", "Save the session to a new project file")
        self.recent_menu = QMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)

    def _action(self, text: str, slot: Callable[[], object], shortcut: str | QKeySequence | QKeySequence.StandardKey, tip: str) -> QAction:
        a = QAction(text, self.w)
        a.setShortcut(QKeySequence(shortcut))
        a.setStatusTip(tip)
        a.triggered.connect(lambda: slot())  # not slot(checked): save_as takes an optional path
        return a

    # --- state ------------------------------------------------------------------------
    def detach(self) -> None:
        """Another pipeline was opened: the session no longer belongs to the project file."""
        self.path = None
        self.notes.clear()
        self.notes.document().setModified(False)

    @property
    def dirty(self) -> bool:
        """Edits or notes not in a project file yet."""
        return not self.w.undo_stack.isClean() or self.notes.document().isModified()

    def _mark_saved(self) -> None:
        self.w.undo_stack.setClean()
        self.notes.document().setModified(False)

    def recent(self) -> list[str]:
        value = QSettings(*self.settings).value(RECENT_KEY, [])
        if isinstance(value, str):  # QSettings hands back a one-element list as a plain string
            return [value]
        return [str(v) for v in value] if isinstance(value, list) else []  # None: an empty list was stored

    def add_recent(self, path: Path) -> None:
        """A project or model was opened or saved: first in the recent list."""
        self._set_recent([str(path)] + [p for p in self.recent() if p != str(path)])

    def forget_recent(self, path: str) -> None:
        """Drop a path from the recent list (e.g. a file that was moved or deleted)."""
        self._set_recent([p for p in self.recent() if p != path])

    def _set_recent(self, items: list[str]) -> None:
        QSettings(*self.settings).setValue(RECENT_KEY, items[:MAX_RECENT])
        self.recent_changed.emit()

    @Slot()
    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = [p for p in self.recent() if Path(p).exists()]
        for p in items:
            self.recent_menu.addAction(Path(p).name, self._opener(Path(p))).setStatusTip(p)
        if not items:
            self.recent_menu.addAction("No recent files").setEnabled(False)

    def _opener(self, path: Path) -> Callable[[], object]:
        return lambda: self.w.open_file(path)  # a project or an imported model

    # --- saving -----------------------------------------------------------------------
    @Slot()
    def save(self) -> bool:
        return self.save_as(self.path) if self.path is not None else self.save_as()

    def save_as(self, path: Path | None = None) -> bool:
        """Save to `path` (asking for one when None); False if cancelled or it failed."""
        if self.w.doc.pipeline is None:
            return False
        if path is None:
            start = str(start_folder(self.settings) / f"{self.w.doc.pipeline.name}{SUFFIX}")
            chosen, _ = QFileDialog.getSaveFileName(self.w, "Save project", start, FILTER)
            if not chosen:
                return False
            path = Path(chosen)
            remember_folder(self.settings, path)
            if not path.suffix:
                path = path.with_suffix(SUFFIX)
        try:
            project.save(path, self.w.doc, self.w.history, self.notes.toPlainText())
        except OSError as exc:
            QMessageBox.warning(self.w, "Cannot save project", f"{path}: {exc.strerror or exc}")
            return False
        self.path = path
        self._mark_saved()
        self.add_recent(path)
        self.w.statusBar().showMessage(f"Saved {path}", 5000)
        self.w.update_title()
        return True

    def maybe_save(self) -> bool:
        """Before the session is discarded: True to go on (saved, or the user said discard)."""
        if not self.dirty or not self.w.ask_to_save:
            return True
        answer = QMessageBox.question(
            self.w,
            "Unsaved changes",
            "This session has schedule edits or notes that are not saved in a project. Save them?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Save,
        )
        if answer == QMessageBox.StandardButton.Save:
            return self.save()
        return answer == QMessageBox.StandardButton.Discard

    # --- opening ----------------------------------------------------------------------
    @Slot()
    def open_dialog(self) -> None:
        chosen, _ = QFileDialog.getOpenFileName(self.w, "Open project", str(start_folder(self.settings)), FILTER)
        if chosen:
            remember_folder(self.settings, Path(chosen))
            self.open(Path(chosen))

    def open(self, path: Path) -> bool:
        """Open a project file: its pipeline, current schedule, variants, measurements, notes."""
        if not self.maybe_save():
            return False
        try:
            pr = project.load(path)
            w = self.w
            # project.load validated its schedule (or fell back to the default): no second validation
            w.doc.load(pr.pipeline, pr.pipeline_spec, pr.size, pr.schedule_spec, pr.schedule, pr.spec_hash or None, validated=True)
        except (ProjectError, ScheduleError, api.InputError) as exc:
            QMessageBox.warning(self.w, "Cannot open project", str(exc))
            return False
        # The document's change recorded the current schedule first; the saved order wins.
        w.history.reset(pr.pipeline)
        w.history.restore(pr.variants, pr.measurements)
        w.history.record(w.doc.schedule, w.doc.change_label, w.doc.schedule_spec, w.doc.prediction)
        self.notes.setPlainText(pr.notes)
        self.path = path
        self._mark_saved()
        self.add_recent(path)
        w.update_title()
        note = _invalid_note(pr, w.history.variants)
        if note:
            w.statusBar().showMessage(f"{path.name}: {note}")  # no timeout: it stays until the next message
        return True

    def open_dropped(self, paths: list[Path]) -> bool:
        """A file dropped on the window: a project, a schedule for the open pipeline, else a
        pipeline JSON or an ONNX model."""
        for path in paths:
            if project.is_project(path):
                return self.open(path)
            if is_schedule_file(path):
                return self.w.measure_actions.files.open_file(path)
            if path.suffix == ".json" or path.suffix.lower() == ".onnx":
                return self.w.open_pipeline(str(path))
        return False


def _invalid_note(pr: project.Project, variants: list[Variant]) -> str:
    """What of a project no longer applies to its pipeline ("" when everything does)."""
    parts = []
    if pr.schedule_error:
        parts.append(f"the saved schedule no longer applies, showing the default ({pr.schedule_error})")
    bad = [str(v.number) for v in variants if v.invalid]
    if bad:
        parts.append(f"variants that no longer apply to the pipeline (restoring one says why): {', '.join(bad)}")
    return "; ".join(parts)
