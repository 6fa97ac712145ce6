"""Compositional regions and incremental features equal the substituted, from-scratch ones.

The loop-nest model composes interval bounds (and FLOPs, access counts, index forms)
through inlined stages instead of substituting their expression trees, and caches
placements and feature rows per pipeline. The oracles here are the substituted trees
themselves: `_ref_region_needed` is the former implementation, kept only in this file.
Comparisons are exact: regions and counts are integers, and feature rows are compared
bit for bit (float32 arrays equal with `np.array_equal`, NaN-free).
"""

import math
import random
from collections import Counter

import numpy as np
import pytest

from engine import expr as E
from engine import loopnest, zoo
from engine.costmodel import features as F
from engine.hand_schedules import hand_schedule
from engine.ir import Dim, Input, Pipeline, Stage, access_box
from engine.loopnest import LRU, IndexForm
from engine.randpipe import random_pipeline
from engine.sampler import mutate, sample_schedule
from engine.schedule import S, Schedule, default_schedule


# --- the oracle: regions by substituting inlined stages (the implementation before issue 12) ---
def _effective(p, pl, e, keep=None):
    return loopnest.substitute_inlined(p, lambda name: name != keep and name in pl and pl[name].compute == "inline", e)


def _ref_box(p, pl, stage, source, ranges, shape):
    s = p.stage(stage)
    upd = _effective(p, pl, s.update) if s.update is not None else None
    eff = type(s)(s.name, s.dims, _effective(p, pl, s.value), s.rdom, upd, s.reduce)
    return access_box(eff, source, ranges, shape)


def _ref_region_needed(p, pl, producer, consumer, loop_idx):
    cs = p.stage(consumer)
    inner = pl[consumer].loops[loop_idx + 1 :]
    full = {d.name: e for d, e in zip(cs.dims, pl[consumer].region or cs.shape)} | {r.name: r.extent for r in cs.rdom}
    span = dict.fromkeys(full, 1)
    for lp in inner:
        for part in lp.parts:
            span[part.dim] += (lp.extent - 1) * part.stride
    shape = p.shape_of(producer)
    boxes = [_ref_box(p, pl, consumer, producer, {k: (0, min(span[k], full[k]) - 1) for k in full}, shape)]
    names = [lp.name for lp in pl[consumer].loops]
    downstream = p.downstream(producer)
    for d, dpl in pl.items():
        if d not in downstream or dpl.compute != "at" or dpl.at[0] != consumer or names.index(dpl.at[1]) < loop_idx:
            continue
        ds = p.stage(d)
        ext = _ref_region_needed(p, pl, d, consumer, loop_idx)
        ranges = {dim.name: (0, e - 1) for dim, e in zip(ds.dims, ext)} | {r.name: (0, r.extent - 1) for r in ds.rdom}
        boxes.append(_ref_box(p, pl, d, producer, ranges, shape))
    boxes = [b for b in boxes if b]
    if not boxes:
        return shape
    return tuple(max(b[k][1] for b in boxes) - min(b[k][0] for b in boxes) + 1 for k in range(len(shape)))


def _frozen(aff):
    return None if aff is None else (tuple(sorted(aff[0].items())), aff[1])


def _ref_forms(eff):
    """(source, index forms) -> count over the accesses of a substituted expression."""
    out = Counter()
    for a in E.accesses(eff):
        forms = tuple(
            IndexForm((ix.value,) if isinstance(ix, E.Const) else None, _frozen(E.affine(ix)), frozenset(E.variables(ix))) for ix in a.index
        )
        out[(a.source, forms)] += 1
    return dict(out)


def check_against_substitution(p, s):
    """Every region, allocation and effective quantity of the nest equals the substituted one."""
    nest = loopnest.build(p, s)
    pl = nest.placements
    checked = 0
    for name, place in pl.items():
        st = p.stage(name)
        if place.compute == "at":
            cons, loop = place.at
            idx = [lp.name for lp in pl[cons].loops].index(loop)
            assert place.region == _ref_region_needed(p, pl, name, cons, idx), (name, place.at)
            if place.store is None and s.of(name).store() is None:
                assert place.allocation == place.region
        for ex in st.exprs():
            eff = _effective(p, pl, ex)
            assert nest.effective_flops(ex) == E.flops(eff)
            assert nest.effective_access_counts(ex) == dict(Counter(a.source for a in E.accesses(eff)))
            assert nest.effective_accesses(ex) == _ref_forms(eff)
            for keep in nest.inline_closure(name):
                kept = Counter(a.source for a in E.accesses(_effective(p, pl, ex, keep)))
                assert nest.effective_access_counts(ex, keep=keep) == dict(kept)
        order = list(dict.fromkeys(a.source for ex in st.exprs() for a in E.accesses(_effective(p, pl, ex))))
        assert nest.effective_sources(name) == order
        if place.compute == "inline":
            continue
        last = len(place.loops) - 1
        for src in set(order) | set(p.producers(name)):
            for per, idx in (("iteration", last), ("realization", -1)):
                assert nest.required_region(src, name, per) == _ref_region_needed(p, pl, src, name, idx), (src, name, per)
                checked += 1
    return checked


def schedules(p, rng, n_sampled, n_mutants):
    out = [default_schedule(p)]
    try:
        out.append(hand_schedule(p))
    except KeyError:
        pass
    out += [sample_schedule(p, rng) for _ in range(n_sampled)]
    cur = out[-1]
    for _ in range(n_mutants):
        cur = mutate(p, cur, rng)
        out.append(cur)
    return out


@pytest.mark.parametrize("name", zoo.names())
def test_regions_equal_substituted_on_the_zoo(name):
    for size, n in (("small", 4), ("full", 2)):
        p = zoo.get(name, size)
        rng = random.Random(f"{name}:{size}")
        assert sum(check_against_substitution(p, s) for s in schedules(p, rng, n, n)) > 0


def test_regions_equal_substituted_on_random_pipelines():
    for seed in range(40):
        p = random_pipeline(seed, 8, "small")
        rng = random.Random(seed)
        for s in schedules(p, rng, 2, 2):
            check_against_substitution(p, s)


def test_a_fully_inlined_harris_composes_the_same_regions():
    p = zoo.get("harris", "full")
    s = Schedule()
    for st in p.stages:
        if st.name not in p.outputs:
            S(s, st.name).compute_inline()
    S(s, p.outputs[0]).split("y", "yo", "yi", 32).parallel("yo")
    nest = loopnest.build(p, s)
    out = p.outputs[0]
    assert nest.inline_closure(out) == {st.name for st in p.stages} - {out}
    assert nest.required_region("input", out, "iteration") == _ref_region_needed(p, nest.placements, "input", out, 2)
    assert nest.required_region("input", out, "realization") == (3, 2052, 2052)
    check_against_substitution(p, s)


def _edge_pipeline():
    """Inlined stages that drop an index (`half` ignores y), read data-dependent indices
    (`gather` indexes `a` by a value of `half`), and multiply two variables that a consumer
    substitutes a constant for (`prod` at (0, y) is affine, at (x, 1) too, in general not);
    and the closed form of affine indices: negative multiples and a variable minus itself
    (`neg`, whose interval is wider than its values), composed through `shift`."""
    a = Input("a", (32, 32))
    x, y = E.Var("x"), E.Var("y")
    dims = (Dim("y", 4), Dim("x", 4))
    half = Stage("half", dims, E.Access("a", (x, E.Const(0))) * 2.0)
    prod = Stage("prod", dims, E.Access("a", (x * y, y - y + 3)))
    gather = Stage("gather", dims, E.Access("a", (E.Access("half", (y, x)), x)) + E.Access("half", (E.Access("half", (x, y)), y)))
    neg = Stage("neg", (Dim("y", 8), Dim("x", 8)), E.Access("a", (E.Const(7) - x, E.Const(-1) * y + 14 + (y - y))))
    shift = Stage("shift", dims, E.Access("neg", (y, E.Const(3) - x)) + E.Access("neg", ((y - y) + 3, 2 * x)))
    reads = [
        E.Access("gather", (y, x)),
        E.Access("prod", (E.Const(0), y)),
        E.Access("prod", (x, E.Const(1))),
        E.Access("half", (y, x + 1 - 1)),
        E.Access("shift", (3 - y, x)),
        E.Access("neg", (x, y)),
    ]
    out = Stage("out", dims, reads[0] + reads[1] + reads[2] + reads[3] + reads[4] + reads[5])
    return Pipeline("edges", [a], [half, prod, gather, neg, shift, out], ["out"])


def test_edge_cases_of_substitution():
    p = _edge_pipeline()
    subsets = ([], ["half"], ["prod"], ["half", "prod"], ["half", "prod", "gather"], ["gather"], ["neg"], ["shift"], ["neg", "shift"])
    for inl in subsets + (["shift", "neg@y"], ["half", "shift@y", "neg@y"], ["shift@x", "neg@y"]):
        s = Schedule()
        for n in inl:
            if "@" in n:  # computed at a loop of out (both: siblings whose needs join)
                S(s, n.split("@")[0]).compute_at("out", n.split("@")[1])
            else:
                S(s, n).compute_inline()
        S(s, "out").vectorize("x", 4)
        check_against_substitution(p, s)
        F.clear_caches(p)
        x, ei, ef = F.featurize(loopnest.build(p, s))
        assert np.isfinite(x).all() and np.isfinite(ef).all()


# --- incremental features ---------------------------------------------------------------------
def featurize_cold(p, s):
    F.clear_caches(p)
    return F.featurize(loopnest.build(p, s))


def assert_same(a, b):
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        assert np.array_equal(u, v)  # bit for bit (NaN-free: featurize's outputs are finite)


@pytest.mark.parametrize(
    "p",
    [zoo.get(n, "small") for n in zoo.names()]
    + [zoo.get(n, "full") for n in ("harris", "unsharp", "resnet_block", "conv_relu")]
    + [random_pipeline(seed, 8, "small") for seed in range(12)],
    ids=lambda p: f"{p.name}-{p.stages[0].shape}",
)
def test_incremental_rows_equal_full_recomputation_over_mutation_chains(p):
    rng = random.Random(p.name)
    F.clear_caches(p)
    cur = sample_schedule(p, rng)
    chain = [cur]
    for _ in range(12):
        cur = mutate(p, cur, rng) if rng.random() < 0.85 else sample_schedule(p, rng)
        chain.append(cur)
    warm = [F.featurize(loopnest.build(p, s)) for s in chain]  # caches grow along the chain
    hits = sum(v["hits"] for k, v in loopnest.cache_stats(p).items() if k == "features.rows")
    assert hits > 0  # the chain did reuse rows
    for s, inc in zip(chain, warm):
        full = featurize_cold(p, s)
        assert np.isfinite(full[0]).all()
        assert_same(inc, full)
        assert_same(inc, F.featurize(loopnest.build(p, s)))  # and once more from the caches
        raw = F.stage_features(loopnest.build(p, s), log=False)
        F.clear_caches(p)
        assert np.array_equal(raw, F.stage_features(loopnest.build(p, s), log=False))


def test_rows_from_cached_placement_values_equal_cold_rows():
    # A row whose stage kept its placement (another stage inlined or not, a producer placed at it
    # changed) takes its placement's values from the `placed` cache: equal to a cold row.
    p = zoo.get("harris", "small")
    rng = random.Random(7)
    F.clear_caches(p)
    cur = sample_schedule(p, rng)
    chain = [cur]
    for _ in range(40):
        cur = mutate(p, cur, rng)
        chain.append(cur)
    warm = [F.stage_features(loopnest.build(p, s), log=False) for s in chain]
    stats = loopnest.cache_stats(p)
    assert stats["features.placed"]["hits"] > 0 and stats["features.rows"]["misses"] > stats["features.placed"]["misses"]
    for s, row in zip(chain, warm):
        F.clear_caches(p)
        assert np.array_equal(row, F.stage_features(loopnest.build(p, s), log=False))


def test_one_stage_change_recomputes_only_its_rows():
    p = zoo.get("harris", "full")
    s = hand_schedule(p)
    F.clear_caches(p)
    base = F.featurize(loopnest.build(p, s))
    before = loopnest.cache_stats(p)["features.rows"]
    out = p.outputs[0]
    t = s.copy()
    t.stages[out] = t.of(out).with_definition(False, [d for d in t.of(out).pure if d.kind != "vectorize"])  # the output alone changes
    nest = loopnest.build(p, t)
    changed = F.featurize(nest)
    after = loopnest.cache_stats(p)["features.rows"]

    def inside_out(name):  # computed within the output's loops, which changed
        pl = nest.placements[name]
        return name == out or (pl.compute == "at" and inside_out(pl.at[0]))

    redo = [st.name for st in p.stages if inside_out(st.name)]
    assert 1 < len(redo) < len(p.stages)
    assert after["misses"] - before["misses"] == len(redo) and after["hits"] - before["hits"] == len(p.stages) - len(redo)
    k = [st.name for st in p.stages].index(out)
    assert not np.array_equal(base[0][k], changed[0][k])
    assert_same(changed, featurize_cold(p, t))


def test_caches_are_capped_lru():
    c = LRU(3)
    for k in range(3):
        c.put(k, str(k))
    assert c.get(0) == "0"  # 0 is now the most recent
    c.put(3, "3")
    assert len(c) == 3 and c.get(1) is None and c.get(0) == "0" and c.get(3) == "3"
    assert c.hits == 3 and c.misses == 1
    p = zoo.get("blur", "small")
    F.clear_caches(p)
    F.featurize(loopnest.build(p, default_schedule(p)))
    stats = loopnest.cache_stats(p)
    assert stats["features.rows"]["entries"] == len(p.stages) and stats["loopnest.placements"]["entries"] == len(p.stages)
    F.clear_caches(p)
    assert loopnest.cache_stats(p) == {}


def test_required_region_is_the_whole_producer_when_read_elsewhere():
    p = zoo.get("blur", "small")
    s = Schedule()
    S(s, "blur_x").compute_root()
    nest = loopnest.build(p, s)
    assert nest.required_region("input", "blur_y") == p.shape_of("input")  # blur_y reads input only through blur_x
    assert math.prod(nest.required_region("blur_x", "blur_y", "realization")) == 66 * 64


def _without_constants(nest, st, update):
    """`effective_accesses` of one definition, the constants left out, counted together."""
    out = Counter()
    for (src, forms), n in nest.effective_accesses(st.update if update else st.value).items():
        out[(src, tuple((f.affine[0], f.variables) for f in forms))] += n
    return out


@pytest.mark.parametrize(
    "p",
    [zoo.get(n, "small") for n in ("harris", "unsharp", "resnet_block", "attention")] + [random_pipeline(s, 9, "small") for s in (2, 9)],
    ids=lambda p: p.name,
)
def test_access_classes_equal_the_substituted_accesses(p):
    """`LoopNest.access_classes` (composed per pattern, offsets together) counts what the
    accesses composed one by one count, per source and per index's coefficients and variables."""
    rng = random.Random(4)
    checked = 0
    for _ in range(6):
        nest = loopnest.build(p, sample_schedule(p, rng))
        for st in p.stages:
            for update in (False, True) if st.update is not None else (False,):
                classes = nest.access_classes(st.name, update)
                if classes is None:
                    continue
                got = Counter()
                for (src, axes), n in classes.items():
                    got[(src, tuple((tuple((v, a - b) for v, a, b in terms if a != b), vs) for terms, vs in axes))] += n
                assert got == _without_constants(nest, st, update)
                checked += 1
    assert checked > 10
