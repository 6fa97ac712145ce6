"""Strategy curves: `bench strategies` results (engine/bench/strategies.py) drawn as
best-so-far curves, median across seeds with the interquartile range as a band, one line
per strategy, against evaluations (cost-model objective) or measurements (hardware).

The Search dock's "Strategy curves…" opens a saved result and shows the curves of the
pipeline that is open; `python -m app.search.curves RESULT.json OUTDIR` renders the same
charts offscreen, one PNG per objective with a panel per pipeline (the README's pictures).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QDialog, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ..chart_export import Table
from ..perf_charts import Chart, log_ticks, swatch

COLORS = {
    "random": QColor("#7f7f7f"), "evolution": QColor("#2ca02c"), "cmaes": QColor("#ff7f0e"), "lamcts": QColor("#1f77b4"),
    "plalam": QColor("#d62728"), "greedy": QColor("#9467bd"), "beam": QColor("#8c564b"),
}  # fmt: skip
OBJECTIVES = {"model": "cost model (objective)", "hardware": "hardware"}
AXES = {"evaluations": "evaluations (distinct schedules predicted)", "measurements": "hardware measurements"}


class CurvesError(ValueError):
    """A file that is not a `bench strategies` result, or lacks what was asked for."""


def load_result(path: str | Path) -> dict[str, Any]:
    """A `bench strategies --out` JSON file, checked enough to draw (one clear error if not)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CurvesError(f"{path}: cannot read a JSON result ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("pipelines"), dict) or not isinstance(data.get("strategies"), list):
        raise CurvesError(f"{path}: not a `bench strategies` result (no 'pipelines' and 'strategies')")
    return data


def curves_of(result: dict[str, Any], pipeline: str, objective: str, axis: str) -> dict[str, dict[str, list[Any]]]:
    """strategy -> {"x", "median", "q1", "q3"} for one pipeline, objective and axis."""
    row = result["pipelines"].get(pipeline, {}).get(objective)
    if not isinstance(row, dict):
        raise CurvesError(f"no {objective} runs of {pipeline!r} in this result (it has: {', '.join(result['pipelines']) or 'none'})")
    out = {}
    for strategy, cell in row.items():
        curve = cell.get(f"curve_{axis}") if isinstance(cell, dict) else None
        if isinstance(curve, dict) and all(isinstance(curve.get(k), list) for k in ("x", "median", "q1", "q3")):
            out[strategy] = curve
    if not out:
        raise CurvesError(f"{pipeline}: no curves against {axis} for the {objective} objective")
    return out


class StrategyCurves(Chart):
    """Best-so-far ms (log) against evaluations or measurements (log): per strategy the median
    across seeds (line) and the interquartile range (band)."""

    export_name = "strategy_curves"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot.setToolTip("Best so far: median across seeds (line), interquartile range (band). Right-click to export.")
        self.item.showGrid(x=True, y=True, alpha=0.2)
        self.item.setLabel("left", "best ms so far")
        self.item.getAxis("left").setWidth(72)  # room for the tick labels beside the axis title
        self.curves: dict[str, dict[str, list[Any]]] = {}
        self.title = ""
        self.show_message("Open a `bench strategies` result to see its curves.")

    def set_curves(self, curves: dict[str, dict[str, list[Any]]], axis: str, title: str = "") -> None:
        self.curves, self.title = curves, title
        self.item.clear()
        self.item.setLabel("bottom", AXES.get(axis, axis))
        ys_all: list[float] = []
        xs_all: list[float] = []
        legend = []
        for strategy, c in curves.items():
            pts = [(x, m, a, b) for x, m, a, b in zip(c["x"], c["median"], c["q1"], c["q3"]) if _pos(m) and _pos(a) and _pos(b) and x > 0]
            if not pts:
                continue
            color = COLORS.get(strategy, QColor("#17becf"))
            lx = [math.log10(p[0]) for p in pts]
            lo = pg.PlotDataItem(lx, [math.log10(p[2]) for p in pts], pen=pg.mkPen(None))
            hi = pg.PlotDataItem(lx, [math.log10(p[3]) for p in pts], pen=pg.mkPen(None))
            band = QColor(color)
            band.setAlpha(45)
            self.item.addItem(lo)
            self.item.addItem(hi)
            self.item.addItem(pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(band)))
            self.item.addItem(pg.PlotDataItem(lx, [math.log10(p[1]) for p in pts], pen=pg.mkPen(color, width=2)))
            ys_all += [math.log10(p[2]) for p in pts] + [math.log10(p[3]) for p in pts]
            xs_all += lx
            legend.append(swatch(color, f"{strategy}&nbsp;{pts[-1][1]:.4g}&nbsp;ms"))
        if not ys_all:
            self.show_message("No finite times to draw.")
            return
        ylo, yhi = min(ys_all), max(ys_all)
        pad = max(0.02, (yhi - ylo) * 0.08)
        self.item.setYRange(ylo - pad, yhi + pad, padding=0)
        self.item.getAxis("left").setTicks([log_ticks(ylo - pad, yhi + pad)])
        xhi = max(xs_all)
        self.item.setXRange(0, xhi, padding=0.02)
        self.item.getAxis("bottom").setTicks([log_ticks(0.0, xhi)])
        head = f"<b>{title}</b> &nbsp; " if title else ""
        self.legend.setWordWrap(True)
        self.legend.setText(head + " &nbsp; ".join(legend))
        self.setCurrentWidget(self.page)

    def data_table(self) -> Table:
        rows: list[list[object]] = []
        for strategy, c in self.curves.items():
            rows += [[strategy, x, m, a, b] for x, m, a, b in zip(c["x"], c["median"], c["q1"], c["q3"])]
        return Table(["strategy", "x", "median_ms", "q1_ms", "q3_ms"], rows)


def _pos(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v) and v > 0


def _axes_of(objective: str) -> list[str]:
    return ["evaluations"] if objective == "model" else ["measurements", "evaluations"]


class CurvesDialog(QDialog):
    """One result's curves for one pipeline: pick the objective and the axis."""

    def __init__(self, result: dict[str, Any], pipeline: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data, self.pipeline = result, pipeline
        self.setWindowTitle(f"Strategy curves: {pipeline}")
        row = result["pipelines"].get(pipeline, {})
        objectives = [o for o in OBJECTIVES if o in row]
        if not objectives:
            raise CurvesError(f"no runs of {pipeline!r} in this result (it has: {', '.join(result['pipelines']) or 'none'})")
        self.objective = QComboBox()
        for o in objectives:
            self.objective.addItem(OBJECTIVES[o], o)
        self.axis = QComboBox()
        self.chart = StrategyCurves()
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Objective:"))
        bar.addWidget(self.objective)
        bar.addWidget(QLabel("against:"))
        bar.addWidget(self.axis)
        bar.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.chart, 1)
        note = QLabel(_settings_text(result))
        note.setWordWrap(True)
        lay.addWidget(note)
        self.objective.currentIndexChanged.connect(self._objective_changed)
        self.axis.currentIndexChanged.connect(self.redraw)
        self.resize(760, 480)
        self._objective_changed()

    def _objective_changed(self) -> None:
        self.axis.blockSignals(True)
        self.axis.clear()
        for a in _axes_of(self.objective.currentData()):
            self.axis.addItem(AXES[a], a)
        self.axis.blockSignals(False)
        self.redraw()

    def redraw(self) -> None:
        obj, axis = self.objective.currentData(), self.axis.currentData()
        self.chart.set_curves(curves_of(self.data, self.pipeline, obj, axis), axis, f"{self.pipeline}, {OBJECTIVES[obj]}")


def _settings_text(result: dict[str, Any]) -> str:
    load = result.get("load_avg") or []
    load_s = f"; load average {min(load):.1f}-{max(load):.1f}" if load else ""
    return (
        f"{result.get('model', '')}; {result.get('seeds')} seeds x {result.get('evals')} evaluations on the model, "
        f"{result.get('hw_seeds')} seeds x {result.get('measurements')} measurements on hardware; "
        f"host {result.get('machine', {}).get('host', '?')}{load_s}" + (" (partial run)" if result.get("partial") else "")
    )


def overview(result: dict[str, Any], objective: str, axis: str, columns: int = 3, panel: tuple[int, int] = (520, 340)) -> QWidget:
    """A grid of StrategyCurves, one per pipeline that has `objective` runs (for a PNG)."""
    names = [n for n, r in result["pipelines"].items() if objective in r]
    if not names:
        raise CurvesError(f"no {objective} runs in this result")
    w = QWidget()
    w.setStyleSheet("background: white")
    grid = QGridLayout(w)
    for i, name in enumerate(names):
        chart = StrategyCurves()
        chart.set_curves(curves_of(result, name, objective, axis), axis, name)
        chart.setFixedSize(*panel)
        grid.addWidget(chart, i // columns, i % columns)
    note = QLabel(f"{OBJECTIVES[objective]}, against {AXES[axis]}: median (line) and IQR (band) across seeds. " + _settings_text(result))
    note.setWordWrap(True)
    grid.addWidget(note, (len(names) - 1) // columns + 1, 0, 1, columns)
    note.setAlignment(Qt.AlignmentFlag.AlignLeft)
    return w


def write_pngs(result: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """One PNG per objective and axis in the result (needs a QApplication)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for objective in OBJECTIVES:
        if not any(objective in r for r in result["pipelines"].values()):
            continue
        for axis in _axes_of(objective):
            w = overview(result, objective, axis)
            w.adjustSize()
            w.show()  # laid out and painted offscreen
            path = out / f"strategies_{objective}_{axis}.png"
            if not w.grab().save(str(path), "PNG"):
                raise OSError(f"could not write {path}")
            w.close()
            paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """`python -m app.search.curves RESULT.json OUTDIR`: the result's curves as PNG files."""
    import os  # noqa: PLC0415

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m app.search.curves RESULT.json OUTDIR", file=sys.stderr)
        return 2
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication  # noqa: PLC0415

    app = QApplication.instance() or QApplication([])
    try:
        paths = write_pngs(load_result(args[0]), args[1])
    except (CurvesError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    del app
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
