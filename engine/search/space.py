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
from ..schedule import Schedule, ScheduleError, StageSchedule, validate


def order(p: Pipeline) -> list[str]:
    """The decision order: outputs back to inputs (every consumer before its producers)."""
    return sampler._order(p)


def _copy(ss: StageSchedule) -> StageSchedule:
    return StageSchedule([dict(x) for x in ss.pure], [dict(x) for x in ss.update])


def _key(ss: StageSchedule) -> str:
    return repr(ss.to_json())


def is_prefix(partial: Schedule, guide: Schedule | None) -> bool:
    """Is every decision in `partial` the same as `guide`'s? Then `guide`'s decisions of the
    remaining stages are legal there (the whole guide schedule is), even where the sampler's
    stricter rules would not have proposed them (e.g. the heuristic's round-up tails)."""
    return guide is not None and all(_key(v) == _key(guide.of(k)) for k, v in partial.stages.items())


def stage_options(
    p: Pipeline, partial: Schedule, name: str, rng: random.Random, k: int, guide: Schedule | None = None
) -> list[StageSchedule]:
    """Up to `k` distinct legal decisions for stage `name`, given `partial`'s decisions of its
    consumers: first `guide`'s decision (e.g. the heuristic's) when `partial` follows the
    guide or the decision passes the sampler's checks, then random ones from the sampler.
    Deterministic given `rng`'s state."""
    out: list[StageSchedule] = []
    keys: set[str] = set()
    g = guide.stages.get(name) if guide is not None else None
    if g is not None and k > 0 and (is_prefix(partial, guide) or sampler._still_legal(p, partial, name, g)):
        out.append(_copy(g))
        keys.add(_key(g))
    for _ in range(4 * k):
        if len(out) >= k:
            break
        ss = sampler._decide(p, partial, name, rng)
        if _key(ss) not in keys:
            out.append(ss)
            keys.add(_key(ss))
    return out


def with_decision(partial: Schedule, name: str, ss: StageSchedule) -> Schedule:
    """A copy of `partial` with stage `name` decided as `ss`."""
    out = Schedule({k: _copy(v) for k, v in partial.stages.items()}, name=partial.name)
    out.stages[name] = _copy(ss)
    return out


def complete(p: Pipeline, partial: Schedule, rng: random.Random, guide: Schedule | None = None, name: str = "search") -> Schedule:
    """`partial` with every undecided stage decided, in order: `guide`'s decision where it
    is legal (see `stage_options`), else a random one from `rng`."""
    out = Schedule({k: _copy(v) for k, v in partial.stages.items()}, name=name)
    for st in order(p):
        if st not in out.stages:
            out.stages[st] = stage_options(p, out, st, rng, 1, guide)[0]
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
