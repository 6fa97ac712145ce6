"""The cost-model interface and its plain record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..ir import Pipeline
from ..loopnest import LoopNest
from ..schedule import Schedule


@dataclass
class Prediction:
    """A predicted run time: never a measurement. `model` names what predicted it."""

    model: str
    total_ms: float
    stages: dict[str, float] = field(default_factory=dict)
    kind: str = "prediction"


class CostModel(Protocol):
    name: str

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        """Predict (p, s); `nest`, when given, is the already-built loop nest of (p, s)."""
        ...


@dataclass
class ModelChoice:
    """The model the app and search use, where it came from, and why a model named by a
    `default.json` was not used (empty when none failed): a reason to show the user."""

    model: CostModel
    source: str  # the model directory, or "analytic"
    fallback_reason: str = ""


def short_label(model: str) -> str:
    """A model's name for legends and labels: "analytic estimate", "GNN, learned", ..."""
    if "roofline" in model or "analytic" in model:
        return "analytic estimate"
    return model.replace(" (learned prediction)", "").replace(" cost model", "") + ", learned"
