"""Widgets in scrolling panels take wheel events only when focused: scrolling the panel over
a combo box or spin box scrolls the panel instead of changing the widget's value."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QWidget


class WheelGuard(QObject):
    """Event filter: a wheel event over an unfocused widget is ignored, so Qt passes it on to
    the parent (the scroll area) as it does for any ignored wheel event."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802  # Qt override
        if event.type() == QEvent.Type.Wheel and isinstance(watched, QWidget) and not watched.hasFocus():
            event.ignore()
            return True
        return super().eventFilter(watched, event)


def guard_wheel(root: QWidget) -> WheelGuard:
    """Guard every combo box and spin box under `root` (now: add later widgets yourself with
    `installEventFilter`); StrongFocus, not the style's WheelFocus, so a wheel turn does not
    focus them either. The guard is parented to `root`, which keeps it alive."""
    guard = WheelGuard(root)
    for w in root.findChildren(QWidget):
        if isinstance(w, (QComboBox, QAbstractSpinBox)):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(guard)
    return guard
