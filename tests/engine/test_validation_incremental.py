"""The memoized paths of validation and of the sampler equal a cold recomputation.

`schedule.validate` remembers what passed per pipeline (whole schedules, and each stage by
what its checks read); the sampler remembers its region checks (by the inlined set, and a
location's region by the decisions downstream). The oracle runs each call with the
pipeline's caches emptied first. The schedules include invalid ones made by changing one
stage of a valid schedule (another schedule's decision for it, root, inlined): a change that
breaks another stage (a producer computed at a loop that no longer exists, a reader moved
out of a loop) must still be an error, with the same message.
"""

import random

import pytest

from engine import loopnest, sampler, zoo
from engine.randpipe import random_pipeline
from engine.schedule import COMPUTE_ROOT, Directive, Kind, Schedule, ScheduleError, StageSchedule, validate

PIPELINES = ("harris", "unsharp", "resnet_block", "attention", "softmax")


def _pipelines():
    return [zoo.get(n, "small") for n in PIPELINES] + [random_pipeline(s, 9, "small") for s in (5, 21)]


def _outcome(p, s: Schedule) -> str | None:
    try:
        validate(p, s)
    except ScheduleError as exc:
        return str(exc)
    return None


def _variants(p, chain: list[Schedule], other: Schedule) -> list[Schedule]:
    """Each schedule of `chain` with one stage changed: `other`'s decision for it, the
    default (root, no loops) or inlined."""
    root, inline = StageSchedule((COMPUTE_ROOT,)), StageSchedule((Directive(Kind.COMPUTE_INLINE),))
    return [s.with_stage(st.name, alt) for s in chain for st in p.stages for alt in (other.of(st.name), root, inline)]


@pytest.mark.parametrize("p", _pipelines(), ids=lambda p: p.name)
def test_validation_memo_equals_cold(p):
    rng = random.Random(len(p.stages))
    chain = [sampler.sample_schedule(p, rng)]
    for _ in range(5):
        chain.append(sampler.mutate(p, chain[-1], rng))
    cases = chain + _variants(p, chain, sampler.sample_schedule(p, rng))
    loopnest.clear_caches(p)
    warm = [_outcome(p, s) for s in cases]  # each memo filled by the ones before
    warm_again = [_outcome(p, s) for s in cases]  # every whole schedule seen: memo hits
    cold = []
    for s in cases:
        loopnest.clear_caches(p)
        cold.append(_outcome(p, s))
    assert warm == cold and warm_again == cold
    assert all(c is None for c in cold[: len(chain)])
    errors = [c for c in cold if c is not None]
    assert errors, "some changed stage breaks the schedule (else the test proves little)"


def test_a_consumer_change_breaks_its_producer_after_both_validated():
    """The producer's own directives are unchanged and were validated before: its check
    reads the consumer's loops, so the memo must not let the broken schedule pass."""
    p = zoo.get("unsharp", "small")
    rng = random.Random(0)
    for _ in range(200):
        s = sampler.sample_schedule(p, rng)
        at = [(st, ss.compute()) for st, ss in s.stages.items() if ss.compute().kind == Kind.COMPUTE_AT]
        # a producer at a loop its consumer makes by a split: the default consumer has no such loop
        at = [(st, c) for st, c in at if c.loop not in {d.name for d in p.stage(c.consumer).dims}]
        if at:
            break
    assert at, "a sampled schedule computes a stage at a split loop"
    producer, comp = at[0]
    loopnest.clear_caches(p)
    validate(p, s)
    broken = s.with_stage(comp.consumer, StageSchedule((COMPUTE_ROOT,)) if comp.consumer in p.outputs else StageSchedule())
    with pytest.raises(ScheduleError, match=f"stage '{producer}'.*has no loop"):
        validate(p, broken)
    loopnest.clear_caches(p)
    with pytest.raises(ScheduleError, match=f"stage '{producer}'.*has no loop"):
        validate(p, broken)


@pytest.mark.parametrize("name", ("harris", "resnet_block", "layernorm"))
def test_sampler_memo_equals_cold(name):
    p = zoo.get(name, "small")
    rng = random.Random(2)
    chain = [sampler.sample_schedule(p, rng)]
    for _ in range(4):
        chain.append(sampler.mutate(p, chain[-1], rng))

    def answers(cold: bool) -> list:
        out = []
        for s in chain:
            for st in sampler.decision_order(p):
                partial = Schedule({k: v for k, v in s.stages.items() if k in p.downstream(st)})  # as when st is decided
                if cold:
                    loopnest.clear_caches(p)
                locs = sampler.locations(p, partial, st)
                out.append((st, locs, sampler.nonaffine_read(p, s, st)))
                for loc in locs:
                    if loc[0] != "inline":
                        if cold:
                            loopnest.clear_caches(p)
                        out.append(sampler.placement_context(p, partial, st, loc))
        return out

    loopnest.clear_caches(p)
    warm = answers(False)
    assert warm == answers(True)
    assert any(len(x[1]) > 2 for x in warm if len(x) == 3), "some stage may be computed at a consumer's loop"


def test_mutation_chain_same_with_caches_emptied_each_step():
    p = zoo.get("unsharp", "small")
    chains = []
    for cold in (False, True):
        loopnest.clear_caches(p)
        rng = random.Random(4)
        s = sampler.sample_schedule(p, rng)
        out = [s.content_hash()]
        for _ in range(6):
            if cold:
                loopnest.clear_caches(p)
            s = sampler.mutate(p, s, rng)
            out.append(s.content_hash())
        chains.append(out)
    assert chains[0] == chains[1] and len(set(chains[0])) > 3


def test_a_schedule_near_one_that_passed_looks_up_only_the_keys_a_change_can_reach():
    """Near a schedule that passed (one stage changed), validation computes validity keys only
    for the changed stage and the compute_at stages whose key read it, not for every stage;
    the outcome is the cold one (the test above covers broken schedules)."""
    p = zoo.get("resnet_block", "small")
    rng = random.Random(3)
    loopnest.clear_caches(p)
    s = sampler.sample_schedule(p, rng)
    validate(p, s)
    lookups = []
    root = StageSchedule((COMPUTE_ROOT,))
    for st in p.stages:  # each stage made root (valid or not), a schedule not seen before
        t = s.with_stage(st.name, root)
        if t.of(st.name) == s.of(st.name):
            continue
        before = loopnest.cache_stats(p)["schedule.stages"]
        got = _outcome(p, t)
        after = loopnest.cache_stats(p)["schedule.stages"]
        lookups.append(after["hits"] + after["misses"] - before["hits"] - before["misses"])
        loopnest.clear_caches(p)
        assert got == _outcome(p, t)
        validate(p, s)  # `s` passed again: the next mutant is near it
    assert len(lookups) >= 4 and max(lookups) < len(p.stages) and min(lookups) >= 1
