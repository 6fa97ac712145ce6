"""`bench conformance`: the ONNX package's own model tests through the importer and Halide.

The `onnx` pip package ships converted-model tests under `onnx/backend/test/data/`
(`pytorch-converted`, `pytorch-operator`, `simple`: 140 models, each with
`test_data_set_0/input_*.pb` and the expected `output_*.pb`). Each one is

  1. imported (`import_onnx`); integer inputs that give a shape get their test value
     (`input_values`: the IR's shapes are static), other inputs are data;
  2. checked with the operator reference (the pipeline's op records in float64, as
     engine/reference.py evaluates them) on the test's inputs, against the test's
     expected outputs: this catches a mapping that reads an operator wrongly;
  3. (with `compile=True`) lowered with the default schedule, JIT-compiled by Halide, run
     on the test's inputs and verified against the test's expected outputs with the
     engine's tolerance (engine/reference.py `verify`). ONNX Runtime is not needed: the
     expected outputs are the test's own, so old-opset models ONNX Runtime no longer
     runs are verified too.

A case passes only when every step does. Otherwise it is `unsupported` (the importer
names the operators it does not map) or `failed` (the step and its message).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SUITES = ("pytorch-converted", "pytorch-operator", "simple")
F32_MAX = float(np.finfo(np.float32).max)


def data_root() -> Path:
    """The onnx package's backend test data folder."""
    import onnx  # noqa: PLC0415

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def cases(root: Path | None = None) -> list[Path]:
    """Every test folder of the three suites (sorted), each holding model.onnx."""
    root = root or data_root()
    return [d for s in SUITES for d in sorted((root / s).iterdir()) if (d / "model.onnx").is_file()]


@dataclass
class CaseResult:
    name: str  # suite/test
    status: str  # passed | unsupported | failed
    ops: list[str]  # operator types in the model
    opset: int
    step: str = ""  # import | reference | halide: where it stopped
    message: str = ""
    unsupported_ops: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_tensor(path: Path) -> np.ndarray:
    from onnx import TensorProto, numpy_helper  # noqa: PLC0415

    t = TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def test_data(case: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first test data set's inputs and expected outputs, in order."""
    ds = case / "test_data_set_0"
    num = lambda p: int(p.stem.rsplit("_", 1)[1])
    ins = [read_tensor(p) for p in sorted(ds.glob("input_*.pb"), key=num)]
    outs = [read_tensor(p) for p in sorted(ds.glob("output_*.pb"), key=num)]
    return ins, outs


def run_case(case: Path, weights_dir: Path, compile: bool = True) -> CaseResult:
    """Import, reference-check and (optionally) compile, run and verify one test."""
    import onnx  # noqa: PLC0415

    from .. import reference as R  # noqa: PLC0415
    from ..frontends import ModelImportError, UnsupportedModelError, import_onnx  # noqa: PLC0415
    from ..frontends.onnx_import import shape_inputs  # noqa: PLC0415

    t0 = time.perf_counter()
    model = onnx.load(str(case / "model.onnx"), load_external_data=False)
    ops = sorted({n.op_type for n in model.graph.node})
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    res = CaseResult(f"{case.parent.name}/{case.name}", "failed", ops, opset)

    def done(status: str, step: str = "", message: str = "") -> CaseResult:
        res.status, res.step, res.message, res.seconds = status, step, message, time.perf_counter() - t0
        return res

    try:
        ins, expected = test_data(case)
    except Exception as exc:  # noqa: BLE001  # a test file we cannot read is that test's failure
        return done("failed", "data", f"test data unreadable: {type(exc).__name__}: {exc}")
    init = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    feeds = dict(zip(names, ins))
    fixed = {n: feeds[n] for n in shape_inputs(model) if n in feeds}
    readers = lambda name: sorted({n.op_type for n in model.graph.node if name in n.input})
    wide = [n for n, v in feeds.items() if v.dtype == np.float64 and np.isfinite(v).all() and np.abs(v).max(initial=0) > F32_MAX]
    if wide:  # the IR computes in float32: these values have no float32 form
        res.unsupported_ops = readers(wide[0])
        why = f"input {wide[0]!r} holds float64 values beyond float32's range (the IR computes in float32)"
        return done("unsupported", "data", f"{', '.join(res.unsupported_ops)} of float64: {why}")
    empty = [n for n, v in feeds.items() if v.size == 0]
    if empty:
        res.unsupported_ops = readers(empty[0])
        why = f"input {empty[0]!r} is empty (shape {list(feeds[empty[0]].shape)}): the IR has no empty tensors"
        return done("unsupported", "data", f"{', '.join(res.unsupported_ops)} of an empty tensor: {why}")
    try:
        result = import_onnx(case / "model.onnx", weights_dir=weights_dir, input_values=fixed)
    except UnsupportedModelError as exc:
        res.unsupported_ops = sorted({u["op"] for u in exc.unsupported})
        return done("unsupported", "import", "; ".join(f"{u['op']}: {u.get('reason', '')}" for u in exc.unsupported))
    except ModelImportError as exc:
        from ..frontends.onnx_ops import HANDLERS  # noqa: PLC0415

        unmapped = sorted({n.op_type for n in model.graph.node if n.op_type not in HANDLERS or n.domain not in ("", "ai.onnx")})
        if unmapped:  # the error came first, but these operators would stop it anyway
            res.unsupported_ops = unmapped
            return done("unsupported", "import", f"{', '.join(unmapped)}: no mapping (and {exc})")
        return done("failed", "import", str(exc).replace(str(case / "model.onnx"), "model.onnx"))
    p = result.pipeline
    src = p.source
    by_onnx = {o: ir for ir, o in src["input_names"].items()}
    arrays = R.load_weights(p)
    values = {i.name: arrays[i.name] for i in p.inputs if i.weight}
    for onnx_name, ir in by_onnx.items():
        values[ir] = np.asarray(feeds[onnx_name]).reshape(p.shape_of(ir))  # a scalar input is a one-element tensor
    out_names = {o: ir for ir, o in src["output_names"].items()}
    graph_outs = [o.name for o in model.graph.output]
    if len(expected) != len(graph_outs):
        return done("failed", "data", f"{len(expected)} expected outputs for {len(graph_outs)} graph outputs")
    refs = {}
    for o, e in zip(graph_outs, expected):
        ir = out_names[o]
        want = p.stage(ir).shape
        refs[ir] = np.asarray(e, np.float64).reshape(want) if np.size(e) == np.prod(want) and np.ndim(e) == 0 else np.asarray(e, np.float64)
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # a test's NaN / inf (sqrt of a negative) is compared, not warned about
            rec = R.evaluate_ops(p, {k: np.asarray(v, np.float64) for k, v in values.items()})
    except Exception as exc:  # noqa: BLE001  # an operator reference that cannot run is this test's failure
        return done("failed", "reference", f"operator reference: {type(exc).__name__}: {exc}")
    v = R.verify(p, {k: a.astype(np.float32) for k, a in rec.items()}, refs, "operator reference")
    if not v.ok:
        return done("failed", "reference", v.message)
    if compile:
        from .. import halide_backend as HB  # noqa: PLC0415
        from .. import segments  # noqa: PLC0415
        from ..schedule import default_schedule  # noqa: PLC0415

        try:
            low = segments.lower(p, default_schedule(p))
            low.compile()
            _keep = low.bind({k: np.array(a, np.float32) for k, a in values.items()})  # writable copies
            outs = HB.output_arrays(p)
            low.runner(outs)()
        except Exception as exc:  # noqa: BLE001
            return done("failed", "halide", f"{type(exc).__name__}: {exc}")
        v = R.verify(p, outs, refs, "the test's expected outputs")
        if not v.ok:
            return done("failed", "halide", v.message)
    return done("passed")


def run_suite(compile: bool = True, only: list[str] | None = None, progress: bool = True) -> list[CaseResult]:
    """Every case (or those whose name contains one of `only`), in order."""
    out = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        for case in cases():
            name = f"{case.parent.name}/{case.name}"
            if only and not any(s in name for s in only):
                continue
            r = run_case(case, Path(tmp), compile)
            if progress:
                print(f"{r.status:11s} {name} {r.step} {r.message[:160]}", file=sys.stderr, flush=True)
            out.append(r)
    return out


def summarize(results: list[CaseResult]) -> dict[str, Any]:
    """Counts, and the failing cases grouped by operator (unsupported) or by step (failed)."""
    counts = Counter(r.status for r in results)
    by_op: Counter[str] = Counter(op for r in results if r.status == "unsupported" for op in r.unsupported_ops)
    failed = {r.name: f"{r.step}: {r.message[:300]}" for r in results if r.status == "failed"}
    return {
        "cases": len(results),
        "passed": counts["passed"],
        "unsupported": counts["unsupported"],
        "failed": counts["failed"],
        "unsupported_ops": dict(sorted(by_op.items())),
        "failures": failed,
    }


def bench_conformance(compile: bool = True, only: list[str] | None = None) -> dict[str, Any]:
    """The suite's result as one JSON-able dict with a Markdown `table`."""
    t0, c0 = time.perf_counter(), time.process_time()
    results = run_suite(compile, only)
    s = summarize(results)
    rows = ["| case | status | ops | where / why |", "|---|---|---|---|"]
    for r in results:
        if r.status != "passed":
            why = ", ".join(r.unsupported_ops) if r.status == "unsupported" else f"{r.step}: {r.message[:120]}"
            rows.append(f"| {r.name} | {r.status} | {', '.join(r.ops)} | {why.replace('|', '/')} |")
    head = f"{s['passed']} of {s['cases']} pass ({s['unsupported']} unsupported, {s['failed']} failed)"
    return {
        **s,
        "compiled": compile,
        "seconds": round(time.perf_counter() - t0, 2),
        "cpu_seconds": round(time.process_time() - c0, 2),  # steadier than wall time on a loaded machine
        "results": [r.to_json() for r in results],
        "table": head + "\n\n" + "\n".join(rows),
    }
