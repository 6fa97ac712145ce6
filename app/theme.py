"""Light and dark looks: follow the system colour scheme, or force one (View → Theme).

A forced theme uses the Fusion style with an explicit palette, because native styles
(Windows, macOS) ignore a dark palette for many controls. Widgets that cache colours
(the graph's background, the pyqtgraph charts, code views) restyle on PaletteChange.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMenu, QStyleFactory, QWidget

THEME_KEY = "theme"
THEMES = {"system": "&System", "light": "&Light", "dark": "&Dark"}


def dark_palette() -> QPalette:
    """A neutral dark palette; disabled text and links stay legible on the dark base."""
    pal = QPalette()
    role, group = QPalette.ColorRole, QPalette.ColorGroup
    for r, c in (
        (role.Window, "#2b2d31"),
        (role.WindowText, "#e6e6e6"),
        (role.Base, "#1e1f22"),
        (role.AlternateBase, "#27292d"),
        (role.ToolTipBase, "#3a3d42"),
        (role.ToolTipText, "#f0f0f0"),
        (role.PlaceholderText, "#8b9098"),
        (role.Text, "#e6e6e6"),
        (role.Button, "#35373c"),
        (role.ButtonText, "#e6e6e6"),
        (role.BrightText, "#ff6b6b"),
        (role.Light, "#4a4d53"),
        (role.Midlight, "#3d4045"),
        (role.Mid, "#2f3136"),
        (role.Dark, "#1a1b1e"),
        (role.Shadow, "#000000"),
        (role.Highlight, "#3d6fb8"),
        (role.HighlightedText, "#ffffff"),
        (role.Link, "#7aa7ff"),
        (role.LinkVisited, "#b48cff"),
    ):
        pal.setColor(r, QColor(c))
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(group.Disabled, r, QColor("#6f737a"))
    return pal


_NATIVE: tuple[str, QPalette] | None = None


def _native_look(app: QApplication) -> tuple[str, QPalette]:
    """The style and palette the app started with (before any window forced a theme),
    restored for "system" after a forced theme."""
    global _NATIVE  # noqa: PLW0603  # one per process, like the QApplication it describes
    if _NATIVE is None:
        _NATIVE = app.style().name(), QPalette(app.palette())
    return _NATIVE


def restore_native(app: QApplication) -> None:
    """Put back the look the app started with (tests, after forcing a theme)."""
    if _NATIVE is not None:
        app.setStyle(_NATIVE[0])
        app.setPalette(_NATIVE[1])


def is_dark(pal: QPalette) -> bool:
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


class ThemeController(QObject):
    """Owns the View → Theme menu and the remembered choice; applies it to the QApplication."""

    theme_changed = Signal(str)  # "light" or "dark": the look now in effect

    def __init__(self, parent: QWidget, settings: tuple[str, str]) -> None:
        super().__init__(parent)
        self.settings = settings
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        self.app = app
        self._native_style, self._native_palette = _native_look(app)
        saved = QSettings(*settings).value(THEME_KEY, "system")
        self.mode = saved if saved in THEMES else "system"
        self.menu = QMenu("&Theme", parent)
        group = QActionGroup(self)
        self.actions: dict[str, QAction] = {}
        for key, text in THEMES.items():
            a = self.menu.addAction(text)
            a.setCheckable(True)
            a.setChecked(key == self.mode)
            a.triggered.connect(lambda _checked=False, key=key: self.set_mode(key))
            group.addAction(a)
            self.actions[key] = a
        self.actions["system"].setStatusTip("Follow the system's light or dark colour scheme")
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_scheme_changed)
        self.apply()

    @property
    def effective(self) -> str:
        """The look in effect: 'light' or 'dark' (System resolved through the style hints)."""
        if self.mode != "system":
            return self.mode
        return "dark" if QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark else "light"

    def set_mode(self, mode: str, remember: bool = True) -> None:
        """Choose System, Light or Dark; remembered for the next start unless told not to."""
        if mode not in THEMES:
            raise ValueError(f"unknown theme {mode!r}")
        self.mode = mode
        self.actions[mode].setChecked(True)
        if remember:
            QSettings(*self.settings).setValue(THEME_KEY, mode)
        self.apply()

    def _on_scheme_changed(self, _scheme: object = None) -> None:
        if self.mode == "system":
            self.apply()

    def apply(self) -> None:
        look = self.effective
        if look == "dark":
            self._use("Fusion", dark_palette())
        elif self.mode == "light" or is_dark(self._native_palette):
            # Forced light, or a system palette that is dark while the scheme says light.
            fusion = QStyleFactory.create("Fusion")
            self._use("Fusion", fusion.standardPalette())
        else:
            self._use(self._native_style, self._native_palette)
        # pyqtgraph's own defaults, for plots made after this (the charts restyle themselves).
        pal = self.app.palette()
        pg.setConfigOption("background", pal.color(QPalette.ColorRole.Base))
        pg.setConfigOption("foreground", pal.color(QPalette.ColorRole.Text))
        self.theme_changed.emit(look)

    def _use(self, style: str, palette: QPalette) -> None:
        if self.app.style().name().lower() != style.lower():
            self.app.setStyle(style)
        # Only on a change: an app palette once set no longer follows the platform's by itself.
        if self.app.palette() != palette:
            self.app.setPalette(palette)
