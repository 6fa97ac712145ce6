"""The Placement tab: choose a device profile and a policy, see the stage graph coloured by
device, the simulated timeline (and, after Run on this machine, the measured one) as a
Gantt chart, memory per device against capacity and a learned policy's training curve;
move a stage to another device by hand (undoable; the makespan updates at once).

Policies and real runs go off the GUI thread (app/background.py); a learned policy reports
its training curve while it trains. The CLI's `place` does the same from the command line.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QShowEvent, QUndoStack
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.ir import Pipeline
from engine.placement.devices import ProfileError, shipped_profiles
from engine.placement.policies import BUDGET_OPTIONS, LEARNED_NAMES, PLACERS, PlacementResult, Problem, place

from ..background import Background, Job, Outcome
from ..flow_row import FlowRow
from .charts import DeviceGraph, Gantt, MemoryBars, TrainingCurve
from .commands import SetPlacement, move_stage
from .model import DEFAULT_PROFILE, PlacementModel

LOCAL = "local"
DEFAULT_POLICY = "etf"
ERROR_STYLE = "color: #c0392b"


def _labelled(text: str, box: QWidget) -> QWidget:
    """A label and its box as one piece of a wrapping bar."""
    w = QWidget()
    lay = QHBoxLayout(w)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(QLabel(text))
    lay.addWidget(box)
    return w


def run_policy(problem: Problem, policy: str, seed: int, train_s: float, job: Job) -> PlacementResult:
    """One policy on the worker thread; a learned one reports its curve as it trains."""
    options: dict[str, Any] = {}
    if policy in LEARNED_NAMES:
        options = {BUDGET_OPTIONS[policy]: train_s, "progress": job.report, "cancel": job.cancel}
    return place(problem, policy, seed, **options)


def run_real(p: Pipeline, placement: tuple[int, ...], profile: Any, rounds: int) -> Any:
    """The placement executed on this machine's cores (measured, verified)."""
    from engine.placement.execute import run_placement  # noqa: PLC0415  # starts device processes

    return run_placement(p, placement, rounds, profile=profile)


class PlacementPanel(QWidget):
    status = Signal(str)  # one line for the window's status bar

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = PlacementModel(self)
        self.undo_stack = QUndoStack(self)
        self.work = Background("placement", parent=self)
        self.job: int | None = None
        self.running = ""  # "policy" | "run" | ""
        self.selected: int | None = None
        self.pending: list[Pipeline | None] = []  # a pipeline given while hidden (built when shown)
        self._build()
        self.model.problem_changed.connect(self._on_problem)
        self.model.changed.connect(self._on_changed)
        self.undo_stack.canUndoChanged.connect(self.undo_button.setEnabled)
        self.undo_stack.canRedoChanged.connect(self.redo_button.setEnabled)

    # --- layout -----------------------------------------------------------------------
    def _build(self) -> None:
        self.profile_box = QComboBox()
        self.profile_box.addItems([*shipped_profiles(), LOCAL])
        self.profile_box.setCurrentText(DEFAULT_PROFILE)
        self.profile_box.setToolTip("Devices and links: a shipped profile (simulated figures) or this machine's cores (local, measured)")
        self.profile_box.currentTextChanged.connect(self.set_profile)
        self.policy_box = QComboBox()
        # The learned policies' names without importing them (torch loads when one runs).
        self.policy_box.addItems(sorted(set(PLACERS) | set(LEARNED_NAMES)))
        self.policy_box.setCurrentText(DEFAULT_POLICY)
        self.policy_box.currentTextChanged.connect(self._sync_buttons)
        self.policy_box.setToolTip(
            "Placement policy: heuristics (single, roundrobin, chunks, tfgreedy, topo, etf, sct, kl) or learned (rl, hrl, gnn)"
        )
        self.train_box = QDoubleSpinBox()
        self.train_box.setRange(1.0, 600.0)
        self.train_box.setValue(20.0)
        self.train_box.setSuffix(" s")
        self.train_box.setToolTip("Training budget of a learned policy")
        self.place_button = QPushButton("Place")
        self.place_button.setToolTip("Run the policy and apply its placement (undoable)")
        self.place_button.clicked.connect(self.start_policy)
        self.run_button = QPushButton("Run on this machine")
        self.run_button.setToolTip("Execute the placement for real on this machine's cores (profile 'local'): measured and verified")
        self.run_button.clicked.connect(self.start_run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.undo_button = QToolButton()
        self.undo_button.setText("Undo")
        self.undo_button.clicked.connect(self.undo_stack.undo)
        self.redo_button = QToolButton()
        self.redo_button.setText("Redo")
        self.redo_button.clicked.connect(self.undo_stack.redo)
        for b in (self.undo_button, self.redo_button):
            b.setEnabled(False)
        for keys, slot in ((QKeySequence.StandardKey.Undo, self.undo_stack.undo), (QKeySequence.StandardKey.Redo, self.undo_stack.redo)):
            sc = QShortcut(keys, self)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)  # the tab's own history, not the schedule's
            sc.activated.connect(slot)
        self.device_box = QComboBox()
        self.device_box.setToolTip("The selected stage's device")
        self.device_box.activated.connect(self._on_device_chosen)
        self.stage_label = QLabel("No stage selected")
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet(ERROR_STYLE)
        self.message.hide()

        # The bar wraps onto more lines in a narrow window (a label stays with its box).
        bar = FlowRow(
            [
                _labelled("Devices", self.profile_box),
                _labelled("Policy", self.policy_box),
                _labelled("Train", self.train_box),
                self.place_button,
                self.run_button,
                self.cancel_button,
                self.undo_button,
                self.redo_button,
            ]
        )
        stage_row = QHBoxLayout()
        stage_row.addWidget(self.stage_label)
        stage_row.addWidget(self.device_box)
        stage_row.addStretch(1)

        self.graph_chart = DeviceGraph()
        self.graph_chart.stage_clicked.connect(self.select_stage)
        self.graph_chart.move_requested.connect(self.move_stage)
        self.gantt = Gantt("Simulated timeline")
        self.measured_gantt = Gantt("Measured timeline")
        self.memory = MemoryBars()
        self.curve = TrainingCurve()
        left = QSplitter(Qt.Orientation.Vertical)
        right = QSplitter(Qt.Orientation.Vertical)
        columns: tuple[tuple[QSplitter, tuple[QWidget, ...]], ...] = (
            (left, (self.graph_chart, self.memory)),
            (right, (self.gantt, self.measured_gantt, self.curve)),
        )
        for column, widgets in columns:
            for chart in widgets:
                chart.setMinimumHeight(60)
                column.addWidget(chart)
        self.memory.setMinimumHeight(40 + 22 * 4)  # a readable row per device of a 4-device profile
        left.setSizes([400, 200])
        right.setSizes([300, 180, 140])
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([420, 600])
        split.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(bar)
        lay.addWidget(self.message)
        lay.addWidget(self.summary)
        lay.addLayout(stage_row)
        lay.addWidget(split, 1)
        self._sync_buttons()

    def heightForWidth(self, width: int) -> int:  # noqa: N802  # Qt override
        # In a scroll area: scroll only below the height the panel needs at this width. (The
        # default adds up the charts' preferred heights: a 1115 px tall tab in a 500 px window.)
        layout = self.layout()
        return layout.totalMinimumHeightForWidth(width) if layout is not None else super().heightForWidth(width)

    # --- the problem ------------------------------------------------------------------
    def set_pipeline(self, p: Pipeline | None) -> None:
        """The open pipeline; built (op graph, costs, layout: 0.3 s for 315 stages) when the tab
        is first shown, not on every pipeline the window opens."""
        self.cancel()
        self.undo_stack.clear()
        self.pending = [p]
        if self.isVisible():
            self._sync()

    def _sync(self) -> None:
        if self.pending:
            self.model.set_pipeline(self.pending.pop())

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802  # Qt override
        self._sync()
        super().showEvent(event)

    def set_profile(self, spec: str) -> bool:
        self._sync()
        self._error("")  # the new profile's own verdict (it may not fit) replaces the old message
        try:
            self.model.set_profile(spec)
        except ProfileError as exc:
            self._error(str(exc))
            return False
        self.undo_stack.clear()  # indices of another profile's devices mean nothing here
        if self.profile_box.currentText() != spec:
            self.profile_box.blockSignals(True)
            self.profile_box.setCurrentText(spec)
            self.profile_box.blockSignals(False)
        return True

    def _on_problem(self) -> None:
        self.graph_chart.set_graph(self.model.graph, self.model.profile)
        self.device_box.clear()
        if self.model.profile is not None:
            self.device_box.addItems([f"{d.name} ({d.kind})" for d in self.model.profile.devices])
        self.selected = None
        self.curve.set_curve(())

    # --- edits ------------------------------------------------------------------------
    def select_stage(self, node: int | None) -> None:
        self.selected = node
        self._show_selection()
        if self.model.placed is not None:
            self.graph_chart.set_placement(self.model.placed.placement, node)

    def move_stage(self, node: int, device: int) -> bool:
        """Put one stage on a device, as one undoable edit (False when nothing changes)."""
        cmd = move_stage(self.model, node, device)
        if cmd is None:
            return False
        self.undo_stack.push(cmd)
        return True

    def _on_device_chosen(self, device: int) -> None:
        if self.selected is not None:
            self.move_stage(self.selected, device)

    def apply_result(self, result: PlacementResult) -> None:
        self.undo_stack.push(
            SetPlacement(self.model, result.placement, result.policy, f"{result.policy} placement", result.curve, result.train_s)
        )

    # --- work off the GUI thread ------------------------------------------------------
    def start_policy(self) -> bool:
        problem = self.model.problem
        if problem is None or self.running:
            return False
        policy, seed, train_s = self.policy_box.currentText(), 0, self.train_box.value()
        self.running = "policy"
        self._error("")
        self.curve.set_curve((), policy)
        self.job = self.work.submit(
            lambda job: run_policy(problem, policy, seed, train_s, job),
            on_done=self._on_policy_done,
            on_progress=lambda curve: self.curve.set_curve(curve, policy),
        ).id
        self._sync_buttons()
        self.status.emit(f"Placing with {policy}…")
        return True

    def place_with(self, policy: str, devices: str | None = None, wait: bool = False) -> bool:
        """Choose a profile and a policy and place (`wait`: on this thread, done on return; a
        screenshot or a script). False when the profile or the policy is refused."""
        self._sync()
        if devices is not None and not self.set_profile(devices):
            return False
        if self.policy_box.findText(policy) < 0:
            self._error(f"unknown placement policy {policy!r}")
            return False
        self.policy_box.setCurrentText(policy)
        if not wait:
            return self.start_policy()
        if self.model.problem is None:
            return False
        try:
            budget = {BUDGET_OPTIONS[policy]: self.train_box.value()} if policy in LEARNED_NAMES else {}
            result = place(self.model.problem, policy, 0, **budget)
        except Exception as exc:  # noqa: BLE001  # shown, as the worker thread's failures are
            self._error(f"Placement failed: {type(exc).__name__}: {exc}")
            return False
        self.apply_result(result)
        return True

    def _on_policy_done(self, out: Outcome) -> None:
        self.running, self.job = "", None
        self._sync_buttons()
        if out.error is not None:
            self._error(f"Placement failed: {out.error_text}")
        elif not out.cancelled and out.value is not None and self.model.problem is not None:
            result: PlacementResult = out.value
            if len(result.placement) == len(self.model.problem.graph.nodes):
                self.apply_result(result)
                self.curve.set_curve(result.curve, result.policy)
        self.status.emit("Placement done." if out.error is None else "Placement failed.")

    def start_run(self) -> bool:
        m = self.model
        if m.pipeline is None or m.placed is None or m.profile is None or self.running or not self._local():
            return False
        p, placement, profile = m.pipeline, m.placed.placement, m.profile
        self.running = "run"
        self._error("")
        self.measured_gantt.clear("Running on this machine's cores…")
        self.job = self.work.submit(lambda _job: run_real(p, placement, profile, 7), on_done=self._on_run_done).id
        self._sync_buttons()
        self.status.emit("Running the placement on this machine…")
        return True

    def _on_run_done(self, out: Outcome) -> None:
        self.running, self.job = "", None
        self._sync_buttons()
        if out.error is not None:
            self._error(f"Real run failed: {out.error_text}")
            self.measured_gantt.clear("The real run failed (see the message above).")
        elif out.value is not None:
            self.model.set_execution(out.value)

    def cancel(self) -> None:
        if self.job is not None:
            self.work.cancel(self.job)

    def shutdown(self) -> None:
        self.cancel()
        self.work.shutdown()

    # --- showing ----------------------------------------------------------------------
    def _local(self) -> bool:
        prof = self.model.profile
        return prof is not None and all(d.measured for d in prof.devices)

    def _sync_buttons(self) -> None:
        has = self.model.problem is not None
        self.place_button.setEnabled(has and not self.running)
        self.run_button.setEnabled(has and not self.running and self._local())
        self.cancel_button.setEnabled(bool(self.running))
        self.train_box.setEnabled(self.policy_box.currentText() in LEARNED_NAMES)

    def _error(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _show_selection(self) -> None:
        g, node = self.model.graph, self.selected
        if g is None or node is None or node >= len(g.nodes):
            self.stage_label.setText("No stage selected (click one in the graph)")
            self.device_box.setEnabled(False)
            return
        self.stage_label.setText(f"Stage <b>{g.nodes[node].name}</b> on")
        self.device_box.setEnabled(True)
        self.device_box.setCurrentIndex(self.model.device_of(node))

    def _on_changed(self) -> None:
        m = self.model
        self._sync_buttons()
        if m.placed is None or m.profile is None or m.graph is None or m.problem is None:
            self.summary.setText("Open a pipeline to place its stages.")
            self.gantt.clear("Simulated timeline: nothing placed yet.")
            self.measured_gantt.clear("Measured timeline: none.")
            return
        sim, prof = m.placed.simulation, m.profile
        costs = "/".join(sorted(set(m.problem.costs.source)))
        kind = "simulated" if prof.simulated else "this machine's devices"
        parts = [
            f"<b>{m.placed.label}</b> on <b>{prof.name}</b> ({kind}): "
            f"makespan <b>{sim.makespan_s * 1e3:.3f} ms</b> (simulated, {costs} costs)",
            f"{sim.transfers} transfers, {sim.transfer_bytes / 1e6:.2f} MB, {sim.transfer_s * 1e3:.3f} ms",
        ]
        if m.placed.train_s:
            parts.append(f"trained {m.placed.train_s:.1f} s")
        ex = m.execution
        if ex is not None:
            verdict = "verified" if ex.verified else "NOT verified"
            err = (sim.makespan_s - ex.makespan_s) / ex.makespan_s if ex.makespan_s > 0 else 0.0
            parts.append(
                f"measured <b>{ex.makespan_s * 1e3:.3f} ms</b> (median of {ex.rounds}, "
                f"{ex.makespan_min_s * 1e3:.3f}–{ex.makespan_max_s * 1e3:.3f}, {verdict}); simulator error {err:+.1%}"
            )
        self.summary.setText(" · ".join(parts))
        if not sim.valid:
            self._error(f"This placement does not fit: {sim.reason}")
        elif self.message.text().startswith("This placement does not fit"):
            self._error("")
        self.graph_chart.set_placement(m.placed.placement, self.selected)
        self.gantt.set_timeline(sim.timeline, prof, m.graph, m.placed.placement, "stages in their device's colour; transfers grey")
        if ex is not None:
            self.measured_gantt.set_timeline(ex.timeline(), prof, m.graph, m.placed.placement, f"measured on {ex.host or 'this machine'}")
        else:
            self.measured_gantt.clear("Measured timeline: with profile 'local', press Run on this machine.")
        self.memory.set_memory(sim.peak_memory_bytes, prof)
        if m.placed.curve:
            self.curve.set_curve(m.placed.curve, m.placed.label)
        self._show_selection()
