"""What every CLI module (engine/cli/*.py) shares: argument types for the parsers (numbers
range-checked, comma lists checked against what they name, files checked before any work
starts); a parser whose errors are one line on stderr, `error: ...`, exit status 2, like
every other CLI error; `CliError`, which a command raises to report such a line; and
`print_result`, a command's one JSON object (--json) or its text.

Each type function returns the parsed value or raises `argparse.ArgumentTypeError`, which
argparse reports as `argument --OPTION: MESSAGE`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from ..cluster import CLUSTER_HELP, ClusterError, ClusterSpec, parse_cluster

MAX_THREADS = 1024  # Halide's thread pool and torch take any number: more than this is a typo
MAX_COUNT = 10**9
MAX_SECONDS = 1e6  # about 11 days: beyond it timers overflow (poll(), Halide's int32 ms)
MAX_SEED = 2**32 - 1  # numpy's and torch's seeds are unsigned 32-bit
# costmodel.model_by_name's names: the chosen default, the analytic model and the trained
# models' keys (costmodel/train.py MODELS, which imports torch: too heavy for parsing).
COST_MODELS = ("default", "analytic", "gnn", "halide", "tvm")
TRAINED_MODELS = COST_MODELS[2:]
EXIT_ERROR = 2


class CliError(Exception):
    """An error to report on one line, exit status 2."""


def print_result(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    """A command's result: `obj` as one JSON object with --json, else `text`."""
    print(json.dumps(obj, indent=2) if getattr(args, "json", False) else text)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with errors on one line (its own prints the usage, often several lines, first).
    Subparsers inherit the class (add_subparsers uses the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _shown(s: str) -> str:
    return repr(s if len(s) <= 40 else s[:37] + "...")


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An integer in [lo, hi]."""

    def parse(s: str) -> int:
        try:
            v = int(s.strip())
        except ValueError:  # also a number with more digits than int() reads
            raise argparse.ArgumentTypeError(f"expected an integer from {lo} to {hi}, got {_shown(s)}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{_shown(s)} is out of range: expected an integer from {lo} to {hi}")
        return v

    return parse


def float_in(lo: float, hi: float, *, lo_open: bool = False, unit: str = "") -> Callable[[str], float]:
    """A finite number in [lo, hi] (or (lo, hi] with lo_open)."""
    want = f"a number{unit} {'>' if lo_open else '>='} {lo:g} and <= {hi:g}"

    def parse(s: str) -> float:
        try:
            v = float(s.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {_shown(s)}") from None
        if not math.isfinite(v) or v < lo or (lo_open and v == lo) or v > hi:
            raise argparse.ArgumentTypeError(f"{_shown(s)} is out of range: expected {want}")
        return v

    return parse


def zero_or(parse: Callable[[str], int]) -> Callable[[str], int]:
    """0 (the option's 'off') or what `parse` accepts."""

    def zparse(s: str) -> int:
        if s.strip() == "0":
            return 0
        try:
            return parse(s)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, or 0") from None

    return zparse


threads = int_in(1, MAX_THREADS)
positive_int = int_in(1, MAX_COUNT)
nonneg_int = int_in(0, MAX_COUNT)
seed = int_in(0, MAX_SEED)
positive_seconds = float_in(0.0, MAX_SECONDS, lo_open=True, unit=" of seconds")
nonneg_seconds = float_in(0.0, MAX_SECONDS, unit=" of seconds")
nonneg_float = float_in(0.0, 1e6)
holdout_fraction = float_in(0.0, 0.9)  # at least a tenth is left to train on


def names_in(choices: Iterable[str] | Callable[[], Iterable[str]], what: str, *, special: Iterable[str] = ()) -> Callable[[str], str]:
    """A comma-separated list of known names (or one of `special`, e.g. 'all' or 'none');
    returns the list normalized ('a,b'), which the commands split. `choices` may be a
    function, called only when the option is given (the choices can be costly to list)."""
    specials = tuple(special)

    def parse(s: str) -> str:
        if s.strip() in specials:
            return s.strip()
        allowed = list(choices() if callable(choices) else choices)
        items = [x.strip() for x in s.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}s, got {_shown(s)}")
        if not all(items):
            raise argparse.ArgumentTypeError(f"empty name in the comma-separated list {_shown(s)}")
        unknown = [x for x in items if x not in allowed]
        if unknown:
            options = ", ".join([*allowed, *specials])
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(map(_shown, unknown))} (choose from {options})")
        return ",".join(items)

    return parse


def zoo_names() -> list[str]:
    from .. import zoo  # noqa: PLC0415

    return zoo.names()


pipelines = names_in(zoo_names, "pipeline")


def input_file(s: str) -> str:
    """An existing, readable regular file."""
    p = Path(s).expanduser()
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{_shown(s)}: no such file")
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{_shown(s)}: not a regular file")
    if not os.access(p, os.R_OK):
        raise argparse.ArgumentTypeError(f"{_shown(s)}: not readable")
    return s


def input_files(s: str) -> str:
    """A comma-separated list of existing files (normalized 'a,b')."""
    items = [x.strip() for x in s.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty file name in the comma-separated list {_shown(s)}")
    return ",".join(input_file(x) for x in items)


def _writable_parent(s: str, p: Path) -> None:
    parent = p.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(s)}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{_shown(s)}: directory {str(parent)!r} is not writable")


def output_file(s: str) -> str:
    """A file the command may write (checked before any work, so a long run does not end in an
    error): not a directory, in an existing writable directory."""
    p = Path(s).expanduser()
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a file name, got ''")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(s)}: is a directory, expected a file name")
    if p.exists() and not os.access(p, os.W_OK):
        raise argparse.ArgumentTypeError(f"{_shown(s)}: not writable")
    _writable_parent(s, p)
    return s


def output_dir(s: str) -> str:
    """A directory the command may create (with its parents) or write into."""
    p = Path(s).expanduser()
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a directory name, got ''")
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(s)}: {str(existing)!r} exists and is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{_shown(s)}: directory {str(existing)!r} is not writable")
    return s


def split(names: str | None) -> list[str] | None:
    """A comma list these types normalized (`names_in`) as names; None when not given."""
    return [n for n in names.split(",") if n] if names else None


def cluster(s: str) -> ClusterSpec:
    """--cluster: local, ray, ray://HOST:PORT or HOST:PORT (engine/cluster)."""
    try:
        return parse_cluster(s)
    except ClusterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_cluster(parser: argparse.ArgumentParser) -> None:
    """The --cluster option of every command that measures in bulk."""
    parser.add_argument("--cluster", type=cluster, default=ClusterSpec(), help=CLUSTER_HELP)
