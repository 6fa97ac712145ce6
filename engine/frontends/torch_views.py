"""PyTorch mappings of matmul, attention and shape operations (views, indexing, concat,
split); registered into the tables of torch_ops.py when imported."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .common import Unsupported, Value
from .torch_ops import FUNCTIONS, METHODS, MODULES, Args, Handler


# --- matmul and attention ----------------------------------------------------------------
def _matmul(a: Args) -> Value:
    return a.em.matmul(a.args[0], a.get(1, "other", a.get(1, "mat2")), a.hint)


FUNCTIONS[operator.matmul] = FUNCTIONS[torch.matmul] = FUNCTIONS[torch.bmm] = FUNCTIONS[torch.mm] = _matmul
METHODS["matmul"] = METHODS["bmm"] = METHODS["mm"] = _matmul


def _sdpa(a: Args) -> Value:
    em = a.em
    q, k, v = a.args[0], a.get(1, "key"), a.get(2, "value")
    mask = a.get(3, "attn_mask")
    if a.get(4, "dropout_p", 0.0) or a.get(5, "is_causal", False) or a.kwargs.get("enable_gqa"):
        raise Unsupported("scaled_dot_product_attention with dropout, is_causal or enable_gqa")
    if mask is not None and (not isinstance(mask, (str, np.ndarray)) or (isinstance(mask, np.ndarray) and mask.dtype == bool)):
        raise Unsupported("scaled_dot_product_attention with a boolean mask (float masks are mapped)")
    scale = a.get(6, "scale") or 1.0 / math.sqrt(em.shape(q)[-1])
    rank = len(em.shape(k))
    kt = em.transpose(k, [*range(rank - 2), rank - 1, rank - 2], f"{a.hint}_kT")
    scores = em.matmul(q, kt, f"{a.hint}_scores", alpha=float(scale))
    if mask is not None:
        scores = em.binary("add", scores, mask, f"{a.hint}_masked")
    probs = em.b.softmax_nd(em.name(f"{a.hint}_probs"), em.tensor(scores), [len(em.shape(scores)) - 1])
    return em.matmul(probs, v, a.hint)


FUNCTIONS[F.scaled_dot_product_attention] = _sdpa


# --- shapes (views) ----------------------------------------------------------------------------
def _reshape(a: Args) -> Value:
    old = a.em.shape(a.args[0])
    shape = a.ints(1, "shape")
    if -1 in shape:
        shape[shape.index(-1)] = math.prod(old) // math.prod(s for s in shape if s != -1)
    return a.em.reshape(a.args[0], tuple(shape), a.hint)


FUNCTIONS[torch.reshape] = METHODS["view"] = METHODS["reshape"] = _reshape


def _flatten(a: Args) -> Value:
    shape = a.em.shape(a.args[0])
    if isinstance(a.module, nn.Flatten):
        s, e = a.module.start_dim, a.module.end_dim
    else:
        s, e = a.get(1, "start_dim", 0), a.get(2, "end_dim", -1)
    s, e = s % len(shape), e % len(shape)
    new = (*shape[:s], math.prod(shape[s : e + 1]), *shape[e + 1 :])
    return a.em.reshape(a.args[0], new, a.hint, "Flatten")


MODULES[nn.Flatten] = FUNCTIONS[torch.flatten] = METHODS["flatten"] = _flatten


def _permute(a: Args) -> Value:
    return a.em.transpose(a.args[0], a.ints(1, "dims"), a.hint)


def _transpose(a: Args) -> Value:
    rank = len(a.em.shape(a.args[0]))
    perm = list(range(rank))
    if len(a.args) > 1 or "dim0" in a.kwargs:
        d0, d1 = int(a.get(1, "dim0")) % rank, int(a.get(2, "dim1")) % rank
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:  # x.t()
        perm = perm[::-1]
    return a.em.transpose(a.args[0], perm, a.hint)


FUNCTIONS[torch.permute], METHODS["permute"] = _permute, _permute
FUNCTIONS[torch.transpose] = METHODS["transpose"] = METHODS["t"] = _transpose


def _squeeze(a: Args) -> Value:
    shape = a.em.shape(a.args[0])
    dim = a.get(1, "dim")
    dims = None if dim is None else {int(d) % len(shape) for d in (dim if isinstance(dim, (tuple, list)) else [dim])}
    new = [n for k, n in enumerate(shape) if not (n == 1 and (dims is None or k in dims))] or [1]
    return a.em.reshape(a.args[0], tuple(new), a.hint, "Squeeze")


def _unsqueeze(a: Args) -> Value:
    shape = list(a.em.shape(a.args[0]))
    d = int(a.get(1, "dim")) % (len(shape) + 1)
    return a.em.reshape(a.args[0], (*shape[:d], 1, *shape[d:]), a.hint, "Unsqueeze")


FUNCTIONS[torch.squeeze], METHODS["squeeze"] = _squeeze, _squeeze
FUNCTIONS[torch.unsqueeze], METHODS["unsqueeze"] = _unsqueeze, _unsqueeze


def _expand(a: Args) -> Value:
    old = a.em.shape(a.args[0])
    shape = a.ints(1, "size")
    shape = [old[k - (len(shape) - len(old))] if n == -1 else n for k, n in enumerate(shape)]
    return a.em.expand(a.args[0], tuple(shape), a.hint)


METHODS["expand"] = _expand


def _cat(a: Args) -> Value:
    xs = list(a.get(0, "tensors"))
    return a.em.concat(xs, int(a.get(1, "dim", 0)), a.hint)


def _stack(a: Args) -> Value:
    xs = list(a.get(0, "tensors"))
    dim = int(a.get(1, "dim", 0))
    rank = len(a.em.shape(xs[0])) + 1
    d = dim % rank
    ups = [a.em.reshape(x, (*a.em.shape(x)[:d], 1, *a.em.shape(x)[d:]), f"{a.hint}_{k}", "Unsqueeze") for k, x in enumerate(xs)]
    return a.em.concat(ups, d, a.hint)


FUNCTIONS[torch.cat] = FUNCTIONS[torch.concat] = _cat
FUNCTIONS[torch.stack] = _stack


def _split(chunks: bool) -> Handler:
    def h(a: Args) -> list[Value]:
        shape = a.em.shape(a.args[0])
        dim = int(a.get(2, "dim", 0)) % len(shape)
        n = shape[dim]
        arg = a.get(1, "chunks" if chunks else "split_size_or_sections", a.kwargs.get("split_size"))
        if chunks:
            per = -(-n // int(arg))
            sizes = [min(per, n - k * per) for k in range(-(-n // per))]
        elif isinstance(arg, int):
            sizes = [min(arg, n - k * arg) for k in range(-(-n // arg))]
        else:
            sizes = [int(s) for s in arg]
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        return [a.em.slice(a.args[0], [dim], [s], [s + z], [1], f"{a.hint}_{k}") for k, (s, z) in enumerate(zip(starts, sizes))]

    return h


FUNCTIONS[torch.chunk], METHODS["chunk"] = _split(True), _split(True)
FUNCTIONS[torch.split], METHODS["split"] = _split(False), _split(False)


def _getitem(a: Args) -> Value:
    x, idx = a.args
    if isinstance(x, (list, tuple)):
        return x[idx]
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(not isinstance(i, (int, slice, type(None), type(Ellipsis))) for i in items):
        raise Unsupported("indexing with tensors or lists (ints, slices, None and ... are mapped)")
    shape = a.em.shape(x)
    if Ellipsis in items:
        e = items.index(Ellipsis)
        n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
        items[e : e + 1] = [slice(None)] * (len(shape) - n_real)
    axes, starts, ends, steps, new_shape, axis = [], [], [], [], [], 0
    for i in items:
        if i is None:
            new_shape.append(1)
            continue
        rng = range(shape[axis])[i if isinstance(i, slice) else slice(i % shape[axis], i % shape[axis] + 1)]
        if not len(rng):
            raise Unsupported("indexing that selects nothing")
        axes.append(axis)
        starts.append(rng.start)
        ends.append(rng.stop)
        steps.append(rng.step)
        if isinstance(i, slice):
            new_shape.append(len(rng))
        axis += 1
    new_shape += list(shape[axis:])
    y = a.em.slice(x, axes, starts, ends, steps, a.hint)
    return a.em.reshape(y, tuple(new_shape) or (1,), f"{a.hint}_index", "Indexing")


FUNCTIONS[operator.getitem] = _getitem


def _getattr(a: Args) -> Value:
    x, attr = a.args[0], a.args[1]
    rank = len(a.em.shape(x))
    if attr == "T":
        return a.em.transpose(x, list(range(rank))[::-1], a.hint)
    if attr == "mT":
        return a.em.transpose(x, [*range(rank - 2), rank - 1, rank - 2], a.hint)
    raise Unsupported(f"tensor attribute {attr!r}")


FUNCTIONS[builtins.getattr] = _getattr
