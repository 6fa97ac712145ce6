"""Bad input to `python main.py ...` never prints a traceback: every case is one line on
stderr starting with 'error: ' that names what is wrong, exit status 2, nothing on stdout,
and nothing written (no database created, a given database unchanged, no output file).

Argument errors come from argparse through engine/cli/args.ArgumentParser, in the same
one-line form: 'error: schedule-explorer measure: argument --threads: ...'. Each case runs
the real CLI in its own process and fails before anything is measured: forked from a server
that has imported the CLI once (tests/cli_fork.py), with a few cases also run as a plain
`python main.py` subprocess, which must give the same result. The importer's window checks and
the database's version handling are also tested in process.
"""

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import zoo
from engine.database import SCHEMA_VERSION, Database, DatabaseError
from tests.cli_fork import CliForkServer

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def forked():
    with CliForkServer(preload=("onnx", "torch")) as srv:
        yield srv


def cli(args, env_db, *, env=None, forked=None, **popen):
    """Run the CLI with SCHEDULE_EXPLORER_DB at `env_db` (which must stay uncreated): forked
    from `forked` when given, else as `python main.py` in a subprocess."""
    full_env = dict(os.environ, SCHEDULE_EXPLORER_DB=str(env_db), **(env or {}))
    if forked is not None:
        return forked.run(list(map(str, args)), env=full_env, cwd=ROOT)
    cmd = [sys.executable, str(ROOT / "main.py"), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=full_env, timeout=300, **popen)


def assert_one_line_error(r, *fragments):
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > len("error: "), r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert r.stdout == "", r.stdout


def files_under(d):
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if p.is_file())


# --- bad files -----------------------------------------------------------------------------
def _real_db(path):
    with Database(path) as db:
        for k in range(40):  # enough pages that cutting the file loses some
            db.put_pipeline(f"h{k}", "resnet_block", zoo.get("resnet_block", "full").to_json())
    return path


def _deep_expr(n):
    e = '{"op": "+", "args": [' * n + '{"var": "x"}' + ", 1]}" * n
    stage = '{"name": "out", "dims": [["x", 8]], "value": ' + e + "}"
    return '{"inputs": [{"name": "a", "shape": [8]}], "outputs": ["out"], "stages": [' + stage + "]}"


def _onnx(path, nodes, x_shape, inits=None):
    """A model whose output has symbolic dimensions: ONNX's own shape inference (strict at
    import) checks what it knows about an attribute, the importer the rest."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["d0", "d1", "d2", "d3"][: len(x_shape)])],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def conv_model(path, op="Conv", w_shape=(4, 3, 3, 3), x_shape=(1, 3, 8, 8), **attrs):
    w = np.random.default_rng(0).uniform(-1, 1, w_shape).astype(np.float32)
    nodes = [helper.make_node(op, ["x", "W"], ["c"], name="conv1", **attrs), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return _onnx(path, nodes, x_shape, {"W": w})


def pool_model(path, op="MaxPool", **attrs):
    attrs = {"kernel_shape": [3, 3], **attrs}
    nodes = [helper.make_node(op, ["x"], ["c"], name="pool1", **attrs), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return _onnx(path, nodes, (1, 3, 8, 8))


def conv_transpose_model(path, **mutate):
    return conv_model(path, "ConvTranspose", (3, 4, 3, 3), **mutate)


def conv1d_model(path, **mutate):
    return conv_model(path, w_shape=(4, 3, 3), x_shape=(1, 3, 8), **mutate)


def avgpool_model(path, **mutate):
    return pool_model(path, "AveragePool", **mutate)


TORCH_MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))
"""


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    """Bad inputs of every kind, by name; {name} in a case's arguments becomes its path. Made
    once: every case checks that it changed none of them and wrote nothing under {tmp}."""
    tmp_path = tmp_path_factory.mktemp("bad")
    d = tmp_path / "in"
    d.mkdir()
    f = {"tmp": tmp_path}
    f["latin1_json"] = d / "latin1.json"
    f["latin1_json"].write_bytes(b'{"name": "caf\xe9", "stages": {}}')
    f["deep_json"] = d / "deep.json"
    f["deep_json"].write_text("[" * 100_000 + "]" * 100_000)
    f["deep_expr_json"] = d / "deep_expr.json"
    f["deep_expr_json"].write_text(_deep_expr(480))  # parses; 965 levels deep
    f["dir_json"] = d / "folder.json"
    f["dir_json"].mkdir()
    f["garbage_onnx"] = d / "garbage.onnx"
    f["garbage_onnx"].write_bytes(b"\xe9\xff\xfe" * 100)
    f["a_file"] = d / "plain.txt"
    f["a_file"].write_text("x")
    f["a_dir"] = d / "folder"
    f["a_dir"].mkdir()
    f["missing_dir"] = d / "no" / "such" / "dir"
    f["model"] = conv_model(d / "ok.onnx")
    # SQLite files
    f["garbage_db"] = d / "garbage.sqlite"
    f["garbage_db"].write_bytes(b"this is not a database\n" * 200)
    real = _real_db(d / "real.sqlite")
    data = real.read_bytes()
    f["truncated_db"] = d / "truncated.sqlite"
    f["truncated_db"].write_bytes(data[: len(data) // 2])
    f["cut_header_db"] = d / "cut_header.sqlite"
    f["cut_header_db"].write_bytes(data[:60])
    f["newer_db"] = d / "newer.sqlite"
    shutil.copy(real, f["newer_db"])
    conn = sqlite3.connect(f["newer_db"])
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    f["other_db"] = d / "other.sqlite"
    conn = sqlite3.connect(f["other_db"])
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    # ONNX with text that is not UTF-8 where protobuf does not check (names, string attributes)
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="ZZZZrelu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    f["bad_name_onnx"] = d / "bad_name.onnx"
    f["bad_name_onnx"].write_bytes(m.SerializeToString().replace(b"ZZZZ", b"\xff\xfe\xfd\xfc"))
    f["bad_attr_onnx"] = pool_model(d / "bad_attr.onnx", auto_pad=b"\xff\xfe")
    f["torch_model"] = d / "net.py"
    f["torch_model"].write_text(TORCH_MODEL)
    f["bad_dataset"] = d / "bad.jsonl.gz"
    with gzip.open(f["bad_dataset"], "wb") as z:
        z.write(b'{"kind": "header", "format": 1}\n\xff\xfe\n')
    return f


def _fill(args, f):
    return [str(a).format(**{k: str(v) for k, v in f.items()}) for a in args]


S = ["--size", "small"]
NET = ["import", "{torch_model}:Net", "--weights-dir", "{tmp}/w"]
CASES = {
    # numeric options: range-checked by engine/cli/args.py for every subcommand
    "threads_huge": (["measure", "blur", *S, "--threads", "99999999999999999999"], ["--threads", "1 to 1024"]),
    "threads_zero": (["measure", "blur", *S, "--threads", "0"], ["--threads"]),
    "threads_text": (["autoschedule", "blur", *S, "--threads", "many"], ["--threads", "'many'"]),
    "threads_search": (["search", "blur", *S, "--threads", "-4"], ["--threads"]),
    "threads_costmodel": (["costmodel", "calibrate", "--threads", "5000"], ["--threads"]),
    "timeout_nan": (["measure", "blur", *S, "--timeout", "nan"], ["--timeout", "'nan'"]),
    "timeout_negative": (["autoschedule", "blur", *S, "--timeout", "-5"], ["--timeout"]),
    "timeout_inf": (["costmodel", "generate", "--timeout", "inf"], ["--timeout"]),
    "min_time_inf": (["measure", "blur", *S, "--min-time", "inf"], ["--min-time"]),
    "min_time_text": (["bench", "core", "--min-time", "fast"], ["--min-time", "'fast'"]),
    "budget_zero": (["search", "blur", *S, "--budget-s", "0"], ["--budget-s"]),
    "trials_float": (["search", "blur", *S, "--trials", "2.5"], ["--trials", "'2.5'"]),
    "seed_negative": (["search", "blur", *S, "--seed", "-1"], ["--seed"]),
    "seed_too_big": (["bench", "search", "--seed", str(2**40)], ["--seed"]),
    "repeats_negative": (["bench", "core", "--repeats", "-1"], ["--repeats"]),
    "repeats_zero_models": (["bench", "models", "--repeats", "0"], ["--repeats"]),
    "repeats_import": (["bench", "import", "--repeats", "-2"], ["--repeats"]),
    "resnet_size_too_small": (["bench", "import", "--size", "8"], ["--size", "32 to 4096"]),
    "verify_size": (["bench", "import", "--verify-size", "5"], ["--verify-size", "or 0"]),
    "workers_zero": (["costmodel", "generate", "--workers", "0"], ["--workers"]),
    "max_stages_one": (["costmodel", "generate", "--max-stages", "1"], ["--max-stages"]),
    "epochs_zero": (["costmodel", "train", "--epochs", "0"], ["--epochs"]),
    "holdout_all": (["costmodel", "train", "--holdout-pipelines", "1.5"], ["--holdout-pipelines"]),
    "rank_weight_nan": (["costmodel", "train", "--rank-weight", "nan"], ["--rank-weight"]),
    # comma lists checked against what they name
    "bench_core_unknown_pipeline": (["bench", "core", *S, "--pipelines", "nope"], ["--pipelines", "'nope'", "blur"]),
    "bench_core_empty_name": (["bench", "core", "--pipelines", "blur,,unsharp"], ["--pipelines", "empty name"]),
    "bench_core_empty_list": (["bench", "core", "--pipelines", ","], ["--pipelines"]),
    "bench_core_autoscheduler": (["bench", "core", "--autoschedulers", "Adams2019,Foo"], ["--autoschedulers", "'Foo'"]),
    "bench_search_pipeline": (["bench", "search", "--pipelines", "blur,nope"], ["--pipelines", "'nope'"]),
    "bench_search_strategy": (["bench", "search", "--strategies", "greedy,nope"], ["--strategies", "'nope'"]),
    "bench_search_model": (["bench", "search", "--model", "forest"], ["--model", "'forest'"]),
    "bench_models_pipeline": (["bench", "models", "--pipelines", "nope"], ["--pipelines", "'nope'"]),
    "bench_models_search": (["bench", "models", "--search", "nope"], ["--search", "'nope'"]),
    "bench_models_missing_model": (["bench", "models", "--models", "{tmp}/missing.onnx"], ["--models", "no such file"]),
    "calibrate_pipeline": (["costmodel", "calibrate", "--pipelines", "nope"], ["--pipelines", "'nope'"]),
    "train_models": (["costmodel", "train", "--models", "gnn,forest"], ["--models", "'forest'"]),
    "search_model": (["search", "blur", *S, "--model", "forest"], ["--model"]),
    "missing_pipeline_argument": (["measure"], ["pipeline"]),
    "unknown_bench": (["bench", "frobnicate"], ["frobnicate"]),
    # files the command would write: checked before any work
    "out_is_directory": (["bench", "core", *S, "--out", "{a_dir}"], ["--out", "is a directory"]),
    "out_in_missing_directory": (["search", "blur", *S, "--out", "{missing_dir}/best.json"], ["--out", "does not exist"]),
    "html_is_directory": (["lower", "blur", *S, "--html", "{a_dir}"], ["--html", "is a directory"]),
    "export_out_is_directory": (["costmodel", "export", "--out", "{a_dir}"], ["--out"]),
    "weights_dir_under_a_file": (["import", "{model}", "--weights-dir", "{a_file}/w"], ["--weights-dir", "not a directory"]),
    "train_out_is_a_file": (["costmodel", "train", "--out", "{a_file}"], ["--out", "not a directory"]),
    "bench_import_model_dir": (["bench", "import", "--model", "{a_dir}"], ["--model", "not a regular file"]),
    # pipeline and schedule files
    "pipeline_not_utf8": (["show", "{latin1_json}"], ["latin1.json", "UTF-8"]),
    "schedule_not_utf8": (["show", "blur", *S, "--schedule", "{latin1_json}"], ["latin1.json", "UTF-8"]),
    "pipeline_deep_json": (["show", "{deep_json}"], ["deep.json", "nested"]),
    "schedule_deep_json": (["measure", "blur", *S, "--schedule", "{deep_json}"], ["nested"]),
    "pipeline_deep_expression": (["measure", "{deep_expr_json}", "--no-db"], ["deep_expr.json", "965 levels deep"]),
    "pipeline_is_directory": (["show", "{dir_json}"], ["folder.json", "cannot be read"]),
    "schedule_is_directory": (["export", "blur", *S, "--schedule", "{dir_json}"], ["folder.json", "cannot be read"]),
    "onnx_not_a_model": (["show", "{garbage_onnx}"], ["garbage.onnx", "not a readable ONNX model"]),
    "onnx_name_not_utf8": (["import", "{bad_name_onnx}", "--weights-dir", "{tmp}/w"], ["bad_name.onnx", "node[0].name", "UTF-8"]),
    "onnx_attribute_not_utf8": (["import", "{bad_attr_onnx}", "--weights-dir", "{tmp}/w"], ["'pool1'", "'auto_pad'", "UTF-8"]),
    "dataset_not_utf8": (["costmodel", "export", "--db", "{bad_dataset}", "--out", "{tmp}/x.jsonl.gz"], ["bad.jsonl.gz"]),
    # SQLite: --db is a directory, not a regular file, not a database, cut short, newer, another program's
    "db_directory": (["measure", "blur", *S, "--db", "{a_dir}"], ["folder", "is a directory"]),
    "db_dev_null": (["measure", "blur", *S, "--db", "/dev/null"], ["/dev/null", "not a regular file"]),
    "db_garbage": (["measure", "blur", *S, "--db", "{garbage_db}"], ["garbage.sqlite", "not an SQLite database"]),
    "db_truncated": (["measure", "blur", *S, "--db", "{truncated_db}"], ["truncated.sqlite", "truncated"]),
    "db_cut_in_header": (["autoschedule", "blur", *S, "--db", "{cut_header_db}"], ["cut_header.sqlite"]),
    "db_newer_schema": (["measure", "blur", *S, "--db", "{newer_db}"], ["newer.sqlite", f"schema version {SCHEMA_VERSION + 1}"]),
    "db_other_program": (["measure", "blur", *S, "--db", "{other_db}"], ["other.sqlite", "not a Schedule Explorer database"]),
    "db_under_a_file": (["measure", "blur", *S, "--db", "{a_file}/m.sqlite"], ["plain.txt", "not a directory"]),
    "db_search": (["search", "blur", *S, "--trials", "1", "--db", "{garbage_db}"], ["garbage.sqlite"]),
    "db_costmodel_export": (["costmodel", "export", "--db", "{truncated_db}", "--out", "{tmp}/x.jsonl.gz"], ["truncated.sqlite"]),
    # PyTorch modules: --input-shape that the module or the parser rejects
    "torch_wrong_rank": ([*NET, "--input-shape", "1,3,8"], ["Net", "input 0 of shape [1, 3, 8]"]),
    "torch_two_inputs": ([*NET, "--input-shape", "1,3,8,8", "--input-shape", "1,3,8,8"], ["input 1 of shape"]),
    "torch_too_small": ([*NET, "--input-shape", "1,3,2,2"], ["[1, 3, 2, 2]"]),
    "torch_not_integers": ([*NET, "--input-shape", "1,3,a,8"], ["--input-shape", "integers"]),
    "torch_zero_dim": ([*NET, "--input-shape", "1,0,8,8"], ["--input-shape", "positive"]),
    "torch_huge": ([*NET, "--input-shape", "100000,100000"], ["--input-shape", "10000000000 elements"]),
}


# run also as a plain `python main.py` subprocess: an argument error, a bad file, a bad database
SUBPROCESS_CASES = {"threads_huge", "pipeline_deep_json", "db_truncated"}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_invocation_is_one_line_exit_2_and_writes_nothing(case, bad, tmp_path, forked):
    args, fragments = CASES[case]
    env_db = tmp_path / "env.sqlite"
    before = {k: v.read_bytes() for k, v in bad.items() if isinstance(v, Path) and v.is_file()}
    cache = tmp_path / "cache"
    r = cli(_fill(args, bad), env_db, env={"XDG_CACHE_HOME": str(cache)}, forked=forked)
    assert_one_line_error(r, *fragments)
    if case in SUBPROCESS_CASES:  # the forked run is what a fresh process does
        plain = cli(_fill(args, bad), env_db, env={"XDG_CACHE_HOME": str(cache)})
        assert (plain.returncode, plain.stdout, plain.stderr) == (r.returncode, r.stdout, r.stderr)
    assert not env_db.exists(), "a failed command created the database"
    for k, data in before.items():  # inputs, and databases given with --db, are unchanged ...
        assert bad[k].read_bytes() == data, k
        assert not Path(f"{bad[k]}-wal").exists() and not Path(f"{bad[k]}-shm").exists(), k
    # ... and nothing was written: no weights, no output file, no cache entry, no stray files
    assert not (bad["tmp"] / "w").exists() and not (bad["tmp"] / "x.jsonl.gz").exists()
    assert sorted(p.name for p in bad["tmp"].iterdir()) == ["in"]
    assert not cache.exists() or files_under(cache) == []
    assert not bad["missing_dir"].exists() and files_under(bad["a_dir"]) == []


def test_env_database_that_is_not_a_database_is_reported_without_db_option(bad, tmp_path, forked):
    r = cli(["measure", "blur", "--size", "small"], bad["garbage_db"], forked=forked)
    assert_one_line_error(r, "garbage.sqlite", "not an SQLite database")


# --- ONNX window attributes (engine/frontends/nd_conv.check_window and onnx_ops) ----------------
ONNX_CASES = {
    "conv_pads_3": (conv_model, {"pads": [1, 1, 1]}, "pads"),
    "conv_pads_negative": (conv_model, {"pads": [-5, 0, 0, 0]}, "pads"),
    "conv_strides_1": (conv_model, {"strides": [2]}, "strides"),
    "conv_strides_3": (conv_model, {"strides": [1, 1, 1]}, "strides"),
    "conv_stride_zero": (conv_model, {"strides": [0, 1]}, "strides"),
    "conv_stride_zero_same_pad": (conv_model, {"strides": [0, 1], "auto_pad": "SAME_UPPER"}, "strides"),
    "conv_stride_negative": (conv_model, {"strides": [-1, 1]}, "strides"),
    "conv_dilations_1": (conv_model, {"dilations": [1]}, "dilations"),
    "conv_dilation_zero": (conv_model, {"dilations": [0, 0]}, "dilations"),
    "conv_kernel_shape": (conv_model, {"kernel_shape": [5, 5]}, "'kernel_shape' [5, 5] differs from the weight's spatial shape [3, 3]"),
    "conv_auto_pad": (conv_model, {"auto_pad": "MIDDLE"}, "'auto_pad' is 'MIDDLE'"),
    "conv_group_zero": (conv_model, {"group": 0}, "'group' is 0"),
    "conv_dilation_past_input": (conv_model, {"dilations": [9, 9]}, "kernel larger than the padded input"),
    "conv_transpose_output_padding": (conv_transpose_model, {"output_padding": [1]}, "output_padding"),
    "conv_transpose_stride_zero": (conv_transpose_model, {"strides": [0, 0]}, "strides"),
    "conv_transpose_group_zero": (conv_transpose_model, {"group": 0}, "group"),
    "conv1d_strides_2": (conv1d_model, {"strides": [1, 1]}, "strides"),
    "maxpool_stride_zero": (pool_model, {"strides": [0, 0]}, "strides"),
    "maxpool_stride_zero_same": (pool_model, {"strides": [0, 1], "auto_pad": "SAME_LOWER"}, "strides"),
    "maxpool_pads_2": (pool_model, {"pads": [1, 1]}, "pads"),
    "maxpool_strides_1": (pool_model, {"strides": [2]}, "strides"),
    "maxpool_dilation_zero": (pool_model, {"dilations": [0, 0]}, "dilations"),
    "maxpool_kernel_zero": (pool_model, {"kernel_shape": [0, 3]}, "kernel_shape"),
    "maxpool_kernel_negative": (pool_model, {"kernel_shape": [-1, 3]}, "kernel_shape"),
    "maxpool_window_past_input": (pool_model, {"kernel_shape": [30, 30]}, "the window is larger than the padded input [8, 8]"),
    "avgpool_pads_3": (avgpool_model, {"pads": [1, 1, 1]}, "pads"),
    "avgpool_window_past_input": (avgpool_model, {"kernel_shape": [20, 20]}, "the window is larger than the padded input [8, 8]"),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_onnx_window_attributes_are_checked(case, tmp_path, forked):
    make, mutate, fragment = ONNX_CASES[case]
    model = make(tmp_path / f"{case}.onnx", **mutate)
    node = "pool1" if "pool" in case else "conv1"  # ONNX's inference or the importer: either names node and attribute
    r = cli(["import", model, "--weights-dir", tmp_path / "w", "--out", tmp_path / "p.json"], tmp_path / "env.sqlite", forked=forked)
    assert_one_line_error(r, f"{case}.onnx", node, fragment)
    assert not (tmp_path / "w").exists() and not (tmp_path / "p.json").exists() and not (tmp_path / "env.sqlite").exists()


WINDOW_CASES = [
    ({"strides": [0, 1]}, "'strides' is [0, 1]: every value must be at least 1"),
    ({"strides": [1, 1, 1]}, "'strides' has 3 values [1, 1, 1]; a 2-D convolution needs 2 (one per spatial axis)"),
    ({"dilations": [1]}, "'dilations' has 1 value [1]; a 2-D convolution needs 2"),
    ({"dilations": [0, 2]}, "'dilations' is [0, 2]"),
    ({"pads": [1, 1, 1]}, "'pads' has 3 values [1, 1, 1]; a 2-D convolution needs 4 (a begin and an end per spatial axis)"),
    ({"pads": [0, -1, 0, 0]}, "'pads' is [0, -1, 0, 0]: every value must be at least 0"),
    ({"kernel": [3, 0]}, "'kernel_shape' is [3, 0]"),
    ({"output_padding": [1]}, "'output_padding' has 1 value"),
    ({"output_padding": [-1, 0]}, "'output_padding' is [-1, 0]"),
]


@pytest.mark.parametrize("attrs,message", WINDOW_CASES)
def test_window_attribute_checks(attrs, message):
    from engine.frontends.nd_conv import check_window

    with pytest.raises(ValueError) as exc:
        check_window("convolution", 2, **attrs)
    assert message in str(exc.value)
    check_window("convolution", 2, kernel=[3, 3], strides=[2, 1], dilations=[1, 2], pads=[0, 1, 1, 0], output_padding=[0, 1])


def test_builder_refuses_windows_that_do_not_fit_or_divide_by_zero():
    from engine.frontends.common import Emitter

    em = Emitter("m")
    x = em.input("x", (1, 3, 8, 8))
    w = em.tensor(np.ones((4, 3, 3, 3), np.float32), "w")
    with pytest.raises(ValueError, match="'strides' is \\[0, 0\\]"):
        em.b.pool_nd("p", x, "max", [3, 3], [0, 0])
    with pytest.raises(ValueError, match="larger than the padded input"):
        em.b.pool_nd("p", x, "avg", [9, 9], [1, 1])
    with pytest.raises(ValueError, match="'group' is 0"):
        em.b.conv("c", x, w, groups=0)
    with pytest.raises(ValueError, match="'pads' has 2 values"):
        em.b.conv("c", x, w, pads=(1, 1))
    with pytest.raises(ValueError, match="'strides' is \\[1, -2\\]"):
        em.b.conv_transpose("t", x, em.tensor(np.ones((3, 4, 3, 3), np.float32), "wt"), strides=(1, -2))


# --- read-only database and directory ---------------------------------------------------------
def _without_dac_override():
    """In the child, before exec: root without the capabilities that let it write read-only
    files (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), as an ordinary user is."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_read_only_database_file_and_directory(tmp_path):
    as_user = {"preexec_fn": _without_dac_override} if os.geteuid() == 0 else {}
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    ro_file = _real_db(rw / "ro.sqlite")
    in_ro = _real_db(ro / "in_ro.sqlite")
    ro_file.chmod(0o444)
    ro.chmod(0o555)
    try:
        for db, fragment in [(ro_file, "read-only file"), (in_ro, "is read-only"), (ro / "new.sqlite", "is read-only")]:
            before = db.read_bytes() if db.exists() else None
            r = cli(["measure", "blur", "--size", "small", "--db", db], rw / "env.sqlite", **as_user)
            assert_one_line_error(r, str(db), fragment)
            assert (db.read_bytes() if db.exists() else None) == before
        assert sorted(p.name for p in rw.iterdir()) == ["ro.sqlite"]  # no -wal / -shm beside it, no env database
        assert sorted(p.name for p in ro.iterdir()) == ["in_ro.sqlite"]
    finally:
        ro.chmod(0o755)


# --- the database's own checks, in process ---------------------------------------------------------
def test_database_user_version_stamped_and_reopen_leaves_file_unchanged(tmp_path):
    path = tmp_path / "m.sqlite"
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    data = path.read_bytes()
    Database(path).close()
    assert path.read_bytes() == data


def test_database_written_before_user_version_is_stamped(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.commit()
    conn.close()
    with Database(path) as db:
        assert db.count() == 0
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_database_error_from_a_query_names_the_file(tmp_path):
    path = _real_db(tmp_path / "m.sqlite")
    with Database(path) as db:
        with pytest.raises(DatabaseError, match="m.sqlite.*no such table"):
            db.conn.execute("SELECT * FROM nothing_here")


def test_failed_open_of_a_new_file_leaves_nothing(tmp_path):
    conn = sqlite3.connect(tmp_path / "other.sqlite")
    conn.execute("CREATE TABLE users (x)")
    conn.commit()
    conn.close()
    with pytest.raises(DatabaseError, match="is a directory"):
        Database(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]


# --- the argument types ------------------------------------------------------------------------
def test_argument_types_accept_the_edges_and_normalize_lists():
    from engine.cli import args as A

    assert A.threads("1") == 1 and A.threads(" 1024 ") == 1024
    assert A.positive_seconds("0.001") == 0.001 and A.nonneg_seconds("0") == 0.0
    assert A.seed(str(2**32 - 1)) == 2**32 - 1
    assert A.pipelines(" blur , unsharp ") == "blur,unsharp"
    assert A.names_in(["a"], "thing", special=["none"])("none") == "none"
    assert A.zero_or(A.int_in(32, 64))("0") == 0


def test_cost_model_names_match_the_trained_models():
    from engine.cli import args as A
    from engine.costmodel.train import MODELS

    assert A.TRAINED_MODELS == MODELS


def test_every_command_and_subcommand_help_formats():
    # argparse formats help strings with %: a bare "% of the peak" made `bench --help` a traceback.
    import argparse

    from engine.cli import parser

    todo = [parser()]
    seen = 0
    while todo:
        ap = todo.pop()
        text = ap.format_help()
        assert ap.prog in text
        seen += 1
        for action in ap._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    assert seen > 30  # the commands and bench's, costmodel's, ... subcommands
