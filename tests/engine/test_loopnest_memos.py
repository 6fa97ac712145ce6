"""The loop nest's cross-schedule memos give what a cold build gives.

Regions, boxes, index groups and expression summaries are memoized per pipeline by what
each depends on: a consumer's variable ranges by its placement, a box by (stage, source,
ranges) and, for a stage whose indices are all affine, only the inlined stages that can
reach the source; a part of an expression that reads no inlined stage once for all inline
closures. Chains that inline and un-inline stages (what changes those keys) are where a key
that says too little would show: every nest built along the chain, with the memos warm, must
equal the nest and features built after emptying every cache.
"""

import random

import numpy as np
import pytest

from engine import loopnest, zoo
from engine.costmodel import features as F
from engine.randpipe import random_pipeline
from engine.sampler import mutate, sample_schedule
from engine.schedule import COMPUTE_ROOT, Directive, Kind, ScheduleError, StageSchedule, validate

PIPELINES = [zoo.get(n, "small") for n in ("harris", "unsharp", "resnet_block", "mobilenet_block", "attention")]
PIPELINES += [random_pipeline(seed, 9, "small") for seed in (4, 11)]


def _toggling_chain(p, rng, n=12):
    """Mutations, and about half the steps a stage made root or inlined (the keys' inline closures change)."""
    cur = sample_schedule(p, rng)
    out = [cur]
    root, inline = StageSchedule((COMPUTE_ROOT,)), StageSchedule((Directive(Kind.COMPUTE_INLINE),))
    for _ in range(n):
        if rng.random() < 0.5:
            cur = mutate(p, cur, rng)
        else:
            st = rng.choice(p.stages)
            cur = cur.with_stage(st.name, inline if rng.random() < 0.6 and not st.is_reduction and st.name not in p.outputs else root)
        out.append(cur)
    return out


def _regions(nest):
    return {
        (src, st.name, per): nest.required_region(src, st.name, per)
        for st in nest.pipeline.stages
        if nest.placements[st.name].compute != "inline"
        for src in nest.effective_sources(st.name)
        for per in ("iteration", "realization")
    }


def _summary(nest):
    p = nest.pipeline
    flops = {st.name: [nest.effective_flops(e) for e in st.exprs()] for st in p.stages}
    counts = {st.name: [nest.effective_access_counts(e) for e in st.exprs()] for st in p.stages}
    return _regions(nest), flops, counts, nest.placements


@pytest.mark.parametrize("p", PIPELINES, ids=lambda p: p.name)
def test_warm_memos_equal_a_cold_build_over_inline_toggles(p):
    rng = random.Random(f"memos-{p.name}")
    F.clear_caches(p)
    warm = []
    for s in _toggling_chain(p, rng):
        try:
            validate(p, s)
        except ScheduleError:  # an inlined stage a compute_at producer needed: not a schedule
            continue
        nest = loopnest.build(p, s)  # a valid schedule builds: a crash here (a stale memo) fails the test
        warm.append((s, _summary(nest), F.featurize(nest)))
    assert len(warm) >= 6
    stats = loopnest.cache_stats(p)
    assert stats["loopnest.boxes"]["hits"] > 0 and stats["loopnest.ranges"]["hits"] > 0
    for s, summary, feats in warm:
        F.clear_caches(p)
        nest = loopnest.build(p, s)
        assert _summary(nest) == summary
        for a, b in zip(feats, F.featurize(nest)):
            assert a.dtype == b.dtype and np.array_equal(a, b)  # bit for bit


def test_a_box_is_reused_when_an_unrelated_reader_is_inlined():
    """harris: inlining Ix puts it in Ixy's inline closure, but Ixy reads Iy as before: its
    boxes of Iy come from the memo (no new entry), and equal a cold build's."""
    p = zoo.get("harris", "small")
    root = StageSchedule((COMPUTE_ROOT,))
    inline = StageSchedule((Directive(Kind.COMPUTE_INLINE),))
    base = sample_schedule(p, random.Random(0))
    for st in p.stages:
        base = base.with_stage(st.name, root)
    other = base.with_stage("Ix", inline)
    F.clear_caches(p)
    a = loopnest.build(p, base)
    boxes = a.context.c.boxes

    def ixy_of_iy():
        return sum(1 for k in boxes.keys() if k[:2] == ("Ixy", "Iy"))

    first = _regions(a)
    n = ixy_of_iy()
    b = loopnest.build(p, other)
    second = _regions(b)
    assert a.inline_closure("Ixy") != b.inline_closure("Ixy")
    assert n > 0 and ixy_of_iy() == n
    assert second[("Iy", "Ixy", "realization")] == first[("Iy", "Ixy", "realization")]
    F.clear_caches(p)
    assert _regions(loopnest.build(p, other)) == second
