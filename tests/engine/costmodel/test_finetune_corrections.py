"""Per-pipeline corrections of a fine-tuned model (engine/costmodel/finetune.py, finetuned.py):
cross-validation picks the correction a pipeline's error needs, a fine-tuned model predicts the
same through predict_many and predict_samples and after a save and load, damaged corrections
are refused by name, and a measurement's label is its median or its fastest run as asked."""

import json

import numpy as np
import pytest

from engine.costmodel import finetune as FT
from engine.costmodel import load_model
from engine.costmodel.dataset import label_of, load, sample_of
from engine.costmodel.files import ModelFileError
from engine.costmodel.finetuned import FineTunedModel
from engine.database import Database
from engine.measure import Measurement
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule

HERE = FT.Environment("x86-64-linux-test-avx2", "Test CPU x2 x86_64", 2)


def _synthetic(n: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    nodes = [rng.normal(size=(3, 4)) for _ in range(n)]
    lp = rng.uniform(-2, 2, n)
    return nodes, lp, rng.normal(0, 0.03, n)


def _held_out_error(nodes, lp, y, method: str) -> float:
    c = FT.fit_correction(nodes[:40], lp[:40], y[:40], np.ones(40), method)
    return float(np.median(np.abs(y[40:] - lp[40:] - c.log_correction(nodes[40:], lp[40:]))))


def test_cross_validation_picks_the_correction_the_error_needs():
    nodes, lp, noise = _synthetic()
    w = np.ones(len(lp))
    biased = FT.choose_correction(nodes, lp, lp + 0.8 + noise, w)  # this machine 2.2x slower on this pipeline
    assert biased.method in ("offset", "affine") and biased.offset == pytest.approx(0.8, abs=0.05) and biased.trees is None
    compressed = FT.choose_correction(nodes, lp, 1.5 * lp + 0.3 + noise, w)  # the model compresses the range
    assert compressed.method.startswith("affine") and compressed.slope == pytest.approx(1.5, abs=0.05)
    # A cost the host model cannot see (say a recomputed inlined producer): some schedules 7x slower.
    slow = np.array([n[0, 0] > 0.3 for n in nodes])
    y = lp + 2.0 * slow + noise
    shaped = FT.choose_correction(nodes, lp, y, w)
    assert shaped.method.endswith("trees") and shaped.rounds >= 2
    assert shaped.cv_error[shaped.method] < 0.5 * shaped.cv_error["offset"]
    assert _held_out_error(nodes, lp, y, shaped.method) < 0.5 * _held_out_error(nodes, lp, y, "offset")
    fine = FT.choose_correction(nodes, lp, lp + noise, w)
    assert abs(fine.offset) < 0.05 and fine.slope == pytest.approx(1.0, abs=0.05)
    # The record round-trips through JSON; damaged trees are refused before LightGBM parses them.
    again = FT.PipelineCorrection.from_json(json.loads(json.dumps(shaped.to_json())), "here")
    np.testing.assert_allclose(again.log_correction(nodes, lp), shaped.log_correction(nodes, lp))
    bad = {**shaped.to_json(), "trees": shaped.trees.replace("Tree=0", "Tree=1", 1)}
    with pytest.raises(ModelFileError, match="here: its trees do not match their sha256"):
        FT.PipelineCorrection.from_json(bad, "here")
    with pytest.raises(ModelFileError, match="there: not a pipeline correction"):
        FT.PipelineCorrection.from_json({"offset": 1.0}, "there")


@pytest.fixture(scope="module")
def tuned():
    """A fine-tuned model for one random pipeline whose 'host' times the shipped model gets
    wrong in two ways: 3x slower overall, 4x more for schedules that inline the first stage."""
    p = random_pipeline(7, 4, "small")
    rng = __import__("random").Random(3)
    scheds = {}
    while len(scheds) < 40:
        s = sample_schedule(p, rng)
        scheds[s.content_hash()] = s
    base, _ = FT.base_model()
    first = p.stages[0].name
    samples = []
    for s, pr in zip(scheds.values(), base.predict_many(p, list(scheds.values()))):
        inlined = s.stages.get(first) is not None and s.stages[first].compute() == "inline"
        samples.append(sample_of(p, s, 3.0 * pr.total_ms * (4.0 if inlined else 1.0)))
    # The pipeline's own correction, as fine_tune makes one (it may instead hand these measurements to
    # the host trees when that cross-validates better: the model is made directly so it has one).
    train = samples[:30]
    lp = np.log(base.predict_samples(train)[0])
    y = np.log([x.time_ms for x in train])
    correction = FT.choose_correction([x.nodes for x in train], lp, y, np.ones(len(train)))
    return p, list(scheds.values()), samples, FineTunedModel(base.booster, base.base, base.config, {p.content_hash(): correction}), base


def test_a_fine_tuned_model_predicts_the_same_both_ways_and_after_loading(tuned, tmp_path):
    p, scheds, samples, model, base = tuned
    assert isinstance(model, FineTunedModel) and set(model.corrections) == {p.content_hash()}
    assert FT.sample_error(model, samples[30:]).median_abs_log < 0.5 * FT.sample_error(base, samples[30:]).median_abs_log
    many = np.array([pr.total_ms for pr in model.predict_many(p, scheds)])
    np.testing.assert_allclose(many, model.predict_samples(samples)[0], rtol=1e-9)
    pr = model.predict_many(p, scheds[:1])[0]
    assert sum(pr.stages.values()) == pytest.approx(pr.total_ms)  # the stages still add up to the total
    model.save(tmp_path)
    loaded = load_model(tmp_path, "tvm")
    assert isinstance(loaded, FineTunedModel)
    np.testing.assert_allclose([q.total_ms for q in loaded.predict_many(p, scheds)], many, rtol=1e-9)
    other = random_pipeline(8, 4, "small")  # no correction: the host trees' own prediction
    s = sample_schedule(other, __import__("random").Random(0))
    assert loaded.predict(other, s).total_ms == pytest.approx(base.predict(other, s).total_ms)
    tuned = FT.fine_tune(base, samples[:30], HERE)  # a correction or the trees, whichever cross-validates better
    assert FT.sample_error(tuned, samples[30:]).median_abs_log < 0.5 * FT.sample_error(base, samples[30:]).median_abs_log
    (tmp_path / "corrections.json").write_text('{"pipelines": [1]}')
    with pytest.raises(ModelFileError, match="corrections.json: no 'pipelines' object"):
        load_model(tmp_path, "tvm")


def test_a_label_is_the_median_or_the_fastest_run(tmp_path):
    p = random_pipeline(7, 4, "small")
    s = sample_schedule(p, __import__("random").Random(1))
    ph, sh = p.content_hash(), s.content_hash()
    m = Measurement(p.name, ph, sh, True, True, median_ms=2.0, min_ms=1.5, iqr_ms=0.2, target=HERE.target, host=HERE.host, threads=2)
    with Database(tmp_path / "m.sqlite") as db:
        db.put_pipeline(ph, p.name, p.to_json())
        db.put_schedule(sh, s.to_json())
        db.record(m)
    assert [x.time_ms for x in load(tmp_path / "m.sqlite")] == [2.0]
    assert [x.time_ms for x in load(tmp_path / "m.sqlite", label="fastest")] == [1.5]
    assert label_of(m, "fastest") == 1.5 and label_of(m, "median") == 2.0
    with pytest.raises(ValueError, match="unknown label 'best' .choose from median, fastest"):
        load(tmp_path / "m.sqlite", label="best")
    base, _ = FT.base_model()
    pred = base.predict(p, s).total_ms
    assert FT.model_error(base, tmp_path / "m.sqlite", HERE, label="fastest").median_factor == pytest.approx(max(pred / 1.5, 1.5 / pred))
