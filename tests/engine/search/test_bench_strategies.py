"""`bench strategies`: the model objective counts evaluations and stops at the budget; curves,
quartiles and final verified times from real runs (blur, small: real Halide measurements)."""

from __future__ import annotations

import json
import statistics

import pytest

from engine import api, zoo
from engine.bench.strategies import band, bench_strategies, best_so_far, grid, model_run
from engine.costmodel import AnalyticModel


def test_model_objective_stops_at_the_budget_and_its_curve_is_the_running_best():
    p = zoo.get("conv_relu", "small")
    r = model_run(p, "evolution", AnalyticModel(), 37, seed=2, wall_s=120)
    assert r["evaluations"] == 37 and len(r["curve"]) == 37
    assert all(b <= a for a, b in zip(r["curve"], r["curve"][1:]))
    assert r["best_ms"] == r["curve"][-1] and r["schedule"] is not None
    assert AnalyticModel().predict(p, r["schedule"]).total_ms == pytest.approx(r["best_ms"])


def test_band_and_grid():
    assert best_so_far([3.0, None, 2.0, 5.0]) == [3.0, 3.0, 2.0, 2.0]
    xs = grid(500)
    assert xs[0] == 1 and xs[-1] == 500 and xs == sorted(set(xs))
    b = band([[4.0, 3.0, 1.0], [5.0, 2.0], [6.0, 6.0, 6.0]], [1, 3])  # a shorter run keeps its last value
    assert b["median"] == [5.0, 2.0] and b["q1"] == [4.5, 1.5] and b["q3"] == [5.5, 4.0]


def test_bench_strategies_on_both_objectives(tmp_path):
    out = tmp_path / "partial.json"
    res = bench_strategies(
        pipelines=["blur"], strategies=["random", "evolution"], size="small", seeds=2, evals=30, measurements=3, hw_seeds=1,
        model="analytic", repeats=1, min_time_s=0.0, checkpoint=str(out),
    )  # fmt: skip
    assert json.loads(out.read_text())["partial"] is True and "partial" not in res
    row = res["pipelines"]["blur"]
    for s in ("random", "evolution"):
        m = row["model"][s]
        assert [r["evaluations"] for r in m["runs"]] == [30, 30]
        assert m["final"]["median_ms"] == pytest.approx(statistics.median(r["best_ms"] for r in m["runs"]))
        c = m["curve_evaluations"]
        assert c["x"][-1] == 30 and c["median"][-1] == pytest.approx(m["final"]["median_ms"])
        assert all(a <= b <= d for a, b, d in zip(c["q1"], c["median"], c["q3"]))
        assert all(r["verified_ms"] > 0 for r in m["runs"])  # each best measured, verified
        h = row["hardware"][s]
        assert h["runs"][0]["measurements"] == 3 and h["runs"][0]["verified_ms"] > 0
        assert len(h["curve_measurements"]["x"]) == 3 and h["curve_evaluations"]["x"][-1] == h["runs"][0]["evaluations"]
    assert res["summary"]["model"]["winner"]["blur"] in ("random", "evolution")
    assert "| blur |" in res["table"] and res["machine"]["host"]


def test_bench_strategies_bad_input_is_one_error():
    with pytest.raises(api.InputError, match="unknown strategy 'nope'"):
        bench_strategies(pipelines=["blur"], strategies=["nope"])
    with pytest.raises(api.InputError, match="unknown pipeline 'nope'"):
        bench_strategies(pipelines=["nope"], strategies=["random"])
