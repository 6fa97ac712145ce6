"""Local moves: a task's schedule changed a little, keeping its recipe.

A move never changes where a stage is placed relative to the unit's cuts (inline stays
inline, root stays root, compute_at stays at the same consumer) nor any loop's name: it
varies a split / tile / vector / unroll / parallel factor, moves a producer to another loop
of the same consumer, swaps two adjacent loops of a reorder, changes a split's tail, drops
an unroll, or swaps the recipe's vector width (every vector factor of the task halved or
doubled, the register block's unroll scaled the other way so the block keeps its size).
Candidates are therefore near a schedule already measured, rarely catastrophically slow,
and apply to every occurrence of the task by renaming (tasks.apply_tasks). Every candidate
returned validates (schedule.validate); the caller measures it (verified).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import sampler
from ..ir import Pipeline
from ..loops import LoopError
from ..schedule import Directive, Kind, Schedule, ScheduleError, StageSchedule, validate

MOVES = ("factor", "vector_width", "compute_at", "reorder", "tail", "drop_unroll")
_FACTOR_FIELDS = ("factor", "xf", "yf")
_TAILS = (None, "guard_with_if", "shift_inwards", "round_up")
MAX_FACTOR = 512


def tunable_stages(s: Schedule) -> list[str]:
    """The stages a move may change: every one not inlined (an inlined stage has no loops,
    and one repeated in several units must stay inline in all of them)."""
    return [n for n, ss in s.stages.items() if ss.compute().kind != Kind.COMPUTE_INLINE]


def _factor_values(f: int) -> list[int]:
    vals = {f * 2, f // 2, f + f // 2 if f >= 4 else f + 1, f - f // 4 if f >= 4 else f - 1}
    return sorted(v for v in vals if 1 <= v <= MAX_FACTOR and v != f)


def _edit_directive(ss: StageSchedule, update: bool, k: int, d: Directive) -> StageSchedule:
    lst = list(ss.definition(update))
    lst[k] = d
    return ss.with_definition(update, lst)


def _directives(ss: StageSchedule) -> list[tuple[bool, int, Directive]]:
    return [(u, k, d) for u in (False, True) for k, d in enumerate(ss.definition(u))]


def move_factor(p: Pipeline, s: Schedule, stage: str, rng: random.Random) -> StageSchedule | None:
    ss = s.of(stage)
    cands = [(u, k, d, f) for u, k, d in _directives(ss) for f in _FACTOR_FIELDS if getattr(d, f) is not None]
    if not cands:
        return None
    u, k, d, f = rng.choice(cands)
    vals = _factor_values(getattr(d, f))
    if not vals:
        return None
    change: dict[str, Any] = {f: rng.choice(vals)}
    return _edit_directive(ss, u, k, replace(d, **change))


def move_compute_at(p: Pipeline, s: Schedule, stage: str, rng: random.Random) -> StageSchedule | None:
    ss = s.of(stage)
    c = ss.compute()
    if c.kind != Kind.COMPUTE_AT:
        return None
    others = [loc for loc in sampler.locations(p, s, stage) if loc[0] == "at" and loc[1] == c.consumer and loc[2] != c.loop]
    if not others:
        return None
    loc = rng.choice(others)
    pure = [Directive(Kind.COMPUTE_AT, consumer=loc[1], loop=loc[2]) if d is c else d for d in ss.pure]
    return ss.with_definition(False, pure)


def move_reorder(p: Pipeline, s: Schedule, stage: str, rng: random.Random) -> StageSchedule | None:
    ss = s.of(stage)
    cands = [(u, k, d) for u, k, d in _directives(ss) if d.kind == Kind.REORDER and d.loops and len(d.loops) > 2]
    if not cands:
        return None
    u, k, d = rng.choice(cands)
    assert d.loops is not None
    loops = list(d.loops)
    i = rng.randrange(1, len(loops) - 1)  # the innermost (usually the vector) stays innermost
    loops[i], loops[i + 1] = loops[i + 1], loops[i]
    return _edit_directive(ss, u, k, replace(d, loops=tuple(loops)))


def move_tail(p: Pipeline, s: Schedule, stage: str, rng: random.Random) -> StageSchedule | None:
    ss = s.of(stage)
    cands = [(u, k, d) for u, k, d in _directives(ss) if d.kind == Kind.SPLIT]
    if not cands:
        return None
    u, k, d = rng.choice(cands)
    return _edit_directive(ss, u, k, replace(d, tail=rng.choice([t for t in _TAILS if t != d.tail])))


def move_drop_unroll(p: Pipeline, s: Schedule, stage: str, rng: random.Random) -> StageSchedule | None:
    ss = s.of(stage)
    cands = [(u, k) for u, k, d in _directives(ss) if d.kind == Kind.UNROLL and d.factor is None]
    if not cands:
        return None
    u, k = rng.choice(cands)
    lst = list(ss.definition(u))
    del lst[k]
    return ss.with_definition(u, lst)


def vector_width(s: Schedule, scale: float, compensate: bool) -> Schedule:
    """Every vector factor of `s` (a vectorize's factor, a split into a `*_v` loop) times
    `scale`; with `compensate`, the unroll splits (`*_u`) by 1/`scale` so a register block
    keeps its size (16 lanes x 4 = 8 lanes x 8)."""
    out = s.copy()
    for n, ss in s.stages.items():
        lists = []
        for u in (False, True):
            new = []
            for d in ss.definition(u):
                if d.factor is not None and (d.kind == Kind.VECTORIZE or (d.kind == Kind.SPLIT and (d.inner or "").endswith("_v"))):
                    d = replace(d, factor=max(1, int(d.factor * scale)))
                elif compensate and d.factor is not None and d.kind == Kind.SPLIT and (d.inner or "").endswith("_u"):
                    d = replace(d, factor=max(1, round(d.factor / scale)))
                new.append(d)
            lists.append(tuple(new))
        out.stages[n] = StageSchedule(lists[0], lists[1])
    return out


STAGE_MOVES: dict[str, Callable[[Pipeline, Schedule, str, random.Random], StageSchedule | None]] = {
    "factor": move_factor,
    "compute_at": move_compute_at,
    "reorder": move_reorder,
    "tail": move_tail,
    "drop_unroll": move_drop_unroll,
}


def propose(p: Pipeline, s: Schedule, rng: random.Random, kind: str | None = None) -> tuple[str, Schedule] | None:
    """One move of `kind` (default: drawn, factor moves most often) applied to `s`, or None
    when the move does not apply or gives an illegal schedule."""
    kind = kind or rng.choices(MOVES, weights=(6, 2, 1, 1, 1, 1))[0]
    try:
        if kind == "vector_width":
            out = vector_width(s, rng.choice((0.5, 2.0)), rng.random() < 0.7)
        else:
            stages = tunable_stages(s)
            if not stages:
                return None
            stage = rng.choice(stages)
            ss = STAGE_MOVES[kind](p, s, stage, rng)
            if ss is None:
                return None
            out = s.with_stage(stage, ss)
        out.name = s.name
        validate(p, out)
    except (ScheduleError, LoopError, ValueError):
        return None
    if out.content_hash() == s.content_hash():
        return None
    return kind, out


def neighbours(p: Pipeline, s: Schedule, rng: random.Random, k: int, exclude: set[str] | None = None, steps: int = 1) -> list[Schedule]:
    """Up to `k` distinct legal schedules `steps` moves (at most) from `s`, none whose hash
    is in `exclude` (already measured). Deterministic given `rng`'s state."""
    seen = set(exclude or ()) | {s.content_hash()}
    out: list[Schedule] = []
    for _ in range(12 * k):
        if len(out) >= k:
            break
        cur: Schedule | None = s
        for _ in range(rng.randint(1, steps)):
            got = propose(p, cur, rng) if cur is not None else None
            cur = got[1] if got else None
        if cur is None:
            continue
        h = cur.content_hash()
        if h not in seen:
            seen.add(h)
            out.append(cur)
    return out


def same_recipe(a: Schedule, b: Schedule) -> bool:
    """Do `a` and `b` place every stage the same way (kind and consumer) with the same
    kinds of directives? What moves keep (tested)."""
    if a.stages.keys() != b.stages.keys():
        return False
    for n in a.stages:
        x, y = a.of(n), b.of(n)
        if (x.compute().kind, x.compute().consumer) != (y.compute().kind, y.compute().consumer):
            return False
        kinds = lambda ss: sorted(d.kind.value for d in ss.pure + ss.update if d.kind != Kind.UNROLL)
        if kinds(x) != kinds(y):
            return False
    return True
