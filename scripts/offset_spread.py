"""How much a schedule's run time depends on where its input buffers sit (README, "Session 13:
denormals flushed"): the heuristic schedule of a `conv_ab.py` case (or an .onnx file), its
inputs copied to 0..4032 bytes past a page boundary, CPU time per run at each offset, one
thread. Run with SCHEDULE_EXPLORER_DENORMALS=keep to see IEEE denormals' spread.

Usage: .venv/bin/python scripts/offset_spread.py CASE [CASE ...] [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HL_NUM_THREADS", "1")  # thread CPU time: Halide on this thread only
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from engine import api, fpenv
from engine import halide_backend as HB
from engine import reference as R
from engine.heuristic import heuristic_schedule
from scripts.conv_ab import build_model

OFFSETS = (0, 64, 128, 1024, 2048, 3072, 4032)


def at_offset(a: np.ndarray, off: int) -> np.ndarray:
    """A copy of `a` starting `off` bytes past a 4096-byte boundary."""
    raw = np.empty(a.nbytes + 8192, np.uint8)
    start = (-raw.ctypes.data) % 4096 + off
    b = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    b[...] = a
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            p = api.load_pipeline(str(build_model(case, Path(tmp))))
            low = HB.lower(p, heuristic_schedule(p))
            low.compile()
            base = R.make_inputs(p, 0)
            outs = HB.output_arrays(p)
            ms = []
            for off in OFFSETS:
                ins = {k: at_offset(v, off) for k, v in base.items()}
                keep = low.bind(ins)
                run = low.runner(outs)
                for _ in range(3):
                    run()
                t0 = time.thread_time()
                for _ in range(args.runs):
                    run()
                ms.append((time.thread_time() - t0) / args.runs * 1e3)
                del keep
            csr = fpenv.mxcsr()
            spread = " ".join(f"{m:.2f}" for m in ms)
            print(f"{case}: {spread} ms at offsets {OFFSETS}; min {min(ms):.3f}, max {max(ms):.3f}; MXCSR {csr and hex(csr)}")
    print(f"target {HB.target_string()}, denormals {'kept' if os.environ.get('SCHEDULE_EXPLORER_DENORMALS') == 'keep' else 'flushed'}")


if __name__ == "__main__":
    main()
