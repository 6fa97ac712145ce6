"""The iteration order of one stage under its schedule, on a small extent.

The stage's loops come from the engine (`schedule.definition_loops`, the same loops the
loop-nest view and the Halide lowering use); how each loop variable maps back to the
stage's dims is rebuilt here from the same directives (split: `outer * factor + inner` with
Halide's tail strategies, fuse: `/` and `%`), and checked against the engine's loops. The
stage is realized over `extent` (a box at the origin of its dims); producers computed at
its loops are realized over the region Halide's bounds inference gives them (the engine's
region code, `LoopNest.access_box`) at each iteration of their compute loop.

Modelled as Halide does it: ShiftInwards / RoundUp / GuardWithIf tails (`auto`: ShiftInwards
for pure definitions, RoundUp for an update's pure vars, GuardWithIf for reduction vars);
vector lanes as one step; the outermost parallel loop's iterations handed to `threads`
workers as each becomes free (Halide's thread pool), the workers advancing one step per
tick; siblings computed at one loop in Halide's realization order; a producer stored outside
the loop it is computed at slides as Halide's SlidingWindow pass does (see `_slide_plan`:
later iterations compute from the previous maximum + 1, warm-up iterations rewind the loop),
its buffer folded along the sliding dimension to the power of two at least the per-iteration
extent (Halide's storage folding). tests/engine/test_teaching_halide.py checks traces store
for store against Halide's own `trace_stores`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from .. import loopnest as LN
from .. import loops as L
from ..ir import BYTES_PER_ELEMENT, Pipeline
from ..schedule import Kind, Schedule, definition_loops

MAX_STEPS = 65536  # steps of the traced stage kept; the rest is cut (Trace.truncated)
MAX_PRODUCER_CELLS = 4 * MAX_STEPS  # producer points kept over the whole trace
DEFAULT_THREADS = 4
DEFAULT_CAP = 16  # default extent of the two innermost dims (outer dims: OUTER_CAP)
OUTER_CAP = 2

Cell = tuple[int, ...]
Box = tuple[tuple[int, int], ...]
# (update, loop counters, cells, producers computed first, (counters outside the parallel loop, its counter) or None)
_RawStep = tuple[bool, tuple[int, ...], tuple[Cell, ...], list["ProducerRegion"], tuple[tuple[int, ...], int] | None]


class TraceError(ValueError):
    """A stage or extent that cannot be traced; the message names the stage and what is wrong."""


@dataclass(frozen=True)
class TraceLoop:
    """One loop of a traced definition, outer to inner."""

    name: str
    extent: int  # at the traced extent
    kind: str  # serial | parallel | vectorized | unrolled
    update: bool  # a loop of the update definition
    line: int | None  # 0-based line of this loop in the loop-nest text (`Trace.text`)


@dataclass(frozen=True)
class ProducerRegion:
    """A producer computed at one iteration of the traced stage's loop `loop`."""

    producer: str
    loop: str  # the traced stage's loop it is computed at
    box: Box  # region required there (inclusive bounds per dim)
    cells: tuple[Cell, ...]  # points computed, in the producer's own loop order
    recomputed: tuple[Cell, ...]  # those of `cells` that were computed before in this trace
    line: int | None  # 0-based line of the producer's `produce` in the loop-nest text
    update_points: int = 0  # a reduction's update definition: points it stores after `cells` (with repeats)


@dataclass(frozen=True)
class Step:
    """One iteration of the traced stage's innermost non-vectorized loop."""

    index: int  # position in `Trace.steps` (the order the animation plays)
    tick: int  # simulated time: steps with the same tick run at once (on different threads)
    cells: tuple[Cell, ...]  # points computed together: one (scalar) or every vector lane
    thread: int  # 0 outside parallel loops
    unrolled: bool  # inside an unrolled loop (a copy of the body, not a loop iteration)
    vectorized: bool
    update: bool  # a step of the update definition (reductions)
    indices: tuple[int, ...]  # counter per loop of the definition (`Trace.loops` of this definition), outer to inner
    loop_line: int | None  # line of the innermost loop running (what to highlight)
    producer_cells: tuple[ProducerRegion, ...] = ()  # producers computed before this step, at its loops


@dataclass(frozen=True)
class Allocation:
    """The buffer of one producer computed at the traced stage's loops (or of the stage itself)."""

    stage: str
    compute_level: str  # "root" or "stage.loop"
    store_level: str  # "root" or "stage.loop" (== compute_level without store_at)
    shape: tuple[int, ...]  # extents allocated (after folding)
    region: tuple[int, ...]  # extents of the region stored per store-level iteration (before folding)
    folded: tuple[int, ...]  # dims folded (storage folding), as indices into shape
    sliding: bool  # sliding window: only new points computed per iteration
    allocations: int  # how many times the buffer is allocated in this trace

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.elements * BYTES_PER_ELEMENT


@dataclass(frozen=True)
class Trace:
    pipeline: str
    stage: str
    extent: tuple[int, ...]  # traced region of the stage, per dim from 0
    steps: tuple[Step, ...]
    loops: tuple[TraceLoop, ...]  # every traced loop (pure definition, then update)
    text: str  # the loop-nest text the lines index (`LoopNest.render()`, what the app shows)
    threads: int  # simulated workers (1 without a parallel loop)
    truncated: bool  # the stage had more than max_steps steps: only the first ones are here
    computed: Mapping[str, int] = field(default_factory=dict)  # producer -> points computed (with repeats)
    recomputed: Mapping[str, int] = field(default_factory=dict)  # producer -> computations of a point already computed
    allocations: Mapping[str, Allocation] = field(default_factory=dict)  # the stage and its producers computed at its loops
    producer_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # full shape of each producer shown

    @property
    def ticks(self) -> int:
        return (self.steps[-1].tick + 1) if self.steps else 0

    def definition_loops(self, update: bool) -> tuple[TraceLoop, ...]:
        return tuple(lp for lp in self.loops if lp.update == update)

    def producer_boxes(self) -> dict[str, tuple[tuple[int, int], ...]]:
        """Per producer computed at the stage's loops, the box its regions touched over the
        whole trace (inclusive bounds per dim), in the order they first appear: what a picture
        of the trace draws for each producer."""
        boxes: dict[str, list[list[int]]] = {}
        for st in self.steps:
            for pr in st.producer_cells:
                box = boxes.setdefault(pr.producer, [[a, b] for a, b in pr.box])
                for dim, (a, b) in zip(box, pr.box, strict=True):
                    dim[0], dim[1] = min(dim[0], a), max(dim[1], b)
        return {q: tuple((a, b) for a, b in box) for q, box in boxes.items()}


# --- index maps: loop variables -> the stage's coordinates -----------------------------------
class _Guarded(Exception):
    """A point skipped by a GuardWithIf tail."""


@dataclass(eq=False)
class _Var:
    """A loop variable as the directives made it: a final loop (defn None), or split / fused."""

    name: str
    extent: int
    rvar: bool
    defn: tuple | None = None

    def value(self, env: Mapping[str, int]) -> int:
        d = self.defn
        if d is None:
            return env[self.name]
        if d[0] == "split":
            _, outer, inner, f, tail = d
            base = outer.value(env) * f
            if tail == "shift_inwards":
                base = min(base, self.extent - f)  # Halide: min(outer*f, old_max + 1 - f)
            v = base + inner.value(env)
            if tail == "guard_with_if" and v >= self.extent:
                raise _Guarded
            return v
        fused, ei = d[1], d[2]
        return fused.value(env) % ei if d[0] == "mod" else fused.value(env) // ei

    def interval(self, env: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        d = self.defn
        if d is None:
            return env[self.name]
        if d[0] == "split":
            _, outer, inner, f, tail = d
            a, b = outer.interval(env)
            lo, hi = a * f, b * f
            if tail == "shift_inwards":
                lo, hi = min(lo, self.extent - f), min(hi, self.extent - f)
            i0, i1 = inner.interval(env)
            lo, hi = lo + i0, hi + i1
            if tail == "guard_with_if":
                hi = min(hi, self.extent - 1)
            return lo, hi
        fused, ei = d[1], d[2]
        a, b = fused.interval(env)
        if d[0] == "div":
            return a // ei, b // ei
        if b - a + 1 >= ei or a // ei != b // ei:
            return 0, ei - 1
        return a % ei, b % ei


def _tail(d_tail: str | None, rvar: bool, update: bool) -> str:
    t = d_tail or "auto"
    if t != "auto":
        return t
    if rvar:
        return "guard_with_if"
    return "round_up" if update else "shift_inwards"


class _IndexMap:
    """The stage's variables (dims, then reduction variables) as functions of its final loops."""

    def __init__(self, p: Pipeline, sched: Schedule, stage: str, update: bool, ext: dict[str, int], loops: list[L.Loop]) -> None:
        s = p.stage(stage)
        init = L.initial_loops(s, update, ext)
        self.roots = {lp.name: _Var(lp.name, lp.extent, lp.rvar) for lp in init}
        self.dims = [d.name for d in s.dims]
        self.rvars = [r.name for r in s.rdom] if update else []
        cur = dict(self.roots)
        self.guarded = False  # some GuardWithIf tail skips points

        def split(loop: str, outer: str, inner: str, f: int, tail: str | None) -> None:
            old = cur.pop(loop)
            o = _Var(outer, max(1, math.ceil(old.extent / f)), old.rvar)
            i = _Var(inner, f, old.rvar)
            old.defn = ("split", o, i, f, _tail(tail, old.rvar, update))
            if old.defn[4] == "guard_with_if" and old.extent % f:
                self.guarded = True
            cur[outer], cur[inner] = o, i

        for d in sched.of(stage).definition(update):
            k = d.kind
            if k == Kind.SPLIT:
                split(L.need(d.loop), L.need(d.outer), L.need(d.inner), L.need(d.factor), d.tail)
            elif k == Kind.TILE:
                split(L.need(d.x), L.need(d.xo), L.need(d.xi), L.need(d.xf), d.tail)
                split(L.need(d.y), L.need(d.yo), L.need(d.yi), L.need(d.yf), d.tail)
            elif k == Kind.FUSE:
                vi, vo = cur.pop(L.need(d.inner)), cur.pop(L.need(d.outer))
                fused = _Var(L.need(d.fused), vi.extent * vo.extent, vi.rvar)
                vi.defn, vo.defn = ("mod", fused, vi.extent), ("div", fused, vi.extent)
                cur[fused.name] = fused
            elif k in L.MARKED and d.factor is not None:
                loop = L.need(d.loop)
                split(loop, loop, L.split_name(loop, L.MARKED[k]), d.factor, d.tail)
        got = {n: v.extent for n, v in cur.items()}
        want = {lp.name: lp.extent for lp in loops}
        if got != want:  # the engine's loops are the truth; this map must describe the same ones
            raise TraceError(f"stage {stage!r}: the index map's loops {got} differ from the loop nest's {want}")

    def point(self, env: Mapping[str, int]) -> tuple[int, ...]:
        """Every variable's value (dims, then reduction variables); raises _Guarded."""
        return tuple(self.roots[n].value(env) for n in self.dims + self.rvars)

    def ranges(self, env: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        return {n: self.roots[n].interval(env) for n in self.dims + self.rvars}


# --- loop-nest text lines -------------------------------------------------------------------
def _lines(nest: LN.LoopNest) -> tuple[str, dict[int, int]]:
    """The loop-nest text and the line of every tree node (by id): one line per node, in the
    pre-order `LoopNest.render` writes them."""
    text = nest.render()
    lines: dict[int, int] = {}

    def walk(n: LN.Node) -> None:
        lines[id(n)] = len(lines)
        for c in n.children:
            walk(c)

    for r in nest.roots:
        walk(r)
    return text, lines


def _produce_nodes(nest: LN.LoopNest) -> dict[str, LN.Node]:
    out: dict[str, LN.Node] = {}
    todo = list(nest.roots)
    while todo:
        n = todo.pop()
        if n.kind == "produce":
            out[n.stage] = n
        todo.extend(n.children)
    return out


def _loop_lines(produce: LN.Node | None, lines: dict[int, int], update: bool) -> dict[str, int]:
    """Loop name -> line for one definition of the stage whose `produce` node is given."""
    if produce is None:
        return {}
    chains = [c for c in produce.children if c.kind in ("loop", "compute")]
    k = 1 if update else 0
    if k >= len(chains):
        return {}
    out: dict[str, int] = {}
    n: LN.Node | None = chains[k]
    while n is not None and n.kind == "loop":
        name = n.label.split(" in [")[0].split()[-1]
        out[name] = lines[id(n)]
        n = next((c for c in n.children if c.stage == produce.stage and c.kind in ("loop", "compute")), None)
    return out


def realization_order(p: Pipeline) -> list[str]:
    """The stages in the order Halide realizes them (RealizationOrder.cpp): a post-order
    depth-first walk from the outputs, each Func's callees visited by name (a std::map).
    Producers computed at the same loop run in this order."""
    order: list[str] = []
    seen: set[str] = set()
    for out in p.outputs:
        if out in seen:
            continue
        seen.add(out)
        stack = [(out, iter(sorted(set(p.producers(out)))))]
        while stack:
            name, callees = stack[-1]
            nxt = next((c for c in callees if c not in seen), None)
            if nxt is None:
                stack.pop()
                order.append(name)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(set(p.producers(nxt))))))
    return order


# --- the trace --------------------------------------------------------------------------------
def default_extent(p: Pipeline, sched: Schedule, stage: str, cap: int = DEFAULT_CAP) -> tuple[int, ...]:
    """A small extent to trace `stage` on: `cap` for the two innermost dims, OUTER_CAP for the
    others, widened to cover one whole iteration of its split inner loops, within its shape."""
    s = p.stage(stage)
    nest = LN.build(p, sched)
    span = {d.name: 1 for d in s.dims}
    for lp in nest.placements[stage].loops:
        if lp.fixed and not lp.rvar:
            for part in lp.parts:
                if part.dim in span:
                    span[part.dim] += (lp.extent - 1) * part.stride
    n = len(s.dims)
    return tuple(min(d.extent, max(cap if k >= n - 2 else OUTER_CAP, span[d.name])) for k, d in enumerate(s.dims))


def parse_extent(text: str) -> tuple[int, ...]:
    """'16x16' -> (16, 16) (dims outermost first, as the stage lists them)."""
    try:
        ext = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise TraceError(f"extent {text!r}: expected positive integers separated by 'x', e.g. 16x16") from None
    if not ext or any(e <= 0 for e in ext):
        raise TraceError(f"extent {text!r}: every extent must be positive")
    return ext


@dataclass(frozen=True)
class _Slide:
    """How Halide slides a producer's window: over loop `loop` (an index into the final
    definition's loops) along dim `dim` (None: the region does not move, computed once),
    `step` more per iteration, the loop rewound by `warmup` iterations."""

    loop: int
    dim: int | None
    step: int
    warmup: int


@dataclass
class _Realized:
    """Per producer: what was computed so far (for recompute counts and allocations)."""

    computed: int = 0
    recomputed: int = 0
    seen: set[Cell] = field(default_factory=set)  # over the whole trace (recompute counts)
    store_key: tuple | None = None
    store_hull: list[list[int]] | None = None
    max_region: tuple[int, ...] = ()
    max_iter_extent: tuple[int, ...] = ()
    allocations: int = 0


class _Tracer:
    def __init__(self, p: Pipeline, sched: Schedule, stage: str, extent: tuple[int, ...], threads: int, max_steps: int) -> None:
        self.p, self.sched, self.stage = p, sched, stage
        self.nest = LN.build(p, sched)
        self.max_steps = max_steps
        self.threads = threads
        self.text, self.lines = _lines(self.nest)
        self.produce = _produce_nodes(self.nest)
        s = p.stage(stage)
        self.ext = dict(zip((d.name for d in s.dims), extent))
        self.extent = extent
        self.defs = [False, True] if s.is_reduction else [False]
        self.loops = {u: definition_loops(p, sched, stage, u, self.ext) for u in self.defs}
        self.maps = {u: _IndexMap(p, sched, stage, u, self.ext, self.loops[u]) for u in self.defs}
        self.final = self.defs[-1]
        final_names = [lp.name for lp in self.loops[self.final]]
        # Producers computed at this stage's (final definition's) loops, by loop index.
        self.at: dict[int, list[str]] = {}
        for k, name in enumerate(final_names):
            for q in self.nest.computed_at.get((stage, name), []):
                self.at.setdefault(k, []).append(q)
        rank = {n: i for i, n in enumerate(realization_order(p))}
        for qs in self.at.values():  # siblings at one loop are computed in Halide's order
            qs.sort(key=rank.__getitem__)
        self.level = {q: k for k, qs in self.at.items() for q in qs}
        self.store_level: dict[str, int | None] = {}
        for q in self.level:
            pl, st = self.nest.placements[q], self.sched.of(q).store()
            if st is not None and st.kind == Kind.STORE_ROOT:
                self.store_level[q] = None
            elif pl.store is not None and pl.store[0] == stage:
                self.store_level[q] = final_names.index(pl.store[1])
            elif pl.store is not None:  # stored at an outer stage's loop: outside this trace
                self.store_level[q] = None
            else:
                self.store_level[q] = self.level[q]
        self.real = {q: _Realized() for q in self.level}
        self.plans = {q: self._slide_plan(q) for q in self.level}
        self.producer_cells = 0
        self.truncated = False
        self._qmaps: dict[tuple[str, tuple[int, ...]], tuple[list[L.Loop], _IndexMap]] = {}
        self._qupdates: dict[tuple[str, tuple[int, ...]], int] = {}

    # --- producers ---------------------------------------------------------------------
    def _required(self, q: str, k: int, ranges: dict[str, tuple[int, int]], memo: dict[str, Box]) -> Box:
        """Region of producer `q` needed while this stage's loops inside `k` run once (the
        stage's own reads and those of the producers computed at loops `k` or inside)."""
        if q in memo:
            return memo[q]
        boxes = [self.nest.access_box(self.stage, q, ranges)]
        down = self.p.downstream(q)
        for d, kd in self.level.items():
            if d in down and kd >= k:
                bd = self._required(d, k, ranges, memo)
                if bd:
                    ds = self.p.stage(d)
                    r = {dim.name: b for dim, b in zip(ds.dims, bd)} | {x.name: (0, x.extent - 1) for x in ds.rdom}
                    boxes.append(self.nest.access_box(d, q, r))
        boxes = [b for b in boxes if b]
        out: Box = ()
        if boxes:
            out = tuple((min(b[i][0] for b in boxes), max(b[i][1] for b in boxes)) for i in range(len(boxes[0])))
        memo[q] = out
        return out

    def _update_points(self, q: str, box: Box) -> int:
        """Points a reduction producer's update definition stores when realized over `box`."""
        qs = self.p.stage(q)
        if not qs.is_reduction:
            return 0
        ext_t = tuple(b - a + 1 for a, b in box)
        hit = self._qupdates.get((q, ext_t))
        if hit is None:
            ext = dict(zip((d.name for d in qs.dims), ext_t))
            loops = definition_loops(self.p, self.sched, q, True, ext)
            imap = _IndexMap(self.p, self.sched, q, True, ext, loops)
            if not imap.guarded:
                hit = math.prod(lp.extent for lp in loops)
            else:
                names = [lp.name for lp in loops]
                hit = 0
                for idx in itertools.product(*(range(lp.extent) for lp in loops)):
                    try:
                        imap.point(dict(zip(names, idx)))
                    except _Guarded:
                        continue
                    hit += 1
            self._qupdates[(q, ext_t)] = hit
        return hit

    def _producer_points(self, q: str, box: Box) -> list[Cell]:
        """The points producer `q`'s pure definition computes when realized over `box`, in its loop order."""
        ext_t = tuple(b - a + 1 for a, b in box)
        hit = self._qmaps.get((q, ext_t))
        if hit is None:
            qs = self.p.stage(q)
            ext = dict(zip((d.name for d in qs.dims), ext_t))
            loops = definition_loops(self.p, self.sched, q, False, ext)
            hit = self._qmaps[(q, ext_t)] = (loops, _IndexMap(self.p, self.sched, q, False, ext, loops))
        loops, imap = hit
        lo = [a for a, _ in box]
        out: list[Cell] = []
        names = [lp.name for lp in loops]
        for idx in itertools.product(*(range(lp.extent) for lp in loops)):
            try:
                pt = imap.point(dict(zip(names, idx)))
            except _Guarded:
                continue
            out.append(tuple(lo[i] + v for i, v in enumerate(pt)))
        return out

    def _box_at(self, q: str, counters: tuple[int, ...]) -> Box:
        """Region of producer `q` required at its compute site, this stage's loops outside it
        at `counters` (one per loop down to q's compute loop)."""
        k = self.level[q]
        loops = self.loops[self.final]
        env = {lp.name: (i, i) for lp, i in zip(loops[: k + 1], counters)}
        env.update({lp.name: (0, lp.extent - 1) for lp in loops[k + 1 :]})
        return self._required(q, k, self.maps[self.final].ranges(env), {})

    def _slide_plan(self, q: str) -> _Slide | None:
        """Halide's sliding window for `q` (stored outside the loop it is computed at): the
        innermost serial or unrolled loop between the two along which the region required
        moves up in exactly one dim with overlap between iterations (or does not move at all:
        computed on the first iteration only), and the warm-up iterations the loop is rewound by."""
        k, sl = self.level[q], self.store_level[q]
        if sl == k:
            return None
        loops = self.loops[self.final]
        first = -1 if sl is None else sl
        zero = (0,) * (k + 1)
        b0 = self._box_at(q, zero)
        if not b0:
            return None
        for v in range(k, first, -1):
            if loops[v].kind not in ("serial", "unrolled"):
                continue
            if loops[v].extent < 2:
                continue
            b1 = self._box_at(q, zero[:v] + (1,) + zero[v + 1 :])
            moved = [d for d in range(len(b0)) if b0[d] != b1[d]]
            if not moved:  # the same region every iteration: computed on the first one only
                return _Slide(v, None, 0, 0)
            if len(moved) > 1:
                continue
            d = moved[0]
            (lo0, hi0), (lo1, hi1) = b0[d], b1[d]
            if lo1 < lo0 or hi1 <= hi0 or lo1 > hi0:  # not increasing, or no overlap: nothing to reuse
                continue
            step, size = hi1 - hi0, hi0 - lo0 + 1
            return _Slide(v, d, step, -(-max(0, size - step) // step))
        return None

    def _slid_box(self, q: str, plan: _Slide, counters: tuple[int, ...]) -> Box:
        """The region computed at `counters` under the sliding window (the counter of the
        slide loop may be negative: a warm-up iteration); () when nothing is new."""
        v, d = plan.loop, plan.dim
        u = counters[v]
        if d is None:
            return self._box_at(q, counters) if u == 0 else ()
        base = self._box_at(q, counters[:v] + (max(u, 0),) + counters[v + 1 :])
        lo_first = base[d][0] if u >= 0 else self._box_at(q, counters[:v] + (0,) + counters[v + 1 :])[d][0]

        def hi(w: int) -> int:  # extrapolated below 0 (the footprint moves by `step` per iteration)
            if w >= 0:
                return self._box_at(q, counters[:v] + (w,) + counters[v + 1 :])[d][1]
            return hi(0) + w * plan.step

        lo = lo_first if u == -plan.warmup else max(lo_first, hi(u - 1) + 1)
        top = hi(u)
        if lo > top:
            return ()
        return base[:d] + ((lo, top),) + base[d + 1 :]

    def _compute_producers(self, k: int, idx: tuple[int, ...], names: list[str]) -> list[ProducerRegion]:
        out: list[ProducerRegion] = []
        for q in self.at.get(k, []):
            plan = self.plans[q]
            counters = tuple(idx[: k + 1])
            if plan is not None and plan.warmup and idx[plan.loop] == 0 and all(i == 0 for i in idx[plan.loop + 1 : k + 1]):
                # The slide loop starts: Halide rewinds it by `warmup` iterations that only compute q.
                inner = [range(lp.extent) for lp in self.loops[self.final][plan.loop + 1 : k + 1]]
                for u in range(-plan.warmup, 0):
                    for rest in itertools.product(*inner):
                        self._realize(q, k, counters[: plan.loop] + (u,) + rest, plan, out, names)
            self._realize(q, k, counters, plan, out, names)
        return out

    def _realize(self, q: str, k: int, counters: tuple[int, ...], plan: _Slide | None, out: list[ProducerRegion], names: list[str]) -> None:
        full = self._box_at(q, counters) if counters[plan.loop if plan else 0] >= 0 else ()
        box = full if plan is None else self._slid_box(q, plan, counters)
        if not box:
            return
        r = self.real[q]
        sl = self.store_level[q]
        key = ("root",) if sl is None else tuple(counters[: sl + 1])
        if key != r.store_key:  # a new iteration of its store level: a new buffer
            r.store_key, r.store_hull = key, None
            r.allocations += 1
        pts = self._producer_points(q, box)
        rec = tuple(c for c in pts if c in r.seen)
        r.seen.update(pts)
        r.computed += len(pts)
        r.recomputed += len(rec)
        need = full or box  # what this iteration reads: the buffer holds at least that
        ext = tuple(b - a + 1 for a, b in need)
        r.max_iter_extent = tuple(max(a, b) for a, b in zip(r.max_iter_extent, ext)) if r.max_iter_extent else ext
        if r.store_hull is None:
            r.store_hull = [[a, b] for a, b in box]
        else:
            for h, (a, b) in zip(r.store_hull, box):
                h[0], h[1] = min(h[0], a), max(h[1], b)
        reg = tuple(b - a + 1 for a, b in r.store_hull)
        r.max_region = tuple(max(a, b) for a, b in zip(r.max_region, reg)) if r.max_region else reg
        if self.producer_cells + len(pts) > MAX_PRODUCER_CELLS:
            self.truncated = True
            pts, rec = pts[: max(0, MAX_PRODUCER_CELLS - self.producer_cells)], rec[:0]
        self.producer_cells += len(pts)
        out.append(ProducerRegion(q, names[k], box, tuple(pts), rec, self._produce_line(q), self._update_points(q, box)))

    def _produce_line(self, q: str) -> int | None:
        n = self.produce.get(q)
        return None if n is None else self.lines[id(n)]

    # --- the stage's steps, in program order ---------------------------------------------
    def _raw(self) -> Iterator[_RawStep]:
        """(update, loop counters, cells, producers computed first, parallel key) per step, serially."""
        ndims = len(self.ext)
        for u in self.defs:
            loops, imap = self.loops[u], self.maps[u]
            names = [lp.name for lp in loops]
            vec = [k for k, lp in enumerate(loops) if lp.kind == "vectorized"]
            scal = [k for k in range(len(loops)) if k not in vec]
            par = next((k for k, lp in enumerate(loops) if lp.kind == "parallel"), None)
            hooks = sorted(self.at) if u == self.final else []
            lanes = list(itertools.product(*(range(loops[k].extent) for k in vec)))
            prev: tuple[int, ...] | None = None
            for sidx in itertools.product(*(range(loops[k].extent) for k in scal)):
                idx = [0] * len(loops)
                for k, i in zip(scal, sidx):
                    idx[k] = i
                full = tuple(idx)
                changed = 0 if prev is None else next(j for j in range(len(loops)) if prev[j] != full[j])
                prev = full
                prods: list[ProducerRegion] = []
                for k in hooks:
                    if k >= changed:
                        prods.extend(self._compute_producers(k, full, names))
                env = dict(zip(names, full))
                cells = []
                for lane in lanes:
                    for k, i in zip(vec, lane):
                        env[names[k]] = i
                    try:
                        pt = imap.point(env)
                    except _Guarded:
                        continue
                    cells.append(pt[:ndims])
                pkey = None if par is None else (full[:par], full[par])
                if cells or prods:
                    yield u, full, tuple(cells), prods, pkey

    def run(self) -> Trace:
        steps: list[Step] = []
        raw: list[_RawStep] = []
        for item in self._raw():
            if len(raw) >= self.max_steps:
                self.truncated = True
                break
            raw.append(item)
        tloops: list[TraceLoop] = []
        info = {}
        for u in self.defs:
            ll = _loop_lines(self.produce.get(self.stage), self.lines, u)
            lps = self.loops[u]
            tloops += [TraceLoop(lp.name, lp.extent, lp.kind, u, ll.get(lp.name)) for lp in lps]
            scal = [k for k, lp in enumerate(lps) if lp.kind != "vectorized"]
            inner = lps[scal[-1]].name if scal else (lps[-1].name if lps else "")
            info[u] = (
                ll.get(inner),
                any(lp.kind == "unrolled" for lp in lps),
                any(lp.kind == "vectorized" for lp in lps),
            )
        nthreads = 1
        tick = 0
        k = 0
        while k < len(raw):
            u, idx, cells, prods, pkey = raw[k]
            line, unr, vec = info[u]
            if pkey is None:
                steps.append(Step(len(steps), tick, cells, 0, unr, vec, u, idx, line, tuple(prods)))
                tick += 1
                k += 1
                continue
            # One run of the parallel loop: its iterations, each a list of raw steps.
            block: dict[int, list] = {}
            j = k
            while j < len(raw) and raw[j][0] == u:
                key = raw[j][4]
                if key is None or key[0] != pkey[0]:
                    break
                block.setdefault(key[1], []).append(raw[j])
                j += 1
            iters = [block[i] for i in sorted(block)]
            t = max(1, min(self.threads, len(iters)))
            nthreads = max(nthreads, t)
            # Each worker takes the next iteration when it is free (Halide's thread pool).
            queues: list[list] = [[] for _ in range(t)]
            pos = [0] * t
            nxt = 0
            for w in range(t):
                queues[w], nxt = iters[nxt], nxt + 1
            start = tick
            while nxt < len(iters) or any(pos[w] < len(queues[w]) for w in range(t)):
                for w in range(t):
                    if pos[w] >= len(queues[w]) and nxt < len(iters):
                        queues[w], pos[w], nxt = iters[nxt], 0, nxt + 1
                    if pos[w] < len(queues[w]):
                        u2, idx2, cells2, prods2, _ = queues[w][pos[w]]
                        steps.append(Step(len(steps), tick, cells2, w, unr, vec, u2, idx2, line, tuple(prods2)))
                        pos[w] += 1
                tick += 1
            if tick == start:
                tick += 1
            k = j
        return Trace(
            self.p.name, self.stage, self.extent, tuple(steps), tuple(tloops), self.text, nthreads, self.truncated,
            {q: r.computed for q, r in self.real.items()},
            {q: r.recomputed for q, r in self.real.items()},
            self._allocations(),
            {q: self.p.stage(q).shape for q in self.real},
        )  # fmt: skip

    def _allocations(self) -> dict[str, Allocation]:
        names = [lp.name for lp in self.loops[self.final]]
        out = {self.stage: Allocation(self.stage, "root", "root", self.extent, self.extent, (), False, 1)}
        for q, r in self.real.items():
            k, sl = self.level[q], self.store_level[q]
            level = f"{self.stage}.{names[k]}"
            store = "root" if sl is None else f"{self.stage}.{names[sl]}"
            plan = self.plans[q]
            sliding = plan is not None
            shape = list(r.max_region)
            folded = []
            if plan is not None and plan.dim is not None and r.max_iter_extent:
                i = plan.dim
                f = 1 << max(0, (r.max_iter_extent[i] - 1).bit_length())  # the power of two at least the per-iteration extent
                if f < shape[i]:
                    shape[i] = f
                    folded.append(i)
            out[q] = Allocation(q, level, store, tuple(shape), r.max_region, tuple(folded), sliding, r.allocations)
        return out


def trace(
    p: Pipeline,
    sched: Schedule,
    stage: str,
    extent: tuple[int, ...] | None = None,
    *,
    threads: int = DEFAULT_THREADS,
    max_steps: int = MAX_STEPS,
) -> Trace:
    """The iteration order of `stage` under `sched`, realized over `extent` (a box from the
    origin of its dims; default `default_extent`). Raises ScheduleError for an invalid
    schedule, TraceError for a stage or extent that cannot be traced."""
    s = p.stage(stage)
    if threads < 1:
        raise TraceError(f"threads must be at least 1, got {threads}")
    if max_steps < 1:
        raise TraceError(f"max_steps must be at least 1, got {max_steps}")
    nest = LN.build(p, sched)
    if nest.placements[stage].compute == "inline":
        raise TraceError(f"stage {stage!r} is inlined: it has no loops of its own (trace a stage it is inlined into)")
    ext = default_extent(p, sched, stage) if extent is None else tuple(extent)
    if len(ext) != len(s.dims):
        dims = ", ".join(d.name for d in s.dims)
        raise TraceError(f"extent {'x'.join(map(str, ext))} for stage {stage!r}: it has {len(s.dims)} dims ({dims})")
    for e, d in zip(ext, s.dims):
        if not 1 <= e <= d.extent:
            raise TraceError(f"extent {'x'.join(map(str, ext))} for stage {stage!r}: dim {d.name!r} must be in [1, {d.extent}], got {e}")
    return _Tracer(p, sched, stage, ext, threads, max_steps).run()
