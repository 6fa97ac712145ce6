"""Segmented compilation (engine/segments.py): a large pipeline compiled as several Halide
pipelines computes exactly what the single pipeline computes, shares code between
identical segments, keeps groups that must compile together, and profiles in real names."""

import random

import numpy as np
import pytest

from engine import api, randpipe, sampler, segments, zoo
from engine import halide_backend as HB
from engine import reference as R
from engine.heuristic import heuristic_schedule
from engine.measure import Runner
from engine.ops import Builder
from engine.schedule import S, default_schedule
from engine.worker import capture_fds


def resnet_like(blocks: int, c: int = 4, hw: int = 10) -> object:
    """A chain of identical conv-relu-conv-add blocks (weights shared: a network repeats shapes)."""
    b = Builder("chain", f"{blocks} identical residual blocks")
    x = b.input("input", (1, c, hw, hw))
    w1, w2 = b.input("w1", (c, c, 3, 3), -0.3, 0.3), b.input("w2", (c, c, 1, 1), -0.3, 0.3)
    for k in range(blocks):
        h = b.activation(f"relu{k}", b.conv2d(f"conva{k}", x, w1, pad=1), "relu")
        x = b.add(f"add{k}", b.conv2d(f"convb{k}", h, w2), x, then_relu=True)
    return b.build([x])


def run(p, sched, segmented, max_stages=segments.MAX_SEGMENT_STAGES, seed=0):
    low = segments.lower(p, sched, segmented, max_stages)
    low.compile()
    ins = R.make_inputs(p, seed)
    keep = low.bind(ins)
    outs = HB.output_arrays(p)
    low.runner(outs)()
    del keep
    return low, ins, outs


@pytest.mark.parametrize("seed", [3, 11, 17, 29])
def test_segmented_computes_what_the_whole_pipeline_computes(seed) -> None:
    p = randpipe.random_pipeline(seed, max_stages=8)
    rng = random.Random(seed)
    for sched in [default_schedule(p), heuristic_schedule(p), sampler.sample_schedule(p, rng), sampler.sample_schedule(p, rng)]:
        low, ins, seg = run(p, sched, True, max_stages=2)
        assert isinstance(low, segments.Segmented) and len(low.parts) >= 2 or len(segments.units(p, sched)) == 1
        _, _, whole = run(p, sched, False)
        for o in p.outputs:
            np.testing.assert_allclose(seg[o], whole[o], rtol=1e-5, atol=1e-6, err_msg=f"{p.name} {sched.to_json()}")
        refs, method = R.reference(p, ins)
        assert R.verify(p, seg, refs, method).ok


def test_identical_segments_compile_once_and_an_edit_recompiles_one() -> None:
    segments.clear_cache()
    p = resnet_like(6)
    low, ins, outs = run(p, default_schedule(p), True)
    assert isinstance(low, segments.Segmented)
    assert len(low.parts) > low.unique and low.compiles == low.unique < len(p.stages)
    refs, method = R.reference(p, ins)
    assert R.verify(p, outs, refs, method).ok
    arrays = low.runner(HB.output_arrays(p)).arrays  # buffers between segments: reused once read for the last time
    assert len({a.ctypes.data for a in arrays.values()}) <= 6 < len(arrays)  # a handful of memory blocks, however many blocks
    again = segments.lower(p, default_schedule(p), True)
    again.compile()
    assert again.compiles == 0  # every segment came from the process's cache
    edited = default_schedule(p)
    S(edited, "conva3").vectorize("x", 8)
    low2, _, outs2 = run(p, edited, True)
    assert low2.compiles == 1  # only the edited stage's segment is new
    np.testing.assert_allclose(outs2[p.outputs[0]], outs[p.outputs[0]], rtol=1e-5, atol=1e-6)


def test_partition_keeps_compute_at_groups_and_repeats_inlined_producers() -> None:
    p = zoo.get("unsharp", "small")
    sched = default_schedule(p)
    S(sched, "gray_c").compute_inline()  # read by sharpen and by ratio
    S(sched, "blur_y").compute_at("blur_x", "y")
    parts = segments.partition(p, sched, max_stages=1)
    where = {n: [k for k, seg in enumerate(parts) if n in seg.stages] for n in p.stage_map}
    assert where["blur_y"] == where["blur_x"]  # computed inside blur_x's loops: same segment
    assert len(where["gray_c"]) == 2  # inlined: repeated in each segment that reads it
    for seg in parts:
        assert "gray_c" not in seg.inputs and "gray_c" not in seg.outputs
        assert all(i in p.input_map or any(i in other.outputs for other in parts) for i in seg.inputs)
    _, ins, outs = run(p, sched, True, max_stages=1)
    refs, method = R.reference(p, ins)
    assert R.verify(p, outs, refs, method).ok


def test_a_tail_that_writes_past_its_extent_is_not_cut_from_its_consumer() -> None:
    p = zoo.get("blur", "small")  # blur_x is 66x64: x split by 6 and rounded up writes past it
    sched = default_schedule(p)
    assert p.stage("blur_x").shape == (66, 64)
    S(sched, "blur_x").split("x", "xo", "xi", 6, tail="round_up")
    assert len(segments.units(p, sched)) == 1
    S(sched, "blur_x").split("y", "yo", "yi", 2)  # dividing factor, Halide's auto tail: fine alone
    plain = default_schedule(p)
    S(plain, "blur_x").split("y", "yo", "yi", 2)
    assert len(segments.units(p, plain)) == 2
    _, ins, outs = run(p, sched, True, max_stages=1)
    refs, method = R.reference(p, ins)
    assert R.verify(p, outs, refs, method).ok


def test_profile_of_a_segmented_run_is_in_real_stage_names() -> None:
    p = zoo.get("unsharp", "full")
    low, ins, _ = run(p, default_schedule(p), True, max_stages=1)
    low.compile(profile=True)
    keep = low.bind(ins)
    r = low.runner(HB.output_arrays(p))
    totals = low.profile_totals(capture_fds(lambda: [r() for _ in range(20)]))
    del keep
    assert set(totals) == set(p.stage_map) and sum(totals.values()) > 0
    assert totals["blur_y"] > 0 and totals["blur_x"] > 0


def test_a_large_pipeline_is_measured_segmented_and_verified() -> None:
    p = resnet_like(13)
    assert len(p.stages) >= segments.SEGMENT_MIN_STAGES
    with Runner(1) as runner:
        m = api.measure(p, heuristic_schedule(p), runner, None, min_time_s=0.0, min_runs=2, profile=True, timeout_s=300.0)
    assert m.ok and m.verified, m.error
    assert set(m.stages) == set(p.stage_map) and sum(m.stages.values()) == pytest.approx(m.median_ms, rel=0.01)


def test_a_stage_read_only_through_inlined_copies_is_still_passed_between_segments() -> None:
    # a -> i (inlined) -> c1, c2: the segment holding a and c1 also holds a copy of i, yet
    # c2's segment reads a through its own copy of i, so a must leave the first segment.
    b = Builder("diamond", "a producer read only through an inlined stage")
    x = b.input("input", (12, 16))
    a = b.activation("a", x, "tanh")
    i = b.activation("i", a, "relu")
    c1 = b.activation("c1", i, "sigmoid")
    c2 = b.add("c2", i, c1)
    p = b.build([c2])
    sched = default_schedule(p)
    S(sched, "i").compute_inline()
    parts = segments.partition(p, sched, max_stages=2)
    assert [seg.stages for seg in parts] == [("a", "i", "c1"), ("i", "c2")]
    assert "a" in parts[0].outputs and "a" in parts[1].inputs
    _, ins, outs = run(p, sched, True, max_stages=2)
    refs, method = R.reference(p, ins)
    assert R.verify(p, outs, refs, method).ok
