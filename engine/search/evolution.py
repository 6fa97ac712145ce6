"""Regularized evolution with a cost-model filter (after Real et al., "Regularized Evolution
for Image Classifier Architecture Search", with the model screening children as in TVM's
and Halide's searches).

The population starts as the heuristic seed, some of its mutants and random samples. Each round breeds many
children: two tournament winners (the fittest of `tournament` random members) are crossed
over (per-stage decisions, see `crossover`) with probability `p_crossover`, and the child
is mutated (`sampler.mutate`; always, when crossover was skipped or gave back a parent).
The model predicts every child; the best predicted `survivors` join the population, the
oldest members leave (aging, not culling the worst: a lucky prediction cannot stay
forever), and the best few predicted are measured. Fitness is the measured time where
there is one (a failed measurement is the worst fitness), else the prediction scaled by
the median measured/predicted ratio, so measured and predicted members compare.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from .. import sampler
from ..ir import Pipeline
from ..sampler import mutate
from ..schedule import Schedule, validate
from .base import SearchContext
from .space import initial_population, is_prefix, measure_seed, order, stage_options, with_decision


@dataclass
class EvolutionParams:
    population: int = 24
    tournament: int = 4
    children: int = 32  # bred and predicted per round
    survivors: int = 8  # best predicted children joining the population per round
    measure_per_round: int = 2
    p_crossover: float = 0.5


def crossover(p: Pipeline, a: Schedule, b: Schedule, rng: random.Random, name: str = "child") -> Schedule:
    """A child taking each stage's decision from a random parent, in `order(p)` (consumers
    first): the chosen parent's decision if it is still legal after the child's decisions
    so far, else the other parent's, else a random one. Legal by construction."""
    child = Schedule(name=name)
    took: dict[str, Schedule] = {}  # stage -> the parent whose decision the child took
    for st in order(p):
        parents = [a, b] if rng.random() < 0.5 else [b, a]
        for par in parents:
            ss = par.stages.get(st)
            if ss is not None and (is_prefix(child, par) or sampler.still_legal(p, child, st, ss)):
                child = with_decision(child, st, ss)
                took[st] = par
                break
        else:
            child = with_decision(child, st, stage_options(p, child, st, rng, 1)[0])
    child.name = name
    # The parents' wrappers that still validate (a packed seed's children stay packed): each
    # first from the parent whose decision its consumer took, then any other that applies.
    for par in (a, b):
        mine = {k: w for k, w in par.wrappers.items() if took.get(w.consumer) is par}
        sampler.carry_wrappers(p, Schedule(par.stages, par.name, mine), child)
    for par in (a, b):
        sampler.carry_wrappers(p, par, child)
    validate(p, child)
    return child


@dataclass
class _Member:
    sched: Schedule
    pred_ms: float
    born: int


def _fitness(ctx: SearchContext, m: _Member, scale: float) -> float:
    t = ctx.measured.get(m.sched.content_hash())
    if t is not None:
        return t.measured_ms if t.verified and t.measured_ms else math.inf
    return m.pred_ms * scale


def _scale(ctx: SearchContext) -> float:
    """Median measured/predicted ratio of the verified trials (1 before any)."""
    r = [t.measured_ms / t.predicted_ms for t in ctx.trials if t.verified and t.measured_ms and 0 < t.predicted_ms < math.inf]
    return statistics.median(r) if r else 1.0


def _predict(ctx: SearchContext, scheds: list[Schedule]) -> list[float]:
    """ctx.predict in chunks: it checks for cancellation before each."""
    return [v for k in range(0, len(scheds), 8) for v in ctx.predict(scheds[k : k + 8])]


def _tournament(pop: list[_Member], fit: list[float], k: int, rng: random.Random) -> _Member:
    """The fittest of `k` members drawn at random."""
    return pop[min(rng.sample(range(len(pop)), min(k, len(pop))), key=lambda i: fit[i])]


def _measure_best(ctx: SearchContext, members: list[_Member], k: int) -> None:
    fresh = [m for m in sorted(members, key=lambda m: m.pred_ms) if m.sched.content_hash() not in ctx.measured]
    ctx.measure([m.sched for m in fresh[:k]])


def evolution_search(ctx: SearchContext, params: EvolutionParams | None = None) -> None:
    """Regularized evolution (see the module doc) until the budget is spent."""
    prm, p, rng = params or EvolutionParams(), ctx.p, ctx.rng
    seed = measure_seed(ctx)
    init = initial_population(ctx, seed, prm.population, prm.population // 4, "evolution")
    pop = [_Member(s, ms, 0) for s, ms in zip(init, _predict(ctx, init))]
    _measure_best(ctx, pop, prm.measure_per_round)
    gen = 0
    while not ctx.done():
        gen += 1
        scale = _scale(ctx)
        fit = [_fitness(ctx, m, scale) for m in pop]
        kids, keys = [], {m.sched.content_hash() for m in pop}
        for _ in range(prm.children):
            ctx.check()
            child = _tournament(pop, fit, prm.tournament, rng).sched
            if rng.random() < prm.p_crossover:
                child = crossover(p, child, _tournament(pop, fit, prm.tournament, rng).sched, rng, "evolution")
            if child.content_hash() in keys:  # no crossover, or it gave back a parent
                child = mutate(p, child, rng, "evolution")
            if child.content_hash() not in keys:
                keys.add(child.content_hash())
                kids.append(child)
        born = [_Member(s, ms, gen) for s, ms in zip(kids, _predict(ctx, kids))]
        born.sort(key=lambda m: m.pred_ms)
        _measure_best(ctx, born, prm.measure_per_round)
        scale = _scale(ctx)
        # The oldest leave (the worst first among equally old).
        pop = sorted(pop + born[: prm.survivors], key=lambda m: (m.born, -_fitness(ctx, m, scale)))[-prm.population :]
    ctx.check()  # done() is also true when cancelled: report it as such
