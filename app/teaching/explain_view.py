"""Why an edit was refused (issue 18 item 6): the explanation engine/teaching/explain.py
gives for a ScheduleError, shown in a small dialog: a title, a few sentences in the lessons'
style and the loop nest as it is now, with the place the edit asked for marked (green) and
the reason it cannot be (red). The schedule editor's message bar links here ("Why?")."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QScrollArea, QVBoxLayout, QWidget

from engine.schedule import ScheduleError
from engine.teaching.explain import BAD, HERE, NOTE, Explanation, explain

from ..model.document import Document

COLOURS = {HERE: "#1b7f3b", BAD: "#c62828", NOTE: "#5a5a8a"}  # a mark's colour (text and its note)
SIGNS = {HERE: "\u2190", BAD: "\u2190 \u2717", NOTE: "\u2190"}  # ←, ← ✗


def explanation_for(error: Exception | None, doc: Document) -> Explanation | None:
    """The explanation of a refused edit of `doc` (its schedule is the one before the edit),
    or None when there is none (not a ScheduleError, or a refusal not explained)."""
    if not isinstance(error, ScheduleError) or doc.pipeline is None:
        return None
    try:
        return explain(error, doc.pipeline, doc.schedule)
    except ScheduleError:  # the picture needs the current schedule's loops: no picture, no link
        return None


def picture_html(ex: Explanation) -> str:
    """The loop-nest picture as rich text: one line each, marks coloured, notes beside them."""
    rows = []
    for line in ex.picture:
        text = html.escape(line.text)
        if line.mark:
            colour = COLOURS[line.mark]
            note = f"  {SIGNS[line.mark]} {html.escape(line.note)}" if line.note else ""
            weight = "bold" if line.mark == BAD else "normal"
            text = f'<span style="color:{colour}; font-weight:{weight}">{text}{note}</span>'
        rows.append(text)
    return "<pre>" + "\n".join(rows) + "</pre>"


class ExplainView(QWidget):
    """One explanation: its title, text and picture."""

    def __init__(self, ex: Explanation, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.explanation = ex
        self.setObjectName("explain_view")
        self.title = QLabel(f"<b>{html.escape(ex.title)}</b>")
        self.text = QLabel(ex.text)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        self.picture = QLabel(picture_html(ex))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.picture.setObjectName("explain_picture")
        self.picture.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        scroll = QScrollArea()
        scroll.setWidget(self.picture)
        scroll.setWidgetResizable(True)
        scroll.setMinimumHeight(120)
        lay = QVBoxLayout(self)
        lay.addWidget(self.title)
        lay.addWidget(self.text)
        lay.addWidget(QLabel("The loop nest now, and where the edit asked to go:"))
        lay.addWidget(scroll, 1)


def show_explanation(parent: QWidget, ex: Explanation) -> QDialog:
    """A non-modal dialog with the explanation (returned, for tests and screenshots)."""
    dialog = QDialog(parent)
    dialog.setObjectName("explain_dialog")
    dialog.setWindowTitle(f"Why? {ex.title}")
    lay = QVBoxLayout(dialog)
    lay.addWidget(ExplainView(ex, dialog))
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    lay.addWidget(buttons)
    dialog.resize(760, 440)
    dialog.show()
    return dialog
