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

import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import api
from .. import reference as R
from ..halide_backend import target_string
from ..heuristic import heuristic_schedule
from ..ir import Pipeline
from ..measure import Measurement, Runner, default_threads, host_fingerprint
from ..resources import MODELS_DIR
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


def _bench_one(p: Pipeline, best: Schedule, runner: Runner, threads: int, name: str, repeats: int, min_time_s: float) -> dict[str, Any]:
    inputs = R.make_inputs(p, 0)  # the worker's input for seed 0: every variant computes the same thing
    refs, method = R.reference(p, inputs)
    peers = make_peers(p, inputs, threads)
    checks = {n: check_peer(pr, p, refs, method) for n, pr in peers.items() if isinstance(pr, Peer)}
    scheds = {"default": default_schedule(p), "best": best}
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
    row: dict[str, Any] = {"gflop": p.flops() / 1e9, "stages": len(p.stages), "best_schedule": best.name}
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
            results[name] = {"kind": kind, **_bench_one(p, best, runner, threads, name, repeats, min_time_s), **found}
    load_after = os.getloadavg()
    machine = {
        "host": host_fingerprint(), "cores": os.cpu_count(), "target": target_string(), "python": platform.python_version(),
        "load_avg_1m_before": load_before[0], "load_avg_1m_after": load_after[0],
    }  # fmt: skip
    table = _table(results) + (
        f"\n{NOTE}; built-in pipelines: best = hand schedule."
        f"\n{threads} threads for every variant; {repeats} rounds of >= {min_time_s:g} s each; "
        f"load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after on {os.cpu_count()} cores "
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
