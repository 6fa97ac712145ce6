"""The loop-nest model: a schedule applied to a pipeline, without Halide.

It answers, for every stage: where it is computed and stored, the loops of each of its
definitions (names, extents, kinds), the region computed per realization, how many
realizations run, and the region of each producer needed per consumer iteration. It
renders as pseudo-code. The GUI, the features and the teaching views all read this model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from . import expr as E
from . import loops as L
from .ir import Pipeline, access_box
from .schedule import Schedule, definition_loops, validate

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
    roots: list[Node]
    computed_at: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (consumer, loop) -> producers

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
        return _region_needed(self.pipeline, self.placements, producer, consumer, last if per == "iteration" else -1)

    def effective(self, e: E.Expr) -> E.Expr:
        """`e` with this schedule's inlined stages substituted."""
        return _effective(self.pipeline, self.placements, e)

    def effective_sources(self, stage: str) -> list[str]:
        """Inputs and non-inlined stages that `stage` reads once inlined stages are substituted."""
        s = self.pipeline.stage(stage)
        seen: dict[str, None] = {}
        for ex in s.exprs():
            for a in E.accesses(_effective(self.pipeline, self.placements, ex)):
                seen.setdefault(a.source, None)
        return list(seen)


def build(p: Pipeline, sched: Schedule) -> LoopNest:
    pl = placements(p, sched)
    nest = LoopNest(p, sched, pl, [])
    for n in _topo(p):  # producers computed at each (consumer, loop), in order: one pass, not one per loop
        if pl[n].compute == "at":
            nest.computed_at.setdefault(pl[n].at, []).append(n)  # type: ignore[arg-type]
    nest.roots = [_produce(nest, n) for n in _topo(p) if pl[n].compute == "root"]
    return nest


def placements(p: Pipeline, sched: Schedule, check: bool = True, only: frozenset[str] | None = None) -> dict[str, Placement]:
    """Every stage's placement (the loop nest without its pseudo-code); `check=False` skips
    validation, for a caller that has just validated the schedule itself. `only`: loops and
    regions for these stages alone (a stage's depend on its consumers' only: pass a set
    closed under consumers), the others get their kind of placement."""
    if check:
        validate(p, sched)
    pl: dict[str, Placement] = {}
    for s in p.stages:
        c = sched.of(s.name).compute()
        st = sched.of(s.name).store()
        kind = {"compute_inline": "inline", "compute_root": "root", "compute_at": "at"}[c["kind"]]
        pl[s.name] = Placement(
            s.name, kind, (c["consumer"], c["loop"]) if kind == "at" else None,
            (st["consumer"], st["loop"]) if st and st["kind"] == "store_at" else None,
        )  # fmt: skip
    for s in p.stages:  # who absorbs each inlined stage
        for prod in p.producers(s.name):
            if pl[prod].compute == "inline":
                pl[prod].inlined_into.append(s.name)
    # Consumers before producers: a compute_at region depends on the consumer's loops.
    for name in reversed(_topo(p)):
        if only is not None and name not in only:
            continue
        place = pl[name]
        s = p.stage(name)
        if place.compute == "root":
            place.region, place.realizations = s.shape, 1
        elif place.compute == "at":
            cons, loop = place.at  # type: ignore[misc]
            idx = [lp.name for lp in pl[cons].loops].index(loop)
            place.region = _region_needed(p, pl, name, cons, idx)
            place.realizations = pl[cons].realizations * math.prod(lp.extent for lp in pl[cons].loops[: idx + 1])
        else:
            continue
        ext = {d.name: e for d, e in zip(s.dims, place.region)}
        place.pure_loops = definition_loops(p, sched, name, False, ext)
        place.loops = definition_loops(p, sched, name, True, ext) if s.is_reduction else place.pure_loops
        place.allocation = place.region
        if sched.of(name).store() == {"kind": "store_root"}:
            place.allocation = s.shape
        elif place.store is not None:
            cons, loop = place.store
            idx = [lp.name for lp in pl[cons].loops].index(loop)
            place.allocation = _region_needed(p, pl, name, cons, idx)
    return pl


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


def _effective(p: Pipeline, pl: dict[str, Placement], e: E.Expr) -> E.Expr:
    return substitute_inlined(p, lambda name: name in pl and pl[name].compute == "inline", e)


def _region_needed(p: Pipeline, pl: dict[str, Placement], producer: str, consumer: str, loop_idx: int) -> tuple[int, ...]:
    """Extent per dim of `producer` read while `consumer`'s loops inside `loop_idx` run once:
    by the consumer itself (through inlined stages) and by any stage computed at one of
    those loops that reads the producer (whose own need is found the same way)."""
    cs = p.stage(consumer)
    inner = pl[consumer].loops[loop_idx + 1 :]  # loop_idx -1: all of one realization
    full = {d.name: e for d, e in zip(cs.dims, pl[consumer].region or cs.shape)} | {r.name: r.extent for r in cs.rdom}
    span = dict.fromkeys(full, 1)
    for lp in inner:
        for part in lp.parts:
            span[part.dim] += (lp.extent - 1) * part.stride
    shape = p.shape_of(producer)
    boxes = [_box(p, pl, consumer, producer, {k: (0, min(span[k], full[k]) - 1) for k in full}, shape)]
    names = [lp.name for lp in pl[consumer].loops]
    downstream = p.downstream(producer)
    for d, dpl in pl.items():
        if d not in downstream or dpl.compute != "at" or dpl.at[0] != consumer or names.index(dpl.at[1]) < loop_idx:  # type: ignore[index]
            continue
        ds = p.stage(d)
        ext = _region_needed(p, pl, d, consumer, loop_idx)
        ranges = {dim.name: (0, e - 1) for dim, e in zip(ds.dims, ext)} | {r.name: (0, r.extent - 1) for r in ds.rdom}
        boxes.append(_box(p, pl, d, producer, ranges, shape))
    boxes = [b for b in boxes if b]
    if not boxes:  # read only through stages placed elsewhere: assume all of it
        return shape
    return tuple(max(b[k][1] for b in boxes) - min(b[k][0] for b in boxes) + 1 for k in range(len(shape)))


def _box(p: Pipeline, pl: dict[str, Placement], stage: str, source: str, ranges: dict, shape: tuple[int, ...]) -> tuple:
    s = p.stage(stage)
    upd = _effective(p, pl, s.update) if s.update is not None else None
    eff = type(s)(s.name, s.dims, _effective(p, pl, s.value), s.rdom, upd, s.reduce)
    return access_box(eff, source, ranges, shape)


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
