"""A loop nest built from the previous one (its parent: the last nest built of the pipeline,
when the schedules differ in a few stages) equals the nest built whole.

`loopnest.build` starts from a recent nest and recomputes only the stages a change can
reach (the changed ones, those computed or stored at a consumer placed differently, the
inline closures downstream of a stage that was inlined or no longer is); the stage keys it
keeps from the parent are those outside `dirty`. The oracle is the same build with no
recent nest to start from.
"""

import random

import pytest

from engine import loopnest, zoo
from engine.costmodel import features as F
from engine.randpipe import random_pipeline
from engine.sampler import mutate, sample_schedule
from engine.schedule import COMPUTE_ROOT, Directive, Kind, StageSchedule

PIPELINES = [zoo.get(n, "small") for n in ("harris", "unsharp", "resnet_block", "attention", "mobilenet_block")]
PIPELINES += [random_pipeline(seed, 9, "small") for seed in (3, 8)]


def _whole(p, s):
    """The nest built with no recent nest to start from."""
    c = loopnest.pipeline_cache(p, "loopnest", lambda: None)
    saved, c.recent = c.recent, []
    try:
        return loopnest.build(p, s, check=False)
    finally:
        c.recent = saved


def _chain(p, rng, n=14):
    cur = sample_schedule(p, rng)
    out = [cur]
    root, inline = StageSchedule((COMPUTE_ROOT,)), StageSchedule((Directive(Kind.COMPUTE_INLINE),))
    for _ in range(n):
        r = rng.random()
        if r < 0.75:
            cur = mutate(p, cur, rng)
        else:  # a stage made root or inlined (valid or not: the nest is built without checks)
            st = rng.choice(p.stages)
            cur = cur.with_stage(st.name, root if r < 0.9 or st.is_reduction or st.name in p.outputs else inline)
        out.append(cur)
    return out


@pytest.mark.parametrize("p", PIPELINES, ids=lambda p: p.name)
def test_nest_from_parent_equals_whole_build(p):
    rng = random.Random(p.name)
    F.clear_caches(p)
    from_parent = 0
    for s in _chain(p, rng):
        try:
            nest = loopnest.build(p, s, check=False)
        except Exception as exc:  # noqa: BLE001  # a root/inline change can break a compute_at producer: both builds fail alike
            with pytest.raises(type(exc)):
                _whole(p, s)
            continue
        ctx = nest.context
        if ctx.parent is not None:
            from_parent += 1
            parent = ctx.parent()
            assert parent is not None and ctx.dirty is not None
            for st in p.stages:  # a key kept from the parent is the parent's
                if st.name not in ctx.dirty:
                    assert nest.stage_key(st.name) == parent.stage_key(st.name)
        whole = _whole(p, s)
        assert whole.context.parent is None
        assert nest.placements == whole.placements
        assert [nest.stage_key(st.name) for st in p.stages] == [whole.stage_key(st.name) for st in p.stages]
        assert nest.render_with_spans() == whole.render_with_spans()
        for st in p.stages:
            if nest.placements[st.name].compute != "inline":
                for src in nest.effective_sources(st.name):
                    for per in ("iteration", "realization"):
                        assert nest.required_region(src, st.name, per) == whole.required_region(src, st.name, per)
    assert from_parent >= 8  # the chain did take the parent path


def test_fresh_schedules_are_built_whole_and_recent_nests_are_capped():
    p = zoo.get("harris", "small")
    rng = random.Random(0)
    loopnest.clear_caches(p)
    first = loopnest.build(p, sample_schedule(p, rng))
    assert first.context.parent is None
    c = loopnest.pipeline_cache(p, "loopnest", lambda: None)
    for _ in range(5):
        loopnest.build(p, mutate(p, first.schedule, rng))
    assert len(c.recent) == loopnest.RECENT_NESTS
    # one stage changed: from the parent, with only that stage and those it reaches dirty
    out = p.outputs[0]
    t = first.schedule.with_stage(out, StageSchedule((COMPUTE_ROOT,)))
    c.recent = [first.context]
    nest = loopnest.build(p, t)
    assert nest.context.parent is not None and out in nest.context.dirty
    assert len(nest.context.dirty) < len(p.stages)
