"""The CLI: JSON fields, exit codes, and the database left intact by errors."""

import json
import os
from pathlib import Path

import pytest

from tests.cli_fork import shared_server

ROOT = Path(__file__).resolve().parents[3]


def cli(*args, db=None):
    """`python main.py ARGS` in its own process (forked from a server that imported the CLI once)."""
    env = dict(os.environ, SCHEDULE_EXPLORER_DB=str(db)) if db is not None else None
    return shared_server().run(list(args), env=env, cwd=ROOT, timeout=600)


def test_pipelines_lists_the_zoo():
    r = cli("pipelines", "--json")
    assert r.returncode == 0, r.stderr
    names = {p["name"] for p in json.loads(r.stdout)["pipelines"]}
    assert {"blur", "unsharp", "harris", "conv_relu", "depthwise_conv", "maxpool", "matmul", "mlp", "softmax"} <= names
    assert {"layernorm", "resnet_block", "mobilenet_block", "attention"} <= names
    assert all(p["stages"] >= 1 and p["description"] for p in json.loads(r.stdout)["pipelines"])


def test_show_has_pipeline_schedule_and_loop_nest():
    r = cli("show", "conv_relu", "--size", "small", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pipeline"]["name"] == "conv_relu" and "stages" in out["schedule"]
    assert "produce relu" in out["loop_nest"]


def test_measure_json_fields_and_cache(tmp_path):
    db = tmp_path / "cli.sqlite"
    r = cli("measure", "blur", "--size", "small", "--json", "--min-time", "0.05", db=db)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("pipeline", "schedule_hash", "median_ms", "min_ms", "compile_s", "verified", "max_abs_err", "threads", "stages"):
        assert key in out
    assert out["verified"] is True and out["cached"] is False and set(out["stages"]) == {"blur_x", "blur_y"}
    again = json.loads(cli("measure", "blur", "--size", "small", "--json", db=db).stdout)
    assert again["cached"] is True and again["median_ms"] == out["median_ms"]


def test_autoschedule_json_fields():
    r = cli("autoschedule", "blur", "--size", "small", "--with", "Mullapudi2016", "--json", "--no-db", "--min-time", "0.05")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified"] is True and out["median_ms"] > 0 and out["search_s"] >= 0
    assert "blur_y" in out["schedule_source"]


def test_lower_prints_stmt(tmp_path):
    html = tmp_path / "stmt.html"
    r = cli("lower", "blur", "--size", "small", "--html", str(html))
    assert r.returncode == 0, r.stderr
    assert "produce blur_y" in r.stdout
    assert html.read_text().lstrip().lower().startswith("<!doctype html") or "<html" in html.read_text()[:500].lower()


def test_export_schedule_source():
    r = cli("export", "blur", "--size", "small", "--lang", "python", "--json")
    assert r.returncode == 0, r.stderr
    assert "blur_x.compute_root()" in json.loads(r.stdout)["source"]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["measure", "no_such_pipeline"], "unknown pipeline"),
        (["measure", "blur", "--schedule", "BADJSON"], "malformed JSON"),
        (["measure", "blur", "--schedule", "INVALID"], "blur_y"),
        (["show", "blur", "--schedule", "missing.json"], "expected default, hand or an existing JSON file"),
    ],
)
def test_errors_exit_2_with_one_line_and_leave_db_intact(tmp_path, args, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text('{"stages": {')
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"stages": {"blur_y": {"pure": [{"kind": "vectorize", "loop": "q", "factor": 8}]}}}))
    args = [str(bad) if a == "BADJSON" else str(invalid) if a == "INVALID" else a for a in args]
    db = tmp_path / "db.sqlite"
    from engine.database import Database

    Database(db).close()
    before = db.stat().st_size
    r = cli(*args, "--size", "small", db=db)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr
    assert db.stat().st_size == before


def test_bad_pipeline_files_exit_2(tmp_path):
    from engine import zoo

    d = zoo.get("blur", "small").to_json()
    d["stages"][1]["value"]["args"][1] = 0.0  # a wrong declaration: verification must fail
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(d))
    r = cli("measure", str(wrong), "--no-db", "--json", "--min-time", "0.02")
    assert r.returncode == 2 and "verification" in r.stderr
    assert json.loads(r.stdout)["verified"] is False
    read = {"at": "a", "idx": [{"op": "+", "args": [{"var": "x"}, 100]}]}
    oob = {"inputs": [{"name": "a", "shape": [8]}], "outputs": ["out"], "stages": [{"name": "out", "dims": [["x", 8]], "value": read}]}
    f = tmp_path / "oob.json"
    f.write_text(json.dumps(oob))
    r = cli("measure", str(f), "--no-db")
    assert r.returncode == 2 and "outside its extent 8" in r.stderr


def test_bench_core_runs_and_reports(tmp_path):
    out = tmp_path / "bench.json"
    r = cli("bench", "core", "--size", "small", "--pipelines", "blur", "--autoschedulers", "Mullapudi2016", "--repeats", "2",
            "--min-time", "0.02", "--json", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    row = res["pipelines"]["blur"]
    assert row["default"]["verified"] and row["hand"]["verified"] and row["Mullapudi2016"]["verified"]
    assert len(row["hand"]["round_medians_ms"]) == 2
    assert res["runner_overhead_ms"] > 0 and res["fma_peak_gflops"] > 0
    assert "| blur |" in res["table"]


def test_search_json_fields_and_the_schedule_loads_back(tmp_path):
    out = tmp_path / "best.json"
    r = cli("search", "blur", "--size", "small", "--strategy", "greedy", "--trials", "3", "--budget-s", "60", "--model", "analytic",
            "--out", str(out), "--json", db=tmp_path / "m.sqlite")  # fmt: skip
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["verified"] is True and res["trials"] == 3 and res["best_ms"] > 0 and res["search_s"] > 0
    assert res["baseline"]["autoscheduler"] == "Adams2019" and res["baseline_ms"] > 0 and res["baseline"]["error"] is None
    assert res["speedup_over_baseline"] == pytest.approx(res["baseline_ms"] / res["best_ms"])
    assert res["model"].startswith("analytic") and res["schedule"]["stages"]
    m = cli("measure", "blur", "--size", "small", "--schedule", str(out), "--json", "--no-db", "--min-time", "0.01")
    assert m.returncode == 0 and json.loads(m.stdout)["verified"] is True
    bad = cli("search", "blur", "--size", "small", "--model", "nosuchmodel", "--json", db=tmp_path / "m.sqlite")
    assert bad.returncode == 2 and "nosuchmodel" in bad.stderr and "Traceback" not in bad.stderr
