"""The loop-nest model: loops, placements, regions and pseudo-code, checked against Halide."""

import re

from engine import halide_backend as HB
from engine import loopnest, zoo
from engine.schedule import S, Schedule, default_schedule
from engine.worker import capture_fds


def conv_schedule() -> Schedule:
    s = Schedule()
    S(s, "conv_pad").compute_inline()
    S(s, "relu").split("c", "co", "ci", 4).parallel("co")
    S(s, "conv").compute_at("relu", "co").vectorize("x", 8)
    S(s, "conv").update().split("rc", "rco", "rci", 2).reorder("x", "c", "rx", "ry", "rci", "rco").vectorize("x", 8).unroll("rx")
    return s


def test_default_schedule_nest():
    p = zoo.get("blur", "small")
    nest = loopnest.build(p, default_schedule(p))
    assert nest.placements["blur_x"].compute == "root"
    assert nest.placements["blur_x"].region == (66, 64)
    text = nest.render()
    assert text.index("produce blur_x") < text.index("produce blur_y")
    assert "for y in [0, 66):" in text


def test_compute_at_region_and_realizations():
    p = zoo.get("blur", "full")
    s = Schedule()
    S(s, "blur_y").tile("x", "y", "xo", "yo", "xi", "yi", 256, 32).vectorize("xi", 16).parallel("yo")
    S(s, "blur_x").compute_at("blur_y", "xo").vectorize("x", 16)
    nest = loopnest.build(p, s)
    bx = nest.placements["blur_x"]
    assert bx.compute == "at" and bx.at == ("blur_y", "xo")
    assert bx.region == (34, 256)  # 32 rows plus the 3-tap stencil's 2 extra
    assert bx.realizations == 64 * 8
    assert [lp.name for lp in nest.placements["blur_y"].loops] == ["yo", "xo", "yi", "xi", "xi_v"]
    assert [lp.kind for lp in nest.placements["blur_y"].loops] == ["parallel", "serial", "serial", "serial", "vectorized"]
    text, spans = nest.render_with_spans()
    first, last = spans["blur_x"]
    assert text.splitlines()[first].strip().startswith("produce blur_x")
    assert spans["blur_y"][0] < first <= last < spans["blur_y"][1]


def test_store_root_allocation_and_inlining():
    p = zoo.get("blur", "small")
    s = Schedule()
    S(s, "blur_x").store_root().compute_at("blur_y", "y")
    bx = loopnest.build(p, s).placements["blur_x"]
    assert bx.region == (3, 64) and bx.realizations == 64
    assert bx.allocation == (66, 64)  # store_root: the whole buffer lives at root
    s2 = Schedule()
    S(s2, "blur_x").compute_inline()
    nest = loopnest.build(p, s2)
    assert nest.placements["blur_x"].inlined_into == ["blur_y"]
    assert "blur_x is inlined into blur_y" in nest.render()
    assert nest.required_region("input", "blur_y") == (3, 3)


def test_loop_kinds_agree_with_halide():
    p = zoo.get("conv_relu", "small")
    s = conv_schedule()
    ours = loopnest.build(p, s)
    halide = capture_fds(lambda: HB.lower(p, s).hl_pipeline.print_loop_nest())
    for kind, word in (("parallel", "parallel"), ("vectorized", "vectorized"), ("unrolled", "unrolled")):
        mine = sum(
            lp.kind == kind for pl in ours.placements.values() for lp in pl.loops + (pl.pure_loops if pl.loops is not pl.pure_loops else [])
        )
        theirs = len(re.findall(rf"^\s*{word} ", halide, re.M))
        assert mine == theirs, (kind, mine, theirs, halide)
    conv = ours.placements["conv"]
    assert conv.region == (1, 4, 16, 16) and conv.realizations == 2
    assert [lp.name for lp in conv.loops] == ["n", "rco", "y", "rci", "ry", "rx", "c", "x", "x_v"]
