"""Tools → Tune Whole Model… (issue 14 item 3): `install(window)` adds the action (one line
in main_window) and opens one TuneDialog for the window's current pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMenu

from ..model.commands import ScheduleCommand
from .dialog import TuneDialog

if TYPE_CHECKING:
    from ..main_window import MainWindow


class TuningAction:
    def __init__(self, window: MainWindow) -> None:
        self.window = window
        self.dialog: TuneDialog | None = None
        self.action = QAction("Tune Whole Model…", window)
        self.action.triggered.connect(self.open)
        _tools_menu(window).addAction(self.action)

    def open(self) -> TuneDialog:
        cluster = self.window.search_panel.service.cluster
        if self.dialog is None:
            self.dialog = TuneDialog(self.window, cluster)
            self.dialog.apply_button.clicked.connect(self.apply)
        self.dialog.cluster = cluster
        self.dialog.set_pipeline(self.window.doc.pipeline)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def apply(self) -> bool:
        """The tuned schedule into the document as one undoable command (when the document
        still shows the pipeline that was tuned)."""
        d, doc = self.dialog, self.window.doc
        if d is None or d.last_result is None or doc.pipeline is None or d.pipeline is None:
            return False
        if doc.pipeline.content_hash() != d.pipeline.content_hash():
            d.status.setText("The document shows another pipeline now: open the tuned model again to apply.")
            return False
        self.window.undo_stack.push(ScheduleCommand(doc, d.last_result.schedule, "Apply tuned schedule"))
        d.status.setText("Applied: the editor shows the tuned schedule (Edit → Undo puts the previous one back).")
        return True

    def shutdown(self) -> None:
        if self.dialog is not None:
            self.dialog.shutdown()


def _tools_menu(window: QMainWindow) -> QMenu:
    """The window's Tools menu (Tools → Cluster… made it), or a new one."""
    for act in window.menuBar().actions():
        menu = act.menu()
        if isinstance(menu, QMenu) and act.text().replace("&", "") == "Tools":
            return menu
    return window.menuBar().addMenu("&Tools")


def install(window: MainWindow) -> TuningAction:
    return TuningAction(window)
