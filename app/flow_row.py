"""A row of buttons that wraps onto more lines when its panel is too narrow for one, each
button always as wide as its label needs (never squeezed, so never cut)."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget


class FlowRow(QWidget):
    """Lays out `buttons` left to right, starting a new line where the next would not fit.
    Its minimum width is its widest button's; its minimum height is that of the lines it
    needs at its current width (so a narrow dock grows it downward instead of cutting it)."""

    def __init__(self, buttons: list[QWidget], spacing: int = 3, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.buttons = buttons
        self.spacing = spacing
        for b in buttons:
            b.setParent(self)
        self._height = self._place(None, 10_000)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def _place(self, rect: QRect | None, width: int) -> int:
        """Place the buttons in `rect` (just measure when None) at `width`; returns the height used."""
        x = y = line_h = 0
        for b in self.buttons:
            if b.isHidden():
                continue
            hint = b.sizeHint()
            if x > 0 and x + hint.width() > width:
                x, y = 0, y + line_h + self.spacing
                line_h = 0
            if rect is not None:
                b.setGeometry(rect.x() + x, rect.y() + y, hint.width(), hint.height())
            x += hint.width() + self.spacing
            line_h = max(line_h, hint.height())
        return y + line_h

    def sizeHint(self) -> QSize:  # noqa: N802  # Qt override
        one_line = sum(b.sizeHint().width() for b in self.buttons if not b.isHidden())
        return QSize(one_line + self.spacing * max(0, len(self.buttons) - 1), self._height)

    def minimumSizeHint(self) -> QSize:  # noqa: N802  # Qt override
        return QSize(max((b.sizeHint().width() for b in self.buttons), default=0), self._height)

    def hasHeightForWidth(self) -> bool:  # noqa: N802  # Qt override
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802  # Qt override
        return self._place(None, width)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802  # Qt override
        super().resizeEvent(event)
        height = self._place(self.rect(), self.width())
        if height != self._height:  # more or fewer lines: the panel makes room for them
            self._height = height
            self.updateGeometry()
