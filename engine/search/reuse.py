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
penalty in ms; a schedule whose reuse fits in cache gets 0, so V alone ranks those.

Set conflicts in the L1 data cache (32 KiB: 64 sets of 8 ways, the common x86 L1D) add the
bytes re-read from L2 because rows that a loop level reuses share a set: rows a multiple of
4 KiB apart (1024-float rows) all land in one set, so 16 rows of one line each need twice the
8 ways although they fill 1 KiB. Per stage, the innermost of its own loop levels whose one
iteration puts more lines of one buffer in a set than the ways, although they would fit in
L1 were it fully associative, loses those sets' lines that two consecutive iterations share,
on every iteration; so does one whose lines exceed L1 when each holds under half a line of
its row (a strided walk: a line per element). Wide rows beyond L1 are streams that L2 and
the prefetchers serve at the arithmetic's pace: not counted. This is
engine/heuristic.py's measured rule (ROW_LANES: more than 8 rows of strided vector loads
thrash L1) made a cost: charged at the cache bandwidth beyond what the stage's arithmetic at
the peak vector rate hides (a matmul's B block re-read from L2 under its FMAs costs nothing,
a row reduction's one load per element does). Measured on softmax (2048 x 1024, loaded
machine): its row max vectorized across 128 rows with the columns outside (V's favourite
among beam 10's states) ran in 15-18 ms, across 16 rows 8.5 ms, beam 3's k-blocked 16-row
template 4.3 ms, the heuristic's 8 rows 2.5-5 ms; one walking whole columns (all 2048
rows per column, 4 lanes, serial) 30 ms.

It is a coarse model (other stages' data in the same loops ignored, buffers assumed 4 KiB
aligned), used only to stop V from choosing what it cannot see.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache

import numpy as np

from ..costmodel.analytic import CACHE_BYTES, CACHE_GBS, DRAM_GBS, SCALAR_GFLOPS
from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..loops import Loop
from ..recipes import vector_target
from ..schedule import Schedule

LINE_FLOATS = 16  # float32 per 64-byte cache line
ELEM_BYTES = 4
LINE_BYTES = LINE_FLOATS * ELEM_BYTES
L1_SETS, L1_WAYS = 64, 8  # 32 KiB: addresses 4 KiB apart share a set
CORES = os.cpu_count() or 1  # as the analytic model's


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


@lru_cache(maxsize=1 << 16)  # siblings' loop nests repeat the same boxes
def _conflict_lines(box: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> int:
    """Lines of `box` (of a row-major buffer of `shape`, 4 KiB-aligned) that L1 cannot keep
    and that cost a line per few elements: those in sets holding more than the ways (cycling
    through a set, LRU misses every one) when the box would fit in a fully associative L1;
    beyond L1's capacity, all of them when its rows are under half a line (a strided walk),
    else 0 (wide rows: a stream the prefetchers serve)."""
    if not box or _streams(box):
        return 0
    pitch = [math.prod(shape[k + 1 :]) * ELEM_BYTES for k in range(len(shape))]
    rows = np.zeros(1, dtype=np.int64)
    for k, (lo, hi) in enumerate(box[:-1]):
        count = rows.size * (hi - lo + 1)
        if count > L1_SETS * L1_WAYS:  # more rows than L1 has lines: as many lines as rows, at least (counted, not built)
            return count if (box[-1][1] - box[-1][0] + 1) * 2 <= LINE_FLOATS else 0
        rows = (rows[:, None] + np.arange(lo, hi + 1, dtype=np.int64)[None, :] * pitch[k]).ravel()
    lo, hi = box[-1]
    first, last = (rows + lo * ELEM_BYTES) // LINE_BYTES, (rows + (hi + 1) * ELEM_BYTES - 1) // LINE_BYTES
    lines = first[:, None] + np.arange(int((last - first).max()) + 1)[None, :]
    per_set = np.bincount(lines[lines <= last[:, None]] % L1_SETS, minlength=L1_SETS)
    n = int(per_set.sum())
    if n > L1_SETS * L1_WAYS:  # beyond L1's capacity: lost whole when each line holds one row's few elements (a strided walk)
        return n if (hi - lo + 1) * 2 <= LINE_FLOATS else 0
    return int(per_set[per_set > L1_WAYS].sum())


def _streams(box: tuple[tuple[int, int], ...]) -> bool:
    """Can `box` not conflict, here or in any box that contains it? One row (its lines fill
    consecutive sets), or rows of at least half a line beyond L1's capacity (a stream)."""
    rows = math.prod(hi - lo + 1 for lo, hi in box[:-1])
    width = box[-1][1] - box[-1][0] + 1
    return rows < 2 or (width * 2 > LINE_FLOATS and rows * math.ceil(width / LINE_FLOATS) > L1_SETS * L1_WAYS)


def _buffer_shape(nest: LoopNest, buf: str) -> tuple[int, ...]:
    """The layout a buffer's rows have: a stage's allocation (a per-tile buffer's rows are the tile's), an input's shape."""
    pl = nest.placements.get(buf)
    return pl.allocation if pl is not None and pl.allocation else nest.pipeline.shape_of(buf)


def stage_conflict_bytes(nest: LoopNest, stage: str) -> float:
    """Bytes `stage`'s final definition re-reads from L2 because of L1 set conflicts (see the module doc)."""
    pl = nest.placements[stage]
    if pl.compute == "inline" or not pl.loops:
        return 0.0
    st = nest.pipeline.stage(stage)
    bufs = [(b, _buffer_shape(nest, b)) for b in nest.effective_sources(stage) + [stage]]
    names = [d.name for d in st.dims] + ([r.name for r in st.rdom] if st.is_reduction else [])
    own = pl.loops
    for i in range(len(own) - 1, -1, -1):  # innermost level first
        if own[i].kind == "vectorized" or own[i].extent < 2:
            continue
        one, two = _spans(own[i + 1 :]), _spans(own[i + 1 :], own[i])
        ranges = {v: (0, max(0, one.get(v, 1) - 1)) for v in names}
        boxes = [(nest.access_box(stage, b, ranges), shape) for b, shape in bufs]
        if all(not box or (len(box) > 1 and _streams(box) and box[-1][1] - box[-1][0] + 1 > LINE_FLOATS // 2) for box, _ in boxes):
            break  # wide streams only: so are the outer levels' boxes, which contain these
        lost = sum(_conflict_lines(box, shape) for box, shape in boxes) * LINE_BYTES
        if lost == 0:
            continue
        f1 = sum(_box_bytes(box) for box, _ in boxes)
        f2 = _footprint(nest, stage, [b for b, _ in bufs[:-1]], two)
        shared = max(0.0, 2 * f1 - f2)  # what two consecutive iterations both touch: reused, had it stayed
        if shared > 0:
            return min(shared, lost) * max(1, pl.realizations) * math.prod(lp.extent for lp in own[: i + 1])
    return 0.0


def excess_bytes(p: Pipeline, s: Schedule, decided_only: bool = False) -> float:
    """Capacity traffic of every non-inlined stage (with `decided_only`, of the stages `s`
    decides: a partial schedule's undecided stages are the same for all its siblings)."""
    n = build(p, s, check=False)
    return sum(stage_excess_bytes(n, name) for name in _stages(n, s, decided_only))


def conflict_bytes(p: Pipeline, s: Schedule, decided_only: bool = False) -> float:
    """L1 set-conflict traffic of every non-inlined stage (`decided_only` as for `excess_bytes`)."""
    n = build(p, s, check=False)
    return sum(stage_conflict_bytes(n, name) for name in _stages(n, s, decided_only))


def _stages(n: LoopNest, s: Schedule, decided_only: bool) -> list[str]:
    return [name for name in n.placements if not decided_only or name in s.stages]


def penalty_ms(p: Pipeline, s: Schedule, decided_only: bool = False) -> float:
    """The capacity traffic's time, in ms (a prediction, 0 when reuse fits in cache): what
    misses L2 at DRAM bandwidth, plus per
    stage its L1 conflict traffic at the cache bandwidth beyond the time of its arithmetic
    at the peak vector rate on every core."""
    n = build(p, s, check=False)
    peak = SCALAR_GFLOPS * vector_target().lanes * 1e9  # one core's; cache bandwidth is per core too
    ms = 0.0
    for name in _stages(n, s, decided_only):
        ms += stage_excess_bytes(n, name) / (DRAM_GBS * 1e9) * 1e3
        l1 = stage_conflict_bytes(n, name) / (CACHE_GBS * 1e9)
        if l1 > 0:
            # Both sides per core, shared by the cores the stage's parallel loops use (as in the
            # analytic model), so the charge does not depend on how many cores the host has.
            used = min(CORES, math.prod(lp.extent for lp in n.placements[name].loops if lp.kind == "parallel"))
            ms += max(0.0, l1 - p.stage(name).flops() / peak) / max(1, used) * 1e3
    return ms
