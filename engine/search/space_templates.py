"""Structured decisions for a stage: the loop shapes fast schedules are made of, offered at
every legal location beside the sampler's random ones.

The sampler (engine/sampler.py) draws each split, vectorize and parallel independently, so
"parallel outer loop, vectorized inner loop at the target's vector width" or "a reduction
vectorized along a pure dimension with the reduction loops outside the vector" appears in
only a few of K random options, and in none for a stage with several loops: greedy with V
alone then picks the best of poor options (measured: mlp's output update was never
vectorized, layernorm's output never parallel). These templates are generic, not per
pipeline: they depend on the stage's loops and the target's float32 lanes only:

- a pure definition: vectorize the innermost loop by the lanes; at root also parallelize
  the outermost loop, or split it (and the loop just outside the vector) into row strips
  whose outer part is parallel and outermost (producers then have a strip loop to be
  computed at); optionally unroll the loop outside the vector;
- an update: the innermost pure loop split by the lanes, the vector innermost and the
  reduction loops just outside it (one accumulator per lane), optionally a register block
  (another pure loop's inner part unrolled inside the reduction: half the target's
  accumulators of rows, as engine/recipes.py sizes its blocks, by one or two vectors); at
  root the outermost pure loop parallel. When the vector runs across rows (a source is read
  along that loop in other than its last axis: a row reduction), it has engine/heuristic.py's
  ROW_LANES lanes and one vector only: more rows 4 KiB apart overfill an L1 set (search/reuse.py);
- an output reduction whose innermost loop the target's lanes do not divide takes the widest power
  of two that does, if at least half the lanes (`_width`, as engine/heuristic.py's vector
  updates of outputs): an output's tail is guarded, a cost V does not see.

Every template is checked with `sampler.still_legal` (location, factors within the region,
the tails the sampler's rules require), so an option offered is legal by construction.
Where the sampler offers a stage no loop (several readers), templates are also offered at
`space.nest_locations`, the loops of its readers' reader that enclose them all (checked with
`validate`): harris's Ix/Iy, read by three stages inlined into sums computed per output strip,
had only root or inline; computed per strip, greedy0's harris measured 1.44x faster.
"""

from __future__ import annotations

from .. import expr as E
from .. import loops as L
from .. import sampler
from ..heuristic import ROW_LANES
from ..ir import Pipeline, Stage
from ..recipes import dividing, fit, vector_target
from ..schedule import Directive, Kind, Schedule, StageSchedule
from .space import legal_decision, nest_locations

STRIP_ROWS = (8, 32)  # rows per parallel strip
TILE_COLS = 128  # columns of a 2-D tile (512 bytes of float32 per row: a few cache lines of each row)
KBLOCK = 128  # a long reduction loop blocked by this much, the block loop outside the pure loops (cache blocking)
MIN_TAILFREE_LANES = 4  # narrowest tail-free vector an output stage takes instead of a wider one with a tail
LOCATIONS_AT = 4  # compute_at locations templated per consumer: the innermost ones that are legal


class _Loops:
    """One definition's loops as directives are added (names and extents known at each step):
    the sampler's DefinitionLoops (its tail rule: Halide must never grow the region) behind
    the few moves the templates make."""

    def __init__(self, p: Pipeline, name: str, update: bool, extents: dict[str, int], guard_all: bool) -> None:
        self.d = sampler.DefinitionLoops(p.stage(name), update, extents, guard_all)

    @property
    def loops(self) -> list[L.Loop]:
        return self.d.loops

    @property
    def out(self) -> list[Directive]:
        return self.d.directives

    def get(self, name: str) -> L.Loop:
        return next(x for x in self.loops if x.name == name)

    def fresh(self, base: str) -> str:
        return self.d.fresh(base)

    def add(self, kind: Kind, loop: str | None = None, factor: int | None = None, **kw: object) -> None:
        self.d.add(Directive(kind, loop=loop, factor=factor, **kw))  # type: ignore[arg-type]

    def split(self, loop: str, factor: int) -> tuple[str, str]:
        outer, inner = self.fresh(f"{loop}o"), self.fresh(f"{loop}i")
        self.add(Kind.SPLIT, loop, factor, outer=outer, inner=inner)
        return outer, inner

    def reorder(self, outer_to_inner: list[str]) -> None:
        if outer_to_inner != [x.name for x in self.loops]:
            self.add(Kind.REORDER, loops=tuple(reversed(outer_to_inner)))

    def vectorize(self, loop: str, lanes: int) -> None:
        ext = self.get(loop).extent
        if ext < 2:
            return
        f = fit(lanes, ext)
        self.add(Kind.VECTORIZE, loop, f if f < ext or not self.get(loop).fixed else None)

    def parallel(self) -> None:
        pure = [x for x in self.loops if not x.rvar and x.kind == "serial" and x.extent >= 2]
        if pure:
            self.add(Kind.PARALLEL, pure[0].name)


def _pure_templates(p: Pipeline, name: str, extents: dict[str, int], guard: bool, root: bool, lanes: int) -> list[tuple[Directive, ...]]:
    """Loop directives of a pure definition (see the module doc)."""
    out: list[tuple[Directive, ...]] = []
    base = L.initial_loops(p.stage(name), False, extents)
    inner = base[-1].name
    big = [x.name for x in base if x.extent >= 2]
    shapes: list[tuple[str | None, int, bool]] = [(None, 0, False), (None, 0, True)]  # (strip loop, rows, unroll)
    if root:
        for cand in dict.fromkeys([b for b in big if b != inner][:1] + [b for b in big if b != inner][-1:]):
            for rows in STRIP_ROWS:
                if extents.get(cand, 0) >= 2 * rows:
                    shapes.append((cand, rows, False))
    for strip, rows, unroll in shapes:
        d = _Loops(p, name, False, extents, guard)
        try:
            if strip is not None:
                so, si = d.split(strip, rows)
                rest = [x.name for x in d.loops if x.name != so]
                d.reorder([so] + rest)
            d.vectorize(inner, lanes)
            if unroll and len(d.loops) >= 2 and d.loops[-2].kind == "serial" and d.loops[-2].extent >= 2:
                d.add(Kind.UNROLL, d.loops[-2].name, fit(4, d.loops[-2].extent))
            if root:
                d.parallel()
        except (L.LoopError, ValueError, StopIteration):
            continue
        out.append(tuple(d.out))
    rows_dim = [b for b in big if b != inner][-1:]
    if root and rows_dim and extents.get(inner, 0) >= 2 * TILE_COLS and extents.get(rows_dim[0], 0) >= 2 * STRIP_ROWS[-1]:
        # a 2-D tile (rows x columns), tiles parallel over rows: a producer computed per tile
        # (a matmul's product, a stencil's input) then fits in cache
        d = _Loops(p, name, False, extents, guard)
        try:
            ro, ri = d.split(rows_dim[0], STRIP_ROWS[-1])
            co, ci = d.split(inner, TILE_COLS)
            rest = [x.name for x in d.loops if x.name not in (ro, ri, co, ci)]
            d.reorder([ro] + rest + [co, ri, ci])
            d.vectorize(ci, lanes)
            d.parallel()
            out.append(tuple(d.out))
        except (L.LoopError, ValueError, StopIteration):
            pass
    if root:  # and the plain vectorized root without parallelism (small stages, where threads cost more)
        d = _Loops(p, name, False, extents, guard)
        d.vectorize(inner, lanes)
        out.append(tuple(d.out))
    return out


def _strided(st: Stage, v: str) -> bool:
    """Does `st`'s update read some source along `v` in other than its last (contiguous) axis?
    A vector along `v` then loads one element per row (as engine/heuristic.py decides lanes)."""
    assert st.update is not None
    along = [x for x in E.accesses(st.update) if any(v in E.variables(ix) for ix in x.index)]
    return any(v not in E.variables(x.index[-1]) for x in along)


def _update_templates(
    p: Pipeline, name: str, extents: dict[str, int], guard: bool, root: bool, lanes: int, accumulators: int
) -> list[tuple[Directive, ...]]:
    """Loop directives of a reduction's update (see the module doc)."""
    base = L.initial_loops(p.stage(name), True, extents)
    pure = [x.name for x in base if not x.rvar and x.extent >= 2]
    rvars = [x.name for x in base if x.rvar]
    if not pure:
        return [()]
    v = pure[-1]
    strided = _strided(p.stage(name), v)
    if strided:  # the vector runs across rows: more than ROW_LANES rows 4 KiB apart overfill an L1 set
        lanes = min(lanes, ROW_LANES)
    out: list[tuple[Directive, ...]] = []
    br = max(2, accumulators // 2)  # rows x 1 vector: half the accumulators (FMA chains); x 2 vectors: all of them
    for rows, vecs, kblock in ((0, 1, False), (br, 1, False), (br, 2, False), (0, 1, True), (br, 2, True)):
        d = _Loops(p, name, True, extents, guard)
        try:
            rv = list(rvars)
            if kblock:  # the longest reduction loop split, its block loop outside the pure loops
                long = max(rv, key=lambda r: d.get(r).extent) if rv else None
                if long is None or d.get(long).extent < 2 * KBLOCK:
                    continue
                ko, ki = d.split(long, KBLOCK)
                rv = [ki if r == long else r for r in rv]
            vw = fit(lanes, d.get(v).extent)
            if vecs > 1 and (strided or d.get(v).extent < 2 * vw):  # two strided vectors: 2 x ROW_LANES rows
                continue
            vo, vi = d.split(v, vw * vecs)
            block: list[str] = []
            if vecs > 1:
                vu, vi = d.split(vi, vw)
                block = [vu]
            others = [x for x in pure if x != v]
            if rows:
                if not others or d.get(others[-1]).extent < 2 * rows:
                    continue
                uo, ui = d.split(others[-1], rows)
                block = [ui] + block
            inside = set(block + rv + [vi])
            outer = [x.name for x in d.loops if x.name not in inside]
            if kblock:  # the first (parallel) pure loop, then the reduction's block loop, then the rest
                outer = [x for x in outer if x != ko]
                outer = outer[:1] + [ko] + outer[1:]
            d.reorder(outer + rv + block + [vi])
            d.add(Kind.VECTORIZE, vi)
            for b in block:
                d.add(Kind.UNROLL, b)
            if root:
                d.parallel()
        except (L.LoopError, ValueError, StopIteration):
            continue
        out.append(tuple(d.out))
    return out


def _width(p: Pipeline, s: Stage, extents: dict[str, int], lanes: int) -> int:
    """The vector width templated: the target's lanes; for an output reduction, where they do not
    divide the innermost pure loop and a power of two of at least half of them does, that one
    (as engine/heuristic.py's vector updates choose). An output's buffer cannot be rounded up,
    so a vector loop with a tail is guarded (guard_with_if) and its last vector of every row runs
    masked or scalar, which V does not see; for a short row that is much of it (maxpool's 56-wide
    rows: 16 lanes with a tail measured 1.13 ms, 8 lanes without 0.39 ms, the schedule otherwise
    the same). An intermediate stage's buffer is rounded up instead (no guard), and a pure
    output's tail is shifted inwards (no guard): their lanes stay."""
    ext = extents.get(s.dims[-1].name, 0) if s.dims else 0
    alt = dividing(lanes, ext) if ext > 0 and s.is_reduction and s.name in p.outputs else lanes
    return alt if alt != fit(lanes, ext) and alt >= max(MIN_TAILFREE_LANES, lanes // 2) else lanes


def template_options(
    p: Pipeline, partial: Schedule, name: str, lanes: int | None = None, accumulators: int | None = None
) -> list[StageSchedule]:
    """The structured decisions of stage `name` after `partial`'s decisions of its consumers,
    every one legal (checked), deterministic; `lanes` default: the host target's float32 lanes."""
    lanes = lanes or vector_target().lanes
    accumulators = accumulators or vector_target().accumulators
    locs = sampler.locations(p, partial, name)
    ats: dict[str, list[sampler.Location]] = {}
    for loc in locs:
        if loc[0] == "at":
            ats.setdefault(str(loc[1]), []).append(loc)
    nest = nest_locations(p, partial, name)
    chosen = [loc for loc in locs if loc[0] != "at"] + [x for v in ats.values() for x in v[-LOCATIONS_AT:]] + nest[-LOCATIONS_AT:]
    s = p.stage(name)
    out: list[StageSchedule] = []
    seen: set[StageSchedule] = set()
    for loc in chosen:
        head = sampler.location_directives(loc)
        if loc[0] == "inline":
            cands = [StageSchedule(head)]
        else:
            extents, guard = sampler.placement_context(p, partial, name, loc)
            root = loc[0] == "root"
            w = _width(p, s, extents, lanes)
            pures = _pure_templates(p, name, extents, guard, root, w)
            if s.is_reduction:
                init = pures[0]  # the init: vectorized (and parallel at root)
                ups = _update_templates(p, name, extents, guard, root, w, accumulators)
                cands = [StageSchedule(head + init, u) for u in ups]
            else:
                cands = [StageSchedule(head + x) for x in pures]
        for c in cands:
            if c not in seen and legal_decision(p, partial, name, c, nest):
                seen.add(c)
                out.append(c)
    return out
