"""Read-only monospace text views: the loop nest (with per-stage line highlighting), the
schedule as JSON or Halide source, the lowered Stmt; and the pane that adds Copy/Export."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtGui import (
    QFontDatabase,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
    QPalette,
    QResizeEvent,
    QTextCursor,
    QTextFormat,
    QUndoStack,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import InputError
from engine.loops import Loop
from engine.schedule import COMPUTE_KINDS, Directive, Kind, ScheduleError

from .model import edits
from .model.commands import AddDirective, EditDirective, ScheduleCommand

if TYPE_CHECKING:
    from .model.document import Document


class CodeView(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._restyling = False
        self._keep_selection_visible()

    def _keep_selection_visible(self) -> None:
        """Keep a selection as visible when focus moves to another panel (the stage list),
        in the colours of the current theme."""
        # Only these two roles are set (QPalette() resolves nothing else), so every other
        # colour keeps following the application palette, and its changes reach this view.
        theme, pal = QApplication.palette(self), QPalette()
        for role in (QPalette.ColorRole.Highlight, QPalette.ColorRole.HighlightedText):
            pal.setColor(QPalette.ColorGroup.Inactive, role, theme.color(QPalette.ColorGroup.Active, role))
        self._restyling = True  # setPalette sends PaletteChange again
        try:
            self.setPalette(pal)
        finally:
            self._restyling = False

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._restyling:
            self._keep_selection_visible()  # the theme changed: take its highlight colours

    def set_text(self, text: str) -> None:
        if text != self.toPlainText():
            self.setPlainText(text)


@dataclass(frozen=True)
class LoopLine:
    """A loop of the loop-nest text: its line, the stage and definition it belongs to."""

    line: int
    stage: str
    update: bool
    loop: str


def loop_lines(roots: list) -> list[LoopLine]:
    """Every loop line of a loop-nest tree (`LoopNest.roots`), in the pre-order
    `LoopNest.render` writes one line per node. A produce node's first loop chain is its
    pure definition, the second its update."""
    out: list[LoopLine] = []
    count = 0

    def walk(n: object, update: bool) -> None:
        nonlocal count
        line = count
        count += 1
        kind, stage = n.kind, n.stage  # type: ignore[attr-defined]
        if kind == "loop":
            out.append(LoopLine(line, stage, update, n.label.split(" in [")[0].split()[-1]))  # type: ignore[attr-defined]
        chains = 0
        for c in n.children:  # type: ignore[attr-defined]
            if kind == "produce" and c.stage == stage and c.kind in ("loop", "compute"):
                walk(c, chains == 1)
                chains += 1
            else:
                walk(c, update if c.stage == stage else False)

    for r in roots:
        walk(r, False)
    return out


SPLIT_FACTOR = 8  # s splits by this (by half a loop shorter than two of these)
UNROLL_FACTOR = 4  # u unrolls a loop longer than UNROLL_MAX by this, a shorter one whole
UNROLL_MAX = 8
KEY_LEGEND = (
    "Keys: ↑↓ loop · s split · f fuse with inner · Shift+↑↓ or [ ] move out/in · v vectorize · u unroll · "
    "p parallel · c compute the selected stage here · z undo"
)
REFUSED_STYLE = "color: #c62828; background: rgba(198, 40, 40, 0.10); padding: 2px 4px"


class LoopNestView(CodeView):
    """The loop nest as pseudo-code; `highlight_stage` selects one stage's lines. With
    `attach(doc, stack)` it is also a loop_tool-style editor: a loop cursor (Up/Down) and one
    key per edit, each pushed as the schedule editor's own undoable command (AddDirective /
    EditDirective on the edits of app/model/edits.py), so predictions and auto-measure follow
    as after any edit; a refusal shows the engine's message under the text."""

    edit_rejected = Signal(str)  # the engine's message
    loop_changed = Signal(object)  # the LoopLine under the loop cursor (or None)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._spans: dict[str, tuple[int, int]] = {}
        self.doc: Document | None = None
        self.stack: QUndoStack | None = None
        self.stage: str | None = None  # the stage selected in the app (the producer for `c`)
        self.loops: list[LoopLine] = []
        self.current: LoopLine | None = None
        self._want: tuple[str, bool, str] | None = None  # the loop to put the cursor on after an edit
        self.legend = QLabel(KEY_LEGEND, self)
        self.legend.setObjectName("loopnest_legend")
        self.legend.setWordWrap(True)
        self.legend.setStyleSheet("color: palette(placeholder-text); padding: 2px 4px")
        self.message = QLabel(self)
        self.message.setObjectName("loopnest_message")
        self.message.setWordWrap(True)
        self.message.setStyleSheet(REFUSED_STYLE)
        self.message.hide()
        self.legend.hide()  # shown once attached to a document
        # The labels sit above the horizontal scroll bar, which comes and goes with the text.
        self.horizontalScrollBar().rangeChanged.connect(lambda *_: self._place_labels())

    def attach(self, doc: Document, stack: QUndoStack) -> None:
        """Edit `doc` through `stack` with the keys of KEY_LEGEND."""
        self.doc, self.stack = doc, stack
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.legend.show()
        self._place_labels()

    def set_loopnest(self, text: str, spans: dict[str, tuple[int, int]]) -> None:
        self._spans = dict(spans)
        self.set_text(text)
        nest = self.doc.loopnest if self.doc is not None else None
        # The loop lines index this text only when it is the document's (render() would build it again).
        self.loops = loop_lines(nest.roots) if nest is not None and self.doc is not None and self.doc.loopnest_text == text else []
        want = self._want or ((self.current.stage, self.current.update, self.current.loop) if self.current else None)
        self._want = None
        found = next((lp for lp in self.loops if want and (lp.stage, lp.update, lp.loop) == want), None)
        if found is None and want is not None:  # the loop went (split, fused): the stage's first loop of that definition
            found = next((lp for lp in self.loops if (lp.stage, lp.update) == want[:2]), None)
        self._set_current(found)

    # --- the loop cursor ----------------------------------------------------------------
    def _set_current(self, lp: LoopLine | None) -> None:
        self.current = lp
        sels: list[QTextEdit.ExtraSelection] = []
        if lp is not None:
            sel = QTextEdit.ExtraSelection()
            block = self.document().findBlockByNumber(lp.line)
            sel.cursor = QTextCursor(block)
            fmt = sel.format
            fmt.setBackground(self.palette().color(QPalette.ColorRole.Highlight).lighter(150))
            fmt.setProperty(QTextFormat.Property.FullWidthSelection, True)
            fmt.setFontWeight(700)
            sel.format = fmt
            sels.append(sel)
            c = QTextCursor(block)
            self.setTextCursor(c)
            self.ensureCursorVisible()
        self.setExtraSelections(sels)
        self.loop_changed.emit(lp)

    def move_cursor(self, delta: int) -> None:
        """Up (-1) or Down (+1) to the previous or next loop line."""
        if not self.loops:
            return
        if self.current is None:
            first = self._spans.get(self.stage or "", (0, 0))[0]
            self._set_current(next((lp for lp in self.loops if lp.line >= first), self.loops[0]))
            return
        k = next((i for i, lp in enumerate(self.loops) if lp.line == self.current.line), 0)
        self._set_current(self.loops[max(0, min(len(self.loops) - 1, k + delta))])

    def set_current_loop(self, stage: str, loop: str, update: bool = False) -> bool:
        """Put the loop cursor on a stage's loop; False if it has no such loop line."""
        lp = next((lp for lp in self.loops if (lp.stage, lp.update, lp.loop) == (stage, update, loop)), None)
        if lp is not None:
            self._set_current(lp)
        return lp is not None

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802  # Qt override
        super().mousePressEvent(event)
        line = self.cursorForPosition(event.position().toPoint()).blockNumber()
        lp = next((lp for lp in self.loops if lp.line == line), None)
        if lp is not None:
            self._set_current(lp)

    # --- keys -------------------------------------------------------------------------
    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802  # Qt override
        if self.doc is None or not self._key(event):
            super().keyPressEvent(event)

    def _key(self, event: QKeyEvent) -> bool:
        key, mods = event.key(), event.modifiers()
        shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
        ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
        k = Qt.Key
        if key in (k.Key_Up, k.Key_Down) and not ctrl:
            delta = -1 if key == k.Key_Up else 1
            if shift:
                self.move_loop(delta)
            else:
                self.move_cursor(delta)
            return True
        if ctrl and key == k.Key_Z or (key == k.Key_Z and not mods):
            self.undo()
            return True
        if ctrl or (mods & Qt.KeyboardModifier.AltModifier):
            return False
        actions: dict[int, Callable[[], object]] = {
            k.Key_S: self.split,
            k.Key_F: self.fuse,
            k.Key_BracketLeft: lambda: self.move_loop(-1),
            k.Key_BracketRight: lambda: self.move_loop(1),
            k.Key_V: self.vectorize,
            k.Key_U: self.unroll,
            k.Key_P: self.parallelize,
            k.Key_C: self.compute_here,
        }
        fn = actions.get(key)
        if fn is None:
            return False
        fn()
        return True

    # --- edits: the editor's commands --------------------------------------------------
    def _target(self) -> tuple[LoopLine, list[Loop], int] | None:
        """The loop under the cursor, its definition's loops and its index among them."""
        if self.current is None:
            self.move_cursor(0)
        lp, doc = self.current, self.doc
        if lp is None or doc is None or doc.pipeline is None:
            self.refuse("no loop under the cursor: move to one with ↑ ↓ (or click a loop line)")
            return None
        loops = edits.loops_before(doc.pipeline, doc.schedule, lp.stage, lp.update)
        k = next((i for i, x in enumerate(loops) if x.name == lp.loop), None)
        if k is None:
            self.refuse(f"{lp.stage}: the loop {lp.loop!r} is not one of its definition's loops")
            return None
        return lp, loops, k

    def _push(self, make: Callable[[], ScheduleCommand], want: tuple[str, bool, str] | None = None) -> bool:
        """Build the command (which validates the new schedule) and push it, as the editor
        does; a refused edit shows the engine's message and changes nothing."""
        if self.stack is None:
            return False
        try:
            cmd = make()
        except (ScheduleError, InputError) as exc:
            self.refuse(str(exc))
            return False
        self.message.hide()
        self._want = want
        self.stack.push(cmd)
        self._want = None
        return True

    def _add(self, lp: LoopLine, d: Directive, follow: str | None = None) -> bool:
        doc = self.doc
        assert doc is not None
        return self._push(lambda: AddDirective(doc, lp.stage, lp.update, d), (lp.stage, lp.update, follow or lp.loop))

    def split(self) -> bool:
        t = self._target()
        if t is None:
            return False
        lp, loops, k = t
        ext = loops[k].extent
        if ext < 2:
            self.refuse(f"{lp.stage}: the loop {lp.loop!r} has one iteration: nothing to split")
            return False
        factor = SPLIT_FACTOR if ext >= 2 * SPLIT_FACTOR else max(1, ext // 2)
        taken = {x.name for x in loops}
        outer = edits.fresh_name(taken, lp.loop + "o")
        inner = edits.fresh_name(taken | {outer}, lp.loop + "i")
        return self._add(lp, Directive(Kind.SPLIT, loop=lp.loop, outer=outer, inner=inner, factor=factor), outer)

    def fuse(self) -> bool:
        t = self._target()
        if t is None:
            return False
        lp, loops, k = t
        if k + 1 >= len(loops):
            self.refuse(f"{lp.stage}: {lp.loop!r} is the innermost loop: nothing inside it to fuse with")
            return False
        inner = loops[k + 1].name
        fused = edits.fresh_name({x.name for x in loops}, lp.loop + inner)
        return self._add(lp, Directive(Kind.FUSE, inner=inner, outer=lp.loop, fused=fused), fused)

    def move_loop(self, delta: int) -> bool:
        """Swap the loop with the one outside (-1) or inside (+1) it: a reorder of all the
        definition's loops (Halide lists them innermost first)."""
        t = self._target()
        if t is None:
            return False
        lp, loops, k = t
        j = k + delta
        if not 0 <= j < len(loops):
            self.refuse(f"{lp.stage}: {lp.loop!r} is already the {'outermost' if delta < 0 else 'innermost'} loop")
            return False
        names = [x.name for x in loops]
        names[k], names[j] = names[j], names[k]
        return self._add(lp, Directive(Kind.REORDER, loops=tuple(reversed(names))))

    def vectorize(self) -> bool:
        t = self._target()
        if t is None:
            return False
        lp, loops, k = t
        factor = edits.VECTOR_WIDTH if loops[k].extent > edits.VECTOR_WIDTH else None
        return self._add(lp, Directive(Kind.VECTORIZE, loop=lp.loop, factor=factor))

    def unroll(self) -> bool:
        t = self._target()
        if t is None:
            return False
        lp, loops, k = t
        factor = UNROLL_FACTOR if loops[k].extent > UNROLL_MAX else None
        return self._add(lp, Directive(Kind.UNROLL, loop=lp.loop, factor=factor))

    def parallelize(self) -> bool:
        t = self._target()
        if t is None:
            return False
        return self._add(t[0], Directive(Kind.PARALLEL, loop=t[0].loop))

    def compute_here(self) -> bool:
        """compute_at of the selected stage (a producer) at the loop under the cursor, in place
        of its compute directive if it has one (EditDirective), else added (AddDirective)."""
        t = self._target()
        doc = self.doc
        if t is None or doc is None:
            return False
        lp = t[0]
        producer = self.stage
        if producer is None or producer == lp.stage:
            self.refuse(
                "c computes the selected stage at the loop under the cursor: select a producer (graph or stage list), "
                "then put the cursor on a loop of its consumer"
            )
            return False
        d = Directive(Kind.COMPUTE_AT, consumer=lp.stage, loop=lp.loop)
        ds = edits.directives(doc.schedule, producer, False)
        at = next((i for i, x in enumerate(ds) if x.kind in COMPUTE_KINDS), None)
        want = (lp.stage, lp.update, lp.loop)
        if at is None:
            return self._push(lambda: AddDirective(doc, producer, False, d), want)
        return self._push(lambda: EditDirective(doc, producer, False, at, d), want)

    def undo(self) -> None:
        if self.stack is not None and self.stack.canUndo():
            self.message.hide()
            self.stack.undo()

    def refuse(self, message: str) -> None:
        self.message.setText(f"Not applied: {message}")
        self.message.show()
        self._place_labels()
        self.edit_rejected.emit(message)

    # --- the legend under the text -----------------------------------------------------
    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802  # Qt override
        super().resizeEvent(event)
        self._place_labels()

    def _place_labels(self) -> None:
        w = self.viewport().width()
        bar = self.horizontalScrollBar()
        # Above the horizontal scroll bar, which sits below the viewport's margins.
        y = self.height() - self.frameWidth() - (bar.height() if bar.isVisible() else 0)
        total = 0
        for label in (self.legend, self.message):
            if label.isHidden():
                continue
            h = label.heightForWidth(w) + 2  # the style sheet's padding is not always in the estimate
            y -= h
            total += h
            label.setGeometry(self.frameWidth(), y, w, h)
        self.setViewportMargins(0, 0, 0, total)

    def selected_lines(self) -> tuple[int, int] | None:
        """First and last selected line (0-based), or None without a selection."""
        c = self.textCursor()
        if not c.hasSelection():
            return None
        doc = self.document()
        return doc.findBlock(c.selectionStart()).blockNumber(), doc.findBlock(c.selectionEnd()).blockNumber()

    def highlight_stage(self, stage: str | None) -> bool:
        """Select the stage's lines and scroll to them; False (and no selection) if unknown."""
        self.stage = stage
        span = self._spans.get(stage or "")
        if span is None:
            c = self.textCursor()
            c.clearSelection()
            self.setTextCursor(c)
            return False
        doc = self.document()
        first, last = doc.findBlockByNumber(span[0]), doc.findBlockByNumber(span[1])
        # Anchor at the end, cursor at the start: the view scrolls to the stage's first line.
        c = QTextCursor(doc)
        c.setPosition(last.position() + last.length() - 1)
        c.setPosition(first.position(), QTextCursor.MoveMode.KeepAnchor)
        self.setTextCursor(c)
        self.ensureCursorVisible()
        return True


class SourcePane(QWidget):
    """A CodeView under a slim bar with Copy and Export… buttons (and a note on the left)."""

    def __init__(self, view: CodeView, suffix: str, what: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view, self.suffix, self.what = view, suffix, what
        self.note = QLabel()
        self.note.setStyleSheet("color: palette(placeholder-text)")
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip(f"Copy the {what} to the clipboard")
        self.copy_button.clicked.connect(self.copy)
        self.export_button = QToolButton()
        self.export_button.setText("Export…")
        self.export_button.setToolTip(f"Save the {what} to a {suffix} file")
        self.export_button.clicked.connect(self.export_dialog)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 2, 6, 2)
        bar.addWidget(self.note, 1)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.export_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(view, 1)
        self.default_name = "schedule"

    @Slot()
    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.view.toPlainText())

    def export(self, path: str) -> None:
        """Write the text to `path` (atomically: a crash never leaves half a file)."""
        atomic_write(Path(path), self.view.toPlainText())

    @Slot()
    def export_dialog(self) -> None:
        start = str(Path.cwd() / f"{self.default_name}{self.suffix}")
        path, _ = QFileDialog.getSaveFileName(self, f"Export {self.what}", start, f"*{self.suffix};;All files (*)")
        if not path:
            return
        try:
            self.export(path)
        except OSError as exc:
            QMessageBox.warning(self, f"Cannot export {self.what}", f"{path}: {exc.strerror or exc}")


STALE_TEMP_S = 600  # a temporary file this old beside its target is left over from a killed save


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`. The temporary
    file is removed on any failure; the result keeps the mode of the file it replaces (a
    new file gets the umask's, as open() gives; mkstemp's would be 600); temporary files a
    killed earlier save left behind are removed after a successful one."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 less the umask
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if mode is not None:
                os.chmod(tmp, mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    cutoff = time.time() - STALE_TEMP_S
    for old in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            if old.stat().st_mtime < cutoff:
                old.unlink()
