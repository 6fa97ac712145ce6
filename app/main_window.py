"""The main window: menus, toolbar, tabs and docks wired to the Document, the undo stack,
the session history and the measurement service. All state lives in those objects; the
views only mirror it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QChildEvent, QElapsedTimer, QEvent, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication, QKeySequence, QStandardItemModel, QUndoStack
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QDialog,
    QDockWidget,
    QFileDialog,
    QFrame,
    QMainWindow,
    QMenu,
    QMessageBox,
    QScrollArea,
    QStackedWidget,
    QTabBar,
    QTabWidget,
    QUndoView,
    QWidget,
)

from engine import api, zoo
from engine.measure import Measurement

from . import analysis, chrome
from .about import GUIDE_HTML, about_html, format_flop, shortcuts_html, show_text, versions  # noqa: F401  # versions: re-exported
from .cluster_dialog import ClusterSetting
from .code_view import CodeView, LoopNestView, SourcePane
from .finetune import install as install_finetune
from .folders import remember_folder, start_folder
from .graph.panel import GraphPanel
from .import_report import ImportReportPanel
from .measure_actions import install as install_measure_actions
from .measure_control import MeasureController
from .model import project
from .model.commands import RestoreVariant, UseSchedule
from .model.document import BUILTIN_SCHEDULES, MODEL_SCHEDULES, MODEL_SUFFIX, NAMED_SCHEDULES, Document, is_model_spec, schedule_label
from .model.history import SessionHistory
from .model.project import SUFFIX
from .model_import import ModelImporter
from .panels import PipelinePanel, StagesPanel
from .performance import PerformancePanel
from .placement.panel import PlacementPanel
from .project_ui import ProjectController
from .schedule_editor import ScheduleEditor
from .schedule_files import is_schedule_file
from .search.panel import SearchPanel
from .start.page import StartPageController
from .stmt import StmtLoader
from .teaching import Teaching
from .teaching.lessons_view import install as install_lessons
from .theme import ThemeController
from .tuning import install as install_tuning
from .workers import MeasureRequest, MeasureService

SETTINGS_ORG, SETTINGS_APP = "schedule-explorer", "app"
# Bump when docks or toolbars change: restoreState ignores a saved layout of another version.
LAYOUT_VERSION = 4
STATUS_MS = 8000
COMPACT_HEIGHT = 760  # screens shorter than this (logical pixels) get the compact layout
DOCK_MIN_BUDGET = (360, 200)  # a dock panel needing more than this (w, h) scrolls: 1024×700 holds the rest
# The performance panel's text before a measurement, by the Auto setting (issue 20 item 10).
IDLE_AUTO = "Not measured yet. Auto is on: each edit is measured shortly after it; Measure (Ctrl+M) measures this schedule now."
IDLE_MANUAL = "Not measured yet. Press Measure (Ctrl+M), or turn on Auto (Measure menu) to measure each edit."
OPEN_FILTER = ";;".join(
    (
        f"Pipelines, models and projects (*.json *{MODEL_SUFFIX} *.keras *.pb *{SUFFIX})",
        "Pipeline JSON (*.json)",
        f"ONNX model (*{MODEL_SUFFIX})",
        "TensorFlow model: Keras, frozen graph, a SavedModel's saved_model.pb (*.keras *.pb)",
        f"Schedule Explorer project (*{SUFFIX})",
        "All files (*)",
    )
)
DROPPABLE = (SUFFIX, ".json", MODEL_SUFFIX)


def scrolled(widget: QWidget, name: str) -> QScrollArea:
    """`widget` in a frameless scroll area: shown whole where there is room, scrolled where
    there is not, and never making the window's minimum larger than a small screen."""
    area = QScrollArea()
    area.setObjectName(name)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(widget)
    return area


class MainWindow(QMainWindow):
    """The graph and the code views in the middle, pipelines and edit history on the left,
    stages and the schedule editor on the right, performance at the bottom."""

    def __init__(self, size: str = "full", persist_layout: bool = True, ask_to_save: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MainWindow")
        self.persist_layout = persist_layout
        self.ask_to_save = ask_to_save  # off for screenshots and tests: no modal question
        self.doc = Document(self)
        self.history = SessionHistory(self)
        self.undo_stack = QUndoStack(self)
        # Not `size`: that would hide QWidget.size().
        self.pipeline_size = size  # the size built-in pipelines open at
        # The schedule to show: the user's last choice, else hand-written where one exists.
        # Falling back to default is only reported when the user asked for something else.
        self.preferred_schedule = "hand"
        self.schedule_explicit = False
        self.extra_schedules: list[str] = []  # schedule files named on the command line
        self.measure_service = MeasureService(self)
        self.measure_control = MeasureController(self.doc, self.history, self.measure_service, self)
        self.stmt_loader = StmtLoader(self)
        self._syncing_stage = False
        self._elapsed = QElapsedTimer()
        self._tick = QTimer(self)
        self._tick.setInterval(100)
        self._tick.timeout.connect(self._update_progress)

        self.projects = ProjectController(self, (SETTINGS_ORG, SETTINGS_APP))
        # Before the views: they take their colours from the palette the theme sets.
        self.theme = ThemeController(self, (SETTINGS_ORG, SETTINGS_APP))
        self._build_views()
        # Before the chrome: its Start Page action and toolbar act on the page.
        self.start = StartPageController(self, self.central, LAYOUT_VERSION)
        self.start_page = self.start.page
        self.added_docks: list[QDockWidget] = []  # docks installed after the menus (Teaching, Lessons): the start page hides them too
        self.chrome = chrome.build(self)
        self.analysis = analysis.install(self)  # View → Compare…, history CSV, a candidate's profile after Apply
        self.chrome.schedule_combo.activated.connect(self._on_schedule_chosen)
        self.chrome.size_combo.activated.connect(self._on_size_chosen)
        self.importer = ModelImporter(self)  # models import off the GUI thread (issue 20 item 7)
        self.measure_actions = install_measure_actions(self)  # Measure Again, peers, schedule files (items 6, 8, 12)
        self.cluster = ClusterSetting(self, self.search_panel.service, (SETTINGS_ORG, SETTINGS_APP))  # Tools → Cluster… (issue 17)
        self.tuning = install_tuning(self)  # Tools → Tune Whole Model… (issue 14 item 3)
        self.teaching = Teaching(self, (SETTINGS_ORG, SETTINGS_APP))  # Teaching dock, key edits in the loop nest, presentation (issue 18)
        self.lessons = install_lessons(self, (SETTINGS_ORG, SETTINGS_APP))  # the Lessons dock (issue 18 item 4)
        self.model_on_machine = install_finetune(self)  # the model's error here, Fine-tune on My Measurements (issue 13)
        self.added_docks += [self.teaching.dock, self.lessons.dock]
        self.setAcceptDrops(True)

        self.doc.pipeline_changed.connect(self._on_pipeline_changed)
        self.doc.changed.connect(self._on_document_changed)
        self.history.changed.connect(self._on_history_changed)
        self.undo_stack.indexChanged.connect(self._on_edited)
        self.pipelines.pipeline_selected.connect(self._on_pipeline_chosen)
        self.stages.stage_selected.connect(self.select_stage)
        self.editor.edit_rejected.connect(self._on_edit_rejected)
        self.graph.view.stage_selected.connect(self.select_stage)
        self.graph.view.schedule_action.connect(self.schedule_action)
        self.measure_service.busy_changed.connect(self._on_busy_changed)
        # Bound methods, not lambdas: Qt drops a connection to a deleted receiver, and some
        # senders here (the undo stack, the notes) still emit while the window is destroyed.
        self.measure_service.started.connect(self._refresh_performance)
        self.measure_service.finished.connect(self._on_measured)
        self.measure_control.adams_changed.connect(self._on_adams_changed)
        self.performance.compare_clicked.connect(self.chrome.actions.compare.trigger)
        self.performance.variant_clicked.connect(self.restore_variant)
        self.tabs.currentChanged.connect(self._request_stmt)
        self.stmt_loader.ready.connect(self._show_stmt)
        self.undo_stack.cleanChanged.connect(self.update_title)
        self.projects.notes.modificationChanged.connect(self.update_title)

        self._scroll_large_docks()
        self._fit_to_screen()
        self._default_state = self.saveState(LAYOUT_VERSION)
        if persist_layout:
            self._restore_layout()
        self.update_title()

    # --- construction -----------------------------------------------------------------
    def _build_views(self) -> None:
        self.graph = GraphPanel(settings=(SETTINGS_ORG, SETTINGS_APP))
        self.loop_view = LoopNestView()
        self.loop_view.setToolTip("The loop nest the schedule produces, as pseudo-code")
        self.schedule_view = CodeView()
        self.cpp_view = CodeView()
        self.python_view = CodeView()
        self.stmt_view = CodeView()
        self.tabs = QTabWidget()
        self.tabs.setObjectName("views")
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.graph, "Graph")
        self.tabs.addTab(self.loop_view, "Loop nest")
        self.placement = PlacementPanel()  # device placement of the open pipeline (issue 16)
        self.placement.status.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.source_panes: dict[str, SourcePane] = {}
        for key, view, name, suffix, what, note in (
            ("json", self.schedule_view, "Schedule", ".json", "schedule JSON", "The schedule as JSON (what files and the database store)"),
            ("cpp", self.cpp_view, "Halide C++", ".cpp", "Halide C++ schedule", "The schedule as Halide C++ scheduling calls"),
            (
                "python",
                self.python_view,
                "Halide Python",
                ".py",
                "Halide Python schedule",
                "The schedule as Halide Python scheduling calls",
            ),
            ("stmt", self.stmt_view, "Lowered Stmt", ".stmt", "lowered Stmt", "Halide's lowered Stmt of the pipeline with this schedule"),
        ):
            pane = SourcePane(view, suffix, what)
            pane.note.setText(note)
            pane.note.setMinimumWidth(1)  # the note gives way on a narrow window (its text is the view's tooltip too)
            view.setToolTip(note)
            self.source_panes[key] = pane
            self.tabs.addTab(pane, name)
        # In a scroll area: its bar of choices is wider than a small screen's middle (issue 20 item 1).
        self.placement_scroll = scrolled(self.placement, "placement_scroll")
        self.tabs.addTab(self.placement_scroll, "Placement")
        # The workspace's tabs and the start page take turns in the middle (app/start/page.py).
        self.central = QStackedWidget()
        self.central.addWidget(self.tabs)
        self.setCentralWidget(self.central)

        self.pipelines = PipelinePanel()
        self.pipelines.populate(self.pipeline_size)
        self.stages = StagesPanel()
        self.editor = ScheduleEditor(self.doc, self.undo_stack)
        self.undo_view = QUndoView(self.undo_stack)
        self.undo_view.setEmptyLabel("<opened>")
        self.undo_view.setToolTip("Every edit of this pipeline's schedule; click a row to go back to it")
        self.performance = PerformancePanel()
        self.measurement = self.performance  # the name the first version's callers use
        area = Qt.DockWidgetArea
        self.pipelines_dock = self._dock("Pipelines", self.pipelines, area.LeftDockWidgetArea)
        self.undo_dock = self._dock("Edit History", self.undo_view, area.LeftDockWidgetArea)
        self.stages_dock = self._dock("Stages", self.stages, area.RightDockWidgetArea)
        self.editor_dock = self._dock("Schedule Editor", self.editor, area.RightDockWidgetArea)
        self.measurement_dock = self._dock("Performance", self.performance, area.BottomDockWidgetArea, scroll=True)
        self.search_panel = SearchPanel(self.doc, self.history, self.undo_stack)
        self.search_dock = self._dock("Search", self.search_panel, area.BottomDockWidgetArea, scroll=True)
        self.search_dock.setToolTip("Automated schedule search: strategy, budget, live best-so-far plot, measured candidates")
        self.tabifyDockWidget(self.measurement_dock, self.search_dock)
        self.measurement_dock.raise_()
        # Baselines the search measured (current schedule, Adams2019) belong to the session too.
        self.search_panel.measured.connect(self.history.attach)
        # Docks squeezed below these are useless; small enough for a 1024-wide screen (issue 20 item 1).
        # The editor has none: its layout asks for what its buttons need, so none is clipped.
        for widget, width in ((self.pipelines, 140), (self.stages, 160)):
            widget.setMinimumWidth(width)
        self.notes_dock = self._dock("Notes", self.projects.notes, area.LeftDockWidgetArea)
        self.import_report = ImportReportPanel()
        self.import_report_dock = self._dock("Import Report", self.import_report, area.LeftDockWidgetArea, scroll=True)
        self.tabifyDockWidget(self.pipelines_dock, self.undo_dock)
        self.tabifyDockWidget(self.undo_dock, self.notes_dock)
        self.tabifyDockWidget(self.notes_dock, self.import_report_dock)
        self.import_report_dock.hide()  # until a model is imported (View → Import Report shows it)
        self.pipelines_dock.raise_()

    def _scroll_large_docks(self) -> None:
        """Any dock whose panel needs more than a small screen's share scrolls instead: a
        class fix, so a panel added later cannot push the window's minimum past the screen."""
        for dock in self.findChildren(QDockWidget):
            widget = dock.widget()
            if widget is None or isinstance(widget, QAbstractScrollArea):
                continue
            hint = widget.minimumSizeHint()
            if hint.width() > DOCK_MIN_BUDGET[0] or hint.height() > DOCK_MIN_BUDGET[1]:
                dock.setWidget(scrolled(widget, dock.objectName() + "_scroll"))

    def _fit_to_screen(self) -> None:
        """The first size: 1360×900, or the screen's available area if that is smaller (a
        1024×700 screen, or 1280×720 at 150%). Offscreen (screenshots, tests) there is no
        real screen to fit: 1360×900."""
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        if screen is None or QGuiApplication.platformName() == "offscreen":
            self.size_to(1360, 900)
            return
        self.size_to(min(1360, screen.width()), min(900, screen.height()))
        if screen.height() < COMPACT_HEIGHT:
            self.compact_layout()

    def compact_layout(self) -> None:
        """For a short screen: the stage list and the editor share the right column as tabs
        (the editor in front), instead of one above the other."""
        self.tabifyDockWidget(self.stages_dock, self.editor_dock)
        self.editor_dock.raise_()

    def size_to(self, w: int, h: int) -> None:
        """Resize to w×h with the docks in the proportions of the 1360×900 layout."""
        self.resize(w, h)
        # Dock sizes only hold once the window has its size.
        self.resizeDocks([self.pipelines_dock, self.stages_dock], [w * 270 // 1360, w * 420 // 1360], Qt.Orientation.Horizontal)
        self.resizeDocks([self.stages_dock, self.editor_dock], [h * 240 // 900, h * 400 // 900], Qt.Orientation.Vertical)
        self.resizeDocks([self.measurement_dock], [h * 290 // 900], Qt.Orientation.Vertical)

    def event(self, event: QEvent) -> bool:
        # QMainWindow makes a tab bar for each group of tabbed docks when it needs one; its
        # titles would be elided to a letter or two in a narrow dock ("P…", "E…"): show them
        # whole and let the bar scroll instead (issue 20 item 10).
        if event.type() == QEvent.Type.ChildPolished and isinstance(event, QChildEvent):
            child = event.child()
            if isinstance(child, QTabBar):
                child.setElideMode(Qt.TextElideMode.ElideNone)
                child.setUsesScrollButtons(True)
        return super().event(event)

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea, scroll: bool = False) -> QDockWidget:
        """`scroll`: the panel sits in a scroll area, so a small screen scrolls it instead of
        making the window's minimum size larger than the screen."""
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower().replace(" ", "_") + "_dock")  # saveState keys docks by object name
        dock.setWidget(scrolled(widget, dock.objectName() + "_scroll") if scroll else widget)
        self.addDockWidget(area, dock)
        return dock

    def docks(self) -> list[QDockWidget]:
        return [
            self.pipelines_dock,
            self.undo_dock,
            self.notes_dock,
            self.import_report_dock,
            self.stages_dock,
            self.editor_dock,
            self.measurement_dock,
            self.search_dock,
            *self.added_docks,
        ]

    # --- opening ----------------------------------------------------------------------
    def open_pipeline(self, spec: str, schedule_spec: str | None = None) -> bool:
        """Open a zoo name, pipeline .json file or ONNX model; on failure say why and keep the current one."""
        if schedule_spec is not None and schedule_spec not in NAMED_SCHEDULES and schedule_spec not in self.extra_schedules:
            self.extra_schedules.append(schedule_spec)
        if is_model_spec(spec):
            return self.open_model(Path(spec), schedule_spec)
        if schedule_spec is not None:
            self.preferred_schedule, self.schedule_explicit = schedule_spec, True
        try:
            note = self.doc.open(spec, self.pipeline_size, self.preferred_schedule)
        except api.InputError as exc:
            QMessageBox.warning(self, "Cannot open pipeline", str(exc))
            self.pipelines.set_current(self.doc.pipeline_spec if self.doc.is_builtin else None)
            return False
        if note and self.schedule_explicit:
            self.statusBar().showMessage(note, STATUS_MS)
        return True

    def open_model(self, path: Path, schedule_spec: str | None = None) -> bool:
        """Import an ONNX model, show its import report and open it with the heuristic
        schedule (or `schedule_spec`); a model that cannot be imported changes nothing."""
        # Models have no hand-written schedule: "hand" (the usual preference) means heuristic.
        wanted = "heuristic" if schedule_spec in (None, "hand") else str(schedule_spec)
        # Imported (and its schedule chosen) off the GUI thread; Cancel leaves the document as it was.
        outcome = self.importer.run(path, wanted, self)
        if outcome.error:
            QMessageBox.warning(self, "Cannot import model", outcome.error)
            return False
        if outcome.model is None:
            self.statusBar().showMessage(f"Import of {path.name} cancelled", STATUS_MS)
            return False
        result, wanted, sched, note = outcome.model.result, outcome.model.schedule_spec, outcome.model.schedule, outcome.model.note
        p = result.pipeline
        try:
            self.doc.load(p, str(path), self.pipeline_size, wanted, sched)
        except Exception as exc:  # noqa: BLE001  # an imported pipeline the loop nest rejects: keep the current one
            QMessageBox.warning(self, "Cannot open model", f"{path}: {exc}")
            return False
        self.import_report.show_report(result.report, path)
        self.import_report_dock.show()
        # A dock shown again rejoins its tab group later: bring it to the front after that.
        QTimer.singleShot(0, self.import_report_dock.raise_)
        self.projects.add_recent(path.resolve())  # models join the recent list (File → Open Recent, the start page)
        self.statusBar().showMessage(note or f"Imported {path.name}: {result.report.stages} stages", STATUS_MS)
        return True

    def open_file(self, path: Path) -> bool:
        """Open what a file holds: a project, a pipeline JSON or an ONNX model."""
        if project.is_project(path):
            return self.projects.open(path)  # asks about unsaved changes itself
        if is_schedule_file(path):  # a schedule for the open pipeline, not a pipeline (issue 20 item 8)
            return self.measure_actions.files.open_file(path)
        if not self.projects.maybe_save():
            return False
        return self.open_pipeline(str(path))

    @Slot()
    def open_pipeline_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open", str(start_folder((SETTINGS_ORG, SETTINGS_APP))), OPEN_FILTER)
        if path:
            remember_folder((SETTINGS_ORG, SETTINGS_APP), Path(path))
            self.open_file(Path(path))

    @Slot(str)
    def _on_pipeline_chosen(self, name: str) -> None:
        if name == self.doc.pipeline_spec:
            return
        if self.projects.maybe_save():
            self.open_pipeline(name)
        else:
            self.pipelines.set_current(self.doc.pipeline_spec if self.doc.is_builtin else None)

    @Slot(int)
    def _on_schedule_chosen(self, index: int) -> None:
        spec = self.chrome.schedule_combo.itemData(index)
        if spec is None or (spec == self.doc.schedule_spec and not self.doc.edited):
            return
        try:
            sched = self.doc.load_spec(spec)
            if sched.content_hash() == self.doc.schedule_hash:
                # The same schedule under another name: relabelled, not an edit (no undo step,
                # nothing unsaved); only a choice that changes the schedule is one.
                self.doc.replace_schedule(sched, spec, validated=True)
                self.preferred_schedule, self.schedule_explicit = spec, True
                return
            self.undo_stack.push(UseSchedule(self.doc, spec))
        except api.InputError as exc:
            QMessageBox.warning(self, "Cannot use schedule", str(exc))
            self._sync_schedule_combo()
            return
        self.preferred_schedule, self.schedule_explicit = spec, True

    @Slot(int)
    def _on_size_chosen(self, _index: int) -> None:
        size = self.chrome.size_combo.currentText()
        if size == self.pipeline_size:
            return
        if self.doc.is_builtin and not self.projects.maybe_save():
            self.chrome.size_combo.setCurrentText(self.pipeline_size)
            return
        self.use_size(size)
        if self.doc.is_builtin:
            self.open_pipeline(self.doc.pipeline_spec)

    def use_size(self, size: str) -> None:
        """The size built-in pipelines open at next (the open one is not reopened)."""
        self.pipeline_size = size
        self.chrome.size_combo.setCurrentText(size)
        self.pipelines.populate(size)

    # --- start page -------------------------------------------------------------------
    @Slot()
    def show_start_page(self) -> None:
        self.start.show_page()

    @Slot()
    def show_workspace(self) -> None:
        self.start.show_workspace()

    def show_placement(self, policy: str, devices: str | None = None, wait: bool = False) -> bool:
        """The Placement tab with `policy`'s placement on `devices` (`wait`: placed before returning)."""
        self.show_workspace()
        self.tabs.setCurrentWidget(self.placement_scroll)
        return self.placement.place_with(policy, devices, wait)

    # --- document views ---------------------------------------------------------------
    @Slot()
    def _on_pipeline_changed(self) -> None:
        # Commands and variants hold schedules of the previous pipeline: start afresh.
        self.undo_stack.clear()
        self.measure_control.timer.stop()
        self.history.reset(self.doc.pipeline)
        self.placement.set_pipeline(self.doc.pipeline)
        self.projects.detach()
        # The Size combo shows the size of what is open (a project saved at full size opens at full).
        if self.doc.is_builtin and self.doc.size in zoo.SIZES and self.doc.size != self.pipeline_size:
            self.use_size(self.doc.size)

    @Slot()
    def _on_document_changed(self) -> None:
        doc = self.doc
        self.history.record(doc.schedule, doc.change_label, doc.schedule_spec, doc.prediction)
        self._show_times()
        self.loop_view.set_loopnest(doc.loopnest_text, doc.spans)
        self.schedule_view.set_text(doc.schedule.dumps() + "\n")
        for view, lang in ((self.cpp_view, "cpp"), (self.python_view, "python")):
            try:
                view.set_text(doc.source(lang))
            except Exception as exc:  # noqa: BLE001  # one view's failure must not blank the others
                view.set_text(f"# cannot export this schedule: {exc}\n")
        name = f"{doc.pipeline.name}_{schedule_label(doc.schedule_spec)}" if doc.pipeline else "schedule"
        for pane in self.source_panes.values():
            pane.default_name = name
        self._request_stmt()
        self.stages.set_document(doc)
        self.select_stage(self.stages.current_stage())
        self.pipelines.set_current(doc.pipeline_spec if doc.is_builtin else None)
        self.chrome.size_combo.setEnabled(doc.is_builtin)
        self.chrome.size_combo.setToolTip(
            "Built-in pipelines: the small test size or the realistic full size" if doc.is_builtin else "A pipeline file has fixed extents"
        )
        self._sync_schedule_combo()
        self._sync_measure_action()
        self._refresh_performance()
        self.update_title()

    @Slot()
    def _on_history_changed(self) -> None:
        self._show_times()
        self._refresh_performance()

    def _show_times(self) -> None:
        self.graph.show_document(self.doc, self.history.stage_times(self.doc.schedule_hash, self.doc.prediction))

    @Slot()
    def _refresh_performance(self) -> None:
        self.performance.IDLE_TEXT = IDLE_AUTO if self.measure_control.auto else IDLE_MANUAL  # what Auto is set to
        self.performance.show_state(self.doc, self.history, self.measure_service.pending(), self.measure_control.adams_request is not None)

    @Slot(object)
    def select_stage(self, stage: str | None) -> None:
        """One stage selection for every view: stage list, graph, loop nest and editor."""
        if self._syncing_stage:
            return
        self._syncing_stage = True
        try:
            self.stages.select(stage)
            self.graph.view.select_stage(stage)
            self.loop_view.highlight_stage(stage)
            self.editor.set_stage(stage)
            self.teaching.set_stage(stage)
        finally:
            self._syncing_stage = False

    def current_stage(self) -> str | None:
        return self.stages.current_stage()

    @Slot()
    def find_stage(self) -> None:
        self.show_workspace()
        self.tabs.setCurrentWidget(self.graph)
        self.graph.focus_find()

    @Slot(str, str)
    def _show_stmt(self, _key: str, text: str) -> None:
        self.stmt_view.set_text(text)

    @Slot()
    def _request_stmt(self) -> None:
        """Lower only while the Stmt tab is shown; the loader keeps just the latest request."""
        doc = self.doc
        if doc.pipeline is None or self.tabs.currentWidget() is not self.source_panes["stmt"]:
            return
        key = self.stmt_loader.key(doc.pipeline, doc.schedule)
        if key != self.stmt_loader.latest:
            self.stmt_view.set_text("# lowering with Halide…\n")
            self.stmt_loader.request(doc.pipeline, doc.schedule)

    def _sync_schedule_combo(self) -> None:
        specs = list(MODEL_SCHEDULES if self.doc.is_model else BUILTIN_SCHEDULES) + self.extra_schedules
        if self.doc.schedule_spec in NAMED_SCHEDULES and self.doc.schedule_spec not in specs:
            specs.append(self.doc.schedule_spec)  # e.g. heuristic, chosen for a model, kept for a built-in
        reasons = self.doc.schedule_options(specs)
        combo = self.chrome.schedule_combo
        combo.blockSignals(True)
        combo.clear()
        model = combo.model()
        for spec in specs:
            combo.addItem(schedule_label(spec), spec)
            row = combo.count() - 1
            why = reasons.get(spec)
            combo.setItemData(row, why or (spec if spec not in NAMED_SCHEDULES else None), Qt.ItemDataRole.ToolTipRole)
            if why and isinstance(model, QStandardItemModel):
                model.item(row).setEnabled(False)  # shown but greyed: it exists, just not for this pipeline
        combo.setCurrentIndex(specs.index(self.doc.schedule_spec) if self.doc.schedule_spec in specs else 0)
        combo.blockSignals(False)

    @Slot()
    def update_title(self) -> None:
        title = self.doc.title
        path = self.projects.path
        name = " — ".join(x for x in (title, path.name if path is not None else "") if x)
        if self.start.showing:
            name = "Start Page"
        # [*] shows as "*" while there are unsaved edits or notes (setWindowModified).
        self.setWindowTitle(f"{name}[*] — Schedule Explorer" if name else "Schedule Explorer")
        self.setWindowModified(self.projects.dirty)
        p = self.doc.pipeline
        self.chrome.info_label.setText(f"{title} · {len(p.stages)} stages · {format_flop(p.flops())}" if p is not None else "")

    # --- editing and measuring --------------------------------------------------------
    @Slot(str, str)
    def schedule_action(self, stage: str, key: str) -> bool:
        """A schedule action from the graph's context menu: select the stage, then run the
        editor's quick action `key` (or open its form for a new directive: "add")."""
        self.select_stage(stage)
        self.editor_dock.show()
        self.editor_dock.raise_()
        if key == "add":
            self.editor.begin_add()
            return True
        return self.editor.quick_action(key)

    @Slot(str)
    def _on_edit_rejected(self, message: str) -> None:
        """A refused edit is said in the editor's message bar and in the status bar as well."""
        self.statusBar().showMessage(f"Not applied: {message}", STATUS_MS)

    @Slot(int)
    def _on_edited(self, _index: int) -> None:
        """After every edit, undo and redo (the undo stack's index moved)."""
        self.measure_control.schedule_edited()

    def restore_variant(self, number: int) -> bool:
        """Go back to a variant of this session, as one undoable step."""
        v = next((v for v in self.history.variants if v.number == number), None)
        if v is None or v.hash == self.doc.schedule_hash:
            return False
        if v.invalid:  # from a project: its schedule does not apply to this pipeline any more
            self.statusBar().showMessage(f"Variant {number} no longer applies: {v.invalid}", STATUS_MS)
            return False
        self.undo_stack.push(RestoreVariant(self.doc, v.schedule, v.spec, number))
        return True

    @Slot(bool)
    def set_auto_measure(self, on: bool) -> None:
        self.chrome.actions.auto_measure.setChecked(on)
        self.measure_control.set_auto(on)
        self._refresh_performance()  # the idle text says what Auto does

    @Slot()
    def start_measurement(self) -> MeasureRequest | None:
        return self.measure_control.measure_current()

    @Slot()
    def compare_adams(self) -> None:
        """Start the Adams2019 comparison (queuing the default schedule first if it has no
        measurement yet), or cancel it while it runs."""
        ctl = self.measure_control
        if ctl.adams_request is not None:
            ctl.cancel_adams()
        else:
            ctl.compare_adams()

    @Slot(bool)
    def _on_adams_changed(self, running: bool) -> None:
        self.chrome.actions.compare.setText("Cancel &Adams2019" if running else "Compare with &Adams2019")
        self.chrome.actions.compare.setIconText("Cancel Adams2019" if running else "Compare Adams2019")
        self._refresh_performance()

    def _sync_measure_action(self) -> None:
        self.chrome.actions.measure.setEnabled(self.doc.pipeline is not None and not self.measure_control.is_queued(self.doc.schedule_hash))

    @Slot(bool)
    def _on_busy_changed(self, busy: bool) -> None:
        self._sync_measure_action()
        self.chrome.actions.cancel.setEnabled(busy)
        self.chrome.progress.setVisible(busy)
        self.chrome.progress_label.setVisible(busy)
        if busy:
            self._elapsed.start()
            self._tick.start()
            self._update_progress()
        else:
            self._tick.stop()

    @Slot()
    def _update_progress(self) -> None:
        queued = len(self.measure_service.pending()) - 1
        more = f" (+{queued} queued)" if queued > 0 else ""
        self.chrome.progress_label.setText(f"Measuring… {self._elapsed.elapsed() / 1000:.1f} s{more}")

    @Slot(object, object, bool)
    def _on_measured(self, request: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        self._elapsed.start()
        self._sync_measure_action()
        self._refresh_performance()
        if not self.start.showing:  # the page hides the docks; the result waits in the workspace
            self.measurement_dock.show()
        if cancelled:
            msg = f"Measurement of {request.label} cancelled"
        elif m.ok and m.verified:
            msg = f"{request.label}: median {m.median_ms:.4g} ms, verified" + (" (stored result)" if m.cached else "")
        else:
            msg = f"{request.label}: {m.error_kind or 'error'}: {m.error or 'not verified'}"
        self.statusBar().showMessage(msg, STATUS_MS)

    # --- layout, about, closing -------------------------------------------------------
    def _restore_layout(self) -> None:
        s = QSettings(SETTINGS_ORG, SETTINGS_APP)
        geometry, state = s.value("geometry"), s.value("windowState")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state, LAYOUT_VERSION)

    def _save_layout(self) -> None:
        s = QSettings(SETTINGS_ORG, SETTINGS_APP)
        s.setValue("geometry", self.saveGeometry())
        s.setValue("windowState", self.start.layout_state())  # the workspace's, even if the start page shows

    @Slot()
    def reset_layout(self) -> None:
        self.show_workspace()
        for dock in self.docks():
            dock.setFloating(False)
        self.restoreState(self._default_state, LAYOUT_VERSION)

    @Slot()
    def show_about(self) -> None:
        QMessageBox.about(self, "About Schedule Explorer", about_html())

    def shortcut_rows(self) -> list[tuple[str, str]]:
        """(action, keys) for every action of the window that has a shortcut, menu order first."""
        rows: list[tuple[str, str]] = []
        seen: set[int] = set()
        for action in [*self.menuBar().actions(), *self.findChildren(QAction)]:
            menu = action.menu()
            for a in menu.actions() if isinstance(menu, QMenu) else [action]:
                keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in a.shortcuts())
                if keys and id(a) not in seen:
                    seen.add(id(a))
                    rows.append((a.text().replace("&", "").removesuffix("…"), keys))
        return rows

    @Slot()
    def show_shortcuts(self) -> QDialog:
        return show_text(self, "Keyboard Shortcuts", shortcuts_html(self.shortcut_rows()))

    @Slot()
    def show_guide(self) -> QDialog:
        return show_text(self, "Guide", GUIDE_HTML)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802  # Qt override
        if any(Path(u.toLocalFile()).suffix.lower() in DROPPABLE for u in event.mimeData().urls() if u.isLocalFile()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802  # Qt override
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.projects.open_dropped(paths)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802  # Qt override
        if not self.projects.maybe_save():
            event.ignore()
            return
        if self.persist_layout:
            self._save_layout()
        self._tick.stop()
        self.measure_control.timer.stop()
        self.measure_service.shutdown()
        self.importer.shutdown()
        self.search_panel.shutdown()  # cancels a running search and joins its thread
        self.placement.shutdown()
        self.stmt_loader.shutdown()
        self.teaching.shutdown()
        self.lessons.shutdown()
        self.model_on_machine.shutdown()
        self.tuning.shutdown()
        super().closeEvent(event)
