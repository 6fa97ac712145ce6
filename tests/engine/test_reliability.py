"""Reliability: no wrong number stored as verified, no crash outside a worker, one clear
error for every malformed schedule (issue 11, items 1-4 and 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine import api, isolated, zoo
from engine import loops as L
from engine import reference as R
from engine.database import Database
from engine.halide_backend import target_string
from engine.ir import Pipeline
from engine.measure import Job, Runner
from engine.schedule import Schedule, ScheduleError, to_source, validate

ROOT = Path(__file__).resolve().parents[2]
FAST = {"min_time_s": 0.01, "min_runs": 2, "warmup": 1, "profile": False, "timeout_s": 120.0}


def _log_model(path: Path) -> Path:
    """Y = X @ W + log(S): ONNX Runtime gives NaN where S < 0."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32), "W")
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["XW"]),
        helper.make_node("Log", ["S"], ["LS"]),
        helper.make_node("Add", ["XW", "LS"], ["Y"]),
    ]
    g = helper.make_graph(
        nodes,
        "logmodel",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 16]), helper.make_tensor_value_info("S", TensorProto.FLOAT, [8, 32])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, 32])],
        [w],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


# --- 1. verification with non-finite references ----------------------------------------------
def _blur() -> Pipeline:
    return zoo.get("blur", "small")


def _out(p: Pipeline, fill: float = 0.0) -> dict[str, np.ndarray]:
    return {o: np.full(p.stage(o).shape, fill) for o in p.outputs}


def test_nan_reference_with_garbage_output_fails_verification() -> None:
    p = _blur()
    ref = _out(p, 1.0)
    o = p.outputs[0]
    ref[o][0, 0] = np.nan  # one NaN made the tolerance NaN, so nothing could fail
    garbage = {o: np.random.default_rng(0).uniform(-1e3, 1e3, ref[o].shape)}
    v = R.verify(p, garbage, ref, "test")
    assert not v.ok
    assert "outside tolerance" in v.message and "NaN" in v.message
    assert v.max_abs_err is not None and v.max_abs_err > 1.0


def test_non_finite_values_are_compared_position_by_position() -> None:
    p = _blur()
    o = p.outputs[0]
    ref = _out(p, 2.0)
    ref[o][0, 0], ref[o][1, 1], ref[o][2, 2] = np.nan, np.inf, -np.inf
    assert R.verify(p, {o: ref[o].copy()}, ref, "t").ok
    assert "3 non-finite reference values matched" in R.verify(p, {o: ref[o].copy()}, ref, "t").message
    for at, value in (((0, 0), 2.0), ((1, 1), -np.inf), ((2, 2), np.nan), ((3, 3), np.nan), ((3, 3), np.inf)):
        out = ref[o].copy()
        out[at] = value
        v = R.verify(p, {o: out}, ref, "t")
        assert not v.ok, (at, value)
        assert f"first at {at}" in v.message


def test_an_all_nan_reference_is_never_verified_with_error_zero() -> None:
    p = _blur()
    ref = _out(p, np.nan)
    v = R.verify(p, _out(p, np.nan), ref, "t")
    assert not v.ok
    assert v.max_abs_err is None and "cannot be verified" in v.message


def test_nan_reference_wrong_output_is_reported_and_not_stored(tmp_path: Path) -> None:
    from engine.frontends import import_onnx

    res = import_onnx(_log_model(tmp_path / "log.onnx"), tmp_path)
    body = res.pipeline.to_json()
    for i in body["inputs"]:  # the domain analysis would keep S positive: force the NaN case
        i["low"], i["high"] = -1.0, 1.0
    p = Pipeline.from_json(body)
    p.source = res.pipeline.source
    inputs = R.make_inputs(p)
    refs, _ = R.reference(p, inputs)
    assert np.isnan(refs[p.outputs[0]]).any()  # the case that was mis-verified
    db = Database(tmp_path / "m.db")
    with Runner(1) as runner:
        m = api.measure(p, None, runner, db, fault="garbage", **FAST)
    assert not m.ok and not m.verified and m.error_kind == "verification"
    assert db.lookup(p.content_hash(), m.schedule_hash, target_string(), m.host, 1) is None
    db.close()


def test_imported_log_input_is_drawn_inside_its_domain(tmp_path: Path) -> None:
    from engine.frontends import import_onnx

    res = import_onnx(_log_model(tmp_path / "log.onnx"), tmp_path)
    s = res.pipeline.input_map["S"]
    assert (s.low, s.high) == (0.5, 1.5)
    assert res.pipeline.input_map["X"].low == -1.0  # only what an operator's domain needs
    assert any("'S' feeds log" in n for n in res.report.simplifications)
    with Runner(1) as runner:
        m = api.measure(res.pipeline, None, runner, None, **FAST)
    assert m.ok and m.verified and m.max_abs_err is not None


# --- 2. bounds on factors; a failed job's worker is replaced ---------------------------------
def _sched(stage: str, *pure: dict, update: list | None = None) -> Schedule:
    body: dict = {"pure": list(pure)}
    if update is not None:
        body["update"] = update
    return Schedule.from_json({"stages": {stage: body}})


@pytest.mark.parametrize(
    "directive",
    [
        {"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 2**31},
        {"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 10**23},
        {"kind": "vectorize", "loop": "x", "factor": 2**40},
        {"kind": "tile", "x": "x", "y": "y", "xo": "xo", "yo": "yo", "xi": "xi", "yi": "yi", "xf": 2**20, "yf": 2**20},
        {"kind": "unroll", "loop": "x", "factor": 100000},
        {"kind": "unroll", "loop": "y"},
        {"kind": "vectorize", "loop": "x", "factor": 1024},
    ],
)
def test_factors_past_halides_limits_are_schedule_errors(directive: dict) -> None:
    p = zoo.get("blur", "full")  # blur_x is not an output: no output-tail rule catches these
    with pytest.raises(ScheduleError) as exc:
        validate(p, _sched("blur_x", directive))
    assert exc.value.stage == "blur_x" and exc.value.directive == directive
    assert "\n" not in str(exc.value)


def test_nested_unrolls_are_bounded_together() -> None:
    p = zoo.get("blur", "full")
    d = [{"kind": "unroll", "loop": "x", "factor": 512}, {"kind": "unroll", "loop": "y", "factor": 256}]
    with pytest.raises(ScheduleError, match="copy the body"):
        validate(p, _sched("blur_x", *d))
    assert L.MAX_UNROLLED_BODY >= 512  # one big unroll alone stays allowed
    validate(p, _sched("blur_x", d[0]))


def test_measure_with_a_huge_factor_exits_2_before_anything_runs(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps({"stages": {"blur_x": {"pure": [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 2**31}]}}})
    )
    db = tmp_path / "m.db"
    r = subprocess.run(
        [sys.executable, "main.py", "measure", "blur", "--size", "small", "--schedule", str(f), "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid schedule" in lines[0] and "blur_x" in lines[0] and "2147483648" in lines[0]
    assert not db.exists()  # nothing ran, nothing was written


def test_a_failed_job_gets_a_fresh_worker_for_the_next_one() -> None:
    p = _blur()
    job = Job(p.to_json(), Schedule.from_json({"stages": {}}).to_json(), **FAST)
    with Runner(1) as runner:
        assert runner.run(job).verified
        first = runner.worker_pid
        bad = runner.run(Job(p.to_json(), job.schedule, fault="garbage", **FAST))
        assert bad.error_kind == "verification"
        assert runner.worker_pid is None  # replaced, not reused
        again = runner.run(job)
        assert again.verified and runner.worker_pid not in (None, first)


# --- 3. Halide's compiler runs where a crash cannot take the caller down ----------------------
def test_a_compiler_crash_while_lowering_leaves_the_caller_alive() -> None:
    p = _blur()
    with pytest.raises(isolated.CompilerCrashError, match="SIGSEGV"):
        isolated.lowered_stmt(p, Schedule(), fault="crash")
    with pytest.raises(isolated.CompilerCrashError, match="did not finish"):
        isolated.lowered_stmt(p, Schedule(), fault="hang", timeout_s=3)
    assert "produce blur_y" in isolated.lowered_stmt(p, Schedule())  # and it still works


def test_a_schedule_error_in_the_lowering_process_comes_back_as_one() -> None:
    p = _blur()
    with pytest.raises(ScheduleError) as exc:
        isolated.lowered_stmt(p, _sched("nope", {"kind": "compute_root"}))
    assert exc.value.stage == "nope"


def test_cli_lower_refuses_a_huge_unroll_with_one_line() -> None:
    sched = {"stages": {"blur_x": {"pure": [{"kind": "unroll", "loop": "x", "factor": 100000}]}}}
    r = subprocess.run(
        [sys.executable, "main.py", "lower", "blur", "--size", "small", "--schedule", "/dev/stdin"],
        cwd=ROOT, input=json.dumps(sched), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "at most 512" in r.stderr


# --- 4. validation is total ------------------------------------------------------------------
MALFORMED = [
    ("blur_y", {"pure": [5]}, "an object with a 'kind'"),
    ("blur_y", {"pure": [{"kind": "reorder", "loops": [["x"], "y"]}]}, "list of loop names"),
    ("blur_y", {"pure": [{"kind": "compute_root", "factor": 8}]}, "unexpected argument 'factor'"),
    ("blur_y", {"pure": [{"kind": "compute_root", "tail": "round_up"}]}, "unexpected argument 'tail'"),
    ("blur_y", {"pure": [{"kind": "reorder", "loops": ["x", "y"], "tail": "auto"}]}, "unexpected argument 'tail'"),
    ("blur_y", {"pure": [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 8.0}]}, "must be an integer"),
    ("blur_y", {"pure": [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": True}]}, "must be an integer"),
    ("blur_y", {"pure": [{"kind": "split", "loop": "x", "outer": "x o", "inner": "xi", "factor": 8}]}, "identifier"),
    ("blur_y", {"pure": [{"kind": "vectorize", "loop": "x", "factor": "8"}]}, "must be an integer"),
    ("blur_y", {"pure": [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 8, "tail": 3}]}, "tail"),
    ("blur_y", {"pure": "compute_root"}, "expected"),
    ("blur_y", {"pure": [], "extra": []}, "unexpected key"),
    ("blur_x", {"pure": [{"kind": "store_at", "consumer": "blur_y", "loop": "y"}]}, "storage must enclose"),
    ("blur_y", {"pure": [{"kind": "vectorize", "loop": "x", "factor": 16, "tail": None}]}, "is null"),
    ("blur_y", {"pure": [{"kind": "parallel", "loop": "y", "tail": "guard_with_if"}]}, "splits nothing"),
    ("blur_x", {"pure": [{"kind": "vectorize", "loop": "x"}, {"kind": "compute_inline"}]}, "no loops to schedule"),
    ("blur_x", {"pure": [{"kind": "unroll", "loop": "y"}]}, "constant extent"),
    ("blur_y", {"pure": [{"kind": "vectorize", "loop": "x"}]}, "constant extent"),
]


@pytest.mark.parametrize("stage,body,words", MALFORMED)
def test_every_malformed_schedule_is_a_schedule_error(stage: str, body: dict, words: str) -> None:
    p = _blur()
    # The producer's compute_at makes validation read the consumer's (malformed) list first.
    stages = (
        {stage: body}
        if stage == "blur_x"
        else {stage: body, "blur_x": {"pure": [{"kind": "compute_at", "consumer": "blur_y", "loop": "y"}]}}
    )
    with pytest.raises(ScheduleError) as exc:
        validate(p, Schedule.from_json({"stages": stages}))
    assert words in str(exc.value) and exc.value.stage == stage


@pytest.mark.parametrize("kind", ["compute_inline", "compute_root", "store_root", "store_at", "compute_at"])
def test_placement_directives_in_an_update_list_are_refused(kind: str) -> None:
    p = zoo.get("matmul", "small")
    stage = next(s.name for s in p.stages if s.is_reduction)
    d = {"kind": kind, **({"consumer": "x", "loop": "y"} if kind.endswith("_at") else {})}
    with pytest.raises(ScheduleError, match="belongs to the pure definition") as exc:
        validate(p, _sched(stage, update=[d]))
    assert exc.value.update and exc.value.stage == stage


def test_malformed_schedules_fail_cleanly_through_every_entry_point(tmp_path: Path) -> None:
    p = _blur()
    bad = {"stages": {"blur_x": {"pure": [{"kind": "compute_at", "consumer": "blur_y", "loop": "y"}]}, "blur_y": {"pure": [5]}}}
    with Runner(1) as runner:
        m = runner.run(Job(p.to_json(), bad, **FAST))
    assert m.error_kind == "invalid_schedule" and "blur_y" in (m.error or "")
    with pytest.raises(ScheduleError):
        to_source(p, Schedule.from_json(bad))
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    r = subprocess.run(
        [sys.executable, "main.py", "show", "blur", "--size", "small", "--schedule", str(f)], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- 7. workers die with their parent ---------------------------------------------------------
def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has finished running


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process parents from /proc")
def test_a_killed_cli_leaves_no_worker_behind(tmp_path: Path) -> None:
    cli = subprocess.Popen(
        [sys.executable, "main.py", "measure", "matmul", "--no-db", "--min-time", "60", "--timeout", "600", "--no-profile"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _children(cli.pid)
        assert workers, "the CLI started no worker"
        time.sleep(1.0)  # the worker is busy with its job now
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait(5)
        time.sleep(2.0)
        assert not [w for w in workers if _alive(w)]
    finally:
        if cli.poll() is None:
            cli.kill()


def test_storage_shared_across_parallel_iterations_is_refused() -> None:
    p = _blur()
    at = {"kind": "compute_at", "consumer": "blur_y", "loop": "x"}
    race = {"blur_x": {"pure": [{"kind": "store_root"}, at]}, "blur_y": {"pure": [{"kind": "parallel", "loop": "y"}]}}
    with pytest.raises(ScheduleError, match="race") as exc:
        validate(p, Schedule.from_json({"stages": race}))
    assert exc.value.stage == "blur_x" and exc.value.directive == {"kind": "store_root"}
    inside = {"blur_x": {"pure": [{"kind": "store_at", "consumer": "blur_y", "loop": "y"}, at]}, "blur_y": race["blur_y"]}
    validate(p, Schedule.from_json({"stages": inside}))  # stored per parallel iteration: no race
    assert "produce blur_x" in isolated.lowered_stmt(p, Schedule.from_json({"stages": inside}))


# --- ONNX attributes and initializers that do not fit their model (found by bench fuzz) --------
def _mutated(tmp_path: Path, model: str, change: str) -> Path:
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(ROOT / "resources" / "models" / model))
    g = m.graph

    def node(op: str) -> onnx.NodeProto:
        return next(n for n in g.node if n.op_type == op)

    def set_attr(n: onnx.NodeProto, name: str, value: int) -> None:
        next(a for a in n.attribute if a.name == name).i = value

    def resize_init(name: str, fn: object) -> None:
        k = next(k for k, t in enumerate(g.initializer) if t.name == name)
        g.initializer[k].CopyFrom(numpy_helper.from_array(fn(numpy_helper.to_array(g.initializer[k])), name))  # type: ignore[operator]

    if change == "layernorm_axis":
        set_attr(node("LayerNormalization"), "axis", 99)
    elif change == "softmax_axis":
        set_attr(node("Softmax"), "axis", 2**31 - 1)
    elif change == "conv_bias_length":
        resize_init("features.0.bias", lambda a: a[:-1])
    elif change == "bn_scalar_mean":
        resize_init("layer1.0.bn2.running_mean", lambda a: np.array(a[0]))
    elif change == "gather_no_indices":
        c = next(n for n in g.node if n.op_type == "Gather")
        src = next(n for n in g.node if n.output[0] == c.input[1])
        src.attribute[0].t.CopyFrom(numpy_helper.from_array(np.zeros((0,), np.int64)))
    elif change == "no_outputs":
        del g.output[:]
    elif change == "pool_pad_past_kernel":
        pads = next(a for a in node("MaxPool").attribute if a.name == "pads")
        pads.ints[:] = [0, 0, 0, 7]
    out = tmp_path / f"{change}.onnx"
    onnx.save(m, str(out))
    return out


@pytest.mark.parametrize(
    "model,change,words",
    [
        ("transformer_layer.onnx", "layernorm_axis", "axis 99 is out of range"),
        ("transformer_layer.onnx", "softmax_axis", "'axis' must be in"),
        ("small_cnn.onnx", "conv_bias_length", "Conv channels 16"),
        ("resnet18_stage.onnx", "bn_scalar_mean", "BatchNormalization"),
        ("transformer_layer.onnx", "gather_no_indices", "Gather"),
        ("small_cnn.onnx", "no_outputs", "no outputs"),
        ("small_cnn.onnx", "pool_pad_past_kernel", "smaller than the kernel"),
    ],
)
def test_an_onnx_model_whose_parts_do_not_fit_is_one_import_error(tmp_path: Path, model: str, change: str, words: str) -> None:
    from engine.frontends import ModelImportError, import_onnx

    path = _mutated(tmp_path, model, change)
    with pytest.raises(ModelImportError) as exc:
        import_onnx(path, tmp_path)
    assert words in str(exc.value) and str(path) in str(exc.value)
    assert "\n" not in str(exc.value)  # one line
