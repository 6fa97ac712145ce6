"""Learned cost models: metrics, the dataset (resumable, never mixing pipelines), training,
saving and loading, evaluation and the CLI, on tiny data."""

import argparse
import json
import math
import random

import numpy as np
import pytest

from engine.cli.costmodel import register, run
from engine.costmodel import ENV_VAR, CostModel, Prediction, default_model
from engine.costmodel import dataset as D
from engine.costmodel import features as F
from engine.costmodel.analytic import AnalyticModel
from engine.costmodel.baselines import train_halide
from engine.costmodel.evaluate import evaluate, kendall_tau, mape, metrics, pairwise_accuracy, topk_regret
from engine.costmodel.gnn import train_gnn
from engine.costmodel.train import load_models, train_all
from engine.costmodel.trees import TVMModel
from engine.database import Database
from engine.measure import Measurement
from engine.ops import Builder
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule
from engine.schedule import default_schedule


# --- metrics on hand-made inputs -------------------------------------------------------------
def test_metrics_known_answers():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    assert kendall_tau(true, true) == 1.0 and kendall_tau(-true, true) == -1.0
    assert kendall_tau(np.array([1.0, 3.0, 2.0, 4.0]), true) == pytest.approx(4 / 6)  # 5 concordant, 1 discordant
    assert math.isnan(kendall_tau(np.ones(4), true))
    assert mape(np.array([2.0, 2.0]), np.array([1.0, 4.0])) == pytest.approx(0.75)  # (1 + 0.5) / 2
    g = ["a", "a", "a", "b", "b"]
    pred = np.array([3.0, 2.0, 1.0, 1.0, 1.0])  # pipeline a reversed; b tied
    t = np.array([1.0, 2.0, 4.0, 1.0, 2.0])
    assert pairwise_accuracy(pred, t, g) == pytest.approx(0.5 / 4)  # 3 wrong pairs in a, one tie (1/2) in b
    assert topk_regret(pred, t, g, 1) == pytest.approx((4.0 - 1.0) / 2)  # a picks the 4.0 schedule (3x slower), b the best
    assert topk_regret(pred, t, g, 5) == 0.0
    m = metrics(pred, t, g)
    assert m["n_pipelines"] == 2 and m["n_samples"] == 5 and m["kendall_tau"] == pytest.approx(-1.0)  # b has no tau
    assert metrics(pred, t, g, absolute=False)["mape"] is None


# --- the dataset --------------------------------------------------------------------------
def test_generate_is_resumable_and_loads_back(tmp_path):
    db = tmp_path / "d.sqlite"
    opts = {"min_time_s": 0.005, "min_runs": 2, "timeout_s": 60}
    first = D.generate(db, 2, 3, seed=7, with_zoo=False, max_stages=4, job_options=opts)
    assert first["samples"] == 6 and first["measured"] == 6, first
    again = D.generate(db, 2, 3, seed=7, with_zoo=False, max_stages=4, job_options=opts)
    assert again["samples"] == 6 and again.get("measured", 0) == 0 and again["cached"] == 6
    samples = D.load(db, dataset_only=True)
    assert len(samples) == 6 and len({s.pipeline_hash for s in samples}) == 2
    pipes = {p.content_hash(): p for p, _, _ in D.dataset_pipelines(2, 7, False, 4)}
    with Database(db) as d:
        for s in samples:  # features and times belong to the pipeline of their key
            sched = next(c for c in D.candidates(pipes[s.pipeline_hash], 7) if c.content_hash() == s.schedule_hash)
            ref = D.sample_of(pipes[s.pipeline_hash], sched)
            assert (s.nodes == ref.nodes).all() and (s.edges == ref.edges).all()
            stored = [m for m in d.measurements(s.pipeline_hash) if m.schedule_hash == s.schedule_hash]
            assert len(stored) == 1 and stored[0].median_ms == s.time_ms


def _blur(n: int, name: str = "blur"):
    b = Builder(name)
    inp = b.input("input", (n + 2, n + 2))
    bx = b.stencil("blur_x", inp, [((0, k), 1 / 3) for k in range(3)])
    return b.build([b.stencil("blur_y", bx, [((k, 0), 1 / 3) for k in range(3)])])


def _fake(db: Database, p, s, ms: float, target="t", host="h", threads=1) -> None:
    db.put_pipeline(p.content_hash(), p.name, p.to_json())
    db.put_schedule(s.content_hash(), s.to_json())
    db.record(Measurement(p.name, p.content_hash(), s.content_hash(), True, True, median_ms=ms, target=target, host=host, threads=threads))


def test_same_schedule_of_two_pipelines_never_mixes(tmp_path):
    small, big = _blur(16), _blur(48)  # same name and stages, so the same default schedule hash
    s = default_schedule(small)
    assert s.content_hash() == default_schedule(big).content_hash() and small.content_hash() != big.content_hash()
    with Database(tmp_path / "m.sqlite") as db:
        _fake(db, small, s, 1.0)
        _fake(db, big, s, 9.0)
        _fake(db, big, s, 5.0, host="other")  # another machine: never mixed in either
    got = {x.pipeline_hash: x for x in D.load(tmp_path / "m.sqlite", host="h")}
    assert got[small.content_hash()].time_ms == 1.0 and got[big.content_hash()].time_ms == 9.0
    pts = F.INDEX["points"]
    assert got[big.content_hash()].nodes[1, pts] == pytest.approx(math.log1p(48 * 48))
    assert got[small.content_hash()].nodes[1, pts] == pytest.approx(math.log1p(16 * 16))
    train, seen, unseen = D.split(list(got.values()), 0.5, 0.0, 0)
    assert len(unseen) == 1 and {x.pipeline_hash for x in train}.isdisjoint({x.pipeline_hash for x in unseen})


def test_a_pipeline_whose_stored_hash_no_longer_matches_is_skipped(tmp_path, capsys):
    # e.g. stored by a build that hashed differently: its timings are never attributed to it
    good, odd = _blur(16), _blur(32)
    s = default_schedule(good)
    with Database(tmp_path / "m.sqlite") as db:
        _fake(db, good, s, 1.0)
        db.put_pipeline("0123456789abcdef", odd.name, odd.to_json())
        db.record(Measurement(odd.name, "0123456789abcdef", s.content_hash(), True, True, median_ms=3.0, target="t", host="h", threads=1))
    got = D.load(tmp_path / "m.sqlite", host="h")
    assert [x.pipeline_hash for x in got] == [good.content_hash()]
    assert "0123456789abcdef" in capsys.readouterr().err


# --- models on a tiny synthetic dataset (the `synthetic` fixture: conftest.py) ---------------
def test_three_models_train_predict_and_round_trip(synthetic, tmp_path):
    samples = D.load(synthetic)
    assert len(samples) == 36
    p = random_pipeline(0, max_stages=5)
    s = sample_schedule(p, random.Random(99))
    gnn, st = train_gnn(samples, hidden=16, layers=2, epochs=3)
    hal, _ = train_halide(samples, hidden=16, epochs=3)
    tvm, _ = TVMModel.fit(samples, rounds=10)
    assert math.isfinite(st["final_loss"])
    for m in (gnn, hal, tvm):
        pred = m.predict(p, s)
        assert isinstance(pred, Prediction) and pred.kind == "prediction" and "learned" in pred.model
        assert math.isfinite(pred.total_ms) and pred.total_ms > 0
        assert set(pred.stages) == {x.name for x in p.stages}
        assert sum(pred.stages.values()) == pytest.approx(pred.total_ms, rel=1e-4)
        typed: CostModel = m  # the protocol (not runtime-checkable): a name and predict(p, s)
        assert isinstance(typed.name, str)
    gnn.save(tmp_path, "gnn")
    hal.save(tmp_path, "halide")
    tvm.save(tmp_path)
    assert not any(f.suffix in (".pkl", ".pickle") for f in tmp_path.iterdir())
    loaded = load_models(tmp_path)
    for key, m in (("gnn", gnn), ("halide", hal), ("tvm", tvm)):
        assert loaded[key].predict(p, s).total_ms == pytest.approx(m.predict(p, s).total_ms, rel=1e-5)


def test_train_all_evaluate_and_cli(synthetic, tmp_path, monkeypatch):
    out = tmp_path / "models"
    res = train_all(synthetic, out, epochs=2, rounds=5, hidden=16, layers=1, holdout_pipelines=0.34, holdout_schedules=0.34)
    assert res["test_unseen"] == 12 and res["train"] + res["test_seen"] == 24
    ev = evaluate(synthetic, out)
    assert set(ev) == {"gnn", "halide", "tvm", "analytic"}
    for m in ev.values():
        assert m["n_pipelines"] == 2 and m["n_samples"] == 12 and math.isfinite(m["mape"])
        assert -1 <= m["kendall_tau"] <= 1 and 0 <= m["pairwise_acc"] <= 1 and m["top1_regret"] >= m["top5_regret"] >= 0
        assert m["seen_pipelines"]["n_pipelines"] == 4
    ap = argparse.ArgumentParser()
    register(ap.add_subparsers(dest="cmd"))
    args = ap.parse_args(["costmodel", "eval", "--db", str(synthetic), "--models-dir", str(out), "--no-analytic", "--json", "--choose"])
    assert run(args) == 0
    chosen = json.loads((out / "default.json").read_text())  # the model best at ranking unseen pipelines
    best = max(("gnn", "halide", "tvm"), key=lambda k: (ev[k]["pairwise_acc"], ev[k]["kendall_tau"]))
    assert chosen["model"] == best and chosen["pairwise_acc"] == pytest.approx(ev[best]["pairwise_acc"])
    monkeypatch.setenv(ENV_VAR, str(out))
    default_model.cache_clear()
    try:
        assert default_model().name == load_models(out)[best].name  # what the app and search now use
    finally:
        default_model.cache_clear()
    args = ap.parse_args(["costmodel", "train", "--db", str(synthetic), "--out", str(tmp_path / "m2"), "--models", "tvm", "--rounds", "3"])
    assert run(args) == 0 and (tmp_path / "m2" / "tvm.txt").exists()
    assert json.loads((tmp_path / "m2" / "split.json").read_text())["environment"] == ["t", "h", 1]


# --- the shippable dataset file ----------------------------------------------------------------
def test_dataset_file_round_trips_and_rejects_bad_files(tmp_path):
    import gzip

    from engine.costmodel.export import DatasetFileError, export_dataset, import_dataset

    src = tmp_path / "src.sqlite"
    pipes = [random_pipeline(seed, max_stages=4) for seed in (1, 2)]
    with Database(src) as db:
        for k, p in enumerate(pipes):
            db.conn.execute("INSERT INTO cm_pipelines VALUES (?, ?, 'random', ?)", (p.content_hash(), p.name, k))
            db.conn.commit()
            for j, s in enumerate([default_schedule(p), sample_schedule(p, random.Random(k))]):
                _fake(db, p, s, 1.0 + k + j / 10)
        _fake(db, _blur(16), default_schedule(_blur(16)), 7.0)  # not a dataset pipeline: not exported
    out = tmp_path / "d.jsonl.gz"
    assert export_dataset(src, out) == {"out": str(out), "pipelines": 2, "samples": 4, "environment": ["t", "h", 1]}
    assert import_dataset(out, tmp_path / "back.sqlite") == {"pipelines": 2, "samples": 4}
    before = {(x.pipeline_hash, x.schedule_hash): x.time_ms for x in D.load(src, dataset_only=True)}
    after = {(x.pipeline_hash, x.schedule_hash): x.time_ms for x in D.load(tmp_path / "back.sqlite")}
    assert before == after and len(after) == 4
    lines = gzip.open(out, "rt").read().splitlines()
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:  # a pipeline record that does not hash to its key
        f.write("\n".join(x.replace(pipes[0].content_hash(), "0" * 16, 1) if '"pipeline"' in x else x for x in lines) + "\n")
    with pytest.raises(DatasetFileError, match="hashes to"):
        import_dataset(bad, tmp_path / "x.sqlite")
    bad.write_bytes(out.read_bytes()[:200])  # truncated
    with pytest.raises(DatasetFileError, match="malformed"):
        import_dataset(bad, tmp_path / "y.sqlite")


def test_dataset_file_of_every_environment_loads_each_apart(tmp_path):
    from engine.costmodel.export import export_dataset, import_dataset

    src = tmp_path / "src.sqlite"
    p = random_pipeline(3, max_stages=4)
    scheds = [default_schedule(p), sample_schedule(p, random.Random(0)), sample_schedule(p, random.Random(1))]
    with Database(src) as db:
        db.conn.execute("INSERT INTO cm_pipelines VALUES (?, ?, 'random', 3)", (p.content_hash(), p.name))
        db.conn.commit()
        for j, s in enumerate(scheds):
            _fake(db, p, s, 1.0 + j)
            if j < 2:
                _fake(db, p, s, 10.0 + j, host="other")
        _fake(db, _blur(16), default_schedule(_blur(16)), 7.0)  # not a dataset pipeline: neither written nor counted
        _fake(db, _blur(16), default_schedule(_blur(16)), 7.0, host="app only")  # an environment without dataset labels
    out = tmp_path / "all.jsonl.gz"
    res = export_dataset(src, out, all_environments=True)
    assert res["samples"] == 5 and res["environments"] == [["t", "h", 1, 3], ["t", "other", 1, 2]]
    assert export_dataset(src, tmp_path / "one.jsonl.gz")["samples"] == 3  # default: the most common environment only
    back = tmp_path / "back.sqlite"
    assert import_dataset(out, back) == {"pipelines": 1, "samples": 5}
    assert sorted(x.time_ms for x in D.load(back)) == [1.0, 2.0, 3.0]  # the most common one, never mixed
    assert sorted(x.time_ms for x in D.load(back, host="other")) == [10.0, 11.0]


def test_wrong_feature_version_fails_clearly_and_predictions_are_deterministic(synthetic, tmp_path):
    samples = D.load(synthetic)
    gnn, _ = train_gnn(samples, hidden=8, layers=1, epochs=1)
    gnn.save(tmp_path, "gnn")
    p = random_pipeline(0, max_stages=5)
    s = sample_schedule(p, random.Random(5))
    first, again = (load_models(tmp_path)["gnn"].predict(p, s).total_ms for _ in range(2))
    assert first == again == gnn.predict(p, s).total_ms  # same weights, same input: same prediction
    cfg = json.loads((tmp_path / "gnn.json").read_text())
    (tmp_path / "gnn.json").write_text(json.dumps({**cfg, "feature_version": F.VERSION + 1}))
    with pytest.raises(ValueError, match=f"features version {F.VERSION + 1}.*retrain"):
        load_models(tmp_path)


def test_a_training_step_reduces_the_loss_on_a_fixed_batch(synthetic):
    import torch

    from engine.costmodel.gnn import StageCostNet, collate
    from engine.costmodel.targets import targets_of

    samples = D.load(synthetic)[:16]
    torch.manual_seed(0)
    net = StageCostNet(16, 2)
    net.norm.fit(samples)
    batch = collate(samples, net.norm, targets_of(samples, "log"))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        _, pred = net(batch)
        loss = torch.nn.functional.mse_loss(pred, batch.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]


def test_gnn_learns_a_correction_to_the_analytic_estimate():
    """With its head's last layer zeroed the GNN predicts exactly the one-core analytic
    estimate: what it learns is a per-stage correction, so it scales with size like the estimate."""
    import torch

    from engine import zoo
    from engine.costmodel.dataset import sample_of
    from engine.costmodel.gnn import GNN_NAME, StageCostNet, TorchCostModel

    samples = [sample_of(zoo.get(n, size), default_schedule(zoo.get(n, size))) for n in ("blur", "matmul") for size in ("small", "full")]
    net = StageCostNet(16, 2)
    net.norm.fit(samples)
    with torch.no_grad():
        net.head[-1].weight.zero_()
        net.head[-1].bias.zero_()
    net.eval()
    got, _ = TorchCostModel(net, GNN_NAME, {}).predict_samples(samples)
    want = [AnalyticModel(cores=1).predict(zoo.get(n, size), default_schedule(zoo.get(n, size))).total_ms
            for n in ("blur", "matmul") for size in ("small", "full")]  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-3)
    assert got[1] > 100 * got[0]  # blur full vs small: the estimate carries the size
