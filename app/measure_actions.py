"""The actions over stored results, peers, schedule files and autoscheduler schedules, added
to the window's menus (the Measure and File menus chrome.py builds) and to the performance
panel's buttons: Measure Again (a stored result is measured anew), Measure Peers (ONNX
Runtime and PyTorch in the same run), Clear Stored Results (this pipeline's only), Open /
Save Schedule, and Halide's autoschedulers with the schedule each produced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox

from engine.measure import Measurement, autoscheduler_of

from .schedule_files import AUTOSCHEDULER_NAMES, AutoscheduleDialog, ScheduleFiles
from .workers import MeasureRequest

if TYPE_CHECKING:
    from .main_window import MainWindow


@dataclass(eq=False)
class MeasureActions:
    measure_again: QAction
    measure_peers: QAction
    clear_stored: QAction
    autoschedulers: QMenu
    files: ScheduleFiles
    dialogs: dict[str, AutoscheduleDialog]  # the last one shown per autoscheduler
    waiting: set[str]  # autoschedulers run from the menu: their schedule is shown once measured

    def clear_stored_results(self, w: MainWindow, ask: bool = True) -> bool:
        """Clear the open pipeline's stored results (every schedule, this pipeline only)."""
        p = w.doc.pipeline
        if p is None:
            return False
        if ask and w.ask_to_save:
            answer = QMessageBox.question(
                w,
                "Clear stored results",
                f"Remove every stored measurement of {p.name} (all its schedules, on every machine) from the database?\n"
                "Other pipelines' results are kept. The next Measure runs the worker again.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        return w.measure_control.clear_stored()


def _menu_with(w: MainWindow, action: QAction) -> QMenu | None:
    """The menu bar's menu that holds `action`."""
    for a in w.menuBar().actions():
        menu = a.menu()
        if isinstance(menu, QMenu) and action in menu.actions():
            return menu
    return None


def install(w: MainWindow) -> MeasureActions:
    """Make the actions, put them in the menus and connect the panel's buttons."""
    ctl = w.measure_control
    again = QAction("Measure A&gain", w)
    again.setShortcut(QKeySequence("Ctrl+Shift+M"))
    again.setStatusTip("Measure the current schedule again even if a result is stored (Ctrl+Shift+M); the new result replaces it")
    again.triggered.connect(lambda: ctl.measure_current(force=True))
    peers = QAction("Measure with &Peers", w)
    peers.setStatusTip("Measure the current schedule, then ONNX Runtime and PyTorch on the same input, in one run")
    peers.triggered.connect(lambda: ctl.measure_current(force=True, peers=True))
    clear = QAction("C&lear Stored Results…", w)
    clear.setStatusTip("Remove this pipeline's stored measurements (every schedule) so they are measured again")
    from .main_window import SETTINGS_APP, SETTINGS_ORG  # noqa: PLC0415  # the window imports this module

    files = ScheduleFiles(w, (SETTINGS_ORG, SETTINGS_APP))
    autos = QMenu("Halide A&utoschedulers", w)
    actions = MeasureActions(again, peers, clear, autos, files, {}, set())
    clear.triggered.connect(lambda: actions.clear_stored_results(w))
    for name in AUTOSCHEDULER_NAMES:
        a = autos.addAction(f"{name}: Run and Show Schedule")
        a.setStatusTip(f"Let Halide's {name} schedule this pipeline, measure it, and show the schedule it produced")
        a.triggered.connect(lambda _checked=False, n=name: _show(w, actions, n))

    measure_menu = _menu_with(w, w.chrome.actions.measure)
    if measure_menu is not None:
        first = w.chrome.actions.cancel
        measure_menu.insertAction(first, again)
        measure_menu.insertAction(first, peers)
        measure_menu.addSeparator()
        measure_menu.addMenu(autos)
        measure_menu.addSeparator()
        measure_menu.addAction(clear)
    file_menu = w.chrome.file_menu
    after_open = file_menu.actions()[file_menu.actions().index(w.chrome.actions.open) + 1 :]
    before = after_open[0] if after_open else None
    for a in (files.open_action, files.save_action):
        if before is None:
            file_menu.addAction(a)
        else:
            file_menu.insertAction(before, a)
    w.performance.measure_again_clicked.connect(again.trigger)
    w.performance.peers_clicked.connect(peers.trigger)
    ctl.forgotten.connect(lambda text: w.statusBar().showMessage(text, 8000))

    def on_pipeline_changed() -> None:
        # A built-in or pipeline file opened: the last model's report does not describe it
        # (an imported model's own report is shown right after its pipeline changes).
        if not w.doc.is_model and w.import_report.report is not None:
            w.import_report.clear_report()
            w.import_report_dock.hide()

    w.doc.pipeline_changed.connect(on_pipeline_changed)

    def on_finished(req: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        name = autoscheduler_of(req.schedule_key)
        if name is not None and name in actions.waiting:
            actions.waiting.discard(name)
            if not cancelled and m.schedule_source:
                _show(w, actions, name)

    w.measure_service.finished.connect(on_finished)
    return actions


def _show(w: MainWindow, actions: MeasureActions, name: str) -> None:
    """Show what `name` produced, or run it first (shown when its measurement is in)."""
    dialog = actions.files.show_autoscheduler(name)
    if dialog is None:
        actions.waiting.add(name)
    else:
        actions.dialogs[name] = dialog
