"""A conv or matmul that is a model's output (a segmentation head, a projection at the end of
a block) gets a copy stage as the pipeline output (frontends/common.py): the heuristic then
register-blocks it at the copy's tiles as it does a conv followed by a ReLU, instead of
accumulating in place in the caller's buffer (4-9x slower than ONNX Runtime). The values are
the model's (verified against ONNX Runtime)."""

import pytest
from onnx import helper

from engine import api
from engine.frontends import import_onnx
from engine.heuristic import plan
from tests.engine.frontends.test_onnx_import import arr, make

AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"


def one_node(tmp_path, node, x_shape, inits, name):
    return import_onnx(make(tmp_path, [node], [("x", x_shape)], inits, name=name), tmp_path).pipeline


@pytest.mark.parametrize(
    ("name", "node", "x_shape", "inits", "op"),
    [
        (
            "conv3x3",
            helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1] * 4),
            (1, 32, 13, 13),
            {"w": arr(64, 32, 3, 3, lo=-0.1, hi=0.1), "b": arr(64)},
            "conv2d",
        ),
        (
            "conv1x1",
            helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1]),
            (1, 64, 28, 28),
            {"w": arr(32, 64, 1, 1, lo=-0.1, hi=0.1)},
            "conv2d",
        ),
        (
            "depthwise",
            helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, group=32),
            (1, 32, 28, 28),
            {"w": arr(32, 1, 3, 3)},
            "depthwise_conv2d",
        ),
        ("matmul", helper.make_node("MatMul", ["x", "w"], ["y"]), (49, 64), {"w": arr(64, 96, lo=-0.1, hi=0.1)}, "matmul"),
    ],
)
@pytest.mark.parametrize("target", [AVX512, "x86-64-linux-avx-avx2-f16c-fma-sse41"])
def test_an_output_conv_or_matmul_is_blocked_at_the_tiles_of_a_copy(tmp_path, name, node, x_shape, inits, op, target):
    res = import_onnx(make(tmp_path, [node], [("x", x_shape)], inits, name=name), tmp_path)
    p = res.pipeline
    (out,) = p.outputs
    assert any(f"is a copy stage {out!r}" in t for t in res.report.simplifications)  # the import report says so
    red = next(s for s in p.stages if s.op == op)
    assert red.name != out and p.stage(out).op == "copy" and p.consumers(red.name) == [out]
    pl = plan(p, target)
    assert "register-blocked at tiles of" in pl.rules[red.name] or op == "depthwise_conv2d", pl.rules[red.name]
    assert not any(d.kind.value == "compute_root" for d in pl.schedule.of(red.name).pure)
    run, v = api.run_once(p, pl.schedule, seed=4)
    assert run["method"].startswith("ONNX Runtime") and v.ok, v.message


def test_a_one_row_gemm_output_stays_the_output(tmp_path):
    # A classifier's Gemm is a vector-matrix product: accumulated at root it is as fast as blocked.
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    p = one_node(tmp_path, node, (1, 256), {"w": arr(100, 256, lo=-0.1, hi=0.1), "b": arr(100)}, "fc")
    assert p.stage(p.outputs[0]).op == "matmul"
    run, v = api.run_once(p, plan(p).schedule, seed=4)
    assert v.ok, v.message


def test_an_output_read_by_another_stage_is_copied_once(tmp_path):
    # The conv is both an output and read by the ReLU: one copy stage is the output, the
    # conv feeds both (and the ReLU is blocked with it as before).
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    path = make(
        tmp_path, nodes, [("x", (1, 32, 14, 14))], {"w": arr(32, 32, 1, 1, lo=-0.1, hi=0.1), "b": arr(32)}, outputs=("c", "y"), name="two"
    )
    p = import_onnx(path, tmp_path).pipeline
    conv = next(s.name for s in p.stages if s.op == "conv2d")
    assert conv not in p.outputs and len(p.outputs) == 2
    assert sorted(p.stage(o).op for o in p.outputs) == ["copy", "relu"]
    run, v = api.run_once(p, plan(p).schedule, seed=4)
    assert v.ok, v.message
