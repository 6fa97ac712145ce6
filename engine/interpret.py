"""A numpy interpreter of the pipeline IR (float64): each stage evaluated over its whole
domain with broadcast index grids. It is the reference for pipelines that carry no
operator records, and independent of Halide."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import expr as E
from .ir import Pipeline, Stage

MAX_POINTS = 60_000_000  # per evaluated block; larger stages are evaluated in slices


def interpret(p: Pipeline, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    for s in p.stages:
        n_r = math.prod(d.extent for d in s.rdom) if s.rdom else 1
        out = np.empty(s.shape)
        # Slice the outermost dim so each block stays within MAX_POINTS.
        rows = max(1, MAX_POINTS // max(1, (s.size // s.dims[0].extent) * n_r))
        for start in range(0, s.dims[0].extent, rows):
            stop = min(s.dims[0].extent, start + rows)
            out[start:stop] = _eval_block(s, values, start, stop)
        values[s.name] = out
    return {o: values[o] for o in p.outputs}


def _eval_block(s: Stage, values: dict[str, np.ndarray], start: int, stop: int) -> np.ndarray:
    names = [d.name for d in s.dims]
    nd = len(names) + len(s.rdom)
    grids: dict[str, np.ndarray] = {}
    for k, d in enumerate(list(s.dims) + list(s.rdom)):
        shape = [1] * nd
        lo, hi = (start, stop) if k == 0 else (0, d.extent)
        shape[k] = hi - lo
        grids[d.name] = np.arange(lo, hi).reshape(shape)
    block = [stop - start] + [d.extent for d in s.dims[1:]]
    pure_grids = {k: v.reshape(v.shape[: len(names)]) for k, v in grids.items() if k in names}
    init = np.broadcast_to(_ev(s.value, pure_grids, values), block).astype(np.float64)
    if s.update is None:
        return init
    assert s.reduce is not None  # Pipeline validation: 'update' and 'reduce' come together
    body = np.broadcast_to(_ev(s.update, grids, values), block + [d.extent for d in s.rdom])
    axes = tuple(range(len(names), nd))
    comb = {"sum": np.add, "max": np.maximum, "min": np.minimum}[s.reduce]
    return comb(init, comb.reduce(body, axis=axes))  # add.reduce is np.sum, maximum.reduce np.max


def _ev(e: E.Expr, grids: dict[str, np.ndarray], values: dict[str, np.ndarray]):
    rec = lambda x: _ev(x, grids, values)
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        return grids[e.name]
    if isinstance(e, E.Access):
        src = values[e.source]
        idx = [np.asarray(rec(i)).astype(np.int64) for i in e.index]
        for k, ix in enumerate(idx):
            if ix.size and (ix.min() < 0 or ix.max() >= src.shape[k]):
                raise IndexError(f"{e.source} axis {k} read at [{ix.min()}, {ix.max()}], outside [0, {src.shape[k] - 1}]")
        return src[tuple(idx)]
    if isinstance(e, E.BinOp):
        a, b = rec(e.a), rec(e.b)
        ops = {
            "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide, "%": np.mod,
            "min": np.minimum, "max": np.maximum, "<": np.less, "<=": np.less_equal, ">": np.greater,
            ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or,
        }  # fmt: skip
        return ops[e.op](a, b)
    if isinstance(e, E.Call):
        a = np.asarray(rec(e.args[0]), dtype=np.float64)
        if e.fn == "erf":
            import torch  # noqa: PLC0415  # only needed for GELU-like stages

            return torch.erf(torch.from_numpy(np.ascontiguousarray(a))).numpy()
        fns: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh,
            "abs": np.abs, "neg": np.negative, "float": lambda v: v, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        }  # fmt: skip
        return fns[e.fn](a)
    if isinstance(e, E.Select):
        return np.where(rec(e.cond), rec(e.then), rec(e.other))
    raise TypeError(f"cannot interpret {e!r}")
