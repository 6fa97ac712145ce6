"""Tools → Tune Whole Model…: the open model's tasks tuned (engine/tuning), live.

A table with one row per distinct task (occurrences, start ms, best ms, trials, and a bar:
how much of its start time the task has lost so far), the end-to-end curve (occurrences x
best task time summed after every trial: an estimate, labelled so) against ONNX Runtime's
verified time on this machine, Start / Cancel, and Apply, which puts the tuned schedule in
the document as one undoable command (then Measure times it for real, verified). Cancel
stops at once; Start again resumes from the records the database keeps per task.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.ir import Pipeline
from engine.tuning import TaskResult, TuneProgress, TuneResult

from .worker import PeerTime, TuneService

COLUMNS = ("task", "occurrences", "start ms", "best ms", "trials", "gain")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


class TuneDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, cluster: str = "local") -> None:
        super().__init__(parent)
        self.setWindowTitle("Tune Whole Model")
        self.resize(900, 640)
        self.cluster = cluster
        self.pipeline: Pipeline | None = None
        self.last_result: TuneResult | None = None
        self.service = TuneService(self)
        self.service.peer.connect(self._on_peer)
        self.service.progress.connect(self._on_progress)
        self.service.finished.connect(self._on_finished)
        self._points: list[tuple[float, float]] = []
        self._bars: list[QProgressBar] = []

        self.budget = QDoubleSpinBox(suffix=" s", minimum=5.0, maximum=36000.0, value=120.0, decimals=0)
        self.trials = QSpinBox(minimum=1, maximum=1_000_000, value=100_000)
        self.start_button = QPushButton("Start")
        self.cancel_button = QPushButton("Cancel")
        self.apply_button = QPushButton("Apply to Schedule")
        self.cancel_button.setEnabled(False)
        self.apply_button.setEnabled(False)
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        bar = QHBoxLayout()
        for w in (QLabel("Budget"), self.budget, QLabel("Trials at most"), self.trials, self.start_button, self.cancel_button):
            bar.addWidget(w)
        bar.addStretch(1)
        bar.addWidget(self.apply_button)

        self.status = QLabel("Each distinct task of the model is tuned once and applied to all its occurrences.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)

        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setLabel("bottom", "tuning time (s)")
        self.plot.setLabel("left", "end to end (ms, estimate)")
        self.plot.addLegend()
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=4, name="tuned (estimate)")
        self.ort_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#d62728", width=2, style=Qt.PenStyle.DashLine))
        self.ort_line.setVisible(False)
        self.plot.addItem(self.ort_line)
        self.ort_label = QLabel("ONNX Runtime: -")

        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.status)
        lay.addWidget(self.table, 3)
        lay.addWidget(self.plot, 2)
        lay.addWidget(self.ort_label)

    # --- control ---------------------------------------------------------------------------
    def set_pipeline(self, p: Pipeline | None) -> None:
        self.pipeline = p
        self.start_button.setEnabled(p is not None and not self.service.busy)
        if p is None:
            self.status.setText("Open a model first.")

    def start(self) -> None:
        if self.pipeline is None or self.service.busy:
            return
        self._points.clear()
        self.curve.setData([], [])
        self.last_result = None
        self.apply_button.setEnabled(False)
        self.start_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText(f"Tuning {self.pipeline.name}: ONNX Runtime's time first, then the tasks…")
        self.service.start(self.pipeline, float(self.budget.value()), int(self.trials.value()), self.cluster)

    def cancel(self) -> None:
        self.service.cancel()
        self.status.setText("Cancelling: the running trial's worker is stopped; Start resumes from the records kept.")

    # --- reports -----------------------------------------------------------------------------
    def _on_peer(self, pt: PeerTime) -> None:
        if pt.ms is None:
            self.ort_label.setText(f"ONNX Runtime: not available ({pt.note or 'no ONNX model'})")
            return
        self.ort_line.setValue(pt.ms)
        self.ort_line.setVisible(True)
        self.ort_label.setText(
            f"ONNX Runtime: {pt.ms:.3f} ms on this machine ({'verified' if pt.verified else 'NOT verified'}), dashed line"
        )

    def _on_progress(self, pr: TuneProgress) -> None:
        self._show_tasks(pr.tasks)
        if pr.estimate_ms is not None:
            self._points.append((pr.elapsed_s, pr.estimate_ms))
            self.curve.setData([x for x, _ in self._points], [y for _, y in self._points])
        est = f"{pr.estimate_ms:.2f} ms" if pr.estimate_ms is not None else "after every task's first trial"
        start = f" (start {pr.start_estimate_ms:.2f} ms)" if pr.start_estimate_ms is not None else ""
        self.status.setText(f"{pr.elapsed_s:.0f} s, {pr.trials} trials; end to end (sum of tasks, estimate): {est}{start}")

    def _on_finished(self, res: TuneResult | None, error: str) -> None:
        self.start_button.setEnabled(self.pipeline is not None)
        self.cancel_button.setEnabled(False)
        if res is None:
            self.status.setText(f"Tuning failed: {error}")
            return
        self.last_result = res
        self._show_tasks(res.tasks)
        self.apply_button.setEnabled(True)
        how = "cancelled" if res.cancelled else "done"
        est = f"{res.estimate_ms:.2f} ms" if res.estimate_ms is not None else "-"
        start = f"{res.start_estimate_ms:.2f} ms" if res.start_estimate_ms is not None else "-"
        self.status.setText(
            f"{how}: {res.trials} trials in {res.tuning_s:.0f} s; sum of tasks {start} → {est} (estimate). "
            "Apply puts the tuned schedule in the editor; Measure times it, verified."
        )

    def _show_tasks(self, tasks: list[TaskResult]) -> None:
        if self.table.rowCount() != len(tasks):
            self.table.setRowCount(len(tasks))
            self._bars = []
            for r in range(len(tasks)):
                b = QProgressBar()
                b.setRange(0, 100)
                b.setFormat("%p%")
                self.table.setCellWidget(r, 5, b)
                self._bars.append(b)
        for r, t in enumerate(tasks):
            cells = (t.label, str(t.occurrences), _ms(t.start_ms), _ms(t.best_ms), str(t.trials))
            for c, text in enumerate(cells):
                item = self.table.item(r, c)
                if item is None:
                    item = QTableWidgetItem()
                    self.table.setItem(r, c, item)
                item.setText(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            gain = 0 if not t.start_ms or t.best_ms is None else round(100 * max(0.0, 1 - t.best_ms / t.start_ms))
            self._bars[r].setValue(gain)
            self._bars[r].setToolTip("share of the task's start time saved so far")

    def closeEvent(self, event) -> None:  # noqa: N802, ANN001  # Qt's override
        self.service.cancel()
        super().closeEvent(event)

    def shutdown(self) -> None:
        self.service.shutdown()
