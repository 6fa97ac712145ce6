"""Which task gets the next measurement: Ansor's gradient-based task scheduler (Zheng et
al., OSDI 2020, section 6; TVM's auto_scheduler/task_scheduler.py).

The objective is the model's end-to-end time, the sum over tasks of occurrences x the task's
best time. For each task the scheduler estimates how fast that sum would fall if the task
got the next trial: the chain-rule weight (occurrences) times a blend of the recent rate
(backward: the best time's fall over the last `window` trials) and an optimistic forward
estimate (the best of one trial more on a 1/t curve, or what the task would take at the
throughput a similar task reached, divided by `beta`). The task with the largest expected
fall per second of measuring (each task's own seconds per trial) is chosen; before that,
every task gets a first trial, the largest first (occurrences x FLOPs), and with
probability `eps` a random task is chosen instead (exploration). Pure bookkeeping: it
never measures, so a fake with known gains tests the allocation (tests/engine/tuning).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class TaskState:
    """What the scheduler knows of one task: its weight (occurrences), FLOPs, the operator
    signature similar tasks share, the best time after each trial (None before a first
    verified one), and the seconds its trials took."""

    weight: float
    flops: float = 0.0
    signature: str = ""
    history: list[float | None] = field(default_factory=list)
    seconds: float = 0.0
    exhausted: bool = False  # no new candidate left

    @property
    def trials(self) -> int:
        return len(self.history)

    @property
    def best_ms(self) -> float | None:
        return self.history[-1] if self.history else None

    def add(self, ms: float | None, seconds: float) -> None:
        """One trial: its verified ms (None: failed) and what it cost."""
        prev = self.best_ms
        self.history.append(ms if prev is None else prev if ms is None else min(prev, ms))
        self.seconds += seconds


@dataclass
class GradientScheduler:
    tasks: list[TaskState]
    alpha: float = 0.2  # Ansor's defaults
    beta: float = 2.0
    window: int = 3
    eps: float = 0.05
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def objective_ms(self) -> float | None:
        """Sum over tasks of weight x best ms (None while a task has no verified time)."""
        if any(t.best_ms is None for t in self.tasks):
            return None
        return sum(t.weight * (t.best_ms or 0.0) for t in self.tasks)

    def gain(self, i: int) -> float:
        """Expected fall of the objective (ms) per second of measuring task `i`."""
        t = self.tasks[i]
        g = t.best_ms
        if g is None or t.exhausted:
            return 0.0
        h = [x for x in t.history if x is not None]
        w = min(self.window, len(h) - 1)
        backward = (h[-1 - w] - h[-1]) / w if w > 0 else 0.0
        g_next = g - g / max(1, t.trials)
        best_tp = max((s.flops / s.best_ms for s in self.tasks if s.signature == t.signature and s.best_ms), default=0.0)
        if best_tp > 0 and t.flops > 0:
            g_next = min(g_next, self.beta * t.flops / best_tp)
        forward = max(0.0, g - g_next)
        per_trial = t.weight * (self.alpha * backward + (1 - self.alpha) * forward)
        cost = t.seconds / t.trials if t.trials else 1.0
        return per_trial / max(cost, 1e-3)

    def next(self) -> int | None:
        """The task for the next trial; None when every task is exhausted."""
        live = [i for i, t in enumerate(self.tasks) if not t.exhausted]
        if not live:
            return None
        fresh = [i for i in live if self.tasks[i].trials == 0]
        if fresh:
            return max(fresh, key=lambda i: (self.tasks[i].weight * self.tasks[i].flops, -i))
        if self._rng.random() < self.eps:
            return self._rng.choice(live)
        gains = [(self.gain(i), -i) for i in live]
        best = max(gains)
        if not math.isfinite(best[0]) or best[0] <= 0:  # nothing expected anywhere: the least tried task
            return min(live, key=lambda i: (self.tasks[i].trials, i))
        return -best[1]
