"""Ours / ONNX Runtime for whole models, lowered as the engine runs them (segments.lower:
segments for pipelines of >= 48 stages), from one source tree: run it once per tree,
alternating trees, to compare them (README, issue 14 session 15). ORT on one thread and our
schedule with HL_NUM_THREADS=1, timed by this thread's CPU time, interleaved rounds, medians;
our output checked against ORT's (max abs error over max |ORT|).

Usage: .venv/bin/python scripts/engine_ab.py ROOT ROUNDS MODEL.onnx [MODEL.onnx ...]
(e.g. ROOT = a worktree of an older commit, `git worktree add --detach /tmp/base REF`)
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HL_NUM_THREADS", "1")


def main() -> None:
    root, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    sys.path.insert(0, root)  # the tree under test: its engine, heuristic and segments
    import numpy as np  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from engine import api, segments  # noqa: PLC0415
    from engine import halide_backend as HB  # noqa: PLC0415
    from engine import reference as R  # noqa: PLC0415
    from engine.heuristic import heuristic_schedule  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from scripts.cpu_ab import time_interleaved  # noqa: PLC0415

    for m in models:
        p = api.load_pipeline(m)
        inputs = R.make_inputs(p, 0)
        low = segments.lower(p, heuristic_schedule(p))
        low.compile()
        keep = low.bind(inputs)
        outs = HB.output_arrays(p)
        run = low.runner(outs)
        run()
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])
        names = p.source.get("input_names", {})
        feed = {names.get(i.name, i.name): inputs[i.name] for i in p.inputs if not i.weight}
        ref = sess.run(None, feed)[0]
        err = float(np.abs(outs[p.outputs[0]].reshape(ref.shape) - ref).max() / np.abs(ref).max())
        t = time_interleaved({"ort": lambda s=sess, f=feed: s.run(None, f), "ours": run}, rounds)
        o, u = statistics.median(t["ort"]), statistics.median(t["ours"])
        print(
            f"{Path(root).name} {Path(m).name} {type(low).__name__} ort {o:.3f} ms ours {u:.3f} ms ratio {u / o:.3f} relerr {err:.1e}",
            flush=True,
        )
        del keep


if __name__ == "__main__":
    main()
