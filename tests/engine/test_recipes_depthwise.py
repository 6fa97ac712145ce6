"""Depthwise convs, their paddings and root (projection) convs follow the target
(engine/recipes.py depthwise_block, depthwise_lanes, pad_lanes, conv_root_rows; engine/
heuristic.py): a depthwise conv with a pointwise consumer is computed per tile of channel x
rows in a buffer whose rows round up to whole vectors, one that is an output unrolls a block
of rows, a conv at root blocks channels x rows in full vectors, and the schedules verify."""

import pytest

from engine import api
from engine.heuristic import plan
from engine.measure import Runner
from engine.ops import Builder
from engine.recipes import depthwise_lanes, pad_lanes, rows_blocking, vector_target
from engine.schedule import Directive, Schedule, validate

AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"
VERIFY_ONLY = {"min_time_s": 0.0, "min_runs": 1, "warmup": 1, "profile": False}


def _directive(s: Schedule, stage: str, kind: str, update: bool, **match: object) -> Directive:
    ss = s.of(stage)
    return next(d for d in (ss.update if update else ss.pure) if d.kind == kind and all(getattr(d, k) == v for k, v in match.items()))


def _separable(w: int, stride: int = 1, act: bool = True, pad: int = 1) -> Builder:
    """A MobileNet piece: a depthwise 3x3 conv of 8 channels at width `w` (+ ReLU6 unless not `act`)."""
    b = Builder(f"dw{w}s{stride}", "depthwise conv")
    x = b.input("x", (1, 8, w, w))
    dw = b.conv2d("dw", x, b.input("dw_w", (8, 1, 3, 3)), b.input("dw_b", (8,)), stride=stride, pad=pad, groups=8)
    return b.build([b.activation("act", dw, "relu6") if act else dw])


def test_depthwise_lanes_round_rows_up_least():
    # AVX-512: W=56 in 8-lane vectors (7 exact; 16 lanes waste 8), W=14 and 28 in 16 (ties:
    # the wider), W=7 one 8-lane vector; AVX2: always 8 (256-bit vectors stay whole).
    got = {(t, w): depthwise_lanes(w, t) for t in (AVX2, AVX512) for w in (7, 14, 28, 56, 112)}
    assert got == {
        (AVX2, 7): 8, (AVX2, 14): 8, (AVX2, 28): 8, (AVX2, 56): 8, (AVX2, 112): 8,
        (AVX512, 7): 8, (AVX512, 14): 16, (AVX512, 28): 16, (AVX512, 56): 8, (AVX512, 112): 16,
    }  # fmt: skip
    assert pad_lanes(AVX2) == pad_lanes(AVX512) == 4 and pad_lanes("x86-64-linux") <= 4


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_a_depthwise_conv_with_a_pointwise_consumer_is_blocked_per_tile(target):
    for w, stride in ((56, 1), (14, 1), (7, 1), (28, 2)):
        p = _separable(w, stride)
        pl = plan(p, target)
        assert "depthwise_block" in pl.rules["dw"] and "depthwise_block" in pl.rules["act"], pl.rules
        out_w = p.shape_of("act")[-1]
        vw = depthwise_lanes(out_w, target)
        assert _directive(pl.schedule, "dw", "split", True, inner="x_v").factor == vw
        assert _directive(pl.schedule, "dw", "split", False, inner="x_v").tail == "round_up"  # the tile buffer's own rows
        assert _directive(pl.schedule, "dw", "compute_at", False).consumer == "act"
        # Tiles of 4 rows, or of 5-8 rows that divide the height (7 at 14 and 7: none computed twice).
        assert _directive(pl.schedule, "act", "split", False, outer="yo").factor == (4 if out_w >= 28 else 7)
        # The padding per channel plane, in 128-bit vectors (its edge vectors are gathers).
        assert _directive(pl.schedule, "dw_pad", "compute_at", False).loop == "c"
        assert _directive(pl.schedule, "dw_pad", "vectorize", False).factor == 4
        validate(p, pl.schedule)


def test_a_depthwise_output_unrolls_a_block_of_rows_that_divides_its_height():
    for h, rows in ((56, 4), (14, 2), (7, 1)):
        pl = plan(_separable(h, act=False), AVX512)
        splits = [d for d in pl.schedule.of("dw").update if d.kind == "split" and d.inner == "y_u"]
        assert [d.factor for d in splits] == ([rows] if rows > 1 else []), h


def test_a_depthwise_conv_that_would_over_read_its_input_falls_back():
    # No padding: the conv reads the input itself, and rounding its 13-wide rows up to whole
    # vectors would read past it, so depthwise_block refuses and the simpler rules apply.
    p = _separable(15, pad=0)
    pl = plan(p, AVX512)
    assert "depthwise_block" not in pl.rules["dw"], pl.rules
    validate(p, pl.schedule)


def _separable_then_conv(w: int) -> Builder:
    """A depthwise 3x3 conv + ReLU6 read by a 1x1 conv + ReLU (MobileNet's expand / project
    order): the ReLU6 is not the graph's output."""
    b = Builder(f"dwpw{w}", "depthwise conv, then a 1x1 conv")
    x = b.input("x", (1, 8, w, w))
    dw = b.conv2d("dw", x, b.input("dw_w", (8, 1, 3, 3)), b.input("dw_b", (8,)), pad=1, groups=8)
    act = b.activation("act", dw, "relu6")
    return b.build([b.activation("out", b.conv2d("pw", act, b.input("pw_w", (16, 8, 1, 1))), "relu")])


def test_a_depthwise_tile_rounds_its_rows_up_with_the_conv():
    # Halide computes an update's producers over the stage's required region, not its rounded
    # loop: the ReLU6's tile rounds up (28 -> 32) so that the padding is computed over every
    # column the conv's last vector reads (recipes.rounds_tile). A graph output can't round.
    p = _separable_then_conv(28)
    s = plan(p, AVX512).schedule
    tile = _directive(s, "act", "split", False, outer="xo")
    assert (tile.factor, tile.tail) == (32, "round_up") and _directive(s, "dw", "split", True, inner="x_v").factor == 16
    assert not any(d.kind == "split" and d.outer == "xo" for d in plan(_separable(28), AVX512).schedule.of("act").pure)
    validate(p, s)


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


def test_depthwise_schedules_verify(runner):
    # Run on this host (its own vector width; the blocks and tails are the target's).
    cases = ((AVX2, _separable(14)), (AVX2, _separable(28, 2)), (AVX512, _separable(7)), (AVX512, _separable(16, act=False)))
    for target, p in (*cases, (AVX512, _separable(15, pad=0)), (AVX512, _separable_then_conv(28))):
        m = api.measure(p, plan(p, target).schedule, runner, None, **VERIFY_ONLY)
        assert m.ok and m.verified, (p.name, m.error)


def _projection(w: int, c: int = 16) -> Builder:
    """MobileNet's projection: depthwise conv + ReLU6, a 1x1 projection with no pointwise
    consumer (it feeds the next 1x1 conv), the next 1x1 conv + ReLU."""
    b = Builder(f"proj{w}", "projection")
    x = b.input("x", (1, c, w, w))
    dw = b.activation("dw_act", b.conv2d("dw", x, b.input("dw_w", (c, 1, 3, 3)), b.input("dw_b", (c,)), pad=1, groups=c), "relu6")
    proj = b.conv2d("proj", dw, b.input("p_w", (8, c, 1, 1)), b.input("p_b", (8,)))
    return b.build([b.activation("out", b.conv2d("expand", proj, b.input("e_w", (c, 8, 1, 1))), "relu")])


def test_rows_blocks_divide_and_fit_the_registers():
    assert rows_blocking(96, 14, 1, AVX512) == (8, 2, 1)  # 16 zmm accumulators over 2 rows of one vector
    assert rows_blocking(160, 7, 1, AVX512) == (2, 7, 1)  # a 7x7 plane: every row of 2 channels
    for target in (AVX2, AVX512):
        for c, h, nvec in ((24, 56, 4), (24, 56, 7), (96, 14, 1), (320, 7, 1), (16, 112, 14)):
            ch, rb, xv = rows_blocking(c, h, nvec, target)
            assert c % ch == 0 and h % rb == 0 and nvec % xv == 0 and (rb == 1 or xv == nvec)
            assert vector_target(target).block_fits(ch * rb * xv, rb * xv), (target, c, h, ch, rb, xv)


def test_a_projection_conv_at_root_blocks_rows_in_full_vectors(runner):
    for target, w in ((AVX512, 14), (AVX2, 7)):
        p = _projection(w)
        pl = plan(p, target)
        assert "conv_root_rows" in pl.rules["proj"], pl.rules
        assert _directive(pl.schedule, "proj", "split", False, inner="x_v").tail == "round_up"
        assert _directive(pl.schedule, "proj", "split", True, inner="rc_u").factor == 8  # 16 input channels: 8 unrolled
        m = api.measure(p, pl.schedule, runner, None, **VERIFY_ONLY)
        assert m.ok and m.verified, (target, w, m.error)
    # Reading an input directly, its rows can't round up: the dividing root block instead.
    b = Builder("proj_in", "projection of an input")
    x = b.input("x", (1, 16, 14, 14))
    proj = b.conv2d("proj", x, b.input("p_w", (8, 16, 1, 1)))
    p = b.build([b.activation("out", b.conv2d("expand", proj, b.input("e_w", (16, 8, 1, 1))), "relu")])
    assert "conv_root_block" in plan(p, AVX512).rules["proj"]
