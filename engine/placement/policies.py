"""Placement policies: the registry every placer joins, and the non-learned placers.

A placer is `placer(problem, seed, **options) -> PlacementResult`. Registered here:

- `single`: everything on the one device where the simulated makespan is smallest (a valid one first).
- `roundrobin`: node i (topological order) on device i mod D.
- `chunks`: topological chunking: the topological order cut into D contiguous runs of equal node count.
- `tfgreedy`: TensorFlow's greedy simulated placer: in topological order, each node where it would
  finish soonest given the devices' next-free times and the transfers of its inputs.
- `topo`, `etf`, `sct`: Baechi's memory-aware list schedulers (Jeon et al.). m-TOPO: topological
  order, each device filled up to an equal share of the compute (or of its memory); m-ETF: of all
  ready (node, device) pairs, the one that can start earliest, with one send / receive channel
  per device; m-SCT: m-ETF that keeps each node's favourite child (from the LP relaxation of
  Hanen and Munier's small-communication-time schedule, solved with HiGHS) on the parent's device.
  Their memory model is Baechi's: a device holds the weights and outputs of every node placed on
  it, so a device that is full takes no more.
- `kl`: a Kernighan-Lin min-cut partition (networkx) by recursive bisection, cut weight = bytes.

The learned placers (rl, hrl, gnn) register from engine/placement/learned/ through `register`;
`place` and `placers` import that package the first time a name is not found here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from .costs import CostTable
from .devices import DeviceProfile
from .graph import OpGraph
from .simulator import Simulation, simulate

__all__ = [
    "HEURISTICS",
    "BUDGET_OPTIONS",
    "LEARNED_NAMES",
    "PLACERS",
    "PlacementResult",
    "Placer",
    "PolicyError",
    "Problem",
    "budget_options",
    "favourite_children",
    "place",
    "placers",
    "register",
]


class PolicyError(ValueError):
    """An unknown policy, or options a policy does not take."""


@dataclass(frozen=True)
class Problem:
    graph: OpGraph
    profile: DeviceProfile
    costs: CostTable


@dataclass(frozen=True)
class PlacementResult:
    policy: str
    placement: tuple[int, ...]
    simulation: Simulation
    train_s: float = 0.0
    curve: tuple[float, ...] = ()  # training curve (makespan per step)


Placer = Callable[..., PlacementResult]  # (problem, seed, **options)
PLACERS: dict[str, Placer] = {}
LEARNED_PACKAGE = "engine.placement.learned"
LEARNED_NAMES = ("rl", "hrl", "gnn")  # registered by that package
# Each learned placer's training budget option: gnn is trained once on many graphs (shipped) and
# only fine-tunes on the problem, so its budget is the fine-tuning's.
BUDGET_OPTIONS = {"rl": "train_s", "hrl": "train_s", "gnn": "fine_tune_s"}


def budget_options(policy: str, seconds: float | None) -> dict[str, float]:
    """The options giving `policy` a training budget of `seconds` (none for a heuristic or None)."""
    if seconds is None or policy not in BUDGET_OPTIONS:
        return {}
    return {BUDGET_OPTIONS[policy]: seconds}


def register(name: str, placer: Placer) -> None:
    """Add a placer under `name` (a learned package re-registering the same function is fine)."""
    if name in PLACERS and PLACERS[name] is not placer:
        raise PolicyError(f"placement policy {name!r} is already registered")
    PLACERS[name] = placer


def _load_learned() -> None:
    """Import the learned placers (they register themselves); absent or not yet written is fine."""
    try:
        from . import learned  # noqa: F401, PLC0415  # torch loads only when a learned policy is asked for
    except ImportError as exc:
        if exc.name != LEARNED_PACKAGE and not (exc.name or "").startswith(LEARNED_PACKAGE + "."):
            raise  # a broken learned package is an error, not an absent one


def placers() -> list[str]:
    """Every policy name, the learned ones included when their package is installed."""
    _load_learned()
    return sorted(PLACERS)


def place(problem: Problem, policy: str, seed: int = 0, **options: Any) -> PlacementResult:
    """Run one policy; the result's simulation is the placement simulated with the default priority."""
    if policy not in PLACERS:
        _load_learned()
    if policy not in PLACERS:
        raise PolicyError(f"unknown placement policy {policy!r} (policies: {', '.join(sorted(PLACERS))})")
    t0 = time.perf_counter()
    result = PLACERS[policy](problem, seed, **options)
    if len(result.placement) != len(problem.graph.nodes):
        raise PolicyError(f"policy {policy!r} placed {len(result.placement)} of {len(problem.graph.nodes)} nodes")
    if not result.train_s and result.policy in LEARNED_NAMES:
        result = PlacementResult(result.policy, result.placement, result.simulation, time.perf_counter() - t0, result.curve)
    return result


def _result(name: str, problem: Problem, placement: list[int] | tuple[int, ...]) -> PlacementResult:
    pl = tuple(int(d) for d in placement)
    return PlacementResult(name, pl, simulate(problem.graph, problem.profile, problem.costs, pl))


def _no_options(name: str, options: dict[str, Any]) -> None:
    if options:
        raise PolicyError(f"policy {name!r} takes no options, got {', '.join(sorted(options))}")


# --- simple placers ----------------------------------------------------------------------


def place_single(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    """All on one device: the valid one with the smallest makespan (the smallest overall if none fits)."""
    _no_options("single", options)
    n = len(problem.graph.nodes)
    results = [_result("single", problem, [d] * n) for d in range(len(problem.profile.devices))]
    return min(results, key=lambda r: (not r.simulation.valid, r.simulation.makespan_s))


def place_roundrobin(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    _no_options("roundrobin", options)
    d = len(problem.profile.devices)
    return _result("roundrobin", problem, [i % d for i in range(len(problem.graph.nodes))])


def place_chunks(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    """The topological order cut into D runs of (nearly) equal node count, run k on device k."""
    _no_options("chunks", options)
    n, d = len(problem.graph.nodes), len(problem.profile.devices)
    return _result("chunks", problem, [min(d - 1, i * d // max(n, 1)) for i in range(n)])


# --- the list schedulers ------------------------------------------------------------------


class _Schedule:
    """A partial schedule built node by node: device next-free times, one send and one receive
    channel per device, tensors cached where received, Baechi's per-device memory account."""

    def __init__(self, problem: Problem, memory_aware: bool) -> None:
        g, prof = problem.graph, problem.profile
        self.g, self.cost = g, problem.costs.seconds
        self.n_dev = len(prof.devices)
        self.lat = [[prof.link(a, b).latency_s if a != b else 0.0 for b in range(self.n_dev)] for a in range(self.n_dev)]
        self.inv = [[1.0 / prof.link(a, b).bandwidth if a != b else 0.0 for b in range(self.n_dev)] for a in range(self.n_dev)]
        self.free = [0.0] * self.n_dev
        self.send = [0.0] * self.n_dev
        self.recv = [0.0] * self.n_dev
        self.finish: list[float] = [0.0] * len(g.nodes)
        self.device: list[int] = [-1] * len(g.nodes)
        self.arrival: dict[tuple[int, int], float] = {}  # (tensor, device) -> when its copy is there
        self.capacity = [dev.memory_bytes for dev in prof.devices]
        self.used = [0] * self.n_dev
        self.memory_aware = memory_aware

    def need(self, i: int) -> int:
        node = self.g.nodes[i]
        return node.weight_bytes + node.output_bytes

    def fits(self, i: int, d: int) -> bool:
        return not self.memory_aware or self.used[d] + self.need(i) <= self.capacity[d]

    def devices_for(self, i: int) -> list[int]:
        """The devices with room for node i; when none has, the one with the most room (the
        simulator will then report the placement invalid, as it is)."""
        ok = [d for d in range(self.n_dev) if self.fits(i, d)]
        return ok or [max(range(self.n_dev), key=lambda d: self.capacity[d] - self.used[d])]

    def _inputs(self, i: int, d: int, commit: bool) -> float:
        """When all of node i's inputs can be on device d, transfers queued on the channels."""
        ready = 0.0
        send, recv = (self.send, self.recv) if commit else (self.send[:], self.recv[:])
        for p in self.g.preds(i):
            dp = self.device[p]
            if dp == d:
                t = self.finish[p]
            elif (p, d) in self.arrival:
                t = self.arrival[(p, d)]
            else:
                t0 = max(self.finish[p], send[dp], recv[d])
                t = t0 + self.lat[dp][d] + self.g.nodes[p].output_bytes * self.inv[dp][d]
                send[dp] = recv[d] = t
                if commit:
                    self.arrival[(p, d)] = t
            ready = max(ready, t)
        return ready

    def estimate(self, i: int, d: int) -> tuple[float, float]:
        """(start, finish) of node i if it were put on device d next."""
        start = max(self.free[d], self._inputs(i, d, commit=False))
        return start, start + self.cost[i][d]

    def commit(self, i: int, d: int) -> None:
        start = max(self.free[d], self._inputs(i, d, commit=True))
        self.finish[i] = self.free[d] = start + self.cost[i][d]
        self.device[i] = d
        self.used[d] += self.need(i)


def place_tfgreedy(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    """TensorFlow's greedy simulated placer: in topological order, each node on the device where it would finish soonest."""
    _no_options("tfgreedy", options)
    s = _Schedule(problem, memory_aware=False)
    for i in range(len(problem.graph.nodes)):
        d = min(range(s.n_dev), key=lambda d: (s.estimate(i, d)[1], d))
        s.commit(i, d)
    return _result("tfgreedy", problem, s.device)


def place_mtopo(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    """Baechi's m-TOPO: topological order, the current device filled until it holds its share of
    the compute (shares in proportion to the devices' speed on this graph) or its memory is full."""
    _no_options("topo", options)
    g, cost = problem.graph, problem.costs.seconds
    n, n_dev = len(g.nodes), len(problem.profile.devices)
    s = _Schedule(problem, memory_aware=True)
    totals = [sum(cost[i][d] for i in range(n)) or 1.0 for d in range(n_dev)]
    speed = [1.0 / t for t in totals]
    share = [v / sum(speed) for v in speed]  # of the work each device should get, in its own time units
    d, done = 0, 0.0
    for i in range(n):
        while d < n_dev - 1 and (done >= share[d] - 1e-12 or not s.fits(i, d)):
            d, done = d + 1, 0.0
        target = d if s.fits(i, d) else s.devices_for(i)[0]
        s.commit(i, target)
        if target == d:
            done += cost[i][d] / totals[d]
    return _result("topo", problem, s.device)


def _bottom_levels(problem: Problem) -> list[float]:
    """Longest path from each node to the end, in mean compute time (ETF's tie-breaker)."""
    g, cost = problem.graph, problem.costs.seconds
    level = [0.0] * len(g.nodes)
    for i in reversed(range(len(g.nodes))):
        level[i] = sum(cost[i]) / len(cost[i]) + max((level[c] for c in g.succs(i)), default=0.0)
    return level


def _list_schedule(problem: Problem, name: str, favorite: dict[int, int] | None = None) -> PlacementResult:
    """m-ETF: repeatedly the ready (node, device) pair with the earliest start (ties: earlier finish,
    then the longer remaining path). With `favorite` (child -> parent), m-SCT: a favourite child
    goes to its parent's device when that device has room."""
    g = problem.graph
    n = len(g.nodes)
    s = _Schedule(problem, memory_aware=True)
    level = _bottom_levels(problem)
    waiting = [len(g.preds(i)) for i in range(n)]
    ready = [i for i in range(n) if not waiting[i]]
    while ready:
        best: tuple[float, float, float, int, int] | None = None
        for i in ready:
            devs = s.devices_for(i)
            if favorite is not None and i in favorite:
                parent_dev = s.device[favorite[i]]
                if parent_dev in devs:
                    devs = [parent_dev]
            for d in devs:
                start, end = s.estimate(i, d)
                key = (start, end, -level[i], i, d)
                if best is None or key < best:
                    best = key
        assert best is not None
        i, d = best[3], best[4]
        s.commit(i, d)
        ready.remove(i)
        for c in g.succs(i):
            waiting[c] -= 1
            if not waiting[c]:
                ready.append(c)
    return _result(name, problem, s.device)


def place_metf(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    _no_options("etf", options)
    return _list_schedule(problem, "etf")


def favourite_children(problem: Problem) -> dict[int, int]:
    """Hanen and Munier's LP relaxation (Baechi's m-SCT): start times s, makespan w, and per edge
    x in [0, 1] (0: the child runs right after its parent on the same device, no transfer).
    minimize w  s.t.  s_i + p_i <= w;  s_i + p_i + c_ij x_ij <= s_j;  each node has at most one
    child and one parent with x = 0 (sum x >= count - 1). An edge with x < 1/2 makes the child
    its parent's favourite. Times are means over the devices and links (the LP knows one kind of
    each). Returns child -> parent."""
    g, prof, cost = problem.graph, problem.profile, problem.costs.seconds
    n, edges = len(g.nodes), list(g.edges)
    if not edges:
        return {}
    m = len(edges)
    pairs = [(a, b) for a in range(len(prof.devices)) for b in range(len(prof.devices)) if a != b]
    p = [sum(row) / len(row) for row in cost]
    if pairs:
        lat = sum(prof.link(a, b).latency_s for a, b in pairs) / len(pairs)
        inv = sum(1.0 / prof.link(a, b).bandwidth for a, b in pairs) / len(pairs)
    else:
        lat = inv = 0.0
    comm = [lat + g.nodes[a].output_bytes * inv for a, _ in edges]
    # Variables: s_0..s_{n-1}, x_0..x_{m-1}, w.  All constraints as A_ub @ v <= b_ub.
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    b: list[float] = []
    r = 0
    w = n + m
    for i in range(n):  # s_i - w <= -p_i
        rows += [r, r]
        cols += [i, w]
        vals += [1.0, -1.0]
        b.append(-p[i])
        r += 1
    for k, (i, j) in enumerate(edges):  # s_i - s_j + c x_k <= -p_i
        rows += [r, r, r]
        cols += [i, j, n + k]
        vals += [1.0, -1.0, comm[k]]
        b.append(-p[i])
        r += 1
    out_edges: dict[int, list[int]] = {}
    in_edges: dict[int, list[int]] = {}
    for k, (i, j) in enumerate(edges):
        out_edges.setdefault(i, []).append(k)
        in_edges.setdefault(j, []).append(k)
    for group in (*out_edges.values(), *in_edges.values()):  # -sum x <= -(count - 1)
        if len(group) < 2:
            continue
        for k in group:
            rows.append(r)
            cols.append(n + k)
            vals.append(-1.0)
        b.append(-(len(group) - 1.0))
        r += 1
    # scipy's optimizer loads with m-SCT only (about 1 s: the app's start-up imports this registry)
    from scipy.optimize import linprog  # noqa: PLC0415
    from scipy.sparse import coo_matrix  # noqa: PLC0415

    a_ub = coo_matrix((vals, (rows, cols)), shape=(r, n + m + 1)).tocsr()
    c = np.zeros(n + m + 1)
    c[w] = 1.0
    bounds = [(0.0, None)] * n + [(0.0, 1.0)] * m + [(0.0, None)]
    res = linprog(c, A_ub=a_ub, b_ub=np.array(b), bounds=bounds, method="highs")
    if res.status != 0:
        raise PolicyError(f"m-SCT: the LP relaxation failed on {g.name!r} ({res.message})")
    x = res.x[n : n + m]
    favorite: dict[int, int] = {}
    taken: set[int] = set()
    for k in np.argsort(x, kind="stable"):  # the surest first; one favourite child per parent
        i, j = edges[int(k)]
        if x[k] < 0.5 and i not in taken and j not in favorite:
            favorite[j] = i
            taken.add(i)
    return favorite


def place_msct(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    _no_options("sct", options)
    return _list_schedule(problem, "sct", favourite_children(problem))


# --- min-cut partition -----------------------------------------------------------------


def place_kl(problem: Problem, seed: int = 0, **options: Any) -> PlacementResult:
    """Kernighan-Lin by recursive bisection into as many parts as devices (cut weight: the bytes
    on the edge), then the parts with the most compute on the fastest devices."""
    _no_options("kl", options)
    g, prof = problem.graph, problem.profile
    n, n_dev = len(g.nodes), len(prof.devices)
    ug = nx.Graph()
    ug.add_nodes_from(range(n))
    for a, b in g.edges:
        ug.add_edge(a, b, weight=float(g.nodes[a].output_bytes))
    parts: list[set[int]] = [set(range(n))]
    while len(parts) < min(n_dev, n):
        parts.sort(key=len)
        biggest = parts.pop()
        if len(biggest) < 2:
            parts.append(biggest)
            break
        left, right = nx.algorithms.community.kernighan_lin_bisection(ug.subgraph(biggest), weight="weight", seed=seed)
        parts += [set(left), set(right)]
    work = [sum(g.nodes[i].flops for i in part) for part in parts]
    order = sorted(range(len(parts)), key=lambda k: (-work[k], min(parts[k])))
    fastest = sorted(range(n_dev), key=lambda d: (-prof.devices[d].peak_flops, d))
    placement = [0] * n
    for k, d in zip(order, fastest, strict=False):
        for i in parts[k]:
            placement[i] = d
    return _result("kl", problem, placement)


for _name, _placer in (
    ("single", place_single),
    ("roundrobin", place_roundrobin),
    ("chunks", place_chunks),
    ("tfgreedy", place_tfgreedy),
    ("topo", place_mtopo),
    ("etf", place_metf),
    ("sct", place_msct),
    ("kl", place_kl),
):
    register(_name, _placer)
HEURISTICS = tuple(sorted(PLACERS))  # the non-learned policies (registered above)
