"""`costmodel generate | train | eval`: the learned cost models from the command line.

Wired like every CLI module (engine/cli/__init__.py): `register(subparsers)` adds the
command, `run(args)` runs it. With --json each prints one JSON object; progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from .. import api
from ..randpipe import FLOP_BUDGET
from . import args as A
from .args import print_result


def register(subparsers: Any) -> None:
    """Add the `costmodel` command and its subcommands to an `add_subparsers()` object."""
    sp = subparsers.add_parser("costmodel", help="learned cost models: generate data, train, evaluate")
    sub = sp.add_subparsers(dest="costmodel", required=True)
    g = sub.add_parser("generate", help="measure random schedules of random (and zoo) pipelines into the database")
    g.add_argument("--db", help="SQLite file (default: $SCHEDULE_EXPLORER_DB or the user data directory)")
    g.add_argument("--pipelines", type=A.nonneg_int, default=20, help="random pipelines (seeds SEED, SEED+1, ...)")
    g.add_argument("--per-pipeline", type=A.positive_int, default=10, help="verified schedules per pipeline")
    g.add_argument("--seed", type=A.seed, default=0)
    g.add_argument(
        "--workers", type=A.int_in(1, 256), default=None,
        help="worker processes measuring in parallel (default 1: the cleanest timings; with --cluster: jobs at once, default its CPUs)",
    )  # fmt: skip
    g.add_argument("--threads", type=A.threads, default=None, help="Halide threads per worker (default: cores / workers)")
    A.add_cluster(g)
    g.add_argument("--no-zoo", action="store_true", help="leave out the zoo pipelines at small size")
    g.add_argument("--max-stages", type=A.int_in(2, 256), default=8)
    g.add_argument("--size", choices=list(FLOP_BUDGET), default="small")
    g.add_argument("--min-time", type=A.nonneg_seconds, default=0.05, help="minimum timed seconds per schedule")
    g.add_argument("--timeout", type=A.positive_seconds, default=20.0, help="seconds before a schedule's job is killed")
    g.add_argument("--json", action="store_true")
    t = sub.add_parser("train", help="train the GNN, Halide-style and TVM-style models from the database")
    t.add_argument("--db", help="SQLite file or .jsonl.gz dataset")
    t.add_argument("--out", type=A.output_dir, help="model directory (default: the user data directory's costmodel/)")
    t.add_argument("--models", type=A.names_in(A.TRAINED_MODELS, "model"), default=",".join(A.TRAINED_MODELS))
    t.add_argument("--epochs", type=A.positive_int, default=60)
    t.add_argument("--batch", type=A.positive_int, default=64, help="graphs per batch (torch models)")
    t.add_argument("--rounds", type=A.positive_int, default=300, help="LightGBM boosting rounds")
    t.add_argument("--target", choices=["log", "relative"], default="log", help="log run time, or log time relative to its pipeline")
    t.add_argument("--rank-weight", type=A.nonneg_float, default=0.0, help="weight of the pairwise ranking loss (torch models)")
    t.add_argument("--holdout-pipelines", type=A.holdout_fraction, default=0.2)
    t.add_argument("--holdout-schedules", type=A.holdout_fraction, default=0.2)
    t.add_argument("--seed", type=A.seed, default=0)
    t.add_argument("--threads", type=A.threads, default=None, help="torch threads")
    t.add_argument("--json", action="store_true")
    e = sub.add_parser("eval", help="metrics of the trained models on their held-out pipelines and schedules")
    e.add_argument("--db", help="SQLite file or .jsonl.gz dataset (default: the shipped dataset for the shipped models)")
    e.add_argument("--models-dir", help="model directory (default: the user data directory's costmodel/)")
    e.add_argument("--no-analytic", action="store_true", help="leave out the analytic roofline reference")
    e.add_argument(
        "--choose", action="store_true", help="write default.json: the app and search then use the model best at ranking unseen pipelines"
    )
    e.add_argument("--json", action="store_true")
    c = sub.add_parser("calibrate", help="measure the zoo at full size and compare every model's predictions with the measurements")
    c.add_argument("--db", help="SQLite file for the measurements (default: the user's measurement database)")
    c.add_argument("--models-dir", help="model directory (default: the first with trained models)")
    c.add_argument("--pipelines", type=A.pipelines, help="comma-separated zoo names (default: all)")
    c.add_argument("--size", choices=["small", "full"], default="full")
    c.add_argument("--threads", type=A.threads, default=None)
    A.add_cluster(c)
    c.add_argument("--json", action="store_true")
    x = sub.add_parser("export", help="write the dataset as a small .jsonl.gz file (pipelines, schedules, verified timings)")
    x.add_argument("--db", help="SQLite file")
    x.add_argument("--out", type=A.output_file, required=True, help="e.g. resources/costmodel/dataset.jsonl.gz")
    x.add_argument("--json", action="store_true")


def _db(args: argparse.Namespace) -> str:
    """The database to read: --db (a .jsonl.gz dataset file is imported into the cache
    first), else the user's measurement database."""
    from ..database import default_path  # noqa: PLC0415

    if args.db and args.db.endswith(".jsonl.gz"):
        from ..costmodel.export import shipped_db  # noqa: PLC0415

        return str(shipped_db(Path(args.db)))
    return args.db or str(default_path())


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def run(args: argparse.Namespace) -> int:
    try:
        return {"generate": _generate, "train": _train, "eval": _eval, "export": _export, "calibrate": _calibrate}[args.costmodel](args)
    except (ValueError, FileNotFoundError) as exc:  # DatasetFileError is a ValueError
        raise api.InputError(str(exc)) from None


def _generate(args: argparse.Namespace) -> int:
    from ..cluster import make_runner  # noqa: PLC0415
    from ..costmodel.dataset import generate  # noqa: PLC0415  # heavy imports only for this command

    def progress(k: int, n: int, st: dict[str, int]) -> None:
        _err(f"[{k}/{n}] " + ", ".join(f"{a} {b}" for a, b in sorted(st.items())))

    runner = None if args.cluster.kind == "local" else make_runner(args.cluster, args.threads)
    try:
        workers = args.workers or (runner.slots if runner is not None else 1)
        res = generate(
            _db(args), args.pipelines, args.per_pipeline, args.seed, workers, with_zoo=not args.no_zoo, max_stages=args.max_stages,
            size=args.size, threads=args.threads, job_options={"min_time_s": args.min_time, "timeout_s": args.timeout},
            progress=progress, runner=runner,
        )  # fmt: skip
    finally:
        if runner is not None:
            runner.close()
    if runner is not None:
        res.update(cluster=str(args.cluster), host=runner.host, target=runner.target)
    print_result(args, res, ", ".join(f"{k} {v}" for k, v in res.items()))
    return 0


def _train(args: argparse.Namespace) -> int:
    from ..costmodel.train import train_all  # noqa: PLC0415

    res = train_all(
        _db(args), args.out, models=A.split(args.models) or [], epochs=args.epochs, batch=args.batch,
        rounds=args.rounds, target=args.target, rank_weight=args.rank_weight, holdout_pipelines=args.holdout_pipelines,
        holdout_schedules=args.holdout_schedules, seed=args.seed, threads=args.threads, log=_err,
    )  # fmt: skip
    text = f"trained {', '.join(res['models'])} on {res['train']} samples ({res['pipelines']} pipelines); saved to {res['out']}"
    print_result(args, res, text)
    return 0


def _export(args: argparse.Namespace) -> int:
    from ..costmodel.export import export_dataset  # noqa: PLC0415

    res = export_dataset(_db(args), args.out)
    print_result(args, res, f"{res['samples']} samples of {res['pipelines']} pipelines written to {res['out']}")
    return 0


def _models_dir(args: argparse.Namespace) -> str:
    from ..costmodel import model_dirs  # noqa: PLC0415

    d = args.models_dir or next((str(x) for x in model_dirs() if (x / "split.json").exists()), None)
    if d is None:
        raise FileNotFoundError("no trained cost models found (run `costmodel train`, or give --models-dir)")
    return d


def _calibrate(args: argparse.Namespace) -> int:
    from .. import zoo  # noqa: PLC0415
    from ..cluster import make_runner  # noqa: PLC0415
    from ..costmodel import AnalyticModel  # noqa: PLC0415
    from ..costmodel.calibration import calibrate, table  # noqa: PLC0415
    from ..costmodel.train import load_models  # noqa: PLC0415
    from ..database import Database, default_path  # noqa: PLC0415
    from ..measure import default_threads  # noqa: PLC0415

    d = _models_dir(args)
    threads = args.threads or default_threads()
    models = {"analytic": AnalyticModel(cores=threads), **load_models(d)}
    names = A.split(args.pipelines) or zoo.names()  # checked against the zoo by the option's type
    with Database(args.db or default_path()) as db, closing(make_runner(args.cluster, threads)) as runner:
        res = calibrate(models, names, runner, db, size=args.size, progress=_err)
    res["models_dir"] = d
    res["table"] = table(res)
    print_result(args, res, res["table"])
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ..costmodel import SHIPPED  # noqa: PLC0415
    from ..costmodel.evaluate import choose, evaluate  # noqa: PLC0415
    from ..costmodel.export import SHIPPED_DATASET  # noqa: PLC0415

    d = _models_dir(args)
    if args.db is None and Path(d).resolve() == SHIPPED.resolve():
        args.db = str(SHIPPED_DATASET)  # the shipped models are evaluated on the data they were trained on
    res: dict[str, Any] = evaluate(_db(args), d, with_analytic=not args.no_analytic)  # the report: "chosen" is a str
    if args.choose:
        res["chosen"] = choose(res, d)
    cols = ("mape", "kendall_tau", "pairwise_acc", "top1_regret", "top5_regret", "n_pipelines", "n_samples")
    lines = ["held-out pipelines (seen pipelines' held-out schedules in brackets)", f"{'model':<10}" + "".join(f"{c:>22}" for c in cols)]
    for name, m in res.items():
        if name == "chosen":
            lines.append(f"default model written to {d}/default.json: {m}")
            continue
        cells = "".join(f"{_fmt(m[c]) + ' [' + _fmt(m['seen_pipelines'][c]) + ']':>22}" for c in cols)
        lines.append(f"{name:<10}{cells}")
    print_result(args, res, "\n".join(lines))
    return 0
