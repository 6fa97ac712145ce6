"""Cost models: predict a schedule's run time without running it.

Every model implements `CostModel.predict(pipeline, schedule) -> Prediction`; the app and
the search only see this interface. A `Prediction` is always labelled with the model that
made it and is never mixed up with a measurement.
"""

from .analytic import AnalyticModel
from .base import CostModel, Prediction

__all__ = ["AnalyticModel", "CostModel", "Prediction", "default_model"]


def default_model() -> CostModel:
    """The best available model (the analytic estimate until a learned one is trained)."""
    return AnalyticModel()
