"""LaMCTS / PlaLaM: learned space partitions, Monte Carlo tree search, CMA-ES inside a leaf.

After Wang, Fonseca & Tian, "Learning Search Space Partition for Black-box Optimization
using Monte Carlo Tree Search" (LaMCTS), and Yang et al., "Learning Space Partitions for
Path Planning" (PlaLaM / LaP3). Rewards are maximized.

- The tree (`Partition`): the root holds every sample (x, reward). A node with at least
  `leaf_size` samples is split in two: k-means (k=2) on (x, reward), the cluster with the
  higher mean reward labelled good; an SVM fitted on x alone to those labels is the
  boundary, and its own predictions decide which child each sample goes to (so a region is
  exactly what the classifiers on its path say).
- Selection: from the root, the child with the larger UCB, value + 2 Cp sqrt(2 ln n_parent
  / n_child), down to a leaf. The value is the child's *max* reward (PlaLaM), not its
  mean: a region is as good as the best thing found in it. Rewards are scaled to [0, 1].
- The local solver (`leaf_cma`): CMA-ES from the leaf's best sample; a candidate the path's
  SVMs do not classify into the leaf is asked again (a few times), then replaced by a
  `fallback` (a perturbed leaf sample). The tree is rebuilt every few new samples.

- PlaLaM's latent space (`LaMCTSParams.latent`, latent.py): the tree and CMA-ES work on
  an autoencoder's codes of the encodings instead of the encodings; a CMA-ES candidate is
  decoded by the autoencoder, then to the nearest legal schedule (encoding.decode). Its
  value estimate (`value="top"`): a region's value is the mean of its top tenth of rewards
  (its max while it holds ten or fewer), so one lucky noisy measurement does not make it.

`maximize_box` runs the loop on a plain function over a box (the tests check it against
random sampling, latent or not); `lamcts_search` is the schedule strategy (`plalam_search`
with PLALAM's parameters): x = encoding.encode(schedule), reward = -log(ms), from the cost
model for breadth and from measurements where there are some (a measurement overrides the
prediction of its schedule; predictions are calibrated to measurements by their median log
ratio, so the two mix on one scale).
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

from ..sampler import mutate, sample_schedule
from ..schedule import Schedule
from .base import SearchContext
from .encoding import Encoding, decode, encode
from .latent import Autoencoder, AutoencoderParams
from .space import initial_population, measure_seed

if TYPE_CHECKING:  # scikit-learn and cmaes (with scipy) load when a LaMCTS search runs, not with the CLI
    from sklearn.svm import SVC

SIGMA_SCALE = 1.0  # CMA-ES starts at this fraction of the leaf samples' spread
VALUES = ("max", "top")  # node value estimates (Partition.node_value)


def two_means(Z: np.ndarray, rng: np.random.Generator, restarts: int = 3, iters: int = 30) -> np.ndarray:
    """k-means with k=2 (Lloyd's iterations, k-means++ start, best of `restarts`): 0/1 labels."""
    best, best_cost = np.zeros(len(Z), dtype=int), math.inf
    for _ in range(restarts):
        a = Z[rng.integers(len(Z))]
        d = np.sum((Z - a) ** 2, axis=1)
        if d.sum() == 0:
            return best
        c = np.stack([a, Z[rng.choice(len(Z), p=d / d.sum())]])
        for _ in range(iters):
            lab = np.argmin(((Z[:, None, :] - c[None]) ** 2).sum(axis=2), axis=1)
            new = np.stack([Z[lab == k].mean(axis=0) if (lab == k).any() else c[k] for k in (0, 1)])
            if np.allclose(new, c):
                break
            c = new
        cost = float(((Z - c[lab]) ** 2).sum())
        if cost < best_cost:
            best, best_cost = lab, cost
    return best


@dataclass
class Node:
    idx: np.ndarray  # indices of the samples in this region
    depth: int
    svm: SVC | None = None  # predicts 1 for the good child's side
    good: Node | None = None
    bad: Node | None = None


@dataclass
class Region:
    path: list[tuple[Node, bool]]  # (node, went to its good child)
    leaf: Node


class Partition:
    """The LaMCTS tree over samples X (n x d) with rewards y (see the module doc)."""

    def __init__(
        self, X: np.ndarray, y: np.ndarray, seed: int, leaf_size: int = 16, max_depth: int = 5, cp: float = 0.1, value: str = "max"
    ) -> None:
        if value not in VALUES:
            raise ValueError(f"unknown LaMCTS node value {value!r}; expected one of {', '.join(VALUES)}")
        self.X, self.seed, self.leaf_size, self.max_depth, self.cp, self.value = X, seed, leaf_size, max_depth, cp, value
        self.set_rewards(y)
        self.root = Node(np.arange(len(X)), 0)
        with warnings.catch_warnings(), threadpool_limits(1, user_api="blas"):
            warnings.simplefilter("ignore")  # near-duplicate points warn; a failed split is just a leaf
            self._grow(self.root)

    def set_rewards(self, y: np.ndarray) -> None:
        """Update the rewards of the tree's samples (a measurement replaced a prediction)."""
        self.y = np.asarray(y, dtype=float)
        lo, hi = float(self.y.min()), float(self.y.max())
        self.yn = (self.y - lo) / (hi - lo) if hi > lo else np.zeros_like(self.y)

    def _grow(self, node: Node) -> None:
        if len(node.idx) < self.leaf_size or node.depth >= self.max_depth:
            return
        X, y = self.X[node.idx], self.yn[node.idx]
        if y.std() == 0 or len(np.unique(X, axis=0)) < 2:
            return
        # Weight the reward column like all of x together: with a 100-dim x, a raw reward
        # column would not move the clusters, and the split is meant to separate good/bad.
        scale = math.sqrt(float(X.var(axis=0).sum()) or 1.0) / float(y.std())
        labels = two_means(np.column_stack([X, y * scale]), np.random.default_rng(self.seed + node.depth))
        if len(set(labels)) < 2:
            return
        good = int(y[labels == 1].mean() > y[labels == 0].mean())
        from sklearn.svm import SVC  # noqa: PLC0415

        svm = SVC(kernel="rbf", gamma="scale", C=10.0).fit(X, (labels == good).astype(int))
        side = svm.predict(X).astype(bool)
        if side.all() or not side.any():
            return
        node.svm, node.good, node.bad = svm, Node(node.idx[side], node.depth + 1), Node(node.idx[~side], node.depth + 1)
        self._grow(node.good)
        self._grow(node.bad)

    def node_value(self, node: Node) -> float:
        """The region's value on the [0, 1] reward scale: its best reward ("max", PlaLaM), or
        the mean of its top tenth ("top": one lucky, noisy measurement does not make a
        region; with ten samples or fewer it is the max)."""
        r = self.yn[node.idx]
        if self.value == "max" or len(r) <= 10:
            return float(r.max())
        k = math.ceil(0.1 * len(r))
        return float(np.partition(r, len(r) - k)[len(r) - k :].mean())

    def _ucb(self, child: Node, n_parent: int) -> float:
        return self.node_value(child) + 2 * self.cp * math.sqrt(2 * math.log(n_parent) / len(child.idx))

    def select(self) -> Region:
        """UCB descent from the root to a leaf (ties go to the good child)."""
        path, node = [], self.root
        while node.good is not None and node.bad is not None:
            n = len(node.idx)
            go_good = self._ucb(node.good, n) >= self._ucb(node.bad, n)
            path.append((node, go_good))
            node = node.good if go_good else node.bad
        return Region(path, node)

    def contains(self, region: Region, xs: np.ndarray) -> np.ndarray:
        """Which rows of `xs` do the SVMs on the region's path classify into its leaf?"""
        inside = np.ones(len(xs), dtype=bool)
        for node, go_good in region.path:
            assert node.svm is not None, "a node on a path was split, so it has its SVM"
            inside &= node.svm.predict(xs).astype(bool) == go_good
        return inside

    def best(self, region: Region) -> int:
        """Index of the leaf's best sample."""
        return int(region.leaf.idx[np.argmax(self.y[region.leaf.idx])])


def leaf_cma(
    part: Partition,
    region: Region,
    lo: np.ndarray,
    hi: np.ndarray,
    evaluate: Callable[[list[np.ndarray]], list[float]],
    fallback: Callable[[Partition, Region], np.ndarray],
    *,
    seed: int,
    popsize: int = 8,
    generations: int = 2,
    tries: int = 5,
) -> None:
    """CMA-ES inside `region`, from its best sample, for `generations` batches of `popsize`
    (`evaluate` returns the rewards of a batch; CMA minimizes, so it is told -reward)."""
    leaf = part.X[region.leaf.idx]
    width = float(np.mean(hi - lo))
    sigma = float(np.clip(SIGMA_SCALE * leaf.std(axis=0).mean() if len(leaf) > 1 else 0.2 * width, 0.01 * width, 0.3 * width))
    bounds = np.column_stack([lo, hi])
    from cmaes import CMA  # noqa: PLC0415

    opt = CMA(mean=part.X[part.best(region)].copy(), sigma=sigma, bounds=bounds, seed=seed, population_size=popsize, n_max_resampling=3)
    for _ in range(generations):
        # Small matrices: multi-threaded BLAS only adds contention (measured 100x slower asks on 2 busy cores).
        with threadpool_limits(1, user_api="blas"):
            asked = np.array([opt.ask() for _ in range(popsize * tries)])  # `tries` asks per slot, classified at once
            xs = list(asked[part.contains(region, asked)][:popsize])
        xs += [np.clip(fallback(part, region), lo, hi) for _ in range(popsize - len(xs))]
        rewards = evaluate(xs)
        with threadpool_limits(1, user_api="blas"):
            opt.tell([(x, -r) for x, r in zip(xs, rewards)])


def maximize_box(
    f: Callable[[np.ndarray], float], lo: np.ndarray, hi: np.ndarray, n_evals: int, rng: random.Random, *,
    n_init: int = 20, leaf_size: int = 16, cp: float = 0.1, popsize: int = 8, generations: int = 3, rebuild_every: int = 8,
    value: str = "max", sample: Callable[[random.Random], np.ndarray] | None = None, latent: AutoencoderParams | None = None,
    n_unlabeled: int = 0,
) -> tuple[np.ndarray, float]:  # fmt: skip
    """Maximize `f` over the box [lo, hi] with `n_evals` evaluations; returns (best x, best f).
    `sample(rng)` draws a random point for the initial design (default: uniform in the box).
    With `latent`, the partitions and CMA-ES live in an autoencoder's latent space, fitted on
    the initial design plus `n_unlabeled` more sampled points (not evaluated); CMA-ES's
    candidates are decoded back to the box before `f` sees them."""
    draw = sample or (lambda r: np.array([r.uniform(a, b) for a, b in zip(lo, hi)]))
    X = [np.asarray(draw(rng), dtype=float) for _ in range(n_init)]
    y = [f(x) for x in X]
    ae = None
    if latent is not None:
        ae = Autoencoder(len(lo), latent, seed=rng.randrange(2**31))
        ae.fit(np.array(X + [np.asarray(draw(rng), dtype=float) for _ in range(n_unlabeled)]))
    slo, shi = (ae.lo, ae.hi) if ae is not None else (lo, hi)
    part, built = None, -rebuild_every

    def evaluate(vs: list[np.ndarray]) -> list[float]:
        xs = list(np.clip(ae.decode(np.array(vs)), lo, hi)) if ae is not None else vs
        X.extend(xs)
        y.extend(f(x) for x in xs)
        return y[len(y) - len(xs) :]

    def fallback(part: Partition, region: Region) -> np.ndarray:  # a leaf sample, perturbed
        v = part.X[rng.choice(list(region.leaf.idx))]
        return v + np.array([rng.gauss(0, 0.05) for _ in v]) * (shi - slo)

    while len(X) < n_evals:
        if part is None or len(X) - built >= rebuild_every:
            V = ae.encode(np.array(X)) if ae is not None else np.array(X)
            part, built = Partition(V, np.array(y), rng.randrange(2**31), leaf_size, cp=cp, value=value), len(X)
        region = part.select()
        n = min(popsize, n_evals - len(X))
        if n < 4:  # CMA-ES's weights need a population of four or more: spend the rest on leaf perturbations
            evaluate([np.clip(fallback(part, region), slo, shi) for _ in range(n)])
            break
        gens = max(1, min(generations, (n_evals - len(X)) // n))  # never more than n_evals evaluations
        leaf_cma(part, region, slo, shi, evaluate, fallback, seed=rng.randrange(2**31), popsize=n, generations=gens)
    k = int(np.argmax(y))
    return X[k], y[k]


# --- the schedule strategies ----------------------------------------------------------------
class Pool:
    """Every schedule a search has evaluated: its encoding and its prediction, in order;
    rewards (-log ms) come from the predictions and, where there is one, the measurement.
    Shared by the strategies that search the encoding (LaMCTS, PlaLaM, CMA-ES)."""

    def __init__(self, enc: Encoding) -> None:
        self.enc = enc
        self.scheds: list[Schedule] = []
        self.X: list[np.ndarray] = []  # encodings, one per schedule
        self.pred: list[float] = []  # predicted ms, one per schedule
        self.index: dict[str, int] = {}  # schedule hash -> position

    def add(self, ctx: SearchContext, scheds: list[Schedule]) -> list[int]:
        preds = [v for k in range(0, len(scheds), 8) for v in ctx.predict(scheds[k : k + 8])]  # chunks: prompt cancel
        out = []
        for s, ms in zip(scheds, preds):
            h = s.content_hash()
            if h not in self.index:
                self.index[h] = len(self.scheds)
                self.scheds.append(s)
                self.X.append(encode(self.enc, s))
                self.pred.append(ms)
            self.pred[self.index[h]] = ms  # the latest prediction (an online-corrected model changes)
            out.append(self.index[h])
        return out

    def rewards(self, ctx: SearchContext) -> np.ndarray:
        """-log ms per schedule: measured where measured, else predicted and calibrated to the
        measurements by the median log ratio (so both mix on one scale); failed and
        unbuildable ones get a floor below anything seen."""
        pred = np.array(self.pred)
        meas = [ctx.measured.get(s.content_hash()) for s in self.scheds]
        ratios = [math.log(t.measured_ms / pr) for t, pr in zip(meas, pred) if t and t.verified and math.isfinite(pr) and t.measured_ms]
        bias = float(np.median(ratios)) if ratios else 0.0
        y = np.where(np.isfinite(pred), -(np.log(np.where(np.isfinite(pred), pred, 1.0)) + bias), np.nan)
        for k, t in enumerate(meas):
            if t is not None:
                y[k] = -math.log(t.measured_ms) if t.verified and t.measured_ms else np.nan
        floor = float(np.nanmin(y)) - 1.0 if np.isfinite(y).any() else 0.0
        return np.where(np.isnan(y), floor, y)

    def decode_add(self, ctx: SearchContext, xs: list[np.ndarray], guides: list[Schedule], k: int, name: str) -> list[int]:
        """Decode encodings `xs` to schedules (guided by `guides`), add them; their indices. A
        decoded schedule already in the pool is replaced by a mutant of it (the decoder snaps
        small steps back onto known schedules; a neighbour keeps the search exploring)."""
        t = time.perf_counter()
        scheds = []
        for x in xs:
            ctx.check()
            s = decode(self.enc, x, ctx.rng, guides, k, name)
            if s.content_hash() in self.index:
                s = mutate(ctx.p, s, ctx.rng, name)
            scheds.append(s)
        ctx.charge_model_time(time.perf_counter() - t)
        return self.add(ctx, scheds)

    def top(self, k: int, idx: list[int] | None = None) -> list[Schedule]:
        """The `k` best predicted schedules (of `idx`, or of the whole pool)."""
        group = range(len(self.scheds)) if idx is None else idx
        return [self.scheds[i] for i in sorted(group, key=lambda i: self.pred[i])[:k]]

    def measure_best(self, ctx: SearchContext, idx: list[int], k: int) -> None:
        """Measure the `k` best predicted unmeasured schedules of `idx` (of the pool if none)."""
        for group in (idx, range(len(self.scheds))):
            fresh = sorted({i for i in group if self.scheds[i].content_hash() not in ctx.measured}, key=lambda i: self.pred[i])
            if fresh:
                ctx.measure([self.scheds[i] for i in fresh[:k]])
                return


@dataclass
class LaMCTSParams:
    n_init: int = 32  # initial samples (half mutations of the seed, half random), predicted
    leaf_size: int = 16  # split a node with at least this many samples
    max_depth: int = 5
    cp: float = 0.1  # UCB exploration, on rewards scaled to [0, 1]
    popsize: int = 12  # CMA-ES population per generation
    generations: int = 2  # CMA-ES generations per selected leaf
    rebuild_every: int = 16  # new samples between tree rebuilds
    decode_k: int = 6  # loop sets sampled per stage when decoding (decoding is most of the model-side time)
    guides: int = 3  # the leaf's best schedules offered to the decoder
    measure_per_round: int = 2  # best predicted new candidates measured per leaf search
    value: str = "max"  # node value (Partition.node_value)
    latent: int = 0  # latent dimensions of the autoencoder the partitions live in (0: the encoding itself)
    n_unlabeled: int = 256  # random legal schedules (encoded, never predicted) the autoencoder is also fitted on
    refit_growth: float = 2.0  # refit the autoencoder when the pool has grown by this factor since the last fit


# PlaLaM (Yang et al.): LaMCTS with max node values (as above), a robust value estimate and
# partitions learned in an autoencoder's latent space.
PLALAM = LaMCTSParams(value="top", latent=8)


class _Space:
    """Where the tree and CMA-ES live: the encoding itself, or an autoencoder's latent space
    (refitted as the pool grows)."""

    def __init__(self, ctx: SearchContext, prm: LaMCTSParams, pool: Pool) -> None:
        self.prm, self.pool, self.ae = prm, pool, None
        self.unlabeled: list[np.ndarray] = []
        self.fitted_on = 0
        if prm.latent > 0:
            t = time.perf_counter()
            for _ in range(prm.n_unlabeled):
                ctx.check()  # a prompt cancel: sampling a few hundred schedules takes a while on big pipelines
                self.unlabeled.append(encode(pool.enc, sample_schedule(ctx.p, ctx.rng, "lamcts")))
            self.ae = Autoencoder(pool.enc.dim, AutoencoderParams(dim=prm.latent), seed=ctx.rng.randrange(2**31))
            ctx.charge_model_time(time.perf_counter() - t)

    @property
    def lo(self) -> np.ndarray:
        return self.ae.lo if self.ae is not None else self.pool.enc.lo

    @property
    def hi(self) -> np.ndarray:
        return self.ae.hi if self.ae is not None else self.pool.enc.hi

    def points(self) -> np.ndarray:
        """The pool's samples in this space (refits the autoencoder when the pool grew enough)."""
        X = np.array(self.pool.X)
        if self.ae is None:
            return X
        if not self.fitted_on or len(X) >= self.prm.refit_growth * self.fitted_on:
            self.ae.fit(np.vstack([X, np.array(self.unlabeled)]) if self.unlabeled else X)
            self.fitted_on = len(X)
        return self.ae.encode(X)

    def to_x(self, vs: list[np.ndarray]) -> list[np.ndarray]:
        """Points of this space as encodings (the decoder's input)."""
        return list(np.clip(self.ae.decode(np.array(vs)), 0.0, 1.0)) if self.ae is not None else vs

    def of(self, x: np.ndarray) -> np.ndarray:
        return self.ae.encode(x)[0] if self.ae is not None else x


def lamcts_search(ctx: SearchContext, params: LaMCTSParams | None = None) -> None:
    """LaMCTS over schedule encodings (or their latent codes): the heuristic seed measured
    first, a predicted initial sample, then rounds of (select a leaf, CMA-ES candidates
    decoded to schedules, predicted, the best few measured) until the budget is spent; the
    tree is rebuilt every `rebuild_every` new samples (between rebuilds, only its rewards
    are refreshed)."""
    prm = params or LaMCTSParams()
    pool = Pool(Encoding.of(ctx.p))
    seed = measure_seed(ctx)
    init = initial_population(ctx, seed, prm.n_init, prm.n_init // 2, "lamcts")
    pool.measure_best(ctx, pool.add(ctx, init), prm.measure_per_round)
    space = _Space(ctx, prm, pool)
    part, built = None, 0
    while not ctx.done():
        ctx.check()
        y = pool.rewards(ctx)
        t = time.perf_counter()
        if part is None or len(pool.scheds) - built >= prm.rebuild_every:
            V = space.points()
            part = Partition(V, y, ctx.rng.randrange(2**31), prm.leaf_size, prm.max_depth, prm.cp, prm.value)
            built = len(pool.scheds)
        else:
            part.set_rewards(y[:built])
        ctx.charge_model_time(time.perf_counter() - t)
        pool.measure_best(ctx, _leaf_round(ctx, prm, pool, space, part), prm.measure_per_round)
    ctx.check()  # done() is also true when cancelled: report it as such


def plalam_search(ctx: SearchContext) -> None:
    """PlaLaM: `lamcts_search` with PLALAM's parameters (latent partitions, robust values)."""
    lamcts_search(ctx, PLALAM)


def _leaf_round(ctx: SearchContext, prm: LaMCTSParams, pool: Pool, space: _Space, part: Partition) -> list[int]:
    """Select a leaf and run CMA-ES in it; returns the pool indices of what it evaluated."""
    p = ctx.p
    region = part.select()
    leaf = [int(i) for i in region.leaf.idx[np.argsort(-part.y[region.leaf.idx])]]
    guides = [pool.scheds[i] for i in leaf[: prm.guides]] + ([ctx.best.schedule] if ctx.best else [])
    pending: dict[bytes, Schedule] = {}
    new: list[int] = []

    def fallback(part: Partition, region: Region) -> np.ndarray:  # a mutant of a leaf sample
        m = mutate(p, pool.scheds[ctx.rng.choice(leaf)], ctx.rng, "lamcts")
        v = space.of(encode(pool.enc, m))
        pending[np.clip(v, space.lo, space.hi).tobytes()] = m
        return v

    def evaluate(vs: list[np.ndarray]) -> list[float]:
        mine = [pending.pop(v.tobytes(), None) for v in vs]
        asked = [v for v, m in zip(vs, mine) if m is None]
        idx = iter(pool.decode_add(ctx, space.to_x(asked), guides, prm.decode_k, "lamcts") if asked else [])
        got = pool.add(ctx, [m for m in mine if m is not None])
        own = iter(got)
        order = [next(own) if m is not None else next(idx) for m in mine]
        new.extend(order)
        r = pool.rewards(ctx)
        return [float(r[i]) for i in order]

    leaf_cma(
        part,
        region,
        space.lo,
        space.hi,
        evaluate,
        fallback,
        seed=ctx.rng.randrange(2**31),
        popsize=prm.popsize,
        generations=prm.generations,
    )
    return new
