"""TensorFlow operator mappings: one handler per GraphDef op type, onto `Emitter` / `NdBuilder`.

A handler gets the node and its input values (constants as numpy arrays, computed tensors
as pipeline names) and returns its output values. Images are NHWC as TensorFlow keeps them;
a convolution or pooling reads its input through a transpose view to NCHW (the IR's
layout) and its result is seen through the inverse view, so no layout copy is made.
What a handler cannot map exactly it raises as `Unsupported`; the importer collects those.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..tensor_ops import axis_index, axis_indices
from .common import Emitter, Unsupported, Value, handler_registry, ints

MISSING = object()  # an output a handler does not produce (e.g. FusedBatchNorm's statistics)


@dataclass
class TfNode:
    op: str
    name: str
    inputs: list[str]  # tensor names 'node:k', control inputs dropped
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1

    @property
    def hint(self) -> str:
        return self.name


@dataclass
class Ctx:
    em: Emitter
    hint: str
    node: TfNode
    # For folding a per-channel affine chain into a convolution or matmul: the data nodes
    # reading each tensor, the graph outputs, constant values, and the nodes folded away
    # (node name -> the tensor whose value they take).
    users: dict[str, list[TfNode]]
    graph_outputs: set[str]
    consts: dict[str, Any]
    folded: dict[str, str]

    def const(self, v: Value | None, what: str) -> np.ndarray:
        if not isinstance(v, np.ndarray):
            raise Unsupported(f"{what} must be a constant, but it is computed from data")
        return v


Handler = Callable[[Ctx, list[Any]], list[Any]]
HANDLERS: dict[str, Handler] = {}


handles = handler_registry(HANDLERS)


def _fmt(cx: Ctx) -> str:
    fmt = str(cx.node.attrs.get("data_format", "NHWC"))
    if fmt not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {fmt!r} (NHWC and NCHW are mapped)")
    return fmt


# --- pass-through and elementwise ------------------------------------------------------
@handles("Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics")
def _identity(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [ins[0]]


@handles("IdentityN")
def _identity_n(cx: Ctx, ins: list[Any]) -> list[Any]:
    return list(ins)


@handles("Cast")
def _cast(cx: Ctx, ins: list[Any]) -> list[Any]:
    if cx.node.attrs.get("DstT") != "float32":
        raise Unsupported(f"cast of computed data to {cx.node.attrs.get('DstT')} (the IR is float32)")
    return [ins[0]]


_UNARY = {
    "Relu": "relu", "Relu6": "relu6", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Inv": "reciprocal", "Softplus": "softplus", "Erf": "erf",
    "Elu": "elu",
}  # fmt: skip


@handles(*_UNARY)
def _unary(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.unary(_UNARY[cx.node.op], ins[0], cx.hint)]


@handles("LeakyRelu")
def _leaky(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.unary("leaky_relu", ins[0], cx.hint, alpha=float(cx.node.attrs.get("alpha", 0.2)))]


@handles("Rsqrt", "Square")
def _power(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.unary("pow", ins[0], cx.hint, p=-0.5 if cx.node.op == "Rsqrt" else 2.0)]


_BINARY = {"Add": "add", "AddV2": "add", "Sub": "sub", "Mul": "mul", "RealDiv": "div", "Div": "div", "Maximum": "max", "Minimum": "min"}


@handles(*_BINARY)
def _binary(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.binary(_BINARY[cx.node.op], ins[0], ins[1], cx.hint)]


@handles("Pow")
def _pow(cx: Ctx, ins: list[Any]) -> list[Any]:
    p = cx.em.scalar(ins[1]) if isinstance(ins[1], np.ndarray) else None
    if p is None or isinstance(ins[0], np.ndarray):
        raise Unsupported("Pow with a computed or non-scalar exponent (only constant scalar exponents are mapped)")
    return [cx.em.unary("pow", ins[0], cx.hint, p=p)]


@handles("BroadcastTo")
def _broadcast_to(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.expand(ins[0], tuple(ints(cx.const(ins[1], "the target shape"))), cx.hint)]


@handles("SquaredDifference")
def _squared_difference(cx: Ctx, ins: list[Any]) -> list[Any]:
    d = cx.em.binary("sub", ins[0], ins[1], f"{cx.hint}_diff")
    return [cx.em.unary("pow", d, cx.hint, p=2.0)]


@handles("AddN")
def _add_n(cx: Ctx, ins: list[Any]) -> list[Any]:
    if len(ins) == 1:
        return [ins[0]]
    if len(ins) == 2:
        return [cx.em.binary("add", ins[0], ins[1], cx.hint)]
    return [cx.em.b.nary(cx.em.name(cx.hint), [cx.em.tensor(x, f"{cx.hint}_const") for x in ins], "sum")]


@handles("BiasAdd")
def _bias_add(cx: Ctx, ins: list[Any]) -> list[Any]:
    bias = ins[1]
    if _fmt(cx) == "NCHW":
        rank = len(cx.em.shape(ins[0]))
        bias = cx.em.reshape(bias, (cx.em.shape(bias)[0], *([1] * (rank - 2))), f"{cx.hint}_bias")
    return [cx.em.binary("add", ins[0], bias, cx.hint)]


# --- per-channel affine chains folded into a convolution or matmul --------------------------
def _channel_vector(v: Any, c: int, rank: int) -> np.ndarray | None:
    """A constant that broadcasts along the last axis only (shape (C,) or (1, ..., C), at most
    `rank` axes: it must not widen the result), as (C,)."""
    if not isinstance(v, np.ndarray) or v.size not in (1, c) or v.ndim > rank or (v.ndim and v.shape[-1] not in (1, c)):
        return None
    if v.ndim and math.prod(v.shape[:-1]) != 1:
        return None
    return np.broadcast_to(np.asarray(v, np.float64).reshape(-1), (c,))


def fold_affine(cx: Ctx, c: int, rank: int, allow_scale: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Follow the node's output through BiasAdd / Add / Sub / Mul by per-output-channel
    constants (a bias, an inference batch norm as Keras writes it), each the only reader of
    the one before and no graph output: (scale, shift) of y = op(x) * scale + shift, the
    nodes folded recorded in `cx.folded` so the walk gives them the op's value."""
    scale: np.ndarray | None = None
    shift: np.ndarray | None = None
    cur = f"{cx.node.name}:0"
    chain = []
    while cur not in cx.graph_outputs and len(cx.users.get(cur, [])) == 1:
        user = cx.users[cur][0]
        if user.op not in ("BiasAdd", "Add", "AddV2", "Sub", "Mul") or len(user.inputs) != 2:
            break
        if user.op == "BiasAdd" and user.attrs.get("data_format", "NHWC") != "NHWC":
            break
        k = user.inputs.index(cur) if user.inputs.count(cur) == 1 else -1
        if k < 0 or (user.op in ("BiasAdd", "Sub") and k != 0):
            break
        vec = _channel_vector(cx.consts.get(user.inputs[1 - k]), c, rank)
        if vec is None:
            break
        if user.op == "Mul":
            if not allow_scale:
                break
            scale = vec.copy() if scale is None else scale * vec
            shift = None if shift is None else shift * vec
        else:
            d = -vec if user.op == "Sub" else vec
            shift = d.copy() if shift is None else shift + d
        chain.append(user)
        cur = f"{user.name}:0"
    for user in chain:
        cx.folded[user.name] = f"{cx.node.name}:0"
    if chain:
        what = ", ".join(f"{u.op} {u.name!r}" for u in chain)
        cx.em.simplifications.append(f"{what} folded into {cx.node.op} {cx.node.name!r} (new weight and bias arrays)")
    return scale, shift


def _scaled(w: np.ndarray, scale: np.ndarray | None, axis: int) -> np.ndarray:
    if scale is None:
        return w
    shape = [1] * w.ndim
    shape[axis] = -1
    return (w.astype(np.float64) * scale.reshape(shape)).astype(np.float32)


def _bias(b: np.ndarray | None, scale: np.ndarray | None, shift: np.ndarray | None, c: int) -> np.ndarray | None:
    if shift is None and b is None:
        return None
    out = np.zeros(c) if b is None else np.asarray(b, np.float64) * (1.0 if scale is None else scale)
    return (out + (0.0 if shift is None else shift)).astype(np.float32)


# --- linear algebra ------------------------------------------------------------------------
@handles("MatMul")
def _matmul(cx: Ctx, ins: list[Any]) -> list[Any]:
    em, a = cx.em, cx.node.attrs
    x, w = ins
    if a.get("transpose_a"):
        x = em.transpose(x, [1, 0], f"{cx.hint}_At")
    if a.get("transpose_b"):
        w = em.transpose(w, [1, 0], f"{cx.hint}_Bt")
    n = em.shape(w)[-1]
    scale, shift = fold_affine(cx, n, 2, isinstance(w, np.ndarray))
    if isinstance(w, np.ndarray):
        w = _scaled(np.asarray(w, np.float32), scale, 1)
    return [em.matmul(x, w, cx.hint, bias=_bias(None, scale, shift, n))]


@handles("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(cx: Ctx, ins: list[Any]) -> list[Any]:
    em, a = cx.em, cx.node.attrs
    x, y = ins

    def t(v: Value, hint: str) -> Value:
        r = len(em.shape(v))
        return em.transpose(v, [*range(r - 2), r - 1, r - 2], hint)

    if a.get("adj_x"):
        x = t(x, f"{cx.hint}_At")
    if a.get("adj_y"):
        y = t(y, f"{cx.hint}_Bt")
    return [em.matmul(x, y, cx.hint)]


# --- convolution and pooling -------------------------------------------------------------
def _spatial(cx: Ctx, attr: str, fmt: str, default: int = 1) -> list[int]:
    v = ints(cx.node.attrs.get(attr, [default] * 4))
    if len(v) != 4:
        raise ValueError(f"attribute {attr!r} is {v}: a 2-D {cx.node.op} needs 4 values (one per axis of {fmt})")
    if (v[0], v[3] if fmt == "NHWC" else v[1]) != (1, 1):
        raise Unsupported(f"{attr} {v} along the batch or channel axis")
    return [v[1], v[2]] if fmt == "NHWC" else [v[2], v[3]]


def _pads(cx: Ctx, hw: tuple[int, ...], kernel: list[int], strides: list[int], dil: list[int], fmt: str) -> list[int]:
    """TensorFlow's padding as (top, left, bottom, right): VALID none, SAME the smaller half
    before (ONNX's SAME_UPPER), EXPLICIT from explicit_paddings."""
    mode = str(cx.node.attrs.get("padding", "VALID"))
    if mode == "VALID":
        return [0, 0, 0, 0]
    if mode == "EXPLICIT":
        p = ints(cx.node.attrs.get("explicit_paddings", []))
        if len(p) != 8:
            raise ValueError(f"attribute 'explicit_paddings' has {len(p)} values; a 2-D {cx.node.op} needs 8")
        pairs = [p[2:4], p[4:6]] if fmt == "NHWC" else [p[4:6], p[6:8]]
        return [pairs[0][0], pairs[1][0], pairs[0][1], pairs[1][1]]
    if mode != "SAME":
        raise Unsupported(f"padding {mode!r}")
    begin, end = [], []
    for n, k, s, d in zip(hw, kernel, strides, dil):
        total = max(0, (-(-n // s) - 1) * s + d * (k - 1) + 1 - n)
        begin.append(total // 2)
        end.append(total - total // 2)
    return begin + end


def _to_nchw(cx: Ctx, x: Value, fmt: str) -> str:
    return cx.em.tensor(x) if fmt == "NCHW" else cx.em.tensor(cx.em.transpose(x, [0, 3, 1, 2], f"{cx.hint}_nchw"))


def _from_nchw(cx: Ctx, y: str, fmt: str) -> Value:
    return y if fmt == "NCHW" else cx.em.transpose(y, [0, 2, 3, 1], f"{cx.hint}_nhwc")


@handles("Conv2D", "DepthwiseConv2dNative")
def _conv(cx: Ctx, ins: list[Any]) -> list[Any]:
    em, fmt = cx.em, _fmt(cx)
    x, f = ins[0], cx.const(ins[1], f"{cx.node.op} filter")
    if f.ndim != 4:
        raise ValueError(f"filter of shape {list(f.shape)}: a 2-D convolution's filter has 4 axes (height, width, in, out)")
    kh, kw, cin, cm = f.shape
    if cx.node.op == "Conv2D":
        w = np.ascontiguousarray(np.transpose(f, (3, 2, 0, 1)), np.float32)  # HWIO -> OIHW
        c_in = em.shape(x)[3 if fmt == "NHWC" else 1]
        if c_in % cin:
            raise ValueError(f"{c_in} input channels do not match the filter's {cin}")
        groups = c_in // cin
    else:  # depthwise: output channel i * multiplier + m reads input channel i
        w = np.ascontiguousarray(np.transpose(f.reshape(kh, kw, cin * cm), (2, 0, 1))[:, None], np.float32)
        groups = cin
    c_out = w.shape[0]
    strides, dil = _spatial(cx, "strides", fmt), _spatial(cx, "dilations", fmt)
    # Channels are the last axis only in NHWC: there, per-channel constants after it fold in.
    scale, shift = fold_affine(cx, c_out, 4, True) if fmt == "NHWC" else (None, None)
    w, b = _scaled(w, scale, 0), _bias(None, scale, shift, c_out)
    xn = _to_nchw(cx, x, fmt)
    pads = _pads(cx, em.shape(xn)[2:], [kh, kw], strides, dil, fmt)
    bias = None if b is None else em.tensor(b, f"{cx.hint}_B")
    y = em.b.conv(em.name(cx.hint), xn, em.tensor(w, f"{cx.hint}_W"), bias, strides, pads, dil, groups)
    return [_from_nchw(cx, y, fmt)]


@handles("Conv2DBackpropInput")
def _conv_transpose(cx: Ctx, ins: list[Any]) -> list[Any]:
    """A transposed convolution (Keras' Conv2DTranspose): the input gradient of the forward
    convolution from `input_sizes` to this input, as a transposed convolution whose output
    padding makes it exactly `input_sizes`."""
    em, fmt = cx.em, _fmt(cx)
    sizes = ints(cx.const(ins[0], "input_sizes"))
    f, x = cx.const(ins[1], "Conv2DBackpropInput filter"), ins[2]
    if f.ndim != 4 or len(sizes) != 4:
        raise ValueError(f"filter of shape {list(f.shape)} / input_sizes {sizes}: a 2-D transposed convolution needs 4 of each")
    kh, kw, co, ci = f.shape
    strides, dil = _spatial(cx, "strides", fmt), _spatial(cx, "dilations", fmt)
    out_hw = sizes[1:3] if fmt == "NHWC" else sizes[2:4]
    xn = _to_nchw(cx, x, fmt)
    if em.shape(xn)[1] != ci:
        raise ValueError(f"{em.shape(xn)[1]} input channels do not match the filter's {ci}")
    pads = _pads(cx, tuple(out_hw), [kh, kw], strides, dil, fmt)  # the forward convolution's padding
    n_hw = em.shape(xn)[2:]
    full = [(n - 1) * s + d * (k - 1) + 1 - pads[a] - pads[a + 2] for a, (n, s, d, k) in enumerate(zip(n_hw, strides, dil, (kh, kw)))]
    opad = [o - g for o, g in zip(out_hw, full)]
    if any(p < 0 or p >= max(s, d) for p, s, d in zip(opad, strides, dil)):
        raise ValueError(f"input_sizes {sizes} is not an output size of this transposed convolution (from {list(em.shape(xn))})")
    w = np.ascontiguousarray(np.transpose(f, (3, 2, 0, 1)), np.float32)  # (kh, kw, out, in) -> (in, out, kh, kw)
    scale, shift = fold_affine(cx, co, 4, True) if fmt == "NHWC" else (None, None)
    w, b = _scaled(w, scale, 1), _bias(None, scale, shift, co)
    bias = None if b is None else em.tensor(b, f"{cx.hint}_B")
    y = em.b.conv_transpose(em.name(cx.hint), xn, em.tensor(w, f"{cx.hint}_W"), bias, strides, pads, dil, 1, opad)
    return [_from_nchw(cx, y, fmt)]


@handles("MaxPool", "AvgPool")
def _pool(cx: Ctx, ins: list[Any]) -> list[Any]:
    em, fmt = cx.em, _fmt(cx)
    kernel, strides = _spatial(cx, "ksize", fmt), _spatial(cx, "strides", fmt)
    xn = _to_nchw(cx, ins[0], fmt)
    pads = _pads(cx, em.shape(xn)[2:], kernel, strides, [1, 1], fmt)
    kind = "max" if cx.node.op == "MaxPool" else "avg"
    # SAME average pooling divides by the elements inside the input, as pool_nd does by default.
    y = em.b.pool_nd(em.name(cx.hint), xn, kind, kernel, strides, pads)
    return [_from_nchw(cx, y, fmt)]


@handles("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _fused_batchnorm(cx: Ctx, ins: list[Any]) -> list[Any]:
    if cx.node.attrs.get("is_training", True):
        raise Unsupported("FusedBatchNorm in training mode")
    fmt = _fmt(cx)
    gamma, beta, mean, var = (np.asarray(cx.const(v, "batch norm parameters"), np.float64) for v in ins[1:5])
    eps = float(cx.node.attrs.get("epsilon", 1e-3))
    scale = gamma / np.sqrt(var + eps)
    em = cx.em
    s = em.tensor(scale.astype(np.float32), f"{cx.hint}_scale")
    t = em.tensor((beta - mean * scale).astype(np.float32), f"{cx.hint}_shift")
    axis = len(em.shape(ins[0])) - 1 if fmt == "NHWC" else 1
    out = em.b.channel_affine(em.name(cx.hint), em.tensor(ins[0]), s, t, axis=axis)
    return [out, *([MISSING] * (cx.node.outputs - 1))]


# --- reductions and softmax ---------------------------------------------------------------------
@handles("Mean", "Sum", "Max", "Min")
def _reduce(cx: Ctx, ins: list[Any]) -> list[Any]:
    rank = len(cx.em.shape(ins[0]))
    axes = ints(cx.const(ins[1], "reduction axes"))
    if not axes:
        return [ins[0]]
    kind = cx.node.op.lower()
    keep = bool(cx.node.attrs.get("keep_dims", False))
    try:
        return [cx.em.b.reduce(cx.em.name(cx.hint), cx.em.tensor(ins[0]), axis_indices(axes, rank), kind, keep)]
    except ValueError as exc:
        raise Unsupported(str(exc)) from None


@handles("Softmax", "LogSoftmax")
def _softmax(cx: Ctx, ins: list[Any]) -> list[Any]:
    rank = len(cx.em.shape(ins[0]))
    return [cx.em.b.softmax_nd(cx.em.name(cx.hint), cx.em.tensor(ins[0]), [rank - 1], log=cx.node.op == "LogSoftmax")]


# --- shape manipulation (views) ------------------------------------------------------------------
@handles("Reshape")
def _reshape(cx: Ctx, ins: list[Any]) -> list[Any]:
    old = cx.em.shape(ins[0])
    target = ints(cx.const(ins[1], "the target shape"))
    if target.count(-1) > 1:
        raise ValueError(f"target shape {target} has more than one -1")
    if -1 in target:
        known = math.prod(t for t in target if t != -1)
        target[target.index(-1)] = math.prod(old) // max(known, 1)
    if math.prod(target) != math.prod(old):
        raise ValueError(f"cannot reshape {list(old)} to {target}")
    return [cx.em.reshape(ins[0], tuple(target) or (1,), cx.hint)]


@handles("Squeeze")
def _squeeze(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = cx.em.shape(ins[0])
    dims = ints(cx.node.attrs.get("squeeze_dims", []))
    drop = axis_indices(dims, len(shape)) if dims else [k for k, n in enumerate(shape) if n == 1]
    if any(shape[k] != 1 for k in drop):
        raise ValueError(f"squeeze of axes {drop} of shape {list(shape)}: not all of size 1")
    new = tuple(n for k, n in enumerate(shape) if k not in drop) or (1,)
    return [cx.em.reshape(ins[0], new, cx.hint, "Squeeze")]


@handles("ExpandDims")
def _expand_dims(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = list(cx.em.shape(ins[0]))
    axis = axis_index(ints(cx.const(ins[1], "ExpandDims axis"))[0], len(shape), inclusive=True)
    return [cx.em.reshape(ins[0], (*shape[:axis], 1, *shape[axis:]), cx.hint, "ExpandDims")]


@handles("Transpose")
def _transpose(cx: Ctx, ins: list[Any]) -> list[Any]:
    return [cx.em.transpose(ins[0], ints(cx.const(ins[1], "the permutation")), cx.hint)]


@handles("ConcatV2")
def _concat(cx: Ctx, ins: list[Any]) -> list[Any]:
    rank = len(cx.em.shape(ins[0]))
    axis = axis_index(ints(cx.const(ins[-1], "the concat axis"))[0], rank)
    return [cx.em.concat(list(ins[:-1]), axis, cx.hint)]


@handles("Pack")
def _pack(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = list(cx.em.shape(ins[0]))
    axis = axis_index(int(cx.node.attrs.get("axis", 0)), len(shape), inclusive=True)
    new = (*shape[:axis], 1, *shape[axis:])
    parts = [cx.em.reshape(x, new, f"{cx.hint}_{k}", "ExpandDims") for k, x in enumerate(ins)]
    return [parts[0] if len(parts) == 1 else cx.em.concat(parts, axis, cx.hint)]


@handles("Unpack")
def _unpack(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = cx.em.shape(ins[0])
    axis = axis_index(int(cx.node.attrs.get("axis", 0)), len(shape))
    if len(shape) == 1:
        raise Unsupported("Unpack of a 1-D tensor gives rank-0 tensors, which the IR does not have")
    x = cx.em.tensor(ins[0])
    outs = []
    for k in range(shape[axis]):
        outs.append(cx.em.b.gather(cx.em.name(f"{cx.hint}_{k}"), x, axis, k))
        cx.em.note_view("Unpack", f"{cx.hint}_{k}")
    return outs


def _split_at(cx: Ctx, x: Value, axis: int, sizes: list[int]) -> list[Any]:
    shape = cx.em.shape(x)
    if sum(sizes) != shape[axis] or min(sizes) <= 0:
        raise ValueError(f"split sizes {sizes} do not cover axis {axis} of shape {list(shape)}")
    outs, start = [], 0
    for k, n in enumerate(sizes):
        outs.append(cx.em.slice(x, [axis], [start], [start + n], [1], f"{cx.hint}_{k}"))
        start += n
    return outs


@handles("Split")
def _split(cx: Ctx, ins: list[Any]) -> list[Any]:
    dim, x = ins
    shape = cx.em.shape(x)
    axis = axis_index(ints(cx.const(dim, "the split axis"))[0], len(shape))
    n = int(cx.node.attrs.get("num_split", 1))
    if n <= 0 or shape[axis] % n:
        raise ValueError(f"axis {axis} of size {shape[axis]} does not split into {n} equal parts")
    return _split_at(cx, x, axis, [shape[axis] // n] * n)


@handles("SplitV")
def _split_v(cx: Ctx, ins: list[Any]) -> list[Any]:
    x, sizes_v, dim = ins
    shape = cx.em.shape(x)
    axis = axis_index(ints(cx.const(dim, "the split axis"))[0], len(shape))
    sizes = ints(cx.const(sizes_v, "the split sizes"))
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
    return _split_at(cx, x, axis, sizes)


@handles("Slice")
def _slice(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = cx.em.shape(ins[0])
    begin, size = ints(cx.const(ins[1], "Slice begin")), ints(cx.const(ins[2], "Slice size"))
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ValueError(f"Slice begin {begin} / size {size} do not match rank {len(shape)}")
    ends = [n if s == -1 else b + s for b, s, n in zip(begin, size, shape)]
    if any(b < 0 or e > n or e <= b for b, e, n in zip(begin, ends, shape)):
        raise ValueError(f"Slice begin {begin} size {size} is outside shape {list(shape)}")
    return [cx.em.slice(ins[0], list(range(len(shape))), begin, ends, [1] * len(shape), cx.hint)]


def _bit(mask: int, k: int) -> bool:
    return bool((mask >> k) & 1)


@handles("StridedSlice")
def _strided_slice(cx: Ctx, ins: list[Any]) -> list[Any]:
    """TensorFlow's strided slice (masks, ellipsis, new and shrunk axes) as a slice view
    followed by a reshape view."""
    a = cx.node.attrs
    shape = cx.em.shape(ins[0])
    begin, end = ints(cx.const(ins[1], "StridedSlice begin")), ints(cx.const(ins[2], "StridedSlice end"))
    strides = ints(cx.const(ins[3], "StridedSlice strides"))
    bm, em_, ell, new, shrink = (int(a.get(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
    if bin(ell).count("1") > 1:
        raise ValueError("StridedSlice with more than one ellipsis")
    real = sum(1 for k in range(len(begin)) if not _bit(ell, k) and not _bit(new, k))
    axes, starts, ends, steps, out_shape = [], [], [], [], []
    d = 0
    for k in range(len(begin)):
        if _bit(ell, k):
            for _ in range(len(shape) - real):
                out_shape.append(shape[d])
                d += 1
            continue
        if _bit(new, k):
            out_shape.append(1)
            continue
        if d >= len(shape):
            raise ValueError(f"StridedSlice indexes {real} axes of a rank-{len(shape)} tensor")
        n, s = shape[d], strides[k]
        if s == 0:
            raise ValueError("StridedSlice with a stride of 0")
        if _bit(shrink, k):
            i = begin[k] + n if begin[k] < 0 else begin[k]
            if not 0 <= i < n:
                raise ValueError(f"StridedSlice index {begin[k]} is out of range for an axis of {n}")
            axes.append(d)
            starts.append(i)
            ends.append(i + 1)
            steps.append(1)
        else:
            b = begin[k] if not _bit(bm, k) else (0 if s > 0 else n - 1)
            e = end[k] if not _bit(em_, k) else (n if s > 0 else -(n + 1))
            length = len(range(n)[slice(b, e, s)])
            if length == 0:
                raise Unsupported(f"StridedSlice gives an empty axis {d}")
            axes.append(d)
            starts.append(b)
            ends.append(e)
            steps.append(s)
            out_shape.append(length)
        d += 1
    out_shape += list(shape[d:])
    x = cx.em.slice(ins[0], axes, starts, ends, steps, f"{cx.hint}_slice")
    return [cx.em.reshape(x, tuple(out_shape) or (1,), cx.hint, "StridedSlice")]


@handles("GatherV2")
def _gather(cx: Ctx, ins: list[Any]) -> list[Any]:
    if int(cx.node.attrs.get("batch_dims", 0)):
        raise Unsupported("GatherV2 with batch_dims")
    idx = cx.const(ins[1], "gather indices (an index computed from data, e.g. an Embedding of token ids, is not mapped)")
    if idx.ndim > 1:
        raise Unsupported("GatherV2 with multi-dimensional indices")
    rank = len(cx.em.shape(ins[0]))
    axis = axis_index(ints(cx.const(ins[2], "the gather axis"))[0], rank)
    indices: int | list[int] = int(idx) if idx.ndim == 0 else ints(idx)
    if isinstance(indices, int) and rank == 1:
        raise Unsupported("gather of one element of a 1-D tensor gives a rank-0 tensor, which the IR does not have")
    name = cx.em.b.gather(cx.em.name(cx.hint), cx.em.tensor(ins[0]), axis, indices)
    cx.em.note_view("Gather", cx.hint)
    return [name]


@handles("Pad", "PadV2", "MirrorPad")
def _pad(cx: Ctx, ins: list[Any]) -> list[Any]:
    shape = cx.em.shape(ins[0])
    pads = np.asarray(cx.const(ins[1], "the paddings")).astype(int)
    if pads.shape != (len(shape), 2):
        raise ValueError(f"paddings of shape {list(pads.shape)} for a rank-{len(shape)} tensor (expected [{len(shape)}, 2])")
    mode, value = "constant", 0.0
    if cx.node.op == "PadV2":
        value = float(cx.const(ins[2], "the pad value").reshape(-1)[0])
    elif cx.node.op == "MirrorPad":
        if str(cx.node.attrs.get("mode")) != "REFLECT":
            raise Unsupported(f"MirrorPad mode {cx.node.attrs.get('mode')!r} (REFLECT is mapped)")
        mode = "reflect"
        if any(b >= n or e >= n for (b, e), n in zip(pads, shape)):
            raise Unsupported("reflect padding wider than the input")
    before, after = [int(p[0]) for p in pads], [int(p[1]) for p in pads]
    return [cx.em.b.pad_nd(cx.em.name(cx.hint), cx.em.tensor(ins[0]), before, after, value, mode)]
