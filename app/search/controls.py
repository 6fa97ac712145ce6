"""The search panel's left column: strategy (listed from engine.search.STRATEGIES, each with
a one-line description), budget, seed, Start / Pause-Resume / Cancel and the status line.
It holds no search state: the panel tells it what to enable and what to say."""

from __future__ import annotations

import re
import sys

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget

from engine.search import STRATEGIES, Budget

from ..performance import NEUTRAL_COLOR

MAX_LINE = 100  # a longer first sentence reads badly in one line: the module's summary is used instead


def _first_sentence(doc: str | None) -> str:
    """The first paragraph's first sentence, whitespace collapsed, without a trailing "(...)" aside."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s|\s\(", para, maxsplit=1)[0].rstrip(".")


def describe(name: str) -> str:
    """One line about a strategy: its `description` attribute if it has one, else the first
    sentence of its docstring, or of its module's when that one defers to the module or is too long."""
    fn = STRATEGIES.get(name)
    if fn is None:
        return ""
    description = getattr(fn, "description", None)  # optional: not part of the strategy signature
    if description:
        return str(description)
    own = _first_sentence(fn.__doc__)
    if own and "module doc" not in (fn.__doc__ or "") and len(own) <= MAX_LINE:
        return own
    module = sys.modules.get(fn.__module__)
    return _first_sentence(module.__doc__ if module is not None else None) or own or "no description"


def _spin(lo: int, hi: int, value: int, tip: str) -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setValue(value)
    s.setToolTip(tip)
    return s


class SearchControls(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.strategy_combo = QComboBox()
        self.strategy_combo.setObjectName("search_strategy")
        self.strategy_combo.currentIndexChanged.connect(self._show_description)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setStyleSheet(f"color: {NEUTRAL_COLOR}")
        self.description.setToolTip("What the chosen strategy does (from its documentation in engine/search/)")
        self.trials_spin = _spin(1, 10_000, 32, "Hardware measurements at most (failed candidates count too)")
        self.wall_spin = _spin(1, 24 * 3600, 60, "Wall-clock seconds for the search: model time and measurements (paused time counts)")
        self.trials_spin.setSuffix(" trials")
        self.wall_spin.setSuffix(" s")
        self.seed_spin = _spin(0, 2**31 - 1, 0, "Random seed: the same seed and measured times give the same search")
        self.baselines_check = QCheckBox("Baselines")
        self.baselines_check.setChecked(True)
        self.baselines_check.setToolTip(
            "Measure baselines first: the current schedule and Halide's Adams2019 autoscheduler, when they are not known yet "
            "(stored results are reused)"
        )
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Search for a fast schedule of this pipeline (off the GUI thread, in its own worker process)")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Pause after the running measurement; press again to resume")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the search now (the running measurement is killed); the candidates so far stay")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setToolTip(
            "Candidates the model predicted, hardware measurements, best predicted and best verified measured time, "
            "search time and the part of it spent in the model"
        )
        form = QFormLayout()
        form.setVerticalSpacing(3)
        form.addRow("Strategy:", self.strategy_combo)
        form.addRow(self.description)
        # Two settings a row: the dock is short, and a scrolled control is easily missed.
        budget = QHBoxLayout()
        budget.addWidget(self.trials_spin, 1)
        budget.addWidget(self.wall_spin, 1)
        form.addRow("Budget:", budget)
        seed = QHBoxLayout()
        seed.addWidget(self.seed_spin, 1)
        seed.addWidget(self.baselines_check)
        form.addRow("Seed:", seed)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.pause_button, self.cancel_button):
            buttons.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(form)
        lay.addLayout(buttons)
        lay.addWidget(self.status)
        lay.addStretch(1)
        self.setMinimumWidth(250)
        self.refresh_strategies()

    @property
    def strategy(self) -> str:
        return self.strategy_combo.currentText()

    def budget(self) -> Budget:
        return Budget(self.trials_spin.value(), float(self.wall_spin.value()))

    def refresh_strategies(self) -> None:
        """List engine.search.STRATEGIES (strategies may register after the panel is built)."""
        names = sorted(STRATEGIES)
        combo = self.strategy_combo
        if [combo.itemText(i) for i in range(combo.count())] == names:
            return
        keep = combo.currentText() or ("greedy" if "greedy" in names else "random")
        combo.blockSignals(True)
        combo.clear()
        for name in names:
            combo.addItem(name)
            combo.setItemData(combo.count() - 1, describe(name), Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(max(0, combo.findText(keep)))
        combo.blockSignals(False)
        self._show_description()

    @Slot()
    def _show_description(self) -> None:
        name = self.strategy
        self.description.setText(describe(name) if name else "")
        self.strategy_combo.setToolTip(f"Search strategy: {describe(name)}" if name else "Search strategy")

    def set_state(self, busy: bool, cancelling: bool, can_start: bool) -> None:
        """Enable what applies: settings and Start while idle, Pause and Cancel while running."""
        self.start_button.setEnabled(can_start and not busy)
        self.pause_button.setEnabled(busy and not cancelling)
        self.cancel_button.setEnabled(busy and not cancelling)
        for w in (self.strategy_combo, self.trials_spin, self.wall_spin, self.seed_spin, self.baselines_check):
            w.setEnabled(not busy)
        if not busy and self.pause_button.isChecked():
            self.pause_button.setChecked(False)

    def set_status(self, text: str, color: str | None = None) -> None:
        """Rich text; `color` None: the palette's text colour (follows the theme)."""
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {color}" if color else "")
