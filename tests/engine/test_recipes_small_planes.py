"""ResNet-like convs at small planes (engine/recipes.py conv_block, issue 14 session 8): rows
round up to whole vectors where a residual chain ends in a padding (not an input), the
block's tile rounds up with them, a row of at most half a vector (AVX-512 at 7x7) is blocked
over rows, strided convs keep one row a block, and a block has at most MAX_BLOCK_CHANNELS
channels. Every schedule validates; the host's verify."""

import pytest

from engine import api
from engine.heuristic import plan
from engine.measure import Runner
from engine.ops import Builder
from engine.recipes import (
    MAX_ACCUMULATORS,
    MAX_BLOCK_CHANNELS,
    X86_L1_BYTES,
    VectorTarget,
    conv_blocking,
    full_rows_block,
    overread_walk,
    rounds_tile,
    rows_of_plane,
    vector_target,
    widening_overreads,
    x_stride,
)
from engine.schedule import Directive, Schedule, validate

AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"
VERIFY_ONLY = {"min_time_s": 0.0, "min_runs": 1, "warmup": 1, "profile": False}


def _residual_chain(w: int, blocks: int, c: int = 16, stride: int = 1, k0: int = 3, then_conv: bool = False) -> Builder:
    """A 3x3 conv on a padded input (`k0` 1: a 1x1 conv reading the input itself), `blocks`
    residual blocks (relu(conv(relu(conv(r))) + r): the chain back to the padding is 4 stages
    a block), then a 1x1 conv (stride `stride`) + ReLU ("last" -> "out"; `then_conv`: one more
    1x1 conv + ReLU reads "out", so that "out" is not the graph's output)."""
    b = Builder(f"chain{w}x{blocks}s{stride}", "a residual chain at a small plane")
    x = b.input("x", (1, c, w, w))

    def conv(name: str, src: str, k: int = 1, s: int = 1) -> str:
        wt, bias = b.input(f"{name}_w", (c, c, k, k)), b.input(f"{name}_b", (c,))
        return b.conv2d(name, src, wt, bias, stride=s, pad=k // 2)

    r = b.activation("r0", conv("c0", x, k0), "relu")
    for k in range(1, blocks + 1):
        inner = b.activation(f"m{k}", conv(f"a{k}", r), "relu")
        r = b.add(f"r{k}", conv(f"b{k}", inner), r, then_relu=True)
    out = b.activation("out", conv("last", r, 1, stride), "relu")
    return b.build([b.activation("after", conv("next", out), "relu") if then_conv else out])


def _split(s: Schedule, stage: str, inner: str, update: bool = True) -> Directive | None:
    ss = s.of(stage)
    return next((d for d in (ss.update if update else ss.pure) if d.kind == "split" and d.inner == inner), None)


def test_widening_follows_a_residual_chain_to_its_padding():
    # 3 blocks: the last conv is 13 producers from the padding (depth 8 used to refuse it).
    p = _residual_chain(7, 3)
    assert not widening_overreads(p, "last", "x", 1)
    assert not widening_overreads(p, "r3", "x", 1)  # the block's output (a tile) may round up too
    assert widening_overreads(p, "last", "x", 1, depth=8)  # what the old depth of 8 said
    # A conv reading the input itself can't round up.
    b = Builder("direct", "a 1x1 conv on the input")
    x = b.input("x", (1, 8, 7, 7))
    conv = b.conv2d("c", x, b.input("w", (8, 8, 1, 1)))
    assert widening_overreads(b.build([b.activation("out", conv, "relu")]), "c", "x", 1)
    assert x_stride(p, "last") == 1 and x_stride(_residual_chain(14, 1, stride=2), "last") == 2


def test_the_overread_walk_is_memoized_and_answers_as_the_full_walk():
    # Each block offers two paths back (its convs, its skip): without the memo the walk visits
    # a stage once per path (8 blocks: 1,789 visits). Same answers at every depth, on a chain
    # ending in a padding and on one whose first conv reads the input itself.
    for k0 in (3, 1):
        for blocks in (1, 3, 6):
            p = _residual_chain(7, blocks, k0=k0)
            for stage in ("last", f"r{blocks}", "m1"):
                for depth in (0, 3, 8, 13, 27, 64):
                    full = overread_walk(p, stage, "x", 1, depth, memo=False)
                    memo = overread_walk(p, stage, "x", 1, depth)
                    assert memo.overreads == full.overreads and memo.visits <= full.visits, (k0, blocks, stage, depth)
    assert overread_walk(_residual_chain(7, 6), "last", "x", 1, 64, memo=False).visits > 400  # what the memo saves
    # 40 blocks walked all the way to the padding (165 stages): visits grow with the stages.
    p = _residual_chain(7, 40)
    walk = overread_walk(p, "last", "x", 1, depth=len(p.stages))
    assert not walk.overreads and walk.visits <= 2 * len(p.stages)
    assert overread_walk(_residual_chain(7, 40, k0=1), "last", "x", 1, depth=len(p.stages)).overreads


def test_a_small_plane_conv_is_blocked_over_rows_with_whole_vectors():
    p = _residual_chain(7, 3, c=32, then_conv=True)
    ch, rb = rows_of_plane(32, 7, AVX512)
    assert (ch, rb) == (3, 7)  # 21 accumulators + 7 row vectors + a broadcast of 32 zmm
    s = plan(p, AVX512).schedule
    x_v = _split(s, "last", "x_v")
    assert x_v is not None and x_v.factor == 8  # 8-lane rows, not 7-lane ones
    y = _split(s, "out", "y", update=False)
    c = _split(s, "out", "ci", update=False)
    assert y is not None and y.factor == 7 and c is not None and c.factor == ch
    assert any(d.kind == "unroll" and d.loop == "y" for d in s.of("last").update)
    # The block's tile rounds up with its rows (a ReLU read by the next block's convs).
    tile = _split(s, "r3", "x", update=False)
    assert tile is not None and tile.factor == 8 and tile.tail == "round_up"
    # AVX2: 8 lanes are the whole vector, so one row a block, as before.
    s2 = plan(p, AVX2).schedule
    assert _split(s2, "out", "y", update=False) is None and _split(s2, "last", "x_v").factor == 8
    for sched in (s, s2):
        validate(p, sched)


def test_a_conv_at_the_graph_output_keeps_its_rows_inside():
    # The output's tile can't round up, so neither do the rows of the conv computed at it: the
    # rounded lanes would read columns of its producer that are allocated but never computed
    # (recipes.rounds_tile). 7x7: one 7-lane vector a row (56: tests/engine/test_recipes_target.py,
    # conv_relu's x blocks inside the row).
    s = plan(_residual_chain(7, 3, c=32), AVX512).schedule
    x_v = _split(s, "last", "x_v")
    assert x_v is not None and x_v.factor == 7
    tile = _split(plan(_pointwise_at(56, 3), AVX512).schedule, "out", "x", update=False)
    assert tile is not None and (tile.factor, tile.tail) == (64, "round_up")  # not the output: rounds with the conv
    assert not rounds_tile(_residual_chain(7, 1), "out", 1) and rounds_tile(_residual_chain(7, 1, then_conv=True), "out", 1)


def test_a_strided_conv_keeps_one_row_a_block():
    p = _residual_chain(14, 1, stride=2)
    s = plan(p, AVX512).schedule
    assert _split(s, "out", "y", update=False) is None
    c = _split(s, "out", "ci", update=False)
    assert c is not None and c.factor <= MAX_BLOCK_CHANNELS
    validate(p, s)


def test_conv_blocks_take_at_most_max_block_channels():
    for target in (AVX2, AVX512):
        vt = vector_target(target)
        for c in (16, 64, 256, 1024):
            for w in (7, 14, 28, 56):
                ch, xv = conv_blocking(c, w, target)
                assert 1 <= ch <= MAX_BLOCK_CHANNELS and ch * xv <= vt.accumulators


def _plane(h: int, w: int, c: int = 32) -> Builder:
    """A 3x3 conv on a padded h x w input, ReLU, then a 1x1 conv + ReLU ("last" -> "out")."""
    b = Builder(f"plane{h}x{w}", "convs at an h x w plane")
    x = b.input("x", (1, c, h, w))
    r = b.activation("r", b.conv2d("c0", x, b.input("c0_w", (c, c, 3, 3)), b.input("c0_b", (c,)), pad=1), "relu")
    last = b.conv2d("last", r, b.input("last_w", (c, c, 1, 1)), b.input("last_b", (c,)))
    return b.build([b.activation("out", last, "relu")])


def _block_of(s: Schedule, conv: str, out: str) -> tuple[int, int, int]:
    """(channels, rows, x vectors) of the register block conv_block gave `conv` at `out`'s tiles."""
    ch, rows, xu = _split(s, out, "ci", update=False), _split(s, out, "y", update=False), _split(s, conv, "x_u")
    assert ch is not None and xu is not None, (conv, out)
    return ch.factor, rows.factor if rows is not None else 1, xu.factor


@pytest.mark.parametrize(
    ("h", "w", "target"),
    # 1x1 planes (after a global pool), a height with no divisor from 2 to 8 (13; 11 x 7), 2 rows
    # (AVX-512), AVX2's 2x2 and 4x4 (a row of half a vector there too).
    [(1, 1, AVX512), (1, 1, AVX2), (13, 13, AVX512), (13, 7, AVX512), (11, 7, AVX512), (2, 2, AVX512), (2, 2, AVX2), (4, 4, AVX2)],
)
def test_small_plane_blocks_keep_their_channel_and_accumulator_bounds(h, w, target):
    vt = vector_target(target)
    p = _plane(h, w)
    s = plan(p, target).schedule
    ch, rows, xu = _block_of(s, "last", "out")
    assert 1 <= ch <= MAX_BLOCK_CHANNELS
    if rows == 1:  # no block over rows: conv_blocking's bound
        assert ch * xu <= vt.accumulators
    else:  # a block over rows (AVX-512 only), bounded as rows_of_plane / full_rows_block say
        assert vt.lanes >= 16 and ch * rows * xu <= MAX_ACCUMULATORS and ch * rows + rows + 2 <= vt.registers
        assert h % rows == 0 or (2 * w > vt.lanes and not vt.split_wide)  # shifted rows: full-width rows only
    if target == AVX2:
        assert rows == 1  # the rows block is AVX-512's alone (measured there)
    validate(p, s)


def test_rows_of_plane_bounds():
    assert rows_of_plane(2048, 7, AVX512) == (3, 7)  # ResNet-50's 7x7 block, as measured
    for h in range(1, 17):
        ch, rb = rows_of_plane(1024, h, AVX512)
        assert h % rb == 0 and 1 <= ch <= MAX_BLOCK_CHANNELS and ch * rb <= MAX_ACCUMULATORS
        assert ch * rb + rb + 2 <= vector_target(AVX512).registers


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


@pytest.mark.parametrize(("w", "stride"), [(7, 1), (14, 2)])
def test_small_plane_schedules_verify(w, stride, runner):
    # The host's target (AVX-512 here: the rows block at 7x7) on the residual chain.
    p = _residual_chain(w, 2, c=16, stride=stride)
    m = api.measure(p, plan(p).schedule, runner, None, **VERIFY_ONLY)
    assert m.ok and m.verified, m.error


ZEN4 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-avx512_zen4-f16c-fma-sse41"


def _pointwise_at(w: int, k: int, ci: int = 16, co: int = 64) -> Builder:
    """A conv + ReLU ("c" -> "out") on a padded, pooled input, and a 1x1 conv + ReLU reading
    "out" (which so is not the graph's output: its tile may round up with the conv's rows)."""
    b = Builder(f"pw{w}k{k}", "a conv on a padded, pooled input")
    x = b.input("x", (1, ci, w, w))
    pooled = b.pool2d("pool", b.pad("pool_pad", x, 1), "max", 3, 1)  # a stage whose rows may round up
    conv = b.conv2d("c", pooled, b.input("w", (co, ci, k, k)), b.input("b", (co,)), pad=k // 2)
    out = b.activation("out", conv, "relu")
    return b.build([b.activation("after", b.conv2d("next", out, b.input("w2", (co, co, 1, 1))), "relu")])


def test_zen4_takes_half_width_vectors_for_1x1_convs_at_56():
    assert vector_target(ZEN4).split_wide and not vector_target(AVX512).split_wide and not vector_target(AVX2).split_wide
    p = _pointwise_at(56, 1)
    s = plan(p, ZEN4).schedule
    assert (_split(s, "c", "x_v").factor, _split(s, "c", "x_u").factor, _split(s, "out", "ci", update=False).factor) == (8, 7, 3)
    s5 = plan(p, AVX512).schedule  # both halves at once (Skylake-X): 16 lanes, rounded up to 64
    assert (_split(s5, "c", "x_v").factor, _split(s5, "c", "x_u").factor) == (16, 4)
    # A 3x3 conv keeps full vectors on Zen 4 (no gain measured there).
    assert _split(plan(_pointwise_at(56, 3), ZEN4).schedule, "c", "x_v").factor == 16
    for sched in (s, s5):
        validate(p, sched)


def test_zen4_half_width_rows_only_where_the_input_row_fits_half_the_l1():
    vt = vector_target(ZEN4)
    assert vt.l1_bytes == X86_L1_BYTES == 32 * 1024
    # 64 input channels x 56 x 4 B = 14 KiB: half-width; mobilenet_block's 144->24 projection
    # (31.5 KiB a row, measured 5-10% slower with 8 lanes) keeps 16-lane rows.
    assert _split(plan(_pointwise_at(56, 1, 64, 24), ZEN4).schedule, "c", "x_v").factor == 8
    p = _pointwise_at(56, 1, 144, 24)
    s = plan(p, ZEN4).schedule
    assert (_split(s, "c", "x_v").factor, _split(s, "c", "x_u").factor) == (16, 4)
    # The bound is the target's L1: with a 64 KiB one the 144-channel row fits half of it.
    big = VectorTarget(vt.target, vt.lanes, vt.registers, vt.split_wide, 64 * 1024)
    assert _split(plan(p, big).schedule, "c", "x_v").factor == 8
    validate(p, s)


@pytest.mark.parametrize("h", [13, 14])
def test_one_vector_rows_are_blocked_over_rows_where_fmas_run_full_width(h):
    # 13x13 / 14x14 on AVX-512: a row is one 16-lane vector. Full-width FMAs (Skylake-X, Zen 5):
    # channels x rows (FMAs per load above 8 x 1's); Zen 4 (split_wide) and AVX2 keep 8 x 1 rows
    # (2 x 7 measured slower on Zen 4).
    p = _plane(h, h, c=64)
    ch, rows, xu = _block_of(plan(p, AVX512).schedule, "last", "out")
    assert rows > 1 and xu == 1 and ch * rows / (ch + rows) > MAX_BLOCK_CHANNELS / (MAX_BLOCK_CHANNELS + 1)
    assert (ch, rows) == full_rows_block(64, h, AVX512)
    for target in (ZEN4, AVX2):
        assert _block_of(plan(p, target).schedule, "last", "out")[1] == 1
    for target in (AVX512, ZEN4, AVX2):
        validate(p, plan(p, target).schedule)


def test_full_rows_block_bounds():
    vt = vector_target(AVX512)
    for c in (1, 3, 16, 64, 1000):
        for h in range(1, 17):
            ch, rb = full_rows_block(c, h, AVX512)
            assert 1 <= ch <= min(c, MAX_BLOCK_CHANNELS) or (rb == 1 and ch == MAX_BLOCK_CHANNELS)
            assert 1 <= rb <= max(1, min(h, 8)) and ch * rb <= MAX_ACCUMULATORS and ch * rb + rb + 2 <= vt.registers


@pytest.mark.parametrize(("h", "c"), [(13, 48), (14, 24)])
def test_full_width_rows_blocks_verify(h, c, runner):
    # Rows that don't divide the height (13: the last block shifted inwards), and c not a
    # multiple of the channels, on the host's target (full-width AVX-512 on Zen 5), and the
    # same schedule made for a full-width AVX-512 target where the host has one.
    p = _plane(h, h, c=c)
    for sched in (plan(p).schedule, plan(p, AVX512).schedule if vector_target().lanes == 16 else None):
        if sched is not None:
            m = api.measure(p, sched, runner, None, **VERIFY_ONLY)
            assert m.ok and m.verified, m.error
