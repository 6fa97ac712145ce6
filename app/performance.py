"""The performance panel: the current schedule's measured and predicted time side by side,
speedups over the baselines, per-stage bars and the session's history. It re-renders
from state (document, session history, what the service is doing), so it never shows a
result that belongs to another schedule."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.costmodel import default_choice, short_label, unmodelled
from engine.measure import Measurement, autoscheduler_key

from .model.document import Document
from .model.history import SessionHistory, predicted_label
from .perf_charts import HistoryPlot, StageBars
from .workers import MeasureRequest

ERROR_COLOR = "#c62828"
OK_COLOR = "#2e7d32"
NEUTRAL_COLOR = "#6d6d6d"
WARN_COLOR = "#b26a00"
VERDICT_CHARS = 240
# A result whose interquartile range exceeds this share of its median is called noisy. With
# IQR/median = 0.2 the middle half of the runs spans about ±10% around the median: the size
# of a speedup users act on, so a difference between two such results is within the noise.
# Ordinary jitter stays below it (the shipped cost-model data set, timed while other jobs ran
# on 2 shared cores: median IQR/median 0.10); the result taken under load had an IQR
# as large as its median.
NOISY_SPREAD = 0.20


def _fmt_ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g} ms"


def result_text(m: Measurement, cancelled: bool = False) -> tuple[str, str]:
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


def noise_warning(m: Measurement | None) -> str:
    """A warning when a verified result's spread is large ("" otherwise)."""
    if m is None or not m.ok or not m.median_ms or m.iqr_ms is None:
        return ""
    share = m.iqr_ms / m.median_ms
    if share <= NOISY_SPREAD:
        return ""
    when = "stored result" if m.cached else "result"
    return (
        f"⚠ Noisy {when}: the run times' IQR is {share:.0%} of the median (over {NOISY_SPREAD:.0%}); the machine was "
        "probably busy. Measure again (Ctrl+Shift+M) when it is quieter before comparing."
    )


def peers_text(history: SessionHistory) -> str:
    """ONNX Runtime's and PyTorch's times beside the schedule measured in the same run, and
    the ratio (peer time / schedule time: above 1, the schedule is faster)."""
    m = history.peers_of
    if m is None or not history.peers:
        return "– (Measure Peers: ONNX Runtime and PyTorch on the same input)"
    base = m.median_ms if m.ok else None
    lines = []
    for t in history.peers:
        name = {"onnxruntime": "ONNX Runtime", "pytorch": "PyTorch"}.get(t.peer, t.peer)
        version = t.version.split()[-1] if t.version else "?"  # "onnxruntime 1.2.3": the package is the name already
        if not t.available:
            lines.append(f"{name}: n/a ({t.error})")
        elif not t.ok or t.median_ms is None:
            lines.append(f"{name} {version}: failed ({(t.error or '')[:100]})")
        else:
            check = {True: "verified", False: "NOT verified", None: "not checked"}[t.verified]
            ratio = f", schedule {t.median_ms / base:.2f}× {'faster' if t.median_ms >= base else 'slower'}" if base else ""
            lines.append(f"{name} {version}: {t.median_ms:.4g} ms ({check}){ratio}")
    return "\n".join(lines) + (f"\n(same run as {m.median_ms:.4g} ms)" if base else "")


def speedup_text(baseline_ms: float | None, ms: float | None) -> str:
    if baseline_ms is None or ms is None or ms <= 0:
        return "–"
    x = baseline_ms / ms
    return f"{x:.2f}× {'faster' if x >= 1 else 'slower'} ({baseline_ms:.3g} ms)"


class PerformancePanel(QWidget):
    """Summary on the left, per-stage bars in the middle, history on the right."""

    compare_clicked = Signal()  # start (or, while one runs, cancel) the Adams2019 comparison
    measure_again_clicked = Signal()  # measure the current schedule again even though a result is stored
    peers_clicked = Signal()  # measure the current schedule and its peers in one run
    variant_clicked = Signal(int)

    IDLE_TEXT = "Not measured yet. Press Measure (Ctrl+M), or turn on auto-measure in the Measure menu."
    ROWS = {
        "Median": "Measured median wall time of one run of the pipeline",
        "Predicted": "The cost model's estimate for this schedule: a prediction, not a measurement (the model is named beside it)",
        # Beside the schedule's measured and predicted times (issue 20 item 12).
        "Peers": "ONNX Runtime and PyTorch eager on the same input, timed in the same run as this schedule with the same "
        "protocol and thread count, checked against the reference; the ratio is their time over the schedule's",
        "Spread": "Fastest measured run, and the interquartile range of the run times (the spread of the middle half)",
        "GFLOP/s": "Useful floating-point work per second at the measured median (predicted when not measured)",
        "vs default": "Speedup over the default schedule (everything at root, serial), measured in this session",
        "vs Adams2019": "Speedup over Halide's Adams2019 autoscheduler on the same pipeline (Compare with Adams2019)",
        "Runs": "Timed runs × Halide threads, and the seconds Halide took to JIT-compile the pipeline",
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: Measurement | None = None  # the current schedule's measurement, if any
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setWordWrap(True)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.values: dict[str, QLabel] = {}
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setVerticalSpacing(2)
        for key, tip in self.ROWS.items():
            value = QLabel("–")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            name = QLabel(key + ":")
            name.setToolTip(tip)
            value.setToolTip(tip)
            form.addRow(name, value)
            self.values[key] = value
        self.compare_button = QPushButton("Compare with Adams2019")
        self.compare_button.setObjectName("compare_adams")
        self.compare_button.setToolTip("Let Halide's Adams2019 autoscheduler schedule this pipeline and measure it (off the GUI thread)")
        self.compare_button.clicked.connect(self.compare_clicked)
        self.noise = QLabel()
        self.noise.setObjectName("noise_warning")
        self.noise.setWordWrap(True)
        self.noise.setStyleSheet(f"color: {WARN_COLOR}")
        self.noise.hide()
        self.again_button = QPushButton("Measure Again")
        self.again_button.setObjectName("measure_again")
        self.again_button.setToolTip("Run the worker again even though a result is stored (Ctrl+Shift+M); the new result replaces it")
        self.again_button.clicked.connect(self.measure_again_clicked)
        self.peers_button = QPushButton("Measure Peers")
        self.peers_button.setObjectName("measure_peers")
        self.peers_button.setToolTip("Measure this schedule, then ONNX Runtime and PyTorch on the same input, in one run")
        self.peers_button.clicked.connect(self.peers_clicked)
        # Two by two: three buttons in a row would be clipped in the summary's narrow column.
        buttons = QGridLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.again_button, 0, 0)
        buttons.addWidget(self.peers_button, 0, 1)
        buttons.addWidget(self.compare_button, 1, 0, 1, 2)
        buttons.setColumnStretch(2, 1)
        left = QVBoxLayout()
        left.setContentsMargins(0, 0, 0, 0)
        left.addWidget(self.title)
        left.addWidget(self.verdict)
        left.addWidget(self.noise)
        left.addLayout(form)
        left.addLayout(buttons)
        left.addStretch(1)
        left_inner = QWidget()
        left_inner.setLayout(left)
        # The summary scrolls on its own when the dock is short: its wrapped rows never overlap.
        left_box = QScrollArea()
        left_box.setObjectName("performance_summary")
        left_box.setWidgetResizable(True)
        left_box.setFrameShape(QFrame.Shape.NoFrame)
        left_box.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        left_box.setWidget(left_inner)
        left_box.setMinimumWidth(260)
        self.stage_bars = StageBars()
        self.history_plot = HistoryPlot()
        self.history_plot.variant_clicked.connect(self.variant_clicked)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left_box)
        split.addWidget(self.stage_bars)
        split.addWidget(self.history_plot)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 4)
        split.setStretchFactor(2, 4)
        split.setChildrenCollapsible(False)
        split.setSizes([300, 420, 420])
        lay = QHBoxLayout(self)
        lay.addWidget(split)
        self._set_verdict(self.IDLE_TEXT, NEUTRAL_COLOR)

    def show_state(self, doc: Document, history: SessionHistory, pending: list[MeasureRequest], adams_running: bool) -> None:
        p = doc.pipeline
        if p is None:
            return
        h = doc.schedule_hash
        m = history.measurement(h)
        self.result = m
        self.title.setText(doc.title)
        mine = [
            r for r in pending if r.autoscheduler is None and r.schedule_key == h and r.pipeline.content_hash() == history.pipeline_hash
        ]
        if mine and pending and mine[0] is pending[0]:
            self._set_verdict("Measuring: compiling, timing and verifying in a worker process…", NEUTRAL_COLOR)
        elif mine:
            ahead = pending.index(mine[0])
            self._set_verdict(f"Queued behind {ahead} other measurement{'s' if ahead != 1 else ''}…", NEUTRAL_COLOR)
        elif m is not None:
            self._set_verdict(*result_text(m))
        elif h in history.cancelled:
            self._set_verdict("Cancelled", NEUTRAL_COLOR)
        else:
            self._set_verdict(self.IDLE_TEXT, NEUTRAL_COLOR)
        ok = m is not None and m.ok
        measured_ms = m.median_ms if ok and m is not None else None
        pred = doc.prediction
        v = self.values
        v["Median"].setText(_fmt_ms(measured_ms))
        unavailable = f"unavailable: {doc.prediction_error or '–'}"
        why = default_choice().fallback_reason  # a trained model that would not load: said where its stand-in's numbers are
        note = "; the learned model is not usable (hover for why)" if pred and why else ""
        blind = unmodelled(doc.schedule)
        note += "; copies not modelled" if pred and blind else ""
        v["Predicted"].setText(f"{pred.total_ms:.4g} ms ({short_label(pred.model)}{note})" if pred else unavailable)
        v["Predicted"].setToolTip(self.ROWS["Predicted"] + "".join(f"\n\n{t}" for t in (why, blind) if t))
        v["Spread"].setText(f"min {_fmt_ms(m.min_ms)} · IQR {_fmt_ms(m.iqr_ms)}" if ok and m is not None else "–")
        if ok and m is not None and m.gflops is not None:
            v["GFLOP/s"].setText(f"{m.gflops:.3g} measured")
        elif pred is not None and pred.total_ms > 0:
            v["GFLOP/s"].setText(f"{p.flops() / (pred.total_ms * 1e6):.3g} predicted")
        else:
            v["GFLOP/s"].setText("–")
        default_ms = history.baseline_ms("default")
        v["vs default"].setText(speedup_text(default_ms, measured_ms) if default_ms else "– (default schedule not measured yet)")
        adams_ms = history.baseline_ms("Adams2019")
        adams = history.measurement(autoscheduler_key("Adams2019"))
        if adams_running:
            v["vs Adams2019"].setText("running Adams2019… (minutes at full size; Cancel stops it)")
        elif adams is not None and not (adams.ok and adams.verified):
            v["vs Adams2019"].setText(f"Adams2019 failed: {(adams.error or adams.error_kind or '')[:120]}")
        else:
            v["vs Adams2019"].setText(speedup_text(adams_ms, measured_ms) if adams_ms else "– (not compared yet)")
        warning = "" if mine else noise_warning(m)
        self.noise.setText(warning)
        self.noise.setVisible(bool(warning))
        v["Spread"].setStyleSheet(f"color: {WARN_COLOR}" if warning else "")
        v["Peers"].setText(peers_text(history))
        self.again_button.setEnabled(not mine)
        self.peers_button.setEnabled(not mine and not any(r.peers for r in pending))
        if ok and m is not None and m.runs:
            compiled = f", compile {m.compile_s:.2f} s" if m.compile_s is not None else ""
            v["Runs"].setText(f"{m.runs} × {m.threads} threads{compiled}")
        else:
            v["Runs"].setText("–")
        self.compare_button.setText("Cancel Adams2019" if adams_running else "Compare with Adams2019")
        stages = [s.name for s in p.stages]
        measured = m.stages if ok and m is not None else None
        self.stage_bars.show_stages(stages, pred.stages if pred else None, measured, predicted_label(pred))
        variant = history.variant(h)
        baselines = {k: ms for k, ms in (("default", default_ms), ("Adams2019", adams_ms)) if ms}
        self.history_plot.show_history(history.variants, variant.number if variant else None, baselines)

    def verdict_text(self) -> str:
        """The whole verdict (the label may show it shortened)."""
        return self.verdict.toolTip()

    def _set_verdict(self, text: str, color: str) -> None:
        # A crash report can quote a long stderr tail: show its start, all of it in the tooltip.
        short = text if len(text) <= VERDICT_CHARS else text[: VERDICT_CHARS - 1] + "…"
        self.verdict.setText(short)
        self.verdict.setStyleSheet(f"color: {color}")
        self.verdict.setToolTip(text)
