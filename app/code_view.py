"""Read-only monospace text views: the loop nest (with per-stage line highlighting) and
the schedule as JSON or Halide source."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QPalette, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QWidget


class CodeView(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        # Keep a selection as visible when focus moves to another panel (the stage list).
        pal = self.palette()
        for role in (QPalette.ColorRole.Highlight, QPalette.ColorRole.HighlightedText):
            pal.setColor(QPalette.ColorGroup.Inactive, role, pal.color(QPalette.ColorGroup.Active, role))
        self.setPalette(pal)

    def set_text(self, text: str) -> None:
        if text != self.toPlainText():
            self.setPlainText(text)


class LoopNestView(CodeView):
    """The loop nest as pseudo-code; `highlight_stage` selects one stage's lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._spans: dict[str, tuple[int, int]] = {}

    def set_loopnest(self, text: str, spans: dict[str, tuple[int, int]]) -> None:
        self._spans = dict(spans)
        self.set_text(text)

    def selected_lines(self) -> tuple[int, int] | None:
        """First and last selected line (0-based), or None without a selection."""
        c = self.textCursor()
        if not c.hasSelection():
            return None
        doc = self.document()
        return doc.findBlock(c.selectionStart()).blockNumber(), doc.findBlock(c.selectionEnd()).blockNumber()

    def highlight_stage(self, stage: str | None) -> bool:
        """Select the stage's lines and scroll to them; False (and no selection) if unknown."""
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
