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
    types: dict[str, Any] = field(default_factory=dict)  # value -> (ONNX element type, shape) from shape inference

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
    """Identity, and Dropout at inference in all its forms: opset < 7's `is_test` attribute,
    opset 12's `training_mode` input; its mask output (if named) is all ones."""
    if node.op == "Dropout":
        if len(ins) > 2 and ins[2] is not None and bool(cx.const(ins[2], "training_mode").reshape(-1)[0]):
            raise Unsupported("Dropout in training mode")
        if cx.opset < 7 and not node.attrs.get("is_test", 0) and float(node.attrs.get("ratio", 0.5)) > 0:
            raise Unsupported("Dropout in training mode (is_test=0)")
    cx.em.simplifications.append(f"{node.op} {node.hint!r} removed")
    if node.op == "Dropout" and len(node.outputs) > 1 and node.outputs[1]:
        return [ins[0], np.ones(cx.em.shape(ins[0]), dtype=bool)]
    return [ins[0]]


FLOATS = (1, 10, 11)  # float32, float16, float64: all computed in float32
INTEGERS = (2, 3, 5, 6, 7, 9)  # uint8, int8, int16, int32, int64, bool: integer values carried in float32


@handles("Cast")
def _cast(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """To a float type: the values as they are. Between integer types, or from integers to
    floats: the same values. Float data to an integer type would round: unsupported."""
    to = int(node.attrs["to"])
    src = cx.types.get(node.inputs[0], (0, []))[0]
    if to in FLOATS or (to in INTEGERS and src in INTEGERS and to != 9):
        cx.em.simplifications.append(f"Cast {node.hint!r} removed (the values are unchanged)")
        return [ins[0]]
    raise Unsupported(f"Cast of computed data from element type {src} to {to} (it would change the values)")


_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Softplus": "softplus", "HardSwish": "hardswish",
}  # fmt: skip


@handles(*_UNARY)
def _unary(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    return [cx.em.unary(_UNARY[node.op], ins[0], cx.hint)]


@handles("LeakyRelu", "Elu", "HardSigmoid", "Gelu", "Selu", "Shrink", "Sign", "Softsign")
def _unary_attr(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    a = node.attrs
    if node.op == "Selu":
        defaults = {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}
        return [cx.em.unary("selu", ins[0], cx.hint, **{k: float(a.get(k, v)) for k, v in defaults.items()})]
    if node.op == "Shrink":
        return [cx.em.unary("shrink", ins[0], cx.hint, lambd=float(a.get("lambd", 0.5)), bias=float(a.get("bias", 0.0)))]
    if node.op in ("Sign", "Softsign"):
        return [cx.em.unary(node.op.lower(), ins[0], cx.hint)]
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


def legacy_broadcast(cx: Ctx, node: Node, a: Value, b: Value) -> Value:
    """Before opset 7, `broadcast=1` with `axis` aligns b's axes with a's from `axis` on (numpy
    aligns trailing axes): b is reshaped with trailing ones so numpy's rule gives the same."""
    if cx.opset >= 7 or not node.attrs.get("broadcast", 0) or "axis" not in node.attrs:
        return b
    ra, sb = len(cx.em.shape(a)), cx.em.shape(b)
    axis = axis_index(int(node.attrs["axis"]), ra)
    if axis + len(sb) > ra:
        raise ValueError(f"broadcast axis {axis} does not fit shape {list(sb)} into rank {ra}")
    return cx.em.reshape(b, (*sb, *([1] * (ra - axis - len(sb)))), f"{cx.hint}_b", "Reshape")


@handles(*_BINARY)
def _binary(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if node.op == "Div" and any(cx.types.get(i, (1,))[0] in INTEGERS for i in node.inputs):
        raise Unsupported("Div of integers (it rounds; the IR divides floats)")
    b = legacy_broadcast(cx, node, ins[0], ins[1])
    return [cx.em.binary(_BINARY[node.op], ins[0], b, cx.hint)]


@handles("PRelu")
def _prelu(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    x, slope = ins
    xs, ss = cx.em.shape(x), cx.em.shape(slope)
    if cx.opset < 7 and len(xs) > 2 and len(ss) == 1 and ss[0] == xs[1] and ss[0] != 1:  # opset 6: one slope per channel
        slope = cx.em.reshape(slope, (ss[0], *([1] * (len(xs) - 2))), f"{cx.hint}_slope", "Reshape")
    return [cx.em.binary("prelu", x, slope, cx.hint)]


@handles("Where")
def _where(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    em = cx.em
    shape = tuple(int(n) for n in np.broadcast_shapes(*(em.shape(v) for v in ins)))

    def operand(v: Value, k: int) -> str | float:
        s = em.scalar(v) if isinstance(v, np.ndarray) and len(v.shape) <= len(shape) else None
        return s if s is not None and k > 0 else em.tensor(v, f"{cx.hint}_{('cond', 'a', 'b')[k]}")

    c, a, b = (operand(v, k) for k, v in enumerate(ins))
    assert isinstance(c, str)
    out = em.b.where(em.name(cx.hint), c, a, b)
    return [em.expand(out, shape, f"{cx.hint}_expand")]


@handles("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or")
def _compare(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """Comparisons and logic as 0/1 values (a bool tensor is carried in float32)."""
    em = cx.em
    fns = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}
    from ..expr import cmp, select  # noqa: PLC0415

    if node.op == "Not":
        return [em.b.pointwise(em.name(cx.hint), "not", [em.tensor(ins[0])], lambda a: select(cmp("==", a, 0.0), 1.0, 0.0))]
    srcs = [em.tensor(v, f"{cx.hint}_const") for v in ins]
    if node.op in ("And", "Or"):
        op = node.op.lower()
        body = lambda a, b: select(cmp(op, cmp("!=", a, 0.0), cmp("!=", b, 0.0)), 1.0, 0.0)
    else:
        body = lambda a, b: select(cmp(fns[node.op], a, b), 1.0, 0.0)
    return [em.b.pointwise(em.name(cx.hint), node.op.lower(), srcs, body)]


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
    if len(wshape) not in (3, 4, 5) or (len(wshape) == 5 and node.op == "ConvTranspose"):
        raise Unsupported(f"{len(wshape) - 2}-D {'transposed ' if node.op == 'ConvTranspose' else ''}convolution (1-D to 3-D are mapped)")
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
        raw_opad = ints(a.get("output_padding", [0] * (2 - one_d)))
        raw = _transpose_pads(node, list(em.shape(ins[0])[2:]), list(wshape[2:]), raw_strides, raw_dil, raw_opad)
        pads = [0, raw[0], 0, raw[1]] if one_d else raw
        opad = pad1(raw_opad, 0)
        out = em.b.conv_transpose(
            em.name(cx.hint), em.tensor(x), em.tensor(w, f"{cx.hint}_W"), _opt(em, bias, f"{cx.hint}_B"), strides, pads, dil, groups, opad
        )
    if one_d:
        s = em.shape(out)
        return [em.reshape(out, (s[0], s[1], s[3]), f"{cx.hint}_1d", "Squeeze")]
    return [out]


def _transpose_pads(node: Node, sizes: list[int], kernel: list[int], strides: list[int], dil: list[int], opad: list[int]) -> list[int]:
    """A transposed convolution's pads: explicit, or from `output_shape` / SAME auto_pad (the
    output `size * stride`) as the ONNX definition computes them (SAME_UPPER: the smaller
    half first). A negative total (output larger than the full result) is unsupported."""
    a = node.attrs
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" not in a and auto in ("NOTSET", "VALID"):
        return ints(a.get("pads", [0] * 2 * len(sizes))) if auto == "NOTSET" else [0] * 2 * len(sizes)
    want = ints(a["output_shape"])[-len(sizes) :] if "output_shape" in a else [n * st for n, st in zip(sizes, strides)]
    begin, end = [], []
    for n, k, st, d, op, o in zip(sizes, kernel, strides, dil, opad, want):
        total = st * (n - 1) + op + (k - 1) * d + 1 - o
        if total < 0:
            raise Unsupported(f"ConvTranspose output_shape {want} beyond the full result (total padding {total})")
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def _opt(em: Emitter, v: Value | None, hint: str) -> str | None:
    return None if v is None else em.tensor(v, hint)


@handles("BatchNormalization")
def _batchnorm(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if node.attrs.get("training_mode", 0):
        raise Unsupported("BatchNormalization in training mode")
    if len([o for o in node.outputs if o]) > 1:
        raise Unsupported("BatchNormalization with running-statistics outputs")
    gamma, beta, mean, var = (cx.const(v, "BatchNormalization parameters") for v in ins[1:5])
    if (
        cx.opset < 9
        and not int(node.attrs.get("spatial", 1))
        and any(np.size(v) != cx.em.shape(ins[0])[1] for v in (gamma, beta, mean, var))
    ):
        raise Unsupported("BatchNormalization with spatial=0 (statistics per activation, not per channel)")
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
    if len(kernel) not in (1, 2, 3):
        raise Unsupported(f"{len(kernel)}-D pooling (1-D to 3-D are mapped)")
    strides, dil = _window(node, len(kernel), kernel)
    if node.op == "AveragePool" and any(d != 1 for d in dil):
        raise Unsupported("AveragePool with dilations")
    pads = _pads(cx, node, em.shape(ins[0])[2:], kernel, strides, dil)
    kind = "max" if node.op == "MaxPool" else "avg"
    x = ins[0]
    one_d = len(kernel) == 1
    if one_d:  # a 1-D pooling is a 2-D one of height 1: views on both sides
        x = em.reshape(x, (*em.shape(x)[:2], 1, em.shape(x)[2]), f"{cx.hint}_x2d", "Unsqueeze")
        kernel, strides, dil, pads = [1, *kernel], [1, *strides], [1, *dil], [0, pads[0], 0, pads[1]]
    out = em.b.pool_nd(
        em.name(cx.hint) if not one_d else em.b.fresh(f"{em.name(cx.hint)}_2d"),
        em.tensor(x),
        kind,
        kernel,
        strides,
        pads,
        dil,
        bool(a.get("ceil_mode", 0)),
        bool(a.get("count_include_pad", 0)),
    )
    if one_d:
        sh = em.shape(out)
        return [em.reshape(out, (sh[0], sh[1], sh[3]), cx.hint, "Squeeze")]
    return [out]


@handles("InstanceNormalization")
def _instancenorm(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """Normalized over the spatial axes per sample and channel, then the per-channel affine."""
    em = cx.em
    scale, bias = cx.const(ins[1], "InstanceNormalization scale"), cx.const(ins[2], "InstanceNormalization bias")
    if len(em.shape(ins[0])) < 3:
        raise ValueError("InstanceNormalization needs an input of rank 3 or more (N, C, spatial...)")
    eps = float(node.attrs.get("epsilon", 1e-5))
    normed = em.b.layernorm_nd(em.b.fresh(f"{em.name(cx.hint)}_norm"), em.tensor(ins[0]), None, None, 2, eps)
    return [em.batchnorm(normed, scale, bias, cx.hint)]


@handles("LRN")
def _lrn(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """Local response normalization across channels: x / (bias + alpha / size * sum of x^2
    over a window of `size` channels) ** beta. alpha / size * the window sum is alpha times
    an average pool over the channel axis that counts the zero padding (a 3-D pooling of
    x^2 viewed as (N, 1, C, H, W) with a (size, 1, 1) window), the rest pointwise."""
    em, a = cx.em, node.attrs
    size = int(a["size"])
    alpha, beta, bias = float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0))
    shape = em.shape(ins[0])
    if len(shape) != 4:
        raise Unsupported(f"LRN of a rank-{len(shape)} tensor (NCHW is mapped)")
    n, c, h, w = shape
    lo, hi = (size - 1) // 2, size // 2
    x = em.tensor(ins[0])
    sq = em.binary("mul", x, x, f"{cx.hint}_sq")
    sq5 = em.reshape(sq, (n, 1, c, h, w), f"{cx.hint}_sq5", "Reshape")
    win = em.b.pool_nd(
        em.b.fresh(f"{em.name(cx.hint)}_mean"), em.tensor(sq5), "avg", [size, 1, 1], [1, 1, 1], [lo, 0, 0, hi, 0, 0], [1, 1, 1], False, True
    )
    win4 = em.reshape(win, shape, f"{cx.hint}_mean4", "Reshape")
    den = em.binary("add", em.binary("mul", win4, alpha, f"{cx.hint}_scaled"), bias, f"{cx.hint}_den")
    return [em.binary("mul", x, em.unary("pow", den, f"{cx.hint}_pow", p=-beta), cx.hint)]


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


@handles("Tile")
def _tile(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    reps = ints(cx.const(ins[1], "Tile repeats"))
    if any(r < 1 for r in reps):
        raise Unsupported("Tile with a repeat count below 1 (an empty tensor)")
    if all(r == 1 for r in reps):
        return [ins[0]]
    out = cx.em.b.tile(cx.em.name(cx.hint), cx.em.tensor(ins[0]), reps)
    cx.em.note_view("Tile", cx.hint)
    return [out]


@handles("Gather")
def _gather(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    if not isinstance(ins[1], np.ndarray):  # computed indices (an Embedding's token ids)
        em = cx.em
        axis = axis_index(int(node.attrs.get("axis", 0)), len(em.shape(ins[0])))
        if any(i.name == ins[1] and not i.weight for i in em.b.inputs):
            n = em.shape(ins[0])[axis]
            em.index_ranges[ins[1]] = [-n, n]
        return [em.b.gather_data(em.name(cx.hint), em.tensor(ins[0], f"{cx.hint}_table"), axis, ins[1])]
    idx = cx.const(ins[1], "Gather indices")
    if idx.ndim > 1:  # gathered flat, then the index axes unflattened (views)
        em = cx.em
        shape = em.shape(ins[0])
        axis = axis_index(int(node.attrs.get("axis", 0)), len(shape))
        flat = em.b.gather(em.b.fresh(f"{em.name(cx.hint)}_flat"), em.tensor(ins[0]), axis, ints(idx))
        em.note_view("Gather", cx.hint)
        return [em.reshape(flat, (*shape[:axis], *idx.shape, *shape[axis + 1 :]), cx.hint, "Reshape")]
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
    if cx.opset < 11:  # attributes; opset 1 named them `paddings`
        pads, value = ints(node.attrs["pads"] if "pads" in node.attrs else node.attrs["paddings"]), float(node.attrs.get("value", 0.0))
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


# --- Einsum, Resize / Upsample ---------------------------------------------------------------
@handles("Einsum")
def _einsum(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """Two-operand contractions (attention's 'bhqd,bhkd->bhqk', 'bhqk,bhkd->bhqd', linear
    layers' 'bij,jk->bik', ...) and one-operand transposes / sums: views around one batched
    matmul (or a reduction). Labels repeated within an operand (diagonals) and '...' with
    different ranks are unsupported."""
    em = cx.em
    eq = str(node.attrs["equation"]).replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ins) or len(terms) not in (1, 2):
        raise Unsupported(f"Einsum {eq!r} with {len(ins)} operands (one or two are mapped)")
    shapes = [em.shape(v) for v in ins]
    ell = {len(sh) - len(t.replace("...", "")) for t, sh in zip(terms, shapes) if "..." in t}
    if len(ell) > 1:
        raise Unsupported(f"Einsum {eq!r}: '...' covers different ranks (broadcast)")
    n_ell = ell.pop() if ell else 0
    terms = [_expand_ellipsis(t, len(sh), eq) for t, sh in zip(terms, shapes)]
    if not _:  # implicit output: '...' first, then the labels seen once, sorted
        seen = "".join(terms)
        out = _expand_ellipsis("..." if n_ell else "", n_ell, eq) + "".join(
            sorted(c for c in set(seen) if seen.count(c) == 1 and not c.isupper())
        )
    else:
        out = _expand_ellipsis(out, len(out.replace("...", "")) + n_ell, eq)
    if any(len(set(t)) != len(t) for t in [*terms, out]):
        raise Unsupported(f"Einsum {eq!r} repeats a label within an operand (a diagonal)")
    size = {c: n for t, sh in zip(terms, shapes) for c, n in zip(t, sh)}
    if len(terms) == 1:
        (t,) = terms
        summed = [k for k, c in enumerate(t) if c not in out]
        x = ins[0]
        if summed:
            x = em.b.reduce(em.b.fresh(f"{em.name(cx.hint)}_sum"), em.tensor(x), summed, "sum", False)
            t = "".join(c for c in t if c in out)
        return [em.transpose(x, [t.index(c) for c in out], cx.hint)]
    ta, tb = terms
    if any(c not in ta and c not in tb for c in out):
        raise Unsupported(f"Einsum {eq!r}: an output label appears in no operand")
    batch = [c for c in out if c in ta and c in tb]
    contract = [c for c in ta if c in tb and c not in out]
    xs = list(ins)
    for k, (t, other) in enumerate(((ta, tb), (tb, ta))):  # a label of one operand only, not in the output: summed first
        summed = [j for j, c in enumerate(t) if c not in other and c not in out]
        if summed:
            xs[k] = em.b.reduce(em.b.fresh(f"{em.name(cx.hint)}_sum{k}"), em.tensor(xs[k]), summed, "sum", False)
            t = "".join(c for c in t if c in other or c in out)
            ta, tb = (t, tb) if k == 0 else (ta, t)
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    if any(size[c] != n for t, sh in zip(terms, shapes) for c, n in zip(t, sh)):
        raise Unsupported(f"Einsum {eq!r}: a label's sizes differ between operands (broadcast)")
    prod = lambda cs: math.prod(size[c] for c in cs)
    a = em.transpose(xs[0], [ta.index(c) for c in batch + free_a + contract], f"{cx.hint}_a")
    a = em.reshape(a, (*[size[c] for c in batch], prod(free_a), prod(contract)), f"{cx.hint}_a3", "Reshape")
    b = em.transpose(xs[1], [tb.index(c) for c in batch + contract + free_b], f"{cx.hint}_b")
    b = em.reshape(b, (*[size[c] for c in batch], prod(contract), prod(free_b)), f"{cx.hint}_b3", "Reshape")
    mm = em.matmul(a, b, f"{cx.hint}_mm")
    got = batch + free_a + free_b
    mm = em.reshape(mm, tuple(size[c] for c in got), f"{cx.hint}_unflat", "Reshape")
    return [em.transpose(mm, [got.index(c) for c in out], cx.hint)]


def _expand_ellipsis(term: str, rank: int, eq: str) -> str:
    """'...' as fresh upper-case labels (ONNX labels are letters; '...' covers the leading axes)."""
    if "..." not in term:
        return term
    head, tail = term.split("...")
    n = rank - len(head) - len(tail)
    if n < 0:
        raise ValueError(f"Einsum {eq!r}: '...' in {term!r} does not fit a rank-{rank} operand")
    return head + "".join(chr(ord("A") + k) for k in range(n)) + tail


def interpolation_matrix(n_in: int, n_out: int, scale: float, mode: str, coord: str, nearest: str, cubic_a: float = -0.75) -> np.ndarray:
    """The (n_out, n_in) matrix that resizes one axis as ONNX's Resize does: each output
    position's source coordinate (by `coord`, the coordinate transformation mode), then
    nearest (rounded by `nearest`), linear or cubic weights, clamped at the borders."""
    m = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        if coord == "asymmetric":
            x = o / scale
        elif coord == "align_corners":
            x = 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
        elif coord == "pytorch_half_pixel":
            x = (o + 0.5) / scale - 0.5 if n_out > 1 else 0.0
        elif coord == "half_pixel":
            x = (o + 0.5) / scale - 0.5
        elif coord == "half_pixel_symmetric":
            adj = n_out / (scale * n_in)
            center = n_in / 2
            x = center * (1 - adj) + (o + 0.5) / scale - 0.5
        else:
            raise Unsupported(f"Resize coordinate_transformation_mode {coord!r}")
        if mode == "nearest":
            fl = math.floor(x)
            rounds = {"round_prefer_floor": x - fl > 0.5, "round_prefer_ceil": x - fl >= 0.5, "floor": False, "ceil": x > fl}
            if nearest not in rounds:
                raise Unsupported(f"Resize nearest_mode {nearest!r}")
            m[o, min(max(fl + int(rounds[nearest]), 0), n_in - 1)] = 1.0
        elif mode == "linear":
            x = min(max(x, 0.0), n_in - 1)
            lo = int(math.floor(x))
            hi = min(lo + 1, n_in - 1)
            m[o, lo] += 1.0 - (x - lo)
            m[o, hi] += x - lo
        elif mode == "cubic":
            fl = math.floor(x)
            t = x - fl
            A = cubic_a
            w = [
                ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                ((A + 2) * t - (A + 3)) * t * t + 1,
                ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A,
            ]
            for k, wk in enumerate(w):
                m[o, min(max(fl - 1 + k, 0), n_in - 1)] += wk
        else:
            raise Unsupported(f"Resize mode {mode!r}")
    return m


@handles("Resize", "Upsample")
def _resize(cx: Ctx, node: Node, ins: list[Any]) -> list[Value]:
    """Resize (opset 10+) and Upsample (opset 7-9: `scales` attribute, then input): each
    resized axis is a contraction with its constant interpolation matrix (a matmul), or,
    for nearest upsampling by an integer factor, a view (index // factor)."""
    em, a = cx.em, node.attrs
    shape = em.shape(ins[0])
    rank = len(shape)
    mode = str(a.get("mode", "nearest"))
    if node.op == "Upsample":
        scales = [float(v) for v in (a["scales"] if "scales" in a else cx.const(ins[1], "Upsample scales").reshape(-1))]
        coord, nearest = "asymmetric", "floor"
        mode = "linear" if mode == "bilinear" else mode
        sizes = [int(math.floor(n * s)) for n, s in zip(shape, scales)]
    else:
        coord = str(a.get("coordinate_transformation_mode", "half_pixel" if cx.opset >= 11 else "asymmetric"))
        nearest = str(a.get("nearest_mode", "round_prefer_floor"))
        if cx.opset < 11:
            scales = [float(v) for v in cx.const(ins[1], "Resize scales").reshape(-1)]
            coord, nearest = "asymmetric", "floor"
            sizes = [int(math.floor(n * s)) for n, s in zip(shape, scales)]
        else:
            if int(a.get("exclude_outside", 0)) or a.get("keep_aspect_ratio_policy", "stretch") != "stretch" or "axes" in a:
                raise Unsupported("Resize with exclude_outside, keep_aspect_ratio_policy or axes")
            sc = ins[2] if len(ins) > 2 and ins[2] is not None and np.size(cx.const(ins[2], "Resize scales")) else None
            sz = ins[3] if len(ins) > 3 and ins[3] is not None else None
            if sz is not None:
                sizes = ints(cx.const(sz, "Resize sizes"))
                scales = [o / n for o, n in zip(sizes, shape)]
            elif sc is not None:
                scales = [float(v) for v in sc.reshape(-1)]
                sizes = [int(math.floor(n * s)) for n, s in zip(shape, scales)]
            else:
                raise ValueError("Resize needs scales or sizes")
            if coord == "tf_crop_and_resize":
                raise Unsupported("Resize coordinate_transformation_mode 'tf_crop_and_resize'")
    if len(scales) != rank or len(sizes) != rank:
        raise ValueError(f"{node.op} has {len(scales)} scales / {len(sizes)} sizes for a rank-{rank} input")
    if any(n < 1 for n in sizes) or any(not sc > 0 for sc in scales):
        raise ValueError(f"{node.op} to sizes {sizes} (scales {scales}): every size and scale must be positive")
    x: Value = ins[0]
    for axis in range(rank):
        if sizes[axis] == shape[axis] and scales[axis] == 1.0:
            continue
        n_in, n_out = shape[axis], sizes[axis]
        hint = f"{cx.hint}_ax{axis}"
        f = n_out // n_in
        if mode == "nearest" and coord == "asymmetric" and nearest == "floor" and n_out == n_in * f and scales[axis] == f:

            def down(idx: tuple[Any, ...], ax: int = axis, f: int = f) -> tuple[Any, ...]:
                return (*idx[:ax], idx[ax] // f, *idx[ax + 1 :])

            new_shape = (*em.shape(x)[:axis], n_out, *em.shape(x)[axis + 1 :])
            x = em.b.view(em.name(hint), em.tensor(x), new_shape, down, "upsample_nearest", axis=axis, factor=f)
            em.note_view("Upsample", hint)
            continue
        m = interpolation_matrix(n_in, n_out, scales[axis], mode, coord, nearest, float(a.get("cubic_coeff_a", -0.75))).astype(np.float32)
        # out = M @ x along `axis`: move the axis last, multiply by M^T, move it back.
        perm = [k for k in range(rank) if k != axis] + [axis]
        back = [perm.index(k) for k in range(rank)]
        xt = em.transpose(x, perm, f"{hint}_t")
        x = em.transpose(em.matmul(xt, np.ascontiguousarray(m.T), hint), back, f"{hint}_back")
    return [x]


# --- sequences (resolved at import: positions are constants) -----------------------------------
class Seq(list[Any]):
    """A tensor sequence value: the list of its tensors' values (no pipeline object)."""


SEQUENCE_OPS = frozenset(
    "SequenceEmpty SequenceConstruct SequenceInsert SequenceErase SequenceAt SequenceLength SplitToSequence ConcatFromSequence".split()
)


def _position(cx: Ctx, v: Value | None, n: int, default: int, what: str, inclusive: bool = False) -> int:
    if v is None:
        return default
    k = int(cx.const(v, what).reshape(-1)[0])
    hi = n + 1 if inclusive else n
    if not -n <= k < hi:
        raise ValueError(f"{what} {k} is out of range for a sequence of {n}")
    return k + n if k < 0 else k


def _seq(v: Any, node: Node) -> Seq:
    if not isinstance(v, Seq):
        raise ValueError(f"{node.op} reads {node.inputs[0]!r}, which is not a sequence")
    return v


@handles(*SEQUENCE_OPS)
def _sequence(cx: Ctx, node: Node, ins: list[Any]) -> list[Any]:
    em, op = cx.em, node.op
    opt = lambda k: ins[k] if len(ins) > k else None
    if op == "SequenceEmpty":
        return [Seq()]
    if op == "SequenceConstruct":
        return [Seq(ins)]
    if op == "SplitToSequence":
        shape = em.shape(ins[0])
        axis = axis_index(int(node.attrs.get("axis", 0)), len(shape))
        split = opt(1)
        if split is None:
            parts = [em.slice(ins[0], [axis], [k], [k + 1], [1], f"{cx.hint}_{k}") for k in range(shape[axis])]
            if not int(node.attrs.get("keepdims", 1)):
                drop = (*shape[:axis], *shape[axis + 1 :]) or (1,)
                parts = [em.reshape(p, drop, f"{cx.hint}_{k}_sq", "Squeeze") for k, p in enumerate(parts)]
            return [Seq(parts)]
        sizes = ints(cx.const(split, "SplitToSequence split"))
        if len(sizes) == 1 and np.ndim(split) == 0:  # one chunk size: equal chunks, the last smaller
            sizes = [min(sizes[0], shape[axis] - k) for k in range(0, shape[axis], sizes[0])]
        starts = np.cumsum([0, *sizes[:-1]])
        return [Seq(em.slice(ins[0], [axis], [int(b)], [int(b) + n], [1], f"{cx.hint}_{k}") for k, (b, n) in enumerate(zip(starts, sizes)))]
    seq = _seq(ins[0], node)
    if op == "SequenceLength":
        return [np.array(len(seq), dtype=np.int64)]
    if op == "SequenceAt":
        return [seq[_position(cx, ins[1], len(seq), 0, "SequenceAt position")]]
    if op == "SequenceInsert":
        k = _position(cx, opt(2), len(seq), len(seq), "SequenceInsert position", inclusive=True)
        return [Seq([*seq[:k], ins[1], *seq[k:]])]
    if op == "SequenceErase":
        if not seq:
            raise ValueError("SequenceErase of an empty sequence")
        k = _position(cx, opt(1), len(seq), len(seq) - 1, "SequenceErase position")
        return [Seq([*seq[:k], *seq[k + 1 :]])]
    # ConcatFromSequence
    if not seq:
        raise ValueError("ConcatFromSequence of an empty sequence")
    rank = len(em.shape(seq[0]))
    if int(node.attrs.get("new_axis", 0)):
        axis = axis_index(int(node.attrs["axis"]), rank, inclusive=True)
        seq = Seq(
            em.reshape(v, (*em.shape(v)[:axis], 1, *em.shape(v)[axis:]), f"{cx.hint}_{k}_unsq", "Unsqueeze") for k, v in enumerate(seq)
        )
    else:
        axis = axis_index(int(node.attrs["axis"]), rank)
    return [em.concat(list(seq), axis, cx.hint)]
