"""Tools → Tune Whole Model…: a real tuning run off the GUI thread (real worker processes,
real SQLite, real ONNX Runtime for the reference line), per-task rows and the end-to-end
curve filled from its progress, Apply as one undoable command, Cancel, and a second start
resuming from the records kept."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.tuning.dialog import TuneDialog
from engine.resources import MODELS_DIR
from engine.tuning.tasks import extract_tasks

MODEL = str(MODELS_DIR / "small_cnn.onnx")


def _open(window) -> TuneDialog:
    tools = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "Tools")
    act = next(a for a in tools.actions() if a.text().startswith("Tune Whole Model"))
    act.trigger()
    d = window.tuning.dialog
    assert d is not None and d.isVisible() and d.pipeline is window.doc.pipeline
    return d


def test_tune_whole_model_fills_tasks_and_curve_and_applies_undoably(qtbot: QtBot, open_window) -> None:
    w = open_window(MODEL, "heuristic")
    d = _open(w)
    # Enough trials for every task's first one (the end-to-end estimate needs them all).
    trials = 5 + len(extract_tasks(w.doc.pipeline, w.doc.schedule))
    d.trials.setValue(trials)
    with qtbot.waitSignal(d.service.finished, timeout=300_000):
        d.start_button.click()
    res = d.last_result
    assert res is not None and res.trials == trials and not res.cancelled
    assert d.table.rowCount() == len(res.tasks)
    assert sum(int(d.table.item(r, 4).text()) for r in range(d.table.rowCount())) == trials
    assert d._points and d._points[-1][1] == res.estimate_ms
    assert d.ort_line.isVisible() and d.ort_line.value() > 0 and "verified" in d.ort_label.text()
    before, commands = w.doc.schedule_hash, w.undo_stack.count()
    d.apply_button.click()  # (the tuned schedule may equal the heuristic one after 5 trials: one command all the same)
    assert w.doc.schedule_hash == res.schedule.content_hash() and w.undo_stack.count() == commands + 1
    w.undo_stack.undo()
    assert w.doc.schedule_hash == before


def test_cancel_stops_and_a_new_start_resumes_from_the_records(qtbot: QtBot, open_window) -> None:
    w = open_window(MODEL, "heuristic")
    d = _open(w)
    d.budget.setValue(600)
    with qtbot.waitSignal(d.service.progress, timeout=300_000):
        d.start_button.click()
    with qtbot.waitSignal(d.service.finished, timeout=120_000):
        d.cancel_button.click()
    assert d.last_result is not None and d.last_result.cancelled and d.start_button.isEnabled()
    d.trials.setValue(1)
    with qtbot.waitSignal(d.service.finished, timeout=300_000):
        d.start_button.click()
    assert d.last_result is not None and any(t.resumed_trials > 0 for t in d.last_result.tasks)
