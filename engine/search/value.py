"""A value function over partial schedules, for greedy search (after Steiner, Cummins, He and
Leather, "Value Function Based Performance Optimization of Deep Learning Workloads").

A state is a partial schedule: the first d stages of `space.order(p)` decided. Its value
V(state) estimates the log run time of the best schedule reachable from it. Here

    V(state) = log base(state) + g(phi(state))

where base(state) is the cost model's prediction of the state completed by the guide policy
(`space.complete`: the incumbent schedule's decisions where legal), and g is a ridge
regression, fitted during the search, that corrects the guide policy's estimate: phi pools
the per-stage features (engine/costmodel/features.py) of the completed loop nest separately over the
decided and the undecided stages, plus the fraction decided. Its training targets are
residuals r = log best(state) - log base(state), where best(state) is the best of the
completions known for the state: the guide's, a few noisy rollouts around the guide, and
the schedules the search measured that extend the state. A measured completion counts
with its predicted time shifted by how much the model was surprised by it (relative to the
mean surprise of the run, so the model's overall scale does not matter), so what the
hardware says feeds back into V. All values of one state come from one pass, under one
state of the model: residuals do not depend on later recalibration of the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..costmodel import features as F
from ..ir import Pipeline
from ..loopnest import build
from ..schedule import Schedule, StageSchedule
from .base import SearchContext, Trial
from .space import complete, order

RIDGE = 0.5  # L2 penalty (standardized features, mean loss): few, noisy targets; stay near the model
MIN_SAMPLES = 8  # no correction before this many training states
MAX_CORRECTION = 0.7  # |g| in log units (a factor of 2): V never strays far from the model
MEASURED_WEIGHT = 3.0  # states with a measured completion count this many times


Prefix = tuple[StageSchedule, ...]  # a state: the decisions made so far, in order(p)


def prefix(p: Pipeline, s: Schedule) -> Prefix:
    """The state key of `s`: its decisions in `order(p)`, up to the first undecided stage."""
    out: list[StageSchedule] = []
    for st in order(p):
        if st not in s.stages:
            break
        out.append(s.stages[st])
    return tuple(out)


class Completer:
    """Guided completions of partial schedules, memoized: a state completed with the same
    guide always gives the same schedule, so passes that revisit a state reuse it (the repairs
    and random fallbacks of guide decisions that are no longer legal draw from ctx.rng once)."""

    def __init__(self, ctx: SearchContext) -> None:
        self.ctx = ctx
        self._memo: dict[tuple[Prefix, str], Schedule] = {}

    def complete(self, partial: Schedule, guide: Schedule | None) -> Schedule:
        key = (prefix(self.ctx.p, partial), guide.content_hash() if guide is not None else "")
        if key not in self._memo:
            self._memo[key] = complete(self.ctx.p, partial, self.ctx.rng, guide)
        return self._memo[key]

    def rollouts(self, partial: Schedule, guide: Schedule | None, n: int, explore: float) -> list[Schedule]:
        """`n` noisy completions: each undecided stage leaves the guide with probability `explore`."""
        return [complete(self.ctx.p, partial, self.ctx.rng, guide, explore=explore) for _ in range(n)]


@dataclass
class StateRecord:
    x: np.ndarray  # phi(state)
    log_base: float
    known: dict[str, float] = field(default_factory=dict)  # completion hash -> log predicted ms (this state's pass)


class ValueFunction:
    """V(state) = log base + g(phi); see the module doc."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p
        self.order = order(p)
        self.states: dict[Prefix, StateRecord] = {}
        self._w: np.ndarray | None = None
        self._mu = self._sd = np.zeros(0)
        self._b = 0.0

    # --- features ---------------------------------------------------------------------------
    def features(self, completed: Schedule, depth: int) -> np.ndarray:
        """phi of the state made of the first `depth` decisions of `completed` (a complete schedule)."""
        rows = F.stage_features(build(self.p, completed)).astype(np.float64)
        pos = {s.name: k for k, s in enumerate(self.p.stages)}
        mask = np.zeros(len(rows), dtype=bool)
        mask[[pos[st] for st in self.order[:depth]]] = True
        dec = rows[mask].mean(0) if mask.any() else np.zeros(rows.shape[1])
        und = rows[~mask].mean(0) if (~mask).any() else np.zeros(rows.shape[1])
        return np.concatenate([dec, und, [depth / max(1, len(self.order))]])

    def correction(self, x: np.ndarray) -> float:
        """g(phi): the learned log-ratio of the best reachable to the guide's completion."""
        if self._w is None:
            return 0.0
        g = float(np.clip((x - self._mu) / self._sd, -5, 5) @ self._w + self._b)  # clip: a feature barely seen in training
        return max(-MAX_CORRECTION, min(MAX_CORRECTION, g))

    def value(self, x: np.ndarray, base_ms: float) -> float:
        return math.log(base_ms) + self.correction(x) if base_ms > 0 and math.isfinite(base_ms) else math.inf

    # --- training data ----------------------------------------------------------------------
    def add_state(self, key: Prefix, x: np.ndarray, base: Schedule, base_ms: float) -> None:
        """Record a training state and its guide completion (a later pass overwrites it: its
        values are under the newer model)."""
        if base_ms > 0 and math.isfinite(base_ms):
            self.states[key] = StateRecord(x, math.log(base_ms), {base.content_hash(): math.log(base_ms)})

    def add_completion(self, s: Schedule, ms: float, only: Prefix | None = None) -> None:
        """A completion `s` predicted at `ms` in this pass: it is known for every recorded state
        that it extends (or just for state `only`)."""
        if not (ms > 0 and math.isfinite(ms)):
            return
        keys = [only] if only is not None else [k for k in self._prefixes(s) if k in self.states]
        for k in keys:
            if k in self.states:
                self.states[k].known[s.content_hash()] = math.log(ms)

    def _prefixes(self, s: Schedule) -> list[Prefix]:
        full = prefix(self.p, s)
        return [full[:d] for d in range(1, len(full) + 1)]

    def fit(self, ctx: SearchContext) -> None:
        """Refit g on every recorded state; measured completions count with the model's
        relative surprise (see the module doc)."""
        surprise = _surprise(ctx)
        xs, ys, ws = [], [], []
        for rec in self.states.values():
            ests = [v + surprise.get(h, 0.0) for h, v in rec.known.items()]
            xs.append(rec.x)
            ys.append(min(ests) - rec.log_base)
            ws.append(MEASURED_WEIGHT if any(h in surprise for h in rec.known) else 1.0)
        if len(xs) < MIN_SAMPLES:
            return
        x, y, w = np.stack(xs), np.asarray(ys), np.asarray(ws)
        self._mu, self._sd = x.mean(0), np.maximum(x.std(0), 1e-3)
        z = (x - self._mu) / self._sd
        self._b = float(np.average(y, weights=w))
        # Weighted ridge on the mean loss: (Z'WZ / sum w + lambda I) w = Z'W(y - b) / sum w.
        a = z.T @ (z * w[:, None]) / w.sum() + RIDGE * np.eye(z.shape[1])
        self._w = np.linalg.solve(a, z.T @ (w * (y - self._b)) / w.sum())


def _surprise(ctx: SearchContext) -> dict[str, float]:
    """Schedule hash -> log(measured / predicted) minus its mean over the run's verified trials."""
    r: dict[str, float] = {}
    for t in ctx.trials:
        ms = _usable_ms(t)
        if ms is not None:
            r[t.schedule.content_hash()] = math.log(ms / t.predicted_ms)
    if not r:
        return {}
    mean = sum(r.values()) / len(r)
    return {h: v - mean for h, v in r.items()}


def _usable_ms(t: Trial) -> float | None:
    """The trial's measured ms where it compares with its prediction (verified, both positive
    and finite), else None."""
    ms = t.measured_ms
    return ms if t.verified and ms is not None and ms > 0 and 0 < t.predicted_ms < math.inf else None
