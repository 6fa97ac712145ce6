"""The loop-nest model: a schedule applied to a pipeline, without Halide.

It answers, for every stage: where it is computed and stored, the loops of each of its
definitions (names, extents, kinds), the region computed per realization, how many
realizations run, and the region of each producer needed per consumer iteration. It
renders as pseudo-code. The GUI, the features and the teaching views all read this model.
"""

from __future__ import annotations

import heapq
import itertools
import math
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, cast

from . import expr as E
from . import loops as L
from .ir import Pipeline, Stage
from .loops import LRU as LRU  # the per-pipeline caches, defined with the loops (validation uses them too)
from .loops import cache_stats as cache_stats
from .loops import clear_caches as clear_caches
from .loops import gc_paused as gc_paused
from .loops import pipeline_cache as pipeline_cache
from .schedule import Kind, Schedule, ScheduleError, StageSchedule, definition_loops, near_changes, validate

KIND_PREFIX = {"serial": "for", "parallel": "parallel for", "vectorized": "vectorized for", "unrolled": "unrolled for"}


@dataclass
class Placement:
    """Where and how much of one stage is computed."""

    stage: str
    compute: str  # "inline", "root" or "at"
    at: tuple[str, str] | None = None  # (consumer, loop) for compute_at
    store: tuple[str, str] | None = None  # (consumer, loop) for store_at; None = with compute
    region: tuple[int, ...] = ()  # extent per dim computed per realization
    realizations: int = 1
    allocation: tuple[int, ...] = ()  # extent per dim of the buffer
    loops: list[L.Loop] = field(default_factory=list)  # final definition's loops
    pure_loops: list[L.Loop] = field(default_factory=list)
    inlined_into: list[str] = field(default_factory=list)

    @property
    def points_per_realization(self) -> int:
        return math.prod(self.region) if self.region else 0

    @property
    def points_total(self) -> int:
        return self.points_per_realization * self.realizations


@dataclass
class Node:
    """A pseudo-code tree node: a loop, a produce block, or a definition body."""

    kind: str  # "produce", "loop" or "compute"
    stage: str
    label: str
    children: list[Node] = field(default_factory=list)


@dataclass
class LoopNest:
    pipeline: Pipeline
    schedule: Schedule
    placements: dict[str, Placement]
    context: _Nest = field(repr=False, compare=False)

    @cached_property
    def computed_at(self) -> dict[tuple[str, str], list[str]]:
        """(consumer, loop) -> the producers computed at that loop, in topological order."""
        out: dict[tuple[str, str], list[str]] = {}
        for n in _topo(self.pipeline):
            if self.placements[n].compute == "at":
                out.setdefault(self.placements[n].at, []).append(n)  # type: ignore[arg-type]
        return out

    @cached_property
    def roots(self) -> list[Node]:
        """The pseudo-code tree (built on first use: features and predictions never read it)."""
        return [_produce(self, n) for n in _topo(self.pipeline) if self.placements[n].compute == "root"]

    def render(self) -> str:
        return self.render_with_spans()[0]

    def render_with_spans(self) -> tuple[str, dict[str, tuple[int, int]]]:
        """Pseudo-code text and, per stage, its [first, last] line (0-based) for highlighting."""
        lines: list[str] = []
        spans: dict[str, tuple[int, int]] = {}

        def emit(n: Node, depth: int) -> None:
            start = len(lines)
            lines.append("  " * depth + n.label)
            for c in n.children:
                emit(c, depth + 1)
            if n.kind == "produce":
                spans[n.stage] = (start, len(lines) - 1)

        for r in self.roots:
            emit(r, 0)
        inl = [s for s, pl in self.placements.items() if pl.compute == "inline"]
        if inl:
            lines.append("")
            for s in inl:
                spans[s] = (len(lines), len(lines))
                lines.append(f"# {s} is inlined into {', '.join(self.placements[s].inlined_into) or 'its consumers'}")
        return "\n".join(lines) + "\n", spans

    def required_region(self, producer: str, consumer: str, per: str = "iteration") -> tuple[int, ...]:
        """Extent per dim of `producer` read by `consumer` (through inlined stages) per
        iteration of the consumer's innermost loop, or per realization of the consumer."""
        last = len(self.placements[consumer].loops) - 1
        return self.context.region_needed(producer, consumer, last if per == "iteration" else -1)

    def region_at(self, producer: str, consumer: str, loop: str | None) -> tuple[int, ...]:
        """`required_region` per iteration of the consumer's (final definition's) loop `loop`;
        None: per realization of the consumer."""
        idx = -1 if loop is None else self.context.loop_index[consumer][loop]
        return self.context.region_needed(producer, consumer, idx)

    def access_box(self, stage: str, source: str, ranges: Mapping[str, tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        """Box of `source` (inclusive bounds per axis, clipped to its shape) read by `stage`
        with inlined stages substituted, each of `stage`'s variables (dims, then reduction
        variables) in its range (a missing one: its whole axis); () when it reads none."""
        r = tuple(ranges.get(v) for v in self.context.c.vars[stage])
        return self.context.box(stage, source, r, self.pipeline.shape_of(source))

    def effective(self, e: E.Expr) -> E.Expr:
        """`e` with this schedule's inlined stages substituted (a new tree: for display; the
        quantities below are computed without building it)."""
        return substitute_inlined(self.pipeline, lambda name: name in self.context.inlined, e)

    def effective_sources(self, stage: str) -> list[str]:
        """Inputs and non-inlined stages that `stage` reads once inlined stages are substituted,
        in the order of first use."""
        ctx = self.context
        key = (stage, ctx.closure[stage])  # all they depend on (features and the analytic terms both ask)
        hit = ctx.c.sources.get(key)
        if hit is None:
            seq = _dedupe(t for ex in self.pipeline.stage(stage).exprs() for t in ctx.lin(ex).seq)
            hit = ctx.c.sources.put(key, tuple(name for kind, name in seq if kind == "s"))
        return list(hit)

    def effective_flops(self, e: E.Expr) -> int:
        """`E.flops` of `e` (an expression of one of the pipeline's stages) with the inlined
        stages substituted."""
        return self.context.lin(e).flops

    def effective_access_counts(self, e: E.Expr, keep: str | None = None) -> dict[str, int]:
        """Accesses per source in `e` with the inlined stages, except `keep`, substituted."""
        return dict(self.context.lin(e, keep).counts)

    def effective_accesses(self, e: E.Expr) -> dict[tuple[str, tuple[IndexForm, ...]], int]:
        """The accesses of `e` with the inlined stages substituted, counted per (source, the
        form of each of its indices): what `E.accesses` of the substituted tree would list."""
        return dict(self.context.stage_access_forms(e))

    def access_classes(self, stage: str, update: bool) -> dict[tuple[str, tuple[tuple[tuple, frozenset[str]], ...]], int] | None:
        """The accesses of one definition of `stage` with inlined stages substituted, counted per
        (source, per index: its terms ((variable, P, N), ...) and variables), the constants
        left out: what `effective_accesses` lists, with the accesses that differ only by a
        constant offset counted together (composed without listing every access of a chain of
        stencils). None when an index is not of that affine form (then use `effective_accesses`)."""
        ctx = self.context
        if not ctx._simple(stage):
            return None
        return ctx.classes(stage, 1 if update else 0)

    def inline_closure(self, stage: str) -> frozenset[str]:
        """The inlined stages substituted into `stage`'s definitions (those it reads through
        a chain of inlined stages): with the pipeline, they fix its effective expressions."""
        return self.context.closure[stage]

    def stored_inside(self, stage: str) -> list[str]:
        """The stages computed at `stage`'s loops or stored there (their buffers live inside
        its loops), in stage order."""
        return self.context.stored_in().get(stage, [])

    def effective_consumers(self, stage: str) -> list[str]:
        """The non-inlined stages that read `stage`, directly or through inlined stages, in
        stage order."""
        return self.context.effective_consumers(stage)

    def placement_key(self, stage: str) -> Hashable:
        """For a stage not inlined: a key such that two nests of the same pipeline with equal
        keys have the same placement of the stage (its directives, region, realizations,
        allocation and loops, where it is computed and stored, and so the loops of the stages
        it is computed inside). Not the converse: equal placements can get a new key after a
        cache eviction, which only costs a recomputation."""
        return self.context.pid[stage]

    def stage_key(self, stage: str) -> Hashable:
        """A key that is equal for two nests of the same pipeline when everything this model
        says about `stage` is: its placement and loops (with those of the stages it is
        computed inside), the inlined stages substituted into it, the stages computed at its
        loops and the buffers stored there; for an inlined stage, the points of the stages it
        is inlined into. Features cache their rows by it."""
        return self.context.stage_key(stage)


class IndexForm(NamedTuple):
    """One index of an access once inlined stages are substituted: its value when it is a
    constant (else None), its affine form (`E.affine`, frozen: ((var, coefficient), ...),
    constant) or None, and the variables it uses. (A tuple: it keys many memos.)"""

    const: tuple[E.Number] | None
    affine: tuple[tuple[tuple[str, int], ...], int] | None
    variables: frozenset[str]

    def coefficient(self, var: str | None) -> int | None:
        """The coefficient of `var` in the affine form (None when not affine or absent)."""
        if self.affine is None:
            return None
        return dict(self.affine[0]).get(var)  # type: ignore[arg-type]

    def leaf(self) -> E.Leaf:
        return (self.const[0] if self.const else None), (None if self.affine is None else (dict(self.affine[0]), self.affine[1]))


def build(p: Pipeline, sched: Schedule, check: bool = True) -> LoopNest:
    """The loop nest of `sched` on `p`, validated first (raises ScheduleError); `check=False`
    skips validation, for a caller that has just validated the schedule itself."""
    ctx = _Nest(p, sched, check, None)
    return LoopNest(p, sched, ctx.pl, ctx)


def placements(p: Pipeline, sched: Schedule, check: bool = True, only: frozenset[str] | None = None) -> dict[str, Placement]:
    """Every stage's placement (the loop nest without its pseudo-code); `check=False` skips
    validation, for a caller that has just validated the schedule itself. `only`: loops and
    regions for these stages alone (a stage's depend on its consumers' only: pass a set
    closed under consumers), the others get their kind of placement."""
    return _Nest(p, sched, check, only).pl


def _topo(p: Pipeline) -> list[str]:
    return p.stage_order


def substitute_inlined(p: Pipeline, is_inlined: Callable[[str], bool], e: E.Expr) -> E.Expr:
    """`e` with the definitions of inlined stages substituted for their accesses (recursively)."""

    def sub(n: E.Expr) -> E.Expr | None:
        if isinstance(n, E.Access) and n.source in p.stage_map and is_inlined(n.source):
            st = p.stage(n.source)
            return substitute_inlined(p, is_inlined, E.substitute_vars(st.value, {d.name: i for d, i in zip(st.dims, n.index)}))
        return None

    return E.rebuild(e, sub)


# Entries per pipeline. A placement is ~1 KB, a region ~100 B, an expression summary ~1 KB.
PLACEMENT_CACHE = 20_000
RECENT_NESTS = 2  # nests per pipeline a new one may start from (the last built: a search's parent or sibling)
_KINDS = {Kind.COMPUTE_INLINE: "inline", Kind.COMPUTE_ROOT: "root", Kind.COMPUTE_AT: "at"}
REGION_CACHE = 100_000
EXPR_CACHE = 20_000
_NONE = ()  # a cached "nothing" (LRU.get returns None for a miss)


class _Caches:
    """Per pipeline: what the model derives from the pipeline alone, and memos keyed by
    exactly what each value depends on (stage names, directives, inline closures, ranges)."""

    def __init__(self, p: Pipeline) -> None:
        self.placements: LRU[tuple, tuple] = LRU(PLACEMENT_CACHE)  # context -> (id, fields)
        self.hulls: LRU[tuple, tuple] = LRU(REGION_CACHE)  # (stage, source, ranges, closure) -> (lo, hi)
        self.boxes: LRU[tuple, tuple] = LRU(REGION_CACHE)  # (stage, source, ranges, closure) -> clipped box
        self.ranges: LRU[tuple, tuple] = LRU(REGION_CACHE)  # (placement id, loop index) -> its variables' ranges
        self.lin: LRU[tuple, _Lin] = LRU(EXPR_CACHE)  # (expression, closure) -> summary
        self.forms: LRU[tuple, IndexForm] = LRU(EXPR_CACHE)  # (stage, index forms, closure) -> form of its value
        self.accesses: LRU[tuple, dict] = LRU(EXPR_CACHE)  # (expression, index forms, closure) -> access forms
        self.groups: LRU[tuple, tuple] = LRU(EXPR_CACHE)  # (stage, source, closure) -> per-axis index groups
        self.sources: LRU[tuple, tuple[str, ...]] = LRU(EXPR_CACHE)  # (stage, closure) -> effective sources
        self.ids = itertools.count()
        self.names = tuple(s.name for s in p.stages)
        self.pos = {n: k for k, n in enumerate(self.names)}
        self.topo = tuple(p.stage_order)
        self.topo_rank = {n: k for k, n in enumerate(self.topo)}
        self.recent: list[_Nest] = []  # the last nests built whole, newest first
        self.producers = {s.name: tuple(p.producers(s.name)) for s in p.stages}
        self.readers: dict[str, list[str]] = {s.name: [] for s in p.stages}  # who absorbs a stage when it is inlined
        for s in p.stages:
            for prod in self.producers[s.name]:
                if prod in self.readers:
                    self.readers[prod].append(s.name)
        self.consumers = {s.name: tuple(c for c in p.consumers(s.name) if c in p.stage_map) for s in p.stages}
        self.dims = {s.name: tuple(d.name for d in s.dims) for s in p.stages}
        self.vars = {s.name: tuple(d.name for d in s.dims + s.rdom) for s in p.stages}
        self.shape = {i.name: tuple(i.shape) for i in p.inputs} | {s.name: s.shape for s in p.stages}
        self.rdom = {s.name: tuple(r.extent for r in s.rdom) for s in p.stages}
        # Expressions the memos may key by identity: the stages' own (alive with the pipeline).
        self.owner = {id(ex): (s.name, k) for s in p.stages for k, ex in enumerate(s.exprs())}
        self._skeleton: dict[int, tuple[E.Access, ...]] = {}
        self._plan: dict[int, tuple[int, tuple]] = {}
        self._aff: dict[int, _Aff | None] = {}
        self._reach: dict[str, frozenset[str]] = {}
        self._reads: dict[int, frozenset[str]] = {}
        self.fixed_lin: dict[int, _Lin] = {}  # parts of the stages' expressions that read no stage: their `_Lin` never varies
        # Stages whose every index is an `_Aff` (no clamp, select, division or data-dependent index).
        self.simple = {s.name: all(self.aff(ix) is not None for a in _all_accesses(s) for ix in a.index) for s in p.stages}

    def aff(self, e: E.Expr) -> _Aff | None:
        """`_aff(e)` for a part of a stage's expression (memoized by identity)."""
        k = id(e)
        if k not in self._aff:
            self._aff[k] = _aff(e)
        return self._aff[k]

    def skeleton(self, e: E.Expr) -> tuple[E.Access, ...]:
        """The accesses of `e` that are not inside another access, in walk order (`e` is a
        part of a stage's expression, alive with the pipeline)."""
        k = id(e)
        out = self._skeleton.get(k)
        if out is None:
            found: list[E.Access] = []
            stack = [e]
            while stack:
                n = stack.pop()
                if isinstance(n, E.Access):
                    found.append(n)
                else:
                    stack.extend(reversed(E.children(n)))
            out = self._skeleton[k] = tuple(found)
        return out

    def plan(self, e: E.Expr) -> tuple[int, tuple]:
        """(own FLOPs of `e`'s nodes outside any access, the leaves outside any access in walk
        order: a variable's name, an access node; constants add nothing) of `e`, a part of a
        stage's expression that is neither a constant, a variable nor an access (memoized by identity)."""
        k = id(e)
        out = self._plan.get(k)
        if out is None:
            flops = 0
            leaves: list[str | E.Access] = []
            stack = [e]
            while stack:
                n = stack.pop()
                if isinstance(n, E.Var):
                    leaves.append(n.name)
                elif isinstance(n, E.Access):
                    leaves.append(n)
                elif not isinstance(n, E.Const):
                    flops += E.own_flops(n)
                    stack.extend(reversed(E.children(n)))
            out = self._plan[k] = (flops, tuple(leaves))
        return out

    def reach(self, p: Pipeline, source: str) -> frozenset[str]:
        """`source` and everything computed from it: the stages whose inlining can change how a
        stage reads `source`."""
        r = self._reach.get(source)
        if r is None:
            r = self._reach[source] = p.downstream(source) | {source}
        return r

    def reads(self, e: E.Expr) -> frozenset[str]:
        """The stages accessed anywhere in `e`, a part of a stage's expression (memoized by identity)."""
        k = id(e)
        r = self._reads.get(k)
        if r is None:
            ch = E.children(e)
            r = frozenset().union(*map(self.reads, ch)) if ch else _EMPTY
            if isinstance(e, E.Access) and e.source in self.pos:
                r = r | {e.source}
            self._reads[k] = r
        return r

    def new_id(self) -> int:
        return next(self.ids)

    def parent_of(self, ss: tuple[StageSchedule, ...]) -> tuple[_Nest, list[str]] | None:
        """A recent nest whose schedule differs from `ss` (stage schedules in stage order) in
        at most a quarter of the stages, and those stages; None when there is none."""
        for q in self.recent:
            changed = near_changes(ss, q.ss)
            if changed is not None:
                return q, [self.names[k] for k in changed]
        return None

    def remember(self, nest: _Nest) -> None:
        self.recent = [nest, *self.recent[: RECENT_NESTS - 1]]


@dataclass(slots=True)  # not frozen (never assigned to): a frozen constructor costs 5x, and walks make many
class _Lin:
    """What an expression with inlined stages substituted adds up to, composed stage by
    stage instead of built: FLOPs, occurrences of each variable outside any access (where
    a substituted index's own FLOPs count) and anywhere, accesses per source, and sources
    ("s", name) and variables ("v", name) in the order a walk of the tree first meets them."""

    flops: int
    free: dict[str, int]
    occ: dict[str, int]
    counts: dict[str, int]
    seq: tuple[tuple[str, str], ...]


_ZERO = _Lin(0, {}, {}, {}, ())


def _all_accesses(s: Stage) -> list[E.Access]:
    return [a for ex in s.exprs() for a in E.accesses(ex)]


def _dedupe(items: Iterable[Hashable]) -> tuple:
    return tuple(dict.fromkeys(items))


def _addmul(dst: dict, src: dict, m: int) -> None:
    if m:
        for k, v in src.items():
            dst[k] = dst.get(k, 0) + v * m


def _absorb(free: dict, occ: dict, counts: dict, seq: list, k: _Lin) -> int:
    """Add a child's summary `k` into a parent's dicts and sequence; its FLOPs to add."""
    _addmul(free, k.free, 1)
    _addmul(occ, k.occ, 1)
    _addmul(counts, k.counts, 1)
    seq.extend(k.seq)
    return k.flops


class _Aff(NamedTuple):
    """An index made of variables, integer constants, + and -, and products with an integer
    constant. `E.bounds` of such a tree is exactly (c + sum(P*lo - N*hi), c + sum(P*hi - N*lo))
    over its variables, where P and N add up the positive and the negative multiples with
    which each variable occurs, so it composes through inlined stages (substituting an
    index for a variable) without building the tree, and `E.affine` of it is ({v: P - N}, c)."""

    kind: str  # "const" (a constant node), "var" (a bare variable) or "tree"
    c: int
    terms: tuple[tuple[str, int, int], ...]  # (variable, P, N), sorted, P + N > 0
    variables: frozenset[str]  # every variable it uses (a zero multiple too: its range still counts)


def _lincomb(c: int, parts: Iterable[tuple[_Aff, int, int]], variables: frozenset[str]) -> _Aff:
    """c + the parts, each (index, multiple of its P, multiple of its N) added to P (and
    symmetrically to N: a negative multiple swaps a variable's lowest and highest)."""
    acc: dict[str, tuple[int, int]] = {}
    for r, sp, sn in parts:
        for v, pp, nn in r.terms:
            p0, n0 = acc.get(v, (0, 0))
            acc[v] = (p0 + sp * pp + sn * nn, n0 + sp * nn + sn * pp)
    return _Aff("tree", c, tuple(sorted((v, pp, nn) for v, (pp, nn) in acc.items() if pp or nn)), variables)


def _aff(e: E.Expr) -> _Aff | None:
    """The `_Aff` of index `e`, or None when it is not of that form."""
    if isinstance(e, E.Const):
        return _Aff("const", e.value, (), frozenset()) if type(e.value) is int else None
    if isinstance(e, E.Var):
        return _Aff("var", 0, ((e.name, 1, 0),), frozenset((e.name,)))
    if isinstance(e, E.BinOp) and e.op in ("+", "-", "*"):
        a, b = _aff(e.a), _aff(e.b)
        if a is None or b is None:
            return None
        if e.op == "+":
            return _lincomb(a.c + b.c, ((a, 1, 0), (b, 1, 0)), a.variables | b.variables)
        if e.op == "-":
            return _lincomb(a.c - b.c, ((a, 1, 0), (b, 0, 1)), a.variables | b.variables)
        for k, o in ((e.a, b), (e.b, a)):  # a product needs a constant factor, as in E.affine
            if isinstance(k, E.Const):
                f = int(k.value)  # an int: _aff of a float constant is None
                return _lincomb(f * o.c, ((o, f, 0) if f >= 0 else (o, 0, -f),), a.variables | b.variables)
    return None


def _compose(t: _Aff, env: dict[str, _Aff]) -> _Aff:
    """`t` with `env`'s indices substituted for its variables (a group of one)."""
    if t.kind == "var":
        return env[t.terms[0][0]]
    if t.kind == "const":
        return t
    terms, vs, c, _ = _compose_group((t.terms, t.variables, t.c, t.c), env)
    return _Aff("tree", c, terms, vs)


def _compose_group(g: tuple, env: dict[str, _Aff]) -> tuple:
    """A group of `_groups` (terms, variables, least and greatest constant) with `env`'s
    indices substituted for its variables: `_compose` of each member, whose constants all
    shift by the same amount."""
    terms, vs, lo, hi = g
    subs = [env[v] for v in vs]
    if all(r.kind == "var" for r in subs):  # a renaming (a pointwise or stencil read): no shift, multiples kept
        acc: dict[str, tuple[int, int]] = {}
        for v, pp, nn in terms:
            u = env[v].terms[0][0]
            p0, n0 = acc.get(u, (0, 0))
            acc[u] = (p0 + pp, n0 + nn)
        return tuple(sorted((u, pp, nn) for u, (pp, nn) in acc.items())), frozenset(r.terms[0][0] for r in subs), lo, hi
    shift = sum((pp - nn) * env[v].c for v, pp, nn in terms)
    t = _lincomb(0, ((env[v], pp, nn) for v, pp, nn in terms), frozenset().union(*(env[v].variables for v in vs)))
    return t.terms, t.variables, lo + shift, hi + shift


_EMPTY: frozenset[str] = frozenset()


def _closure_of(producers: Iterable[str], inlined: frozenset[str], closure: Callable[[str], frozenset[str]]) -> frozenset[str]:
    """A stage's inline closure from its producers': each inlined producer with its own."""
    parts = [closure(q) | {q} for q in producers if q in inlined]
    return _EMPTY if not parts else parts[0].union(*parts[1:])


def _index_form(r: _Aff) -> IndexForm:
    aff = (tuple((v, pp - nn) for v, pp, nn in r.terms if pp != nn), r.c)
    return IndexForm((r.c,) if r.kind == "const" else None, aff, r.variables)


class _Nest:
    """One schedule applied to one pipeline: placements computed consumers first, each one
    reused from the pipeline's cache when its context (own directives, the consumer it is
    computed in, the inlined stages and stages computed beside it there) was seen before.
    Regions compose interval bounds through inlined stages instead of substituting them."""

    def __init__(self, p: Pipeline, sched: Schedule, check: bool, only: frozenset[str] | None) -> None:
        if check:
            validate(p, sched)
        self.p, self.sched = p, sched
        c = self.c = pipeline_cache(p, "loopnest", lambda: _Caches(p))
        # The stage schedules as built (a Schedule is mutable; these are not): what a later
        # nest compares itself with to start from this one.
        self.ss = tuple(map(sched.of, c.names))
        self.parent: weakref.ref[_Nest] | None = None
        self.dirty: frozenset[str] | None = None  # stages whose stage_key may differ from the parent's
        self.derived: dict[str, object] = {}  # what readers (the models) derive from this nest
        if only is None:
            found = c.parent_of(self.ss)
            if found is not None:
                self._from_parent(*found)
                c.remember(self)
                return
        self._full(only)
        if only is None:
            c.remember(self)

    def _new_placement(self, name: str, ss: StageSchedule) -> Placement:
        comp, st = ss.compute(), ss.store()
        kind = _KINDS[comp.kind]
        return Placement(
            name, kind, (L.need(comp.consumer), L.need(comp.loop)) if kind == "at" else None,
            (L.need(st.consumer), L.need(st.loop)) if st and st.kind == Kind.STORE_AT else None,
        )  # fmt: skip

    def _full(self, only: frozenset[str] | None) -> None:
        p, c = self.p, self.c
        pl: dict[str, Placement] = {}
        self.pl = pl
        self.store_root: set[str] = set()
        for name, ss in zip(c.names, self.ss):
            pl[name] = self._new_placement(name, ss)
            st = ss.store()
            if st is not None and st.kind == Kind.STORE_ROOT:
                self.store_root.add(name)
        # consumer -> stages computed (stored) at its loops, in stage order
        self.at_of: dict[str, list[str]] = {}
        self.stored_at_of: dict[str, list[str]] = {}
        self._index_sites()
        self.inlined = frozenset(n for n, q in pl.items() if q.compute == "inline")
        for s in p.stages:  # who absorbs each inlined stage
            for prod in c.producers[s.name]:
                if prod in self.inlined:
                    pl[prod].inlined_into.append(s.name)
        self.closure = self._closures()
        self.pid: dict[str, int] = {}
        self.loop_index: dict[str, dict[str, int]] = {}
        self._keys: dict[str, Hashable] = {}
        # Regions per consumer: (producer, loop index) -> extents (a consumer's are shared
        # with a nest built from this one while its loops and what is computed there stay).
        self._regions: dict[str, dict[tuple[str, int], tuple[int, ...]]] = {}
        self._simple_memo: dict[str, bool] = {}  # features, the analytic model and edges ask the same
        self._stored: dict[str, list[str]] | None = None
        # Consumers before producers: a compute_at region depends on the consumer's loops.
        for name in reversed(_topo(p)):
            if (only is not None and name not in only) or pl[name].compute == "inline":
                continue
            self._place(name)

    def _closures(self) -> dict[str, frozenset[str]]:
        closure: dict[str, frozenset[str]] = {}
        producers = self.c.producers
        for name in _topo(self.p):  # producers first
            closure[name] = _closure_of(producers[name], self.inlined, closure.__getitem__)
        return closure

    def _from_parent(self, q: _Nest, changed: list[str]) -> None:
        """This nest from `q`'s, the nest of a schedule that differs in the stages `changed`:
        only what those changes can reach is recomputed, the rest is `q`'s (equal to a full
        build: tested over random mutation chains)."""
        c = self.c
        pl = dict(q.pl)
        self.pl = pl
        cset = set(changed)
        touched: set[str] = set()  # consumers whose stages computed or stored at them may differ
        toggled: list[str] = []  # stages inlined in one schedule and not in the other
        sites_changed = False
        for name in changed:
            old, new = q.pl[name], self._new_placement(name, self.ss[c.pos[name]])
            pl[name] = new
            if (old.compute == "inline") != (new.compute == "inline"):
                toggled.append(name)
            for x in (old, new):
                if x.compute == "at":
                    sites_changed = True
                    touched.add(x.at[0])  # type: ignore[index]
                if x.store is not None:
                    sites_changed = True
                    touched.add(x.store[0])
        if sites_changed:
            self._index_sites()
        else:
            self.at_of, self.stored_at_of = q.at_of, q.stored_at_of
        self.store_root = {n for n in q.store_root if n not in cset}
        for name in changed:
            st = self.ss[c.pos[name]].store()
            if st is not None and st.kind == Kind.STORE_ROOT:
                self.store_root.add(name)
        clos_changed: set[str] = set()
        if toggled:
            self.inlined = frozenset(n for n, x in pl.items() if x.compute == "inline")
            self.closure, clos_changed = self._closures_from(q, toggled)
            touched |= clos_changed
            touched |= {pl[d].at[0] for d in clos_changed if pl[d].compute == "at"}  # type: ignore[index]
            self._simple_memo = {k: v for k, v in q._simple_memo.items() if k not in clos_changed}
        else:
            self.inlined, self.closure, self._simple_memo = q.inlined, q.closure, q._simple_memo
        for name in changed:  # who absorbs it, as the full build finds it
            if pl[name].compute == "inline":
                pl[name].inlined_into = list(c.readers[name])
        self.pid = dict(q.pid)
        self.loop_index = dict(q.loop_index)
        for name in changed:
            if pl[name].compute == "inline":
                self.pid.pop(name, None)
                self.loop_index.pop(name, None)
        # Regions stay valid for consumers whose loops and surroundings did not change (those
        # placed again are dropped as they are).
        self._regions = dict(q._regions)  # copied whole and the few dropped: a copy is much cheaper than a filter
        for k in (*touched, *cset):
            self._regions.pop(k, None)
        # Placed again, consumers first: the changed stages, and those computed or stored at a
        # consumer that was placed differently or whose surroundings changed.
        redo: set[str] = set()
        rank = c.topo_rank
        heap = [-rank[n] for n in cset if pl[n].compute != "inline"]
        queued = set(heap)

        def push(cons: str) -> None:
            for d in (*self.at_of.get(cons, ()), *self.stored_at_of.get(cons, ())):
                r = -rank[d]
                if r not in queued:
                    queued.add(r)
                    heapq.heappush(heap, r)

        heapq.heapify(heap)
        for t in touched:
            push(t)
        order = c.topo
        while heap:
            name = order[-heapq.heappop(heap)]
            if name not in cset:
                x = pl[name]
                pl[name] = Placement(x.stage, x.compute, x.at, x.store, inlined_into=list(x.inlined_into))
            self._regions.pop(name, None)
            self._place(name)
            redo.add(name)
            if self.pid[name] != q.pid.get(name):
                push(name)
        # Stage keys stay valid for stages whose placement, closure and what sits at them did not change.
        stale = redo | touched | cset
        for r in redo:
            for x in (pl[r], q.pl[r]):
                site = x.store or x.at
                if site is not None:
                    stale.add(site[0])
        # An inlined stage's key reads the stages it is inlined into (their points and closures).
        either = self.inlined | q.inlined
        todo = [j for r in (*redo, *clos_changed, *toggled) for j in c.producers[r] if j in either]
        seen: set[str] = set()
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo.extend(k for k in c.producers[j] if k in either)
        stale |= seen
        self._keys = dict(q._keys)
        for k in stale:
            self._keys.pop(k, None)
        self._stored = None if sites_changed else q._stored
        self.parent = weakref.ref(q)
        self.dirty = frozenset(stale)

    def _index_sites(self) -> None:
        """`at_of` and `stored_at_of` from the placements."""
        self.at_of, self.stored_at_of = {}, {}
        for name, x in self.pl.items():
            if x.compute == "at":
                self.at_of.setdefault(x.at[0], []).append(name)  # type: ignore[index]
            if x.store is not None:
                self.stored_at_of.setdefault(x.store[0], []).append(name)

    def _closures_from(self, q: _Nest, toggled: list[str]) -> tuple[dict[str, frozenset[str]], set[str]]:
        """The inline closures, from `q`'s after the stages `toggled` changed between inlined
        and not: only their consumers' change, and through inlined ones theirs, in topological
        order; and the stages whose closure changed."""
        c, inl = self.c, self.inlined
        closure = dict(q.closure)
        rank, order = c.topo_rank, c.topo
        heap = sorted({rank[x] for t in toggled for x in c.consumers[t]})
        queued = set(heap)
        changed: set[str] = set()
        while heap:
            name = order[heapq.heappop(heap)]
            new = _closure_of(c.producers[name], inl, closure.__getitem__)
            if new == closure[name]:
                continue
            closure[name] = new
            changed.add(name)
            for x in c.consumers[name]:  # a closure reaches the consumers of an inlined stage only
                if name in inl and rank[x] not in queued:
                    queued.add(rank[x])
                    heapq.heappush(heap, rank[x])
        return closure, changed

    def _siblings(self, name: str, cons: str, idx: int) -> tuple:
        """The stages computed at `cons`'s loops `idx` or inside that read `name` (their needs
        join its region there), with what their needs depend on."""
        down = self.p.downstream(name)
        li = self.loop_index[cons]
        return tuple(
            (d, self.pl[d].at[1], self.closure[d])  # type: ignore[index]
            for d in self.at_of.get(cons, ())
            if d in down and li[self.pl[d].at[1]] >= idx  # type: ignore[index]
        )

    def _site_key(self, name: str, site: tuple[str, str]) -> tuple:
        cons, loop = site
        idx = self.loop_index[cons][loop]
        return (self.pid[cons], idx, self.closure[cons], self._siblings(name, cons, idx))

    def _place(self, name: str) -> None:
        p, pl, c = self.p, self.pl, self.c
        place = pl[name]
        s = p.stage(name)
        ss = self.sched.of(name)
        store_root = name in self.store_root
        # The stage's directives are an immutable, hashable value: the key holds them as they are.
        key: tuple = (name, place.compute, ss)
        if place.compute == "at":
            key += self._site_key(name, place.at)  # type: ignore[arg-type]
        if place.store is not None and not store_root:
            key += ("store",) + self._site_key(name, place.store)
        hit = c.placements.get(key)
        if hit is None:
            fields = self._compute_placement(name, store_root)
            hit = c.placements.put(key, (c.new_id(), fields, {lp.name: k for k, lp in enumerate(fields[3])}))
        pid, (region, realizations, allocation, loops, pure_loops), self.loop_index[name] = hit
        self.pid[name] = pid
        place.region, place.realizations, place.allocation = region, realizations, allocation
        place.pure_loops = list(pure_loops)
        place.loops = list(loops) if s.is_reduction else place.pure_loops

    def _compute_placement(self, name: str, store_root: bool) -> tuple:
        p, pl = self.p, self.pl
        place = pl[name]
        s = p.stage(name)
        if place.compute == "root":
            region, realizations = s.shape, 1
        else:
            cons, loop = place.at  # type: ignore[misc]
            idx = self.loop_index[cons][loop]
            region = self.region_needed(name, cons, idx)
            realizations = pl[cons].realizations * math.prod(lp.extent for lp in pl[cons].loops[: idx + 1])
        pure_loops = loops = None
        if region == s.shape:  # the stage's own extents: the loops validation memoized by its directives
            try:
                pure_loops = definition_loops(p, self.sched, name, False)
                loops = definition_loops(p, self.sched, name, True) if s.is_reduction else pure_loops
            except ScheduleError:  # what only the checks at those extents refuse: the loops below
                pure_loops = None
        if pure_loops is None or loops is None:
            ext = {d.name: e for d, e in zip(s.dims, region)}
            pure_loops = definition_loops(p, self.sched, name, False, ext)
            loops = definition_loops(p, self.sched, name, True, ext) if s.is_reduction else pure_loops
        allocation = region
        if store_root:
            allocation = s.shape
        elif place.store is not None:
            cons, loop = place.store
            allocation = self.region_needed(name, cons, self.loop_index[cons][loop])
        return region, realizations, allocation, tuple(loops), tuple(pure_loops)

    # --- regions ------------------------------------------------------------------------
    def region_needed(self, producer: str, consumer: str, loop_idx: int) -> tuple[int, ...]:
        """Extent per dim of `producer` read while `consumer`'s loops inside `loop_idx` run once:
        by the consumer itself (through inlined stages) and by any stage computed at one of
        those loops that reads the producer (whose own need is found the same way)."""
        memo = self._regions.get(consumer)
        if memo is None:
            memo = self._regions[consumer] = {}
        key = (producer, loop_idx)
        out = memo.get(key)
        if out is None:
            out = memo[key] = self._region_needed(producer, consumer, loop_idx)
        return out

    def _region_needed(self, producer: str, consumer: str, loop_idx: int) -> tuple[int, ...]:
        p, pl, c = self.p, self.pl, self.c
        # The consumer's variables' ranges depend on its placement alone (region and loops):
        # shared by its producers and by every nest that placed it alike.
        pid = self.pid.get(consumer)
        rkey = (pid, loop_idx)
        ranges = c.ranges.get(rkey) if pid is not None else None
        if ranges is None:
            ranges = self._ranges(consumer, loop_idx)
            if pid is not None:
                c.ranges.put(rkey, ranges)
        shape = c.shape[producer]
        boxes = [self.box(consumer, producer, ranges, shape)]
        at_here = self.at_of.get(consumer, ())
        if at_here:
            li = self.loop_index[consumer]
            downstream = p.downstream(producer)
            for d in at_here:
                if d not in downstream or li[pl[d].at[1]] < loop_idx:  # type: ignore[index]
                    continue
                ext = self.region_needed(d, consumer, loop_idx)
                r = tuple((0, e - 1) for e in ext) + tuple((0, x - 1) for x in c.rdom[d])
                boxes.append(self.box(d, producer, r, shape))
            boxes = [b for b in boxes if b]
            if len(boxes) > 1:
                return tuple(max(b[k][1] for b in boxes) - min(b[k][0] for b in boxes) + 1 for k in range(len(shape)))
        if not boxes or not boxes[0]:  # read only through stages placed elsewhere: assume all of it
            return shape
        return tuple(b - a + 1 for a, b in boxes[0])

    def _ranges(self, consumer: str, loop_idx: int) -> tuple[tuple[int, int], ...]:
        """(0, highest) per variable of `consumer` (dims, then reduction variables) while its
        loops inside `loop_idx` run once (-1: all of one realization)."""
        c = self.c
        cpl = self.pl[consumer]
        names = c.vars[consumer]
        full = (*(cpl.region or c.shape[consumer]), *c.rdom[consumer])  # per variable, as `names`
        span = dict.fromkeys(names, 1)
        for lp in cpl.loops[loop_idx + 1 :]:
            for part in lp.parts:
                span[part.dim] += (lp.extent - 1) * part.stride
        return tuple((0, (x if x < f else f) - 1) for x, f in zip(map(span.__getitem__, names), full))

    def box(self, stage: str, source: str, ranges: tuple, shape: tuple[int, ...]) -> tuple:
        """`ir.access_box` of `stage` with inlined stages substituted, `ranges` per loop
        variable (dims, then reduction variables). Memoized by all it depends on (a consumer
        placed anew often reads its sources over the ranges of an earlier placement): for a
        `_simple` stage, the inlined stages that can reach `source` (as its `_groups`), else
        the whole inline closure."""
        clos = self.closure[stage]
        simple = self._simple(stage)
        if simple and clos:
            clos = clos & self.c.reach(self.p, source)
        key = (stage, source, ranges, clos, simple)
        hit = self.c.boxes.get(key)
        if hit is not None:
            return hit
        h = self._hull(stage, source, ranges, shape)
        if not h:
            return self.c.boxes.put(key, _NONE)
        lo, hi = h
        out = tuple((int(a) if a > 0 else 0, int(b) if b < n - 1 else n - 1) for a, b, n in zip(lo, hi, shape) if a != math.inf)
        return self.c.boxes.put(key, out)

    def _hull(self, stage: str, source: str, ranges: tuple, shape: tuple[int, ...]) -> tuple:
        """(lowest, highest) index per axis over every access to `source` in `stage`'s
        substituted definitions, unclipped; () when there is none. Memoized by the ranges:
        the stencils of a chain of inlined stages meet the same shifted ranges many times."""
        if self._simple(stage) and all(r is None or (type(r[0]) is int and type(r[1]) is int) for r in ranges):
            return self._affine_hull(stage, source, ranges, shape)
        key = (stage, source, ranges, self.closure[stage])
        hit = self.c.hulls.get(key)
        if hit is not None:
            return hit
        lo = [math.inf] * len(shape)
        hi = [-math.inf] * len(shape)
        env = dict(zip(self.c.vars[stage], ranges))
        s = self.p.stage(stage)
        for ex in (s.value,) if stage in self.inlined else s.exprs():  # an inlined stage's value is what is substituted
            self._collect(ex, env, source, lo, hi, shape)
        return self.c.hulls.put(key, (tuple(lo), tuple(hi)) if lo and lo[0] != math.inf else _NONE)

    def _simple(self, stage: str) -> bool:
        """Are `stage`'s indices, and those of every inlined stage substituted into it, `_Aff`s?"""
        s = self._simple_memo.get(stage)
        if s is None:
            simple = self.c.simple
            s = self._simple_memo[stage] = simple[stage] and all(simple[j] for j in self.closure[stage])
        return s

    def _composed(self, stage: str, k: int) -> dict[tuple[str, tuple[_Aff, ...]], int]:
        """The accesses of `stage`'s k-th expression (0: value, 1: update) with inlined stages
        substituted, counted per (source, composed indices); `stage` is `_simple`."""
        key = ("composed", stage, k, self.closure[stage])
        hit = self.c.accesses.get(key)
        if hit is not None:
            return hit
        out: dict[tuple[str, tuple[_Aff, ...]], int] = {}
        for a in self.c.skeleton(self.p.stage(stage).exprs()[k]):
            reps = cast(tuple[_Aff, ...], tuple(self.c.aff(ix) for ix in a.index))  # a _simple stage's are all _Aff
            if a.source in self.inlined:
                env = dict(zip(self.c.dims[a.source], reps))
                for (src, idx), n in self._composed(a.source, 0).items():
                    key2 = (src, tuple(_compose(r, env) for r in idx))
                    out[key2] = out.get(key2, 0) + n
            else:
                out[(a.source, reps)] = out.get((a.source, reps), 0) + 1
        return self.c.accesses.put(key, out)

    def classes(self, stage: str, k: int) -> dict:
        """`LoopNest.access_classes` of `stage`'s k-th expression (0: value, 1: update); `stage` is `_simple`."""
        key = ("classes", stage, k, self.closure[stage])
        hit = self.c.accesses.get(key)
        if hit is not None:
            return hit
        out: dict = {}
        for a in self.c.skeleton(self.p.stage(stage).exprs()[k]):
            reps = cast(tuple[_Aff, ...], tuple(self.c.aff(ix) for ix in a.index))
            if a.source in self.inlined:
                env = dict(zip(self.c.dims[a.source], reps))
                for (src, axes), n in self.classes(a.source, 0).items():
                    key2 = (src, tuple(_compose_group((terms, vs, 0, 0), env)[:2] for terms, vs in axes))
                    out[key2] = out.get(key2, 0) + n
            else:
                key2 = (a.source, tuple((r.terms, r.variables) for r in reps))
                out[key2] = out.get(key2, 0) + 1
        return self.c.accesses.put(key, out)

    def _groups(self, stage: str, source: str) -> tuple:
        """Per axis of `source`: its composed indices in `stage`, grouped by their terms and
        variables (the constant alone differs: keep the least and the greatest). Composed
        group by group: substituting an index into a group shifts its constants alike, so an
        inlined reader's groups come from its source's without listing every access of the
        chain (a chain of stencils multiplies them). Keyed by the inlined stages that read
        `source`, and `source` itself when inlined, alone: the others add no access to it."""
        clos = self.closure[stage]
        if clos:
            clos = clos & self.c.reach(self.p, source)
        key = (stage, source, clos)
        hit = self.c.groups.get(key)
        if hit is not None:
            return hit
        s = self.p.stage(stage)
        axes: list[dict] | None = None
        for ex in (s.value,) if stage in self.inlined else s.exprs():
            for a in self.c.skeleton(ex):
                reps = cast(tuple[_Aff, ...], tuple(self.c.aff(ix) for ix in a.index))  # a _simple stage's are all _Aff
                if a.source in self.inlined:
                    env = dict(zip(self.c.dims[a.source], reps))
                    parts = [[_compose_group(g, env) for g in ax] for ax in self._groups(a.source, source)]
                elif a.source == source:
                    parts = [[(r.terms, r.variables, r.c, r.c)] for r in reps]
                else:
                    continue
                if not parts:
                    continue
                if axes is None:
                    axes = [{} for _ in parts]
                for ax, groups in zip(axes, parts):
                    for terms, vs, lo, hi in groups:
                        g = (terms, vs)
                        old = ax.get(g)
                        ax[g] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
        out = tuple(tuple((terms, vs, lo, hi) for (terms, vs), (lo, hi) in ax.items()) for ax in axes or ())
        return self.c.groups.put(key, out)

    def _affine_hull(self, stage: str, source: str, ranges: tuple, shape: tuple[int, ...]) -> tuple:
        """`_hull` of a `_simple` stage: the bounds of each composed index, evaluated in closed form."""
        groups = self._groups(stage, source)
        if not groups:
            return _NONE
        names = self.c.vars[stage]
        env = dict(zip(names, ranges))
        partial = None in ranges or len(ranges) < len(names)  # a variable without a range: its axes are whole
        lo, hi = [], []
        for ax, n in zip(groups, shape):
            a, b = math.inf, -math.inf
            for terms, vs, cmin, cmax in ax:
                if partial and any(env.get(v) is None for v in vs):  # data-dependent: the whole axis
                    x, y = 0, n - 1
                else:
                    x, y = cmin, cmax
                    for v, pp, nn in terms:
                        r0, r1 = env[v]
                        x += pp * r0 - nn * r1
                        y += pp * r1 - nn * r0
                if x < a:
                    a = x
                if y > b:
                    b = y
            lo.append(a)
            hi.append(b)
        return (tuple(lo), tuple(hi))

    def _collect(self, e: E.Expr, env: dict, source: str, lo: list, hi: list, shape: tuple[int, ...]) -> None:
        for a in self.c.skeleton(e):
            src = a.source
            if src in self.inlined:
                rj = tuple(self.bounds(ix, env) for ix in a.index)
                h = self._hull(src, source, rj, shape)
                if h:
                    for k, (x, y) in enumerate(zip(*h)):
                        if x < lo[k]:
                            lo[k] = x
                        if y > hi[k]:
                            hi[k] = y
                # An index reaches the substituted tree only where its variable survives.
                occ = self.lin_stage(src).occ
                for d, ix in zip(self.c.dims[src], a.index):
                    if occ.get(d) and self.c.skeleton(ix):
                        self._collect(ix, env, source, lo, hi, shape)
                continue
            if src == source:
                for k, ix in enumerate(a.index):
                    b = self.bounds(ix, env)
                    if b is None:  # data-dependent index: the whole axis
                        b = (0, shape[k] - 1)
                    if b[0] < lo[k]:
                        lo[k] = b[0]
                    if b[1] > hi[k]:
                        hi[k] = b[1]
            for ix in a.index:
                if self.c.skeleton(ix):
                    self._collect(ix, env, source, lo, hi, shape)

    def bounds(self, e: E.Expr, env: Mapping) -> E.Interval | None:
        """`E.bounds` of `e` with inlined stages substituted."""
        return E.bounds(e, env, self._access_bounds)

    def _access_bounds(self, a: E.Access, env: Mapping) -> E.Interval | None:
        if a.source not in self.inlined:
            return None
        inner = {d: self.bounds(ix, env) for d, ix in zip(self.c.dims[a.source], a.index)}
        return self.bounds(self.p.stage(a.source).value, inner)

    # --- effective expressions, composed -------------------------------------------------
    def _owner(self, e: E.Expr) -> tuple[str, int] | None:
        """(stage, index in its exprs()) when `e` is a stage's own expression (memos may key
        by it), else None."""
        owner = self.c.owner.get(id(e))
        if owner is None or self.p.stage(owner[0]).exprs()[owner[1]] is not e:
            return None
        return owner

    def lin(self, e: E.Expr, keep: str | None = None) -> _Lin:
        """`_Lin` of `e` with the inlined stages (except `keep`) substituted."""
        inl, clos = self.inlined, self.closure.__getitem__
        if keep is not None and keep in inl:
            inl = inl - {keep}
            memo: dict[str, frozenset[str]] = {}

            def clos(name: str) -> frozenset[str]:
                if name not in memo:
                    memo[name] = _closure_of(self.c.producers[name], inl, clos)
                return memo[name]

        owner = self._owner(e)
        if owner is None:
            return self._lin(e, inl, clos)
        key = ("expr", owner, clos(owner[0]))
        hit = self.c.lin.get(key)
        return hit if hit is not None else self.c.lin.put(key, self._lin(e, inl, clos, True))

    def lin_stage(self, name: str, inl: frozenset[str] | None = None, clos: Callable[[str], frozenset[str]] | None = None) -> _Lin:
        """`_Lin` of inlined stage `name`'s value (in its own dims)."""
        inl = self.inlined if inl is None else inl
        clos = self.closure.__getitem__ if clos is None else clos
        key = ("stage", name, clos(name))
        hit = self.c.lin.get(key)
        if hit is None:
            hit = self.c.lin.put(key, self._lin(self.p.stage(name).value, inl, clos, True))
        return hit

    def _lin(self, e: E.Expr, inl: frozenset[str], clos: Callable[[str], frozenset[str]], owned: bool = False) -> _Lin:
        """`owned`: `e` is a part of a stage's expression (alive with the pipeline), so that a
        part reading no inlined stage, whose summary is the same whatever is inlined, is
        summarized once (by identity) instead of once per inline closure, and the rest is
        summarized over its leaves (`_Caches.plan`) instead of node by node."""
        if isinstance(e, E.Const):
            return _ZERO
        if isinstance(e, E.Var):
            return _Lin(0, {e.name: 1}, {e.name: 1}, {}, (("v", e.name),))
        if owned:
            c = self.c
            if c.reads(e).isdisjoint(inl):
                ident = id(e)
                hit = c.fixed_lin.get(ident)
                if hit is None:
                    hit = c.fixed_lin[ident] = self._lin_owned(e, inl, clos)
                return hit
            return self._lin_owned(e, inl, clos)
        if isinstance(e, E.Access):
            return self._lin_access(e, inl, clos, False)
        kids = [self._lin(ch, inl, clos) for ch in E.children(e)]
        if len(kids) == 1:
            k = kids[0]
            return _Lin(E.own_flops(e) + k.flops, k.free, k.occ, k.counts, k.seq)
        flops = E.own_flops(e)
        free: dict[str, int] = {}
        occ: dict[str, int] = {}
        counts: dict[str, int] = {}
        seq: list[tuple[str, str]] = []
        for k in kids:
            flops += _absorb(free, occ, counts, seq, k)
        return _Lin(flops, free, occ, counts, _dedupe(seq))

    def _lin_owned(self, e: E.Expr, inl: frozenset[str], clos: Callable[[str], frozenset[str]]) -> _Lin:
        """`_lin` of a part of a stage's expression (not a constant or variable) from its
        leaves: what the node-by-node walk adds up, in the same order (so the same dicts and
        sequence), without a summary per inner node."""
        if isinstance(e, E.Access):
            return self._lin_access(e, inl, clos, True)
        flops, leaves = self.c.plan(e)
        free: dict[str, int] = {}
        occ: dict[str, int] = {}
        counts: dict[str, int] = {}
        seq: list[tuple[str, str]] = []
        for leaf in leaves:
            if type(leaf) is str:  # a variable outside any access
                free[leaf] = free.get(leaf, 0) + 1
                occ[leaf] = occ.get(leaf, 0) + 1
                seq.append(("v", leaf))
                continue
            flops += _absorb(free, occ, counts, seq, self._lin(leaf, inl, clos, True))
        return _Lin(flops, free, occ, counts, _dedupe(seq))

    def _lin_access(self, e: E.Access, inl: frozenset[str], clos: Callable[[str], frozenset[str]], owned: bool) -> _Lin:
        kids = [self._lin(ix, inl, clos, owned) for ix in e.index]
        if e.source in inl:
            j = self.lin_stage(e.source, inl, clos)
            flops, counts = j.flops, dict(j.counts)
            free: dict[str, int] = {}
            occ: dict[str, int] = {}
            subs: dict[tuple[str, str], tuple] = {}
            for d, k in zip(self.c.dims[e.source], kids):
                nf, no = j.free.get(d, 0), j.occ.get(d, 0)
                flops += nf * k.flops
                _addmul(free, k.free, nf)
                _addmul(occ, k.occ, no)
                _addmul(counts, k.counts, no)
                subs[("v", d)] = k.seq
            return _Lin(flops, free, occ, counts, _dedupe(x for t in j.seq for x in subs.get(t, (t,))))
        occ, counts = {}, {e.source: 1}
        seq: list[tuple[str, str]] = [("s", e.source)]
        for k in kids:
            _addmul(occ, k.occ, 1)
            _addmul(counts, k.counts, 1)
            seq.extend(k.seq)
        return _Lin(0, {}, occ, counts, _dedupe(seq))

    def index_form(self, e: E.Expr, env: dict[str, IndexForm] | None) -> IndexForm:
        """The `IndexForm` of index `e` with inlined stages substituted; `env` gives the forms
        that stand for the variables (None: the variables stand for themselves)."""

        def leaf(n: E.Expr) -> E.Leaf:
            if isinstance(n, E.Var):
                return (None, ({n.name: 1}, 0)) if env is None else env[n.name].leaf()
            if n.source in self.inlined:  # type: ignore[attr-defined]
                return self._stage_form(n, env).leaf()  # type: ignore[arg-type]
            return None, None

        aff = E.affine(e, leaf)
        frozen = None if aff is None else (tuple(sorted(aff[0].items())), aff[1])
        const: tuple[E.Number] | None = None
        if isinstance(e, E.Const):
            const = (e.value,)
        elif isinstance(e, E.Var) and env is not None:
            const = env[e.name].const
        elif isinstance(e, E.Access) and e.source in self.inlined:
            const = self._stage_form(e, env).const
        return IndexForm(const, frozen, self._variables(e, env))

    def _variables(self, e: E.Expr, env: dict[str, IndexForm] | None) -> frozenset[str]:
        if isinstance(e, E.Var):
            return frozenset((e.name,)) if env is None else env[e.name].variables
        if isinstance(e, E.Access) and e.source in self.inlined:
            return self._stage_form(e, env).variables
        ch = E.children(e)
        if not ch:
            return frozenset()
        return frozenset().union(*(self._variables(x, env) for x in ch))

    def _stage_form(self, a: E.Access, env: dict[str, IndexForm] | None) -> IndexForm:
        """The form of inlined `a.source`'s value read at `a`'s indices."""
        forms = tuple(self.index_form(ix, env) for ix in a.index)
        key = (a.source, forms, self.closure[a.source])
        hit = self.c.forms.get(key)
        if hit is None:
            hit = self.c.forms.put(key, self.index_form(self.p.stage(a.source).value, dict(zip(self.c.dims[a.source], forms))))
        return hit

    def stage_access_forms(self, e: E.Expr) -> dict[tuple[str, tuple[IndexForm, ...]], int]:
        """`access_forms(e)`, memoized when `e` is one of the stages' own expressions."""
        owner = self._owner(e)
        if owner is None:
            return self.access_forms(e)
        key = ("expr", owner, self.closure[owner[0]])
        hit = self.c.accesses.get(key)
        if hit is not None:
            return hit
        if not self._simple(owner[0]):
            return self.c.accesses.put(key, self.access_forms(e))
        out: dict[tuple[str, tuple[IndexForm, ...]], int] = {}
        for (src, idx), n in self._composed(*owner).items():
            k = (src, tuple(_index_form(r) for r in idx))
            out[k] = out.get(k, 0) + n
        return self.c.accesses.put(key, out)

    def access_forms(self, e: E.Expr, env: dict[str, IndexForm] | None = None) -> dict[tuple[str, tuple[IndexForm, ...]], int]:
        """Accesses of `e` with inlined stages substituted, counted per (source, index forms)."""
        out: dict[tuple[str, tuple[IndexForm, ...]], int] = {}
        for a in self.c.skeleton(e):
            forms = tuple(self.index_form(ix, env) for ix in a.index)
            if a.source in self.inlined:
                key = (a.source, forms, self.closure[a.source])
                inner = self.c.accesses.get(key)
                if inner is None:
                    env_j = dict(zip(self.c.dims[a.source], forms))
                    inner = self.c.accesses.put(key, self.access_forms(self.p.stage(a.source).value, env_j))
                _addmul(out, inner, 1)
                # Accesses inside an index appear once per occurrence of its variable.
                occ = self.lin_stage(a.source).occ
                for d, ix in zip(self.c.dims[a.source], a.index):
                    if occ.get(d) and self.c.skeleton(ix):
                        _addmul(out, self.access_forms(ix, env), occ[d])
                continue
            out[(a.source, forms)] = out.get((a.source, forms), 0) + 1
            for ix in a.index:
                if self.c.skeleton(ix):
                    _addmul(out, self.access_forms(ix, env), 1)
        return out

    # --- keys --------------------------------------------------------------------------
    def stage_key(self, name: str) -> Hashable:
        k = self._keys.get(name)
        if k is None:
            pl = self.pl
            if pl[name].compute == "inline":
                k = ("inline", tuple((c, pl[c].points_total, self.closure[c]) for c in self.effective_consumers(name)))
            else:
                atme = tuple((d, pl[d].at[1], self.closure[d]) for d in self.at_of.get(name, ()))  # type: ignore[index]
                stored = tuple((q, pl[q].allocation) for q in self.stored_in().get(name, ()))
                k = (self.pid[name], self.closure[name], atme, stored)
            self._keys[name] = k
        return k

    def stored_in(self) -> dict[str, list[str]]:
        """Consumer -> the stages computed at its loops or stored there (their buffers live in them)."""
        if self._stored is None:
            self._stored = {}
            for q, qp in self.pl.items():
                if qp.compute == "at":
                    self._stored.setdefault((qp.store or qp.at)[0], []).append(q)  # type: ignore[index]
        return self._stored

    def effective_consumers(self, name: str) -> list[str]:
        """Non-inlined stages that read `name` through inlined stages, in stage order."""
        out: set[str] = set()
        todo = list(self.c.consumers[name])
        while todo:
            x = todo.pop()
            if x in self.inlined:
                todo.extend(self.c.consumers[x])
            else:
                out.add(x)
        return [s for s in self.pl if s in out]


def _produce(nest: LoopNest, name: str) -> Node:
    p, place = nest.pipeline, nest.placements[name]
    s = p.stage(name)
    where = "root" if place.compute == "root" else f"at {place.at[0]}.{place.at[1]}"  # type: ignore[index]
    note = f"# {where}, region {'x'.join(map(str, place.region))}"
    if place.realizations > 1:
        note += f", {place.realizations} realizations"
    if place.store is not None:
        note += f", stored at {place.store[0]}.{place.store[1]} ({'x'.join(map(str, place.allocation))})"
    node = Node("produce", name, f"produce {name}:  {note}")
    args = ", ".join(d.name for d in s.dims)
    node.children.append(_loops_node(nest, name, place.pure_loops, f"{name}({args}) = {E.format_expr(s.value)}"))
    if s.is_reduction:
        op = {"sum": "+=", "max": "max=", "min": "min="}[s.reduce]  # type: ignore[index]
        node.children.append(_loops_node(nest, name, place.loops, f"{name}({args}) {op} {E.format_expr(s.update)}"))  # type: ignore[arg-type]
    return node


def _loops_node(nest: LoopNest, name: str, loops: list[L.Loop], body: str) -> Node:
    """Nest `loops` outer -> inner; producers computed at a loop of this definition go inside it."""
    final = loops is nest.placements[name].loops
    inner: Node = Node("compute", name, body)
    for lp in reversed(loops):
        n = Node("loop", name, f"{KIND_PREFIX[lp.kind]} {lp.name} in [0, {lp.extent}):")
        if final:
            for prod in nest.computed_at.get((name, lp.name), []):
                n.children.append(_produce(nest, prod))
        n.children.append(inner)
        inner = n
    return inner
