"""Operator library: each operator adds one or more stages to a pipeline being built.

Every call also records an `OpRecord` (the operator's name, inputs and attributes, like a
node of an ONNX graph). The stages are the operator's lowering; the records are what the
independent reference (engine/reference.py) evaluates with numpy and torch, so a wrong
stage declaration is caught by verification instead of being trusted.

Views (`reshape`, `transpose`, `slice`, `expand`, `view`) add no stage: a consumer's reads
of a view are rewritten into reads of its base tensor with composed, simplified indices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from . import expr as E
from .expr import Access, Var, clamp, cmp, relu, select
from .ir import Dim, Input, OpRecord, Pipeline, Stage

FLOAT_LOWEST = -3.4028234663852886e38


def _vars(names: Sequence[str]) -> list[Var]:
    return [Var(n) for n in names]


def _dims(names: Sequence[str], shape: Sequence[int]) -> tuple[Dim, ...]:
    return tuple(Dim(n, int(e)) for n, e in zip(names, shape))


DEFAULT_NAMES = {1: ["x"], 2: ["y", "x"], 3: ["c", "y", "x"], 4: ["n", "c", "y", "x"]}


def dim_names(rank: int) -> list[str]:
    return DEFAULT_NAMES.get(rank, [f"d{k}" for k in range(rank)])


class Builder:
    """Accumulates inputs, stages and op records; `build` returns the Pipeline."""

    def __init__(self, name: str, description: str = "") -> None:
        self.name, self.description = name, description
        self.inputs: list[Input] = []
        self.stages: list[Stage] = []
        self.ops: list[OpRecord] = []
        self._shapes: dict[str, tuple[int, ...]] = {}
        # Views: name -> (base tensor, index map); see `view`. Never stages.
        self._views: dict[str, tuple[str, IndexMap]] = {}
        self._quiet = 0  # > 0 while a composite operator builds its parts (one record for all)

    # --- plumbing ---------------------------------------------------------------------
    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def input(self, name: str, shape: Sequence[int], low: float = -1.0, high: float = 1.0, weight: bool = False) -> str:
        """A float32 input; `weight=True` marks a model weight (values from the weights file)."""
        self.inputs.append(Input(name, tuple(int(s) for s in shape), "float32", low, high, weight))
        self._shapes[name] = tuple(int(s) for s in shape)
        return name

    def stage(self, stage: Stage) -> str:
        if self._views:
            stage = self._resolve_views(stage)
        self.stages.append(stage)
        self._shapes[stage.name] = stage.shape
        return stage.name

    def fresh(self, base: str) -> str:
        """`base`, or `base_2`, `base_3`...: a name no input, stage or view uses yet."""
        name, k = base, 1
        while name in self._shapes:
            k += 1
            name = f"{base}_{k}"
        return name

    def names_like(self, src: str, rank: int) -> list[str]:
        """Dim names of stage `src` when it has this rank (so consumers share loop names)."""
        for st in self.stages:
            if st.name == src and len(st.dims) == rank:
                return [d.name for d in st.dims]
        return dim_names(rank)

    def record(self, op: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        if not self._quiet:
            self.ops.append(OpRecord(op, list(inputs), output, attrs))
        return output

    def truncate(self, n_inputs: int, n_stages: int, n_ops: int) -> None:
        """Undo what was added since the builder had `n_inputs` inputs, `n_stages` stages and
        `n_ops` op records (it only appends, so truncating undoes): those inputs, stages and
        records, their names, and the views made since (random pipelines undo an op that
        broke their budget this way)."""
        for x in self.inputs[n_inputs:] + self.stages[n_stages:]:
            self._shapes.pop(x.name, None)
        for v in [k for k in self._views if k not in {x.name for x in self.inputs + self.stages}]:
            if v not in {r.output for r in self.ops[:n_ops]}:
                self._views.pop(v)
                self._shapes.pop(v, None)
        del self.inputs[n_inputs:], self.stages[n_stages:], self.ops[n_ops:]

    def build(self, outputs: Sequence[str]) -> Pipeline:
        return Pipeline(self.name, self.inputs, self.stages, list(outputs), self.description, list(self.ops))

    # --- elementwise ----------------------------------------------------------------
    def pointwise(self, name: str, op: str, srcs: Sequence[str], fn: Any, **attrs: Any) -> str:
        """out[i] = fn(*[src[i] broadcast]) with numpy broadcasting (trailing-aligned, size-1 axes repeat)."""
        shape = tuple(int(n) for n in np.broadcast_shapes(*(self.shape(s) for s in srcs)))
        names = self.names_like(srcs[0], len(shape))
        vs = _vars(names)
        args = [Access(s, broadcast_index(self.shape(s), shape, vs)) for s in srcs]
        self.stage(Stage(name, _dims(names, shape), E.wrap(fn(*args)), op=op))
        return self.record(op, srcs, name, **attrs)

    def channel_affine(self, name: str, src: str, scale: str, shift: str, axis: int = 1) -> str:
        """out = src * scale[c] + shift[c] along `axis` (inference batch norm, folded)."""
        shape = self.shape(src)
        names = self.names_like(src, len(shape))
        vs = _vars(names)
        c = vs[axis]
        val = Access(src, tuple(vs)) * Access(scale, (c,)) + Access(shift, (c,))
        self.stage(Stage(name, _dims(names, shape), val, op="channel_affine"))
        return self.record("channel_affine", [src, scale, shift], name, axis=axis)

    def activation(self, name: str, src: str, kind: str) -> str:
        fns = {
            "relu": relu,
            "relu6": lambda a: clamp(a, 0.0, 6.0),
            "sigmoid": lambda a: E.call("sigmoid", a),
            "tanh": lambda a: E.call("tanh", a),
            "gelu": lambda a: 0.5 * a * (1.0 + E.call("erf", a * (1.0 / math.sqrt(2.0)))),
        }
        return self.pointwise(name, kind, [src], fns[kind])

    def add(self, name: str, a: str, b: str, then_relu: bool = False) -> str:
        fn = (lambda p, q: relu(p + q)) if then_relu else (lambda p, q: p + q)
        return self.pointwise(name, "add_relu" if then_relu else "add", [a, b], fn)

    # --- stencils and image ops ------------------------------------------------------
    def stencil(self, name: str, src: str, taps: Sequence[tuple[Sequence[int], float]]) -> str:
        """out[p] = sum_t w_t * src[p + offset_t]; the output shrinks by the largest offset."""
        shape = self.shape(src)
        reach = [max(off[k] for off, _ in taps) for k in range(len(shape))]
        out_shape = [n - r for n, r in zip(shape, reach)]
        names = dim_names(len(shape))
        vs = _vars(names)
        val: E.Expr | None = None
        for off, w in taps:
            term = Access(src, tuple(v + o if o else v for v, o in zip(vs, off))) * float(w)
            val = term if val is None else val + term
        assert val is not None
        self.stage(Stage(name, _dims(names, out_shape), val, op="stencil"))
        return self.record("stencil", [src], name, taps=[[list(o), float(w)] for o, w in taps])

    def channel_mix(self, name: str, src: str, weights: Sequence[float]) -> str:
        """Weighted sum over the leading (channel) axis: RGB -> gray."""
        shape = self.shape(src)
        names = dim_names(len(shape) - 1)
        vs = _vars(names)
        val: E.Expr = Access(src, (E.Const(0), *vs)) * float(weights[0])
        for k, w in enumerate(weights[1:], start=1):
            val = val + Access(src, (E.Const(k), *vs)) * float(w)
        self.stage(Stage(name, _dims(names, shape[1:]), val, op="channel_mix"))
        return self.record("channel_mix", [src], name, weights=[float(w) for w in weights])

    def crop(self, name: str, src: str, offset: Sequence[int], shape: Sequence[int]) -> str:
        names = dim_names(len(shape))
        vs = _vars(names)
        idx = tuple(v + o if o else v for v, o in zip(vs, offset))
        self.stage(Stage(name, _dims(names, shape), Access(src, idx), op="crop"))
        return self.record("crop", [src], name, offset=list(offset), shape=list(shape))

    def pad(self, name: str, src: str, pad: int, value: float = 0.0) -> str:
        """Constant padding of the two innermost axes (the boundary condition of a conv)."""
        shape = self.shape(src)
        h, w = shape[-2], shape[-1]
        names = dim_names(len(shape))
        vs = _vars(names)
        y, x = vs[-2], vs[-1]
        inside = cmp("and", cmp("and", cmp(">=", y, pad), cmp("<", y, h + pad)), cmp("and", cmp(">=", x, pad), cmp("<", x, w + pad)))
        idx = (*vs[:-2], clamp(y - pad, 0, h - 1), clamp(x - pad, 0, w - 1))
        val = select(inside, Access(src, idx), float(value))
        out_shape = (*shape[:-2], h + 2 * pad, w + 2 * pad)
        self.stage(Stage(name, _dims(names, out_shape), val, op="pad"))
        return self.record("pad", [src], name, pad=pad, value=value)

    # --- convolutions and pooling (NCHW) ----------------------------------------------
    def conv2d(self, name: str, src: str, weight: str, bias: str | None = None, stride: int = 1, pad: int = 0, groups: int = 1) -> str:
        if pad:
            src = self.pad(f"{name}_pad", src, pad)
        n_, c_in, h, w = self.shape(src)
        c_out, cg, kh, kw = self.shape(weight)
        if c_in != cg * groups or c_out % groups:
            raise ValueError(f"conv2d {name}: {c_in} input channels do not match weight {self.shape(weight)} with groups={groups}")
        oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
        n, c, y, x = _vars(["n", "c", "y", "x"])
        ry, rx = Var("ry"), Var("rx")
        init = Access(bias, (c,)) if bias else E.Const(0.0)
        yy = y * stride + ry if stride > 1 else y + ry
        xx = x * stride + rx if stride > 1 else x + rx
        if cg == 1:  # depthwise (or groups of one channel): no channel reduction
            cin = c if groups == c_out else (c // (c_out // groups))
            body = Access(src, (n, cin, yy, xx)) * Access(weight, (c, E.Const(0), ry, rx))
            rdom: tuple[Dim, ...] = (Dim("ry", kh), Dim("rx", kw))
        else:
            rc = Var("rc")
            cin = rc if groups == 1 else (c // (c_out // groups)) * cg + rc
            body = Access(src, (n, cin, yy, xx)) * Access(weight, (c, rc, ry, rx))
            rdom = (Dim("rc", cg), Dim("ry", kh), Dim("rx", kw))
        op = "depthwise_conv2d" if groups == c_in and cg == 1 else "conv2d"
        self.stage(Stage(name, _dims("ncyx", (n_, c_out, oh, ow)), init, rdom, body, "sum", op=op))
        return self.record("conv2d", [src, weight] + ([bias] if bias else []), name, stride=stride, groups=groups)

    def pool2d(self, name: str, src: str, kind: str, k: int, stride: int) -> str:
        n_, c_, h, w = self.shape(src)
        oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
        n, c, y, x = _vars(["n", "c", "y", "x"])
        ry, rx = Var("ry"), Var("rx")
        body = Access(src, (n, c, y * stride + ry, x * stride + rx))
        if kind == "max":
            st = Stage(
                name, _dims("ncyx", (n_, c_, oh, ow)), E.Const(FLOAT_LOWEST), (Dim("ry", k), Dim("rx", k)), body, "max", op="maxpool"
            )
            self.stage(st)
        else:
            acc = self.stage(
                Stage(f"{name}_sum", _dims("ncyx", (n_, c_, oh, ow)), E.Const(0.0), (Dim("ry", k), Dim("rx", k)), body, "sum", op="avgpool")
            )
            self.stage(Stage(name, _dims("ncyx", (n_, c_, oh, ow)), Access(acc, (n, c, y, x)) * (1.0 / (k * k)), op="scale"))
        return self.record("pool2d", [src], name, kind=kind, k=k, stride=stride)

    # --- linear algebra --------------------------------------------------------------
    def matmul(self, name: str, a: str, b: str, bias: str | None = None, b_transposed: bool = False) -> str:
        """out[i, j] = sum_k a[i, k] * b[k, j] (+ bias[j]); `b_transposed` reads b[j, k]."""
        m, kk = self.shape(a)
        n = self.shape(b)[0] if b_transposed else self.shape(b)[1]
        i, j, k = Var("i"), Var("j"), Var("k")
        bidx = (j, k) if b_transposed else (k, j)
        init = Access(bias, (j,)) if bias else E.Const(0.0)
        body = Access(a, (i, k)) * Access(b, bidx)
        self.stage(Stage(name, _dims("ij", (m, n)), init, (Dim("k", kk),), body, "sum", op="matmul"))
        return self.record("matmul", [a, b] + ([bias] if bias else []), name, b_transposed=b_transposed)

    def scale(self, name: str, src: str, factor: float) -> str:
        return self.pointwise(name, "scale", [src], lambda a: a * float(factor), factor=float(factor))

    # --- row-wise normalizations (last axis) -------------------------------------
    def _row_reduce(self, name: str, src: str, reduce: str, body_fn: Any, init: float) -> str:
        shape = self.shape(src)
        names = dim_names(len(shape) - 1) if len(shape) > 1 else []
        names = [n if n != "x" else "i" for n in names] if len(shape) == 2 else names
        vs = _vars(names)
        r = Var("r")
        body = body_fn(vs, r)
        self.stage(Stage(name, _dims(names, shape[:-1]), E.Const(init), (Dim("r", shape[-1]),), body, reduce, op=f"row_{reduce}"))
        return name

    def softmax(self, name: str, src: str) -> str:
        mx = self._row_reduce(f"{name}_max", src, "max", lambda vs, r: Access(src, (*vs, r)), FLOAT_LOWEST)
        ex = self._rowwise(f"{name}_exp", [src, mx], lambda a, m: E.call("exp", a - m), "exp_sub")
        sm = self._row_reduce(f"{name}_sum", ex, "sum", lambda vs, r: Access(ex, (*vs, r)), 0.0)
        self._rowwise(name, [ex, sm], lambda a, s: a / s, "div")
        return self.record("softmax", [src], name)

    def layernorm(self, name: str, src: str, gamma: str, beta: str, eps: float = 1e-5) -> str:
        n = self.shape(src)[-1]
        mean = self._row_reduce(f"{name}_mean", src, "sum", lambda vs, r: Access(src, (*vs, r)) * (1.0 / n), 0.0)
        var = self._row_reduce(
            f"{name}_var", src, "sum", lambda vs, r: _sq(Access(src, (*vs, r)) - Access(mean, tuple(vs))) * (1.0 / n), 0.0
        )
        shape = self.shape(src)
        names = self.stages[-1].dims
        vs = [Var(d.name) for d in names]
        last = Var("j") if len(shape) == 2 else Var("x")
        row = tuple(vs)
        val = (Access(src, (*row, last)) - Access(mean, row)) * E.call("rsqrt", Access(var, row) + eps) * Access(gamma, (last,)) + Access(
            beta, (last,)
        )
        self.stage(Stage(name, _dims([d.name for d in names] + [last.name], shape), val, op="layernorm"))
        return self.record("layernorm", [src, gamma, beta], name, eps=eps)

    def _rowwise(self, name: str, srcs: Sequence[str], fn: Any, op: str) -> str:
        """out[row, x] = fn(full[row, x], rowvec[row]) where srcs = [full, rowvec]."""
        full, rowvec = srcs
        shape = self.shape(full)
        row_names = self.names_like(rowvec, len(shape) - 1)
        last = "j" if len(shape) == 2 else "x"
        vs = _vars(row_names)
        val = fn(Access(full, (*vs, Var(last))), Access(rowvec, tuple(vs)))
        self.stage(Stage(name, _dims(row_names + [last], shape), val, op=op))
        return name

    # --- views: index remapping instead of copy stages ------------------------------
    def view(self, name: str, src: str, out_shape: Sequence[int], index_map: IndexMap, op: str, **attrs: Any) -> str:
        """A tensor that is `src` read through `index_map` (view index -> `src` index). It adds
        no stage: each consumer's access is rewritten to read the base tensor and simplified
        when the consumer's stage is added, so reshapes and transposes cost no copy."""
        base, inner = self._views.get(src, (src, None))
        fn = index_map if inner is None else (lambda idx, f=inner, g=index_map: f(g(idx)))
        self._views[name] = (base, fn)
        self._shapes[name] = tuple(int(n) for n in out_shape)
        return self.record(op, [src], name, **attrs)

    def is_view(self, name: str) -> bool:
        return name in self._views

    def reshape(self, name: str, src: str, shape: Sequence[int]) -> str:
        """Row-major reshape (also flatten, squeeze, unsqueeze) as a view: un/flatten with // and %."""
        old, new = self.shape(src), tuple(int(n) for n in shape)
        if math.prod(old) != math.prod(new):
            raise ValueError(f"reshape {name}: cannot view {old} as {new}")
        old_strides, new_strides = _strides(old), _strides(new)

        def index_map(idx: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
            lin: E.Expr = E.Const(0)
            for i, st in zip(idx, new_strides):
                lin = lin + i * st
            return tuple((lin // st) % n for st, n in zip(old_strides, old))

        return self.view(name, src, new, index_map, "reshape", shape=list(new))

    def transpose(self, name: str, src: str, perm: Sequence[int]) -> str:
        """out axis k is src axis perm[k], as a view."""
        old = self.shape(src)
        perm = [int(p) % len(old) for p in perm]
        if sorted(perm) != list(range(len(old))):
            raise ValueError(f"transpose {name}: {perm} is not a permutation of {len(old)} axes")

        def index_map(idx: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
            out: list[E.Expr] = [E.Const(0)] * len(idx)
            for k, p in enumerate(perm):
                out[p] = idx[k]
            return tuple(out)

        return self.view(name, src, [old[p] for p in perm], index_map, "transpose", perm=perm)

    def slice(self, name: str, src: str, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]) -> str:
        """out[i] = src[start + i * step] per axis (steps may be negative), as a view."""
        st, sp = [int(v) for v in starts], [int(v) for v in steps]
        for k, (a, b, n) in enumerate(zip(st, sp, shape)):
            last = a + (int(n) - 1) * b
            if min(a, last) < 0 or max(a, last) >= self.shape(src)[k]:
                raise ValueError(f"slice {name}: axis {k} reads [{min(a, last)}, {max(a, last)}] of {self.shape(src)[k]}")
        index_map = lambda idx: tuple(i * b + a if b != 1 else i + a for i, a, b in zip(idx, st, sp))
        return self.view(name, src, shape, index_map, "slice", starts=st, steps=sp, shape=[int(n) for n in shape])

    def expand(self, name: str, src: str, shape: Sequence[int]) -> str:
        """numpy-style broadcast of `src` to `shape`, as a view."""
        old, new = self.shape(src), tuple(int(n) for n in np.broadcast_shapes(self.shape(src), tuple(shape)))
        return self.view(name, src, new, lambda idx: broadcast_index(old, new, idx), "expand", shape=list(new))

    def materialize(self, name: str, src: str) -> str:
        """A copy stage of `src` (a view, an input or a stage): what a pipeline output needs."""
        return self.pointwise(name, "copy", [src], lambda v: v)

    def _resolve_views(self, stage: Stage) -> Stage:
        ranges = stage.ranges()

        def fix(n: E.Expr) -> E.Expr | None:
            if isinstance(n, Access) and n.source in self._views:
                base, fn = self._views[n.source]
                return Access(base, tuple(simplify_index(i, ranges) for i in fn(n.index)))
            return None

        upd = None if stage.update is None else E.rebuild(stage.update, fix)
        return replace(stage, value=E.rebuild(stage.value, fix), update=upd)


IndexMap = Callable[[tuple[E.Expr, ...]], tuple[E.Expr, ...]]


def broadcast_index(src_shape: Sequence[int], out_shape: Sequence[int], idx: Sequence[E.Expr]) -> tuple[E.Expr, ...]:
    """Index of a source broadcast (numpy rules) to `out_shape`: trailing-aligned, size-1 axes read 0."""
    off = len(out_shape) - len(src_shape)
    return tuple(E.Const(0) if n == 1 and out_shape[off + k] != 1 else idx[off + k] for k, n in enumerate(src_shape))


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= int(n)
    return out[::-1]


def _sq(e: E.Expr) -> E.Expr:
    return e * e


# --- index simplification ------------------------------------------------------------
# Views compose index maps into sums, floor divisions and remainders; simplified with the
# loop variables' ranges, a reshape that splits or merges axes reads its base with plain
# affine indices again (what Halide's bounds inference and vectorizer need).
Linear = tuple[dict[E.Expr, int], int]


def _linear(e: E.Expr) -> Linear:
    """e as sum(coef * atom) + const; anything not + - * by a constant is an atom."""
    if isinstance(e, E.Const) and isinstance(e.value, int):
        return {}, e.value
    if isinstance(e, E.BinOp) and e.op in ("+", "-"):
        (ta, ca), (tb, cb) = _linear(e.a), _linear(e.b)
        sign = 1 if e.op == "+" else -1
        out = dict(ta)
        for a, c in tb.items():
            out[a] = out.get(a, 0) + sign * c
        return {a: c for a, c in out.items() if c}, ca + sign * cb
    if isinstance(e, E.BinOp) and e.op == "*":
        for k, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, E.Const) and isinstance(k.value, int):
                t, c = _linear(other)
                return ({a: v * k.value for a, v in t.items() if v * k.value}, c * k.value)
    return {e: 1}, 0


def _from_linear(terms: dict[E.Expr, int], const: int) -> E.Expr:
    out: E.Expr | None = None
    for a, c in terms.items():
        if out is None:
            out = a if c == 1 else a * c
        else:
            out = out + a if c == 1 else out - a if c == -1 else out + a * c
    if out is None:
        return E.Const(const)
    return out + const if const > 0 else out - (-const) if const < 0 else out


def _span(terms: dict[E.Expr, int], const: int, ranges: dict[str, E.Interval]) -> E.Interval | None:
    lo = hi = float(const)
    for a, c in terms.items():
        b = E.bounds(a, ranges)
        if b is None:
            return None
        lo, hi = lo + min(c * b[0], c * b[1]), hi + max(c * b[0], c * b[1])
    return lo, hi


def simplify_index(e: E.Expr, ranges: dict[str, E.Interval]) -> E.Expr:
    """Canonical affine form of an integer index, removing `// d` and `% d` where the ranges
    prove them exact: (d*a + r) // d = a and (d*a + r) % d = r when 0 <= r < d."""

    def fn(n: E.Expr) -> E.Expr | None:
        if not (isinstance(n, E.BinOp) and n.op in ("//", "%") and isinstance(n.b, E.Const) and isinstance(n.b.value, int)):
            return None
        d = n.b.value
        if d <= 0:
            return None
        terms, const = _linear(n.a)
        if n.op == "//":
            q = {a: c // d for a, c in terms.items() if c % d == 0}
            rest = {a: c for a, c in terms.items() if c % d}
            qc, rc = divmod(const, d)
            span = _span(rest, rc, ranges)
            if span is not None and span[0] >= 0 and span[1] < d:
                return _from_linear(q, qc)
            if not q and not qc:
                return _from_linear(rest, rc) // d
            return _from_linear(q, qc) + _from_linear(rest, rc) // d
        rest = {a: c % d for a, c in terms.items() if c % d}
        rc = const % d
        span = _span(rest, rc, ranges)
        if d == 1 or (span is not None and span[0] >= 0 and span[1] < d):
            return _from_linear(rest, rc) if d > 1 else E.Const(0)
        return _from_linear(rest, rc) % d

    out = E.rebuild(e, fn)
    return _from_linear(*_linear(out))
