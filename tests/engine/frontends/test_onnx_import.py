"""ONNX import: every mapped operator against ONNX Runtime, the simplifications, the errors,
and the sample models end to end (import, default schedule, Halide, verify)."""

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import api
from engine import reference as R
from engine.frontends import ModelImportError, UnsupportedModelError, import_onnx
from engine.schedule import default_schedule
from tests.cli_fork import shared_server

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "resources" / "models"
RNG = np.random.default_rng(0)


def arr(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def make(tmp_path, nodes, inputs, inits=None, opset=17, outputs=("y",), name="m", out_shape=None):
    """A model from nodes; output types come from ONNX shape inference (or `out_shape`, for the
    one output, where inference cannot know it: a shape computed by folded nodes)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    if out_shape is not None:
        model.graph.output.append(helper.make_tensor_value_info(outputs[0], TensorProto.FLOAT, out_shape))
    else:
        model.graph.output.extend(inferred.graph.output)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def run_verified(result, check_records=False):
    """Lower with the default schedule, run, compare with ONNX Runtime on the original file."""
    p = result.pipeline
    run, v = api.run_once(p, default_schedule(p), seed=3)
    ins, refs, method = run["inputs"], run["refs"], run["method"]
    assert method.startswith("ONNX Runtime")
    assert v.ok, v.message
    if check_records:  # the operator records, evaluated by numpy/torch, agree with ONNX Runtime too
        rec = R.evaluate_ops(p, {k: a.astype(np.float64) for k, a in ins.items()})
        v2 = R.verify(p, {k: a.astype(np.float32) for k, a in rec.items()}, refs, "records")
        assert v2.ok, "operator records: " + v2.message
    return v


def single(op, inputs, inits=None, opset=17, **attrs):
    names = [n for n, _ in inputs] + list(inits or {})
    return [helper.make_node(op, names, ["y"], **attrs)], inputs, inits or {}, opset


W8 = arr(8, 4, 3, 3)
CASES = {
    "conv_asym_pads_strides_dilations": single(
        "Conv", [("x", [1, 4, 9, 10])], {"W": W8, "B": arr(8)}, pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]
    ),
    "conv_groups": single("Conv", [("x", [2, 4, 7, 7])], {"W": arr(6, 2, 3, 3)}, pads=[1, 1, 1, 1], group=2),
    "conv_depthwise": single("Conv", [("x", [1, 4, 8, 8])], {"W": arr(4, 1, 3, 3), "B": arr(4)}, pads=[1, 1, 1, 1], group=4),
    "conv_depthwise_multiplier": single("Conv", [("x", [1, 4, 6, 6])], {"W": arr(8, 1, 3, 3)}, group=4, strides=[2, 2]),
    "conv_auto_pad_same": single("Conv", [("x", [1, 4, 7, 7])], {"W": W8}, auto_pad="SAME_UPPER", strides=[2, 2]),
    "conv_1d": single("Conv", [("x", [1, 4, 12])], {"W": arr(5, 4, 3)}, pads=[2, 1], strides=[2]),
    "conv_transpose": single(
        "ConvTranspose", [("x", [1, 8, 5, 5])], {"W": W8, "B": arr(4)}, strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 1]
    ),
    "conv_transpose_output_shape": single(
        "ConvTranspose", [("x", [1, 4, 4, 5])], {"W": arr(4, 3, 3, 3)}, strides=[2, 2], output_shape=[8, 10]
    ),
    "conv_transpose_same_upper": single(
        "ConvTranspose", [("x", [1, 4, 4, 5])], {"W": arr(4, 2, 3, 3)}, strides=[2, 2], auto_pad="SAME_UPPER"
    ),
    "conv_transpose_groups": single("ConvTranspose", [("x", [1, 4, 4, 4])], {"W": arr(4, 3, 2, 2)}, strides=[2, 2], group=2),
    "gemm": single("Gemm", [("a", [5, 3])], {"B": arr(6, 5), "C": arr(6)}, alpha=0.5, beta=2.0, transA=1, transB=1),
    "gemm_data_b": single("Gemm", [("a", [4, 3]), ("b", [3, 5])], {"C": arr(4, 1)}, alpha=1.5),
    "matmul_2d": single("MatMul", [("a", [7, 5])], {"B": arr(5, 3)}),
    "matmul_batched_broadcast": single("MatMul", [("a", [2, 3, 4, 5]), ("b", [3, 5, 6])]),
    "matmul_vector": single("MatMul", [("a", [5]), ("b", [2, 5, 3])]),
    "add_broadcast": single("Add", [("a", [3, 1, 5]), ("b", [4, 1])]),
    "sub_const_tensor": single("Sub", [("a", [2, 3, 4])], {"c": arr(3, 1)}),
    "mul_scalar_const": single("Mul", [("a", [2, 3])], {"c": np.array(2.5, np.float32)}),
    "div_const_numerator": ([helper.make_node("Div", ["c", "a"], ["y"])], [("a", [2, 3])], {"c": np.array([[3.0]], np.float32)}, 17),
    "pow_square": single("Pow", [("a", [4, 5])], {"p": np.array(2.0, np.float32)}),
    "pow_sqrt": (
        [helper.make_node("Abs", ["a"], ["t"]), helper.make_node("Pow", ["t", "p"], ["y"])],
        [("a", [4, 5])],
        {"p": np.array(0.5, np.float32)},
        17,
    ),
    "relu": single("Relu", [("a", [2, 3, 4])]),
    "leaky_relu": single("LeakyRelu", [("a", [2, 3, 4])], alpha=0.2),
    "clip": single("Clip", [("a", [3, 4])], {"lo": np.array(-0.3, np.float32), "hi": np.array(0.5, np.float32)}),
    "clip_opset6": single("Clip", [("a", [3, 4])], opset=6, min=-0.2, max=0.1),
    "sigmoid": single("Sigmoid", [("a", [3, 4])]),
    "tanh": single("Tanh", [("a", [3, 4])]),
    "gelu": single("Gelu", [("a", [3, 4])], opset=20),
    "gelu_tanh": single("Gelu", [("a", [3, 4])], opset=20, approximate="tanh"),
    "erf": single("Erf", [("a", [3, 4])]),
    "exp": single("Exp", [("a", [3, 4])]),
    "sqrt": ([helper.make_node("Abs", ["a"], ["t"]), helper.make_node("Sqrt", ["t"], ["y"])], [("a", [3, 4])], {}, 17),
    "batchnorm_alone": single(
        "BatchNormalization", [("x", [2, 3, 4, 4])], {"g": arr(3), "b": arr(3), "m": arr(3), "v": arr(3, lo=0.5, hi=2.0)}, epsilon=1e-3
    ),
    "maxpool": single("MaxPool", [("x", [1, 2, 9, 9])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "maxpool_ceil_dilated": single("MaxPool", [("x", [1, 2, 10, 10])], kernel_shape=[2, 3], strides=[3, 2], dilations=[2, 1], ceil_mode=1),
    "avgpool_exclude_pad": single("AveragePool", [("x", [1, 2, 8, 8])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "avgpool_include_pad": single(
        "AveragePool", [("x", [1, 2, 8, 8])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1
    ),
    "avgpool_ceil": single("AveragePool", [("x", [1, 2, 8, 8])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    "global_avg_pool": single("GlobalAveragePool", [("x", [2, 3, 5, 4])]),
    "global_max_pool": single("GlobalMaxPool", [("x", [2, 3, 5, 4])]),
    "flatten": single("Flatten", [("x", [2, 3, 4, 5])], axis=2),
    "reshape_zero_minus_one": single("Reshape", [("x", [2, 3, 4])], {"s": np.array([0, -1, 2])}),
    "transpose": single("Transpose", [("x", [2, 3, 4])], perm=[2, 0, 1]),
    "squeeze_unsqueeze": (
        [helper.make_node("Unsqueeze", ["x", "ax"], ["t"]), helper.make_node("Squeeze", ["t", "sq"], ["y"])],
        [("x", [3, 1, 4])],
        {"ax": np.array([0, 3]), "sq": np.array([2])},
        13,
    ),
    "squeeze_attr_opset11": single("Squeeze", [("x", [3, 1, 4])], opset=11, axes=[1]),
    "concat": single("Concat", [("a", [2, 3, 4]), ("b", [2, 1, 4])], {"c": arr(2, 2, 4)}, axis=1),
    "split": (
        [helper.make_node("Split", ["x", "s"], ["p", "q"], axis=1), helper.make_node("Sub", ["p", "q"], ["y"])],
        [("x", [2, 6])],
        {"s": np.array([3, 3])},
        13,
    ),
    "slice_negative_step": single(
        "Slice", [("x", [5, 6, 7])], {"st": np.array([-1, 1]), "en": np.array([-8, 6]), "ax": np.array([2, 0]), "sp": np.array([-2, 2])}
    ),
    "pad_constant": single("Pad", [("x", [2, 3, 4])], {"p": np.array([0, 1, 2, 0, 2, -1]), "v": np.array(0.5, np.float32)}),
    "pad_edge": single("Pad", [("x", [1, 2, 4, 4])], {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1])}, mode="edge"),
    "pad_reflect": single("Pad", [("x", [1, 2, 4, 4])], {"p": np.array([0, 0, 2, 1, 0, 0, 1, 3])}, mode="reflect"),
    "softmax_axis1": single("Softmax", [("x", [2, 3, 4])], axis=1),
    "softmax_opset11_flatten": single("Softmax", [("x", [2, 3, 4])], opset=11, axis=1),
    "log_softmax": single("LogSoftmax", [("x", [3, 5])]),
    "layernorm": single("LayerNormalization", [("x", [2, 4, 6])], {"g": arr(6), "b": arr(6)}, epsilon=1e-3),
    "layernorm_axis1_no_bias": single("LayerNormalization", [("x", [2, 4, 6])], {"g": arr(4, 6)}, axis=1),
    "reduce_mean_attr": single("ReduceMean", [("x", [2, 3, 4])], opset=13, axes=[1, 2], keepdims=0),
    "reduce_sum_input": single("ReduceSum", [("x", [2, 3, 4])], {"ax": np.array([-1])}),
    "reduce_max_all_keep": single("ReduceMax", [("x", [2, 3, 4])], opset=13),
    "sum_three": single("Sum", [("a", [2, 3]), ("b", [3]), ("c", [2, 1])]),
    "expand": single("Expand", [("x", [3, 1])], {"s": np.array([2, 3, 4])}),
    "gather_scalar": single("Gather", [("x", [3, 4, 5])], {"i": np.array(2)}, axis=1),
    "gather_list": single("Gather", [("x", [3, 4, 5])], {"i": np.array([3, 0, 0, -1])}, axis=2),
    # issue 14 item 4: the operators real models have, each against ONNX Runtime
    "lrn": single("LRN", [("x", [1, 6, 4, 5])], size=3, alpha=2e-2, beta=0.6, bias=1.5),
    "lrn_size5": single("LRN", [("x", [2, 7, 3, 3])], size=5),
    "prelu_channels": single("PRelu", [("x", [2, 3, 4, 4])], {"s": arr(3, 1, 1)}),
    "selu": single("Selu", [("x", [3, 4])], alpha=1.5, gamma=1.2),
    "sign": single("Sign", [("x", [3, 4])]),
    "shrink": single("Shrink", [("x", [3, 4])], lambd=0.3, bias=0.1),
    "softsign": single("Softsign", [("x", [3, 4])]),
    "tile": single("Tile", [("x", [2, 3])], {"r": np.array([2, 3])}),
    "where_const_cond": (
        [helper.make_node("Where", ["c", "a", "b"], ["y"])],
        [("a", [2, 3])],
        {"c": np.array([[True, False, True]]), "b": np.array(0.5, np.float32)},
        17,
    ),
    "where_computed_cond": (
        [helper.make_node("Greater", ["a", "b"], ["c"]), helper.make_node("Where", ["c", "a", "b"], ["y"])],
        [("a", [2, 3, 4]), ("b", [3, 1])],
        {},
        17,
    ),
    "cast_to_float_and_range": (
        [
            helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
            helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["xf", "rf"], ["y"]),
        ],
        [("x", [3, 4])],
        {"start": np.array(1, np.int64), "limit": np.array(9, np.int64), "delta": np.array(2, np.int64)},
        17,
    ),
    "expand_const_shape": single("Expand", [("x", [1, 3, 1])], {"s": np.array([2, 1, 4])}),
    "einsum_attention_scores": single("Einsum", [("q", [2, 3, 5, 4]), ("k", [2, 3, 6, 4])], equation="bhqd,bhkd->bhqk"),
    "einsum_attention_values": single("Einsum", [("p", [2, 3, 5, 6]), ("v", [2, 3, 6, 4])], equation="bhqk,bhkd->bhqd"),
    "einsum_linear_const": single("Einsum", [("x", [2, 5, 4])], {"w": arr(4, 3)}, equation="bij,jk->bik"),
    "einsum_ellipsis_transpose_out": single("Einsum", [("a", [2, 3, 4]), ("b", [4, 5])], equation="...ij,jk->...ki"),
    "einsum_one_operand_sum": single("Einsum", [("a", [2, 3, 4])], equation="ijk->ki"),
    "einsum_sums_a_label_of_one_operand": single("Einsum", [("a", [2, 3, 4]), ("b", [4, 5])], equation="bij,jk->bk"),
    "resize_nearest_scales": single(
        "Resize",
        [("x", [1, 2, 3, 4])],
        {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 2], np.float32)},
        opset=13,
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    ),
    "resize_linear_half_pixel": single(
        "Resize",
        [("x", [1, 2, 3, 4])],
        {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 1.5, 2.5], np.float32)},
        opset=13,
        mode="linear",
    ),
    "resize_linear_align_corners_sizes": single(
        "Resize",
        [("x", [1, 2, 4, 4])],
        {"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32), "sz": np.array([1, 2, 7, 3])},
        opset=13,
        mode="linear",
        coordinate_transformation_mode="align_corners",
    ),
    "resize_cubic": single(
        "Resize",
        [("x", [1, 1, 4, 5])],
        {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 1.6], np.float32)},
        opset=13,
        mode="cubic",
    ),
    "resize_nearest_half_pixel_round": single(
        "Resize",
        [("x", [1, 2, 5, 3])],
        {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 0.6, 1.7], np.float32)},
        opset=13,
        mode="nearest",
    ),
    "instance_norm": single("InstanceNormalization", [("x", [2, 3, 4, 5])], {"s": arr(3), "b": arr(3)}, epsilon=1e-3),
    "conv_3d": single("Conv", [("x", [1, 2, 5, 6, 4])], {"W": arr(3, 2, 3, 2, 3), "B": arr(3)}, pads=[1, 0, 1, 0, 1, 1], strides=[2, 1, 1]),
    "conv_3d_groups_dilated": single("Conv", [("x", [1, 4, 5, 5, 5])], {"W": arr(4, 2, 2, 2, 2)}, group=2, dilations=[2, 1, 2]),
    "maxpool_3d": single("MaxPool", [("x", [1, 2, 5, 6, 5])], kernel_shape=[2, 3, 2], strides=[2, 2, 1], pads=[0, 1, 1, 1, 1, 0]),
    "avgpool_3d_ceil": single("AveragePool", [("x", [1, 2, 5, 5, 6])], kernel_shape=[3, 2, 3], strides=[2, 2, 2], ceil_mode=1),
    "maxpool_1d": single("MaxPool", [("x", [2, 3, 11])], kernel_shape=[3], strides=[2], pads=[1, 1], dilations=[2]),
    "avgpool_1d_pad": single("AveragePool", [("x", [1, 3, 9])], kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=1),
    "gather_2d_const_indices": single("Gather", [("x", [5, 4])], {"i": np.array([[0, 4], [-1, 2]])}, axis=0),
    # older opset forms (ONNX Runtime runs opset 7 onward)
    "unsqueeze_axes_attr_opset9": single("Unsqueeze", [("x", [3, 4])], opset=9, axes=[0, 3]),
    "split_attr_opset11": (
        [helper.make_node("Split", ["x"], ["p", "q"], axis=1, split=[2, 4]), helper.make_node("ReduceSum", ["q"], ["y"], axes=[1])],
        [("x", [2, 6])],
        {},
        11,
    ),
    "pad_attrs_opset10": single("Pad", [("x", [1, 2, 3, 3])], opset=10, pads=[0, 0, 1, 2, 0, 0, 2, 1], mode="reflect"),
    "reduce_max_axes_attr_opset11": single("ReduceMax", [("x", [2, 3, 4])], opset=11, axes=[0, 2], keepdims=0),
    "batchnorm_opset7_spatial": single(
        "BatchNormalization",
        [("x", [2, 3, 4, 4])],
        {"g": arr(3), "b": arr(3), "m": arr(3), "v": arr(3, lo=0.5, hi=2.0)},
        opset=7,
        spatial=1,
    ),
    "batchnorm_opset9": single(
        "BatchNormalization", [("x", [2, 3, 5])], {"g": arr(3), "b": arr(3), "m": arr(3), "v": arr(3, lo=0.5, hi=2.0)}, opset=9
    ),
    "dropout_opset7_ratio": single("Dropout", [("x", [2, 3])], opset=7, ratio=0.3),
    "dropout_opset12_mask_unused": (
        [helper.make_node("Dropout", ["x", "r"], ["d", "mask"]), helper.make_node("Relu", ["d"], ["y"])],
        [("x", [2, 3])],
        {"r": np.array(0.2, np.float32)},
        12,
    ),
    "upsample_opset7_attr": single("Upsample", [("x", [1, 2, 3, 3])], opset=7, scales=[1.0, 1.0, 2.0, 3.0], mode="nearest"),
    "upsample_opset9_linear": single("Upsample", [("x", [1, 2, 3, 4])], {"sc": np.array([1, 1, 2, 2], np.float32)}, opset=9, mode="linear"),
    "resize_opset10": single("Resize", [("x", [1, 2, 3, 3])], {"sc": np.array([1, 1, 2, 2], np.float32)}, opset=10, mode="nearest"),
    "clip_opset11_inputs": single("Clip", [("a", [3, 4])], {"lo": np.array(-0.2, np.float32)}, opset=11),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_onnx_runtime(case, tmp_path):
    nodes, inputs, inits, opset = CASES[case]
    res = import_onnx(make(tmp_path, nodes, inputs, inits, opset), weights_dir=tmp_path)
    run_verified(res, check_records=True)
    assert res.report.unsupported == [] and sum(res.report.ops_mapped.values()) >= 1


def test_shape_arithmetic_is_folded_and_identity_removed(tmp_path):
    # x.view(x.size(0), -1) as older exporters write it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    nodes = [
        helper.make_node("Identity", ["x"], ["xi"], name="id0"),
        helper.make_node("Shape", ["xi"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["xi", "shape"], ["flat"], name="flatten"),
        helper.make_node("Dropout", ["flat"], ["y"], name="drop"),
    ]
    inits = {"zero": np.array(0), "ax0": np.array([0]), "minus1": np.array([-1])}
    res = import_onnx(make(tmp_path, nodes, [("x", [2, 3, 4])], inits), weights_dir=tmp_path)
    text = "\n".join(res.report.simplifications)
    assert "Identity 'id0' removed" in text and "Dropout 'drop' removed" in text
    assert "constant-folded 4 node(s)" in text and "Reshape 'flatten' is an index remapping" in text
    assert [s.op for s in res.pipeline.stages] == ["copy"]  # only the output's own stage
    run_verified(res)


def test_batchnorm_folded_into_conv(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], name="bn1"),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    inits = {"W": arr(6, 3, 3, 3), "B": arr(6), "g": arr(6), "b": arr(6), "m": arr(6), "v": arr(6, lo=0.2, hi=2.0)}
    res = import_onnx(make(tmp_path, nodes, [("x", [1, 3, 8, 8])], inits), weights_dir=tmp_path)
    assert any("BatchNormalization 'bn1' folded into Conv 'conv1'" in s for s in res.report.simplifications)
    assert "BatchNormalization" not in res.report.ops_mapped and "channel_affine" not in {s.op for s in res.pipeline.stages}
    assert {i.name for i in res.pipeline.inputs if i.weight} == {"conv1_bn_folded_W", "conv1_bn_folded_B"}
    run_verified(res)


def test_weights_file_and_source(tmp_path):
    nodes, inputs, inits, opset = CASES["conv_groups"]
    path = make(tmp_path, nodes, inputs, inits, opset)
    res = import_onnx(path, weights_dir=tmp_path / "w")
    src = res.pipeline.source
    assert src["kind"] == "onnx" and src["model"] == str(path.resolve()) and src["input_names"] == {"x_": "x"}
    assert Path(src["weights"]).parent == tmp_path / "w" and src["model_sha256"][:16] in src["weights"]
    import hashlib

    assert hashlib.sha256(Path(src["weights"]).read_bytes()).hexdigest() == src["weights_sha256"]
    with np.load(src["weights"], allow_pickle=False) as z:
        assert set(z.files) == {i.name for i in res.pipeline.inputs if i.weight}
    again = import_onnx(path, weights_dir=tmp_path / "w2")  # reproducible: same content, same hash
    assert again.pipeline.content_hash() == res.pipeline.content_hash()


def test_unsupported_ops_are_all_listed(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Mod", ["a", "a"], ["b"], name="mod_node", fmod=1),
        helper.make_node("Hardmax", ["b"], ["c"], name="hardmax_node"),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(make(tmp_path, nodes, [("x", [2, 3])]), weights_dir=tmp_path)
    assert {(u["op"], u["node"]) for u in err.value.unsupported} == {("Mod", "mod_node"), ("Hardmax", "hardmax_node")}
    assert "mod_node" in str(err.value) and "hardmax_node" in str(err.value)


def test_unsupported_attributes_are_collected_with_unmapped_types(tmp_path):
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"], name="wrap_pad", mode="wrap"),
        helper.make_node("Pow", ["a", "a"], ["b"], name="pow_of_pad"),  # reads an unsupported result: not re-reported
        helper.make_node("Pow", ["x", "x"], ["c"], name="tensor_pow"),
        helper.make_node("Hardmax", ["c"], ["d"], name="hardmax_node"),
        helper.make_node("Add", ["b", "d"], ["y"]),
    ]
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(make(tmp_path, nodes, [("x", [2, 3])], {"p": np.array([0, 0, 0, 0])}, opset=19), weights_dir=tmp_path)
    found = {u["node"]: u["reason"] for u in err.value.unsupported}
    assert list(found) == ["wrap_pad", "tensor_pow", "hardmax_node"]
    assert "Pad mode 'wrap'" in found["wrap_pad"] and "exponent" in found["tensor_pow"] and "no mapping" in found["hardmax_node"]


def test_malformed_truncated_and_missing_files(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model at all\xff\xfe" * 10)
    with pytest.raises(ModelImportError, match="garbage.onnx"):
        import_onnx(garbage)
    good = MODELS / "small_cnn.onnx"
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ModelImportError, match="cut.onnx.*(truncated|malformed)"):
        import_onnx(cut)
    with pytest.raises(ModelImportError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx")


def test_dynamic_shape_is_rejected_with_the_input_named(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelImportError, match="input 'x' has a dynamic dimension 'batch' at axis 0"):
        import_onnx(path)


@pytest.mark.parametrize("model", ["small_cnn", "resnet18_stage", "mobilenetv2_block", "transformer_layer"])
def test_sample_model_end_to_end(model, tmp_path):
    res = import_onnx(MODELS / f"{model}.onnx", weights_dir=tmp_path)
    run_verified(res)
    assert res.report.unsupported == [] and res.report.stages == len(res.pipeline.stages)
    text = "\n".join(res.report.simplifications)
    if model in ("resnet18_stage", "mobilenetv2_block", "small_cnn"):
        assert "folded into Conv" in text and "BatchNormalization" not in res.report.ops_mapped
    else:  # linear layers become one matmul stage each; the head split and merge are views
        assert text.count("folded into MatMul") == 4 and "Gather '/Gather' is an index remapping" in text


def _cli(*args, cache=None):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache)) if cache else None  # imported weights go to a temp cache
    return shared_server().run(list(args), env=env, cwd=ROOT, timeout=300)  # `python main.py ARGS`, forked (tests/cli_fork.py)


def test_cli_import_json_and_bad_file(tmp_path):
    r = _cli("import", str(MODELS / "small_cnn.onnx"), "--json", "--weights-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("stages", "inputs", "outputs", "simplifications", "unsupported", "ops_mapped", "pipeline_hash"):
        assert key in out
    assert out["stages"] > 0 and out["inputs"][0]["shape"] == [1, 3, 32, 32] and out["unsupported"] == []
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"definitely not protobuf")
    r = _cli("import", str(bad), "--json")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "bad.onnx" in r.stderr


def test_cli_measure_onnx_is_verified_against_onnx_runtime(tmp_path):
    r = _cli("measure", str(MODELS / "small_cnn.onnx"), "--json", "--no-db", "--min-time", "0.02", "--no-profile", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified"] is True and out["verify_method"].startswith("ONNX Runtime")
    assert list((tmp_path / "schedule-explorer" / "weights").glob("small_cnn-*.npz"))


def test_views_compose_into_affine_indices(tmp_path):
    # (6, 8) -> reshape (6, 2, 4) -> transpose (2, 6, 4) -> relu: one stage reading x with plain affine indices.
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Relu", ["t"], ["y"]),
    ]
    res = import_onnx(make(tmp_path, nodes, [("x", [6, 8])], {"s": np.array([6, 2, 4])}), weights_dir=tmp_path)
    from engine.expr import format_expr

    (stage,) = res.pipeline.stages
    assert format_expr(stage.value) == "max(x_(y, c * 4 + x), 0.0)"
    run_verified(res)


def typed_model(tmp_path, nodes, inputs, inits=None, opset=17, name="typed", out_shape=None, outputs=("y",)):
    """Like make(), with an element type per input: (name, shape, TensorProto type)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, s, t in inputs]
        + [  # before IR version 4 every initializer is a graph input too
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
            for n, v in (inits or {}).items()
            if opset < 7
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset >= 7 else 3
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    if out_shape is not None:
        model.graph.output.append(helper.make_tensor_value_info(outputs[0], TensorProto.FLOAT, out_shape))
    else:
        model.graph.output.extend(inferred.graph.output)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def test_embedding_gather_with_int64_token_ids_against_onnx_runtime(tmp_path):
    # An embedding lookup: int64 indices are data (negative ones count from the end), the table a weight.
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0), helper.make_node("Relu", ["e"], ["y"])]
    path = typed_model(tmp_path, nodes, [("ids", [2, 3], TensorProto.INT64)], {"table": arr(7, 4)})
    res = import_onnx(path, weights_dir=tmp_path)
    p = res.pipeline
    assert p.source["input_dtypes"] == {"ids": "int64"} and p.source["index_ranges"] == {"ids": [-7, 7]}
    ins = R.make_inputs(p, seed=1)
    assert np.array_equal(ins["ids"], np.round(ins["ids"])) and ins["ids"].min() >= -7 and ins["ids"].max() < 7
    assert (ins["ids"] < 0).any()  # negative indices are exercised too
    run_verified(res, check_records=True)


def test_scalar_and_integer_data_inputs(tmp_path):
    nodes = [
        helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "kf"], ["m"]),
        helper.make_node("Sub", ["m", "uf"], ["mu"]),
        helper.make_node("Add", ["mu", "s"], ["y"]),
    ]
    inputs = [
        ("x", [2, 3], TensorProto.FLOAT),
        ("k", [2, 3], TensorProto.INT32),
        ("u", [1, 3], TensorProto.UINT8),
        ("s", [], TensorProto.FLOAT),
    ]
    res = import_onnx(typed_model(tmp_path, nodes, inputs), weights_dir=tmp_path)
    assert res.pipeline.shape_of("s") == (1,) and res.pipeline.source["scalar_inputs"] == ["s"]
    assert res.pipeline.source["input_dtypes"] == {"k_": "int32", "u": "uint8"}  # k_: k would shadow a loop name
    u = R.make_inputs(res.pipeline, seed=4)["u"]
    assert u.min() >= 0 and np.array_equal(u, np.round(u))  # an unsigned input gets no negative test data
    assert any("input 's' is a scalar" in t for t in res.report.simplifications)
    run_verified(res)


def test_integer_division_of_data_is_unsupported(tmp_path):
    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="int_div"), helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)]
    path = typed_model(tmp_path, nodes, [("a", [3], TensorProto.INT64), ("b", [3], TensorProto.INT64)])
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(path, weights_dir=tmp_path)
    assert err.value.unsupported[0]["node"] == "int_div" and "integers" in err.value.unsupported[0]["reason"]


def test_a_shape_input_is_imported_with_its_given_value(tmp_path):
    from engine.frontends.onnx_import import shape_inputs

    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"])]
    path = typed_model(tmp_path, nodes, [("x", [3, 1], TensorProto.FLOAT), ("shape", [3], TensorProto.INT64)])
    assert shape_inputs(onnx.load(str(path))) == ["shape"]
    with pytest.raises(UnsupportedModelError, match="must be a constant"):
        import_onnx(path, weights_dir=tmp_path)
    res = import_onnx(path, weights_dir=tmp_path, input_values={"shape": np.array([2, 3, 4])})
    assert res.pipeline.shape_of(res.pipeline.outputs[0]) == (2, 3, 4)
    assert res.pipeline.source["fixed_inputs"]["shape"]["value"] == [2, 3, 4]
    run_verified(res)  # ONNX Runtime is fed the fixed value too
    with pytest.raises(ModelImportError, match="'nope', which is not a graph input"):
        import_onnx(path, weights_dir=tmp_path, input_values={"nope": np.array([1])})


def opset6_model(tmp_path, axis, b_shape):
    # Opset 6: Add's broadcast=1 with `axis` aligns b with a's axes from `axis` on; Gemm's C broadcasts.
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], broadcast=1, axis=axis),
        helper.make_node("Reshape", ["s", "shape"], ["s2"]),
        helper.make_node("Gemm", ["s2", "w", "c"], ["y"], broadcast=1),
    ]
    inits = {"b": arr(*b_shape), "w": arr(12, 2), "c": arr(2), "shape": np.array([2, 12])}
    path = typed_model(tmp_path, nodes, [("a", [2, 3, 4], TensorProto.FLOAT)], inits, opset=6, out_shape=[2, 2], name=f"op6_{axis}")
    return path, inits


def test_opset6_model_is_verified_by_onnx_reference_when_onnx_runtime_refuses(tmp_path):
    path, inits = opset6_model(tmp_path, 1, (3, 4))
    res = import_onnx(path, weights_dir=tmp_path)
    p = res.pipeline
    run, v = api.run_once(p, default_schedule(p), seed=2)
    assert run["method"].startswith("ONNX reference evaluator (onnx.reference)") and "ONNX Runtime cannot run it" in run["method"]
    assert v.ok, v.message
    a = run["inputs"][p.inputs[0].name]
    want = (a + inits["b"]).reshape(2, 12) @ inits["w"] + inits["c"]
    assert np.allclose(run["outputs"][p.outputs[0]], want, rtol=1e-4, atol=1e-5)


def test_opset6_broadcast_axis_aligns_from_the_axis(tmp_path):
    # b (3,) at axis 1 of a (2, 3, 4): numpy's trailing rule would not even fit (onnx.reference refuses it too).
    path, inits = opset6_model(tmp_path, 1, (3,))
    p = import_onnx(path, weights_dir=tmp_path).pipeline
    a = arr(2, 3, 4)
    weights = {k: v for k, v in R.make_inputs(p).items() if k != p.inputs[0].name}
    got = R.evaluate_ops(p, {p.inputs[0].name: a.astype(np.float64), **weights})
    want = (a + inits["b"].reshape(1, 3, 1)).reshape(2, 12) @ inits["w"] + inits["c"]
    assert np.allclose(got[p.outputs[0]], want, rtol=1e-5, atol=1e-6)


def test_unsqueeze_opset9_axes_on_constants_folds(tmp_path):
    # DenseNet / Inception-v2 as exported at opset 9: shape arithmetic with Unsqueeze(axes=...) on constants.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    res = import_onnx(
        make(tmp_path, nodes, [("x", [2, 3, 4])], {"zero": np.array(0), "minus1": np.array([-1])}, opset=9, out_shape=[2, 12]),
        weights_dir=tmp_path,
    )
    assert any("constant-folded 4 node(s)" in t and "Unsqueeze x1" in t for t in res.report.simplifications)
    run_verified(res)


def test_constant_folding_failure_is_unsupported_with_node_and_op_no_internal_message(tmp_path):
    nodes = [
        helper.make_node("Gather", ["c", "bad"], ["g"], name="bad_gather", axis=0),  # index 9 of 3 elements
        helper.make_node("Add", ["x", "g"], ["y"]),
    ]
    path = make(tmp_path, nodes, [("x", [2])], {"c": np.array([1.0, 2.0, 3.0], np.float32), "bad": np.array([9, 0])})
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(path, weights_dir=tmp_path)
    (u,) = err.value.unsupported
    assert u["op"] == "Gather" and u["node"] == "bad_gather" and "constant folding failed" in u["reason"]
    assert "IndexError" not in str(err.value) and "out of bounds" not in str(err.value) and "Traceback" not in str(err.value)


def test_unnamed_nodes_are_named_from_their_output_tensors(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["/layer1/conv1/Conv_output_0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/layer1/conv1/Conv_output_0"], ["17"]),
        helper.make_node("Sigmoid", ["17"], ["y"]),
    ]
    res = import_onnx(make(tmp_path, nodes, [("x", [1, 2, 5, 5])], {"W": arr(3, 2, 3, 3)}), weights_dir=tmp_path)
    names = [s.name for s in res.pipeline.stages]
    assert "layer1_conv1_Conv" in names and "Relu_17" in names
    assert res.pipeline.source["scopes"]["layer1_conv1_Conv"] == "layer1/conv1"
    run_verified(res)


def test_pad_opset1_paddings_attribute_and_batchnorm_spatial0(tmp_path):
    model = make(tmp_path, *single("Pad", [("x", [1, 2, 3])], opset=1, paddings=[0, 1, 0, 0, 2, 1]), out_shape=[1, 5, 4])
    res = import_onnx(model, weights_dir=tmp_path)
    p = res.pipeline
    run, v = api.run_once(p, default_schedule(p), seed=1)  # ONNX Runtime or, where it refuses opset 1, onnx.reference
    assert v.ok, v.message
    want = np.pad(run["inputs"][p.inputs[0].name], [(0, 0), (1, 2), (0, 1)])
    assert np.array_equal(run["outputs"][p.outputs[0]], want)
    params = {"g": arr(2, 3), "b": arr(2, 3), "m": arr(2, 3), "v": arr(2, 3, lo=0.5, hi=2.0)}
    path = make(tmp_path, *single("BatchNormalization", [("x", [1, 2, 3])], params, opset=7, spatial=0), name="bn0", out_shape=[1, 2, 3])
    with pytest.raises(UnsupportedModelError, match="spatial=0"):
        import_onnx(path, weights_dir=tmp_path)


def test_sequences_with_constant_positions_and_a_sequence_output(tmp_path):
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1, keepdims=0),
        helper.make_node("SequenceErase", ["seq", "first"], ["rest"]),
        helper.make_node("ConcatFromSequence", ["rest"], ["y"], axis=0, new_axis=1),
    ]
    res = import_onnx(make(tmp_path, nodes, [("x", [2, 3, 4])], {"first": np.array(0)}, out_shape=[2, 2, 4]), weights_dir=tmp_path)
    run_verified(res)  # ONNX Runtime runs the sequence ops; the pipeline is two slices concatenated
    nodes = [helper.make_node("SplitToSequence", ["x"], ["y"], axis=1, name="to_seq")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    path = tmp_path / "seq_out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(path, weights_dir=tmp_path)
    assert err.value.unsupported[0]["node"] == "to_seq" and "sequence" in err.value.unsupported[0]["reason"]


def test_if_on_a_constant_condition_is_its_branch_and_on_data_unsupported(tmp_path):
    # PyTorch's LRN export (opset 11+) checks the rank with Shape -> Equal -> If, whose branches read data.
    def branch(name, op, **attrs):
        return helper.make_graph(
            [helper.make_node(op, ["t"], [f"{name}_out"], **attrs)],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)],
        )

    nodes = [
        helper.make_node("Relu", ["x"], ["t"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Size", ["s"], ["rank"]),
        helper.make_node("Equal", ["rank", "three"], ["cond"]),
        helper.make_node(
            "If", ["cond"], ["y"], name="rank_check", then_branch=branch("then", "Sigmoid"), else_branch=branch("else", "Tanh")
        ),
    ]
    res = import_onnx(make(tmp_path, nodes, [("x", [2, 3, 4])], {"three": np.array(3)}, out_shape=[2, 3, 4]), weights_dir=tmp_path)
    assert any("If 'rank_check': its condition is constant, the then branch inlined" in t for t in res.report.simplifications)
    assert "unary" in {r.op for r in res.pipeline.ops} and {r.attrs.get("fn") for r in res.pipeline.ops} >= {"relu", "sigmoid"}
    run_verified(res)
    nodes = [
        helper.make_node("Relu", ["x"], ["t"]),
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=1),  # a condition computed from data
        helper.make_node("Greater", ["m", "zero"], ["condb"]),
        helper.make_node("If", ["condb"], ["y"], name="data_if", then_branch=branch("then", "Sigmoid"), else_branch=branch("else", "Tanh")),
    ]
    with pytest.raises(UnsupportedModelError) as err:
        import_onnx(
            make(tmp_path, nodes, [("x", [2, 3, 4])], {"zero": np.array(0.0, np.float32)}, out_shape=[2, 3, 4], name="data_if"),
            weights_dir=tmp_path,
        )
    assert [(u["op"], u["node"]) for u in err.value.unsupported] == [("If", "data_if")] and "computed condition" in str(err.value)
