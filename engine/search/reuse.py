"""Capacity traffic of a schedule: the bytes a loop nest re-reads because what it reuses does
not stay in cache, a term zero-measurement greedy adds to the value function's prediction.

Why: V and every shipped cost model were trained on pipelines too small for cache capacity
to matter, so they predict e.g. a matrix product computed one output row at a time (all of
B re-read per row) as fast as a blocked one; measured, it is several times slower. The
term is computed from the loop nest alone (loopnest's public API), per non-inlined stage's
final definition:

- the loop stack: its consumer's loops down to its compute_at loop (when computed at one),
  then its own loops, outermost first;
- the footprint of one iteration of a level: the boxes of every source it reads (inlined
  stages substituted) and of its own region, with each variable over the range the loops
  inside that level cover, the contiguous (last) axis rounded up to cache lines;
- the outermost level whose one iteration fits in CACHE_BYTES keeps its data between two
  consecutive iterations (a stencil's rows, a block's panel) but not across its parent's:
  per parent iteration it moves one iteration's footprint plus, for each further
  iteration, what two consecutive iterations touch beyond one, and at least the parent's
  one-iteration footprint (it does not fit, so it is moved once per parent iteration).

The excess over touching everything once (compulsory traffic) at DRAM bandwidth is the
penalty in ms; a schedule whose reuse fits in cache gets 0, so V alone ranks those. It is a
coarse model (one cache level, other stages' data in the same loops ignored), used only to
stop V from choosing what it cannot see.
"""

from __future__ import annotations

import math

from ..costmodel.analytic import CACHE_BYTES, DRAM_GBS
from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..loops import Loop
from ..schedule import Schedule

LINE_FLOATS = 16  # float32 per 64-byte cache line
ELEM_BYTES = 4


def _box_bytes(box: tuple[tuple[int, int], ...]) -> float:
    if not box:
        return 0.0
    ext = [hi - lo + 1 for lo, hi in box]
    lines = math.ceil(ext[-1] / LINE_FLOATS) * LINE_FLOATS
    return float(math.prod(ext[:-1]) * lines * ELEM_BYTES)


def _spans(loops: list[Loop], two: Loop | None = None) -> dict[str, int]:
    """Extent per variable covered by `loops` (all their iterations), and by two iterations of `two`."""
    span: dict[str, int] = {}
    for lp in loops:
        for part in lp.parts:
            span[part.dim] = span.get(part.dim, 0) + part.stride * (lp.extent - 1)  # a fused loop's parts: approximate
    if two is not None:
        for part in two.parts:
            span[part.dim] = span.get(part.dim, 0) + part.stride * min(1, two.extent - 1)
    return {v: s + 1 for v, s in span.items()}


def _footprint(nest: LoopNest, stage: str, sources: list[str], extents: dict[str, int]) -> float:
    st = nest.pipeline.stage(stage)
    names = [d.name for d in st.dims] + ([r.name for r in st.rdom] if st.is_reduction else [])
    ranges = {v: (0, max(0, extents.get(v, 1) - 1)) for v in names}  # a variable no loop covers: one value
    total = 0.0
    for src in sources + [stage]:
        total += _box_bytes(nest.access_box(stage, src, ranges))
    return total


def stage_excess_bytes(nest: LoopNest, stage: str) -> float:
    """Bytes `stage`'s final definition moves beyond its compulsory traffic (see the module doc)."""
    p = nest.pipeline
    pl = nest.placements[stage]
    if pl.compute == "inline" or not pl.loops:
        return 0.0
    st = p.stage(stage)
    region = dict(zip([d.name for d in st.dims], pl.region))
    full_r = {r.name: r.extent for r in st.rdom} if st.is_reduction else {}
    sources = nest.effective_sources(stage)
    own = pl.loops
    # Levels outermost first: (trips, extents of one iteration, extents of two consecutive iterations).
    levels: list[tuple[int, dict[str, int], dict[str, int]]] = []
    outer_reps = 1
    if pl.compute == "at" and pl.at is not None:
        cons, at_loop = pl.at
        cl = nest.placements[cons].loops
        idx = next((i for i, x in enumerate(cl) if x.name == at_loop), None)
        outer_reps = max(1, nest.placements[cons].realizations)
        if idx is not None:
            dims = [d.name for d in st.dims]
            for i in range(idx + 1):
                one = dict(zip(dims, nest.region_at(stage, cons, cl[i].name)))
                levels.append((cl[i].extent, {**one, **full_r}, {**_two_of(nest, stage, cons, cl, i, one), **full_r}))
    for i, lp in enumerate(own):
        inner = own[i + 1 :]
        levels.append((lp.extent, _spans(inner), _spans(inner, lp)))
    whole = {**region, **full_r}
    if pl.compute == "at" and pl.at is not None:  # the footprint of a whole realization of its consumer
        whole = {**dict(zip([d.name for d in st.dims], nest.region_at(stage, pl.at[0], None))), **full_r}
    total_fp = _footprint(nest, stage, sources, whole)
    if total_fp <= CACHE_BYTES:
        return 0.0
    one_fp: list[float] = []  # one iteration's footprint per level, outermost first, down to the first that fits
    for _, one, _ in levels:
        one_fp.append(_footprint(nest, stage, sources, one))
        if one_fp[-1] <= CACHE_BYTES:
            break
    fits = len(one_fp) - 1
    trips, _, two = levels[fits]
    f1 = one_fp[fits]
    f2 = _footprint(nest, stage, sources, two)
    # At least the parent's one-iteration footprint per parent iteration: it does not fit, so
    # none of it survives to the next (what the sliding estimate misses when consecutive
    # iterations share cache lines, e.g. a column walk).
    f_parent = one_fp[fits - 1] if fits > 0 else total_fp
    per_parent = max(f1 + (trips - 1) * max(0.0, f2 - f1), f_parent)
    parents = outer_reps * math.prod(t for t, _, _ in levels[:fits])
    moved = parents * per_parent
    return max(0.0, moved - total_fp * outer_reps)


def _two_of(nest: LoopNest, stage: str, cons: str, cl: list[Loop], i: int, one: dict[str, int]) -> dict[str, int]:
    """The producer's extents over two consecutive iterations of the consumer's loop `cl[i]`:
    one iteration's region grown by the consumer's step along the dims that loop moves."""
    if cl[i].extent < 2:
        return dict(one)
    parent = nest.region_at(stage, cons, cl[i - 1].name if i > 0 else None)
    parent_ext = dict(zip(list(one), parent))
    dims = list(one)
    two = {}
    for d in dims:
        grow = max(0, parent_ext.get(d, one[d]) - one[d])
        step = math.ceil(grow / max(1, cl[i].extent - 1)) if grow else 0
        two[d] = one[d] + step
    return two


def excess_bytes(p: Pipeline, s: Schedule, decided_only: bool = False) -> float:
    """Capacity traffic of every non-inlined stage (with `decided_only`, of the stages `s`
    decides: a partial schedule's undecided stages are the same for all its siblings)."""
    n = build(p, s, check=False)
    return sum(stage_excess_bytes(n, name) for name in n.placements if not decided_only or name in s.stages)


def penalty_ms(p: Pipeline, s: Schedule, decided_only: bool = False) -> float:
    """The capacity traffic's time at DRAM bandwidth, in ms (a prediction, 0 when reuse fits in cache)."""
    return excess_bytes(p, s, decided_only) / (DRAM_GBS * 1e9) * 1e3
