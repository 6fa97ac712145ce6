"""The CLI reaches what the app's Measure Again, Clear Stored Results and Apply (an
autoscheduler's schedule) do: `measure --force`, `forget PIPELINE`, `autoschedule --out`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAST = ("--size", "small", "--no-profile", "--min-time", "0", "--json")


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCHEDULE_EXPLORER_DB=str(db))
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)


def _ok(r: subprocess.CompletedProcess[str]) -> dict:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_forget_clears_one_pipeline_and_force_measures_again(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    first = _ok(cli(db, "measure", "blur", *FAST))
    _ok(cli(db, "measure", "maxpool", *FAST))
    forced = _ok(cli(db, "measure", "blur", "--force", *FAST))
    assert not forced["cached"] and forced["created"] > first["created"]
    gone = _ok(cli(db, "forget", "blur", "--size", "small", "--json"))
    assert (gone["pipeline"], gone["measurements"], gone["failures"]) == ("blur", 1, 0)
    assert _ok(cli(db, "measure", "maxpool", *FAST))["cached"]  # another pipeline's result kept
    bad = cli(db, "forget", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown pipeline 'nope'" in bad.stderr


def test_autoschedule_out_writes_a_schedule_that_measures(tmp_path: Path) -> None:
    db, out = tmp_path / "m.sqlite", tmp_path / "adams.json"
    got = _ok(cli(db, "autoschedule", "blur", "--out", str(out), *FAST))
    assert got["out"] == str(out) and any("store_in" in n for n in got["dropped"])
    again = _ok(cli(db, "measure", "blur", "--schedule", str(out), *FAST))
    assert again["ok"] and again["verified"] and again["schedule"] == "Adams2019 (translated)"
