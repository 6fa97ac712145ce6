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


def synthetic_model(stages_per_block: tuple[int, ...] = (3, 4, 8, 3), size: int = 16) -> Pipeline:
    """A ResNet-shaped chain with the module paths an imported model records
    (`source["scopes"]`, e.g. 'layer2/layer2.1/conv'): stages `layerK.J` blocks per stage of
    the network, each a padded 3x3 stencil, a scale, a residual add and a relu (5 stages),
    after a 2-stage stem and before a 1-stage head. For trying (and testing) grouping."""
    b = Builder(f"synthetic_model{sum(stages_per_block)}", f"synthetic ResNet-shaped chain of {sum(stages_per_block)} blocks")
    scopes: dict[str, str] = {}
    x = b.input("input", (size, size), 0.0, 1.0)
    x = b.scale("stem_conv", x, 0.5)
    x = b.activation("stem_relu", x, "relu")
    scopes.update(stem_conv="conv1", stem_relu="relu")
    for k, blocks in enumerate(stages_per_block, 1):
        for j in range(blocks):
            scope, pre = f"layer{k}/layer{k}.{j}", f"layer{k}_layer{k}_{j}"
            pad = b.pad(f"{pre}_conv_pad", x, 1)
            conv = b.stencil(f"{pre}_conv", pad, [((dy, dx), 1 / 9) for dy in range(3) for dx in range(3)])
            sc = b.scale(f"{pre}_bn", conv, 0.9)
            add = b.add(f"{pre}_add", sc, x)
            out = b.activation(f"{pre}_relu", add, "relu")
            scopes.update({pad: f"{scope}/conv", conv: f"{scope}/conv", sc: f"{scope}/bn", add: scope, out: f"{scope}/relu"})
            x = out
    head = b.scale("fc", x, 2.0)
    scopes[head] = "fc"
    p = b.build([head])
    p.source = {"kind": "synthetic", "scopes": scopes}
    return p
