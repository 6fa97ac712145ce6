"""A floating-point peak microbenchmark: the yardstick for GFLOP/s figures, and `bench peak`,
which checks it against PyTorch's matmul on the same host in the same run.

Each element runs independent chains of `v = v*v + b` (one fused multiply-add each, which
fast-math cannot fold away as it can a linear chain), vectorized to the target's width and
spread over all cores. The chains must cover FMA latency x throughput (4 cycles x 2 ports:
8 chains) and stay within the vector registers with the constant and a few for the
compiler (VectorTarget.fma_chains): 16 chains on AVX-512's 32 zmm registers, 12 on AVX2's
16 ymm registers. On a 2-core Zen 3 (AVX2) 16 chains read 62 GFLOP/s where PyTorch's
1024^3 matmul reaches 133 (139-169 quieter); 8, 10 and 12 chains read 172-180. The chains
are interleaved step by step (fma_kernel): on one Sapphire Rapids core 224.7 GFLOP/s with
AVX-512 (PyTorch's matmul 204.7 in the same minute), 126.2 with AVX2 alone.
The best of several short timed runs approximates the machine's FMA throughput.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any

import halide as hl
import numpy as np

from ..recipes import vector_target

# Steps of the depth loop unrolled: the loop's counter and branch per 16 FMAs read 218
# GFLOP/s on a Sapphire Rapids core, 225 unrolled by 8.
PEAK_UNROLL = 8


def fma_kernel(target: str, chains: int | None = None, depth: int = 64) -> tuple[hl.Func, hl.Param, int, int]:
    """The peak kernel for Halide target `target`: (Func, its one scalar Param, chains,
    lanes). `chains` None: as many as the target's registers hold (VectorTarget.fma_chains).

    The chains are a dimension of a small stage computed per vector of the output, its depth
    loop outermost and the chains unrolled inside it, so every step issues one FMA of each
    chain. Written as one expression (`v = v*v + b` nested `depth` deep per chain), LLVM
    emitted each chain's 64 FMAs back to back and the core's scheduler, not the registers,
    bounded the chains in flight: 104.7 GFLOP/s on one Sapphire Rapids core (two 512-bit FMA
    ports) where PyTorch's matmul reached 216.8; on Zen 4 (512-bit ops as two halves) the
    same code read the real peak, so it went unseen."""
    vt = vector_target(target)
    chains = chains or vt.fma_chains
    c, x, xo, xi, xm, xv = (hl.Var(n) for n in ("c", "x", "xo", "xi", "xm", "xv"))
    b = hl.Param(hl.Float(32), "b", 1e-4)
    r = hl.RDom([(0, depth)])
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    g = hl.Func("fma_chains")
    g[x, c] = hl.cast(hl.Float(32), x + c) * hl.f32(1e-7)
    # r.x * 0 only makes the update a loop over the depth
    g[x, c] = g[x, c] * g[x, c] + b + hl.cast(hl.Float(32), r.x) * hl.f32(0)
    total = g[x, 0]
    for j in range(1, chains):
        total = total + g[x, j]
    f = hl.Func("fma_peak")
    f[x] = total
    f.split(x, xo, xi, vt.lanes * 64).parallel(xo).split(xi, xm, xv, vt.lanes).vectorize(xv)
    g.compute_at(f, xm).vectorize(x).unroll(c)
    unroll = math.gcd(depth, PEAK_UNROLL)
    g.update().reorder(x, c, r.x).vectorize(x).unroll(c).split(r.x, ro, ri, unroll).unroll(ri)
    return f, b, chains, vt.lanes


def fma_peak_gflops(chains: int | None = None, depth: int = 64, repeats: int = 30) -> dict[str, Any]:
    """The FMA peak of this process's JIT target on all its Halide threads: best and median
    GFLOP/s over `repeats` runs, with the lanes, chains and threads used. `chains`: None
    for as many as the target's registers hold (VectorTarget.fma_chains)."""
    t = hl.get_jit_target_from_environment()
    f, _, chains, lanes = fma_kernel(str(t), chains, depth)
    threads = int(os.environ.get("HL_NUM_THREADS") or os.cpu_count() or 1)
    f.compile_jit(t)
    n = lanes * 64 * 16 * threads
    out = hl.Buffer(hl.Float(32), [n])
    f.realize(out)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f.realize(out)
        times.append(time.perf_counter() - t0)
    flops = (2 * depth * chains + chains - 1) * n
    best, median = flops / min(times) / 1e9, flops / float(np.median(times)) / 1e9
    return {"best_gflops": best, "median_gflops": median, "lanes": lanes, "chains": chains, "threads": threads, "target": str(t)}


def torch_matmul_gflops(n: int = 1024, threads: int | None = None, repeats: int = 10) -> dict[str, Any]:
    """PyTorch's float32 n x n x n matmul on `threads` threads (default: the Halide thread
    count): best and median GFLOP/s over `repeats` runs after two warm-up runs."""
    import torch  # noqa: PLC0415  # a peer, only for this benchmark

    threads = threads or int(os.environ.get("HL_NUM_THREADS") or os.cpu_count() or 1)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        out = torch.empty(n, n)
        for _ in range(2):
            torch.matmul(a, b, out=out)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.matmul(a, b, out=out)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(saved)
    flops = 2.0 * n**3
    return {"best_gflops": flops / min(times) / 1e9, "median_gflops": flops / statistics.median(times) / 1e9, "threads": threads}


def bench_peak(rounds: int = 5, n: int = 1024) -> dict[str, Any]:
    """The FMA peak and PyTorch's n^3 matmul, interleaved over `rounds` rounds (each round
    sees the same stretch of load). The peak is right when its best is at least PyTorch's
    best: a matmul can't run faster than the FMA units."""
    peaks: list[dict[str, Any]] = []
    torches: list[dict[str, Any]] = []
    loads: list[float] = []
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        peaks.append(fma_peak_gflops())
        torches.append(torch_matmul_gflops(n))
    pk = [p["best_gflops"] for p in peaks]
    tm = [t["best_gflops"] for t in torches]
    peak, torch_best = max(pk), max(tm)
    result = {
        "target": peaks[0]["target"], "lanes": peaks[0]["lanes"], "chains": peaks[0]["chains"], "threads": peaks[0]["threads"],
        "cores": os.cpu_count(), "rounds": rounds, "load_1min": loads,
        "peak_gflops": peak, "peak_round_best_gflops": pk, "peak_median_of_rounds_gflops": statistics.median(pk),
        "torch_matmul_n": n, "torch_gflops": torch_best, "torch_round_best_gflops": tm,
        "torch_median_of_rounds_gflops": statistics.median(tm),
        "torch_over_peak": torch_best / peak, "peak_at_least_torch": peak >= torch_best,
    }  # fmt: skip
    rows = [
        "| measure | best GFLOP/s | median of rounds | rounds (min..max) |",
        "|---|---|---|---|",
        f"| FMA peak ({result['chains']} chains x {result['lanes']} lanes, {result['threads']} threads) | {peak:.1f} | "
        f"{statistics.median(pk):.1f} | {min(pk):.1f}..{max(pk):.1f} |",
        f"| PyTorch matmul {n}^3 | {torch_best:.1f} | {statistics.median(tm):.1f} | {min(tm):.1f}..{max(tm):.1f} |",
        "",
        f"target {result['target']}; PyTorch / peak = {result['torch_over_peak']:.2f} "
        f"({'peak >= PyTorch: right' if result['peak_at_least_torch'] else 'PyTorch above the peak: the peak is WRONG'}); "
        f"load (1 min) {min(loads):.1f}..{max(loads):.1f} on {result['cores']} cores",
    ]
    result["table"] = "\n".join(rows)
    return result
