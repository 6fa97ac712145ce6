"""The CLI reaches what the app's Measure Again, Clear Stored Results and Apply (an
autoscheduler's schedule) do: `measure --force`, `forget PIPELINE`, `autoschedule --out`.
In process (engine.cli.main), each measurement in its own worker process as always."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

FAST = ("--size", "small", "--no-profile", "--min-time", "0", "--json")


def _run(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--db", str(db)])
    out, err = capsys.readouterr()
    return code, out, err


def _ok(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> dict:
    code, out, err = _run(capsys, db, *args)
    assert code == 0, err
    return json.loads(out)


def test_forget_clears_one_pipeline_and_force_measures_again(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    first = _ok(capsys, db, "measure", "blur", *FAST)
    _ok(capsys, db, "measure", "maxpool", *FAST)
    forced = _ok(capsys, db, "measure", "blur", "--force", *FAST)
    assert not forced["cached"] and forced["created"] > first["created"]
    gone = _ok(capsys, db, "forget", "blur", "--size", "small", "--json")
    assert (gone["pipeline"], gone["measurements"], gone["failures"]) == ("blur", 1, 0)
    assert _ok(capsys, db, "measure", "maxpool", *FAST)["cached"]  # another pipeline's result kept
    code, _, err = _run(capsys, db, "forget", "nope")
    assert code == 2 and err.count("\n") == 1 and "unknown pipeline 'nope'" in err


def test_autoschedule_out_writes_a_schedule_that_measures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db, out = tmp_path / "m.sqlite", tmp_path / "adams.json"
    got = _ok(capsys, db, "autoschedule", "blur", "--out", str(out), *FAST)
    assert got["out"] == str(out) and any("store_in" in n for n in got["dropped"])
    again = _ok(capsys, db, "measure", "blur", "--schedule", str(out), *FAST)
    assert again["ok"] and again["verified"] and again["schedule"] == "Adams2019 (translated)"
