"""The structured GNN's pieces: the schedule-structure edges and relative edge features it
builds from a sample, the pipeline-relative losses (Adams2019's, listwise, pairwise), a
training step of each reducing it, saving/loading with its options, and the 3-seed
evaluation (mean and spread of every metric)."""

import json
import math

import numpy as np
import pytest
import torch

from engine.costmodel import dataset as D
from engine.costmodel import features as F
from engine.costmodel.dataset import sample_of
from engine.costmodel.evaluate import METRICS, evaluate
from engine.costmodel.gnn import (
    N_RELATIVE,
    STRUCTURE,
    StageCostNet,
    adams_loss,
    collate,
    listwise_loss,
    load_gnn,
    pairwise_loss,
    relative_edge_features,
    structure_edges,
    train_gnn,
)
from engine.costmodel.targets import targets_of
from engine.costmodel.train import train_all
from engine.ops import Builder
from engine.schedule import S, default_schedule

ALL = {"relative": True, "structure": True, "attention": True, "readout": True}


def _chain():
    """a, e -> b -> c -> d (pointwise stencils): stage indices a 0, e 1, b 2, c 3, d 4."""
    b = Builder("chain")
    inp = b.input("input", (20, 20))
    a = b.stencil("a", inp, [((0, 0), 1.0)])
    e = b.stencil("e", inp, [((0, 0), 2.0)])
    c = b.stencil("c", b.add("b", a, e), [((0, 0), 1.0)])
    return b.build([b.stencil("d", c, [((0, 0), 1.0)])])


def test_structure_edges_follow_containment_siblings_and_inlining():
    p = _chain()
    s = default_schedule(p)
    S(s, "a").compute_at("b", "y")
    S(s, "e").compute_at("b", "y")
    S(s, "b").compute_at("c", "y")
    ix, kind = structure_edges(sample_of(p, s))
    got = {(int(a), int(b), STRUCTURE[k]) for a, b, k in zip(*ix, kind)}
    # a and e sit in b, which sits in c: both are inside c too, and share b's loops
    assert got == {(0, 3, "contained_in"), (1, 3, "contained_in"), (0, 1, "sibling"), (1, 0, "sibling")}
    s = default_schedule(p)
    S(s, "a").compute_inline()
    S(s, "b").compute_inline()  # a's work lands in c, through b
    ix, kind = structure_edges(sample_of(p, s))
    assert {(int(a), int(b), STRUCTURE[k]) for a, b, k in zip(*ix, kind)} == {(0, 3, "inlined_into")}
    assert structure_edges(sample_of(p, default_schedule(p)))[0].shape == (2, 0)  # all at root: only flow edges


def test_relative_edge_features_see_the_producer_tile_against_the_consumer():
    p = _chain()
    root = sample_of(p, default_schedule(p))
    s = default_schedule(p)
    S(s, "c").compute_at("d", "y")  # one row of c per row of d
    inside = sample_of(p, s)
    col = 0  # RELATIVE[0]: points per production, producer minus consumer (log1p scale)
    edge = list(zip(*inside.edge_index)).index((3, 4))  # c -> d
    r_root, r_in = relative_edge_features(root), relative_edge_features(inside)
    assert r_root.shape == (4, N_RELATIVE) and r_root[edge, col] == pytest.approx(0.0)  # same region as d at root
    assert r_in[edge, col] < -2.0  # a 20-point row against d's 400 points
    assert r_in[2, col] > 2.0  # b (at root, all of it) feeding c's row: the producer's tile is the larger
    np.testing.assert_allclose(r_in[:2], r_root[:2])  # a, e -> b: neither end changed


def test_pipeline_relative_losses():
    y = torch.tensor([0.0, 1.0, 2.0, 0.5, 1.5])
    g = torch.tensor([0, 0, 0, 1, 1])
    assert adams_loss(y, y, g).item() == 0.0  # exact predictions
    # Adams2019 weighs the fast schedules: the same log error costs more on the fastest
    fast, slow = y.clone(), y.clone()
    fast[0] += 0.5
    slow[2] += 0.5
    assert adams_loss(fast, y, g) > 5 * adams_loss(slow, y, g)
    # ranking losses: the right order scores better than the reversed one
    rev = torch.tensor([2.0, 1.0, 0.0, 1.5, 0.5])
    for loss in (listwise_loss, pairwise_loss):
        assert loss(y, y, g) < loss(rev, y, g)
    assert pairwise_loss(3 * y, y, g) < pairwise_loss(y, y, g)  # RankNet: more confident in the right order is better
    # ListNet: its minimum is the measured times themselves (up to a shift per pipeline), not a sharper order
    assert listwise_loss(y, y, g) < min(listwise_loss(3 * y, y, g), listwise_loss(y / 3, y, g))
    assert listwise_loss(y + torch.tensor([5.0, 5, 5, -2, -2]), y, g).item() == pytest.approx(listwise_loss(y, y, g).item())
    assert listwise_loss(y[:1], y[:1], g[:1]).item() == 0.0  # a pipeline alone has nothing to rank against


@pytest.mark.parametrize("loss", ["mse+adams", "listwise"])
def test_a_training_step_of_the_structured_gnn_reduces_its_loss(synthetic, loss):
    samples = D.load(synthetic)[:24]
    torch.manual_seed(0)
    net = StageCostNet(16, 2, **ALL)
    net.norm.fit(samples)
    b = collate(samples, net.norm, targets_of(samples, "log"))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def value() -> torch.Tensor:
        _, pred = net(b)
        if loss == "listwise":
            return listwise_loss(pred, b.y, b.group)
        return torch.nn.functional.mse_loss(pred, b.y) + adams_loss(pred, b.y, b.group)

    # the listwise loss's floor is the entropy of the measured order (its value at pred = y)
    floor = listwise_loss(b.y, b.y, b.group).item() if loss == "listwise" else 0.0
    losses = []
    for _ in range(6):
        v = value()
        opt.zero_grad()
        v.backward()
        opt.step()
        losses.append(v.item() - floor)
    assert losses[-1] < 0.9 * losses[0], losses


def test_structured_gnn_saves_with_its_options_and_loads_weights_only(synthetic, tmp_path):
    samples = D.load(synthetic)
    m, st = train_gnn(samples, 8, 1, ALL, epochs=1, loss="mse+adams", list_weight=0.5)
    assert math.isfinite(st["final_loss"])
    m.save(tmp_path, "gnn")
    cfg = json.loads((tmp_path / "gnn.json").read_text())
    assert {k: cfg[k] for k in ALL} == ALL and cfg["loss"] == "mse+adams" and cfg["feature_version"] == F.VERSION
    back = load_gnn(tmp_path)
    assert back.net.options == ALL
    np.testing.assert_allclose(back.predict_samples(samples)[0], m.predict_samples(samples)[0], rtol=1e-6)
    (tmp_path / "gnn.json").write_text(json.dumps({**cfg, "readout": False}))  # options that do not match the weights
    with pytest.raises(ValueError, match="not usable weights.*readout"):
        load_gnn(tmp_path)
    with pytest.raises(ValueError, match="unknown GNN options"):
        train_gnn(samples, 8, 1, {"atention": True}, epochs=1)


def test_three_seeds_give_every_metric_a_mean_and_spread(synthetic, tmp_path):
    out = tmp_path / "m"
    res = train_all(synthetic, out, models=["gnn", "tvm"], epochs=2, rounds=5, hidden=8, layers=1, seeds=3, seed=4,
                    gnn_options={"readout": True}, holdout_pipelines=0.34, holdout_schedules=0.34)  # fmt: skip
    assert sorted(res["models"]["gnn"]["other_seeds"]) == [5, 6]
    assert json.loads((out / "split.json").read_text())["seeds"] == [4, 5, 6]
    assert (out / "seeds" / "6" / "gnn.pt").exists() and not (out / "seeds" / "4").exists()
    ev = evaluate(synthetic, out, with_analytic=False)
    for name in ("gnn", "tvm"):
        sd = ev[name]["seeds"]
        assert sd["seeds"] == [4, 5, 6]
        for part in (sd, sd["seen_pipelines"]):
            for k in METRICS:
                v = part[k]
                assert len(v["values"]) == 3 and v["min"] - 1e-12 <= v["mean"] <= v["max"] + 1e-12 and v["std"] >= 0
        assert sd["mape"]["values"][0] == ev[name]["mape"]  # the first seed is the models beside split.json
    assert len(set(ev["gnn"]["seeds"]["mape"]["values"])) == 3  # three seeds, three different models
    (out / "seeds" / "5" / "gnn.json").unlink()
    (out / "seeds" / "5" / "tvm.json").unlink()
    with pytest.raises(FileNotFoundError, match="no trained cost models"):
        evaluate(synthetic, out, with_analytic=False)


def test_the_noise_ceiling_is_reported_beside_every_model_tau():
    from engine.costmodel.evaluate import add_ceiling, noise_ceiling

    rep = {"baseline": {"host": "h", "target": "t", "overall": {"kendall_tau": 0.8, "median_abs_log_ratio": 0.05, "n_samples": 64}}}
    c = noise_ceiling(rep, "t", "h")
    assert c is not None and c["kendall_tau"] == 0.8 and c["same_environment"]
    assert noise_ceiling(rep, "t", "other")["same_environment"] is False  # another machine's: a reference only
    assert noise_ceiling({"careful": rep["baseline"]}, "t", "h") is None  # the dataset's labels were taken the baseline way
    cpu = {**rep, "cpu": {**rep["baseline"], "overall": {**rep["baseline"]["overall"], "kendall_tau": 0.9}}}
    assert noise_ceiling(cpu, "t", "h", "cpu")["kendall_tau"] == 0.9  # thread-CPU labels: the cpu protocol's ceiling
    assert noise_ceiling(cpu, "t", "h")["protocol"] == "baseline"
    res = {"gnn": {"kendall_tau": 0.6, "seeds": {"kendall_tau": {"mean": 0.4}}}, "tvm": {"kendall_tau": None}}
    add_ceiling(res, c)
    assert res["gnn"]["tau_of_ceiling"] == pytest.approx(0.75) and res["gnn"]["seeds"]["tau_of_ceiling"] == pytest.approx(0.5)
    assert res["tvm"]["tau_of_ceiling"] is None and res["noise_ceiling"] is c
