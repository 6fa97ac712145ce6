"""The window's chrome: actions (with their shortcuts), menus, toolbar and status bar.
Built here so main_window.py keeps to wiring and behaviour."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QProgressBar, QStyle, QToolBar

from engine import zoo

if TYPE_CHECKING:
    from .main_window import MainWindow


def build(w: MainWindow) -> None:
    _build_actions(w)
    _build_menus(w)
    _build_toolbar(w)
    _build_status_bar(w)


def _action(w: MainWindow, text: str, slot, shortcut: str | QKeySequence | None = None, tip: str = "") -> QAction:  # noqa: ANN001
    a = QAction(text, w)
    if shortcut is not None:
        a.setShortcut(QKeySequence(shortcut))
    if tip:
        a.setToolTip(tip)
        a.setStatusTip(tip)
    a.triggered.connect(slot)
    return a


def _build_actions(w: MainWindow) -> None:
    w.start_page_action = _action(
        w, "S&tart Page", w.show_start_page, "Ctrl+Shift+H", "Built-in pipelines, recent projects and sample models (Ctrl+Shift+H)"
    )
    w.start_page_action.setIconText("Start")
    w.open_action = _action(w, "&Open…", w.open_pipeline_dialog, QKeySequence.StandardKey.Open)
    w.open_action.setStatusTip("Open a pipeline JSON, an ONNX model (imported) or a project")
    w.quit_action = _action(w, "&Quit", w.close, "Ctrl+Q")
    w.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
    w.undo_action = w.undo_stack.createUndoAction(w, "&Undo")
    w.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
    w.undo_action.setIconText("Undo")  # the toolbar keeps a fixed width; the menu names the edit
    w.redo_action = w.undo_stack.createRedoAction(w, "&Redo")
    w.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    w.redo_action.setIconText("Redo")
    w.find_action = _action(w, "&Find Stage…", w.find_stage, "Ctrl+F", "Find a stage by name in the graph (Ctrl+F)")
    w.measure_action = _action(
        w, "&Measure", w.start_measurement, "Ctrl+M", "Compile, time and verify the current schedule in a worker process (Ctrl+M)"
    )
    # A lambda: triggered(bool) would pass `checked` as cancel's request id.
    w.cancel_action = _action(
        w, "&Cancel Measurement", lambda: w.measure_service.cancel(), "Ctrl+.", "Stop the running measurement and empty the queue (Ctrl+.)"
    )
    w.cancel_action.setIconText("Cancel")
    w.cancel_action.setEnabled(False)
    w.auto_measure_action = _action(
        w, "&Auto-measure After Edits", w.set_auto_measure, None, "Measure each edited schedule shortly after the last edit"
    )
    w.auto_measure_action.setCheckable(True)
    w.auto_measure_action.setChecked(True)
    w.auto_measure_action.setIconText("Auto")
    w.compare_action = _action(
        w,
        "Compare with &Adams2019",
        w.compare_adams,
        None,
        "Measure Halide's Adams2019 autoscheduler on this pipeline (and the default schedule)",
    )
    w.compare_action.setIconText("Compare Adams2019")
    w.reset_layout_action = _action(w, "&Reset Layout", w.reset_layout, None, "Put the panels back where they started")
    w.about_action = _action(w, "&About Schedule Explorer", w.show_about)
    w.about_action.setMenuRole(QAction.MenuRole.AboutRole)
    _set_icons(w)


# One icon set for all actions: the style's standard icons, so they follow the platform
# and the light/dark theme without shipping image files.
ICONS = {
    "start_page_action": QStyle.StandardPixmap.SP_DirHomeIcon,
    "open_action": QStyle.StandardPixmap.SP_DialogOpenButton,
    "quit_action": QStyle.StandardPixmap.SP_DialogCloseButton,
    "undo_action": QStyle.StandardPixmap.SP_ArrowBack,
    "redo_action": QStyle.StandardPixmap.SP_ArrowForward,
    "find_action": QStyle.StandardPixmap.SP_FileDialogContentsView,
    "measure_action": QStyle.StandardPixmap.SP_MediaPlay,
    "cancel_action": QStyle.StandardPixmap.SP_MediaStop,
    "auto_measure_action": QStyle.StandardPixmap.SP_BrowserReload,
    "compare_action": QStyle.StandardPixmap.SP_FileDialogDetailedView,
    "reset_layout_action": QStyle.StandardPixmap.SP_DialogResetButton,
    "about_action": QStyle.StandardPixmap.SP_MessageBoxInformation,
}


def _set_icons(w: MainWindow) -> None:
    style = w.style()
    for name, pixmap in ICONS.items():
        getattr(w, name).setIcon(style.standardIcon(pixmap))


def _build_menus(w: MainWindow) -> None:
    bar = w.menuBar()
    w.file_menu = bar.addMenu("&File")
    w.file_menu.addAction(w.start_page_action)
    w.file_menu.addAction(w.open_action)
    w.file_menu.addSeparator()
    pr = w.projects
    w.file_menu.addAction(pr.open_action)
    w.file_menu.addMenu(pr.recent_menu)
    w.file_menu.addAction(pr.save_action)
    w.file_menu.addAction(pr.save_as_action)
    w.file_menu.addSeparator()
    w.file_menu.addAction(w.quit_action)
    edit_menu = bar.addMenu("&Edit")
    edit_menu.addAction(w.undo_action)
    edit_menu.addAction(w.redo_action)
    edit_menu.addSeparator()
    edit_menu.addAction(w.find_action)
    w.view_menu = bar.addMenu("&View")
    for dock in w.docks():
        w.view_menu.addAction(dock.toggleViewAction())
    measure_menu = bar.addMenu("&Measure")
    for a in (w.measure_action, w.cancel_action, w.auto_measure_action, w.compare_action):
        measure_menu.addAction(a)
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(w.about_action)


def _build_toolbar(w: MainWindow) -> None:
    tb = QToolBar("Main toolbar", w)
    tb.setObjectName("main_toolbar")
    tb.setMovable(False)
    tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    tb.addAction(w.start_page_action)
    tb.addSeparator()
    for a in (w.measure_action, w.cancel_action, w.auto_measure_action, w.compare_action):
        tb.addAction(a)
    tb.addSeparator()
    tb.addAction(w.undo_action)
    tb.addAction(w.redo_action)
    tb.addSeparator()
    tb.addWidget(QLabel(" Schedule: "))
    w.schedule_combo = QComboBox()
    w.schedule_combo.setObjectName("schedule_combo")
    w.schedule_combo.setToolTip("The schedule applied to the pipeline: the default (all stages at root), hand-written, or a file")
    w.schedule_combo.setMinimumContentsLength(10)
    w.schedule_combo.activated.connect(w._on_schedule_chosen)
    tb.addWidget(w.schedule_combo)
    tb.addSeparator()
    tb.addWidget(QLabel(" Size: "))
    w.size_combo = QComboBox()
    w.size_combo.setObjectName("size_combo")
    w.size_combo.addItems(list(zoo.SIZES))
    w.size_combo.setCurrentText(w.size)
    w.size_combo.setToolTip("Built-in pipelines: the small test size or the realistic full size")
    w.size_combo.activated.connect(w._on_size_chosen)
    tb.addWidget(w.size_combo)
    w.addToolBar(tb)
    w.toolbar = tb
    w.view_menu.addSeparator()
    w.view_menu.addAction(tb.toggleViewAction())
    w.view_menu.addSeparator()
    w.view_menu.addAction(w.reset_layout_action)
    w.view_menu.addMenu(w.theme.menu)


def _build_status_bar(w: MainWindow) -> None:
    sb = w.statusBar()
    w.progress = QProgressBar()
    w.progress.setRange(0, 0)  # busy indicator: a measurement has no known duration
    w.progress.setMaximumWidth(140)
    w.progress.setMaximumHeight(16)
    w.progress.setTextVisible(False)
    w.progress.hide()
    w.progress_label = QLabel()
    w.progress_label.hide()
    w.info_label = QLabel()
    sb.addPermanentWidget(w.progress_label)
    sb.addPermanentWidget(w.progress)
    sb.addPermanentWidget(w.info_label)
