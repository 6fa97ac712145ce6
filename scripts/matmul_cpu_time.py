"""The 1024^3 matmul's hand schedule (B packed) against the unpacked one it replaced, timed
by this thread's CPU time (README, "Kernels at the roofline"): on a machine shared with other
jobs, wall-clock medians also count the time the scheduler gives to them, CPU time does not
(cache sharing still shows). One thread, in this process, rounds interleaved, every output
checked against a float64 product; the FMA peak is measured the same way, before and after.

Usage: [HL_JIT_TARGET=...] .venv/bin/python scripts/matmul_cpu_time.py [ROUNDS] [OUT.json]
"""

import json
import os
import sys
import time

import numpy as np

# time.thread_time counts this thread alone: Halide's worker threads' time would be missing,
# so Halide runs on this thread (set before halide is imported; any other value is refused).
HL_THREADS = os.environ.setdefault("HL_NUM_THREADS", "1")
if HL_THREADS != "1":
    raise SystemExit(f"HL_NUM_THREADS={HL_THREADS}: this script times this thread's CPU time, so Halide must run on it alone (unset or 1)")

from engine import halide_backend as HB  # noqa: E402
from engine import zoo  # noqa: E402
from engine.bench import peak as PK  # noqa: E402
from engine.bench.kernels import unpacked_matmul  # noqa: E402  # the control the bench runs too
from engine.hand_schedules import hand_schedule  # noqa: E402
from engine.measure import host_fingerprint  # noqa: E402
from engine.recipes import packed_block, vector_target  # noqa: E402


def main(rounds: int, out: str | None) -> None:
    p = zoo.get("matmul", "full")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    runs = {}
    for label, s in {"hand (B packed)": hand_schedule(p), "hand, B unpacked": unpacked_matmul(p)}.items():
        low = HB.lower(p, s)
        low.compile()
        keep = low.bind({"A": a, "B": b})
        outs = HB.output_arrays(p)
        run = low.runner(outs)
        run()
        err = float(np.abs(outs["C"] - ref).max())
        if err > 1e-2:
            raise SystemExit(f"{label}: max error {err} against the float64 product")
        runs[label] = (run, keep, [])
    peaks = [PK.fma_peak_gflops()["best_gflops"]]
    loads = [os.getloadavg()[0]]
    for _ in range(rounds):
        for run, _, times in runs.values():
            for _ in range(3):
                t0 = time.thread_time()
                run()
                times.append(time.thread_time() - t0)
    peaks.append(PK.fma_peak_gflops()["best_gflops"])
    loads.append(os.getloadavg()[0])
    flops = 2 * 1024**3
    peak = max(peaks)
    result = {
        "host": host_fingerprint(), "target": HB.target_string(), "block": packed_block(vector_target()), "load_1min": loads,
        "hl_num_threads": int(HL_THREADS), "clock": "time.thread_time (this thread's CPU time)",
        "fma_peak_gflops": peaks, "rounds": rounds,
        "kernels": {
            label: {"best_cpu_ms": 1e3 * min(t), "median_cpu_ms": 1e3 * float(np.median(t)), "best_gflops": flops / min(t) / 1e9,
                    "best_pct_of_peak": 100 * flops / min(t) / 1e9 / peak, "verified": True}
            for label, (_, _, t) in runs.items()
        },
    }  # fmt: skip
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else None)
