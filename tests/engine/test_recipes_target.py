"""Recipes follow the target (engine/recipes.py VectorTarget): vector widths and register
blocks come from the Halide target string, so an AVX2 host gets blocks that fit its 16 ymm
registers and an AVX-512 host the blocks measured there; schedules for every target stay
valid, and those this host can run verify."""

import re

import halide as hl
import pytest

from engine import api, zoo
from engine.bench.peak import fma_kernel
from engine.hand_schedules import hand_schedule
from engine.heuristic import heuristic_schedule, plan
from engine.measure import Runner
from engine.ops import Builder
from engine.recipes import ceil_div, conv_blocking, fit, root_conv_blocking, vector_target
from engine.schedule import Directive, Schedule, validate

AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"
SSE = "x86-64-linux-sse41"
VERIFY_ONLY = {"min_time_s": 0.0, "min_runs": 1, "warmup": 1, "profile": False}


def _split(s: Schedule, stage: str, inner: str, update: bool = True) -> Directive:
    ss = s.of(stage)
    return next(d for d in (ss.update if update else ss.pure) if d.kind == "split" and d.inner == inner)


def test_vector_target_reads_lanes_and_registers_from_the_target_string():
    a2, a5, sse, arm = (vector_target(t) for t in (AVX2, AVX512, SSE, "arm-64-linux"))
    assert (a2.lanes, a2.registers, a2.accumulators, a2.fma_chains) == (8, 16, 12, 12)
    assert (a5.lanes, a5.registers, a5.accumulators, a5.fma_chains) == (16, 32, 16, 16)
    assert (sse.lanes, sse.registers) == (4, 16) and (arm.lanes, arm.registers) == (4, 32)
    assert vector_target(a2) is a2 and vector_target().lanes in (4, 8, 16)  # the host's
    with pytest.raises(ValueError, match="not-a-target"):
        vector_target("not-a-target")


def test_the_peak_kernel_takes_its_chains_and_lanes_from_the_target():
    for target, chains, lanes in ((AVX2, 12, 8), (AVX512, 16, 16)):
        _, _, got_chains, got_lanes = fma_kernel(target)
        assert (got_chains, got_lanes) == (chains, lanes)
        assert got_chains + 1 <= vector_target(target).registers  # the chains and the constant fit


def test_the_peak_kernel_interleaves_its_chains(tmp_path):
    """Each step of the depth loop issues one FMA of every chain (written as one nested
    expression, LLVM emitted each chain's FMAs back to back: half the peak on a core with two
    512-bit FMA ports). So the first `chains` vector FMAs write `chains` distinct registers."""
    for target, reg in ((AVX2, "ymm"), (AVX512, "zmm")):
        f, b, chains, _ = fma_kernel(target)
        asm = tmp_path / "peak.s"
        f.compile_to_assembly(str(asm), [b], "peak", hl.Target(target))
        dests = re.findall(rf"vfmadd\w+ps\s+%{reg}\d+, %{reg}\d+, %({reg}\d+)", asm.read_text())
        assert len(dests) >= chains * 8 and len(set(dests[:chains])) == chains


def test_matmul_register_block_follows_the_vector_width():
    p = zoo.get("matmul", "full")
    got = {}
    for target in (AVX2, AVX512):
        vt = vector_target(target)
        s = hand_schedule(p, target)
        rows, lanes, vecs = (_split(s, "prod", n).factor for n in ("i_u", "j_v", "j_u"))
        assert rows is not None and lanes is not None and vecs is not None
        # the accumulators, the loaded B vectors and a broadcast fit the registers
        assert lanes == vt.lanes and rows * vecs + vecs + 1 <= vt.registers
        assert _split(s, "C", "ii", update=False).factor == rows and _split(s, "C", "ji", update=False).factor == vecs * lanes
        # B is read through its packed copy, made per column panel of C
        (w,) = s.wrappers.values()
        assert (w.source, w.consumer, w.compute().consumer, w.compute().loop) == ("B", "prod", "C", "jo")
        got[target] = (rows, vecs, lanes)
    assert got == {AVX2: (4, 3, 8), AVX512: (6, 4, 16)}


def test_conv_register_block_follows_the_target():
    assert conv_blocking(64, 56, AVX2) == (4, 2) and conv_blocking(64, 56, AVX512) == (4, 4)
    assert conv_blocking(96, 56, AVX2) == (6, 2)  # a divisor of the channels: 12 accumulators
    for target in (AVX2, AVX512, SSE):
        vt = vector_target(target)
        for c in (3, 8, 24, 64, 144, 512):
            for w in (1, 7, 14, 16, 28, 56, 112, 224):
                ch, xv = conv_blocking(c, w, target)
                assert 1 <= ch <= max(1, min(c, vt.accumulators)) and ch * xv <= vt.accumulators
                # accumulators + the loaded x vectors + a broadcast, one register to spare
                # (AVX2's 4 x 3 took all 16 ymm and spilled)
                assert ch * xv + xv + 2 <= vt.registers, (target, c, w, ch, xv)
                assert 1 <= xv <= ceil_div(w, fit(vt.lanes, w))
    # The hand conv_relu at 56x56: AVX2 cuts each row into x blocks of 2 ymm (4 x 7 and 4 x 3
    # spilled); on AVX-512 its ReLU is the graph's output, whose tile can't round up, so the
    # conv's rows don't either (the rounded lanes would read padding columns never written,
    # recipes.rounds_tile): x blocks of 2 zmm inside the row, the last shifted inwards.
    p = zoo.get("conv_relu", "full")
    assert _split(hand_schedule(p, AVX2), "relu", "x", update=False).factor == 16
    assert _split(hand_schedule(p, AVX512), "relu", "x", update=False).factor == 32
    assert _split(hand_schedule(p, AVX2), "conv", "x_u").factor == 2
    assert _split(hand_schedule(p, AVX512), "conv", "x_u").factor == 2


@pytest.mark.parametrize("size", zoo.SIZES)
def test_schedules_for_every_target_are_valid(size):
    for name in zoo.names():
        p = zoo.get(name, size)
        for target in (AVX2, AVX512, SSE):
            validate(p, hand_schedule(p, target))
            validate(p, heuristic_schedule(p, target))
    p = zoo.get("resnet_block", size)
    assert plan(p, AVX2).schedule != plan(p, AVX512).schedule  # the blocks differ by target


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


@pytest.mark.parametrize("name", ["matmul", "conv_relu", "mobilenet_block", "attention", "mlp"])
def test_narrow_and_host_target_schedules_verify(name, runner):
    # SSE's 4 lanes make the small convs' rows need x blocks (16 = 2 blocks of 2 vectors):
    # the shifted-inwards x tiles and non-power-of-two blocks run and match the reference.
    p = zoo.get(name, "small")
    # (The heuristic for the host's target is verified by test_heuristic.)
    scheds = {"hand SSE": hand_schedule(p, SSE), "heuristic SSE": heuristic_schedule(p, SSE), "hand host": hand_schedule(p)}
    for label, s in scheds.items():
        m = api.measure(p, s, runner, None, **VERIFY_ONLY)
        assert m.ok and m.verified, (name, label, m.error)


def _bottleneck(w: int) -> Builder:
    """A ResNet/MobileNet-like piece at width `w`: a 1x1 conv + ReLU reading an input (its
    row can't be rounded up), a residual add of two convs, and a projection conv read by
    another conv (no pointwise consumer: computed at root)."""
    b = Builder(f"bottleneck{w}", "small-width conv blocks")
    x = b.input("x", (1, 8, w, w))

    def conv(name: str, src: str, cin: int, cout: int) -> str:
        return b.conv2d(name, src, b.input(f"{name}_w", (cout, cin, 1, 1)), b.input(f"{name}_b", (cout,)))

    r1 = b.activation("r1", conv("c1", x, 8, 16), "relu")
    r2 = b.activation("r2", b.add("add", conv("c2", r1, 16, 16), conv("c3", x, 8, 16)), "relu")
    proj = conv("proj", r2, 16, 8)
    return b.build([b.activation("out", conv("c5", proj, 8, 8), "relu")])


def test_small_width_conv_blocks_use_full_vectors():
    # AVX2 (8 lanes): W=28 and W=14 rows can't round up past the input, so x blocks of whole
    # 8-lane vectors inside the row (the last shifted inwards), not 4- or 2-lane vectors; a
    # W=7 row is one 7-lane vector. Both convs of the residual add share the anchor's tiles.
    for w, lanes in ((28, 8), (14, 8), (7, 7)):
        p = _bottleneck(w)
        pl = plan(p, AVX2)
        assert "conv_block" in pl.rules["c1"] and "conv_block" in pl.rules["c2"] and "conv_block" in pl.rules["c3"], pl.rules
        assert "conv_root_block" in pl.rules["proj"], pl.rules
        for conv in ("c1", "c2", "c3"):
            assert _split(pl.schedule, conv, "x_v").factor == lanes, (w, conv)
        tile = _split(pl.schedule, "r1", "x", update=False).factor
        assert tile is not None and tile <= w and tile % lanes == 0
        validate(p, pl.schedule)


def test_root_conv_blocks_divide_and_fit_the_registers():
    assert root_conv_blocking(320, 7, AVX2) == (10, 7, 1) and root_conv_blocking(96, 14, AVX2) == (6, 14, 1)
    for target in (AVX2, AVX512, SSE):
        vt = vector_target(target)
        for c in (3, 8, 24, 96, 160, 320, 1000):
            for w in (1, 7, 14, 28, 56, 112):
                ch, vw, xv = root_conv_blocking(c, w, target)
                assert c % ch == 0 and w % (vw * xv) == 0, (target, c, w)
                assert ch * xv * ceil_div(vw, vt.lanes) <= vt.accumulators, (target, c, w)


@pytest.mark.parametrize("w", [14, 7])
def test_small_width_conv_blocks_verify(w, runner):
    p = _bottleneck(w)
    m = api.measure(p, heuristic_schedule(p), runner, None, **VERIFY_ONLY)
    assert m.ok and m.verified, m.error
