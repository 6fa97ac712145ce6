"""`bench search`: every search strategy and every Halide autoscheduler on every zoo
pipeline, in the same run on the same machine.

Per pipeline: each autoscheduler runs once (its search time is part of its result); each
strategy searches with a wall budget of Adams2019's search time plus `--extra-s` seconds
of measurement (the issue's rule) unless `--budget-s` is given; then every result (the
autoschedulers' and each strategy's best schedule) is measured again in interleaved rounds
(rounds outside, variants inside, so all see the same machine load) and the median of the
round medians is the figure. The summary is the geometric mean speedup of each strategy
over Adams2019 and over Mullapudi2016, with every pipeline where a strategy loses listed.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Any

from . import api, zoo
from .bench import geomean, median_cell
from .cli import args as A
from .costmodel import model_by_name
from .halide_backend import AUTOSCHEDULERS, target_string
from .measure import Measurement, Runner, host_fingerprint
from .schedule import Schedule


def add_parser(bsub: Any) -> None:
    """The `bench search` subcommand's arguments (engine/cli.py adds the subcommand)."""
    from .search import STRATEGIES  # noqa: PLC0415

    bp = bsub.add_parser("search", help="every search strategy and Halide autoscheduler on every zoo pipeline")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--pipelines", type=A.pipelines, help="comma-separated subset of the zoo")
    bp.add_argument(
        "--strategies", type=A.names_in(sorted(STRATEGIES), "strategy"), default=",".join(sorted(STRATEGIES)), help="comma-separated subset"
    )
    bp.add_argument("--size", choices=zoo.SIZES, default="full")
    bp.add_argument(
        "--budget-s", type=A.positive_seconds, default=None, help="wall budget per search (default: Adams2019's search time + --extra-s)"
    )
    bp.add_argument("--extra-s", type=A.nonneg_seconds, default=60.0, help="measurement seconds on top of Adams2019's search time")
    bp.add_argument("--trials", type=A.positive_int, default=24, help="hardware measurements per search at most")
    bp.add_argument("--seed", type=A.seed, default=0)
    bp.add_argument(
        "--model", choices=A.COST_MODELS, default="default", help="cost model: default (the chosen one), analytic, gnn, halide or tvm"
    )
    bp.add_argument("--repeats", type=A.positive_int, default=3, help="final rounds (median of round medians)")
    bp.add_argument("--min-time", type=A.nonneg_seconds, default=0.3, help="minimum timed seconds per variant and round")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _log(msg: str) -> None:
    print(f"[bench search] {msg}", file=sys.stderr, flush=True)


def _verified_row(p: Any, ms: list[Measurement]) -> dict[str, Any]:
    """bench core's cell (median of round medians); an unverified result counts as failed."""
    cell = median_cell(p, ms)
    return cell if not cell["ok"] or cell["verified"] else {"ok": False, "error": "not verified"}


def _search_one(p: Any, strategy: str, budget_s: float, args: argparse.Namespace, runner: Runner) -> tuple[dict[str, Any], Schedule | None]:
    from .search import Budget, run_search  # noqa: PLC0415

    res = run_search(p, strategy, Budget(args.trials, budget_s), args.seed, model=model_by_name(args.model), runner=runner, db=None)
    info = {
        "search_s": res.search_s, "model_s": res.model_s, "measure_s": res.measure_s, "trials": len(res.trials),
        "failed_trials": sum(1 for t in res.trials if not t.verified), "seen": res.seen, "budget_s": budget_s,
        "search_best_ms": res.best_ms, "model": res.model,
    }  # fmt: skip
    _log(f"{p.name} {strategy}: best {res.best_ms} ms in {res.search_s:.1f} s ({res.model_s:.1f} s model), {len(res.trials)} trials")
    return info, res.best


def bench_search(args: argparse.Namespace) -> dict[str, Any]:
    from .search import STRATEGIES  # noqa: PLC0415

    names = args.pipelines.split(",") if args.pipelines else zoo.names()
    strategies = [s for s in args.strategies.split(",") if s]
    for s in strategies:
        if s not in STRATEGIES:
            raise ValueError(f"unknown strategy {s!r}; expected one of {', '.join(sorted(STRATEGIES))}")
    try:
        model_by_name(args.model)  # before any measurement: a model that is not trained fails now
    except ValueError as exc:
        raise api.InputError(str(exc)) from None
    opts = {"min_time_s": args.min_time, "timeout_s": 900.0, "profile": False}
    t_start = time.time()
    results: dict[str, Any] = {}
    with Runner() as runner:
        for name in names:
            p = zoo.get(name, args.size)
            row: dict[str, Any] = {"stages": len(p.stages), "gflop": p.flops() / 1e9}
            variants: dict[str, tuple[Schedule | None, str | None]] = {}
            for a in AUTOSCHEDULERS:
                m = api.measure(p, None, runner, None, autoscheduler=a, **opts)
                row[a] = {"search_s": m.search_s}
                variants[a] = (None, a)
                _log(f"{name} {a}: " + (f"{m.median_ms:.3f} ms, search {m.search_s:.1f} s" if m.ok else f"FAILED {m.error}"))
            adams_s = row["Adams2019"]["search_s"] or 0.0
            budget = args.budget_s if args.budget_s is not None else adams_s + args.extra_s
            for s in strategies:
                row[s], best = _search_one(p, s, budget, args, runner)
                if best is not None:
                    variants[s] = (best, None)
            runs: dict[str, list[Measurement]] = {v: [] for v in variants}
            for _ in range(args.repeats):
                for label, (sched, auto) in variants.items():
                    runs[label].append(api.measure(p, sched, runner, None, autoscheduler=auto, **opts))
            for label, ms in runs.items():
                row[label] = {**_verified_row(p, ms), **row[label]}  # the search's own figures stay
            for s in strategies:
                for a in ("Adams2019", "Mullapudi2016"):
                    if row[s].get("ok") and row[a].get("ok"):
                        row[s][f"speedup_over_{a.lower()}"] = row[a]["median_ms"] / row[s]["median_ms"]
            results[name] = row
            _log(f"{name}: " + ", ".join(f"{k} {v.get('median_ms', float('nan')):.3f}" for k, v in row.items() if isinstance(v, dict)))
    summary = {}
    for s in strategies:
        over = {
            a: [r[s][f"speedup_over_{a.lower()}"] for r in results.values() if f"speedup_over_{a.lower()}" in r[s]]
            for a in ("Adams2019", "Mullapudi2016")
        }
        summary[s] = {
            "geomean_speedup_over_adams2019": geomean(over["Adams2019"]),
            "geomean_speedup_over_mullapudi2016": geomean(over["Mullapudi2016"]),
            "loses_to_adams2019": [n for n, r in results.items() if r[s].get("speedup_over_adams2019", 0.0) < 1.0],
            "max_model_s": max((r[s]["model_s"] for r in results.values()), default=None),
        }
    return {
        "machine": {"host": host_fingerprint(), "cores": os.cpu_count(), "target": target_string(), "python": platform.python_version()},
        "size": args.size, "repeats": args.repeats, "trials": args.trials, "seed": args.seed, "model": args.model,
        "budget": f"{args.budget_s} s" if args.budget_s is not None else f"Adams2019 search time + {args.extra_s} s",
        "wall_s": time.time() - t_start, "summary": summary, "pipelines": results, "table": _table(results, strategies, summary),
    }  # fmt: skip


def _fmt(cell: dict[str, Any]) -> str:
    return f"{cell['median_ms']:.3f}" if cell.get("ok") else "FAIL"


def _table(results: dict[str, Any], strategies: list[str], summary: dict[str, Any]) -> str:
    autos = list(AUTOSCHEDULERS)
    cols = ["pipeline"] + [f"{a} ms (search s)" for a in autos] + [f"{s} ms (search s)" for s in strategies]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        cells = [name] + [f"{_fmt(r[a])} ({r[a]['search_s'] or 0:.1f})" for a in autos]
        cells += [f"{_fmt(r[s])} ({r[s]['search_s']:.0f})" for s in strategies]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for s, v in summary.items():
        ga, gm = v["geomean_speedup_over_adams2019"], v["geomean_speedup_over_mullapudi2016"]
        lines.append(
            f"{s}: geomean {ga:.2f}x over Adams2019, {gm:.2f}x over Mullapudi2016; loses on {', '.join(v['loses_to_adams2019']) or 'none'}"
            if ga and gm
            else f"{s}: no comparable results"
        )
    return "\n".join(lines)
