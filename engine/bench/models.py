"""`bench models`: each sample model (resources/models/*.onnx) under ONNX Runtime, PyTorch
eager, Halide with the default schedule and Halide with the best schedule found, all
measured in the same run, interleaved in rounds as in `bench core` (engine/bench/core.py).

"Best found" is the rule-based heuristic schedule (engine/heuristic.py) until a search
exists; for built-in pipelines (--pipelines) it is the hand schedule. Every Halide
result is verified by the runner; each peer's outputs are checked once against the same
reference. The Halide variants run in the runner's worker process, the peers in this
one (the worker is idle meanwhile), all with the same number of threads.
"""

from __future__ import annotations

import importlib.util
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import api
from .. import reference as R
from ..halide_backend import target_string
from ..heuristic import heuristic_schedule
from ..ir import Pipeline
from ..measure import Measurement, MeasureRunner, Runner, default_threads, host_fingerprint, machine_record
from ..resources import MAKE_MODELS, MODELS_DIR
from ..schedule import Schedule, default_schedule
from .peers import PEERS, Peer, PeerTiming, check_peer, make_peers, time_peer

NOTE = "best found = the --search strategy's best (started from the heuristic schedule; --search none: the heuristic)"
LABELS = {"onnxruntime": "ORT", "pytorch": "PyTorch", "default": "default", "best": "best"}


def _targets(models: Sequence[str | Path] | None, pipelines: Sequence[str], size: str) -> list[tuple[str, str, Pipeline, Schedule]]:
    """(name, kind, pipeline, best schedule) for every model and requested built-in pipeline."""
    out = []
    paths = [Path(m) for m in models] if models is not None else sorted(MODELS_DIR.glob("*.onnx"))
    for path in paths:
        p = api.load_pipeline(str(path))
        out.append((path.stem, "model", p, heuristic_schedule(p)))
    for n in pipelines:
        p = api.load_pipeline(n, size)
        out.append((n, "pipeline", p, api.load_schedule(p, "hand")))
    return out


def _progress(what: str, ms: float | None, error: str | None) -> None:
    # Progress on stderr: a run takes minutes.
    print(f"[bench models] {what}: " + (f"{ms:.3f} ms" if ms is not None else f"FAILED: {error}"), file=sys.stderr, flush=True)


def _halide_cell(ms: list[Measurement]) -> dict[str, Any]:
    bad = next((m for m in ms if not m.ok), None)
    if bad is not None:
        return {"ok": False, "error": f"{bad.error_kind}: {bad.error}"}
    return _cell([m.median_ms or 0.0 for m in ms], min(m.min_ms or 0.0 for m in ms), [m.iqr_ms or 0.0 for m in ms]) | {
        "verified": all(m.verified for m in ms),
        "compile_s": ms[0].compile_s,
    }


def _peer_cell(ts: list[PeerTiming], verified: R.Verification | None) -> dict[str, Any]:
    bad = next((t for t in ts if not t.ok), None)
    if bad is not None:
        return {"ok": False, "error": bad.error}
    cell = _cell([t.median_ms or 0.0 for t in ts], min(t.min_ms or 0.0 for t in ts), [t.iqr_ms or 0.0 for t in ts])
    return cell | {
        "verified": None if verified is None else verified.ok,
        "max_abs_err": None if verified is None else verified.max_abs_err,
        "version": ts[0].version,
        "what": ts[0].what,
    }


def _cell(medians: list[float], best: float, iqrs: list[float]) -> dict[str, Any]:
    """Median of the round medians; spread = range of the round medians over their median
    (one round: that round's IQR over its median)."""
    med = statistics.median(medians)
    spread = (max(medians) - min(medians)) / med if len(medians) > 1 else iqrs[0] / med
    return {"ok": True, "median_ms": med, "min_ms": best, "spread": spread, "round_medians_ms": medians}


def _bench_one(
    p: Pipeline,
    scheds: dict[str, Schedule],
    runner: MeasureRunner,
    threads: int,
    name: str,
    repeats: int,
    min_time_s: float,
    torch_module: Any = None,
) -> dict[str, Any]:
    """The peers and the Halide schedules `scheds` (label -> schedule) of `p`, interleaved in
    `repeats` rounds; `torch_module` (a sample-set model's PyTorch definition) is the PyTorch
    peer where make_peers has none."""
    inputs = R.make_inputs(p, 0)  # the worker's input for seed 0: every variant computes the same thing
    refs, method = R.reference(p, inputs)
    peers = make_peers(p, inputs, threads)
    if torch_module is not None and isinstance(peers.get("pytorch"), str):
        peers["pytorch"] = _module_peer(p, torch_module, inputs, threads)
    checks = {n: check_peer(pr, p, refs, method) for n, pr in peers.items() if isinstance(pr, Peer)}
    runs: dict[str, list[Any]] = {v: [] for v in [*PEERS, *scheds]}
    opts: dict[str, Any] = {"min_time_s": min_time_s, "timeout_s": 900.0, "profile": False}
    for r in range(repeats):
        # Rounds outside, variants inside: each variant sees the same stretch of machine load.
        for label in runs:
            peer = peers.get(label)
            if isinstance(peer, str):
                continue
            if peer is not None:
                t = time_peer(peer, min_time_s)
                runs[label].append(t)
                _progress(f"{name} {label} round {r + 1}", t.median_ms, t.error)
            else:
                m = api.measure(p, scheds[label], runner, None, **opts)
                runs[label].append(m)
                _progress(f"{name} {label} round {r + 1}", m.median_ms, m.error)
    row: dict[str, Any] = {
        "gflop": p.flops() / 1e9,
        "stages": len(p.stages),
        "best_schedule": scheds["best"].name if "best" in scheds else "",
    }
    for label, got in runs.items():
        peer = peers.get(label)
        if isinstance(peer, str):
            row[label] = {"ok": False, "available": False, "error": peer}
        elif peer is not None:
            row[label] = _peer_cell(got, checks.get(label))
        else:
            row[label] = _halide_cell(got)
    ms = {k: row[k]["median_ms"] for k in runs if row[k].get("ok")}
    if "best" in ms:
        for k, key in (("onnxruntime", "best_over_ort"), ("pytorch", "best_over_pytorch")):
            if k in ms:
                row[key] = ms["best"] / ms[k]
        if "default" in ms:
            row["default_over_best"] = ms["default"] / ms["best"]
    return row


def _search(p: Pipeline, runner: Runner, strategy: str | None, trials: int, budget_s: float) -> dict[str, Any]:
    """The search's best schedule for a model (it starts from the heuristic schedule, so it
    is never worse than that in its own measurements), with what the search cost."""
    if strategy is None:
        return {}
    from ..search import Budget, run_search  # noqa: PLC0415

    res = run_search(p, strategy, Budget(trials, budget_s), runner=runner)
    if res.best is None:
        return {"search": {"strategy": strategy, "error": "nothing verified"}}
    res.best.name = f"{strategy} search"
    info = {"strategy": strategy, "search_s": res.search_s, "model_s": res.model_s, "trials": len(res.trials), "model": res.model}
    return {"schedule": res.best, "search": info}


def bench_models(
    models: Sequence[str | Path] | None = None,
    pipelines: Sequence[str] = (),
    size: str = "full",
    repeats: int = 3,
    min_time_s: float = 0.5,
    threads: int | None = None,
    search: str | None = "greedy",
    search_budget_s: float = 60.0,
    search_trials: int = 24,
) -> dict[str, Any]:
    """The .onnx `models` (default: every model in resources/models), their best schedule
    found by the `search` strategy (None: the heuristic schedule) within `search_trials`
    measurements and `search_budget_s` seconds, and the built-in `pipelines` at `size` with
    their hand schedule as best; every variant `repeats` rounds of >= `min_time_s` seconds,
    with `threads` threads (default: all cores)."""
    threads = threads or default_threads()
    t0, load_before = time.time(), os.getloadavg()
    results: dict[str, Any] = {}
    targets = _targets(models, pipelines, size)
    with Runner(threads) as runner:
        for name, kind, p, best in targets:
            found = _search(p, runner, search, search_trials, search_budget_s) if kind == "model" else {}
            best = found.pop("schedule", best)
            scheds = {"default": default_schedule(p), "best": best}
            results[name] = {"kind": kind, **_bench_one(p, scheds, runner, threads, name, repeats, min_time_s), **found}
    machine = machine_record(host_fingerprint(), target_string(), load_before[0])
    table = _table(results) + (
        f"\n{NOTE}; built-in pipelines: best = hand schedule."
        f"\n{threads} threads for every variant; {repeats} rounds of >= {min_time_s:g} s each; "
        f"load average (1 min) {load_before[0]:.2f} before, {machine['load_avg_1m_after']:.2f} after on {os.cpu_count()} cores "
        f"(PyTorch with OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY') or 'default'}: its barriers suffer most from other load)."
    )
    return {
        "note": NOTE, "machine": machine, "threads": threads, "repeats": repeats, "min_time_s": min_time_s,
        "wall_s": time.time() - t0, "results": results, "table": table,
    }  # fmt: skip


def _fmt(cell: dict[str, Any]) -> str:
    if not cell.get("ok"):
        return "n/a" if cell.get("available") is False else "FAIL"
    return f"{cell['median_ms']:.3f} ±{100 * cell['spread']:.0f}%"


def _ratio(row: dict[str, Any], key: str) -> str:
    return f"{row[key]:.2f}" if key in row else "-"


def _table(results: dict[str, Any]) -> str:
    cols = ["model", "GFLOP", "ORT ms", "PyTorch ms", "default ms", "best ms", "best/ORT", "best/PyTorch", "default/best", "verified"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        cells = [name + (f" ({r['best_schedule']})" if r["kind"] == "pipeline" else ""), f"{r['gflop']:.4g}"]
        cells += [_fmt(r[k]) for k in ("onnxruntime", "pytorch", "default", "best")]
        cells += [_ratio(r, "best_over_ort"), _ratio(r, "best_over_pytorch"), _ratio(r, "default_over_best")]
        checked = {LABELS[k]: r[k].get("verified") for k in LABELS if r[k].get("ok")}
        cells.append("all" if checked and all(checked.values()) else "NOT " + ", ".join(k for k, v in checked.items() if not v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- bench models --tune: the sample set of whole networks, tuned (issue 14 item 5) ----------------
TUNE_NOTE = (
    "tuned = whole-model tuning (engine/tuning: each distinct task tuned once by local moves, Ansor's task scheduler) "
    "from the heuristic schedule; every Halide time is a whole-model measurement verified against ONNX Runtime"
)
CACHE_ENV = "SCHEDULE_EXPLORER_MODEL_CACHE"


def _make_models() -> Any:
    """resources/models/make_models.py as a module (project code: the models' definitions)."""
    spec = importlib.util.spec_from_file_location("_schedule_explorer_make_models", MAKE_MODELS)
    assert spec is not None and spec.loader is not None  # a file of this package
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    return mm


def sample_set_names() -> list[str]:
    return list(_make_models().SAMPLE_SET)


def cache_dir() -> Path:
    """Where the sample set is exported: $SCHEDULE_EXPLORER_MODEL_CACHE, else the user cache directory."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    from platformdirs import user_cache_dir  # noqa: PLC0415

    return Path(user_cache_dir("schedule-explorer")) / "sample_models"


def sample_model(name: str, directory: Path | None = None) -> Path:
    """The sample-set model `name` as an .onnx file in `directory` (default: cache_dir()),
    exported from its PyTorch definition when not there yet (fixed seeds: reproducible)."""
    mm = _make_models()
    if name not in mm.SAMPLE_SET:
        raise ValueError(f"unknown sample model {name!r} (the sample set: {', '.join(mm.SAMPLE_SET)})")
    d = directory or cache_dir()
    path = d / f"{name}.onnx"
    if not path.is_file():
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=d) as tmp:  # written whole, then renamed: never half a file under the name
            mm.export_sample(name, Path(tmp)).replace(path)
    return path


def torch_definition(p: Pipeline) -> Any:
    """The PyTorch module of a sample-set model (its file's stem names it), or None."""
    model = p.source.get("model")
    if p.source.get("kind") != "onnx" or not model:
        return None
    mm = _make_models()
    stem = Path(model).stem
    return mm.sample_module(stem) if stem in mm.SAMPLE_SET else None


def _module_peer(p: Pipeline, module: Any, inputs: dict[str, Any], threads: int) -> Peer:
    import torch  # noqa: PLC0415

    torch.set_num_threads(threads)
    xs = [torch.from_numpy(inputs[i.name]) for i in p.inputs if not i.weight]

    def run() -> Any:
        with torch.no_grad():
            return module(*xs)

    def outputs() -> dict[str, Any]:
        return {p.outputs[0]: run().numpy().reshape(p.shape_of(p.outputs[0]))}

    policy = os.environ.get("OMP_WAIT_POLICY") or "default"
    what = f"{type(module).__name__} (make_models.py SAMPLE_SET), eval mode, no_grad, OMP_WAIT_POLICY={policy}"
    return Peer("pytorch", f"torch {torch.__version__}", threads, what, run, outputs)


def compare_tuned(
    p: Pipeline,
    heuristic: Schedule,
    tuned: Schedule,
    runner: MeasureRunner,
    threads: int,
    name: str,
    repeats: int = 3,
    min_time_s: float = 0.5,
) -> dict[str, Any]:
    """ONNX Runtime, PyTorch (where a definition exists), the heuristic and the tuned
    schedule of `p`, measured in the same run in interleaved rounds, each verified; with the
    ratios tuned/ORT, heuristic/ORT, tuned/PyTorch and heuristic/tuned."""
    row = _bench_one(p, {"heuristic": heuristic, "tuned": tuned}, runner, threads, name, repeats, min_time_s, torch_definition(p))
    ms = {k: row[k]["median_ms"] for k in ("onnxruntime", "pytorch", "heuristic", "tuned") if row[k].get("ok")}
    for a, b, key in (
        ("tuned", "onnxruntime", "tuned_over_ort"), ("heuristic", "onnxruntime", "heuristic_over_ort"),
        ("tuned", "pytorch", "tuned_over_pytorch"), ("heuristic", "tuned", "heuristic_over_tuned"),
    ):  # fmt: skip
        if a in ms and b in ms:
            row[key] = ms[a] / ms[b]
    return row


def bench_models_tuned(
    models: Sequence[str | Path] | None = None,
    budget_s: float = 120.0,
    trials: int = 10**6,
    repeats: int = 3,
    min_time_s: float = 0.5,
    threads: int | None = None,
    runner: MeasureRunner | None = None,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Each model (default: the sample set, exported into `directory` / cache_dir()) tuned
    within `budget_s` seconds and `trials` task measurements, then compare_tuned: ORT,
    PyTorch, heuristic and tuned in the same run; the geometric means of tuned/ORT and
    heuristic/ORT over the models that have both."""
    from ..tuning import tune  # noqa: PLC0415

    threads = threads or (runner.threads if runner is not None else default_threads())
    t0, load_before = time.time(), os.getloadavg()
    paths = [Path(m) for m in models] if models else [sample_model(n, directory) for n in sample_set_names()]
    results: dict[str, Any] = {}
    own = runner is None
    runner = runner or Runner(threads)
    try:
        for path in paths:
            p = api.load_pipeline(str(path))
            h = heuristic_schedule(p)
            print(f"[bench models --tune] {path.stem}: tuning ({budget_s:g} s budget)", file=sys.stderr, flush=True)
            res = tune(p, runner, budget_s=budget_s, trials=trials, start=h)
            row = compare_tuned(p, h, res.schedule, runner, threads, path.stem, repeats, min_time_s)
            row["tuning"] = {k: v for k, v in res.to_json().items() if k not in ("pipeline",)}
            row["tuning_s"], row["trials"], row["tasks"] = res.tuning_s, res.trials, len(res.tasks)
            results[path.stem] = row
    finally:
        if own:
            runner.close()
    machine = machine_record(host_fingerprint(), target_string(), load_before[0])
    geo = {k: _geomean([r[k] for r in results.values() if k in r]) for k in ("tuned_over_ort", "heuristic_over_ort")}
    table = _tuned_table(results, geo) + (
        f"\n{TUNE_NOTE}.\nTuning budget {budget_s:g} s per model; {threads} threads for every variant; "
        f"{repeats} rounds of >= {min_time_s:g} s; "
        f"load average (1 min) {load_before[0]:.2f} before, {machine['load_avg_1m_after']:.2f} after on {os.cpu_count()} cores."
    )
    return {
        "note": TUNE_NOTE, "machine": machine, "threads": threads, "repeats": repeats, "min_time_s": min_time_s, "budget_s": budget_s,
        "geomean": geo, "wall_s": time.time() - t0, "results": results, "table": table,
    }  # fmt: skip


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _tuned_table(results: dict[str, Any], geo: dict[str, float | None]) -> str:
    cols = ["model", "GFLOP", "tasks", "ORT ms", "PyTorch ms", "heuristic ms", "tuned ms", "tuned/ORT", "heuristic/ORT", "tuned/PyTorch",
            "tuning s", "trials", "verified"]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        cells = [name, f"{r['gflop']:.3g}", str(r["tasks"])] + [_fmt(r[k]) for k in ("onnxruntime", "pytorch", "heuristic", "tuned")]
        cells += [_ratio(r, "tuned_over_ort"), _ratio(r, "heuristic_over_ort"), _ratio(r, "tuned_over_pytorch")]
        cells += [f"{r['tuning_s']:.0f}", str(r["trials"])]
        checked = {k: r[k].get("verified") for k in ("onnxruntime", "pytorch", "heuristic", "tuned") if r[k].get("ok")}
        cells.append("all" if checked and all(checked.values()) else "NOT " + ", ".join(k for k, v in checked.items() if not v))
        lines.append("| " + " | ".join(cells) + " |")
    g = {k: f"{v:.2f}" if v is not None else "-" for k, v in geo.items()}
    lines.append(f"| geomean | | | | | | | {g['tuned_over_ort']} | {g['heuristic_over_ort']} | | | | |")
    return "\n".join(lines)
