"""Peers: the same model, on the same input, timed with ONNX Runtime and PyTorch eager.

A `Peer` is a prepared inference (session or module built, inputs bound) with a `run`
callable; `time_peer` times it with the runner's protocol (warm-up, repeated runs until
a minimum time, median / min / IQR) and returns a plain `PeerTiming`; `check_peer`
compares its outputs with the pipeline's reference (engine/reference.py).

Which peers a pipeline has:
- onnxruntime: an imported ONNX model, run from its file (CPU provider, intra-op threads
  = the Halide thread count).
- pytorch: a sample model of resources/models, built from its PyTorch definition in
  make_models.py with the same seeds (hence the same weights as its .onnx file: checked
  against the reference), or a built-in pipeline whose operators all have a natural
  torch.nn.functional equivalent (a padding read by a conv or max pool becomes its
  `padding`, as PyTorch code is written).
Peers run in the calling process; the Halide worker is idle (blocked on its pipe) then.
PyTorch runs in its default configuration; note that on a busy shared machine the
spinning barriers of its OpenMP runtime wait for a descheduled thread's next time slice
in every parallel region (mobilenetv2_block measured 144 ms instead of 6 ms at load 2.5
on 2 cores); OMP_WAIT_POLICY=PASSIVE in the environment avoids that at some cost on a
quiet machine. The policy in effect is recorded with each PyTorch timing.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import reference as R
from ..ir import OpRecord, Pipeline
from ..measure import Job, default_threads, summarize, timed_rounds
from ..ops import FLOAT_LOWEST
from ..resources import MAKE_MODELS

PEERS = ("onnxruntime", "pytorch")
_PROTOCOL = Job(pipeline={})  # the runner's defaults: warm-up runs, minimum and maximum number of runs


@dataclass
class PeerTiming:
    """One peer's timing of one pipeline. `spread` is the IQR over the median (relative)."""

    peer: str
    ok: bool
    available: bool = True  # False: the peer has no way to run this pipeline (`error` says why)
    median_ms: float | None = None
    min_ms: float | None = None
    spread: float | None = None
    iqr_ms: float | None = None
    runs: int = 0
    threads: int = 0
    version: str = ""
    what: str = ""  # what was timed
    verified: bool | None = None  # outputs within the reference tolerance (None: not checked)
    max_abs_err: float | None = None
    error: str | None = None
    round_medians_ms: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Peer:
    name: str
    version: str
    threads: int
    what: str
    run: Callable[[], Any]  # one inference
    outputs: Callable[[], dict[str, np.ndarray]]  # one inference, outputs by pipeline output name


def time_callable(run: Callable[[], Any], min_time_s: float, rounds: int = 1) -> dict[str, Any]:
    """The runner's protocol (measure.timed_rounds, as the worker times a schedule): warm-up, then per round runs until at
    least min_runs and min_time_s; the median is the median of the rounds' medians."""
    per_round = timed_rounds(run, replace(_PROTOCOL, min_time_s=min_time_s, rounds=rounds))
    out: dict[str, Any] = {**summarize([t for r in per_round for t in r])}
    out["round_medians_ms"] = [summarize(r)["median_ms"] for r in per_round]
    out["median_ms"] = statistics.median(out["round_medians_ms"])
    out["runs"] = sum(len(r) for r in per_round)
    return out


def time_peer(peer: Peer, min_time_s: float = 0.3, rounds: int = 1) -> PeerTiming:
    try:
        t = time_callable(peer.run, min_time_s, rounds)
    except Exception as exc:  # noqa: BLE001  # a failing peer is reported, never raised
        return PeerTiming(
            peer.name, False, threads=peer.threads, version=peer.version, what=peer.what, error=f"{type(exc).__name__}: {exc}"
        )
    return PeerTiming(
        peer.name, True, median_ms=t["median_ms"], min_ms=t["min_ms"], spread=t["iqr_ms"] / t["median_ms"], iqr_ms=t["iqr_ms"],
        runs=t["runs"], threads=peer.threads, version=peer.version, what=peer.what, round_medians_ms=t["round_medians_ms"],
    )  # fmt: skip


def check_peer(peer: Peer, p: Pipeline, refs: dict[str, np.ndarray], method: str) -> R.Verification:
    return R.verify(p, peer.outputs(), refs, method)


def make_peers(p: Pipeline, inputs: dict[str, np.ndarray], threads: int | None = None) -> dict[str, Peer | str]:
    """Each peer of PEERS prepared for `p` on `inputs`, or the reason it has none."""
    threads = threads or default_threads()
    out: dict[str, Peer | str] = {}
    for name, make in (("onnxruntime", _onnxruntime), ("pytorch", _pytorch)):
        try:
            out[name] = make(p, inputs, threads)
        except _NoPeer as exc:
            out[name] = str(exc)
    return out


def measure_peers(
    p: Pipeline, threads: int | None = None, min_time_s: float = 0.3, rounds: int = 1, seed: int = 0, verify: bool = True
) -> list[PeerTiming]:
    """Time every peer of `p` on the runner's input for `seed`, each checked against the reference."""
    inputs = R.make_inputs(p, seed)
    refs, method = R.reference(p, inputs) if verify else ({}, "")
    timings = []
    for name, peer in make_peers(p, inputs, threads).items():
        if isinstance(peer, str):
            timings.append(PeerTiming(name, False, available=False, threads=threads or default_threads(), error=peer))
            continue
        t = time_peer(peer, min_time_s, rounds)
        if verify and t.ok:
            v = check_peer(peer, p, refs, method)
            t.verified, t.max_abs_err = v.ok, v.max_abs_err
        timings.append(t)
    return timings


class _NoPeer(Exception):
    """This peer does not apply to the pipeline; the message says why."""


# --- ONNX Runtime ---------------------------------------------------------------------------
def _onnxruntime(p: Pipeline, inputs: dict[str, np.ndarray], threads: int) -> Peer:
    if p.source.get("kind") != "onnx" or not p.source.get("model"):
        raise _NoPeer("not an imported ONNX model")
    import onnxruntime as ort  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(p.source["model"], so, providers=["CPUExecutionProvider"])
    names, out_names = p.source.get("input_names", {}), p.source.get("output_names", {})
    feed = {names.get(i.name, i.name): inputs[i.name] for i in p.inputs if not i.weight}
    fetch = [out_names.get(o, o) for o in p.outputs]

    def outputs() -> dict[str, np.ndarray]:
        return {o: np.asarray(v) for o, v in zip(p.outputs, sess.run(fetch, feed))}

    what = f"InferenceSession({Path(p.source['model']).name}, CPUExecutionProvider)"
    return Peer("onnxruntime", f"onnxruntime {ort.__version__}", threads, what, lambda: sess.run(fetch, feed), outputs)


# --- PyTorch eager --------------------------------------------------------------------------
def _pytorch(p: Pipeline, inputs: dict[str, np.ndarray], threads: int) -> Peer:
    import torch  # noqa: PLC0415

    torch.set_num_threads(threads)
    model = p.source.get("model")
    if p.source.get("kind") == "onnx" and model and Path(model).resolve().parent == MAKE_MODELS.parent:
        module, what = _sample_module(Path(model).stem)
        xs = [torch.from_numpy(inputs[i.name]) for i in p.inputs if not i.weight]
        call: Callable[[], Any] = lambda: module(*xs)
    elif p.ops and not p.source:
        fn = _from_op_records(p.ops)
        tensors = {k: torch.from_numpy(v) for k, v in inputs.items()}
        call, what = (lambda: fn(tensors)), "torch.nn.functional ops from the pipeline's operator records"
    else:
        raise _NoPeer("no PyTorch definition (sample models of resources/models and built-in pipelines only)")

    def run() -> Any:
        with torch.no_grad():
            return call()

    def outputs() -> dict[str, np.ndarray]:
        got = run()
        got = got if isinstance(got, dict) else {p.outputs[0]: got}
        return {o: got[o].numpy().reshape(p.shape_of(o)) for o in p.outputs}

    what += f", OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY') or 'default'}"
    return Peer("pytorch", f"torch {torch.__version__}", threads, what, run, outputs)


def _sample_module(name: str) -> tuple[Any, str]:
    """The sample model's module, built as make_models.export builds it (same seeds, so
    the same weights as the exported file), in eval mode."""
    import torch  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("_schedule_explorer_make_models", MAKE_MODELS)
    if spec is None or spec.loader is None:
        raise _NoPeer(f"cannot load {MAKE_MODELS}")
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)  # project code: the sample models' definitions
    if name not in mm.MODELS:
        raise _NoPeer(f"{name!r} is not one of make_models.MODELS ({', '.join(mm.MODELS)})")
    cls, _shape = mm.MODELS[name]
    with torch.random.fork_rng():  # export() seeds the global generator: leave the caller's alone
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        module = cls().eval()
        mm.randomize_bn(module, g)
    return module, f"{cls.__name__} (make_models.py), eval mode, no_grad"


# The built-in operators with a natural torch.nn.functional equivalent (float32, NCHW).
def _torch_ops() -> dict[str, Callable[..., Any]]:
    import torch  # noqa: PLC0415
    from torch.nn import functional as F  # noqa: PLC0415

    def conv2d(x: Any, w: Any, b: Any = None, *, stride: int, groups: int, padding: int = 0, **_: Any) -> Any:
        return F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups)

    def pool2d(x: Any, *, kind: str, k: int, stride: int, padding: int = 0, **_: Any) -> Any:
        return F.max_pool2d(x, k, stride, padding) if kind == "max" else F.avg_pool2d(x, k, stride, padding)

    def matmul(a: Any, b: Any, bias: Any = None, *, b_transposed: bool = False, **_: Any) -> Any:
        bt = b.t() if b_transposed else b
        return torch.addmm(bias, a, bt) if bias is not None else a @ bt

    def affine(x: Any, s: Any, t: Any, *, axis: int, **_: Any) -> Any:
        shape = [1] * x.dim()
        shape[axis] = -1
        return torch.addcmul(t.view(shape), x, s.view(shape))

    return {
        "pad": lambda a, *, pad, value, **_: F.pad(a, (pad, pad, pad, pad), value=value),
        "conv2d": conv2d,
        "pool2d": pool2d,
        "matmul": matmul,
        "softmax": lambda a, **_: torch.softmax(a, -1),
        "layernorm": lambda x, g, b, *, eps, **_: F.layer_norm(x, (x.shape[-1],), g, b, eps),
        "channel_affine": affine,
        "copy": lambda a, **_: a,
        "scale": lambda a, *, factor, **_: a * factor,
        "relu": lambda a, **_: F.relu(a),
        "relu6": lambda a, **_: F.relu6(a),
        "sigmoid": lambda a, **_: torch.sigmoid(a),
        "tanh": lambda a, **_: torch.tanh(a),
        "gelu": lambda a, **_: F.gelu(a),
        "add": lambda a, b, **_: a + b,
        "add_relu": lambda a, b, **_: F.relu(a + b),
        "mul": lambda a, b, **_: a * b,
        "div": lambda a, b, **_: a / b,
    }


def _from_op_records(ops: list[OpRecord]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A torch eager function from operator records. A padding read only by a conv (zeros)
    or a max pool (lowest float) becomes that op's `padding`, as PyTorch code is written."""
    table = _torch_ops()
    missing = sorted({r.op for r in ops} - table.keys())
    if missing:
        raise _NoPeer(f"no natural PyTorch equivalent of operator(s) {', '.join(missing)}")
    readers: dict[str, list[OpRecord]] = {}
    for r in ops:
        for i in r.inputs:
            readers.setdefault(i, []).append(r)
    folded: dict[str, tuple[str, int]] = {}  # padded name -> (unpadded name, pad)
    for r in ops:
        rs = readers.get(r.output, [])
        fill = {"conv2d": 0.0, "pool2d": FLOAT_LOWEST}
        if r.op == "pad" and len(rs) == 1 and rs[0].op in fill and r.attrs["value"] == fill[rs[0].op]:
            if rs[0].op == "conv2d" or rs[0].attrs.get("kind") == "max":
                folded[r.output] = (r.inputs[0], int(r.attrs["pad"]))
    steps = []
    for r in ops:
        if r.output in folded:
            continue
        srcs = [folded[i][0] if i in folded else i for i in r.inputs]
        extra = {"padding": folded[r.inputs[0]][1]} if r.inputs and r.inputs[0] in folded else {}
        steps.append((table[r.op], srcs, r.output, {**r.attrs, **extra}))

    def run(values: dict[str, Any]) -> dict[str, Any]:
        env = dict(values)
        for fn, srcs, out, attrs in steps:
            env[out] = fn(*[env[s] for s in srcs], **attrs)
        return env

    return run
