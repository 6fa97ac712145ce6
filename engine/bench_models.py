"""`bench models`: each sample model (resources/models/*.onnx) under ONNX Runtime, PyTorch
eager, Halide with the default schedule and Halide with the best schedule found, all
measured in the same run, interleaved in rounds as in `bench core` (engine/bench.py).

"Best found" is the rule-based heuristic schedule (engine/heuristic.py) until a search
exists; for built-in pipelines (--pipelines) it is the hand schedule. Every Halide
result is verified by the runner; each peer's outputs are checked once against the same
reference. The Halide variants run in the runner's worker process, the peers in this
one (the worker is idle meanwhile), all with the same number of threads.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from . import api, zoo
from . import reference as R
from .cli import args as A
from .halide_backend import target_string
from .heuristic import heuristic_schedule
from .ir import Pipeline
from .measure import Measurement, Runner, default_threads, host_fingerprint
from .peers import PEERS, Peer, PeerTiming, check_peer, make_peers, time_peer
from .resources import MODELS_DIR
from .schedule import Schedule, default_schedule

NOTE = "best found = the --search strategy's best (started from the heuristic schedule; --search none: the heuristic)"
LABELS = {"onnxruntime": "ORT", "pytorch": "PyTorch", "default": "default", "best": "best"}


def add_parser(bsub: Any) -> None:
    """The `bench models` subcommand's arguments (engine/cli.py adds the subcommand)."""
    bp = bsub.add_parser("models", help="sample models: ONNX Runtime, PyTorch, default and best-found Halide schedules")
    bp.add_argument("--json", action="store_true")
    from .search import STRATEGIES  # noqa: PLC0415

    bp.add_argument("--models", type=A.input_files, help="comma-separated .onnx files (default: every model in resources/models)")
    bp.add_argument(
        "--pipelines",
        type=A.names_in(A.zoo_names, "pipeline", special=["all"]),
        help="also these built-in pipelines (comma-separated, or 'all'), hand schedule as best",
    )
    bp.add_argument("--size", choices=zoo.SIZES, default="full", help="size of the built-in pipelines")
    bp.add_argument("--repeats", type=A.positive_int, default=3, help="rounds (each variant once per round; median of round medians)")
    bp.add_argument("--min-time", type=A.nonneg_seconds, default=0.5, help="minimum timed seconds per variant and round")
    bp.add_argument("--threads", type=A.threads, default=None, help="threads for Halide and both peers (default: all cores)")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")
    bp.add_argument(
        "--search",
        choices=[*sorted(STRATEGIES), "none"],
        default="greedy",
        help="search strategy for the models' best schedule, or 'none' (heuristic)",
    )
    bp.add_argument("--search-budget-s", type=A.positive_seconds, default=60.0, help="wall seconds per model's search")
    bp.add_argument("--search-trials", type=A.positive_int, default=24)


def _targets(args: argparse.Namespace) -> list[tuple[str, str, Pipeline, Schedule]]:
    """(name, kind, pipeline, best schedule) for every model and requested built-in pipeline."""
    out = []
    paths = [Path(m) for m in args.models.split(",") if m] if args.models else sorted(MODELS_DIR.glob("*.onnx"))
    for path in paths:
        p = api.load_pipeline(str(path))
        out.append((path.stem, "model", p, heuristic_schedule(p)))
    names = zoo.names() if args.pipelines == "all" else [n for n in (args.pipelines or "").split(",") if n]
    for n in names:
        p = api.load_pipeline(n, args.size)
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


def _bench_one(p: Pipeline, best: Schedule, runner: Runner, args: argparse.Namespace, threads: int, name: str) -> dict[str, Any]:
    inputs = R.make_inputs(p, 0)  # the worker's input for seed 0: every variant computes the same thing
    refs, method = R.reference(p, inputs)
    peers = make_peers(p, inputs, threads)
    checks = {n: check_peer(pr, p, refs, method) for n, pr in peers.items() if isinstance(pr, Peer)}
    scheds = {"default": default_schedule(p), "best": best}
    runs: dict[str, list[Any]] = {v: [] for v in [*PEERS, *scheds]}
    opts = {"min_time_s": args.min_time, "timeout_s": 900.0, "profile": False}
    for r in range(args.repeats):
        # Rounds outside, variants inside: each variant sees the same stretch of machine load.
        for label in runs:
            peer = peers.get(label)
            if isinstance(peer, str):
                continue
            if peer is not None:
                t = time_peer(peer, args.min_time)
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


def _search(p: Pipeline, heuristic: Schedule, runner: Runner, args: argparse.Namespace) -> dict[str, Any]:
    """The search's best schedule for a model (it starts from the heuristic schedule, so it
    is never worse than that in its own measurements), with what the search cost."""
    if args.search == "none":
        return {}
    from .search import Budget, run_search  # noqa: PLC0415

    res = run_search(p, args.search, Budget(args.search_trials, args.search_budget_s), runner=runner)
    if res.best is None:
        return {"search": {"strategy": args.search, "error": "nothing verified"}}
    res.best.name = f"{args.search} search"
    info = {"strategy": args.search, "search_s": res.search_s, "model_s": res.model_s, "trials": len(res.trials), "model": res.model}
    return {"schedule": res.best, "search": info}


def bench_models(args: argparse.Namespace) -> dict[str, Any]:
    threads = args.threads or default_threads()
    t0, load_before = time.time(), os.getloadavg()
    results: dict[str, Any] = {}
    targets = _targets(args)
    with Runner(threads) as runner:
        for name, kind, p, best in targets:
            found = _search(p, best, runner, args) if kind == "model" else {}
            best = found.pop("schedule", best)
            results[name] = {"kind": kind, **_bench_one(p, best, runner, args, threads, name), **found}
    load_after = os.getloadavg()
    machine = {
        "host": host_fingerprint(), "cores": os.cpu_count(), "target": target_string(), "python": platform.python_version(),
        "load_avg_1m_before": load_before[0], "load_avg_1m_after": load_after[0],
    }  # fmt: skip
    table = _table(results) + (
        f"\n{NOTE}; built-in pipelines: best = hand schedule."
        f"\n{threads} threads for every variant; {args.repeats} rounds of >= {args.min_time:g} s each; "
        f"load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after on {os.cpu_count()} cores "
        f"(PyTorch with OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY') or 'default'}: its barriers suffer most from other load)."
    )
    return {
        "note": NOTE, "machine": machine, "threads": threads, "repeats": args.repeats, "min_time_s": args.min_time,
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
