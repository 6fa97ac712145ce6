"""Schedules as files (issue 20 item 8): Save Schedule / Open Schedule round-trip, File →
Open recognises a schedule .json, a malformed one is one clear message and changes nothing;
Compare with Adams2019 measures the current schedule too, shows what Adams2019 chose and
applies it as this app's directives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.schedule_files import is_schedule_file

MEASURE_TIMEOUT_MS = 120_000


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every QMessageBox.warning text, instead of a modal that would block the test."""
    seen: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text, *_a: seen.append(text))
    return seen


def test_a_saved_schedule_opens_again_as_the_same_schedule(open_window, warnings: list[str], tmp_path: Path) -> None:
    w: MainWindow = open_window("blur", "hand")
    hand = w.doc.schedule_hash
    path = tmp_path / "mine.json"
    assert w.measure_actions.files.save(path)
    assert is_schedule_file(path) and json.loads(path.read_text())["stages"]
    w.chrome.schedule_combo.activated.emit(0)  # back to the default schedule
    assert w.doc.schedule_hash != hand
    pipeline = w.doc.pipeline_spec
    assert w.open_file(path)  # File → Open: a schedule for the open pipeline, not a pipeline
    assert not warnings
    assert w.doc.schedule_hash == hand and w.doc.pipeline_spec == pipeline and w.doc.schedule_spec == str(path)
    assert w.chrome.schedule_combo.currentData() == str(path)
    w.undo_stack.undo()  # one undoable step
    assert w.doc.schedule_hash != hand
    assert w.projects.open_dropped([path])  # dropped on the window: the same
    assert w.doc.schedule_hash == hand and not warnings


def test_a_malformed_schedule_file_is_one_message_and_changes_nothing(open_window, warnings: list[str], tmp_path: Path) -> None:
    w: MainWindow = open_window("blur", "hand")
    before = w.doc.schedule_hash, w.undo_stack.count()
    broken = tmp_path / "broken.json"
    broken.write_text('{"stages": {"blur_y": ')
    assert not w.measure_actions.files.open_file(broken)
    assert len(warnings) == 1 and "broken.json" in warnings[0] and "malformed JSON" in warnings[0]
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"stages": {"blur_y": {"pure": [{"kind": "vectorize", "loop": "nope", "factor": 8}]}}}))
    assert not w.open_file(wrong)  # recognised as a schedule, refused as one (not "missing field 'inputs'")
    assert len(warnings) == 2 and "wrong.json" in warnings[1] and "blur_y" in warnings[1] and "inputs" not in warnings[1]
    assert (w.doc.schedule_hash, w.undo_stack.count()) == before


def test_compare_with_adams_measures_the_current_schedule_and_shows_adams_schedule(qtbot: QtBot, open_window, warnings: list[str]) -> None:
    w: MainWindow = open_window("blur", "hand")
    w.measure_actions.clear_stored_results(w, ask=False)  # the current schedule has no result to reuse
    qtbot.waitUntil(lambda: not w.measure_service.busy, timeout=MEASURE_TIMEOUT_MS)
    w.compare_adams()
    keys = [r.schedule_key for r in w.measure_service.pending()]
    assert w.doc.schedule_hash in keys and "auto:Adams2019" in keys
    qtbot.waitUntil(lambda: w.measure_control.adams_request is None and not w.measure_service.busy, timeout=MEASURE_TIMEOUT_MS)
    text = w.performance.values["vs Adams2019"].text()
    assert "×" in text and ("faster" in text or "slower" in text), text
    dialog = w.measure_actions.files.show_autoscheduler("Adams2019")
    assert dialog is not None and "blur_y" in dialog.text.toPlainText()
    before = w.doc.schedule_hash
    dialog.apply_clicked.emit()  # Apply as Schedule: Adams2019's choice as this app's directives, undoable
    assert not warnings
    assert w.doc.schedule_hash != before and w.doc.edited
    assert any(d.kind == "compute_at" for d in w.doc.schedule.stages["blur_x"].pure)
    assert "Applied Halide Adams2019's schedule" in w.statusBar().currentMessage()
    w.undo_stack.undo()
    assert w.doc.schedule_hash == before
    dialog.close()
