"""One user session, end to end, through the widgets: start page → a zoo pipeline at small
size → a stage picked in the graph → a quick action (the prediction moves) → undo (it comes
back) → an invalid edit (refused inline) → a real measurement (verified, per-stage bars) →
save → the project reopened from the start page of a new window, with everything in it.
Real Halide, a real worker process, the throwaway SQLite database of conftest.py."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.start.items import KEY_ROLE, WARN_ROLE
from engine import zoo
from engine.schedule import default_schedule

MEASURE_TIMEOUT_MS = 120_000  # compile + time + verify + profile, on a loaded 2-core machine


def _window(qtbot: QtBot) -> MainWindow:
    # Built at full size: the start page's size choice is what makes this session small.
    w = MainWindow(size="full", persist_layout=False, ask_to_save=False)
    w.set_auto_measure(False)
    qtbot.addWidget(w)
    w.show_start_page()
    w.show()
    qtbot.waitExposed(w)
    return w


def _click_row(qtbot: QtBot, lw: QListWidget, key: str) -> None:
    item = next(lw.item(k) for k in range(lw.count()) if lw.item(k).data(KEY_ROLE) == key)
    lw.scrollToItem(item)
    qtbot.mouseClick(lw.viewport(), Qt.MouseButton.LeftButton, pos=lw.visualItemRect(item).center())


def _click_node(qtbot: QtBot, w: MainWindow, name: str) -> None:
    view = w.graph.view
    view.centerOn(view.nodes[name])
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(view.nodes[name].scenePos()))


def _predicted_ms(w: MainWindow) -> float:
    text = w.performance.values["Predicted"].text()  # "0.03003 ms (analytic estimate)"
    return float(text.split(" ms")[0])


def test_a_session_from_the_start_page_to_a_reopened_project(qtbot: QtBot, tmp_path: Path) -> None:
    w = _window(qtbot)
    page = w.start_page
    assert w.start.showing and not w.stages_dock.isVisible() and not w.chrome.toolbar.isVisible()
    assert not page.continue_button.isEnabled()  # nothing open yet

    # Start page: the small size, then the unsharp card.
    page.size_combo.setCurrentIndex(page.size_combo.findText("small"))
    assert page.card_for("unsharp").data(KEY_ROLE) == "unsharp"
    _click_row(qtbot, page.gallery, "unsharp")
    doc = w.doc
    assert not w.start.showing and w.central.currentWidget() is w.tabs
    assert w.stages_dock.isVisible() and w.measurement_dock.isVisible() and w.chrome.toolbar.isVisible()
    assert doc.pipeline.content_hash() == zoo.get("unsharp", "small").content_hash()
    assert (doc.size, w.pipeline_size, w.chrome.size_combo.currentText(), doc.schedule_spec) == ("small", "small", "small", "hand")

    # Start from the default schedule (the toolbar's schedule combo), as a user exploring would.
    combo = w.chrome.schedule_combo
    combo.setCurrentIndex(combo.findData("default"))
    combo.activated.emit(combo.currentIndex())
    assert doc.schedule_spec == "default" and doc.schedule.to_json() == default_schedule(doc.pipeline).to_json()

    # Pick blur_y in the graph: the stage list and the editor follow.
    _click_node(qtbot, w, "blur_y")
    assert w.stages.current_stage() == "blur_y" and w.editor.stage == "blur_y"
    before_hash, before_ms = doc.schedule_hash, _predicted_ms(w)
    assert before_ms == float(f"{doc.prediction.total_ms:.4g}") > 0

    # Quick action: vectorize the innermost loop. The analytic estimate drops.
    qtbot.mouseClick(w.editor.quick["vectorize"], Qt.MouseButton.LeftButton)
    assert w.editor.error.isHidden(), w.editor.error.text()
    assert doc.schedule.of("blur_y").pure[-1].to_json() == {"kind": "vectorize", "loop": "x", "factor": 8}
    edited_hash, edited_ms = doc.schedule_hash, _predicted_ms(w)
    assert edited_hash != before_hash
    assert edited_ms < before_ms * 0.9, (before_ms, edited_ms)
    assert "x_v" in w.loop_view.toPlainText()

    # Undo (Ctrl+Z): the exact schedule and prediction come back; redo (Ctrl+Shift+Z) again.
    with qtbot.waitActive(w):
        w.activateWindow()
    qtbot.keyClick(w, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert doc.schedule_hash == before_hash and _predicted_ms(w) == before_ms
    qtbot.keyClick(w, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert doc.schedule_hash == edited_hash and _predicted_ms(w) == edited_ms

    # An invalid edit (a split whose outer loop takes a name in use) is refused inline.
    steps = w.undo_stack.count()
    w.editor.begin_add()
    form = w.editor.form
    form.set_kind("split")
    form.combo("loop").setCurrentIndex(form.combo("loop").findData("y"))
    form.edit("outer").setText("x")
    form.edit("inner").setText("yi")
    form.apply_button.click()
    assert w.editor.error.isVisible()
    assert "invalid schedule: stage 'blur_y'" in w.editor.error.text() and "'x'" in w.editor.error.text()
    assert doc.schedule_hash == edited_hash and w.undo_stack.count() == steps and _predicted_ms(w) == edited_ms
    w.editor.close_form()

    # Measure (the toolbar button): a verified median and per-stage bars from the profiler.
    qtbot.mouseClick(w.chrome.toolbar.widgetForAction(w.chrome.actions.measure), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.performance.result is not None, timeout=MEASURE_TIMEOUT_MS)
    m = w.performance.result
    assert m.ok and m.verified, m.error
    assert m.schedule_hash == edited_hash and m.median_ms > 0
    assert w.performance.values["Median"].text() == f"{m.median_ms:.4g} ms"
    assert "Verified" in w.performance.verdict_text()
    bars = w.performance.stage_bars.shown["measured"]
    assert set(bars) == {s.name for s in doc.pipeline.stages}
    assert abs(sum(bars.values()) - m.median_ms) < 1e-6 * m.median_ms + 1e-9  # the profile is scaled to the median
    assert w.graph.legend.source == "measured"
    measured_points = w.performance.history_plot.points["measured"]
    assert measured_points == [(w.history.variant(edited_hash).number, m.median_ms)]

    # Save, then reopen in a new window from its start page's recent projects.
    path = tmp_path / "unsharp-session.sxproj"
    assert w.projects.save_as(path)
    assert not w.isWindowModified() and path.name in w.windowTitle()
    variants = [(v.number, v.hash, v.label) for v in w.history.variants]
    assert len(variants) == 3  # hand as opened, default, the vectorized edit (the undo went back to a known one)

    other = _window(qtbot)
    recent = other.start_page.recent
    assert recent.item(0).data(KEY_ROLE) == str(path) and not recent.item(0).data(WARN_ROLE)
    _click_row(qtbot, recent, str(path))
    d2 = other.doc
    assert not other.start.showing and other.projects.path == path
    assert d2.schedule_hash == edited_hash and d2.schedule.to_json() == doc.schedule.to_json() and d2.edited
    assert d2.size == "small" and d2.is_builtin
    assert [(v.number, v.hash, v.label) for v in other.history.variants] == variants
    assert other.performance.result.median_ms == m.median_ms
    assert other.performance.values["Median"].text() == w.performance.values["Median"].text()
    assert other.performance.stage_bars.shown["measured"] == bars
    assert _predicted_ms(other) == edited_ms
    assert other.undo_stack.count() == 0 and not other.isWindowModified()
    other.close()
    w.close()
    assert not w.measure_service.running and not other.measure_service.running
