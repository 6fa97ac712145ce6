"""`tune MODEL --budget-s N`: whole-model tuning from the command line (engine/tuning).

Prints, with --json, per task (occurrences, start ms, best ms, trials, where the best came
from) and end to end: the heuristic and tuned schedules, ONNX Runtime and PyTorch (where a
definition exists) measured in the same run after tuning, in interleaved rounds, every
Halide time verified. `--out FILE` writes the tuned schedule (`measure MODEL --schedule
FILE` loads it back), or the heuristic's where the tuned model measured no faster end to end
(`saved` in the JSON says which). Records go to the database (--db): a second `tune` of the same model
(or of another with the same tasks) starts from them. `--cluster` measures the trials on a
Ray cluster, as many at once as it has slots.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from .. import api
from ..cluster import make_runner
from ..database import Database
from . import args as A


def register(subparsers: Any) -> None:
    """Add the `tune` command to an `add_subparsers()` object."""
    sp = subparsers.add_parser("tune", help="tune a whole model: each distinct task once, the budget where end-to-end time gains most")
    sp.add_argument("model", help="an .onnx model (or any pipeline: a built-in name or a pipeline .json file)")
    sp.add_argument("--budget-s", type=A.positive_seconds, default=120.0, help="wall seconds of tuning (the comparison after is extra)")
    sp.add_argument("--trials", type=A.positive_int, default=10**6, help="task measurements at most")
    sp.add_argument("--seed", type=A.seed, default=0)
    sp.add_argument("--out", type=A.output_file, help="write the kept schedule here (tuned; the heuristic if tuned is no faster)")
    sp.add_argument("--db", help="SQLite file (default: $SCHEDULE_EXPLORER_DB or the user data directory)")
    sp.add_argument("--no-db", action="store_true", help="neither read nor write tuning records")
    sp.add_argument("--threads", type=A.threads, default=None, help=f"Halide threads, 1 to {A.MAX_THREADS} (default: all cores)")
    sp.add_argument("--repeats", type=A.positive_int, default=3, help="rounds of the end-to-end comparison")
    sp.add_argument("--min-time", type=A.nonneg_seconds, default=0.5, help="minimum timed seconds per variant and round")
    sp.add_argument("--no-compare", action="store_true", help="skip the end-to-end comparison (heuristic, tuned, ORT, PyTorch)")
    sp.add_argument("--size", choices=("small", "full"), default="full", help="size of a built-in pipeline")
    sp.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    A.add_cluster(sp)
    sp.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from ..bench.models import compare_tuned  # noqa: PLC0415  # torch / onnxruntime only when comparing
    from ..tuning import TuneProgress, keep_faster, tune  # noqa: PLC0415

    p = api.load_pipeline(args.model, args.size)
    db = None if args.no_db else Database(args.db)

    def progress(pr: TuneProgress) -> None:
        if args.quiet:
            return
        t = pr.tasks[pr.task]
        res = f"best {t.best_ms:.3f} ms" if t.best_ms is not None else "nothing verified yet"
        est = f"; end to end (sum of tasks, estimate) {pr.estimate_ms:.1f} ms" if pr.estimate_ms is not None else ""
        flag = "" if pr.verified else " (trial failed)"
        print(
            f"[{pr.elapsed_s:6.1f} s] trial {pr.trials:4d}: task {t.index} x{t.occurrences} {t.label}: {res}{flag}{est}",
            file=sys.stderr,
            flush=True,
        )

    with closing(make_runner(args.cluster, args.threads)) as runner:
        res = tune(p, runner, budget_s=args.budget_s, trials=args.trials, db=db, seed=args.seed, progress=progress)
        e2e: dict[str, Any] | None = None
        if not args.no_compare:
            if not args.quiet:
                print(f"[tune] comparing end to end ({args.repeats} rounds)", file=sys.stderr, flush=True)
            e2e = compare_tuned(p, res.start, res.schedule, runner, runner.threads, p.name, args.repeats, args.min_time)
    keep, kept = keep_faster(res.start, res.schedule, e2e) if e2e is not None else (res.schedule, "tuned")
    if args.out:
        Path(args.out).write_text(json.dumps(keep.to_json(), indent=1))
    obj: dict[str, Any] = {**res.to_json(), "host": runner.host, "target": runner.target, "threads": runner.threads}
    obj["saved"] = kept  # "heuristic" where the tuned whole model measured no faster than its start
    obj["cluster"] = str(args.cluster)
    obj["schedule_file"] = args.out
    obj["end_to_end"] = _end_to_end(e2e) if e2e is not None else None
    lines = [f"{p.name}: {len(res.tasks)} distinct tasks in {obj['units']} units, {res.trials} trials in {res.tuning_s:.1f} s"]
    for t in res.tasks:
        start = f"{t.start_ms:.3f}" if t.start_ms is not None else "-"
        best = f"{t.best_ms:.3f}" if t.best_ms is not None else "-"
        lines.append(f"  task {t.index:3d} x{t.occurrences:<3d} {t.label}: start {start} ms, best {best} ms, {t.trials} trials")
    if obj["end_to_end"]:
        e = obj["end_to_end"]
        lines.append("end to end: " + ", ".join(f"{k} {_ms(e.get(k + '_ms'))}" for k in ("heuristic", "tuned", "onnxruntime", "pytorch")))
    if kept == "heuristic":
        lines.append("the tuned model measured no faster end to end than the heuristic: the heuristic schedule is the one saved")
    A.print_result(args, obj, "\n".join(lines))
    return 0 if any(t.best_ms is not None for t in res.tasks) else 2


def _ms(v: float | None) -> str:
    return f"{v:.3f} ms" if v is not None else "n/a"


def _end_to_end(row: dict[str, Any]) -> dict[str, Any]:
    """compare_tuned's row, flattened for the command's JSON (each variant's cell kept)."""
    out: dict[str, Any] = {}
    for k in ("heuristic", "tuned", "onnxruntime", "pytorch"):
        cell = row[k]
        out[f"{k}_ms"] = cell.get("median_ms") if cell.get("ok") else None
        out[f"{k}_verified"] = cell.get("verified")
        out[k] = cell
    for k in ("tuned_over_ort", "heuristic_over_ort", "tuned_over_pytorch", "heuristic_over_tuned"):
        out[k] = row.get(k)
    return out
