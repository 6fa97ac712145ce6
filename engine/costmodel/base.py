"""The cost-model interface and its plain record."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..schedule import Schedule


@dataclass
class Prediction:
    """A predicted run time: never a measurement. `model` names what predicted it."""

    model: str
    total_ms: float
    stages: dict[str, float] = field(default_factory=dict)
    kind: str = "prediction"


def unmodelled(s: Schedule) -> str:
    """What of `s` no cost model sees ('' when nothing): the loop nest the models featurize has
    no wrapper stages, so a schedule's packed copies are predicted as if it read the source."""
    if not s.wrappers:
        return ""
    names = ", ".join(w.label for _, w in sorted(s.wrappers.items()))
    return f"packed copies not modelled ({names}): predicted as if unpacked"


class CostModel(Protocol):
    name: str

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        """Predict (p, s); `nest`, when given, is the already-built loop nest of (p, s)."""
        ...

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """Predict every schedule of `p` in one batch, equal to `predict` on each (to float
        tolerance); `nests`, when given, are their already-built loop nests (None: build it)."""
        ...


class BatchedModel:
    """A model whose one-schedule `predict` is its batch of one: the models implement
    `predict_many` only, so the two can never disagree."""

    name: str

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        """Predict (p, s); `nest`, when given, is the already-built loop nest of (p, s)."""
        return self.predict_many(p, [s], [nest])[0]

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        raise NotImplementedError


def nests_of(p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None) -> list[LoopNest]:
    """The loop nest of each schedule: the given one, else built (and validated) here."""
    if nests is not None and len(nests) != len(schedules):
        raise ValueError(f"{len(nests)} loop nests for {len(schedules)} schedules of {p.name}")
    given = nests or [None] * len(schedules)
    return [n if n is not None else build(p, s) for s, n in zip(schedules, given)]


def predictions(model: str, p: Pipeline, totals: Iterable[float], stages: Iterable[Iterable[float]]) -> list[Prediction]:
    """One Prediction per schedule from its total and its per-stage ms (in `p.stages` order)."""
    names = [st.name for st in p.stages]
    return [Prediction(model, float(t), dict(zip(names, map(float, ms)))) for t, ms in zip(totals, stages)]


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
