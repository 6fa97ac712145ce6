"""What a performance engineer reaches for, wired into the window in one place: View →
Compare Variants… (app/compare_view.py), File → Export Measurement History (CSV)… (also in
the history chart's right-click menu), the Search dock's Compare… for a candidate, and,
after a candidate is applied, its measured per-stage times: the search measured it without
a profile (to rank quickly), so the stored result is shown at once and a profiled
measurement is queued to fill in the per-stage bars."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction, QKeySequence

from engine import api
from engine.database import Database, DatabaseError
from engine.measure import Measurement, default_threads
from engine.schedule import Schedule

from . import chart_export
from .compare_view import CompareDialog
from .history_export import history_table

if TYPE_CHECKING:
    from .main_window import MainWindow


class Analysis(QObject):
    """The window's comparison dialog, history export and post-Apply profile."""

    def __init__(self, w: MainWindow) -> None:
        super().__init__(w)
        self.w = w
        from .main_window import SETTINGS_APP, SETTINGS_ORG  # noqa: PLC0415  # the window imports this module

        chart_export.use_settings((SETTINGS_ORG, SETTINGS_APP))  # exports start in the folder the window's dialogs use
        self.dialog: CompareDialog | None = None
        self.compare_action = QAction("&Compare Variants…", w)
        self.compare_action.setObjectName("compare_variants")
        self.compare_action.setShortcut(QKeySequence("Ctrl+Shift+D"))
        self.compare_action.setStatusTip("Two schedules side by side: per-stage diff, per-stage times and speedup, both loop nests")
        self.compare_action.triggered.connect(lambda: self.show_compare())
        self.history_action = QAction("Export Measurement &History (CSV)…", w)
        self.history_action.setObjectName("export_history")
        self.history_action.setStatusTip("Every schedule of this session with its prediction and measurement, as CSV")
        self.history_action.triggered.connect(self.export_history)
        view_menu, file_menu = w.chrome.view_menu, w.chrome.file_menu
        first = view_menu.actions()[0]  # the docks' toggles are there: Compare goes above them
        view_menu.insertAction(first, self.compare_action)
        view_menu.insertSeparator(first)
        quit_action = w.chrome.actions.quit
        file_menu.insertAction(quit_action, self.history_action)
        file_menu.insertSeparator(quit_action)
        w.performance.history_plot.history_table = lambda: history_table(w.history)
        w.search_panel.compare_requested.connect(self.compare_candidate)
        w.search_panel.applied.connect(self.show_applied_profile)

    # --- the comparison ---------------------------------------------------------------------
    def compare_dialog(self) -> CompareDialog:
        if self.dialog is None:
            self.dialog = CompareDialog(self.w.doc, self.w.history, self.w.search_panel.candidates, self.lookup, self.w)
            self.dialog.can_measure = True
            self.dialog.measure_requested.connect(self.measure)
        return self.dialog

    def show_compare(self, a: str | Schedule | None = None, b: str | Schedule | None = None) -> CompareDialog | None:
        if self.w.doc.pipeline is None:
            self.w.statusBar().showMessage("Open a pipeline first: Compare shows two of its schedules side by side", 6000)
            return None
        d = self.compare_dialog()
        d.select(a, b)
        d.show()
        d.raise_()
        d.activateWindow()
        return d

    @Slot(str, object)
    def compare_candidate(self, _label: str, schedule: Schedule) -> None:
        self.show_compare(CompareDialog.CURRENT, schedule)  # the candidate is among the choices, by its hash

    def lookup(self, schedule: Schedule) -> Measurement | None:
        """The database's verified result for a schedule of the open pipeline (a search
        candidate's), or None. A short read on the GUI thread, with its own connection."""
        p = self.w.doc.pipeline
        if p is None:
            return None
        try:
            with Database() as db:
                return api.stored_measurement(p, db, schedule.content_hash(), default_threads())
        except DatabaseError as exc:
            self.w.statusBar().showMessage(f"Stored results unavailable: {exc}", 8000)
            return None

    @Slot(object, str)
    def measure(self, schedule: Schedule, label: str) -> None:
        """Measure a variant with a per-stage profile; a stored result without one is redone."""
        p = self.w.doc.pipeline
        if p is None or self.w.measure_control.is_queued(schedule.content_hash()):
            return
        stored = self.lookup(schedule)
        self.w.measure_service.measure(p, schedule, f"{p.name} · {label}", force=stored is not None and not stored.stages)

    # --- after Apply ------------------------------------------------------------------------
    @Slot(object)
    def show_applied_profile(self, schedule: Schedule) -> None:
        """A candidate was applied: show its stored measurement now; when it has no per-stage
        profile (search candidates are timed without one), measure it again with one."""
        h = schedule.content_hash()
        known = self.w.history.measurement(h)
        if known is not None and known.ok and known.stages:
            return
        stored = self.lookup(schedule)
        if stored is not None:
            self.w.history.attach(stored)  # the median the search measured, at once
        if stored is None or not stored.stages:
            self.measure(schedule, "applied candidate, profiled")

    # --- the history ------------------------------------------------------------------------
    @Slot()
    def export_history(self) -> None:
        if not self.w.history.variants:
            self.w.statusBar().showMessage("Nothing to export yet: open a pipeline and try a schedule", 6000)
            return
        name = chart_export.file_stem(self.w.doc.pipeline.name if self.w.doc.pipeline else "", "measurements")
        chart_export.save_csv(self.w, name, lambda: history_table(self.w.history))


def install(w: MainWindow) -> Analysis:
    """Add the comparison, the history export and the post-Apply profile to the window."""
    return Analysis(w)
