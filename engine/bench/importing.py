"""`bench import`: a ResNet-50-size ONNX model from file to a runnable default schedule.

ResNet-50 (resources/models/make_models.py, random weights, eval mode, BN kept in the
file) is exported to a temp dir (about 100 MB: never committed), then each repeat times
the phases the engine goes through before a first run, each in a fresh weights dir so
nothing is reused between repeats:

  import    onnx load + check + shape inference + BN folding + mapping + weights .npz -> Pipeline
  schedule  the default schedule, validated
  lower     Halide Funcs, the schedule applied, the Halide pipeline
  compile   Halide lowering + LLVM JIT compile (what the worker does before its first run;
            a large pipeline compiles as segments, engine/segments.py, and the segment cache
            is cleared before each repeat; `--compare-whole N` also times it as one pipeline)

Halide JIT-compiles its own runtime once per process; a warm-up compile of a one-stage
pipeline pays that first (a measurement worker lives on between jobs) and it is reported
apart. Wall and CPU seconds are both recorded: on a loaded machine CPU time is the steadier.
Optionally the compiled default schedule is run once through the runner and verified
against ONNX Runtime (`--verify-size`, a separate export at that input size).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import halide_backend as HB
from .. import segments
from ..ir import Pipeline
from ..measure import Runner, default_threads, host_fingerprint, machine_record
from ..resources import MAKE_MODELS
from ..schedule import default_schedule, validate

TARGET_S = 5.0
PHASES = ("import", "schedule", "lower", "compile")


def export_resnet50(path: Path, size: int, width: int) -> Path:
    """ResNet-50 as ONNX at 1x3xSIZExSIZE (needs torch; the definition lives with the sample models)."""
    spec = importlib.util.spec_from_file_location("make_models", MAKE_MODELS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # our own generating script: defines the model classes
    return mod.export_resnet50(path, size=size, width=width)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def one_pass(model: Path, weights_dir: Path, segmented: bool | None = None) -> tuple[Pipeline, dict[str, Any]]:
    """Import, schedule, lower and compile once; wall and CPU seconds per phase. Compiled
    segments are not reused between passes (the cache is cleared first)."""
    segments.clear_cache()
    from ..frontends import import_onnx  # noqa: PLC0415

    res, w_imp, c_imp = _timed(lambda: import_onnx(model, weights_dir))
    p = res.pipeline
    sched, w_s, c_s = _timed(lambda: _default(p))
    low, w_l, c_l = _timed(lambda: segments.lower(p, sched, segmented))
    _, w_c, c_c = _timed(low.compile)
    times = {"import": (w_imp, c_imp), "schedule": (w_s, c_s), "lower": (w_l, c_l), "compile": (w_c, c_c)}
    out: dict[str, Any] = {k: {"wall_s": w, "cpu_s": c} for k, (w, c) in times.items()}
    if isinstance(low, segments.Segmented):
        out["segments"] = {"parts": len(low.parts), "distinct": low.unique, "halide_compiles": low.compiles}
    return p, out


def _default(p: Pipeline) -> Any:
    s = default_schedule(p)
    validate(p, s)
    return s


def _runtime_jit() -> float:
    """Compile a one-stage pipeline: Halide's runtime is JIT-compiled with the first one."""
    from ..expr import Access, Var  # noqa: PLC0415
    from ..ir import Dim, Input, Stage  # noqa: PLC0415

    p = Pipeline("warmup", [Input("a", (4,))], [Stage("out", (Dim("x", 4),), Access("a", (Var("x"),)))], ["out"])
    return HB.compile_jit(HB.lower(p, default_schedule(p)))


def _verify(size: int, width: int, model: str | None, tmp: Path, threads: int) -> dict[str, Any]:
    from .. import api  # noqa: PLC0415

    path = Path(model) if model else export_resnet50(tmp / f"resnet50_{size}.onnx", size, width)
    p = api.load_pipeline(str(path))
    with Runner(threads) as runner:
        m = api.measure(p, default_schedule(p), runner, None, min_time_s=0.0, min_runs=1, warmup=1, profile=False, timeout_s=1800.0)
    return {
        "input": [1, 3, size, size], "ok": m.ok, "verified": m.verified, "method": m.verify_method, "max_abs_err": m.max_abs_err,
        "max_rel_err": m.max_rel_err, "run_ms": m.median_ms, "compile_s": m.compile_s, "error": m.error,
    }  # fmt: skip


def bench_import(
    model: str | Path | None = None,
    size: int = 224,
    width: int = 64,
    repeats: int = 3,
    verify_size: int = 0,
    threads: int | None = None,
    compare_whole: int = 0,
) -> dict[str, Any]:
    """Time `model` (default: ResNet-50 exported at `size` x `size` with `width` stem
    channels) `repeats` times, per phase; `compare_whole` more compiles as one Halide
    pipeline; `verify_size` > 0: the default schedule run once at that input size with
    `threads` threads and verified against ONNX Runtime (see the module docstring)."""
    t0, load_before = time.time(), os.getloadavg()
    given = Path(model) if model else None
    with tempfile.TemporaryDirectory(prefix="bench-import-") as d:
        tmp = Path(d)
        if given is not None:
            path, export_s = given, 0.0
        else:
            print(f"[bench import] exporting ResNet-50 at {size}x{size} ...", file=sys.stderr, flush=True)
            path, export_s, _ = _timed(lambda: export_resnet50(tmp / "resnet50.onnx", size, width))
        runtime_jit_s = _runtime_jit()
        runs: list[dict[str, dict[str, float]]] = []
        for r in range(repeats):
            p, times = one_pass(path, tmp / f"weights{r}")
            runs.append(times)
            parts = ", ".join(f"{k} {times[k]['wall_s']:.2f}" for k in PHASES)
            print(f"[bench import] repeat {r + 1}: {sum(times[k]['wall_s'] for k in PHASES):.2f} s ({parts})", file=sys.stderr, flush=True)
        whole = [one_pass(path, tmp / f"whole{r}", segmented=False)[1]["compile"]["wall_s"] for r in range(compare_whole)]
        verify = _verify(verify_size, width, None, tmp, threads or default_threads()) if verify_size else None
        model_mb = path.stat().st_size / 1e6
    phases = {k: {u: statistics.median(t[k][u] for t in runs) for u in ("wall_s", "cpu_s")} for k in PHASES}
    totals = [sum(t[k]["wall_s"] for k in PHASES) for t in runs]
    total = statistics.median(totals)
    result: dict[str, Any] = {
        "model": {
            "file": "resnet50 (exported at run time)" if given is None else str(model), "file_mb": round(model_mb, 1),
            "input": [1, 3, size, size] if given is None else None, "width": width if given is None else None,
            "export_s": export_s, "stages": len(p.stages), "inputs": len(p.inputs), "weights": sum(i.weight for i in p.inputs),
            "gflop": p.flops() / 1e9,
        },
        "repeats": repeats, "phases": phases, "runs": runs, "total_s": total, "total_cpu_s": sum(v["cpu_s"] for v in phases.values()),
        "segments": runs[-1].get("segments"),
        "compile_whole_s": statistics.median(whole) if whole else None, "compile_whole_runs": whole,
        "target_s": TARGET_S, "under_target": total < TARGET_S, "runtime_jit_s": runtime_jit_s, "verify": verify,
        "machine": machine_record(host_fingerprint(), HB.target_string(), load_before[0]),
        "wall_s": time.time() - t0,
    }  # fmt: skip
    result["table"] = _table(result)
    return result


def _table(r: dict[str, Any]) -> str:
    m = r["model"]
    lines = [
        f"{m['file']}: {m['stages']} stages, {m['weights']} weight arrays, {m['gflop']:.2f} GFLOP, {m['file_mb']} MB",
        "| phase | median wall s | median CPU s |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['wall_s']:.3f} | {v['cpu_s']:.3f} |" for k, v in r["phases"].items()]
    sg = r.get("segments")
    if sg:
        lines.insert(1, f"compiled as {sg['parts']} segments, {sg['distinct']} distinct: {sg['halide_compiles']} Halide compiles")
    if r.get("compile_whole_s"):
        lines.append(f"| compile as one Halide pipeline (comparison) | {r['compile_whole_s']:.3f} | |")
    lines.append(f"| **total** | **{r['total_s']:.2f}** | {r['total_cpu_s']:.2f} |")
    verdict = "under" if r["under_target"] else "OVER"
    lines.append(
        f"{verdict} the {r['target_s']:g} s target (median of {r['repeats']} repeats); Halide's runtime JIT, once per process: "
        f"{r['runtime_jit_s']:.2f} s; load average {r['machine']['load_avg_1m_before']:.2f} before, "
        f"{r['machine']['load_avg_1m_after']:.2f} after on {r['machine']['cores']} cores"
    )
    v = r.get("verify")
    if v:
        ok = f"verified against {v['method']} (max abs err {v['max_abs_err']:.2g}), one run {v['run_ms']:.0f} ms"
        lines.append(f"default schedule at {'x'.join(map(str, v['input']))}: " + (ok if v["ok"] else f"FAILED: {v['error']}"))
    return "\n".join(lines)
