"""Model import off the GUI thread (issue 20 item 7) and the peers on screen (item 12): the
window's event loop keeps running while a model imports, Cancel keeps the document that
was open, and an imported sample model's first measurement times ONNX Runtime and PyTorch
in the same run, verified, with their versions and the ratio."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.model_import import ImportOutcome

ROOT = Path(__file__).resolve().parents[2]
SMALL_CNN = ROOT / "resources" / "models" / "small_cnn.onnx"
MEASURE_TIMEOUT_MS = 180_000


@pytest.fixture(autouse=True)
def _weights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Imported weights go to a throwaway cache, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_import_runs_off_the_gui_thread_and_cancel_keeps_the_document(open_window) -> None:
    w: MainWindow = open_window("blur", "hand")
    before = w.doc.pipeline_spec, w.doc.schedule_hash, w.windowTitle()
    w.importer.progress.connect(w.importer.cancel)  # Cancel as soon as the import has started
    assert not w.open_pipeline(str(SMALL_CNN))
    assert (w.doc.pipeline_spec, w.doc.schedule_hash, w.windowTitle()) == before
    assert "cancelled" in w.statusBar().currentMessage() and w.import_report.report is None
    w.importer.progress.disconnect(w.importer.cancel)
    ticks: list[int] = []
    timer = QTimer()
    timer.setInterval(1)
    timer.timeout.connect(lambda: ticks.append(1))  # runs only while the GUI thread's event loop does
    outcomes: list[ImportOutcome] = []
    w.importer.finished.connect(outcomes.append)
    timer.start()
    assert w.open_pipeline(str(SMALL_CNN))
    timer.stop()
    assert ticks, "the GUI thread's event loop did not run during the import"
    assert outcomes[-1].model is not None and outcomes[-1].model.thread != threading.main_thread().name
    assert w.doc.is_model and w.doc.schedule_spec == "heuristic" and w.import_report.report is not None
    assert w.open_pipeline("blur")  # the model's report does not stay beside another pipeline
    assert w.import_report.report is None and not w.import_report_dock.isVisible()


def test_peers_are_measured_beside_the_model_and_shown(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur", "hand")
    assert w.open_pipeline(str(SMALL_CNN))
    req = w.start_measurement()  # an imported model's first measurement brings its peers
    assert req is not None and req.peers
    qtbot.waitUntil(lambda: w.history.peers_of is not None, timeout=MEASURE_TIMEOUT_MS)
    m = w.history.peers_of
    assert m is not None and m.median_ms is not None
    assert m.ok and m.verified and not m.cached and m.schedule_hash == w.doc.schedule_hash  # the same run, fresh
    peers = {t.peer: t for t in w.history.peers}
    assert set(peers) == {"onnxruntime", "pytorch"}
    for t in peers.values():
        assert t.ok and t.verified and t.version and t.median_ms is not None and t.median_ms > 0, t
    text = w.performance.values["Peers"].text()
    for t, name in ((peers["onnxruntime"], "ONNX Runtime"), (peers["pytorch"], "PyTorch")):
        assert t.median_ms is not None
        ratio = t.median_ms / m.median_ms
        assert f"{name} {t.version.split()[-1]}: {t.median_ms:.4g} ms (verified)" in text
        assert f"schedule {ratio:.2f}× {'faster' if ratio >= 1 else 'slower'}" in text
    assert f"(same run as {m.median_ms:.4g} ms)" in text
