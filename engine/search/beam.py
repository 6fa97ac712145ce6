"""Beam search over per-stage decisions, coarse to fine (the scheme of Adams et al. 2019,
"Learning to Optimize Halide with Tree Search and Random Programs").

A state is a partial schedule: the first d stages of `space.order(p)` decided (outputs back
to inputs). A pass starts from the empty schedule and, stage by stage, expands every state
of the beam with legal options for the next stage, scores each child by the cost model's
prediction of the child completed by the guide policy (`space.complete`; the guide is the
best schedule measured so far, the heuristic's at first), and keeps the best B children.
After the last stage the beam holds complete schedules; the best predicted few are measured.

Coarse to fine: the first pass draws a wide set of random options per state. Later passes
only consider the neighbourhood of the previous pass's best schedules (and the incumbent):
for each stage, their exact decisions where still legal, plus loops resampled at the same
compute locations (`space.options_at`). Passes repeat until the measurements or the time
run out; the best verified measurement wins.
"""

from __future__ import annotations

import math

from ..sampler import carry_wrappers, location_of
from ..schedule import Schedule, StageSchedule
from .base import SearchContext
from .greedy import charge_proposals, measure_new, options_per_stage, run_charged
from .space import guide_decision, measure_seed, options_at, order, stage_options, with_decision
from .value import Completer

WIDTH = 4  # beam width B
CHILDREN_PER_PASS = 240  # children scored in a coarse pass: stages x B x K, K within [K_MIN, K_MAX]
K_MIN, K_MAX = 4, 12
FINE_K = 4  # resampled options per state in the finer passes (plus the elite's own decisions)
ELITE = 3  # best schedules of a pass whose decisions the next pass refines
MEASURE_PER_PASS = 3
STALLS = 2  # passes in a row that measure nothing new: start over with a coarse pass
PASS_CAP_S = 20.0  # model seconds after which a pass stops branching (pipelines with very slow predictions)


def beam_search(ctx: SearchContext) -> None:
    """The strategy (see the module doc)."""
    run_charged(ctx, _search)


def _search(ctx: SearchContext) -> None:
    p = ctx.p
    seed = measure_seed(ctx)
    comp = Completer(ctx)
    k = options_per_stage(len(order(p)) * WIDTH, CHILDREN_PER_PASS, K_MIN, K_MAX)
    elite: list[Schedule] = []  # empty: a coarse pass
    stalls = 0
    while not ctx.done():
        guide = ctx.best.schedule if ctx.best is not None else seed
        final = _pass(ctx, comp, guide, k, elite)
        trials = measure_new(ctx, final, MEASURE_PER_PASS)
        stalls = 0 if trials else stalls + 1
        if stalls >= STALLS:  # the neighbourhood is exhausted: widen again
            elite, stalls = [], 0
            continue
        incumbent = [ctx.best.schedule] if ctx.best is not None else []
        elite = [s for _, s in final[:ELITE]] + incumbent


def _options(ctx: SearchContext, state: Schedule, st: str, guide: Schedule | None, k: int, elite: list[Schedule]) -> list[StageSchedule]:
    """The options of stage `st` in `state`: random ones (coarse pass) or the elite's
    decisions and loops resampled at their locations (finer passes)."""
    if not elite:
        return stage_options(ctx.p, state, st, ctx.rng, k, guide)
    out: list[StageSchedule] = []
    keys: set[StageSchedule] = set()
    for e in elite:
        g = guide_decision(ctx.p, state, st, e)
        if g is not None and g not in keys:
            keys.add(g)
            out.append(g)
    locs = [location_of(e.of(st)) for e in elite]
    for o in options_at(ctx.p, state, st, ctx.rng, FINE_K, locs):
        if o not in keys:
            keys.add(o)
            out.append(o)
    return out or stage_options(ctx.p, state, st, ctx.rng, 1, guide)  # no elite location is legal here


def _pass(ctx: SearchContext, comp: Completer, guide: Schedule | None, k: int, elite: list[Schedule]) -> list[tuple[float, Schedule]]:
    """One beam pass: the final beam's complete schedules with their predictions, best first."""
    scored: list[tuple[float, Schedule]] = [(math.inf, Schedule(name="beam"))]
    charge_proposals(ctx)
    start = ctx.model_s
    for st in order(ctx.p):
        charge_proposals(ctx)
        if ctx.model_s - start > PASS_CAP_S:  # very slow predictions: the rest follows the guide
            done = [comp.complete(s, guide) for _, s in scored]
            scored = sorted(zip(ctx.predict(done), done), key=lambda c: c[0])
            break
        kids = [with_decision(s, st, o) for _, s in scored for o in _options(ctx, s, st, guide, k, elite)]
        preds = ctx.predict([comp.complete(kid, guide) for kid in kids])
        scored = [(preds[i], kids[i]) for i in sorted(range(len(kids)), key=preds.__getitem__)[:WIDTH]]
    for _, s in scored:
        s.name = "beam"
        if guide is not None and guide.wrappers:  # as its completions have them
            carry_wrappers(ctx.p, guide, s)
    return scored
