"""`bench core | models | import | search | fuzz | costmodel | placement | cluster | peak | conformance | kernels`: the benchmarks.

Each subcommand's options are parsed here and handed to its benchmark in engine/bench/ as
plain parameters; the result is printed as its table (or, with --json, one JSON object)
and `--out FILE` also writes the JSON. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import zoo
from ..halide_backend import AUTOSCHEDULERS
from . import args as A
from .args import print_result


# --- bench core -------------------------------------------------------------------------------
def _core_parser(bsub: Any) -> None:
    bp = bsub.add_parser("core", help="default, hand and Halide's autoschedulers on every zoo pipeline")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--size", choices=zoo.SIZES, default="full")
    bp.add_argument("--pipelines", type=A.pipelines, help="comma-separated subset of the zoo")
    bp.add_argument(
        "--autoschedulers",
        type=A.names_in(AUTOSCHEDULERS, "autoscheduler", special=["none"]),
        default=",".join(AUTOSCHEDULERS),
        help="comma-separated, or 'none'",
    )
    bp.add_argument("--repeats", type=A.positive_int, default=3, help="measurements per variant (median of medians)")
    bp.add_argument("--min-time", type=A.nonneg_seconds, default=0.5)
    A.add_cluster(bp)
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _core(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.core import bench_core  # noqa: PLC0415  # heavy, only for this command

    autos = [] if args.autoschedulers == "none" else A.split(args.autoschedulers) or []
    return bench_core(
        size=args.size, pipelines=A.split(args.pipelines), autoschedulers=autos, repeats=args.repeats, min_time_s=args.min_time,
        cluster=args.cluster,
    )  # fmt: skip


# --- bench models -----------------------------------------------------------------------------
def _models_parser(bsub: Any) -> None:
    bp = bsub.add_parser("models", help="sample models: ONNX Runtime, PyTorch, default and best-found Halide schedules")
    bp.add_argument("--json", action="store_true")
    from ..search import STRATEGIES  # noqa: PLC0415

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
    bp.add_argument("--tune", action="store_true", help="the sample set (or --models) tuned whole (engine/tuning) instead of searched")
    bp.add_argument("--tune-budget-s", type=A.positive_seconds, default=120.0, help="tuning seconds per model (with --tune)")
    bp.add_argument("--tune-trials", type=A.positive_int, default=10**6, help="task measurements per model at most (with --tune)")


def _models(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.models import bench_models, bench_models_tuned  # noqa: PLC0415

    if args.tune:
        return bench_models_tuned(
            models=A.split(args.models), budget_s=args.tune_budget_s, trials=args.tune_trials, repeats=args.repeats,
            min_time_s=args.min_time, threads=args.threads,
        )  # fmt: skip
    pipelines = zoo.names() if args.pipelines == "all" else A.split(args.pipelines) or []
    return bench_models(
        models=A.split(args.models), pipelines=pipelines, size=args.size, repeats=args.repeats, min_time_s=args.min_time,
        threads=args.threads, search=None if args.search == "none" else args.search, search_budget_s=args.search_budget_s,
        search_trials=args.search_trials,
    )  # fmt: skip


# --- bench import -----------------------------------------------------------------------------
def _import_parser(bsub: Any) -> None:
    bp = bsub.add_parser("import", help="ResNet-50 ONNX: import, default schedule, lowering and JIT compile, timed per phase")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--model", type=A.input_file, help="time this .onnx file instead of exporting ResNet-50")
    # ResNet-50 halves its input five times: 32 is the least that leaves a pixel.
    resnet_size = A.int_in(32, 4096)
    bp.add_argument("--size", type=resnet_size, default=224, help="ResNet-50 input height and width (default 224)")
    bp.add_argument(
        "--width", type=A.int_in(1, 1024), default=64, help="ResNet-50 stem channels (64 is the real network; smaller keeps the graph)"
    )
    bp.add_argument("--repeats", type=A.positive_int, default=3, help="timed repeats (medians are reported)")
    bp.add_argument(
        "--verify-size",
        type=A.zero_or(resnet_size),
        default=0,
        help="also run the default schedule once at this input size (32 or more; 0: no), verified with ONNX Runtime",
    )
    bp.add_argument("--threads", type=A.threads, default=None, help="Halide threads for the verification run")
    bp.add_argument(
        "--compare-whole",
        type=A.nonneg_int,
        default=0,
        metavar="N",
        help="also compile N times as one Halide pipeline (no segments), for comparison",
    )
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _import(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.importing import bench_import  # noqa: PLC0415

    return bench_import(
        model=args.model, size=args.size, width=args.width, repeats=args.repeats, verify_size=args.verify_size, threads=args.threads,
        compare_whole=args.compare_whole,
    )  # fmt: skip


# --- bench search -----------------------------------------------------------------------------
def _search_parser(bsub: Any) -> None:
    from ..search import STRATEGIES, VARIANTS  # noqa: PLC0415

    bp = bsub.add_parser("search", help="every search strategy and Halide autoscheduler on every zoo pipeline")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--pipelines", type=A.pipelines, help="comma-separated subset of the zoo")
    bp.add_argument(
        "--strategies", type=A.names_in(sorted(STRATEGIES | VARIANTS), "strategy"), default=None,
        help=f"comma-separated subset (default: {','.join(sorted(STRATEGIES))}; none with --zero-measure); greedy_v: greedy seeded by V",
    )  # fmt: skip
    bp.add_argument("--zero-measure", action="store_true", help="also zero-measurement greedy (V alone, no measurement, then measured)")
    bp.add_argument("--zero-baseline", action="store_true", help="with --zero-measure: also greedy0_v (V alone, no capacity term)")
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
    A.add_cluster(bp)
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _search(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.search import bench_search  # noqa: PLC0415

    return bench_search(
        pipelines=A.split(args.pipelines), strategies=A.split(args.strategies) if args.strategies else ([] if args.zero_measure else None),
        size=args.size, budget_s=args.budget_s, extra_s=args.extra_s, trials=args.trials, seed=args.seed, model=args.model,
        repeats=args.repeats, min_time_s=args.min_time, cluster=args.cluster, zero_measure=args.zero_measure,
        zero_baseline=args.zero_baseline,
    )  # fmt: skip


# --- bench fuzz -------------------------------------------------------------------------------
def _fuzz_parser(bsub: Any) -> None:
    bp = bsub.add_parser("fuzz", help="bad schedules, models and options through the public paths; a sample measured and rechecked")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--n", type=A.positive_int, default=1000, help="cases (3/5 schedules, 1/5 ONNX models, 1/5 CLI)")
    bp.add_argument("--seed", type=A.seed, default=0)
    bp.add_argument("--measure-sample", type=A.nonneg_int, default=20, help="accepted schedules measured and rechecked")
    bp.add_argument("--timeout", type=A.positive_seconds, default=10.0, help="seconds per measurement before its worker is killed")
    bp.add_argument("--threads", type=A.threads, default=2, help="Halide threads for the measurements")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _fuzz(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.fuzz import bench_fuzz  # noqa: PLC0415

    return bench_fuzz(n=args.n, seed=args.seed, measure_sample=args.measure_sample, timeout_s=args.timeout, threads=args.threads)


# --- bench costmodel --------------------------------------------------------------------------
def _costmodel_parser(bsub: Any) -> None:
    from ..bench.costmodel import LATENCY_PIPELINES, MODELS, pipeline_names  # noqa: PLC0415

    bp = bsub.add_parser("costmodel", help="predictions per second of every cost model (fresh and mutated schedules), edit latency")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--models", type=A.names_in(MODELS, "cost model"), default=",".join(MODELS), help="comma-separated subset")
    bp.add_argument("--pipelines", type=A.names_in(pipeline_names, "pipeline"), help="comma-separated zoo names and resnet50 (default all)")
    bp.add_argument(
        "--latency", type=A.names_in(pipeline_names, "pipeline", special=["none"]), default=",".join(LATENCY_PIPELINES),
        help="pipelines for the edit -> prediction latency (comma-separated, or 'none')",
    )  # fmt: skip
    bp.add_argument("--n", type=A.positive_int, default=64, help="schedules per workload (fresh; mutation chain)")
    bp.add_argument("--n-large", type=A.positive_int, default=16, help="schedules per workload on pipelines of more than 60 stages")
    bp.add_argument("--batch", type=A.positive_int, default=64, help="predict_many batch size")
    bp.add_argument("--rounds", type=A.positive_int, default=3, help="timed rounds (median reported with min and max)")
    bp.add_argument("--seed", type=A.seed, default=0)
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _costmodel(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.costmodel import bench_costmodel  # noqa: PLC0415

    return bench_costmodel(
        A.split(args.models) or [], A.split(args.pipelines), n=args.n, n_large=args.n_large, batch=args.batch, rounds=args.rounds,
        latency=[] if args.latency == "none" else A.split(args.latency) or [], seed=args.seed,
    )  # fmt: skip


# --- bench placement --------------------------------------------------------------------------
def _placement_parser(bsub: Any) -> None:
    bp = bsub.add_parser("placement", help="every placement policy on the zoo and sample models under each device profile (simulated)")
    bp.add_argument("--json", action="store_true")
    zoo_or_none = A.names_in(A.zoo_names, "pipeline", special=["none"])
    bp.add_argument("--pipelines", type=zoo_or_none, help="zoo subset (comma-separated, or 'none'; default all)")
    bp.add_argument("--models", type=A.input_files, help="comma-separated model files (default: the sample ONNX and TensorFlow models)")
    bp.add_argument("--no-models", action="store_true", help="no sample models, only the zoo")
    bp.add_argument("--profiles", help="comma-separated device profiles: shipped names or .json files (default: every shipped one)")
    bp.add_argument("--policies", help="comma-separated placement policies (default: every registered one, the learned included)")
    bp.add_argument("--size", choices=zoo.SIZES, default="full")
    bp.add_argument("--train-s", type=A.positive_seconds, default=2.0, help="each learned policy's training budget per case")
    bp.add_argument("--seed", type=A.seed, default=0)
    bp.add_argument("--random", type=A.int_in(1, 5000), nargs="*", default=[], metavar="N", help="also random layered graphs of N nodes")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _placement(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.placement import bench_placement  # noqa: PLC0415
    from ..placement.devices import ProfileError, load_profile  # noqa: PLC0415
    from ..placement.policies import placers  # noqa: PLC0415

    profiles = A.split(args.profiles)
    for name in profiles or []:
        try:
            load_profile(name)
        except ProfileError as exc:
            raise A.CliError(f"--profiles: {exc}") from None
    policies = A.split(args.policies)
    unknown = [p for p in policies or [] if p not in placers()]
    if unknown:
        raise A.CliError(f"--policies: unknown placement policy {', '.join(unknown)} (policies: {', '.join(placers())})")
    pipelines = [] if args.pipelines == "none" else A.split(args.pipelines)
    models = [] if args.no_models else A.split(args.models)
    return bench_placement(
        pipelines=pipelines, models=models, profiles=profiles, policies=policies, size=args.size, train_s=args.train_s, seed=args.seed,
        random_sizes=args.random,
    )  # fmt: skip


# --- bench cluster ----------------------------------------------------------------------------
def _cluster_parser(bsub: Any) -> None:
    bp = bsub.add_parser("cluster", help="cost-model samples per second: one local worker vs a local Ray cluster; a node killed midway")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--samples", type=A.positive_int, default=200, help="samples to collect per run")
    bp.add_argument("--per-pipeline", type=A.positive_int, default=10, help="verified schedules per random pipeline")
    bp.add_argument("--nodes", type=A.int_in(1, 16), default=2, help="nodes of the local cluster (one CPU each)")
    bp.add_argument("--seed", type=A.seed, default=0)
    bp.add_argument("--max-stages", type=A.int_in(2, 64), default=6)
    bp.add_argument("--no-fault", action="store_true", help="skip the run that kills a node")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _cluster(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.cluster import bench_cluster  # noqa: PLC0415  # imports Ray

    return bench_cluster(
        samples=args.samples, per_pipeline=args.per_pipeline, nodes=args.nodes, seed=args.seed, max_stages=args.max_stages,
        fault=not args.no_fault,
    )  # fmt: skip


# --- bench peak -------------------------------------------------------------------------------
def _peak_parser(bsub: Any) -> None:
    bp = bsub.add_parser("peak", help="the FMA peak microbenchmark against PyTorch's matmul on this host, rounds interleaved")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--rounds", type=A.positive_int, default=5)
    bp.add_argument("--n", type=A.int_in(64, 4096), default=1024, help="PyTorch's matmul size (n x n x n)")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _peak(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.peak import bench_peak  # noqa: PLC0415  # compiles a Halide kernel, imports torch

    return bench_peak(rounds=args.rounds, n=args.n)


# --- bench strategies -------------------------------------------------------------------------
def _strategies_parser(bsub: Any) -> None:
    from ..bench.strategies import DEFAULT_STRATEGIES  # noqa: PLC0415
    from ..search import STRATEGIES  # noqa: PLC0415

    bp = bsub.add_parser("strategies", help="search strategies at equal budgets: best-so-far curves on the cost model and on hardware")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--pipelines", type=A.pipelines, help="comma-separated subset of the zoo (model objective; default all)")
    bp.add_argument("--hw-pipelines", type=A.pipelines, help="pipelines for the hardware runs (default: --pipelines)")
    bp.add_argument(
        "--strategies", type=A.names_in(sorted(STRATEGIES), "strategy"), default=",".join(DEFAULT_STRATEGIES), help="comma-separated"
    )
    bp.add_argument("--size", choices=zoo.SIZES, default="full")
    bp.add_argument("--seeds", type=A.nonneg_int, default=5, help="seeds per strategy on the model objective (0..N-1; 0: no model runs)")
    bp.add_argument("--evals", type=A.positive_int, default=2000, help="cost-model evaluations per run")
    bp.add_argument("--measurements", type=A.nonneg_int, default=64, help="hardware measurements per run (0: no hardware runs)")
    bp.add_argument("--hw-seeds", type=A.positive_int, default=3, help="seeds per strategy on hardware")
    bp.add_argument("--model", choices=A.COST_MODELS, default="default", help="cost model (objective and guide)")
    bp.add_argument("--wall-s", type=A.positive_seconds, default=1800.0, help="wall cap per run")
    bp.add_argument("--repeats", type=A.positive_int, default=3, help="interleaved rounds for the hardware runs' final times")
    bp.add_argument("--min-time", type=A.nonneg_seconds, default=0.2, help="minimum timed seconds per final measurement")
    bp.add_argument("--no-verify-model", action="store_true", help="do not measure the model runs' best schedules")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file (and the partial result as it runs)")


def _strategies(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.strategies import bench_strategies  # noqa: PLC0415

    return bench_strategies(
        pipelines=A.split(args.pipelines), strategies=A.split(args.strategies) or [], size=args.size, seeds=args.seeds,
        evals=args.evals, measurements=args.measurements, hw_pipelines=A.split(args.hw_pipelines), hw_seeds=args.hw_seeds,
        model=args.model, wall_s=args.wall_s, repeats=args.repeats, min_time_s=args.min_time, verify_model=not args.no_verify_model,
        checkpoint=args.out,
    )  # fmt: skip


# --- bench conformance ------------------------------------------------------------------------
def _conformance_parser(bsub: Any) -> None:
    bp = bsub.add_parser("conformance", help="the onnx package's 140 backend model tests: import, operator reference, Halide, verified")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--no-compile", action="store_true", help="import and operator reference only (no Halide compile and run)")
    bp.add_argument("--cases", help="comma-separated substrings: only the tests whose suite/name contains one")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _conformance(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.conformance import bench_conformance  # noqa: PLC0415

    return bench_conformance(compile=not args.no_compile, only=A.split(args.cases))


# --- bench kernels ----------------------------------------------------------------------------
def _kernel_names() -> list[str]:
    from ..bench.kernels import KERNELS  # noqa: PLC0415  # only when --kernels is given

    return list(KERNELS)


def _kernels_parser(bsub: Any) -> None:
    bp = bsub.add_parser("kernels", help="matmul, convs, depthwise, pooling: %% of the FMA peak, against ONNX Runtime and PyTorch")
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--kernels", type=A.names_in(_kernel_names, "kernel"), help="comma-separated (default: all)")
    bp.add_argument("--rounds", type=A.positive_int, default=3, help="interleaved rounds (median over them)")
    bp.add_argument("--min-time", type=A.nonneg_seconds, default=0.3)
    bp.add_argument("--threads", type=A.int_in(1, 256), help="Halide, ONNX Runtime and PyTorch threads (default: all cores)")
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")


def _kernels(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench.kernels import bench_kernels  # noqa: PLC0415  # heavy, only for this command

    return bench_kernels(A.split(args.kernels), rounds=args.rounds, min_time_s=args.min_time, threads=args.threads)


# name -> (add its parser to the `bench` subparsers, run it on the parsed options); in --help's order
BENCHMARKS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], dict[str, Any]]]] = {
    "core": (_core_parser, _core),
    "models": (_models_parser, _models),
    "import": (_import_parser, _import),
    "search": (_search_parser, _search),
    "strategies": (_strategies_parser, _strategies),
    "fuzz": (_fuzz_parser, _fuzz),
    "costmodel": (_costmodel_parser, _costmodel),
    "placement": (_placement_parser, _placement),
    "cluster": (_cluster_parser, _cluster),
    "peak": (_peak_parser, _peak),
    "conformance": (_conformance_parser, _conformance),
    "kernels": (_kernels_parser, _kernels),
}


def register(subparsers: Any) -> None:
    """Add the `bench` command and its subcommands to an `add_subparsers()` object."""
    sp = subparsers.add_parser("bench", help="benchmarks")
    bsub = sp.add_subparsers(dest="bench", required=True)
    for add_parser, _ in BENCHMARKS.values():
        add_parser(bsub)


def run(args: argparse.Namespace) -> int:
    result = BENCHMARKS[args.bench][1](args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    print_result(args, result, result["table"])
    return 0
