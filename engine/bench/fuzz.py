"""`bench fuzz`: how the engine holds up against bad input, measured.

Three families of cases, each deterministic per (seed, case index), each going through
the public path a user takes, in this process:

  schedules  a zoo pipeline (small size) and its default, hand or a random legal schedule,
             mutated (bad factors, names, kinds, arities, nested lists, duplicated splits,
             compute_at to non-consumers and cycles, locations inside `update`, factor/tail
             on compute_root, vectorized/parallel reductions, non-dict directives, ...);
             then Schedule.from_json, validate, loopnest.build, export (C++ and Python).
  onnx       one attribute, constant, initializer, node or graph field of a sample model
             changed, saved to a temp dir and imported with frontends.import_onnx; an
             accepted model must also load and run in ONNX Runtime (its reference) with the
             output shapes the importer gave it.
  cli        engine.cli.main([...]) with malformed options and files (stderr captured);
             nothing is compiled or measured: a case that would start a measurement, a
             search or a benchmark is stopped there and counted as `reached_run` (its bad
             value was not rejected up front).

A case whose mutation is known to make the input invalid (a factor of 0, an unknown
stage, ...) and that is nevertheless accepted counts as `accepted_invalid`: the engine
silently ignored or mis-handled it. Then a deterministic sample of the accepted schedules
is measured with the real Runner into a temporary SQLite database; every stored verified
measurement is recomputed in a separate process (api.run_once) and compared with the
reference position by position (NaN where the reference has NaN, the same infinities,
tolerance on finite values): a disagreement is a wrong result stored. A crash or a failed
verification is measured again in a fresh worker: a different outcome means the failure
was blamed on the wrong schedule.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import math
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import api, loopnest, sampler, zoo
from .. import reference as R
from ..database import Database
from ..frontends.common import ModelImportError
from ..hand_schedules import hand_schedule
from ..ir import Pipeline
from ..measure import Measurement, Runner, host_fingerprint
from ..resources import MODELS_DIR
from ..schedule import SPEC, Schedule, ScheduleError, default_schedule, to_source, validate
from .procs import processes

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or site-packages): where `python -m engine...` runs
FAMILIES = ("schedules", "onnx", "cli")
# Outcomes that are what the engine promises; anything else is a bug to fix.
CLEAN: dict[str, tuple[str, ...]] = {
    "schedules": ("schedule_error", "accepted"),
    "onnx": ("import_error", "accepted", "accepted_unchecked"),
    "cli": ("clean_error", "usage_error", "ok"),
    "measured": ("verified", "failed_verification", "halide_rejection", "crash_isolated", "hang_isolated", "invalid_schedule"),
}
EXAMPLES_PER_CATEGORY = 3
CASE_TIMEOUT_S = 60.0  # an in-process case taking longer is counted as a hang of the calling process
SHRINK_STEPS = 150


class _CaseTimeout(BaseException):
    """Raised by the alarm when one in-process case runs past CASE_TIMEOUT_S."""


class _WouldRun(BaseException):
    """A CLI case got as far as measuring, searching or benchmarking (never done here)."""


def is_project_error(exc: BaseException) -> bool:
    """An error type the project defines (ScheduleError, ModelImportError, InputError,
    PipelineError, DatabaseError, CliError, ...), as opposed to Python's or a library's."""
    return isinstance(exc, Exception) and type(exc).__module__.split(".")[0] in ("engine", "app")


# --- records -----------------------------------------------------------------------------
@dataclass
class FamilyResult:
    """Outcome counts of one family of cases, with up to three examples per outcome."""

    tried: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    by_mutation: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, category: str, tags: list[str], example: dict[str, Any], count: int = 1) -> bool:
        """Count `count` cases; True when the example was kept (the first few of a category)."""
        self.tried += count
        self.counts[category] = self.counts.get(category, 0) + count
        for t in tags:
            row = self.by_mutation.setdefault(t, {})
            row[category] = row.get(category, 0) + count
        kept = self.examples.setdefault(category, [])
        if len(kept) < EXAMPLES_PER_CATEGORY:
            kept.append(example)
            return True
        return False


@dataclass
class FuzzReport:
    seed: int
    n: int
    measure_sample: int
    families: dict[str, FamilyResult]
    measured: FamilyResult
    stored_verified: int = 0
    rechecked: int = 0
    wrong_results_stored: int = 0
    recheck: list[dict[str, Any]] = field(default_factory=list)
    misattributed: list[dict[str, Any]] = field(default_factory=list)
    survived: bool = True
    phase_escapes: dict[str, str] = field(default_factory=dict)
    live_workers: int | None = None
    live_worker_cmdlines: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    table: str = ""

    def problems(self) -> dict[str, dict[str, int]]:
        """Every outcome outside the promises, by family (empty when everything held)."""
        out: dict[str, dict[str, int]] = {}
        for fam, res in [*self.families.items(), ("measured", self.measured)]:
            bad = {c: k for c, k in res.counts.items() if c not in CLEAN[fam]}
            if bad:
                out[fam] = bad
        extra = {
            "wrong_result_stored": self.wrong_results_stored,
            "recheck_failed": sum(1 for r in self.recheck if r.get("agree") is None),
            "misattributed_failure": len(self.misattributed),
            "phase_escaped": len(self.phase_escapes),
            "live_worker_left": self.live_workers or 0,
        }
        if any(extra.values()):
            out["process"] = {k: v for k, v in extra.items() if v}
        return out

    def foreign_exceptions(self) -> dict[str, int]:
        """Exceptions of types other than the project's own error types, by family/type."""
        return {
            f"{fam}/{c}": k
            for fam, res in [*self.families.items(), ("measured", self.measured)]
            for c, k in res.counts.items()
            if c.startswith(("exception:", "worker_error:"))
        }

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["problems"] = self.problems()
        d["foreign_exceptions"] = self.foreign_exceptions()
        d["clean_categories"] = {k: list(v) for k, v in CLEAN.items()}
        return d


# --- helpers -------------------------------------------------------------------------------
def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return (text[:limit] + " ...") if len(text) > limit else text


def _jtext(body: Any) -> str:
    """A schedule body as JSON text (NaN written as Python's json reads it back)."""
    try:
        return json.dumps(body, allow_nan=True)
    except (TypeError, ValueError):
        return repr(body)


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _CaseTimeout in this (main) thread after `seconds`; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(_sig: int, _frame: Any) -> None:
        raise _CaseTimeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _exception_category(exc: BaseException) -> str:
    if isinstance(exc, _CaseTimeout):
        return "hang_in_process"
    return f"{'project_error' if is_project_error(exc) else 'exception'}:{type(exc).__name__}"


def _rng(seed: int, *parts: Any) -> random.Random:
    return random.Random("/".join(map(str, (seed, *parts))))


# --- schedules: cases ------------------------------------------------------------------------
BAD_FACTORS: list[Any] = [0, -1, 2**31, 10**23, 1.5, "8", math.nan, True, None, [8]]
GOOD_FACTORS = [1, 2, 3, 4, 8, 16, 64]
BAD_LOOP_NAMES: list[Any] = ["nope", "", "1x", 7, None, ["x"], "x y"]  # never a loop of any stage
BAD_NEW_NAMES: list[Any] = ["", "1x", 7, None, ["x"], "x y"]  # not identifiers
BAD_KINDS: list[Any] = ["Split", "vectorise", "", 5, None, "compute_at_root", "gpu_blocks"]
LOCATION_KINDS = ("compute_inline", "compute_root", "compute_at", "store_root", "store_at")
MARKERS = ("vectorize", "parallel", "unroll")


@dataclass
class ScheduleCase:
    pipeline: str
    body: Any  # the schedule JSON the user hands over (maybe not even a dict)
    base: str
    base_body: dict[str, Any]  # the base schedule's JSON, before the mutations
    tags: list[str]
    must_reject: list[str]  # why the mutations make it invalid (empty: may be valid)


class _Mutator:
    """Random mutations of a schedule's JSON; each records a tag and, when it certainly
    makes the schedule invalid, the reason."""

    def __init__(self, rng: random.Random, p: Pipeline, body: dict[str, Any]) -> None:
        self.r, self.p = rng, p
        self.d: Any = body  # any JSON value: top_level turns it into a list, a string or None
        self.tags: list[str] = []
        self.reasons: list[str] = []
        self.names = [s.name for s in p.stages]
        self.bad = 1.0  # 0: benign mode, only choices that may well be valid

    # helpers
    def _bad(self, why: str) -> None:
        self.reasons.append(why)

    def _stage(self, reduction: bool | None = None, output: bool | None = None) -> str | None:
        cands = [
            s.name
            for s in self.p.stages
            if (reduction is None or s.is_reduction == reduction) and (output is None or (s.name in self.p.outputs) == output)
        ]
        return self.r.choice(cands) if cands else None

    def _list(self, st: str, key: str = "pure") -> list[Any] | None:
        stages = self.d.get("stages") if isinstance(self.d, dict) else None
        if not isinstance(stages, dict):
            return None
        sd = stages.setdefault(st, {"pure": []})
        if not isinstance(sd, dict):
            return None
        lst = sd.setdefault(key, [])
        return lst if isinstance(lst, list) else None

    def _directives(self, pred: Callable[[Any], bool] = lambda x: True) -> list[tuple[list[Any], int]]:
        stages = self.d.get("stages") if isinstance(self.d, dict) else None
        out: list[tuple[list[Any], int]] = []
        for sd in stages.values() if isinstance(stages, dict) else []:
            for key in ("pure", "update"):
                lst = sd.get(key) if isinstance(sd, dict) else None
                if not isinstance(lst, list):
                    continue
                for k, x in enumerate(lst):
                    if pred(x):
                        out.append((lst, k))
        return out

    def _dims(self, st: str) -> list[str]:
        return [d.name for d in self.p.stage(st).dims]

    def _rvars(self, st: str) -> list[str]:
        return [d.name for d in self.p.stage(st).rdom]

    def _insert(self, lst: list[Any], d: Any, at_start: bool = False) -> None:
        lst.insert(0 if at_start else self.r.randint(0, len(lst)), d)

    # mutations: each returns False when it does not apply to this pipeline/schedule
    def random_directive(self) -> bool:
        r = self.r
        st = self._stage()
        assert st is not None
        if r.random() < 0.1 * self.bad:
            st = r.choice(["nope", "BLUR", "", "blur_x$2"])
            if st in self.p.stage_map:
                return False
            self._bad("unknown stage")
        s = self.p.stage_map.get(st)
        kind: Any = r.choice(list(SPEC)) if r.random() < 1 - 0.15 * self.bad else r.choice(BAD_KINDS)
        if not self.bad and kind in ("compute_at", "store_at") and not (set(self.p.downstream(st)) & set(self.p.stage_map)):
            kind = "split"
        if kind not in SPEC:
            self._bad("unknown directive kind")
        update = s is not None and s.is_reduction and r.random() < 0.4
        if s is not None and not s.is_reduction and r.random() < 0.05 * self.bad:
            update = True
            self._bad("update directives on a stage without an update definition")
        if update and kind in LOCATION_KINDS:
            self._bad("compute/store location in an update list")
        loops = (self._dims(st) + (self._rvars(st) if update else [])) if s is not None else ["x"]
        d: dict[str, Any] = {"kind": kind}
        for arg, typ in SPEC.get(kind, {}).items():
            if arg == "consumer":
                consumers = sorted(set(self.p.downstream(st)) & set(self.p.stage_map)) if s is not None else []
                c = r.choice(consumers) if consumers and not self.bad else r.choice(self.names + ["nope"])
                d[arg] = c
                if c not in self.p.stage_map or s is None or c not in self.p.downstream(st):
                    self._bad("compute_at/store_at a stage that is not a consumer")
            elif arg == "loop" and kind in ("compute_at", "store_at"):
                c = d["consumer"]
                d[arg] = r.choice(self._dims(c)) if c in self.p.stage_map and r.random() < 1 - 0.15 * self.bad else "nope"
                if d[arg] == "nope":
                    self._bad("compute_at an unknown loop")
            elif typ is int:
                d[arg] = self._factor(kind)
            elif typ is list:
                d[arg] = r.sample(loops, min(len(loops), r.randint(2, 3))) if len(loops) >= 2 else loops * 2
                if len(loops) < 2:
                    self._bad("reorder of a loop with itself")
            elif arg in ("outer", "inner", "xo", "yo", "xi", "yi", "fused") and not (kind == "fuse" and arg != "fused"):
                if r.random() < 0.15 * self.bad:
                    d[arg] = r.choice(BAD_NEW_NAMES)
                    self._bad("a new loop name that is not an identifier")
                else:
                    d[arg] = f"{r.choice(loops)}_{arg}{r.randint(0, 2)}"
            else:  # an existing loop
                if r.random() < 0.15 * self.bad:
                    d[arg] = r.choice(BAD_LOOP_NAMES)
                    self._bad("an unknown loop")
                else:
                    d[arg] = r.choice(loops)
        if kind in MARKERS and r.random() < 0.5:
            d["factor"] = self._factor(kind, optional=True)
        lst = self._list(st, "update" if update else "pure")
        if lst is None:
            return False
        self._insert(lst, d)
        self.tags.append(f"random_directive:{kind if isinstance(kind, str) else type(kind).__name__}")
        return True

    def _factor(self, kind: str, optional: bool = False) -> Any:
        if self.r.random() < 1 - 0.3 * self.bad:
            return self.r.choice(GOOD_FACTORS)
        f = self.r.choice(BAD_FACTORS)
        if not (f is None and optional):
            self._bad(f"factor {f!r}")
        return f

    def bad_factor(self) -> bool:
        r = self.r
        found = self._directives(lambda x: isinstance(x, dict) and any(k in x for k in ("factor", "xf", "yf")))
        f = r.choice([v for v in BAD_FACTORS if v is not None])  # None: no factor given, for a marker
        if found:
            lst, k = r.choice(found)
            x = lst[k]
            arg = r.choice([a for a in ("factor", "xf", "yf") if a in x])
            x[arg] = f
        else:
            st = self._stage()
            assert st is not None
            dim = self._dims(st)[-1]
            target = self._list(st)
            if target is None:
                return False
            target.insert(0, {"kind": "split", "loop": dim, "outer": f"{dim}_o", "inner": f"{dim}_i", "factor": f})
        self._bad(f"factor {f!r}")
        self.tags.append(f"bad_factor:{f!r}")
        return True

    def huge_width(self) -> bool:
        st = self._stage()
        assert st is not None
        lst = self._list(st)
        if lst is None:
            return False
        kind = self.r.choice(["unroll", "vectorize"])
        lst.insert(0, {"kind": kind, "loop": self._dims(st)[-1], "factor": 100000})
        self._bad(f"{kind} width 100000")
        self.tags.append(f"huge_width:{kind}")
        return True

    def wrong_arity(self) -> bool:
        r = self.r
        found = self._directives(lambda x: isinstance(x, dict) and x.get("kind") in SPEC)
        if not found:
            return False
        lst, k = r.choice(found)
        x = lst[k]
        required = list(SPEC[x["kind"]])
        if required and r.random() < 0.6:
            del x[r.choice(required)]
            self.tags.append("wrong_arity:missing")
        else:
            x[r.choice(["bogus", "loops", "consumer", "extra"]) if x["kind"] != "reorder" else "bogus"] = 1
            if set(x) - {"kind"} - set(required) - {"factor", "tail"} == set():
                return False
            self.tags.append("wrong_arity:extra")
        self._bad("wrong arguments")
        return True

    def nested_list(self) -> bool:
        r = self.r
        st = self._stage()
        assert st is not None
        lst = self._list(st)
        if lst is None:
            return False
        dims = self._dims(st)
        if r.random() < 0.5 and len(dims) >= 2:
            lst.insert(0, {"kind": "reorder", "loops": [[dims[0], dims[1]], *dims[2:]] or [[dims[0]], dims[1]]})
        else:
            lst.insert(0, {"kind": r.choice(MARKERS), "loop": [dims[-1]]})
        self._bad("a nested list where a loop name goes")
        self.tags.append("nested_list")
        return True

    def dup_split(self) -> bool:
        found = self._directives(lambda x: isinstance(x, dict) and x.get("kind") in ("split", "tile"))
        if found:
            lst, k = self.r.choice(found)
            lst.insert(k + 1, dict(lst[k]))
        else:
            st = self._stage()
            assert st is not None
            lst2 = self._list(st)
            if lst2 is None:
                return False
            dim = self._dims(st)[-1]
            d = {"kind": "split", "loop": dim, "outer": dim, "inner": f"{dim}_in", "factor": 4}
            lst2[:0] = [d, dict(d)]
        self._bad("the same split twice")
        self.tags.append("dup_split")
        return True

    def reorder(self) -> bool:
        r = self.r
        st = self._stage()
        assert st is not None
        lst = self._list(st)
        dims = self._dims(st)
        if lst is None or len(dims) < 2:
            return False
        variant = r.choice(["subset", "repeated", "unknown", "single", "all_reversed"] if self.bad else ["subset", "all_reversed"])
        loops = {
            "subset": r.sample(dims, 2),
            "repeated": [dims[0], dims[1], dims[0]],
            "unknown": [r.choice(BAD_LOOP_NAMES), dims[0]],
            "single": [dims[0]],
            "all_reversed": list(dims),
        }[variant]
        lst.insert(0, {"kind": "reorder", "loops": loops})
        if variant in ("repeated", "unknown", "single"):
            self._bad(f"reorder with a {variant} loop")
        self.tags.append(f"reorder:{variant}")
        return True

    def compute_at_bad(self) -> bool:
        r = self.r
        variant = r.choice(["non_consumer", "cycle", "output"])
        if variant == "output":
            st = self._stage(output=True)
            c = self._stage()
            assert st is not None and c is not None
            lst = self._list(st)
            if lst is None:
                return False
            lst.append({"kind": "compute_at", "consumer": c, "loop": self._dims(c)[0]})
            self._bad("compute_at of an output")
        elif variant == "non_consumer":
            st = self._stage(output=False)
            if st is None:
                return False
            others = [c for c in self.names if c not in self.p.downstream(st)]
            c = r.choice(others)
            lst = self._list(st)
            if lst is None:
                return False
            lst.append({"kind": r.choice(["compute_at", "store_at"]), "consumer": c, "loop": self._dims(c)[0]})
            self._bad("compute_at a stage that is not a consumer")
        else:
            edges = [(f, g) for f in self.names for g in self.p.consumers(f) if g in self.p.stage_map and f not in self.p.outputs]
            if not edges:
                return False
            f, g = r.choice(edges)
            lf, lg = self._list(f), self._list(g)
            if lf is None or lg is None:
                return False
            lf.append({"kind": "compute_at", "consumer": g, "loop": self._dims(g)[0]})
            lg.append({"kind": "compute_at", "consumer": f, "loop": self._dims(f)[0]})
            self._bad("a compute_at cycle")
        self.tags.append(f"compute_at:{variant}")
        return True

    def update_location(self) -> bool:
        st = self._stage(reduction=True) or self._stage()
        assert st is not None
        lst = self._list(st, "update")
        if lst is None:
            return False
        kind = self.r.choice(LOCATION_KINDS)
        d: dict[str, Any] = {"kind": kind}
        if kind in ("compute_at", "store_at"):
            c = self.r.choice(sorted(self.p.downstream(st)) or self.names)
            d.update(consumer=c, loop=self._dims(c)[0])
        self._insert(lst, d)
        self._bad(f"{kind} inside an update list")
        self.tags.append(f"update_location:{kind}")
        return True

    def root_extras(self) -> bool:
        st = self._stage()
        assert st is not None
        lst = self._list(st)
        if lst is None:
            return False
        kind = self.r.choice(["compute_root", "compute_root", "compute_inline", "store_root"])
        extras: list[dict[str, Any]] = [{"factor": 8}, {"tail": "guard_with_if"}, {"factor": 4, "tail": "round_up"}]
        extra = self.r.choice(extras)
        lst.append({"kind": kind, **extra})
        self._bad(f"{'/'.join(extra)} on {kind}")
        self.tags.append(f"root_extras:{kind}")
        return True

    def vector_reduction(self) -> bool:
        st = self._stage(reduction=True)
        if st is None:
            return False
        lst = self._list(st, "update")
        if lst is None:
            return False
        kind = self.r.choice(["vectorize", "parallel"])
        d: dict[str, Any] = {"kind": kind, "loop": self.r.choice(self._rvars(st))}
        if self.r.random() < 0.5:
            d["factor"] = self.r.choice([2, 4])
        lst.insert(0, d)
        self._bad(f"{kind} of a reduction loop")
        self.tags.append(f"vector_reduction:{kind}")
        return True

    def non_dict(self) -> bool:
        st = self._stage()
        assert st is not None
        s = self.p.stage(st)
        lst = self._list(st, "update" if s.is_reduction and self.r.random() < 0.3 else "pure")
        if lst is None:
            return False
        v = self.r.choice([5, "compute_root", [], None, ["split"], 1.5, True, {"loop": "x"}])
        if lst and self.r.random() < 0.5:
            lst[self.r.randrange(len(lst))] = v
        else:
            self._insert(lst, v)
        self._bad("a directive that is not an object with a kind")
        self.tags.append(f"non_dict:{type(v).__name__}")
        return True

    def bad_stage_shape(self) -> bool:
        stages = self.d.get("stages") if isinstance(self.d, dict) else None
        if not isinstance(stages, dict):
            return False
        st = self._stage()
        v: object = self.r.choice(
            [
                {"pure": "compute_root"},
                {"pure": {"kind": "compute_root"}},
                {"pure": 5},
                {"pure": None},
                {"update": "x"},
                5,
                "compute_root",
                [],
                None,
            ]
        )
        stages[st] = copy.deepcopy(v)
        self._bad("a stage entry that is not {'pure': [...], 'update': [...]}")
        self.tags.append(f"bad_stage_shape:{_jtext(v)[:24]}")
        return True

    def unknown_stage(self) -> bool:
        stages = self.d.get("stages") if isinstance(self.d, dict) else None
        if not isinstance(stages, dict):
            return False
        name = self.r.choice(["nope", "BLUR_X", "", " ", "output2", "input"])
        if name in self.p.stage_map:
            return False
        stages[name] = {"pure": [{"kind": "compute_root"}]}
        self._bad("an unknown stage")
        self.tags.append("unknown_stage")
        return True

    def type_confusion(self) -> bool:
        found = self._directives(lambda x: isinstance(x, dict) and x.get("kind") in SPEC)
        if not found:
            return False
        lst, k = self.r.choice(found)
        x = lst[k]
        strs = [a for a, t in SPEC[x["kind"]].items() if t is str]
        if strs and self.r.random() < 0.6:
            x[self.r.choice(strs)] = self.r.choice([3, True, 2.5, {"a": 1}])
            self.tags.append("type_confusion:arg")
        elif x["kind"] == "reorder":
            x["loops"] = "".join(map(str, x["loops"]))
            self.tags.append("type_confusion:loops_string")
        else:
            del x["kind"]
            self.tags.append("type_confusion:no_kind")
        self._bad("an argument of the wrong type")
        return True

    def inline_forbidden(self) -> bool:
        r = self.r
        st = self._stage(reduction=True) if r.random() < 0.5 else None
        st = st or self._stage(output=True)
        assert st is not None
        lst = self._list(st)
        if lst is None:
            return False
        lst.append({"kind": "compute_inline"})
        self._bad("compute_inline of an output or a reduction")
        self.tags.append("inline_forbidden")
        return True

    def inline_with_loops(self) -> bool:
        st = self._stage(reduction=False, output=False)
        sd = self.d.get("stages") if isinstance(self.d, dict) else None
        if st is None or not isinstance(sd, dict):
            return False
        kind = self.r.choice(MARKERS)
        sd[st] = {"pure": [{"kind": kind, "loop": self.r.choice(self._dims(st))}, {"kind": "compute_inline"}]}
        self._bad(f"{kind} of an inlined stage (it has no loops of its own)")
        self.tags.append(f"inline_with_loops:{kind}")
        return True

    def name_clash(self) -> bool:
        st = self._stage()
        assert st is not None
        lst = self._list(st)
        dims = self._dims(st)
        if lst is None:
            return False
        if len(dims) >= 2 and self.r.random() < 0.5:
            lst.insert(0, {"kind": "split", "loop": dims[-1], "outer": dims[0], "inner": f"{dims[-1]}_i", "factor": 2})
        else:
            lst.insert(0, {"kind": "split", "loop": dims[-1], "outer": "a", "inner": "a", "factor": 2})
        self._bad("a split whose new loop names clash")
        self.tags.append("name_clash")
        return True

    def tweak(self) -> bool:
        r = self.r
        found = self._directives(lambda x: isinstance(x, dict) and x.get("kind") in SPEC and x.get("kind") not in LOCATION_KINDS)
        if not found:
            return False
        lst, k = r.choice(found)
        x = lst[k]
        splits = x["kind"] in ("split", "tile") or (x["kind"] in MARKERS and x.get("factor") is not None)
        if any(a in x for a in ("factor", "xf", "yf")) and r.random() < 0.5:
            x[r.choice([a for a in ("factor", "xf", "yf") if a in x])] = r.choice(GOOD_FACTORS)
            self.tags.append("tweak:factor")
        elif not splits and self.bad:
            x["tail"] = "guard_with_if"
            self._bad(f"a tail on {x['kind']}, which does not split")
            self.tags.append("tweak:tail_without_split")
        elif splits:
            tail = r.choice(["auto", "guard_with_if", "shift_inwards", "round_up", *(["nope", 5, None] if self.bad else [])])
            x["tail"] = tail
            if tail not in ("auto", "guard_with_if", "shift_inwards", "round_up", None):  # null: no tail given
                self._bad(f"tail {tail!r}")
            self.tags.append("tweak:tail")
        else:
            return False
        return True

    def drop(self) -> bool:
        found = self._directives()
        if not found:
            return False
        lst, k = self.r.choice(found)
        del lst[k]
        self.tags.append("drop")
        return True

    def shuffle(self) -> bool:
        found = [(lst, k) for lst, k in self._directives() if len(lst) >= 2]
        if not found:
            return False
        lst, _ = self.r.choice(found)
        self.r.shuffle(lst)
        self.tags.append("shuffle")
        return True

    def top_level(self) -> bool:
        v = self.r.choice(["list", "string", "none", "stages_list", "stages_none", "format_2", "format_str", "format_none"])
        stages = self.d.get("stages") if isinstance(self.d, dict) else {}
        self.d = {
            "list": [stages],
            "string": "compute_root",
            "none": None,
            "stages_list": {"stages": [stages]},
            "stages_none": {"stages": None},
            "format_2": {"format": 2, "stages": stages},
            "format_str": {"format": "1", "stages": stages},
            "format_none": {"format": None, "stages": stages},
        }[v]
        self._bad("not a schedule object")
        self.tags.append(f"top_level:{v}")
        return True

    OPS: tuple[tuple[str, float], ...] = (
        ("random_directive", 6), ("bad_factor", 3), ("huge_width", 1), ("wrong_arity", 1.5), ("nested_list", 1),
        ("dup_split", 1), ("reorder", 1.5), ("compute_at_bad", 1.5), ("update_location", 1), ("root_extras", 1),
        ("vector_reduction", 1), ("non_dict", 1), ("bad_stage_shape", 0.7), ("unknown_stage", 0.5), ("type_confusion", 1),
        ("inline_forbidden", 0.5), ("inline_with_loops", 0.5), ("name_clash", 0.7), ("tweak", 3), ("drop", 2), ("shuffle", 1),
    )  # fmt: skip

    BENIGN = ("random_directive", "tweak", "drop", "shuffle", "reorder")
    # Mutations that can undo an earlier one (drop it, change its factor) go first, those that
    # replace a whole stage entry last: a reason recorded is never undone by a later mutation.
    # Within the first, drop and shuffle precede tweak (a dropped tweak would take its reason along).
    FIRST, LAST = ("drop", "shuffle", "tweak"), ("inline_with_loops", "bad_stage_shape")
    UNDOING = ("drop", "shuffle")

    def run(self, count: int, benign: bool = False) -> Any:
        """Apply `count` mutations; `benign`: only ones that may well leave it valid."""
        self.bad = 0.0 if benign else 1.0
        ops = [(n, w) for n, w in self.OPS if not benign or n in self.BENIGN]
        names, weights = zip(*ops)
        picked = sorted(
            self.r.choices(names, weights, k=count), key=lambda n: (n not in self.UNDOING) + (n not in self.FIRST) + (n in self.LAST)
        )
        for name in picked:
            for _ in range(6):  # one that does not apply to this pipeline: another of the same rank
                if getattr(self, name)():
                    break
                rank = [n for n in names if (n in self.FIRST) == (name in self.FIRST) and (n in self.LAST) == (name in self.LAST)]
                name = self.r.choice(rank)
        if not benign and self.r.random() < 0.03:
            self.top_level()
        return self.d


class _Schedules:
    """The zoo at small size with each pipeline's base schedules (built once)."""

    def __init__(self) -> None:
        self.pipelines = {n: zoo.get(n, "small") for n in zoo.names()}
        self.hand = {}
        for n, p in self.pipelines.items():
            try:
                self.hand[n] = hand_schedule(p)
            except KeyError:
                pass

    def case(self, rng: random.Random) -> ScheduleCase:
        name = rng.choice(sorted(self.pipelines))
        p = self.pipelines[name]
        base = rng.choices(["default", "hand", "random", "mutant"], [2, 2, 4, 1])[0]
        if base == "hand" and name in self.hand:
            s = self.hand[name]
        elif base in ("random", "mutant"):
            s = sampler.sample_schedule(p, rng)
            if base == "mutant":
                s = sampler.mutate(p, s, rng)
        else:
            base, s = "default", default_schedule(p)
        base_body = s.to_json()
        m = _Mutator(rng, p, copy.deepcopy(base_body))
        body = m.run(rng.choices([1, 2, 3], [5, 3, 1])[0], benign=rng.random() < 0.4)
        return ScheduleCase(name, body, base, base_body, m.tags, m.reasons)


def check_schedule(p: Pipeline, body: Any) -> tuple[str, str, str]:
    """The user's path for a schedule: (category, phase reached, message)."""
    phase = "from_json"
    try:
        with _deadline(CASE_TIMEOUT_S):
            s = Schedule.from_json(body)
            phase = "validate"
            validate(p, s)
            phase = "loopnest"
            loopnest.build(p, s).render()
            phase = "export"
            to_source(p, s, "cpp")
            to_source(p, s, "python")
            phase = "hash"
            if Schedule.loads(s.dumps()).content_hash() != s.content_hash():
                return "unstable_hash", phase, "the hash changes when the schedule is saved and loaded"
    except ScheduleError as exc:
        return "schedule_error", phase, _first_line(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  # what escapes is what this benchmark counts
        return _exception_category(exc), phase, f"{type(exc).__name__}: {_first_line(exc)}"
    return "accepted", "", ""


def shrink_schedule(p: Pipeline, body: Any, keep: Callable[[Any], bool]) -> Any:
    """Greedily drop stages and directives while `keep(candidate)` holds: a small reproducer."""
    cur, steps = copy.deepcopy(body), 0
    changed = True
    while changed and steps < SHRINK_STEPS:
        changed = False
        stages = cur.get("stages") if isinstance(cur, dict) else None
        cands: list[Any] = []
        if isinstance(stages, dict):
            for st in list(stages):
                c = copy.deepcopy(cur)
                del c["stages"][st]
                cands.append(c)
            for st, sd in stages.items():
                for key in ("pure", "update"):
                    lst = sd.get(key) if isinstance(sd, dict) else None
                    for k in range(len(lst) if isinstance(lst, list) else 0):
                        c = copy.deepcopy(cur)
                        del c["stages"][st][key][k]
                        cands.append(c)
                if isinstance(sd, dict) and sd.get("update") == []:
                    c = copy.deepcopy(cur)
                    del c["stages"][st]["update"]
                    cands.append(c)
            for k in [k for k in cur if k not in ("stages",)]:
                c = copy.deepcopy(cur)
                del c[k]
                cands.append(c)
        for c in cands:
            steps += 1
            if keep(c):
                cur, changed = c, True
                break
            if steps >= SHRINK_STEPS:
                break
    return cur


def _schedule_phase(
    rep: FuzzReport, ks: list[int], seed: int, gen: _Schedules, accepted: list[ScheduleCase], tick: Callable[[], None]
) -> None:
    fam = rep.families["schedules"]
    for k in ks:
        case = gen.case(_rng(seed, "schedule", k))
        p = gen.pipelines[case.pipeline]
        cat, phase, msg = check_schedule(p, case.body)
        if cat == "accepted":
            accepted.append(case)
            if case.must_reject:
                cat = "accepted_invalid"
                msg = "accepted although: " + "; ".join(case.must_reject)
        ex = {"case": k, "pipeline": case.pipeline, "size": "small", "base": case.base, "mutations": case.tags, "phase": phase}
        ex |= {"message": msg, "schedule": _jtext(case.body)}
        if fam.add(cat, case.tags, ex) and cat not in CLEAN["schedules"] and len(fam.examples[cat]) == 1:
            ex["minimal"] = _jtext(_shrunk(p, case, cat, phase))
        tick()


def _shrunk(p: Pipeline, case: ScheduleCase, cat: str, phase: str) -> Any:
    if cat == "accepted_invalid":
        return _shrunk_accepted(p, case)
    return shrink_schedule(p, case.body, lambda c: check_schedule(p, c)[:2] == (cat, phase))


def _shrunk_accepted(p: Pipeline, case: ScheduleCase) -> Any:
    """An accepted case made small: still accepted, with every mutated part still in it."""
    parts = _changed_parts(case.base_body, case.body)
    return shrink_schedule(p, case.body, lambda c: all(_contains(c, x) for x in parts) and check_schedule(p, c)[0] == "accepted")


def _changed_parts(base: dict[str, Any], body: Any) -> list[tuple[Any, ...]]:
    """The stage entries and directives of `body` that its base schedule did not have."""
    stages = body.get("stages") if isinstance(body, dict) else None
    if not isinstance(stages, dict):
        return [("body", body)]
    out: list[tuple[Any, ...]] = []
    for st, sd in stages.items():
        old = base.get("stages", {}).get(st, {})
        if not isinstance(sd, dict) or not all(isinstance(sd.get(k, []), list) for k in ("pure", "update")):
            out.append(("entry", st, sd))
            continue
        for key in ("pure", "update"):
            out += [("directive", st, key, d) for d in sd.get(key, []) if d not in old.get(key, [])]
    return out


def _contains(body: Any, part: tuple[Any, ...]) -> bool:
    if part[0] == "body":
        return body == part[1]
    sd = body.get("stages", {}).get(part[1], _MISSING) if isinstance(body, dict) and isinstance(body.get("stages"), dict) else _MISSING
    if part[0] == "entry":
        return sd == part[2]
    return isinstance(sd, dict) and part[3] in sd.get(part[2], [])


_MISSING = object()


# --- ONNX models: cases --------------------------------------------------------------------------
class _Models:
    """The sample models, loaded once; each case mutates a copy."""

    def __init__(self) -> None:
        import onnx  # noqa: PLC0415  # only for this family

        self.onnx = onnx
        self.models = {p.stem: onnx.load(str(p)) for p in sorted(MODELS_DIR.glob("*.onnx"))}

    def case(self, rng: random.Random) -> tuple[str, bytes, str, str]:
        """(model name, the mutated model file's bytes, tag, what changed)."""
        name = rng.choice(sorted(self.models))
        m = self.onnx.ModelProto()
        m.CopyFrom(self.models[name])
        kind = rng.choices(["attr", "const", "init", "node", "graph"], [6, 2, 1, 1.5, 1])[0]
        try:
            got = getattr(self, f"_{kind}")(rng, m)
            data = m.SerializeToString()
        except (ValueError, TypeError, IndexError):  # a mutation protobuf refuses: rename an op instead
            got = None
        if got is None:
            m.CopyFrom(self.models[name])
            got = self._rename(rng, m)
            data = m.SerializeToString()
        return name, data, *got

    def _attr(self, rng: random.Random, m: Any) -> tuple[str, str] | None:
        A = self.onnx.AttributeProto
        nodes = [n for n in m.graph.node if any(a.type in (A.INT, A.INTS, A.FLOAT) for a in n.attribute)]
        if not nodes:
            return None
        node = rng.choice(nodes)
        a = rng.choice([a for a in node.attribute if a.type in (A.INT, A.INTS, A.FLOAT)])
        variant = rng.choices(["value", "remove", "retype", "unknown"], [8, 1, 1, 1])[0]
        where = f"{node.op_type} node {node.name!r} attribute {a.name!r}"
        if variant == "remove":
            node.attribute.remove(a)
            return f"attr:{node.op_type}.{a.name}:removed", f"{where} removed"
        if variant == "retype":
            retyped = self.onnx.helper.make_attribute(a.name, rng.choice([1.5, "x", [1.5, 2.5]]))
            node.attribute.remove(a)
            node.attribute.append(retyped)
            return f"attr:{node.op_type}.{a.name}:retyped", f"{where} retyped to {self.onnx.helper.get_attribute_value(retyped)!r}"
        if variant == "unknown":
            node.attribute.append(self.onnx.helper.make_attribute("bogus", 1))
            return f"attr:{node.op_type}.bogus:added", f"{node.op_type} node {node.name!r}: unknown attribute 'bogus' added"
        old = self.onnx.helper.get_attribute_value(a)
        new: list[int] | int | float  # the attribute's new value, of its type
        if a.type == A.INTS:
            vals = list(a.ints)
            v = rng.choice(
                ["drop_one", "extra", "empty", "double", "zeros", "negative", "huge", "one_bad", "repeat", "out_of_range", "large"]
            )
            new = {
                "drop_one": vals[:-1], "extra": vals + [rng.choice([0, 1, 2])], "empty": [], "double": vals * 2,
                "zeros": [0] * len(vals), "negative": [-1] * len(vals), "huge": [2**31] * len(vals),
                "one_bad": [rng.choice([0, -1, -7, 2**31, 2**40]) if i == len(vals) // 2 else x for i, x in enumerate(vals)],
                "repeat": [vals[0]] * len(vals) if vals else [0], "out_of_range": vals[:-1] + [len(vals) + 3], "large": [1000] * len(vals),
            }[v]  # fmt: skip
            del a.ints[:]
            a.ints.extend(new)
        elif a.type == A.INT:
            v = "int"
            new = rng.choice([0, -1, -99, 99, 2**31, 2**40, 1, 2])
            a.i = new
        else:
            v = "float"
            new = rng.choice([math.nan, math.inf, -math.inf, -1.0, 0.0, 1e30])
            a.f = new
        return f"attr:{node.op_type}.{a.name}:{v}", f"{where}: {old!r} -> {new!r}"

    def _const(self, rng: random.Random, m: Any) -> tuple[str, str] | None:
        from onnx import numpy_helper  # noqa: PLC0415

        consts = [n for n in m.graph.node if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"]
        if not consts:
            return None
        node = rng.choice(consts)
        a = node.attribute[0]
        arr = numpy_helper.to_array(a.t)
        flat = arr.reshape(-1).copy()
        new: np.ndarray
        if arr.dtype.kind in "iu":
            v = rng.choice(["one_bad", "append", "drop", "empty", "minus_ones"])
            if v == "one_bad" and flat.size:
                flat[rng.randrange(flat.size)] = rng.choice([-1, 0, -5, 10**12, 7])
                new = flat.reshape(arr.shape)
            elif v == "append":
                new = np.append(flat, 1)
            elif v == "drop" and flat.size > 1:
                new = flat[:-1]
            elif v == "minus_ones":
                new = np.full_like(arr, -1)
            else:
                v, new = "empty", flat[:0]
        else:
            v = rng.choice(["nan", "inf", "negative", "zero"])
            new = np.full_like(arr, {"nan": np.nan, "inf": np.inf, "negative": -1.0, "zero": 0.0}[v])
        a.t.CopyFrom(numpy_helper.from_array(np.asarray(new, dtype=arr.dtype), a.t.name))
        before, after = arr.reshape(-1)[:8].tolist(), np.asarray(new).reshape(-1)[:8].tolist()
        return f"const:{v}", f"Constant {node.name!r} ({arr.dtype}, {list(arr.shape)}): {before} -> {after}"

    def _init(self, rng: random.Random, m: Any) -> tuple[str, str] | None:
        from onnx import numpy_helper  # noqa: PLC0415

        inits = list(m.graph.initializer)
        if not inits:
            return None
        t = rng.choice(inits)
        arr = numpy_helper.to_array(t)
        v = rng.choice(["drop_last", "flatten", "scalar", "nan"])
        new = {
            "drop_last": arr[..., :-1] if arr.ndim and arr.shape[-1] > 1 else arr.reshape(-1)[:0],
            "flatten": arr.reshape(-1),
            "scalar": np.asarray(arr.reshape(-1)[0] if arr.size else 0, dtype=arr.dtype),
            "nan": np.full_like(arr, np.nan) if arr.dtype.kind == "f" else arr,
        }[v]
        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(new), t.name))
        return f"init:{v}", f"initializer {t.name!r} {list(arr.shape)} -> {list(np.shape(new))}"

    def _node(self, rng: random.Random, m: Any) -> tuple[str, str] | None:
        node = rng.choice(list(m.graph.node))
        v = rng.choice(["drop_input", "extra_input", "rename_output", "domain"])
        if v == "drop_input" and node.input:
            node.input.pop()
        elif v == "extra_input":
            node.input.append("no_such_tensor")
        elif v == "rename_output" and node.output:
            node.output[0] = node.output[0] + "_renamed"
        else:
            v, node.domain = "domain", "com.nope"
        return f"node:{v}", f"{node.op_type} node {node.name!r}: {v}"

    def _graph(self, rng: random.Random, m: Any) -> tuple[str, str] | None:
        inputs = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
        v = rng.choice(["dim_zero", "dim_negative", "dim_param", "dim_huge", "elem_type", "drop_output", "dup_output"])
        if v.startswith("dim") or v == "elem_type":
            i = rng.choice(inputs)
            dims = i.type.tensor_type.shape.dim
            if v == "elem_type":
                i.type.tensor_type.elem_type = rng.choice([7, 10, 11])
            else:
                d = dims[rng.randrange(len(dims))]
                if v == "dim_param":
                    d.dim_param = "N"
                else:
                    d.dim_value = {"dim_zero": 0, "dim_negative": -3, "dim_huge": 2**31}[v]
            return f"graph:{v}", f"graph input {i.name!r}: {v}"
        if v == "drop_output":
            del m.graph.output[:]
        else:
            m.graph.output.append(m.graph.output[0])
        return f"graph:{v}", v

    def _rename(self, rng: random.Random, m: Any) -> tuple[str, str]:
        node = rng.choice(list(m.graph.node))
        old, node.op_type = node.op_type, rng.choice(["NopeOp", node.op_type.lower(), ""])
        return "node:op_type", f"node {node.name!r}: op {old!r} -> {node.op_type!r}"


def check_model(path: Path, weights_dir: Path) -> tuple[str, str, str]:
    """The user's path for a model file: (category, phase reached, message)."""
    from ..frontends import import_onnx  # noqa: PLC0415

    phase = "import"
    try:
        with _deadline(CASE_TIMEOUT_S):
            p = import_onnx(path, weights_dir).pipeline
            phase = "default_schedule"
            s = default_schedule(p)
            validate(p, s)
            loopnest.build(p, s)
            phase = "onnxruntime"
            return _against_onnxruntime(p, path)
    except ModelImportError as exc:
        return ("import_error" if phase == "import" else "project_error:ModelImportError"), phase, _first_line(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        return _exception_category(exc), phase, f"{type(exc).__name__}: {_first_line(exc)}"
    return "accepted", "", ""


ORT_MAX_ELEMENTS = 1 << 24  # larger models are not run with ONNX Runtime (memory)


def _against_onnxruntime(p: Pipeline, path: Path) -> tuple[str, str, str]:
    """An imported model checked against ONNX Runtime: it must load and run the file, and
    its outputs must have the shapes the importer gave them."""
    import onnxruntime as ort  # noqa: PLC0415

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = 1, 4
    try:
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001  # ORT's own error types vary by version
        return "accepted_invalid", "onnxruntime", f"imported, but ONNX Runtime refuses the model: {_first_line(exc)}"
    if max((s.size for s in p.stages), default=0) > ORT_MAX_ELEMENTS:
        return "accepted_unchecked", "onnxruntime", "imported; too large to run with ONNX Runtime here"
    names = {v: k for k, v in p.source.get("input_names", {}).items()}
    rng = np.random.default_rng(0)
    try:
        feeds = {i.name: rng.uniform(-1, 1, size=p.shape_of(names[i.name])).astype(np.float32) for i in sess.get_inputs()}
        outs = sess.run(None, feeds)
    except KeyError as exc:
        return "accepted_invalid", "onnxruntime", f"imported, but ONNX Runtime's input {exc} is not an input of the pipeline"
    except Exception as exc:  # noqa: BLE001
        return "accepted_invalid", "onnxruntime", f"imported, but ONNX Runtime fails to run it: {_first_line(exc)}"
    want = {o.name: tuple(np.shape(v)) for o, v in zip(sess.get_outputs(), outs)}
    got = {onnx_name: tuple(p.shape_of(ir)) for ir, onnx_name in p.source.get("output_names", {}).items()}
    if want != got:
        return "accepted_wrong_shape", "onnxruntime", f"output shapes {got}, ONNX Runtime's {want}"
    return "accepted", "", ""


def _onnx_phase(rep: FuzzReport, ks: list[int], seed: int, models: _Models, tmp: Path, tick: Callable[[], None]) -> None:
    fam = rep.families["onnx"]
    for k in ks:
        name, data, tag, what = models.case(_rng(seed, "onnx", k))
        case_dir = tmp / f"onnx{k}"
        case_dir.mkdir()
        path = case_dir / f"{name}.onnx"
        try:
            path.write_bytes(data)
            cat, phase, msg = check_model(path, case_dir / "weights")
        finally:
            shutil.rmtree(case_dir, ignore_errors=True)
        fam.add(cat, [tag], {"case": k, "model": f"resources/models/{name}.onnx", "mutation": what, "phase": phase, "message": msg})
        tick()


# --- CLI: cases ------------------------------------------------------------------------------------
class _CliFixtures:
    """Bad files and directories the CLI cases name, in a temp dir."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.files: dict[str, Path] = {}
        f = self.files
        (tmp / "a_dir").mkdir()
        (tmp / "dir.onnx").mkdir()
        f["<dir>"] = tmp / "a_dir"
        f["<dir.onnx>"] = tmp / "dir.onnx"
        f["<missing.json>"] = tmp / "missing.json"
        f["<missing.onnx>"] = tmp / "missing.onnx"
        f["<file>/x.sqlite"] = self._write("plain_file", b"x") / "x.sqlite"
        f["<garbage.onnx>"] = self._write("garbage.onnx", bytes(random.Random(1).randrange(256) for _ in range(2048)))
        f["<empty.onnx>"] = self._write("empty.onnx", b"")
        f["<non-utf8.json>"] = self._write("nonutf8.json", b'{"stages": {"blur_x": {"pure": [{"kind": "compute_root\xff\xfe"}]}}}')
        f["<nested-list.json>"] = self._write("nested_list.json", b"[" * 100000 + b"]" * 100000)
        f["<nested-object.json>"] = self._write("nested_obj.json", b'{"stages": ' + b'{"a": ' * 50000 + b"1" + b"}" * 50001)
        f["<not-json.json>"] = self._write("notjson.json", b"stages: blur_x")
        f["<list.json>"] = self._write("list.json", b"[1, 2, 3]")
        f["<empty.json>"] = self._write("empty.json", b"")
        f["<pipeline-bad.json>"] = self._write("pipe_bad.json", b'{"name": 5, "stages": "x"}')
        f["<pipeline-empty.json>"] = self._write("pipe_empty.json", b"{}")

        def sched(stage: str, d: dict[str, Any]) -> bytes:
            return json.dumps({"stages": {stage: {"pure": [d]}}}).encode()

        split = {"kind": "split", "loop": "x", "outer": "xo", "inner": "xi"}
        f["<blur-factor-2^31.json>"] = self._write("f31.json", sched("blur_x", {**split, "factor": 2**31}))
        f["<blur-factor-10^23.json>"] = self._write("f23.json", sched("blur_x", {**split, "factor": 10**23}))
        f["<blur-unroll-100000.json>"] = self._write("unroll.json", sched("blur_x", {"kind": "unroll", "loop": "x", "factor": 100000}))
        f["<blur-non-dict.json>"] = self._write("nondict.json", b'{"stages": {"blur_y": {"pure": [5]}}}')
        f["<garbage.sqlite>"] = self._write("garbage.sqlite", bytes(random.Random(2).randrange(256) for _ in range(8192)))
        with Database(tmp / "newer.sqlite") as db:
            with db.conn:
                db.conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
            db.conn.execute("PRAGMA user_version = 99")  # what a newer build writes (both ways the version is kept)
        f["<newer-schema.sqlite>"] = tmp / "newer.sqlite"
        with Database(tmp / "trunc.sqlite") as db:
            db.put_pipeline("h", "p", {"x": "y" * 20000})
        with open(tmp / "trunc.sqlite", "r+b") as fh:
            fh.truncate(1500)
        f["<truncated.sqlite>"] = tmp / "trunc.sqlite"
        self.counter = 0

    def _write(self, name: str, data: bytes) -> Path:
        p = self.tmp / name
        p.write_bytes(data)
        return p

    def new_path(self, suffix: str) -> Path:
        self.counter += 1
        return self.tmp / f"case{self.counter}{suffix}"


BAD_INTS = ["0", "-1", "abc", "99999999999999999999", "1.5", ""]
BAD_FLOATS = ["nan", "-1", "inf", "-inf", "abc"]  # and 0 where a positive number is needed
BAD_POSITIVE = [*BAD_FLOATS, "0"]
# (/dev/null is left out: SQLite would create /dev/null-wal beside it.)
BAD_DBS = ["<dir>", "<garbage.sqlite>", "<newer-schema.sqlite>", "<truncated.sqlite>", "<file>/x.sqlite"]
BAD_SCHEDULE_FILES = [
    "<missing.json>", "<non-utf8.json>", "<nested-list.json>", "<nested-object.json>", "<not-json.json>", "<list.json>",
    "<empty.json>", "<dir>", "<blur-non-dict.json>",
]  # fmt: skip
HUGE_SCHEDULE_FILES = ["<blur-factor-2^31.json>", "<blur-factor-10^23.json>", "<blur-unroll-100000.json>"]
BAD_PIPELINES = [
    "nope", "", "BLUR", "<pipeline-bad.json>", "<pipeline-empty.json>", "<non-utf8.json>", "<nested-list.json>", "<list.json>",
    "<missing.onnx>", "<garbage.onnx>", "<empty.onnx>", "<dir.onnx>",
]  # fmt: skip


@dataclass
class CliCase:
    argv: list[str]  # with <placeholders> for the fixture files
    expect_error: bool | None  # None: the input may be valid
    tag: str
    detail: str = ""  # what a generated file holds (a mutated schedule, a model's change)


class _CliCases:
    def __init__(self, fx: _CliFixtures, schedules: _Schedules, models: _Models) -> None:
        self.fx, self.schedules, self.models = fx, schedules, models

    def case(self, rng: random.Random) -> CliCase:
        kinds = ["load", "mutated_schedule", "pipeline", "size", "measure", "search", "bench", "import", "top", "torch"]
        kind = rng.choices(kinds, [3, 3, 2, 0.5, 4, 2, 2, 2, 0.5, 0.15])[0]
        return getattr(self, f"_{kind}")(rng)

    def _load(self, rng: random.Random) -> CliCase:
        cmd = rng.choice(["show", "export", "lower"])
        f = rng.choice(BAD_SCHEDULE_FILES + (HUGE_SCHEDULE_FILES if cmd != "lower" else []))  # lower compiles: only files that fail to load
        extra = ["--lang", rng.choice(["python", "rust"])] if cmd == "export" and rng.random() < 0.3 else []
        return CliCase(
            [cmd, "blur", "--size", "small", "--schedule", f, *extra, *(["--json"] if rng.random() < 0.3 else [])], True, f"{cmd}:{f}"
        )

    def _mutated_schedule(self, rng: random.Random) -> CliCase:
        case = self.schedules.case(rng)
        path = self.fx.new_path(".json")
        path.write_text(_jtext(case.body))
        cmd = rng.choice(["show", "export"])
        why = f"; invalid: {'; '.join(case.must_reject)}" if case.must_reject else ""
        argv = [cmd, case.pipeline, "--size", "small", "--schedule", str(path)]
        return CliCase(argv, True if case.must_reject else None, f"{cmd}:mutated", f"schedule file: {_jtext(case.body)}{why}")

    def _pipeline(self, rng: random.Random) -> CliCase:
        cmd = rng.choice(["show", "export", "measure"])
        pipe = rng.choice(BAD_PIPELINES)
        return CliCase([cmd, pipe, "--size", "small", *(["--no-db"] if cmd == "measure" else [])], True, f"{cmd}:pipeline {pipe}")

    def _size(self, rng: random.Random) -> CliCase:
        return CliCase([rng.choice(["show", "export"]), "blur", "--size", rng.choice(["nope", "", "SMALL", "full2"])], True, "size")

    def _measure(self, rng: random.Random) -> CliCase:
        cmd = rng.choice(["measure", "measure", "autoschedule"])
        argv = [cmd, "blur", "--size", "small"]
        what = rng.choice(
            ["db", "threads", "timeout", "min-time", "schedule"] if cmd == "measure" else ["db", "threads", "timeout", "min-time"]
        )
        db = ["--no-db"] if rng.random() < 0.5 else ["--db", str(self.fx.new_path(".sqlite"))]
        if what == "db":
            v = rng.choice(BAD_DBS)
            return CliCase([*argv, "--db", v], True, f"{cmd}:--db {v}")
        if what == "schedule":
            v = rng.choice(HUGE_SCHEDULE_FILES + BAD_SCHEDULE_FILES)
            return CliCase([*argv, *db, "--schedule", v], True, f"measure:--schedule {v}")
        v = rng.choice({"threads": BAD_INTS, "timeout": BAD_POSITIVE}.get(what, BAD_FLOATS))
        return CliCase([*argv, *db, f"--{what}", v], True, f"{cmd}:--{what} {v}")

    def _search(self, rng: random.Random) -> CliCase:
        base = ["search", "blur", "--size", "small", "--baseline", "none", "--quiet"]
        opts = {
            "--trials": ["-1", "0", "abc"], "--budget-s": BAD_POSITIVE, "--threads": BAD_INTS, "--db": BAD_DBS,
            "--model": ["nope", "../x"], "--strategy": ["nope"], "--seed": ["abc", "1.5"],
        }  # fmt: skip
        opt = rng.choice(sorted(opts))
        v = rng.choice(opts[opt])
        argv = [*base, *(["--model", "analytic"] if opt != "--model" else []), *(["--no-db"] if opt != "--db" else []), opt, v]
        return CliCase(argv, True, f"search:{opt} {v}")

    def _bench(self, rng: random.Random) -> CliCase:
        which = rng.choice(["core", "search", "models", "fuzz"])
        if which == "core":
            opts = {
                "--repeats": ["-1", "0", "abc"],
                "--min-time": BAD_FLOATS,
                "--pipelines": ["nope", ",", ""],
                "--autoschedulers": ["nope"],
                "--size": ["nope"],
            }
            base = ["bench", "core", "--size", "small", "--pipelines", "blur", "--autoschedulers", "none"]
        elif which == "search":
            opts = {
                "--strategies": ["nope", ""],
                "--pipelines": ["nope"],
                "--trials": ["-1", "abc"],
                "--repeats": ["-1"],
                "--budget-s": ["nan", "-1"],
            }
            base = ["bench", "search", "--size", "small", "--pipelines", "blur", "--strategies", "random", "--model", "analytic"]
        elif which == "models":
            opts = {"--models": ["<missing.onnx>", "<garbage.onnx>", "<empty.onnx>", "<dir.onnx>", ","]}
            base = ["bench", "models", "--search", "none", "--repeats", "1"]
        else:
            opts = {"--n": ["-1", "0", "abc"], "--measure-sample": ["-1", "abc"], "--seed": ["abc"]}
            base = ["bench", "fuzz"]
        opt = rng.choice(sorted(opts))
        v = rng.choice(opts[opt])
        return CliCase([*base, opt, v], True, f"bench {which}:{opt} {v}")

    def _import(self, rng: random.Random) -> CliCase:
        wdir = ["--weights-dir", str(self.fx.new_path("_weights"))]
        v = rng.choice(["file", "file", "shape", "py_missing", "mutated", "mutated", "out_dir"])
        if v == "file":
            f = rng.choice(["<missing.onnx>", "<garbage.onnx>", "<empty.onnx>", "<dir.onnx>", "<not-json.json>"])
            return CliCase(["import", f, *wdir], True, f"import:{f}")
        if v == "shape":
            return CliCase(["import", str(MODELS_DIR / "small_cnn.onnx"), "--input-shape", "1,3", *wdir], True, "import:onnx --input-shape")
        if v == "py_missing":
            return CliCase(["import", str(self.fx.tmp / "nope.py") + ":Model", "--input-shape", "1,3", *wdir], True, "import:missing .py")
        if v == "out_dir":
            return CliCase(["import", str(MODELS_DIR / "small_cnn.onnx"), "--out", "<dir>", *wdir], True, "import:--out <dir>")
        name, data, tag, what = self.models.case(rng)
        path = self.fx.new_path(".onnx")
        path.write_bytes(data)
        return CliCase(["import", str(path), *wdir, "--json"], None, f"import:mutated {tag.split(':')[0]}", f"{name}.onnx with {what}")

    def _top(self, rng: random.Random) -> CliCase:
        argv = rng.choice([[], ["nope"], ["bench"], ["bench", "nope"], ["show"], ["measure", "--threads"], ["--size", "small"]])
        return CliCase(list(argv), True, "top:" + " ".join(argv))

    def _torch(self, rng: random.Random) -> CliCase:
        shape = rng.choice(["1,3", "abc", "1,-3,8,8", "0,3,32,32", "1,3,32"])
        spec = f"{MODELS_DIR / 'make_models.py'}:SmallCNN"  # the project's own model definitions
        return CliCase(
            ["import", spec, "--input-shape", shape, "--weights-dir", str(self.fx.new_path("_w"))], True, f"torch:--input-shape {shape}"
        )


@contextlib.contextmanager
def no_heavy_work(tmp: Path) -> Iterator[None]:
    """While CLI cases run: stop anything that would measure, search, benchmark or lower
    (raise _WouldRun there), and keep every default path (database, weights cache, user
    data) inside `tmp`, so that no case touches the user's files."""
    from .. import isolated, search  # noqa: PLC0415
    from .. import measure as M  # noqa: PLC0415
    from . import peak  # noqa: PLC0415

    def stop(what: str) -> Callable[..., Any]:
        def f(*_a: Any, **_k: Any) -> Any:
            raise _WouldRun(what)

        return f

    patches = [
        (M.Runner, "run", "measure"),
        (peak, "fma_peak_gflops", "benchmark"),
        (search, "run_search", "search"),
        (isolated, "lowered_stmt", "lower"),
    ]
    saved = [(obj, attr, obj.__dict__[attr]) for obj, attr, _ in patches]
    env = {"SCHEDULE_EXPLORER_DB": str(tmp / "default.sqlite"), "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_DATA_HOME": str(tmp / "data")}
    env["SCHEDULE_EXPLORER_COSTMODEL"] = "analytic"
    old_env = {k: os.environ.get(k) for k in env}
    try:
        for obj, attr, what in patches:
            setattr(obj, attr, stop(what))
        os.environ.update(env)
        yield
    finally:
        for obj, attr, val in saved:
            setattr(obj, attr, val)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_cli(argv: list[str], expect_error: bool | None) -> tuple[str, str]:
    """Run engine.cli.main in this process: (category, stderr or what escaped)."""
    from .. import cli  # noqa: PLC0415

    err, out = io.StringIO(), io.StringIO()
    try:
        with _deadline(CASE_TIMEOUT_S), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc: Any = cli.main(argv)
    except SystemExit as exc:
        rc = exc.code
    except _WouldRun as exc:
        return f"reached_run:{exc}", err.getvalue()[-300:]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        return _exception_category(exc), f"{type(exc).__name__}: {_first_line(exc)}"
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    tail = " | ".join(lines[-3:])[-400:]
    if rc == 2:
        if "Traceback (most recent call last)" in text:
            return "traceback", tail
        if len(lines) == 1 and lines[0].startswith("error: "):
            return "clean_error", tail
        if lines and lines[0].startswith("usage:") and ": error: " in lines[-1]:
            return "usage_error", tail
        return "multi_line_error", tail
    if rc in (0, None):
        return ("accepted_bad" if expect_error else "ok"), tail
    return f"exit_{rc}", tail


def _cli_phase(rep: FuzzReport, ks: list[int], seed: int, cases: _CliCases, tick: Callable[[], None]) -> None:
    fam = rep.families["cli"]
    files = {k: str(v) for k, v in cases.fx.files.items()}
    with no_heavy_work(cases.fx.tmp):
        for k in ks:
            case = cases.case(_rng(seed, "cli", k))
            argv = [files.get(a, a) for a in case.argv]
            cat, detail = check_cli(argv, case.expect_error)
            shown = [_placeholder(a, cases.fx.tmp) for a in case.argv]
            ex = {"case": k, "argv": "main.py " + " ".join(_quote(a) for a in shown), "stderr": detail}
            fam.add(cat, [case.tag], ex | ({"file": case.detail} if case.detail else {}))
            tick()


def _placeholder(a: str, tmp: Path) -> str:
    return a.replace(str(tmp), "<tmp>").replace(str(ROOT) + os.sep, "")


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_.,/<>:^=" for c in a) else json.dumps(a)


# --- measuring a sample of the accepted schedules --------------------------------------------------
def measured_category(m: Measurement) -> str:
    if m.ok and m.verified:
        return "verified"
    msg = m.error or ""
    if m.error_kind == "verification":
        return "failed_verification"
    if m.error_kind == "crash":
        return "crash_isolated"
    if m.error_kind == "timeout":
        return "hang_isolated"
    if "Halide rejected it" in msg or msg.startswith("HalideError") or "Halide" in msg.split(":", 1)[0]:
        return "halide_rejection"
    if m.error_kind == "invalid_schedule":
        return "invalid_schedule"
    if m.error_kind == "error":
        head = msg.split(":", 1)[0]
        return f"worker_error:{head if head.isidentifier() else 'other'}"
    return f"unverified:{m.error_kind}"


def _sample(accepted: list[ScheduleCase], k: int, seed: int) -> list[ScheduleCase]:
    """Half from the schedules accepted although invalid (the likeliest to break the worker),
    the rest from the others; deterministic per seed."""
    rng = _rng(seed, "measure")
    bad = [c for c in accepted if c.must_reject]
    good = [c for c in accepted if not c.must_reject]
    pick_bad = rng.sample(bad, min(len(bad), k // 2))
    pick_good = rng.sample(good, min(len(good), k - len(pick_bad)))
    pick_bad += rng.sample([c for c in bad if c not in pick_bad], min(len(bad) - len(pick_bad), k - len(pick_bad) - len(pick_good)))
    picked = pick_bad + pick_good
    rng.shuffle(picked)  # mixed, so that a worker left corrupted by one job shows in the next
    return picked


def _measure_phase(rep: FuzzReport, sample: list[ScheduleCase], gen: _Schedules, tmp: Path, timeout_s: float, threads: int) -> None:
    fam = rep.measured
    opts: dict[str, Any] = {"min_time_s": 0.001, "min_runs": 1, "max_runs": 3, "warmup": 1, "profile": False, "timeout_s": timeout_s}
    db = Database(tmp / "measured.sqlite")
    try:
        with Runner(threads) as runner:
            for case in sample:
                p = gen.pipelines[case.pipeline]
                s = Schedule.from_json(case.body)
                try:
                    m = api.measure(p, s, runner, db, **opts)
                    cat = measured_category(m)
                    msg = f"{m.error_kind}: {m.error}" if not m.ok else f"verified ({m.verify_method}, max abs err {m.max_abs_err:.3g})"
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # noqa: BLE001
                    cat, msg, m = _exception_category(exc), f"{type(exc).__name__}: {_first_line(exc)}", None
                ex = {"pipeline": case.pipeline, "size": "small", "schedule": _jtext(case.body), "accepted_invalid": bool(case.must_reject)}
                kept = fam.add(cat, case.tags, ex | {"message": msg[:500]})
                if kept and cat not in CLEAN["measured"] and len(fam.examples[cat]) == 1:
                    fam.examples[cat][0]["minimal"] = _minimal_measured(p, case, cat, opts, threads)
                if m is not None and cat in ("crash_isolated", "failed_verification"):
                    _confirm(rep, p, s, case, cat, opts, threads)
        _recheck(rep, db, timeout_s)
    finally:
        db.close()


def _minimal_measured(p: Pipeline, case: ScheduleCase, cat: str, opts: dict[str, Any], threads: int) -> str | None:
    """The mutated parts alone (what still validates), if measuring that in a fresh worker
    gives the same outcome; None when the small version behaves differently."""
    small = _shrunk_accepted(p, case)
    with Runner(threads) as fresh:
        try:
            same = measured_category(api.measure(p, Schedule.from_json(small), fresh, None, **opts)) == cat
        except Exception as exc:  # noqa: BLE001
            same = _exception_category(exc) == cat
    return _jtext(small) if same else None


def _confirm(rep: FuzzReport, p: Pipeline, s: Schedule, case: ScheduleCase, cat: str, opts: dict[str, Any], threads: int) -> None:
    """Measure a crash or a failed verification again in a fresh worker: a different outcome
    means the first one was caused by an earlier job (a worker left corrupted)."""
    with Runner(threads) as fresh:
        again = measured_category(api.measure(p, s, fresh, None, **opts))
    if again != cat:
        rep.misattributed.append({"pipeline": case.pipeline, "schedule": _jtext(case.body), "first": cat, "fresh_worker": again})


def _recheck(rep: FuzzReport, db: Database, timeout_s: float) -> None:
    """Recompute every stored verified measurement in separate processes and compare."""
    items: list[dict[str, Any]] = []
    for m in db.measurements():
        pj = db.conn.execute("SELECT json FROM pipelines WHERE hash=?", (m.pipeline_hash,)).fetchone()
        sj = db.conn.execute("SELECT json FROM schedules WHERE hash=?", (m.schedule_hash,)).fetchone()
        items.append({"id": len(items), "pipeline": json.loads(pj[0]) if pj else None, "schedule": json.loads(sj[0]) if sj else None})
    rep.stored_verified = len(items)
    results: dict[int, dict[str, Any]] = {}
    todo = list(items)
    while todo:
        got, failure = _recheck_batch(todo, max(60.0, 10 * timeout_s))
        results.update(got)
        todo = [it for it in todo if it["id"] not in results]
        if todo and failure:  # the first unfinished item took the process down: record it, go on
            results[todo[0]["id"]] = {"id": todo[0]["id"], "agree": None, "detail": failure}
            todo = todo[1:]
        elif todo:
            break
    for it in items:
        r = results.get(it["id"], {"agree": None, "detail": "not rechecked"})
        if r.get("agree") is False:
            rep.wrong_results_stored += 1
        rep.recheck.append({"pipeline": (it["pipeline"] or {}).get("name"), "schedule": _jtext(it["schedule"]), **r})
    rep.rechecked = sum(1 for r in rep.recheck if r.get("agree") is not None)


def _recheck_batch(items: list[dict[str, Any]], timeout_s: float) -> tuple[dict[int, dict[str, Any]], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "engine.bench.fuzz"], input=json.dumps(items), capture_output=True, text=True,
            timeout=timeout_s, cwd=ROOT, env=env,
        )  # fmt: skip
        out, failure = proc.stdout, "" if proc.returncode == 0 else f"recheck process exited with {proc.returncode}: {proc.stderr[-300:]}"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        failure = f"recheck process ran past {timeout_s:g} s"
    got = {}
    for line in out.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            r = json.loads(line)
            got[r["id"]] = r
    return got, failure


def compare_outputs(out: np.ndarray, ref: np.ndarray) -> tuple[bool, str]:
    """NaN-aware comparison: non-finite values must match position by position (NaN where
    the reference has NaN, the same infinities); finite ones within the engine's tolerance,
    computed on the reference's finite values only."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return False, f"shape {out.shape} != reference {ref.shape}"
    nan_diff = int((np.isnan(out) != np.isnan(ref)).sum())
    if nan_diff:
        return False, f"{nan_diff} positions where exactly one of output and reference is NaN"
    ref_inf = np.isinf(ref)
    inf_diff = int(((np.isinf(out) != ref_inf) | (ref_inf & (out != ref))).sum())
    if inf_diff:
        return False, f"{inf_diff} positions where the infinities differ"
    fin = np.isfinite(ref)
    if not fin.any():
        return True, "no finite values (every non-finite value matches)"
    o, r = out[fin], ref[fin]
    err = np.abs(o - r)
    tol = R.ATOL_SCALE * max(float(np.abs(r).max()), 1e-30) + R.RTOL * np.abs(r)
    bad = int((err > tol).sum())
    if bad:
        return False, f"{bad} of {r.size} finite values outside tolerance (max abs err {float(err.max()):.3g})"
    return True, f"max abs err {float(err.max()):.3g} over {r.size} finite values, {int((~fin).sum())} non-finite matched"


def _recheck_main() -> int:
    """In a separate process: compile and run each stored schedule once, compare with the reference."""
    for it in json.loads(sys.stdin.read()):
        try:
            p = Pipeline.from_json(it["pipeline"])
            res, v = api.run_once(p, Schedule.from_json(it["schedule"]), seed=0)
            checks = [compare_outputs(res["outputs"][o], res["refs"][o]) for o in p.outputs]
            agree = all(ok for ok, _ in checks)
            r = {"id": it["id"], "agree": agree, "detail": "; ".join(d for _, d in checks), "engine_verify": v.ok, "method": res["method"]}
        except Exception as exc:  # noqa: BLE001  # reported to the parent, which counts it
            r = {"id": it["id"], "agree": None, "detail": f"{type(exc).__name__}: {_first_line(exc)}"}
        print(json.dumps(r), flush=True)
    return 0


# --- processes left behind -----------------------------------------------------------------------------
# Python's shared-memory bookkeeper: started once by the first SharedMemory (real placement
# runs use one) and kept for the process's lifetime by design; not a leaked worker.
RESOURCE_TRACKER = "multiprocessing.resource_tracker"


def live_children() -> tuple[int | None, list[str]]:
    """Live (not zombie) child processes of this process, from /proc, but Python's own resource
    tracker; None where there is no /proc."""
    procs = processes()
    if procs is None:
        return None, []
    me = os.getpid()
    cmds = [pr.cmdline for pr in procs.values() if pr.ppid == me and pr.state != "Z" and RESOURCE_TRACKER not in pr.cmdline]
    return len(cmds), cmds


# --- the benchmark ----------------------------------------------------------------------------------------
def fuzz(
    n: int,
    seed: int = 0,
    measure_sample: int = 20,
    *,
    timeout_s: float = 10.0,
    threads: int = 2,
    progress: Callable[[str], None] | None = None,
) -> FuzzReport:
    """Run `n` cases (3/5 schedules, 1/5 ONNX models, 1/5 CLI), measure `measure_sample` of
    the accepted schedules, recheck what was stored; see the module docstring."""
    from ..halide_backend import target_string  # noqa: PLC0415

    t0 = time.time()
    rep = FuzzReport(seed, n, measure_sample, {f: FamilyResult() for f in FAMILIES}, FamilyResult())
    rep.machine = {
        "host": host_fingerprint(), "target": target_string(), "cores": os.cpu_count(), "python": platform.python_version(),
        "platform": platform.platform(),
    }  # fmt: skip
    ks = {f: [k for k in range(n) if FAMILIES[(0, 0, 0, 1, 2)[k % 5]] == f] for f in FAMILIES}
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress and (done[0] % 500 == 0 or done[0] == n):
            progress(f"{done[0]}/{n} cases, {time.time() - t0:.0f} s")

    accepted: list[ScheduleCase] = []
    gen = functools.cache(_Schedules)  # built inside the first phase that needs them:
    models = functools.cache(_Models)  # a failure there is that phase's, not the benchmark's

    def phase(name: str, fn: Callable[[], None], family: FamilyResult, expected: int) -> None:
        t = time.time()
        try:
            fn()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001  # a phase must never take the benchmark down
            rep.phase_escapes[name] = f"{type(exc).__name__}: {_first_line(exc)}"
        family.seconds = time.time() - t
        if family.tried < expected:  # the cases the phase did not get to
            why = f"not run: the {name} phase raised {rep.phase_escapes.get(name)}"
            family.add("not_run", [], {"message": why}, count=expected - family.tried)

    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as d:
        tmp = Path(d)
        for sub in ("onnx", "cli"):
            (tmp / sub).mkdir()
        phases: dict[str, Callable[[], None]] = {
            "schedules": lambda: _schedule_phase(rep, ks["schedules"], seed, gen(), accepted, tick),
            "onnx": lambda: _onnx_phase(rep, ks["onnx"], seed, models(), tmp / "onnx", tick),
            "cli": lambda: _cli_phase(rep, ks["cli"], seed, _CliCases(_CliFixtures(tmp / "cli"), gen(), models()), tick),
        }
        for name, fn in phases.items():
            if ks[name]:
                phase(name, fn, rep.families[name], len(ks[name]))
        if measure_sample and accepted:
            sample = _sample(accepted, measure_sample, seed)
            if progress:
                progress(f"measuring {len(sample)} of {len(accepted)} accepted schedules")
            phase("measure", lambda: _measure_phase(rep, sample, gen(), tmp, timeout_s, threads), rep.measured, len(sample))
    rep.live_workers, rep.live_worker_cmdlines = live_children()
    rep.wall_s = time.time() - t0
    rep.table = table(rep)
    return rep


def table(rep: FuzzReport) -> str:
    lines = [
        f"bench fuzz: {rep.n} cases, seed {rep.seed}, {rep.wall_s:.0f} s on {rep.machine.get('host')} "
        f"(Halide target {rep.machine.get('target')})",
        "| family | tried | outcome | count | verdict |",
        "|---|---|---|---|---|",
    ]
    for fam, res in [*rep.families.items(), ("measured", rep.measured)]:
        first = True
        for cat, k in sorted(res.counts.items(), key=lambda kv: (kv[0] not in CLEAN[fam], -kv[1], kv[0])):
            head = f"| {fam} | {res.tried} |" if first else "| | |"
            lines.append(f"{head} {cat} | {k} | {'ok' if cat in CLEAN[fam] else 'BUG'} |")
            first = False
        if first:
            lines.append(f"| {fam} | 0 | - | 0 | |")
    bad_checks = sum(1 for r in rep.recheck if r.get("agree") is None)
    lines += [
        f"wrong results stored: {rep.wrong_results_stored} of {rep.stored_verified} stored verified measurements "
        f"({rep.rechecked} recomputed in a separate process{f', {bad_checks} could not be' if bad_checks else ''})",
        f"failures blamed on the wrong schedule (different outcome in a fresh worker): {len(rep.misattributed)}",
        f"calling process survived: yes; phases that raised: {', '.join(rep.phase_escapes) or 'none'}; "
        f"live worker processes left: {rep.live_workers if rep.live_workers is not None else 'unknown'}",
    ]
    return "\n".join(lines)


def bench_fuzz(n: int = 1000, seed: int = 0, measure_sample: int = 20, timeout_s: float = 10.0, threads: int = 2) -> dict[str, Any]:
    """`fuzz` with its progress on stderr; the report as JSON."""

    def progress(msg: str) -> None:
        print(f"[bench fuzz] {msg}", file=sys.stderr, flush=True)

    rep = fuzz(n, seed, measure_sample, timeout_s=timeout_s, threads=threads, progress=progress)
    return rep.to_json()


if __name__ == "__main__":
    sys.exit(_recheck_main())
