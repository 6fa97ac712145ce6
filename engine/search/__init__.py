"""Automated schedule search: strategies behind one interface (see base.py).

`run_search(p, "greedy", Budget(trials=32, wall_s=60))` runs one strategy with the default
cost model and a measuring Runner, and returns a SearchResult whose best schedule is the
fastest verified measurement. Strategies register in STRATEGIES by name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..costmodel import CostModel, default_model
from ..database import Database
from ..ir import Pipeline
from ..measure import Measurement, MeasureRunner, Runner
from ..schedule import Schedule
from .base import Budget, Cancelled, Progress, SearchContext, SearchResult, Trial
from .beam import beam_search
from .cmaes_search import cmaes_search
from .evolution import evolution_search
from .greedy import greedy_search, greedy_value_search
from .lamcts import lamcts_search, plalam_search
from .online import OnlineCorrected
from .simple import random_search

__all__ = ["STRATEGIES", "Budget", "Cancelled", "Progress", "SearchContext", "SearchResult", "Trial", "run_search"]

Strategy = Callable[[SearchContext], None]
STRATEGIES: dict[str, Strategy] = {"greedy": greedy_search, "beam": beam_search, "random": random_search}
STRATEGIES.update(lamcts=lamcts_search, evolution=evolution_search, plalam=plalam_search, cmaes=cmaes_search)
# Run by name but not listed (the app's list, the contract tests' "the heuristic seed first"):
# greedy seeded by the offline value function's schedule instead of the heuristic's.
VARIANTS: dict[str, Strategy] = {"greedy_v": greedy_value_search}

# Measurement options for candidates: short, a few runs, no profile (ranking candidates does
# not need the last percent; the final best can be re-measured with the full defaults).
JOB_OPTIONS: dict[str, Any] = {"min_time_s": 0.1, "min_runs": 3, "warmup": 1, "profile": False, "timeout_s": 30.0}


def runner_measure(
    runner: MeasureRunner, db: Database | None = None, *, should_cancel: Callable[[], bool] | None = None, **job_options: Any
) -> Callable[..., Measurement]:
    """A measure function over the engine runner (and the database cache, if given); the
    search passes each job's timeout (see SearchContext.timeout_s). `should_cancel` is
    polled while a job runs: True kills the job's worker process (api.measure)."""
    from .. import api  # noqa: PLC0415

    opts = {**JOB_OPTIONS, **job_options}

    def measure(p: Pipeline, s: Schedule, timeout_s: float | None = None, force: bool = False) -> Measurement:
        timeout = {"timeout_s": timeout_s} if timeout_s else {}
        return api.measure(p, s, runner, db, force=force, should_cancel=should_cancel, **{**opts, **timeout})

    return measure


def run_search(
    p: Pipeline,
    strategy: str,
    budget: Budget,
    seed: int = 0,
    *,
    model: CostModel | None = None,
    measure_fn: Callable[[Pipeline, Schedule], Measurement] | None = None,
    runner: MeasureRunner | None = None,
    db: Database | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    pause: threading.Event | None = None,
    confirm: bool = True,
) -> SearchResult:
    """Run `strategy` on `p` within `budget`; then (`confirm`) the fastest few verified
    candidates are measured again and the best median wins (SearchContext.confirm)."""
    fn = STRATEGIES.get(strategy) or VARIANTS.get(strategy)
    if fn is None:
        raise ValueError(f"unknown search strategy {strategy!r}; expected one of {', '.join(sorted(STRATEGIES | VARIANTS))}")
    own = measure_fn is None and runner is None
    if measure_fn is None:
        runner = runner or Runner()
        measure_fn = runner_measure(runner, db)
    ctx = SearchContext(
        p,
        OnlineCorrected(model or default_model()),
        measure_fn,
        budget,
        seed,
        strategy=strategy,
        progress=progress,
        cancel=cancel,
        pause=pause,
    )
    try:
        try:
            fn(ctx)
        except Cancelled:
            pass
        if confirm and not (cancel is not None and cancel.is_set()):
            ctx.confirm()
    finally:
        if own and runner is not None:
            runner.close()
    return ctx.result()
