"""The graph a placer places: one node per pipeline stage, edges from producer to consumer.

Pipeline inputs are not nodes: the bytes a stage reads from them count in its
`bytes_accessed`, and those that are weights (constants) in its `weight_bytes`, resident on
the device the stage runs on. Every stage's output is one tensor, sent once to each other
device that has a consumer of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ir import BYTES_PER_ELEMENT, Input, Pipeline

__all__ = ["OpGraph", "OpNode", "from_pipeline", "random_graph", "weight_inputs"]


@dataclass(frozen=True)
class OpNode:
    name: str
    kind: str  # the stage's operator ("conv", "matmul", "generic", ...)
    flops: float
    bytes_accessed: float  # bytes read (each source's footprint) plus bytes written
    output_bytes: int
    weight_bytes: int  # constants read by this node, resident on its device
    colocate: str = ""  # co-location key (the stage's layer or group), for grouping


@dataclass(frozen=True)
class OpGraph:
    name: str
    nodes: tuple[OpNode, ...]  # in topological order
    edges: tuple[tuple[int, int], ...]  # (producer, consumer); the tensor is the producer's output
    _preds: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    _succs: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.nodes)
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for k, (a, b) in enumerate(self.edges):
            if not (0 <= a < b < n):
                raise ValueError(
                    f"graph {self.name!r}: edge {k} ({a}, {b}) is not producer < consumer within {n} nodes (topological order)"
                )
            if b not in succs[a]:
                succs[a].append(b)
                preds[b].append(a)
        object.__setattr__(self, "_preds", tuple(tuple(p) for p in preds))
        object.__setattr__(self, "_succs", tuple(tuple(s) for s in succs))

    def preds(self, i: int) -> tuple[int, ...]:
        return self._preds[i]

    def succs(self, i: int) -> tuple[int, ...]:
        return self._succs[i]

    @property
    def all_preds(self) -> tuple[tuple[int, ...], ...]:
        return self._preds

    @property
    def all_succs(self) -> tuple[tuple[int, ...], ...]:
        return self._succs

    def __len__(self) -> int:
        return len(self.nodes)


def weight_inputs(p: Pipeline) -> frozenset[str]:
    """The pipeline inputs that are constants: those an importer marked as weights; in a
    pipeline without marks (the zoo's), every input but the first, which by the zoo's
    convention is the data (the image, the activations) and the rest weights, biases, scales."""
    marked = frozenset(i.name for i in p.inputs if i.weight)
    if marked:
        return marked
    return frozenset(i.name for i in p.inputs[1:])


def _colocation_key(p: Pipeline, stage: str) -> str:
    scopes = p.source.get("scopes")
    if isinstance(scopes, dict) and isinstance(scopes.get(stage), str):
        return scopes[stage]  # the module path in the imported model: a pad and its conv share it
    return stage.split("_", 1)[0]  # "conv1_pad" and "conv1", "probs_max" and "probs"


def from_pipeline(p: Pipeline) -> OpGraph:
    """One node per stage, in the pipeline's topological order."""
    order = p.stage_order
    index = {name: k for k, name in enumerate(order)}
    weights = weight_inputs(p)
    inputs: dict[str, Input] = p.input_map
    nodes: list[OpNode] = []
    edges: list[tuple[int, int]] = []
    for k, name in enumerate(order):
        s = p.stage(name)
        read = 0
        weight = 0
        for src in s.sources():
            box = p.footprint(name, src)
            read += BYTES_PER_ELEMENT * math.prod(b - a + 1 for a, b in box)
            if src in index:
                edges.append((index[src], k))
            elif src in weights:
                weight += BYTES_PER_ELEMENT * inputs[src].size
        out = BYTES_PER_ELEMENT * s.size
        nodes.append(OpNode(name, s.op, float(s.flops()), float(read + out), out, weight, _colocation_key(p, name)))
    return OpGraph(p.name, tuple(nodes), tuple(edges))


def random_graph(n: int, seed: int) -> OpGraph:
    """A layered random DAG of `n` nodes, deterministic per seed: layers of 1-6 nodes, each node
    reading 1-3 nodes of the previous two layers; sizes spread over orders of magnitude like a
    network's (activations 16 KB-4 MB, weights 0-4 MB, 1-200 FLOP per byte)."""
    if n < 1:
        raise ValueError(f"random_graph: n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    layers: list[list[int]] = []
    count = 0
    while count < n:
        width = min(int(rng.integers(1, 7)), n - count)
        layers.append(list(range(count, count + width)))
        count += width
    edges: list[tuple[int, int]] = []
    for li in range(1, len(layers)):
        pool = layers[li - 1] + (layers[li - 2] if li >= 2 else [])
        for c in layers[li]:
            k = min(len(pool), int(rng.integers(1, 4)))
            picks = {int(x) for x in rng.choice(pool, size=k, replace=False)}
            picks.add(int(rng.choice(layers[li - 1])))  # keep the layers connected
            edges.extend((a, c) for a in sorted(picks))
    nodes = []
    for i in range(n):
        out = int(2 ** rng.uniform(14, 22)) // 4 * 4
        weight = int(2 ** rng.uniform(12, 22)) // 4 * 4 if rng.random() < 0.6 else 0
        intensity = 10 ** rng.uniform(0, 2.3)
        accessed = float(out * 2 + weight)
        kind = "conv" if weight else "pointwise"
        nodes.append(OpNode(f"n{i}", kind, accessed * intensity, accessed, out, weight, f"g{i // 4}"))
    return OpGraph(f"random{n}_s{seed}", tuple(nodes), tuple(edges))
