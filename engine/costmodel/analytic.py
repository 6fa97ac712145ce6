"""An analytic roofline estimate over the loop-nest model (no learning).

Per stage: arithmetic time from the points actually computed (recomputation included),
sped up by the innermost vector width and the parallel loops' extent (up to the core
count); memory time from the bytes each realization writes and reads, at a bandwidth
that depends on whether the buffer fits in cache; plus a fixed cost per realization.
The stage takes the larger of arithmetic and memory time. Constants are rough figures
for one modern x86 core; the learned model (issue: cost model) replaces this.
"""

from __future__ import annotations

import math
import os

from ..ir import BYTES_PER_ELEMENT, Pipeline
from ..loopnest import LoopNest, build
from ..schedule import Schedule
from .base import Prediction

SCALAR_GFLOPS = 6.0  # per core, plain serial loops
MAX_LANES = 16
CACHE_BYTES = 1 << 20  # per core L2: buffers below this stream from cache
CACHE_GBS, DRAM_GBS = 60.0, 12.0
REALIZATION_US = 0.05  # allocation and loop set-up per realization


class AnalyticModel:
    name = "analytic roofline estimate"

    def __init__(self, cores: int | None = None) -> None:
        self.cores = cores or os.cpu_count() or 1

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        """`nest` may be passed when the caller already built the loop nest of (p, s)."""
        stages = self.stage_ms(nest or build(p, s))
        return Prediction(self.name, sum(stages.values()), stages)

    def stage_ms(self, nest: LoopNest) -> dict[str, float]:
        """Estimated ms per stage (0 for an inlined one)."""
        return {name: self.stage_ms_of(nest, name) for name in nest.placements}

    def stage_ms_of(self, nest: LoopNest, name: str) -> float:
        """Estimated ms of one stage (the features ask stage by stage, for the rows they miss)."""
        p, pl = nest.pipeline, nest.placements[name]
        if pl.compute == "inline":
            return 0.0
        st = p.stage(name)
        per_point = nest.effective_flops(st.value)
        red = math.prod(r.extent for r in st.rdom) if st.rdom else 1
        if st.update is not None:
            per_point += (nest.effective_flops(st.update) + 1) * red
        work = max(per_point, 1) * pl.points_total
        loops = pl.loops
        lanes = next((lp.extent for lp in reversed(loops) if lp.kind == "vectorized"), 1)
        par = math.prod(lp.extent for lp in loops if lp.kind == "parallel")
        speed = SCALAR_GFLOPS * min(lanes, MAX_LANES) * min(par, self.cores) * 1e9
        compute_s = work / speed
        alloc = math.prod(pl.allocation) * BYTES_PER_ELEMENT
        bw = (CACHE_GBS if alloc <= CACHE_BYTES else DRAM_GBS) * 1e9 * min(par, self.cores)
        reads = sum(math.prod(nest.required_region(src, name, per="realization")) for src in nest.effective_sources(name))
        reads *= BYTES_PER_ELEMENT
        memory_s = (pl.points_total * BYTES_PER_ELEMENT * (2 if st.update is not None else 1) + reads * pl.realizations) / bw
        return 1000 * (max(compute_s, memory_s) + pl.realizations * REALIZATION_US * 1e-6)
