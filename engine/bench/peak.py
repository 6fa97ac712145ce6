"""A floating-point peak microbenchmark: the yardstick for GFLOP/s figures.

Each element runs 16 independent chains of `v = v*v + b` (one fused multiply-add each,
which fast-math cannot fold away as it can a linear chain), vectorized to the target's
width and spread over all cores. The best of several timed runs approximates the
machine's FMA throughput.
"""

from __future__ import annotations

import os
import time

import halide as hl
import numpy as np


def fma_peak_gflops(chains: int = 16, depth: int = 64, repeats: int = 30) -> dict[str, float]:
    t = hl.get_jit_target_from_environment()
    lanes = 16 if t.has_feature(hl.TargetFeature.AVX512) else 8 if t.has_feature(hl.TargetFeature.AVX2) else 4
    threads = int(os.environ.get("HL_NUM_THREADS") or os.cpu_count() or 1)
    x, xo = hl.Var("x"), hl.Var("xo")
    b = hl.Param(hl.Float(32), "b", 1e-4)
    vs = [hl.cast(hl.Float(32), x + j) * hl.f32(1e-7) for j in range(chains)]
    for _ in range(depth):
        vs = [v * v + b for v in vs]
    total = vs[0]
    for v in vs[1:]:
        total = total + v
    f = hl.Func("fma_peak")
    f[x] = total
    block = lanes * 64
    f.split(x, xo, x, block).vectorize(x, lanes).parallel(xo)
    f.compile_jit(t)
    n = block * 16 * threads
    out = hl.Buffer(hl.Float(32), [n])
    f.realize(out)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f.realize(out)
        times.append(time.perf_counter() - t0)
    flops = (2 * depth * chains + chains - 1) * n
    best, median = flops / min(times) / 1e9, flops / float(np.median(times)) / 1e9
    return {"best_gflops": best, "median_gflops": median, "lanes": lanes, "threads": threads}
