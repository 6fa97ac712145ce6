"""`bench import` (on a small model here: ResNet-50 takes a minute to export and compile),
and what it made faster in the importer: the weights file, the module paths kept outside
the content hash."""

import hashlib
import json
from pathlib import Path

import numpy as np

from engine import cli
from engine.frontends import import_onnx
from engine.frontends.common import write_weights

MODEL = Path(__file__).resolve().parents[3] / "resources" / "models" / "small_cnn.onnx"


def test_bench_import_times_every_phase(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    assert cli.main(["bench", "import", "--model", str(MODEL), "--repeats", "2", "--compare-whole", "1", "--json", "--out", str(out)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r == json.loads(out.read_text())
    assert list(r["phases"]) == ["import", "schedule", "lower", "compile"] and len(r["runs"]) == 2
    assert all(v["wall_s"] > 0 and v["cpu_s"] >= 0 for v in r["phases"].values())
    assert r["total_s"] == sum(sorted(sum(run[k]["wall_s"] for k in r["phases"]) for run in r["runs"])) / 2
    assert r["model"]["stages"] > 5 and r["under_target"] == (r["total_s"] < 5.0) and r["verify"] is None
    assert "| compile |" in r["table"]
    assert r["segments"] is None and len(r["compile_whole_runs"]) == 1 and r["compile_whole_s"] > 0  # small: one pipeline


def test_weights_file_is_reproducible_and_loadable(tmp_path) -> None:
    arrays = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.ones(4, np.float32), "e": np.zeros((0, 2), np.float32)}
    p1, d1 = write_weights(arrays, tmp_path / "one", "w")
    p2, d2 = write_weights(dict(reversed(arrays.items())), tmp_path / "two", "w")
    assert d1 == d2 == hashlib.sha256(p1.read_bytes()).hexdigest() and p1.read_bytes() == p2.read_bytes()
    with np.load(p1, allow_pickle=False) as z:
        assert sorted(z.files) == ["a", "b", "e"] and np.array_equal(z["b"], arrays["b"]) and z["e"].shape == (0, 2)


def test_module_paths_do_not_change_the_content_hash(tmp_path) -> None:
    p = import_onnx(MODEL, tmp_path).pipeline
    assert p.source["scopes"] and set(p.source["scopes"]) <= set(p.stage_map)
    h = p.content_hash()
    p.source = {k: v for k, v in p.source.items() if k != "scopes"}
    assert p.content_hash() == h
