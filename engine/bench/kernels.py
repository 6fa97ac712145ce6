"""`bench kernels`: the kernels that dominate real networks against the FMA peak, ONNX Runtime
and PyTorch, all in the same run, rounds interleaved.

Each kernel runs as a built-in pipeline (its hand schedule where the zoo has one, and the
heuristic; the PyTorch peer from its operator records) and as an ONNX model of the same
shape built here with onnx.helper (imported, under the heuristic schedule, against ONNX
Runtime). On a host whose vectors are not AVX-512's, the hand schedule made for AVX-512
runs beside it: what following the target buys. Every Halide figure is a verified measurement; the peers are checked against
the same reference. Per round: the FMA peak, PyTorch's 1024^3 matmul, then every variant
of every kernel, so each sees the same stretch of load; figures are medians over rounds
with their min..max, and the 1-minute load average is recorded per round.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import api, zoo
from .. import reference as R
from ..halide_backend import target_string
from ..hand_schedules import hand_schedule
from ..heuristic import heuristic_schedule
from ..ir import Pipeline
from ..measure import Measurement, Runner, default_threads, host_fingerprint
from ..ops import Builder
from ..recipes import matmul_block, vector_target
from ..schedule import Schedule
from . import peak as PK  # through the module: bench fuzz's no_heavy_work patches it
from .core import median_cell
from .peers import Peer, PeerTiming, check_peer, make_peers, time_peer

AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"  # what the recipes were first tuned for
OTHER = "hand, AVX-512 blocks"
UNPACKED = "hand, B unpacked"  # matmul's hand schedule before B was packed (session 6's), as a control
CONTROLS = (OTHER, UNPACKED)  # variants run beside the product's own, never its "best"
# name -> what; shapes are those the targets name.
KERNELS: dict[str, str] = {
    "matmul": "1024x1024 by 1024x1024 matmul",
    "conv3x3": "3x3 conv 64->64 at 56x56, pad 1, + bias + ReLU (ResNet stage 1)",
    "conv1x1": "1x1 conv 64->256 at 56x56 + bias + ReLU (ResNet bottleneck expand)",
    "depthwise": "3x3 depthwise conv, 128 channels at 56x56, pad 1, + bias (MobileNet)",
    "conv3x3_s2": "3x3 conv 64->128 at 56x56, stride 2, pad 1, + bias + ReLU (ResNet downsampling)",
    "maxpool": "3x3 stride-2 max pool, pad 1, 64 channels at 112x112 (ResNet stem)",
}


def _zoo_pipeline(name: str) -> tuple[Pipeline, bool]:
    """The built-in pipeline of kernel `name` and whether it has a hand schedule."""
    builtin = {"matmul": "matmul", "conv3x3": "conv_relu", "depthwise": "depthwise_conv", "maxpool": "maxpool"}
    if name in builtin:
        return zoo.get(builtin[name], "full"), True
    b = Builder(name, KERNELS[name])
    if name == "conv1x1":
        x = b.input("input", (1, 64, 56, 56))
        conv = b.conv2d("conv", x, b.input("weight", (256, 64, 1, 1)), b.input("bias", (256,)))
    else:
        x = b.input("input", (1, 64, 56, 56))
        conv = b.conv2d("conv", x, b.input("weight", (128, 64, 3, 3)), b.input("bias", (128,)), pad=1, stride=2)
    return b.build([b.activation("relu", conv, "relu")]), False


def _onnx_model(name: str, folder: Path) -> Path:
    """The kernel as an ONNX model (random weights, fixed seed) written into `folder`."""
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    rng = np.random.default_rng(0)

    def init(n: str, shape: tuple[int, ...]) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), n)

    relu = True
    x_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    if name == "matmul":
        x_shape, out_shape, inits = (1024, 1024), (1024, 1024), [init("B", (1024, 1024))]
        nodes = [helper.make_node("MatMul", ["x", "B"], ["y"], name="matmul")]
        relu = False
    elif name == "maxpool":
        x_shape, out_shape, inits = (1, 64, 112, 112), (1, 64, 56, 56), []
        nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
        relu = False
    else:
        c_in, c_out, k, stride, group = {
            "conv3x3": (64, 64, 3, 1, 1), "conv1x1": (64, 256, 1, 1, 1), "depthwise": (128, 128, 3, 1, 128),
            "conv3x3_s2": (64, 128, 3, 2, 1),
        }[name]  # fmt: skip
        pad = k // 2
        x_shape, out_shape = (1, c_in, 56, 56), (1, c_out, 56 // stride, 56 // stride)
        inits = [init("W", (c_out, c_in // group, k, k)), init("b", (c_out,))]
        out = "y" if name == "depthwise" else "c"
        conv = helper.make_node("Conv", ["x", "W", "b"], [out], name="conv", kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
        conv.attribute.append(helper.make_attribute("group", group))
        nodes = [conv]
        relu = name != "depthwise"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def unpacked_matmul(p: Pipeline) -> Schedule:
    """The matmul hand schedule as it was before packing: 8 x 2 / 6 x 2 blocks, panels of 64 rows."""
    s = Schedule(name="hand, B unpacked")
    matmul_block(s, p, "prod", "C")
    return s


def _peer_cell(ts: list[PeerTiming], verified: bool | None) -> dict[str, Any]:
    bad = next((t for t in ts if not t.ok), None)
    if bad is not None or not ts:
        return {"ok": False, "error": bad.error if bad else "not run"}
    medians = [t.median_ms for t in ts if t.median_ms is not None]
    cell = {"ok": True, "median_ms": statistics.median(medians), "round_medians_ms": medians, "verified": verified}
    return cell | {"version": ts[0].version}


def bench_kernels(
    kernels: Sequence[str] | None = None, rounds: int = 3, min_time_s: float = 0.3, threads: int | None = None
) -> dict[str, Any]:
    """Each of `kernels` (default: all of KERNELS) under its hand and heuristic schedules
    (built-in pipeline) and the heuristic of its ONNX form, against ONNX Runtime and
    PyTorch and the FMA peak, `rounds` interleaved rounds of >= `min_time_s` per variant,
    on `threads` threads (default: all cores)."""
    names = list(kernels) if kernels is not None else list(KERNELS)
    for k in names:
        if k not in KERNELS:
            raise ValueError(f"unknown kernel {k!r} (kernels: {', '.join(KERNELS)})")
    threads = threads or default_threads()
    os.environ.setdefault("HL_NUM_THREADS", str(threads))  # the peak runs on as many threads as the worker
    opts: dict[str, Any] = {"min_time_s": min_time_s, "timeout_s": 900.0, "profile": False}
    with tempfile.TemporaryDirectory(prefix="bench-kernels-") as tmp, Runner(threads) as runner:
        cases: dict[str, dict[str, Any]] = {}
        for k in names:
            zp, has_hand = _zoo_pipeline(k)
            op = api.load_pipeline(str(_onnx_model(k, Path(tmp))))
            variants: dict[str, tuple[Pipeline, Any]] = {}
            if has_hand:
                variants["hand"] = (zp, api.load_schedule(zp, "hand"))
                if vector_target().lanes != vector_target(AVX512).lanes:
                    # The control: the blocks this host would get if the recipes ignored its target.
                    variants[OTHER] = (zp, hand_schedule(zp, AVX512))
                if k == "matmul":
                    variants[UNPACKED] = (zp, unpacked_matmul(zp))
            variants["heuristic"] = (zp, heuristic_schedule(zp))
            variants["onnx heuristic"] = (op, heuristic_schedule(op))
            peers: dict[str, tuple[Peer, bool | None]] = {}
            for p in (zp, op):  # PyTorch from the built-in's op records, ONNX Runtime from the model
                inputs = R.make_inputs(p, 0)
                refs, method = R.reference(p, inputs)
                for pname, peer in make_peers(p, inputs, threads).items():
                    if isinstance(peer, Peer) and pname not in peers:
                        peers[pname] = (peer, check_peer(peer, p, refs, method).ok)
            cases[k] = {"pipeline": zp, "variants": variants, "peers": peers, "runs": {v: [] for v in [*variants, *peers]}}
        peaks: list[float] = []
        torches: list[float] = []
        loads: list[float] = []
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            peaks.append(PK.fma_peak_gflops()["best_gflops"])
            torches.append(PK.torch_matmul_gflops(1024, threads)["best_gflops"])
            for k, case in cases.items():
                for label, (p, s) in case["variants"].items():
                    m: Measurement = api.measure(p, s, runner, None, **opts)
                    case["runs"][label].append(m)
                    got = f"{m.median_ms:.3f} ms" if m.ok else f"FAILED {m.error}"
                    print(f"[bench] {k} {label} round {r + 1}: {got}", file=sys.stderr)
                for label, (peer, _) in case["peers"].items():
                    t = time_peer(peer, min_time_s)
                    case["runs"][label].append(t)
                    print(f"[bench] {k} {label} round {r + 1}: {t.median_ms} ms", file=sys.stderr)
        machine = {"host": host_fingerprint(), "cores": os.cpu_count(), "threads": threads, "target": target_string()}
    peak = max(peaks)
    results: dict[str, Any] = {}
    for k, case in cases.items():
        p = case["pipeline"]
        row: dict[str, Any] = {"what": KERNELS[k], "gflop": p.flops() / 1e9}
        for label, (vp, _) in case["variants"].items():
            row[label] = median_cell(vp, case["runs"][label])
            if row[label].get("ok"):
                row[label]["pct_of_peak"] = 100 * row[label]["gflops"] / peak
        for label, (_, verified) in case["peers"].items():
            row[label] = _peer_cell(case["runs"][label], verified)
        ok = {lab: row[lab]["median_ms"] for lab in [*case["variants"], *case["peers"]] if row[lab].get("ok")}
        ours = {lab: v for lab, v in ok.items() if lab in case["variants"] and lab not in CONTROLS}
        if ours:
            best = min(ours, key=ours.__getitem__)
            row["best"] = best
            row["best_pct_of_peak"] = row[best]["pct_of_peak"]
            for peer in ("onnxruntime", "pytorch"):
                if peer in ok:
                    row[f"best_over_{peer}"] = ours[best] / ok[peer]
        results[k] = row
    return {
        "machine": machine, "rounds": rounds, "load_1min": loads, "fma_peak_gflops": peak, "fma_peak_rounds": peaks,
        "torch_matmul_1024_gflops": max(torches), "torch_matmul_rounds": torches, "kernels": results,
        "table": _table(results, peak, max(torches), loads, machine),
    }  # fmt: skip


def _ms(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "-"
    if not cell.get("ok"):
        return "FAIL"
    rm = cell.get("round_medians_ms") or [cell["median_ms"]]
    return f"{cell['median_ms']:.3f} ({min(rm):.2f}..{max(rm):.2f})"


def _table(results: dict[str, Any], peak: float, torch_mm: float, loads: list[float], machine: dict[str, Any]) -> str:
    cols = ["kernel", "GFLOP", "hand ms", f"{OTHER} ms", f"{UNPACKED} ms", "heuristic ms", "ONNX heuristic ms", "ORT ms", "PyTorch ms"]
    cols += ["best % of peak", "best/ORT", "best/PyTorch"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for k, r in results.items():
        labels = ("hand", OTHER, UNPACKED, "heuristic", "onnx heuristic", "onnxruntime", "pytorch")
        cells = [k, f"{r['gflop']:.3f}"] + [_ms(r.get(lab)) for lab in labels]
        cells.append(f"{r['best_pct_of_peak']:.0f}% ({r['best']})" if "best" in r else "-")
        for peer in ("onnxruntime", "pytorch"):
            cells.append(f"{r[f'best_over_{peer}']:.2f}x" if f"best_over_{peer}" in r else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"FMA peak {peak:.1f} GFLOP/s (best over rounds); PyTorch 1024^3 matmul {torch_mm:.1f} GFLOP/s; "
        f"{machine['target']}, {machine['threads']} threads, {machine['cores']} cores; load (1 min) {min(loads):.1f}..{max(loads):.1f}. "
        "ms: median over rounds (min..max of the round medians); best/peer < 1: ours faster"
    )
    return "\n".join(lines)
