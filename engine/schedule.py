"""Schedules: per stage, Halide-style directives for the pure and the update definition.

A schedule is data: JSON that round-trips exactly, a stable hash, validation against a
pipeline that names the stage and directive at fault, and export as Halide C++ / Python
schedule source. A stage the schedule does not mention is computed at root, serially.

A directive is a frozen `Directive` (its `Kind` and typed arguments), checked when it is
made: a malformed one never exists, so what reads a schedule needs no shape checks, and
directives, stage schedules and their tuples are hashable values that can be shared
instead of copied. JSON is only the boundary (`from_json` / `to_json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from . import expr as E
from . import loops as L
from .ir import Dim, Pipeline, Stage, canonical_hash, declared_layout, storage_axes

FORMAT_VERSION = 1


class Kind(StrEnum):
    """A directive's kind; a str, so `d.kind == "split"` holds and JSON gets the plain name."""

    COMPUTE_INLINE = "compute_inline"
    COMPUTE_ROOT = "compute_root"
    COMPUTE_AT = "compute_at"
    STORE_ROOT = "store_root"
    STORE_AT = "store_at"
    SPLIT = "split"
    TILE = "tile"
    REORDER = "reorder"
    FUSE = "fuse"
    VECTORIZE = "vectorize"
    PARALLEL = "parallel"
    UNROLL = "unroll"
    REORDER_STORAGE = "reorder_storage"
    STORE_IN = "store_in"
    PACK_INPUT = "pack_input"


COMPUTE_KINDS = (Kind.COMPUTE_INLINE, Kind.COMPUTE_ROOT, Kind.COMPUTE_AT)
STORE_KINDS = (Kind.STORE_ROOT, Kind.STORE_AT)
PLACEMENT_KINDS = COMPUTE_KINDS + STORE_KINDS  # where the whole stage goes: pure definition only
LOOP_KINDS = (Kind.SPLIT, Kind.TILE, Kind.REORDER, Kind.FUSE, Kind.VECTORIZE, Kind.PARALLEL, Kind.UNROLL)
MARKER_KINDS = (Kind.VECTORIZE, Kind.PARALLEL, Kind.UNROLL)  # mark one loop, optionally split off by a factor first
# How a stage's values are stored, not where or in what order they are computed (no loops):
# Halide's reorder_storage and store_in, and an input weight packed in blocks for this stage
# (`pack_input`: the layout a blocked-channel kernel reads, as ONNX Runtime's and TVM's
# NCHWc; the copy is made once when the weights are bound, as ONNX Runtime prepacks them
# when a session is made). Pure definition only, as placements are.
STORAGE_KINDS = (Kind.REORDER_STORAGE, Kind.STORE_IN, Kind.PACK_INPUT)
PURE_ONLY_KINDS = PLACEMENT_KINDS + STORAGE_KINDS
MEMORY_TYPES = ("register", "stack", "heap")  # store_in's memory: Halide's MemoryType Register, Stack, Heap
# Required arguments and their JSON types per directive kind; 'factor' is optional for the three markers.
SPEC: dict[str, dict[str, type]] = {
    Kind.COMPUTE_INLINE: {},
    Kind.COMPUTE_ROOT: {},
    Kind.COMPUTE_AT: {"consumer": str, "loop": str},
    Kind.STORE_ROOT: {},
    Kind.STORE_AT: {"consumer": str, "loop": str},
    Kind.SPLIT: {"loop": str, "outer": str, "inner": str, "factor": int},
    Kind.TILE: {"x": str, "y": str, "xo": str, "yo": str, "xi": str, "yi": str, "xf": int, "yf": int},
    Kind.REORDER: {"loops": list},
    Kind.FUSE: {"inner": str, "outer": str, "fused": str},
    Kind.VECTORIZE: {"loop": str},
    Kind.PARALLEL: {"loop": str},
    Kind.UNROLL: {"loop": str},
    Kind.REORDER_STORAGE: {"loops": list},
    Kind.STORE_IN: {"memory": str},
    Kind.PACK_INPUT: {"input": str, "dim": int, "factor": int},
}
# Optional arguments per kind: what Halide's call takes; anything else would be ignored silently.
OPTIONAL: dict[str, dict[str, type]] = {
    Kind.SPLIT: {"tail": str},
    Kind.TILE: {"tail": str},
    Kind.VECTORIZE: {"factor": int, "tail": str},
    Kind.PARALLEL: {"factor": int, "tail": str},
    Kind.UNROLL: {"factor": int, "tail": str},
}
# Every argument of a kind in JSON order: required ones as SPEC lists them, then the optional ones.
_ARGS: dict[str, tuple[str, ...]] = {k: (*SPEC[k], *OPTIONAL.get(k, {})) for k in SPEC}
_TYPE_WORDS = {int: "an integer", str: "a string (a name)", list: "a list of loop names"}
NAME_ARGS = ("loop", "outer", "inner", "x", "y", "xo", "yo", "xi", "yi", "fused", "consumer")


class ScheduleError(ValueError):
    """An invalid schedule: names the stage, the definition, the directive and what is wrong.
    `directive` is the directive as JSON (what the user wrote, or a Directive's to_json())."""

    def __init__(self, stage: str, message: str, directive: Any = None, index: int | None = None, update: bool = False):
        if isinstance(directive, Directive):
            directive = directive.to_json()
        self.stage, self.directive, self.index, self.update, self.reason = stage, directive, index, update, message
        where = f"stage {_short(stage)!r}"
        if directive is not None:
            where += f"{' update' if update else ''} directive #{index} {format_directive(directive)}"
        super().__init__(f"invalid schedule: {where}: {message}")


def format_directive(d: Any) -> str:
    """`split(loop=x, outer=xo, ...)`: a Directive, or a directive's JSON as the user wrote it."""
    if isinstance(d, Directive):
        d = d.to_json()
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


@dataclass(frozen=True, repr=False)
class Directive:
    """One directive: its kind and the arguments that kind takes (the others are None).
    Checked when made (L.LoopError says what is wrong), so every Directive is well formed:
    each argument its kind requires is there, and of its type; names are identifiers,
    factors within Halide's bounds, tails known. `to_json` gives exactly the set arguments."""

    kind: Kind
    consumer: str | None = None
    loop: str | None = None
    outer: str | None = None
    inner: str | None = None
    x: str | None = None
    y: str | None = None
    xo: str | None = None
    yo: str | None = None
    xi: str | None = None
    yi: str | None = None
    fused: str | None = None
    factor: int | None = None
    xf: int | None = None
    yf: int | None = None
    loops: tuple[str, ...] | None = None
    tail: str | None = None
    memory: str | None = None
    input: str | None = None
    dim: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Kind):
            if self.kind not in SPEC:
                raise L.LoopError(f"unknown directive kind {_short(self.kind)!r} (known: {', '.join(SPEC)})")
            object.__setattr__(self, "kind", Kind(self.kind))
        if isinstance(self.loops, list):
            object.__setattr__(self, "loops", tuple(self.loops))
        _check_args(self.kind, self._set())

    def _set(self) -> dict[str, Any]:
        """The arguments given (not None), by name."""
        return {n: v for n, v in self.__dict__.items() if v is not None and n != "kind"}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        for arg in _ARGS[self.kind]:
            v = getattr(self, arg)
            if v is not None:
                out[arg] = list(v) if arg == "loops" else v
        return out

    @staticmethod
    def from_json(obj: Any, update: bool = False) -> Directive:
        """A directive from its JSON object (of an update definition's list when `update`);
        raises L.LoopError with what is wrong. Every argument is checked: nothing is ignored
        silently, and a null argument is refused (leaving it out gives the default)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise L.LoopError("a directive is an object with a 'kind'")
        kind = obj["kind"]
        if kind not in SPEC:
            raise L.LoopError(f"unknown directive kind {_short(kind)!r} (known: {', '.join(SPEC)})")
        if update and kind in PURE_ONLY_KINDS:
            raise L.LoopError(_IN_UPDATE.format(kind=kind))
        args = {k: v for k, v in obj.items() if k != "kind"}
        if not args.keys() <= _FIELDS or None in args.values():  # what the constructor cannot see: say which
            _check_args(Kind(kind), args)
        return Directive(Kind(kind), **args)  # __post_init__ checks the arguments (once)

    def __repr__(self) -> str:
        return f"Directive({format_directive(self)})"


_FIELDS = frozenset(f for f in Directive.__dataclass_fields__ if f != "kind")
_IN_UPDATE = "{kind} applies to the whole stage: it belongs to the pure definition's list, not the update's"


def _check_args(kind: Kind, args: Mapping[str, Any]) -> None:
    """The arguments of one directive of `kind` (name -> value as JSON gives it, or a
    Directive's set fields): each required one there, none other, every one of its type."""
    required, optional = SPEC[kind], OPTIONAL.get(kind, {})
    for arg in required:
        if arg not in args:
            raise L.LoopError(f"missing argument {arg!r}")
    for arg, v in args.items():
        typ = required.get(arg) or optional.get(arg)
        if typ is None:
            allowed = ", ".join(_ARGS[kind]) or "none"
            raise L.LoopError(f"unexpected argument {_short(arg)!r} (the arguments of {kind}: {allowed})")
        if v is None:
            raise L.LoopError(f"argument {arg!r} is null: leave it out for the default")
        if not isinstance(v, (list, tuple) if typ is list else typ) or isinstance(v, bool):
            raise L.LoopError(f"argument {arg!r} must be {_TYPE_WORDS[typ]}, got {_short(v)}")
        if arg in NAME_ARGS and not str(v).isidentifier():
            raise L.LoopError(f"argument {arg!r} must be an identifier, got {_short(v)!r}")
    if kind in (Kind.REORDER, Kind.REORDER_STORAGE) and not all(isinstance(n, str) for n in args["loops"]):
        raise L.LoopError(f"argument 'loops' must be a list of loop names, got {_short(args['loops'])}")
    for arg in ("factor", "xf", "yf"):
        if args.get(arg) is not None:
            L.check_factor(args[arg], arg)
    if "memory" in args and args["memory"] not in MEMORY_TYPES:
        raise L.LoopError(f"memory must be one of {MEMORY_TYPES}, got {_short(args['memory'])!r}")
    if "dim" in args and args["dim"] < 0:
        raise L.LoopError(f"dim is an index of the input's dimensions (0 outermost), got {args['dim']}")
    if kind == Kind.PACK_INPUT and args["factor"] < 2:
        raise L.LoopError(f"a block of {args['factor']} packs nothing: the factor must be at least 2")
    if "tail" in args and args["tail"] not in L.TAILS:
        raise L.LoopError(f"tail must be one of {L.TAILS}, got {_short(args['tail'])!r}")
    if "tail" in args and kind in MARKER_KINDS and "factor" not in args:
        raise L.LoopError(f"a tail strategy applies to a split: {kind} without a factor splits nothing")


COMPUTE_ROOT = Directive(Kind.COMPUTE_ROOT)  # the default placement of a stage
STORE_ROOT = Directive(Kind.STORE_ROOT)


def check_in_definition(d: Any, update: bool) -> None:
    """What a definition's list adds to a directive's own checks (for schedules built in
    code): it holds Directives, and an update's holds no placement (raises L.LoopError)."""
    if not isinstance(d, Directive):
        raise L.LoopError(f"a directive is a Directive, got {type(d).__name__}")
    if update and d.kind in PURE_ONLY_KINDS:
        raise L.LoopError(_IN_UPDATE.format(kind=d.kind))


_UNSET = object()
_DERIVED = ("_hash", "_compute", "_store")  # what a StageSchedule caches about itself (never pickled)


@dataclass(frozen=True)
class StageSchedule:
    """One stage's directives, pure and update definition: an immutable, hashable value (a
    search dedupes and compares decisions by it, caches key on it)."""

    pure: tuple[Directive, ...] = ()
    update: tuple[Directive, ...] = ()

    def __post_init__(self) -> None:
        for name in ("pure", "update"):  # a list given in code becomes the tuple the type says
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def __hash__(self) -> int:
        # Computed once: caches key on stage schedules several times per prediction, and
        # hashing every directive's arguments again took ~4 us a stage (a 139-stage model's
        # loop nest hashed ~140 of them). Kept out of pickles (`__getstate__`): a str hash
        # differs between processes. `compute` and `store` are found once the same way.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.pure, self.update))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in _DERIVED}

    def definition(self, update: bool) -> tuple[Directive, ...]:
        """The directives of the update definition when `update`, else of the pure one."""
        return self.update if update else self.pure

    def with_definition(self, update: bool, directives: Iterable[Directive]) -> StageSchedule:
        """A copy with one definition's directives replaced."""
        return replace(self, **{"update" if update else "pure": tuple(directives)})

    def compute(self) -> Directive:
        """The stage's compute directive (the last one given wins, as in Halide)."""
        got = self.__dict__.get("_compute")
        if got is None:  # found once: validation and the loop nest ask per stage many times
            found = [d for d in self.pure if d.kind in COMPUTE_KINDS]
            got = found[-1] if found else COMPUTE_ROOT
            object.__setattr__(self, "_compute", got)
        return got

    def store(self) -> Directive | None:
        got = self.__dict__.get("_store", _UNSET)
        if got is _UNSET:
            found = [d for d in self.pure if d.kind in STORE_KINDS]
            got = found[-1] if found else None
            object.__setattr__(self, "_store", got)
        return got

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pure": [x.to_json() for x in self.pure]}
        if self.update:
            d["update"] = [x.to_json() for x in self.update]
        return d

    @staticmethod
    def from_json(stage: str, sd: Any) -> StageSchedule:
        """Stage `stage`'s schedule from JSON; raises ScheduleError naming the directive at fault."""
        if not isinstance(sd, dict) or not isinstance(sd.get("pure", []), list) or not isinstance(sd.get("update", []), list):
            raise ScheduleError(stage, "expected {'pure': [...], 'update': [...]}")
        extra = sorted(set(sd) - {"pure", "update"})
        if extra:
            raise ScheduleError(stage, f"unexpected key(s) {', '.join(map(repr, extra))}: a stage's schedule has 'pure' and 'update'")
        lists = []
        for update in (False, True):
            out = []
            for k, x in enumerate(sd.get("update" if update else "pure", [])):
                try:
                    out.append(Directive.from_json(x, update))
                except L.LoopError as exc:
                    raise ScheduleError(stage, str(exc), x, k, update) from None
            lists.append(tuple(out))
        return StageSchedule(lists[0], lists[1])


_NOTHING = StageSchedule()
WRAPPER_KINDS = (Kind.COMPUTE_ROOT, Kind.COMPUTE_AT, *LOOP_KINDS)  # what a wrapper's own schedule may hold


@dataclass(frozen=True)
class Wrapper:
    """A wrapper stage: Halide's `source.in(consumer)`, a copy of input or stage `source`
    that `consumer` reads instead, scheduled on its own (`pure`: compute_root or compute_at,
    and loop directives; no placement given: computed at root). Computed at a tile loop of
    the consumer, it is a packed, tile-local buffer (a GEMM's packed panel of B); it never
    changes a value. Its loops are named as `consumer` indexes `source` when that access
    is plain distinct variables (prod's `B[k, j]`: loops k, j), else d0, d1, ...
    (`wrapper_dims`); outermost first, as a stage's dims are."""

    source: str
    consumer: str
    pure: tuple[Directive, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.pure, tuple):
            object.__setattr__(self, "pure", tuple(self.pure))

    @property
    def name(self) -> str:
        """The wrapper's name as Halide's Python bindings call it (`B.in_(prod)`), in errors and sources."""
        return f"{self.source}_in_{self.consumer}"

    @property
    def label(self) -> str:
        return f"{self.source}.in({self.consumer})"

    def compute(self) -> Directive:
        found = [d for d in self.pure if d.kind in COMPUTE_KINDS]
        return found[-1] if found else COMPUTE_ROOT

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "consumer": self.consumer, "pure": [d.to_json() for d in self.pure]}

    @staticmethod
    def from_json(obj: Any) -> Wrapper:
        """A wrapper from JSON; ScheduleError names it (or its consumer) and the directive at fault."""
        if not isinstance(obj, dict) or not isinstance(obj.get("source"), str) or not isinstance(obj.get("consumer"), str):
            raise ScheduleError("?", "a wrapper is an object with a 'source' and a 'consumer' (stage or input names)")
        label = f"{obj['source']}.in({obj['consumer']})"
        extra = sorted(set(obj) - {"source", "consumer", "pure"})
        if extra:
            raise ScheduleError(label, f"unexpected key(s) {', '.join(map(repr, extra))}: a wrapper has 'source', 'consumer' and 'pure'")
        if not isinstance(obj.get("pure", []), list):
            raise ScheduleError(label, "'pure' must be a list of directives")
        out = []
        for k, x in enumerate(obj.get("pure", [])):
            try:
                out.append(Directive.from_json(x))
            except L.LoopError as exc:
                raise ScheduleError(label, str(exc), x, k) from None
        return Wrapper(obj["source"], obj["consumer"], tuple(out))


@dataclass
class Schedule:
    """Stage name -> its StageSchedule, and the wrapper stages (`Wrapper`, by name; kept out
    of `stages`, whose keys are the pipeline's stages). The values are immutable: an edit
    puts a new one in place (`stages[name] = ...`, `with_stage`), and `copy` shares them."""

    stages: dict[str, StageSchedule] = field(default_factory=dict)
    name: str = ""
    wrappers: dict[str, Wrapper] = field(default_factory=dict)

    def of(self, stage: str) -> StageSchedule:
        return self.stages.get(stage) or _NOTHING

    def copy(self, name: str | None = None) -> Schedule:
        """An independent copy (the stage schedules are immutable, so they are shared)."""
        return Schedule(dict(self.stages), self.name if name is None else name, dict(self.wrappers))

    def with_stage(self, stage: str, ss: StageSchedule) -> Schedule:
        """A copy with stage `stage` scheduled as `ss`."""
        out = self.copy()
        out.stages[stage] = ss
        return out

    def with_wrapper(self, w: Wrapper) -> Schedule:
        """A copy with wrapper `w` added (or replacing the one of the same source and consumer)."""
        old = self.wrappers.get(w.name)
        if old is not None and (old.source, old.consumer) != (w.source, w.consumer):
            raise ScheduleError(w.label, f"its name {w.name!r} is that of wrapper {old.label}: rename a stage or input")
        out = self.copy()
        out.wrappers[w.name] = w
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "name": self.name,
            "stages": {k: v.to_json() for k, v in sorted(self.stages.items()) if v.pure or v.update},
        }
        if self.wrappers:  # absent otherwise: a schedule without wrappers keeps its JSON and hash
            out["wrappers"] = [w.to_json() for _, w in sorted(self.wrappers.items())]
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def content_hash(self) -> str:
        body = self.to_json()
        body.pop("name")
        return canonical_hash(body)

    @staticmethod
    def from_json(d: Any) -> Schedule:
        """A schedule from JSON; every directive is checked here (ScheduleError names the
        stage and directive), whether the schedule fits a pipeline is `validate`'s question."""
        if not isinstance(d, dict) or not isinstance(d.get("stages"), dict):
            raise ScheduleError("?", "a schedule is a JSON object with a 'stages' object")
        if d.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            raise ScheduleError("?", f"unsupported schedule format {d.get('format')!r}")
        stages = {name: StageSchedule.from_json(name, sd) for name, sd in d["stages"].items()}
        if not isinstance(d.get("wrappers", []), list):
            raise ScheduleError("?", "'wrappers' must be a list of wrapper objects")
        wrappers: dict[str, Wrapper] = {}
        for obj in d.get("wrappers", []):
            w = Wrapper.from_json(obj)
            other = wrappers.get(w.name)
            if other is not None and (other.source, other.consumer) == (w.source, w.consumer):
                raise ScheduleError(w.consumer, f"wraps {w.source!r} twice: one wrapper per source and consumer")
            if other is not None:
                raise ScheduleError(w.label, f"its name {w.name!r} is that of wrapper {other.label}: rename a stage or input")
            wrappers[w.name] = w
        return Schedule(stages, str(d.get("name", "")), wrappers)

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
    """Fluent helper: `S(sched, 'f').compute_at('g', 'x').vectorize('x', 8)`. A directive
    that is not well formed is a ScheduleError naming the stage, here where it is written."""

    def __init__(self, sched: Schedule, stage: str, update: bool = False) -> None:
        self.sched, self.stage, self.is_update = sched, stage, update
        sched.stages.setdefault(stage, StageSchedule())

    def update(self) -> S:
        return S(self.sched, self.stage, True)

    def wrap(self, source: str) -> W:
        """The builder of a wrapper of `source` that this stage reads instead (`source.in(stage)`)."""
        return W(self.sched, source, self.stage)

    def _current(self) -> tuple[Directive, ...]:
        return self.sched.of(self.stage).definition(self.is_update)

    def _put(self, directives: tuple[Directive, ...]) -> None:
        self.sched.stages[self.stage] = self.sched.of(self.stage).with_definition(self.is_update, directives)

    def _add(self, kind: Kind, **args: Any) -> S:
        given = {k: v for k, v in args.items() if v is not None}
        current = self._current()
        try:
            d = Directive(kind, **given)
            check_in_definition(d, self.is_update)
        except L.LoopError as exc:
            raise ScheduleError(self.stage, str(exc), {"kind": kind.value, **given}, len(current), self.is_update) from None
        self._put((*current, d))
        return self

    def compute_inline(self) -> S:
        return self._add(Kind.COMPUTE_INLINE)

    def compute_root(self) -> S:
        return self._add(Kind.COMPUTE_ROOT)

    def compute_at(self, consumer: str, loop: str) -> S:
        return self._add(Kind.COMPUTE_AT, consumer=consumer, loop=loop)

    def store_root(self) -> S:
        return self._add(Kind.STORE_ROOT)

    def store_at(self, consumer: str, loop: str) -> S:
        return self._add(Kind.STORE_AT, consumer=consumer, loop=loop)

    def split(self, loop: str, outer: str, inner: str, factor: int, tail: str | None = None) -> S:
        return self._add(Kind.SPLIT, loop=loop, outer=outer, inner=inner, factor=factor, tail=tail)

    def tile(self, x: str, y: str, xo: str, yo: str, xi: str, yi: str, xf: int, yf: int, tail: str | None = None) -> S:
        return self._add(Kind.TILE, x=x, y=y, xo=xo, yo=yo, xi=xi, yi=yi, xf=xf, yf=yf, tail=tail)

    def reorder(self, *loops: str) -> S:
        return self._add(Kind.REORDER, loops=tuple(loops))

    def fuse(self, inner: str, outer: str, fused: str) -> S:
        return self._add(Kind.FUSE, inner=inner, outer=outer, fused=fused)

    def vectorize(self, loop: str, factor: int | None = None) -> S:
        return self._add(Kind.VECTORIZE, loop=loop, factor=factor)

    def parallel(self, loop: str, factor: int | None = None) -> S:
        return self._add(Kind.PARALLEL, loop=loop, factor=factor)

    def unroll(self, loop: str, factor: int | None = None) -> S:
        return self._add(Kind.UNROLL, loop=loop, factor=factor)

    def reorder_storage(self, *dims: str) -> S:
        """The stage's buffer laid out with `dims` innermost first (Halide's reorder_storage)."""
        return self._add(Kind.REORDER_STORAGE, loops=tuple(dims))

    def store_in(self, memory: str) -> S:
        return self._add(Kind.STORE_IN, memory=memory)

    def pack_input(self, input: str, dim: int, factor: int) -> S:
        """This stage reads weight `input` packed in blocks of `factor` along dimension `dim`."""
        return self._add(Kind.PACK_INPUT, input=input, dim=dim, factor=factor)


class W(S):
    """`S` for a wrapper: `S(sched, 'prod').wrap('B').compute_at('prod', 'ko').vectorize('j', 16)`
    adds the wrapper `B.in(prod)` to `sched` (once) and appends to its directives."""

    def __init__(self, sched: Schedule, source: str, consumer: str) -> None:
        self.sched, self.stage, self.is_update = sched, f"{source}.in({consumer})", False
        self.key = Wrapper(source, consumer).name
        sched.wrappers.setdefault(self.key, Wrapper(source, consumer))

    def _current(self) -> tuple[Directive, ...]:
        return self.sched.wrappers[self.key].pure

    def _put(self, directives: tuple[Directive, ...]) -> None:
        self.sched.wrappers[self.key] = replace(self.sched.wrappers[self.key], pure=directives)

    def update(self) -> S:
        raise ScheduleError(self.stage, "a wrapper is a copy: it has no update definition")

    def wrap(self, source: str) -> W:
        raise ScheduleError(self.stage, "a wrapper reads only its source: wrap the source for the stage that reads it")


def default_schedule(p: Pipeline) -> Schedule:
    """Everything computed at root, serial, in the declared loop order."""
    return Schedule({s.name: StageSchedule((COMPUTE_ROOT,)) for s in p.stages}, "default")


# --- validation ------------------------------------------------------------------------
def definition_loops(
    p: Pipeline, sched: Schedule, stage: str, update: bool, extents: dict[str, int] | None = None, as_output: bool | None = None
) -> list[L.Loop]:
    """Loops of one definition after its directives (raises ScheduleError). `as_output`:
    check the tails an output needs (default: when the stage is a pipeline output).
    Without `extents` or `as_output` the loops depend on the stage's own directives alone:
    memoized per pipeline by them (validation asks for every stage of every schedule)."""
    ss = sched.of(stage)
    if extents is None and as_output is None:
        memo = _memo(p).loops
        try:
            key = (stage, update, ss)
            hit = memo.get(key)
        except TypeError:  # not a Directive in the list (unhashable): the checks below say so
            key, hit = None, None
        if hit is not None:
            return list(hit)
        out = _definition_loops(p, sched, stage, update, None, None)
        if key is not None:
            memo.put(key, tuple(out))
        return out
    return _definition_loops(p, sched, stage, update, extents, as_output)


class _Memo:
    """Per pipeline: what validation derives from one stage's own directives."""

    def __init__(self, p: Pipeline) -> None:
        self.names = list(p.stage_map)  # the order of a schedule's `whole` key
        self.pos = {n: k for k, n in enumerate(self.names)}
        self.recent: list[tuple[tuple, dict[str, frozenset[str]]]] = []  # the last schedules that passed (`_near`)
        self.loops: L.LRU[tuple, tuple[L.Loop, ...]] = L.LRU(LOOPS_MEMO)
        self.stages: L.LRU[tuple, bool] = L.LRU(VALID_MEMO)  # `_validity_key`s that passed
        self.schedules: L.LRU[tuple, bool] = L.LRU(SCHEDULES_MEMO)  # whole schedules that passed, by their stages


LOOPS_MEMO = 20_000  # definitions per pipeline (a loop list is ~0.5 KB)
VALID_MEMO = 20_000  # stages per pipeline (a key holds references to shared stage schedules)
RECENT_PASSED = 2  # schedules that passed a new one is compared with (a search's parent or sibling)
SCHEDULES_MEMO = 5_000  # whole schedules per pipeline (a key is a pointer per stage: ~1 KB on a 139-stage model)


def _memo(p: Pipeline) -> _Memo:
    return L.pipeline_cache(p, "schedule", lambda: _Memo(p))


def _definition_loops(
    p: Pipeline, sched: Schedule, stage: str, update: bool, extents: dict[str, int] | None, as_output: bool | None
) -> list[L.Loop]:
    s = p.stage(stage)
    directives = sched.of(stage).definition(update)
    loops = L.initial_loops(s, update, extents)
    output = stage in p.outputs if as_output is None else as_output
    at_root = extents is None and (output or sched.of(stage).compute().kind == Kind.COMPUTE_ROOT)
    for k, d in enumerate(directives):
        try:
            check_in_definition(d, update)
            if output and extents is None:
                _check_output_tail(loops, d, update)
            if at_root:
                _check_constant_extent(loops, d)
            loops = L.apply(loops, d)
        except L.LoopError as exc:
            raise ScheduleError(stage, str(exc), d if isinstance(d, Directive) else {"kind": repr(d)}, k, update) from None
    return loops


def _check_constant_extent(loops: list[L.Loop], d: Directive) -> None:
    """Halide vectorizes and unrolls only loops of constant extent; a root stage's own dims
    are sized at run time (Halide's error would come only when compiling)."""
    if d.kind not in (Kind.VECTORIZE, Kind.UNROLL) or d.factor is not None:
        return
    lp = next((x for x in loops if x.name == d.loop), None)
    if lp is not None and not lp.fixed:
        raise L.LoopError(
            f"loop {lp.name!r} of a stage computed at root has a run-time extent, and Halide can only {d.kind} "
            f"loops of constant extent: give a factor ({d.kind}({lp.name}, N)) or split it first"
        )


def _check_output_tail(loops: list[L.Loop], d: Directive, update: bool) -> None:
    """Splits of an output that Halide accepts but that fail when the pipeline runs: an
    update split that does not divide its extent is rounded up (writing past the buffer),
    and a pure split larger than its extent is shifted inwards to before the buffer."""
    pairs = [(d.loop, d.factor)] if d.kind == Kind.SPLIT or d.kind in MARKER_KINDS else []
    if d.kind == Kind.TILE:
        pairs = [(d.x, d.xf), (d.y, d.yf)]
    tail = d.tail or "auto"
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
            out |= effective_consumers(p, sched, c) if sched.of(c).compute().kind == Kind.COMPUTE_INLINE else {c}
    return out


def _computed_inside(p: Pipeline, sched: Schedule, stage: str, consumer: str, loop: str) -> bool:
    """Whether `stage` is computed within `consumer`'s loop `loop` (at it or deeper), following
    its chain of compute_at locations."""
    cur, seen = stage, set()
    while cur not in seen:
        seen.add(cur)
        d = sched.of(cur).compute()
        if d.kind != Kind.COMPUTE_AT or d.consumer not in p.stage_map:
            return False
        if d.consumer == consumer:
            return _loop_at_or_inside(p, sched, consumer, L.need(d.loop), loop)
        cur = d.consumer
    return False


def _loop_at_or_inside(p: Pipeline, sched: Schedule, consumer: str, loop: str, outer: str) -> bool:
    names = [lp.name for lp in final_loops(p, sched, consumer)]
    return loop in names and outer in names and names.index(loop) >= names.index(outer)


def final_loops(p: Pipeline, sched: Schedule, stage: str) -> list[L.Loop]:
    """Loops of the stage's last definition: where compute_at of its producers lands."""
    return definition_loops(p, sched, stage, p.stage(stage).is_reduction)


def validate(p: Pipeline, sched: Schedule) -> None:
    """Raise ScheduleError for anything wrong that can be seen without Halide: the stages'
    directives (`validate_stages`), then the wrappers' (`validate_wrappers`)."""
    validate_stages(p, sched)
    if sched.wrappers:
        validate_wrappers(p, sched)


def wrapper_dims(p: Pipeline, w: Wrapper) -> tuple[Dim, ...]:
    """The wrapper's dims, outermost first: the source's extents, named as the consumer's
    accesses index the source when they all do so alike with distinct plain variables,
    else d0, d1, ... (a stage's own dim names would not do: segments and whole-model tasks
    cut a model so that a source stage becomes an input of the piece, and the wrapper's
    directives must name the same loops there)."""
    shape = p.shape_of(w.source)
    indices = {a.index for ex in p.stage(w.consumer).exprs() for a in E.accesses(ex) if a.source == w.source}
    if len(indices) == 1:
        (index,) = indices
        names = [ix.name for ix in index if isinstance(ix, E.Var)]
        if len(names) == len(shape) and len(set(names)) == len(names):
            return tuple(Dim(n, e) for n, e in zip(names, shape))
    return tuple(Dim(f"d{k}", e) for k, e in enumerate(shape))


def wrapper_initial_loops(p: Pipeline, w: Wrapper) -> list[L.Loop]:
    """The wrapper's loops before its directives: its dims, outer -> inner."""
    return [L.Loop(d.name, d.extent, parts=(L.Part(d.name, 1, d.extent),)) for d in wrapper_dims(p, w)]


def wrapper_loops(p: Pipeline, w: Wrapper) -> list[L.Loop]:
    """The wrapper's loops after its directives (raises ScheduleError naming the directive)."""
    loops = wrapper_initial_loops(p, w)
    for k, d in enumerate(w.pure):
        try:
            check_in_definition(d, False)
            if d.kind not in WRAPPER_KINDS:
                raise L.LoopError(f"a wrapper is computed at root or at a loop of a stage: {d.kind} does not apply to it")
            loops = L.apply(loops, d)
        except L.LoopError as exc:
            raise ScheduleError(w.label, str(exc), d if isinstance(d, Directive) else {"kind": repr(d)}, k) from None
    return loops


def validate_wrappers(p: Pipeline, sched: Schedule) -> None:
    """Each wrapper's source is read directly by its consumer (Halide redirects only the
    consumer's own calls), the consumer has loops (is not inlined), its directives apply
    to its loops, and a compute_at is at a loop of its consumer or of a stage the consumer
    is computed inside (so the copy is made where the consumer reads it)."""
    for key, w in sched.wrappers.items():
        if not isinstance(w, Wrapper) or key != w.name:
            raise ScheduleError(str(key), "Schedule.wrappers maps a wrapper's name (source_in_consumer) to its Wrapper")
        if w.consumer not in p.stage_map:
            raise ScheduleError(w.label, f"no such stage {w.consumer!r} in pipeline {p.name!r} to read the wrapper")
        if w.source not in p.stage_map and w.source not in p.input_map:
            raise ScheduleError(w.label, f"no stage or input {w.source!r} in pipeline {p.name!r} to wrap")
        if w.name in p.stage_map or w.name in p.input_map:  # its Halide Func would clash with that one
            raise ScheduleError(w.label, f"its name {w.name!r} is also a stage or input of pipeline {p.name!r}")
        reads = p.stage(w.consumer).sources()
        if w.source not in reads:
            read = ", ".join(sorted(reads)) or "nothing"
            raise ScheduleError(w.consumer, f"wrapper {w.label}: {w.consumer!r} does not read {w.source!r} (it reads {read})")
        if sched.of(w.consumer).compute().kind == Kind.COMPUTE_INLINE:
            raise ScheduleError(w.label, f"{w.consumer!r} is inlined, so its reads happen in its consumers: wrap {w.source!r} for them")
        wrapper_loops(p, w)
        for k, d in enumerate(w.pure):
            if d.kind != Kind.COMPUTE_AT:
                continue
            at, loop = L.need(d.consumer), L.need(d.loop)
            if at not in p.stage_map:
                raise ScheduleError(w.label, f"no such stage {at!r}", d, k)
            if sched.of(at).compute().kind == Kind.COMPUTE_INLINE:
                raise ScheduleError(w.label, f"{at!r} is inlined, so it has no loops to compute at", d, k)
            names = [lp.name for lp in final_loops(p, sched, at)]
            if loop not in names:
                raise ScheduleError(w.label, f"{at!r} has no loop {loop!r} (its loops: {', '.join(names)})", d, k)
            msg = init_loop_problem(p, sched, at, w.source, loop) if at == w.consumer else None
            if msg:
                raise ScheduleError(w.label, msg, d, k)
            if at != w.consumer and not _computed_inside(p, sched, w.consumer, at, loop):
                msg = f"{w.consumer!r} reads the wrapper but is not computed inside {at}.{loop}: compute it at a loop of {w.consumer}"
                raise ScheduleError(w.label, msg, d, k)
        _check_wrapped_inside(p, sched, w)


def _check_wrapped_inside(p: Pipeline, sched: Schedule, w: Wrapper) -> None:
    """A source stage computed at a loop is read there by its wrapper alone, so the wrapper
    must be computed inside that loop (Halide refuses it otherwise, only when compiling)."""
    if w.source not in p.stage_map:
        return
    src = sched.of(w.source).compute()
    if src.kind != Kind.COMPUTE_AT:
        return
    c, loop = L.need(src.consumer), L.need(src.loop)
    d = w.compute()
    if d.kind == Kind.COMPUTE_AT:
        at, at_loop = L.need(d.consumer), L.need(d.loop)
        if (at == c and _loop_at_or_inside(p, sched, c, at_loop, loop)) or _computed_inside(p, sched, at, c, loop):
            return
    where = f"at {d.consumer}.{d.loop}" if d.kind == Kind.COMPUTE_AT else "at root"
    k = w.pure.index(d) if d in w.pure else None
    raise ScheduleError(
        w.label,
        f"{w.source!r} is computed at {c}.{loop} and read there only by this wrapper, which is computed {where}: "
        f"compute the wrapper inside {c}.{loop} (or {w.source!r} outside it)",
        d if k is not None else None,
        k,
    )


def wrapper_problem(p: Pipeline, sched: Schedule, w: Wrapper) -> str:
    """Why wrapper `w` does not fit `sched`'s stages, the engine's reason ("" when it does):
    `validate_wrappers` for `w` alone (each wrapper is checked against the stages only)."""
    try:
        validate_wrappers(p, Schedule(sched.stages, sched.name, {w.name: w}))
    except ScheduleError as exc:
        return exc.reason or str(exc)
    return ""


def validate_stages(p: Pipeline, sched: Schedule) -> None:
    """The stages' directives (the wrappers are `validate_wrappers`').

    Incremental: what passed is remembered per pipeline (capped), a whole schedule by its
    stage schedules and each stage by exactly what its checks read (`_validity_key`), so a
    schedule seen before costs a lookup and one that changes a stage checks what that
    change can affect. The checks run in the same order as without the memo, so the first
    error is the same."""
    memo = _memo(p)
    # The key: each stage's schedule in stage order (None: not mentioned), when every stage
    # the schedule mentions is the pipeline's (else the loop below says which is not).
    whole: tuple | None = tuple(map(sched.stages.get, p.stage_map)) if sched.stages.keys() <= p.stage_map.keys() else None
    try:
        if whole is not None and memo.schedules.get(whole) is not None:
            return
    except TypeError:  # not a Directive in a list (unhashable): check_shapes says which
        whole = None
    near = _near(memo, whole) if whole is not None else None
    if near is None:
        shapes: Iterable[str] = sched.stages
    else:  # the other stage schedules are those of a schedule that passed
        shapes = [n for n in sched.stages if n in near[0]] if len(near[0]) > 1 else [n for n in near[0] if n in sched.stages]
    for name in shapes:
        if name not in p.stage_map:
            raise ScheduleError(name, f"no such stage in pipeline {p.name!r} (stages: {', '.join(p.stage_map)})")
        check_shapes(name, sched.stages[name])
    todo = []
    # Near a schedule that passed, only the changed stages and the stages placed at a loop
    # whose key read a changed stage can have another validity key (the walk that makes a
    # key reads only the stages it visits); the rest passed with the same key.
    names = memo.names if near is None else _candidates(memo, *near)
    keys = {}
    for name in names:
        key = keys[name] = _validity_key(p, sched, name)
        if memo.stages.get(key) is None:
            todo.append((name, key))
    for name, _ in todo:
        validate_stage(p, sched, name)
    for name, _ in todo:  # across stages: needs every stage's own directives checked first
        _check_enclosed(p, sched, name)
    for _, key in todo:
        memo.stages.put(key, True)
    if whole is not None:
        memo.schedules.put(whole, True)
        # Per stage placed at a loop, the stages its key read (for the next schedule near this one).
        visits = {} if near is None else {n: v for n, v in near[1].items() if n not in near[0]}
        for name, key in keys.items():
            if len(key) == 3:
                visits[name] = frozenset(n for n, _ in key[2])
            else:
                visits.pop(name, None)
        memo.recent = [(whole, visits), *memo.recent[: RECENT_PASSED - 1]]


def near_changes(new: tuple, old: tuple) -> list[int] | None:
    """The positions where two schedules' stage schedules (in stage order) differ when they
    differ in at most a quarter of the stages (at least 2); else None. What validation and the
    loop nest use to start from a recent schedule instead of from nothing."""
    limit = max(2, len(new) // 4)
    differ = [k for k, (a, b) in enumerate(zip(new, old)) if a is not b]  # shared values: the common case
    if len(differ) > 4 * limit:
        return None
    changed = [k for k in differ if new[k] != old[k]]
    return changed if len(changed) <= limit else None


def _near(memo: _Memo, whole: tuple) -> tuple[set[str], dict[str, frozenset[str]]] | None:
    """(the stages whose schedules differ, per stage placed at a loop the stages its key
    read) of a recent schedule that passed and differs from `whole` in at most a quarter of
    the stages; else None."""
    for prev, visits in memo.recent:
        changed = near_changes(whole, prev)
        if changed is not None:
            return {memo.names[k] for k in changed}, visits
    return None


def _candidates(memo: _Memo, changed: set[str], visits: dict[str, frozenset[str]]) -> list[str]:
    """The stages whose validity key may differ from the near schedule's, in stage order."""
    out = set(changed)
    for name, seen in visits.items():
        if name not in out and not changed.isdisjoint(seen):
            out.add(name)
    return sorted(out, key=memo.pos.__getitem__)


def _validity_key(p: Pipeline, sched: Schedule, stage: str) -> tuple:
    """Everything `validate_stage` and `_check_enclosed` read for `stage`: its own stage
    schedule and, when a directive places it at a consumer's loop (compute_at, store_at),
    the stage schedules of every stage those checks visit: the stages that read it (through
    inlined ones) and the chains of compute_at locations from each of them and from the
    consumers named. A stage at root or inlined depends on its own directives alone."""
    ss = sched.of(stage)
    ats = [d for d in ss.pure if d.kind in (Kind.COMPUTE_AT, Kind.STORE_AT)]
    if not ats:
        return (stage, ss)
    seen: dict[str, StageSchedule] = {}

    def chain(c: str | None) -> None:
        while c is not None and c in p.stage_map and c not in seen:
            seen[c] = d = sched.of(c)
            comp = d.compute()
            c = comp.consumer if comp.kind == Kind.COMPUTE_AT else None

    for d in ats:
        chain(d.consumer)
    todo = [c for c in p.consumers(stage) if c in p.stage_map]
    while todo:
        c = todo.pop()
        if sched.of(c).compute().kind == Kind.COMPUTE_INLINE:
            if c not in seen:
                seen[c] = sched.of(c)
                todo.extend(x for x in p.consumers(c) if x in p.stage_map)
        else:
            seen.pop(c, None)  # a reader: its whole chain (re-entered in walk order)
            chain(c)
    return (stage, ss, tuple(seen.items()))


def check_shapes(stage: str, ss: StageSchedule) -> None:
    """Every directive of one stage in its place (before anything reads a consumer's list):
    each is a Directive (well formed by construction), none of the update's a placement."""
    for update, directives in ((False, ss.pure), (True, ss.update)):
        for k, d in enumerate(directives):
            try:
                check_in_definition(d, update)
            except L.LoopError as exc:
                raise ScheduleError(stage, str(exc), d if isinstance(d, Directive) else {"kind": repr(d)}, k, update) from None


def validate_stage(p: Pipeline, sched: Schedule, stage: str) -> None:
    """`validate` for one stage's directives: enough after changing only that stage of a
    schedule that validated (a rule-based search places ~150 stages one by one)."""
    s, ss = p.stage(stage), sched.of(stage)
    definition_loops(p, sched, s.name, False)
    if ss.update and not s.is_reduction:
        raise ScheduleError(s.name, "has no update definition (it is not a reduction)", ss.update[0], 0, True)
    if s.is_reduction:
        definition_loops(p, sched, s.name, True)
    inlined = ss.compute().kind == Kind.COMPUTE_INLINE
    for k, d in enumerate(ss.pure):
        if d.kind in PLACEMENT_KINDS:
            _check_location(p, sched, s.name, d, k)
        elif inlined:
            raise ScheduleError(s.name, "the stage is inlined, so it has no loops to schedule: remove this or compute it somewhere", d, k)
        elif d.kind in STORAGE_KINDS:
            _check_storage(p, s.name, ss, d, k)


def _axes_of(st: Stage, d: Directive) -> tuple[int, ...] | None:
    names = tuple(L.need(d.loops))
    return storage_axes(st.dims, names) if sorted(names) == sorted(x.name for x in st.dims) else None


def _check_storage(p: Pipeline, stage: str, ss: StageSchedule, d: Directive, k: int) -> None:
    """A storage directive of stage `stage` (not inlined): an output's buffer is the caller's
    (its layout and memory are not the schedule's to choose); reorder_storage names each of
    the stage's dims once; a packed input is a weight the stage reads, packed once per stage
    (a last partial block padded with zeros: `halide_backend.pack_array`)."""
    st = p.stage(stage)

    def fail(msg: str) -> None:
        raise ScheduleError(stage, msg, d, k)

    declared = declared_layout(p, stage)
    relaid_as_declared = d.kind == Kind.REORDER_STORAGE and declared is not None and _axes_of(st, d) == declared
    if d.kind in (Kind.REORDER_STORAGE, Kind.STORE_IN) and stage in p.outputs and not relaid_as_declared:
        fail("an output's buffer is given by the caller, laid out as the pipeline declares: its storage can't be changed")
    if d.kind == Kind.STORE_IN and d.memory == "register" and ss.compute().kind != Kind.COMPUTE_AT:
        # Halide keeps a buffer in registers only when it is small and of constant size: a
        # block computed at a loop of its consumer, not a whole stage at root.
        fail("a buffer in registers is a small block: compute the stage at a loop of its consumer")
    if d.kind == Kind.REORDER_STORAGE:
        names, dims = list(L.need(d.loops)), [x.name for x in st.dims]
        if sorted(names) != sorted(dims):
            fail(f"reorder_storage names each of the stage's dims once ({', '.join(dims)}), innermost first")
    elif d.kind == Kind.PACK_INPUT:
        name, dim = L.need(d.input), L.need(d.dim)
        inp = next((i for i in p.inputs if i.name == name), None)
        if inp is None or name not in st.sources():
            fail(f"{name!r} is not an input that {stage} reads")
        assert inp is not None
        if not inp.weight:
            # Packing happens when the inputs are bound, outside the timed run: only for
            # weights, which stay the same from run to run (data would be packed untimed).
            fail(f"{name!r} is data, not a weight: only a model's weights are packed (once, when they are bound)")
        if dim >= len(inp.shape):
            fail(f"{name!r} has shape {inp.shape}: it has no dimension {dim} to pack")
        if sum(1 for x in ss.pure if x.kind == Kind.PACK_INPUT and x.input == name) > 1:
            fail(f"{name!r} is packed twice for {stage}: one layout per input and stage")


def packed_inputs(sched: Schedule) -> dict[tuple[str, str], tuple[int, int]]:
    """(stage, input) -> (dim, block) of every pack_input of the schedule."""
    return {
        (stage, L.need(d.input)): (L.need(d.dim), L.need(d.factor))
        for stage, ss in sched.stages.items() for d in ss.pure if d.kind == Kind.PACK_INPUT
    }  # fmt: skip


def _check_enclosed(p: Pipeline, sched: Schedule, stage: str) -> None:
    """A stage computed or stored inside a loop must have every stage that reads it inside
    that loop too (Halide rejects it otherwise, later and less clearly)."""
    ss = sched.of(stage)
    for d in (ss.compute(), ss.store()):  # the last of each kind is the one in force
        if d is None or d.kind not in (Kind.COMPUTE_AT, Kind.STORE_AT):
            continue
        consumer, loop = L.need(d.consumer), L.need(d.loop)
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
        if d.kind != Kind.COMPUTE_AT:
            break
        consumer, loop = L.need(d.consumer), L.need(d.loop)
    return out


def _check_store_race(p: Pipeline, sched: Schedule, stage: str) -> None:
    """Storage outside a parallel or vectorized loop that the computation is inside would be
    shared by the loop's iterations: a race, which Halide refuses when compiling."""
    ss = sched.of(stage)
    compute, store = ss.compute(), ss.store()
    if store is None or compute.kind != Kind.COMPUTE_AT:
        return
    chain = enclosing_loops(p, sched, L.need(compute.consumer), L.need(compute.loop))
    start = 0
    if store.kind == Kind.STORE_AT:
        at = [k for k, (st, lp) in enumerate(chain) if st == store.consumer and lp.name == store.loop]
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


def _read_by_init(p: Pipeline, sched: Schedule, consumer: str, source: str) -> bool:
    """Whether reduction `consumer`'s initial value reads `source`, directly or through inlined stages."""
    todo, seen = [p.stage(consumer).value], set()
    while todo:
        for a in E.accesses(todo.pop()):
            if a.source == source:
                return True
            if a.source in p.stage_map and a.source not in seen and sched.of(a.source).compute().kind == Kind.COMPUTE_INLINE:
                seen.add(a.source)
                todo.extend(p.stage(a.source).exprs())
    return False


def init_loop_problem(p: Pipeline, sched: Schedule, consumer: str, source: str, loop: str) -> str | None:
    """Why `source` (a stage or a wrapper's source) cannot be computed at `consumer`.`loop`
    when reduction `consumer`'s initial value reads it: the loop must be one its pure
    definition has too (a loop of the update alone runs after the initial value was made;
    Halide refuses it only when compiling). None when it can."""
    if not p.stage(consumer).is_reduction or not _read_by_init(p, sched, consumer, source):
        return None
    pure = [lp.name for lp in definition_loops(p, sched, consumer, False)]
    if loop in pure:
        return None
    both = f"a loop of both definitions of {consumer!r} (its pure loops: {', '.join(pure)})"
    return f"the initial value of {consumer!r} reads {source!r}, so it must be computed at {both}"


def _check_location(p: Pipeline, sched: Schedule, stage: str, d: Directive, k: int) -> None:
    def fail(msg: str) -> None:
        raise ScheduleError(stage, msg, d, k)

    kind = d.kind
    if stage in p.outputs and kind in (Kind.COMPUTE_INLINE, Kind.COMPUTE_AT):
        fail("an output is always computed at root")
    if kind == Kind.COMPUTE_INLINE and p.stage(stage).is_reduction:
        fail("a reduction cannot be inlined (it has an update definition)")
    if kind in (Kind.COMPUTE_AT, Kind.STORE_AT):
        consumer = L.need(d.consumer)
        if consumer not in p.stage_map:
            fail(f"no such stage {consumer!r}")
        if consumer not in p.downstream(stage):
            fail(f"{consumer!r} does not consume {stage!r} (consumers: {', '.join(sorted(p.downstream(stage))) or 'none'})")
        if sched.of(consumer).compute().kind == Kind.COMPUTE_INLINE:
            fail(f"{consumer!r} is inlined, so it has no loops to compute at")
        names = [lp.name for lp in final_loops(p, sched, consumer)]
        if d.loop not in names:
            fail(f"{consumer!r} has no loop {d.loop!r} (its loops: {', '.join(names)})")
        msg = init_loop_problem(p, sched, consumer, stage, L.need(d.loop))
        if msg:
            fail(msg)

    compute = sched.of(stage).compute()
    if kind in STORE_KINDS and compute.kind == Kind.COMPUTE_INLINE:
        fail("an inlined stage has no storage to place")
    if kind == Kind.STORE_AT:
        at, loop = L.need(d.consumer), L.need(d.loop)
        if not (
            compute.kind == Kind.COMPUTE_AT
            and (
                (compute.consumer == at and _loop_at_or_inside(p, sched, at, L.need(compute.loop), loop))
                or _computed_inside(p, sched, L.need(compute.consumer), at, loop)
            )
        ):
            fail(f"its storage must enclose where it is computed: compute it at {at}.{loop} or inside it")


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
                if d.kind == Kind.PACK_INPUT:  # not a schedule call: how the algorithm reads the input
                    body.append(f"{'#' if py else '//'} {_pack_comment(p, s.name, d)}")
                    continue
                target = d.loop or d.x or d.inner
                rvar = any(lp.rvar for lp in loops if lp.name == target)
                calls.append(_call_source(d, new_vars, rvar, py))
                loops = L.apply(loops, d)
            if calls:
                body.append(head + "".join(f".{c}" for c in calls) + ("" if py else ";"))
    for _, w in sorted(sched.wrappers.items()):
        body += _wrapper_source(p, w, new_vars, py)
    for v, is_r in sorted(new_vars.items()):
        if py:
            lines.append(f'{v} = hl.{"RVar" if is_r else "Var"}("{v}")')
        else:
            lines.append(f'{"RVar" if is_r else "Var"} {v}("{v}");')
    return "\n".join(lines + body) + "\n"


def _wrapper_source(p: Pipeline, w: Wrapper, new_vars: dict[str, bool], py: bool) -> list[str]:
    """`Func B_in_prod = B.in(prod);` and its scheduling calls. The wrapper's own loops are
    its Func's args (Halide's `_0, _1` for an input's), written as `B_in_prod.args()[n]`
    (innermost first) so that they never clash with the algorithm's Vars of the same name."""
    dims = [d.name for d in wrapper_dims(p, w)]
    mine: dict[str, bool] = {}
    raw = [(d, _call_source(d, mine, False, py)) for d in w.pure]
    # Its own new loops get its name as a prefix: a stage's update may already have declared
    # the same name (a `ko` split of the copy's k beside prod's RVar `ko`).
    rename = {n: f"{w.name}.args()[{len(dims) - 1 - k}]" for k, n in enumerate(dims)}
    rename.update({v: f"{w.name}_{v}" for v in mine if v not in rename})
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, rename)) + r")\b")
    out = [f"{w.name} = {w.source}.in_({w.consumer})" if py else f"Func {w.name} = {w.source}.in({w.consumer});"]
    calls = [call if d.kind in PLACEMENT_KINDS else pattern.sub(lambda m: rename[m.group(1)], call) for d, call in raw]
    if not any(d.kind in COMPUTE_KINDS for d in w.pure):
        calls.insert(0, "compute_root()")  # the engine's default placement (Halide's is inline: no copy)
    for v in mine:
        if v not in dims:
            new_vars.setdefault(f"{w.name}_{v}", False)
    out.append(w.name + "".join(f".{c}" for c in calls) + ("" if py else ";"))
    return out


def _call_source(d: Directive, new_vars: dict[str, bool], rvar: bool, py: bool) -> str:
    kind, tail = d.kind, d.tail
    tail_arg = f", {'hl.TailStrategy.' if py else 'TailStrategy::'}{_camel(tail)}" if tail and tail != "auto" else ""
    if kind in (Kind.COMPUTE_AT, Kind.STORE_AT):
        return f"{kind}({d.consumer}, {d.loop})"
    if kind in (Kind.COMPUTE_INLINE, Kind.COMPUTE_ROOT, Kind.STORE_ROOT):
        return f"{kind}()"
    if kind == Kind.REORDER_STORAGE:
        return f"reorder_storage({', '.join(L.need(d.loops))})"
    if kind == Kind.STORE_IN:
        return f"store_in({'hl.MemoryType.' if py else 'MemoryType::'}{_camel(L.need(d.memory))})"

    if kind == Kind.SPLIT:
        for v in (L.need(d.outer), L.need(d.inner)):
            new_vars.setdefault(v, rvar)
        return f"split({d.loop}, {d.outer}, {d.inner}, {d.factor}{tail_arg})"
    if kind == Kind.TILE:
        for v in (L.need(d.xo), L.need(d.yo), L.need(d.xi), L.need(d.yi)):
            new_vars.setdefault(v, rvar)
        return f"tile({d.x}, {d.y}, {d.xo}, {d.yo}, {d.xi}, {d.yi}, {d.xf}, {d.yf}{tail_arg})"
    if kind == Kind.REORDER:
        names = ", ".join(L.need(d.loops))
        return f"reorder({names})"  # Python too: the bindings take the loops as arguments, not a list
    if kind == Kind.FUSE:
        new_vars.setdefault(L.need(d.fused), rvar)
        return f"fuse({d.inner}, {d.outer}, {d.fused})"
    loop = L.need(d.loop)
    if d.factor:
        mk = L.MARKED[kind]
        inner = L.split_name(loop, mk)
        new_vars.setdefault(inner, rvar)
        marked = loop if kind == Kind.PARALLEL else inner
        return f"split({loop}, {loop}, {inner}, {d.factor}{tail_arg}).{kind}({marked})"
    return f"{kind}({loop})"


def _pack_comment(p: Pipeline, stage: str, d: Directive) -> str:
    """What a pack_input means, in the source's terms: the stage reads the input through a
    buffer packed once when the weights are bound (blocks of the dimension innermost)."""
    name, dim, f = L.need(d.input), L.need(d.dim), L.need(d.factor)
    rank = len(p.shape_of(name))
    idx = [f"i{k}" for k in range(rank)]
    args = [f"i{dim} % {f}", *reversed(idx[dim + 1 :]), f"i{dim} / {f}", *reversed(idx[:dim])]
    n = p.shape_of(name)[dim]
    pad = f" (i{dim} padded with zeros from {n} to {-(-n // f) * f})" if n % f else ""
    return f"{stage} reads {name}(i0..i{rank - 1}) as {name}_packed({', '.join(args)}){pad}, packed once when the weights are bound"


def _camel(s: str) -> str:
    return "".join(w.capitalize() for w in s.split("_"))
