"""ONNX operator mappings: one handler per op type, onto `Emitter` / `NdBuilder` operators.

A handler gets the node and its input values (constants as numpy arrays, computed tensors
as pipeline names) and returns its output values. What it cannot map exactly it raises as
`Unsupported` with the reason; the importer collects those and reports all of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..tensor_ops import axis_index, axis_indices
from .common import Emitter, Unsupported, Value, handler_registry, ints
from .nd_conv import check_window


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    proto: Any = None

    @property
    def hint(self) -> str:
        return self.name or (self.outputs[0] if self.outputs else self.op)


@dataclass
class Ctx:
    em: Emitter
    opset: int
    hint: str = ""  # stage-name hint of the node being mapped

    def const(self, v: Value | None, what: str) -> np.ndarray:
        if not isinstance(v, np.ndarray):
            raise Unsupported(f"{what} must be a constant, but it is computed from data")
        return v


Handler = Callable[[Ctx, Node, list[Any]], list[Value]]
HANDLERS: dict[str, Handler] = {}


handles = handler_registry(HANDLERS)


# --- pass-through and elementwise ------------------------------------------------------
@handles("Identity", "Dropout")
def _identity(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if node.op == "Dropout" and len(ins) > 2 and ins[2] is not None and bool(cx.const(ins[2], "training_mode").reshape(-1)[0]):
        raise Unsupported("Dropout in training mode")
    cx.em.simplifications.append(f"{node.op} {node.hint!r} removed")
    return [ins[0]]


@handles("Cast")
def _cast(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if int(node.attrs["to"]) != 1:  # TensorProto.FLOAT
        raise Unsupported("cast of computed data to a type other than float32 (the IR is float32)")
    return [ins[0]]


_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Softplus": "softplus", "HardSwish": "hardswish",
}  # fmt: skip


@handles(*_UNARY)
def _unary(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    return [cx.em.unary(_UNARY[node.op], ins[0], cx.hint)]


@handles("LeakyRelu", "Elu", "HardSigmoid", "Gelu")
def _unary_attr(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    a = node.attrs
    if node.op == "LeakyRelu":
        return [cx.em.unary("leaky_relu", ins[0], cx.hint, alpha=float(a.get("alpha", 0.01)))]
    if node.op == "Elu":
        return [cx.em.unary("elu", ins[0], cx.hint, alpha=float(a.get("alpha", 1.0)))]
    if node.op == "HardSigmoid":
        return [cx.em.unary("hardsigmoid", ins[0], cx.hint, alpha=float(a.get("alpha", 0.2)), beta=float(a.get("beta", 0.5)))]
    return [cx.em.unary("gelu_tanh" if a.get("approximate", "none") == "tanh" else "gelu", ins[0], cx.hint)]


@handles("Clip")
def _clip(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if cx.opset < 11:
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
    else:
        lo = None if len(ins) < 2 or ins[1] is None else float(cx.const(ins[1], "Clip min").reshape(-1)[0])
        hi = None if len(ins) < 3 or ins[2] is None else float(cx.const(ins[2], "Clip max").reshape(-1)[0])
    if lo is not None and hi is not None and (lo, hi) == (0.0, 6.0):
        return [cx.em.unary("relu6", ins[0], cx.hint)]
    return [cx.em.unary("clip", ins[0], cx.hint, lo=lo, hi=hi)]


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


@handles(*_BINARY)
def _binary(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    return [cx.em.binary(_BINARY[node.op], ins[0], ins[1], cx.hint)]


@handles("Pow")
def _pow(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    p = cx.em.scalar(ins[1]) if isinstance(ins[1], np.ndarray) else None
    if p is None:
        raise Unsupported("Pow with a computed or non-scalar exponent (only constant scalar exponents are mapped)")
    if np.broadcast_shapes(cx.em.shape(ins[0]), ins[1].shape) != cx.em.shape(ins[0]):
        raise Unsupported("Pow whose exponent broadcasts the base to a larger shape")
    return [cx.em.unary("pow", ins[0], cx.hint, p=p)]


@handles("Sum", "Mean", "Max", "Min")
def _nary(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    fn = node.op.lower()
    xs = [x for x in ins if x is not None]
    if len(xs) == 1:
        return [xs[0]]
    if len(xs) == 2 and fn in ("sum", "max", "min"):
        return [cx.em.binary({"sum": "add"}.get(fn, fn), xs[0], xs[1], cx.hint)]
    return [cx.em.b.nary(cx.em.name(cx.hint), [cx.em.tensor(x, f"{cx.hint}_const") for x in xs], fn)]


# --- linear algebra ----------------------------------------------------------------------
@handles("MatMul")
def _matmul(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    bias = ins[2] if len(ins) > 2 else None  # a following Add of a bias, fused by the importer
    return [cx.em.matmul(ins[0], ins[1], cx.hint, bias=bias)]


@handles("Gemm")
def _gemm(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    if node.attrs.get("transA", 0):
        a = cx.em.transpose(a, [1, 0], f"{cx.hint}_At")
    if node.attrs.get("transB", 0):
        b = cx.em.transpose(b, [1, 0], f"{cx.hint}_Bt")
    if isinstance(b, np.ndarray) and alpha != 1.0:  # fold the scale into constant weights
        b, alpha = b * np.float32(alpha), 1.0
    if isinstance(c, np.ndarray) and beta != 1.0:
        c, beta = c * np.float32(beta), 1.0
    return [cx.em.matmul(a, b, cx.hint, bias=c, alpha=alpha, beta=beta)]


# --- convolution, normalization, pooling ---------------------------------------------------
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _window(node: Node, spatial: int, kernel: list[int]) -> tuple[list[int], list[int]]:
    """The node's strides and dilations (default 1), with every window attribute it has
    checked against its `spatial` axes before anything divides by a stride or indexes a list."""
    a = node.attrs
    strides, dil = ints(a.get("strides", [1] * spatial)), ints(a.get("dilations", [1] * spatial))
    opt = {k: ints(a[k]) for k in ("pads", "output_padding") if k in a}
    check_window(node.op, spatial, kernel=kernel, strides=strides, dilations=dil, **opt)
    if a.get("auto_pad", "NOTSET") not in AUTO_PADS:
        raise ValueError(f"attribute 'auto_pad' is {a['auto_pad']!r}: expected one of {', '.join(AUTO_PADS)}")
    if "kernel_shape" in a and ints(a["kernel_shape"]) != kernel:
        raise ValueError(f"attribute 'kernel_shape' {ints(a['kernel_shape'])} differs from the weight's spatial shape {kernel}")
    return strides, dil


def _pads(cx: Ctx, node: Node, in_hw: tuple[int, ...], kernel: list[int], strides: list[int], dil: list[int]) -> list[int]:
    """ONNX pads (begin..., end...) from explicit pads or auto_pad (checked by `_window`)."""
    auto = node.attrs.get("auto_pad", "NOTSET")
    nd = len(kernel)
    if auto in ("NOTSET", "VALID"):
        return ints(node.attrs.get("pads", [0] * 2 * nd)) if auto == "NOTSET" else [0] * 2 * nd
    begin, end = [], []
    for n, k, s, d in zip(in_hw, kernel, strides, dil):
        out = -(-n // s)
        total = max(0, (out - 1) * s + d * (k - 1) + 1 - n)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


@handles("Conv", "ConvTranspose")
def _conv(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    em = cx.em
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    wshape = em.shape(w)
    if len(wshape) not in (3, 4):
        raise Unsupported(f"{len(wshape) - 2}-D convolution (1-D and 2-D are mapped)")
    one_d = len(wshape) == 3
    raw_strides, raw_dil = _window(node, len(wshape) - 2, list(wshape[2:]))
    if one_d:  # a 1-D conv is a 2-D conv of height 1: views on both sides
        x = em.reshape(x, (*em.shape(x)[:2], 1, em.shape(x)[2]), f"{cx.hint}_x2d", "Unsqueeze")
        w = em.reshape(w, (*wshape[:2], 1, wshape[2]), f"{cx.hint}_w2d", "Unsqueeze")
    kernel = list(em.shape(w)[2:])
    a = node.attrs
    pad1 = lambda v, fill: [fill, *v] if one_d else list(v)
    strides, dil = pad1(raw_strides, 1), pad1(raw_dil, 1)
    groups = int(a.get("group", 1))
    if node.op == "Conv":
        raw = _pads(cx, node, em.shape(x)[2 + one_d :], kernel[one_d:], strides[one_d:], dil[one_d:])
        pads = [0, raw[0], 0, raw[1]] if one_d else raw
        out = em.b.conv(
            em.name(cx.hint), em.tensor(x), em.tensor(w, f"{cx.hint}_W"), _opt(em, bias, f"{cx.hint}_B"), strides, pads, dil, groups
        )
    else:
        if "output_shape" in a or a.get("auto_pad", "NOTSET") != "NOTSET":
            raise Unsupported("ConvTranspose with output_shape or auto_pad (explicit pads are mapped)")
        raw = ints(a.get("pads", [0] * (4 - 2 * one_d)))
        pads = [0, raw[0], 0, raw[1]] if one_d else raw
        opad = pad1(ints(a.get("output_padding", [0] * (2 - one_d))), 0)
        out = em.b.conv_transpose(
            em.name(cx.hint), em.tensor(x), em.tensor(w, f"{cx.hint}_W"), _opt(em, bias, f"{cx.hint}_B"), strides, pads, dil, groups, opad
        )
    if one_d:
        s = em.shape(out)
        return [em.reshape(out, (s[0], s[1], s[3]), f"{cx.hint}_1d", "Squeeze")]
    return [out]


def _opt(em: Emitter, v: Value | None, hint: str) -> str | None:
    return None if v is None else em.tensor(v, hint)


@handles("BatchNormalization")
def _batchnorm(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if node.attrs.get("training_mode", 0):
        raise Unsupported("BatchNormalization in training mode")
    if len([o for o in node.outputs if o]) > 1:
        raise Unsupported("BatchNormalization with running-statistics outputs")
    gamma, beta, mean, var = (cx.const(v, "BatchNormalization parameters") for v in ins[1:5])
    from .common import bn_scale_shift  # noqa: PLC0415

    scale, shift = bn_scale_shift(gamma, beta, mean, var, float(node.attrs.get("epsilon", 1e-5)))
    return [cx.em.batchnorm(ins[0], scale, shift, cx.hint)]


@handles("LayerNormalization")
def _layernorm(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if len([o for o in node.outputs if o]) > 1:
        raise Unsupported("LayerNormalization with Mean / InvStdDev outputs")
    em = cx.em
    gamma = em.tensor(ins[1], f"{cx.hint}_scale")
    beta = _opt(em, ins[2] if len(ins) > 2 else None, f"{cx.hint}_bias")
    axis, eps = int(node.attrs.get("axis", -1)), float(node.attrs.get("epsilon", 1e-5))
    return [em.b.layernorm_nd(em.name(cx.hint), em.tensor(ins[0]), gamma, beta, axis, eps)]


@handles("MaxPool", "AveragePool")
def _pool(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    em, a = cx.em, node.attrs
    if len([o for o in node.outputs if o]) > 1:
        raise Unsupported("MaxPool with an Indices output")
    kernel = ints(a["kernel_shape"])
    if len(kernel) != 2:
        raise Unsupported(f"{len(kernel)}-D pooling (2-D is mapped)")
    strides, dil = _window(node, 2, kernel)
    if node.op == "AveragePool" and dil != [1, 1]:
        raise Unsupported("AveragePool with dilations")
    pads = _pads(cx, node, em.shape(ins[0])[2:], kernel, strides, dil)
    kind = "max" if node.op == "MaxPool" else "avg"
    out = em.b.pool_nd(
        em.name(cx.hint),
        em.tensor(ins[0]),
        kind,
        kernel,
        strides,
        pads,
        dil,
        bool(a.get("ceil_mode", 0)),
        bool(a.get("count_include_pad", 0)),
    )
    return [out]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    rank = len(cx.em.shape(ins[0]))
    kind = "mean" if node.op == "GlobalAveragePool" else "max"
    return [cx.em.b.reduce(cx.em.name(cx.hint), cx.em.tensor(ins[0]), list(range(2, rank)), kind, True)]


@handles("Softmax", "LogSoftmax")
def _softmax(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    rank = len(cx.em.shape(ins[0]))
    if cx.opset >= 13:
        axes = [axis_index(int(node.attrs.get("axis", -1)), rank)]
    else:  # before opset 13: softmax of the input flattened to 2-D at `axis`
        axes = list(range(axis_index(int(node.attrs.get("axis", 1)), rank), rank))
    return [cx.em.b.softmax_nd(cx.em.name(cx.hint), cx.em.tensor(ins[0]), axes, log=node.op == "LogSoftmax")]


@handles("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    rank = len(cx.em.shape(ins[0]))
    if len(ins) > 1 and ins[1] is not None:
        axes = ints(cx.const(ins[1], "reduction axes"))
    else:
        axes = ints(node.attrs.get("axes", []))
    if not axes:
        if node.attrs.get("noop_with_empty_axes", 0):
            return [ins[0]]
        axes = list(range(rank))
    kind = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}[node.op]
    keep = bool(node.attrs.get("keepdims", 1))
    try:
        return [cx.em.b.reduce(cx.em.name(cx.hint), cx.em.tensor(ins[0]), axis_indices(axes, rank), kind, keep)]
    except ValueError as exc:
        raise Unsupported(str(exc)) from None


# --- shape manipulation (views) ------------------------------------------------------------
@handles("Reshape")
def _reshape(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    old = cx.em.shape(ins[0])
    target = ints(cx.const(ins[1], "the target shape"))
    if not node.attrs.get("allowzero", 0):
        target = [old[k] if t == 0 else t for k, t in enumerate(target)]
    if -1 in target:
        known = math.prod(t for t in target if t != -1)
        target[target.index(-1)] = math.prod(old) // known
    return [cx.em.reshape(ins[0], tuple(target), cx.hint)]


@handles("Flatten")
def _flatten(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    shape = cx.em.shape(ins[0])
    axis = axis_index(int(node.attrs.get("axis", 1)), len(shape), inclusive=True)
    return [cx.em.reshape(ins[0], (math.prod(shape[:axis]), math.prod(shape[axis:])), cx.hint, "Flatten")]


def _axes(cx: Ctx, node: Node, ins: list[Any]) -> list[int] | None:
    if len(ins) > 1 and ins[1] is not None:
        return ints(cx.const(ins[1], "axes"))
    return ints(node.attrs["axes"]) if "axes" in node.attrs else None


@handles("Squeeze", "Unsqueeze")
def _squeeze(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    shape = list(cx.em.shape(ins[0]))
    axes = _axes(cx, node, ins)
    if node.op == "Squeeze":
        drop = set(axis_indices(axes, len(shape))) if axes is not None else {k for k, n in enumerate(shape) if n == 1}
        new = [n for k, n in enumerate(shape) if k not in drop] or [1]
    else:
        rank = len(shape) + len(axes or [])
        new_axes = axis_indices(axes or [], rank)
        it = iter(shape)
        new = [1 if k in new_axes else next(it) for k in range(rank)]
    return [cx.em.reshape(ins[0], tuple(new), cx.hint, node.op)]


@handles("Transpose")
def _transpose(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    rank = len(cx.em.shape(ins[0]))
    perm = ints(node.attrs.get("perm", list(range(rank))[::-1]))
    return [cx.em.transpose(ins[0], perm, cx.hint)]


@handles("Expand")
def _expand(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    return [cx.em.expand(ins[0], tuple(ints(cx.const(ins[1], "the target shape"))), cx.hint)]


@handles("Concat")
def _concat(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    xs = [x for x in ins if x is not None and math.prod(cx.em.shape(x)) > 0]
    return [cx.em.concat(xs, int(node.attrs["axis"]), cx.hint)]


@handles("Split")
def _split(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    shape = cx.em.shape(ins[0])
    axis = axis_index(int(node.attrs.get("axis", 0)), len(shape))
    n_out = len(node.outputs)
    if len(ins) > 1 and ins[1] is not None:
        sizes = ints(cx.const(ins[1], "split sizes"))
    elif "split" in node.attrs:
        sizes = ints(node.attrs["split"])
    else:
        per = -(-shape[axis] // n_out)
        sizes = [min(per, shape[axis] - k * per) for k in range(n_out)]
    outs, start = [], 0
    for k, size in enumerate(sizes):
        outs.append(cx.em.slice(ins[0], [axis], [start], [start + size], [1], f"{cx.hint}_{k}"))
        start += size
    return outs


@handles("Slice")
def _slice(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    rank = len(cx.em.shape(ins[0]))
    if cx.opset < 10:
        starts, ends = ints(node.attrs["starts"]), ints(node.attrs["ends"])
        axes = ints(node.attrs.get("axes", list(range(len(starts)))))
        steps = [1] * len(starts)
    else:
        starts, ends = ints(cx.const(ins[1], "Slice starts")), ints(cx.const(ins[2], "Slice ends"))
        axes = ints(cx.const(ins[3], "Slice axes")) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = ints(cx.const(ins[4], "Slice steps")) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    return [cx.em.slice(ins[0], [axis_index(a, rank) for a in axes], starts, ends, steps, cx.hint)]


@handles("Gather")
def _gather(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    idx = cx.const(ins[1], "Gather indices")
    if idx.ndim > 1:
        raise Unsupported("Gather with multi-dimensional indices")
    indices: int | list[int] = int(idx) if idx.ndim == 0 else ints(idx)
    if isinstance(indices, int) and len(cx.em.shape(ins[0])) == 1:
        raise Unsupported("Gather of one element of a 1-D tensor gives a rank-0 tensor, which the IR does not have")
    name = cx.em.b.gather(cx.em.name(cx.hint), cx.em.tensor(ins[0]), int(node.attrs.get("axis", 0)), indices)
    cx.em.note_view("Gather", cx.hint)
    return [name]


@handles("Pad")
def _pad(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    shape = cx.em.shape(ins[0])
    mode = node.attrs.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect"):
        raise Unsupported(f"Pad mode {mode!r}")
    if cx.opset < 11:
        pads, value = ints(node.attrs["pads"]), float(node.attrs.get("value", 0.0))
        axes = list(range(len(shape)))
    else:
        pads = ints(cx.const(ins[1], "Pad pads"))
        value = float(cx.const(ins[2], "Pad value").reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None else 0.0
        axes = ints(cx.const(ins[3], "Pad axes")) if len(ins) > 3 and ins[3] is not None else list(range(len(shape)))
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad has {len(pads)} pads for {len(axes)} axes (expected {2 * len(axes)})")
    before, after = [0] * len(shape), [0] * len(shape)
    for k, a in enumerate(axes):
        ax = axis_index(a, len(shape), "Pad axis")
        before[ax], after[ax] = pads[k], pads[k + len(axes)]
    if mode == "reflect" and any(b >= n or e >= n for b, e, n in zip(before, after, shape)):
        raise Unsupported("reflect padding wider than the input")
    return [cx.em.b.pad_nd(cx.em.name(cx.hint), cx.em.tensor(ins[0]), before, after, value, mode)]
