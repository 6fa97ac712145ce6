"""What the learned placers share: node features, co-location grouping, the simulator as a reward, warm starts.

Rewards follow TensorFlow's released placer (Mirhoseini et al.): the cost of a placement is
the square root of its simulated makespan, normalized by a reference makespan of the same
problem (the best single-device placement) so that rewards are O(1) on any graph. A placement
the simulator rejects (a device over its memory) costs more than every valid placement of the
same batch (the paper's fixed penalty could cost less than a slow valid placement where no
single device fits, which taught the policy to be invalid), graded by how far over it is, so
that the policy is pulled back towards fitting, where the fast placements usually are.

Time budgets: a learned placer's `train_s` is wall-clock from its start, warm start included;
`Clock` checks it inside every loop (a step is not started when the last one would not fit).
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import numpy as np
import scipy.optimize  # noqa: F401  # m-SCT's LP solver, loaded with the learned placers (as torch is), not inside a warm start's time budget
import torch
from networkx.utils import UnionFind

from ..graph import OpGraph
from ..policies import HEURISTICS, PLACERS, PlacementResult, PolicyError, Problem
from ..simulator import Simulation, simulate

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "FEATURES_VERSION",
    "GROUP_FEATURES",
    "INVALID_COST",
    "NODE_FEATURES",
    "Adam",
    "Clock",
    "Evaluator",
    "Progress",
    "Reporter",
    "check_options",
    "chain_groups",
    "colocation_groups",
    "device_costs",
    "few_threads",
    "group_features",
    "imitation_target",
    "majority",
    "node_features",
    "seeded",
    "warm_starts",
]

THREADS = 1  # the placers' networks are small: more threads only contend (with the simulator, with other work)
# The base cost of an invalid (out-of-memory) placement, in √(makespan / reference) units, while
# no valid placement is known (a valid placement 4x slower than the best single device).
INVALID_COST = 2.0
INVALID_MARGIN = 0.05  # an invalid placement costs at least this much more than the batch's worst valid one
OVERFLOW_WEIGHT = 1.0  # ... plus this times its worst device's overflow (peak / capacity - 1, at most 1)
FEATURES_VERSION = 2  # bump when node_features / pair features change: shipped weights say which they read


def few_threads(fn: Callable[P, R]) -> Callable[P, R]:
    """Run `fn` with THREADS torch threads, the caller's setting restored afterwards."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        before = torch.get_num_threads()
        torch.set_num_threads(THREADS)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper


Progress = Callable[[tuple[float, ...]], None]  # the training curve so far (the app's live chart)
REPORT_EVERY_S = 0.2  # a live curve needs no more; every step would flood the GUI thread


class Reporter:
    """Hands the curve to `progress` at most every REPORT_EVERY_S (None: nobody is watching)."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress, self.last = progress, 0.0

    def __call__(self, curve: Sequence[float]) -> None:
        now = time.perf_counter()
        if self.progress is not None and now - self.last >= REPORT_EVERY_S:
            self.last = now
            self.progress(tuple(curve))


class Clock:
    """A learned placer's budget, from its start: `train_s` seconds of wall clock (None: no time
    limit, a fixed number of steps) and the app's Cancel. Every loop asks it before each step."""

    def __init__(self, train_s: float | None, cancel: threading.Event | None = None) -> None:
        self.started = time.perf_counter()
        self.train_s = train_s
        self.cancel = cancel

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def end(self, share: float = 1.0) -> float:
        """When `share` of the budget is spent (time.perf_counter seconds; inf with no time limit)."""
        return math.inf if self.train_s is None else self.started + share * max(0.0, self.train_s)

    def over(self, share: float = 1.0) -> bool:
        """Cancelled, or past `share` of the budget (checked inside a step: between simulations, rounds)."""
        return self.cancelled() or time.perf_counter() >= self.end(share)

    def loop(self, steps: int | None = None, share: float = 1.0, first: float = 0.0) -> Callable[[int], bool]:
        """go(k): whether to start step k. At most `steps` steps (None: as many as the budget allows),
        none once cancelled, and on a time budget none that would end after `share` of it, judged
        by the previous step's duration (so a loop of 1.5 s steps stops up to 1.5 s early, not late);
        `first`: an estimate of the first step's (seconds), when the caller has one."""
        end = self.end(share)
        last: list[float] = []  # when the previous step started, and how long it took

        def go(k: int) -> bool:
            if self.cancelled() or (steps is not None and k >= steps):
                return False
            now = time.perf_counter()
            took = now - last[0] if last else first
            last[:] = [now]
            return now + took <= end

        return go


class Adam:
    """torch's Adam update (torch.optim.adam.adam, the same arithmetic as torch.optim.Adam's default
    single-tensor path) without torch.optim.Optimizer, whose first construction imports
    torch._dynamo: 4-7 s on this machine, more than a short training budget."""

    def __init__(
        self, params: Sequence[torch.nn.Parameter], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        from torch.optim.adam import adam  # noqa: PLC0415  # the functional form: no Optimizer, no dynamo

        self._adam = adam
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps = lr, betas, eps
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = [torch.tensor(0.0) for _ in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [k for k, p in enumerate(self.params) if p.grad is not None]
        grads = [g for g in (self.params[k].grad for k in live) if g is not None]
        self._adam(
            [self.params[k] for k in live],
            grads,
            [self.exp_avgs[k] for k in live],
            [self.exp_avg_sqs[k] for k in live],
            [],
            [self.steps[k] for k in live],
            foreach=False,
            amsgrad=False,
            beta1=self.betas[0],
            beta2=self.betas[1],
            lr=self.lr,
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )


def check_options(policy: str, fn: Callable[..., object], options: dict[str, object]) -> None:
    """A PolicyError naming the options `fn` (a trainer: problem, seed, then its options) does not take."""
    known = [name for name in inspect.signature(fn).parameters if name not in ("problem", "seed", "model")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise PolicyError(f"policy {policy!r}: unknown option {', '.join(unknown)} (options: {', '.join(known)})")


def seeded(seed: int) -> torch.Generator:
    """Seed torch and numpy for a reproducible run; a generator for the policy's own sampling."""
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


class Evaluator:
    """The simulator as a reward: memoized per placement, with the best valid placement seen.

    Costs are √(makespan / reference) for a valid placement. An invalid one costs more than the
    worst valid placement of its batch (`costs`): max(that, its own √ time) + INVALID_MARGIN +
    OVERFLOW_WEIGHT x its overflow, so every valid sample of a step beats every invalid one, the
    scale stays the batch's (a penalty far above every valid placement, tried, drove the policy
    away from the memory limit where the fast placements are: harris on memory_tight 5.84 vs
    3.11 ms), and a placement less over the limit costs less. A batch without a valid sample
    takes the last batch's worst valid cost (INVALID_COST until one is known)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.cache: dict[tuple[int, ...], Simulation] = {}
        self.best: tuple[int, ...] | None = None
        self.best_sim: Simulation | None = None
        self.best_source = ""
        self.calls = 0
        self.capacity = np.array([dev.memory_bytes for dev in problem.profile.devices], dtype=np.float64)
        n = len(problem.graph.nodes)
        singles = [self.simulate((d,) * n, source="single device") for d in range(len(problem.profile.devices))]
        # The reference makespan normalizes rewards; an invalid single device still gives its time.
        self.reference = min(s.makespan_s for s in singles) or 1e-9
        self.invalid_base = INVALID_COST

    def simulate(self, placement: Sequence[int], source: str = "policy") -> Simulation:
        key = tuple(int(d) for d in placement)
        sim = self.cache.get(key)
        if sim is None:
            self.calls += 1
            sim = simulate(self.problem.graph, self.problem.profile, self.problem.costs, key, timeline=False)
            self.cache[key] = sim
        if sim.valid and (self.best_sim is None or sim.makespan_s < self.best_sim.makespan_s):
            self.best, self.best_sim, self.best_source = key, sim, source
        return sim

    def overflow(self, sim: Simulation) -> float:
        """How far over its memory the fullest device is, as a fraction of its capacity (0 if valid; at most 1)."""
        over = np.asarray(sim.peak_memory_bytes, dtype=np.float64) / np.maximum(self.capacity, 1.0) - 1.0
        return float(min(1.0, max(0.0, over.max(initial=0.0))))

    def costs(self, placements: Sequence[Sequence[int]], source: str = "policy", stop: Callable[[], bool] | None = None) -> np.ndarray:
        """The batch's costs (see the class). With `stop`, the simulations end early once it says so:
        the costs of the placements simulated so far (a training step past its budget is dropped)."""
        sims = []
        for p in placements:
            if stop is not None and stop():
                break
            sims.append(self.simulate(p, source))
        time_cost = np.array([math.sqrt(s.makespan_s / self.reference) for s in sims])
        valid = np.array([s.valid for s in sims], dtype=bool)
        if valid.any():
            self.invalid_base = float(time_cost[valid].max())
        base = self.invalid_base + INVALID_MARGIN
        return np.array(
            [t if ok else max(base, t + INVALID_MARGIN) + OVERFLOW_WEIGHT * self.overflow(s) for t, ok, s in zip(time_cost, valid, sims)]
        )

    def cost(self, placement: Sequence[int], source: str = "policy") -> float:
        """One placement's cost, a batch of one (an invalid one against the last batch's worst valid)."""
        return float(self.costs([placement], source)[0])

    def curve_point(self, costs: np.ndarray) -> float:
        """A step's mean cost as a makespan (cost² x reference: an invalid sample at its penalty's makespan)."""
        return float(np.mean(costs**2)) * self.reference

    def result(self, policy: str, started: float, curve: Sequence[float]) -> PlacementResult:
        """The best valid placement seen; if none was, the best valid one of the heuristics (a policy never
        answers an invalid placement when a valid one is known); if none of them is either, the fastest invalid one."""
        if self.best is None:
            warm_starts(self.problem, self)
        key = self.best if self.best is not None else min(self.cache, key=lambda k: self.cache[k].makespan_s)
        sim = simulate(self.problem.graph, self.problem.profile, self.problem.costs, key)
        return PlacementResult(policy, key, sim, train_s=time.perf_counter() - started, curve=tuple(curve))


def warm_starts(problem: Problem, evaluator: Evaluator, names: Sequence[str] | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """The non-learned registered placers' placements, each simulated through `evaluator` (candidates).

    This is what the released placers do in practice (they start from the default or a
    heuristic placement): the learned policy is warm-started from the best of them and the
    answer is the best valid placement seen, candidates included.
    """
    out = []
    for name in names if names is not None else HEURISTICS:
        placement = tuple(PLACERS[name](problem, 0).placement)
        evaluator.simulate(placement, source=f"warm start: {name}")
        out.append((name, placement))
    out.sort(key=lambda c: (not evaluator.cache[c[1]].valid, evaluator.cache[c[1]].makespan_s))  # valid first, fastest first
    return out


def warm_best_s(cands: Sequence[tuple[str, tuple[int, ...]]], evaluator: Evaluator) -> float:
    """The fastest valid warm-start candidate's makespan (inf when none is valid, or there are none)."""
    return min((evaluator.cache[c[1]].makespan_s for c in cands if evaluator.cache[c[1]].valid), default=float("inf"))


def op_weights(problem: Problem) -> list[float]:
    """Each operation's mean time over the devices: what co-location grouping weighs."""
    return [float(np.mean(row)) for row in problem.costs.seconds]


def imitation_target(cands: Sequence[tuple[str, tuple[int, ...]]], evaluator: Evaluator, rule: str = "fastest") -> tuple[int, ...]:
    """The warm start's placement to imitate: `rule` "fastest", the fastest candidate even if it is over
    memory (the penalty's gradient then pulls the samples around it back under the limit: where no
    single device fits, the fast valid placements are near the packed invalid ones), or "valid", the
    best valid one (the answer's floor either way: every candidate is one)."""
    if rule == "valid":
        return cands[0][1]
    if rule != "fastest":
        raise ValueError(f"imitation target must be 'fastest' or 'valid', got {rule!r}")
    return min((c[1] for c in cands), key=lambda p: evaluator.cache[p].makespan_s)


def _levels(g: OpGraph) -> tuple[list[int], list[int]]:
    """Each node's depth from the sources and its height to the sinks (edges counted)."""
    n = len(g.nodes)
    depth, height = [0] * n, [0] * n
    for i in range(n):
        for p in g.preds(i):
            depth[i] = max(depth[i], depth[p] + 1)
    for i in reversed(range(n)):
        for s in g.succs(i):
            height[i] = max(height[i], height[s] + 1)
    return depth, height


def node_features(problem: Problem) -> np.ndarray:
    """Per node, graph-relative: log sizes (flops, bytes, output, weights), position, degrees, cost spread, criticality."""
    g, costs = problem.graph, problem.costs
    n = len(g.nodes)
    sec = np.asarray(costs.seconds, dtype=np.float64).reshape(n, -1)
    raw = np.array([[nd.flops, nd.bytes_accessed, nd.output_bytes, nd.weight_bytes] for nd in g.nodes], dtype=np.float64)
    logs = np.log1p(raw)
    logs = (logs - logs.mean(0)) / (logs.std(0) + 1e-6)
    depth, height = _levels(g)
    span = max(max(depth) + max(height), 1) if n else 1
    mean_cost = sec.mean(1)
    # Critical path through each node under mean costs (a placement-free estimate of slack).
    top, bottom = np.zeros(n), np.zeros(n)
    for i in range(n):
        for p in g.preds(i):
            top[i] = max(top[i], top[p] + mean_cost[p])
    for i in reversed(range(n)):
        bottom[i] = mean_cost[i] + max((bottom[s] for s in g.succs(i)), default=0.0)
    crit = (top + bottom) / max((top + bottom).max(), 1e-12)
    share = mean_cost / max(mean_cost.sum(), 1e-12)
    spread = np.log(sec.max(1) / np.maximum(sec.min(1), 1e-12) + 1.0)
    deg_in = np.array([len(g.preds(i)) for i in range(n)], dtype=np.float64)
    deg_out = np.array([len(g.succs(i)) for i in range(n)], dtype=np.float64)
    pos = np.arange(n) / max(n - 1, 1)
    cols = [
        logs,
        pos[:, None],
        (np.array(depth) / span)[:, None],
        (np.array(height) / span)[:, None],
        np.log1p(deg_in)[:, None],
        np.log1p(deg_out)[:, None],
        crit[:, None],
        (share * n)[:, None],
        spread[:, None],
    ]
    return np.concatenate(cols, axis=1).astype(np.float32)


NODE_FEATURES = 12  # columns of node_features


def _numbered(uf: UnionFind, n: int) -> list[int]:
    """Union-find sets as group numbers, in topological order of each group's first node."""
    order: dict[int, int] = {}
    return [order.setdefault(uf[i], len(order)) for i in range(n)]


def _merge_chains(g: OpGraph, uf: UnionFind, enough: Callable[[], bool] = lambda: False) -> None:
    """Merge linear chains: a node with one consumer that has it as its one producer (until `enough`)."""
    for i in range(len(g.nodes)):
        succ = g.succs(i)
        if len(succ) == 1 and len(g.preds(succ[0])) == 1:
            uf.union(i, succ[0])
            if enough():
                return


def chain_groups(g: OpGraph) -> list[int]:
    """Each node's linear chain (the topology the hierarchical grouper reads besides sizes)."""
    uf = UnionFind(range(len(g.nodes)))
    _merge_chains(g, uf)
    return _numbered(uf, len(g.nodes))


def colocation_groups(g: OpGraph, max_groups: int, weight: Sequence[float] | None = None) -> list[int]:
    """Each node's group: shared `colocate` keys first, then chains merged, then the lightest neighbours, ≤ max_groups.

    Mirhoseini et al. place co-location groups, not operations; TensorFlow's colocation
    constraints and linear chains (a node whose only consumer has it as only producer) are
    what they merge. Groups are numbered in topological order of their first node. A graph of
    at most `max_groups` nodes is placed node by node (grouping would only lose options).
    """
    n = len(g.nodes)
    if n <= max_groups:
        return list(range(n))
    w = list(weight) if weight is not None else [1.0] * n
    uf = UnionFind(range(n))
    count = lambda: len(set(_numbered(uf, n)))
    first_of: dict[str, int] = {}
    for i, nd in enumerate(g.nodes):
        if nd.colocate:
            uf.union(first_of.setdefault(nd.colocate, i), i)
    if count() > max_groups:
        _merge_chains(g, uf, lambda: count() <= max_groups)
    # Still too many: merge the lightest pair of groups adjacent in topological order.
    while count() > max_groups:
        groups = _numbered(uf, n)
        mass = np.zeros(max(groups) + 1)
        first: dict[int, int] = {}
        for i, k in enumerate(groups):
            mass[k] += w[i]
            first.setdefault(k, i)
        k = int(np.argmin(mass[:-1] + mass[1:]))
        uf.union(first[k], first[k + 1])
    return _numbered(uf, n)


def group_features(feats: np.ndarray, groups: Sequence[int], n_groups: int, problem: Problem) -> np.ndarray:
    """Per group: summed size features (flops, bytes, output bytes, weight bytes, as logs), mean position, size, cost share per device."""
    g = problem.graph
    raw = np.array([[nd.flops, nd.bytes_accessed, nd.output_bytes, nd.weight_bytes] for nd in g.nodes], dtype=np.float64)
    sec = np.asarray(problem.costs.seconds, dtype=np.float64).reshape(len(g.nodes), -1)
    onehot = np.zeros((n_groups, len(groups)))
    onehot[list(groups), np.arange(len(groups))] = 1.0
    sums = np.log1p(onehot @ raw)
    sums = (sums - sums.mean(0)) / (sums.std(0) + 1e-6)
    cnt = onehot.sum(1, keepdims=True)
    mean = (onehot @ feats) / np.maximum(cnt, 1)
    share = (onehot @ sec.mean(1, keepdims=True)) / max(sec.mean(1).sum(), 1e-12) * n_groups
    return np.concatenate([sums, mean[:, 4:], np.log1p(cnt), share], axis=1).astype(np.float32)


GROUP_FEATURES = 4 + (NODE_FEATURES - 4) + 2


def device_costs(problem: Problem, groups: Sequence[int], n_groups: int) -> np.ndarray:
    """[group][device]: log of the group's compute time on the device relative to its mean (which device is fast for it)."""
    sec = np.asarray(problem.costs.seconds, dtype=np.float64).reshape(len(problem.graph.nodes), -1)
    onehot = np.zeros((n_groups, len(groups)))
    onehot[list(groups), np.arange(len(groups))] = 1.0
    t = onehot @ sec + 1e-12
    return np.log(t / t.mean(1, keepdims=True)).astype(np.float32)


def majority(placement: Sequence[int], groups: Sequence[int], n_groups: int, problem: Problem) -> list[int]:
    """A group-level view of an op-level placement: each group's device is the one holding most of its compute."""
    sec = problem.costs.seconds
    votes = np.zeros((n_groups, len(problem.profile.devices)))
    for i, (gi, d) in enumerate(zip(groups, placement)):
        votes[gi, d] += sec[i][d] + 1e-12
    return [int(v) for v in votes.argmax(1)]
