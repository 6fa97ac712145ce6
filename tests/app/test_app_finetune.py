"""The cost model on this machine in the window (issue 13 item 3): the error line under the
performance summary is the engine's own computation and follows a fresh measurement; Fine-tune
on My Measurements runs off the GUI thread with progress and Cancel, saves in the user data
directory, and Reset to Shipped Cost Model removes it (real worker, real SQLite, real Qt)."""

from __future__ import annotations

import math
import random

import pytest
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.finetune import compute_line
from app.main_window import MainWindow
from engine.costmodel import default_model
from engine.costmodel import finetune as FT
from engine.costmodel.files import finetuned_dir, finetuned_root
from engine.database import Database
from engine.measure import Measurement
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule

WAIT_MS = 120_000


@pytest.fixture
def host_db(tmp_path, monkeypatch):
    """A measurement database of 40 verified measurements on this machine (this target, host and
    threads), the user data directory in tmp_path: what the window reads and writes."""
    monkeypatch.setenv("SCHEDULE_EXPLORER_DB", str(tmp_path / "m.sqlite"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    env = FT.current_environment()
    base, _ = FT.base_model()
    p = random_pipeline(5, 4, "small")
    rng = random.Random(2)
    scheds = {}
    while len(scheds) < 40:
        s = sample_schedule(p, rng)
        scheds[s.content_hash()] = s
    with Database() as db:
        db.put_pipeline(p.content_hash(), p.name, p.to_json())
        for (h, s), pr in zip(scheds.items(), base.predict_many(p, list(scheds.values()))):
            db.put_schedule(h, s.to_json())
            ms = 3.0 * pr.total_ms**0.9 * math.exp(random.Random(h).gauss(0, 0.05))  # this machine: slower, compressed
            here = {"target": env.target, "host": env.host, "threads": env.threads}
            db.record(Measurement(p.name, p.content_hash(), h, True, True, median_ms=ms, **here))
    return tmp_path / "m.sqlite", env


def _line(qtbot: QtBot, w: MainWindow, n: int) -> str:
    ctl = w.model_on_machine
    qtbot.waitUntil(lambda: ctl.state is not None and ctl.state.line.n == n, timeout=WAIT_MS)
    return ctl.label.text()


def test_error_line_is_the_engines_and_follows_measurements(qtbot: QtBot, open_window, host_db) -> None:
    db, env = host_db
    w: MainWindow = open_window("blur", "hand")
    shown = _line(qtbot, w, 40)
    want = FT.model_error(default_model(), db, env)
    assert shown == want.text == compute_line(str(db), env.threads).text
    assert shown.startswith("model error on your 40 measurements: median ×") and ", τ " in shown
    assert not w.model_on_machine.label.isHidden()
    with qtbot.waitSignal(w.measure_service.finished, timeout=WAIT_MS) as got:
        w.chrome.actions.measure.trigger()
    assert got.args[1].ok and got.args[1].verified
    shown = _line(qtbot, w, 41)  # the fresh measurement counts at once
    assert shown == FT.model_error(default_model(), db, env).text


def test_finetune_action_saves_and_reset_removes(qtbot: QtBot, open_window, host_db) -> None:
    w: MainWindow = open_window("blur", "hand")
    ctl = w.model_on_machine
    menu_texts = [a.text() for m in w.menuBar().actions() if m.menu() for a in m.menu().actions()]
    assert "&Fine-tune on My Measurements…" in menu_texts and "&Reset to Shipped Cost Model" in menu_texts
    job = ctl.start_finetune()
    assert job is not None and ctl.dialog is not None and ctl.dialog.isVisible()
    cancel = next(b for b in ctl.dialog.findChildren(QPushButton) if b.text() == "Cancel")
    cancel.click()  # Cancel in the progress dialog: nothing is saved
    qtbot.waitUntil(lambda: not ctl.tuner.busy, timeout=WAIT_MS)
    assert ctl.result is None and "cancelled" in ctl.error and finetuned_dir() is None
    ctl.finetune_action.trigger()
    qtbot.waitUntil(lambda: not ctl.tuner.busy, timeout=WAIT_MS)
    rep = ctl.result
    assert rep is not None, ctl.error
    assert rep["after"]["median_factor"] < rep["before"]["median_factor"] and rep["n_train"] + rep["n_test"] == 40
    saved = finetuned_dir()
    assert saved is not None and str(saved) == rep["saved"] and saved.parent == finetuned_root()
    assert "Fine-tuned on" in w.statusBar().currentMessage() and "→" in w.statusBar().currentMessage()
    ctl.reset_action.trigger()
    assert finetuned_dir() is None and "removed" in w.statusBar().currentMessage()
