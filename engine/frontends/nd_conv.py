"""Convolution and pooling (NCHW, and NCDHW in 3-D) for imported models: `NdBuilder` =
`TensorOps` plus convolution with asymmetric pads, dilations and groups, transposed
convolution, and pooling with ceil mode and both average-pool padding rules."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .. import expr as E
from ..expr import Access, Var, clamp, cmp, select
from ..ir import Dim, Stage
from ..ops import FLOAT_LOWEST
from ..tensor_ops import TensorOps, dims_of

SPATIAL = {2: ("y", "x"), 3: ("z", "y", "x")}  # loop names of the spatial axes, outermost first


def check_window(
    op: str,
    spatial: int,
    *,
    kernel: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
) -> None:
    """The window attributes of a convolution or pooling over `spatial` axes, as ONNX names
    them: one value per axis (pads: the begins, then the ends), kernel, strides and dilations
    at least 1, pads and output padding at least 0. A ValueError names the attribute."""
    want = {"kernel_shape": (kernel, spatial, 1), "strides": (strides, spatial, 1), "dilations": (dilations, spatial, 1)}
    want |= {"pads": (pads, 2 * spatial, 0), "output_padding": (output_padding, spatial, 0)}
    for attr, (vals, n, least) in want.items():
        if vals is None:
            continue
        if len(vals) != n:
            per = "a begin and an end per spatial axis" if attr == "pads" else "one per spatial axis"
            got = f"{len(vals)} value{'s' if len(vals) != 1 else ''}"
            raise ValueError(f"attribute {attr!r} has {got} {list(vals)}; a {spatial}-D {op} needs {n} ({per})")
        if any(v < least for v in vals):
            raise ValueError(f"attribute {attr!r} is {list(vals)}: every value must be at least {least}")


def pool_out_size(n: int, k: int, s: int, p0: int, p1: int, d: int = 1, ceil: bool = False) -> int:
    """ONNX / PyTorch pooling output size; in ceil mode the last window must start inside."""
    num = n + p0 + p1 - (d * (k - 1) + 1)
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + p0:
        out -= 1
    return out


class NdBuilder(TensorOps):
    """The operator library plus every N-d operator of imported models."""

    # --- convolution and pooling (NCHW) --------------------------------------------------
    def conv(
        self,
        name: str,
        src: str,
        weight: str,
        bias: str | None = None,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
    ) -> str:
        """Convolution over the weight's spatial axes (2-D: NCHW, 3-D: NCDHW); pads are the
        begins then the ends, as in ONNX ((top, left, bottom, right) in 2-D)."""
        nd = len(self.shape(weight)) - 2
        if nd not in SPATIAL:
            raise ValueError(f"conv {name}: a {nd}-D convolution (2-D and 3-D are built; 1-D is a 2-D one of height 1)")
        check_window("convolution", nd, strides=strides, pads=pads, dilations=dilations)
        if groups < 1:
            raise ValueError(f"conv {name}: attribute 'group' is {groups}: it must be at least 1")
        inputs = [src, weight] + ([bias] if bias else [])
        with self.composite():
            x = src
            if any(pads):
                x = self.pad_nd(self.fresh(f"{name}_pad"), src, (0, 0, *pads[:nd]), (0, 0, *pads[nd:]))
            n_, c_in, *sizes = self.shape(x)
            c_out, cg, *ks = self.shape(weight)
            if c_in != cg * groups or c_out % groups:
                raise ValueError(f"conv {name}: {c_in} input channels do not match weight {self.shape(weight)} with groups={groups}")
            outs = [(h - d * (k - 1) - 1) // st + 1 for h, k, st, d in zip(sizes, ks, strides, dilations)]
            if min(outs) <= 0:
                raise ValueError(f"conv {name}: kernel larger than the padded input")
            names = SPATIAL[nd]
            n, c = Var("n"), Var("c")
            rv = [Var(f"r{v}") for v in names]
            at = [_affine(Var(v), st, r, d) for v, st, r, d in zip(names, strides, rv, dilations)]
            per_group = c_out // groups
            if cg == 1:
                cin: E.Expr = c if per_group == 1 else c // per_group
                body = Access(x, (n, cin, *at)) * Access(weight, (c, E.Const(0), *rv))
                rdom: tuple[Dim, ...] = tuple(Dim(f"r{v}", k) for v, k in zip(names, ks))
            else:
                cin = Var("rc") if groups == 1 else (c // per_group) * cg + Var("rc")
                body = Access(x, (n, cin, *at)) * Access(weight, (c, Var("rc"), *rv))
                rdom = (Dim("rc", cg), *(Dim(f"r{v}", k) for v, k in zip(names, ks)))
            init = Access(bias, (c,)) if bias else E.Const(0.0)
            op = ("depthwise_conv2d" if groups == c_in and cg == 1 else "conv2d") if nd == 2 else f"conv{nd}d"
            self.stage(Stage(name, dims_of(["n", "c", *names], (n_, c_out, *outs)), init, rdom, body, "sum", op=op))
        return self.record("conv", inputs, name, strides=list(strides), pads=list(pads), dilations=list(dilations), groups=groups)

    def conv_transpose(
        self,
        name: str,
        src: str,
        weight: str,
        bias: str | None = None,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
        output_padding: Sequence[int] = (0, 0),
    ) -> str:
        """Transposed 2-D convolution as a convolution: zeros inserted between input pixels
        and the border padded (one stage), then a stride-1 convolution with the weight
        flipped and its channel axes swapped (a view of the weight, no copy)."""
        check_window("transposed convolution", 2, strides=strides, pads=pads, dilations=dilations, output_padding=output_padding)
        if groups < 1:
            raise ValueError(f"conv_transpose {name}: attribute 'group' is {groups}: it must be at least 1")
        n_, c_in, h, w = self.shape(src)
        ci_w, co_g, kh, kw = self.shape(weight)
        if ci_w != c_in or c_in % groups:
            raise ValueError(f"conv_transpose {name}: weight {self.shape(weight)} does not match {c_in} channels, groups={groups}")
        ci_g = c_in // groups
        with self.composite():
            up = self._zero_insert(self.fresh(f"{name}_up"), src, strides, pads, dilations, (kh, kw), output_padding)

            def flip(idx: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
                co, ci, ky, kx = idx
                g = co // co_g
                return (g * ci_g + ci if groups > 1 else ci, co % co_g if groups > 1 else co, (kh - 1) - ky, (kw - 1) - kx)

            wf = self.view(self.fresh(f"{name}_wflip"), weight, (co_g * groups, ci_g, kh, kw), flip, "conv_transpose_weight")
            self.conv(name, up, wf, bias, (1, 1), (0, 0, 0, 0), dilations, groups)
        inputs = [src, weight] + ([bias] if bias else [])
        return self.record(
            "conv_transpose", inputs, name, strides=list(strides), pads=list(pads), dilations=list(dilations), groups=groups,
            output_padding=list(output_padding),
        )  # fmt: skip

    def _zero_insert(
        self, name: str, src: str, strides: Sequence[int], pads: Sequence[int], dil: Sequence[int], k: Sequence[int], opad: Sequence[int]
    ) -> str:
        shape = self.shape(src)
        vs = [Var(v) for v in "ncyx"]
        idx: list[E.Expr] = list(vs[:2])
        conds: list[E.Expr] = []
        out_shape = list(shape[:2])
        for a in range(2):
            n, s = shape[2 + a], strides[a]
            before = dil[a] * (k[a] - 1) - pads[a]
            after = dil[a] * (k[a] - 1) - pads[2 + a] + opad[a]
            out_shape.append((n - 1) * s + 1 + before + after)
            v = vs[2 + a]
            j = v - before if before >= 0 else v + (-before)
            if before > 0:
                conds.append(cmp(">=", j, 0))
            conds.append(cmp("<=", j, (n - 1) * s))
            if s > 1:
                conds.append(cmp("==", j % s, 0))
            idx.append(clamp(j // s if s > 1 else j, 0, n - 1))
        cond = conds[0]
        for c in conds[1:]:
            cond = cmp("and", cond, c)
        return self.stage(Stage(name, dims_of("ncyx", out_shape), select(cond, Access(src, tuple(idx)), 0.0), op="zero_insert"))

    def pool_nd(
        self,
        name: str,
        src: str,
        kind: str,
        kernel: Sequence[int],
        strides: Sequence[int],
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        ceil_mode: bool = False,
        count_include_pad: bool = False,
    ) -> str:
        """Max or average pooling over the kernel's spatial axes (2-D or 3-D). Average: the
        divisor counts the window's elements inside the input (or, with count_include_pad,
        inside the padded input), as ONNX Runtime does."""
        nd = len(kernel)
        if nd not in SPATIAL:
            raise ValueError(f"{kind} pooling {name}: {nd}-D (2-D and 3-D are built)")
        check_window(f"{kind} pooling", nd, kernel=kernel, strides=strides, pads=pads, dilations=dilations)
        for k, pad in enumerate(pads):  # a window over padding only: ONNX Runtime and PyTorch refuse it
            if pad >= kernel[k % nd]:
                raise ValueError(f"attribute 'pads' is {list(pads)}: each pad must be smaller than the kernel {list(kernel)}")
        n_, c_, *sizes = self.shape(src)
        outs = [pool_out_size(sizes[a], kernel[a], strides[a], pads[a], pads[nd + a], dilations[a], ceil_mode) for a in range(nd)]
        if min(outs) < 1:
            padded = [sizes[a] + pads[a] + pads[nd + a] for a in range(nd)]
            raise ValueError(f"{kind} pooling {name}: the window is larger than the padded input {padded} (output size {outs})")
        extra = [
            max(0, (outs[a] - 1) * strides[a] + dilations[a] * (kernel[a] - 1) + 1 - (sizes[a] + pads[a] + pads[nd + a])) for a in range(nd)
        ]
        fill = FLOAT_LOWEST if kind == "max" else 0.0
        names = SPATIAL[nd]
        with self.composite():
            x = src
            if any(pads) or any(extra):
                after = (0, 0, *(pads[nd + a] + extra[a] for a in range(nd)))
                x = self.pad_nd(self.fresh(f"{name}_pad"), src, (0, 0, *pads[:nd]), after, fill)
            n, c = Var("n"), Var("c")
            vs = [Var(v) for v in names]
            rv = [Var(f"r{v}") for v in names]
            body = Access(x, (n, c, *(_affine(v, strides[a], rv[a], dilations[a]) for a, v in enumerate(vs))))
            rdom = tuple(Dim(f"r{v}", k) for v, k in zip(names, kernel))
            dims = dims_of(["n", "c", *names], (n_, c_, *outs))
            if kind == "max":
                self.stage(Stage(name, dims, E.Const(FLOAT_LOWEST), rdom, body, "max", op="maxpool"))
            else:
                acc = self.stage(Stage(self.fresh(f"{name}_sum"), dims, E.Const(0.0), rdom, body, "sum", op="avgpool"))
                counts = [
                    _window_count(v, sizes[a], kernel[a], strides[a], pads[a], pads[nd + a], extra[a], count_include_pad)
                    for a, v in enumerate(vs)
                ]
                here = Access(acc, (n, c, *vs))
                fixed = [ct for ct in counts if isinstance(ct, int)]
                if len(fixed) == len(counts):
                    val = here * (1.0 / math.prod(fixed))
                else:
                    div: E.Expr = E.wrap(counts[0])
                    for ct in counts[1:]:
                        div = div * ct
                    val = here / div
                self.stage(Stage(name, dims, val, op="scale"))
        return self.record(
            "pool_nd", [src], name, kind=kind, kernel=list(kernel), strides=list(strides), pads=list(pads), dilations=list(dilations),
            ceil_mode=ceil_mode, count_include_pad=count_include_pad,
        )  # fmt: skip


def _window_count(v: Var, n: int, k: int, s: int, p0: int, p1: int, extra: int, include_pad: bool) -> E.Expr | int:
    """Elements of the window at output index v that an average divides by: those inside the
    input, or with count_include_pad those inside the padded input (ceil mode's extra
    windows reach past it)."""
    if (include_pad and not extra) or not (p0 or p1 or extra):
        return k
    start = v * s - p0 if p0 else v * s
    if include_pad:
        return E.emin(start + k, n + p1) - start
    return E.emin(start + k, n) - E.emax(start, 0)


def _affine(v: Var, stride: int, r: Var, dil: int) -> E.Expr:
    """v * stride + r * dil without multiplications by one."""
    return (v * stride if stride != 1 else v) + (r * dil if dil != 1 else r)
