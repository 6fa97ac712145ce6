"""The stage schedule editor: the selected stage's directives (pure and, for reductions,
update definition) as an editable list, a form for adding or changing one, and quick
actions. Every change is pushed as one undoable command; a change the engine rejects is
shown here with its ScheduleError message and never reaches the document."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QKeySequence, QResizeEvent, QShortcut, QUndoStack
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QScrollArea,
    QSizePolicy,
    QTabBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import InputError
from engine.schedule import STORAGE_KINDS, ScheduleError, Wrapper, format_directive

from .directive_form import DirectiveForm
from .flow_row import FlowRow
from .model import edits
from .model.commands import (
    AddDirective,
    EditDirective,
    MoveDirective,
    QuickAction,
    RemoveDirective,
    RemoveWrapper,
    ScheduleCommand,
    StageEdit,
)
from .model.document import Document
from .teaching.explain_view import Explanation, explanation_for, show_explanation
from .wheel_guard import guard_wheel

ERROR_COLOR = "#c62828"
ERROR_LINES = 6  # the message bar's most lines; a longer message scrolls inside it
ERROR_BACKGROUND = "rgba(198, 40, 40, 0.10)"  # a tint that reads on the light and the dark theme
MUTED = "color: palette(placeholder-text)"
NOTE_STYLE = "background: rgba(25, 118, 210, 0.10); border: 1px solid #1976d2; border-radius: 3px; padding: 3px"


class ScheduleEditor(QWidget):
    """Edits `doc` through `stack`; `set_stage` chooses the stage shown."""

    edit_rejected = Signal(str)  # the engine's message

    def __init__(self, doc: Document, stack: QUndoStack, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.stack = doc, stack
        self.stage: str | None = None
        self.editing: int | None = None  # index of the directive in the form, None when adding
        self.heading = QLabel()
        self.heading.setStyleSheet("font-weight: bold")
        self.heading.setWordWrap(True)
        # The packed copies (wrappers) the stage reads, listed in the heading, are removed here:
        # nothing else in the editor reaches them.
        self.packed_menu = QMenu(self)
        self.packed = _button("Packed copy ▾")
        self.packed.setObjectName("packed_copies")
        self.packed.setToolTip("The packed copies (wrappers) this stage reads: remove one so the stage reads its source directly")
        self.packed_menu.aboutToShow.connect(self._fill_packed_menu)  # filled on opening: an action never outlives its schedule
        self.packed.setMenu(self.packed_menu)
        self.packed.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.packed.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px }")  # the ▾ in the text says it
        self.packed.hide()
        self.quick: dict[str, QToolButton] = {}
        for key, (label, tip, _fn) in edits.QUICK_ACTIONS.items():
            b = _button(label)
            b.setObjectName(f"quick_{key}")
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, k=key: self.quick_action(k))
            self.quick[key] = b
        # Rows that wrap in a narrow dock: the editor never makes the window wider than the screen.
        self.quick_row = FlowRow(list(self.quick.values()))
        self.definition = QTabBar()
        self.definition.setDocumentMode(True)
        self.definition.addTab("Pure definition")
        self.definition.addTab("Update definition")
        self.definition.setToolTip("A reduction has two definitions, each with its own loops and directives")
        self.definition.currentChanged.connect(self.refresh)
        self.list = QListWidget()
        self.list.setMinimumHeight(90)
        self.list.setObjectName("directive_list")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setToolTip("Directives in the order Halide applies them; double-click one to change it")
        self.list.itemDoubleClicked.connect(self.begin_edit)
        self.list.currentRowChanged.connect(self._update_buttons)
        self.loops_label = QLabel()
        self.loops_label.setWordWrap(True)
        self.loops_label.setStyleSheet(MUTED)
        self.loops_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons: dict[str, QToolButton] = {}
        for key, text, tip, slot in (
            ("add", "Add…", "Add a directive at the end", self.begin_add),
            ("edit", "Edit…", "Change the selected directive", self.begin_edit),
            ("remove", "Remove", "Remove the selected directive", self.remove_selected),
            ("up", "↑", "Move the selected directive earlier", lambda: self.move_selected(-1)),
            ("down", "↓", "Move the selected directive later", lambda: self.move_selected(1)),
        ):
            b = _button(text)
            b.setObjectName(f"directive_{key}")
            b.setToolTip(tip)
            b.clicked.connect(slot)
            self.buttons[key] = b
        self.button_row = FlowRow(list(self.buttons.values()))
        self.form = DirectiveForm()
        self.form_box = QGroupBox()
        box = QVBoxLayout(self.form_box)
        box.addWidget(self.form)
        self.form_box.hide()
        self.form.submitted.connect(self._submit_form)
        self.form.refused.connect(self.show_error)  # a number the form could not take
        guard_wheel(self.form)  # this panel scrolls: the wheel must not change the form's values
        self.form.cancelled.connect(self.close_form)
        self.error = QLabel()
        self.error.setObjectName("editor_error")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.explanation: Explanation | None = None  # of the refusal shown, behind the Why? link (issue 18 item 6)
        self.why = QLabel('<a href="why">Why? What this refusal means</a>')
        self.why.setObjectName("editor_why")
        self.why.linkActivated.connect(self.explain_refusal)
        self.why.hide()
        # A message bar above the list, outside the scroll area: a refusal shows where the
        # user just clicked (quick actions, the buttons) and never needs scrolling to (issue 20 item 2).
        self.error.setStyleSheet(
            f"color: {ERROR_COLOR}; background: {ERROR_BACKGROUND}; border: 1px solid {ERROR_COLOR}; border-radius: 3px; padding: 3px"
        )
        self.error.hide()
        # A long message scrolls inside the bar (up to ERROR_LINES lines show), so the bar
        # never takes the whole dock on a short screen.
        self.error_box = QScrollArea()
        self.error_box.setObjectName("editor_error_box")
        self.error_box.setWidgetResizable(False)  # _fit_top sizes the label to its wrapped text
        self.error_box.setFrameShape(QFrame.Shape.NoFrame)
        self.error_box.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.error_box.setWidget(self.error)
        self.error_box.hide()
        # What an accepted edit also did (a packed copy it dropped): said where the user clicked.
        self.note = QLabel()
        self.note.setObjectName("editor_note")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.setStyleSheet(NOTE_STYLE)
        self.note.hide()
        self.placeholder = QLabel("Select a stage (in the graph or the stage list) to edit its schedule.")
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(MUTED)
        # Always in view: the stage, its quick actions, the message bar and the directive
        # buttons. Only the list, the loops and the form scroll (opening the form must not
        # squeeze the dock above this one), so no button is ever clipped or scrolled away.
        self.top = QWidget()
        top = QVBoxLayout(self.top)
        top.setContentsMargins(6, 4, 6, 0)
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.heading, 1)
        head.addWidget(self.packed, 0, Qt.AlignmentFlag.AlignTop)
        top.addLayout(head)
        top.addWidget(self.quick_row)
        top.addWidget(self.error_box)
        top.addWidget(self.note)
        top.addWidget(self.why)
        top.addWidget(self.definition)
        top.addWidget(self.button_row)
        self.body = QWidget()
        lay = QVBoxLayout(self.body)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.list, 1)
        lay.addWidget(self.loops_label)
        lay.addWidget(self.form_box)
        content = QWidget()
        inner = QVBoxLayout(content)
        inner.setContentsMargins(6, 2, 6, 4)
        inner.addWidget(self.placeholder)
        inner.addWidget(self.body, 1)
        self.scroll_area = scroll = QScrollArea()  # not `scroll`: that would hide QWidget.scroll()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)  # only below the form's narrowest
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        scroll.setMinimumHeight(30)  # a short dock gives the message and the buttons its room first
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self.top)
        outer.addWidget(scroll, 1)
        # The form's Apply and Cancel sit under the scrolling part: always in view while it is open.
        self.form_buttons = self.form.button_bar
        self.form_buttons.setContentsMargins(6, 0, 6, 2)
        outer.addWidget(self.form_buttons)
        self.form_buttons.hide()
        # Delete (or Backspace) in the list removes the selected directive (issue 20 item 10).
        for keys in (QKeySequence(QKeySequence.StandardKey.Delete), QKeySequence(Qt.Key.Key_Backspace)):
            shortcut = QShortcut(keys, self.list)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self.remove_selected)
        doc.changed.connect(self._on_document_changed)
        self.refresh()

    # --- state ------------------------------------------------------------------------
    @property
    def is_update(self) -> bool:
        return self.definition.currentIndex() == 1 and self.definition.isTabVisible(1)

    def set_stage(self, stage: str | None) -> None:
        if stage == self.stage:
            return
        self.stage = stage
        self.close_form()
        self.clear_error()
        # A reduction's work happens in its update definition: show that one first (its
        # compute/store directives are on the pure tab).
        p = self.doc.pipeline
        reduction = p is not None and stage is not None and p.stage(stage).is_reduction
        self.definition.blockSignals(True)
        self.definition.setTabVisible(1, reduction)
        self.definition.setCurrentIndex(1 if reduction else 0)
        self.definition.blockSignals(False)
        self.refresh()

    @Slot()
    def _on_document_changed(self) -> None:
        p = self.doc.pipeline
        if self.stage is not None and (p is None or self.stage not in p.stage_map):
            self.stage = None
        self.close_form()  # its choices were computed for the schedule as it was
        self.note.hide()  # it told what the last edit did: an undo or another schedule makes it stale
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        p, stage = self.doc.pipeline, self.stage
        self.placeholder.setVisible(stage is None)
        self.body.setVisible(stage is not None)
        self.top.setVisible(stage is not None)
        if p is None or stage is None:
            return
        s = p.stage(stage)
        self.definition.setTabVisible(1, s.is_reduction)
        self.definition.setVisible(s.is_reduction)  # one definition: no tabs to choose between
        kind = "reduction" if s.is_reduction else "stage"
        if stage in p.outputs:
            kind = "output " + kind
        heading = f"{stage}  ·  {s.op} {kind}  ·  computed {self.doc.placement_text(stage)}"
        packed = self.packed_copies()
        for w in packed.values():
            heading += f"  ·  reads {w.source} through {w.label}: {'; '.join(map(format_directive, w.pure)) or 'compute_root'}"
        self.packed.setVisible(bool(packed))
        self.heading.setText(heading)
        QTimer.singleShot(0, self._fit_top)  # the heading may wrap to another number of lines
        row = self.list.currentRow()
        self.list.clear()
        for k, d in enumerate(edits.directives(self.doc.schedule, stage, self.is_update)):
            item = QListWidgetItem(f"{k}.  {format_directive(d)}")
            item.setToolTip(format_directive(d))
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(min(max(row, 0), self.list.count() - 1))
        loops = edits.loops_before(p, self.doc.schedule, stage, self.is_update)
        text = ", ".join(lp.name + (f" ({lp.kind})" if lp.kind != "serial" else "") + f" {lp.extent}" for lp in loops)
        self.loops_label.setText(f"Loops, outer → inner: {text}")
        no_inline = "an output is always computed at root" if stage in p.outputs else "a reduction cannot be inlined"
        self.quick["inline"].setEnabled(stage not in p.outputs and not s.is_reduction)
        self.quick["inline"].setToolTip(edits.QUICK_ACTIONS["inline"][1] if self.quick["inline"].isEnabled() else f"Not here: {no_inline}")
        self._update_buttons()

    @Slot()
    def _update_buttons(self) -> None:
        row, n = self.list.currentRow(), self.list.count()
        self.buttons["edit"].setEnabled(row >= 0)
        self.buttons["remove"].setEnabled(row >= 0)
        self.buttons["up"].setEnabled(row > 0)
        self.buttons["down"].setEnabled(0 <= row < n - 1)

    # --- edits ------------------------------------------------------------------------
    def _push(self, make: Callable[[], ScheduleCommand]) -> bool:
        """Build the command (which validates the new schedule) and push it; on a rejected
        edit show the engine's message and leave the document alone."""
        try:
            cmd = make()
        except (ScheduleError, InputError) as exc:
            self.show_error(str(exc), exc)
            return False
        self.stack.push(cmd)  # runs redo(): the document changes and every view follows
        self.clear_error()
        dropped = cmd.dropped if isinstance(cmd, StageEdit) else []
        if dropped:
            said = " ".join(
                f"Dropped {w.label}, the packed copy of {w.source} that {w.consumer} read: this change left it invalid ({why})."
                for w, why in dropped
            )
            self.note.setText(f"{said} Undo brings it back.")
            self.note.show()
            self._fit_top()
        return True

    def show_error(self, message: str, refusal: Exception | None = None) -> None:
        self.explanation = explanation_for(refusal, self.doc)
        self.why.setVisible(self.explanation is not None)
        self.error.setText(message)
        self.error.show()
        self._fit_top()
        self.edit_rejected.emit(message)

    @Slot(str)
    def explain_refusal(self, _link: str = "") -> QDialog | None:
        """The refusal's explanation, in a dialog (the message bar's "Why?" link)."""
        return show_explanation(self, self.explanation) if self.explanation is not None else None

    def clear_error(self) -> None:
        self.note.hide()
        self.explanation = None
        self.why.hide()
        self.error.clear()
        self.error.hide()
        self._fit_top()

    @Slot()
    def _fit_top(self) -> None:
        """Give the always-visible part every line its wrapped texts and button rows need at
        its width. A layout's minimum ignores wrapping, so a short dock would cut the message
        to one line and hide a wrapped row of buttons: as a minimum height, they take their
        room from the list below (and the window's from the dock above)."""
        lay = self.top.layout()
        if lay is None or self.top.width() <= 0:
            return
        width = self.top.width()
        self.error_box.setVisible(not self.error.isHidden())
        if not self.error.isHidden():
            # A few pixels spare: a style sheet's border and padding are not in every style's estimate.
            inner = max(50, width - 12)  # the pinned part's margins
            need = self.error.heightForWidth(inner) + 4
            line = self.error.fontMetrics().lineSpacing()
            self.error_box.setFixedHeight(0)
            # The room the editor has now, less the rest of the pinned part and a little list:
            # the message takes that (at least two lines), so it does not make the window taller.
            room = self.height() - lay.totalHeightForWidth(width) - self.scroll_area.minimumHeight() - 4
            shown = min(need, line * ERROR_LINES + 12, max(room, 2 * line + 12))
            label_w = inner
            if shown < need:  # it scrolls: the bar's scroll bar takes some of the width
                label_w -= self.error_box.verticalScrollBar().sizeHint().width()
                need = self.error.heightForWidth(label_w) + 4
            # Sized here, not by the scroll area: a wrapped label's own size hint is only a guess.
            self.error.resize(label_w, need)
            self.error_box.setFixedHeight(shown)
        self.top.setMinimumHeight(lay.totalHeightForWidth(width))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802  # Qt override
        super().resizeEvent(event)
        QTimer.singleShot(0, self._fit_top)  # once the rows and labels have their new width

    def quick_action(self, key: str) -> bool:
        if self.stage is None:
            return False
        stage, update = self.stage, self.is_update and key not in ("inline", "root")
        return self._push(lambda: QuickAction(self.doc, stage, update, key))

    def packed_copies(self) -> dict[str, Wrapper]:
        """The wrappers the shown stage reads, by name."""
        return {k: w for k, w in sorted(self.doc.schedule.wrappers.items()) if w.consumer == self.stage}

    @Slot()
    def _fill_packed_menu(self) -> None:
        self.packed_menu.clear()
        for name, w in self.packed_copies().items():
            act = self.packed_menu.addAction(f"Remove packed copy {w.label}")
            act.setObjectName(f"remove_{name}")
            act.setToolTip(f"{w.consumer} reads {w.source} itself again (undoable)")
            act.triggered.connect(lambda _=False, n=name: self.remove_wrapper(n))

    def remove_wrapper(self, name: str) -> bool:
        """Remove packed copy `name` (one undoable step)."""
        return self._push(lambda: RemoveWrapper(self.doc, name))

    @Slot()
    def begin_add(self) -> None:
        self._open_form(None)

    @Slot()
    def begin_edit(self) -> None:
        if self.list.currentRow() >= 0:
            self._open_form(self.list.currentRow())

    def _open_form(self, index: int | None) -> None:
        p, stage = self.doc.pipeline, self.stage
        if p is None or stage is None:
            return
        self.editing = index
        loops = edits.loops_before(p, self.doc.schedule, stage, self.is_update, index)
        self.form.setup(p, self.doc.schedule, stage, loops, is_pure=not self.is_update)
        if index is None:
            self.form_box.setTitle("New directive (added last)")
            self.form.set_kind("split")
        else:
            d = edits.directives(self.doc.schedule, stage, self.is_update)[index]
            if d.kind in STORAGE_KINDS:  # the form has no fields for a layout; deleting one is an edit it has
                self.editing = None
                what = f"{format_directive(d)} sets how {stage} is stored"
                self.show_error(f"{what}: the form does not edit it (delete it, or edit the schedule's JSON)")
                return
            self.form_box.setTitle(f"Change directive #{index}")
            self.form.load(d)
        self.form_box.show()
        self.form_buttons.show()
        self.form.kind.setFocus()
        QTimer.singleShot(0, self._reveal_form)  # once the layout has made room for it

    @Slot()
    def _reveal_form(self) -> None:
        if self.form_box.isVisible():
            content = self.scroll_area.widget()
            lay = content.layout() if content is not None else None
            if lay is not None:
                lay.activate()  # lay the form's rows out now, so the positions below are final
            self.scroll_area.ensureWidgetVisible(self.form_box, 0, 0)

    @Slot()
    def close_form(self) -> None:
        self.editing = None
        self.form_box.hide()
        self.form_buttons.hide()

    @Slot(object)
    def _submit_form(self, obj: dict) -> None:
        if self.stage is None:
            return
        stage, update, index = self.stage, self.is_update, self.editing
        if index is None:
            at = len(edits.directives(self.doc.schedule, stage, update))
            ok = self._push(lambda: AddDirective(self.doc, stage, update, edits.parse(stage, update, obj, at)))
        else:
            ok = self._push(lambda: EditDirective(self.doc, stage, update, index, edits.parse(stage, update, obj, index)))
        if ok:
            self.close_form()
            self.list.setCurrentRow(self.list.count() - 1 if index is None else index)

    @Slot()
    def remove_selected(self) -> None:
        row = self.list.currentRow()
        if self.stage is not None and row >= 0:
            stage, update = self.stage, self.is_update
            self._push(lambda: RemoveDirective(self.doc, stage, update, row))

    def move_selected(self, delta: int) -> None:
        row = self.list.currentRow()
        if self.stage is not None and row >= 0:
            stage, update = self.stage, self.is_update
            if self._push(lambda: MoveDirective(self.doc, stage, update, row, delta)):
                self.list.setCurrentRow(row + delta)


def _button(text: str) -> QToolButton:
    """A text button as wide as its text needs and no wider (a QPushButton's style minimum of
    80 px made five quick actions overflow a narrow dock; squeezing them cut their labels)."""
    b = QToolButton()
    b.setText(text)
    b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    b.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    return b
