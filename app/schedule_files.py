"""Schedules as files, and the schedules Halide's autoschedulers produced.

File → Open Schedule… applies a schedule JSON (what Save Schedule…, the Schedule tab's
export and `search --out` write) to the open pipeline as one undoable step; File → Open
recognises such a file and does the same instead of reading it as a pipeline. A file that
cannot be used changes nothing and is one message naming the file and what is wrong.

The autoschedulers (Measure → Halide Autoschedulers) are measured like any schedule; the
Halide scheduling source each produced is shown in a dialog (copy or save it), and Apply
reads it back into this app's directives (engine/halide_source.py) as one undoable edit,
which is then measured like any other schedule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QFontDatabase, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from engine import api
from engine.halide_backend import AUTOSCHEDULERS
from engine.halide_source import SourceError, from_halide_source
from engine.measure import autoscheduler_key
from engine.schedule import ScheduleError

from .code_view import atomic_write
from .folders import remember_folder, start_folder
from .model.commands import ScheduleCommand, UseSchedule

if TYPE_CHECKING:
    from .main_window import MainWindow

SCHEDULE_FILTER = "Schedule JSON (*.json);;All files (*)"
SNIFF_BYTES = 64 * 1024 * 1024  # a schedule file is small; a larger .json is a pipeline (or neither)


def is_schedule_file(path: Path) -> bool:
    """Whether a .json file holds a schedule (a 'stages' object, no pipeline 'inputs'),
    not a pipeline. Anything unreadable is not a schedule (the pipeline loader then says why)."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        if path.stat().st_size > SNIFF_BYTES:
            return False
        body = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(body, dict) and isinstance(body.get("stages"), dict) and "inputs" not in body


def load_schedule_file(w: MainWindow, path: Path) -> str | None:
    """Apply a schedule file to the open pipeline as one undoable step; returns None, or
    the one-line reason nothing changed."""
    doc = w.doc
    if doc.pipeline is None:
        return f"{path}: open a pipeline first; a schedule file applies to the pipeline it was written for"
    spec = str(path)
    added = spec not in w.extra_schedules
    if added:
        w.extra_schedules.append(spec)  # the schedule combo offers it from now on (it re-fills on the change)
    try:
        w.undo_stack.push(UseSchedule(doc, spec))
    except (api.InputError, ScheduleError) as exc:
        if added:
            w.extra_schedules.remove(spec)
        return f"{path.name} does not apply to {doc.pipeline.name}: {exc}"
    w.preferred_schedule, w.schedule_explicit = spec, True
    return None


def save_schedule_file(w: MainWindow, path: Path) -> str | None:
    """Write the current schedule as JSON (atomically); None, or why it was not written."""
    if w.doc.pipeline is None:
        return "no pipeline is open"
    try:
        atomic_write(path, w.doc.schedule.dumps() + "\n")
    except OSError as exc:
        return f"{path}: cannot be written ({exc.strerror or exc})"
    return None


class ScheduleFiles:
    """The File menu's Open Schedule… / Save Schedule… and the autoscheduler schedule viewer."""

    def __init__(self, w: MainWindow, settings: tuple[str, str]) -> None:
        self.w = w
        self.settings = settings  # where the last folder used is remembered (app/folders.py)
        self.open_action = QAction("Open &Schedule…", w)
        self.open_action.setShortcut(QKeySequence("Ctrl+Alt+O"))  # Ctrl+Shift+O is Open Project…
        self.open_action.setStatusTip("Apply a schedule JSON file to the open pipeline (undoable)")
        self.open_action.triggered.connect(self.open_dialog)
        self.save_action = QAction("Save Sc&hedule…", w)
        self.save_action.setShortcut(QKeySequence("Ctrl+Alt+S"))
        self.save_action.setStatusTip("Write the current schedule as JSON (opens again with Open Schedule…, or `measure --schedule FILE`)")
        self.save_action.triggered.connect(self.save_dialog)

    def _start_dir(self) -> str:
        return str(start_folder(self.settings))

    def open_file(self, path: Path) -> bool:
        """Apply `path`; a file that does not apply is one warning and changes nothing."""
        why = load_schedule_file(self.w, path)
        if why is not None:
            QMessageBox.warning(self.w, "Cannot open schedule", why)
            return False
        remember_folder(self.settings, path)
        self.w.statusBar().showMessage(f"Applied schedule {path.name} (Undo puts the previous one back)", 8000)
        return True

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.w, "Open Schedule", self._start_dir(), SCHEDULE_FILTER)
        if path:
            self.open_file(Path(path))

    def save(self, path: Path) -> bool:
        why = save_schedule_file(self.w, path)
        if why is not None:
            QMessageBox.warning(self.w, "Cannot save schedule", why)
            return False
        remember_folder(self.settings, path)
        self.w.statusBar().showMessage(f"Saved the schedule to {path}", 8000)
        return True

    def save_dialog(self) -> None:
        doc = self.w.doc
        if doc.pipeline is None:
            return
        start = str(Path(self._start_dir()) / f"{doc.pipeline.name}_schedule.json")
        path, _ = QFileDialog.getSaveFileName(self.w, "Save Schedule", start, SCHEDULE_FILTER)
        if path:
            self.save(Path(path if path.lower().endswith(".json") else path + ".json"))

    # --- Halide's autoschedulers ----------------------------------------------------------
    def autoscheduler_source(self, name: str) -> str:
        """The Halide source `name` produced for the open pipeline this session, or ""."""
        m = self.w.history.measurement(autoscheduler_key(name))
        return m.schedule_source if m is not None else ""

    def show_autoscheduler(self, name: str) -> AutoscheduleDialog | None:
        """Show the schedule an autoscheduler produced; not run yet: run it (the dialog then
        comes when asked again, once the measurement is in)."""
        source = self.autoscheduler_source(name)
        if not source:
            self.w.measure_control.autoschedule(name)
            self.w.statusBar().showMessage(f"Running Halide's {name} on this pipeline; its schedule is shown once measured", 8000)
            return None
        dialog = AutoscheduleDialog(name, source, self.w)
        dialog.apply_clicked.connect(lambda: self.apply_autoscheduler(name))
        dialog.show()
        return dialog

    def apply_autoscheduler(self, name: str) -> str | None:
        """Apply the schedule `name` produced, read back into directives, as one undoable
        edit; returns None, or why nothing changed (also shown as a warning)."""
        doc, source = self.w.doc, self.autoscheduler_source(name)
        if doc.pipeline is None or not source:
            why = f"Halide's {name} has not scheduled this pipeline yet"
        else:
            try:
                sched, notes = from_halide_source(doc.pipeline, source)
                self.w.undo_stack.push(ScheduleCommand(doc, sched, f"apply Halide {name}'s schedule"))
            except (SourceError, ScheduleError, api.InputError) as exc:
                why = f"{name}'s schedule cannot be applied: {exc}"
            else:
                dropped = f"; {len(notes)} call(s) without a directive dropped: {notes[0]}…" if notes else ""
                self.w.statusBar().showMessage(f"Applied Halide {name}'s schedule (Undo puts the previous one back){dropped}", 8000)
                return None
        QMessageBox.warning(self.w, "Cannot apply schedule", why)
        return why


class AutoscheduleDialog(QDialog):
    """The Halide scheduling source an autoscheduler produced: read, copy, save, apply."""

    apply_clicked = Signal()

    def __init__(self, name: str, source: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Halide {name} schedule")
        self.source = source
        note = QLabel(
            f"What Halide's {name} chose for this pipeline (Halide C++ scheduling calls). It was measured as "
            "“Halide " + name + "” in the performance panel. Apply reads it into this app's directives as one "
            "undoable edit (calls without a directive, such as store_in, are dropped and named)."
        )
        note.setWordWrap(True)
        self.text = QPlainTextEdit(source)
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        copy = buttons.addButton("Copy", QDialogButtonBox.ButtonRole.ActionRole)
        copy.clicked.connect(lambda: QApplication.clipboard().setText(self.source))
        save = buttons.addButton("Save…", QDialogButtonBox.ButtonRole.ActionRole)
        save.clicked.connect(self._save)
        apply = buttons.addButton("Apply as Schedule", QDialogButtonBox.ButtonRole.ApplyRole)
        apply.setObjectName("apply_autoscheduler")
        apply.clicked.connect(self.apply_clicked)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(note)
        lay.addWidget(self.text)
        lay.addWidget(buttons)
        self.resize(640, 420)

    def _save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save Halide schedule", str(Path.home() / "schedule.cpp"), "C++ (*.cpp *.h);;All (*)")
        if path:
            try:
                atomic_write(Path(path), self.source)
            except OSError as exc:
                QMessageBox.warning(self, "Cannot save", f"{path}: {exc.strerror or exc}")


AUTOSCHEDULER_NAMES = tuple(AUTOSCHEDULERS)
