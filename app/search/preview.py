"""A search candidate before Apply: which stages it schedules differently from the current
schedule (and how), and its loop nest with those stages tinted. Built from the candidate's
own schedule; the document is never touched."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QLabel, QTabWidget, QVBoxLayout, QWidget

from engine.ir import Pipeline
from engine.loopnest import build as build_loopnest
from engine.schedule import Schedule, ScheduleError
from engine.search import Trial

from ..code_view import CodeView, LoopNestView
from ..compare_view import stage_text, tint_stages

EMPTY_TEXT = "Select a candidate to preview its schedule and loop nest here before applying it."


class CandidatePreview(QWidget):
    """A header line, then tabs: the per-stage schedule diff and the candidate's loop nest."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.header = QLabel(EMPTY_TEXT)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diff = CodeView()
        self.diff.setObjectName("candidate_schedule")
        self.nest = LoopNestView()
        self.nest.setObjectName("candidate_loopnest")
        self.tabs = QTabWidget()
        self.tabs.addTab(self.nest, "Loop nest")
        self.tabs.addTab(self.diff, "Schedule diff")
        self.tabs.setToolTip(
            "The selected candidate, not applied: its loop nest (changed stages tinted) and its schedule vs the current one"
        )
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.header)
        lay.addWidget(self.tabs, 1)
        self.trial: Trial | None = None
        self.differing: list[str] = []

    def clear(self) -> None:
        self.trial, self.differing = None, []
        self.header.setText(EMPTY_TEXT)
        self.diff.set_text("")
        self.nest.set_loopnest("", {})
        self.nest.setExtraSelections([])

    def show_trial(self, p: Pipeline, current: Schedule, t: Trial, label: str) -> None:
        """Preview `t` (of pipeline `p`) against the `current` schedule."""
        self.trial = t
        names = [s.name for s in p.stages]
        self.differing = [n for n in names if current.of(n) != t.schedule.of(n)]
        try:
            text, spans = build_loopnest(p, t.schedule).render_with_spans()
        except ScheduleError as exc:  # a candidate of an older version of the pipeline
            text, spans = f"This candidate does not apply to {p.name}: {exc}", {}
        self.nest.set_loopnest(text, spans)
        tint_stages(self.nest, spans, self.differing)
        first = spans.get(self.differing[0]) if self.differing else None
        if first is not None:  # scrolled to the first change (no selection: the tint shows the changes)
            self.nest.setTextCursor(QTextCursor(self.nest.document().findBlockByNumber(first[0])))
            self.nest.ensureCursorVisible()
        lines = []
        for n in self.differing:
            lines += [f"{n}:", f"  current:   {stage_text(current.of(n))}", f"  candidate: {stage_text(t.schedule.of(n))}", ""]
        same = [n for n in names if n not in self.differing]
        if same:
            lines.append(f"unchanged ({len(same)}): {', '.join(same)}")
        self.diff.set_text("\n".join(lines) if self.differing else "Same schedule as the current one.")
        changed = len(self.differing)
        measured = f"{t.measured_ms:.4g} ms" if t.verified and t.measured_ms is not None else f"failed: {t.error or '?'}"
        self.header.setText(f"<b>{label}</b> · {measured} · {changed} of {len(names)} stages differ from the current one (not applied)")
        self.header.setToolTip("The selected candidate's measured time and the stages it schedules differently; Apply uses it")
