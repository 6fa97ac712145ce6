"""The desktop app: views follow the document, measurement runs off the GUI thread,
and `run_app --screenshot` works without a display. conftest.py selects Qt's offscreen
platform and a throwaway measurement database."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.main import run_app
from app.main_window import SETTINGS_APP, SETTINGS_ORG, MainWindow, about_html, versions
from engine import api, zoo

MEASURE_TIMEOUT_MS = 60_000


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    w = MainWindow(size="small", ask_to_save=False)  # closing after an edit must not wait on a question
    qtbot.addWidget(w)
    assert w.open_pipeline("blur")
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    assert not w.measure_service.running


def _click_pipeline(qtbot: QtBot, w: MainWindow, name: str) -> None:
    lw = w.pipelines.list
    item = w.pipelines.item_for(name)
    assert item is not None
    lw.scrollToItem(item)
    qtbot.mouseClick(lw.viewport(), Qt.MouseButton.LeftButton, pos=lw.visualItemRect(item).center())


def test_opens_on_blur(window: MainWindow) -> None:
    assert "produce blur_y" in window.loop_view.toPlainText()
    assert window.pipelines.current_name() == "blur"
    assert [window.stages.tree.topLevelItem(i).text(0) for i in range(window.stages.tree.topLevelItemCount())] == ["blur_x", "blur_y"]
    assert json.loads(window.schedule_view.toPlainText())["format"] == 1
    assert "blur" in window.windowTitle()
    shortcuts = {a.shortcut().toString() for a in (window.chrome.actions.open, window.chrome.actions.measure, window.chrome.actions.quit)}
    assert shortcuts == {"Ctrl+O", "Ctrl+M", "Ctrl+Q"}
    # The other views show the engine's exports of the same schedule.
    assert window.cpp_view.toPlainText() == window.doc.source("cpp")
    assert window.python_view.toPlainText() == window.doc.source("python")


def test_choosing_a_pipeline_in_the_list_updates_the_views(qtbot: QtBot, window: MainWindow) -> None:
    _click_pipeline(qtbot, window, "unsharp")
    qtbot.waitUntil(lambda: window.doc.pipeline is not None and window.doc.pipeline.name == "unsharp")
    text = window.loop_view.toPlainText()
    assert text == window.doc.loopnest_text and "produce output" in text  # other stages' placement depends on the schedule
    assert window.stages.tree.topLevelItemCount() == len(zoo.get("unsharp", "small").stages)
    assert "unsharp" in window.windowTitle()


def test_selecting_a_stage_selects_its_lines(qtbot: QtBot, window: MainWindow) -> None:
    assert window.open_pipeline("blur", "default")  # both stages at root, each with its own produce block
    tree = window.stages.tree
    for stage in ("blur_x", "blur_y"):
        item = window.stages.item_for(stage)
        qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualItemRect(item).center())
        first, last = window.doc.spans[stage]
        assert window.loop_view.selected_lines() == (first, last)
        selected = window.loop_view.textCursor().selectedText().replace("\u2029", "\n")
        assert selected.startswith(f"produce {stage}:")
    tree.clearSelection()
    assert window.loop_view.selected_lines() is None


def test_schedule_combo_switches_schedule(window: MainWindow) -> None:
    # Hand-written schedules are still being added; use a pipeline that has one, if any.
    with_hand = [n for n in zoo.names() if _has_hand(n)]
    if not with_hand:
        pytest.skip("no built-in pipeline has a hand-written schedule yet")
    name = with_hand[0]
    assert window.open_pipeline(name, "default")
    combo = window.chrome.schedule_combo
    combo.setCurrentIndex(combo.findData("hand"))
    combo.activated.emit(combo.currentIndex())
    assert window.doc.schedule_spec == "hand"
    hand = api.load_schedule(window.doc.pipeline, "hand")
    assert json.loads(window.schedule_view.toPlainText())["stages"] == hand.to_json()["stages"]
    assert window.loop_view.toPlainText() == window.doc.loopnest_text


def _has_hand(name: str) -> bool:
    try:
        api.load_schedule(zoo.get(name, "small"), "hand")
        return True
    except Exception:  # noqa: BLE001
        return False


def test_open_pipeline_json_file(tmp_path: Path, window: MainWindow) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(zoo.get("matmul", "small").to_json()))
    assert window.open_pipeline(str(path))
    assert window.doc.pipeline.name == "matmul"
    assert window.pipelines.current_name() is None  # a file has no row in the zoo list
    assert not window.chrome.size_combo.isEnabled()


def test_measure_shows_a_verified_result_without_blocking(qtbot: QtBot, window: MainWindow) -> None:
    assert window.open_pipeline("blur", "default")  # app plumbing under test, not a hand-written schedule
    seen: list[tuple[bool, bool]] = []
    window.measure_service.busy_changed.connect(lambda busy: seen.append((busy, window.chrome.actions.measure.isEnabled())))
    button = window.chrome.toolbar.widgetForAction(window.chrome.actions.measure)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert seen[:1] == [(True, False)]  # the button is disabled at once; the GUI thread is free
    assert window.chrome.progress.isVisible()
    qtbot.waitUntil(lambda: window.measurement.result is not None, timeout=MEASURE_TIMEOUT_MS)
    m = window.measurement.result
    assert m.ok and m.verified, m.error
    assert m.median_ms is not None and m.median_ms > 0
    assert "Verified" in window.measurement.verdict_text()
    assert window.measurement.values["Median"].text().endswith(" ms")
    assert window.chrome.actions.measure.isEnabled()
    assert not window.chrome.progress.isVisible()
    assert seen[-1] == (False, True)


def test_closing_while_measuring_stops_the_worker(qtbot: QtBot) -> None:
    w = MainWindow(size="small", persist_layout=False)
    qtbot.addWidget(w)
    assert w.open_pipeline("harris", "default")  # not measured elsewhere: no stored result to return at once
    w.show()
    assert w.start_measurement() is not None
    qtbot.wait(200)  # let the worker thread pick the job up
    assert w.measure_service.busy
    t0 = time.monotonic()
    w.close()  # cancels the job, closes the runner and the database in their thread, joins it
    assert not w.measure_service.running
    assert time.monotonic() - t0 < 10


def test_layout_is_remembered(qtbot: QtBot, tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = QSettings(SETTINGS_ORG, SETTINGS_APP)
    assert str(tmp_path_factory.getbasetemp()) in settings.fileName()  # isolated from the user's settings
    first = MainWindow(size="small")
    qtbot.addWidget(first)
    first.show()
    qtbot.waitExposed(first)
    first.measurement_dock.hide()
    first.close()
    second = MainWindow(size="small")
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert not second.measurement_dock.isVisible()
    second.reset_layout()
    assert second.measurement_dock.isVisible()
    second.close()


def test_bad_pipeline_exits_with_status_2(qapp: QApplication, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(["no_such_pipeline"]) == 2
    assert "unknown pipeline" in capsys.readouterr().err


def test_screenshot_writes_a_png(qapp: QApplication, tmp_path: Path) -> None:
    out = tmp_path / "s.png"
    assert run_app(["blur", "--size", "small", "--screenshot", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_about_names_the_versions() -> None:
    v = versions()
    assert v["Halide"] != "not installed" and v["Qt"]
    html = about_html()
    assert all(value in html for value in v.values())


def test_a_crashing_measurement_is_shown_and_the_app_keeps_working(qtbot: QtBot, window: MainWindow, monkeypatch) -> None:
    from app import workers

    real = workers.api.measure
    monkeypatch.setattr(workers.api, "measure", lambda *a, **kw: real(*a, **{**kw, "fault": "crash", "force": True}))
    assert window.open_pipeline("maxpool", "default")
    assert window.start_measurement() is not None
    qtbot.waitUntil(lambda: window.measurement.result is not None, timeout=MEASURE_TIMEOUT_MS)
    crashed = window.measurement.result
    assert not crashed.ok and crashed.error_kind == "crash" and "SIGSEGV" in crashed.error
    monkeypatch.setattr(workers.api, "measure", real)
    assert window.start_measurement() is not None  # the crashed worker was replaced
    qtbot.waitUntil(lambda: window.measurement.result is not crashed, timeout=MEASURE_TIMEOUT_MS)
    assert window.measurement.result.ok and window.measurement.result.verified


def test_every_main_action_has_an_icon_and_a_tooltip(window: MainWindow) -> None:
    from app.chrome import ICONS

    for name in ICONS:
        action = getattr(window.chrome.actions, name)
        assert not action.icon().isNull(), name
        assert action.toolTip(), name
