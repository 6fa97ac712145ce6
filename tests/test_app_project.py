"""Project files: save and reopen a session (pipeline, variants, measurements, notes),
atomic saves, recent files, dropping a file on the window, and the unsaved-changes question."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app import project
from app.main_window import MainWindow
from app.project import ProjectError
from engine import zoo
from engine.measure import Measurement


def _window(qtbot: QtBot, ask: bool = False) -> MainWindow:
    w = MainWindow(size="small", persist_layout=False, ask_to_save=ask)
    w.set_auto_measure(False)
    qtbot.addWidget(w)
    w.show()
    return w


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    w = _window(qtbot)
    assert w.open_pipeline("unsharp", "default")
    yield w
    w.ask_to_save = False
    w.close()


def _edit_and_measure(w: MainWindow) -> None:
    w.select_stage("blur_x")
    w.editor.quick_action("vectorize")
    w.editor.quick_action("parallel")
    p = w.doc.pipeline
    w.history.attach(Measurement(p.name, p.content_hash(), w.doc.schedule_hash, True, verified=True, median_ms=0.5, runs=7))
    w.projects.notes.setPlainText("vectorizing blur_x helps")


def test_save_and_reopen_a_session(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    _edit_and_measure(window)
    assert window.isWindowModified()
    path = tmp_path / "unsharp.sxproj"
    assert window.projects.save_as(path)
    assert not window.isWindowModified() and "unsharp.sxproj" in window.windowTitle()
    assert [p.name for p in tmp_path.iterdir()] == ["unsharp.sxproj"]  # no temporary file left
    data = json.loads(path.read_text())
    assert data["format"] == project.FORMAT and data["version"] == project.VERSION
    assert data["pipeline"] == window.doc.pipeline.to_json()
    assert [v["schedule"] for v in data["variants"]] == [v.schedule.to_json() for v in window.history.variants]
    assert data["notes"] == "vectorizing blur_x helps"
    assert len(data["measurements"]) == 1

    other = _window(qtbot)
    assert other.open_pipeline("blur")
    assert other.projects.open(path)
    doc = other.doc
    assert doc.pipeline.content_hash() == window.doc.pipeline.content_hash()
    assert doc.pipeline_spec == "unsharp" and doc.is_builtin  # still the zoo entry: the size combo works
    assert doc.schedule_hash == window.doc.schedule_hash and doc.edited
    assert [v.hash for v in other.history.variants] == [v.hash for v in window.history.variants]
    assert other.history.measurement(doc.schedule_hash).median_ms == 0.5
    assert other.performance.values["Median"].text() == "0.5 ms"
    assert other.projects.notes.toPlainText() == "vectorizing blur_x helps"
    assert not other.isWindowModified() and other.undo_stack.count() == 0
    assert other.projects.recent()[0] == str(path)
    # Going back to variant 1 from the reopened history works as an undoable step.
    assert other.restore_variant(1)
    assert other.isWindowModified()
    other.ask_to_save = False
    other.close()


def test_save_is_atomic(window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.sxproj"
    assert window.projects.save_as(path)
    before = path.read_bytes()
    _edit_and_measure(window)
    warnings: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text: warnings.append(text))

    def fail(_src: str, _dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    assert not window.projects.save()
    assert path.read_bytes() == before  # the old project is intact
    assert [p.name for p in tmp_path.iterdir()] == ["p.sxproj"]  # and the partial file is gone
    assert "No space left" in warnings[0]
    assert window.isWindowModified()


def test_damaged_or_foreign_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sxproj"
    bad.write_text("{not json")
    with pytest.raises(ProjectError, match="not JSON"):
        project.load(bad)
    bad.write_text(json.dumps({"format": project.FORMAT, "version": 99}))
    with pytest.raises(ProjectError, match="version 99"):
        project.load(bad)
    bad.write_text(json.dumps({"format": project.FORMAT, "version": 1, "pipeline": {"name": "x"}}))
    with pytest.raises(ProjectError, match="damaged project"):
        project.load(bad)
    pipeline_file = tmp_path / "pipe.json"
    pipeline_file.write_text(json.dumps(zoo.get("blur", "small").to_json()))
    assert not project.is_project(pipeline_file)


def _drop(w: MainWindow, path: Path) -> bool:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(  # QDragEnterEvent takes an integer QPoint, QDropEvent a QPointF
        w.rect().center(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    w.dragEnterEvent(enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(QPointF(w.rect().center()), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    w.dropEvent(drop)
    return True


def test_dropping_a_project_or_pipeline_file_opens_it(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    path = tmp_path / "session.sxproj"
    _edit_and_measure(window)
    assert window.projects.save_as(path)
    other = _window(qtbot)
    assert other.open_pipeline("blur")
    assert _drop(other, path)
    assert other.doc.schedule_hash == window.doc.schedule_hash
    pipeline_file = tmp_path / "mm.json"
    pipeline_file.write_text(json.dumps(zoo.get("matmul", "small").to_json()))
    assert _drop(other, pipeline_file)
    assert other.doc.pipeline.name == "matmul" and other.projects.path is None
    assert not _drop(other, tmp_path / "notes.txt")
    other.close()


def test_closing_with_unsaved_changes_asks(qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _window(qtbot, ask=True)
    assert w.open_pipeline("blur", "default")
    w.close()  # nothing edited: no question
    assert not w.isVisible()
    w.show()
    w.select_stage("blur_y")
    w.editor.quick_action("parallel")
    answers = [QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Save]
    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_args: object) -> QMessageBox.StandardButton:
        asked.append(text)
        return answers.pop(0)

    monkeypatch.setattr(QMessageBox, "question", question)
    w.projects.path = tmp_path / "saved.sxproj"  # Save writes here instead of asking for a name
    w.close()
    assert w.isVisible() and len(asked) == 1  # cancelled: still open
    w.close()
    assert not w.isVisible() and len(asked) == 2
    assert json.loads((tmp_path / "saved.sxproj").read_text())["schedule"] == w.doc.schedule.to_json()
