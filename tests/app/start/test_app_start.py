"""The start page: shown on a plain start (blur open behind it), a card per zoo pipeline,
recent projects with missing files marked, the sample models; the workspace's layout
survives a visit to the page and a close while it shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication, QFileDialog
from pytestqt.qtbot import QtBot

import app.main as app_main
from app.main import run_app
from app.main_window import SETTINGS_APP, SETTINGS_ORG, MainWindow
from app.project_ui import RECENT_KEY
from app.start.items import BODY_ROLE, KEY_ROLE, NOTE_ROLE, OPEN_ROLE, WARN_ROLE, sample_models
from engine import zoo


def _window(qtbot: QtBot, persist_layout: bool = False) -> MainWindow:
    w = MainWindow(size="small", persist_layout=persist_layout, ask_to_save=False)
    w.set_auto_measure(False)
    qtbot.addWidget(w)
    return w


def test_plain_start_opens_the_start_page_with_blur_behind_it(qapp: QApplication, tmp_path: Path, monkeypatch) -> None:
    seen: list[tuple[str, bool, str]] = []

    class Spy(MainWindow):
        def show(self) -> None:
            seen.append((self.doc.pipeline_spec, self.start.showing, self.windowTitle()))
            super().show()

    monkeypatch.setattr(app_main, "MainWindow", Spy)
    assert run_app(["--size", "small", "--screenshot", str(tmp_path / "start.png")]) == 0
    assert len(seen) == 1 and seen[0][:2] == ("blur", True) and seen[0][2].startswith("Start Page")
    assert (tmp_path / "start.png").read_bytes().startswith(b"\x89PNG")
    assert run_app(["blur", "--size", "small", "--screenshot", str(tmp_path / "blur.png")]) == 0
    assert seen[1][:2] == ("blur", False)  # a pipeline named: straight to the workspace


def test_the_page_lists_the_zoo_and_returns_to_the_workspace(qtbot: QtBot) -> None:
    w = _window(qtbot)
    assert w.open_pipeline("blur")
    w.show()
    w.chrome.actions.start_page.trigger()
    assert w.chrome.actions.start_page.shortcut().toString() == "Ctrl+Shift+H"
    page = w.start_page
    assert w.start.showing and page.isVisible() and w.windowTitle().startswith("Start Page")
    assert not any(d.isVisible() for d in w.docks()) and not w.chrome.toolbar.isVisible()
    assert not w.stages_dock.toggleViewAction().isEnabled()  # View → a dock would cover the page
    g = page.gallery
    assert [g.item(k).data(KEY_ROLE) for k in range(g.count())] == zoo.names()
    for k in range(g.count()):
        p = zoo.get(g.item(k).data(KEY_ROLE), "small")
        assert g.item(k).data(BODY_ROLE) == p.description
        assert g.item(k).data(NOTE_ROLE).startswith(f"{len(p.stages)} stage")
        assert g.item(k).toolTip()
    assert g.currentItem().data(KEY_ROLE) == "blur" and g.currentItem().data(OPEN_ROLE)
    assert page.continue_button.isEnabled() and "blur (small)" in page.continue_button.text()
    # The size choice re-describes the cards; the open pipeline is open at small only.
    page.size_combo.setCurrentText("full")
    assert page.card_for("blur").data(BODY_ROLE) == zoo.get("blur", "full").description
    assert not page.card_for("blur").data(OPEN_ROLE)
    for widget in (page.open_file_button, page.open_project_button, page.continue_button, page.size_combo, g, page.recent, page.models):
        assert widget.toolTip(), widget.objectName()
    # Esc: back to the same document, docks and toolbar as they were.
    before = w.doc.schedule_hash
    with qtbot.waitActive(w):
        w.activateWindow()
    qtbot.keyClick(g, Qt.Key.Key_Escape)
    assert not w.start.showing and w.central.currentWidget() is w.tabs
    assert w.stages_dock.isVisible() and w.chrome.toolbar.isVisible() and w.stages_dock.toggleViewAction().isEnabled()
    assert w.doc.schedule_hash == before and w.pipeline_size == "small"
    # Enter on a card opens it.
    w.show_start_page()
    g.setCurrentItem(page.card_for("matmul"))
    qtbot.keyClick(g, Qt.Key.Key_Return)
    assert not w.start.showing and w.doc.pipeline.name == "matmul"
    w.close()


def test_recent_projects_mark_missing_files_and_open(qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _window(qtbot)
    assert w.open_pipeline("matmul", "default")
    saved = tmp_path / "mm.sxproj"
    assert w.projects.save_as(saved)
    gone = tmp_path / "gone.sxproj"
    QSettings(SETTINGS_ORG, SETTINGS_APP).setValue(RECENT_KEY, [str(saved), str(gone)])
    w.open_pipeline("blur")
    w.show_start_page()
    w.show()
    rows = w.start_page.recent
    assert [rows.item(k).data(KEY_ROLE) for k in range(rows.count())] == [str(saved), str(gone)]
    assert not rows.item(0).data(WARN_ROLE)
    assert rows.item(1).data(WARN_ROLE) and rows.item(1).data(NOTE_ROLE) == "file not found"
    assert "not found" in rows.item(1).toolTip()
    assert not w.start.open_recent(str(gone))  # stays on the page and says why
    assert w.start.showing and "was not found" in w.statusBar().currentMessage()
    w.start_page.forget_project.emit(str(gone))
    assert rows.count() == 1 and str(gone) not in w.projects.recent()
    # Open File… takes a project too.
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: (str(saved), ""))
    w.start_page.open_file_button.click()
    assert not w.start.showing and w.doc.pipeline.name == "matmul" and w.projects.path == saved
    w.close()


def test_a_sample_model_opens_with_its_import_report(qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # imported weights: a throwaway cache
    models = sample_models()
    assert {m.path.name for m in models} >= {"small_cnn.onnx", "resnet18_stage.onnx"}
    assert all(m.description for m in models)
    assert next(m for m in models if m.path.stem == "small_cnn").input_shape == (1, 3, 32, 32)
    w = _window(qtbot)
    w.show_start_page()
    w.show()
    rows = w.start_page.models
    small_cnn = next(rows.item(k) for k in range(rows.count()) if rows.item(k).data(KEY_ROLE).endswith("small_cnn.onnx"))
    qtbot.mouseClick(rows.viewport(), Qt.MouseButton.LeftButton, pos=rows.visualItemRect(small_cnn).center())
    assert not w.start.showing and w.doc.is_model and w.doc.schedule_spec == "heuristic"
    assert w.import_report_dock.isVisible()  # shown after the workspace's layout came back
    w.close()


def test_closing_on_the_start_page_remembers_the_workspace_layout(qtbot: QtBot) -> None:
    settings = QSettings(SETTINGS_ORG, SETTINGS_APP)
    try:
        first = _window(qtbot, persist_layout=True)
        first.reset_layout()
        first.show()
        first.measurement_dock.hide()
        first.show_start_page()
        first.close()  # while the page hides every dock
        second = _window(qtbot, persist_layout=True)
        second.show()
        assert second.stages_dock.isVisible() and second.chrome.toolbar.isVisible()
        assert not second.measurement_dock.isVisible()  # the user's own change is kept
        second.show_start_page()
        second.reset_layout()  # from the page: back to the workspace, docks where they started
        assert not second.start.showing and second.measurement_dock.isVisible()
        second.close()
    finally:
        settings.remove("windowState")
        settings.remove("geometry")
