"""N-d operators, on top of the operator library (engine/ops.py): the tensor layer the
importers (engine/frontends/) and the random pipelines (engine/randpipe.py) build with.

`TensorOps` adds what ONNX and PyTorch graphs need beyond the zoo's operators: numpy
broadcasting everywhere, reductions over any axes, softmax and layer norm over any axis,
batched matmul, concat, padding modes, gathers as views (convolution and pooling are in
engine/frontends/nd_conv.py). Composite operators build their parts quietly and record one `OpRecord`
(engine/reference.py evaluates it with numpy/torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import expr as E
from .expr import Access, Var, clamp, cmp, select
from .ir import Dim, Stage
from .ops import FLOAT_LOWEST, Builder, broadcast_index, dim_names

FLOAT_MAX = -FLOAT_LOWEST
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def axis_index(a: int, rank: int, what: str = "axis", inclusive: bool = False) -> int:
    """An axis as a graph gives it (negative counts from the end) as an index in [0, rank), or
    [0, rank] when `inclusive` (Flatten's); out of range is an error, never wrapped around."""
    hi = rank + 1 if inclusive else rank
    if not -hi <= a < hi:
        raise ValueError(f"{what} {a} is out of range for a rank-{rank} tensor (expected {-hi} to {hi - 1})")
    return a % hi if a < 0 else a


def axis_indices(axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
    """`axis_index` of each, sorted, each axis once."""
    return sorted({axis_index(int(a), rank, what) for a in axes})


def _pow(a: E.Expr, p: float) -> E.Expr:
    """a ** p for a constant exponent: products for small integers, sqrt for halves."""
    if p == int(p) and 0 <= p <= 4:
        out: E.Expr = E.Const(1.0)
        for k in range(int(p)):
            out = a if k == 0 else out * a
        return out
    if p == -1:
        return 1.0 / a
    if p == 0.5:
        return E.call("sqrt", a)
    if p == -0.5:
        return E.call("rsqrt", a)
    return E.call("exp", E.call("log", a) * float(p))


UNARY: dict[str, Callable[..., E.Expr]] = {
    "relu": lambda a: E.relu(a),
    "relu6": lambda a: clamp(a, 0.0, 6.0),
    "sigmoid": lambda a: E.call("sigmoid", a),
    "tanh": lambda a: E.call("tanh", a),
    "erf": lambda a: E.call("erf", a),
    "exp": lambda a: E.call("exp", a),
    "log": lambda a: E.call("log", a),
    "sqrt": lambda a: E.call("sqrt", a),
    "abs": lambda a: E.call("abs", a),
    "neg": lambda a: E.call("neg", a),
    "reciprocal": lambda a: 1.0 / a,
    "gelu": lambda a: 0.5 * a * (1.0 + E.call("erf", a * (1.0 / math.sqrt(2.0)))),
    "gelu_tanh": lambda a: 0.5 * a * (1.0 + E.call("tanh", (a + 0.044715 * a * a * a) * _SQRT_2_OVER_PI)),
    "silu": lambda a: a * E.call("sigmoid", a),
    "softplus": lambda a: E.relu(a) + E.call("log", 1.0 + E.call("exp", 0.0 - E.call("abs", a))),
    "hardswish": lambda a: a * clamp(a * (1.0 / 6.0) + 0.5, 0.0, 1.0),
    "leaky_relu": lambda a, alpha=0.01: select(cmp(">", a, 0.0), a, a * float(alpha)),
    "elu": lambda a, alpha=1.0: select(cmp(">", a, 0.0), a, (E.call("exp", a) - 1.0) * float(alpha)),
    "hardsigmoid": lambda a, alpha=0.2, beta=0.5: clamp(a * float(alpha) + float(beta), 0.0, 1.0),
    "clip": lambda a, lo=None, hi=None: _clip(a, lo, hi),
    "pow": lambda a, p: _pow(a, float(p)),
    "selu": lambda a, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875: select(
        cmp(">", a, 0.0), a * float(gamma), (E.call("exp", a) - 1.0) * float(alpha * gamma)
    ),
    "sign": lambda a: select(cmp(">", a, 0.0), 1.0, select(cmp("<", a, 0.0), -1.0, 0.0)),
    "shrink": lambda a, lambd=0.5, bias=0.0: select(
        cmp("<", a, -float(lambd)), a + float(bias), select(cmp(">", a, float(lambd)), a - float(bias), 0.0)
    ),
    "softsign": lambda a: a / (1.0 + E.call("abs", a)),
}

BINARY: dict[str, Callable[[E.Expr, E.Expr], E.Expr]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": E.emax,
    "min": E.emin,
    "prelu": lambda a, b: select(cmp(">", a, 0.0), a, a * b),
}


def _clip(a: E.Expr, lo: float | None, hi: float | None) -> E.Expr:
    out = a if lo is None else E.emax(a, float(lo))
    return out if hi is None else E.emin(out, float(hi))


def dims_of(names: Sequence[str], shape: Sequence[int]) -> tuple[Dim, ...]:
    return tuple(Dim(n, int(e)) for n, e in zip(names, shape))


class TensorOps(Builder):
    """The operator library plus N-d elementwise, reduction, shape and matmul operators."""

    @contextmanager
    def composite(self) -> Iterator[None]:
        """Build an operator from others: their stages are kept, their records are not."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    # --- elementwise ------------------------------------------------------------------
    def unary(self, name: str, src: str, fn: str, **params: Any) -> str:
        body = UNARY[fn]
        with self.composite():
            self.pointwise(name, fn, [src], lambda a: body(a, **params))
        return self.record("unary", [src], name, fn=fn, **params)

    def binary(self, name: str, a: str | float, b: str | float, fn: str) -> str:
        """a (fn) b with numpy broadcasting; a float operand is inlined as a constant."""
        srcs = [x for x in (a, b) if isinstance(x, str)]
        if not srcs:
            raise ValueError(f"binary {name}: needs at least one tensor operand")

        def body(*acc: E.Expr) -> E.Expr:
            it = iter(acc)
            x = next(it) if isinstance(a, str) else E.Const(float(a))
            y = next(it) if isinstance(b, str) else E.Const(float(b))
            return BINARY[fn](x, y)

        consts = {k: float(v) for k, v in (("a", a), ("b", b)) if not isinstance(v, str)}
        with self.composite():
            self.pointwise(name, fn, srcs, body)
        return self.record("binary", srcs, name, fn=fn, **consts)

    def nary(self, name: str, srcs: Sequence[str], fn: str) -> str:
        """sum / mean / max / min of several tensors, broadcast, in one stage."""

        def body(*acc: E.Expr) -> E.Expr:
            out = acc[0]
            for x in acc[1:]:
                out = E.emax(out, x) if fn == "max" else E.emin(out, x) if fn == "min" else out + x
            return out * (1.0 / len(acc)) if fn == "mean" else out

        with self.composite():
            self.pointwise(name, fn, list(srcs), body)
        return self.record("nary", list(srcs), name, fn=fn)

    # --- reductions --------------------------------------------------------------------
    def _reduce_stage(
        self, name: str, src: str, axes: Sequence[int], reducer: str, body_fn: Callable[..., E.Expr], init: float, op: str, keep: bool
    ) -> str:
        """A reduction of `src` over `axes`. body_fn(src_index, keepdims_index) gives the
        summand, where keepdims_index reads a tensor of the keepdims shape (0 on reduced axes)."""
        shape = self.shape(src)
        rank = len(shape)
        axes = axis_indices(axes, rank)
        kept = [k for k in range(rank) if k not in axes]
        out_shape = [1 if k in axes else shape[k] for k in range(rank)] if keep else [shape[k] for k in kept]
        if not out_shape:
            raise ValueError(f"{name}: reducing every axis without keepdims gives a rank-0 tensor, which the IR does not have")
        names = self.names_like(src, rank) if keep else dim_names(len(out_shape))
        vs = [Var(n) for n in names]
        rvs = {a: Var(f"r{j}") for j, a in enumerate(axes)}
        src_idx = tuple(rvs[k] if k in rvs else (vs[k] if keep else vs[kept.index(k)]) for k in range(rank))
        keep_idx = tuple(E.Const(0) if k in rvs else src_idx[k] for k in range(rank))
        rdom = tuple(Dim(f"r{j}", shape[a]) for j, a in enumerate(axes))
        st = Stage(name, dims_of(names, out_shape), E.Const(float(init)), rdom, body_fn(src_idx, keep_idx), reducer, op=op)
        return self.stage(st)

    def reduce(self, name: str, src: str, axes: Sequence[int], kind: str, keepdims: bool = True) -> str:
        """sum, mean, max or min over `axes`."""
        n = math.prod(self.shape(src)[a] for a in axis_indices(axes, len(self.shape(src))))
        reducer = {"sum": "sum", "mean": "sum", "max": "max", "min": "min"}[kind]
        init = {"sum": 0.0, "mean": 0.0, "max": FLOAT_LOWEST, "min": FLOAT_MAX}[kind]
        body = (lambda i, _k: Access(src, i) * (1.0 / n)) if kind == "mean" else (lambda i, _k: Access(src, i))
        with self.composite():
            self._reduce_stage(name, src, axes, reducer, body, init, f"reduce_{kind}", keepdims)
        rank = len(self.shape(src))
        return self.record("reduce", [src], name, axes=axis_indices(axes, rank), kind=kind, keepdims=keepdims)

    def softmax_nd(self, name: str, src: str, axes: Sequence[int], log: bool = False) -> str:
        """Softmax (or log-softmax) over `axes`, max-subtracted: max, exp, sum, divide."""
        with self.composite():
            mx = self._reduce_stage(
                self.fresh(f"{name}_max"), src, axes, "max", lambda i, _k: Access(src, i), FLOAT_LOWEST, "row_max", True
            )
            ex = self.pointwise(self.fresh(f"{name}_exp"), "exp_sub", [src, mx], lambda a, m: E.call("exp", a - m))
            sm = self._reduce_stage(self.fresh(f"{name}_sum"), ex, axes, "sum", lambda i, _k: Access(ex, i), 0.0, "row_sum", True)
            if log:
                self.pointwise(name, "log_softmax", [src, mx, sm], lambda a, m, s: a - m - E.call("log", s))
            else:
                self.pointwise(name, "div", [ex, sm], lambda a, s: a / s)
        rank = len(self.shape(src))
        return self.record("softmax_nd", [src], name, axes=axis_indices(axes, rank), log=log)

    def layernorm_nd(self, name: str, src: str, gamma: str | None, beta: str | None, axis: int = -1, eps: float = 1e-5) -> str:
        """Normalize over axes [axis, rank): (x - mean) / sqrt(var + eps) * gamma + beta."""
        shape = self.shape(src)
        axes = list(range(axis_index(axis, len(shape)), len(shape)))
        inv_n = 1.0 / math.prod(shape[a] for a in axes)
        with self.composite():
            mean = self._reduce_stage(
                self.fresh(f"{name}_mean"), src, axes, "sum", lambda i, _k: Access(src, i) * inv_n, 0.0, "row_sum", True
            )

            def sq_dev(i: tuple[E.Expr, ...], k: tuple[E.Expr, ...]) -> E.Expr:
                d = Access(src, i) - Access(mean, k)
                return d * d * inv_n

            var = self._reduce_stage(self.fresh(f"{name}_var"), src, axes, "sum", sq_dev, 0.0, "row_sum", True)
            extra = [t for t in (gamma, beta) if t is not None]

            def norm(x: E.Expr, m: E.Expr, v: E.Expr, *gb: E.Expr) -> E.Expr:
                out = (x - m) * E.call("rsqrt", v + float(eps))
                it = iter(gb)
                out = out * next(it) if gamma is not None else out
                return out + next(it) if beta is not None else out

            self.pointwise(name, "layernorm", [src, mean, var, *extra], norm)
        return self.record(
            "layernorm_nd", [src, *extra], name, axis=axes[0], eps=float(eps), gamma=gamma is not None, beta=beta is not None
        )

    # --- padding, concat, gather ---------------------------------------------------------
    def pad_nd(self, name: str, src: str, before: Sequence[int], after: Sequence[int], value: float = 0.0, mode: str = "constant") -> str:
        """Pad (or, with negative amounts, crop) every axis; mode constant, edge or reflect."""
        shape = self.shape(src)
        out_shape = [n + b + a for n, b, a in zip(shape, before, after)]
        if any(n <= 0 for n in out_shape):
            raise ValueError(f"pad {name}: result shape {out_shape} is empty")
        names = self.names_like(src, len(shape))
        vs = [Var(n) for n in names]
        idx: list[E.Expr] = []
        conds: list[E.Expr] = []
        for v, n, b, a in zip(vs, shape, before, after):
            if b == 0 and a == 0:
                idx.append(v)
                continue
            j = v - b if b > 0 else v + (-b) if b < 0 else v
            if mode == "reflect":
                j = select(cmp("<", j, 0), E.Const(0) - j, select(cmp(">", j, n - 1), E.Const(2 * (n - 1)) - j, j))
            elif mode == "constant":
                if b > 0:
                    conds.append(cmp(">=", v, b))
                if a > 0:
                    conds.append(cmp("<", v, b + n))
            idx.append(clamp(j, 0, n - 1) if b > 0 or a > 0 else j)
        val: E.Expr = Access(src, tuple(idx))
        if conds:
            cond = conds[0]
            for c in conds[1:]:
                cond = cmp("and", cond, c)
            val = select(cond, val, float(value))
        self.stage(Stage(name, dims_of(names, out_shape), val, op="pad"))
        return self.record("pad_nd", [src], name, before=list(before), after=list(after), value=float(value), mode=mode)

    def concat(self, name: str, srcs: Sequence[str], axis: int) -> str:
        shapes = [self.shape(s) for s in srcs]
        rank = len(shapes[0])
        axis = axis_index(axis, rank)
        for src, sh in zip(srcs, shapes):
            if len(sh) != rank or any(a != b for k, (a, b) in enumerate(zip(sh, shapes[0])) if k != axis):
                raise ValueError(f"concat of shapes {[list(x) for x in shapes]} along axis {axis}: {src!r} does not fit")
        out_shape = list(shapes[0])
        out_shape[axis] = sum(s[axis] for s in shapes)
        names = self.names_like(srcs[0], rank)
        vs = [Var(n) for n in names]
        v = vs[axis]
        offsets = [sum(s[axis] for s in shapes[:k]) for k in range(len(srcs))]
        val: E.Expr | None = None
        for src, sh, off in reversed(list(zip(srcs, shapes, offsets))):
            idx: list[E.Expr] = list(vs)
            idx[axis] = clamp(v - off, 0, sh[axis] - 1) if off else E.emin(v, sh[axis] - 1)
            acc = Access(src, tuple(idx))
            val = acc if val is None else select(cmp("<", v, off + sh[axis]), acc, val)
        assert val is not None
        self.stage(Stage(name, dims_of(names, out_shape), val, op="concat"))
        return self.record("concat", list(srcs), name, axis=axis)

    def gather(self, name: str, src: str, axis: int, indices: int | Sequence[int]) -> str:
        """src.take(indices, axis) for constant indices, as a view: a scalar index drops the
        axis, an arithmetic progression is a strided read, other lists a select chain."""
        shape = self.shape(src)
        axis = axis_index(axis, len(shape))
        n = shape[axis]
        bad = [i for i in ([indices] if isinstance(indices, int) else indices) if not -n <= int(i) < n]
        if bad:
            raise ValueError(f"gather index {bad[0]} is out of range for an axis of {n}")
        if not isinstance(indices, int) and not len(indices):
            raise ValueError("gather with no indices gives an empty tensor, which the IR does not have")
        if isinstance(indices, int):
            k = indices % n
            out_shape = shape[:axis] + shape[axis + 1 :]
            fn = lambda idx: (*idx[:axis], E.Const(k), *idx[axis:])
        else:
            ks = [int(i) % n for i in indices]
            out_shape = (*shape[:axis], len(ks), *shape[axis + 1 :])
            step = ks[1] - ks[0] if len(ks) > 1 else 1
            if all(b - a == step for a, b in zip(ks, ks[1:])):
                pick = lambda i: i * step + ks[0] if step != 1 else i + ks[0]
            else:

                def pick(i: E.Expr) -> E.Expr:
                    out: E.Expr = E.Const(ks[-1])
                    for j in range(len(ks) - 2, -1, -1):
                        out = select(cmp("==", i, j), ks[j], out)
                    return out

            fn = lambda idx: (*idx[:axis], pick(idx[axis]), *idx[axis + 1 :])
        return self.view(name, src, out_shape, fn, "gather", axis=axis, indices=indices if isinstance(indices, int) else list(indices))

    def gather_data(self, name: str, src: str, axis: int, indices: str) -> str:
        """src.take(indices, axis) for computed (integer-valued) indices: a reduction over the
        axis that keeps the element whose position equals the index (negative counts from
        the end), so no data-dependent address is ever formed; an index out of range gives 0."""
        shape, ishape = self.shape(src), self.shape(indices)
        axis = axis_index(axis, len(shape))
        n = shape[axis]
        out_shape = (*shape[:axis], *ishape, *shape[axis + 1 :])
        names = dim_names(len(out_shape))
        vs = [Var(v) for v in names]
        k = Var("r0")
        pos = Access(indices, tuple(vs[axis : axis + len(ishape)]))
        kf = E.call("float", k)
        hit = cmp("or", cmp("==", pos, kf), cmp("==", pos, kf - float(n)))
        body = select(hit, Access(src, (*vs[:axis], k, *vs[axis + len(ishape) :])), 0.0)
        with self.composite():
            self.stage(Stage(name, dims_of(names, out_shape), E.Const(0.0), (Dim("r0", n),), body, "sum", op="gather_data"))
        return self.record("gather_data", [src, indices], name, axis=axis)

    def where(self, name: str, cond: str, a: str | float, b: str | float) -> str:
        """cond != 0 ? a : b, broadcast (numpy's where); float operands inlined."""
        srcs = [x for x in (cond, a, b) if isinstance(x, str)]

        def body(*acc: E.Expr) -> E.Expr:
            it = iter(acc)
            c = next(it)
            x = next(it) if isinstance(a, str) else E.Const(float(a))
            y = next(it) if isinstance(b, str) else E.Const(float(b))
            return select(cmp("!=", c, 0.0), x, y)

        consts = {k: float(v) for k, v in (("a", a), ("b", b)) if not isinstance(v, str)}
        with self.composite():
            self.pointwise(name, "where", srcs, body)
        return self.record("where", srcs, name, **consts)

    def tile(self, name: str, src: str, repeats: Sequence[int]) -> str:
        """numpy.tile with one repeat count per axis, as a view (index modulo the size)."""
        shape = self.shape(src)
        if len(repeats) != len(shape) or any(r < 1 for r in repeats):
            raise ValueError(f"tile {name}: repeats {list(repeats)} for a rank-{len(shape)} tensor (one count >= 1 per axis)")
        out_shape = tuple(n * r for n, r in zip(shape, repeats))
        fn = lambda idx: tuple(i % n if r > 1 else i for i, n, r in zip(idx, shape, repeats))
        return self.view(name, src, out_shape, fn, "tile", repeats=[int(r) for r in repeats])

    # --- matmul ------------------------------------------------------------------------
    def matmul_nd(self, name: str, a: str, b: str, bias: str | None = None, alpha: float = 1.0, beta: float = 1.0) -> str:
        """a @ b over the last two axes, batch axes broadcast; out = alpha * a @ b + beta * bias."""
        sa, sb = self.shape(a), self.shape(b)
        if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
            raise ValueError(f"matmul {name}: shapes {sa} and {sb} do not multiply")
        batch = tuple(int(x) for x in np.broadcast_shapes(sa[:-2], sb[:-2]))
        out_shape = (*batch, sa[-2], sb[-1])
        bnames = ["b"] if len(batch) == 1 else [f"b{k}" for k in range(len(batch))]
        vs = [Var(n) for n in [*bnames, "i", "j"]]
        i, j, k = vs[-2], vs[-1], Var("k")
        a_idx = (*broadcast_index(sa[:-2], batch, vs[:-2]), i, k)
        b_idx = (*broadcast_index(sb[:-2], batch, vs[:-2]), k, j)
        init: E.Expr = E.Const(0.0)
        if bias is not None:
            init = Access(bias, broadcast_index(self.shape(bias), out_shape, vs))
            init = init * float(beta) if beta != 1.0 else init
        body = Access(a, a_idx) * Access(b, b_idx)
        body = body * float(alpha) if alpha != 1.0 else body
        st = Stage(name, dims_of([*bnames, "i", "j"], out_shape), init, (Dim("k", sa[-1]),), body, "sum", op="matmul")
        with self.composite():
            self.stage(st)
        return self.record("matmul_nd", [a, b] + ([bias] if bias else []), name, alpha=float(alpha), beta=float(beta))
