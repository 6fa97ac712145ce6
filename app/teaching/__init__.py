"""Teaching mode (issue 18): the Teaching dock (the iteration-order animation and the
footprint view, tabbed), keyboard editing in the loop-nest view and presentation mode,
installed into the main window by `install(window)` with a few lines there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import QDockWidget, QTabWidget

from .animation import AnimationView
from .footprint_view import FootprintView

STATUS_MS = 8000

if TYPE_CHECKING:
    from ..main_window import MainWindow
    from .presentation import Presentation


class TeachingPanel(QTabWidget):
    """The animation and the footprint view of one stage, as tabs."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("teaching_tabs")
        self.setDocumentMode(True)
        self.animation = AnimationView()
        self.footprint = FootprintView()
        self.addTab(self.animation, "Animation")
        self.addTab(self.footprint, "Footprint")


class Teaching(QObject):
    """What `install` adds: the dock, its panel, presentation mode; it follows the
    document and the selected stage (traced only while the dock is visible)."""

    def __init__(self, window: MainWindow, settings: tuple[str, str]) -> None:
        super().__init__(window)
        from .presentation import Presentation  # noqa: PLC0415  # it imports this package's names

        self.window = window
        self.panel = TeachingPanel()
        self.stage: str | None = None
        self.dock = QDockWidget("Teaching", window)
        self.dock.setObjectName("teaching_dock")
        self.dock.setWidget(self.panel)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.search_dock, self.dock)
        window.measurement_dock.raise_()
        self.dock.visibilityChanged.connect(self._on_visible)
        self.panel.currentChanged.connect(lambda _i: self.refresh())
        window.doc.changed.connect(self.refresh)
        # The loop-nest view edits with single keys (item 3), through the same undo stack.
        window.loop_view.attach(window.doc, window.undo_stack)
        window.loop_view.edit_rejected.connect(self._on_rejected)
        self.presentation: Presentation = Presentation(window, self, settings)

    @Slot(str)
    def _on_rejected(self, message: str) -> None:
        """A refused key edit is said under the loop nest and in the status bar, as the editor's are."""
        self.window.statusBar().showMessage(f"Not applied: {message}", STATUS_MS)

    def set_stage(self, stage: str | None) -> None:
        """The stage selected in the app (called from MainWindow.select_stage)."""
        self.stage = stage
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        if not self.dock.isVisible():
            return  # traced when shown: a hidden dock costs nothing per edit
        doc = self.window.doc
        if self.panel.currentWidget() is self.panel.footprint:
            self.panel.footprint.set_target(doc.pipeline, doc.schedule, self.stage)
        else:
            self.panel.animation.set_target(doc.pipeline, doc.schedule, self.stage)

    @Slot(bool)
    def _on_visible(self, visible: bool) -> None:
        if visible:
            self.refresh()

    def show_stage(self, stage: str, tab: str = "animation", wait: bool = False) -> bool:
        """Select `stage`, show the dock on `tab` ("animation" or "footprint"); `wait`: traced
        before returning (screenshots). False if the pipeline has no such stage."""
        doc = self.window.doc
        if doc.pipeline is None or stage not in doc.pipeline.stage_map:
            return False
        self.window.show_workspace()
        self.dock.show()
        self.dock.raise_()
        self.panel.setCurrentWidget(self.panel.footprint if tab == "footprint" else self.panel.animation)
        self.window.select_stage(stage)
        self.set_stage(stage)
        if wait and tab != "footprint":
            self.panel.animation.trace_now()
        return True

    def shutdown(self) -> None:
        self.panel.animation.shutdown()
