"""`costmodel calibrate`: real measurements of zoo schedules against every model's predictions."""

import json
import math
import sqlite3

from engine import cli, zoo
from engine.costmodel import SHIPPED
from engine.costmodel.calibration import summary
from engine.hand_schedules import hand_schedule
from engine.heuristic import heuristic_schedule
from engine.schedule import default_schedule


def _distinct_schedules(pipelines: tuple[str, ...], size: str) -> set[tuple[str, str]]:
    """(pipeline, schedule hash) of the default, hand and heuristic schedules: two that are
    the same schedule (matmul's hand and heuristic both pack B) are measured once."""
    out = set()
    for name in pipelines:
        p = zoo.get(name, size)
        for s in (default_schedule(p), hand_schedule(p), heuristic_schedule(p)):
            out.add((name, s.content_hash()))
    return out


def test_calibrate_measures_once_and_scores_every_model(tmp_path, capsys) -> None:
    db = tmp_path / "m.sqlite"
    args = ["costmodel", "calibrate", "--db", str(db), "--models-dir", str(SHIPPED), "--pipelines", "blur,matmul", "--size", "small"]
    assert cli.main([*args, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    expected = [(p, s) for p in ("blur", "matmul") for s in ("default", "hand", "heuristic")]
    assert [(x["pipeline"], x["schedule"]) for x in r["rows"]] == expected
    assert all(x["measured_ms"] > 0 and set(x["predicted_ms"]) == {"analytic", "gnn", "halide", "tvm"} for x in r["rows"])
    for m in r["models"].values():
        assert m["n"] == 6 and m["mean_abs_log_err"] >= 0 and 0 <= m["within_2x"] <= 1 and 0 <= m["order_acc"] <= 1
    stored = sqlite3.connect(db).execute("SELECT count(*) FROM measurements").fetchone()[0]
    assert stored == len(_distinct_schedules(("blur", "matmul"), "small"))  # one measurement per distinct schedule
    assert cli.main(args) == 0  # the second time every measurement comes from the database
    assert "| gnn |" in capsys.readouterr().out
    assert sqlite3.connect(db).execute("SELECT count(*) FROM measurements").fetchone()[0] == stored


def test_summary_of_a_model_off_by_a_known_factor() -> None:
    rows = [
        {"pipeline": "a", "measured_ms": 1.0, "predicted_ms": {"m": 2.0}},
        {"pipeline": "a", "measured_ms": 4.0, "predicted_ms": {"m": 8.0}},
        {"pipeline": "b", "measured_ms": 3.0, "predicted_ms": {"m": 0.75}},
        {"pipeline": "b", "error": "not verified"},
    ]
    s = summary(rows, "m")
    assert s["n"] == 3 and math.isclose(s["median_ratio"], 2.0)
    assert math.isclose(s["mean_abs_log_err"], (2 * math.log(2) + math.log(4)) / 3)
    assert math.isclose(s["within_2x"], 2 / 3) and s["order_acc"] == 1.0
