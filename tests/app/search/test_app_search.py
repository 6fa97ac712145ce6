"""The search panel: a real search (random strategy, real engine, small blur) off the GUI
thread; progress, the candidates table and the live plot; applying a candidate as one
undoable step; cancel; a crashing candidate; closing the window while a search runs."""

from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.search import worker as search_worker
from app.search.controls import describe
from app.search.panel import SearchPanel
from engine import api
from engine.search import STRATEGIES

SEARCH_TIMEOUT_MS = 60_000


def _configure(panel: SearchPanel, trials: int, wall_s: int = 30, baselines: bool = False) -> None:
    c = panel.controls
    c.strategy_combo.setCurrentText("random")
    c.trials_spin.setValue(trials)
    c.wall_spin.setValue(wall_s)
    c.seed_spin.setValue(0)
    c.baselines_check.setChecked(baselines)


def _idle(panel: SearchPanel) -> bool:
    c = panel.controls
    return c.start_button.isEnabled() and not c.pause_button.isEnabled() and not c.cancel_button.isEnabled() and c.trials_spin.isEnabled()


def test_search_runs_off_thread_fills_table_and_plot_and_applies_undoably(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur")
    panel = w.search_panel
    assert w.search_dock.objectName() == "search_dock"
    assert w.search_dock.toggleViewAction() in w.chrome.view_menu.actions()
    c = panel.controls
    assert [c.strategy_combo.itemText(i) for i in range(c.strategy_combo.count())] == sorted(STRATEGIES)
    for i in range(c.strategy_combo.count()):  # every strategy has a one-line description
        name = c.strategy_combo.itemText(i)
        assert c.strategy_combo.itemData(i, Qt.ItemDataRole.ToolTipRole) == describe(name) and describe(name) != "no description"
        assert "\n" not in describe(name) and len(describe(name)) <= 100
    c.strategy_combo.setCurrentText("random")
    assert c.description.text() == "Random legal schedules; the model picks the best predicted of each batch to measure"
    controls = (c.strategy_combo, c.description, c.trials_spin, c.wall_spin, c.seed_spin, c.baselines_check, c.start_button)
    for widget in (*controls, c.pause_button, c.cancel_button, c.status, panel.plot.plot, panel.table, panel.apply_button):
        assert widget.toolTip(), widget
    assert _idle(panel)
    before = w.doc.schedule_hash
    _configure(panel, trials=3, baselines=True)
    with qtbot.waitSignal(panel.service.progress, timeout=SEARCH_TIMEOUT_MS):
        assert panel.start()
    assert panel.service.thread_running and panel.service.busy
    assert not c.start_button.isEnabled() and c.cancel_button.isEnabled() and c.pause_button.isEnabled()
    assert not c.trials_spin.isEnabled()
    qtbot.waitUntil(lambda: not panel.service.busy, timeout=SEARCH_TIMEOUT_MS)
    assert _idle(panel)
    res = panel.result
    assert res is not None and res.strategy == "random" and not res.cancelled
    assert len(res.trials) == 3 and panel.table.rowCount() == 3
    assert panel.state_word() == "Finished"
    status = c.status.text()
    assert "3 measured" in status and f"best measured {res.best_ms:.4g} ms" in status
    # Baselines: the current (default) schedule and Adams2019, measured in the search's own runner,
    # drawn as lines and handed to the session history (the performance panel shows them too).
    assert set(panel.plot.baselines) == {"current schedule", "Adams2019"}
    assert w.history.baseline_ms("Adams2019") == pytest.approx(panel.plot.baselines["Adams2019"])
    assert w.history.measurement(before).median_ms == pytest.approx(panel.plot.baselines["current schedule"])
    # The plot: best so far, never increasing, ending at the best verified time.
    meas = panel.plot.points["measured"]
    assert [n for n, _ in meas] == [1, 2, 3]
    assert all(b <= a for (_, a), (_, b) in zip(meas, meas[1:]))
    assert meas[-1][1] == pytest.approx(res.best_ms)
    assert len(panel.plot.points["predicted"]) == 3
    assert res.model.startswith("analytic roofline estimate")
    assert panel.plot.legend_entries[:2] == ["measured", f"predicted ({res.model})"]
    assert f"Adams2019 {panel.plot.baselines['Adams2019']:.3g} ms" in panel.plot.legend_entries
    # The table: every row verified; the best row bold; speedups against the current schedule.
    table = panel.table
    assert all(t.verified and t.measured_ms > 0 for t in table.trials.values())
    best_row = table.row_of(table.best_index())
    assert table.item(best_row, 0).font().bold()
    assert table.item(best_row, 2).text() == f"{res.best_ms:.4g}"
    ref = panel.plot.baselines["current schedule"]
    assert table.item(best_row, 4).text() == f"{ref / res.best_ms:.2f}×"
    table.sortByColumn(2, Qt.SortOrder.AscendingOrder)  # fastest first
    assert table.item(0, 0).font().bold()
    # Apply the slowest candidate (so it differs from the best), as one undoable step.
    table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
    table.selectRow(0)
    chosen = table.selected_trial()
    assert panel.apply_button.isEnabled()
    depth = w.undo_stack.count()
    panel.apply_button.click()
    assert w.doc.schedule_hash == chosen.schedule.content_hash()
    assert w.undo_stack.count() == depth + 1 and f"apply search trial #{chosen.index + 1}" in w.undo_stack.undoText()
    assert not panel.apply_button.isEnabled()  # already the document's schedule
    w.undo_stack.undo()
    assert w.doc.schedule_hash == before
    # Double-click applies too.
    table.selectRow(1)
    other = table.selected_trial()
    table.doubleClicked.emit(table.model().index(1, 0))
    assert w.doc.schedule_hash == other.schedule.content_hash()
    w.close()
    assert not panel.service.thread_running


def test_pause_resume_and_cancel_stop_the_search_promptly(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur")
    panel, c = w.search_panel, w.search_panel.controls
    _configure(panel, trials=500, wall_s=300)
    c.seed_spin.setValue(7)  # candidates not measured by the other tests: nothing comes from the database
    with qtbot.waitSignal(panel.service.progress, check_params_cb=lambda pr: pr.trial is not None, timeout=SEARCH_TIMEOUT_MS):
        panel.start()
    c.pause_button.click()
    assert panel.service.paused and c.pause_button.text() == "Resume" and "Paused" in c.status.text()
    c.pause_button.click()
    assert not panel.service.paused and c.pause_button.text() == "Pause" and "Running" in c.status.text()
    qtbot.wait(500)  # a candidate is being compiled or timed in the worker process
    t0 = time.monotonic()
    c.cancel_button.click()
    assert not c.cancel_button.isEnabled() and "Cancelling" in c.status.text()
    qtbot.waitUntil(lambda: not panel.service.busy, timeout=10_000)
    assert time.monotonic() - t0 < 5.0
    assert _idle(panel) and c.pause_button.text() == "Pause" and not panel.service.paused
    assert panel.state_word() == "Cancelled" and "Cancelled" in c.status.text()
    assert 1 <= panel.table.rowCount() < 500
    assert all(t.verified for t in panel.table.trials.values())  # the killed job is not listed as a failure


def test_crashing_candidate_is_listed_and_the_search_goes_on(qtbot: QtBot, open_window, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second candidate's worker process is killed mid-job (a real crash of the real runner)."""
    real = search_worker.measure_function

    def crashing(runner, db, should_cancel=None):
        measure = real(runner, db, should_cancel)
        calls = {"n": 0}

        def fn(p, s):
            calls["n"] += 1
            if calls["n"] != 2:
                return measure(p, s)
            worker = runner._get()  # the process the job will go to
            threading.Timer(0.3, worker.proc.kill).start()
            return api.measure(p, s, runner, None, force=True, min_time_s=5.0)

        return fn

    monkeypatch.setattr(search_worker, "measure_function", crashing)
    w: MainWindow = open_window("blur")
    panel = w.search_panel
    _configure(panel, trials=3)
    panel.start()
    qtbot.waitUntil(lambda: not panel.service.busy, timeout=SEARCH_TIMEOUT_MS)
    res = panel.result
    assert res is not None and len(res.trials) == 3
    assert [t.verified for t in res.trials] == [True, False, True]
    crashed = panel.table.trials[1]
    assert "crashed" in crashed.error
    row = panel.table.row_of(1)
    assert panel.table.item(row, 2).text().startswith("✘") and panel.table.item(row, 2).foreground().color().name() == "#c62828"
    assert panel.table.item(row, 4).text() == "–"
    assert "(1 failed)" in panel.controls.status.text()
    assert [n for n, _ in panel.plot.points["trials"]] == [1, 3]


def test_closing_the_window_cancels_a_running_search(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur")
    panel = w.search_panel
    _configure(panel, trials=500, wall_s=300)
    with qtbot.waitSignal(panel.service.progress, timeout=SEARCH_TIMEOUT_MS):
        panel.start()
    t0 = time.monotonic()
    w.close()
    assert not panel.service.thread_running
    assert time.monotonic() - t0 < 5.0
