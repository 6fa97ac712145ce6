"""The cost-model interface: labelled predictions from the analytic estimate."""

import json

from engine import zoo
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
