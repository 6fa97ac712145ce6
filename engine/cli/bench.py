"""`bench core | models | import | search | fuzz`: the benchmarks from the command line.

Each prints its table (or, with --json, its one JSON object) and `--out FILE` also writes
the JSON; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import zoo
from ..bench_fuzz import add_parser as add_bench_fuzz_parser
from ..bench_import import add_parser as add_bench_import_parser
from ..bench_models import add_parser as add_bench_models_parser
from ..bench_search import add_parser as add_bench_search_parser
from ..halide_backend import AUTOSCHEDULERS
from . import args as A
from .args import print_result


def register(subparsers: Any) -> None:
    """Add the `bench` command and its subcommands to an `add_subparsers()` object."""
    sp = subparsers.add_parser("bench", help="benchmarks")
    bsub = sp.add_subparsers(dest="bench", required=True)
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
    bp.add_argument("--out", type=A.output_file, help="also write the JSON result to this file")
    add_bench_models_parser(bsub)
    add_bench_import_parser(bsub)
    add_bench_search_parser(bsub)
    add_bench_fuzz_parser(bsub)


def _core(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench import bench_core  # noqa: PLC0415  # heavy, only for this command

    return bench_core(args)


def _models(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench_models import bench_models  # noqa: PLC0415

    return bench_models(args)


def _import(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench_import import bench_import  # noqa: PLC0415

    return bench_import(args)


def _search(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench_search import bench_search  # noqa: PLC0415

    return bench_search(args)


def _fuzz(args: argparse.Namespace) -> dict[str, Any]:
    from ..bench_fuzz import bench_fuzz  # noqa: PLC0415

    return bench_fuzz(args)


BENCHMARKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "core": _core,
    "models": _models,
    "import": _import,
    "search": _search,
    "fuzz": _fuzz,
}


def run(args: argparse.Namespace) -> int:
    result = BENCHMARKS[args.bench](args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    print_result(args, result, result["table"])
    return 0
