"""The cost-model interface: labelled predictions from the analytic estimate."""

import json

from engine import api, zoo
from engine.costmodel import ENV_VAR, AnalyticModel, Prediction, default_model
from engine.schedule import S, Schedule, default_schedule


def test_prediction_is_labelled_and_per_stage():
    p = zoo.get("blur", "full")
    pred = AnalyticModel().predict(p, default_schedule(p))
    assert isinstance(pred, Prediction) and pred.kind == "prediction" and "estimate" in pred.model
    assert set(pred.stages) == {"blur_x", "blur_y"} and pred.total_ms > 0
    assert abs(sum(pred.stages.values()) - pred.total_ms) < 1e-9


def test_vectorized_parallel_schedule_is_predicted_faster():
    p = zoo.get("blur", "full")
    s = Schedule()
    S(s, "blur_y").split("y", "yo", "yi", 32).parallel("yo").vectorize("x", 16)
    S(s, "blur_x").compute_at("blur_y", "yo").vectorize("x", 16)
    model = AnalyticModel()
    assert model.predict(p, s).total_ms < model.predict(p, default_schedule(p)).total_ms / 2
    assert model.predict(p, s).stages["blur_x"] > 0


def test_default_model_follows_the_choice_file_and_falls_back(tmp_path, monkeypatch, capsys):
    """default.json names the model; a model that cannot load is reported and skipped."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    monkeypatch.setattr("engine.costmodel.default_dir", lambda: tmp_path / "none")
    monkeypatch.setattr("engine.costmodel.SHIPPED", tmp_path / "none")  # no other directory to fall back to
    (tmp_path / "default.json").write_text(json.dumps({"model": "gnn"}))  # named, but no gnn.json there
    default_model.cache_clear()
    try:
        m = default_model()
        assert isinstance(m, AnalyticModel)
        assert str(tmp_path) in capsys.readouterr().err
        monkeypatch.setenv(ENV_VAR, "analytic")
        default_model.cache_clear()
        assert isinstance(default_model(), AnalyticModel)
    finally:
        default_model.cache_clear()


def test_shipped_learned_model_is_the_default_and_ranks_hand_above_default(monkeypatch):
    """resources/costmodel holds trained weights (weights_only load) and default.json names
    the model `costmodel eval --choose` picked; without an override, the app uses it."""
    from engine.costmodel import SHIPPED, model_dirs

    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setattr("engine.costmodel.default_dir", lambda: SHIPPED / "missing")  # not the user's own models
    assert model_dirs()[-1] == SHIPPED
    chosen = json.loads((SHIPPED / "default.json").read_text())["model"]
    default_model.cache_clear()
    try:
        m = default_model()
        assert not isinstance(m, AnalyticModel) and "learned" in m.name or chosen == "analytic"
        for name in ("conv_relu", "matmul", "blur"):
            p = zoo.get(name, "small")
            hand, default = (m.predict(p, api.load_schedule(p, k)) for k in ("hand", "default"))
            assert 0 < hand.total_ms < default.total_ms  # a learned prediction, labelled as one
            assert hand.kind == "prediction" and set(hand.stages) == {s.name for s in p.stages}
    finally:
        default_model.cache_clear()


def test_short_labels_name_the_model():
    from engine.costmodel import short_label
    from engine.costmodel.gnn import GNN_NAME
    from engine.costmodel.trees import TVM_NAME

    assert short_label(AnalyticModel().name) == "analytic estimate"
    assert short_label(GNN_NAME) == "GNN, learned" and short_label(TVM_NAME).endswith(", learned")
