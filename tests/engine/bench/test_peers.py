"""Peers (engine/bench/peers.py): ONNX Runtime and PyTorch eager timed with the runner's protocol and
checked against the reference; `bench models` and `measure --peers` (JSON structure only:
timings are reported, never asserted)."""

import json
import math
from pathlib import Path

import pytest

from engine import api, zoo
from engine.bench.peers import measure_peers, time_callable
from tests.cli_fork import shared_server

ROOT = Path(__file__).resolve().parents[3]
SMALL_CNN = ROOT / "resources" / "models" / "small_cnn.onnx"
NATURAL = [
    "conv_relu",
    "depthwise_conv",
    "maxpool",
    "matmul",
    "mlp",
    "softmax",
    "layernorm",
    "resnet_block",
    "mobilenet_block",
    "attention",
]


def cli(*args):
    return shared_server().run(list(args), cwd=ROOT, timeout=600)  # `python main.py ARGS`, forked (tests/cli_fork.py)


def _finite_positive(t):
    return t.ok and t.median_ms is not None and math.isfinite(t.median_ms) and 0 < t.min_ms <= t.median_ms


def test_time_callable_follows_the_runner_protocol():
    calls = []
    got = time_callable(lambda: calls.append(1), min_time_s=0.0, rounds=2)
    assert got["runs"] >= 10 and len(calls) == got["runs"] + 2  # two rounds of >= 5 runs, after 2 warm-up runs
    assert len(got["round_medians_ms"]) == 2 and 0 <= got["min_ms"] <= got["median_ms"]


def test_both_peers_time_a_sample_model_and_agree_with_the_reference():
    p = api.load_pipeline(str(SMALL_CNN))
    got = {t.peer: t for t in measure_peers(p, min_time_s=0.01)}
    assert set(got) == {"onnxruntime", "pytorch"}
    for t in got.values():
        assert _finite_positive(t), t.error
        assert t.verified and t.threads >= 1 and t.version and t.what
    assert "SmallCNN" in got["pytorch"].what  # built from make_models.py, same weights as the file


@pytest.mark.parametrize("name", NATURAL)
def test_pytorch_peer_of_a_builtin_pipeline_agrees_with_the_reference(name):
    got = {t.peer: t for t in measure_peers(zoo.get(name, "small"), min_time_s=0.0)}
    assert _finite_positive(got["pytorch"]) and got["pytorch"].verified, got["pytorch"].error
    assert not got["onnxruntime"].available  # optional for built-in pipelines: not provided


def test_a_pipeline_without_a_natural_peer_says_why():
    got = {t.peer: t for t in measure_peers(zoo.get("blur", "small"), min_time_s=0.0)}
    assert not got["pytorch"].available and "stencil" in got["pytorch"].error


def test_bench_models_json_structure():
    r = cli(
        "bench",
        "models",
        "--models",
        str(SMALL_CNN),
        "--pipelines",
        "conv_relu",
        "--size",
        "small",
        "--repeats",
        "1",
        "--min-time",
        "0.01",
        "--search",
        "random",
        "--search-trials",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["note"].startswith("best found = the --search strategy's best")
    assert out["note"] in out["table"] and out["threads"] >= 1 and "load_avg_1m_before" in out["machine"]
    row = out["results"]["small_cnn"]
    assert row["kind"] == "model" and row["best_schedule"] == "random search"
    assert row["search"]["strategy"] == "random" and row["search"]["trials"] == 2
    for k in ("onnxruntime", "pytorch", "default", "best"):
        assert row[k]["ok"] and row[k]["verified"] and row[k]["median_ms"] > 0 and row[k]["spread"] >= 0
    for k in ("best_over_ort", "best_over_pytorch", "default_over_best"):
        assert row[k] > 0
    zoo_row = out["results"]["conv_relu"]
    assert zoo_row["best_schedule"] == "hand" and zoo_row["onnxruntime"]["available"] is False and zoo_row["pytorch"]["verified"]


def test_measure_heuristic_schedule_with_peers_json():
    r = cli("measure", str(SMALL_CNN), "--schedule", "heuristic", "--peers", "--json", "--no-db", "--no-profile", "--min-time", "0.01")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schedule"] == "heuristic" and out["verified"]
    assert {t["peer"] for t in out["peers"]} == {"onnxruntime", "pytorch"} and all(t["ok"] and t["verified"] for t in out["peers"])
