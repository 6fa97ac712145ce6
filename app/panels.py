"""The dock panels: built-in pipelines, the stages of the open one, and the last measurement."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal, Slot
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import zoo
from engine.measure import Measurement

from .document import Document
from .workers import MeasureRequest

ERROR_COLOR = "#c62828"
OK_COLOR = "#2e7d32"
NEUTRAL_COLOR = "#6d6d6d"
VERDICT_CHARS = 240


NAME_ROLE = Qt.ItemDataRole.UserRole
DESCRIPTION_ROLE = Qt.ItemDataRole.UserRole + 1
STAGES_ROLE = Qt.ItemDataRole.UserRole + 2

_Index = QModelIndex | QPersistentModelIndex


class _PipelineDelegate(QStyledItemDelegate):
    """A pipeline row: bold name and stage count over its wrapped, muted description."""

    PAD = 5

    def _fonts(self, base: QFont) -> tuple[QFont, QFont]:
        bold, small = QFont(base), QFont(base)
        bold.setBold(True)
        small.setPointSizeF(base.pointSizeF() * 0.92)
        return bold, small

    def _text_width(self, option: QStyleOptionViewItem) -> int:
        view = self.parent()
        width = view.viewport().width() if isinstance(view, QListWidget) else option.rect.width()
        return max(80, width - 2 * self.PAD - 2)

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # noqa: N802  # Qt override
        bold, small = self._fonts(option.font)
        width = self._text_width(option)
        desc = QFontMetrics(small).boundingRect(QRect(0, 0, width, 10_000), Qt.TextFlag.TextWordWrap, index.data(DESCRIPTION_ROLE) or "")
        return QSize(width, 2 * self.PAD + QFontMetrics(bold).height() + 2 + desc.height())

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the style draws background and selection; the text is drawn below
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        fg = opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        muted = fg if selected else opt.palette.color(QPalette.ColorRole.PlaceholderText)
        bold, small = self._fonts(opt.font)
        r = opt.rect.adjusted(self.PAD + 1, self.PAD, -self.PAD, -self.PAD)
        line = QFontMetrics(bold).height()
        painter.save()
        painter.setFont(bold)
        painter.setPen(fg)
        painter.drawText(
            QRect(r.x(), r.y(), r.width(), line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, index.data(NAME_ROLE)
        )
        n = index.data(STAGES_ROLE)
        painter.setFont(small)
        painter.setPen(muted)
        count = f"{n} stage{'s' if n != 1 else ''}"
        painter.drawText(QRect(r.x(), r.y(), r.width(), line), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, count)
        body = QRect(r.x(), r.y() + line + 2, r.width(), r.height() - line - 2)
        painter.drawText(body, Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap, index.data(DESCRIPTION_ROLE) or "")
        painter.restore()


class PipelinePanel(QWidget):
    """The zoo: one row per built-in pipeline; choosing a row asks for it to be opened."""

    pipeline_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setItemDelegate(_PipelineDelegate(self.list))
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)  # re-wrap descriptions when the dock is resized
        self.list.setAlternatingRowColors(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setToolTip("Built-in pipelines; select one to open it")
        self.list.currentItemChanged.connect(self._on_current)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.list)

    def populate(self, size: str) -> None:
        """(Re)fill the list; descriptions name the extents of this size."""
        current = self.current_name()
        self.list.blockSignals(True)
        self.list.clear()
        for name in zoo.names():
            p = zoo.get(name, size)
            n = len(p.stages)
            item = QListWidgetItem(name)
            item.setData(NAME_ROLE, name)
            item.setData(DESCRIPTION_ROLE, p.description)
            item.setData(STAGES_ROLE, n)
            item.setToolTip(f"<b>{name}</b> ({size} size, {n} stages)<br>{p.description}")
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.set_current(current)

    def current_name(self) -> str | None:
        item = self.list.currentItem()
        return item.data(NAME_ROLE) if item is not None else None

    def set_current(self, name: str | None) -> None:
        """Show `name` as selected (no row for a pipeline file) without emitting."""
        self.list.blockSignals(True)
        try:
            for row in range(self.list.count()):
                if self.list.item(row).data(NAME_ROLE) == name:
                    self.list.setCurrentRow(row)
                    self.list.scrollToItem(self.list.item(row))
                    return
            self.list.setCurrentRow(-1)
            self.list.clearSelection()
        finally:
            self.list.blockSignals(False)

    def item_for(self, name: str) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            if self.list.item(row).data(NAME_ROLE) == name:
                return self.list.item(row)
        return None

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None:
            self.pipeline_selected.emit(item.data(NAME_ROLE))


class StagesPanel(QWidget):
    """The open pipeline's stages with op, shape and where each is computed."""

    stage_selected = Signal(object)  # stage name, or None

    COLUMNS = ("Stage", "Op", "Shape", "Computed")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(self.COLUMNS))
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.setToolTip("Stages in definition order; select one to highlight its code in the loop nest")
        self.tree.itemSelectionChanged.connect(self._on_selection)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tree)

    def set_document(self, doc: Document) -> None:
        """Refill from the document, keeping the selected stage if it still exists."""
        keep = self.current_stage()
        self.tree.blockSignals(True)
        self.tree.clear()
        if doc.pipeline is not None:
            for s in doc.pipeline.stages:
                where = doc.placement_text(s.name)
                shape = "×".join(map(str, s.shape))
                kind = "reduction" if s.is_reduction else "stage"
                if s.name in doc.pipeline.outputs:
                    kind = "output " + kind
                item = QTreeWidgetItem([s.name, s.op, shape, where])
                item.setData(0, Qt.ItemDataRole.UserRole, s.name)
                item.setToolTip(0, f"{s.name}: {kind}, op {s.op}, shape {shape}, computed {where}")
                self.tree.addTopLevelItem(item)
        self.tree.blockSignals(False)
        if keep is not None:
            self.select(keep)

    def current_stage(self) -> str | None:
        items = self.tree.selectedItems()
        return items[0].data(0, Qt.ItemDataRole.UserRole) if items else None

    def item_for(self, stage: str) -> QTreeWidgetItem | None:
        for i in range(self.tree.topLevelItemCount()):
            if self.tree.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) == stage:
                return self.tree.topLevelItem(i)
        return None

    def select(self, stage: str | None) -> None:
        item = self.item_for(stage) if stage else None
        if item is None:
            self.tree.clearSelection()
        else:
            self.tree.setCurrentItem(item)
        self._on_selection()

    @Slot()
    def _on_selection(self) -> None:
        self.stage_selected.emit(self.current_stage())


def _fmt_ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g} ms"


def _result_text(m: Measurement, cancelled: bool) -> tuple[str, str]:
    """Headline and its colour for a measurement."""
    if cancelled:
        return "Cancelled", NEUTRAL_COLOR
    if m.ok and m.verified:
        return "✔ Verified against the reference" + (" (stored result)" if m.cached else ""), OK_COLOR
    if m.ok:
        return "Not verified", NEUTRAL_COLOR
    heading = {
        "verification": "✘ Failed verification",
        "crash": "✘ Crashed",
        "timeout": "✘ Timed out",
        "invalid_schedule": "✘ Invalid schedule",
    }.get(m.error_kind or "", "✘ Error")
    return f"{heading}: {m.error or 'no details'}", ERROR_COLOR


class StageTimesChart(QStackedWidget):
    """Per-stage milliseconds as horizontal bars, or a line saying why there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = QLabel()
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.message.setStyleSheet(f"color: {NEUTRAL_COLOR}")
        self.plot = pg.PlotWidget()
        self.plot.setToolTip("Per-stage time from Halide's profiler, scaled to the median run time")
        self._style_plot()
        self.addWidget(self.message)
        self.addWidget(self.plot)
        self.show_message("")

    def _style_plot(self) -> None:
        # Follow the widget palette instead of pyqtgraph's black default.
        pal = self.palette()
        fg = pal.color(QPalette.ColorRole.Text)
        self.plot.setBackground(pal.color(QPalette.ColorRole.Base))
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.showGrid(x=True, y=False, alpha=0.2)
        item.invertY(True)  # first stage on top, as in the stage list
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setPen(pg.mkPen(fg))
            axis.setTextPen(pg.mkPen(fg))
        bottom = item.getAxis("bottom")
        bottom.setStyle(maxTickLevel=0)  # major ticks only: minor grid lines turn the chart grey
        bottom.enableAutoSIPrefix(False)  # the unit stays "ms"; no "(x0.001)" scale factor
        item.setLabel("bottom", "ms per run")

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self.setCurrentWidget(self.message)

    def show_stages(self, stages: dict[str, float]) -> None:
        item = self.plot.getPlotItem()
        item.clear()
        names, values = list(stages), list(stages.values())
        ys = list(range(len(names)))
        brush = self.palette().color(QPalette.ColorRole.Highlight)
        item.addItem(pg.BarGraphItem(x0=0, y=ys, height=0.6, width=values, brush=brush, pen=pg.mkPen(brush.darker(130))))
        top = max(values) if values else 1.0
        for y, v in zip(ys, values):
            label = pg.TextItem(f"{v:.3g}", color=self.palette().color(QPalette.ColorRole.Text), anchor=(0, 0.5))
            label.setPos(v + top * 0.01, y)
            item.addItem(label)
        item.getAxis("left").setTicks([list(zip(ys, names))])
        item.setYRange(-0.5, len(names) - 0.5, padding=0.05)
        item.setXRange(0, top * 1.15 or 1.0, padding=0)
        self.setCurrentWidget(self.plot)


class MeasurementPanel(QWidget):
    """The latest measurement: what was measured, the verdict, timings and per-stage times."""

    IDLE_TEXT = "Press Measure (Ctrl+M) to compile, time and verify the current schedule."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: Measurement | None = None
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.values: dict[str, QLabel] = {}
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        tips = {
            "Median": "Median wall time of one run of the pipeline",
            "Min": "Fastest run",
            "IQR": "Interquartile range of the run times: the spread of the middle half",
            "GFLOP/s": "Useful floating-point work per second at the median time",
            "Compile": "Seconds Halide took to JIT-compile the pipeline",
            "Runs": "Timed runs and Halide threads",
        }
        for key, tip in tips.items():
            value = QLabel("–")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = QLabel(key + ":")
            name.setToolTip(tip)
            value.setToolTip(tip)
            form.addRow(name, value)
            self.values[key] = value
        left = QVBoxLayout()
        left.addWidget(self.title)
        left.addWidget(self.verdict)
        left.addLayout(form)
        left.addStretch(1)
        left_box = QWidget()
        left_box.setLayout(left)
        left_box.setMinimumWidth(240)
        left_box.setMaximumWidth(420)
        self.chart = StageTimesChart()
        lay = QHBoxLayout(self)
        lay.addWidget(left_box, 2)
        lay.addWidget(self.chart, 5)
        self.clear()

    def clear(self) -> None:
        self.result = None
        self.title.setText("No measurement yet")
        self._set_verdict(self.IDLE_TEXT, NEUTRAL_COLOR)
        for v in self.values.values():
            v.setText("–")
        self.chart.show_message("Per-stage times appear here after a measurement.")

    def show_running(self, request: MeasureRequest) -> None:
        self.title.setText(f"Measuring {request.label}…")
        self._set_verdict("Compiling, timing and verifying in a worker process.", NEUTRAL_COLOR)

    def show_result(self, request: MeasureRequest, m: Measurement, cancelled: bool = False) -> None:
        self.result = m
        self.title.setText(request.label)
        self._set_verdict(*_result_text(m, cancelled))
        self.values["Median"].setText(_fmt_ms(m.median_ms))
        self.values["Min"].setText(_fmt_ms(m.min_ms))
        self.values["IQR"].setText(_fmt_ms(m.iqr_ms))
        self.values["GFLOP/s"].setText("–" if m.gflops is None else f"{m.gflops:.3g}")
        self.values["Compile"].setText("–" if m.compile_s is None else f"{m.compile_s:.2f} s")
        self.values["Runs"].setText(f"{m.runs} runs, {m.threads} threads" if m.runs else "–")
        if m.stages and any(v > 0 for v in m.stages.values()):
            self.chart.show_stages(m.stages)
        elif not m.ok or cancelled:
            self.chart.show_message("No per-stage profile: the measurement did not complete.")
        else:
            self.chart.show_message("No per-stage profile: the runs were too short for Halide's profiler to sample.")

    def verdict_text(self) -> str:
        """The whole verdict (the label may show it shortened)."""
        return self.verdict.toolTip()

    def _set_verdict(self, text: str, color: str) -> None:
        # A crash report can quote a long stderr tail: show its start, all of it in the tooltip.
        short = text if len(text) <= VERDICT_CHARS else text[: VERDICT_CHARS - 1] + "…"
        self.verdict.setText(short)
        self.verdict.setStyleSheet(f"color: {color}")
        self.verdict.setToolTip(text)
