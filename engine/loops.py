"""The loops of one stage definition after its loop directives (split, tile, reorder, ...).

This is the single place that knows how Halide's loop directives transform a loop list;
schedule validation, the loop-nest model and the Halide lowering all go through it, so
the three always agree on which loops exist and what they are called.
"""

from __future__ import annotations

import gc
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .ir import Pipeline, Stage

if TYPE_CHECKING:  # schedule.py imports this module; a Directive is only read here
    from .schedule import Directive

T = TypeVar("T")

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
TAILS = ("auto", "guard_with_if", "shift_inwards", "round_up")
# Halide indexes with 32-bit integers and the engine compiles its runtime checks out, so a
# factor, or a loop nest whose rounded-up iteration space, past these overflows silently
# (writes past the heap). Unrolled and vectorized loops are bounded so that the compiler
# itself stays within sane code sizes (`unroll x 100000` crashed LLVM).
INT32_MAX = 2**31 - 1
MAX_VECTOR = 256  # lanes of one vectorized loop
MAX_UNROLL = 512  # copies of one unrolled loop
MAX_UNROLLED_BODY = 1 << 16  # copies of the innermost body over all unrolled / vectorized loops of a definition


class LoopError(ValueError):
    """A directive that cannot apply to the current loops; the caller adds stage context."""


def need(v: T | None) -> T:
    """An argument that a directive's kind requires (a Directive checks those when it is
    made, so None here means its kind does not take this argument)."""
    if v is None:
        raise LoopError("a directive lacks an argument its kind requires")
    return v


# Part and Loop are values (hashed, compared, shared between cached loop lists) that no code
# assigns to. They are not `frozen`: a frozen dataclass's constructor sets each field through
# object.__setattr__, 5x the cost of a slots class's (~1.0 against ~0.2 us for a Loop), and
# validation and the loop nest make tens of them per schedule (15% of a fresh harris
# prediction, profiled). `unsafe_hash` gives them the frozen classes' field hash.
@dataclass(slots=True, unsafe_hash=True)
class Part:
    """A loop's contribution to one original dimension: `dim += stride * loop_var`."""

    dim: str
    stride: int
    extent: int


@dataclass(slots=True, unsafe_hash=True)
class Loop:
    name: str
    extent: int
    kind: str = "serial"
    parts: tuple[Part, ...] = ()
    rvar: bool = False  # derived from a reduction variable
    # Its extent is a compile-time constant for Halide (a reduction loop, a split's inner
    # loop, what is split or fused from those); a root stage's own dims are not: their
    # bounds come from the output buffers at run time.
    fixed: bool = False


def initial_loops(stage: Stage, update: bool, extents: dict[str, int] | None = None) -> list[Loop]:
    """Loops outer -> inner before any directive: pure dims, then (for the update) the
    reduction variables innermost, as Halide orders them."""
    ext = extents or {}
    loops = [Loop(d.name, ext.get(d.name, d.extent), parts=(Part(d.name, 1, ext.get(d.name, d.extent)),)) for d in stage.dims]
    if update:
        loops += [Loop(r.name, r.extent, parts=(Part(r.name, 1, r.extent),), rvar=True, fixed=True) for r in stage.rdom]
    return loops


def _find(loops: list[Loop], name: Any) -> int:
    if not isinstance(name, str):
        raise LoopError(f"loop name must be a string, got {name!r}")
    for k, lp in enumerate(loops):
        if lp.name == name:
            return k
    raise LoopError(f"no loop {name!r} (loops are {[lp.name for lp in loops]})")


def check_factor(v: Any, what: str = "factor") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise LoopError(f"{what} must be an integer, got {v!r}")
    if v <= 0:
        raise LoopError(f"{what} must be positive, got {v}")
    if v > INT32_MAX:
        raise LoopError(f"{what} {v} exceeds Halide's 32-bit loop bounds (at most {INT32_MAX})")
    return v


_LIMITS = {"vectorized": MAX_VECTOR, "unrolled": MAX_UNROLL}


def check_bounds(loops: list[Loop]) -> None:
    """The limits a definition's loops must respect after every directive (see INT32_MAX).
    One pass over the loops (this runs after every directive of every definition validated),
    the errors raised in the order of the checks: the realized region, the reduction
    domain, the first loop past its kind's limit, the copies of the body."""
    pure = red = body = 1
    over: Loop | None = None
    for lp in loops:
        if lp.rvar:
            red *= lp.extent
        else:
            pure *= lp.extent
        limit = _LIMITS.get(lp.kind)
        if limit is not None and over is None:
            if lp.extent > limit:
                over = lp
            else:
                body *= lp.extent
    for total, what in ((pure, "realized region"), (red, "reduction domain")):
        if total > INT32_MAX:
            raise LoopError(
                f"the splits round the {what} up to {total} points, past Halide's 32-bit indices ({INT32_MAX}): use smaller factors"
            )
    if over is not None:
        raise LoopError(f"{over.kind} loop {over.name!r} has {over.extent} iterations; at most {_LIMITS[over.kind]} are allowed")
    if body > MAX_UNROLLED_BODY:
        raise LoopError(f"unrolled and vectorized loops together copy the body {body} times; at most {MAX_UNROLLED_BODY} are allowed")


def _new_name(loops: list[Loop], name: Any, replacing: str | None = None) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise LoopError(f"new loop name must be an identifier, got {name!r}")
    if any(lp.name == name and lp.name != replacing for lp in loops):
        raise LoopError(f"loop name {name!r} is already used")
    return name


def split(loops: list[Loop], loop: str, outer: str, inner: str, factor: int) -> list[Loop]:
    k = _find(loops, loop)
    f = check_factor(factor)
    old = loops[k]
    if old.kind != "serial":
        raise LoopError(f"cannot split {loop!r}: it is already {old.kind}")
    outer = _new_name(loops, outer, replacing=loop)
    inner = _new_name(loops, inner, replacing=loop)
    if outer == inner:
        raise LoopError(f"split needs two different names, got {outer!r} twice")
    outer_parts = tuple(Part(p.dim, p.stride * f, p.extent) for p in old.parts)
    o = Loop(outer, max(1, math.ceil(old.extent / f)), "serial", outer_parts, old.rvar, old.fixed)
    i = Loop(inner, f, "serial", tuple(Part(p.dim, p.stride, p.extent) for p in old.parts), old.rvar, True)
    return loops[:k] + [o, i] + loops[k + 1 :]


def reorder(loops: list[Loop], names: Any) -> list[Loop]:
    """Halide order: `names` lists loops innermost first; unlisted loops keep their slots."""
    if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names):
        raise LoopError(f"reorder needs a list of at least two loop names, got {names!r}")
    if len(set(names)) != len(names):
        raise LoopError(f"reorder lists a loop twice: {names}")
    idx = sorted(_find(loops, n) for n in names)
    out = list(loops)
    for slot, name in zip(idx, reversed(names)):
        out[slot] = loops[_find(loops, name)]
    return out


def fuse(loops: list[Loop], inner: str, outer: str, fused: str) -> list[Loop]:
    ki, ko = _find(loops, inner), _find(loops, outer)
    if ko != ki - 1:
        raise LoopError(f"fuse needs {outer!r} directly outside {inner!r}")
    li, lo = loops[ki], loops[ko]
    if li.rvar != lo.rvar:
        raise LoopError("cannot fuse a reduction loop with a pure loop")
    name = _new_name([lp for lp in loops if lp.name not in (inner, outer)], fused)
    f = Loop(name, li.extent * lo.extent, "serial", li.parts + lo.parts, li.rvar, li.fixed and lo.fixed)
    return loops[:ko] + [f] + loops[ki + 1 :]


def mark(loops: list[Loop], loop: str, kind: str) -> list[Loop]:
    k = _find(loops, loop)
    if loops[k].rvar and kind in ("parallel", "vectorized"):
        raise LoopError(f"{kind} on reduction loop {loop!r} would race (reduction loops must stay serial or unrolled)")
    if loops[k].kind != "serial" and loops[k].kind != kind:
        raise LoopError(f"loop {loop!r} is already {loops[k].kind}")
    lp = loops[k]  # not dataclasses.replace: 3x the cost of the constructor, and marks are frequent
    return loops[:k] + [Loop(lp.name, lp.extent, kind, lp.parts, lp.rvar, lp.fixed)] + loops[k + 1 :]


SUFFIX = {"vectorized": "v", "parallel": "p", "unrolled": "u"}
MARKED = {"vectorize": "vectorized", "parallel": "parallel", "unroll": "unrolled"}  # marker directive -> loop kind


def split_name(loop: str, kind: str) -> str:
    """Name of the inner loop created by `vectorize/parallel/unroll(loop, factor)`."""
    return f"{loop}_{SUFFIX[kind]}"


def apply(loops: list[Loop], d: Directive) -> list[Loop]:
    """Apply one loop directive; compute/store directives are no-ops here."""
    out = _apply(loops, d)
    check_bounds(out)
    return out


def _apply(loops: list[Loop], d: Directive) -> list[Loop]:
    kind = d.kind
    if kind == "split":
        return split(loops, need(d.loop), need(d.outer), need(d.inner), need(d.factor))
    if kind == "tile":
        xf, yf = check_factor(d.xf, "xf"), check_factor(d.yf, "yf")
        xi, yi, xo, yo = need(d.xi), need(d.yi), need(d.xo), need(d.yo)
        out = split(loops, need(d.x), xo, xi, xf)
        out = split(out, need(d.y), yo, yi, yf)
        return reorder(out, [xi, yi, xo, yo])
    if kind == "reorder":
        return reorder(loops, list(need(d.loops)))
    if kind == "fuse":
        return fuse(loops, need(d.inner), need(d.outer), need(d.fused))
    if kind in MARKED:
        mk, loop = MARKED[kind], need(d.loop)
        if d.factor is not None:
            _find(loops, loop)
            inner = split_name(loop, mk)
            out = split(loops, loop, loop, inner, d.factor)
            # parallel(x, task): the outer part runs in parallel; the others mark the inner part
            return mark(out, loop if mk == "parallel" else inner, mk)
        return mark(loops, loop, mk)
    return loops


# --- per-pipeline caches ------------------------------------------------------------------------------
# The caches that schedule validation, the loop-nest model, the features and the models keep per
# pipeline live here, in the lowest module that derives anything from a pipeline, so that
# one `clear_caches` empties them all.
K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A dict of at most `maxsize` entries that drops the least recently used one first."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._d: OrderedDict[K, V] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: K) -> V | None:
        v = self._d.get(key)
        if v is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            self._d.move_to_end(key)
        except KeyError:  # dropped by another thread in between: still a valid answer
            pass
        return v

    def put(self, key: K, value: V) -> V:
        self._d[key] = value
        while len(self._d) > self.maxsize:
            try:
                self._d.popitem(last=False)
            except KeyError:
                break
        return value

    def __len__(self) -> int:
        return len(self._d)

    def keys(self) -> list[K]:
        """The entries' keys, least recently used first."""
        return list(self._d)

    def values(self) -> list[V]:
        """The entries' values, least recently used first."""
        return list(self._d.values())


_CACHES = "_derived_caches"


def pipeline_cache(p: Pipeline, name: str, make: Callable[[], T]) -> T:
    """The cache `name` of pipeline `p`, made by `make()` on first use. It is kept on the
    pipeline object (a pipeline never changes after construction), so it lives and dies
    with it; each cache caps its own size."""
    store = p.__dict__.setdefault(_CACHES, {})
    c = store.get(name)
    if c is None:
        c = store.setdefault(name, make())
    return c


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector held off while a batch of predictions runs: they allocate
    many short-lived objects and no cycles, and each collection of the oldest generation
    walks every object the caches hold (a third of a round's time, measured). It runs again
    on the next allocation after; left as it was when it was off already."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def clear_caches(p: Pipeline) -> None:
    """Forget everything cached for `p` (validation, the loop-nest model, the features, the models)."""
    p.__dict__.pop(_CACHES, None)


def cache_stats(p: Pipeline) -> dict[str, dict[str, int]]:
    """Per cache of `p` (validation, loop nest, features, models): entries, hits and misses so far."""
    out: dict[str, dict[str, int]] = {}
    for owner, c in p.__dict__.get(_CACHES, {}).items():
        for name, v in vars(c).items():
            if isinstance(v, LRU):
                out[f"{owner}.{name}"] = {"entries": len(v), "hits": v.hits, "misses": v.misses}
    return out
