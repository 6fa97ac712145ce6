"""The search panel: pick a strategy and budget, start / pause / cancel a schedule search
that runs off the GUI thread (worker.py), watch the best-so-far times, and apply a
measured candidate to the document as one undoable step. Strategies are listed from
engine.search.STRATEGIES, so new ones appear without changes here."""

from __future__ import annotations

from PySide6.QtCore import QElapsedTimer, QModelIndex, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QShowEvent, QUndoStack
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QMessageBox, QPushButton, QScrollArea, QSplitter, QVBoxLayout, QWidget

from engine.costmodel import default_model
from engine.measure import Measurement, autoscheduler_of
from engine.schedule import Schedule, ScheduleError, validate
from engine.search import STRATEGIES, Progress, SearchResult, Trial

from ..model.commands import ScheduleCommand
from ..model.document import Document
from ..model.history import SessionHistory
from ..performance import ERROR_COLOR, NEUTRAL_COLOR, OK_COLOR
from .controls import SearchControls
from .curves import CurvesDialog, CurvesError, load_result
from .preview import CandidatePreview
from .views import CandidateTable, SearchPlot, fmt_ms
from .worker import ADAMS, SearchRequest, SearchService

CURRENT_LABEL = "current schedule"
IDLE_TEXT = "Idle. Pick a strategy and budget, then Start."


class SearchPanel(QWidget):
    """Controls and status on the left, the live plot in the middle, the candidates on the right."""

    measured = Signal(object)  # a baseline Measurement of the open pipeline (for the session history)
    applied = Signal(object)  # the Schedule of a candidate just applied (the window shows its measured per-stage times)
    compare_requested = Signal(str, object)  # a candidate's label and Schedule, to compare with the current schedule

    def __init__(self, doc: Document, history: SessionHistory, undo_stack: QUndoStack, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.history, self.undo_stack = doc, history, undo_stack
        self.service = SearchService(self)
        self.request: SearchRequest | None = None  # the search whose results are shown
        self.result: SearchResult | None = None
        self.last: Progress | None = None
        self.pipeline_hash = ""  # of the pipeline the shown results belong to
        self.reference_hash = ""  # the schedule that was current at Start
        self.strategy = ""
        self._cancelling = False
        self._clock = QElapsedTimer()  # since the last progress report (elapsed between reports)
        self._tick = QTimer(self)
        self._tick.setInterval(250)
        self._tick.timeout.connect(self._show_status)
        self._build()
        self.service.busy_changed.connect(self._sync_buttons)
        self.service.progress.connect(self._on_progress)
        self.service.baseline.connect(self._on_baseline)
        self.service.finished.connect(self._on_finished)
        doc.pipeline_changed.connect(self._on_pipeline_changed)
        doc.changed.connect(self._sync_buttons)
        doc.changed.connect(self._preview_selected)  # the diff is against the current schedule
        history.changed.connect(self._baselines_from_history)
        self._sync_buttons()

    # --- construction ---------------------------------------------------------------------
    def _build(self) -> None:
        c = self.controls = SearchControls()
        c.start_button.clicked.connect(self.start)
        c.pause_button.toggled.connect(self._on_pause_toggled)
        c.cancel_button.clicked.connect(self.cancel)
        c.strategy_combo.currentIndexChanged.connect(self._sync_buttons)
        self.plot = SearchPlot()
        self.table = CandidateTable()
        self.table.doubleClicked.connect(self._on_double_clicked)
        self.table.itemSelectionChanged.connect(self._sync_buttons)
        self.table.itemSelectionChanged.connect(self._preview_selected)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Use the selected candidate as the document's schedule (one undoable step; Ctrl+Z goes back)")
        self.apply_button.clicked.connect(self.apply_selected)
        self.compare_button = QPushButton("Compare…")
        self.compare_button.setToolTip("The selected candidate beside the current schedule: per-stage diff, times and loop nests")
        self.compare_button.clicked.connect(self.compare_selected)
        self.curves_button = QPushButton("Strategy curves…")
        self.curves_button.setToolTip("Open a `bench strategies` result: the strategies' best-so-far curves for this pipeline")
        self.curves_button.clicked.connect(self.open_curves)
        # Before Apply: the selected candidate's schedule diff and loop nest (nothing applied).
        self.preview = CandidatePreview()
        tables = QSplitter(Qt.Orientation.Horizontal)
        tables.addWidget(self.table)
        tables.addWidget(self.preview)
        tables.setStretchFactor(0, 2)
        tables.setStretchFactor(1, 3)  # the preview's loop nest needs the width
        buttons = QHBoxLayout()
        buttons.addWidget(self.curves_button)
        buttons.addStretch(1)
        buttons.addWidget(self.compare_button)
        buttons.addWidget(self.apply_button)
        right = QVBoxLayout()
        right.setContentsMargins(0, 0, 0, 0)
        right.addWidget(tables, 1)
        right.addLayout(buttons)
        right_box = QWidget()
        right_box.setLayout(right)
        split = QSplitter(Qt.Orientation.Horizontal)
        # A short dock scrolls the controls instead of squeezing wrapped labels into each other.
        scroll = QScrollArea()
        scroll.setWidget(c)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(c.minimumWidth() + 14)
        for w, stretch in ((scroll, 3), (self.plot, 4), (right_box, 6)):
            split.addWidget(w)
            split.setStretchFactor(split.count() - 1, stretch)
        split.setChildrenCollapsible(False)
        split.setSizes([290, 380, 560])  # the candidates and their preview share the right
        QHBoxLayout(self).addWidget(split)
        c.set_status(IDLE_TEXT, NEUTRAL_COLOR)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802  # Qt override
        super().showEvent(event)
        if not self.service.busy:
            self.controls.refresh_strategies()

    # --- running --------------------------------------------------------------------------
    @Slot()
    def start(self) -> bool:
        c = self.controls
        p, name = self.doc.pipeline, c.strategy
        if p is None or self.service.busy or name not in STRATEGIES:
            return False
        self.result, self.last, self._cancelling = None, None, False
        self.strategy = name
        self.pipeline_hash, self.reference_hash = p.content_hash(), self.doc.schedule_hash
        self.table.clear_trials()
        self.preview.clear()
        self.plot.clear_data(getattr(default_model(), "name", "cost model"))  # the model the worker will use
        self._baselines_from_history()
        measure_baselines = c.baselines_check.isChecked()
        ref_known = self._history_ms(self.reference_hash) is not None
        adams_known = self.history.baseline_ms(ADAMS) is not None
        self.request = self.service.start(
            p, name, c.budget(), c.seed_spin.value(), current=self.doc.schedule if measure_baselines and not ref_known else None,
            adams=measure_baselines and not adams_known,
        )  # fmt: skip
        self._clock.start()
        self._tick.start()
        waiting = [w for w, todo in ((CURRENT_LABEL, not ref_known), (ADAMS, not adams_known)) if todo and measure_baselines]
        self._set_status(f"Measuring baselines ({', '.join(waiting)})…" if waiting else "Starting…", NEUTRAL_COLOR)
        return True

    @Slot()
    def cancel(self) -> None:
        if self.service.busy:
            self._cancelling = True
            self.service.cancel()
            self._show_status()
            self._sync_buttons()

    @Slot(bool)
    def _on_pause_toggled(self, on: bool) -> None:
        self.service.set_paused(on)
        self.controls.pause_button.setText("Resume" if on else "Pause")
        self._show_status()

    @Slot(object)
    def _on_progress(self, pr: Progress) -> None:
        if not self._shown():
            return
        self.last = pr
        self._clock.start()
        if pr.trial is not None:
            self.table.add_trial(pr.trial)
            self.plot.add_trial(pr.trial, pr.best_measured_ms, pr.best_predicted_ms)
        self._show_status()

    @Slot(str, object)
    def _on_baseline(self, key: str, m: Measurement) -> None:
        if not self._shown():
            return
        ok = m.ok and m.verified and m.median_ms is not None
        label = CURRENT_LABEL if key == "current" else key
        self.plot.set_baseline(label, m.median_ms if ok else None, "" if ok else m.error or m.error_kind or "not verified")
        if ok and key == "current":
            self.table.set_reference(m.median_ms)
        self.measured.emit(m)  # the session history keeps it (the performance panel shows it too)

    @Slot(object, str)
    def _on_finished(self, result: SearchResult | None, error: str) -> None:
        self._tick.stop()
        if self.request is None:  # a search of a pipeline no longer open, cancelled
            self._sync_buttons()
            return
        self.result = result
        if result is not None and result.model and result.model != self.plot.model_name:
            self.plot.model_name = result.model  # the model as the search wrapped it (e.g. with an online correction)
            self.plot.redraw()
        if error:
            self._set_status(f"Search failed: {error}", ERROR_COLOR)
        else:
            self._show_status()
        self._sync_buttons()

    def _shown(self) -> bool:
        """Whether reports now arriving belong to the search this panel shows."""
        return self.request is not None and self.service.current is self.request

    def shutdown(self) -> bool:
        """Cancel a running search and join its thread (the window is closing)."""
        self._tick.stop()
        return self.service.shutdown()

    # --- status ---------------------------------------------------------------------------
    def state_word(self) -> str:
        if self.service.busy:
            return "Cancelling" if self._cancelling else "Paused" if self.service.paused else "Running"
        if self.result is None:
            return "Idle"
        return "Cancelled" if self._cancelling or self.result.cancelled else "Finished"

    @Slot()
    def _show_status(self) -> None:
        pr = self.last
        if pr is None:
            if not self.service.busy and self.result is not None:
                self._set_status(f"{self.state_word()}: nothing was measured.", NEUTRAL_COLOR)
            return  # still measuring baselines: keep that line
        elapsed = pr.elapsed_s + (self._clock.elapsed() / 1000 if self.service.busy and not self.service.paused else 0.0)
        failed = sum(1 for t in self.table.trials.values() if not t.verified)
        parts = [
            f"<b>{self.state_word()}</b> ({self.strategy}) · {elapsed:.1f} s, model {pr.model_s:.1f} s",
            f"{pr.seen} candidates seen · {pr.measured} measured" + (f" ({failed} failed)" if failed else ""),
            f"best measured {fmt_ms(pr.best_measured_ms)} ms · predicted {fmt_ms(pr.best_predicted_ms)} ms",
        ]
        done = not self.service.busy and self.result is not None
        color = OK_COLOR if done and pr.best_measured_ms is not None else NEUTRAL_COLOR
        self._set_status("<br>".join(parts), color if done else None)

    def _set_status(self, text: str, color: str | None) -> None:
        self.controls.set_status(text, color)

    # --- baselines --------------------------------------------------------------------------
    def _history_ms(self, schedule_hash: str) -> float | None:
        m = self.history.measurement(schedule_hash)
        return m.median_ms if m is not None and m.ok and m.verified else None

    @Slot()
    def _baselines_from_history(self) -> None:
        """Lines for what the session already knows: the reference schedule and every autoscheduler."""
        if not self.pipeline_hash or self.history.pipeline_hash != self.pipeline_hash:
            return
        ref = self._history_ms(self.reference_hash)
        if ref is not None and self.plot.baselines.get(CURRENT_LABEL) != ref:
            self.plot.set_baseline(CURRENT_LABEL, ref)
            self.table.set_reference(ref)
        for key in list(self.history.measurements):
            name = autoscheduler_of(key)
            ms = self._history_ms(key) if name is not None else None
            if name is not None and ms is not None and self.plot.baselines.get(name) != ms:
                self.plot.set_baseline(name, ms)

    # --- applying -------------------------------------------------------------------------
    def can_apply(self) -> bool:
        p = self.doc.pipeline
        t = self.table.selected_trial()
        return (
            p is not None
            and t is not None
            and p.content_hash() == self.pipeline_hash
            and t.schedule.content_hash() != self.doc.schedule_hash
        )

    @Slot(QModelIndex)
    def _on_double_clicked(self, _index: QModelIndex) -> None:
        self.apply_selected()

    @Slot()
    def apply_selected(self) -> bool:
        """Set the selected candidate as the document's schedule: one undoable command."""
        t = self.table.selected_trial()
        if t is None or not self.can_apply():
            return False
        return self.apply_trial(t)

    def apply_trial(self, t: Trial) -> bool:
        assert self.doc.pipeline is not None
        try:
            validate(self.doc.pipeline, t.schedule)  # before the undo stack: a command must not fail in redo()
        except ScheduleError as exc:
            QMessageBox.warning(self, "Cannot apply candidate", str(exc))
            return False
        label = f"apply search trial #{t.index + 1} ({self.strategy})"
        self.undo_stack.push(ScheduleCommand(self.doc, t.schedule, label, validated=True))  # just validated above
        self._sync_buttons()
        self.applied.emit(t.schedule)
        return True

    def trial_label(self, t: Trial) -> str:
        return f"search trial #{t.index + 1} ({self.strategy})"

    def candidates(self) -> list[tuple[str, Schedule]]:
        """The verified candidates of the shown search, if they belong to the open pipeline (for Compare)."""
        p = self.doc.pipeline
        if p is None or p.content_hash() != self.pipeline_hash:
            return []
        trials = sorted(self.table.trials.values(), key=lambda t: t.index)
        return [(self.trial_label(t), t.schedule) for t in trials if t.verified]

    @Slot()
    def open_curves(self, path: str | None = None) -> CurvesDialog | None:
        """Show a `bench strategies` result's curves for the open pipeline (asks for the file
        when no `path`); a file that is not such a result, or lacks this pipeline, is one
        message saying so."""
        if self.doc.pipeline is None:
            return None
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Open a bench strategies result", "", "JSON (*.json)")
            if not path:
                return None
        try:
            dialog = CurvesDialog(load_result(path), self.doc.pipeline.name, self)
        except CurvesError as exc:
            QMessageBox.warning(self, "Strategy curves", str(exc))
            return None
        dialog.show()
        return dialog

    def compare_selected(self) -> bool:
        t = self.table.selected_trial()
        if t is None or not self._belongs():
            return False
        self.compare_requested.emit(self.trial_label(t), t.schedule)
        return True

    @Slot()
    def _preview_selected(self) -> None:
        t = self.table.selected_trial()
        p = self.doc.pipeline
        if t is None or p is None or not self._belongs():
            self.preview.clear()
            return
        self.preview.show_trial(p, self.doc.schedule, t, self.trial_label(t))

    def _belongs(self) -> bool:
        p = self.doc.pipeline
        return p is not None and p.content_hash() == self.pipeline_hash

    # --- state ----------------------------------------------------------------------------
    @Slot()
    def _on_pipeline_changed(self) -> None:
        p = self.doc.pipeline
        if p is not None and p.content_hash() == self.pipeline_hash:
            return  # the same pipeline opened again (e.g. a project): its candidates still apply
        self.cancel()
        self.pipeline_hash, self.request = "", None
        self.result, self.last = None, None
        self.table.clear_trials()
        self.preview.clear()
        self.plot.clear_data()
        self._set_status(IDLE_TEXT, NEUTRAL_COLOR)

    @Slot()
    def _sync_buttons(self, *_args: object) -> None:
        busy = self.service.busy
        self.controls.set_state(busy, self._cancelling, self.doc.pipeline is not None and self.controls.strategy in STRATEGIES)
        self.apply_button.setEnabled(self.can_apply())
        self.compare_button.setEnabled(self.table.selected_trial() is not None and self._belongs())
        if not busy:
            self._tick.stop()
