"""Where a model's heuristic schedule loses to ONNX Runtime, layer by layer (README, "Kernels
at the roofline", session 10): ONNX Runtime's per-node profile (one thread, its fused nodes:
a Conv+Relu is one FusedConv) against Halide's per-Func profiler, both scaled to the run's
own unprofiled time. Each of our stages is charged to the ONNX node of its name (the importer
names stages after nodes; a conv's padding `X_pad` to `X`), a stage ONNX Runtime fused away
(a Relu, a padding) to its only consumer's node when that has one, else to its first source's. Output: the rows sorted by ms lost.

Usage: [HL_JIT_TARGET=...] .venv/bin/python scripts/layer_profile.py MODEL.onnx [--top 25] [--schedule F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HL_THREADS = os.environ.setdefault("HL_NUM_THREADS", "1")
if HL_THREADS != "1":  # times are the calling thread's CPU time: other threads' work would go uncounted
    sys.exit(f"layer_profile times by thread CPU time: run with HL_NUM_THREADS=1, not {HL_THREADS}")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _key(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_")


def ort_profile(model: str, feed: dict, reps: int) -> tuple[dict[str, tuple[str, float]], float, Any]:
    """ONNX Runtime (1 thread): node key -> (op, ms a run), the unprofiled ms a run (CPU time)
    and its first output (what our schedule is checked against)."""
    import onnxruntime as ort  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    plain = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    first = plain.run(None, feed)[0]
    t0 = time.thread_time()
    for _ in range(reps):
        plain.run(None, feed)
    whole = (time.thread_time() - t0) / reps * 1e3
    with tempfile.TemporaryDirectory() as d:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "ort")
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        for _ in range(reps):
            sess.run(None, feed)
        events = json.loads(Path(sess.end_profiling()).read_text())
    per: dict[str, list] = defaultdict(lambda: ["", 0.0])
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            k = re.sub(r"(_output_0)?(_nchwc)?$", "", _key(e["name"][: -len("_kernel_time")]))
            per[k][0] = e.get("args", {}).get("op_name", "")
            per[k][1] += e["dur"] / 1e3 / reps
    total = sum(v[1] for v in per.values()) or 1.0
    return {k: (op, ms * whole / total) for k, (op, ms) in per.items()}, whole, first


def ours_profile(p: Any, sched: Any, inputs: dict, reps: int, ref: Any) -> tuple[dict[str, float], float]:
    """Our schedule, its first output checked against `ref` (ONNX Runtime's): stage -> ms a run
    (the profiler's shares scaled to the unprofiled CPU time)."""
    from engine import halide_backend as HB  # noqa: PLC0415
    from engine.worker import capture_fds  # noqa: PLC0415
    from scripts.cpu_ab import compile_checked  # noqa: PLC0415

    run = compile_checked(p, {"ours": sched.to_json()}, inputs, {p.outputs[0]: ref}, "ONNX Runtime")["ours"]
    t0 = time.thread_time()
    for _ in range(reps):
        run()
    whole = (time.thread_time() - t0) / reps * 1e3
    lowp = HB.lower(p, sched)
    lowp.compile(profile=True)
    keep2 = lowp.bind(inputs)
    runp = lowp.runner(HB.output_arrays(p))

    def runs() -> None:
        for _ in range(max(reps, int(300 / max(whole, 0.01)))):
            runp()

    totals = lowp.profile_totals(capture_fds(runs))
    del keep2
    s = sum(totals.values()) or 1.0
    return {k: whole * v / s for k, v in totals.items()}, whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--schedule", help="a schedule JSON file (default: the heuristic's)")
    args = ap.parse_args()
    from engine import api  # noqa: PLC0415
    from engine import reference as R  # noqa: PLC0415
    from engine.halide_backend import target_string  # noqa: PLC0415
    from engine.heuristic import plan  # noqa: PLC0415
    from engine.schedule import Schedule  # noqa: PLC0415

    p = api.load_pipeline(args.model)
    pl = plan(p)
    sched = Schedule.from_json(json.loads(Path(args.schedule).read_text())) if args.schedule else pl.schedule
    inputs = R.make_inputs(p, 0)
    names = p.source.get("input_names", {})
    feed = {names.get(i.name, i.name): inputs[i.name] for i in p.inputs if not i.weight}
    ort_ms, ort_whole, ort_out = ort_profile(args.model, feed, args.reps)
    ours, our_whole = ours_profile(p, sched, inputs, args.reps, ort_out)
    # A stage of a node's name is that node's; one ONNX Runtime fused away (a Conv whose ReLU
    # names the FusedConv, a padding) its consumer's node, else its first source's.
    group = {st.name: _key(st.name) for st in p.stages if _key(st.name) in ort_ms}
    # A node ONNX Runtime fused and named after its last op (Conv + BatchNormalization ->
    # `..._2_1_BatchNormalization`): matched by the layer's prefix (`..._2`) where one node has it.
    prefix = defaultdict(list)
    for k in ort_ms:
        prefix[re.sub(r"_\d+_[A-Za-z]+$", "", k)].append(k)
    for st in p.stages:
        ks = prefix.get(re.sub(r"_\d+_[A-Za-z]+$", "", _key(st.name)), [])
        if st.name not in group and len(ks) == 1 and st.is_reduction:
            group[st.name] = ks[0]
    for st in reversed(p.stages):
        c = next((c for c in p.consumers(st.name) if c in group), None)
        if st.name not in group and c and len(p.consumers(st.name)) == 1:
            group[st.name] = group[c]
    for st in p.stages:
        src = next((s for s in st.sources() if s in group), None)
        group.setdefault(st.name, group[src] if src else _key(st.name))
    mine: dict[str, float] = defaultdict(float)
    for n, ms in ours.items():
        mine[group.get(n, _key(n))] += ms
    rows = sorted(set(mine) | set(ort_ms), key=lambda k: -(mine.get(k, 0.0) - ort_ms.get(k, ("", 0.0))[1]))
    load = os.getloadavg()[0]
    print(f"{p.name}: target {target_string()}, load {load:.1f}; ours {our_whole:.3f} ms, ORT {ort_whole:.3f} ms (CPU time, 1 thread)")
    print(f"{'node':60s} {'ORT op':12s} {'ours ms':>8s} {'ORT ms':>8s} {'lost':>7s}  our shape / rule")
    for k in rows[: args.top]:
        op, o = ort_ms.get(k, ("-", 0.0))
        st = next((s for s in p.stages if _key(s.name) == k), None)
        info = f"{st.op} {st.shape} {pl.rules.get(st.name, '')[:70]}" if st else ""
        print(f"{k[-60:]:60s} {op[:12]:12s} {mine.get(k, 0.0):8.3f} {o:8.3f} {mine.get(k, 0.0) - o:7.3f}  {info}")


if __name__ == "__main__":
    main()
