"""Fine-tuning on this host's measurements (engine/costmodel/finetune.py), on a fixed small set
stored in a real SQLite database: the error falls on held-out measurements, data of another
host is refused unless asked, the model is saved atomically beside (never over) the shipped
one and reset removes it; the error line's numbers are the predictions' own."""

import hashlib
import json
import math
import random

import numpy as np
import pytest

from engine.costmodel import SHIPPED, load_model
from engine.costmodel import finetune as FT
from engine.costmodel.evaluate import kendall_tau
from engine.costmodel.files import ModelFileError, finetuned_dir, finetuned_for_this_host, new_version
from engine.costmodel.finetuned import FineTunedModel
from engine.costmodel.trees import TVMModel
from engine.database import Database
from engine.ir import Pipeline
from engine.measure import Measurement
from engine.ops import Builder
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule
from engine.schedule import Schedule

HERE = FT.Environment("x86-64-linux-test-avx2", "Test CPU x2 x86_64", 2)
ELSEWHERE = FT.Environment("x86-64-linux-test-avx512", "Other CPU x64 x86_64", 2)


def _blur(n: int = 24):
    b = Builder("blur")
    inp = b.input("input", (n + 2, n + 2))
    bx = b.stencil("blur_x", inp, [((0, k), 1 / 3) for k in range(3)])
    return b.build([b.stencil("blur_y", bx, [((k, 0), 1 / 3) for k in range(3)])])


def _host_ms(pred_ms: float, key: str) -> float:
    """'This host': 2.5x slower than the shipped model says, more so for its slow schedules
    (pred^0.85 compresses the range), with a little deterministic scatter."""
    scatter = random.Random(key).gauss(0, 0.05)
    return 2.5 * pred_ms**0.85 * math.exp(scatter)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A database with 36 schedules of each of 2 pipelines measured 'here' (the fixed small set)
    and 5 of one measured elsewhere."""
    db_path = tmp_path_factory.mktemp("ft") / "m.sqlite"
    base, _ = FT.base_model()
    rng = random.Random(11)
    with Database(db_path) as db:
        for p in (_blur(), random_pipeline(5, 4, "small")):
            ph = p.content_hash()
            db.put_pipeline(ph, p.name, p.to_json())
            scheds = {}
            while len(scheds) < 36:
                s = sample_schedule(p, rng)
                scheds[s.content_hash()] = s
            preds = base.predict_many(p, list(scheds.values()))
            for (h, s), pr in zip(scheds.items(), preds):
                db.put_schedule(h, s.to_json())
                ms = _host_ms(pr.total_ms, h)
                here = {"target": HERE.target, "host": HERE.host, "threads": 2}
                db.record(Measurement(p.name, ph, h, True, True, median_ms=ms, iqr_ms=0.02 * ms, **here))
            for h in list(scheds)[:5]:
                db.record(Measurement(p.name, ph, h, True, True, median_ms=1.0, target=ELSEWHERE.target, host=ELSEWHERE.host, threads=2))
    return db_path


def _digests() -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(SHIPPED.iterdir()) if f.is_file()}


def test_finetune_cuts_held_out_error_and_saves_beside_the_shipped_model(stored, tmp_path):
    shipped = _digests()
    root = tmp_path / "finetuned"
    rep = FT.finetune_on_db(stored, HERE, holdout=0.3, root=root)
    assert rep["n_train"] + rep["n_test"] == 72 and rep["n_test"] >= 20 and rep["held_out"]
    before, after = rep["before"], rep["after"]
    assert after["median_abs_log_error"] < 0.5 * before["median_abs_log_error"], rep  # the fixed set's distortion is learned
    assert after["kendall_tau"] >= before["kendall_tau"] - 0.02
    d = finetuned_dir(root)
    assert d is not None and str(d) == rep["saved"]
    assert sorted(f.name for f in d.iterdir()) == ["corrections.json", "default.json", "finetune.json", "tvm.json", "tvm.txt"]
    model = load_model(d, "tvm")
    # Each pipeline gets a correction of its own, or its measurements go to the host trees when
    # continued boosting on them cross-validates better.
    assert isinstance(model, FineTunedModel) and set(model.corrections) <= {
        _blur().content_hash(),
        random_pipeline(5, 4, "small").content_hash(),
    }
    assert len(model.corrections) + model.config["finetune"]["pipelines_to_the_trees"] == 2
    assert {c["method"] for c in rep["corrections"].values()} <= {"affine", "affine+trees"}  # the fixed set's distortion is a slope
    assert model.config["finetuned_for"] == HERE.to_list() and model.config["environment"] == HERE.to_list()
    assert model.booster.num_trees() == FT.base_model()[0].booster.num_trees() + rep["rounds"]  # continued boosting
    assert _digests() == shipped  # the shipped files are never written
    # Not for this machine's real target: the app and search never pick it up silently.
    assert finetuned_for_this_host(root) == []
    assert FT.reset(root) is True and finetuned_dir(root) is None and not list(root.glob("v-*"))
    assert FT.reset(root) is False


def test_save_is_atomic_and_keeps_the_current_model_on_failure(stored, tmp_path):
    root = tmp_path / "finetuned"
    rep = FT.finetune_on_db(stored, HERE, root=root, rounds=20, per_pipeline=False)  # saving, not fitting, is tested here
    first = finetuned_dir(root)
    with pytest.raises(RuntimeError, match="interrupted"), new_version(root) as d:
        (d / "tvm.txt").write_text("tree\nversion=half")
        raise RuntimeError("interrupted save")
    assert finetuned_dir(root) == first and sorted(p.name for p in root.glob("v-*")) == [first.name]
    TVMModel.load(first)  # still whole
    again = FT.finetune_on_db(stored, HERE, root=root, seed=1, rounds=20, per_pipeline=False)
    assert finetuned_dir(root) != first and not first.exists() and again["saved"] != rep["saved"]
    (root / "current.json").write_text('{"dir": "v-gone"}')
    with pytest.raises(ModelFileError, match="v-gone, which does not exist"):
        finetuned_dir(root)


def test_another_hosts_data_is_refused_unless_asked(stored, tmp_path):
    with pytest.raises(FT.HostMismatchError, match="no measurements of this host .*Other CPU.*Test CPU|Test CPU.*Other CPU"):
        FT.host_samples(stored, FT.Environment("t", "No such CPU", 2))
    samples, used = FT.host_samples(stored, FT.Environment("t", "No such CPU", 2), allow_other_host=True)
    assert used == HERE and len(samples) == 72
    mine, _ = FT.host_samples(stored, HERE, pipeline="blur")
    assert len(mine) == 36 and {s.pipeline for s in mine} == {"blur"}
    with pytest.raises(ValueError, match="no measurements of pipeline 'nope'"):
        FT.host_samples(stored, HERE, pipeline="nope")
    root = tmp_path / "finetuned"
    FT.finetune_on_db(stored, HERE, root=root, rounds=20, per_pipeline=False)
    tuned = FT.load_finetuned(HERE, root)
    assert tuned is not None
    elsewhere, _ = FT.host_samples(stored, ELSEWHERE)
    with pytest.raises(FT.HostMismatchError, match="Other CPU.*Test CPU.*--allow-other-host"):
        FT.fine_tune(tuned, elsewhere, ELSEWHERE)
    with pytest.raises(FT.HostMismatchError, match="fine-tuned model"):
        FT.load_finetuned(ELSEWHERE, root)
    assert FT.fine_tune(tuned, elsewhere, ELSEWHERE, allow_other_host=True, rounds=5).config["finetuned_for"] == ELSEWHERE.to_list()


def test_model_error_is_the_predictions_against_the_stored_medians(stored):
    base, _ = FT.base_model()
    blur = _blur().content_hash()
    line = FT.model_error(base, stored, HERE, pipeline_hash=blur)
    pred, true, groups = [], [], []
    with Database(stored) as db:
        for m in db.measurements(blur):
            if (m.target, m.host) != (HERE.target, HERE.host):
                continue
            pj = db.conn.execute("SELECT json FROM pipelines WHERE hash=?", (m.pipeline_hash,)).fetchone()[0]
            sj = db.conn.execute("SELECT json FROM schedules WHERE hash=?", (m.schedule_hash,)).fetchone()[0]
            pred.append(base.predict(Pipeline.from_json(json.loads(pj)), Schedule.from_json(json.loads(sj))).total_ms)
            true.append(m.median_ms)
            groups.append(m.pipeline_hash)
    err = np.abs(np.log(np.array(pred) / np.array(true)))
    assert line.n == 36 and line.median_factor == pytest.approx(math.exp(np.median(err)))
    assert line.kendall_tau == pytest.approx(kendall_tau(np.array(pred), np.array(true)))
    assert line.text == f"model error on your 36 measurements: median ×{math.exp(np.median(err)):.2f}, τ {line.kendall_tau:.2f}"
    assert FT.error_of([], [], []).text == "model error on your measurements: none on this machine yet"
    assert FT.model_error(base, stored, HERE, pipeline_hash=blur, clock="thread_cpu").n == 0  # every label here is wall-clock


def test_host_trees_continue_boosting_without_pipeline_corrections(stored):
    samples, _ = FT.host_samples(stored, HERE)
    train, test = FT.split_host(samples, 0.3)
    base, _ = FT.base_model()
    model = FT.fine_tune(base, train, HERE, per_pipeline=False, rounds=20)
    assert not model.corrections and model.booster.num_trees() == base.booster.num_trees() + 20
    assert FT.sample_error(model, test).median_abs_log < FT.sample_error(base, test).median_abs_log


def test_the_benchmark_splits_report_before_after_per_pipeline(stored):
    rep = FT.finetune_splits(stored, HERE, ["blur"], n_train=20, splits=2)
    blur = rep["pipelines"]["blur"]
    assert [r["n_train"] for r in blur["splits"]] == [20, 20] and all(r["n_test"] == 16 for r in blur["splits"])
    assert blur["cut"] == pytest.approx(1 - blur["after_median_abs_log_error"] / blur["before_median_abs_log_error"])
    assert blur["cut"] > 0.5 and rep["halved"] == 1 and rep["median_cut"] == blur["cut"]
    # the target counts a pipeline only when its error is halved and its tau is better too
    assert rep["target_met"] == int(blur["after_kendall_tau"] > blur["before_kendall_tau"]) <= rep["tau_improved"]
    with pytest.raises(ValueError, match="36 measurements of blur: need 50 to train on"):
        FT.finetune_splits(stored, HERE, ["blur"], n_train=50)


def test_calibrate_host_refuses_the_cpu_clock_with_several_threads(tmp_path):
    """The thread CPU clock counts the calling thread only: with 2 Halide threads it would
    time half the work, so calibrate-host refuses it before measuring anything."""

    class TwoThreads:
        threads, host, target = 2, "h", "t"

        def run(self, job, should_cancel=None):
            raise AssertionError("nothing may be measured")

    with pytest.raises(ValueError, match="1 Halide thread"):
        FT.calibrate_host(tmp_path / "c.sqlite", TwoThreads(), clock="thread_cpu", save=False)


def test_host_rounds_are_chosen_by_whole_pipelines():
    """The host level's continued boosting must carry over to other pipelines: labels that are
    the shipped trees' predictions times a constant leave boosting nothing to learn on held-out
    pipelines, so cross-validation by pipelines keeps the shipped trees (0 rounds); with too few
    pipelines to judge by, the rounds are default_rounds of the data."""
    from engine.costmodel.dataset import sample_of

    base, _ = FT.base_model()
    rng = random.Random(2)
    samples = []
    for seed in range(4):
        p = random_pipeline(seed, 4, "small")
        scheds = [sample_schedule(p, rng) for _ in range(6)]
        for s, pr in zip(scheds, base.predict_many(p, scheds)):
            samples.append(sample_of(p, s, 3.0 * pr.total_ms))
    assert FT.host_rounds(base, samples, HERE, 0) == 0
    three = [s for s in samples if s.pipeline_hash != samples[-1].pipeline_hash]
    assert FT.host_rounds(base, three, HERE, 0) == FT.default_rounds(len(three))


def test_a_pipeline_keeps_its_correction_when_the_trees_would_not_boost(stored, monkeypatch):
    """A pipeline gives its measurements to the host trees only to be learned by boosting: when
    the rounds chosen again on the new host set are 0 (the shipped trees kept), every pipeline
    keeps its own correction, instead of being left with neither."""
    from engine.costmodel.dataset import load

    train = load(stored, target=HERE.target, host=HERE.host, threads=2)
    base, _ = FT.base_model()
    monkeypatch.setattr(FT, "_boost_cv_error", lambda *a, **k: -1.0)  # boosting always wins on a pipeline's own data
    monkeypatch.setattr(FT, "host_rounds", lambda *a, **k: 0)  # ... but would not carry over to other pipelines
    kept = FT.fine_tune(base, train, HERE)
    assert len(kept.corrections) == 2 and kept.config["finetune"]["pipelines_to_the_trees"] == 0
    monkeypatch.setattr(FT, "host_rounds", lambda *a, **k: 10)  # boosting carries over: both go to the trees
    moved = FT.fine_tune(base, train, HERE)
    assert not moved.corrections and moved.config["finetune"]["pipelines_to_the_trees"] == 2
    assert moved.booster.num_trees() == base.booster.num_trees() + 10
