"""Two variants side by side (View → Compare…, and the Search dock's Compare… for a
candidate): the schedules diffed per stage, per-stage times and the speedup of B over A,
and the two loop nests next to each other with the stages that differ tinted.

`compare` is the pure part (plain records in, a `Comparison` out); `CompareDialog` shows it
and never changes the document. Per-stage times are honest about their source: measured
(Halide's profiler) when both sides have a profile, else both predicted and labelled so; a
measured side is never divided by a predicted one."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QBrush, QColor, QFont, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from engine.costmodel import Prediction, default_model, short_label
from engine.ir import Pipeline
from engine.loopnest import build as build_loopnest
from engine.measure import Measurement
from engine.schedule import Schedule, ScheduleError, StageSchedule, format_directive

from . import chart_export
from .chart_export import Table
from .code_view import LoopNestView
from .model.document import Document
from .model.history import SessionHistory
from .perf_charts import MEASURED_COLOR, Chart, add_hbars, swatch

FASTER_COLOR, SLOWER_COLOR, NEUTRAL_COLOR = "#2e7d32", "#c62828", "#6d6d6d"
DIFF_TINT = QColor(230, 160, 40, 60)  # stages whose schedule differs, over any theme


@dataclass(frozen=True)
class Side:
    """One variant: what to call it, its schedule, and what is known of its speed."""

    label: str
    schedule: Schedule
    measurement: Measurement | None = None
    prediction: Prediction | None = None

    @property
    def measured_ms(self) -> float | None:
        m = self.measurement
        return m.median_ms if m is not None and m.ok and m.verified else None

    @property
    def measured_stages(self) -> dict[str, float] | None:
        m = self.measurement
        return dict(m.stages) if m is not None and m.ok and m.verified and sum(m.stages.values()) > 0 else None


@dataclass(frozen=True)
class StageRow:
    stage: str
    a: str  # A's directives for the stage, as text ("(default: root)" for none)
    b: str
    differs: bool
    a_ms: float | None
    b_ms: float | None

    @property
    def speedup(self) -> float | None:
        """A's time over B's: above 1, B is faster on this stage."""
        if self.a_ms is None or self.b_ms is None or self.b_ms <= 0 or self.a_ms <= 0:
            return None
        return self.a_ms / self.b_ms


@dataclass(frozen=True)
class Comparison:
    rows: list[StageRow]
    stage_source: str  # "measured", a prediction's label, or "" (no per-stage times on both sides)
    a_total_ms: float | None
    b_total_ms: float | None
    total_source: str  # "measured", "predicted (...)" or ""

    @property
    def speedup(self) -> float | None:
        a, b = self.a_total_ms, self.b_total_ms
        return a / b if a and b and a > 0 and b > 0 else None

    @property
    def differing(self) -> list[str]:
        return [r.stage for r in self.rows if r.differs]


def stage_text(ss: StageSchedule) -> str:
    """A stage's directives as one line: pure ones, then the update definition's."""
    pure = "; ".join(format_directive(d) for d in ss.pure)
    update = "; ".join(format_directive(d) for d in ss.update)
    text = pure or "(default: compute_root)"
    return f"{text} | update: {update}" if update else text


def compare(p: Pipeline, a: Side, b: Side) -> Comparison:
    """Per stage (pipeline order): the two schedules, whether they differ, and the times."""
    ma, mb = a.measured_stages, b.measured_stages
    if ma is not None and mb is not None:
        sa, sb, source = ma, mb, "measured"
    elif a.prediction is not None and b.prediction is not None:
        sa, sb = dict(a.prediction.stages), dict(b.prediction.stages)
        source = f"predicted ({short_label(a.prediction.model)})"
    else:
        sa, sb, source = {}, {}, ""
    rows = []
    for st in p.stages:
        x, y = a.schedule.of(st.name), b.schedule.of(st.name)
        rows.append(StageRow(st.name, stage_text(x), stage_text(y), x != y, sa.get(st.name), sb.get(st.name)))
    if a.measured_ms is not None and b.measured_ms is not None:
        ta, tb, total_source = a.measured_ms, b.measured_ms, "measured"
    elif a.prediction is not None and b.prediction is not None:
        ta, tb, total_source = a.prediction.total_ms, b.prediction.total_ms, f"predicted ({short_label(a.prediction.model)})"
    else:
        ta, tb, total_source = None, None, ""
    return Comparison(rows, source, ta, tb, total_source)


def comparison_table(c: Comparison, a_label: str, b_label: str) -> Table:
    """The comparison as rows (its CSV export): per stage, then the whole pipeline."""
    header = ["stage", "differs", "A schedule", "B schedule", "A ms", "B ms", "speedup of B (A ms / B ms)", "times"]
    rows: list[list[object]] = [[r.stage, r.differs, r.a, r.b, r.a_ms, r.b_ms, r.speedup, c.stage_source] for r in c.rows]
    rows.append([f"(total) A = {a_label}; B = {b_label}", bool(c.differing), "", "", c.a_total_ms, c.b_total_ms, c.speedup, c.total_source])
    return Table(header, rows)


def speedup_words(x: float | None, zero: bool = False) -> tuple[str, str]:
    """'1.83× faster' and its colour; '–' when there is no ratio (`zero`: because one side
    spends no time of its own there, e.g. the stage is inlined)."""
    if x is None or not math.isfinite(x):
        return ("– (0 ms on one side)" if zero else "–"), NEUTRAL_COLOR
    if abs(x - 1) < 0.005:
        return "1.00× (same)", NEUTRAL_COLOR
    return (f"{x:.2f}× faster", FASTER_COLOR) if x > 1 else (f"{1 / x:.2f}× slower", SLOWER_COLOR)


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g}"


def tint_stages(view: LoopNestView, spans: dict[str, tuple[int, int]], stages: list[str]) -> None:
    """Tint the first line ("produce ...") of each of `stages` in a loop-nest view (the stages
    two schedules differ on): a stage's whole span would tint its consumers' nests too."""
    sels = []
    doc = view.document()
    for st in stages:
        span = spans.get(st)
        if span is None:
            continue
        sel = QTextEdit.ExtraSelection()
        fmt = QTextCharFormat()
        fmt.setBackground(QBrush(DIFF_TINT))
        fmt.setProperty(QTextCharFormat.Property.FullWidthSelection, True)
        sel.format = fmt
        sel.cursor = QTextCursor(doc.findBlockByNumber(span[0]))
        sels.append(sel)
    view.setExtraSelections(sels)


A_COLOR = QColor("#a0a0a0")  # A: the reference, grey; B: the variant looked at, the app's measured blue


class CompareBars(Chart):
    """Per stage with a time on either side: A's and B's milliseconds as bars, B's labelled
    with its speedup. Both series come from the same source (measured, or both predicted)."""

    export_name = "comparison_chart"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, scrolling=True)
        self.plot.setToolTip("Per-stage time of A (grey) and B (blue); labels: B's speedup over A. Right-click to export.")
        self.item.showGrid(x=True, y=False, alpha=0.2)
        self.item.invertY(True)  # first stage on top, as in the table
        self.rows: list[StageRow] = []
        self._args: tuple[Comparison, str, str] | None = None

    def redraw(self) -> None:
        if self._args is not None:
            self.show_comparison(*self._args)

    def show_comparison(self, c: Comparison, a_label: str, b_label: str) -> None:
        self._args = (c, a_label, b_label)
        self.item.clear()
        self.rows = [r for r in c.rows if (r.a_ms or r.b_ms)]
        if not c.stage_source or not self.rows:
            self.show_message("Per-stage times appear here when both variants have them (Measure A and B).")
            return
        ink = self.palette().color(QPalette.ColorRole.Text)
        ys = list(range(len(self.rows)))
        self.plot.setMinimumHeight(int(len(self.rows) * 1.6 * (self.fontMetrics().height() + 2)) + 70)  # two bars a row
        add_hbars(self.item, [y - 0.19 for y in ys], [r.a_ms or 0.0 for r in self.rows], A_COLOR, 0.36)
        add_hbars(self.item, [y + 0.19 for y in ys], [r.b_ms or 0.0 for r in self.rows], MEASURED_COLOR, 0.36)
        top = max(max(r.a_ms or 0.0, r.b_ms or 0.0) for r in self.rows)
        for y, r in zip(ys, self.rows):
            words, _color = speedup_words(r.speedup)
            if r.speedup is not None:
                label = pg.TextItem(words, color=ink, anchor=(0, 0.5))
                label.setPos((r.b_ms or 0.0) + top * 0.02, y + 0.19)
                self.item.addItem(label)
        self.item.getAxis("left").setTicks([list(zip(ys, [r.stage for r in self.rows]))])
        self.item.setYRange(-0.6, len(ys) - 0.4, padding=0.02)
        self.item.setXRange(0, top * 1.35, padding=0)
        self.item.setLabel("bottom", f"ms per run ({c.stage_source})")
        self.show_plot([swatch(A_COLOR, f"A: {a_label}"), swatch(MEASURED_COLOR, f"B: {b_label}")])

    def data_table(self) -> Table:
        rows: list[list[object]] = [[r.stage, r.a_ms, r.b_ms, r.speedup] for r in self.rows] if self.currentWidget() is self.page else []
        return Table(["stage", "A ms", "B ms", "speedup of B"], rows)


Choice = tuple[str, Schedule]  # (label, schedule): what a side can be
Lookup = Callable[[Schedule], Measurement | None]  # a stored measurement of a schedule of the open pipeline
MeasureFn = Callable[[Schedule, str], None]  # queue a (profiled) measurement


class CompareDialog(QDialog):
    """Pick A and B (the current schedule, any variant of the session, a search candidate);
    read the per-stage diff, times and speedups; see both loop nests. Changes nothing."""

    CURRENT = "Current schedule"
    HEADERS = ("Stage", "A schedule", "B schedule", "A ms", "B ms", "Speedup of B")
    measure_requested = Signal(object, str)  # Schedule, label (the window queues it)

    def __init__(
        self,
        doc: Document,
        history: SessionHistory,
        extra: Callable[[], list[Choice]] | None = None,
        lookup: Lookup | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compare_dialog")
        self.setWindowTitle("Compare variants")
        self.doc, self.history, self.extra, self.lookup = doc, history, extra, lookup
        self.can_measure = False  # the window connects measure_requested and sets this
        self.choices: list[Choice] = []
        self.comparison: Comparison | None = None
        self.sides: tuple[Side, Side] | None = None
        # Per schedule hash, for the pipeline `_pipeline_hash`: what a refresh would compute again.
        self._predictions: dict[str, Prediction | None] = {}
        self._nests: dict[str, tuple[str, dict[str, tuple[int, int]]]] = {}
        self._stored: dict[str, Measurement | None] = {}  # database lookups, until the history changes
        self._pipeline_hash = ""
        self._added: list[Choice] = []  # schedules offered by select() (a previewed candidate), this pipeline only
        self.a_combo, self.b_combo = QComboBox(), QComboBox()
        for combo, name in ((self.a_combo, "A"), (self.b_combo, "B")):
            combo.setObjectName(f"compare_{name.lower()}")
            combo.setMinimumContentsLength(24)
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setToolTip(f"Variant {name}: the current schedule, a schedule of this session or a search candidate")
            combo.activated.connect(self.refresh)
        swap = QPushButton("Swap")
        swap.setToolTip("Exchange A and B")
        swap.clicked.connect(self.swap)
        self.only_diff = QCheckBox("Only stages that differ")
        self.only_diff.setToolTip("Hide the stages both variants schedule the same way")
        self.only_diff.toggled.connect(self._show_rows)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.measure_a, self.measure_b = QPushButton("Measure A"), QPushButton("Measure B")
        for button, which in ((self.measure_a, 0), (self.measure_b, 1)):
            button.setToolTip("Measure this variant with a per-stage profile (in the measurement queue)")
            button.clicked.connect(lambda _checked=False, k=which: self._measure(k))
        top = QGridLayout()
        top.addWidget(QLabel("A:"), 0, 0)
        top.addWidget(self.a_combo, 0, 1)
        top.addWidget(self.measure_a, 0, 2)
        top.addWidget(swap, 0, 3, 2, 1)
        top.addWidget(QLabel("B:"), 1, 0)
        top.addWidget(self.b_combo, 1, 1)
        top.addWidget(self.measure_b, 1, 2)
        top.setColumnStretch(1, 1)

        self.table = QTableWidget(0, len(self.HEADERS))
        self.table.setObjectName("compare_table")
        self.table.setHorizontalHeaderLabels(list(self.HEADERS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        for col in (1, 2):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Stretch)
        self.table.setWordWrap(False)
        self.table.itemSelectionChanged.connect(self._on_row_selected)

        self.nest_a, self.nest_b = LoopNestView(), LoopNestView()
        self.nest_a.setObjectName("compare_nest_a")
        self.nest_b.setObjectName("compare_nest_b")
        self.nest_labels = (QLabel("A"), QLabel("B"))
        nests = QSplitter(Qt.Orientation.Horizontal)
        for label, view in zip(self.nest_labels, (self.nest_a, self.nest_b)):
            box = QWidget()
            lay = QVBoxLayout(box)
            lay.setContentsMargins(0, 0, 0, 0)
            label.setStyleSheet("font-weight: bold")
            lay.addWidget(label)
            lay.addWidget(view, 1)
            nests.addWidget(box)
        nests.setSizes([500, 500])  # halves, whatever the texts' widths
        table_box = QWidget()
        tl = QVBoxLayout(table_box)
        tl.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.summary, 1)
        row.addWidget(self.only_diff, 0, Qt.AlignmentFlag.AlignTop)
        tl.addLayout(row)
        self.chart = CompareBars()
        self.views = QTabWidget()
        self.views.addTab(self.table, "Per stage")
        self.views.addTab(self.chart, "Chart")
        tl.addWidget(self.views, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(table_box)
        split.addWidget(nests)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setChildrenCollapsible(False)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        export = buttons.addButton("Export CSV…", QDialogButtonBox.ButtonRole.ActionRole)
        export.setToolTip("Save the per-stage comparison (schedules, times, speedups) as CSV")
        export.clicked.connect(self.export_csv)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        lay.addWidget(buttons)
        screen = (parent.screen() if parent is not None else None) or QApplication.primaryScreen()
        avail = screen.availableGeometry() if screen is not None else None
        # As large as useful, never larger than the screen (a laptop at 150% has about 850×450 to give).
        self.resize(min(1000, avail.width() - 40) if avail else 1000, min(640, avail.height() - 60) if avail else 640)
        history.changed.connect(self._on_history_changed)
        doc.changed.connect(self._on_history_changed)

    # --- choosing -------------------------------------------------------------------------
    def _collect(self) -> list[Choice]:
        out: list[Choice] = [(self.CURRENT, self.doc.schedule)]
        out += [(f"#{v.number}: {v.label}", v.schedule) for v in self.history.variants if not v.invalid]
        out += self.extra() if self.extra is not None else []
        p = self.doc.pipeline
        if p is not None and p.content_hash() == self._pipeline_hash:
            out += [c for c in self._added if c[1].content_hash() not in {s.content_hash() for _l, s in out}]
        return out

    def _fill(self) -> None:
        """Rebuild both combos from what the session holds now, keeping each one's pick."""
        keep = [c.currentText() for c in (self.a_combo, self.b_combo)]
        self.choices = self._collect()
        for combo, text in zip((self.a_combo, self.b_combo), keep):
            combo.blockSignals(True)
            combo.clear()
            combo.addItems([label for label, _s in self.choices])
            k = combo.findText(text)
            if k >= 0:
                combo.setCurrentIndex(k)
            combo.blockSignals(False)

    def select(self, a: str | Schedule | None = None, b: str | Schedule | None = None) -> None:
        """Pick A and B by label or by schedule (its hash); a schedule not among the choices is
        added as itself. None: A = the variant before the current one, B = the current schedule."""
        self._sync_pipeline()
        self._fill()
        if a is None and b is None:
            current = self.history.variant(self.doc.schedule_hash)
            before = [v for v in self.history.variants if not v.invalid and (current is None or v.number < current.number)]
            a = before[-1].schedule if before else self.doc.schedule
            b = self.CURRENT
        for combo, want in ((self.a_combo, a), (self.b_combo, b)):
            if want is None:
                continue
            combo.setCurrentIndex(self._index_of(want))
        self.refresh()

    def add_choice(self, label: str, schedule: Schedule) -> None:
        """Offer one more variant of the open pipeline (a search candidate being previewed)."""
        self._sync_pipeline()
        self._added.append((label, schedule))
        self._fill()

    def _sync_pipeline(self) -> None:
        """Forget what belonged to the previous pipeline."""
        p = self.doc.pipeline
        h = p.content_hash() if p is not None else ""
        if h != self._pipeline_hash:
            self._predictions, self._nests, self._stored, self._added = {}, {}, {}, []
            self._pipeline_hash = h

    def _index_of(self, want: str | Schedule) -> int:
        if isinstance(want, str):
            k = next((i for i, (label, _s) in enumerate(self.choices) if label == want), -1)
            if k < 0:
                raise KeyError(f"no variant named {want!r} to compare")
            return k
        h = want.content_hash()
        k = next((i for i, (_l, s) in enumerate(self.choices) if s.content_hash() == h), -1)
        if k < 0:
            self.add_choice(want.name or f"schedule {h[:8]}", want)
            k = len(self.choices) - 1
        return k

    @Slot()
    def swap(self) -> None:
        a, b = self.a_combo.currentIndex(), self.b_combo.currentIndex()
        self.a_combo.setCurrentIndex(b)
        self.b_combo.setCurrentIndex(a)
        self.refresh()

    @Slot()
    def _on_history_changed(self) -> None:
        self._stored = {}  # a new measurement may have been stored
        if self.isVisible():
            self._fill()
            self.refresh()

    # --- showing --------------------------------------------------------------------------
    def _side(self, k: int) -> Side:
        p = self.doc.pipeline
        assert p is not None
        label, sched = self.choices[k]
        h = sched.content_hash()
        variant = self.history.variant(h)
        if label == self.CURRENT and variant is not None:
            label = f"{self.CURRENT} (#{variant.number}: {variant.label})"
        self._sync_pipeline()
        m = self.history.measurement(h)
        if (m is None or not m.stages) and self.lookup is not None:
            if h not in self._stored:
                self._stored[h] = self.lookup(sched)
            m = self._stored[h] or m  # a search candidate's result is in the database
        if h not in self._predictions:
            try:
                self._predictions[h] = self.doc.prediction if h == self.doc.schedule_hash else default_model().predict(p, sched)
            except Exception:  # noqa: BLE001  # a model failure leaves the prediction out, the diff still shows
                self._predictions[h] = None
        return Side(label, sched, m, self._predictions[h])

    def _nest(self, p: Pipeline, sched: Schedule) -> tuple[str, dict[str, tuple[int, int]]]:
        h = sched.content_hash()
        if h not in self._nests:
            try:
                self._nests[h] = build_loopnest(p, sched).render_with_spans()
            except ScheduleError as exc:
                self._nests[h] = f"This schedule does not apply to {p.name}:\n{exc}", {}
        return self._nests[h]

    @Slot()
    def refresh(self) -> None:
        p = self.doc.pipeline
        if p is None or not self.choices:
            self.summary.setText("Open a pipeline to compare its schedules.")
            return
        a, b = self._side(self.a_combo.currentIndex()), self._side(self.b_combo.currentIndex())
        self.sides = (a, b)
        self.comparison = c = compare(p, a, b)
        self.nest_labels[0].setText(f"A: {a.label}")
        self.nest_labels[1].setText(f"B: {b.label}")
        for view, side in ((self.nest_a, a), (self.nest_b, b)):
            text, spans = self._nest(p, side.schedule)
            view.set_loopnest(text, spans)
            tint_stages(view, spans, c.differing)
        words, color = speedup_words(c.speedup)
        if c.total_source:
            total = f"A {_ms(c.a_total_ms)} ms · B {_ms(c.b_total_ms)} ms ({c.total_source}): B is <b style='color:{color}'>{words}</b>"
        else:
            total = "Neither time is known: measure A and B."
        per_stage = {
            "measured": "per-stage times measured (Halide's profiler)",
            "": "no per-stage times on both sides",
        }.get(c.stage_source, f"per-stage times {c.stage_source}: a prediction, not a measurement; measure both for profiles")
        n = len(c.differing)
        self.summary.setText(f"{total}<br>{n} of {len(c.rows)} stages scheduled differently · {per_stage}")
        for button, side in ((self.measure_a, a), (self.measure_b, b)):
            button.setEnabled(self.can_measure and side.measured_stages is None)
        self._show_rows()
        self.chart.show_comparison(c, a.label, b.label)

    @Slot()
    def _show_rows(self) -> None:
        c = self.comparison
        if c is None:
            return
        rows = [r for r in c.rows if r.differs or not self.only_diff.isChecked()]
        t = self.table
        t.setRowCount(len(rows))
        bold = QFont(self.font())
        bold.setBold(True)
        for i, r in enumerate(rows):
            words, color = speedup_words(r.speedup, zero=0.0 in (r.a_ms, r.b_ms))
            cells = [r.stage, r.a, r.b, _ms(r.a_ms), _ms(r.b_ms), words]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setData(Qt.ItemDataRole.UserRole, r.stage)
                if col in (1, 2):
                    item.setToolTip(text)
                if col >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if r.differs:
                    item.setFont(bold)
                    item.setBackground(QBrush(DIFF_TINT))
                if col == 5:
                    item.setForeground(QBrush(QColor(color)))
                else:
                    item.setForeground(self.palette().brush(QPalette.ColorRole.Text))
                t.setItem(i, col, item)

    @Slot()
    def _on_row_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        item = self.table.item(rows[0].row(), 0) if rows else None
        if item is not None:
            stage = item.data(Qt.ItemDataRole.UserRole)
            self.nest_a.highlight_stage(stage)
            self.nest_b.highlight_stage(stage)

    def data_table(self) -> Table:
        """The comparison shown, as rows (its CSV export)."""
        c, sides = self.comparison, self.sides
        if c is None or sides is None:
            return Table(["stage"])
        return comparison_table(c, sides[0].label, sides[1].label)

    @Slot()
    def export_csv(self) -> None:
        name = chart_export.file_stem(self.doc.pipeline.name if self.doc.pipeline else "", "comparison")
        chart_export.save_csv(self, name, self.data_table)

    def _measure(self, which: int) -> None:
        if self.sides is not None:
            side = self.sides[which]
            self.measure_requested.emit(side.schedule, side.label)
