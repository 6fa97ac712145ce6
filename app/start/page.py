"""The start page: what the app shows when it starts without a pipeline named. A gallery
of the built-in pipelines, recent projects, the sample ONNX models and Open buttons;
choosing one opens it in the workspace. The page and the workspace share the central
QStackedWidget; while the page shows, the docks and the toolbar are hidden and the
workspace's layout is kept aside, so the remembered layout is never the page's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QEvent, QObject, QPoint, Qt, Signal, Slot
from PySide6.QtGui import QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from engine import zoo

from ..about import format_flop
from .items import (
    BODY_ROLE,
    ELIDE_ROLE,
    KEY_ROLE,
    LINES_ROLE,
    NOTE_ROLE,
    OPEN_ROLE,
    TITLE_ROLE,
    WARN_ROLE,
    Gallery,
    RowDelegate,
    file_size_text,
    fit_rows,
    sample_models,
)

if TYPE_CHECKING:
    from PySide6.QtWidgets import QDockWidget, QToolBar

    from ..main_window import MainWindow

MUTED = "color: palette(placeholder-text)"


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.1)
    label.setFont(font)
    return label


def _muted(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet(MUTED)
    label.setWordWrap(True)
    return label


def _on_choice(lw: QListWidget, choose: Callable[[QListWidgetItem], None]) -> None:
    """A click, or Enter on the current row, chooses it. Not itemActivated: where the style
    activates on a single click it would come with the click and open a model twice."""
    lw.itemClicked.connect(choose)

    def choose_current() -> None:
        item = lw.currentItem()
        if item is not None:
            choose(item)

    for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
        _shortcut(key, lw, choose_current, Qt.ShortcutContext.WidgetShortcut)


def _shortcut(key: Qt.Key, parent: QWidget, slot: Callable[[], object], context: Qt.ShortcutContext) -> QShortcut:
    sc = QShortcut(QKeySequence(key), parent)
    sc.setContext(context)  # not a constructor keyword: PySide6 would quietly leave it window-wide
    sc.activated.connect(slot)
    return sc


def _saved_when(path: Path) -> str:
    """When a project was last saved, short: the time today, else the date."""
    when = datetime.fromtimestamp(path.stat().st_mtime)
    return when.strftime("%H:%M") if when.date() == datetime.now().date() else when.strftime("%d %b %Y")


def _home_short(path: Path) -> str:
    """A folder with the home directory written as ~ (shorter, and the part that matters)."""
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class StartPage(QWidget):
    """The page itself: lists and buttons that say what the user picked (the controller acts)."""

    pipeline_chosen = Signal(str, str)  # zoo name, size
    project_chosen = Signal(str)  # path (it may be missing)
    model_chosen = Signal(str)  # path
    forget_project = Signal(str)  # remove a path from the recent list
    open_file_clicked = Signal()
    open_project_clicked = Signal()
    continue_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("start_page")
        self.setAutoFillBackground(True)
        self.open_spec: tuple[str, str] | None = None  # the zoo pipeline open in the workspace, and its size
        style = self.style()
        title = QLabel("Schedule Explorer")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.8)
        font.setBold(True)
        title.setFont(font)
        subtitle = _muted(
            "Pick a pipeline to see its graph and loop nest, change its schedule and measure what each change does — "
            "or pick up a saved project."
        )
        self.open_file_button = self._button("Open File…", style.standardIcon(QStyle.StandardPixmap.SP_DialogOpenButton))
        self.open_file_button.setToolTip("Open a project (.sxproj), an ONNX model (.onnx, imported) or a pipeline JSON (Ctrl+O)")
        self.open_file_button.clicked.connect(self.open_file_clicked)
        self.open_project_button = self._button("Open Project…", style.standardIcon(QStyle.StandardPixmap.SP_DirOpenIcon))
        self.open_project_button.setToolTip("Open a saved Schedule Explorer project (Ctrl+Shift+O)")
        self.open_project_button.clicked.connect(self.open_project_clicked)
        self.continue_button = self._button("Continue", style.standardIcon(QStyle.StandardPixmap.SP_ArrowForward))
        self.continue_button.clicked.connect(self.continue_clicked)
        # Esc leaves the page for the workspace, wherever the focus is on it.
        _shortcut(Qt.Key.Key_Escape, self, self.continue_button.click, Qt.ShortcutContext.WidgetWithChildrenShortcut)
        buttons = QHBoxLayout()
        for b in (self.open_file_button, self.open_project_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.continue_button)

        self.size_combo = QComboBox()
        self.size_combo.setObjectName("start_size_combo")
        self.size_combo.addItems(list(zoo.SIZES))
        self.size_combo.setToolTip("Open built-in pipelines at the small test size or the realistic full size")
        self.size_combo.currentTextChanged.connect(self._fill_gallery)
        self.gallery = Gallery()
        self.gallery.setObjectName("start_gallery")
        self.gallery.setToolTip("Built-in pipelines: click a card (or press Enter) to open it in the workspace")
        _on_choice(self.gallery, self._on_card)
        gallery_head = QHBoxLayout()
        gallery_head.addWidget(_heading("Built-in pipelines"))
        gallery_head.addStretch(1)
        size_label = QLabel("Size:")
        size_label.setToolTip(self.size_combo.toolTip())
        gallery_head.addWidget(size_label)
        gallery_head.addWidget(self.size_combo)
        left = QVBoxLayout()
        left.setSpacing(2)  # set, or nested layouts take the 24 px between the two columns
        gallery_head.setSpacing(6)
        left.addLayout(gallery_head)
        left.addWidget(self.gallery, 1)

        self.recent = self._list("start_recent", "Recent projects and models: click one to open it; right-click to remove it from the list")
        _on_choice(self.recent, lambda item: self.project_chosen.emit(item.data(KEY_ROLE)))
        self.recent.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.recent.customContextMenuRequested.connect(self._recent_menu)
        self.no_recent = _muted(
            "Nothing opened yet. Models you open and projects you save are listed here "
            "(File → Save Project As…, Ctrl+Shift+S, keeps a session as a project)."
        )
        self.models = self._list("start_models", "Sample ONNX models from resources/models: click one to import and open it")
        _on_choice(self.models, lambda item: self.model_chosen.emit(item.data(KEY_ROLE)))
        self._fill_models()
        right = QVBoxLayout()
        right.setSpacing(6)
        right.addWidget(_heading("Recent files"))
        right.addWidget(self.recent)
        right.addWidget(self.no_recent)
        right.addSpacing(14)
        right.addWidget(_heading("Sample ONNX models"))
        right.addWidget(self.models)
        right.addWidget(_muted("Imported on open (ONNX → pipeline) and shown with the rule-based heuristic schedule."))
        right.addStretch(1)
        right_box = QWidget()
        right_box.setLayout(right)
        right_box.setMinimumWidth(240)  # narrower on a small screen, never wider than its lists need
        right_box.setMaximumWidth(340)
        right.setContentsMargins(0, 0, 0, 0)

        body = QHBoxLayout()
        body.setSpacing(24)
        body.addLayout(left, 1)
        body.addWidget(right_box)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(28, 20, 28, 16)
        lay.addWidget(title)
        lay.addWidget(subtitle)
        lay.addSpacing(6)
        lay.addLayout(buttons)
        lay.addSpacing(10)
        lay.addLayout(body, 1)

    def _button(self, text: str, icon: QIcon) -> QPushButton:
        b = QPushButton(icon, text)
        b.setMinimumHeight(30)
        return b

    def _list(self, name: str, tip: str) -> QListWidget:
        lw = QListWidget()
        lw.setObjectName(name)
        lw.setItemDelegate(RowDelegate(lw))
        lw.setToolTip(tip)
        lw.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lw.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        return lw

    # --- filling ----------------------------------------------------------------------
    def refresh(self, size: str, open_spec: tuple[str, str] | None, continue_text: str | None, recent: list[str]) -> None:
        """Show the current state: the size to open at, what is open, the recent projects."""
        self.open_spec = open_spec
        self.size_combo.blockSignals(True)
        self.size_combo.setCurrentText(size)
        self.size_combo.blockSignals(False)
        self._fill_gallery()
        self.continue_button.setEnabled(continue_text is not None)
        self.continue_button.setText(f"Continue with {continue_text}" if continue_text else "Continue")
        idle = "Nothing is open yet: pick a pipeline, a project or a model"
        self.continue_button.setToolTip(f"Back to the workspace: {continue_text} (Esc)" if continue_text else idle)
        self._fill_recent(recent)

    @Slot()
    def _fill_gallery(self) -> None:
        size = self.size_combo.currentText()
        self.gallery.clear()
        current = None
        for name in zoo.names():
            p = zoo.get(name, size)
            n = len(p.stages)
            item = QListWidgetItem()
            item.setData(KEY_ROLE, name)
            item.setData(TITLE_ROLE, name)
            item.setData(NOTE_ROLE, f"{n} stage{'s' if n != 1 else ''} · {format_flop(p.flops())}")
            item.setData(BODY_ROLE, p.description)
            is_open = self.open_spec == (name, size)
            item.setData(OPEN_ROLE, is_open)
            state = " — open in the workspace" if is_open else ""
            item.setToolTip(f"<b>{name}</b> ({size} size{state})<br>{p.description}<br>{n} stages, {format_flop(p.flops())}")
            self.gallery.addItem(item)
            if is_open:
                current = item
        # The open pipeline starts selected, so Enter (or Esc) takes the user back to it.
        self.gallery.setCurrentItem(current or self.gallery.item(0))

    def _fill_recent(self, paths: list[str]) -> None:
        self.recent.clear()
        file_icon = self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        warn_icon = self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        for path in paths:
            p = Path(path)
            missing = not p.is_file()
            item = QListWidgetItem()
            item.setData(KEY_ROLE, path)
            item.setData(TITLE_ROLE, p.name)
            item.setData(NOTE_ROLE, "file not found" if missing else _saved_when(p))
            item.setData(BODY_ROLE, _home_short(p.parent))
            item.setData(ELIDE_ROLE, Qt.TextElideMode.ElideMiddle)
            item.setData(WARN_ROLE, missing)
            item.setIcon(warn_icon if missing else file_icon)
            item.setToolTip(f"{path}<br><i>not found: moved or deleted? Right-click to remove it</i>" if missing else path)
            self.recent.addItem(item)
        self.recent.setVisible(bool(paths))
        self.no_recent.setVisible(not paths)
        fit_rows(self.recent)

    def _fill_models(self) -> None:
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_FileDialogDetailedView)
        for m in sample_models():
            item = QListWidgetItem()
            item.setData(KEY_ROLE, str(m.path))
            item.setData(TITLE_ROLE, m.path.name)
            item.setData(NOTE_ROLE, file_size_text(m.path))
            item.setData(BODY_ROLE, m.description)
            item.setData(LINES_ROLE, 2)
            item.setIcon(icon)
            shape = f"<br>input {'×'.join(map(str, m.input_shape))}" if m.input_shape else ""
            item.setToolTip(f"<b>{m.path.name}</b><br>{m.description}{shape}<br>{m.path}")
            self.models.addItem(item)
        fit_rows(self.models)

    # --- choosing ---------------------------------------------------------------------
    @Slot(QListWidgetItem)
    def _on_card(self, item: QListWidgetItem) -> None:
        self.pipeline_chosen.emit(item.data(KEY_ROLE), self.size_combo.currentText())

    def card_for(self, name: str) -> QListWidgetItem | None:
        return next((self.gallery.item(k) for k in range(self.gallery.count()) if self.gallery.item(k).data(KEY_ROLE) == name), None)

    @Slot(QPoint)
    def _recent_menu(self, pos: QPoint) -> None:
        item = self.recent.itemAt(pos)
        if item is None:
            return
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.project_chosen.emit(item.data(KEY_ROLE)))
        menu.addAction("Remove from Recent Projects", lambda: self.forget_project.emit(item.data(KEY_ROLE)))
        menu.exec(self.recent.viewport().mapToGlobal(pos))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  # Qt override
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed: redraw the cards' pictures
            self.gallery.cards.clear_pictures()
            self.gallery.viewport().update()


class StartPageController(QObject):
    """Switches the window between the start page and the workspace, and opens what the
    page's user picked through the window's own open paths (unsaved-changes question included)."""

    def __init__(self, w: MainWindow, stack: QStackedWidget, layout_version: int) -> None:
        super().__init__(w)
        self.w = w
        self.stack = stack  # index 0: the workspace's tabs
        self.version = layout_version
        self.page = StartPage()
        # In a scroll area: on a small screen the page scrolls instead of setting the window's minimum size.
        self.scroll_area = QScrollArea()
        self.scroll_area.setObjectName("start_scroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidget(self.page)
        stack.addWidget(self.scroll_area)
        self._workspace_state: QByteArray | None = None  # the layout to go back to; None while the workspace shows
        self.page.pipeline_chosen.connect(self.open_builtin)
        self.page.project_chosen.connect(self.open_recent)
        self.page.model_chosen.connect(lambda path: self.w.open_file(Path(path)))
        self.page.forget_project.connect(self._forget)
        self.page.open_file_clicked.connect(w.open_pipeline_dialog)
        self.page.open_project_clicked.connect(w.projects.open_dialog)
        self.page.continue_clicked.connect(self.show_workspace)
        w.projects.recent_changed.connect(self._refresh)
        # Whatever opened a new pipeline (the page, a menu, a drop), the user wants to see it.
        w.doc.pipeline_changed.connect(self.show_workspace)

    @property
    def showing(self) -> bool:
        return self._workspace_state is not None

    def layout_state(self) -> QByteArray:
        """The workspace's layout, also while the page hides it (what closing remembers)."""
        return self._workspace_state if self._workspace_state is not None else self.w.saveState(self.version)

    def _bars(self) -> list[QDockWidget | QToolBar]:
        """What the page hides: the docks and the toolbar."""
        return [*self.w.docks(), self.w.chrome.toolbar]

    def show_page(self) -> None:
        w = self.w
        self._refresh()
        if self.showing:
            return
        self._workspace_state = w.saveState(self.version)
        for bar in self._bars():
            bar.hide()
            bar.toggleViewAction().setEnabled(False)  # View → a dock would show it over the page
        self.stack.setCurrentWidget(self.scroll_area)
        self.page.gallery.setFocus()
        w.update_title()

    @Slot()
    def show_workspace(self) -> None:
        if self._workspace_state is None:
            return
        w = self.w
        state, self._workspace_state = self._workspace_state, None
        self.stack.setCurrentIndex(0)
        w.restoreState(state, self.version)
        for bar in self._bars():
            bar.toggleViewAction().setEnabled(True)
        w.update_title()

    @Slot()
    def _refresh(self) -> None:
        w, doc = self.w, self.w.doc
        open_spec = (doc.pipeline_spec, doc.size) if doc.pipeline is not None and doc.is_builtin else None
        self.page.refresh(w.pipeline_size, open_spec, doc.title or None, w.projects.recent())

    # --- opening ----------------------------------------------------------------------
    @Slot(str, str)
    def open_builtin(self, name: str, size: str) -> bool:
        """Open a zoo pipeline at `size`; the one already open (same size) is just shown again."""
        w, doc = self.w, self.w.doc
        if doc.pipeline is not None and doc.pipeline_spec == name and doc.size == size:
            self.show_workspace()
            return True
        if not w.projects.maybe_save():
            return False
        before = w.pipeline_size
        w.use_size(size)
        if not w.open_pipeline(name):
            w.use_size(before)
            return False
        return True

    @Slot(str)
    def open_recent(self, path: str) -> bool:
        if not Path(path).is_file():
            self.w.statusBar().showMessage(f"{path} was not found (moved or deleted?); right-click it to remove it from the list", 8000)
            return False
        return self.w.open_file(Path(path))  # a project or a model

    @Slot(str)
    def _forget(self, path: str) -> None:
        self.w.projects.forget_recent(path)
