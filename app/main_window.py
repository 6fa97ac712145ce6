"""The main window: menus, toolbar and docks wired to the Document and the measurement service."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import PySide6
from PySide6.QtCore import QByteArray, QElapsedTimer, QSettings, Qt, QTimer, Slot, qVersion
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QTabWidget,
    QToolBar,
    QWidget,
)

import engine
from engine import api, zoo
from engine.measure import Measurement

from .code_view import CodeView, LoopNestView
from .document import BUILTIN_SCHEDULES, Document, schedule_label
from .panels import MeasurementPanel, PipelinePanel, StagesPanel
from .workers import MeasureRequest, MeasureService

SETTINGS_ORG, SETTINGS_APP = "schedule-explorer", "app"
# Bump when docks or toolbars change: restoreState ignores a saved layout of another version.
LAYOUT_VERSION = 1
STATUS_MS = 8000


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Versions shown in Help > About (torch is looked up, never imported: it is slow to load)."""
    return {
        "Schedule Explorer": engine.__version__,
        "Halide": package_version("halide"),
        "PyTorch": package_version("torch"),
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
    }


def format_flop(n: float) -> str:
    for scale, unit in ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} FLOP"


class MainWindow(QMainWindow):
    """Pipelines on the left, the document's views in the middle, stages on the right and
    the last measurement at the bottom. All state lives in `doc`; the views only mirror it."""

    def __init__(self, size: str = "full", persist_layout: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MainWindow")
        self.persist_layout = persist_layout
        self.doc = Document(self)
        self.size = size
        # The schedule to show: the user's last choice, else hand-written where one exists.
        # Falling back to default is only reported when the user asked for something else.
        self.preferred_schedule = "hand"
        self.schedule_explicit = False
        self.extra_schedules: list[str] = []  # schedule files named on the command line
        self.measure_service = MeasureService(self)
        self._elapsed = QElapsedTimer()
        self._tick = QTimer(self)
        self._tick.setInterval(100)
        self._tick.timeout.connect(self._update_progress)

        self._build_views()
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status_bar()

        self.doc.changed.connect(self._on_document_changed)
        self.pipelines.pipeline_selected.connect(self._on_pipeline_chosen)
        self.stages.stage_selected.connect(self.loop_view.highlight_stage)
        self.measure_service.busy_changed.connect(self._on_busy_changed)
        self.measure_service.started.connect(self.measurement.show_running)
        self.measure_service.finished.connect(self._on_measured)

        self.resize(1320, 860)
        self._default_state = self.saveState(LAYOUT_VERSION)
        if persist_layout:
            self._restore_layout()
        self._update_title()

    # --- construction -----------------------------------------------------------------
    def _build_views(self) -> None:
        self.loop_view = LoopNestView()
        self.loop_view.setToolTip("The loop nest the schedule produces, as pseudo-code")
        self.schedule_view = CodeView()
        self.schedule_view.setToolTip("The schedule as JSON (what Open/Save and the database use)")
        self.cpp_view = CodeView()
        self.cpp_view.setToolTip("The schedule as Halide C++ scheduling calls")
        self.python_view = CodeView()
        self.python_view.setToolTip("The schedule as Halide Python scheduling calls")
        self.tabs = QTabWidget()
        self.tabs.setObjectName("views")
        self.tabs.setDocumentMode(True)
        for view, name in (
            (self.loop_view, "Loop nest"),
            (self.schedule_view, "Schedule"),
            (self.cpp_view, "Halide C++"),
            (self.python_view, "Halide Python"),
        ):
            self.tabs.addTab(view, name)
        self.setCentralWidget(self.tabs)

        self.pipelines = PipelinePanel()
        self.pipelines.populate(self.size)
        self.stages = StagesPanel()
        self.measurement = MeasurementPanel()
        self.pipelines_dock = self._dock("Pipelines", self.pipelines, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.stages_dock = self._dock("Stages", self.stages, Qt.DockWidgetArea.RightDockWidgetArea)
        self.measurement_dock = self._dock("Measurement", self.measurement, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.resizeDocks([self.pipelines_dock, self.stages_dock], [290, 380], Qt.Orientation.Horizontal)
        self.resizeDocks([self.measurement_dock], [250], Qt.Orientation.Vertical)

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower() + "_dock")  # saveState keys docks by object name
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _build_actions(self) -> None:
        self.open_action = QAction("&Open Pipeline JSON…", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.setStatusTip("Open a pipeline saved as JSON")
        self.open_action.triggered.connect(self.open_pipeline_dialog)
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.quit_action.triggered.connect(self.close)
        self.measure_action = QAction("&Measure", self)
        self.measure_action.setShortcut(QKeySequence("Ctrl+M"))
        self.measure_action.setToolTip("Compile, time and verify the current schedule (Ctrl+M)")
        self.measure_action.setStatusTip("Compile, time and verify the current schedule in a worker process")
        self.measure_action.triggered.connect(self.start_measurement)
        self.cancel_action = QAction("&Cancel Measurement", self)
        self.cancel_action.setIconText("Cancel")
        self.cancel_action.setShortcut(QKeySequence("Ctrl+."))
        self.cancel_action.setToolTip("Stop the running measurement (Ctrl+.)")
        self.cancel_action.setEnabled(False)
        self.cancel_action.triggered.connect(self.measure_service.cancel)
        self.reset_layout_action = QAction("&Reset Layout", self)
        self.reset_layout_action.setStatusTip("Put the panels back where they started")
        self.reset_layout_action.triggered.connect(self.reset_layout)
        self.about_action = QAction("&About Schedule Explorer", self)
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        self.about_action.triggered.connect(self.show_about)

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self.open_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        self.view_menu = bar.addMenu("&View")
        for dock in (self.pipelines_dock, self.stages_dock, self.measurement_dock):
            self.view_menu.addAction(dock.toggleViewAction())
        measure_menu = bar.addMenu("&Measure")
        measure_menu.addAction(self.measure_action)
        measure_menu.addAction(self.cancel_action)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.about_action)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main toolbar", self)
        tb.setObjectName("main_toolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.addAction(self.measure_action)
        tb.addAction(self.cancel_action)
        tb.addSeparator()
        tb.addWidget(QLabel(" Schedule: "))
        self.schedule_combo = QComboBox()
        self.schedule_combo.setObjectName("schedule_combo")
        self.schedule_combo.setToolTip("The schedule applied to the pipeline: the default (all stages at root), hand-written, or a file")
        self.schedule_combo.setMinimumContentsLength(10)
        self.schedule_combo.activated.connect(self._on_schedule_chosen)
        tb.addWidget(self.schedule_combo)
        tb.addSeparator()
        tb.addWidget(QLabel(" Size: "))
        self.size_combo = QComboBox()
        self.size_combo.setObjectName("size_combo")
        self.size_combo.addItems(list(zoo.SIZES))
        self.size_combo.setCurrentText(self.size)
        self.size_combo.setToolTip("Built-in pipelines: the small test size or the realistic full size")
        self.size_combo.activated.connect(self._on_size_chosen)
        tb.addWidget(self.size_combo)
        self.addToolBar(tb)
        self.toolbar = tb
        self.view_menu.addSeparator()
        self.view_menu.addAction(tb.toggleViewAction())
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.reset_layout_action)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy indicator: a measurement has no known duration
        self.progress.setMaximumWidth(140)
        self.progress.setMaximumHeight(16)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.progress_label = QLabel()
        self.progress_label.hide()
        self.info_label = QLabel()
        sb.addPermanentWidget(self.progress_label)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.info_label)

    # --- opening ----------------------------------------------------------------------
    def open_pipeline(self, spec: str, schedule_spec: str | None = None) -> bool:
        """Open a zoo name or pipeline .json file; on failure say why and keep the current one."""
        if schedule_spec is not None:
            self.preferred_schedule, self.schedule_explicit = schedule_spec, True
            if schedule_spec not in BUILTIN_SCHEDULES and schedule_spec not in self.extra_schedules:
                self.extra_schedules.append(schedule_spec)
        try:
            note = self.doc.open(spec, self.size, self.preferred_schedule)
        except api.InputError as exc:
            QMessageBox.warning(self, "Cannot open pipeline", str(exc))
            self.pipelines.set_current(self.doc.pipeline_spec if self.doc.is_builtin else None)
            return False
        if note and self.schedule_explicit:
            self.statusBar().showMessage(note, STATUS_MS)
        return True

    @Slot()
    def open_pipeline_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open pipeline", str(Path.cwd()), "Pipeline JSON (*.json);;All files (*)")
        if path:
            self.open_pipeline(path)

    @Slot(str)
    def _on_pipeline_chosen(self, name: str) -> None:
        if name != self.doc.pipeline_spec:
            self.open_pipeline(name)

    @Slot(int)
    def _on_schedule_chosen(self, index: int) -> None:
        spec = self.schedule_combo.itemData(index)
        if spec is None or spec == self.doc.schedule_spec:
            return
        try:
            self.doc.set_schedule(spec)
        except api.InputError as exc:
            QMessageBox.warning(self, "Cannot use schedule", str(exc))
            self._sync_schedule_combo()
            return
        self.preferred_schedule, self.schedule_explicit = spec, True

    @Slot(int)
    def _on_size_chosen(self, _index: int) -> None:
        size = self.size_combo.currentText()
        if size == self.size:
            return
        self.size = size
        self.pipelines.populate(size)
        if self.doc.is_builtin:
            self.open_pipeline(self.doc.pipeline_spec)

    # --- document views ---------------------------------------------------------------
    @Slot()
    def _on_document_changed(self) -> None:
        doc = self.doc
        self.loop_view.set_loopnest(doc.loopnest_text, doc.spans)
        self.schedule_view.set_text(doc.schedule.dumps() + "\n")
        for view, lang in ((self.cpp_view, "cpp"), (self.python_view, "python")):
            try:
                view.set_text(doc.source(lang))
            except Exception as exc:  # noqa: BLE001  # one view's failure must not blank the others
                view.set_text(f"# cannot export this schedule: {exc}\n")
        self.stages.set_document(doc)
        self.loop_view.highlight_stage(self.stages.current_stage())
        self.pipelines.set_current(doc.pipeline_spec if doc.is_builtin else None)
        self.size_combo.setEnabled(doc.is_builtin)
        self.size_combo.setToolTip(
            "Built-in pipelines: the small test size or the realistic full size" if doc.is_builtin else "A pipeline file has fixed extents"
        )
        self._sync_schedule_combo()
        self._update_title()

    def _sync_schedule_combo(self) -> None:
        specs = list(BUILTIN_SCHEDULES) + self.extra_schedules
        reasons = self.doc.schedule_options(specs)
        combo = self.schedule_combo
        combo.blockSignals(True)
        combo.clear()
        model = combo.model()
        for spec in specs:
            combo.addItem(schedule_label(spec), spec)
            row = combo.count() - 1
            why = reasons.get(spec)
            combo.setItemData(row, why or (spec if spec not in BUILTIN_SCHEDULES else None), Qt.ItemDataRole.ToolTipRole)
            if why and isinstance(model, QStandardItemModel):
                model.item(row).setEnabled(False)  # shown but greyed: it exists, just not for this pipeline
        combo.setCurrentIndex(specs.index(self.doc.schedule_spec) if self.doc.schedule_spec in specs else 0)
        combo.blockSignals(False)

    def _update_title(self) -> None:
        title = self.doc.title
        self.setWindowTitle(f"{title} — Schedule Explorer" if title else "Schedule Explorer")
        p = self.doc.pipeline
        self.info_label.setText(f"{title} · {len(p.stages)} stages · {format_flop(p.flops())}" if p is not None else "")

    # --- measuring --------------------------------------------------------------------
    @Slot()
    def start_measurement(self) -> MeasureRequest | None:
        if self.doc.pipeline is None or self.measure_service.busy:
            return None
        return self.measure_service.measure(self.doc.pipeline, self.doc.schedule, self.doc.title)

    @Slot(bool)
    def _on_busy_changed(self, busy: bool) -> None:
        self.measure_action.setEnabled(not busy)
        self.cancel_action.setEnabled(busy)
        self.progress.setVisible(busy)
        self.progress_label.setVisible(busy)
        if busy:
            self._elapsed.start()
            self._tick.start()
            self._update_progress()
        else:
            self._tick.stop()

    @Slot()
    def _update_progress(self) -> None:
        self.progress_label.setText(f"Measuring… {self._elapsed.elapsed() / 1000:.1f} s")

    @Slot(object, object, bool)
    def _on_measured(self, request: MeasureRequest, m: Measurement, cancelled: bool) -> None:
        self.measurement.show_result(request, m, cancelled)
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
        s.setValue("windowState", self.saveState(LAYOUT_VERSION))

    @Slot()
    def reset_layout(self) -> None:
        for dock in (self.pipelines_dock, self.stages_dock, self.measurement_dock):
            dock.setFloating(False)
        self.restoreState(self._default_state, LAYOUT_VERSION)

    @Slot()
    def show_about(self) -> None:
        QMessageBox.about(self, "About Schedule Explorer", about_html())

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802  # Qt override
        if self.persist_layout:
            self._save_layout()
        self._tick.stop()
        self.measure_service.shutdown()
        super().closeEvent(event)


def about_html() -> str:
    rows = "".join(f"<tr><td>{k}</td><td>&nbsp;&nbsp;{v}</td></tr>" for k, v in versions().items())
    return (
        "<h3>Schedule Explorer</h3>"
        "<p>Explore Halide schedules of deep-learning and image-processing pipelines: "
        "see the loop nest a schedule produces, and measure it.</p>"
        f"<table>{rows}</table>"
    )
