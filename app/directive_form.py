"""The form that builds one directive: a kind combo, then only the fields that kind takes,
each offering the legal choices at that point of the definition (the loops that exist
after the directives before it, the stages downstream and their final loops)."""

from __future__ import annotations

from typing import Any

import networkx as nx
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QKeySequence, QShortcut, QValidator
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.ir import Pipeline
from engine.loops import TAILS, Loop
from engine.schedule import MARKER_KINDS, Directive, Kind, Schedule, final_loops

from .model.edits import fresh_name

# Kinds offered, in menu order, with a short explanation for the combo's tooltip.
KINDS: dict[str, str] = {
    "split": "split a loop into an outer and an inner loop",
    "tile": "split two loops and move both inner loops innermost",
    "reorder": "change the loop order",
    "fuse": "merge two adjacent loops into one",
    "vectorize": "run a loop as SIMD lanes (optionally splitting it first)",
    "parallel": "run a loop's iterations on several threads",
    "unroll": "unroll a loop (optionally splitting it first)",
    "compute_at": "compute the stage inside a consumer's loop",
    "compute_root": "compute the whole stage before its consumers",
    "compute_inline": "substitute the stage into its consumers",
    "store_at": "allocate the stage's buffer at a consumer's loop",
    "store_root": "allocate the stage's buffer at the outermost level",
}
# Form rows each kind shows (row keys of DirectiveForm.rows).
ROWS: dict[str, tuple[str, ...]] = {
    "split": ("loop", "outer", "inner", "factor", "tail"),
    "tile": ("x", "y", "xo", "yo", "xi", "yi", "xf", "yf", "tail"),
    "reorder": ("loops",),
    "fuse": ("fuse_outer", "fuse_inner", "fused"),
    "vectorize": ("loop", "mfactor", "tail"),
    "parallel": ("loop", "mfactor", "tail"),
    "unroll": ("loop", "mfactor", "tail"),
    "compute_at": ("consumer", "consumer_loop"),
    "store_at": ("consumer", "consumer_loop"),
    "compute_root": (),
    "compute_inline": (),
    "store_root": (),
}


# The spin boxes' keys and the directive field each one fills.
NUMBERS: dict[str, str] = {"factor": "factor", "xf": "xf", "yf": "yf", "mfactor": "factor"}


class NumberBox(QSpinBox):
    """A spin box that never replaces what the user typed. A plain QSpinBox reverts text it
    cannot take (0 in a box from 1, '', 'abc') to its last value on focus-out, so clicking
    Apply would silently apply that value; this one keeps the typed text on screen and
    `entry()` returns it, so the form refuses it with a message instead."""

    def __init__(self, lo: int, hi: int, value: int) -> None:
        super().__init__()
        self.setRange(lo, hi)
        self.setValue(value)
        self.typed: str | None = None  # the user's text while the box cannot take it
        self.lineEdit().textEdited.connect(self._edited)
        self.editingFinished.connect(self._keep_typed)

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        state, text, pos = super().validate(text, pos)
        # Letters and out-of-range numbers stay in the field (not swallowed as keystrokes):
        # Apply refuses them with a message.
        return (QValidator.State.Intermediate if state == QValidator.State.Invalid else state), text, pos

    def setValue(self, value: int) -> None:  # noqa: N802  # Qt override
        self.typed = None
        super().setValue(value)

    def stepBy(self, steps: int) -> None:  # noqa: N802  # Qt override
        self.typed = None  # the arrows (or a focused wheel) choose a legal value explicitly
        super().stepBy(steps)

    def entry(self) -> int | str:
        """The whole number the user entered (possibly out of range), else the text typed."""
        if self.typed is None:
            return self.value()
        try:
            return int(self.typed.strip())
        except ValueError:
            return self.typed

    @Slot(str)
    def _edited(self, text: str) -> None:
        acceptable = QSpinBox.validate(self, text, len(text))[0] == QValidator.State.Acceptable
        self.typed = None if acceptable else text

    @Slot()
    def _keep_typed(self) -> None:
        # Qt has just put the last value back; show what the user typed again.
        if self.typed is not None and self.lineEdit().text() != self.typed:
            self.lineEdit().setText(self.typed)


def _loop_text(lp: Loop) -> str:
    kind = "" if lp.kind == "serial" else f", {lp.kind}"
    return f"{lp.name}  [{lp.extent}{kind}{', rvar' if lp.rvar else ''}]"


class DirectiveForm(QWidget):
    """Emits `submitted(directive)`, the directive as JSON (what the user entered); the editor
    makes it a Directive (edits.parse) and decides whether it applies."""

    submitted = Signal(object)  # a dict; not Signal(dict): a QVariantMap would sort its keys
    refused = Signal(str)  # a value the form cannot take (not a whole number, too large): why
    cancelled = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.p: Pipeline | None = None
        self.sched: Schedule | None = None
        self.stage = ""
        self.loops: list[Loop] = []
        self.kind = QComboBox()
        self.kind.setObjectName("directive_kind")
        for k, tip in KINDS.items():
            self.kind.addItem(k, k)
            self.kind.setItemData(self.kind.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.rows: dict[str, QWidget] = {}
        self.form = QFormLayout()
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        # In a narrow dock a field goes under its label instead of past the dock's edge.
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.form.addRow("Kind:", self.kind)
        combos = ("loop", "x", "y", "fuse_outer", "fuse_inner", "consumer", "consumer_loop", "tail")
        labels = {
            "loop": "Loop:", "outer": "Outer name:", "inner": "Inner name:", "factor": "Factor:", "tail": "Tail:",
            "x": "x (inner dim):", "y": "y (outer dim):", "xo": "xo name:", "yo": "yo name:", "xi": "xi name:", "yi": "yi name:",
            "xf": "x factor:", "yf": "y factor:", "loops": "Order:", "fuse_outer": "Outer loop:", "fuse_inner": "Inner loop:",
            "fused": "Fused name:", "mfactor": "Split by:", "consumer": "Consumer:", "consumer_loop": "At loop:",
        }  # fmt: skip
        for key, label in labels.items():
            if key in combos:
                combo = QComboBox()
                # As narrow as ten characters (the list that drops down is as wide as its longest loop).
                combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
                combo.setMinimumContentsLength(10)
                w: QWidget = combo
            elif key in ("factor", "xf", "yf"):
                w = NumberBox(1, 1 << 20, 8)
            elif key == "mfactor":
                w = NumberBox(0, 1 << 20, 0)
                w.setSpecialValueText("none (whole loop)")
            elif key == "loops":
                w = QListWidget()
                w.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
                w.setToolTip("Innermost first (Halide's order). Drag to reorder; untick loops to leave them where they are.")
                w.setMaximumHeight(120)
            else:
                w = QLineEdit()
            w.setObjectName(f"field_{key}")
            self.rows[key] = w
            self.form.addRow(label, w)
        tail = self.combo("tail")
        tail.addItem("auto (default)", None)
        for t in TAILS[1:]:
            tail.addItem(t, t)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setDefault(True)
        self.apply_button.clicked.connect(self._submit)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancelled)
        # Its own widget: a panel that scrolls the form can keep these two always in view.
        self.button_bar = QWidget()
        self.button_bar.setObjectName("directive_form_buttons")
        buttons = QHBoxLayout(self.button_bar)
        buttons.setContentsMargins(0, 2, 0, 2)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.apply_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(self.form)
        lay.addWidget(self.button_bar)
        # Enter applies, Esc cancels, wherever the focus is in the form (a dock has no default button).
        for qt_key, slot in ((Qt.Key.Key_Return, self._submit), (Qt.Key.Key_Enter, self._submit), (Qt.Key.Key_Escape, self.cancelled.emit)):
            shortcut = QShortcut(QKeySequence(qt_key), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)
        self.kind.currentIndexChanged.connect(self._show_rows)
        self.combo("loop").currentIndexChanged.connect(self._suggest_split_names)
        self.combo("x").currentIndexChanged.connect(self._suggest_tile_names)
        self.combo("y").currentIndexChanged.connect(self._suggest_tile_names)
        self.combo("fuse_inner").currentIndexChanged.connect(self._suggest_fused_name)
        self.combo("consumer").currentIndexChanged.connect(self._fill_consumer_loops)

    def combo(self, key: str) -> QComboBox:
        w = self.rows[key]
        assert isinstance(w, QComboBox)
        return w

    def edit(self, key: str) -> QLineEdit:
        w = self.rows[key]
        assert isinstance(w, QLineEdit)
        return w

    def spin(self, key: str) -> NumberBox:
        w = self.rows[key]
        assert isinstance(w, NumberBox)
        return w

    # --- context ----------------------------------------------------------------------
    def setup(self, p: Pipeline, sched: Schedule, stage: str, loops: list[Loop], is_pure: bool) -> None:
        """The choices for a directive of `stage` that sees `loops`; compute and store
        directives only exist on the pure definition."""
        self.p, self.sched, self.stage, self.loops = p, sched, stage, loops
        for key in NUMBERS:  # text a cancelled form could not take is not carried over
            self.spin(key).setValue(self.spin(key).value())
        model = self.kind.model()
        for row in range(self.kind.count()):
            k = self.kind.itemData(row)
            enabled = is_pure or not (k.startswith("compute") or k.startswith("store"))
            item = model.item(row) if hasattr(model, "item") else None
            if item is not None:
                item.setEnabled(enabled)
        for key in ("loop", "x", "y", "fuse_outer", "fuse_inner"):
            c = self.combo(key)
            c.blockSignals(True)
            c.clear()
            for lp in loops:
                c.addItem(_loop_text(lp), lp.name)
            c.blockSignals(False)
        inner = len(loops) - 1
        serial = [k for k, lp in enumerate(loops) if lp.kind == "serial"]  # a marked loop cannot be split
        self.combo("loop").setCurrentIndex(serial[-1] if serial else inner)
        self.combo("x").setCurrentIndex(serial[-1] if serial else inner)
        self.combo("y").setCurrentIndex(serial[-2] if len(serial) > 1 else max(0, inner - 1))
        self.combo("fuse_inner").setCurrentIndex(inner)
        self.combo("fuse_outer").setCurrentIndex(max(0, inner - 1))
        order = self.rows["loops"]
        assert isinstance(order, QListWidget)
        order.clear()
        for lp in reversed(loops):
            it = QListWidgetItem(_loop_text(lp))
            it.setData(Qt.ItemDataRole.UserRole, lp.name)
            it.setFlags(it.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            it.setCheckState(Qt.CheckState.Checked)
            order.addItem(it)
        consumers = self.combo("consumer")
        consumers.blockSignals(True)
        consumers.clear()
        topo = {n: k for k, n in enumerate(nx.topological_sort(p.graph))}
        for consumer in sorted((n for n in p.downstream(stage) if n in p.stage_map), key=topo.__getitem__):
            inlined = sched.of(consumer).compute().kind == Kind.COMPUTE_INLINE
            consumers.addItem(consumer + ("  (inlined)" if inlined else ""), consumer)
        consumers.blockSignals(False)
        self._fill_consumer_loops()
        self._suggest_split_names()
        self._suggest_tile_names()
        self._suggest_fused_name()
        self._show_rows()

    def set_kind(self, kind: str) -> None:
        self.kind.setCurrentIndex(self.kind.findData(kind))

    def load(self, d: Directive) -> None:
        """Show an existing directive's values."""
        self.set_kind(d.kind.value)
        for key in ("loop", "x", "y"):
            if getattr(d, key) is not None:
                self.combo(key).setCurrentIndex(self.combo(key).findData(getattr(d, key)))
        for key in ("outer", "inner", "xo", "yo", "xi", "yi", "fused"):
            if getattr(d, key) is not None:
                self.edit(key).setText(getattr(d, key))
        if d.kind == Kind.FUSE:
            self.combo("fuse_inner").setCurrentIndex(self.combo("fuse_inner").findData(d.inner))
            self.combo("fuse_outer").setCurrentIndex(self.combo("fuse_outer").findData(d.outer))
        for key in ("xf", "yf"):
            if getattr(d, key) is not None:
                self.spin(key).setValue(getattr(d, key))
        if d.factor is not None:
            self.spin("mfactor" if d.kind in MARKER_KINDS else "factor").setValue(d.factor)
        self.combo("tail").setCurrentIndex(max(0, self.combo("tail").findData(d.tail)))
        if d.consumer is not None:
            self.combo("consumer").setCurrentIndex(self.combo("consumer").findData(d.consumer))
            self.combo("consumer_loop").setCurrentIndex(self.combo("consumer_loop").findData(d.loop))
        if d.kind == Kind.REORDER:
            order = self.rows["loops"]
            assert isinstance(order, QListWidget)
            named = list(d.loops or ())
            items = [order.takeItem(0) for _ in range(order.count())]
            items.sort(key=lambda it: named.index(it.data(Qt.ItemDataRole.UserRole)) if it.data(Qt.ItemDataRole.UserRole) in named else 99)
            for it in items:
                listed = it.data(Qt.ItemDataRole.UserRole) in named
                it.setCheckState(Qt.CheckState.Checked if listed else Qt.CheckState.Unchecked)
                order.addItem(it)

    # --- the directive ----------------------------------------------------------------
    def directive(self) -> dict[str, Any]:
        """The directive the form shows, as JSON (not checked: edits.parse does that)."""
        kind = self.kind.currentData()
        d: dict[str, Any] = {"kind": kind}
        tail = self.combo("tail").currentData()
        if kind == "split":
            d |= {"loop": self.combo("loop").currentData(), "outer": self.edit("outer").text().strip()}
            d |= {"inner": self.edit("inner").text().strip(), "factor": self.spin("factor").entry()}
        elif kind == "tile":
            d |= {"x": self.combo("x").currentData(), "y": self.combo("y").currentData()}
            d |= {k: self.edit(k).text().strip() for k in ("xo", "yo", "xi", "yi")}
            d |= {"xf": self.spin("xf").entry(), "yf": self.spin("yf").entry()}
        elif kind == "reorder":
            order = self.rows["loops"]
            assert isinstance(order, QListWidget)
            d["loops"] = [
                order.item(k).data(Qt.ItemDataRole.UserRole)
                for k in range(order.count())
                if order.item(k).checkState() == Qt.CheckState.Checked
            ]
        elif kind == "fuse":
            d |= {"inner": self.combo("fuse_inner").currentData(), "outer": self.combo("fuse_outer").currentData()}
            d["fused"] = self.edit("fused").text().strip()
        elif kind in MARKER_KINDS:
            d["loop"] = self.combo("loop").currentData()
            if self.spin("mfactor").entry() != 0:  # 0 shows as "none (whole loop)"
                d["factor"] = self.spin("mfactor").entry()
        elif kind in ("compute_at", "store_at"):
            d |= {"consumer": self.combo("consumer").currentData(), "loop": self.combo("consumer_loop").currentData()}
        if tail and (kind in ("split", "tile") or "factor" in d):
            d["tail"] = tail
        return d

    def refusal(self) -> str | None:
        """Why a shown number cannot be used, or None. Whole numbers the box allows go on to
        the engine, which judges them (a factor of 0 or -3 is refused there, with its message);
        text that is not a whole number, or above the box's maximum, is refused here."""
        shown = ROWS.get(self.kind.currentData(), ())
        for key, name in NUMBERS.items():
            box = self.spin(key)
            if key not in shown:
                continue
            entry = box.entry()
            if isinstance(entry, str):
                why = f"{name} must be a whole number, got {entry!r}"
            elif entry > box.maximum():
                why = f"{name} must be at most {box.maximum()}, got {entry}"
            else:
                continue
            box.setFocus()
            box.selectAll()
            return f"invalid schedule: stage '{self.stage}' {self.kind.currentData()}: {why}"
        return None

    @Slot()
    def _submit(self) -> None:
        why = self.refusal()
        if why is not None:
            self.refused.emit(why)
        else:
            self.submitted.emit(self.directive())

    @Slot()
    def _show_rows(self) -> None:
        shown = set(ROWS.get(self.kind.currentData(), ()))
        for key, w in self.rows.items():
            self.form.setRowVisible(w, key in shown)

    def _taken(self) -> set[str]:
        return {lp.name for lp in self.loops}

    @Slot()
    def _suggest_split_names(self) -> None:
        loop = self.combo("loop").currentData() or "x"
        taken = self._taken() - {loop}
        outer = fresh_name(taken, f"{loop}o")
        self.edit("outer").setText(outer)
        self.edit("inner").setText(fresh_name(taken | {outer}, f"{loop}i"))

    @Slot()
    def _suggest_tile_names(self) -> None:
        x, y = self.combo("x").currentData() or "x", self.combo("y").currentData() or "y"
        taken = self._taken() - {x, y}
        for key, base in (("xo", f"{x}o"), ("xi", f"{x}i"), ("yo", f"{y}o"), ("yi", f"{y}i")):
            name = fresh_name(taken, base)
            taken.add(name)
            self.edit(key).setText(name)

    @Slot()
    def _suggest_fused_name(self) -> None:
        inner, outer = self.combo("fuse_inner").currentData(), self.combo("fuse_outer").currentData()
        if inner and outer:
            self.edit("fused").setText(fresh_name(self._taken() - {inner, outer}, f"{outer}_{inner}"))

    @Slot()
    def _fill_consumer_loops(self) -> None:
        c = self.combo("consumer_loop")
        c.clear()
        consumer = self.combo("consumer").currentData()
        if consumer is None or self.p is None or self.sched is None:
            return
        try:
            loops = final_loops(self.p, self.sched, consumer)
        except ValueError:
            return
        for lp in loops:
            c.addItem(_loop_text(lp), lp.name)
        c.setCurrentIndex(0)
