"""The search panel's two views: a live plot of the best-so-far measured and predicted
times against the trial number (log y), with the baselines as horizontal lines; and a
sortable table of the measured candidates. Both are redrawn from plain records
(engine.search.Trial) and never run anything themselves."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from engine.search import Trial

from ..chart_export import Table
from ..perf_charts import ADAMS_COLOR, MEASURED_COLOR, PREDICTED_COLOR, Chart, log_ticks, swatch
from ..performance import ERROR_COLOR, OK_COLOR

CURRENT_COLOR = QColor("#e67e22")
TRIAL_COLOR = QColor("#8c8c8c")  # each trial's own time: grey dots behind the best-so-far line
BASELINE_COLORS = {"Adams2019": ADAMS_COLOR, "Mullapudi2016": QColor("#16a085"), "Li2018": QColor("#b9770e")}
TRIAL_ROLE = Qt.ItemDataRole.UserRole  # column 0: the trial's index
SORT_ROLE = Qt.ItemDataRole.UserRole + 1


def fmt_ms(ms: float | None) -> str:
    return "–" if ms is None or not math.isfinite(ms) else f"{ms:.4g}"


class SearchPlot(Chart):
    """Best-so-far measured (solid) and predicted (dashed) ms per trial, each trial's measured
    time as a faint dot, and horizontal lines for the baselines (current schedule, Halide's
    autoschedulers)."""

    export_name = "search_progress"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot.setToolTip(
            "Best verified measurement so far (solid) and the cost model's best prediction so far (dashed) after each trial; "
            "faint dots: each trial's measured time; dashed lines: the baselines. Right-click to export."
        )
        self.item.showGrid(x=False, y=True, alpha=0.2)
        self.item.setLogMode(x=False, y=True)
        self.item.setLabel("bottom", "trial")
        self.item.setLabel("left", "ms per run")
        self.model_name = "cost model"
        # series -> (trial number, ms), for tests and redraws
        self.points: dict[str, list[tuple[int, float]]] = {"measured": [], "predicted": [], "trials": []}
        self.baselines: dict[str, float] = {}  # line label -> ms
        self.legend_entries: list[str] = []
        self.failed_baselines: dict[str, str] = {}  # label -> why (shown in the legend, not as a line)
        self.show_message("Start a search: the best schedule found so far appears here, measured and predicted.")

    def clear_data(self, model_name: str = "cost model") -> None:
        self.model_name = model_name
        self.points = {"measured": [], "predicted": [], "trials": []}
        self.baselines = {}
        self.failed_baselines = {}
        self.redraw()

    def add_trial(self, trial: Trial, best_measured_ms: float | None, best_predicted_ms: float | None) -> None:
        n = trial.index + 1
        if best_measured_ms is not None:
            self.points["measured"].append((n, best_measured_ms))
        if best_predicted_ms is not None and math.isfinite(best_predicted_ms) and best_predicted_ms > 0:
            self.points["predicted"].append((n, best_predicted_ms))
        if trial.verified and trial.measured_ms:
            self.points["trials"].append((n, trial.measured_ms))
        self.redraw()

    def set_baseline(self, label: str, ms: float | None, error: str = "") -> None:
        """A horizontal line at `ms`; with no ms, `error` says in the legend why there is none."""
        self.baselines.pop(label, None)
        self.failed_baselines.pop(label, None)
        if ms is not None and ms > 0:
            self.baselines[label] = ms
        elif error:
            self.failed_baselines[label] = error
        self.redraw()

    def data_table(self) -> Table:
        """Per trial: the best measured and predicted so far and the trial's own time; then the baselines."""
        by_trial: dict[int, dict[str, float]] = {}
        for series in ("measured", "predicted", "trials"):
            for n, ms in self.points[series]:
                by_trial.setdefault(n, {})[series] = ms
        header = ["trial", "best_measured_ms", "best_predicted_ms", "trial_measured_ms", "baseline", "baseline_ms"]
        rows: list[list[object]] = [
            [n, got.get("measured"), got.get("predicted"), got.get("trials"), "", None] for n, got in sorted(by_trial.items())
        ]
        rows += [["", None, None, None, label, ms] for label, ms in self.baselines.items()]
        return Table(header, rows)

    def redraw(self) -> None:
        self.item.clear()
        meas, pred, trials = self.points["measured"], self.points["predicted"], self.points["trials"]
        if not (meas or pred or trials or self.baselines):
            self.show_message("Start a search: the best schedule found so far appears here, measured and predicted.")
            return
        if trials:
            self.item.addItem(
                pg.ScatterPlotItem(x=[x for x, _ in trials], y=[math.log10(y) for _, y in trials], size=6, pen=None, brush=TRIAL_COLOR)
            )
        for pts, color, style in ((pred, PREDICTED_COLOR.darker(115), Qt.PenStyle.DashLine), (meas, MEASURED_COLOR, Qt.PenStyle.SolidLine)):
            if pts:
                xs, ys = _steps(pts)
                self.item.addItem(pg.PlotDataItem(xs, ys, pen=pg.mkPen(color, width=2, style=style)))
        legend = [(MEASURED_COLOR, "measured"), (PREDICTED_COLOR.darker(115), f"predicted ({self.model_name})")]
        legend.append((TRIAL_COLOR, "each trial"))
        for label, ms in self.baselines.items():
            color = self._baseline_color(label)
            line = pg.InfiniteLine(pos=math.log10(ms), angle=0, pen=pg.mkPen(color, width=1.5, style=Qt.PenStyle.DashLine))
            line.setToolTip(f"{label}: {ms:.4g} ms")
            self.item.addItem(line)
            legend.append((color, f"{label} {ms:.3g} ms"))
        n = max([x for x, _ in meas + pred + trials] or [1])
        self.item.setXRange(0.5, n + 0.5, padding=0)
        self.item.getAxis("bottom").setTicks([[(k, str(k)) for k in range(1, n + 1, max(1, math.ceil(n / 10)))]])
        values = [y for _, y in meas + pred + trials] + list(self.baselines.values())
        lo, hi = math.log10(min(values)), math.log10(max(values))
        pad = max(0.15, (hi - lo) * 0.12)
        self.item.setYRange(lo - pad, hi + pad, padding=0)
        self.item.getAxis("left").setTicks([log_ticks(lo - pad, hi + pad)])
        # Entries wrap onto a second line rather than being cut off (the baselines come last).
        self.legend.setWordWrap(True)
        failed = [f"{label} failed" for label in self.failed_baselines]
        self.legend_entries = [text for _c, text in legend] + failed
        html = [swatch(c, text.replace(" ", "&nbsp;")) for c, text in legend]
        html += [f"<span style='color:{ERROR_COLOR}'>✘&nbsp;{text.replace(' ', '&nbsp;')}</span>" for text in failed]
        self.legend.setToolTip("\n".join(f"{label} failed: {why[:300]}" for label, why in self.failed_baselines.items()))
        self.legend.setText(" &nbsp; ".join(html))
        self.setCurrentWidget(self.page)

    @staticmethod
    def _baseline_color(label: str) -> QColor:
        return next((c for name, c in BASELINE_COLORS.items() if name in label), CURRENT_COLOR)


def _steps(pts: list[tuple[int, float]]) -> tuple[list[float], list[float]]:
    """A step line through the points: the best so far holds until the trial that beat it."""
    xs, ys = [float(pts[0][0])], [pts[0][1]]
    for x, y in pts[1:]:
        xs += [x, x]
        ys += [ys[-1], y]
    return xs, ys


class _Item(QTableWidgetItem):
    """A cell that sorts by its SORT_ROLE number (failures last), not by its text."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        return super().__lt__(other)


class CandidateTable(QTableWidget):
    """One row per measured candidate; the best verified one bold on a green tint, failures'
    messages in red."""

    HEADERS = ("#", "Predicted ms", "Measured ms", "Verified", "vs current")
    TIPS = (
        "Trial number (the order the candidates were measured in)",
        "The cost model's estimate that chose this candidate",
        "Measured median wall time, or why the candidate failed (the search goes on without it)",
        "Whether the output matched the reference",
        "Speedup over the schedule that was current when the search started",
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(self.HEADERS), parent)
        self.setHorizontalHeaderLabels(list(self.HEADERS))
        for col, tip in enumerate(self.TIPS):
            header_item = self.horizontalHeaderItem(col)
            assert header_item is not None  # setHorizontalHeaderLabels made one per column
            header_item.setToolTip(tip)
        self.setToolTip("Measured candidates: click a header to sort; double-click a row (or select it and press Apply) to use it")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.horizontalHeader()
        for col in range(len(self.HEADERS) - 1):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)  # room for an error message
        self.setSortingEnabled(True)
        self.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # trial order until the user picks a column
        self.trials: dict[int, Trial] = {}
        self.reference_ms: float | None = None

    def clear_trials(self) -> None:
        self.setRowCount(0)
        self.trials.clear()
        self.reference_ms = None

    def add_trial(self, t: Trial) -> None:
        self.trials[t.index] = t
        self.setSortingEnabled(False)  # rows inserted while sorting would move under setItem
        row = self.rowCount()
        self.insertRow(row)
        measured = fmt_ms(t.measured_ms) if t.verified else f"✘ {t.error or 'failed'}"
        cells = [
            (str(t.index + 1), t.index),
            (fmt_ms(t.predicted_ms), t.predicted_ms if math.isfinite(t.predicted_ms) else math.inf),
            (measured, t.measured_ms if t.verified and t.measured_ms is not None else math.inf),
            ("✔" if t.verified else "✘", int(t.verified)),
            ("–", 0.0),
        ]
        items = [_Item(text) for text, _key in cells]
        for col, (item, (_text, key)) in enumerate(zip(items, cells)):
            item.setData(SORT_ROLE, key)
            if col != 2 or t.verified:  # numbers right-aligned; an error message reads from the left
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.setItem(row, col, item)
        items[0].setData(TRIAL_ROLE, t.index)
        if not t.verified:
            for col in (2, 3):
                items[col].setForeground(QBrush(QColor(ERROR_COLOR)))
            items[2].setToolTip(t.error or "failed")
        self.restyle()

    def set_reference(self, ms: float | None) -> None:
        self.reference_ms = ms
        self.restyle()

    def best_index(self) -> int | None:
        ok = [(t.measured_ms, t.index) for t in self.trials.values() if t.verified and t.measured_ms is not None]
        return min(ok, key=lambda ms_index: ms_index[0])[1] if ok else None

    def cell(self, row: int, col: int) -> QTableWidgetItem:
        """The item at (row, col): add_trial fills every cell of its row."""
        item = self.item(row, col)
        assert item is not None, (row, col)
        return item

    def row_of(self, index: int) -> int:
        return next(r for r in range(self.rowCount()) if self.cell(r, 0).data(TRIAL_ROLE) == index)

    def selected_trial(self) -> Trial | None:
        rows = self.selectionModel().selectedRows()
        return self.trials.get(self.cell(rows[0].row(), 0).data(TRIAL_ROLE)) if rows else None

    def restyle(self) -> None:
        """Speedups against the reference, and the best row's highlight."""
        best = self.best_index()
        self.setSortingEnabled(False)  # a changed sort key would move rows under this loop
        tint = QColor(OK_COLOR)
        tint.setAlpha(55)
        for r in range(self.rowCount()):
            t = self.trials[self.cell(r, 0).data(TRIAL_ROLE)]
            x = self.reference_ms / t.measured_ms if self.reference_ms and t.verified and t.measured_ms else None
            speed = self.cell(r, 4)
            speed.setText("–" if x is None else f"{x:.2f}×")
            speed.setData(SORT_ROLE, x or 0.0)
            is_best = t.index == best
            for c in range(self.columnCount()):
                item = self.cell(r, c)
                font = QFont(item.font())
                font.setBold(is_best)
                item.setFont(font)
                item.setBackground(QBrush(tint) if is_best else QBrush())
        self.setSortingEnabled(True)
