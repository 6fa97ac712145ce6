"""An analytic roofline estimate over the loop-nest model (no learning).

Per stage: arithmetic time from the points actually computed (recomputation included),
sped up by the innermost vector width and the parallel loops' extent (up to the core
count); memory time from the bytes each realization writes and reads, at a bandwidth
that depends on whether the buffer fits in cache; plus a fixed cost per realization.
The stage takes the larger of arithmetic and memory time. Constants are rough figures
for one modern x86 core; the learned model (issue: cost model) replaces this.

A stage's inputs to the formula (its work, lanes, parallel extent, traffic, realizations)
depend on exactly what the loop nest's `stage_key` covers, so they are cached per pipeline
by it, as the feature rows are; a batch evaluates the formula once, as arrays.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..ir import BYTES_PER_ELEMENT, Pipeline
from ..loopnest import LRU, LoopNest, gc_paused, pipeline_cache
from ..schedule import Schedule
from .base import BatchedModel, Prediction, nests_of, predictions

SCALAR_GFLOPS = 6.0  # per core, plain serial loops
MAX_LANES = 16
CACHE_BYTES = 1 << 20  # per core L2: buffers below this stream from cache
CACHE_GBS, DRAM_GBS = 60.0, 12.0
REALIZATION_US = 0.05  # allocation and loop set-up per realization
TERMS_CACHE = 50_000  # stages per pipeline (a few hundred bytes each)
# A stage's terms: work (flops), vector lanes, parallel extent, whether its buffer fits in
# cache, bytes moved, realizations. An inlined stage's give 0 ms.
N_TERMS = 6
INLINE_TERMS = (0.0, 1.0, 1.0, 1.0, 0.0, 0.0)


class _Terms:
    """Per pipeline: each stage's terms by (stage, its `stage_key`)."""

    def __init__(self) -> None:
        self.terms: LRU[tuple[str, Hashable], tuple[float, ...]] = LRU(TERMS_CACHE)


def stage_terms(nest: LoopNest, name: str) -> tuple[float, ...]:
    """The formula's inputs for one stage (cached per pipeline by what they depend on)."""
    cache = pipeline_cache(nest.pipeline, "analytic", _Terms).terms
    key = (name, nest.stage_key(name))
    got = cache.get(key)
    if got is None:
        got = cache.put(key, _compute_terms(nest, name))
    return got


def _compute_terms(nest: LoopNest, name: str) -> tuple[float, ...]:
    if nest.placements[name].compute == "inline":
        return INLINE_TERMS
    per_point = flops_per_point(nest, name)
    reads = sum(math.prod(nest.required_region(src, name, per="realization")) for src in nest.effective_sources(name))
    return terms_of(nest, name, per_point, reads)


def flops_per_point(nest: LoopNest, name: str) -> int:
    """FLOPs per point of stage `name` with its inlined stages substituted, the reduction
    included (an update's FLOPs and its accumulation per reduction point)."""
    st = nest.pipeline.stage(name)
    per_point = nest.effective_flops(st.value)
    if st.update is not None:
        red = math.prod(r.extent for r in st.rdom) if st.rdom else 1
        per_point += (nest.effective_flops(st.update) + 1) * red
    return per_point


def terms_of(nest: LoopNest, name: str, per_point: int, reads: int) -> tuple[float, ...]:
    """The terms of non-inlined stage `name` given its FLOPs per point (inlined stages
    substituted, reduction included) and the points of its effective sources one
    realization reads (the features compute both for their row and pass them here)."""
    return terms_from(placed_terms(nest, name), per_point, reads)


def placed_terms(nest: LoopNest, name: str) -> tuple[int, int, int, int, int, bool]:
    """What of `terms_of` stage `name`'s placement alone fixes (see `LoopNest.placement_key`;
    the features cache it with their placement-only values): points computed, vector
    lanes, parallel extent, buffer bytes, realizations, and whether it has an update."""
    pl = nest.placements[name]
    loops = pl.loops
    lanes = next((lp.extent for lp in reversed(loops) if lp.kind == "vectorized"), 1)
    par = math.prod(lp.extent for lp in loops if lp.kind == "parallel")
    alloc = math.prod(pl.allocation) * BYTES_PER_ELEMENT
    update = nest.pipeline.stage(name).update is not None
    return pl.points_total, lanes, par, alloc, pl.realizations, update


def terms_from(placed: tuple[int, int, int, int, int, bool], per_point: int, reads: int) -> tuple[float, ...]:
    """`terms_of` from the stage's `placed_terms`."""
    points, lanes, par, alloc, realizations, update = placed
    work = max(per_point, 1) * points
    reads *= BYTES_PER_ELEMENT
    # Integer products stay exact until here, one rounding each (as the scalar formula had).
    traffic = points * BYTES_PER_ELEMENT * (2 if update else 1) + reads * realizations
    return (float(work), float(min(lanes, MAX_LANES)), float(par), float(alloc <= CACHE_BYTES), float(traffic), float(realizations))


def _ms(terms: Any, cores: int, minimum: Callable[[Any, Any], Any], maximum: Callable[[Any, Any], Any]) -> Any:
    """The formula, on one stage's terms (floats, with min and max) or on columns of many
    (arrays, with np.minimum and np.maximum): the larger of arithmetic and memory time,
    plus a fixed cost per realization."""
    work, lanes, par, fits, traffic, real = terms
    used = minimum(par, cores)
    compute_s = work / (SCALAR_GFLOPS * lanes * used * 1e9)
    gbs = fits * CACHE_GBS + (1 - fits) * DRAM_GBS  # fits is 0 or 1: exactly one of the two
    memory_s = traffic / (gbs * 1e9 * used)
    return 1000 * (maximum(compute_s, memory_s) + real * REALIZATION_US * 1e-6)


def stage_ms_array(terms: np.ndarray, cores: int) -> np.ndarray:
    """Estimated ms of each row of `terms` ([n, N_TERMS]) on `cores` cores."""
    return _ms(terms.T, cores, np.minimum, np.maximum)


class AnalyticModel(BatchedModel):
    name = "analytic roofline estimate"

    def __init__(self, cores: int | None = None) -> None:
        self.cores = cores or os.cpu_count() or 1

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """`nests` may be passed when the caller already built the loop nests."""
        with gc_paused():
            built = nests_of(p, schedules, nests)
            terms = np.array([stage_terms(nest, st.name) for nest in built for st in p.stages], dtype=np.float64)
        n = len(p.stages)
        ms = stage_ms_array(terms.reshape(-1, N_TERMS), self.cores).reshape(len(built), n)
        rows = ms.tolist()  # summed as Python floats in stage order, as one schedule alone is
        return predictions(self.name, p, [sum(row) for row in rows], rows)

    def stage_ms(self, nest: LoopNest) -> dict[str, float]:
        """Estimated ms per stage (0 for an inlined one)."""
        return self.predict_many(nest.pipeline, [nest.schedule], [nest])[0].stages

    def ms_of_terms(self, terms: tuple[float, ...]) -> float:
        """Estimated ms of one stage from its terms (`terms_of`)."""
        return float(_ms(terms, self.cores, min, max))  # one stage: plain floats beat 1-row arrays
