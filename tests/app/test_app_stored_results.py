"""Stored results from the window (issue 20 item 6): Measure Again runs the worker although a
result is stored, a stored result with a large spread is flagged, and Clear Stored Results
empties the database for the open pipeline only (real worker, real SQLite)."""

from __future__ import annotations

import dataclasses

from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.performance import NOISY_SPREAD
from engine import api
from engine.database import Database
from engine.measure import Measurement

MEASURE_TIMEOUT_MS = 90_000


def _measured(qtbot: QtBot, w: MainWindow, force: bool = False) -> Measurement:
    """Measure the current schedule (Measure, or Measure Again) and wait for its result."""
    with qtbot.waitSignal(w.measure_service.finished, timeout=MEASURE_TIMEOUT_MS) as got:
        (w.measure_actions.measure_again if force else w.chrome.actions.measure).trigger()
    m = got.args[1]
    assert m.ok and m.verified, m.error
    return m


def test_measure_again_runs_the_worker_although_a_result_is_stored(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur", "hand")
    first = _measured(qtbot, w)
    stored = _measured(qtbot, w)  # plain Measure: the database's result, no worker run
    assert stored.cached and stored.created == first.created
    again = _measured(qtbot, w, force=True)
    assert not again.cached and again.created > first.created
    p = w.doc.pipeline
    assert p is not None
    with Database() as db:  # the new run replaced the stored one
        row = api.stored_measurement(p, db, w.doc.schedule_hash, again.threads)
    assert row is not None and row.created == again.created
    now = w.history.measurement(w.doc.schedule_hash)
    assert now is not None and now.created == again.created


def test_a_noisy_stored_result_is_flagged(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur", "hand")
    m = _measured(qtbot, w)
    perf = w.performance
    assert m.median_ms is not None
    quiet = m.iqr_ms is not None and m.iqr_ms <= NOISY_SPREAD * m.median_ms
    assert perf.noise.isHidden() == quiet  # the real result: flagged only if it really was noisy
    # A result taken under load, as stored: the IQR as large as the median.
    noisy = dataclasses.replace(m, iqr_ms=m.median_ms, cached=False)
    with Database() as db:
        db.record(noisy)
    got = _measured(qtbot, w)
    assert got.cached and got.iqr_ms == got.median_ms
    assert not perf.noise.isHidden()
    assert "Noisy stored result" in perf.noise.text() and "100%" in perf.noise.text() and "Measure again" in perf.noise.text()


def test_clear_stored_results_empties_this_pipeline_only(qtbot: QtBot, open_window) -> None:
    w: MainWindow = open_window("blur", "hand")
    m = _measured(qtbot, w)
    other = dataclasses.replace(m, pipeline="other", pipeline_hash="0123456789abcdef")
    with Database() as db:
        db.record(other)
        assert list(db.measurements(m.pipeline_hash))
    with qtbot.waitSignal(w.measure_control.forgotten, timeout=MEASURE_TIMEOUT_MS) as said:
        assert w.measure_actions.clear_stored_results(w)
    assert said.args[0].startswith("Cleared the stored results of blur: ")  # how many: what this session's other tests stored too
    with Database() as db:
        assert not list(db.measurements(m.pipeline_hash))
        assert [x.pipeline for x in db.measurements(other.pipeline_hash)] == ["other"]
    assert w.history.measurement(w.doc.schedule_hash) is None
    assert w.performance.values["Median"].text() == "–" and "Not measured" in w.performance.verdict_text()
    again = _measured(qtbot, w)  # nothing stored: the worker runs
    assert not again.cached
