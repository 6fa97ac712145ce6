"""Tools → Cluster… (app/cluster_dialog.py): the spec is checked, this machine's node is
listed with its host kind and target, the accepted spec is kept in the settings and given to
the search service, and a search started from the app measures through it (here: a Ray spec
with Ray's import blocked fails the search with the install line, so the search did try Ray)."""

from __future__ import annotations

import sys
import threading

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMainWindow

from app.background import Job
from app.cluster_dialog import SETTINGS_KEY, ClusterDialog, ClusterSetting
from app.search.worker import SearchRequest, SearchService, search_job
from engine import zoo
from engine.cluster import INSTALL_HINT, ClusterError
from engine.halide_backend import target_string
from engine.measure import host_fingerprint
from engine.search import Budget

SETTINGS = ("schedule-explorer-test", "cluster")


def test_the_dialog_lists_this_machine_and_refuses_a_bad_spec(qtbot):
    dlg = ClusterDialog("local")
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 1, timeout=30_000)
    items = [dlg.table.item(0, c) for c in range(dlg.table.columnCount())]
    cells = [item.text() if item is not None else "" for item in items]
    assert cells[0] == "local" and cells[2] == "yes" and cells[5] == host_fingerprint() and cells[6] == target_string()
    assert "1 host kind" in dlg.message.text()
    dlg.edit.setText("nope")
    dlg.buttons.accepted.emit()
    assert dlg.result() == 0 and "Not a cluster" in dlg.message.text() and "expected local, ray" in dlg.message.text()
    dlg.reject()


def test_the_setting_is_kept_and_a_search_uses_it(qtbot, monkeypatch):
    QSettings(*SETTINGS).remove(SETTINGS_KEY)
    win = QMainWindow()
    qtbot.addWidget(win)
    service = SearchService(win)
    setting = ClusterSetting(win, service, SETTINGS)
    assert service.cluster == "local"
    assert [(m.text(), [a.text() for a in m.menu().actions()]) for m in win.menuBar().actions()] == [("&Tools", ["&Cluster…"])]  # type: ignore[attr-defined]  # menu() is a QMenu
    setting.set("ray")
    assert service.cluster == "ray" and QSettings(*SETTINGS).value(SETTINGS_KEY) == "ray"
    assert ClusterSetting(QMainWindow(), SearchService(), SETTINGS).service.cluster == "ray"  # read back by a new window
    # The search thread makes its runner from the request's cluster: without Ray it fails with the install line.
    monkeypatch.setitem(sys.modules, "ray", None)
    p = zoo.get("blur", "small")
    req = SearchRequest(1, p, "random", Budget(2, 10.0), 0, cluster=service.cluster)
    with pytest.raises(ClusterError) as err:
        search_job(req, threading.Event(), Job(1, threading.Event(), lambda record: None))
    assert str(err.value) == INSTALL_HINT
    QSettings(*SETTINGS).remove(SETTINGS_KEY)
    service.shutdown()
