"""The search space: a schedule is a sequence of per-stage decisions, outputs to inputs.

This is the sampler's space (engine/sampler.py), exposed decision by decision: when stage
`name` is decided, every consumer already has its loops, so its legal compute locations and
loop choices are known and every option is legal by construction. Strategies build
schedules with `stage_options` (the choices for one stage) and `complete` (decide every
stage not decided yet with a fixed policy, to predict a partial schedule).
"""

from __future__ import annotations

import random

from .. import sampler
from ..heuristic import heuristic_schedule
from ..ir import Pipeline
from ..schedule import PLACEMENT_KINDS, Kind, Schedule, ScheduleError, StageSchedule, effective_consumers, enclosing_loops, validate
from .base import SearchContext


def order(p: Pipeline) -> list[str]:
    """The decision order: outputs back to inputs (every consumer before its producers)."""
    return sampler.decision_order(p)


# A decision is a StageSchedule: an immutable value, equal for the same directives in the
# same order and hashable, so strategies dedupe decisions in sets and share them freely.


def is_prefix(partial: Schedule, guide: Schedule | None) -> bool:
    """Is every decision in `partial` the same as `guide`'s? Then `guide`'s decisions of the
    remaining stages are legal there (the whole guide schedule is), even where the sampler's
    stricter rules would not have proposed them (e.g. the heuristic's round-up tails)."""
    return guide is not None and all(v == guide.of(k) for k, v in partial.stages.items())


def follows_guide(p: Pipeline, partial: Schedule, name: str, guide: Schedule | None) -> bool:
    """Does `partial` decide every stage downstream of `name` (its consumers, transitively) as
    `guide` does? Then `name` has the same legal choices as in `guide` (a stage's location
    and region depend on its downstream stages only), so `guide`'s decision of it is legal:
    a cheaper, wider test than `is_prefix`, which needs every decided stage to agree."""
    if guide is None:
        return False
    down = [c for c in p.downstream(name) if c in p.stage_map]
    return all(c in partial.stages and partial.stages[c] == guide.of(c) for c in down)


def guide_decision(p: Pipeline, partial: Schedule, name: str, guide: Schedule | None) -> StageSchedule | None:
    """`guide`'s decision of stage `name` if it is legal after `partial`'s decisions
    (`partial` follows the guide, or the decision passes the sampler's checks), else None."""
    g = guide.stages.get(name) if guide is not None else None
    if g is not None and (follows_guide(p, partial, name, guide) or is_prefix(partial, guide) or sampler.still_legal(p, partial, name, g)):
        return g
    return None


def stage_options(
    p: Pipeline, partial: Schedule, name: str, rng: random.Random, k: int, guide: Schedule | None = None
) -> list[StageSchedule]:
    """Up to `k` distinct legal decisions for stage `name`, given `partial`'s decisions of its
    consumers: first `guide`'s decision (e.g. the heuristic's) when `partial` follows the
    guide or the decision passes the sampler's checks, then random ones from the sampler.
    Deterministic given `rng`'s state."""
    out: list[StageSchedule] = []
    keys: set[StageSchedule] = set()
    g = guide_decision(p, partial, name, guide) if k > 0 else None
    if g is not None:
        out.append(g)
        keys.add(g)
    for _ in range(4 * k):
        if len(out) >= k:
            break
        ss = sampler.decide(p, partial, name, rng)
        if ss not in keys:
            out.append(ss)
            keys.add(ss)
    return out


def nest_locations(p: Pipeline, partial: Schedule, name: str) -> list[sampler.Location]:
    """compute_at locations of stage `name` that the sampler does not offer: the loops that
    enclose every effective consumer (through inlined stages) because those consumers are
    computed inside them, i.e. the loops of a consumer's consumer down to where the consumers
    are computed (Halide's fusion of a stage into the strip loop of its readers' reader: with
    several readers, or readers inlined into several stages, the sampler offers no loop at
    all). Only for a stage the sampler offers no loop, and only where the schedule
    validates; deterministic."""
    if name in p.outputs or sampler.nonaffine_read(p, partial, name):
        return []
    have = set(sampler.locations(p, partial, name))
    if any(loc[0] == "at" for loc in have):
        # Only where the sampler offers no loop: with one reader, its reader's outer loops
        # measured 0.85x on mobilenet_block (dw per output strip instead of at root, parallel),
        # though 1.17x on unsharp (blur_y per strip of ratio); V does not tell them apart.
        return []
    common: list[tuple[str, str]] | None = None
    for c in sorted(effective_consumers(p, partial, name)):
        d = partial.of(c).compute()
        if d.kind != Kind.COMPUTE_AT or d.consumer is None or d.loop is None:
            return []  # a consumer at root: nothing encloses it but its own loops (the sampler's)
        around: list[tuple[str, str]] = []
        trips = 1
        for st, lp in enclosing_loops(p, partial, d.consumer, d.loop):  # outermost first
            trips *= max(1, lp.extent)
            # A loop run once (a batch of 1, and everything outside it) computes the stage once:
            # root without root's parallel loop.
            if trips > 1 and lp.kind not in ("vectorized", "unrolled"):
                around.append((st, lp.name))
        common = around if common is None else [x for x in common if x in around]
    out: list[sampler.Location] = []
    for st, loop in common or []:
        loc = ("at", st, loop)
        if loc not in have and _validates(p, partial.with_stage(name, StageSchedule(sampler.location_directives(loc)))):
            out.append(loc)
    return out


def _validates(p: Pipeline, s: Schedule) -> bool:
    try:
        validate(p, s)
    except (ScheduleError, ValueError):
        return False
    return True


def legal_decision(p: Pipeline, partial: Schedule, name: str, ss: StageSchedule, nest: list[sampler.Location]) -> bool:
    """Is `ss` legal for stage `name` after `partial`: the sampler's checks, or (at one of
    `nest`, the `nest_locations`, which the sampler does not know) the schedule validates."""
    if sampler.location_of(ss) in nest:
        return ss.store() is None and _validates(p, partial.with_stage(name, ss))
    return sampler.still_legal(p, partial, name, ss)


def options_at(p: Pipeline, partial: Schedule, name: str, rng: random.Random, k: int, locs: list[sampler.Location]) -> list[StageSchedule]:
    """Up to `k` distinct legal decisions of stage `name` at the locations in `locs` that are
    legal after `partial`, their loops sampled afresh (a coarse-to-fine search refines the
    neighbourhood of earlier good decisions this way). Deterministic given `rng`'s state."""
    legal = sampler.locations(p, partial, name)
    places = [loc for loc in dict.fromkeys(locs) if loc in legal]
    out: list[StageSchedule] = []
    keys: set[StageSchedule] = set()
    for i, loc in enumerate(places):
        if loc[0] == "inline":
            cands = [StageSchedule(sampler.location_directives(loc))]
        else:
            want = -(-(k - len(out)) // (len(places) - i))  # an even share of what is left
            extents, guard = sampler.placement_context(p, partial, name, loc)
            cands = []
            for _ in range(3 * want):
                lp = sampler.sample_loops(p, name, extents, loc[0] == "at", guard, rng)
                cands.append(StageSchedule(sampler.location_directives(loc) + lp.pure, lp.update))
                if len(set(cands)) >= want:
                    break
        for c in cands:
            if c not in keys and len(out) < k:
                out.append(c)
                keys.add(c)
    return out


def near_decision(p: Pipeline, partial: Schedule, name: str, ref: StageSchedule, rng: random.Random) -> StageSchedule | None:
    """The legal decision nearest to `ref` (say a guide's decision that a changed consumer
    made illegal): at `ref`'s location, or else at another loop of the same consumer, with
    `ref`'s loop directives where they still fit, else loops sampled there. None when `ref`
    was at a consumer where `name` can no longer be computed."""
    loc = sampler.location_of(ref)
    legal = sampler.locations(p, partial, name)
    if loc not in legal:
        same = [x for x in legal if x[0] == "at" and loc[0] == "at" and x[1] == loc[1]]
        if not same:
            return None
        loc = rng.choice(same)
    keep = tuple(d for d in ref.pure if d.kind not in PLACEMENT_KINDS)
    cand = StageSchedule(sampler.location_directives(loc) + keep, ref.update)
    if sampler.still_legal(p, partial, name, cand):
        return cand
    found = options_at(p, partial, name, rng, 1, [loc])
    return found[0] if found else None


def with_decision(partial: Schedule, name: str, ss: StageSchedule) -> Schedule:
    """A copy of `partial` with stage `name` decided as `ss`."""
    return partial.with_stage(name, ss)


def complete(
    p: Pipeline, partial: Schedule, rng: random.Random, guide: Schedule | None = None, name: str = "search", explore: float = 0.0
) -> Schedule:
    """`partial` with every undecided stage decided, in order: `guide`'s decision where it
    is legal (see `stage_options`), else a random one from `rng`. With `explore` > 0, each
    stage ignores the guide with that probability (a noisy rollout around the guide). A guide
    decision made illegal by a changed consumer is repaired (`near_decision`) rather than
    replaced by a random one: the completion stays the guide's policy."""
    out = partial.copy(name)
    for st in order(p):
        if st not in out.stages:
            g = None if explore > 0 and rng.random() < explore else guide
            d = guide_decision(p, out, st, g)
            if d is None and g is not None and st in g.stages:
                d = near_decision(p, out, st, g.stages[st], rng)
            out.stages[st] = d if d is not None else stage_options(p, out, st, rng, 1)[0]
    if guide is not None and guide.wrappers:  # the guide's packed copies that still apply (no option makes them)
        sampler.carry_wrappers(p, guide, out)
    validate(p, out)
    return out


def seed_schedule(p: Pipeline) -> Schedule | None:
    """The engine's rule-based schedule (engine/heuristic.py), the searches' starting point
    and guide; None if it does not validate (it always should)."""
    try:
        h = heuristic_schedule(p)
        validate(p, h)
    except (ScheduleError, ValueError):
        return None
    h.stages = {st: h.stages.get(st) or StageSchedule() for st in order(p)}
    return h


def measure_seed(ctx: SearchContext) -> Schedule | None:
    """Every strategy's first step: measure the seed schedule (the reference point each
    search must not end worse than) and return it."""
    seed = seed_schedule(ctx.p)
    if seed is not None:
        ctx.measure([seed])
    return seed


def initial_population(ctx: SearchContext, seed: Schedule | None, n: int, near: int, name: str) -> list[Schedule]:
    """`n` starting schedules: the seed, mutants of it while fewer than `near + 1` are
    chosen, then random ones (population-based strategies start around the seed)."""
    out = [seed] if seed is not None else []
    while len(out) < n:
        ctx.check()
        if seed is not None and len(out) <= near:
            out.append(sampler.mutate(ctx.p, seed, ctx.rng, name))
        else:
            out.append(sampler.sample_schedule(ctx.p, ctx.rng, name))
    return out
