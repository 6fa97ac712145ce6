"""Batched predictions (`predict_many`) equal one-at-a-time ones (`predict`) for every model.

The one-at-a-time oracle runs each schedule with the pipeline's caches emptied first (no
row, placement, term or score from another schedule can leak in). Batches mix schedules
that share cached rows (a mutation chain, a repeated schedule) with ones that share none
(fresh samples), cold and with part of the batch predicted beforehand.

Tolerance: the analytic and tree models are exact (the same float64 arithmetic per stage,
and LightGBM scores each row on its own), so they are compared with ==. The two torch
networks run in float32, where a batch of several graphs changes the matrix products'
blocking: relative 1e-5 (observed differences are about 1e-6).
"""

import random

import lightgbm as lgb
import numpy as np
import pytest

from engine import loopnest, zoo
from engine.costmodel import SHIPPED, AnalyticModel, load_model
from engine.costmodel import features as F
from engine.costmodel.base import Prediction
from engine.costmodel.trees import FAST_ROWS
from engine.randpipe import random_pipeline
from engine.sampler import mutate, sample_schedule
from engine.schedule import Schedule

PIPELINES = ("harris", "unsharp", "resnet_block", "conv_relu")
EXACT = {"analytic": True, "analytic_1core": True, "tvm": True, "gnn": False, "halide": False}


@pytest.fixture(scope="module")
def models():
    return {
        "analytic": AnalyticModel(),
        "analytic_1core": AnalyticModel(cores=1),
        **{k: load_model(SHIPPED, k) for k in ("tvm", "gnn", "halide")},
    }


def _schedules(p, seed: int) -> list[Schedule]:
    """Fresh samples, a mutation chain from the first (rows shared along it) and a repeat."""
    rng = random.Random(seed)
    fresh = [sample_schedule(p, rng) for _ in range(4)]
    chain = [fresh[0]]
    for _ in range(4):
        chain.append(mutate(p, chain[-1], rng))
    return [fresh[1], *chain[1:3], fresh[2], *chain[3:], fresh[3], fresh[1]]


def _cold(m, p, scheds) -> list[Prediction]:
    out = []
    for s in scheds:
        F.clear_caches(p)
        out.append(m.predict(p, s))
    return out


def _same(key: str, got: list[Prediction], want: list[Prediction]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.model == w.model and g.kind == "prediction"
        assert list(g.stages) == list(w.stages)
        if EXACT[key]:
            assert g.total_ms == w.total_ms and g.stages == w.stages
        else:
            assert g.total_ms == pytest.approx(w.total_ms, rel=1e-5)
            assert [g.stages[k] for k in g.stages] == pytest.approx([w.stages[k] for k in w.stages], rel=1e-5, abs=1e-9 * w.total_ms)


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("key", list(EXACT))
def test_batch_equals_single(models, key, name):
    m, p = models[key], zoo.get(name, "small")
    scheds = _schedules(p, seed=len(name))
    want = _cold(m, p, scheds)
    assert len({w.total_ms for w in want}) > 2, "the schedules predict differently (else the test proves little)"
    F.clear_caches(p)
    _same(key, m.predict_many(p, scheds), want)  # cold batch
    F.clear_caches(p)
    for s in scheds[1:4:2]:
        m.predict(p, s)  # part of the batch (and rows it shares) cached beforehand
    _same(key, m.predict_many(p, scheds), want)
    _same(key, [m.predict(p, s) for s in scheds], want)  # warm singles
    _same(key, m.predict_many(p, scheds[:3]) + m.predict_many(p, scheds[3:]), want)  # batches of other sizes


@pytest.mark.parametrize("key", list(EXACT))
def test_batch_on_a_random_pipeline_and_full_size(models, key):
    m = models[key]
    for p in (random_pipeline(11, 8, "small"), zoo.get("harris", "full")):
        scheds = _schedules(p, seed=3)
        want = _cold(m, p, scheds)
        F.clear_caches(p)
        _same(key, m.predict_many(p, scheds), want)


def test_given_loop_nests(models):
    p = zoo.get("unsharp", "small")
    scheds = _schedules(p, seed=1)
    nests = [loopnest.build(p, s) for s in scheds]
    for key, m in models.items():
        _same(key, m.predict_many(p, scheds, nests), m.predict_many(p, scheds))
        mixed = [n if k % 2 else None for k, n in enumerate(nests)]  # None: built by the model
        _same(key, m.predict_many(p, scheds, mixed), m.predict_many(p, scheds))
        assert m.predict_many(p, []) == []
        with pytest.raises(ValueError, match=r"2 loop nests for 3 schedules of unsharp"):
            m.predict_many(p, scheds[:3], nests[:2])


def test_tree_scores_cached_equal_lightgbm_on_every_row(models):
    """The tree model's cached, de-duplicated scores give what LightGBM gives on the batch's
    every costed row in one plain call."""
    m, p = models["tvm"], zoo.get("harris", "small")
    scheds = _schedules(p, seed=7)
    F.clear_caches(p)
    m.predict_many(p, scheds[:5])  # some rows cached
    got = m.predict_many(p, scheds)
    lo, hi = m.config["log_range"]
    for s, g in zip(scheds, got):
        x, _, _ = F.featurize(loopnest.build(p, s))
        costed = x[:, F.INDEX["compute_inline"]] < 0.5
        raw = m.booster.predict(x[costed].astype(np.float64), raw_score=True, num_threads=1)
        ms = np.exp(m.base + raw)
        assert g.total_ms == pytest.approx(float(np.exp(np.clip(np.log(ms.sum()), lo, hi))), rel=1e-12)
        assert [v for v in g.stages.values() if v > 0] == pytest.approx(list(ms * g.total_ms / ms.sum()), rel=1e-12)


def test_tree_fast_row_path_equals_booster_predict_bit_for_bit(models):
    """`raw_scores` scores rows by LightGBM's single-row fast path (configured once): the same
    doubles as `Booster.predict` on real feature rows of several pipelines and on random rows
    (zeros, tiny and huge values: every tree branch side), and a booster with other trees
    (continued training replaces it) gets its own configuration, not the old one's scores."""
    m = models["tvm"]
    rows = []
    for name in ("harris", "resnet_block", "softmax"):
        p = zoo.get(name, "small")
        rows += [F.featurize(loopnest.build(p, s))[0] for s in _schedules(p, seed=3)[:6]]
    x = np.concatenate(rows).astype(np.float64)
    rng = np.random.default_rng(0)
    r = rng.random((500, x.shape[1])) * rng.choice([1e-3, 1.0, 30.0, 1e6], size=(500, x.shape[1]))
    r[rng.random(r.shape) < 0.3] = 0.0
    x = np.concatenate([x, r])
    want = m.booster.predict(x, raw_score=True, num_threads=1)
    assert np.array_equal(m.raw_scores(x), want)  # no pipeline: nothing cached, every row scored (one call)
    few_rows = FAST_ROWS - 1
    for k in range(0, len(x), few_rows):  # below FAST_ROWS: the fast path, row by row
        assert np.array_equal(m.raw_scores(x[k : k + few_rows]), want[k : k + few_rows])
    few = lgb.Booster(model_str=m.booster.model_to_string(num_iteration=20))  # another booster: 20 trees
    assert few.num_trees() == 20 and m.booster.num_trees() > 20
    other = type(m)(few, m.base, m.config)
    other._fast = m._fast  # as if the booster had been replaced under a configured model
    assert np.array_equal(other.raw_scores(x[:few_rows]), few.predict(x[:few_rows], raw_score=True, num_threads=1))
    assert not np.array_equal(other.raw_scores(x[:few_rows]), want[:few_rows])


def test_trees_over_another_feature_count_are_refused_clearly(models, tmp_path):
    """A model file whose trees read another number of features than this version's rows is one
    ModelFileError on load (not a LightGBM error at 32 rows or more and a bare assert below);
    rows of the wrong width never reach the C call."""
    from engine.costmodel.files import ModelFileError
    from engine.costmodel.trees import TVMModel

    m = models["tvm"]
    rng = np.random.default_rng(1)
    narrow = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 4}, lgb.Dataset(rng.random((64, 3)), rng.random(64)), 3)
    TVMModel(narrow, m.base, m.config).save(tmp_path, "tvm")
    with pytest.raises(ModelFileError, match="3 features"):
        TVMModel.load(tmp_path, "tvm")
    with pytest.raises(ValueError, match="features"):
        m.raw_scores(np.zeros((2, 3)))


def test_tree_scores_by_row_key_equal_the_sample_path(models):
    """The tree model's `predict_many` scores rows cached by their feature key and builds
    only the missed rows; it equals `predict_samples` on the full featurized samples (the
    path training and evaluation use), bit for bit, cold and warm, on a mutation chain."""
    from engine.costmodel.dataset import samples_to_predict

    m = models["tvm"]
    for p in (zoo.get("harris", "full"), random_pipeline(17, 9, "small")):
        scheds = _schedules(p, seed=5)
        F.clear_caches(p)
        totals, stages = m.predict_samples(samples_to_predict(p, [loopnest.build(p, s) for s in scheds]), p)
        for warm in (False, True):
            if not warm:
                F.clear_caches(p)
            got = m.predict_many(p, scheds)
            assert [g.total_ms for g in got] == totals.tolist()
            assert [list(g.stages.values()) for g in got] == [st.tolist() for st in stages]
        stats = loopnest.cache_stats(p)
        assert sum(v["entries"] for k, v in stats.items() if k.endswith(".by_key")) > 0


def test_tree_scores_kept_from_the_parent_nest_equal_the_sample_path(models):
    """Along a mutation chain each loop nest is built from the one before (`loopnest`'s parent
    path) and the tree model starts from the parent's scores, looking up only the stages whose
    key may differ (`dirty`): equal to `predict_samples` of cold featurizations bit for bit,
    in batches that cut the chain anywhere and one at a time."""
    from engine.costmodel.dataset import samples_to_predict

    m = models["tvm"]
    for p in (zoo.get("resnet_block", "small"), random_pipeline(23, 10, "small")):
        rng = random.Random(7)
        chain = [sample_schedule(p, rng)]
        for _ in range(16):
            chain.append(mutate(p, chain[-1], rng))
        want_totals, want_stages = [], []
        for s in chain:
            F.clear_caches(p)
            t, st = m.predict_samples(samples_to_predict(p, [loopnest.build(p, s)]), p)
            want_totals.append(t[0])
            want_stages.append(st[0].tolist())
        F.clear_caches(p)
        nests = [loopnest.build(p, s) for s in chain]
        assert sum(n.context.parent is not None for n in nests) >= 12  # from the nest before
        got = m.predict_many(p, chain[:5], nests[:5]) + m.predict_many(p, chain[5:12], nests[5:12])
        got += [m.predict(p, s, nest) for s, nest in zip(chain[12:], nests[12:])]
        assert [g.total_ms for g in got] == want_totals
        assert [list(g.stages.values()) for g in got] == want_stages
        F.clear_caches(p)  # built by the model: the same
        got = m.predict_many(p, chain[:9]) + [m.predict(p, s) for s in chain[9:]]
        assert [g.total_ms for g in got] == want_totals


def test_tree_batches_of_one_size_on_pipelines_of_other_stage_counts(models):
    """The tree model's per-batch index of each stage's nest is shared by every batch of the
    same (schedules, stages) shape: batches of the same size on pipelines of different stage
    counts, and of other sizes on one pipeline, each equal `predict_samples` bit for bit."""
    from engine.costmodel.dataset import samples_to_predict

    m = models["tvm"]
    pipes = [zoo.get("blur", "small"), zoo.get("harris", "small"), random_pipeline(23, 9, "small")]
    assert len({len(p.stages) for p in pipes}) == 3
    for size in (3, 1, 3, 5):
        for p in pipes:
            scheds = _schedules(p, seed=size)[:size]
            F.clear_caches(p)
            totals, stages = m.predict_samples(samples_to_predict(p, [loopnest.build(p, s) for s in scheds]), p)
            F.clear_caches(p)
            got = m.predict_many(p, scheds)
            assert [g.total_ms for g in got] == totals.tolist()
            assert [list(g.stages.values()) for g in got] == [st.tolist() for st in stages]
