"""Schedule edits as pure functions: each takes a schedule and returns a new, validated one
(or raises ScheduleError with the engine's message), never touching its argument. The
undoable commands (commands.py) and the editor's form both go through these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.ir import Pipeline
from engine.loops import Loop, LoopError
from engine.schedule import (
    COMPUTE_ROOT,
    PLACEMENT_KINDS,
    Directive,
    Kind,
    Schedule,
    ScheduleError,
    Wrapper,
    definition_loops,
    validate,
    validate_stages,
    validate_wrappers,
    wrapper_problem,
)

VECTOR_WIDTH = 8  # float32 lanes of AVX2; vectorize_innermost splits by this
TILE = (32, 8)  # tile_innermost: inner x by inner y


def directives(s: Schedule, stage: str, update: bool) -> list[Directive]:
    """One definition's directives, as a new list (the directives are immutable)."""
    return list(s.of(stage).definition(update))


def parse(stage: str, update: bool, obj: Any, index: int) -> Directive:
    """The directive a form (or a user's JSON) describes, to be directive #index of the
    definition; ScheduleError with the engine's message when it is not well formed."""
    try:
        return Directive.from_json(obj, update)
    except LoopError as exc:
        raise ScheduleError(stage, str(exc), obj, index, update) from None


def with_directives(p: Pipeline, s: Schedule, stage: str, update: bool, new: list[Directive]) -> Schedule:
    """A copy of `s` with one definition's directives replaced; validated against `p`. The
    wrappers (packed copies) the change leaves invalid are dropped (`dropped_wrappers` says
    which): moving or re-splitting a wrapped stage must not be refused for its copy's sake."""
    ss = s.of(stage).with_definition(update, new)
    out = s.with_stage(stage, ss)
    if not ss.pure and not ss.update:
        del out.stages[stage]
    out = _without_broken_wrappers(p, s, out)
    if out.content_hash() == s.content_hash():  # e.g. "Root" on a stage already at root: no undo step for nothing
        raise ScheduleError(stage, "this edit changes nothing")
    return out


def _wrapper_holds(p: Pipeline, s: Schedule, w: Wrapper) -> bool:
    return not wrapper_problem(p, s, w)


def _without_broken_wrappers(p: Pipeline, before: Schedule, out: Schedule) -> Schedule:
    """`out` validated, less the wrappers that held in `before` and fail in `out` (the edit
    broke them). A stage the edit itself makes invalid, or a wrapper that was already
    invalid, is the engine's error as usual."""
    validate_stages(p, out)
    try:
        validate_wrappers(p, out)
        return out
    except ScheduleError:
        broken = [k for k, w in out.wrappers.items() if not _wrapper_holds(p, out, w)]
        if any(k not in before.wrappers or not _wrapper_holds(p, before, before.wrappers[k]) for k in broken):
            raise
    kept = out.copy()
    for k in broken:
        del kept.wrappers[k]
    validate(p, kept)
    return kept


def dropped_wrappers(before: Schedule, after: Schedule) -> list[Wrapper]:
    """The wrappers of `before` that `after` no longer has, by name."""
    return [w for k, w in sorted(before.wrappers.items()) if k not in after.wrappers]


def remove_wrapper(p: Pipeline, s: Schedule, name: str) -> Schedule:
    """A copy of `s` without wrapper `name` (its consumer reads the source itself again); validated."""
    if name not in s.wrappers:
        raise ScheduleError(name, "no such packed copy (wrapper) in this schedule")
    out = s.copy()
    del out.wrappers[name]
    validate(p, out)
    return out


def add(p: Pipeline, s: Schedule, stage: str, update: bool, d: Directive) -> Schedule:
    return with_directives(p, s, stage, update, directives(s, stage, update) + [d])


def replace(p: Pipeline, s: Schedule, stage: str, update: bool, index: int, d: Directive) -> Schedule:
    ds = directives(s, stage, update)
    ds[index] = d
    return with_directives(p, s, stage, update, ds)


def remove(p: Pipeline, s: Schedule, stage: str, update: bool, index: int) -> Schedule:
    ds = directives(s, stage, update)
    del ds[index]
    return with_directives(p, s, stage, update, ds)


def move(p: Pipeline, s: Schedule, stage: str, update: bool, index: int, delta: int) -> Schedule:
    ds = directives(s, stage, update)
    j = index + delta
    if not 0 <= j < len(ds):
        raise ScheduleError(stage, f"directive #{index} cannot move {'up' if delta < 0 else 'down'}")
    ds[index], ds[j] = ds[j], ds[index]
    return with_directives(p, s, stage, update, ds)


def loops_before(p: Pipeline, s: Schedule, stage: str, update: bool, index: int | None = None) -> list[Loop]:
    """The loops directive #index sees (all directives before it applied); None: after all."""
    ds = directives(s, stage, update)
    head = ds if index is None else ds[:index]
    trial = s.with_stage(stage, s.of(stage).with_definition(update, head))
    return definition_loops(p, trial, stage, update)


def fresh_name(taken: set[str], base: str) -> str:
    """`base`, or base2, base3, ... if taken."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


# --- quick actions ---------------------------------------------------------------------
def _tile_factor(target: int, extent: int) -> int:
    """`target`, or half the loop when it is shorter than two tiles (so the tile is real)."""
    return target if extent >= 2 * target else max(1, extent // 2)


def tile_innermost(p: Pipeline, s: Schedule, stage: str, update: bool) -> Schedule:
    """Tile the two innermost serial pure loops (x innermost) by about TILE. Reduction
    loops are left alone: tiling them would not change what is computed where."""
    loops = loops_before(p, s, stage, update)
    cands = [lp for lp in loops if lp.kind == "serial" and not lp.rvar and lp.extent >= 2]
    if len(cands) < 2:
        raise ScheduleError(stage, "needs two serial pure loops of at least 2 iterations to tile")
    y, x = cands[-2], cands[-1]
    taken = {lp.name for lp in loops}
    names = {}
    for key, base in (("xo", x.name + "o"), ("xi", x.name + "i"), ("yo", y.name + "o"), ("yi", y.name + "i")):
        names[key] = fresh_name(taken, base)
        taken.add(names[key])
    d = Directive(
        Kind.TILE, x=x.name, y=y.name, xo=names["xo"], yo=names["yo"], xi=names["xi"], yi=names["yi"],
        xf=_tile_factor(TILE[0], x.extent), yf=_tile_factor(TILE[1], y.extent),
    )  # fmt: skip
    return add(p, s, stage, update, d)


def vectorize_innermost(p: Pipeline, s: Schedule, stage: str, update: bool) -> Schedule:
    """Vectorize the innermost pure loop of more than one iteration (refused when that one is
    already vectorized, parallel or unrolled), split by VECTOR_WIDTH when it is longer."""
    loops = [lp for lp in loops_before(p, s, stage, update) if not lp.rvar and lp.extent > 1]
    if not loops:
        raise ScheduleError(stage, "has no pure loop of more than one iteration to vectorize")
    lp = loops[-1]
    if lp.kind != "serial":
        raise ScheduleError(stage, f"its innermost loop {lp.name!r} is already {lp.kind}")
    d = Directive(Kind.VECTORIZE, loop=lp.name, factor=VECTOR_WIDTH if lp.extent > VECTOR_WIDTH else None)
    return add(p, s, stage, update, d)


def parallelize_outermost(p: Pipeline, s: Schedule, stage: str, update: bool) -> Schedule:
    """Parallelize the outermost pure serial loop with more than one iteration."""
    loops = [lp for lp in loops_before(p, s, stage, update) if lp.kind == "serial" and not lp.rvar and lp.extent > 1]
    if not loops:
        raise ScheduleError(stage, "has no serial pure loop with more than one iteration to parallelize")
    return add(p, s, stage, update, Directive(Kind.PARALLEL, loop=loops[0].name))


def _set_compute(p: Pipeline, s: Schedule, stage: str, compute: Directive, keep_loops: bool) -> Schedule:
    kept = [d for d in directives(s, stage, False) if d.kind not in PLACEMENT_KINDS] if keep_loops else []
    return with_directives(p, s, stage, False, [compute, *kept])


def inline(p: Pipeline, s: Schedule, stage: str, update: bool = False) -> Schedule:
    """compute_inline; the stage's loop directives go too (an inlined stage has no loops)."""
    return _set_compute(p, s, stage, Directive(Kind.COMPUTE_INLINE), keep_loops=False)


def compute_root(p: Pipeline, s: Schedule, stage: str, update: bool = False) -> Schedule:
    """compute_root in place of any compute/store directive; loop directives are kept."""
    return _set_compute(p, s, stage, COMPUTE_ROOT, keep_loops=True)


# name -> (button text, what it does, the edit)
QUICK_ACTIONS: dict[str, tuple[str, str, Callable[..., Schedule]]] = {
    "tile": ("Tile 2-D", f"Tile the two innermost loops {TILE[0]}x{TILE[1]}", tile_innermost),
    "vectorize": ("Vectorize", f"Vectorize the innermost loop ({VECTOR_WIDTH} lanes)", vectorize_innermost),
    "parallel": ("Parallel", "Parallelize the outermost loop", parallelize_outermost),
    "inline": ("Inline", "Compute the stage inline in its consumers (drops its loop directives)", inline),
    "root": ("Root", "Compute the whole stage before its consumers (compute_root)", compute_root),
}
