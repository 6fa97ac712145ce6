"""Buffers between channels blocks laid out channels innermost (engine/heuristic.py rule 5,
recipes.channels_innermost): the tiles' channel vectors are stored whole, paddings, pools and
concats between them rebuilt along channels, a concat read by one-block 1x1 convs inlined;
only where every reader takes any layout. Across segments such a buffer is declared in its
layout on both sides (segments._canonical, halide_backend's layout-aware buffers). Every
schedule is verified against ONNX Runtime, whole and in segments."""

import numpy as np
import pytest
from onnx import helper

from engine import api, segments
from engine import halide_backend as HB
from engine.frontends import import_onnx
from engine.heuristic import plan
from engine.ir import Input, Pipeline, Stage
from engine.schedule import Kind, S, Schedule, ScheduleError, validate
from tests.engine.frontends.test_onnx_import import arr, make

AVX2 = "x86-64-linux-avx-avx2-f16c-fma-sse41"
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"


def fire(tmp_path, c=128, sq=32, ex=64, h=13, reader="conv"):
    """SqueezeNet's fire module (squeeze 1x1, expand 1x1 and 3x3, concat) read by a 1x1 conv
    + ReLU (the next fire's squeeze), or by a 3x3 depthwise conv (a reader that needs planes)."""
    w = lambda *s: arr(*s, lo=-0.1, hi=0.1)
    nodes = [
        helper.make_node("Conv", ["x", "ws", "bs"], ["s0"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["s0"], ["s"]),
        helper.make_node("Conv", ["s", "w1", "b1"], ["e10"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["e10"], ["e1"]),
        helper.make_node("Conv", ["s", "w3", "b3"], ["e30"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["e30"], ["e3"]),
        helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=1),
    ]
    inits = {"ws": w(sq, c, 1, 1), "bs": arr(sq), "w1": w(ex, sq, 1, 1), "b1": arr(ex), "w3": w(ex, sq, 3, 3), "b3": arr(ex)}
    if reader == "conv":
        nodes += [helper.make_node("Conv", ["cat", "wn", "bn"], ["n0"], kernel_shape=[1, 1]), helper.make_node("Relu", ["n0"], ["y"])]
        inits |= {"wn": w(sq, 2 * ex, 1, 1), "bn": arr(sq)}
    else:
        nodes.append(helper.make_node("Conv", ["cat", "wd"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, group=2 * ex))
        inits["wd"] = arr(2 * ex, 1, 3, 3)
    return import_onnx(make(tmp_path, nodes, [("x", (1, c, h, h))], inits, name=f"fire_{reader}"), tmp_path).pipeline


def relaid(s, n):
    return [d.loops for d in s.of(n).pure if d.kind == Kind.REORDER_STORAGE]


def by_op(p, op):
    return [st.name for st in p.stages if st.op == op]


def segmented_equals_whole(p, s, inputs):
    outs = []
    for low in (HB.lower(p, s), segments.lower(p, s, segmented=True, max_stages=0)):
        low.compile()
        keep = low.bind(inputs)
        out = HB.output_arrays(p)
        low.runner(out)()
        del keep
        outs.append(out[p.outputs[0]])
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_a_fire_module_between_channels_blocks_is_channels_innermost(tmp_path):
    p = fire(tmp_path)
    pl = plan(p, AVX512)
    s = pl.schedule
    relus = by_op(p, "relu")
    (pad,), (cat,) = by_op(p, "pad"), by_op(p, "concat")
    out = p.outputs[0]
    # the squeeze's and both expands' tiles: stored channels innermost
    for r in relus:
        if r != out:
            assert relaid(s, r) == [("c", "x", "y", "n")], (r, pl.rules[r])
    assert not relaid(s, out)  # the caller's layout
    # the padding rebuilt along channels; the concat inlined into the one-block 1x1 squeeze
    assert "channels_innermost" in pl.rules[pad] and relaid(s, pad)
    vec = [d for d in s.of(pad).pure if d.kind == Kind.VECTORIZE]
    assert vec and vec[0].loop == "c"
    assert s.of(cat).compute().kind == Kind.COMPUTE_INLINE and "inline into the channels blocks" in pl.rules[cat]
    validate(p, s)
    run, v = api.run_once(p, s, seed=5)
    assert run["method"].startswith("ONNX Runtime") and v.ok, v.message
    segmented_equals_whole(p, s, run["inputs"])


def test_a_buffer_read_by_a_depthwise_conv_keeps_its_planes(tmp_path):
    p = fire(tmp_path, reader="depthwise")
    pl = plan(p, AVX512)
    s = pl.schedule
    (cat,) = by_op(p, "concat")
    assert "inline into the channels blocks" not in pl.rules[cat] and not relaid(s, cat)
    for src in p.stage(cat).sources():  # the depthwise conv reads the expands' tiles: they stay planes
        assert not relaid(s, src), pl.rules[src]
    run, v = api.run_once(p, s, seed=5)
    assert v.ok, v.message


def test_eight_lane_targets_keep_planes(tmp_path):
    p = fire(tmp_path)
    s = plan(p, AVX2).schedule
    assert not any(relaid(s, st.name) for st in p.stages)


def test_segments_declare_a_relaid_buffer_on_both_sides(tmp_path):
    p = fire(tmp_path)
    s = plan(p, AVX512).schedule
    low = segments.lower(p, s, segmented=True, max_stages=0)
    assert isinstance(low, segments.Segmented)
    crossing = {n for pt in low.parts for n in pt.seg.outputs if n not in p.outputs}
    laid = [n for n in crossing if segments.stored_order(p, s, n) is not None]
    assert laid  # the squeeze's tile at least
    for n in laid:
        sides = [pt for pt in low.parts if n in pt.seg.outputs or n in pt.seg.inputs]
        assert len(sides) >= 2
        for pt in sides:
            canon = {real: c for c, real in pt.names.items()}[n]
            assert tuple(pt.pipeline.source["layouts"][canon]) == segments.stored_order(p, s, n) == (1, 3, 2, 0)
    # the runner's buffer between them is dense channels innermost
    low.compile()
    keep = low.bind(api.run_once(p, s, seed=1)[0]["inputs"])
    arrays = low.runner(HB.output_arrays(p)).arrays
    del keep
    for n in laid:
        assert HB.has_layout(arrays[n], (1, 3, 2, 0)) and arrays[n].strides[1] == 4


def layout_pipeline():
    """y = 2 x, x and y declared channels innermost (as a segment's buffers are)."""
    from engine import expr as E
    from engine.ir import Dim

    dims = (Dim("n", 1), Dim("c", 32), Dim("y", 3), Dim("x", 5))
    st = Stage("y", dims, E.Access("x", tuple(E.Var(d.name) for d in dims)) * 2.0, op="scale")
    return Pipeline("laid", [Input("x", (1, 32, 3, 5))], [st], ["y"], source={"layouts": {"x": [1, 3, 2, 0], "y": [1, 3, 2, 0]}})


def test_a_declared_layout_is_what_inputs_and_outputs_are_given_in():
    p = layout_pipeline()
    s = Schedule()
    with pytest.raises(ScheduleError, match="storage can't be changed"):
        S(s, "y").reorder_storage("x", "c", "y", "n")  # not the layout declared
        validate(p, s)
    s = Schedule()
    S(s, "y").reorder_storage("c", "x", "y", "n").reorder("c", "x", "y", "n").vectorize("c", 16)
    validate(p, s)
    low = HB.lower(p, s)
    low.compile()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 32, 3, 5)).astype(np.float32)  # row-major: copied into the layout
    keep = low.bind({"x": x})
    out = HB.output_arrays(p)
    assert HB.has_layout(out["y"], (1, 3, 2, 0)) and not out["y"].flags.c_contiguous
    low.runner(out)()
    del keep
    np.testing.assert_array_equal(out["y"], 2 * x)
    with pytest.raises(ValueError, match="dense in axis order"):
        low.runner({"y": np.zeros((1, 32, 3, 5), np.float32)})
