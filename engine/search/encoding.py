"""A schedule as a fixed-length real vector, and back: the space k-means, SVMs and CMA-ES see.

Per stage (in `space.order(p)`), every feature in [0, 1]:

- location: one-hot inline / root / at, and its granularity: 0 at root (computed once),
  log2(trips of the consumer loops enclosing the compute site) / log2(all its trips) when
  computed at a loop, 1 inline (computed per use). Locality is then one monotone axis.
- per pure dim, then per reduction variable: the tile size log2(largest stride of a loop
  over that dim) / log2(extent), 0 when the dim is not split;
- vector width (log2 / 4), parallel (flag, log2 of its extent / log2 of the stage's
  points), unroll (log2 / 3), reordered, innermost loop stride-1 over the last dim, fused;
- for a reduction, the initialization's vectorize and parallel flags.

Decoding goes the sampler's way (outputs to inputs), so it is legal by construction: for
each stage, the legal location nearest to the vector's location features is taken and
loops are sampled there (engine/sampler.py), the guides' decisions of that stage are added
where still legal, and the candidate whose encoding is nearest to the vector's slice wins.
`decode(encode(s), guides=[s])` is `s` exactly; without guides it is a nearby schedule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import loops as L
from .. import sampler
from ..ir import Pipeline, Stage
from ..schedule import Directive, Schedule, StageSchedule, final_loops, validate
from .space import is_prefix, order, with_decision

LOC = 4  # inline, root, at, granularity
TAIL = 7  # vector, parallel, parallel extent, unroll, reordered, contiguous, fused
LOC_WEIGHT = 2.0  # where a stage is computed matters more than any one loop choice


@dataclass
class Encoding:
    """The layout of one pipeline's vectors: a slice per stage, all features in [0, 1]."""

    p: Pipeline
    stages: list[str]
    slices: dict[str, slice]
    dim: int

    @staticmethod
    def of(p: Pipeline) -> Encoding:
        slices, k = {}, 0
        for name in order(p):
            s = p.stage(name)
            n = LOC + len(s.dims) + len(s.rdom) + TAIL + (2 if s.is_reduction else 0)
            slices[name] = slice(k, k + n)
            k += n
        return Encoding(p, list(slices), slices, k)

    @property
    def lo(self) -> np.ndarray:
        return np.zeros(self.dim)

    @property
    def hi(self) -> np.ndarray:
        return np.ones(self.dim)


def _lg(v: float) -> float:
    return math.log2(v) if v > 1 else 0.0


def _frac(num: float, den: float) -> float:
    return min(1.0, _lg(num) / _lg(den)) if den > 1 else 0.0


def location_features(p: Pipeline, sched: Schedule, loc: sampler.Location) -> list[float]:
    """[inline, root, at, granularity] of a location; `sched` must decide the consumer."""
    if loc[0] == "inline":
        return [1.0, 0.0, 0.0, 1.0]
    if loc[0] == "root":
        return [0.0, 1.0, 0.0, 0.0]
    loops = final_loops(p, sched, loc[1])
    k = next(i for i, lp in enumerate(loops) if lp.name == loc[2])
    return [0.0, 0.0, 1.0, _frac(math.prod(lp.extent for lp in loops[: k + 1]), math.prod(lp.extent for lp in loops))]


def _loops(s: Stage, update: bool, directives: tuple[Directive, ...]) -> list[L.Loop]:
    loops = L.initial_loops(s, update)
    for d in directives:
        loops = L.apply(loops, d)
    return loops


# (id(stage), decision) -> (stage, its loop features): the features of a decision depend on
# the stage alone, and decoding scores the same decisions (the guides', the sampler's repeats)
# again and again. The stage is kept with its entry, so an id is never reused while cached.
_LOOP_CACHE: dict[tuple[int, StageSchedule], tuple[Stage, list[float]]] = {}
_LOOP_CACHE_MAX = 200_000


def _loop_features(s: Stage, ss: StageSchedule) -> list[float]:
    key = (id(s), ss)
    hit = _LOOP_CACHE.get(key)
    if hit is not None and hit[0] is s:
        return hit[1]
    if len(_LOOP_CACHE) >= _LOOP_CACHE_MAX:
        _LOOP_CACHE.clear()
    out = _compute_loop_features(s, ss)
    _LOOP_CACHE[key] = (s, out)
    return out


def _compute_loop_features(s: Stage, ss: StageSchedule) -> list[float]:
    upd = s.is_reduction
    directives = ss.update if upd else ss.pure
    loops = _loops(s, upd, directives)
    out = []
    for d in s.dims + s.rdom:
        stride = max((pt.stride for lp in loops for pt in lp.parts if pt.dim == d.name), default=1)
        out.append(_frac(stride, d.extent))
    par = [lp.extent for lp in loops if lp.kind == "parallel"]
    vec = [lp.extent for lp in loops if lp.kind == "vectorized"]
    unr = math.prod(lp.extent for lp in loops if lp.kind == "unrolled")
    kinds = {d.kind for d in directives}
    last = s.dims[-1].name
    out += [
        min(1.0, _lg(max(vec, default=1)) / 4),
        1.0 if par else 0.0,
        _frac(math.prod(par), math.prod(lp.extent for lp in loops)) if par else 0.0,
        min(1.0, _lg(unr) / 3),
        1.0 if "reorder" in kinds else 0.0,
        1.0 if any(pt.dim == last and pt.stride == 1 for pt in loops[-1].parts) else 0.0,
        1.0 if "fuse" in kinds else 0.0,
    ]
    if upd:
        init = _loops(s, False, ss.pure)
        out += [float(any(lp.kind == "vectorized" for lp in init)), float(any(lp.kind == "parallel" for lp in init))]
    return out


def _features(p: Pipeline, sched: Schedule, name: str, ss: StageSchedule, heads: dict | None = None) -> np.ndarray:
    """The slice of stage `name` decided as `ss`, after `sched`'s decisions of its consumers
    (`heads` caches location features across candidates of one decision)."""
    s = p.stage(name)
    loc = sampler.location_of(ss)
    head = heads.get(loc) if heads is not None else None
    if head is None:
        head = location_features(p, sched, loc)
        if heads is not None:
            heads[loc] = head
    if loc[0] == "inline":
        return np.array(head + [0.0] * (len(s.dims) + len(s.rdom) + TAIL + (2 if s.is_reduction else 0)))
    return np.array(head + _loop_features(s, ss))  # a new list: the cached one is never changed


def stage_features(p: Pipeline, sched: Schedule, name: str) -> np.ndarray:
    """The slice of stage `name`: needs its decision and its consumers' (not its producers')."""
    return _features(p, sched, name, sched.of(name))


def encode(enc: Encoding, sched: Schedule) -> np.ndarray:
    """The vector of a complete schedule of `enc.p`."""
    x = np.zeros(enc.dim)
    for name in enc.stages:
        x[enc.slices[name]] = stage_features(enc.p, sched, name)
    return x


def _weights(n: int) -> np.ndarray:
    w = np.ones(n)
    w[:LOC] = LOC_WEIGHT
    return w


def _inherited(p: Pipeline, partial: Schedule, name: str, guides: Sequence[Schedule]) -> list[StageSchedule]:
    """The guides' decisions of `name` that are legal after `partial`'s decisions (a guide
    that `partial` follows exactly keeps all its decisions, see space.is_prefix)."""
    out: list[StageSchedule] = []
    keys: set[StageSchedule] = set()
    for g in guides:
        ss = g.stages.get(name)
        if ss is None or ss in keys:
            continue
        keys.add(ss)
        if is_prefix(partial, g) or sampler.still_legal(p, partial, name, ss):
            out.append(ss)
    return out


def decode(
    enc: Encoding, x: np.ndarray, rng: random.Random, guides: Sequence[Schedule] = (), k: int = 16, name: str = "decoded"
) -> Schedule:
    """The legal schedule nearest (stage by stage, greedily) to vector `x`: see the module doc.
    `k` loop sets are sampled per stage at the nearest location; ties go to the guides."""
    p = enc.p
    sched = Schedule(name=name)
    for st in enc.stages:
        target = np.asarray(x[enc.slices[st]], dtype=float)
        w = _weights(len(target))
        cands = _inherited(p, sched, st, guides)
        heads: dict = {}
        locs = sampler.locations(p, sched, st)
        heads_of = [_features(p, sched, st, StageSchedule(sampler.location_directives(lc)), heads)[:LOC] for lc in locs]
        loc = locs[int(np.argmin([np.sum((h - target[:LOC]) ** 2) for h in heads_of]))]
        if loc[0] == "inline":
            cands.append(StageSchedule(sampler.location_directives(loc)))
        else:
            extents, guard = sampler.placement_context(p, sched, st, loc)
            for _ in range(k):
                lp = sampler.sample_loops(p, st, extents, loc[0] == "at", guard, rng)
                cands.append(StageSchedule(sampler.location_directives(loc) + lp.pure, lp.update))
        best, best_d, keys = cands[0], math.inf, set()
        for c in cands:
            if c in keys:  # the sampler often repeats a loop set
                continue
            keys.add(c)
            d = float(np.sum(w * (_features(p, sched, st, c, heads) - target) ** 2))
            if d < best_d - 1e-12:  # strict: the earlier candidate (a guide's) wins ties
                best, best_d = c, d
        sched = with_decision(sched, st, best)
    sched.name = name
    for g in guides:  # the guides' packed copies that still apply (no candidate makes them)
        sampler.carry_wrappers(p, g, sched)
    validate(p, sched)
    return sched


def distance(enc: Encoding, a: np.ndarray, b: np.ndarray) -> float:
    """Weighted Euclidean distance between two vectors of `enc` (the decoder's metric)."""
    w = np.concatenate([_weights(enc.slices[s].stop - enc.slices[s].start) for s in enc.stages])
    return float(np.sqrt(np.sum(w * (a - b) ** 2)))
