"""Tuning for real (real worker processes, real SQLite): records per task that a second run
resumes from and another model with the same task starts from; the `tune` command's JSON,
its end-to-end comparison (verified) and its saved schedule loading back."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_fixtures import repeated_net

from engine import api
from engine.database import Database
from engine.heuristic import heuristic_schedule
from engine.measure import Runner
from engine.schedule import default_schedule
from engine.tuning import extract_tasks, keep_faster, tune
from engine.tuning.records import load
from engine.tuning.tune import where_of

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def runner():
    with Runner(1) as r:
        yield r


def test_records_resume_a_model_and_start_another_with_the_same_task(runner, tmp_path):
    p = repeated_net(c=4, hw=8, repeats=3)
    with Database(tmp_path / "t.sqlite") as db:
        first = tune(p, runner, trials=4, db=db, budget_s=300)
        assert first.trials == 4
        tuned = [t for t in first.tasks if t.best_ms is not None]
        assert tuned
        for t in tuned:
            rec = load(db, t.key, where_of(runner))
            assert rec is not None and rec.best_ms == t.best_ms and rec.trials == t.trials
        again = tune(p, runner, trials=1, db=db, budget_s=300)
        assert {t.key: t.resumed_trials for t in again.tasks if t.resumed_trials} == {t.key: t.trials for t in tuned}
        # Another model (two of the layers, then the same 1x1 conv) shares the conv task.
        other = repeated_net(c=4, hw=8, repeats=2)
        shared = {t.key for t in extract_tasks(other, heuristic_schedule(other))} & {t.key for t in tuned}
        assert shared
        got = tune(other, runner, trials=1, db=db, budget_s=300)
        assert all(t.resumed_trials > 0 for t in got.tasks if t.key in shared)


def test_tune_command_reports_tasks_and_end_to_end_and_saves_a_loadable_schedule(tmp_path):
    p = repeated_net(c=4, hw=8, repeats=2)
    model = tmp_path / "net.json"
    model.write_text(json.dumps(p.to_json()))
    out = tmp_path / "tuned.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["tune", str(model), "--trials", "3", "--repeats", "1", "--min-time", "0", "--threads", "1"]
    args += ["--db", str(tmp_path / "c.sqlite"), "--out", str(out), "--quiet", "--json"]
    r = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["trials"] == 3 and obj["distinct_tasks"] == len(obj["tasks"]) >= 2
    assert sum(t["occurrences"] for t in obj["tasks"]) == obj["units"]
    for t in obj["tasks"]:
        assert {"occurrences", "start_ms", "best_ms", "trials"} <= t.keys()
    e2e = obj["end_to_end"]
    assert e2e["heuristic_verified"] and e2e["tuned_verified"] and e2e["heuristic_ms"] > 0 and e2e["tuned_ms"] > 0
    assert e2e["onnxruntime_ms"] is None  # not an ONNX model: ONNX Runtime has nothing to run
    assert e2e["pytorch_verified"] and e2e["pytorch_ms"] > 0  # torch.nn.functional from the operator records
    assert obj["saved"] == ("heuristic" if e2e["tuned_ms"] >= e2e["heuristic_ms"] else "tuned")
    sched = api.load_schedule(p, str(out))  # validated against the pipeline
    assert sched.to_json()["stages"] == json.loads(out.read_text())["stages"]
    bad = subprocess.run([sys.executable, str(ROOT / "main.py"), "tune", str(tmp_path / "missing.onnx")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.onnx" in bad.stderr


def test_keep_faster_keeps_the_start_when_the_tuned_model_measures_no_faster():
    p = repeated_net(c=4, hw=8, repeats=2)
    start, tuned = heuristic_schedule(p), default_schedule(p)

    def cell(ms: float | None, ok: bool = True) -> dict:
        return {"ok": ok, "median_ms": ms}

    assert keep_faster(start, tuned, {"heuristic": cell(2.0), "tuned": cell(1.5)}) == (tuned, "tuned")
    assert keep_faster(start, tuned, {"heuristic": cell(2.0), "tuned": cell(2.5)}) == (start, "heuristic")
    assert keep_faster(start, tuned, {"heuristic": cell(2.0), "tuned": cell(2.0)}) == (start, "heuristic")
    # without two verified whole-model times nothing contradicts the tuned schedule
    assert keep_faster(start, tuned, {"heuristic": cell(None, False), "tuned": cell(2.5)}) == (tuned, "tuned")
    assert keep_faster(start, tuned, {}) == (tuned, "tuned")
