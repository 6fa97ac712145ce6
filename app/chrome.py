"""The window's chrome: actions (with their shortcuts), menus, toolbar and status bar.
Built here so main_window.py keeps to wiring and behaviour; the window keeps what build()
returns as `self.chrome` (typed records, not attributes set on the window from outside)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QMenu, QProgressBar, QStyle, QToolBar

from engine import zoo

if TYPE_CHECKING:
    from .main_window import MainWindow


@dataclass(frozen=True, eq=False)
class Actions:
    """The window's actions (menus and toolbar share them); each field's name is its key in ICONS."""

    start_page: QAction
    open: QAction
    quit: QAction
    undo: QAction
    redo: QAction
    find: QAction
    measure: QAction
    cancel: QAction
    auto_measure: QAction
    compare: QAction
    reset_layout: QAction
    shortcuts: QAction
    guide: QAction
    about: QAction


@dataclass(frozen=True, eq=False)
class Chrome:
    """What build() makes and the window updates later: actions, menus, toolbar and its combo
    boxes (the window connects their signals), the status bar's widgets."""

    actions: Actions
    file_menu: QMenu
    view_menu: QMenu
    toolbar: QToolBar
    schedule_combo: QComboBox
    size_combo: QComboBox
    progress: QProgressBar
    progress_label: QLabel
    info_label: QLabel


def build(w: MainWindow) -> Chrome:
    actions = _build_actions(w)
    file_menu, view_menu = _build_menus(w, actions)
    toolbar, schedule_combo, size_combo = _build_toolbar(w, actions)
    view_menu.addSeparator()
    view_menu.addAction(toolbar.toggleViewAction())
    view_menu.addSeparator()
    view_menu.addAction(actions.reset_layout)
    view_menu.addMenu(w.theme.menu)
    progress, progress_label, info_label = _build_status_bar(w)
    return Chrome(actions, file_menu, view_menu, toolbar, schedule_combo, size_combo, progress, progress_label, info_label)


def _action(
    w: MainWindow,
    text: str,
    slot: Callable[..., object],
    shortcut: str | QKeySequence | QKeySequence.StandardKey | None = None,
    tip: str = "",
) -> QAction:
    a = QAction(text, w)
    if shortcut is not None:
        a.setShortcut(QKeySequence(shortcut))
    if tip:
        a.setToolTip(tip)
        a.setStatusTip(tip)
    a.triggered.connect(slot)
    return a


def _build_actions(w: MainWindow) -> Actions:
    start_page = _action(
        w, "S&tart Page", w.show_start_page, "Ctrl+Shift+H", "Built-in pipelines, recent projects and sample models (Ctrl+Shift+H)"
    )
    start_page.setIconText("Start")
    open_ = _action(w, "&Open…", w.open_pipeline_dialog, QKeySequence.StandardKey.Open)
    open_.setStatusTip("Open a pipeline JSON, an ONNX model (imported) or a project")
    quit_ = _action(w, "&Quit", w.close, "Ctrl+Q")
    quit_.setMenuRole(QAction.MenuRole.QuitRole)
    undo = w.undo_stack.createUndoAction(w, "&Undo")
    undo.setShortcut(QKeySequence("Ctrl+Z"))
    undo.setIconText("Undo")  # the toolbar keeps a fixed width; the menu names the edit
    redo = w.undo_stack.createRedoAction(w, "&Redo")
    redo.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    redo.setIconText("Redo")
    find = _action(w, "&Find Stage…", w.find_stage, "Ctrl+F", "Find a stage by name in the graph (Ctrl+F)")
    measure = _action(
        w, "&Measure", w.start_measurement, "Ctrl+M", "Compile, time and verify the current schedule in a worker process (Ctrl+M)"
    )
    # A lambda: triggered(bool) would pass `checked` as cancel's request id.
    cancel = _action(
        w, "&Cancel Measurement", lambda: w.measure_service.cancel(), "Ctrl+.", "Stop the running measurement and empty the queue (Ctrl+.)"
    )
    cancel.setIconText("Cancel")
    cancel.setEnabled(False)
    auto_measure = _action(
        w, "&Auto-measure After Edits", w.set_auto_measure, None, "Measure each edited schedule shortly after the last edit"
    )
    auto_measure.setCheckable(True)
    auto_measure.setChecked(True)
    auto_measure.setIconText("Auto")
    compare = _action(
        w,
        "Compare with &Adams2019",
        w.compare_adams,
        None,
        "Measure Halide's Adams2019 autoscheduler on this pipeline (and the default schedule)",
    )
    compare.setIconText("Compare Adams2019")
    reset_layout = _action(w, "&Reset Layout", w.reset_layout, None, "Put the panels back where they started")
    shortcuts = _action(w, "&Keyboard Shortcuts", w.show_shortcuts, "Ctrl+/", "Every shortcut of the window and its views (Ctrl+/)")
    guide = _action(
        w, "&Guide", w.show_guide, QKeySequence.StandardKey.HelpContents, "A short guide: open, look, change, measure, keep (F1)"
    )
    about = _action(w, "&About Schedule Explorer", w.show_about)
    about.setMenuRole(QAction.MenuRole.AboutRole)
    actions = Actions(
        start_page, open_, quit_, undo, redo, find, measure, cancel, auto_measure, compare, reset_layout, shortcuts, guide, about
    )
    _set_icons(w, actions)
    return actions


# One icon set for all actions: the style's standard icons, so they follow the platform
# and the light/dark theme without shipping image files.
ICONS = {
    "start_page": QStyle.StandardPixmap.SP_DirHomeIcon,
    "open": QStyle.StandardPixmap.SP_DialogOpenButton,
    "quit": QStyle.StandardPixmap.SP_DialogCloseButton,
    "undo": QStyle.StandardPixmap.SP_ArrowBack,
    "redo": QStyle.StandardPixmap.SP_ArrowForward,
    "find": QStyle.StandardPixmap.SP_FileDialogContentsView,
    "measure": QStyle.StandardPixmap.SP_MediaPlay,
    "cancel": QStyle.StandardPixmap.SP_MediaStop,
    "auto_measure": QStyle.StandardPixmap.SP_BrowserReload,
    "compare": QStyle.StandardPixmap.SP_FileDialogDetailedView,
    "reset_layout": QStyle.StandardPixmap.SP_DialogResetButton,
    "shortcuts": QStyle.StandardPixmap.SP_FileDialogListView,
    "guide": QStyle.StandardPixmap.SP_DialogHelpButton,
    "about": QStyle.StandardPixmap.SP_MessageBoxInformation,
}


def _set_icons(w: MainWindow, actions: Actions) -> None:
    style = w.style()
    for name, pixmap in ICONS.items():
        getattr(actions, name).setIcon(style.standardIcon(pixmap))


def _build_menus(w: MainWindow, a: Actions) -> tuple[QMenu, QMenu]:
    """The menu bar; returns the File and View menus (the toolbar's toggle joins View)."""
    bar = w.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addAction(a.start_page)
    file_menu.addAction(a.open)
    file_menu.addSeparator()
    pr = w.projects
    file_menu.addAction(pr.open_action)
    file_menu.addMenu(pr.recent_menu)
    file_menu.addAction(pr.save_action)
    file_menu.addAction(pr.save_as_action)
    file_menu.addSeparator()
    file_menu.addAction(a.quit)
    edit_menu = bar.addMenu("&Edit")
    edit_menu.addAction(a.undo)
    edit_menu.addAction(a.redo)
    edit_menu.addSeparator()
    edit_menu.addAction(a.find)
    view_menu = bar.addMenu("&View")
    for dock in w.docks():
        view_menu.addAction(dock.toggleViewAction())
    measure_menu = bar.addMenu("&Measure")
    for action in (a.measure, a.cancel, a.auto_measure, a.compare):
        measure_menu.addAction(action)
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(a.guide)
    help_menu.addAction(a.shortcuts)
    help_menu.addSeparator()
    help_menu.addAction(a.about)
    return file_menu, view_menu


def _build_toolbar(w: MainWindow, a: Actions) -> tuple[QToolBar, QComboBox, QComboBox]:
    """The main toolbar; returns it and its schedule and size combo boxes."""
    tb = QToolBar("Main toolbar", w)
    tb.setObjectName("main_toolbar")
    tb.setMovable(False)
    tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    tb.addAction(a.start_page)
    tb.addSeparator()
    for action in (a.measure, a.cancel, a.auto_measure, a.compare):
        tb.addAction(action)
    tb.addSeparator()
    tb.addAction(a.undo)
    tb.addAction(a.redo)
    tb.addSeparator()
    tb.addWidget(QLabel(" Schedule: "))
    schedule_combo = QComboBox()
    schedule_combo.setObjectName("schedule_combo")
    schedule_combo.setToolTip("The schedule applied to the pipeline: the default (all stages at root), hand-written, or a file")
    schedule_combo.setMinimumContentsLength(10)
    tb.addWidget(schedule_combo)
    tb.addSeparator()
    tb.addWidget(QLabel(" Size: "))
    size_combo = QComboBox()
    size_combo.setObjectName("size_combo")
    size_combo.addItems(list(zoo.SIZES))
    size_combo.setCurrentText(w.pipeline_size)
    size_combo.setToolTip("Built-in pipelines: the small test size or the realistic full size")
    tb.addWidget(size_combo)
    w.addToolBar(tb)
    return tb, schedule_combo, size_combo


def _build_status_bar(w: MainWindow) -> tuple[QProgressBar, QLabel, QLabel]:
    """The status bar's permanent widgets: measurement progress bar and label, pipeline info."""
    sb = w.statusBar()
    progress = QProgressBar()
    progress.setRange(0, 0)  # busy indicator: a measurement has no known duration
    progress.setMaximumWidth(140)
    progress.setMaximumHeight(16)
    progress.setTextVisible(False)
    progress.hide()
    progress_label = QLabel()
    progress_label.hide()
    info_label = QLabel()
    sb.addPermanentWidget(progress_label)
    sb.addPermanentWidget(progress)
    sb.addPermanentWidget(info_label)
    return progress, progress_label, info_label
