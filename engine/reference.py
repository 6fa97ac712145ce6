"""Independent references: the pipeline's operator records evaluated with numpy and torch in
float64, and the tolerance a compiled result must meet against them.

The reference never looks at the stages' expressions when the pipeline has operator
records, so a wrong stage declaration fails verification. Pipelines without records
(random or hand-written JSON) fall back to the numpy interpreter of the IR, which checks
the lowering and schedule but not the declaration; the result says which was used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .interpret import interpret
from .ir import OpRecord, Pipeline

RTOL = 1e-3  # relative to each element of the reference
ATOL_SCALE = 1e-4  # absolute slack, times the largest |reference| value of that output
TOLERANCE_TEXT = f"|out - ref| <= {ATOL_SCALE:g}*max|ref| + {RTOL:g}*|ref| (float64 reference)"


def load_weights(p: Pipeline) -> dict[str, np.ndarray]:
    """Arrays of an imported pipeline's weights file (npz, never unpickled): weights by input
    name, and `input::NAME` / `output::NAME` for inputs and outputs recorded at import."""
    path = p.source.get("weights")
    if not path:
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"pipeline {p.name!r}: cannot read its weights file {path}: {exc}") from None


def make_inputs(p: Pipeline, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights from the weights file; recorded inputs when the import recorded some (their
    reference outputs were recorded with them); otherwise uniform random data (also for the
    weights of a pipeline with no weights file, such as a tuning task's segment)."""
    rng = np.random.default_rng(seed)
    stored = load_weights(p)
    dtypes = p.source.get("input_dtypes", {})  # an imported integer input: integers in [low, high)
    out = {}
    for i in p.inputs:
        key = i.name if i.weight else f"input::{i.name}"
        if key in stored:
            out[i.name] = np.ascontiguousarray(stored[key], dtype=np.float32)
        elif i.weight and p.source.get("weights"):  # without a weights file (a segment, a built-in) weights are random data
            raise ValueError(f"pipeline {p.name!r}: weight {i.name!r} is missing from {p.source.get('weights')}")
        elif dtypes.get(i.name) == "bool":
            out[i.name] = rng.integers(0, 2, size=i.shape).astype(np.float32)
        elif "int" in dtypes.get(i.name, ""):
            lo, hi = math.ceil(i.low), math.ceil(i.high)
            if dtypes[i.name].startswith("uint"):  # an unsigned type has no negative values
                lo, hi = max(lo, 0), max(hi, 2)
            out[i.name] = rng.integers(lo, max(hi, lo + 1), size=i.shape).astype(np.float32)
        else:
            out[i.name] = rng.uniform(i.low, i.high, size=i.shape).astype(np.float32)
    return out


def _onnx_feed(p: Pipeline, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The original model's inputs: each in its ONNX type, the fixed ones at their values."""
    names = p.source.get("input_names", {})  # IR input name -> ONNX graph input name
    dtypes = p.source.get("input_dtypes", {})
    feed = {names.get(i.name, i.name): inputs[i.name].astype(dtypes.get(i.name, "float32")) for i in p.inputs if not i.weight}
    for name, fixed in p.source.get("fixed_inputs", {}).items():
        feed[name] = np.asarray(fixed["value"], dtype=fixed["dtype"]).reshape(fixed["shape"])
    shapes = p.source.get("scalar_inputs", [])
    for name in shapes:
        feed[name] = feed[name].reshape(())
    return feed


def _onnxruntime(p: Pipeline, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort  # noqa: PLC0415

    sess = ort.InferenceSession(p.source["model"], providers=["CPUExecutionProvider"])
    outs = p.source.get("output_names", {})
    got = sess.run([outs.get(o, o) for o in p.outputs], _onnx_feed(p, inputs))
    return {o: np.asarray(v, dtype=np.float64) for o, v in zip(p.outputs, got)}


def _onnx_reference(p: Pipeline, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX's own reference evaluator (onnx.reference) on the original file: every opset,
    for the models ONNX Runtime no longer runs (opset 6 and older forms)."""
    import onnx  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    outs = p.source.get("output_names", {})
    got = ReferenceEvaluator(onnx.load(p.source["model"])).run([outs.get(o, o) for o in p.outputs], _onnx_feed(p, inputs))
    return {o: np.asarray(v, dtype=np.float64) for o, v in zip(p.outputs, got)}


def _torch() -> Any:
    import torch  # noqa: PLC0415  # seconds to import: only the conv references need it

    return torch


def _stencil(a: np.ndarray, taps: list, **_: Any) -> np.ndarray:
    reach = [max(off[k] for off, _w in taps) for k in range(a.ndim)]
    shape = [n - r for n, r in zip(a.shape, reach)]
    out = np.zeros(shape)
    for off, w in taps:
        out += w * a[tuple(slice(o, o + n) for o, n in zip(off, shape))]
    return out


def _pad(a: np.ndarray, pad: int, value: float, **_: Any) -> np.ndarray:
    widths = [(0, 0)] * (a.ndim - 2) + [(pad, pad), (pad, pad)]
    return np.pad(a, widths, constant_values=value)


def _conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, stride: int = 1, groups: int = 1, **_: Any) -> np.ndarray:
    t = _torch()
    out = t.nn.functional.conv2d(
        t.from_numpy(x), t.from_numpy(w), None if bias is None else t.from_numpy(bias), stride=stride, groups=groups
    )
    return out.numpy()


def _pool(x: np.ndarray, kind: str, k: int, stride: int, **_: Any) -> np.ndarray:
    t = _torch()
    fn = t.nn.functional.max_pool2d if kind == "max" else t.nn.functional.avg_pool2d
    return fn(t.from_numpy(x), k, stride).numpy()


def _matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, b_transposed: bool = False, **_: Any) -> np.ndarray:
    out = a @ (b.T if b_transposed else b)
    return out if bias is None else out + bias


def _softmax(x: np.ndarray, **_: Any) -> np.ndarray:
    t = _torch()
    return t.softmax(t.from_numpy(x), dim=-1).numpy()


def _layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float, **_: Any) -> np.ndarray:
    t = _torch()
    return t.nn.functional.layer_norm(t.from_numpy(x), (x.shape[-1],), t.from_numpy(g), t.from_numpy(b), eps).numpy()


def _channel_affine(x: np.ndarray, s: np.ndarray, t: np.ndarray, axis: int, **_: Any) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = -1
    return x * s.reshape(shape) + t.reshape(shape)


def _gelu(x: np.ndarray, **_: Any) -> np.ndarray:
    t = _torch()
    return t.nn.functional.gelu(t.from_numpy(x)).numpy()


# --- references of the N-d operators of imported models (engine/tensor_ops.py) ------
def _unary(a: np.ndarray, fn: str, **p: Any) -> np.ndarray:
    t = _torch()
    if fn in ("gelu", "gelu_tanh"):
        return t.nn.functional.gelu(t.from_numpy(a), approximate="tanh" if fn == "gelu_tanh" else "none").numpy()
    if fn == "erf":
        return t.erf(t.from_numpy(a)).numpy()
    table: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "relu": lambda x: np.maximum(x, 0), "relu6": lambda x: np.clip(x, 0, 6), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "neg": np.negative,
        "reciprocal": lambda x: 1 / x, "silu": lambda x: x / (1 + np.exp(-x)), "softplus": lambda x: np.logaddexp(0, x),
        "hardswish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
        "leaky_relu": lambda x: np.where(x > 0, x, x * p.get("alpha", 0.01)),
        "elu": lambda x: np.where(x > 0, x, (np.exp(x) - 1) * p.get("alpha", 1.0)),
        "hardsigmoid": lambda x: np.clip(x * p.get("alpha", 0.2) + p.get("beta", 0.5), 0, 1),
        "clip": lambda x: np.clip(x, -np.inf if p.get("lo") is None else p["lo"], np.inf if p.get("hi") is None else p["hi"]),
        "pow": lambda x: np.power(x, p["p"]),
        "selu": lambda x: np.where(x > 0, x, p.get("alpha", 1.67326319217681884765625) * (np.exp(x) - 1))
        * p.get("gamma", 1.05070102214813232421875),
        "sign": np.sign,
        "shrink": lambda x: np.where(
            x < -p.get("lambd", 0.5), x + p.get("bias", 0.0), np.where(x > p.get("lambd", 0.5), x - p.get("bias", 0.0), 0.0)
        ),
        "softsign": lambda x: x / (1 + np.abs(x)),
    }  # fmt: skip
    return table[fn](a)


def _binary(*xs: np.ndarray, fn: str, **consts: float) -> np.ndarray:
    it = iter(xs)
    a = consts["a"] if "a" in consts else next(it)
    b = consts["b"] if "b" in consts else next(it)
    if fn == "prelu":
        return np.where(a > 0, a, a * b)
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum}[fn](a, b)


def _gather_data(a: np.ndarray, idx: np.ndarray, axis: int, **_: Any) -> np.ndarray:
    n = a.shape[axis]
    k = np.rint(idx).astype(np.int64)
    inside = (k >= -n) & (k < n)
    out = np.take(a, np.where(inside, k % n, 0), axis=axis)
    mask = inside.reshape((1,) * axis + idx.shape + (1,) * (a.ndim - axis - 1))
    return np.where(mask, out, 0.0)


def _where(*xs: np.ndarray, **consts: float) -> np.ndarray:
    it = iter(xs)
    c = next(it)
    a = consts["a"] if "a" in consts else next(it)
    b = consts["b"] if "b" in consts else next(it)
    return np.where(c != 0, a, b)


def _nary(*xs: np.ndarray, fn: str, **_: Any) -> np.ndarray:
    b = np.broadcast_arrays(*xs)
    return {"sum": sum, "mean": lambda v: sum(v) / len(v), "max": lambda v: np.maximum.reduce(v), "min": lambda v: np.minimum.reduce(v)}[
        fn
    ](b)


def _reduce(a: np.ndarray, axes: list[int], kind: str, keepdims: bool, **_: Any) -> np.ndarray:
    reducers: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
    return reducers[kind](a, axis=tuple(axes), keepdims=keepdims)


def _softmax_nd(a: np.ndarray, axes: list[int], log: bool = False, **_: Any) -> np.ndarray:
    z = a - a.max(axis=tuple(axes), keepdims=True)
    lse = np.log(np.exp(z).sum(axis=tuple(axes), keepdims=True))
    return z - lse if log else np.exp(z - lse)


def _layernorm_nd(x: np.ndarray, *gb: np.ndarray, axis: int, eps: float, gamma: bool, beta: bool, **_: Any) -> np.ndarray:
    axes = tuple(range(axis, x.ndim))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    it = iter(gb)
    out = out * next(it) if gamma else out
    return out + next(it) if beta else out


def _pad_nd(a: np.ndarray, before: list[int], after: list[int], value: float, mode: str, **_: Any) -> np.ndarray:
    crop = tuple(slice(max(0, -b), a.shape[k] - max(0, -e)) for k, (b, e) in enumerate(zip(before, after)))
    widths = [(max(0, b), max(0, e)) for b, e in zip(before, after)]
    if mode == "constant":
        return np.pad(a[crop], widths, mode="constant", constant_values=value)
    if mode == "edge":
        return np.pad(a[crop], widths, mode="edge")
    if mode == "reflect":
        return np.pad(a[crop], widths, mode="reflect")
    raise ValueError(f"pad_nd mode {mode!r} (the IR has constant, edge and reflect)")


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, strides: list, pads: list, dilations: list, groups: int, **_: Any):
    t = _torch()
    nd = w.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[a], pads[nd + a]) for a in range(nd)])
    fn = {2: t.nn.functional.conv2d, 3: t.nn.functional.conv3d}[nd]
    out = fn(t.from_numpy(xp), t.from_numpy(w), None, stride=strides, dilation=dilations, groups=groups).numpy()
    return out if b is None else out + b.reshape(1, -1, *([1] * nd))


def _conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    strides: list,
    pads: list,
    dilations: list,
    groups: int,
    output_padding: list,
    **_: Any,
):
    t = _torch()
    full = t.nn.functional.conv_transpose2d(
        t.from_numpy(x), t.from_numpy(w), None, stride=strides, dilation=dilations, groups=groups
    ).numpy()
    full = np.pad(full, [(0, 0), (0, 0), (0, output_padding[0]), (0, output_padding[1])])
    out = full[:, :, pads[0] : full.shape[2] - pads[2], pads[1] : full.shape[3] - pads[3]]
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _pool_nd(
    x: np.ndarray, kind: str, kernel: list, strides: list, pads: list, dilations: list, ceil_mode: bool, count_include_pad: bool, **_: Any
):
    nd = len(kernel)
    sizes = x.shape[2:]
    outs = [_pool_out(n, kernel[a], strides[a], pads[a], pads[nd + a], dilations[a], ceil_mode) for a, n in enumerate(sizes)]
    ends = [(outs[a] - 1) * strides[a] + dilations[a] * (kernel[a] - 1) + 1 for a in range(nd)]
    widths = [(0, 0), (0, 0)] + [(pads[a], max(0, ends[a] - (sizes[a] + pads[a]))) for a in range(nd)]
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, widths, constant_values=fill)
    ones = np.ones((1, 1, *sizes))
    if count_include_pad:  # the padded input counts, ceil mode's extra border does not
        ones = np.pad(ones, [(0, 0), (0, 0)] + [(pads[a], pads[nd + a]) for a in range(nd)], constant_values=1.0)
        widths = [(0, 0), (0, 0)] + [(0, max(0, ends[a] - ones.shape[2 + a])) for a in range(nd)]
    cnt = np.pad(ones, widths)
    acc = np.full((*x.shape[:2], *outs), -np.inf if kind == "max" else 0.0)
    n_in = np.zeros((1, 1, *outs))
    for ks in itertools.product(*(range(k) for k in kernel)):
        at = (slice(None), slice(None)) + tuple(
            slice(k * dilations[a], k * dilations[a] + (outs[a] - 1) * strides[a] + 1, strides[a]) for a, k in enumerate(ks)
        )
        acc = np.maximum(acc, xp[at]) if kind == "max" else acc + xp[at]
        n_in = n_in + cnt[at]
    return acc if kind == "max" else acc / n_in


def _pool_out(n: int, k: int, s: int, p0: int, p1: int, d: int, ceil: bool) -> int:
    span = n + p0 + p1 - d * (k - 1) - 1
    out = (math.ceil(span / s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= n + p0 else out  # a window must start inside


def _matmul_nd(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 1.0, **_: Any):
    out = alpha * np.matmul(a, b)
    return out if c is None else out + beta * c


def _slice(a: np.ndarray, starts: list, steps: list, shape: list, **_: Any) -> np.ndarray:
    idx = np.ix_(*[s + np.arange(n) * st for s, st, n in zip(starts, steps, shape)])
    return a[idx]


OP_REFS: dict[str, Callable[..., np.ndarray]] = {
    "stencil": _stencil,
    "channel_mix": lambda a, weights, **_: sum(w * a[k] for k, w in enumerate(weights)),
    "crop": lambda a, offset, shape, **_: a[tuple(slice(o, o + n) for o, n in zip(offset, shape))],
    "pad": _pad,
    "conv2d": _conv2d,
    "pool2d": _pool,
    "matmul": _matmul,
    "softmax": _softmax,
    "layernorm": _layernorm,
    "channel_affine": _channel_affine,
    "copy": lambda a, **_: a,
    "scale": lambda a, factor, **_: a * factor,
    "relu": lambda a, **_: np.maximum(a, 0),
    "relu6": lambda a, **_: np.clip(a, 0, 6),
    "sigmoid": lambda a, **_: 1 / (1 + np.exp(-a)),
    "tanh": lambda a, **_: np.tanh(a),
    "gelu": _gelu,
    "add": lambda a, b, **_: a + b,
    "add_relu": lambda a, b, **_: np.maximum(a + b, 0),
    "mul": lambda a, b, **_: a * b,
    "div": lambda a, b, **_: a / b,
    "sharpen": lambda c, bl, **_: 2 * c - bl,
    "harris_response": lambda a, c, d, **_: a * c - d * d - 0.04 * (a + c) ** 2,
    "unary": _unary,
    "binary": _binary,
    "nary": _nary,
    "reduce": _reduce,
    "softmax_nd": _softmax_nd,
    "layernorm_nd": _layernorm_nd,
    "pad_nd": _pad_nd,
    "concat": lambda *xs, axis, **_: np.concatenate(xs, axis=axis),
    "gather": lambda a, axis, indices, **_: np.take(a, indices, axis=axis),
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "pool_nd": _pool_nd,
    "matmul_nd": _matmul_nd,
    "reshape": lambda a, shape, **_: a.reshape(shape),
    "transpose": lambda a, perm, **_: np.transpose(a, perm),
    "slice": _slice,
    "upsample_nearest": lambda a, axis, factor, **_: np.repeat(a, factor, axis=axis),
    "expand": lambda a, shape, **_: np.broadcast_to(a, shape),
    "gather_data": _gather_data,
    # comparisons and logic as 0/1 values (frontends/onnx_ops.py _compare)
    "equal": lambda a, b, **_: (a == b).astype(np.float64),
    "less": lambda a, b, **_: (a < b).astype(np.float64),
    "greater": lambda a, b, **_: (a > b).astype(np.float64),
    "lessorequal": lambda a, b, **_: (a <= b).astype(np.float64),
    "greaterorequal": lambda a, b, **_: (a >= b).astype(np.float64),
    "not": lambda a, **_: (a == 0).astype(np.float64),
    "and": lambda a, b, **_: ((a != 0) & (b != 0)).astype(np.float64),
    "or": lambda a, b, **_: ((a != 0) | (b != 0)).astype(np.float64),
    "where": _where,
    "tile": lambda a, repeats, **_: np.tile(a, repeats),
}


def evaluate_ops(p: Pipeline, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {k: v.astype(np.float64) for k, v in inputs.items()}
    for rec in p.ops:
        values[rec.output] = _apply(rec, values)
    return {o: values[o] for o in p.outputs}


def _apply(rec: OpRecord, values: dict[str, np.ndarray]) -> np.ndarray:
    fn = OP_REFS.get(rec.op)
    if fn is None:
        raise ValueError(f"no reference for operator {rec.op!r} (output {rec.output!r})")
    return np.asarray(fn(*[values[i] for i in rec.inputs], **rec.attrs), dtype=np.float64)


def reference(p: Pipeline, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """Reference outputs and the name of the method used."""
    kind = p.source.get("kind")
    if kind == "onnx" and p.source.get("model"):
        try:
            return _onnxruntime(p, inputs), "ONNX Runtime (CPU) on the original model"
        except Exception as exc:  # noqa: BLE001  # ONNX Runtime refuses old opsets: ONNX's own evaluator is the reference then
            why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            try:
                refs = _onnx_reference(p, inputs)
            except Exception as exc2:  # noqa: BLE001
                raise ValueError(f"no reference: ONNX Runtime cannot run the model ({why}), nor can onnx.reference ({exc2})") from None
            return refs, f"ONNX reference evaluator (onnx.reference) on the original model (ONNX Runtime cannot run it: {why})"
    stored = load_weights(p)
    if all(f"output::{o}" in stored for o in p.outputs) and stored:
        return {o: stored[f"output::{o}"].astype(np.float64) for o in p.outputs}, f"outputs recorded from {kind or 'the source'} at import"
    if p.ops and all(o in {r.output for r in p.ops} for o in p.outputs):
        return evaluate_ops(p, inputs), "operator reference (numpy/torch, float64)"
    return interpret(p, inputs), "IR interpreter (numpy, float64)"


@dataclass
class Verification:
    ok: bool
    max_abs_err: float | None  # None when no finite value could be compared
    max_rel_err: float | None
    message: str
    method: str


def compare(name: str, out: np.ndarray, ref: np.ndarray) -> tuple[list[str], float | None, float | None, int]:
    """Problems of one output against its reference, the worst absolute and relative errors
    over the finite reference values, and how many non-finite reference values were matched.

    Non-finite values are compared position by position (NaN where the reference is NaN, the
    same infinities), and the tolerance is computed from finite values only: a NaN in the
    reference must never turn the comparison into one that cannot fail."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return [f"{name}: shape {out.shape} != reference {ref.shape}"], None, None, 0
    problems: list[str] = []
    ref_nan, out_nan = np.isnan(ref), np.isnan(out)
    ref_inf, out_inf = np.isinf(ref), np.isinf(out)
    finite = ~(ref_nan | ref_inf)
    checks = (
        (ref_nan & ~out_nan, "the reference is NaN and the output is not"),
        (~ref_nan & out_nan, "the output is NaN and the reference is not"),
        (ref_inf & (out != ref) & ~out_nan, "the reference is infinite and the output differs"),
        (finite & out_inf, "the output is infinite and the reference is finite"),
    )
    for mask, what in checks:
        if mask.any():
            at = tuple(int(i) for i in np.argwhere(mask)[0])
            problems.append(f"{name}: {int(mask.sum())} of {mask.size} values where {what}, first at {at}: {out[at]:.6g} vs {ref[at]:.6g}")
    nonfinite = int((~finite).sum())
    both = finite & np.isfinite(out)
    if not finite.any():
        problems.append(f"{name}: the reference has no finite value, so the output cannot be verified")
        return problems, None, None, nonfinite
    if not both.any():
        return problems, None, None, nonfinite
    r, o = ref[both], out[both]
    err = np.abs(o - r)
    tol = ATOL_SCALE * max(float(np.abs(r).max()), 1e-30) + RTOL * np.abs(r)
    bad = err > tol
    if bad.any():
        k = int(np.argmax(bad))
        at = tuple(int(i) for i in np.argwhere(both)[k])
        problems.append(f"{name}: {int(bad.sum())} of {bad.size} values outside tolerance, first at {at}: {out[at]:.6g} vs {ref[at]:.6g}")
    return problems, float(err.max()), float((err / np.maximum(np.abs(r), 1e-30)).max()), nonfinite


def verify(p: Pipeline, outs: dict[str, np.ndarray], refs: dict[str, np.ndarray], method: str) -> Verification:
    worst_abs: float | None = None
    worst_rel: float | None = None
    problems: list[str] = []
    nonfinite = 0
    for name in p.outputs:
        if name not in outs or name not in refs:
            problems.append(f"{name}: {'no output' if name not in outs else 'no reference'} to compare")
            continue
        found, a, r, n = compare(name, outs[name], refs[name])
        problems += found
        nonfinite += n
        if a is not None:
            worst_abs = a if worst_abs is None else max(worst_abs, a)
        if r is not None:
            worst_rel = r if worst_rel is None else max(worst_rel, r)
    if not problems and worst_abs is None:
        problems.append("no finite value could be compared")
    ok = not problems
    note = f" ({nonfinite} non-finite reference values matched position by position)" if nonfinite else ""
    msg = f"matches within {TOLERANCE_TEXT}{note}" if ok else "; ".join(problems)
    return Verification(ok, worst_abs, worst_rel, msg, method)
