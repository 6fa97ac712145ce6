"""Presentation mode (issue 18 item 5): a global font scale (Ctrl + / Ctrl − / Ctrl 0,
app-wide, remembered), a simplified layout for a 1280×720 projector (the graph and the
loop nest in the middle, the Teaching dock and a lesson dock if there is one; every other
dock and the toolbar hidden, all restored on leaving), and keyboard stepping: Right / Left /
Space through the animation, PageDown / PageUp through a lesson."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QEvent, QObject, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import QApplication, QDockWidget, QToolBar, QWidget

from ..flow_row import FlowRow

if TYPE_CHECKING:
    from ..main_window import MainWindow
    from . import Teaching

SETTINGS_KEY = "teaching/font_scale"
SCALE_STEP = 1.15
MIN_SCALE, MAX_SCALE = 0.6, 3.0
PROJECTOR = (1280, 720)
BASE_PT = "teachingBasePointSize"  # a widget's own font size before scaling (dynamic property)
LESSON_NEXT, LESSON_PREVIOUS = "next_step", "previous_step"  # what a lesson panel offers


class Presentation(QObject):
    """The View menu's Presentation Mode and text-size actions, and the mode itself."""

    def __init__(self, window: MainWindow, teaching: Teaching, settings: tuple[str, str]) -> None:
        super().__init__(window)
        self.window, self.teaching = window, teaching
        self.settings = settings  # (organization, application) of the QSettings the scale is kept in
        self.active = False
        self._saved_state: QByteArray | None = None
        self._saved_size: tuple[int, int] | None = None
        self._hidden_tabs: list[int] = []
        self._base_font = QApplication.font()
        self.scale = 1.0
        self.action = QAction("&Presentation Mode", window)
        self.action.setCheckable(True)
        self.action.setShortcuts([QKeySequence("F5"), QKeySequence("Ctrl+Shift+P")])
        self.action.setStatusTip(
            "Large text and a simple layout for a projector; Right/Left/Space step the animation, PageDown/PageUp a lesson"
        )
        self.action.toggled.connect(self.set_active)
        self.larger = _action(window, "&Larger Text", self.zoom_in, ["Ctrl++", "Ctrl+="])
        self.smaller = _action(window, "&Smaller Text", self.zoom_out, ["Ctrl+-"])
        self.normal = _action(window, "&Normal Text Size", self.reset_scale, ["Ctrl+0"])
        menu = window.chrome.view_menu
        menu.addSeparator()
        menu.addAction(teaching.dock.toggleViewAction())
        menu.addAction(self.action)
        menu.addAction(self.larger)
        menu.addAction(self.smaller)
        menu.addAction(self.normal)
        anim = teaching.panel.animation
        self.keys: list[QShortcut] = []
        for key, slot in (
            (Qt.Key.Key_Right, anim.step),
            (Qt.Key.Key_Left, anim.back),
            (Qt.Key.Key_Space, anim.toggle_play),
            (Qt.Key.Key_PageDown, lambda: self.lesson_step(1)),
            (Qt.Key.Key_PageUp, lambda: self.lesson_step(-1)),
        ):
            sc = QShortcut(QKeySequence(key), window)
            sc.setContext(Qt.ShortcutContext.WindowShortcut)
            sc.activated.connect(slot)
            sc.setEnabled(False)  # only in presentation mode: elsewhere these keys are the widgets'
            self.keys.append(sc)
        window.installEventFilter(self)  # leave the mode before the window saves its layout on closing
        saved = QSettings(*self.settings).value(SETTINGS_KEY)
        try:
            scale = float(saved) if saved is not None else 1.0  # type: ignore[arg-type,unused-ignore]
        except (TypeError, ValueError):
            scale = 1.0  # a hand-edited setting that is not a number: the normal size
        if scale != 1.0:
            self.set_scale(scale, remember=False)
            # Again once the window is complete: docks installed after this one have widgets too.
            QTimer.singleShot(0, self, lambda: self.set_scale(self.scale, remember=False))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802  # Qt override
        if watched is self.window and event.type() == QEvent.Type.Close and self.active:
            self.set_active(False)  # the layout remembered is the user's, not the projector's
        return False

    # --- the font scale -----------------------------------------------------------------
    def set_scale(self, scale: float, remember: bool = True) -> None:
        """Every font of the application at `scale` times its normal size."""
        self.scale = max(MIN_SCALE, min(MAX_SCALE, scale))
        app = QApplication.instance()
        if not isinstance(app, QApplication):
            return
        f = self._base_font
        f2 = f.__class__(f)
        if f.pointSizeF() > 0:
            f2.setPointSizeF(f.pointSizeF() * self.scale)
        else:
            f2.setPixelSize(max(6, round(f.pixelSize() * self.scale)))
        app.setFont(f2)
        # Widgets with a font of their own (the code views' fixed-width one) or a style sheet do
        # not follow the application font: scale theirs from the size they had before any scaling.
        # The window's own widgets (its dialogs included): QApplication.allWidgets() also lists
        # widgets of windows being destroyed, which are not safe to touch.
        for w in [self.window, *self.window.findChildren(QWidget)]:
            # A style sheet keeps a widget's font as it was as well (QStyleSheetStyle resolves it).
            if not (w.testAttribute(Qt.WidgetAttribute.WA_SetFont) or w.styleSheet()):
                continue
            base = w.property(BASE_PT)
            font = w.font()
            if base is None:
                base = font.pointSizeF()
                if base <= 0:
                    continue
                w.setProperty(BASE_PT, base)
            font.setPointSizeF(float(base) * self.scale)
            w.setFont(font)
        if remember:
            QSettings(*self.settings).setValue(SETTINGS_KEY, self.scale)
        self._relayout_rows()
        QTimer.singleShot(0, self, self._relayout_rows)  # again once every font change is delivered (dropped with self)

    @Slot()
    def _relayout_rows(self) -> None:
        """Rows of buttons that wrap (FlowRow) place their buttons at their size hints on a
        resize only: give them one, so the larger labels are not cut."""
        for row in self.window.findChildren(FlowRow):
            QApplication.sendEvent(row, QResizeEvent(row.size(), row.size()))

    @Slot()
    def zoom_in(self) -> None:
        self.set_scale(self.scale * SCALE_STEP)

    @Slot()
    def zoom_out(self) -> None:
        self.set_scale(self.scale / SCALE_STEP)

    @Slot()
    def reset_scale(self) -> None:
        self.set_scale(1.0)

    # --- the mode -----------------------------------------------------------------------
    @Slot(bool)
    def set_active(self, on: bool) -> None:
        if on == self.active:
            return
        if self.action.isChecked() != on:
            self.action.setChecked(on)  # toggled again: returns at the check above
        w = self.window
        if on:
            w.show_workspace()
            self._saved_state = w.saveState()
            self._saved_size = (w.width(), w.height())
            keep = {self.teaching.dock, *self.lesson_docks()}
            for dock in w.findChildren(QDockWidget):
                if dock not in keep:
                    dock.hide()
            for tb in w.findChildren(QToolBar):
                tb.hide()
            # The middle keeps the graph and the loop nest.
            self._hidden_tabs = []
            for i in range(w.tabs.count()):
                if w.tabs.widget(i) not in (w.graph, w.loop_view) and w.tabs.isTabVisible(i):
                    w.tabs.setTabVisible(i, False)
                    self._hidden_tabs.append(i)
            for dock in self.lesson_docks():
                dock.show()  # the lesson beside the graph, even when its tab was behind another
            w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.teaching.dock)
            self.teaching.dock.show()
            self.teaching.dock.raise_()
            # Offscreen (screenshots, tests) has no real screen to fit: the projector's size.
            offscreen = QGuiApplication.platformName() == "offscreen"
            screen = w.screen().availableGeometry() if w.screen() is not None and not offscreen else None
            size = (min(PROJECTOR[0], screen.width()), min(PROJECTOR[1], screen.height())) if screen else PROJECTOR
            if w.width() > size[0] or w.height() > size[1]:
                w.resize(*size)
            w.resizeDocks([self.teaching.dock], [w.width() * 55 // 100], Qt.Orientation.Horizontal)
            self.teaching.panel.animation.setFocus()
        else:
            for i in self._hidden_tabs:
                w.tabs.setTabVisible(i, True)
            self._hidden_tabs = []
            if self._saved_state is not None:
                w.restoreState(self._saved_state)
            if self._saved_size is not None:
                w.resize(*self._saved_size)
        self.active = on
        for sc in self.keys:
            sc.setEnabled(on)
        w.statusBar().showMessage(
            "Presentation mode: Right/Left step, Space plays, PageDown/PageUp go through a lesson; F5 leaves" if on else "", 6000
        )

    def lesson_docks(self) -> list[QDockWidget]:
        return [d for d in self.window.findChildren(QDockWidget) if "lesson" in d.objectName().lower()]

    def lesson_step(self, delta: int) -> bool:
        """The lesson panel's next (delta 1) or previous step; False when no lesson panel offers one."""
        name = LESSON_NEXT if delta > 0 else LESSON_PREVIOUS
        for dock in self.lesson_docks():
            for obj in [dock.widget(), *dock.findChildren(QWidget)]:
                fn: Any = getattr(obj, name, None)
                if callable(fn):
                    fn()
                    return True
        return False


def _action(window: QWidget, text: str, slot: Any, keys: list[str]) -> QAction:
    a = QAction(text, window)
    a.setShortcuts([QKeySequence(k) for k in keys])
    a.triggered.connect(lambda _=False: slot())
    window.addAction(a)
    return a
