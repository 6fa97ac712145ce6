"""`search PIPELINE --strategy ...`: automated schedule search from the command line.

Prints, with --json, {"best_ms", "verified", "search_s", "trials", "baseline_ms", "schedule",
...}: the best verified measurement the strategy found within its budget, and Halide's
Adams2019 autoscheduler measured in the same run as the baseline (`--baseline none` skips
it). `--out FILE` writes the best schedule, which `measure --schedule FILE` loads back.

`--strategy greedy --measure 0` is zero-measurement greedy: the offline value function alone
decides every stage from an empty schedule (engine/search/greedy.py `zero_measure_search`),
nothing is measured during the search; its schedule is then measured once (verified) for the
report. `--start value` seeds the measuring greedy search with that schedule instead of the
heuristic's.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from .. import api, zoo
from ..cluster import make_runner
from ..costmodel import model_by_name
from ..database import Database
from ..halide_backend import AUTOSCHEDULERS
from . import args as A


def register(subparsers: Any) -> None:
    """Add the `search` command to an `add_subparsers()` object."""
    from ..search import STRATEGIES  # noqa: PLC0415

    sp = subparsers.add_parser("search", help="search for a fast schedule (greedy, beam, lamcts, random, evolution)")
    sp.add_argument("pipeline", help="a built-in pipeline name, a pipeline .json file or an .onnx model")
    sp.add_argument("--size", choices=zoo.SIZES, default="full")
    sp.add_argument("--strategy", choices=sorted(STRATEGIES), default="greedy" if "greedy" in STRATEGIES else "random")
    sp.add_argument("--budget-s", type=A.positive_seconds, default=60.0, help="wall-clock seconds (model time and measurements)")
    sp.add_argument(
        "--trials", "--measure", dest="trials", type=A.nonneg_int, default=32,
        help="hardware measurements at most (greedy: 0 = decide with the value function alone, then measure the result once)",
    )  # fmt: skip
    sp.add_argument("--start", choices=["heuristic", "value"], default="heuristic", help="greedy's seed: the rule-based schedule or V's")
    sp.add_argument("--seed", type=A.seed, default=0)
    sp.add_argument(
        "--model", choices=A.COST_MODELS, default="default", help="cost model: default (the chosen one), analytic, gnn, halide or tvm"
    )
    sp.add_argument("--baseline", choices=[*AUTOSCHEDULERS, "none"], default="Adams2019", help="autoscheduler measured beside")
    sp.add_argument("--out", type=A.output_file, help="write the best schedule JSON here (loads back with measure --schedule FILE)")
    sp.add_argument("--db", help="SQLite file (default: $SCHEDULE_EXPLORER_DB or the user data directory)")
    sp.add_argument("--no-db", action="store_true", help="neither read nor write the database")
    sp.add_argument("--threads", type=A.threads, default=None, help=f"Halide threads, 1 to {A.MAX_THREADS} (default: all cores)")
    sp.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    A.add_cluster(sp)
    sp.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from ..search import Budget, Progress, run_search  # noqa: PLC0415

    if args.trials == 0 and args.strategy != "greedy":
        raise A.CliError(f"--measure 0 is greedy's zero-measurement mode; {args.strategy} needs at least 1 measurement")
    if args.start == "value" and args.strategy != "greedy":
        raise A.CliError(f"--start value seeds greedy only, not {args.strategy}")
    p = api.load_pipeline(args.pipeline, args.size)
    db = None if args.no_db else Database(args.db)

    def progress(pr: Progress) -> None:
        if pr.trial is not None and not args.quiet:
            t = pr.trial
            res = f"{t.measured_ms:.3f} ms" if t.verified else f"failed: {(t.error or '')[:80]}"
            best = f"{pr.best_measured_ms:.3f}" if pr.best_measured_ms is not None else "-"
            print(
                f"[{pr.elapsed_s:6.1f} s] trial {pr.measured:3d}: predicted {t.predicted_ms:.3f} ms, measured {res}; best {best} ms",
                file=sys.stderr,
                flush=True,
            )

    with closing(make_runner(args.cluster, args.threads)) as runner:  # a cluster's runner measures on one host kind
        try:
            model = model_by_name(args.model)
        except ValueError as exc:
            raise api.InputError(str(exc)) from None
        if args.trials == 0:
            obj = _zero_measure(p, args, runner, db)
        else:
            strategy = "greedy_v" if args.start == "value" else args.strategy
            res = run_search(
                p, strategy, Budget(args.trials, args.budget_s), args.seed, model=model, runner=runner, db=db, progress=progress
            )
            obj = res.to_json()
        base = None
        if args.baseline != "none":
            # Bounded like the search: Adams2019 on a ResNet-50 ran past the 300 s job default.
            limit = max(60.0, args.budget_s)
            m = api.measure(p, None, runner, db, autoscheduler=args.baseline, min_time_s=0.3, profile=False, timeout_s=limit)
            ok = m.ok and m.verified
            base = {"autoscheduler": args.baseline, "ms": m.median_ms if ok else None, "search_s": m.search_s}
            base["error"] = None if ok else m.error
    obj.update(size=args.size, budget_s=args.budget_s, max_trials=args.trials, start=args.start)
    best_ms = obj["best_ms"]
    obj["baseline_ms"] = base["ms"] if base else None
    obj["baseline"] = base
    obj["speedup_over_baseline"] = base["ms"] / best_ms if base and base["ms"] and best_ms else None
    if args.out and obj["schedule"] is not None:
        Path(args.out).write_text(json.dumps(obj["schedule"], indent=1))
    if args.json:
        print(json.dumps(obj, indent=2))
    else:
        best = f"{best_ms:.3f} ms (verified)" if best_ms is not None else "nothing verified"
        if args.trials == 0:
            line = f"{p.name} [greedy, 0 measurements, seed {args.seed}]: decided in {obj['search_s']:.2f} s by V alone"
            line += f" (V predicted {obj['value_predicted_ms']:.3f} ms); measured once after the search: {best}"
        else:
            line = f"{p.name} [{args.strategy}, seed {args.seed}]: best {best} after {obj['trials']} trials, {obj['search_s']:.1f} s"
            line += f" ({obj['model_s']:.1f} s model, {obj['measure_s']:.1f} s measuring, {obj['seen']} schedules predicted)"
        if base:
            sp = obj["speedup_over_baseline"]
            line += f"\n{args.baseline}: {base['ms']:.3f} ms" if base["ms"] else f"\n{args.baseline}: failed ({base['error']})"
            line += f" -> {sp:.2f}x" if sp else ""
        print(line)
    return 0 if best_ms is not None else 2


def _zero_measure(p: Any, args: argparse.Namespace, runner: Any, db: Database | None) -> dict[str, Any]:
    """Zero-measurement greedy, then its schedule measured once (verified) for the report."""
    from ..search.greedy import zero_measure_search  # noqa: PLC0415

    z = zero_measure_search(p, args.seed, wall_s=args.budget_s)
    m = api.measure(p, z.schedule, runner, db, min_time_s=0.3, profile=False)
    ok = m.ok and m.verified
    return {
        "strategy": "greedy", "pipeline": p.name, "seed": args.seed, "measurements_in_search": 0, "search_s": round(z.search_s, 3),
        "value_function": z.value_name, "value_predicted_ms": z.value_ms, "best_ms": m.median_ms if ok else None, "verified": ok,
        "error": None if ok else (m.error or "not verified"), "schedule": z.schedule.to_json(),
    }  # fmt: skip
