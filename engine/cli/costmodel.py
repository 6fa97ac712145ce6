"""`costmodel generate | train | eval`: the learned cost models from the command line.

Wired like every CLI module (engine/cli/__init__.py): `register(subparsers)` adds the
command, `run(args)` runs it. With --json each prints one JSON object; progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
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
        help="worker processes measuring in parallel (default 1: the cleanest timings; with --cluster: jobs sent at once, 2 per CPU)",
    )  # fmt: skip
    g.add_argument("--threads", type=A.threads, default=None, help="Halide threads per worker (default: cores / workers)")
    A.add_cluster(g)
    g.add_argument("--no-zoo", action="store_true", help="leave out the zoo pipelines at small size")
    g.add_argument("--max-stages", type=A.int_in(2, 256), default=8)
    g.add_argument("--size", choices=list(FLOP_BUDGET), default="small")
    g.add_argument("--min-time", type=A.nonneg_seconds, default=0.05, help="minimum timed seconds per schedule")
    g.add_argument("--timeout", type=A.positive_seconds, default=20.0, help="seconds before a schedule's job is killed")
    g.add_argument("--careful", action="store_true", help="re-measure each label with a window scaled to the kernel (about 3x the time)")
    g.add_argument(
        "--clock", choices=["wall", "thread_cpu"], default="wall",
        help="time runs by wall clock or by the timing thread's CPU time (steady on a shared machine; with --threads 1)",
    )  # fmt: skip
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
    t.add_argument("--list-weight", type=A.nonneg_float, default=0.0, help="weight of the listwise (ListNet) ranking loss (GNN)")
    t.add_argument("--loss", choices=["mse", "adams", "mse+adams"], default="mse", help="GNN loss: log squared error, Adams2019's, or both")
    t.add_argument(
        "--gnn-options", type=A.names_in(("relative", "structure", "attention", "readout"), "GNN option"), default=None,
        help="comma list: relative (producer vs consumer edge features), structure (containment/inlining edges), attention, readout",
    )  # fmt: skip
    t.add_argument(
        "--seeds", type=A.int_in(1, 100), default=1, help="train each model with this many seeds on the same split (eval: mean and spread)"
    )
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
    x.add_argument("--all-environments", action="store_true", help="every stored (target, host, threads), not only the most common")
    x.add_argument("--json", action="store_true")
    v = sub.add_parser("train-value", help="train the offline value function of zero-measurement greedy search (value.pt + value.json)")
    v.add_argument("--out", type=A.output_dir, help="directory (default: the user data's costmodel/; shipped: resources/costmodel)")
    v.add_argument("--kind", choices=["gnn", "lstm"], default="gnn", help="graph network over the stages, or LSTM over the decisions")
    v.add_argument("--pipelines", type=A.nonneg_int, default=100, help="of the shipped data set's pipelines (most measured first)")
    v.add_argument("--random-pipelines", type=A.nonneg_int, default=40, help="fresh random pipelines (cost-model rollouts only)")
    v.add_argument("--rounds", type=A.nonneg_int, default=2, help="rounds of greedy search with the current V, each refitting V")
    v.add_argument("--epochs", type=A.positive_int, default=40)
    v.add_argument("--seed", type=A.seed, default=0)
    v.add_argument("--threads", type=A.threads, default=1, help="torch threads (default 1)")
    v.add_argument("--json", action="store_true")
    _register_host(sub)


def _register_host(sub: Any) -> None:
    """noise, finetune, calibrate-host: the labels' ceiling and the model on this machine (issue 13)."""
    n = sub.add_parser("noise", help="re-measure a fixed sample of dataset schedules twice: the labels' noise ceiling per size class")
    n.add_argument("--db", help="SQLite file or .jsonl.gz dataset to sample (default: the shipped dataset)")
    n.add_argument("--pipelines", type=A.positive_int, default=4, help="dataset pipelines, spread over the label sizes")
    n.add_argument("--per-pipeline", type=A.int_in(2, 10_000), default=16)
    n.add_argument("--seed", type=A.seed, default=0)
    n.add_argument(
        "--protocol", type=A.names_in(("baseline", "careful", "cpu"), "protocol", special=("both",)), default="baseline",
        help="how each label is taken: comma list of baseline, careful, cpu (thread CPU time; use --threads 1); both: baseline,careful",
    )  # fmt: skip
    n.add_argument("--threads", type=A.threads, default=None)
    n.add_argument("--json", action="store_true")
    r = sub.add_parser("relabel", help="measure stored labels again in interleaved passes of random order; label: the fastest pass")
    r.add_argument("--db", help="SQLite file (default: the user's measurement database)")
    r.add_argument("--pipeline", help="only these pipelines (comma list of names or content hashes)")
    r.add_argument("--passes", type=A.int_in(1, 20), default=1, help="passes over every label, each in a new random order")
    r.add_argument("--remeasure-above", type=A.nonneg_float, default=0.1, help="|log| disagreement of the passes that earns one more")
    r.add_argument("--seed", type=A.seed, default=0)
    r.add_argument("--threads", type=A.threads, default=None, help="the measurements' Halide threads (default: this machine's cores)")
    r.add_argument("--json", action="store_true")
    f = sub.add_parser("finetune", help="refit the default (tree) model on this host's measurements; before/after on held-out ones")
    f.add_argument("--db", help="SQLite file (default: the user's measurement database)")
    f.add_argument("--pipeline", help="only this pipeline's measurements (name or content hash)")
    f.add_argument("--holdout", type=A.holdout_fraction, default=0.3, help="share of each pipeline's measurements held out")
    f.add_argument("--max-train", type=A.positive_int, default=None, help="at most this many training measurements")
    f.add_argument("--rounds", type=A.positive_int, default=None, help="boosting rounds added (default: by the data's size)")
    f.add_argument("--seed", type=A.seed, default=0)
    f.add_argument("--threads", type=A.threads, default=None, help="the measurements' Halide threads (default: this machine's cores)")
    f.add_argument("--allow-other-host", action="store_true", help="use measurements of another host or target (refused by default)")
    f.add_argument("--no-save", action="store_true", help="report before/after only; keep the current model")
    f.add_argument("--reset", action="store_true", help="remove the fine-tuned model: back to the shipped one")
    f.add_argument("--label", choices=["median", "fastest"], default="median", help="which time of each measurement is its label")
    f.add_argument("--clock", choices=["wall", "thread_cpu"], default=None, help="labels of this clock (default: the only one stored)")
    f.add_argument("--no-pipeline-corrections", action="store_true", help="host-level trees only, no per-pipeline corrections")
    f.add_argument(
        "--splits", type=A.positive_int, default=None,
        help="benchmark: per --pipeline (comma list) N seeded splits, --max-train measurements to train on, the rest judged; nothing saved",
    )  # fmt: skip
    f.add_argument("--json", action="store_true")
    h = sub.add_parser("calibrate-host", help="measure a small standard set on this host (minutes) and fine-tune on it")
    h.add_argument("--db", help="SQLite file for the measurements (default: the user's measurement database)")
    h.add_argument("--pipelines", type=A.positive_int, default=16, help="standard set: dataset pipelines the models trained on")
    h.add_argument("--per-pipeline", type=A.int_in(2, 10_000), default=10)
    h.add_argument("--eval-pipelines", type=A.nonneg_int, default=0, help="also measure this many held-out pipelines: tau before/after")
    h.add_argument("--budget", type=A.positive_seconds, default=600.0, help="seconds of measuring at most")
    h.add_argument("--threads", type=A.threads, default=None, help="Halide threads (default: this machine's cores)")
    h.add_argument("--clock", choices=["wall", "thread_cpu"], default="wall", help="thread_cpu: steady under load (with --threads 1)")
    h.add_argument("--no-save", action="store_true", help="report only; keep the current model")
    h.add_argument("--json", action="store_true")


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
        if args.costmodel in HOST_COMMANDS:
            return HOST_COMMANDS[args.costmodel](args)
        if args.costmodel == "train-value":
            return _train_value(args)
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
        # A cluster: two jobs per CPU, so each node has the next one queued (RayRunner.feeders).
        workers = args.workers or (getattr(runner, "feeders", runner.slots) if runner is not None else 1)
        res = generate(
            _db(args), args.pipelines, args.per_pipeline, args.seed, workers, with_zoo=not args.no_zoo, max_stages=args.max_stages,
            size=args.size, threads=args.threads, job_options={"min_time_s": args.min_time, "timeout_s": args.timeout, "clock": args.clock},
            progress=progress, runner=runner, careful=args.careful,
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
        rounds=args.rounds, target=args.target, rank_weight=args.rank_weight, list_weight=args.list_weight, loss=args.loss,
        gnn_options=dict.fromkeys(A.split(args.gnn_options) or [], True), seeds=args.seeds, holdout_pipelines=args.holdout_pipelines,
        holdout_schedules=args.holdout_schedules, seed=args.seed, threads=args.threads, log=_err,
    )  # fmt: skip
    text = f"trained {', '.join(res['models'])} on {res['train']} samples ({res['pipelines']} pipelines); saved to {res['out']}"
    print_result(args, res, text)
    return 0


def _train_value(args: argparse.Namespace) -> int:
    import torch  # noqa: PLC0415

    from ..costmodel import default_dir  # noqa: PLC0415
    from ..search.value_offline import TrainConfig, train_value  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    cfg = TrainConfig(
        kind=args.kind, dataset_pipelines=args.pipelines, random_pipelines=args.random_pipelines, rounds=args.rounds,
        epochs=args.epochs, seed=args.seed,
    )  # fmt: skip
    value, res = train_value(cfg, log=_err)
    out = Path(args.out) if args.out else default_dir()
    value.save(out)
    res["out"] = str(out)
    last = res["rounds"][-1]
    text = f"value function ({args.kind}) trained on {last['states']} states of {res['pipelines']} pipelines in {res['train_s']:.0f} s"
    print_result(args, res, f"{text}; saved to {out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from ..costmodel.export import export_dataset  # noqa: PLC0415

    res = export_dataset(_db(args), args.out, all_environments=args.all_environments)
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
    from ..costmodel.dataset import label_clocks  # noqa: PLC0415
    from ..costmodel.evaluate import add_ceiling, choose, evaluate, noise_ceiling  # noqa: PLC0415
    from ..costmodel.export import SHIPPED_DATASET  # noqa: PLC0415
    from ..costmodel.files import read_json  # noqa: PLC0415
    from ..costmodel.noise import report_path  # noqa: PLC0415

    d = _models_dir(args)
    if args.db is None and Path(d).resolve() == SHIPPED.resolve():
        args.db = str(SHIPPED_DATASET)  # the shipped models are evaluated on the data they were trained on
    db = _db(args)  # a dataset file is imported (and its bytes hashed) once
    res: dict[str, Any] = evaluate(db, d, with_analytic=not args.no_analytic)  # the report: "chosen" is a str
    if args.choose:
        res["chosen"] = choose(res, d)
    target, host, threads = read_json(Path(d, "split.json"))["environment"]
    noise = report_path()  # the labels' noise ceiling, when `costmodel noise` has measured one
    protocol = "cpu" if label_clocks(db, target, host, threads) == {"thread_cpu"} else "baseline"  # how the labels were timed
    add_ceiling(res, noise_ceiling(read_json(noise), target, host, protocol) if noise.exists() else None)
    cols = ("mape", "kendall_tau", "pairwise_acc", "top1_regret", "top5_regret", "n_pipelines", "n_samples")
    lines = ["held-out pipelines (seen pipelines' held-out schedules in brackets)", f"{'model':<10}" + "".join(f"{c:>22}" for c in cols)]
    for name, m in res.items():
        if name == "chosen":
            lines.append(f"default model written to {d}/default.json: {m}")
            continue
        if name == "noise_ceiling":
            where = "this data's machine" if m["same_environment"] else f"{m['host']} ({m['target']}), not the data's machine"
            tau = _fmt(m["kendall_tau"])
            lines.append(f"noise ceiling (two runs of the same schedules, {m['protocol']}): tau {tau}, measured on {where}")
            continue
        if "seeds" in m:  # mean ± std over the seeds
            sd = m["seeds"]
            cells = "".join(
                f"{_fmt(sd[c]['mean']) + '±' + _fmt(sd[c]['std']) + ' [' + _fmt(sd['seen_pipelines'][c]['mean']) + ']':>22}"
                if c in sd else f"{_fmt(m[c]):>22}"
                for c in cols
            )  # fmt: skip
            frac = f", tau {_fmt(sd['tau_of_ceiling'])} of the noise ceiling" if "tau_of_ceiling" in sd else ""
            lines.append(f"{name:<10}{cells}  ({len(sd['seeds'])} seeds{frac})")
        else:
            cells = "".join(f"{_fmt(m[c]) + ' [' + _fmt(m['seen_pipelines'][c]) + ']':>22}" for c in cols)
            lines.append(f"{name:<10}{cells}")
    print_result(args, res, "\n".join(lines))
    return 0


def _progress(phase: str, done: int, total: int) -> None:
    _err(f"{phase}: {done}/{total}")


def _noise(args: argparse.Namespace) -> int:
    from ..costmodel.export import SHIPPED_DATASET  # noqa: PLC0415
    from ..costmodel.noise import PROTOCOLS, estimate, fixed_sample, save_report  # noqa: PLC0415
    from ..measure import Runner  # noqa: PLC0415

    if args.db is None:
        args.db = str(SHIPPED_DATASET)  # the same fixed sample on every machine
    items = fixed_sample(_db(args), args.pipelines, args.per_pipeline, args.seed)
    names = ["baseline", "careful"] if args.protocol == "both" else args.protocol.split(",")
    res: dict[str, Any] = {"samples": len(items), "pipelines": args.pipelines}
    lines = []
    with Runner(args.threads) as runner:
        for name in names:
            rep = estimate(items, runner, PROTOCOLS[name], progress=_noise_progress(name))
            save_report(rep)
            res[name] = rep.to_json()
            o = rep.overall
            lines.append(
                f"{name}: tau {_fmt(o['kendall_tau'])}, median |log ratio| {_fmt(o['median_abs_log_ratio'])} over {o['n_samples']} "
                f"samples of {o['n_pipelines']} pipelines ({rep.jobs} jobs, {rep.seconds:g} s); with each label's fastest run: "
                f"tau {_fmt(rep.fastest.get('kendall_tau'))}, median |log ratio| {_fmt(rep.fastest.get('median_abs_log_ratio'))}"
            )
            lines += [
                f"  {c}: tau {_fmt(v['kendall_tau'])}, median |log ratio| {_fmt(v['median_abs_log_ratio'])} ({v['n_samples']} samples)"
                for c, v in rep.classes.items()
            ]
            lines += [f"  failed: {f}" for f in rep.failed]
    res["host"], res["target"] = runner.host, runner.target
    print_result(args, res, "\n".join(lines))
    return 0


def _noise_progress(name: str) -> Callable[[int, int], None]:
    return lambda k, n: _err(f"noise ({name}): {k}/{n}")


def _host_line(rep: dict[str, Any]) -> str:
    return f" (the shipped model was trained on another host: {rep['base_host']})" if rep.get("host_differs") else ""


def _finetune(args: argparse.Namespace) -> int:
    from ..costmodel.finetune import current_environment, finetune_on_db, reset  # noqa: PLC0415

    if args.reset:
        had = reset()
        text = "fine-tuned model removed: the shipped model is used" if had else "no fine-tuned model to remove"
        print_result(args, {"reset": had}, text)
        return 0
    env = current_environment(args.threads)
    if args.splits:
        return _finetune_splits(args, env)
    rep = finetune_on_db(
        _db(args), env, pipeline=args.pipeline, holdout=args.holdout, max_train=args.max_train, rounds=args.rounds, seed=args.seed,
        allow_other_host=args.allow_other_host, save=not args.no_save, progress=_progress, label=args.label,
        per_pipeline=not args.no_pipeline_corrections, clock=args.clock,
    )  # fmt: skip
    where = "held-out" if rep["held_out"] else "training (too few to hold any out)"
    text = "\n".join(
        [
            f"fine-tuned on {rep['n_train']} measurements of {rep['host']}{_host_line(rep)}; {where} {rep['n_test']}:",
            f"  before: {rep['before']['text']}",
            f"  after:  {rep['after']['text']}",
            f"  saved to {rep['saved']}" if rep["saved"] else f"  not saved: {rep.get('not_saved', '--no-save')}",
        ]
    )
    print_result(args, rep, text)
    return 0


def _finetune_splits(args: argparse.Namespace, env: Any) -> int:
    from ..costmodel.finetune import finetune_splits  # noqa: PLC0415

    if not args.pipeline:
        raise A.CliError("--splits needs --pipeline (one or a comma list of pipelines measured here)")
    rep = finetune_splits(
        _db(args), env, args.pipeline.split(","), n_train=args.max_train or 50, splits=args.splits, label=args.label,
        allow_other_host=args.allow_other_host, progress=_progress, per_pipeline=not args.no_pipeline_corrections, clock=args.clock,
    )  # fmt: skip
    lines = [f"{rep['n_train']} measurements to fine-tune on, {rep['splits']} splits, {rep['label']} labels (median over splits):"]
    for name, r in rep["pipelines"].items():
        lines.append(
            f"  {name}: median |log error| {r['before_median_abs_log_error']:.3f} -> {r['after_median_abs_log_error']:.3f} "
            f"(cut {r['cut']:.0%}), tau {r['before_kendall_tau']:.2f} -> {r['after_kendall_tau']:.2f}"
        )
    lines.append(f"median cut {rep['median_cut']:.0%}, median tau change {rep['median_tau_change']:+.3f}; "
                 f"halved on {rep['halved']} of {len(rep['pipelines'])}, tau up on {rep['tau_improved']}, "
                 f"both on {rep['target_met']}")  # fmt: skip
    print_result(args, rep, "\n".join(lines))
    return 0


def _calibrate_host(args: argparse.Namespace) -> int:
    from ..costmodel.finetune import calibrate_host  # noqa: PLC0415
    from ..database import default_path  # noqa: PLC0415
    from ..measure import Runner  # noqa: PLC0415

    with Runner(args.threads) as runner:
        rep = calibrate_host(
            args.db or default_path(), runner, pipelines=args.pipelines, per_pipeline=args.per_pipeline,
            eval_pipelines=args.eval_pipelines, budget_s=args.budget, save=not args.no_save, progress=_progress, clock=args.clock,
        )  # fmt: skip
    lines = [
        f"measured {rep['measured']} of {rep['standard_set']} standard schedules on {rep['host']}{_host_line(rep)} "
        f"in {rep['measure_seconds']:g} s; fitted: {rep['train_fit']['before']['text']} -> {rep['train_fit']['after']['text']}"
    ]
    if "eval" in rep:
        e = rep["eval"]
        lines += [
            f"held-out pipelines ({e['samples']} schedules of {e['pipelines']}):",
            f"  original host's labels: {e['original_host']['text']}",
            f"  this host, before: {e['this_host_before']['text']}",
            f"  this host, after:  {e['this_host_after']['text']}",
        ]
    lines.append(f"saved to {rep['saved']}" if rep.get("saved") else "not saved (--no-save)")
    print_result(args, rep, "\n".join(lines))
    return 0


def _relabel(args: argparse.Namespace) -> int:
    from ..costmodel.dataset import relabel  # noqa: PLC0415
    from ..measure import Runner  # noqa: PLC0415

    with Runner(args.threads) as runner:
        rep = relabel(_db(args), runner, args.pipeline.split(",") if args.pipeline else None, passes=args.passes,
                      remeasure_above=args.remeasure_above, seed=args.seed, progress=_noise_progress("relabel"))  # fmt: skip
    text = (
        f"{rep['labels']} labels of {rep['pipelines']} pipelines measured {rep['passes']} more times, {rep['remeasured']} once more; "
        f"passes disagree by a median {_fmt(rep['median_pass_log_range'])} (p90 {_fmt(rep['p90_pass_log_range'])}) in log time; "
        f"load {rep['load_before']:.1f} -> {rep['load_after']:.1f}, {rep['seconds']:g} s"
    )
    print_result(args, rep, text)
    return 0


HOST_COMMANDS = {"relabel": _relabel, "noise": _noise, "finetune": _finetune, "calibrate-host": _calibrate_host}
