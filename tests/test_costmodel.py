"""The cost-model interface: labelled predictions from the analytic estimate."""

from engine import zoo
from engine.costmodel import Prediction, default_model
from engine.schedule import S, Schedule, default_schedule


def test_prediction_is_labelled_and_per_stage():
    p = zoo.get("blur", "full")
    pred = default_model().predict(p, default_schedule(p))
    assert isinstance(pred, Prediction) and pred.kind == "prediction" and "estimate" in pred.model
    assert set(pred.stages) == {"blur_x", "blur_y"} and pred.total_ms > 0
    assert abs(sum(pred.stages.values()) - pred.total_ms) < 1e-9


def test_vectorized_parallel_schedule_is_predicted_faster():
    p = zoo.get("blur", "full")
    s = Schedule()
    S(s, "blur_y").split("y", "yo", "yi", 32).parallel("yo").vectorize("x", 16)
    S(s, "blur_x").compute_at("blur_y", "yo").vectorize("x", 16)
    model = default_model()
    assert model.predict(p, s).total_ms < model.predict(p, default_schedule(p)).total_ms / 2
    assert model.predict(p, s).stages["blur_x"] > 0
