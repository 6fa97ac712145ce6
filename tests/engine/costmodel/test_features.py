"""Features of a scheduled pipeline: shape, finiteness, determinism and exact values."""

import math
import random

import numpy as np
import pytest

from engine import expr as E
from engine import loopnest, zoo
from engine.costmodel import features as F
from engine.hand_schedules import hand_schedule
from engine.ops import Builder
from engine.sampler import sample_schedule
from engine.schedule import S, Schedule, default_schedule


def raw(nest, stage, name):
    x = F.stage_features(nest, log=False)
    return float(x[[s.name for s in nest.pipeline.stages].index(stage), F.INDEX[name]])


def test_table_documents_every_column():
    names = [f.name for f in F.FEATURES]
    assert len(names) == len(set(names)) == F.N_FEATURES
    assert all(f.doc for f in F.FEATURES + F.EDGE_FEATURES)
    p = zoo.get("blur", "small")
    nest = loopnest.build(p, default_schedule(p))
    assert F.stage_features(nest).shape == (2, F.N_FEATURES)
    ei, ef = F.edge_index_and_features(nest)
    assert ei.tolist() == [[0], [1]] and ef.shape == (1, F.N_EDGE_FEATURES)


@pytest.mark.parametrize("name", zoo.names())
def test_finite_and_deterministic_on_the_zoo(name):
    p = zoo.get(name, "small")
    for s in (default_schedule(p), hand_schedule(p), sample_schedule(p, random.Random(3))):
        x, ei, ef = F.featurize(loopnest.build(p, s))
        x2, ei2, ef2 = F.featurize(loopnest.build(p, Schedule.from_json(s.to_json())))
        assert x.dtype == np.float32 and np.isfinite(x).all() and np.isfinite(ef).all()
        assert (x == x2).all() and (ei == ei2).all() and (ef == ef2).all()
        assert x.shape == (len(p.stages), F.N_FEATURES) and ei.shape[0] == 2 and ef.shape == (ei.shape[1], F.N_EDGE_FEATURES)
        assert (x >= 0).all()  # counts and log1p of counts


def test_exact_values_on_a_tiled_blur():
    p = zoo.get("blur", "full")  # 2048x2048 output; input 2050x2050
    s = Schedule()
    S(s, "blur_y").tile("x", "y", "xo", "yo", "xi", "yi", 256, 32).vectorize("xi", 16).parallel("yo")
    S(s, "blur_x").compute_at("blur_y", "xo").vectorize("x", 16)
    nest = loopnest.build(p, s)
    assert raw(nest, "blur_x", "compute_at") == 1 and raw(nest, "blur_x", "compute_root") == 0
    assert raw(nest, "blur_x", "productions") == 64 * 8
    assert raw(nest, "blur_x", "points_per_production") == 34 * 256
    assert raw(nest, "blur_x", "points_total") == 34 * 256 * 512
    assert raw(nest, "blur_x", "recompute_ratio") == pytest.approx(34 * 256 * 512 / (2050 * 2048))
    assert raw(nest, "blur_x", "compute_depth") == 2  # inside yo and xo
    assert raw(nest, "blur_x", "outer_parallelism") == 64
    assert raw(nest, "blur_x", "vector_size") == 16 and raw(nest, "blur_x", "vector_contiguous") == 1
    assert raw(nest, "blur_x", "bytes_at_production") == 34 * 256 * 4
    assert raw(nest, "blur_y", "working_set") == (2048 * 2048 + 34 * 256) * 4  # its buffer and blur_x's per tile
    assert raw(nest, "blur_y", "inner_parallelism") == 64 and raw(nest, "blur_y", "parallel_launches") == 1
    assert raw(nest, "blur_y", "innermost_extent") == 16 and raw(nest, "blur_y", "num_vectors") == 2048 * 2048 / 16
    assert raw(nest, "blur_y", "loads_dense") == 3  # blur_x(y + k, x) along x_v: contiguous
    assert raw(nest, "blur_x", "flops_per_point") == 5 and raw(nest, "blur_x", "access_stencil") == 3
    x = F.stage_features(nest)
    assert x[1, F.INDEX["points_total"]] == pytest.approx(math.log1p(2048 * 2048), rel=1e-6)
    _, ef = F.edge_index_and_features(nest, log=False)
    e = dict(zip([f.name for f in F.EDGE_FEATURES], ef[0]))
    assert e["producer_at_consumer"] == 1 and e["accesses"] == 3 and e["stencil"] == 3
    assert e["bytes_per_consumer_realization"] == 2048 * 2050 * 4  # all of blur_x per (root) realization of blur_y
    assert e["bytes_per_consumer_iteration"] == 3 * 4  # one lane: 3 rows of one column


def test_inlined_stage_counts_its_calls():
    p = zoo.get("blur", "small")
    nest = loopnest.build(p, hand_schedule(p))
    assert raw(nest, "blur_x", "compute_inline") == 1
    assert raw(nest, "blur_x", "inlined_calls") == 3 * 64 * 64
    assert raw(nest, "blur_x", "points_total") == 0
    assert raw(nest, "blur_y", "work_per_point") == 5 + 3 * 5  # its own 5 FLOPs plus three inlined blur_x


def test_op_histogram_and_access_patterns():
    hist: dict[str, int] = {}
    e = E.select(E.cmp("<", E.Var("x"), 3), E.call("exp", E.Access("a", (E.Var("x") + 1,))) * 2.0, 0.0)
    assert F.op_histogram(e, hist) == "f"
    assert hist == {"i_cmp": 1, "i_addsub": 1, "f_exp": 1, "f_mul": 1, "f_select": 1}
    b = Builder("t")
    x = b.input("x", (1, 4, 8, 8))
    w = b.input("w", (4, 4, 3, 3))
    bias = b.input("bias", (4,))
    b.conv2d("conv", x, w, bias, pad=1)
    rgb = b.input("rgb", (3, 8, 8))
    b.channel_mix("mix", rgb, [0.5, 0.25, 0.25])
    m = b.input("m", (8, 6))
    b.transpose("mt", m, [1, 0])
    b.pointwise("tr", "copy", ["mt"], lambda v: v)
    p = b.build(["conv", "mix", "tr"])
    assert F.access_patterns(p.stage("conv"), "conv_pad")["reduction"] == 1
    assert F.access_patterns(p.stage("conv"), "bias")["broadcast"] == 1
    assert F.access_patterns(p.stage("conv_pad"))["nonaffine"] == 1  # clamped index
    assert F.access_patterns(p.stage("mix"))["slice"] == 3
    assert F.access_patterns(p.stage("tr"))["transpose"] == 1


@pytest.mark.parametrize("name", ["harris", "resnet_block", "softmax"])
def test_analytic_feature_equals_the_analytic_model(name):
    # The row's analytic_ns is made from the FLOPs and reads the row computes; it must be the
    # one-core analytic model's own estimate of the stage, bit for bit.
    from engine.costmodel.analytic import AnalyticModel

    p = zoo.get(name, "small")
    one = AnalyticModel(cores=1)
    rng = random.Random(5)
    for s in [default_schedule(p)] + [sample_schedule(p, rng) for _ in range(6)]:
        F.clear_caches(p)
        nest = loopnest.build(p, s)
        x = F.stage_features(nest, log=False).astype(np.float64)
        F.clear_caches(p)
        ms = one.stage_ms(loopnest.build(p, s))
        for k, st in enumerate(p.stages):
            assert x[k, F.INDEX["analytic_ns"]] == np.float32(ms[st.name] * 1e6)
