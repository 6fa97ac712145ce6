"""A layered left-to-right (or top-to-bottom) layout of a DAG (Sugiyama style, kept simple): longest-path
layers, dummy nodes on long edges, barycentre ordering sweeps that keep the ordering with
the fewest crossings, then least-squares vertical placement under minimum gaps.

Pure Python over networkx, no Qt: the graph view draws what this returns, and the layout
is computed once per pipeline (never while the user pans or zooms)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx

Point = tuple[float, float]
DIRECTIONS = ("LR", "TB")  # left to right, top to bottom


@dataclass
class Layout:
    centers: dict[str, Point]  # node -> centre
    sizes: dict[str, tuple[float, float]]
    layers: dict[str, int]
    routes: dict[tuple[str, str], list[Point]] = field(default_factory=dict)  # edge -> points from producer to consumer
    width: float = 0.0
    height: float = 0.0
    direction: str = "LR"  # layers advance along x ("LR") or y ("TB")

    def transposed(self) -> Layout:
        """The same layout with x and y swapped (layers along the other axis)."""
        return Layout(
            {n: (y, x) for n, (x, y) in self.centers.items()},
            {n: (h, w) for n, (w, h) in self.sizes.items()},
            self.layers,
            {e: [(y, x) for x, y in pts] for e, pts in self.routes.items()},
            self.height,
            self.width,
            "TB" if self.direction == "LR" else "LR",
        )


def assign_layers(g: nx.DiGraph) -> dict[str, int]:
    """Longest-path layers for nodes with producers; a source (an input) sits one layer left
    of its first consumer, so weights appear next to the stage that reads them rather than
    all in the first column."""
    layer: dict[str, int] = {}
    for n in nx.topological_sort(g):
        preds = [p for p in g.predecessors(n) if g.in_degree(p) > 0]
        layer[n] = 1 + max((layer[p] for p in preds), default=0)
    for n in g.nodes:
        if g.in_degree(n) == 0:
            succ = [layer[s] for s in g.successors(n)]
            layer[n] = min(succ) - 1 if succ else 0
    low = min(layer.values(), default=0)
    return {n: v - low for n, v in layer.items()}


def _crossings(upper: list[str], lower: list[str], edges: list[tuple[str, str]]) -> int:
    """Edge crossings between two adjacent layers (edges go upper -> lower)."""
    pu = {n: k for k, n in enumerate(upper)}
    pl = {n: k for k, n in enumerate(lower)}
    pairs = sorted((pu[a], pl[b]) for a, b in edges if a in pu and b in pl)
    count = 0
    for i in range(len(pairs)):  # layers are narrow: the quadratic count is cheap
        for j in range(i + 1, len(pairs)):
            if pairs[i][0] < pairs[j][0] and pairs[i][1] > pairs[j][1]:
                count += 1
    return count


def _isotonic_place(desired: list[float], gaps: list[float]) -> list[float]:
    """Positions closest (least squares) to `desired`, in order, with y[i+1] - y[i] >= gaps[i]
    (pool-adjacent-violators on the gap-shifted problem)."""
    offset = [0.0]
    for gap in gaps:
        offset.append(offset[-1] + gap)
    target = [d - o for d, o in zip(desired, offset)]
    blocks: list[list[float]] = []  # [mean, weight]
    for t in target:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    z: list[float] = []
    for mean, weight in blocks:
        z.extend([mean] * int(weight))
    return [v + o for v, o in zip(z, offset)]


def layered_layout(
    g: nx.DiGraph,
    size: Callable[[str], tuple[float, float]],
    column_gap: float = 44.0,
    row_gap: float = 18.0,
    sweeps: int = 6,
    direction: str = "LR",
) -> Layout:
    """Lay out `g` left to right (`direction` "LR") or top to bottom ("TB"); `size(node)`
    gives each node's (width, height). Top to bottom is the left-to-right layout of the
    nodes turned on their side, transposed: one algorithm, two orientations."""
    if direction not in DIRECTIONS:
        raise ValueError(f"layout direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if direction == "TB":
        # Nodes sit side by side in a row: a wider gap between them than between stacked ones.
        return layered_layout(
            g, lambda n: (size(n)[1], size(n)[0]), column_gap=column_gap, row_gap=row_gap * 1.5, sweeps=sweeps, direction="LR"
        ).transposed()
    layer = assign_layers(g)
    sizes = {n: size(n) for n in g.nodes}
    nlayers = max(layer.values(), default=-1) + 1
    # Long edges get a dummy node in every layer they cross, so they route between nodes.
    dummy_h = 8.0
    chains: dict[tuple[str, str], list[str]] = {}
    edges: list[tuple[str, str]] = []
    node_layer = dict(layer)
    for u, v in g.edges:
        chain = [u]
        for k in range(layer[u] + 1, layer[v]):
            d = f"\0{u}\0{v}\0{k}"
            node_layer[d] = k
            chain.append(d)
        chain.append(v)
        chains[(u, v)] = chain
        edges.extend(zip(chain, chain[1:]))
    preds: dict[str, list[str]] = {n: [] for n in node_layer}
    succs: dict[str, list[str]] = {n: [] for n in node_layer}
    for a, b in edges:
        succs[a].append(b)
        preds[b].append(a)

    # Initial order: depth-first from the sources, so connected nodes start close together.
    rank: dict[str, int] = {}
    for src in (n for n in g.nodes if g.in_degree(n) == 0):
        for n in nx.dfs_preorder_nodes(g, src):
            rank.setdefault(n, len(rank))
    for n in g.nodes:
        rank.setdefault(n, len(rank))
    for d in node_layer:
        if d not in rank:
            rank[d] = rank[d.split("\0")[1]]
    order: list[list[str]] = [[] for _ in range(nlayers)]
    for n in sorted(node_layer, key=lambda n: rank[n]):
        order[node_layer[n]].append(n)

    def total_crossings(o: list[list[str]]) -> int:
        return sum(_crossings(o[k], o[k + 1], edges) for k in range(nlayers - 1))

    def sweep(o: list[list[str]], down: bool) -> list[list[str]]:
        o = [list(x) for x in o]
        rng = range(1, nlayers) if down else range(nlayers - 2, -1, -1)
        for k in rng:
            ref = {n: i for i, n in enumerate(o[k - 1 if down else k + 1])}
            nbrs = preds if down else succs
            keyed = []
            for i, n in enumerate(o[k]):
                pos = [ref[m] for m in nbrs[n] if m in ref]
                keyed.append((sum(pos) / len(pos) if pos else i, i, n))
            o[k] = [n for _, _, n in sorted(keyed)]
        return o

    best, best_c = order, total_crossings(order)
    current = order
    for s in range(sweeps):
        current = sweep(current, down=s % 2 == 0)
        c = total_crossings(current)
        if c < best_c:
            best, best_c = current, c
        if best_c == 0:
            break
    order = best

    # Vertical placement: each node as close as possible to the mean of its neighbours in
    # the previous layer (then the next), nodes kept in order and apart.
    def height(n: str) -> float:
        return sizes[n][1] if n in sizes else dummy_h

    y: dict[str, float] = {}
    for col in order:
        pos = 0.0
        for n in col:
            y[n] = pos + height(n) / 2
            pos += height(n) + row_gap
    for it in range(4):
        down = it % 2 == 0
        rng = range(1, nlayers) if down else range(nlayers - 2, -1, -1)
        for k in rng:
            col = order[k]
            nbrs = preds if down else succs
            desired = []
            for n in col:
                ys = [y[m] for m in nbrs[n]]
                desired.append(sum(ys) / len(ys) if ys else y[n])
            gaps = [(height(a) + height(b)) / 2 + (row_gap if a in sizes or b in sizes else row_gap / 3) for a, b in zip(col, col[1:])]
            for n, v in zip(col, _isotonic_place(desired, gaps)):
                y[n] = v
    top = min((y[n] - height(n) / 2 for n in y), default=0.0)
    col_w = max((w for w, _ in sizes.values()), default=0.0)
    xs = [k * (col_w + column_gap) + col_w / 2 for k in range(nlayers)]
    centers = {n: (xs[layer[n]], y[n] - top) for n in g.nodes}
    routes: dict[tuple[str, str], list[Point]] = {}
    for (u, v), chain in chains.items():
        (ux, uy), (vx, vy) = centers[u], centers[v]
        pts = [(ux + sizes[u][0] / 2, uy)]
        for d in chain[1:-1]:  # straight through the column, in the gap between two nodes
            x, yd = xs[node_layer[d]], y[d] - top
            pts += [(x - col_w / 2, yd), (x + col_w / 2, yd)]
        pts.append((vx - sizes[v][0] / 2, vy))
        routes[(u, v)] = pts
    bottom = max((y[n] + height(n) / 2 - top for n in y), default=0.0)
    return Layout(centers, sizes, layer, routes, width=nlayers * (col_w + column_gap) - column_gap, height=bottom)
