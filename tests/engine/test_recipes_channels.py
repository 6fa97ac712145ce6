"""Output channels as the vector dimension with packed weights (engine/recipes.py
conv_channels_block, issue 14 session 11): the schedule language's storage directives
(`pack_input`, `reorder_storage`, `store_in`) validate, round-trip and export; the heuristic
uses the recipe on imported convs for 16-lane targets only; the compiled result is verified
against ONNX Runtime, whole and in segments."""

import gc

import numpy as np
import pytest
from onnx import helper

from engine import api, segments
from engine import halide_backend as HB
from engine.frontends import import_onnx
from engine.heuristic import plan
from engine.recipes import channels_block_fits
from engine.schedule import Kind, S, Schedule, ScheduleError, packed_inputs, to_source, validate
from tests.engine.frontends.test_onnx_import import arr, make

AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"
ZEN4 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-avx512_zen4-f16c-fma-sse41"


def conv_model(tmp_path, ci, co, h, k, residual=False, stride=1):
    """conv (+ bias) -> ReLU, or a residual pair: relu(conv_a(x) + conv_b(x))."""
    pad = [k // 2] * 4
    st = [stride, stride]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], kernel_shape=[k, k], pads=pad, strides=st)]
    inits = {"wa": arr(co, ci, k, k, lo=-0.1, hi=0.1), "ba": arr(co)}
    if residual:
        nodes.append(helper.make_node("Conv", ["x", "wb", "bb"], ["b"], kernel_shape=[k, k], pads=pad, strides=st))
        inits |= {"wb": arr(co, ci, k, k, lo=-0.1, hi=0.1), "bb": arr(co)}
        nodes.append(helper.make_node("Add", ["a", "b"], ["s"]))
    nodes.append(helper.make_node("Relu", ["s" if residual else "a"], ["y"]))
    path = make(tmp_path, nodes, [("x", (1, ci, h, h))], inits, name=f"c{ci}_{co}_{h}_{k}{'r' if residual else ''}_s{stride}")
    return import_onnx(path, tmp_path).pipeline


def convs(p):
    return [s.name for s in p.stages if s.op == "conv2d"]


@pytest.mark.parametrize(
    ("ci", "co", "h", "k", "residual", "stride"),
    [
        (64, 64, 7, 1, False, 1),
        (32, 64, 14, 3, False, 1),
        (32, 32, 7, 3, True, 1),
        (32, 64, 28, 3, False, 2),
        (256, 64, 28, 1, True, 2),
        # channels not whole vectors: weights and biases packed with zeros, the last block guarded
        (64, 1000, 7, 1, False, 1),
        (32, 56, 14, 3, False, 1),
        (32, 88, 7, 3, True, 1),
    ],
)
def test_the_heuristic_packs_small_plane_convs_and_the_result_verifies(tmp_path, ci, co, h, k, residual, stride):
    p = conv_model(tmp_path, ci, co, h, k, residual, stride)
    pl = plan(p, AVX512)
    s = pl.schedule
    packs = packed_inputs(s)
    assert {st for st, _ in packs} == set(convs(p))
    assert all(dim == 0 and blk == 16 for dim, blk in packs.values())
    for cv in convs(p):
        kinds = [d.kind for d in s.of(cv).pure]
        assert Kind.REORDER_STORAGE in kinds and Kind.STORE_IN in kinds
        assert "conv_channels_block" in pl.rules[cv]
    validate(p, s)
    # Run on this host (any x86: the schedule's vectors are legal everywhere), against ONNX Runtime.
    run, v = api.run_once(p, s, seed=3)
    assert run["method"].startswith("ONNX Runtime") and v.ok, v.message
    # The same schedule in segments (a ResNet-50's path): each part binds its packed weights.
    whole, parts = HB.lower(p, s), segments.lower(p, s, segmented=True)
    outs = []
    for low in (whole, parts):
        low.compile()
        keep = low.bind(run["inputs"])
        out = HB.output_arrays(p)
        go = low.runner(out)
        gc.collect()  # the packed copies must outlive the bind: memory freed now would be reused here
        junk = [np.full(HB.pack_array_shape(p.shape_of(i), 0, 16), np.nan, np.float32) for _, i in packed_inputs(s)]
        go()
        assert np.isfinite(out[p.outputs[0]]).all()
        del junk
        outs.append(out[p.outputs[0]])
        del keep
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_the_recipe_is_only_for_16_lane_targets_and_small_one_tap_planes(tmp_path):
    p = conv_model(tmp_path, 64, 64, 7, 1)
    assert channels_block_fits(p, tuple(convs(p)), AVX2) is None
    assert not packed_inputs(plan(p, AVX2).schedule)
    for target in (AVX512, ZEN4):  # Zen 4 too: its 512-bit ops run as two halves, the block still pays
        assert channels_block_fits(p, tuple(convs(p)), target) == (4, 7)
        assert packed_inputs(plan(p, target).schedule)
    assert channels_block_fits(conv_model(tmp_path, 64, 64, 56, 1), ("a",), AVX512) is None  # 1x1 at 56: not
    assert channels_block_fits(conv_model(tmp_path, 16, 64, 56, 3), ("a",), AVX512) == (4, 7)  # 3x3 at 56: yes
    # whole blocks of vectors: 96 = 2 blocks of 3; 40 = 3 vectors, the last half padding
    assert channels_block_fits(conv_model(tmp_path, 64, 96, 7, 1), ("a",), AVX512) == (3, 7)
    assert channels_block_fits(conv_model(tmp_path, 64, 40, 7, 1), ("a",), AVX512) == (3, 7)
    assert channels_block_fits(conv_model(tmp_path, 64, 24, 7, 1), ("a",), AVX512) is None  # a third padding
    assert channels_block_fits(conv_model(tmp_path, 64, 80, 7, 1), ("a",), AVX512) is None  # 5 vectors: 1 a block
    p48 = conv_model(tmp_path, 64, 48, 7, 1, residual=True)
    assert channels_block_fits(p48, tuple(convs(p48)), AVX512) is None  # 3 vectors for 2 convs
    # a short reduction per output cannot pay for storing channel vectors into planes
    assert channels_block_fits(conv_model(tmp_path, 3, 64, 56, 3), ("a",), AVX512) is None  # 27 products
    assert channels_block_fits(conv_model(tmp_path, 3, 64, 56, 7, stride=2), ("a",), AVX512) is None  # strided, 147
    assert channels_block_fits(conv_model(tmp_path, 32, 64, 28, 3, stride=2), ("a",), AVX512) == (4, 7)  # strided, 288


def test_storage_directives_validate_round_trip_and_export(tmp_path):
    p = conv_model(tmp_path, 64, 64, 7, 1)
    conv, weight = "a", next(i.name for i in p.inputs if i.weight and len(i.shape) == 4)
    data = next(i.name for i in p.inputs if not i.weight)
    s = plan(p, AVX512).schedule
    again = Schedule.loads(s.dumps())
    assert again.content_hash() == s.content_hash() and packed_inputs(again) == packed_inputs(s)
    cpp, py = to_source(p, s), to_source(p, s, "python")
    assert "reorder_storage(c, x, y, n)" in cpp and "store_in(MemoryType::Register)" in cpp
    assert "store_in(hl.MemoryType.Register)" in py
    assert f"{weight}_packed(i0 % 16, i3, i2, i1, i0 / 16)" in cpp

    def bad(build, match):
        t = Schedule()
        build(S(t, conv))
        with pytest.raises(ScheduleError, match=match):
            validate(p, t)

    bad(lambda b: b.pack_input(data, 1, 16), "data, not a weight")
    bad(lambda b: b.pack_input(weight, 4, 2), "no dimension 4 to pack")
    bad(lambda b: b.pack_input("nope", 0, 16), "not an input that a reads")
    bad(lambda b: b.reorder_storage("c", "x", "y"), "names each of the stage's dims once")
    bad(lambda b: b.pack_input(weight, 0, 16).pack_input(weight, 0, 32), "packed twice")
    t = Schedule()
    S(t, p.outputs[0]).reorder_storage("c", "x", "y", "n")
    with pytest.raises(ScheduleError, match="an output's buffer"):
        validate(p, t)
    with pytest.raises(ScheduleError, match="not the update's"):
        Schedule.from_json({"stages": {conv: {"pure": [], "update": [{"kind": "store_in", "memory": "register"}]}}})
    with pytest.raises(ScheduleError, match="memory must be one of"):
        Schedule.from_json({"stages": {conv: {"pure": [{"kind": "store_in", "memory": "gpu"}]}}})


def test_pack_array_puts_the_block_innermost():
    w = np.arange(32 * 3 * 2 * 2, dtype=np.float32).reshape(32, 3, 2, 2)
    packed = HB.pack_array(w, 0, 16)
    assert packed.shape == (2, 3, 2, 2, 16) == HB.pack_array_shape(w.shape, 0, 16) and packed.flags.c_contiguous
    for co in (0, 5, 16, 31):
        np.testing.assert_array_equal(packed[co // 16, :, :, :, co % 16], w[co])
    m = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(HB.pack_array(m, 1, 3)[:, 1, 2], m[:, 5])
    # a last partial block is padded with zeros (1000 classes in blocks of 16: 63 blocks)
    b = np.arange(1, 41, dtype=np.float32)
    pb = HB.pack_array(b, 0, 16)
    assert pb.shape == (3, 16) == HB.pack_array_shape(b.shape, 0, 16)
    np.testing.assert_array_equal(pb.reshape(-1)[:40], b)
    assert not pb.reshape(-1)[40:].any()


def test_a_channel_tail_packs_every_read_along_c_and_guards_the_last_block(tmp_path):
    p = conv_model(tmp_path, 64, 1000, 7, 1)
    s = plan(p, AVX512).schedule
    assert packed_inputs(s) == {("a", "wa"): (0, 16), ("a", "ba"): (0, 16)}
    first = s.of(p.outputs[0]).pure[0]
    assert first.kind == Kind.SPLIT and first.factor == 48 and first.tail == "guard_with_if"
    assert "padded with zeros from 1000 to 1008" in to_source(p, s)
    # whole vectors: no guard, the bias read as it is
    assert packed_inputs(plan(conv_model(tmp_path, 64, 96, 7, 1), AVX512).schedule) == {("a", "wa"): (0, 16)}


def misaligned(shape, rng):
    """A float32 array whose data is 16 bytes past a 64-byte boundary (numpy's small arrays are)."""
    n = int(np.prod(shape))
    raw = np.empty(n + 32, np.float32)
    start = ((-raw.ctypes.data % 64) + 16) // 4
    out = raw[start : start + n].reshape(shape)
    out[...] = rng.uniform(-1, 1, shape)
    assert out.ctypes.data % 64 == 16
    return out


@pytest.mark.parametrize("segmented", [False, True])
def test_a_caller_s_unaligned_output_array_gets_the_right_answer(tmp_path, segmented):
    """Halide, told a packed schedule's buffer bounds, emits aligned vector accesses to the
    outputs: a caller's 16-byte-aligned output (a ResNet-50 segfaulted) is staged through an
    aligned one and copied back; the engine's own arrays are aligned."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["a"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    inits = {"w": arr(64, 32, 3, 3, lo=-0.1, hi=0.1), "b": arr(64), "fw": arr(1000, 64, lo=-0.1, hi=0.1), "fb": arr(1000)}
    p = import_onnx(make(tmp_path, nodes, [("x", (1, 32, 7, 7))], inits, name="head"), tmp_path).pipeline
    s = plan(p, AVX512).schedule
    assert packed_inputs(s)
    rng = np.random.default_rng(5)
    inputs = {i.name: rng.uniform(-0.2, 0.2, i.shape).astype(np.float32) for i in p.inputs}
    low = segments.lower(p, s, segmented=True) if segmented else HB.lower(p, s)
    low.compile()
    keep = low.bind(inputs)
    ours = HB.output_arrays(p)
    assert all(HB.is_aligned(a) for a in ours.values())
    theirs = {o: misaligned(a.shape, rng) for o, a in ours.items()}
    low.runner(ours)()
    low.runner(theirs)()
    del keep
    o = p.outputs[0]
    np.testing.assert_array_equal(theirs[o], ours[o])
    assert np.abs(ours[o]).max() > 0


def test_a_padding_read_whole_by_each_channel_block_is_computed_once_at_root(tmp_path):
    # conv 1x1 -> ReLU -> pad -> 3x3 conv of 128 channels: two channel blocks of the packed
    # conv each read the whole padding; computed per block it was computed twice.
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["a"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Conv", ["r", "wb", "bb"], ["b"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    inits = {"wa": arr(128, 64, 1, 1, lo=-0.1, hi=0.1), "ba": arr(128), "wb": arr(128, 128, 3, 3, lo=-0.1, hi=0.1), "bb": arr(128)}
    p = import_onnx(make(tmp_path, nodes, [("x", (1, 64, 14, 14))], inits, name="pad_twice"), tmp_path).pipeline
    pl = plan(p, AVX512)
    pad = next(s.name for s in p.stages if s.op == "pad")
    assert "conv_channels_block" in pl.rules[next(c for c in convs(p) if p.stage(c).rdom[1].extent == 3)]
    assert pl.rules[pad].startswith("root"), pl.rules[pad]
    run, v = api.run_once(p, pl.schedule, seed=1)
    assert v.ok, v.message


def projection_model(tmp_path, ci, mid, h, reader="conv"):
    """A projection (1x1 conv, no pointwise consumer) read by a 1x1 conv + ReLU (MobileNetV2's
    next block), or by a max pool (a reader that needs the planes' layout)."""
    nodes = [helper.make_node("Conv", ["x", "wp", "bp"], ["p"], kernel_shape=[1, 1])]
    inits = {"wp": arr(mid, ci, 1, 1, lo=-0.1, hi=0.1), "bp": arr(mid)}
    if reader == "conv":
        nodes.append(helper.make_node("Conv", ["p", "we", "be"], ["e"], kernel_shape=[1, 1]))
        inits |= {"we": arr(ci, mid, 1, 1, lo=-0.1, hi=0.1), "be": arr(ci)}
        nodes.append(helper.make_node("Relu", ["e"], ["y"]))
    else:
        nodes.append(helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[3, 3], pads=[1] * 4))
    path = make(tmp_path, nodes, [("x", (1, ci, h, h))], inits, name=f"proj{ci}_{mid}_{h}_{reader}")
    return import_onnx(path, tmp_path).pipeline


@pytest.mark.parametrize(("ci", "mid", "h"), [(192, 64, 14), (96, 48, 7), (64, 32, 28)])
def test_a_projection_read_by_a_channels_block_accumulates_channel_vectors_in_place(tmp_path, ci, mid, h):
    p = projection_model(tmp_path, ci, mid, h)
    proj = convs(p)[0]
    pl = plan(p, AVX512)
    s = pl.schedule
    assert "conv_root_channels" in pl.rules[proj], pl.rules[proj]
    storage = [d for d in s.of(proj).pure if d.kind == Kind.REORDER_STORAGE]
    assert storage and storage[0].loops[0] == "c"
    run, v = api.run_once(p, s, seed=2)
    assert v.ok, v.message
    # in segments, the relaid buffer passes between two of them declared in its layout on both sides
    unit = next(u for u in segments.units(p, s) if proj in u)
    assert not set(p.consumers(proj)) & set(unit)
    parts = segments.lower(p, s, segmented=True, max_stages=0)
    assert isinstance(parts, segments.Segmented)
    sides = [pt for pt in parts.parts if proj in pt.seg.outputs or proj in pt.seg.inputs]
    assert len(sides) == 2
    for pt in sides:
        canon = {real: c for c, real in pt.names.items()}[proj]
        assert pt.pipeline.source["layouts"][canon] == [1, 3, 2, 0]  # c, x, y, n innermost first
    parts.compile()
    keep = parts.bind(run["inputs"])
    out = HB.output_arrays(p)
    parts.runner(out)()
    del keep
    whole = HB.lower(p, s)
    whole.compile()
    keep = whole.bind(run["inputs"])
    ref = HB.output_arrays(p)
    whole.runner(ref)()
    del keep  # the packed copies outlive the runs
    np.testing.assert_allclose(out[p.outputs[0]], ref[p.outputs[0]], rtol=1e-5, atol=1e-5)


def test_a_projection_read_by_a_pool_keeps_its_planes(tmp_path):
    p = projection_model(tmp_path, 192, 64, 14, reader="pool")
    pl = plan(p, AVX512)
    proj = convs(p)[0]
    assert "conv_root_channels" not in pl.rules.get(proj, "")
    assert not [d for d in pl.schedule.of(proj).pure if d.kind == Kind.REORDER_STORAGE]
    # and never on 8-lane targets
    assert "conv_root_channels" not in plan(projection_model(tmp_path, 192, 64, 14), AVX2).rules[convs(p)[0]]


@pytest.mark.parametrize(
    ("ci", "co", "h", "k", "stride", "tile"),
    [
        (32, 64, 28, 3, 1, (2, 14)),  # a 3x3 over rows of 14 or more: 2 vectors x 14 positions
        (32, 128, 56, 3, 1, (2, 14)),
        (64, 64, 13, 3, 1, (4, 7)),  # rows of 13: the 4 x 7 block
        (64, 128, 28, 1, 1, (4, 7)),  # a 1x1 conv
        (64, 64, 28, 3, 2, (4, 7)),  # strided
        (32, 48, 28, 3, 1, (3, 7)),  # 3 vectors of channels: no 2-vector blocks, the 3 x 7 one
    ],
)
def test_the_channels_block_tile_follows_the_conv(tmp_path, ci, co, h, k, stride, tile):
    p = conv_model(tmp_path, ci, co, h, k, stride=stride)
    (cv,) = convs(p)
    pl = plan(p, AVX512)
    assert "conv_channels_block" in pl.rules[cv], pl.rules[cv]
    unrolls = {d.loop: d.factor for d in pl.schedule.of(cv).update if d.kind == Kind.UNROLL}
    assert (unrolls.get("c"), unrolls.get("x")) == tile
    run, v = api.run_once(p, pl.schedule, seed=7)
    assert v.ok, v.message
