"""A Halide autoscheduler's schedule source (what `Measurement.schedule_source` holds: C++
scheduling calls, as Adams2019 prints them) read back into this engine's directives, so the
schedule Halide chose can be opened, edited and measured like any other.

Mullapudi2016's and Li2018's forms are read too (per-Func blocks with `args()[k]`, undeclared `r$x`).
Only what the directives express is translated: split, vectorize, unroll, parallel, reorder,
fuse, compute_root, compute_at, store_at and store_root (a `tile` arrives as splits). Halide's
`store_in(MemoryType::...)` (where a buffer lives) has no directive: it is dropped and named in
the notes. Any other call is refused with its line. Stages the source does not mention are
inlined, as in Halide. The result is validated against the pipeline like any schedule; its
time is measured anew (it can differ from the autoscheduler's own run by what was dropped).
"""

from __future__ import annotations

import re
from collections.abc import Container

from . import loops as L
from .ir import Pipeline
from .schedule import Directive, Kind, Schedule, StageSchedule, validate

DROPPED = ("store_in",)  # storage placement: no directive; the schedule is the same otherwise
_TAIL = {"ShiftInwards": "shift_inwards", "GuardWithIf": "guard_with_if", "RoundUp": "round_up", "Auto": "auto"}
_FUNC = re.compile(r"^Func\s+(\w+)\s*=\s*pipeline\.get_func\(\d+\);$")
_VAR = re.compile(r"^R?Var\s+([\w$]+)\((.*)\);$")
_ARG = re.compile(r"^Var\s+([\w$]+)\s*=\s*(\w+)\.args\(\)\[(\d+)\];$")  # Mullapudi2016's form
_DIM = re.compile(r"^(\w+)(\.update\(0\))?\.get_schedule\(\)\.(dims|rvars)\(\)\[(\d+)\]\.var$")
_CALL = re.compile(r"\.(\w+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


class SourceError(ValueError):
    """The source cannot be read as this engine's schedule; the message names the line."""


def _args(text: str) -> list[str]:
    return [a.strip() for a in re.sub(r"[{}]", "", text).split(",") if a.strip()]


def from_halide_source(p: Pipeline, source: str) -> tuple[Schedule, list[str]]:
    """The schedule `source` describes for `p`, validated, and notes on what was dropped."""
    stages = {s.name: s for s in p.stages}
    names: dict[str, str] = {}  # Halide variable name in the source -> this engine's loop name
    funcs: dict[str, str] = {}  # Func name in the source -> stage (Halide adds _2, _3... to a name defined again in one process)
    chains: list[tuple[str, bool, str, int]] = []  # stage, update, calls text, line number
    notes: list[str] = []
    statement: list[str] = []
    start = 0
    for number, raw in enumerate(source.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("//") or line in ("{", "}"):  # Mullapudi2016 puts each Func in a block
            continue
        if not statement:
            start = number
        statement.append(line)
        if not line.endswith(";"):
            continue
        text = " ".join(statement)
        statement = []
        if m := _FUNC.match(text):
            funcs[m.group(1)] = _stage_of(m.group(1), stages, start, p.name)
        elif m := _ARG.match(text):
            names[m.group(1)] = _loop_name(p, funcs.get(m.group(2), m.group(2)), False, int(m.group(3)), start)
        elif m := _VAR.match(text):
            arg = m.group(2).strip()
            if dim := _DIM.match(arg):
                func = funcs.get(dim.group(1), dim.group(1))
                names[m.group(1)] = _loop_name(p, func, bool(dim.group(2)), int(dim.group(4)), start, dim.group(3) == "rvars")
            else:
                names[m.group(1)] = arg.strip('"')  # a new loop: Var xi("xi")
        else:
            head = re.match(r"^(\w+)(\.update\(0\))?\s*(\..*);$", text)
            if head is None or funcs.get(head.group(1), head.group(1)) not in stages:
                raise SourceError(f"line {start}: not a scheduling call this app reads: {text[:80]!r}")
            chains.append((funcs.get(head.group(1), head.group(1)), bool(head.group(2)), head.group(3), start))
    built: dict[str, dict[bool, list[Directive]]] = {}
    for stage, update, calls, at in chains:
        out = built.setdefault(stage, {False: [], True: []})[update]
        known = names | funcs
        if update:  # Li2018 names reduction loops as Halide does inside, r$x, r$y, ..., undeclared
            rvars = [lp.name for lp in L.initial_loops(stages[stage], True) if lp.rvar][::-1]
            known = {f"r${c}": name for c, name in zip("xyzw", rvars)} | known
        for call in _CALL.finditer(calls):
            directive = _directive(call.group(1), _args(call.group(2)), known, stage, at, notes)
            if directive is not None:
                out.append(directive)
    sched = Schedule({}, "Adams2019 (translated)")
    for s in p.stages:
        got = built.get(s.name)
        if got is None:
            # Halide inlines what its schedule does not mention; outputs and reductions cannot be
            # inlined (left at root, this engine's default).
            pure = [] if s.name in p.outputs or s.is_reduction else [Directive(Kind.COMPUTE_INLINE)]
            sched = sched.with_stage(s.name, StageSchedule(tuple(pure), ()))
        else:
            sched = sched.with_stage(s.name, StageSchedule(tuple(got[False]), tuple(got[True])))
    validate(p, sched)
    return sched, notes


def _stage_of(func: str, stages: Container[str], line: int, pipeline: str) -> str:
    """The stage a Func of the source is: its name, or its name less the _N Halide appends
    when a Func of that name was defined before in the same process."""
    if func in stages:
        return func
    base = re.sub(r"_\d+$", "", func)
    if base in stages:
        return base
    raise SourceError(f"line {line}: Func {func!r} is not a stage of {pipeline}")


def _loop_name(p: Pipeline, func: str, update: bool, k: int, line: int, rvars: bool = False) -> str:
    """This engine's name of Halide's dims()[k] (or rvars()[k]: reduction loops only),
    innermost first, of a stage's definition before any directive."""
    stage = next((s for s in p.stages if s.name == func), None)
    if stage is None:
        raise SourceError(f"line {line}: {func!r} is not a stage of {p.name}")
    loops = [lp for lp in L.initial_loops(stage, update) if lp.rvar or not rvars][::-1]
    if k >= len(loops):
        raise SourceError(f"line {line}: {func} has {len(loops)} {'reduction ' if rvars else ''}loops, not a [{k}]")
    return loops[k].name


def _tail(a: list[str], k: int) -> str | None:
    """The tail strategy argument at position k (TailStrategy::ShiftInwards or ShiftInwards), if given."""
    if len(a) <= k:
        return None
    name = a[k].split("::")[-1]
    if name not in _TAIL:
        raise ValueError(f"unknown tail strategy {a[k]!r}")
    return _TAIL[name]


def _directive(kind: str, a: list[str], names: dict[str, str], stage: str, line: int, notes: list[str]) -> Directive | None:
    n = [names.get(x, x) for x in a]
    where = f"line {line} ({stage}.{kind})"
    try:
        if kind in DROPPED:
            note = f"{stage}: {kind}({', '.join(a)}) dropped (no directive for where a buffer is stored)"
            if note not in notes:
                notes.append(note)
            return None
        if kind == "split":
            return Directive(Kind.SPLIT, loop=n[0], outer=n[1], inner=n[2], factor=int(a[3]), tail=_tail(a, 4))
        if kind in ("vectorize", "unroll", "parallel"):
            factor = int(a[1]) if len(a) > 1 else None
            return Directive(Kind(kind), loop=n[0], factor=factor, tail=_tail(a, 2))
        if kind == "reorder":
            return Directive(Kind.REORDER, loops=tuple(n))
        if kind == "fuse":
            return Directive(Kind.FUSE, inner=n[0], outer=n[1], fused=n[2])
        if kind in ("compute_root", "store_root"):
            return Directive(Kind(kind))
        if kind in ("compute_at", "store_at"):
            return Directive(Kind(kind), consumer=n[0], loop=n[1])
        if kind == "compute_inline":
            return Directive(Kind.COMPUTE_INLINE)
    except (IndexError, ValueError, L.LoopError) as exc:
        raise SourceError(f"{where}: cannot be read ({exc})") from None
    raise SourceError(f"{where}: Halide's {kind} has no directive in this app")
