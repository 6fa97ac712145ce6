"""Random legal schedules, by construction: a sequence of per-stage decisions.

Stages are decided from the outputs back to the inputs, so when a stage is decided all
its consumers already have their loops: first where it is computed (inline, root, or at
a loop of a consumer that exists in `final_loops`), then its loops (splits, an order, a
vectorized innermost loop, an unrolled loop, a parallel outer loop). Every directive is
applied to the loop list as it is chosen (engine/loops.py), so only existing loops are
named. The same decision sequence is what a search walks (the search issue shares it).

The search-space API (engine/search builds on it): `decision_order` (stages in decision
order), `locations` / `location_of` / `location_directives` (where a stage may be, is, and
the directive that puts it there), `placement_context` + `sample_loops` (legal loops at a
location), `decide` (one random decision), `still_legal` (may a kept decision stay).

Legality rules beyond `schedule.validate`, which Halide enforces at lowering:
- a stage computed at a consumer C's loop must have every use inside that loop: each of
  its other (effective, i.e. after inlining) consumers must be computed at C at that loop
  or one inside it, and a reduction C must not read it in its pure (initial) definition;
- no split may make Halide compute more than the stage's region: Halide grows the region
  of a pure split larger than the loop (ShiftInwards) and of an update split that does not
  divide it (RoundUp), and the growth propagates to the inputs, which are read out of
  bounds. So factors are chosen against the region the loop-nest model gives the stage
  at its location, and an update split that does not divide its loop gets
  tail='guard_with_if' (as does every split of a stage computed inside a guarded loop,
  whose edge regions are smaller, or read with several index patterns: `_union_varies`);
- a stage read through a non-affine index is computed inline or at root (`nonaffine_read`);
- no compute_at at a stage whose tiles can be empty (see `_may_be_empty`) or that is stored
  outside its compute level (Halide slides its window: regions shift from the model's);
- no compute_at at or inside a vectorized or unrolled loop (legal but pathological: huge
  code and compile times); no store_root / store_at (see `decide`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from . import expr as E
from . import loopnest
from . import loops as L
from .expr import affine
from .ir import Pipeline, Stage
from .schedule import (
    COMPUTE_ROOT,
    Directive,
    Kind,
    Schedule,
    StageSchedule,
    effective_consumers,
    final_loops,
    validate,
    wrapper_problem,
)

Location = tuple[str, ...]  # ("root",), ("inline",) or ("at", consumer, loop)
VECTOR_WIDTHS = (4, 8, 16)


def _as_random(rng: random.Random | np.random.Generator) -> random.Random:
    if isinstance(rng, np.random.Generator):
        return random.Random(int(rng.integers(2**62)))
    return rng


# --- where a stage may be computed ---------------------------------------------------------
def _inlined(sched: Schedule, name: str) -> bool:
    return sched.of(name).compute().kind == Kind.COMPUTE_INLINE


def _under_select(p: Pipeline, sched: Schedule, e: E.Expr, name: str, inside: bool = False) -> bool:
    """Does `e` read `name` inside a branch of a select (a pad), inlined stages substituted?"""
    if isinstance(e, E.Select):
        return _under_select(p, sched, e.cond, name, inside) or any(_under_select(p, sched, x, name, True) for x in (e.then, e.other))
    if isinstance(e, E.Access):
        if e.source == name and inside:
            return True
        if e.source in p.stage_map and _inlined(sched, e.source) and _under_select(p, sched, p.stage(e.source).value, name, inside):
            return True
    return any(_under_select(p, sched, c, name, inside) for c in E.children(e))


def _may_be_empty(p: Pipeline, sched: Schedule, name: str) -> bool:
    """Can a tile of `name` be empty? Yes when it is computed per tile of a consumer that
    reads it only inside a select (a pad): a tile in the border needs none of it. Halide
    then gives the stages computed at its outer loops negative-extent boxes, and their
    input bounds checks fail although nothing is read (seen with pad -> scale -> bn)."""
    if sched.of(name).compute().kind != Kind.COMPUTE_AT:
        return False
    return _by_inlined(
        p, sched, ("under_select", name),
        lambda: any(_under_select(p, sched, ex, name) for c in effective_consumers(p, sched, name) for ex in p.stage(c).exprs()),
    )  # fmt: skip


def _effective(p: Pipeline, sched: Schedule, e: E.Expr) -> E.Expr:
    """`e` with the inlined stages substituted."""
    return loopnest.substitute_inlined(p, lambda name: _inlined(sched, name), e)


# --- memos ---------------------------------------------------------------------------------
# The checks that substitute inlined stages (`nonaffine_read`, `_union_varies`, reads under a
# select, reads by a reduction's initial definition) read a schedule only through which
# stages are inlined, and a region at a location only through the decisions downstream of
# the stage (and which stages are inlined): memoized per pipeline by exactly that, since a
# mutation asks them for every stage (they were most of a mutation's time: ~38 ms on harris).
SAMPLER_MEMO = 20_000  # entries per pipeline and memo (a key holds an inlined set or shared stage schedules)


class _Memo:
    def __init__(self, p: Pipeline) -> None:
        self.by_inlined: loopnest.LRU[tuple, bool] = loopnest.LRU(SAMPLER_MEMO)
        self.contexts: loopnest.LRU[tuple, tuple[tuple[int, ...], bool]] = loopnest.LRU(SAMPLER_MEMO)
        self.down = {s.name: tuple(sorted(x for x in p.downstream(s.name) if x in p.stage_map)) for s in p.stages}
        self.inline_sets: loopnest.LRU[frozenset[str], frozenset[str]] = loopnest.LRU(SAMPLER_MEMO)  # one object per set: keys share it


def _memo(p: Pipeline) -> _Memo:
    return loopnest.pipeline_cache(p, "sampler", lambda: _Memo(p))


def _inline_set(p: Pipeline, sched: Schedule) -> frozenset[str]:
    got = frozenset(n for n, ss in sched.stages.items() if ss.compute().kind == Kind.COMPUTE_INLINE)
    shared = _memo(p).inline_sets
    return shared.get(got) or shared.put(got, got)


def _by_inlined(p: Pipeline, sched: Schedule, key: tuple, compute: Callable[[], bool]) -> bool:
    """`compute()`, a function of `key` and of the set of stages `sched` inlines, memoized."""
    memo = _memo(p).by_inlined
    k = (*key, _inline_set(p, sched))
    hit = memo.get(k)
    return hit if hit is not None else memo.put(k, compute())


def _init_reads(p: Pipeline, sched: Schedule, cs: Stage, name: str) -> bool:
    """Does reduction `cs`'s initial (pure) definition read `name`, inlined stages substituted?"""
    return _by_inlined(
        p, sched, ("init_reads", cs.name, name), lambda: any(a.source == name for a in E.accesses(_effective(p, sched, cs.value)))
    )


def locations(p: Pipeline, sched: Schedule, name: str) -> list[Location]:
    """Every legal compute location of stage `name`, given the decisions of its consumers."""
    s = p.stage(name)
    if name in p.outputs:
        return [("root",)]
    opts: list[Location] = [("root",)]
    if not s.is_reduction:
        opts.append(("inline",))
    if nonaffine_read(p, sched, name):
        return opts
    cons = effective_consumers(p, sched, name)
    for c in sorted(cons):
        cs = p.stage(c)
        if cs.is_reduction and _init_reads(p, sched, cs, name):
            continue  # used by the initial definition, which the update's loops do not enclose
        if _may_be_empty(p, sched, c) or sched.of(c).store() is not None:
            continue  # empty tiles; or a sliding window, whose shifted regions the model does not know
        loops = final_loops(p, sched, c)
        names = [lp.name for lp in loops]
        limit = len(loops) - 1
        for other in cons - {c}:
            comp = sched.of(other).compute()
            if comp.kind != Kind.COMPUTE_AT or comp.consumer != c:
                limit = -1
                break
            limit = min(limit, names.index(L.need(comp.loop)))
        for k, lp in enumerate(loops[: limit + 1]):
            if lp.kind in ("vectorized", "unrolled"):
                break  # nothing at or inside a vector or unrolled loop
            opts.append(("at", c, names[k]))
    return opts


_INLINE = Directive(Kind.COMPUTE_INLINE)


def location_directives(loc: Location) -> tuple[Directive, ...]:
    """The compute directive that puts a stage at `loc`, as a one-element tuple (a
    `compute_at` naming consumer and loop, or `compute_root` / `compute_inline`), ready to
    be the head of a StageSchedule's pure list."""
    if loc[0] == "at":
        return (Directive(Kind.COMPUTE_AT, consumer=loc[1], loop=loc[2]),)
    return (_INLINE,) if loc[0] == "inline" else (COMPUTE_ROOT,)


def location_of(ss: StageSchedule) -> Location:
    """Where `ss` computes its stage, as a Location (the inverse of `location_directives`);
    a stage with no compute directive is at root (the default)."""
    c = ss.compute()
    if c.kind == Kind.COMPUTE_AT:
        return ("at", L.need(c.consumer), L.need(c.loop))
    return ("inline",) if c.kind == Kind.COMPUTE_INLINE else ("root",)


def choose_location(p: Pipeline, sched: Schedule, name: str, rng: random.Random) -> Location:
    opts = locations(p, sched, name)
    groups = {k: [o for o in opts if o[0] == k] for k in ("inline", "root", "at")}
    weights = {"inline": 0.3, "root": 0.35, "at": 0.35}
    kinds = [k for k in groups if groups[k]]
    kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
    return rng.choice(groups[kind])


# --- the loops of one definition ------------------------------------------------------------
def _pow2_upto(n: int, lo: int = 2) -> list[int]:
    out, f = [], lo
    while f <= n:
        out.append(f)
        f *= 2
    return out


def _factor(rng: random.Random, extent: int, choices: list[int]) -> int | None:
    """A factor no larger than the loop (a larger one would grow the region); dividing
    factors are preferred 2:1 (no tail at all)."""
    ok = [f for f in choices if f <= extent]
    if not ok:
        return None
    div = [f for f in ok if extent % f == 0]
    return rng.choice(div) if div and rng.random() < 2 / 3 else rng.choice(ok)


def _fresh(loops: list[L.Loop], base: str) -> str:
    names = {lp.name for lp in loops}
    name, k = base, 2
    while name in names:
        name, k = f"{base}{k}", k + 1
    return name


class DefinitionLoops:
    """Directives of one definition, applied to its loop list (extents of the stage's
    region at its location) as they are chosen."""

    def __init__(self, s: Stage, update: bool, extents: dict[str, int], guard_all: bool) -> None:
        self.loops = L.initial_loops(s, update, extents)
        self.directives: list[Directive] = []
        self.update, self.guard_all = update, guard_all

    def tail(self, loop: str, factor: int) -> str | None:
        """The tail strategy a split needs so that Halide never grows the region."""
        lp = next(x for x in self.loops if x.name == loop)
        if self.guard_all or (self.update and not lp.rvar and lp.extent % factor):
            return "guard_with_if"
        return None

    def add(self, d: Directive) -> None:
        if d.factor is not None:  # a split, or a marker that splits first
            tail = self.tail(L.need(d.loop), d.factor)
            if tail:
                d = replace(d, tail=tail)
        self.loops = L.apply(self.loops, d)
        self.directives.append(d)

    def names(self) -> list[str]:
        return [lp.name for lp in self.loops]

    def fresh(self, base: str) -> str:
        """A loop name from `base` that none of the loops has yet."""
        return _fresh(self.loops, base)


def _split_and_order(d: DefinitionLoops, rng: random.Random, update: bool) -> None:
    split_of: dict[str, tuple[str, str]] = {}
    for lp in list(d.loops):
        if lp.extent < 4 or rng.random() > (0.25 if lp.rvar else 0.4):
            continue
        f = _factor(rng, lp.extent, _pow2_upto(lp.extent // 2))
        if f is None:
            continue
        outer, inner = _fresh(d.loops, f"{lp.name}o"), _fresh(d.loops, f"{lp.name}i")
        d.add(Directive(Kind.SPLIT, loop=lp.name, outer=outer, inner=inner, factor=f))
        split_of[lp.name] = (outer, inner)
    order = d.names()
    if split_of and rng.random() < 0.5:  # tile: every outer part outside every inner part
        inners = {i for _, i in split_of.values()}
        order = [n for n in order if n not in inners] + [n for n in order if n in inners]
    by_name = {lp.name: lp for lp in d.loops}
    if update and rng.random() < 0.4:  # register-blocking style: the innermost pure loops inside the reduction
        tail = [n for n in order if not by_name[n].rvar][-rng.randint(1, 2) :]
        order = [n for n in order if n not in tail] + tail
    if len(order) >= 3 and rng.random() < 0.2:  # a random perturbation
        k = rng.randrange(len(order) - 1)
        order[k], order[k + 1] = order[k + 1], order[k]
    if order != d.names() and len(order) >= 2:
        d.add(Directive(Kind.REORDER, loops=tuple(reversed(order))))


def _vectorize_unroll(d: DefinitionLoops, rng: random.Random, p_vec: float, p_unroll: float) -> None:
    inner = d.loops[-1]
    if not inner.rvar and inner.extent >= 2 and rng.random() < p_vec:
        f = _factor(rng, inner.extent, list(VECTOR_WIDTHS)) or _factor(rng, inner.extent, [2])
        if f is not None:
            d.add(Directive(Kind.VECTORIZE, loop=inner.name, factor=f))
    if len(d.loops) >= 2 and rng.random() < p_unroll:
        lp = d.loops[-2]
        f = _factor(rng, lp.extent, [2, 4, 8])
        if f is not None and lp.kind == "serial":
            d.add(Directive(Kind.UNROLL, loop=lp.name, factor=f))


def _parallelize(d: DefinitionLoops, rng: random.Random, p_par: float) -> None:
    if rng.random() > p_par:
        return
    pure = [k for k, lp in enumerate(d.loops) if not lp.rvar and lp.kind == "serial" and lp.extent >= 2]
    if not pure:
        return
    k = pure[0]
    lp = d.loops[k]
    nxt = d.loops[k + 1] if k + 1 < len(d.loops) else None
    if nxt is not None and not nxt.rvar and nxt.kind == "serial" and rng.random() < 0.25:
        fused = _fresh(d.loops, f"{lp.name}_{nxt.name}")
        d.add(Directive(Kind.FUSE, inner=nxt.name, outer=lp.name, fused=fused))
        d.add(Directive(Kind.PARALLEL, loop=fused))
        return
    if lp.extent >= 8 and rng.random() < 0.3:
        f = _factor(rng, lp.extent, _pow2_upto(lp.extent // 2))
        if f is not None:
            d.add(Directive(Kind.PARALLEL, loop=lp.name, factor=f))
            return
    d.add(Directive(Kind.PARALLEL, loop=lp.name))


def sample_loops(p: Pipeline, name: str, extents: dict[str, int], at: bool, guard_all: bool, rng: random.Random) -> StageSchedule:
    """Loop directives of a non-inlined stage (pure definition, and update for a reduction)
    whose region at its location has `extents`."""
    s = p.stage(name)
    p_par = 0.25 if at else 0.6
    pure = DefinitionLoops(s, False, extents, guard_all)
    if s.is_reduction:  # the initialization is cheap: at most vectorize and parallelize it
        _vectorize_unroll(pure, rng, 0.5, 0.0)
        _parallelize(pure, rng, p_par)
        upd = DefinitionLoops(s, True, extents, guard_all)
        _split_and_order(upd, rng, True)
        _vectorize_unroll(upd, rng, 0.6, 0.3)
        _parallelize(upd, rng, p_par)
        return StageSchedule(tuple(pure.directives), tuple(upd.directives))
    _split_and_order(pure, rng, False)
    _vectorize_unroll(pure, rng, 0.7, 0.3)
    _parallelize(pure, rng, p_par)
    return StageSchedule(tuple(pure.directives))


def _has_guard(p: Pipeline, sched: Schedule, name: str) -> bool:
    """Does a definition of `name` have a guarded split: an explicit guard_with_if, or a
    split of a reduction loop that does not divide it (Halide guards those implicitly)?"""
    ss = sched.of(name)
    if any(d.tail == "guard_with_if" for d in ss.pure + ss.update):
        return True
    s = p.stage(name)
    if not s.is_reduction:
        return False
    loops = L.initial_loops(s, True)
    for d in ss.update:
        if d.factor:
            lp = next(x for x in loops if x.name == d.loop)
            if lp.rvar and lp.extent % d.factor:
                return True
        loops = L.apply(loops, d)
    return False


def _guarded(p: Pipeline, sched: Schedule, name: str) -> bool:
    """Does `name`, or a stage it is computed inside, have guarded (degenerate at the edge) tiles?"""
    if _has_guard(p, sched, name):
        return True
    c = sched.of(name).compute()
    return c.kind == Kind.COMPUTE_AT and _guarded(p, sched, L.need(c.consumer))


def nonaffine_read(p: Pipeline, sched: Schedule, name: str) -> bool:
    """Is `name` read through a non-affine index (a clamp of a pad, // and % of a reshape)?
    The loop-nest model evaluates a region at the first tile, which is exact for affine
    reads only; Halide's region can then be larger, and splits sized for the model's region
    grow it further, out of the inputs' bounds. Such a stage is computed inline or at root."""
    return _by_inlined(p, sched, ("nonaffine", name), lambda: _nonaffine_read(p, sched, name))


def _nonaffine_read(p: Pipeline, sched: Schedule, name: str) -> bool:
    for c in effective_consumers(p, sched, name):
        for ex in p.stage(c).exprs():
            for a in E.accesses(_effective(p, sched, ex)):
                if a.source == name and any(affine(ix) is None for ix in a.index):
                    return True
    return False


def _union_varies(p: Pipeline, sched: Schedule, name: str) -> bool:
    """Do the reads of `name` follow different index patterns (coefficients of the loop
    variables), e.g. f(i, k) by one consumer and f(j, k) by another? Then its region is a
    union whose size changes from tile to tile (the model's first tile can be the
    smallest), so its splits must never round up."""
    return _by_inlined(p, sched, ("union_varies", name), lambda: _union_varies_now(p, sched, name))


def _union_varies_now(p: Pipeline, sched: Schedule, name: str) -> bool:
    patterns = set()
    for c in effective_consumers(p, sched, name):
        for ex in p.stage(c).exprs():
            for a in E.accesses(_effective(p, sched, ex)):
                if a.source == name:
                    aff = [affine(ix) for ix in a.index]
                    patterns.add(tuple(tuple(sorted(x[0].items())) if x else None for x in aff))
    return len(patterns) > 1


def placement_context(p: Pipeline, sched: Schedule, name: str, loc: Location) -> tuple[dict[str, int], bool]:
    """What `sample_loops` needs to give stage `name` legal loops at `loc`: (the extent of
    its region per dimension there, whether every split must be tail='guard_with_if').
    `sched` must decide the consumers of `name`; the stages not decided yet stay at root
    (the default), which does not change its region."""
    memo = _memo(p)
    # Exactly what it depends on: the decisions downstream of `name` and the inlined set.
    key = (name, loc, tuple(sched.stages.get(d) for d in memo.down[name]), _inline_set(p, sched))
    hit = memo.contexts.get(key)
    if hit is None:
        trial = sched.with_stage(name, StageSchedule(location_directives(loc)))
        # Only the stage and its consumers' loops matter for its region: no validation (every
        # decision was checked as it was made) and no pseudo-code, or a 139-stage model's
        # mutation costs a full loop nest per stage (quadratic: 3.5 s per ResNet-50 mutant).
        region = loopnest.placements(p, trial, check=False, only=p.downstream(name) | {name})[name].region
        guard = loc[0] == "at" and (_guarded(p, sched, loc[1]) or _union_varies(p, sched, name))
        hit = memo.contexts.put(key, (tuple(region), guard))
    region, guard = hit
    return {d.name: e for d, e in zip(p.stage(name).dims, region)}, guard


def decide(p: Pipeline, sched: Schedule, name: str, rng: random.Random) -> StageSchedule:
    """One random legal decision for stage `name`: a StageSchedule with a location from
    `locations` and loops from `sample_loops`. `sched` must decide every consumer of `name`
    (stages are decided in `decision_order`); it is not changed."""
    loc = choose_location(p, sched, name, rng)
    if loc[0] == "inline":
        return StageSchedule(location_directives(loc))
    extents, guard = placement_context(p, sched, name, loc)
    loops = sample_loops(p, name, extents, loc[0] == "at", guard, rng)
    # No store_root / store_at: Halide then slides the window over the loops between the
    # store and compute levels, which shifts regions in ways the loop-nest model does not
    # follow (measured: out-of-bounds input reads); sampling them waits for that model.
    return StageSchedule(location_directives(loc) + loops.pure, loops.update)


def decision_order(p: Pipeline) -> list[str]:
    """The stage names in the order they are decided: outputs back to inputs, so every
    consumer is decided before its producers."""
    return [s.name for s in reversed(p.stages)]


def sample_schedule(p: Pipeline, rng: random.Random | np.random.Generator, name: str = "random") -> Schedule:
    """A random schedule that passes `validate` and Halide's lowering."""
    r = _as_random(rng)
    sched = Schedule(name=name)
    for st in decision_order(p):
        sched.stages[st] = decide(p, sched, st, r)
    validate(p, sched)
    return sched


def still_legal(p: Pipeline, sched: Schedule, name: str, ss: StageSchedule) -> bool:
    """True when decision `ss` for stage `name` is legal in `sched` (whose consumers of `name`
    may have changed since `ss` was made): its location is among `locations`, it has no
    store directive, and every split fits the region the stage now has with the right tail.
    False for what the sampler never makes (tile, store_at / store_root)."""
    loc = location_of(ss)
    if loc not in locations(p, sched, name):
        return False
    if ss.store() is not None:
        return False
    if loc[0] == "inline":
        return True
    extents, guard = placement_context(p, sched, name, loc)
    s = p.stage(name)
    for update, directives in ((False, ss.pure), (True, ss.update)):
        d = DefinitionLoops(s, update, extents, guard)
        for x in directives:
            if x.factor is not None:
                lp = next((q for q in d.loops if q.name == x.loop), None)
                if lp is None or x.factor > lp.extent or d.tail(lp.name, x.factor) != x.tail:
                    return False
            if x.kind == Kind.TILE:
                return False  # never sampled
            d.loops = L.apply(d.loops, x)
    return True


def mutate(p: Pipeline, s: Schedule, rng: random.Random | np.random.Generator, name: str = "mutant") -> Schedule:
    """`s` with one stage's decisions drawn again; producers keep theirs where still legal
    (a producer computed at a loop that no longer exists is decided again)."""
    r = _as_random(rng)
    target = r.choice(decision_order(p))
    sched = Schedule(name=name)
    for st in decision_order(p):
        prev = s.of(st)
        if st == target:
            for _ in range(8):  # try to actually change something
                new = decide(p, sched, st, r)
                if new != prev:
                    break
            sched.stages[st] = new
        elif (prev.pure or prev.update) and still_legal(p, sched, st, prev):
            sched.stages[st] = prev  # immutable: shared, not copied
        else:
            sched.stages[st] = decide(p, sched, st, r)
    carry_wrappers(p, s, sched)
    validate(p, sched)
    return sched


def carry_wrappers(p: Pipeline, parent: Schedule, child: Schedule) -> None:
    """Give `child` (rebuilt stage by stage from `parent`) each of the parent's wrappers
    that still validates with the child's stages: a search seeded with a packed schedule
    keeps exploring packed ones. One whose consumer or placement loop changed is dropped
    (the sampler makes no wrappers of its own), and one the child already has is kept as
    it is (a crossover carries from the parent its consumer's decision came from first)."""
    for k, w in sorted(parent.wrappers.items()):
        if k not in child.wrappers and not wrapper_problem(p, child, w):
            child.wrappers[k] = w
