"""Greedy search guided by a learned value function (after Steiner, Cummins, He and Leather,
"Value Function Based Performance Optimization of Deep Learning Workloads").

A schedule is the sequence of per-stage decisions in `space.order(p)` (outputs back to
inputs). One pass builds a schedule greedily: at each stage it draws K legal options
(`space.stage_options`, the guide's decision first), scores each resulting partial
schedule by the cost model's prediction of its guided completion, lets the value function
(value.py) re-rank the best few, and keeps the best. The guide is the best schedule
measured so far (the engine's heuristic schedule at first, measured before anything else),
so every pass searches around the incumbent.

Passes iterate as in the paper: the states a pass scores become training states, their
targets come from noisy rollouts and from the measurements, V is refitted, and the next
pass searches with the new V (and fresh random options). Each pass measures its final
schedule and the best predicted alternatives it saw.

A trust region keeps the model honest: a pass may leave the guide's decision at no more
than `radius` stages (forced changes, where the guide's decision became illegal, do not
count). A pass whose measurements beat the incumbent doubles the radius, one that does not
halves it (as in TuRBO), so a model that keeps being wrong far from the incumbent is only
trusted for small steps, and one that keeps being right takes whole greedy descents. When the proposal budget is spent, the
remaining measurements go to the best predicted candidates not measured yet. The best
verified measurement wins, so the result is never worse than the measured heuristic.

Model time (everything but measuring) is bounded by a deterministic budget of evaluated
completions, which keeps a 13-stage pipeline's search under about 10 s, and by MODEL_CAP_S.

Zero-measurement greedy (`zero_measure`, the CLI's `search P --strategy greedy --measure 0`)
is the paper's setting: the offline-trained value function (value_offline.py), plus the
capacity-traffic term V cannot see (reuse.py), takes every decision from an empty schedule
(no heuristic seed, no cost-model completion, no measurement), in seconds. `greedy_value_search` is the measuring search above started from
that schedule instead of the heuristic's, and it keeps using V: it measures V's schedule first
(so it never ends worse than that verified time), then V's next-best complete states of the
zero-measurement beam, and in every pass, besides the pass's answer and the cost model's best
candidate, the candidate V (plus the capacity term) ranks best; the guide is whichever
measured fastest, so the measurements decide between the cost model's and V's rankings.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..costmodel import CostModel, default_model
from ..ir import Pipeline
from ..measure import Measurement
from ..sampler import carry_wrappers
from ..schedule import Schedule
from .base import Budget, SearchContext, Trial
from .space import measure_seed, order, stage_options, with_decision
from .value import Completer, ValueFunction, prefix

if TYPE_CHECKING:  # value_offline imports torch (2.5 s): loaded when zero-measurement greedy runs, not with the CLI
    from .value_offline import OfflineValue

KIDS_PER_PASS = 72  # options per stage = this / stages, within [K_MIN, K_MAX]
K_MIN, K_MAX = 4, 16
TOP = 3  # children per step that V re-ranks (they become its training states)
ROLLOUTS, EXPLORE = 1, 0.25  # noisy completions per training state; chance a stage leaves the guide
ALTERNATIVES = 2  # measured per pass besides its final schedule
# Completions predicted in passes over the whole search (deterministic, unlike seconds). 320
# while a prediction took up to 0.8 s; with batched, incremental predictions proposing (the
# sampler) costs more than predicting, and 960 keeps conv_relu / unsharp (full) under
# MODEL_CAP_S (4.8 s / 6.6 s of model time measured), which bounds the slow pipelines.
EVAL_BUDGET = 960
MODEL_CAP_S = 7.0  # model time after which a pass follows the guide and no new pass starts
MIN_PASS_S = 1.0  # a pass starts only with this much of the cap left
STALLS = 2  # passes in a row that measure nothing new end the passes
RADIUS_START = 2  # stages a pass may change voluntarily at first (see the trust region)
DISTINCT = 0.01  # measured candidates of one batch differ by at least this much in predicted time
LEFTOVER_SHORTLIST, LEFTOVER_BATCH = 8, 2  # after the passes: re-predict the best few, measure the top ones
# greedy_v: V's complete states measured after its own schedule (of the beam's last step, best
# by V first, near-duplicates by V's score skipped). Two of 16 measurements: V's first choice
# is often but not always its best (full size, Zen 5, two rounds each, the first six states:
# attention's first 6-8 ms, the rest 13-25; matmul's second and third 20-68 ms against its
# first's 38-120; softmax's and harris's within noise of their first, blur's a little slower).
V_RUNNERS_UP = 2

Candidates = dict[str, tuple[float, Schedule]]  # schedule hash -> (predicted ms, schedule)


def charge_proposals(ctx: SearchContext) -> None:
    """Count everything the strategy did besides measuring as model time (proposing,
    completing, featurizing, fitting), so `ctx.model_s` is the search's own cost."""
    ctx.charge_model_time(max(0.0, ctx.elapsed() - ctx.measure_s - ctx.model_s))


def measure_new(ctx: SearchContext, ranked: list[tuple[float, Schedule]], n: int) -> list[Trial]:
    """Measure the first `n` (predicted ms, schedule) of `ranked` not measured yet, skipping
    near-duplicates: a schedule predicted within DISTINCT of one already picked most likely
    differs from it only in a stage that costs nothing (one measurement says as much)."""
    seen: set[str] = set()
    picked: list[float] = []
    new: list[Schedule] = []
    for ms, s in ranked:
        h = s.content_hash()
        if h in ctx.measured or h in seen or any(abs(ms - q) <= DISTINCT * q for q in picked):
            continue
        seen.add(h)
        picked.append(ms)
        new.append(s)
        if len(new) >= n:
            break
    charge_proposals(ctx)
    return ctx.measure(new) if new else []


def options_per_stage(n_stages: int, per_pass: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, per_pass // max(1, n_stages)))


def run_charged(ctx: SearchContext, search: Callable[[SearchContext], None]) -> None:
    """Run a strategy body; the time its proposals took is charged to model time even when
    it ends by cancellation (greedy and beam share this)."""
    try:
        search(ctx)
    finally:
        charge_proposals(ctx)


def greedy_search(ctx: SearchContext) -> None:
    """The strategy (see the module doc), seeded by the heuristic; with a budget of 0
    measurements, zero-measurement greedy (nothing measured; `zero_measure_search` returns
    its schedule)."""
    if ctx.budget.trials <= 0:
        zero_measure(ctx)
        return
    run_charged(ctx, lambda c: _search(c, measure_seed(c)))


def greedy_value_search(ctx: SearchContext) -> None:
    """The same search seeded by zero-measurement greedy's schedule instead of the heuristic's,
    with V's ranking beside the cost model's (see the module doc)."""

    def body(c: SearchContext) -> None:
        final: list[tuple[float, Schedule]] = []
        seed = zero_measure(c, final=final)
        c.measure([seed])  # first: the best verified result is at most this one's time
        measure_new(c, final[1:], V_RUNNERS_UP)
        _search(c, seed, ValueRanker(c))

    run_charged(ctx, body)


class ValueRanker:
    """The offline V's predicted ms of complete schedules plus their capacity traffic (the
    zero-measurement score), cached by schedule hash: `rank` orders (ms, schedule) candidates
    by it, as (V ms, schedule), for `measure_new`."""

    CHUNK = 64  # schedules per V batch: cancel is checked between them

    def __init__(self, ctx: SearchContext, value: OfflineValue | None = None) -> None:
        from .value_offline import shipped_value  # noqa: PLC0415

        self.ctx, self.value = ctx, value or shipped_value()
        self._ms: dict[str, float] = {}

    def scores(self, scheds: list[Schedule], hashes: list[str] | None = None) -> list[float]:
        """V's ms of each schedule (`hashes`: their content hashes, when the caller has them)."""
        from .reuse import penalty_ms  # noqa: PLC0415

        p = self.ctx.p
        hashes = hashes if hashes is not None else [s.content_hash() for s in scheds]
        todo = list({h: s for h, s in zip(hashes, scheds) if h not in self._ms}.items())
        for i in range(0, len(todo), self.CHUNK):
            self.ctx.check()
            chunk = todo[i : i + self.CHUNK]
            t0 = time.perf_counter()
            for (h, s), v in zip(chunk, self.value.values(p, [s for _, s in chunk])):
                self._ms[h] = float(math.exp(v)) + penalty_ms(p, s)
            self.ctx.charge_model_time(time.perf_counter() - t0)  # V's time is model time, as in zero_measure
        return [self._ms[h] for h in hashes]

    def rank(self, cands: list[tuple[float, Schedule]]) -> list[tuple[float, Schedule]]:
        """The candidates not measured yet, best by V first."""
        todo = [(h, s) for h, s in ((s.content_hash(), s) for _, s in cands) if h not in self.ctx.measured]
        scheds = [s for _, s in todo]
        return sorted(zip(self.scores(scheds, [h for h, _ in todo]), scheds), key=lambda c: c[0])


def zero_measure(
    ctx: SearchContext,
    value: OfflineValue | None = None,
    k: int | None = None,
    beam: int | None = None,
    reuse: bool = True,
    diverse: int | None = None,
    final: list[tuple[float, Schedule]] | None = None,
) -> Schedule:
    """Decide every stage of `ctx.p` with the offline value function alone, from an empty
    schedule (randomness: ctx.rng; cancel and pause: ctx.check), `k` random options per stage
    besides the structured ones and a beam of `beam` states plus the best of `diverse` further
    distinct structured decisions (defaults value_offline.K_GREEDY, BEAM, DIVERSE; DIVERSE
    only with `reuse`, the earlier form has none), scored by V plus the capacity-traffic term (search/reuse.py) unless `reuse` is
    False; measures nothing. The time is charged to ctx's model time. `final` receives the
    beam's complete states, best by that score first (value_greedy)."""
    from .value_offline import BEAM, DIVERSE, K_GREEDY, shipped_value, value_greedy  # noqa: PLC0415

    t = time.perf_counter()
    try:
        kk, bb = K_GREEDY if k is None else k, BEAM if beam is None else beam
        dd = (DIVERSE if reuse else 0) if diverse is None else diverse
        s = value_greedy(ctx.p, value or shipped_value(), ctx.rng, kk, check=ctx.check, beam=bb, reuse=reuse, diverse=dd, final=final)
    finally:
        ctx.charge_model_time(time.perf_counter() - t)
    s.name = "greedy (0 measurements)"
    return s


@dataclass
class ZeroMeasureResult:
    """Zero-measurement greedy's schedule, its search seconds and V's value (a prediction)."""

    schedule: Schedule
    search_s: float
    value_ms: float  # exp(V) of the final state: the value function's prediction, not a measurement
    value_name: str


def _no_measurement(p: Pipeline, s: Schedule) -> Measurement:
    raise RuntimeError(f"zero-measurement greedy tried to measure a schedule of {p.name}")


def zero_measure_search(
    p: Pipeline,
    seed: int = 0,
    *,
    wall_s: float = 60.0,
    value: OfflineValue | None = None,
    model: CostModel | None = None,
    measure_fn: Callable[..., Measurement] = _no_measurement,
    reuse: bool = True,
    beam: int | None = None,
) -> ZeroMeasureResult:
    """`zero_measure` in a context of its own with a budget of 0 measurements (its measure
    function refuses to run); `reuse` False: V alone, without the capacity-traffic term."""
    from .value_offline import shipped_value  # noqa: PLC0415

    v = value or shipped_value()
    ctx = SearchContext(p, model or default_model(), measure_fn, Budget(trials=0, wall_s=wall_s), seed, strategy="greedy")
    s = zero_measure(ctx, v, beam=beam, reuse=reuse)
    return ZeroMeasureResult(s, ctx.elapsed(), float(math.exp(v.values(p, [s])[0])), v.name)


def _search(ctx: SearchContext, seed: Schedule | None, by_value: ValueRanker | None = None) -> None:
    """The passes from `seed` (the incumbent guides once there is one); with `by_value`, each
    pass also measures V's best candidate, and so do the leftovers (see the module doc)."""
    p = ctx.p
    cap = ctx.model_s + MODEL_CAP_S  # the passes' own model time (a V-made seed's is not theirs)
    vf, comp = ValueFunction(p), Completer(ctx)
    k = options_per_stage(len(order(p)), KIDS_PER_PASS, K_MIN, K_MAX)
    pool: Candidates = {}  # every completion predicted
    evals, stalls, radius = 0, 0, RADIUS_START
    while not ctx.done() and evals < EVAL_BUDGET and stalls < STALLS:
        charge_proposals(ctx)
        if ctx.model_s > cap - MIN_PASS_S:
            break
        guide = ctx.best.schedule if ctx.best is not None else seed
        before = ctx.best_measured_ms
        incumbent = before if before is not None else math.inf
        final, cands, n = _pass(ctx, vf, comp, guide, k, radius, cap)
        evals += n
        pool.update(cands)
        # The pass's answer first, then the best predicted schedules it saw.
        ranked = [cands[final.content_hash()]] + sorted(cands.values(), key=lambda c: c[0])
        if by_value is None:
            trials = measure_new(ctx, ranked, 1 + ALTERNATIVES)
        else:  # one of the cost model's alternatives goes to V's best candidate instead
            trials = measure_new(ctx, ranked, ALTERNATIVES)
            trials += measure_new(ctx, by_value.rank(list(cands.values())), 1)
        for t in trials:  # what the hardware said reaches every state the schedule extends
            vf.add_completion(t.schedule, cands.get(t.schedule.content_hash(), (math.inf,))[0])
        stalls = 0 if trials else stalls + 1
        now = ctx.best_measured_ms
        improved = now is not None and now < incumbent
        radius = min(len(order(p)), 2 * radius) if improved else max(1, radius // 2)
        vf.fit(ctx)
    _measure_leftovers(ctx, pool, cap, by_value)


def _pass(
    ctx: SearchContext, vf: ValueFunction, comp: Completer, guide: Schedule | None, k: int, radius: int, cap_s: float
) -> tuple[Schedule, Candidates, int]:
    """One greedy descent leaving the guide at `radius` stages at most: (final schedule,
    {hash: (predicted ms, completion)}, completions predicted). Past `cap_s` of model time
    the remaining stages follow the guide."""
    p = ctx.p
    stages = order(p)
    partial = Schedule(name="greedy")
    cands: Candidates = {}
    evals = changed = 0
    for depth, st in enumerate(stages, 1):
        charge_proposals(ctx)
        if ctx.model_s > cap_s:  # slow predictions (e.g. deep inlining): stop exploring
            partial = comp.complete(partial, guide)
            cands[partial.content_hash()] = (ctx.predict([partial])[0], partial)
            break
        opts = stage_options(p, partial, st, ctx.rng, k, guide)
        kids = [with_decision(partial, st, o) for o in opts]
        comps = [comp.complete(kid, guide) for kid in kids]
        preds = ctx.predict(comps)
        evals += len(kids)
        for c, v in zip(comps, preds):
            cands[c.content_hash()] = (v, c)
        top = sorted(range(len(kids)), key=preds.__getitem__)[:TOP]  # V re-ranks the model's best few
        xs = {i: vf.features(comps[i], depth) for i in top}
        keys = {i: prefix(p, kids[i]) for i in top}
        for i in top:
            vf.add_state(keys[i], xs[i], comps[i], preds[i])
        # The top children's rollouts, predicted in one batch.
        rolls = [(i, r) for i in top for r in comp.rollouts(kids[i], guide, ROLLOUTS, EXPLORE)] if depth < len(stages) else []
        for (i, r), rv in zip(rolls, ctx.predict([r for _, r in rolls]) if rolls else []):
            vf.add_completion(r, rv, only=keys[i])
            cands[r.content_hash()] = (rv, r)
        evals += len(rolls)
        best, best_v = 0, math.inf
        for i in top:
            v = vf.value(xs[i], preds[i])
            if v < best_v:
                best, best_v = i, v
        # The guide's decision comes first when legal; outside the trust region it is the only choice.
        follows = guide is not None and st in guide.stages and opts[0] == guide.stages[st]
        if follows and best != 0:
            best, changed = (0, changed) if changed >= radius else (best, changed + 1)
        partial = kids[best]
    partial.name = "greedy"
    if guide is not None and guide.wrappers:  # as its completions have them
        carry_wrappers(p, guide, partial)
    return partial, cands, evals


def _measure_leftovers(ctx: SearchContext, pool: Candidates, cap: float, by_value: ValueRanker | None = None) -> None:
    """Spend the remaining measurements on the best predicted candidates (re-predicted with
    the model as the measurements left it, while model time remains); with `by_value`, each
    batch's last one is V's best of the pool instead."""
    while not ctx.done():
        left = sorted((c for h, c in pool.items() if h not in ctx.measured), key=lambda c: c[0])[:LEFTOVER_SHORTLIST]
        if not left:
            return
        charge_proposals(ctx)
        if ctx.model_s < cap:  # else the passes' predictions stand
            left = sorted(zip(ctx.predict([s for _, s in left]), [s for _, s in left]), key=lambda c: c[0])
        if by_value is None:
            new = measure_new(ctx, left, LEFTOVER_BATCH)
        else:
            new = measure_new(ctx, left, LEFTOVER_BATCH - 1) + measure_new(ctx, by_value.rank(list(pool.values())), 1)
        if not new:
            return
