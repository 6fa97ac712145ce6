"""Opening ONNX models in the window (import report, errors, drag and drop) and the theme setting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.main_window import SETTINGS_APP, SETTINGS_ORG, MainWindow
from app.theme import THEME_KEY, is_dark, restore_native

ROOT = Path(__file__).resolve().parents[2]
SMALL_CNN = ROOT / "resources" / "models" / "small_cnn.onnx"


@pytest.fixture(autouse=True)
def _weights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Imported weights go to a throwaway cache, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every QMessageBox.warning text, instead of a modal that would block the test."""
    seen: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text, *_a: seen.append(text))
    return seen


@pytest.fixture
def themed() -> Iterator[None]:
    """Put the app back on the system theme afterwards, for the tests that follow."""
    yield
    QSettings(SETTINGS_ORG, SETTINGS_APP).remove(THEME_KEY)
    restore_native(QApplication.instance())


def test_opening_an_onnx_model_shows_its_import_report(open_window, warnings: list[str]) -> None:
    w: MainWindow = open_window("blur")
    assert w.open_pipeline(str(SMALL_CNN))
    assert not warnings
    assert w.doc.is_model and w.doc.pipeline is not None
    report = w.import_report.report
    assert report is not None and w.import_report.path == SMALL_CNN
    assert len(w.doc.pipeline.stages) == report.stages > 1
    assert report.ops_mapped.get("Conv", 0) >= 1
    folded = [s for s in report.simplifications if "BatchNormalization" in s and "folded" in s]
    assert folded
    text = w.import_report.toPlainText()
    assert "Operators mapped" in text and "Conv" in text and folded[0] in text
    assert report.inputs[0]["name"] in text and report.outputs[0]["name"] in text
    assert w.import_report_dock.isVisible()
    # Imported models: default and heuristic, heuristic picked.
    combo = w.chrome.schedule_combo
    assert [combo.itemData(i) for i in range(combo.count())] == ["default", "heuristic"]
    assert w.doc.schedule_spec == "heuristic" and combo.currentData() == "heuristic"
    assert not w.chrome.size_combo.isEnabled()
    # The report stays reachable from the View menu after the dock is closed.
    w.import_report_dock.close()
    assert w.import_report_dock.toggleViewAction() in w.chrome.view_menu.actions()
    w.import_report_dock.toggleViewAction().trigger()
    assert w.import_report_dock.isVisible()


def test_a_truncated_model_is_refused_and_the_document_kept(open_window, warnings: list[str], tmp_path: Path) -> None:
    w: MainWindow = open_window("blur")
    before = w.doc.pipeline_spec, w.doc.schedule_hash, w.windowTitle()
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(SMALL_CNN.read_bytes()[:100])
    assert not w.open_pipeline(str(bad))
    assert len(warnings) == 1 and "broken.onnx" in warnings[0]
    assert (w.doc.pipeline_spec, w.doc.schedule_hash, w.windowTitle()) == before
    assert w.import_report.report is None


def test_dropping_an_onnx_model_opens_it(open_window, warnings: list[str]) -> None:
    w: MainWindow = open_window("blur")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(SMALL_CNN))])
    center = w.rect().center()
    enter = QDragEnterEvent(center, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    w.dragEnterEvent(enter)
    assert enter.isAccepted()
    w.dropEvent(QDropEvent(QPointF(center), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))
    assert w.doc.pipeline_spec == str(SMALL_CNN) and not warnings


def test_dark_theme_changes_the_palette_and_is_remembered(qtbot: QtBot, open_window, themed: None) -> None:
    w: MainWindow = open_window("blur")
    w.theme.set_mode("light")
    assert not is_dark(QApplication.palette())
    w.theme.actions["dark"].trigger()
    assert w.theme.mode == "dark"
    window_colour = QApplication.palette().color(QPalette.ColorRole.Window)
    assert is_dark(QApplication.palette())
    # Widgets hear of an application palette change through posted events.
    qtbot.waitUntil(lambda: w.palette().color(QPalette.ColorRole.Window) == window_colour)
    # The views that cache colours follow: graph background and chart background.
    assert w.graph.view.backgroundBrush().color() == QApplication.palette().color(QPalette.ColorRole.Base)
    assert QSettings(SETTINGS_ORG, SETTINGS_APP).value(THEME_KEY) == "dark"
    again: MainWindow = open_window("blur")
    assert again.theme.mode == "dark" and again.theme.actions["dark"].isChecked()
    w.theme.set_mode("system")
    assert QSettings(SETTINGS_ORG, SETTINGS_APP).value(THEME_KEY) == "system"
