"""Headless command line: `python main.py SUBCOMMAND [--json]`.

Every subcommand prints one JSON object on stdout with --json. Errors print one line on
stderr and exit with status 2; the database is only written after a job completes.

Each CLI module has the same two functions: `register(subparsers)` adds its subcommands
to the parser and `run(args)` runs one of them; `main` runs a command with the module that
registered it. `core` has the pipeline commands (pipelines, show, measure, autoschedule,
lower, export, import), `bench` the benchmarks, `costmodel` the learned cost models and
`search` the schedule search; `args` is what they share (argument types, the one-line
error parser, `CliError`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import ModuleType

from .. import api
from ..cluster import ClusterError
from ..database import DatabaseError
from ..frontends.common import ModelImportError
from ..ir import PipelineError
from ..isolated import CompilerCrashError
from ..schedule import ScheduleError
from . import bench, core, costmodel, place, search, teach, tune
from .args import EXIT_ERROR, ArgumentParser, CliError

__all__ = ["EXIT_ERROR", "CliError", "commands", "main", "parser"]

MODULES: tuple[ModuleType, ...] = (core, bench, costmodel, search, place, teach, tune)  # in --help's order


def _build() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    """The parser, and each command's `run`: that of the module whose `register` added it."""
    ap = ArgumentParser(prog="schedule-explorer", description="Explore Halide schedules of pipelines.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    runs: dict[str, Callable[[argparse.Namespace], int]] = {}
    for module in MODULES:
        before = set(sub.choices)
        module.register(sub)
        runs.update(dict.fromkeys(set(sub.choices) - before, module.run))
    return ap, runs


def parser() -> argparse.ArgumentParser:
    return _build()[0]


def commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    """Every subcommand's name and the `run` that runs it."""
    return _build()[1]


def main(argv: list[str] | None = None) -> int:
    ap, runs = _build()
    args = ap.parse_args(argv)
    try:
        return runs[args.cmd](args)
    except (
        CliError, api.InputError, ScheduleError, PipelineError, ModelImportError, CompilerCrashError, DatabaseError, ClusterError, OSError,
    ) as exc:  # fmt: skip
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)  # always one line
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_ERROR
