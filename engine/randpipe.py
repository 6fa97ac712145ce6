"""Random pipelines for cost-model training data, in the spirit of Halide's random_pipeline.

`random_pipeline(seed)` grows a DAG of convolutions, pointwise ops, stencils, pools,
matmuls and reductions (plus joins of two branches) on an image (N=1, C, H, W) or a
matrix (M, K) input, with random sizes kept under a FLOP budget so the default schedule
runs in milliseconds at 'small' size. Everything is built with the operator library
(`TensorOps`, a `Builder`), so each pipeline carries operator records and is verified
against the independent numpy/torch reference, like the zoo. Deterministic per seed
(Python's `random.Random`, no global state).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .ir import Pipeline
from .tensor_ops import TensorOps

# Total FLOPs of the pipeline (its default schedule is serial and scalar: ~1 GFLOP/s). The
# zoo at full size spans 5e7..1e10: training on medium and large too lets the learned
# models extrapolate there (`costmodel calibrate` measures how well).
FLOP_BUDGET = {"small": 1e7, "medium": 1e8, "large": 1e9}
# Extents of images (H, W) and matrices (M, K, N) scale with the size, so larger sizes are
# larger tensors rather than only more ops under a larger budget.
SCALE = {"small": 1, "medium": 2, "large": 4}
ACTIVATIONS = ("relu", "relu6", "sigmoid", "tanh", "gelu")


class _Gen:
    """One pipeline being grown: a Builder plus the pool of tensors ops can read."""

    def __init__(self, seed: int, max_stages: int, size: str) -> None:
        if size not in FLOP_BUDGET:
            raise ValueError(f"unknown size {size!r} (choose from {', '.join(FLOP_BUDGET)})")
        self.rng = random.Random(seed)
        self.b = TensorOps(f"rand_{seed}", f"random pipeline (seed {seed}, {size})")
        self.max_stages, self.budget, self.scale = max_stages, FLOP_BUDGET[size], SCALE[size]
        self.pool: list[str] = []  # tensors (inputs and stages) that later ops may read
        self.n_inputs = 0

    # --- helpers ---------------------------------------------------------------------
    def shape(self, t: str) -> tuple[int, ...]:
        return self.b.shape(t)

    def weight(self, shape: tuple[int, ...], scale: float = 0.3) -> str:
        self.n_inputs += 1
        return self.b.input(self.b.fresh("w"), shape, -scale, scale)

    def pick(self, rank: int | None = None) -> str | None:
        """A tensor to read: mostly the newest (deep chains), sometimes an older one (branches)."""
        cands = [t for t in self.pool if rank is None or len(self.shape(t)) == rank]
        if not cands:
            return None
        return cands[-1] if self.rng.random() < 0.6 else self.rng.choice(cands)

    def partner(self, t: str) -> str | None:
        """Another tensor of the same shape (for a join), if any."""
        cands = [u for u in self.pool if u != t and self.shape(u) == self.shape(t)]
        return self.rng.choice(cands) if cands else None

    def _state(self) -> tuple[int, ...]:
        b = self.b
        return len(b.inputs), len(b.stages), len(b.ops), len(self.pool), self.n_inputs

    def _restore(self, st: tuple[int, ...]) -> None:
        """Undo an op that broke the budget (Builder only appends, so truncating undoes it)."""
        n_in, n_st, n_ops, n_pool, n_w = st
        self.b.truncate(n_in, n_st, n_ops)
        del self.pool[n_pool:]
        self.n_inputs = n_w

    def flops(self) -> float:
        return float(sum(s.flops() for s in self.b.stages))

    # --- image ops (1, C, H, W) ----------------------------------------------------------
    def conv(self, x: str) -> str | None:
        _, c, h, w = self.shape(x)
        r = self.rng
        k = r.choice((1, 3, 3))
        pad = 1 if k == 3 and r.random() < 0.6 else 0
        stride = 2 if r.random() < 0.2 and min(h, w) >= 8 else 1
        if min(h, w) + 2 * pad < k + stride:
            return None
        b = self.b
        if r.random() < 0.25 and k == 3:  # depthwise
            wt = self.weight((c, 1, k, k))
            bias = self.weight((c,)) if r.random() < 0.5 else None
            return b.conv2d(b.fresh("dwconv"), x, wt, bias, stride=stride, pad=pad, groups=c)
        co = r.choice((8, 16, 32))
        wt = self.weight((co, c, k, k), 0.6 / k)
        bias = self.weight((co,)) if r.random() < 0.5 else None
        return b.conv2d(b.fresh("conv"), x, wt, bias, stride=stride, pad=pad)

    def stencil(self, x: str) -> str | None:
        shape = self.shape(x)
        r = self.rng
        kinds = [((0, 0), (0, 1), (0, 2)), ((0, 0), (1, 0), (2, 0)), tuple((dy, dx) for dy in range(3) for dx in range(3))]
        if len(shape) == 2 and r.random() < 0.5:
            kinds = [((0, 0), (0, 1), (0, 2)), ((0, 0), (0, 1))]
        offs = r.choice(kinds)
        if any(shape[-2 + a] <= max(o[a] for o in offs) + 1 for a in range(2)):
            return None
        lead = (0,) * (len(shape) - 2)
        taps = [((*lead, dy, dx), round(r.uniform(-1, 1), 3) or 0.5) for dy, dx in offs]
        return self.b.stencil(self.b.fresh("stencil"), x, taps)

    def pool2d(self, x: str) -> str | None:
        _, _, h, w = self.shape(x)
        k, stride = self.rng.choice(((2, 2), (3, 2), (3, 1)))
        if min(h, w) < k + 1:
            return None
        kind = self.rng.choice(("max", "avg"))
        return self.b.pool2d(self.b.fresh(f"{kind}pool"), x, kind, k, stride)

    def channel_affine(self, x: str) -> str:
        c = self.shape(x)[1]
        s, t = self.weight((c,), 1.0), self.weight((c,), 0.5)
        return self.b.channel_affine(self.b.fresh("bn"), x, s, t)

    def flatten_matmul(self, x: str) -> str:
        """(1, C, H, W) viewed as (C*H, W) (a reshape: non-affine reads), times a weight."""
        _, c, h, w = self.shape(x)
        v = self.b.reshape(self.b.fresh("flat"), x, (c * h, w))
        return self.matmul(v)

    # --- matrix ops (M, K) ----------------------------------------------------------------
    def matmul(self, a: str) -> str:
        m, k = self.shape(a)
        r = self.rng
        other = [u for u in self.pool if u != a and len(self.shape(u)) == 2 and self.shape(u)[1] == k]
        if other and r.random() < 0.3:  # a @ b^T of two tensors (attention scores)
            return self.b.matmul(self.b.fresh("matmul"), a, r.choice(other), b_transposed=True)
        n = r.choice((32, 64, 128)) * self.scale
        wt = self.weight((k, n), 1.0 / max(1, k) ** 0.5)
        bias = self.weight((n,)) if r.random() < 0.5 else None
        return self.b.matmul(self.b.fresh("matmul"), a, wt, bias)

    def row_norm(self, x: str) -> str:
        if self.rng.random() < 0.5:
            return self.b.softmax(self.b.fresh("softmax"), x)
        n = self.shape(x)[-1]
        g, be = self.weight((n,), 1.0), self.weight((n,), 0.5)
        return self.b.layernorm(self.b.fresh("layernorm"), x, g, be)

    def transpose(self, x: str) -> str:
        v = self.b.transpose(self.b.fresh("transposed"), x, [1, 0])
        return self.b.unary(self.b.fresh("t_act"), v, self.rng.choice(("relu", "tanh")))

    # --- any rank -----------------------------------------------------------------------
    def pointwise(self, x: str) -> str:
        r = self.rng
        if r.random() < 0.2:
            return self.b.scale(self.b.fresh("scale"), x, round(r.uniform(0.5, 2.0), 3))
        kind = r.choice(ACTIVATIONS)
        return self.b.activation(self.b.fresh(f"act_{kind}"), x, kind)  # "tanh" would clash with libm

    def join(self, x: str) -> str | None:
        y = self.partner(x)
        if y is None:
            return None
        fn = self.rng.choice(("add", "add_relu", "mul"))
        if fn == "mul":
            return self.b.pointwise(self.b.fresh("mul"), "mul", [x, y], lambda a, c: a * c)
        return self.b.add(self.b.fresh(fn), x, y, then_relu=fn == "add_relu")

    def reduction(self, x: str) -> str:
        """A reduction (kept dims) combined back with its input by broadcasting (x - mean, x * max, ...)."""
        rank = len(self.shape(x))
        r = self.rng
        axes = r.choice(([1], [2, 3], [3])) if rank == 4 else r.choice(([1], [0]))
        kind = r.choice(("sum", "mean", "max"))
        red = self.b.reduce(self.b.fresh(f"reduce_{kind}"), x, axes, kind, keepdims=True)
        if r.random() < 0.3:
            return red
        return self.b.binary(self.b.fresh("combine"), x, red, r.choice(("sub", "mul", "add")))

    # --- growth -------------------------------------------------------------------------
    def ops_for(self, rank: int) -> list[tuple[Callable[[str], Any], float]]:
        if rank == 4:
            return [
                (self.conv, 3.0), (self.pointwise, 2.0), (self.stencil, 1.5), (self.pool2d, 1.0), (self.channel_affine, 0.7),
                (self.join, 1.5), (self.reduction, 1.0), (self.flatten_matmul, 0.4),
            ]  # fmt: skip
        return [
            (self.matmul, 3.0), (self.pointwise, 2.0), (self.row_norm, 1.2), (self.stencil, 0.8), (self.join, 1.5),
            (self.reduction, 1.0), (self.transpose, 0.5),
        ]  # fmt: skip

    def start(self) -> None:
        r = self.rng
        if r.random() < 0.6:
            c, h = r.choice((3, 4, 8, 16, 32)), r.choice((16, 24, 32, 48, 64)) * self.scale
            w = h if r.random() < 0.7 else r.choice((16, 24, 32, 40, 64)) * self.scale
            shape: tuple[int, ...] = (1, c, h, w)
        else:
            shape = (r.choice((32, 48, 64, 96, 128, 192)) * self.scale, r.choice((32, 64, 96, 128)) * self.scale)
        self.pool.append(self.b.input("input", shape))
        if r.random() < 0.3:
            self.pool.append(self.b.input("input2", shape))

    def grow(self) -> Pipeline:
        self.start()
        target = self.rng.randint(2, max(2, self.max_stages))
        for _ in range(12 * self.max_stages):
            if len(self.b.stages) >= target:
                break
            x = self.pick()
            assert x is not None
            ops = self.ops_for(len(self.shape(x)))
            fn = self.rng.choices([f for f, _ in ops], weights=[w for _, w in ops])[0]
            st = self._state()
            out = fn(x)
            if out is None:
                continue
            if len(self.b.stages) > self.max_stages or self.flops() > self.budget:
                self._restore(st)
                continue
            self.pool.append(out)
        if not self.b.stages:  # always at least one stage
            self.pool.append(self.pointwise(self.pool[0]))
        read = {src for s in self.b.stages for src in s.sources()}
        outputs = [s.name for s in self.b.stages if s.name not in read]
        return self.b.build(outputs)


def random_pipeline(seed: int, max_stages: int = 8, size: str = "small") -> Pipeline:
    """A random pipeline named `rand_<seed>` with at most `max_stages` stages (deterministic per seed)."""
    return _Gen(seed, max_stages, size).grow()
