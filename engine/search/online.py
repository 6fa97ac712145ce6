"""Online correction of a cost model by the measurements of the running search.

The search's model was trained elsewhere (or is the analytic estimate); this pipeline on
this machine may be mispredicted in ways that matter for ranking. After each measurement
the residual r = log(measured / predicted) is stored with the schedule's feature vector;
a prediction is then corrected by the mean residual (fixes the scale) plus a kernel
regression of the residuals of measured schedules near it in feature space (fixes the
ranking locally: schedules like a mispredicted one are corrected the same way). The base
model itself is not changed.
"""

from __future__ import annotations

import math

import numpy as np

from .. import features as F
from ..costmodel import CostModel, Prediction
from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..schedule import Schedule


def _vector(nest: LoopNest) -> np.ndarray:
    """Per-stage features (stages in pipeline order, so one pipeline's vectors align; the
    features are log-scaled, so extents and byte counts compare by ratio)."""
    return F.stage_features(nest).astype(np.float64).ravel()


class OnlineCorrected:
    """`base`'s predictions, corrected by this search's measurements (see module doc)."""

    def __init__(self, base: CostModel) -> None:
        self.base = base
        self.name = f"{base.name} + online correction"
        self._vecs: list[np.ndarray] = []
        self._resid: list[float] = []
        self._h2 = 1.0

    def observe(self, p: Pipeline, s: Schedule, measured_ms: float) -> None:
        nest = build(p, s)
        pred = self.base.predict(p, s, nest).total_ms
        if pred > 0 and measured_ms > 0 and math.isfinite(pred):
            self._vecs.append(_vector(nest))
            self._resid.append(math.log(measured_ms / pred))
            if len(self._vecs) >= 2:  # bandwidth: the typical distance between measured schedules
                v = np.stack(self._vecs)
                pair = ((v[:, None, :] - v[None, :, :]) ** 2).mean(axis=2)
                self._h2 = float(np.median(pair[np.triu_indices(len(v), 1)])) or 1.0

    def correction(self, nest: LoopNest) -> float:
        """The log-ratio to add to the base model's log prediction."""
        if not self._resid:
            return 0.0
        r = np.asarray(self._resid)
        mean = float(r.mean())
        if len(r) < 2:
            return mean
        v = np.stack(self._vecs)
        d2 = ((v - _vector(nest)) ** 2).mean(axis=1)
        w = np.exp(-d2 / self._h2)
        return mean + float((w * (r - mean)).sum() / (w.sum() + 1.0))  # +1: shrink toward the mean far from any measurement

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        nest = nest or build(p, s)
        pr = self.base.predict(p, s, nest)
        f = math.exp(self.correction(nest))
        return Prediction(self.name, pr.total_ms * f, {k: v * f for k, v in pr.stages.items()})
