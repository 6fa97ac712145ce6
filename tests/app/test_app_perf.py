"""Predictions and measurements together: auto-measure after edits (debounced), the
performance panel (predicted vs measured, speedups, history), the Adams2019 comparison
(off the GUI thread, cancellable), the measurement queue, and the lowered Stmt tab."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.measure import Measurement

MEASURE_TIMEOUT_MS = 90_000


@pytest.fixture
def window(open_window) -> Iterator[MainWindow]:
    w = open_window("blur")
    yield w
    w.close()
    assert not w.measure_service.running


def _fake(w: MainWindow, key: str, ms: float, stages: dict[str, float] | None = None) -> Measurement:
    p = w.doc.pipeline
    return Measurement(p.name, p.content_hash(), key, True, verified=True, median_ms=ms, min_ms=ms, iqr_ms=0.0, runs=9, stages=stages or {})


def test_auto_measure_is_debounced_and_measures_the_last_edit(qtbot: QtBot, window: MainWindow) -> None:
    started: list[str] = []
    window.measure_service.started.connect(lambda r: started.append(r.schedule_key))
    window.set_auto_measure(True)
    assert window.chrome.actions.auto_measure.isChecked()
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    first = window.doc.schedule_hash
    window.editor.quick_action("vectorize")  # within the debounce interval: only this one is measured
    last = window.doc.schedule_hash
    assert not window.measure_service.busy  # nothing yet: the timer waits for a pause
    qtbot.waitUntil(lambda: window.history.measurement(last) is not None, timeout=MEASURE_TIMEOUT_MS)
    assert started == [last]
    assert window.history.measurement(first) is None
    m = window.history.measurement(last)
    assert m.ok and m.verified, m.error
    perf = window.performance
    assert perf.result is m
    assert perf.values["Median"].text() == f"{m.median_ms:.4g} ms"
    assert "analytic estimate" in perf.values["Predicted"].text()
    assert "Verified" in perf.verdict_text()
    assert set(perf.stage_bars.shown) >= {"predicted (analytic estimate)"}
    assert perf.history_plot.points["measured"] == [(window.history.variant(last).number, m.median_ms)]
    assert window.graph.legend.source in ("measured", "predicted (analytic estimate)")  # measured when the profiler sampled
    # Undo: a known variant; with its measurement unknown, the timer measures it too.
    window.set_auto_measure(False)
    window.undo_stack.undo()
    assert not window.measure_control.timer.isActive()


def test_performance_panel_speedups_and_history(window: MainWindow) -> None:
    h, doc, perf = window.history, window.doc, window.performance
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    assert [v.number for v in h.variants] == [1, 2]
    assert perf.values["vs default"].text().startswith("–")
    h.attach(_fake(window, h.default_hash, 4.0))
    h.attach(_fake(window, "auto:Adams2019", 1.0))
    h.attach(_fake(window, doc.schedule_hash, 2.0, {"blur_x": 1.5, "blur_y": 0.5}))
    assert perf.values["Median"].text() == "2 ms"
    assert perf.values["vs default"].text() == "2.00× faster (4 ms)"
    assert perf.values["vs Adams2019"].text() == "0.50× slower (1 ms)"
    assert perf.stage_bars.shown["measured"] == {"blur_x": 1.5, "blur_y": 0.5}
    assert perf.history_plot.points["measured"] == [(1, 4.0), (2, 2.0)]
    assert len(perf.history_plot.points["predicted"]) == 2
    # Clicking a point of the history goes back to that variant, as one undoable step.
    perf.history_plot.variant_clicked.emit(1)
    assert doc.schedule_hash == h.default_hash
    assert "return to variant 1" in window.undo_stack.undoText()
    window.undo_stack.undo()
    assert doc.schedule_hash == h.variants[1].hash


def test_adams2019_comparison_runs_off_thread_and_cancels(qtbot: QtBot, window: MainWindow) -> None:
    finished: list[tuple[str, bool]] = []
    window.measure_service.finished.connect(lambda r, m, cancelled: finished.append((r.schedule_key, cancelled)))
    window.chrome.actions.compare.trigger()
    ctl = window.measure_control
    assert ctl.adams_request is not None and ctl.adams_request.autoscheduler == "Adams2019"
    keys = [r.schedule_key for r in window.measure_service.pending()]
    assert keys == [window.history.default_hash, "auto:Adams2019"]  # the default baseline first
    assert window.performance.compare_button.text() == "Cancel Adams2019"
    assert "running Adams2019" in window.performance.values["vs Adams2019"].text()
    window.performance.compare_button.click()  # now: cancel
    assert ("auto:Adams2019", True) in finished
    assert ctl.adams_request is None
    assert window.performance.compare_button.text() == "Compare with Adams2019"
    assert window.chrome.actions.compare.text() == "Compare with &Adams2019"
    window.chrome.actions.cancel.trigger()  # the default's measurement too
    qtbot.waitUntil(lambda: not window.measure_service.busy, timeout=MEASURE_TIMEOUT_MS)


def test_cancel_stops_the_running_measurement(qtbot: QtBot, window: MainWindow) -> None:
    assert window.open_pipeline("harris", "default")  # not measured elsewhere in these tests: no stored result
    req = window.start_measurement()
    assert req is not None and window.chrome.actions.cancel.isEnabled()
    qtbot.wait(300)  # the worker has started compiling
    window.chrome.actions.cancel.trigger()
    qtbot.waitUntil(lambda: not window.measure_service.busy, timeout=MEASURE_TIMEOUT_MS)
    assert req.schedule_key in window.history.cancelled
    assert window.performance.verdict_text() == "Cancelled"
    assert not window.chrome.actions.cancel.isEnabled() and window.chrome.actions.measure.isEnabled()


def test_queue_runs_one_at_a_time_and_drops_cancelled_requests(qtbot: QtBot, window: MainWindow) -> None:
    svc = window.measure_service
    order: list[int] = []
    svc.started.connect(lambda r: order.append(r.id))
    a = window.start_measurement()
    assert window.start_measurement() is None  # already queued
    assert not window.chrome.actions.measure.isEnabled()
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    assert window.chrome.actions.measure.isEnabled()  # another schedule now
    b = window.start_measurement()
    c = svc.measure(window.doc.pipeline, window.doc.load_spec("default"), "again")
    assert [r.id for r in svc.pending()] == [a.id, b.id, c.id]
    svc.cancel(c.id)
    assert [r.id for r in svc.pending()] == [a.id, b.id]
    qtbot.waitUntil(lambda: not svc.busy, timeout=MEASURE_TIMEOUT_MS)
    assert order == [a.id, b.id]
    assert window.history.measurement(b.schedule_key) is not None


def test_lowered_stmt_tab_is_lazy_and_exports(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    pane = window.source_panes["stmt"]
    assert window.stmt_loader.latest == ""  # nothing lowered while the tab is hidden
    window.tabs.setCurrentWidget(pane)
    qtbot.waitUntil(lambda: "produce blur_y" in window.stmt_view.toPlainText(), timeout=30_000)
    pane.copy_button.click()
    assert QApplication.clipboard().text() == window.stmt_view.toPlainText()
    out = tmp_path / "blur.stmt"
    pane.export(str(out))
    assert out.read_text() == window.stmt_view.toPlainText()
    assert [p.name for p in tmp_path.iterdir()] == ["blur.stmt"]  # no temporary file left behind
    # An edit while the tab is shown lowers the new schedule.
    window.select_stage("blur_y")
    window.editor.quick_action("parallel")
    qtbot.waitUntil(lambda: "parallel" in window.stmt_view.toPlainText(), timeout=30_000)
    cpp = window.source_panes["cpp"]
    cpp.export(str(tmp_path / "s.cpp"))
    assert (tmp_path / "s.cpp").read_text() == window.doc.source("cpp")
