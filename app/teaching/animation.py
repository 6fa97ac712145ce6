"""The iteration-order animation (issue 18 item 1): for the selected stage under the current
schedule, engine.teaching.trace's steps played on one grid per buffer, painted with QPainter.

Cells light in the order the loop nest computes them; the lanes of a vector step light
together; each simulated thread has its colour; unrolled steps carry a dot. A producer
computed at one of the stage's loops gets its own grid: the region computed for the
current consumer iteration is outlined, the points computed now are dark, the recomputed
ones red, and the allocated buffer (store_at vs compute_at, after storage folding) is a
dashed outline. The animation's own copy of the loop-nest text highlights the running
loop's line. The trace is recomputed off the GUI thread (a latest-only Background),
debounced, when the schedule or the stage changes; exports go through
engine.teaching.animate (GIF or PNG frames).

The position is a tick count: `position` ticks have run, so the steps with `tick <
position` are lit and those with `tick == position - 1` are the current ones (parallel
threads advance side by side, one step each per tick)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPaintEvent, QPalette, QPen, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QSplitter,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.ir import Pipeline
from engine.schedule import Schedule, ScheduleError
from engine.teaching.animate import THREADS, AnimOptions, save_frames, save_gif
from engine.teaching.trace import DEFAULT_THREADS, Step, Trace, TraceError, default_extent, parse_extent, trace

from ..background import Background, Outcome
from ..code_view import CodeView
from ..flow_row import FlowRow

DEBOUNCE_MS = 200  # edits in quick succession trace once
APP_MAX_STEPS = 8192  # enough for a 16x16 stage with its producers; a longer trace is cut (and says so)
DEFAULT_SPEED = 8  # steps (ticks) per second
EMPTY = QColor(225, 225, 225)
GRID = QColor(200, 200, 200)
PRODUCER_DONE = QColor(150, 150, 150)
PRODUCER_NOW = QColor(40, 40, 40)
RECOMPUTED = QColor(220, 40, 40)
BUFFER = QColor(25, 118, 210)
HIGHLIGHT = QColor(255, 236, 150)
MUTED = "color: palette(placeholder-text)"
LEGEND = (
    "Colour: the thread · outlined: the lanes of one vector step · dot: unrolled · dark: producer points computed now, "
    "red: recomputed, outlined: the region needed now · dashed blue: the buffer allocated"
)


@dataclass(frozen=True)
class Request:
    """What one trace is made of (plain values: it crosses to the worker thread)."""

    pipeline: Pipeline
    schedule: Schedule
    stage: str
    extent: tuple[int, ...] | None  # None: default_extent
    threads: int = DEFAULT_THREADS


def compute(req: Request) -> Trace:
    """The trace a request asks for (ScheduleError / TraceError with the engine's message)."""
    ext = req.extent or default_extent(req.pipeline, req.schedule, req.stage)
    return trace(req.pipeline, req.schedule, req.stage, ext, threads=req.threads, max_steps=APP_MAX_STEPS)


@dataclass
class _Grid:
    """One buffer on screen: the last dim across, the others flattened down."""

    name: str
    title: str
    lo: tuple[int, ...]
    shape: tuple[int, ...]
    rect: QRectF = field(default_factory=QRectF)
    cell: float = 1.0

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1]) if len(self.shape) > 1 else 1

    def cell_rect(self, c: tuple[int, ...]) -> QRectF | None:
        rel = [v - a for v, a in zip(c, self.lo)]
        if any(v < 0 or v >= n for v, n in zip(rel, self.shape)):
            return None  # outside the shown box (a rounded-up tail)
        row = 0
        for v, n in zip(rel[:-1], self.shape[:-1]):
            row = row * n + v
        return QRectF(self.rect.x() + rel[-1] * self.cell, self.rect.y() + row * self.cell, self.cell, self.cell)

    def box_rect(self, lo: tuple[int, ...], extents: tuple[int, ...]) -> QRectF | None:
        """The screen rectangle of a box given by its low corner and extents (2-D view of the
        last two dims; outer dims take the rows of `lo`)."""
        a = self.cell_rect(lo)
        hi = tuple(min(x + e - 1, l0 + n - 1) for x, e, l0, n in zip(lo, extents, self.lo, self.shape))
        b = self.cell_rect(hi)
        if a is None or b is None:
            return None
        return QRectF(a.topLeft(), b.bottomRight())


def _buffers(t: Trace) -> list[_Grid]:
    """Producers computed at the stage's loops (their touched box), then the stage itself."""
    grids = []
    for q, h in t.producer_boxes().items():
        alloc = t.allocations.get(q)
        title = q
        if alloc is not None:
            where = "store " + alloc.store_level + (", compute " + alloc.compute_level if alloc.compute_level != alloc.store_level else "")
            title = f"{q} · {where} · buffer {'×'.join(map(str, alloc.shape))}" + (" folded" if alloc.folded else "")
            title += " · sliding window" if alloc.sliding else ""
        grids.append(_Grid(q, title, tuple(x for x, _ in h), tuple(y - x + 1 for x, y in h)))
    grids.append(_Grid(t.stage, f"{t.stage} · traced {'×'.join(map(str, t.extent))}", tuple(0 for _ in t.extent), t.extent))
    return grids


class TraceCanvas(QWidget):
    """Paints a trace up to a position (ticks run)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trace: Trace | None = None
        self.position = 0
        self.grids: list[_Grid] = []
        self.setMinimumSize(160, 150)  # a short dock scrolls rather than shrink the cells to dots
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_trace(self, t: Trace | None) -> None:
        self.trace = t
        self.grids = _buffers(t) if t is not None else []
        self.position = 0
        self.update()

    def set_position(self, pos: int) -> None:
        self.position = pos
        self.update()

    def _layout(self) -> None:
        """Grids side by side (producers first), cells as large as the widget allows."""
        if not self.grids:
            return
        fm = QFontMetrics(self.font())
        top, pad, margin = fm.height() + 8, 18.0, 8.0
        cols = sum(g.cols for g in self.grids)
        rows = max(g.rows for g in self.grids)
        room_w = self.width() - 2 * margin - pad * (len(self.grids) - 1)
        room_h = self.height() - top - margin
        cell = max(2.0, min(room_w / max(1, cols), room_h / max(1, rows), 40.0))
        x = margin
        for g in self.grids:
            g.cell = cell
            g.rect = QRectF(x, top, g.cols * cell, g.rows * cell)
            x += max(g.cols * cell, fm.horizontalAdvance(g.title)) + pad  # titles never overlap

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802  # Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        t = self.trace
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        if t is None:
            p.end()
            return
        self._layout()
        fm = QFontMetrics(self.font())
        by_name = {g.name: g for g in self.grids}
        for g in self.grids:
            p.setPen(text_color)
            p.drawText(QRectF(g.rect.x(), 2, fm.horizontalAdvance(g.title) + 4, fm.height() + 4), g.title)
            p.fillRect(g.rect, EMPTY)
        shown = [st for st in t.steps if st.tick < self.position]
        now = [st for st in shown if st.tick == self.position - 1]
        stage_grid = by_name[t.stage]
        # Done cells: the thread's colour, lighter; producer points computed earlier: grey.
        for st in shown:
            col = QColor(*THREADS[st.thread % len(THREADS)])
            done = QColor(int(col.red() * 0.55 + 255 * 0.45), int(col.green() * 0.55 + 255 * 0.45), int(col.blue() * 0.55 + 255 * 0.45))
            for pr in st.producer_cells:
                pg = by_name.get(pr.producer)
                for c in pr.cells if pg is not None else ():
                    r = pg.cell_rect(c) if pg is not None else None
                    if r is not None:
                        p.fillRect(r, PRODUCER_DONE)
            for c in st.cells:
                r = stage_grid.cell_rect(c)
                if r is not None:
                    p.fillRect(r, done)
        # The current steps: full colour, vector lanes outlined together, unrolled dotted,
        # the producer region computed for them outlined, recomputed points red.
        for st in now:
            col = QColor(*THREADS[st.thread % len(THREADS)])
            rects = [r for r in (stage_grid.cell_rect(c) for c in st.cells) if r is not None]
            for r in rects:
                p.fillRect(r, col)
                if st.unrolled and stage_grid.cell >= 6:
                    p.setBrush(text_color)
                    p.setPen(Qt.PenStyle.NoPen)
                    p.drawEllipse(r.center(), stage_grid.cell / 6, stage_grid.cell / 6)
                    p.setBrush(Qt.BrushStyle.NoBrush)
            if len(rects) > 1:
                union = rects[0]
                for r in rects[1:]:
                    union = union.united(r)
                p.setPen(QPen(text_color, 2))
                p.drawRect(union)
            for pr in st.producer_cells:
                qg = by_name.get(pr.producer)
                if qg is None:
                    continue
                g = qg
                rec = set(pr.recomputed)
                for c in pr.cells:
                    r = g.cell_rect(c)
                    if r is not None:
                        p.fillRect(r, RECOMPUTED if c in rec else PRODUCER_NOW)
                box = g.box_rect(tuple(a for a, _ in pr.box), tuple(b - a + 1 for a, b in pr.box))
                if box is not None:
                    p.setPen(QPen(QColor(*THREADS[st.thread % len(THREADS)]), 2))
                    p.drawRect(box)
                a = t.allocations.get(pr.producer)
                if a is not None:
                    # The buffer allocated for this region: its (folded) shape from the box's corner.
                    buf = g.box_rect(tuple(lo for lo, _ in pr.box), a.shape)
                    if buf is not None:
                        p.setPen(QPen(BUFFER, 2, Qt.PenStyle.DashLine))
                        p.drawRect(buf.adjusted(-2, -2, 2, 2))
        if stage_grid.cell >= 6:
            p.setPen(QPen(GRID, 1))
            for g in self.grids:
                for cx in range(g.cols + 1):
                    x = g.rect.x() + cx * g.cell
                    p.drawLine(int(x), int(g.rect.top()), int(x), int(g.rect.bottom()))
                for cy in range(g.rows + 1):
                    y = g.rect.y() + cy * g.cell
                    p.drawLine(int(g.rect.left()), int(y), int(g.rect.right()), int(y))
        p.end()


class AnimationView(QWidget):
    """Controls, the canvas and the loop-nest text of one stage's trace."""

    traced = Signal()  # a new trace (or an error) is shown

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pipeline: Pipeline | None = None
        self.schedule: Schedule | None = None
        self.stage: str | None = None
        self.trace: Trace | None = None
        self.error = ""
        self.position = 0
        self.background = Background("teaching", latest_only=True, parent=self)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._submit)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._advance)

        self.canvas = TraceCanvas()
        self.code = CodeView()
        self.code.setObjectName("animation_code")
        self.code.setToolTip("The loop nest of this schedule; the running loop's line is highlighted")
        self.code.setMinimumHeight(40)
        self.heading = QLabel("Select a stage to see the order its loops compute it in.")
        self.heading.setObjectName("animation_heading")
        self.heading.setWordWrap(True)
        self.status = QLabel()
        self.status.setObjectName("animation_status")
        self.status.setWordWrap(True)
        self.counts = QLabel()
        self.counts.setObjectName("animation_counts")
        self.counts.setWordWrap(True)
        self.counts.setStyleSheet(MUTED)

        self.play_button = _tool("Play", "Play the animation (Space in presentation mode)", self.toggle_play)
        self.play_button.setCheckable(True)
        self.back_button = _tool("◀", "Back one iteration", self.back)
        self.step_button = _tool("Step", "One iteration (one tick: every thread one step)", self.step)
        self.level = QComboBox()
        self.level.setObjectName("animation_level")
        self.level.setToolTip("The loop whose next iteration 'Step loop' goes to")
        self.level_button = _tool("Step loop", "To the next iteration of the loop chosen on the left", self.step_level)
        self.reset_button = _tool("|◀", "Back to the start", lambda: self.set_position(0))
        self.speed = QSpinBox()
        self.speed.setRange(1, 240)
        self.speed.setValue(DEFAULT_SPEED)
        self.speed.setSuffix(" /s")
        self.speed.setToolTip("Iterations (ticks) per second while playing")
        self.speed.valueChanged.connect(self._speed_changed)
        self.extent = QLineEdit()
        self.extent.setObjectName("animation_extent")
        self.extent.setPlaceholderText("extent 16x16")
        self.extent.setToolTip("The box traced, from the origin (empty: a small default covering one tile)")
        self.extent.setMaximumWidth(110)
        self.extent.editingFinished.connect(self.schedule_trace)
        self.scrub = QSlider(Qt.Orientation.Horizontal)
        self.scrub.setObjectName("animation_scrub")
        self.scrub.setToolTip("Scrub through the iterations")
        self.scrub.valueChanged.connect(self.set_position)
        self.gif_button = _tool("GIF…", "Export the animation as an animated GIF", self.export_gif_dialog)
        self.frames_button = _tool("PNG frames…", "Export the animation as PNG frames into a folder", self.export_frames_dialog)

        # A row that wraps in a narrow dock (the window never gets wider than a small screen).
        self.controls = FlowRow(
            [
                self.reset_button,
                self.back_button,
                self.play_button,
                self.step_button,
                self.level,
                self.level_button,
                self.speed,
                self.extent,
                self.gif_button,
                self.frames_button,
            ]
        )
        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addWidget(self.canvas, 1)
        self.legend = QLabel(LEGEND)
        self.legend.setWordWrap(True)
        self.legend.setStyleSheet(MUTED)
        tl.addWidget(self.legend)
        tl.addWidget(self.scrub)
        tl.addWidget(self.status)
        tl.addWidget(self.counts)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(top)
        self.split.addWidget(self.code)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.heading)
        lay.addWidget(self.controls)
        lay.addWidget(self.split, 1)
        self._enable()

    # --- what is traced ---------------------------------------------------------------
    def set_target(self, pipeline: Pipeline | None, schedule: Schedule | None, stage: str | None) -> None:
        """The pipeline, schedule and stage to trace (debounced; traced off the GUI thread)."""
        same = (
            pipeline is self.pipeline
            and stage == self.stage
            and schedule is not None
            and self.schedule is not None
            and schedule.content_hash() == self.schedule.content_hash()
        )
        if same:
            return
        self.pipeline, self.schedule, self.stage = pipeline, schedule.copy() if schedule is not None else None, stage
        self.schedule_trace()

    @Slot()
    def schedule_trace(self) -> None:
        self._debounce.start()

    def request(self) -> Request | None:
        """The trace to make now, or None (nothing selected; the reason is shown)."""
        if self.pipeline is None or self.schedule is None or self.stage is None:
            return None
        text = self.extent.text().strip()
        return Request(self.pipeline, self.schedule, self.stage, parse_extent(text) if text else None)

    @Slot()
    def _submit(self) -> None:
        try:
            req = self.request()
        except TraceError as exc:
            self._show(None, f"extent: {exc}")
            return
        if req is None:
            self._show(None, "")
            return
        self.status.setText(f"tracing {req.stage}…")
        self.background.submit(lambda _job: compute(req), self._on_traced)

    def trace_now(self) -> None:
        """Trace on this thread (screenshots, tests that need the result at once)."""
        self._debounce.stop()
        try:
            req = self.request()
            self._show(compute(req) if req is not None else None, "")
        except (ScheduleError, TraceError) as exc:
            self._show(None, str(exc))

    def _on_traced(self, outcome: Outcome) -> None:
        if outcome.error is not None:
            err = outcome.error
            self._show(None, str(err) if isinstance(err, (ScheduleError, TraceError)) else outcome.error_text)
        else:
            self._show(outcome.value, "")

    @property
    def busy(self) -> bool:
        return self._debounce.isActive() or self.background.busy

    def _show(self, t: Trace | None, error: str) -> None:
        self.pause()
        self.trace, self.error = t, error
        self.canvas.set_trace(t)
        self.code.set_text(t.text if t is not None else "")
        self.level.clear()
        if t is not None:
            for i, lp in enumerate(t.loops):
                self.level.addItem(f"{lp.name}{' (update)' if lp.update else ''}", i)
            self.level.setCurrentIndex(max(0, len(t.definition_loops(False)) - 2))  # a row at a time by default
            where = f"{t.stage} over {'×'.join(map(str, t.extent))}: {len(t.steps)} steps in {t.ticks} ticks"
            where += f" on {t.threads} threads" if t.threads > 1 else ""
            where += f" (cut at the first {len(t.steps)} steps)" if t.truncated else ""
            self.heading.setText(where)
            self.scrub.blockSignals(True)
            self.scrub.setRange(0, t.ticks)
            self.scrub.blockSignals(False)
        else:
            self.heading.setText(error or "Select a stage to see the order its loops compute it in.")
        self.heading.setStyleSheet("color: #c62828" if error else "")
        self.set_position(0)
        self._enable()
        self.traced.emit()

    def _enable(self) -> None:
        on = self.trace is not None
        for w in (self.play_button, self.back_button, self.step_button, self.level, self.level_button, self.reset_button, self.scrub):
            w.setEnabled(on)
        self.gif_button.setEnabled(on)
        self.frames_button.setEnabled(on)

    # --- playing ----------------------------------------------------------------------
    @property
    def ticks(self) -> int:
        return self.trace.ticks if self.trace is not None else 0

    def shown_steps(self) -> list[Step]:
        """The steps lit at the current position, in play order."""
        t = self.trace
        return [st for st in t.steps if st.tick < self.position] if t is not None else []

    def current_steps(self) -> list[Step]:
        return [st for st in self.shown_steps() if st.tick == self.position - 1]

    def lit_cells(self) -> list[tuple[int, ...]]:
        """The stage's cells lit so far, in the order they were lit."""
        return [c for st in self.shown_steps() for c in st.cells]

    def recomputed_so_far(self) -> dict[str, int]:
        """Producer -> recomputed points among the steps run so far (at the end: Trace.recomputed)."""
        out: dict[str, int] = {}
        for st in self.shown_steps():
            for pr in st.producer_cells:
                out[pr.producer] = out.get(pr.producer, 0) + len(pr.recomputed)
        return out

    @Slot(int)
    def set_position(self, pos: int) -> None:
        pos = max(0, min(self.ticks, pos))
        self.position = pos
        if self.scrub.value() != pos:
            self.scrub.blockSignals(True)
            self.scrub.setValue(pos)
            self.scrub.blockSignals(False)
        self.canvas.set_position(pos)
        self._describe()
        if pos >= self.ticks:
            self.pause()

    @Slot()
    def step(self) -> None:
        """One iteration: one tick (every thread takes one step)."""
        self.set_position(self.position + 1)

    @Slot()
    def back(self) -> None:
        self.set_position(self.position - 1)

    @Slot()
    def step_level(self, level: int | None = None) -> None:
        """To the next step whose counter of loop `level` (an index into Trace.loops;
        default: the one chosen) changes, or whose definition does: one loop level."""
        t = self.trace
        if t is None:
            return
        i = self.level.currentData() if level is None else level
        if i is None or not 0 <= i < len(t.loops):
            return
        lp = t.loops[i]
        k = t.definition_loops(lp.update).index(lp)
        shown = self.shown_steps()
        if not shown:
            self.set_position(t.steps[0].tick + 1 if t.steps else 0)
            return
        cur = shown[-1]
        key = (cur.update, cur.indices[: k + 1])
        nxt = next((st for st in t.steps[len(shown) :] if (st.update, st.indices[: k + 1]) != key), None)
        self.set_position(nxt.tick + 1 if nxt is not None else self.ticks)

    @Slot()
    def toggle_play(self) -> None:
        if self._timer.isActive():
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        if self.trace is None:
            return
        if self.position >= self.ticks:
            self.set_position(0)
        self._timer.start(max(1, 1000 // self.speed.value()))
        self.play_button.setChecked(True)
        self.play_button.setText("Pause")

    def pause(self) -> None:
        self._timer.stop()
        self.play_button.setChecked(False)
        self.play_button.setText("Play")

    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    @Slot(int)
    def _speed_changed(self, value: int) -> None:
        if self._timer.isActive():
            self._timer.start(max(1, 1000 // value))

    @Slot()
    def _advance(self) -> None:
        self.step()

    def _describe(self) -> None:
        t = self.trace
        if t is None:
            self.status.clear()
            self.counts.clear()
            self._highlight(None, None)
            return
        now = self.current_steps()
        if not now:
            self.status.setText(f"tick 0/{t.ticks}: press Step or Play")
            self._highlight(None, None)
        else:
            last = now[-1]
            names = [lp.name for lp in t.definition_loops(last.update)]
            counters = ", ".join(f"{n}={v}" for n, v in zip(names, last.indices))
            bits = [f"tick {self.position}/{t.ticks}", counters]
            if len(now) > 1:
                bits.append(f"{len(now)} threads side by side")
            elif t.threads > 1:
                bits.append(f"thread {last.thread}")
            if last.vectorized:
                bits.append(f"{len(last.cells)} vector lanes")
            if last.unrolled:
                bits.append("unrolled")
            if last.update:
                bits.append("update definition")
            self.status.setText(" · ".join(bits))
            produce = next((pr.line for st in now for pr in st.producer_cells if pr.line is not None), None)
            self._highlight(last.loop_line, produce)
        so_far = self.recomputed_so_far()
        parts = []
        for q in t.computed:
            now_q = [pr for st in now for pr in st.producer_cells if pr.producer == q]
            here = (
                f"{sum(len(pr.cells) for pr in now_q)} computed now, {sum(len(pr.recomputed) for pr in now_q)} recomputed; "
                if now_q
                else ""
            )
            parts.append(f"{q}: {here}recomputed so far {so_far.get(q, 0)} · in all {t.recomputed.get(q, 0)} of {t.computed[q]} computed")
        self.counts.setText("\n".join(parts))

    def _highlight(self, line: int | None, produce: int | None) -> None:
        """Highlight the running loop's line (and the producer's `produce` line) in the text."""
        sels = []
        for ln, color in ((produce, QColor(255, 205, 210)), (line, HIGHLIGHT)):
            if ln is None:
                continue
            block = self.code.document().findBlockByNumber(ln)
            if not block.isValid():
                continue
            sel = QTextEdit.ExtraSelection()
            sel.cursor = QTextCursor(block)
            fmt = sel.format
            fmt.setBackground(color)
            fmt.setForeground(QColor(20, 20, 20))
            fmt.setProperty(QTextFormat.Property.FullWidthSelection, True)
            sel.format = fmt
            sels.append(sel)
        self.code.setExtraSelections(sels)
        if line is not None:
            block = self.code.document().findBlockByNumber(line)
            if block.isValid():
                self.code.setTextCursor(QTextCursor(block))
                self.code.ensureCursorVisible()

    def highlighted_line(self) -> int | None:
        """The loop-nest line highlighted as running (None when none is)."""
        sels = self.code.extraSelections()
        return sels[-1].cursor.blockNumber() if sels and self.current_steps() and self.current_steps()[-1].loop_line is not None else None

    # --- export -----------------------------------------------------------------------
    def export_gif(self, path: Path) -> int:
        """The whole trace as an animated GIF (engine.teaching.animate); frames written."""
        if self.trace is None:
            raise ValueError("nothing to export: no trace is shown")
        return save_gif(self.trace, path, AnimOptions(frame_ms=max(20, 1000 // self.speed.value())))

    def export_frames(self, directory: Path) -> int:
        if self.trace is None:
            raise ValueError("nothing to export: no trace is shown")
        return save_frames(self.trace, directory, AnimOptions())

    @Slot()
    def export_gif_dialog(self) -> None:
        name = f"{self.stage or 'animation'}.gif"
        path, _ = QFileDialog.getSaveFileName(self, "Export animation", str(Path.cwd() / name), "GIF (*.gif)")
        if path:
            self._export(lambda: self.export_gif(Path(path)), path)

    @Slot()
    def export_frames_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Export PNG frames into", str(Path.cwd()))
        if path:
            self._export(lambda: self.export_frames(Path(path)), path)

    def _export(self, fn: object, path: str) -> None:
        try:
            n = fn()  # type: ignore[operator]
        except (OSError, ValueError) as exc:
            QMessageBox.warning(self, "Cannot export the animation", f"{path}: {exc}")
            return
        self.status.setText(f"wrote {n} frames to {path}")

    def shutdown(self) -> None:
        self._timer.stop()
        self._debounce.stop()
        self.background.shutdown()


def _tool(text: str, tip: str, slot: object) -> QToolButton:
    b = QToolButton()
    b.setText(text)
    b.setToolTip(tip)
    b.clicked.connect(lambda _=False: slot())  # type: ignore[operator]
    return b
