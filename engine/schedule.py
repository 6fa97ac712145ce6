"""Schedules: per stage, Halide-style directives for the pure and the update definition.

A schedule is data: JSON that round-trips exactly, a stable hash, validation against a
pipeline that names the stage and directive at fault, and export as Halide C++ / Python
schedule source. A stage the schedule does not mention is computed at root, serially.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import loops as L
from .ir import Pipeline, canonical_hash

FORMAT_VERSION = 1
COMPUTE_KINDS = ("compute_inline", "compute_root", "compute_at")
STORE_KINDS = ("store_root", "store_at")
LOOP_KINDS = ("split", "tile", "reorder", "fuse", "vectorize", "parallel", "unroll")
# Required arguments and their types per directive kind; 'factor' is optional for the three markers.
SPEC: dict[str, dict[str, type]] = {
    "compute_inline": {},
    "compute_root": {},
    "compute_at": {"consumer": str, "loop": str},
    "store_root": {},
    "store_at": {"consumer": str, "loop": str},
    "split": {"loop": str, "outer": str, "inner": str, "factor": int},
    "tile": {"x": str, "y": str, "xo": str, "yo": str, "xi": str, "yi": str, "xf": int, "yf": int},
    "reorder": {"loops": list},
    "fuse": {"inner": str, "outer": str, "fused": str},
    "vectorize": {"loop": str},
    "parallel": {"loop": str},
    "unroll": {"loop": str},
}
# Optional arguments per kind: what Halide's call takes; anything else would be ignored silently.
OPTIONAL: dict[str, dict[str, type]] = {
    "split": {"tail": str},
    "tile": {"tail": str},
    "vectorize": {"factor": int, "tail": str},
    "parallel": {"factor": int, "tail": str},
    "unroll": {"factor": int, "tail": str},
}
_TYPE_WORDS = {int: "an integer", str: "a string (a name)", list: "a list of loop names"}
NAME_ARGS = ("loop", "outer", "inner", "x", "y", "xo", "yo", "xi", "yi", "fused", "consumer")


class ScheduleError(ValueError):
    """An invalid schedule: names the stage, the definition, the directive and what is wrong."""

    def __init__(self, stage: str, message: str, directive: Any = None, index: int | None = None, update: bool = False):
        self.stage, self.directive, self.index, self.update, self.reason = stage, directive, index, update, message
        where = f"stage {_short(stage)!r}"
        if directive is not None:
            where += f"{' update' if update else ''} directive #{index} {format_directive(directive)}"
        super().__init__(f"invalid schedule: {where}: {message}")


def format_directive(d: Any) -> str:
    if not isinstance(d, dict):
        return _short(d)
    args = ", ".join(f"{_short(k)}={_short(v)}" for k, v in d.items() if k != "kind")
    return f"{_short(d.get('kind'))}({args})"


def _short(v: Any, limit: int = 60) -> str:
    """A value as the user wrote it, cut to `limit` characters (a fuzzed value can be huge)."""
    try:
        text = v if isinstance(v, str) else repr(v)
    except (RecursionError, ValueError):
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_directive(d: Any, update: bool = False) -> None:
    """Shape check of one directive (of the update definition's list when `update`); raises
    L.LoopError with what is wrong. Every argument is checked: nothing is ignored silently."""
    if not isinstance(d, dict) or not isinstance(d.get("kind"), str):
        raise L.LoopError("a directive is an object with a 'kind'")
    kind = d["kind"]
    if kind not in SPEC:
        raise L.LoopError(f"unknown directive kind {_short(kind)!r} (known: {', '.join(SPEC)})")
    if update and kind in COMPUTE_KINDS + STORE_KINDS:
        raise L.LoopError(f"{kind} places the whole stage: it belongs to the pure definition's list, not the update's")
    optional = OPTIONAL.get(kind, {})
    for arg in SPEC[kind]:
        if arg not in d:
            raise L.LoopError(f"missing argument {arg!r}")
    for arg, v in d.items():
        if arg == "kind":
            continue
        typ = SPEC[kind].get(arg) or optional.get(arg)
        if typ is None:
            allowed = ", ".join([*SPEC[kind], *optional]) or "none"
            raise L.LoopError(f"unexpected argument {_short(arg)!r} (the arguments of {kind}: {allowed})")
        if v is None:
            raise L.LoopError(f"argument {arg!r} is null: leave it out for the default")
        if not isinstance(v, typ) or isinstance(v, bool):
            raise L.LoopError(f"argument {arg!r} must be {_TYPE_WORDS[typ]}, got {_short(v)}")
        if arg in NAME_ARGS and not str(v).isidentifier():
            raise L.LoopError(f"argument {arg!r} must be an identifier, got {_short(v)!r}")
    if kind == "reorder" and not all(isinstance(n, str) for n in d["loops"]):
        raise L.LoopError(f"argument 'loops' must be a list of loop names, got {_short(d['loops'])}")
    for arg in ("factor", "xf", "yf"):
        if d.get(arg) is not None:
            L.check_factor(d[arg], arg)
    if "tail" in d and d["tail"] not in L.TAILS:
        raise L.LoopError(f"tail must be one of {L.TAILS}, got {_short(d['tail'])!r}")
    if "tail" in d and kind in ("vectorize", "parallel", "unroll") and "factor" not in d:
        raise L.LoopError(f"a tail strategy applies to a split: {kind} without a factor splits nothing")


@dataclass
class StageSchedule:
    pure: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)

    def compute(self) -> dict[str, Any]:
        """The stage's compute directive (the last one given wins, as in Halide)."""
        found = [d for d in self.pure if isinstance(d, dict) and d.get("kind") in COMPUTE_KINDS]
        return found[-1] if found else {"kind": "compute_root"}

    def store(self) -> dict[str, Any] | None:
        found = [d for d in self.pure if isinstance(d, dict) and d.get("kind") in STORE_KINDS]
        return found[-1] if found else None

    def to_json(self) -> dict[str, Any]:
        # A malformed directive is kept as it is (validation names it); only dicts are copied.
        d: dict[str, Any] = {"pure": [dict(x) if isinstance(x, dict) else x for x in self.pure]}
        if self.update:
            d["update"] = [dict(x) if isinstance(x, dict) else x for x in self.update]
        return d


@dataclass
class Schedule:
    stages: dict[str, StageSchedule] = field(default_factory=dict)
    name: str = ""

    def of(self, stage: str) -> StageSchedule:
        return self.stages.get(stage) or StageSchedule()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "stages": {k: v.to_json() for k, v in sorted(self.stages.items()) if v.pure or v.update},
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def content_hash(self) -> str:
        body = self.to_json()
        body.pop("name")
        return canonical_hash(body)

    @staticmethod
    def from_json(d: Any) -> Schedule:
        if not isinstance(d, dict) or not isinstance(d.get("stages"), dict):
            raise ScheduleError("?", "a schedule is a JSON object with a 'stages' object")
        if d.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            raise ScheduleError("?", f"unsupported schedule format {d.get('format')!r}")
        stages = {}
        for name, sd in d["stages"].items():
            if not isinstance(sd, dict) or not isinstance(sd.get("pure", []), list) or not isinstance(sd.get("update", []), list):
                raise ScheduleError(name, "expected {'pure': [...], 'update': [...]}")
            extra = sorted(set(sd) - {"pure", "update"})
            if extra:
                raise ScheduleError(name, f"unexpected key(s) {', '.join(map(repr, extra))}: a stage's schedule has 'pure' and 'update'")
            stages[name] = StageSchedule(
                [dict(x) if isinstance(x, dict) else x for x in sd.get("pure", [])],
                [dict(x) if isinstance(x, dict) else x for x in sd.get("update", [])],
            )
        return Schedule(stages, str(d.get("name", "")))

    @staticmethod
    def loads(text: str) -> Schedule:
        try:
            return Schedule.from_json(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ScheduleError("?", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise ScheduleError("?", "JSON nested too deeply") from None


# --- builder helpers for hand-written schedules ------------------------------------
class S:
    """Fluent helper: `S(sched, 'f').compute_at('g', 'x').vectorize('x', 8)`."""

    def __init__(self, sched: Schedule, stage: str, update: bool = False) -> None:
        self.sched, self.stage, self.is_update = sched, stage, update
        st = sched.stages.setdefault(stage, StageSchedule())
        self._list = st.update if update else st.pure

    def update(self) -> S:
        return S(self.sched, self.stage, True)

    def _add(self, kind: str, **args: Any) -> S:
        self._list.append({"kind": kind, **{k: v for k, v in args.items() if v is not None}})
        return self

    def compute_inline(self) -> S:
        return self._add("compute_inline")

    def compute_root(self) -> S:
        return self._add("compute_root")

    def compute_at(self, consumer: str, loop: str) -> S:
        return self._add("compute_at", consumer=consumer, loop=loop)

    def store_root(self) -> S:
        return self._add("store_root")

    def store_at(self, consumer: str, loop: str) -> S:
        return self._add("store_at", consumer=consumer, loop=loop)

    def split(self, loop: str, outer: str, inner: str, factor: int, tail: str | None = None) -> S:
        return self._add("split", loop=loop, outer=outer, inner=inner, factor=factor, tail=tail)

    def tile(self, x: str, y: str, xo: str, yo: str, xi: str, yi: str, xf: int, yf: int, tail: str | None = None) -> S:
        return self._add("tile", x=x, y=y, xo=xo, yo=yo, xi=xi, yi=yi, xf=xf, yf=yf, tail=tail)

    def reorder(self, *loops: str) -> S:
        return self._add("reorder", loops=list(loops))

    def fuse(self, inner: str, outer: str, fused: str) -> S:
        return self._add("fuse", inner=inner, outer=outer, fused=fused)

    def vectorize(self, loop: str, factor: int | None = None) -> S:
        return self._add("vectorize", loop=loop, factor=factor)

    def parallel(self, loop: str, factor: int | None = None) -> S:
        return self._add("parallel", loop=loop, factor=factor)

    def unroll(self, loop: str, factor: int | None = None) -> S:
        return self._add("unroll", loop=loop, factor=factor)


def default_schedule(p: Pipeline) -> Schedule:
    """Everything computed at root, serial, in the declared loop order."""
    return Schedule({s.name: StageSchedule([{"kind": "compute_root"}]) for s in p.stages}, "default")


# --- validation ------------------------------------------------------------------------
def definition_loops(
    p: Pipeline, sched: Schedule, stage: str, update: bool, extents: dict[str, int] | None = None, as_output: bool | None = None
) -> list[L.Loop]:
    """Loops of one definition after its directives (raises ScheduleError). `as_output`:
    check the tails an output needs (default: when the stage is a pipeline output)."""
    s = p.stage(stage)
    directives = sched.of(stage).update if update else sched.of(stage).pure
    loops = L.initial_loops(s, update, extents)
    output = stage in p.outputs if as_output is None else as_output
    at_root = extents is None and (output or sched.of(stage).compute()["kind"] == "compute_root")
    for k, d in enumerate(directives):
        try:
            check_directive(d, update)
            if output and extents is None:
                _check_output_tail(loops, d, update)
            if at_root:
                _check_constant_extent(loops, d)
            loops = L.apply(loops, d)
        except L.LoopError as exc:
            raise ScheduleError(stage, str(exc), d if isinstance(d, dict) else {"kind": repr(d)}, k, update) from None
    return loops


def _check_constant_extent(loops: list[L.Loop], d: dict[str, Any]) -> None:
    """Halide vectorizes and unrolls only loops of constant extent; a root stage's own dims
    are sized at run time (Halide's error would come only when compiling)."""
    if d["kind"] not in ("vectorize", "unroll") or "factor" in d:
        return
    lp = next((x for x in loops if x.name == d["loop"]), None)
    if lp is not None and not lp.fixed:
        raise L.LoopError(
            f"loop {lp.name!r} of a stage computed at root has a run-time extent, and Halide can only {d['kind']} "
            f"loops of constant extent: give a factor ({d['kind']}({lp.name}, N)) or split it first"
        )


def _check_output_tail(loops: list[L.Loop], d: dict[str, Any], update: bool) -> None:
    """Splits of an output that Halide accepts but that fail when the pipeline runs: an
    update split that does not divide its extent is rounded up (writing past the buffer),
    and a pure split larger than its extent is shifted inwards to before the buffer."""
    pairs = [(d.get("loop"), d.get("factor"))] if d["kind"] in ("split", "vectorize", "parallel", "unroll") else []
    if d["kind"] == "tile":
        pairs = [(d["x"], d["xf"]), (d["y"], d["yf"])]
    tail = d.get("tail", "auto")
    for name, factor in pairs:
        lp = next((x for x in loops if x.name == name), None)
        if lp is None or not factor or lp.rvar or tail == "guard_with_if":
            continue
        if update and lp.extent % factor and tail in ("auto", "round_up"):
            raise L.LoopError(
                f"factor {factor} does not divide loop {name!r} (extent {lp.extent}) of an output's update; "
                "the rounded-up tail would write past the output: use a dividing factor or tail='guard_with_if'"
            )
        if lp.extent % factor and tail == "round_up":
            raise L.LoopError(
                f"factor {factor} does not divide loop {name!r} (extent {lp.extent}) of an output and tail='round_up' "
                "would write past the output: use a dividing factor or tail='guard_with_if'"
            )
        if not update and factor > lp.extent and tail in ("auto", "shift_inwards"):
            raise L.LoopError(
                f"factor {factor} exceeds loop {name!r} (extent {lp.extent}) of an output; "
                "use a factor up to the extent or tail='guard_with_if'"
            )


def writes_in_bounds(p: Pipeline, sched: Schedule, stage: str) -> bool:
    """Whether the stage, computed into a buffer of exactly its own shape (as an output is),
    writes only inside it: the splits' tails are the ones an output accepts."""
    try:
        for update in (False, True) if p.stage(stage).is_reduction else (False,):
            definition_loops(p, sched, stage, update, as_output=True)
    except ScheduleError:
        return False
    return True


def effective_consumers(p: Pipeline, sched: Schedule, name: str) -> set[str]:
    """Non-inlined stages that read `name`, directly or through inlined stages."""
    out: set[str] = set()
    for c in p.consumers(name):
        if c in p.stage_map:
            out |= effective_consumers(p, sched, c) if sched.of(c).compute()["kind"] == "compute_inline" else {c}
    return out


def _computed_inside(p: Pipeline, sched: Schedule, stage: str, consumer: str, loop: str) -> bool:
    """Whether `stage` is computed within `consumer`'s loop `loop` (at it or deeper), following
    its chain of compute_at locations."""
    cur, seen = stage, set()
    while cur not in seen:
        seen.add(cur)
        d = sched.of(cur).compute()
        if d["kind"] != "compute_at" or d["consumer"] not in p.stage_map:
            return False
        if d["consumer"] == consumer:
            return _loop_at_or_inside(p, sched, consumer, d["loop"], loop)
        cur = d["consumer"]
    return False


def _loop_at_or_inside(p: Pipeline, sched: Schedule, consumer: str, loop: str, outer: str) -> bool:
    names = [lp.name for lp in final_loops(p, sched, consumer)]
    return loop in names and outer in names and names.index(loop) >= names.index(outer)


def final_loops(p: Pipeline, sched: Schedule, stage: str) -> list[L.Loop]:
    """Loops of the stage's last definition: where compute_at of its producers lands."""
    return definition_loops(p, sched, stage, p.stage(stage).is_reduction)


def validate(p: Pipeline, sched: Schedule) -> None:
    """Raise ScheduleError for anything wrong that can be seen without Halide."""
    for name, ss in sched.stages.items():
        if name not in p.stage_map:
            raise ScheduleError(name, f"no such stage in pipeline {p.name!r} (stages: {', '.join(p.stage_map)})")
        check_shapes(name, ss)
    for s in p.stages:
        validate_stage(p, sched, s.name)
    for s in p.stages:  # across stages: needs every stage's own directives checked first
        _check_enclosed(p, sched, s.name)


def check_shapes(stage: str, ss: StageSchedule) -> None:
    """Every directive of one stage well formed (before anything reads a consumer's list)."""
    for update, directives in ((False, ss.pure), (True, ss.update)):
        if not isinstance(directives, list):
            raise ScheduleError(stage, f"the {'update' if update else 'pure'} directives must be a list, got {_short(directives)}")
        for k, d in enumerate(directives):
            try:
                check_directive(d, update)
            except L.LoopError as exc:
                raise ScheduleError(stage, str(exc), d, k, update) from None


def validate_stage(p: Pipeline, sched: Schedule, stage: str) -> None:
    """`validate` for one stage's directives: enough after changing only that stage of a
    schedule that validated (a rule-based search places ~150 stages one by one)."""
    s, ss = p.stage(stage), sched.of(stage)
    definition_loops(p, sched, s.name, False)
    if ss.update and not s.is_reduction:
        raise ScheduleError(s.name, "has no update definition (it is not a reduction)", ss.update[0], 0, True)
    if s.is_reduction:
        definition_loops(p, sched, s.name, True)
    inlined = ss.compute()["kind"] == "compute_inline"
    for k, d in enumerate(ss.pure):
        if d["kind"] in COMPUTE_KINDS + STORE_KINDS:
            _check_location(p, sched, s.name, d, k)
        elif inlined:
            raise ScheduleError(s.name, "the stage is inlined, so it has no loops to schedule: remove this or compute it somewhere", d, k)


def _check_enclosed(p: Pipeline, sched: Schedule, stage: str) -> None:
    """A stage computed or stored inside a loop must have every stage that reads it inside
    that loop too (Halide rejects it otherwise, later and less clearly)."""
    ss = sched.of(stage)
    for d in (ss.compute(), ss.store()):  # the last of each kind is the one in force
        if d is None or d["kind"] not in ("compute_at", "store_at"):
            continue
        consumer, loop = d["consumer"], d["loop"]
        readers = effective_consumers(p, sched, stage) - {consumer}
        outside = sorted(c for c in readers if not _computed_inside(p, sched, c, consumer, loop))
        if outside:
            raise ScheduleError(
                stage,
                f"{', '.join(map(repr, outside))} also read{'s' if len(outside) == 1 else ''} it but "
                f"{'is' if len(outside) == 1 else 'are'} not computed inside {consumer}.{loop}: "
                "place it at a loop that encloses every stage that reads it",
                d,
                ss.pure.index(d),
            )
    _check_store_race(p, sched, stage)


def enclosing_loops(p: Pipeline, sched: Schedule, consumer: str, loop: str) -> list[tuple[str, L.Loop]]:
    """The loops around a stage computed at `consumer`.`loop`, outermost first, following the
    consumer's own compute_at chain up to the root."""
    out: list[tuple[str, L.Loop]] = []
    seen: set[str] = set()
    while consumer not in seen:
        seen.add(consumer)
        loops = final_loops(p, sched, consumer)
        names = [lp.name for lp in loops]
        if loop not in names:
            break
        out = [(consumer, lp) for lp in loops[: names.index(loop) + 1]] + out
        d = sched.of(consumer).compute()
        if d["kind"] != "compute_at":
            break
        consumer, loop = d["consumer"], d["loop"]
    return out


def _check_store_race(p: Pipeline, sched: Schedule, stage: str) -> None:
    """Storage outside a parallel or vectorized loop that the computation is inside would be
    shared by the loop's iterations: a race, which Halide refuses when compiling."""
    ss = sched.of(stage)
    compute, store = ss.compute(), ss.store()
    if store is None or compute["kind"] != "compute_at":
        return
    chain = enclosing_loops(p, sched, compute["consumer"], compute["loop"])
    start = 0
    if store["kind"] == "store_at":
        at = [k for k, (st, lp) in enumerate(chain) if st == store["consumer"] and lp.name == store["loop"]]
        if not at:
            return  # _check_location reports a store that does not enclose the computation
        start = at[0] + 1
    for st, lp in chain[start:]:
        if lp.kind in ("parallel", "vectorized"):
            raise ScheduleError(
                stage,
                f"it is stored outside the {lp.kind} loop {st}.{lp.name} but computed inside it, so the loop's "
                "iterations would share its buffer (a race): store it inside that loop or compute it outside",
                store,
                ss.pure.index(store),
            )


def _check_location(p: Pipeline, sched: Schedule, stage: str, d: dict[str, Any], k: int) -> None:
    def fail(msg: str) -> None:
        raise ScheduleError(stage, msg, d, k)

    kind = d["kind"]
    if stage in p.outputs and kind in ("compute_inline", "compute_at"):
        fail("an output is always computed at root")
    if kind == "compute_inline" and p.stage(stage).is_reduction:
        fail("a reduction cannot be inlined (it has an update definition)")
    if kind in ("compute_at", "store_at"):
        consumer = d["consumer"]
        if consumer not in p.stage_map:
            fail(f"no such stage {consumer!r}")
        if consumer not in p.downstream(stage):
            fail(f"{consumer!r} does not consume {stage!r} (consumers: {', '.join(sorted(p.downstream(stage))) or 'none'})")
        if sched.of(consumer).compute()["kind"] == "compute_inline":
            fail(f"{consumer!r} is inlined, so it has no loops to compute at")
        names = [lp.name for lp in final_loops(p, sched, consumer)]
        if d["loop"] not in names:
            fail(f"{consumer!r} has no loop {d['loop']!r} (its loops: {', '.join(names)})")

    compute = sched.of(stage).compute()
    if kind in STORE_KINDS and compute["kind"] == "compute_inline":
        fail("an inlined stage has no storage to place")
    if kind == "store_at" and not (
        compute["kind"] == "compute_at"
        and (
            (compute["consumer"] == d["consumer"] and _loop_at_or_inside(p, sched, d["consumer"], compute["loop"], d["loop"]))
            or _computed_inside(p, sched, compute["consumer"], d["consumer"], d["loop"])
        )
    ):
        fail(f"its storage must enclose where it is computed: compute it at {d['consumer']}.{d['loop']} or inside it")


def to_source(p: Pipeline, sched: Schedule, lang: str = "cpp") -> str:
    """Halide schedule source for the pipeline's Funcs (C++ or Python)."""
    validate(p, sched)
    py = lang == "python"
    lines: list[str] = []
    new_vars: dict[str, bool] = {}
    body: list[str] = []
    for s in p.stages:
        ss = sched.of(s.name)
        for upd, directives in ((False, ss.pure), (True, ss.update)):
            if not directives:
                continue
            head = f"{s.name}.update(0)" if upd else s.name
            loops = L.initial_loops(s, upd)
            calls = []
            for d in directives:
                target = d.get("loop", d.get("x", d.get("inner")))
                rvar = any(lp.rvar for lp in loops if lp.name == target)
                calls.append(_call_source(d, new_vars, rvar, py))
                loops = L.apply(loops, d)
            body.append(head + "".join(f".{c}" for c in calls) + ("" if py else ";"))
    for v, is_r in sorted(new_vars.items()):
        if py:
            lines.append(f'{v} = hl.{"RVar" if is_r else "Var"}("{v}")')
        else:
            lines.append(f'{"RVar" if is_r else "Var"} {v}("{v}");')
    return "\n".join(lines + body) + "\n"


def _call_source(d: dict[str, Any], new_vars: dict[str, bool], rvar: bool, py: bool) -> str:
    kind = d["kind"]
    tail = d.get("tail")
    tail_arg = f", {'hl.TailStrategy.' if py else 'TailStrategy::'}{_camel(tail)}" if tail and tail != "auto" else ""
    if kind in ("compute_at", "store_at"):
        return f"{kind}({d['consumer']}, {d['loop']})"
    if kind in ("compute_inline", "compute_root", "store_root"):
        return f"{kind}()"
    if kind == "split":
        for v in (d["outer"], d["inner"]):
            new_vars.setdefault(v, rvar)
        return f"split({d['loop']}, {d['outer']}, {d['inner']}, {d['factor']}{tail_arg})"
    if kind == "tile":
        for v in (d["xo"], d["yo"], d["xi"], d["yi"]):
            new_vars.setdefault(v, rvar)
        return f"tile({d['x']}, {d['y']}, {d['xo']}, {d['yo']}, {d['xi']}, {d['yi']}, {d['xf']}, {d['yf']}{tail_arg})"
    if kind == "reorder":
        return f"reorder({', '.join(d['loops'])})" if not py else f"reorder([{', '.join(d['loops'])}])"
    if kind == "fuse":
        new_vars.setdefault(d["fused"], rvar)
        return f"fuse({d['inner']}, {d['outer']}, {d['fused']})"
    mk = {"vectorize": "vectorized", "parallel": "parallel", "unroll": "unrolled"}[kind]
    if d.get("factor"):
        inner = L.split_name(d["loop"], mk)
        new_vars.setdefault(inner, rvar)
        marked = d["loop"] if kind == "parallel" else inner
        return f"split({d['loop']}, {d['loop']}, {inner}, {d['factor']}{tail_arg}).{kind}({marked})"
    return f"{kind}({d['loop']})"


def _camel(s: str) -> str:
    return "".join(w.capitalize() for w in s.split("_"))
