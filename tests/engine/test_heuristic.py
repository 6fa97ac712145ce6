"""The rule-based heuristic schedule (engine/heuristic.py) and the recipes it shares with the
hand schedules (engine/recipes.py): valid and verified on every built-in pipeline and
sample model, valid on random pipelines, falling back where a recipe does not apply, and
the hand schedules unchanged by moving their recipes."""

from dataclasses import replace
from pathlib import Path

import pytest

from engine import api, zoo
from engine import expr as E
from engine.hand_schedules import hand_schedule
from engine.heuristic import heuristic_schedule, plan
from engine.ir import Pipeline
from engine.measure import Runner
from engine.randpipe import random_pipeline
from engine.schedule import validate

MODELS = sorted((Path(__file__).resolve().parents[2] / "resources" / "models").glob("*.onnx"))
VERIFY_ONLY = {"min_time_s": 0.0, "min_runs": 1, "warmup": 1, "profile": False}  # correctness here, timings in `bench models`

# hand_schedule(p, AVX512).content_hash() of every built-in pipeline at both sizes, recorded
# before the recipes moved from hand_schedules.py to recipes.py (the AVX-512 machine they were
# timed on). A deliberate change to a hand schedule updates its entry; a refactor of the
# recipes must leave them all as they are. Changed on purpose: the small conv blocks at W=16
# (8 channels x 1 vector instead of 4 x 1: the channels per block from the accumulators), and
# matmul_block's tiles 128 columns wide (4 register blocks of 32 side by side: B rows read 512
# bytes at a time; matmul, mlp), and matmul's hand schedule packing B (matmul_panels, issue 14),
# and at most 8 channels a conv block (recipes.MAX_BLOCK_CHANNELS: mobilenet_block/small's
# 16 x 1 at W=16 is 8 x 1; same time, thread CPU time, scripts/zoo_ab.py), and no conv row
# rounded up past what its producers compute (recipes.rounds_tile: conv_relu/full's conv at the
# output in x blocks of 2 zmm, 49.6 -> 2.26 ms on a Sapphire Rapids core whose rounded lanes
# read garbage; resnet_block/full and mobilenet_block/full's tiles rounded up, same time there),
# and one-vector rows blocked over rows where FMAs run full width (recipes.full_rows_block: the
# small sizes' 16-wide planes; Zen 5, CPU time, scripts/zoo_ab.py --size small: conv_relu hand
# 0.010 -> 0.006 ms, resnet_block 0.018 -> 0.010, mobilenet_block 0.018 -> 0.018).
AVX512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"
HAND_HASHES = {
    "blur/small": "41b5adc58b7d25ac",
    "blur/full": "41b5adc58b7d25ac",
    "unsharp/small": "f52d6983ecbe93cb",
    "unsharp/full": "f52d6983ecbe93cb",
    "harris/small": "b5baaa79114dcbaa",
    "harris/full": "b5baaa79114dcbaa",
    "conv_relu/small": "7fc1b2102a54f486",
    "conv_relu/full": "b2cc3c71078bd045",
    "depthwise_conv/small": "e0e5e9d118cfb6a5",
    "depthwise_conv/full": "67f7da3d102478b4",
    "maxpool/small": "9ac722c5964b1e45",
    "maxpool/full": "9ac722c5964b1e45",
    "matmul/small": "a4b2a64f0964468e",
    "matmul/full": "a4b2a64f0964468e",
    "mlp/small": "6ddeba2fceda5152",
    "mlp/full": "c523c365b2c19123",
    "softmax/small": "4604f1b403858175",
    "softmax/full": "4604f1b403858175",
    "layernorm/small": "eeb6a9bb4f67016c",
    "layernorm/full": "eeb6a9bb4f67016c",
    "resnet_block/small": "f5303b945b103636",
    "resnet_block/full": "5b80e035d3349dde",
    "mobilenet_block/small": "7533ce5d1a965675",
    "mobilenet_block/full": "03fc9ed165ea499e",
    "attention/small": "05682bb1a7245396",
    "attention/full": "91787db7e8a8db77",
}


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


def test_hand_schedules_are_unchanged_by_the_recipe_refactor():
    got = {f"{n}/{size}": hand_schedule(zoo.get(n, size), AVX512).content_hash() for n in zoo.names() for size in zoo.SIZES}
    assert got == HAND_HASHES


@pytest.mark.parametrize("name", zoo.names())
def test_heuristic_is_valid_and_verified_on_the_zoo(name, runner):
    p = zoo.get(name, "small")
    s = heuristic_schedule(p)
    validate(p, s)
    assert s.name == "heuristic" and s.stages
    m = api.measure(p, s, runner, None, **VERIFY_ONLY)
    assert m.ok and m.verified, m.error


@pytest.mark.parametrize("path", MODELS, ids=[m.stem for m in MODELS])
def test_heuristic_is_valid_and_verified_on_the_sample_models(path, runner):
    p = api.load_pipeline(str(path))
    s = api.load_schedule(p, "heuristic")  # as `measure MODEL.onnx --schedule heuristic` loads it
    m = api.measure(p, s, runner, None, **VERIFY_ONLY)
    assert m.ok and m.verified, m.error
    assert m.verify_method.startswith("ONNX Runtime")


def test_every_stage_gets_a_rule_and_the_recipes_apply_where_they_should():
    pl = plan(zoo.get("resnet_block", "small"))
    assert set(pl.rules) == {s.name for s in zoo.get("resnet_block", "small").stages}
    assert "conv_block" in pl.rules["conv1"] and "conv_block" in pl.rules["output"]
    assert pl.rules["bn1"].startswith("inline") and pl.rules["conv1_pad"].startswith("at relu1.")
    assert "matmul_panels" in plan(zoo.get("matmul", "small")).rules["prod"]  # B (64 KiB) packed: tests/engine/test_heuristic_packing.py
    assert "dense_output" in plan(zoo.get("mlp", "small")).rules["fc3"]  # an output can't be computed at a tile
    tl = plan(api.load_pipeline(str(MODELS[0].parent / "transformer_layer.onnx")))
    # GELU reads fc1 twice (x * (1 + erf(x / sqrt 2)) / 2): the whole diamond is inlined into its last stage.
    assert "act_Mul_1" in tl.rules["fc1_MatMul"]
    assert all(tl.rules[f"act_{k}"].startswith("inline into act_Mul_1") for k in ("Div", "Erf", "Add", "Mul"))


def test_heuristic_is_valid_on_random_and_full_size_pipelines():
    for seed in range(60):
        p = random_pipeline(seed)
        validate(p, heuristic_schedule(p))
    for name in zoo.names():
        p = zoo.get(name, "full")
        validate(p, heuristic_schedule(p))


def test_a_recipe_that_does_not_apply_falls_back_to_a_simpler_rule(runner):
    # conv_relu with relu's batch dim named 'xo': conv_block's split of x into 'xo' collides.
    p = zoo.get("conv_relu", "small")
    relu = p.stage("relu")
    dims = tuple(replace(d, name="xo") if d.name == "n" else d for d in relu.dims)
    relu = replace(relu, dims=dims, value=E.substitute_vars(relu.value, {"n": E.Var("xo")}))
    q = Pipeline(p.name, p.inputs, [relu if s.name == "relu" else s for s in p.stages], p.outputs, p.description, p.ops)
    pl = plan(q)
    # Not at the relu's tiles: the conv at root, blocked in its own buffer; the relu in plain strips.
    assert "conv_block" not in pl.rules["conv"] and "(conv_root_" in pl.rules["conv"] and "strips" in pl.rules["relu"]
    validate(q, pl.schedule)
    m = api.measure(q, pl.schedule, runner, None, **VERIFY_ONLY)
    assert m.ok and m.verified, m.error


def test_an_output_pool_whose_width_no_vector_divides_is_vectorized_with_a_guarded_tail(tmp_path):
    # SqueezeNet's stem pool as a model's (or a task's) output: 55 wide, so no power of two
    # above 1 divides it; it ran as scalar rows (3.3x ONNX Runtime as a block, 2.0x now).
    from onnx import helper

    from engine.frontends import import_onnx
    from engine.schedule import Kind
    from tests.engine.frontends.test_onnx_import import make

    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])
    p = import_onnx(make(tmp_path, [node], [("x", (1, 16, 111, 111))], {}, name="pool55"), tmp_path).pipeline
    pool = p.outputs[0]
    assert p.shape_of(pool)[-1] == 55
    s = plan(p, AVX512).schedule
    upd = s.of(pool).update
    assert any(d.kind == Kind.VECTORIZE for d in upd)
    assert any(d.kind == Kind.SPLIT and d.factor == 16 and d.tail == "guard_with_if" for d in upd)
    _, v = api.run_once(p, s, seed=4)
    assert v.ok, v.message
