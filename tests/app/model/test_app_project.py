"""Project files: save and reopen a session (pipeline, variants, measurements, notes),
atomic saves, recent files, dropping a file on the window, and the unsaved-changes question."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import random
import signal
import stat
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.model import project
from app.model.project import ProjectError
from engine import zoo
from engine.ir import Pipeline
from engine.measure import Measurement
from engine.schedule import Schedule, ScheduleError, default_schedule, validate


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


def _saved_then_edited(window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes, list[str]]:
    """A saved project, its bytes, then an unsaved edit; the warnings a failed save shows are collected."""
    path = tmp_path / "p.sxproj"
    assert window.projects.save_as(path)
    before = path.read_bytes()
    _edit_and_measure(window)
    warnings: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text: warnings.append(text))
    return path, before, warnings


def test_save_is_atomic(window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, before, warnings = _saved_then_edited(window, tmp_path, monkeypatch)

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
    with pytest.raises(ProjectError, match="^.*bad.sxproj: pipeline: missing or malformed field 'inputs'"):
        project.load(bad)
    pipeline_file = tmp_path / "pipe.json"
    pipeline_file.write_text(json.dumps(zoo.get("blur", "small").to_json()))
    assert not project.is_project(pipeline_file)
    pipeline_file.write_bytes(b"\xff\xfe" + os.urandom(64))  # a binary .json is not a project (and no error)
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


# --- bad input: every problem one ProjectError naming the file and the field ------------------
@pytest.fixture
def saved(window: MainWindow, tmp_path: Path) -> Path:
    """A real saved session: three variants, a measurement with per-stage times, notes."""
    _edit_and_measure(window)
    p = window.doc.pipeline
    m = Measurement(p.name, p.content_hash(), window.doc.schedule_hash, True, verified=True, median_ms=0.4, runs=5)
    m.round_medians_ms, m.stages, m.compile_s = [0.4, 0.5], {"blur_x": 0.1, "output": 0.3}, 0.2
    window.history.attach(m)
    path = tmp_path / "saved.sxproj"
    assert window.projects.save_as(path)
    return path


def _load_error(path: Path, data: object) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(ProjectError) as info:
        project.load(path)
    return str(info.value)


def test_each_bad_field_is_named_with_its_path(saved: Path, tmp_path: Path) -> None:
    good = json.loads(saved.read_text())
    bad = tmp_path / "bad.sxproj"

    def error(change: str, value: object) -> str:
        d = copy.deepcopy(good)
        *parents, last = change.split(".")
        target = d
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[int(last) if isinstance(target, list) else last] = value
        return _load_error(bad, d).removeprefix(f"{bad}: ")

    assert error("measurements", [[1, 2]]) == "measurements[0]: expected an object, got [1, 2]"
    assert error("measurements.0.median_ms", "fast") == "measurements[0].median_ms: expected a number, got 'fast'"
    assert error("measurements.0.median_ms", -1) == "measurements[0].median_ms: expected a finite number ≥ 0, got -1"
    assert error("measurements.0.median_ms", math.nan) == "measurements[0].median_ms: expected a finite number ≥ 0, got nan"
    assert error("measurements.0.stages.output", True) == "measurements[0].stages.output: expected a number, got True"
    assert error("measurements.0.round_medians_ms", [0.4, "x"]) == "measurements[0].round_medians_ms[1]: expected a number, got 'x'"
    assert error("measurements.0.runs", 2.5) == "measurements[0].runs: expected a whole number, got 2.5"
    assert error("measurements.0.ok", 1) == "measurements[0].ok: expected true or false, got 1"
    assert error("measurements.0.error", 3) == "measurements[0].error: expected a string, got 3"
    assert error("variants.1.predicted_ms", math.inf) == "variants[1].predicted_ms: expected a finite number ≥ 0, got inf"
    assert error("variants.2.schedule", [1]) == "variants[2].schedule: expected an object, got [1]"
    assert error("variants.2.schedule.stages.blur_x.pure", [7]) == "variants[2].schedule.stages.blur_x.pure[0]: expected an object, got 7"
    assert error("variants", {}) == "variants: expected a list, got {}"
    assert error("notes", None) == "notes: expected a string, got None"
    assert error("size", "huge") == "size: expected one of small, full, got 'huge'"
    assert error("version", True).startswith("project version True is not supported")
    assert error("pipeline", "unsharp") == "pipeline: expected an object, got 'unsharp'"
    assert error("pipeline.stages.0.value", None).startswith("pipeline: ")
    # An index at infinity (JSON allows Infinity): found by fuzzing as an OverflowError inside the engine.
    inf_index = {"at": "input", "idx": [math.inf, {"var": "y"}, {"var": "x"}]}
    assert error("pipeline.stages.0.value", inf_index).startswith("pipeline: ")
    del good["measurements"][0]["ok"]
    assert _load_error(bad, good) == f"{bad}: measurements[0].ok: missing"


def test_unreadable_files_get_one_clear_error(saved: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sxproj"
    text = saved.read_text()
    assert _load_error(bad, text[: len(text) // 2]).startswith(f"{bad}: not JSON (line ")  # a truncated file
    assert _load_error(bad, "").startswith(f"{bad}: not JSON")
    bad.write_bytes(text.encode()[:40] + b"\xff\xfe" + text.encode()[40:])
    with pytest.raises(ProjectError, match=r"bad.sxproj: not a text file \(invalid UTF-8 at byte 40\)"):
        project.load(bad)
    assert _load_error(bad, "[" * 100_000 + "]" * 100_000) == f"{bad}: JSON nested too deeply (over {project.MAX_DEPTH} levels)"
    deep = json.loads(text)
    deep["pipeline"]["source"] = {"note": json.loads("[" * 300 + "]" * 300)}  # parses, but deeper than any project
    assert _load_error(bad, deep) == f"{bad}: pipeline.source.note[0][0]…: nested deeper than {project.MAX_DEPTH} levels"
    assert _load_error(bad, [json.loads(text)]) == f"{bad}: not a Schedule Explorer project (the top level is a list, not an object)"
    assert _load_error(bad, "3") == f"{bad}: not a Schedule Explorer project (the top level is a number, not an object)"
    folder = tmp_path / "folder.sxproj"
    folder.mkdir()
    with pytest.raises(ProjectError, match=r"folder.sxproj: Is a directory"):
        project.load(folder)
    with pytest.raises(ProjectError, match=r"missing.sxproj: No such file or directory"):
        project.load(tmp_path / "missing.sxproj")


class _Nest:
    """A value wrapped `n` times in lists or objects; written as text, since building it as
    an object would hit the test's own recursion limit."""

    def __init__(self, value: object, n: int, brackets: tuple[str, str]) -> None:
        self.value, self.n, self.brackets = value, n, brackets


def _dump(v: object) -> str:
    if isinstance(v, _Nest):
        return v.brackets[0] * v.n + _dump(v.value) + v.brackets[1] * v.n
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dump(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_dump(x) for x in v) + "]"
    return json.dumps(v)


def _paths(v: object) -> list[tuple[object, ...]]:
    out, stack = [], [((), v)]
    while stack:
        path, x = stack.pop()
        out.append(path)
        items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        stack.extend((path + (k,), y) for k, y in items)
    return out


ODD_VALUES = [None, True, False, -1, 0, 2.5, -2.5, math.inf, math.nan, "", "fast", [], {}, [1, 2], {"a": 1}, 10**30, "x" * 300]


def _mutate(d: dict, rng: random.Random) -> str:
    """One random change somewhere under a random top-level key: a value of another type,
    a deletion, a duplicate list element, or the value nested 1 to 100,000 levels deep."""
    key = rng.choice(list(d))
    path = (key,) + rng.choice(_paths(d[key]))
    parent = d
    for k in path[:-1]:
        parent = parent[k]
    last = path[-1]
    op = rng.choice(["type", "type", "delete", "nest", "duplicate"])
    if op == "type":
        parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    elif op == "delete":
        del parent[last]
    elif op == "nest":
        parent[last] = _Nest(parent[last], rng.choice([1, 2, 5, 150, 250, 3000, 100_000]), rng.choice([("[", "]"), ('{"k": ', "}")]))
    elif isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    return key


def _finite(v: object) -> bool:
    return type(v) is float and math.isfinite(v) and v >= 0


MEASUREMENT_CHECKS = {  # per field type: what the views may rely on
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
    int: lambda v: type(v) is int and v >= 0,
    float: _finite,
    str | None: lambda v: v is None or isinstance(v, str),
    float | None: lambda v: v is None or _finite(v),
    list[float]: lambda v: isinstance(v, list) and all(map(_finite, v)),
    dict[str, float]: lambda v: isinstance(v, dict) and all(isinstance(k, str) and _finite(x) for k, x in v.items()),
}


def _assert_displayable(pr: project.Project) -> None:
    assert isinstance(pr.pipeline, Pipeline) and isinstance(pr.schedule, Schedule)
    assert all(isinstance(x, str) for x in (pr.pipeline_spec, pr.schedule_spec, pr.spec_hash, pr.notes, pr.schedule_error))
    assert pr.size in zoo.SIZES
    validate(pr.pipeline, pr.schedule)  # the one that opens always applies
    for v in pr.variants:
        assert isinstance(v.label, str) and isinstance(v.spec, str) and isinstance(v.invalid, str)
        assert v.predicted_ms is None or _finite(v.predicted_ms)
        assert v.hash == v.schedule.content_hash() or (v.raw is not None and v.invalid)  # unreadable: kept as JSON
    hints = typing.get_type_hints(Measurement)
    for m in pr.measurements:
        for f in dataclasses.fields(m):
            assert MEASUREMENT_CHECKS[hints[f.name]](getattr(m, f.name)), (f.name, getattr(m, f.name))


def test_fuzzed_projects_raise_only_project_error(window: MainWindow, saved: Path, tmp_path: Path) -> None:
    """Random damage to a real saved project: loading either succeeds with values the views
    can show, or raises ProjectError naming the file; nothing else ever escapes."""
    good = json.loads(saved.read_text())
    rng = random.Random(11)
    path = tmp_path / "fuzzed.sxproj"
    loaded: dict[str, Path] = {}  # one successful load per top-level key it damaged, opened below
    errors = 0
    for k in range(300):
        d = copy.deepcopy(good)
        keys = {_mutate(d, rng) for _ in range(rng.randint(1, 3))}
        path.write_text(_dump(d))
        try:
            pr = project.load(path)
        except ProjectError as exc:
            assert str(exc).startswith(f"{path}: ") and len(str(exc)) < 2000, str(exc)
            errors += 1
            continue
        except Exception as exc:  # noqa: BLE001  # show which damage it was
            pytest.fail(f"sample {k} ({keys}): {type(exc).__name__}: {exc}\n{path.read_text()[:2000]}")
        _assert_displayable(pr)
        for key in keys - set(loaded):
            loaded[key] = tmp_path / f"ok-{key}.sxproj"
            loaded[key].write_text(path.read_text())
    assert errors > 100 and len(loaded) >= 5, (errors, sorted(loaded))
    for key, p in loaded.items():
        assert window.projects.open(p), key
        assert window.doc.pipeline is not None and window.performance.values["Median"].text()
        assert window.projects.save_as(tmp_path / "resaved.sxproj"), key  # and what opened saves and reads back
        assert project.load(tmp_path / "resaved.sxproj").pipeline.content_hash() == window.doc.pipeline.content_hash()


# --- saving: atomic, the file's mode kept, temporary files cleaned up ----------------------
def test_save_keeps_the_file_mode_and_a_new_file_gets_the_umask(window: MainWindow, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        new = tmp_path / "new.sxproj"
        assert window.projects.save_as(new)
        assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0o666 less the umask, not mkstemp's 0o600
        shared = tmp_path / "shared.sxproj"
        shared.write_text("{}")
        shared.chmod(0o664)
        assert window.projects.save_as(shared)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and project.load(shared).pipeline.name == "unsharp"
    finally:
        os.umask(old)


def test_a_failure_mid_write_removes_the_temporary_file(window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, before, warnings = _saved_then_edited(window, tmp_path, monkeypatch)
    written: list[str] = []

    def fail(fd: int) -> None:  # the data is written, the disk fails before it is safe
        written.extend(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    assert not window.projects.save()
    assert written and "Input/output error" in warnings[0]
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["p.sxproj"]

    def interrupt(fd: int) -> None:  # not an OSError (Ctrl+C): cleaned up all the same, and not swallowed
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        window.projects.save()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["p.sxproj"]


def test_a_killed_save_leaves_the_project_intact_and_its_temp_file_is_cleaned_up(window: MainWindow, tmp_path: Path) -> None:
    path = tmp_path / "p.sxproj"
    assert window.projects.save_as(path)
    before = path.read_bytes()
    # A real process killed (SIGKILL) between writing the temporary file and renaming it.
    code = (
        "import os, signal, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); from app.code_view import atomic_write; "
        "os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL); atomic_write(Path(sys.argv[2]), 'half')"
    )
    root = str(Path(__file__).resolve().parents[3])
    killed = subprocess.run([sys.executable, "-c", code, root, str(path)], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    (stray,) = [p for p in tmp_path.iterdir() if p.name != "p.sxproj"]
    assert stray.name.startswith(".p.sxproj.") and stray.name.endswith(".tmp") and stray.read_text() == "half"
    assert path.read_bytes() == before and project.load(path).pipeline.name == "unsharp"
    # A fresh one may be another save still under way: ignored. An old one is cleaned up.
    _edit_and_measure(window)
    assert window.projects.save()
    assert stray.exists() and project.load(path).notes == "vectorizing blur_x helps"
    an_hour_ago = time.time() - 3600
    os.utime(stray, (an_hour_ago, an_hour_ago))
    assert window.projects.save()
    assert [p.name for p in tmp_path.iterdir()] == ["p.sxproj"]


# --- a saved schedule that no longer applies: the project still opens ----------------------
def test_a_schedule_that_no_longer_applies_opens_as_an_invalid_variant(qtbot: QtBot, saved: Path, tmp_path: Path) -> None:
    d = json.loads(saved.read_text())
    wrong = {"kind": "vectorize", "loop": "nope", "factor": 4}
    d["variants"][1]["schedule"]["stages"]["blur_x"]["pure"].append(wrong)
    d["schedule"]["stages"]["blur_y"] = {"pure": [{"kind": "parallel", "loop": "zz"}]}
    path = tmp_path / "old.sxproj"
    path.write_text(json.dumps(d))
    p = Pipeline.from_json(d["pipeline"])
    reasons = []
    for sched in (d["variants"][1]["schedule"], d["schedule"]):
        with pytest.raises(ScheduleError) as info:
            validate(p, Schedule.from_json(sched))
        reasons.append(str(info.value))

    pr = project.load(path)
    assert pr.schedule_error == reasons[1] and "'zz'" in reasons[1]
    assert [v.invalid for v in pr.variants] == ["", reasons[0], "", reasons[1]]  # the current one kept as variant 4
    assert pr.schedule_spec == "default" and pr.schedule.content_hash() == default_schedule(p).content_hash()

    w = _window(qtbot)
    assert w.open_pipeline("blur")
    assert w.projects.open(path)
    assert w.doc.schedule_spec == "default" and w.doc.schedule_hash == default_schedule(p).content_hash() and not w.doc.edited
    assert [v.invalid for v in w.history.variants] == ["", reasons[0], "", reasons[1]]
    shown = w.statusBar().currentMessage()
    assert shown.startswith("old.sxproj: the saved schedule no longer applies, showing the default (") and reasons[1] in shown
    assert shown.endswith("variants that no longer apply to the pipeline (restoring one says why): 2, 4")
    assert not w.restore_variant(2) and w.undo_stack.count() == 0
    assert w.statusBar().currentMessage() == f"Variant 2 no longer applies: {reasons[0]}"
    assert w.restore_variant(3) and w.doc.schedule_hash == w.history.variants[2].hash  # a valid one still restores
    # Saving again loses nothing: the invalid schedules are still in the file.
    assert w.projects.save()
    again = project.load(path)
    assert [v.invalid for v in again.variants] == ["", reasons[0], "", reasons[1]] and again.schedule_error == ""
    w.close()


def test_a_schedule_this_version_cannot_read_opens_as_an_invalid_variant_and_is_saved_back(
    qtbot: QtBot, saved: Path, tmp_path: Path
) -> None:
    d = json.loads(saved.read_text())
    future = {"kind": "prefetch", "loop": "x", "distance": 2}  # a directive of another version
    d["variants"][1]["schedule"]["stages"]["blur_x"]["pure"].append(future)
    d["schedule"]["stages"]["blur_x"] = {"pure": [future]}
    path = tmp_path / "future.sxproj"
    path.write_text(json.dumps(d))
    pr = project.load(path)
    assert "unknown directive kind 'prefetch'" in pr.variants[1].invalid and pr.variants[1].raw is not None
    assert "unknown directive kind 'prefetch'" in pr.schedule_error and pr.schedule_spec == "default"
    w = _window(qtbot)
    assert w.open_pipeline("blur") and w.projects.open(path)
    assert not w.restore_variant(2)  # refused, with the reason
    assert "prefetch" in w.statusBar().currentMessage()
    assert w.projects.save()
    again = json.loads(path.read_text())
    assert future in again["variants"][1]["schedule"]["stages"]["blur_x"]["pure"]  # saved back as it was
    assert any(v["schedule"]["stages"].get("blur_x") == {"pure": [future]} for v in again["variants"])
    w.close()


def test_a_wrapper_directive_that_is_not_an_object_is_named_with_its_path(open_window, tmp_path: Path) -> None:
    w = open_window("matmul", "hand")  # its schedule carries B.in(prod)
    path = tmp_path / "packed.sxproj"
    assert w.projects.save_as(path)
    good = json.loads(path.read_text())
    assert good["schedule"]["wrappers"][0]["consumer"] == "prod"
    assert project.load(path).schedule.wrappers == w.doc.schedule.wrappers  # it reads back whole
    bad = tmp_path / "bad.sxproj"
    d = copy.deepcopy(good)
    d["schedule"]["wrappers"][0]["pure"][1] = 7
    assert _load_error(bad, d) == f"{bad}: schedule.wrappers[0].pure[1]: expected an object, got 7"
    d = copy.deepcopy(good)
    d["variants"][0]["schedule"]["wrappers"][0]["pure"] = [["compute_root"]]
    assert _load_error(bad, d) == f"{bad}: variants[0].schedule.wrappers[0].pure[0]: expected an object, got ['compute_root']"
