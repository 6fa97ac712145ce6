"""Tools → Cluster…: where the app's searches measure, and what the cluster's nodes are.

The dialog takes a cluster spec as the CLI's `--cluster` does (local, ray, ray://HOST:PORT,
HOST:PORT; checked by engine.cluster.parse_cluster, a bad one refused with the reason next
to the field) and lists the nodes measurements would run on: address, alive, CPUs, load
(1-minute load average per core), host kind and Halide target. Asking a Ray cluster takes
seconds (connecting, a probe task per node), so it runs on a `Background` thread. OK keeps
the spec in the settings and gives it to the search service: the next search started from
the app measures there (app/search/worker.py).
"""

from __future__ import annotations

from PySide6.QtCore import QSettings
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.cluster import CLUSTER_HELP, ClusterError, NodeInfo, describe, parse_cluster

from .background import Background, Outcome
from .search.worker import SearchService

SETTINGS_KEY = "cluster/spec"
COLUMNS = ("node", "address", "alive", "CPUs", "load", "host kind", "Halide target")


def node_row(n: NodeInfo) -> list[str]:
    """The table's cells for one node."""
    load = "-" if n.load is None else f"{n.load:.2f}"
    return [n.node_id[:12], n.address, "yes" if n.alive else "no", f"{n.cpus:g}", load, n.host or n.error or "-", n.target or "-"]


class ClusterDialog(QDialog):
    """The cluster setting and its nodes; `spec()` is the accepted text."""

    def __init__(self, spec: str = "local", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Cluster")
        self.edit = QLineEdit(spec)
        self.edit.setToolTip(CLUSTER_HELP)
        self.refresh_button = QPushButton("Show nodes")
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        row = QHBoxLayout()
        row.addWidget(QLabel("Measure on:"))
        row.addWidget(self.edit, 1)
        row.addWidget(self.refresh_button)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("local (this machine), ray (a Ray instance of its own), ray://HOST:PORT or HOST:PORT (a running cluster)"))
        lay.addLayout(row)
        lay.addWidget(self.message)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.buttons)
        self.resize(860, 320)
        self._background = Background("cluster", latest_only=True, parent=self)
        self.refresh_button.clicked.connect(self.refresh)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        self.finished.connect(lambda _: self._background.shutdown(1.0))
        self.refresh()

    def spec(self) -> str:
        return self.edit.text().strip() or "local"

    def _checked(self) -> str | None:
        """The spec if it parses; else None with the reason shown next to the field."""
        try:
            parse_cluster(self.spec())
        except ClusterError as exc:
            self.message.setText(f"Not a cluster: {exc}")
            return None
        return self.spec()

    def refresh(self) -> None:
        """Ask the cluster for its nodes (off the GUI thread)."""
        spec = self._checked()
        if spec is None:
            return
        self.message.setText(f"Asking {spec} for its nodes…")
        self.refresh_button.setEnabled(False)
        self._background.submit(lambda job: describe(spec), self._show)

    def _show(self, out: Outcome) -> None:
        self.refresh_button.setEnabled(True)
        if out.error is not None:
            self.table.setRowCount(0)
            self.message.setText(f"Cannot reach the cluster: {out.error}")
            return
        nodes: list[NodeInfo] = out.value
        self.table.setRowCount(len(nodes))
        for r, n in enumerate(nodes):
            for c, text in enumerate(node_row(n)):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        kinds = {(n.host, n.target) for n in nodes if n.alive and n.host and n.cpus >= 1}
        self.message.setText(
            f"{len(nodes)} node(s), {len(kinds)} host kind(s)"
            + ("; a search measures on the kind with most CPUs, never mixing kinds" if len(kinds) > 1 else "")
        )

    def _accept(self) -> None:
        if self._checked() is not None:
            self.accept()


class ClusterSetting:
    """The window's Tools → Cluster… action and the saved spec it hands to the search service."""

    def __init__(self, window: QMainWindow, service: SearchService, settings: tuple[str, str]) -> None:
        self.window, self.service, self.settings = window, service, settings
        saved = str(QSettings(*settings).value(SETTINGS_KEY, "local") or "local")
        try:
            parse_cluster(saved)
        except ClusterError:
            saved = "local"  # a setting edited by hand into nonsense: the default, not an error at every search
        self.service.cluster = saved
        self.action = QAction("&Cluster…", window)
        self.action.setStatusTip("Where searches measure: this machine or a Ray cluster; its nodes, host kinds and load")
        self.action.triggered.connect(self.open)
        window.menuBar().addMenu("&Tools").addAction(self.action)

    def open(self) -> ClusterDialog:
        dlg = ClusterDialog(self.service.cluster, self.window)
        dlg.accepted.connect(lambda: self.set(dlg.spec()))
        dlg.open()
        return dlg

    def set(self, spec: str) -> None:
        parse_cluster(spec)  # a ClusterError for a bad one, before anything is kept
        self.service.cluster = spec
        QSettings(*self.settings).setValue(SETTINGS_KEY, spec)
