"""PyTorch mappings for torch.fx nodes: modules by type, functions by target, methods by name
(elementwise, layers, normalization, pooling, reductions here; matmul, attention and shape
operations in torch_views.py).

Every handler gets `Args` (the node's arguments with graph values substituted: numpy arrays
for constants, pipeline names for computed tensors) and returns the node's value. Cases a
handler cannot map exactly raise `Unsupported` with the reason.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .common import Emitter, Unsupported, Value


def _no_params(name: str) -> np.ndarray:
    raise Unsupported(f"parameter {name!r} asked of a call that is not a module's")


@dataclass
class Args:
    em: Emitter
    hint: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    module: nn.Module | None = None
    target: str = ""  # the module's qualified name (names its weights)
    folded: tuple[np.ndarray, np.ndarray] | None = None  # conv weights with a batch norm folded in
    params: Callable[[str], np.ndarray] = _no_params  # the module's parameter `name` as an array

    def get(self, i: int, name: str, default: Any = None) -> Any:
        if name in self.kwargs:
            return self.kwargs[name]
        return self.args[i] if i < len(self.args) else default

    def ints(self, start: int, name: str) -> list[int]:
        """Varargs or one sequence: x.view(2, -1), x.view((2, -1)), torch.reshape(x, shape)."""
        if name in self.kwargs:
            return [int(v) for v in self.kwargs[name]]
        rest = self.args[start:]
        if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)):
            rest = tuple(rest[0])
        return [int(v) for v in rest]


Handler = Callable[[Args], Any]
MODULES: dict[type, Handler] = {}
FUNCTIONS: dict[Any, Handler] = {}
METHODS: dict[str, Handler] = {}


def _pair(v: Any) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v), int(v)]


def _register(table: dict[str, tuple[Any, ...]], make: Callable[[str], Handler]) -> None:
    """Each entry's targets get `make(name)`: a string is a method name (x.relu()), anything
    else a function target (torch.relu, operator.add)."""
    for name, targets in table.items():
        for t in targets:
            if isinstance(t, str):
                METHODS[t] = make(name)
            else:
                FUNCTIONS[t] = make(name)


# --- elementwise -------------------------------------------------------------------------
def _unary(fn: str, **fixed: Any) -> Handler:
    return lambda a: a.em.unary(fn, a.args[0], a.hint, **fixed)


_register(
    {
        "relu": (torch.relu, F.relu, "relu"),
        "relu6": (F.relu6,),
        "sigmoid": (torch.sigmoid, F.sigmoid, "sigmoid"),
        "tanh": (torch.tanh, F.tanh, "tanh"),
        "silu": (F.silu,),
        "hardswish": (F.hardswish,),
        "exp": (torch.exp, "exp"),
        "sqrt": (torch.sqrt, "sqrt"),
        "erf": (torch.erf, "erf"),
        "abs": (torch.abs, "abs"),
        "log": (torch.log, "log"),
        "neg": (operator.neg, torch.neg, "neg"),
        "reciprocal": (torch.reciprocal, "reciprocal"),
    },
    _unary,
)
FUNCTIONS[torch.rsqrt] = METHODS["rsqrt"] = lambda a: a.em.unary("pow", a.args[0], a.hint, p=-0.5)


def _gelu(a: Args) -> Value:
    approx = a.get(1, "approximate", "none") if a.module is None else a.module.approximate
    return a.em.unary("gelu_tanh" if approx == "tanh" else "gelu", a.args[0], a.hint)


def _leaky(a: Args) -> Value:
    slope = a.module.negative_slope if isinstance(a.module, nn.LeakyReLU) else a.get(1, "negative_slope", 0.01)
    return a.em.unary("leaky_relu", a.args[0], a.hint, alpha=float(slope))


def _clamp(a: Args) -> Value:
    if isinstance(a.module, nn.Hardtanh):  # ReLU6 too
        lo, hi = a.module.min_val, a.module.max_val
    else:
        lo, hi = a.get(1, "min"), a.get(2, "max")
    if any(v is not None and not isinstance(v, (int, float)) for v in (lo, hi)):
        raise Unsupported("clamp with tensor bounds")
    return a.em.unary("clip", a.args[0], a.hint, lo=None if lo is None else float(lo), hi=None if hi is None else float(hi))


FUNCTIONS.update({F.gelu: _gelu, F.leaky_relu: _leaky, torch.clamp: _clamp, torch.clip: _clamp, F.hardtanh: _clamp})
METHODS.update({"clamp": _clamp, "clip": _clamp})
MODULES.update({nn.GELU: _gelu, nn.LeakyReLU: _leaky, nn.Hardtanh: _clamp, nn.ReLU6: _clamp})
for _m, _fn in {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Hardswish: "hardswish"}.items():
    MODULES[_m] = _unary(_fn)


def _binary(fn: str, swap: bool = False) -> Handler:
    def h(a: Args) -> Value:
        x, y = a.args[0], a.get(1, "other")
        alpha = a.kwargs.get("alpha", 1)
        if alpha != 1:  # torch.add(x, y, alpha=2)
            y = a.em.binary("mul", y, float(alpha), f"{a.hint}_alpha") if isinstance(y, str) else y * alpha
        if a.kwargs.get("rounding_mode") is not None:
            raise Unsupported("division with a rounding mode")
        return a.em.binary(fn, y, x, a.hint) if swap else a.em.binary(fn, x, y, a.hint)

    return h


_register(
    {
        "add": (operator.add, torch.add, "add", operator.iadd),
        "sub": (operator.sub, torch.sub, "sub", operator.isub),
        "mul": (operator.mul, torch.mul, "mul", operator.imul),
        "div": (operator.truediv, torch.div, "div", operator.itruediv),
        "max": (torch.maximum,),
        "min": (torch.minimum,),
    },
    _binary,
)
METHODS["__radd__"], METHODS["__rsub__"], METHODS["__rmul__"] = _binary("add", True), _binary("sub", True), _binary("mul", True)


def _pow(a: Args) -> Value:
    p = a.em.scalar(a.get(1, "exponent"))
    if p is None or not isinstance(a.args[0], str):
        raise Unsupported("pow with a tensor exponent (constant scalar exponents are mapped)")
    return a.em.unary("pow", a.args[0], a.hint, p=p)


FUNCTIONS[operator.pow] = FUNCTIONS[torch.pow] = METHODS["pow"] = _pow


def _alias(note: str | None = None) -> Handler:
    def h(a: Args) -> Value:
        if note:
            a.em.simplifications.append(f"{note} {a.hint!r} removed")
        return a.args[0]

    return h


for _m in (nn.Dropout, nn.Dropout2d, nn.Identity):
    MODULES[_m] = _alias(_m.__name__)
FUNCTIONS[F.dropout] = _alias("dropout")
METHODS["contiguous"] = _alias()


def _to(a: Args) -> Value:
    dtypes = [v for v in (*a.args[1:], a.kwargs.get("dtype")) if isinstance(v, torch.dtype)]
    if any(d != torch.float32 for d in dtypes):
        raise Unsupported("conversion of computed data to a type other than float32")
    return a.args[0]


METHODS["to"] = METHODS["float"] = METHODS["type_as"] = _to


# --- linear layers, convolution, normalization, pooling -------------------------------------------
def _linear(a: Args) -> Value:
    if a.module is not None:
        w, b = a.params("weight"), a.params("bias") if a.module.bias is not None else None
    else:
        w, b = a.get(1, "weight"), a.get(2, "bias")
    wt = w.T.copy() if isinstance(w, np.ndarray) else a.em.transpose(w, [1, 0], f"{a.hint}_wT")
    if a.module is not None:  # stored transposed, (in, out), as matmul reads it
        a.em.name_const(wt, f"{a.target}.weight_t")
    return a.em.matmul(a.args[0], wt, a.hint, bias=b)


MODULES[nn.Linear] = FUNCTIONS[F.linear] = _linear


def _conv(a: Args) -> Value:
    m = a.module
    if not isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        raise Unsupported("only Conv2d / ConvTranspose2d modules are mapped")
    w, b = a.folded or (a.params("weight"), a.params("bias") if m.bias is not None else None)
    em, x = a.em, a.em.tensor(a.args[0])
    if isinstance(m.padding, str):
        if m.padding == "valid":
            pads = [0, 0, 0, 0]
        else:  # 'same' (stride 1): PyTorch puts the odd pixel at the end
            tot = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
            pads = [tot[0] // 2, tot[1] // 2, tot[0] - tot[0] // 2, tot[1] - tot[1] // 2]
    else:
        pads = [*m.padding, *m.padding]
    if m.padding_mode != "zeros":
        if m.padding_mode not in ("reflect", "replicate"):
            raise Unsupported(f"padding_mode {m.padding_mode!r}")
        mode = "reflect" if m.padding_mode == "reflect" else "edge"
        x = em.b.pad_nd(em.name(f"{a.hint}_pad"), x, (0, 0, pads[0], pads[1]), (0, 0, pads[2], pads[3]), 0.0, mode)
        pads = [0, 0, 0, 0]
    wt, bt = em.tensor(w, f"{a.hint}_weight"), None if b is None else em.tensor(b, f"{a.hint}_bias")
    if isinstance(m, nn.ConvTranspose2d):
        return em.b.conv_transpose(em.name(a.hint), x, wt, bt, m.stride, pads, m.dilation, m.groups, m.output_padding)
    return em.b.conv(em.name(a.hint), x, wt, bt, m.stride, pads, m.dilation, m.groups)


MODULES[nn.Conv2d] = MODULES[nn.ConvTranspose2d] = _conv


def _batchnorm(a: Args) -> Value:
    m = a.module
    assert isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))
    if a.folded is not None:  # folded into the producing conv: this node is the conv's value
        a.em.simplifications.append(f"BatchNorm {a.hint!r} folded into the preceding Conv2d (new weight and bias arrays)")
        return a.args[0]
    if m.running_mean is None:
        raise Unsupported("batch norm without running statistics uses batch statistics even in eval mode")
    from .common import bn_scale_shift  # noqa: PLC0415

    ones, zeros = np.ones(m.num_features, np.float32), np.zeros(m.num_features, np.float32)
    gamma = a.params("weight") if m.affine else ones
    beta = a.params("bias") if m.affine else zeros
    scale, shift = bn_scale_shift(gamma, beta, a.params("running_mean"), a.params("running_var"), m.eps)
    return a.em.batchnorm(a.args[0], scale, shift, a.hint)


MODULES[nn.BatchNorm2d] = MODULES[nn.BatchNorm1d] = _batchnorm


def _layernorm(a: Args) -> Value:
    em = a.em
    if isinstance(a.module, nn.LayerNorm):
        m = a.module
        shape, eps = list(m.normalized_shape), m.eps
        g = a.params("weight") if m.elementwise_affine else None
        b = a.params("bias") if m.elementwise_affine and m.bias is not None else None
    else:
        shape, g, b, eps = list(a.get(1, "normalized_shape")), a.get(2, "weight"), a.get(3, "bias"), a.get(4, "eps", 1e-5)
    gt = None if g is None else em.tensor(g, f"{a.hint}_weight")
    bt = None if b is None else em.tensor(b, f"{a.hint}_bias")
    return em.b.layernorm_nd(em.name(a.hint), em.tensor(a.args[0]), gt, bt, -len(shape), float(eps))


MODULES[nn.LayerNorm] = FUNCTIONS[F.layer_norm] = _layernorm


def _pool(kind: str) -> Handler:
    def h(a: Args) -> Value:
        m = a.module
        get = (lambda i, n, d=None: getattr(m, n, d)) if m is not None else a.get
        k = _pair(get(1, "kernel_size"))
        s = _pair(get(2, "stride") or k)
        p = _pair(get(3, "padding", 0))
        d = _pair(get(4, "dilation", 1)) if kind == "max" else [1, 1]
        ceil = bool(get(5 if kind == "max" else 4, "ceil_mode", False))
        if kind == "max" and get(6, "return_indices", False):
            raise Unsupported("max pooling that returns indices")
        if kind == "avg" and get(6, "divisor_override", None):
            raise Unsupported("avg pooling with divisor_override")
        include = bool(get(5, "count_include_pad", True)) if kind == "avg" else False
        em = a.em
        return em.b.pool_nd(em.name(a.hint), em.tensor(a.args[0]), kind, k, s, [*p, *p], d, ceil, include)

    return h


MODULES[nn.MaxPool2d], FUNCTIONS[F.max_pool2d] = _pool("max"), _pool("max")
MODULES[nn.AvgPool2d], FUNCTIONS[F.avg_pool2d] = _pool("avg"), _pool("avg")


def _adaptive(kind: str) -> Handler:
    def h(a: Args) -> Value:
        em = a.em
        size = a.module.output_size if a.module is not None else a.get(1, "output_size")
        out = _pair(size)
        n, c, hh, ww = em.shape(a.args[0])
        out = [hh if o is None else o for o in out[:1]] + [ww if o is None else o for o in out[1:]]
        x = em.tensor(a.args[0])
        if out == [1, 1]:
            return em.b.reduce(em.name(a.hint), x, [2, 3], "mean" if kind == "avg" else "max", True)
        if hh % out[0] or ww % out[1]:
            raise Unsupported(f"adaptive pooling of {hh}x{ww} to {out[0]}x{out[1]} (only exact divisions are mapped)")
        k = [hh // out[0], ww // out[1]]
        return em.b.pool_nd(em.name(a.hint), x, kind, k, k)

    return h


MODULES[nn.AdaptiveAvgPool2d] = FUNCTIONS[F.adaptive_avg_pool2d] = _adaptive("avg")
MODULES[nn.AdaptiveMaxPool2d] = FUNCTIONS[F.adaptive_max_pool2d] = _adaptive("max")


def _softmax(log: bool) -> Handler:
    def h(a: Args) -> Value:
        dim = a.module.dim if isinstance(a.module, (nn.Softmax, nn.LogSoftmax)) else a.get(1, "dim")
        if dim is None:
            raise Unsupported("softmax without an explicit dim")
        if a.kwargs.get("dtype") not in (None, torch.float32):
            raise Unsupported("softmax with a dtype")
        rank = len(a.em.shape(a.args[0]))
        return a.em.b.softmax_nd(a.em.name(a.hint), a.em.tensor(a.args[0]), [int(dim) % rank], log=log)

    return h


MODULES[nn.Softmax] = FUNCTIONS[F.softmax] = FUNCTIONS[torch.softmax] = METHODS["softmax"] = _softmax(False)
MODULES[nn.LogSoftmax] = FUNCTIONS[F.log_softmax] = FUNCTIONS[torch.log_softmax] = METHODS["log_softmax"] = _softmax(True)


def _reduce(kind: str) -> Handler:
    def h(a: Args) -> Value:
        x, rank = a.args[0], len(a.em.shape(a.args[0]))
        dim = a.get(1, "dim")
        axes = list(range(rank)) if dim is None else [int(d) % rank for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
        if kind in ("max", "min") and dim is not None and not isinstance(dim, (tuple, list)):
            raise Unsupported(f"torch.{kind} over one dim returns indices too (use amax / amin)")
        keep = bool(a.get(2, "keepdim", False))
        return a.em.b.reduce(a.em.name(a.hint), a.em.tensor(x), axes, kind, keep)

    return h


_register(
    {
        "mean": (torch.mean, "mean"),
        "sum": (torch.sum, "sum"),
        "max": (torch.amax, "amax"),
        "min": (torch.amin, "amin"),
    },
    _reduce,
)
