"""Baseline strategies: random sampling and a small evolutionary search.

Both propose from the sampler's space (engine/sampler.py) and let the cost model pick which
proposals are measured: a batch is proposed, predicted, and its best few go to hardware.
"""

from __future__ import annotations

from ..sampler import sample_schedule
from .base import SearchContext
from .space import measure_seed

BATCH = 32  # proposals predicted per measurement round
MEASURE_PER_ROUND = 2  # of which the best predicted are measured


def _measure_best(ctx: SearchContext, cands: list, k: int) -> None:
    preds = ctx.predict(cands)
    ranked = [c for _, c in sorted(zip(preds, range(len(cands))), key=lambda t: t[0])]
    ctx.measure([cands[i] for i in ranked[:k]])


def random_search(ctx: SearchContext) -> None:
    """Random legal schedules; the model picks the best predicted of each batch to measure
    (the heuristic schedule is measured first, as every strategy's reference point)."""
    measure_seed(ctx)
    while not ctx.done():
        cands = [sample_schedule(ctx.p, ctx.rng, "random") for _ in range(BATCH)]
        _measure_best(ctx, cands, MEASURE_PER_ROUND)
