"""The performance panel's two charts (pyqtgraph): per-stage time, predicted beside
measured; and the session's history of variants, predicted and measured, with the
baselines as reference lines. Clicking a point of the history asks to go back to it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor, QPalette, QResizeEvent
from PySide6.QtWidgets import QCheckBox, QFrame, QHBoxLayout, QLabel, QMenu, QScrollArea, QSizePolicy, QStackedWidget, QVBoxLayout, QWidget

from . import chart_export
from .chart_export import Table
from .model.history import PREDICTED_LABEL, Variant

NEUTRAL_COLOR = "#6d6d6d"
PREDICTED_COLOR = QColor("#9bb7e0")  # light: an estimate
MEASURED_COLOR = QColor("#2b62b8")  # solid: a measurement
DEFAULT_COLOR, ADAMS_COLOR = QColor("#808080"), QColor("#8e44ad")
MIN_BARS = 6  # stage rows the per-stage chart always shows (more when the dock is taller)


def style_plot(plot: pg.PlotWidget, widget: QWidget) -> pg.PlotItem:
    """Follow the widget palette instead of pyqtgraph's black default; no mouse zoom."""
    pal = widget.palette()
    fg = pal.color(QPalette.ColorRole.Text)
    plot.setBackground(pal.color(QPalette.ColorRole.Base))
    item = plot.getPlotItem()
    item.setMenuEnabled(False)
    item.hideButtons()
    item.setMouseEnabled(x=False, y=False)
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setPen(pg.mkPen(fg))
        axis.setTextPen(pg.mkPen(fg))
        axis.enableAutoSIPrefix(False)
        axis.setStyle(maxTickLevel=0)  # major ticks only: minor grid lines turn the chart grey
    return item


def add_hbars(item: pg.PlotItem, ys: list[float], widths: list[float], color: QColor, height: float) -> None:
    """One series of horizontal bars from 0 (a row per y), outlined a shade darker."""
    item.addItem(pg.BarGraphItem(x0=0, y=ys, height=height, width=widths, brush=color, pen=pg.mkPen(color.darker(125))))


def swatch(color: QColor, text: str, filled: bool = True) -> str:
    """Rich text for a legend entry: a coloured square (or ring) and its words."""
    mark = "■" if filled else "○"
    return f"<span style='color:{color.name()}; font-size:large'>{mark}</span>&nbsp;{text}"


class Chart(QStackedWidget):
    """A plot under a one-line legend, or a line saying why there is no plot. (The legend
    sits outside the plot so it never covers a bar or a point.) The base of the app's charts
    (StageBars, HistoryPlot, search.views.SearchPlot). Right-click exports it (chart_export):
    PNG, SVG, and `data_table()`, what the chart plotted, as CSV. `scrolling`: the plot sits
    in a vertical scroll area (a chart taller than its dock)."""

    export_name = "chart"  # the export's file name (a panel may add the pipeline's name)

    def __init__(self, parent: QWidget | None = None, scrolling: bool = False) -> None:
        super().__init__(parent)
        self.message = QLabel()
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.message.setStyleSheet(f"color: {NEUTRAL_COLOR}")
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the chart
        self.plot = pg.PlotWidget()
        self.item = style_plot(self.plot, self)
        self.export = chart_export.install(
            self.plot, self.item, lambda: self.export_name, self.data_table, self.legend_html, self.extend_menu
        )
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.legend_row = QHBoxLayout()  # the legend, and any control a chart adds beside it
        self.legend_row.setContentsMargins(0, 0, 0, 0)
        self.legend_row.addWidget(self.legend, 1)
        lay.addLayout(self.legend_row)
        self.scroll_area: QScrollArea | None = None
        if scrolling:
            self.scroll_area = QScrollArea()
            self.scroll_area.setWidget(self.plot)
            self.scroll_area.setWidgetResizable(True)
            self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
            self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            lay.addWidget(self.scroll_area, 1)
        else:
            lay.addWidget(self.plot, 1)
        self.addWidget(self.message)
        self.addWidget(page)
        self.page = page
        self.show_message("")

    def data_table(self) -> Table:
        """What the chart plots now, as rows (its CSV export); charts override this."""
        return Table(["x", "y"])

    def legend_html(self) -> str:
        """The legend, coloured swatches and all (the title of an exported picture)."""
        return self.legend.text() if self.currentWidget() is self.page else ""

    def extend_menu(self, menu: QMenu) -> None:
        """Add a chart's own actions to its right-click menu (after the exports)."""

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            # pyqtgraph keeps the colours it was given: follow the theme, and redraw the
            # items (labels, hollow markers) that took theirs from the palette.
            style_plot(self.plot, self)
            self.redraw()

    def redraw(self) -> None:
        """Draw the last data again (after a theme change); charts that keep it override this."""

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self.setCurrentWidget(self.message)

    def show_plot(self, legend: list[str]) -> None:
        self.legend.setText("&nbsp;&nbsp;&nbsp;".join(legend))
        self.setCurrentWidget(self.page)


class StageBars(Chart):
    """Per stage, its share of the run time: predicted (light) above measured (solid), each
    labelled with its milliseconds. Shares, not ms, share the axis: the analytic estimate's
    absolute scale is rough, but where the time goes is what a schedule changes."""

    export_name = "stage_times"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, scrolling=True)
        self.plot.setToolTip(
            "Share of the run time per stage: light bars are the cost model's prediction, "
            "solid bars the measurement (Halide's profiler, scaled to the median). Labels give milliseconds. "
            "Right-click to export, or to show all stages."
        )
        self.item.showGrid(x=True, y=False, alpha=0.2)
        self.item.invertY(True)  # first stage on top, as in the stage list
        self.item.setLabel("bottom", "% of run time")
        self.shown: dict[str, dict[str, float]] = {}  # series -> stage -> ms (for tests)
        self.plotted: list[str] = []  # the stages with a row, top to bottom
        self._series: list[tuple[str, list[float]]] = []  # plotted: series -> share (%) per plotted stage
        self._args: tuple | None = None
        self._fitted = 0
        # A big pipeline shows its hottest stages in the dock's height; "All stages" shows
        # every stage, in pipeline order, in a chart that scrolls.
        self.all_stages = False
        self.all_check = QCheckBox("All stages")
        self.all_check.setObjectName("all_stages")
        self.all_check.setToolTip("Show every stage in pipeline order (the chart scrolls), not only the hottest that fit")
        self.all_check.toggled.connect(self.set_all_stages)
        self.all_check.hide()
        self.legend_row.addWidget(self.all_check, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self.legend.setWordWrap(True)  # beside the check box, a long legend wraps instead of being cut

    def _row_px(self) -> int:
        return self.fontMetrics().height() + 2

    def _rows_that_fit(self) -> int:
        return max(MIN_BARS, int((self.height() - 70) / self._row_px()))

    def set_all_stages(self, on: bool) -> None:
        """Every stage (scrolling) or the hottest that fit the dock."""
        self.all_stages = on
        if self.all_check.isChecked() != on:
            self.all_check.setChecked(on)
        self.redraw()

    def extend_menu(self, menu: QMenu) -> None:
        n = len(self._args[0]) if self._args is not None else 0
        action = menu.addAction(f"Show all {n} stages (scroll)" if n else "Show all stages (scroll)")
        action.setObjectName("all_stages")
        action.setCheckable(True)
        action.setChecked(self.all_stages)
        action.toggled.connect(self.set_all_stages)

    def data_table(self) -> Table:
        header = ["stage"]
        for name, _shares in self._series:
            header += [f"{name} ms", f"{name} % of run time"]
        rows: list[list[object]] = []
        for k, stage in enumerate(self.plotted):
            row: list[object] = [stage]
            for name, shares in self._series:
                row += [self.shown[name].get(stage, 0.0), shares[k]]
            rows.append(row)
        return Table(header, rows)

    def redraw(self) -> None:
        if self._args is not None:
            self.show_stages(*self._args)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802  # Qt override
        super().resizeEvent(event)
        if self._args is not None and not self.all_stages and len(self._args[0]) > MIN_BARS and self._rows_that_fit() != self._fitted:
            self.show_stages(*self._args)  # a big pipeline: as many rows as now fit

    def show_stages(
        self, stages: list[str], predicted: dict[str, float] | None, measured: dict[str, float] | None, label: str = PREDICTED_LABEL
    ) -> None:
        self._args = (stages, predicted, measured, label)
        self.item.clear()
        candidates = [(label, predicted, PREDICTED_COLOR, -0.19), ("measured", measured, MEASURED_COLOR, 0.19)]
        series = [(name, values, color, offset) for name, values, color, offset in candidates if values and sum(values.values()) > 0]
        self.shown = {name: dict(values) for name, values, _c, _o in series}
        self.plotted, self._series = [], []
        if not series:
            self.all_check.hide()
            self.show_message("Per-stage times appear here: the prediction after opening, the measurement after Measure.")
            return
        ink = self.palette().color(QPalette.ColorRole.Text)
        n_all = len(stages)
        # As many rows as fit the dock (at least MIN_BARS); beyond that the hottest, hottest
        # first; or every stage in pipeline order, the plot as tall as its rows (it scrolls).
        fits = self._fitted = self._rows_that_fit()
        self.all_check.setVisible(n_all > fits or self.all_stages)
        if self.all_stages:
            self.plot.setMinimumHeight(n_all * self._row_px() + 70)
        else:
            self.plot.setMinimumHeight(0)
            if n_all > fits:
                key = series[-1][1]
                stages = sorted(stages, key=lambda s: -key.get(s, 0.0))[:fits]
        self.plotted = list(stages)
        ys = list(range(len(stages)))
        height = 0.36 if len(series) == 2 else 0.6
        top = max(max(100 * v / sum(vals.values()) for v in vals.values()) for _n, vals, _c, _o in series)
        for name, values, color, offset in series:
            total = sum(values.values())
            shares = [100 * values.get(s, 0.0) / total for s in stages]
            self._series.append((name, shares))
            y = [v + (offset if len(series) == 2 else 0) for v in ys]
            add_hbars(self.item, y, shares, color, height)
            # Milliseconds on one series only (the measured one when there is one): two
            # labels per stage do not fit in a short dock.
            if name != series[-1][0]:
                continue
            for yy, share, s in zip(y, shares, stages):
                ms = values.get(s)
                if ms:
                    ms_label = pg.TextItem(f"{ms:.3g} ms", color=ink, anchor=(0, 0.5))
                    ms_label.setPos(share + top * 0.02, yy)
                    self.item.addItem(ms_label)
        self.item.getAxis("left").setTicks([list(zip(ys, stages))])
        self.item.setYRange(-0.6, len(stages) - 0.4, padding=0.02)
        self.item.setXRange(0, min(100.0, top) * 1.35, padding=0)
        legend = [swatch(color, name) for name, _v, color, _o in series]
        legend[-1] += " (ms labelled)"
        some = f" ({len(stages)} hottest of {n_all} stages)" if n_all > len(stages) else ""
        some = f" (all {n_all} stages; scroll)" if self.all_stages and n_all > fits else some
        self.item.setLabel("bottom", f"% of run time{some}")
        self.show_plot(legend)


class HistoryPlot(Chart):
    """Run time per variant of this session (x: variant number, y: ms, log scale)."""

    variant_clicked = Signal(int)  # variant number
    export_name = "history"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot.setToolTip(
            "Every schedule of this session: hollow = predicted, filled = measured. Click a point to go back to it; "
            "right-click to export the chart or the measurement history."
        )
        # The whole measurement history (every field of every measurement) as a table: set by
        # the window (app/analysis.py), offered beside the chart's own data in the menu.
        self.history_table: Callable[[], Table] | None = None
        self.item.showGrid(x=False, y=True, alpha=0.2)
        self.item.setLogMode(x=False, y=True)
        self.item.setLabel("bottom", "variant")
        self.item.setLabel("left", "ms per run")
        self.points: dict[str, list[tuple[int, float]]] = {}  # series -> (variant, ms), for tests
        self._args: tuple | None = None

    def redraw(self) -> None:
        if self._args is not None:
            self.show_history(*self._args)

    def data_table(self) -> Table:
        """One row per variant with a point, then one per baseline line."""
        if self._args is None:
            return Table(["variant", "label", "predicted_ms", "measured_ms"])
        variants, _current, baselines = self._args
        pred, meas = dict(self.points.get("predicted", [])), dict(self.points.get("measured", []))
        rows: list[list[object]] = [
            [v.number, v.label, pred.get(v.number), meas.get(v.number)] for v in variants if v.number in pred or v.number in meas
        ]
        rows += [["", f"{name} (baseline)", None, ms] for name, ms in baselines.items()] if rows else []
        return Table(["variant", "label", "predicted_ms", "measured_ms"], rows)

    def extend_menu(self, menu: QMenu) -> None:
        if self.history_table is not None:
            table = self.history_table
            action = menu.addAction("Export measurement history as CSV…")
            action.setObjectName("export_history")
            action.setEnabled(bool(table().rows))
            action.triggered.connect(lambda: chart_export.save_csv(self, "measurement_history", table))

    def _on_points_clicked(self, _item: object, points: Any, _event: object) -> None:
        if len(points) > 0:  # points: a numpy array of pyqtgraph's SpotItems under the click, topmost first
            self.variant_clicked.emit(int(points[0].data()))

    def show_history(self, variants: list[Variant], current: int | None, baselines: dict[str, float]) -> None:
        self._args = (list(variants), current, dict(baselines))
        self.item.clear()
        pred = [(v.number, v.predicted_ms) for v in variants if v.predicted_ms and v.predicted_ms > 0]
        meas = [(v.number, v.measured_ms) for v in variants if v.measured_ms and v.measured_ms > 0]
        self.points = {"predicted": pred, "measured": meas}
        if not pred and not meas:
            self.show_message("Each schedule you try appears here, predicted and measured.")
            return
        labels = {v.number: v.label for v in variants}

        def scatter(pts: list, color: QColor, filled: bool, name: str) -> None:
            xs, ys = [x for x, _ in pts], [y for _, y in pts]
            self.item.addItem(
                pg.PlotDataItem(xs, ys, pen=pg.mkPen(color, width=1.5, style=Qt.PenStyle.SolidLine if filled else Qt.PenStyle.DashLine))
            )
            spots = pg.ScatterPlotItem(
                x=xs, y=[math.log10(y) for y in ys], data=xs, size=10, pen=pg.mkPen(color, width=2),
                brush=pg.mkBrush(color if filled else self.palette().color(QPalette.ColorRole.Base)), hoverable=True,
                tip=lambda x, y, data: f"variant {data}: {labels.get(data, '')}\n{10**y:.4g} ms {name}",
            )  # fmt: skip
            spots.sigClicked.connect(self._on_points_clicked)
            self.item.addItem(spots)

        if pred:
            scatter(pred, PREDICTED_COLOR.darker(115), False, "predicted")
        if meas:
            scatter(meas, MEASURED_COLOR, True, "measured")
        for name, ms in baselines.items():
            color = ADAMS_COLOR if "Adams" in name else DEFAULT_COLOR
            # No text on the line: close baselines would print over each other (the legend
            # names them, the summary gives their times).
            line = pg.InfiniteLine(pos=math.log10(ms), angle=0, pen=pg.mkPen(color, width=1.5, style=Qt.PenStyle.DashLine))
            line.setToolTip(f"{name}: {ms:.4g} ms")
            self.item.addItem(line)
        if current is not None:
            cur = [(x, y) for x, y in meas + pred if x == current][:1]
            if cur:
                ring = pg.ScatterPlotItem(x=[cur[0][0]], y=[math.log10(cur[0][1])], size=18, pen=pg.mkPen("#e67e22", width=2), brush=None)
                self.item.addItem(ring)
        n = max(v.number for v in variants)
        self.item.setXRange(0.5, n + 0.5, padding=0)
        self.item.getAxis("bottom").setTicks([[(k, str(k)) for k in range(1, n + 1, max(1, n // 10))]])
        values = [y for _, y in pred + meas] + list(baselines.values())
        lo, hi = math.log10(min(values)), math.log10(max(values))
        pad = max(0.15, (hi - lo) * 0.12)
        self.item.setYRange(lo - pad, hi + pad, padding=0)
        self.item.getAxis("left").setTicks([log_ticks(lo - pad, hi + pad)])
        legend = [swatch(PREDICTED_COLOR.darker(115), "predicted", False), swatch(MEASURED_COLOR, "measured")]
        legend += [swatch(ADAMS_COLOR if "Adams" in k else DEFAULT_COLOR, f"{k} (dashed)") for k in baselines]
        self.show_plot(legend + ["<span style='color:#e67e22'>◯</span>&nbsp;current"])


def log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Ticks at 1, 2 and 5 per decade between two log10 values (fewer when many decades)."""
    steps = (1, 2, 5) if hi - lo < 3 else (1,)
    ticks = []
    for e in range(math.floor(lo), math.ceil(hi) + 1):
        for m in steps:
            v = m * 10.0**e
            if lo <= math.log10(v) <= hi:
                ticks.append((math.log10(v), f"{v:g}"))
    if len(ticks) < 2:  # the range is under one 1-2-5 step: three ticks inside it
        ticks = [(lo + (hi - lo) * k / 4, f"{10 ** (lo + (hi - lo) * k / 4):.2g}") for k in (1, 2, 3)]
    return ticks
