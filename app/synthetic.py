"""A synthetic pipeline of any size, for trying the views at scale (the zoo's largest has
about a dozen stages). Deterministic for a seed; built with the engine's operator library."""

from __future__ import annotations

import random

from engine.ir import Pipeline
from engine.ops import Builder


def synthetic_pipeline(n_stages: int = 500, lanes: int = 8, size: int = 32, seed: int = 0) -> Pipeline:
    """About `n_stages` stages in `lanes` parallel chains of pointwise ops and 3x3 stencils
    (pad + stencil keeps the shape), with random cross-lane merges and skip connections so
    the graph has long edges and crossings to lay out; all lanes merge into one output."""
    rng = random.Random(seed)
    b = Builder(f"synthetic{n_stages}", f"synthetic DAG of about {n_stages} stages in {lanes} lanes at {size}x{size}")
    inp = b.input("input", (size, size), 0.0, 1.0)
    heads = [inp] * lanes
    history: list[str] = []
    count = 0

    def name(op: str) -> str:
        nonlocal count
        count += 1
        return f"s{count}_{op}"

    while count < n_stages - lanes:
        k = rng.randrange(lanes)
        src = heads[k]
        roll = rng.random()
        if roll < 0.2 and src != inp:
            padded = b.pad(name("pad"), src, 1)
            out = b.stencil(name("blur"), padded, [((dy, dx), 1 / 9) for dy in range(3) for dx in range(3)])
        elif roll < 0.45 and history:
            other = rng.choice(history[-4 * lanes :])  # a recent stage of any lane: a merge or a skip edge
            out = b.add(name("add"), src, other) if src != other else b.activation(name("relu"), src, "relu")
        elif roll < 0.7:
            out = b.activation(name("relu"), src, "relu")
        else:
            out = b.scale(name("scale"), src, 0.5 + rng.random())
        heads[k] = out
        history.append(out)
    acc = heads[0]
    for h in heads[1:]:
        if h != inp and h != acc:
            acc = b.add(name("merge"), acc, h)
    if acc == inp:
        acc = b.activation(name("relu"), inp, "relu")
    return b.build([acc])
