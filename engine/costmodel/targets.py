"""Targets, prediction limits and the batch prediction shared by every learned cost model
(numpy only: the tree model loads without torch)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir import Pipeline
from ..loopnest import LoopNest, gc_paused
from ..schedule import Schedule
from .base import BatchedModel, Prediction, nests_of, predictions
from .dataset import Sample, samples_to_predict


def targets_of(samples: Sequence[Sample], target: str) -> np.ndarray:
    """'log': log ms. 'relative': log ms minus the pipeline's mean log ms in `samples`
    (only the order within a pipeline is learned; absolute predictions lose meaning)."""
    y = np.log(np.array([s.time_ms for s in samples]))
    if target == "relative":
        by: dict[str, list[int]] = {}
        for k, s in enumerate(samples):
            by.setdefault(s.pipeline_hash, []).append(k)
        for idx in by.values():
            y[idx] -= y[idx].mean()
    elif target != "log":
        raise ValueError(f"unknown target {target!r} (log or relative)")
    return y


def log_range(y: np.ndarray, margin: float = 3.0) -> list[float]:
    """Predictions are clipped to the training targets' range widened by `margin` (e^3 = 20x):
    a model extrapolating to an unseen pipeline must not predict 1e19 ms."""
    return [float(y.min() - margin), float(y.max() + margin)]


def clip_predictions(totals: np.ndarray, stages: list[np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Clip totals to config['log_range'] (in place for stages, scaled so they still sum to the total)."""
    lo, hi = config.get("log_range", (-math.inf, math.inf))
    clipped = np.exp(np.clip(np.log(np.maximum(totals, 1e-300)), lo, hi))
    for k, st in enumerate(stages):
        st *= clipped[k] / totals[k] if totals[k] > 0 else 0.0
    return clipped


class LearnedModel(BatchedModel):
    """A model over feature samples: a batch of schedules is featurized (rows cached per
    pipeline) and predicted by one `predict_samples` call."""

    def predict_samples(self, samples: Sequence[Sample], pipeline: Pipeline | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """(total ms per sample, per-stage ms arrays in pipeline stage order); `pipeline`, when
        given, is the one every sample is of (a model may cache per-row results with it)."""
        raise NotImplementedError

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        with gc_paused():
            totals, stages = self.predict_samples(samples_to_predict(p, nests_of(p, schedules, nests)), p)
        return predictions(self.name, p, totals.tolist(), stages)
