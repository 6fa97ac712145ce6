"""Same-run A/B of the heuristic's schedules for conv layer shapes (README, "Kernels at the
roofline", session 7 depthwise/projection figures): the heuristic schedule each source tree
makes (e.g. an old commit checked out with `git worktree add /tmp/base 1d13045`, and this
tree) for one small ONNX model per case, timed against ONNX Runtime on the same input.

Cases: `dw:C:H:S[:r]` a 3x3 depthwise conv of C channels at HxH, stride S, pad 1, + bias
(r: + ReLU6); `pw:CI:CO:H[:r]` a 1x1 conv + bias (r: + ReLU); `pr:CI:CO:H` MobileNet's
projection (depthwise + the CI->CO 1x1 with no pointwise consumer + the CO->CI 1x1 + ReLU);
`cv:CI:CO:H:K:S[:FLAGS]` a dense KxK conv, stride S, pad K//2, + bias (FLAGS: r + ReLU,
p a ReLU before it, m a 3x3 max pool (stride 1, pad 1) before it: the conv reads a stage
whose region may grow, as a network's convs do (its padding stops the growth); ResNet-50's 3x3 and
strided 1x1 shapes); or a path to an .onnx file. Random weights, fixed seed.

Two clocks: `--clock wall` measures through the runner (a worker process, every result
verified; best and median of rounds), `--clock cpu` times this thread's CPU time in this
process (HL_NUM_THREADS=1, ORT on one thread; outputs checked against ORT's), which counts
less of the time other jobs take on a shared core. Rounds interleaved, order alternating.

Usage: [HL_JIT_TARGET=...] .venv/bin/python scripts/conv_ab.py --clock cpu --rounds 5 CASES ROOT [ROOT ...] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# --clock cpu times this thread's CPU time (time.thread_time): Halide's worker threads' time
# would be missing, so Halide runs on this thread (set before halide is imported; main refuses
# any other value for that clock).
HL_THREADS = os.environ.setdefault("HL_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_model(case: str, folder: Path) -> Path:
    """The ONNX model of `case` (see the module docstring), written into `folder`."""
    if case.endswith(".onnx"):
        return Path(case)
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    rng = np.random.default_rng(0)

    def init(n: str, shape: tuple[int, ...]) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), n)

    f = case.split(":")
    kind, act = f[0], len(f) > 4
    inits, nodes = [], []
    if kind == "dw":
        c, h, st = int(f[1]), int(f[2]), int(f[3])
        ci, co, ho = c, c, (h - 1) // st + 1
        nodes.append(
            helper.make_node("Conv", ["x", "W", "b"], ["c" if act else "y"], kernel_shape=[3, 3], strides=[st] * 2, pads=[1] * 4, group=c)
        )
        inits += [init("W", (c, 1, 3, 3)), init("b", (c,))]
        if act:
            inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
            nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    elif kind == "pw":
        ci, co, h = int(f[1]), int(f[2]), int(f[3])
        ho = h
        nodes.append(helper.make_node("Conv", ["x", "W", "b"], ["c" if act else "y"], kernel_shape=[1, 1]))
        inits += [init("W", (co, ci, 1, 1)), init("b", (co,))]
        if act:
            nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif kind == "cv":
        ci, co, h, k, st = (int(v) for v in f[1:6])
        flags = f[6] if len(f) > 6 else ""
        act = "r" in flags
        ho = (h + 2 * (k // 2) - k) // st + 1
        if "p" in flags:
            nodes.append(helper.make_node("Relu", ["x"], ["xr"]))
        if "m" in flags:
            nodes.append(helper.make_node("MaxPool", ["x"], ["xm"], kernel_shape=[3, 3], pads=[1] * 4))
        src = "xr" if "p" in flags else "xm" if "m" in flags else "x"
        conv = helper.make_node("Conv", [src, "W", "b"], ["c" if act else "y"], kernel_shape=[k, k], strides=[st] * 2, pads=[k // 2] * 4)
        nodes.append(conv)
        inits += [init("W", (co, ci, k, k)), init("b", (co,))]
        if act:
            nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif kind == "pr":
        ci, mid, h = int(f[1]), int(f[2]), int(f[3])
        co, ho = ci, h
        nodes += [
            helper.make_node("Conv", ["x", "Wd", "bd"], ["d"], kernel_shape=[3, 3], pads=[1] * 4, group=ci),
            helper.make_node("Conv", ["d", "W", "b"], ["p"], kernel_shape=[1, 1]),
            helper.make_node("Conv", ["p", "W2", "b2"], ["c"], kernel_shape=[1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ]
        inits += [init("Wd", (ci, 1, 3, 3)), init("bd", (ci,)), init("W", (mid, ci, 1, 1)), init("b", (mid,))]
        inits += [init("W2", (ci, mid, 1, 1)), init("b2", (ci,))]
    else:
        raise SystemExit(f"unknown case {case!r}")
    graph = helper.make_graph(
        nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ci, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, co, ho, ho])], inits,
    )  # fmt: skip
    path = folder / (case.replace(":", "_") + ".onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def schedules(root: str, paths: dict[str, Path]) -> dict[str, Any]:
    """The heuristic schedule (JSON) source tree `root` makes for each model, in a child process."""
    code = (
        f"import sys, json; sys.path.insert(0, {root!r})\n"
        "from engine import api\nfrom engine.heuristic import heuristic_schedule\n"
        "print(json.dumps({c: heuristic_schedule(api.load_pipeline(p)).to_json() for c, p in json.loads(sys.argv[1]).items()}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, json.dumps({c: str(p) for c, p in paths.items()})], capture_output=True, text=True, cwd=root
    )
    if res.returncode:
        raise SystemExit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _cpu(p: Any, scheds: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    """Thread CPU time (ms a run) of ONNX Runtime (one thread) and each schedule, outputs
    checked against ONNX Runtime's."""
    import onnxruntime as ort  # noqa: PLC0415

    from engine import reference as R  # noqa: PLC0415
    from scripts.cpu_ab import compile_checked, time_interleaved  # noqa: PLC0415

    inputs = R.make_inputs(p, 0)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(p.source["model"], so, providers=["CPUExecutionProvider"])
    names = p.source.get("input_names", {})
    feed = {names.get(i.name, i.name): inputs[i.name] for i in p.inputs if not i.weight}
    ref = sess.run(None, feed)[0]
    runs: dict[str, Callable[[], object]] = {"onnxruntime": lambda: sess.run(None, feed)}
    runs.update(compile_checked(p, scheds, inputs, {p.outputs[0]: ref}, "ONNX Runtime"))
    return time_interleaved(runs, rounds)  # repetitions sized by ONNX Runtime's run


def _wall(p: Any, scheds: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    from engine import api  # noqa: PLC0415
    from engine import reference as R  # noqa: PLC0415
    from engine.bench.peers import check_peer, make_peers, time_peer  # noqa: PLC0415
    from engine.measure import Runner  # noqa: PLC0415
    from engine.schedule import Schedule  # noqa: PLC0415

    inputs = R.make_inputs(p, 0)
    refs, method = R.reference(p, inputs)
    peer = make_peers(p, inputs, 1)["onnxruntime"]
    assert not isinstance(peer, str) and check_peer(peer, p, refs, method).ok
    times: dict[str, list[float]] = {k: [] for k in ["onnxruntime", *scheds]}
    with Runner(1) as runner:
        for r in range(rounds):
            for label in list(scheds) if r % 2 == 0 else list(scheds)[::-1]:
                m = api.measure(p, Schedule.from_json(scheds[label]), runner, None, min_time_s=0.3, timeout_s=600.0, profile=False)
                if not (m.ok and m.verified):
                    raise SystemExit(f"{p.name} {label}: {m.error}")
                times[label] += [m.min_ms, m.median_ms]
            t = time_peer(peer, 0.3)
            times["onnxruntime"] += [t.min_ms, t.median_ms]
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases")
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.clock == "cpu" and HL_THREADS != "1":
        ap.error(f"--clock cpu times this thread's CPU time, so Halide must run on it alone: HL_NUM_THREADS={HL_THREADS} (unset or 1)")
    from engine import api  # noqa: PLC0415
    from engine.halide_backend import target_string  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        paths = {c: build_model(c, Path(tmp)) for c in args.cases.split(",")}
        by_root = {r: schedules(r, paths) for r in args.roots}
        labels = {r: Path(r).name or r for r in args.roots}
        result: dict[str, Any] = {"target": target_string(), "clock": args.clock, "rounds": args.rounds, "load_start": os.getloadavg()}
        result["hl_num_threads"] = 1  # cpu: this process's (checked above); wall: Runner(1)'s workers
        for c, path in paths.items():
            p = api.load_pipeline(str(path))
            scheds = {labels[r]: by_root[r][c] for r in args.roots}
            times = (_cpu if args.clock == "cpu" else _wall)(p, scheds, args.rounds)
            ort_best, ort_med = min(times["onnxruntime"]), statistics.median(times["onnxruntime"])
            row = {"onnxruntime": {"best_ms": ort_best, "median_ms": ort_med}}
            for label in scheds:
                b, m = min(times[label]), statistics.median(times[label])
                row[label] = {"best_ms": b, "median_ms": m, "best_over_ort": b / ort_best, "median_over_ort": m / ort_med}
            result[c] = row
            cells = " | ".join(
                f"{k}: {v['best_ms']:.3f} ({v.get('best_over_ort', 1):.2f}x) med {v['median_ms']:.3f} ({v.get('median_over_ort', 1):.2f}x)"
                for k, v in row.items()
            )
            print(f"{c}: {cells}", flush=True)
    from scripts.cpu_ab import finish  # noqa: PLC0415

    finish(result, args.out)


if __name__ == "__main__":
    main()
