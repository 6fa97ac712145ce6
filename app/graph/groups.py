"""Grouping a large graph's stages by the layer they came from (pure Python, no Qt).

An imported model records each stage's module path (`pipeline.source["scopes"]`, e.g.
'layer1/layer1.0/conv1'). Consecutive stages that share a prefix of that path form a
group ('layer1/layer1.0', shown as 'layer1.0'); the depth is the shallowest one whose
groups stay small (a ResNet-50: its 16 bottleneck blocks). A weight input read only
inside one group belongs to it. The graph view draws a collapsed group as one node:
`visible_graph` is the graph with every collapsed group contracted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from engine.frontends.common import sanitize
from engine.ir import Pipeline

AUTO_GROUP_STAGES = 60  # graphs with at least this many stages open grouped
MIN_GROUP, MAX_GROUP = 3, 32  # a group has this many stages or it is not worth one


@dataclass
class Grouping:
    groups: dict[str, list[str]] = field(default_factory=dict)  # group id -> member stages, in pipeline order
    labels: dict[str, str] = field(default_factory=dict)  # group id -> short label ('layer1.0')
    inputs: dict[str, list[str]] = field(default_factory=dict)  # group id -> weight inputs only it reads
    of: dict[str, str] = field(default_factory=dict)  # stage or input -> its group id

    def __bool__(self) -> bool:
        return bool(self.groups)

    def members(self, gid: str) -> list[str]:
        """Stages and inputs inside a group."""
        return self.groups[gid] + self.inputs[gid]

    def short_name(self, name: str) -> str:
        """A member's name without its group's prefix: 'layer1_layer1_1_conv2_Conv' -> 'conv2_Conv'."""
        gid = self.of.get(name)
        if gid is None:
            return name
        for pre in (sanitize(gid.split("#")[0]), sanitize(self.labels[gid])):
            if name.startswith(pre + "_") and len(name) > len(pre) + 1:
                return name[len(pre) + 1 :]
        return name


def label_of(path: tuple[str, ...]) -> str:
    """'layer1/layer1.0' -> 'layer1.0' (exporters repeat the prefix); 'layer1/0' -> 'layer1.0'."""
    last = path[-1]
    return last if len(path) == 1 or last.startswith(path[-2]) else ".".join(path)


def _runs(order: list[str], scopes: dict[str, tuple[str, ...]], depth: int) -> list[tuple[tuple[str, ...], list[str]]]:
    """Maximal runs of consecutive stages with the same path prefix of length `depth`."""
    runs: list[tuple[tuple[str, ...], list[str]]] = []
    for s in order:
        path = scopes.get(s, ())
        key = path[:depth] if len(path) >= depth else ()
        if runs and key and runs[-1][0] == key:
            runs[-1][1].append(s)
        else:
            runs.append((key, [s]))
    return [(k, m) for k, m in runs if k and len(m) >= MIN_GROUP]


def find_groups(p: Pipeline) -> Grouping:
    """The groups of `p` (empty when it records no module paths or none make a group)."""
    raw = p.source.get("scopes") or {}
    scopes = {s: tuple(x for x in str(v).split("/") if x) for s, v in raw.items() if s in p.stage_map}
    if not scopes:
        return Grouping()
    order = [s.name for s in p.stages]
    largest = min(MAX_GROUP, len(order) // 2)  # one group holding most of the graph hides it, not groups it
    best: list[tuple[tuple[str, ...], list[str]]] = []
    for depth in range(1, max(len(v) for v in scopes.values()) + 1):
        runs = _runs(order, scopes, depth)
        if runs and max(len(m) for _, m in runs) <= largest:
            best = runs
            break
    g = Grouping()
    seen: dict[str, int] = {}
    for key, members in best:
        base = "/".join(key)
        seen[base] = seen.get(base, 0) + 1
        gid = base if seen[base] == 1 else f"{base}#{seen[base]}"  # one layer, two runs: two groups
        g.groups[gid], g.labels[gid], g.inputs[gid] = members, label_of(key), []
        g.of.update(dict.fromkeys(members, gid))
    _drop_cycles(p.graph, g)
    for i in p.inputs:  # weights read only inside one group live in it
        owners = {g.of.get(c) for c in p.graph.successors(i.name)}
        if i.weight and len(owners) == 1 and None not in owners:
            owner = owners.pop()
            assert owner is not None
            g.inputs[owner].append(i.name)
            g.of[i.name] = owner
    return g


def _drop_cycles(graph: nx.DiGraph, g: Grouping) -> None:
    """Ungroup groups until contracting all of them leaves a DAG (a group a path leaves and
    re-enters cannot be one node)."""
    while g.groups:
        q = visible_graph(graph, g, set())
        try:
            cycle = nx.find_cycle(q)
        except nx.NetworkXNoCycle:
            return
        gid = next(n for edge in cycle for n in edge[:2] if n in g.groups)
        for s in g.groups.pop(gid):
            del g.of[s]
        del g.labels[gid], g.inputs[gid]


def visible_graph(graph: nx.DiGraph, g: Grouping, expanded: set[str]) -> nx.DiGraph:
    """`graph` with every group not in `expanded` contracted to one node (kind 'group')."""

    def rep(n: str) -> str:
        gid = g.of.get(n)
        return gid if gid is not None and gid not in expanded else n

    q = nx.DiGraph()
    for n, data in graph.nodes(data=True):
        r = rep(n)
        if r == n:
            q.add_node(n, **data)
        elif r not in q:
            q.add_node(r, kind="group")
    for u, v in graph.edges:
        ru, rv = rep(u), rep(v)
        if ru != rv:
            q.add_edge(ru, rv)
    return q
