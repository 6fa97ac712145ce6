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
from collections.abc import Sequence

import numpy as np

from ..costmodel import CostModel, Prediction
from ..costmodel import features as F
from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..schedule import Schedule


def _vector(nest: LoopNest) -> np.ndarray:
    """Per-stage features (stages in pipeline order, so one pipeline's vectors align; the
    features are log-scaled, so extents and byte counts compare by ratio)."""
    return F.stage_features(nest).astype(np.float64).ravel()


class OnlineCorrected:
    """`base`'s predictions, corrected by this search's measurements (see module doc).

    The base prediction and feature vector of each schedule are cached by schedule hash:
    the search re-predicts everything after each measurement (the correction changed),
    and that must not rebuild loop nests or re-run the base model."""

    def __init__(self, base: CostModel) -> None:
        self.base = base
        self.name = f"{base.name} + online correction"
        self._vecs: list[np.ndarray] = []
        self._resid: list[float] = []
        self._h2 = 1.0
        self._cache: dict[str, tuple[Prediction, LoopNest]] = {}
        self._vec_cache: dict[str, np.ndarray] = {}

    def _base(self, p: Pipeline, s: Schedule, nest: LoopNest | None) -> tuple[str, Prediction, LoopNest]:
        h = s.content_hash()
        if h not in self._cache:
            nest = nest or build(p, s)
            self._cache[h] = (self.base.predict(p, s, nest), nest)
        return (h, *self._cache[h])

    def _vector(self, h: str, nest: LoopNest) -> np.ndarray:
        if h not in self._vec_cache:
            self._vec_cache[h] = _vector(nest)
        return self._vec_cache[h]

    def observe(self, p: Pipeline, s: Schedule, measured_ms: float) -> None:
        h, pr, nest = self._base(p, s, None)
        if pr.total_ms > 0 and measured_ms > 0 and math.isfinite(pr.total_ms):
            self._vecs.append(self._vector(h, nest))
            self._resid.append(math.log(measured_ms / pr.total_ms))
            if len(self._vecs) >= 2:  # bandwidth: the typical distance between measured schedules
                v = np.stack(self._vecs)
                pair = ((v[:, None, :] - v[None, :, :]) ** 2).mean(axis=2)
                self._h2 = float(np.median(pair[np.triu_indices(len(v), 1)])) or 1.0

    def _correction(self, h: str, nest: LoopNest) -> float:
        if not self._resid:
            return 0.0
        r = np.asarray(self._resid)
        mean = float(r.mean())
        if len(r) < 2:
            return mean
        d2 = ((np.stack(self._vecs) - self._vector(h, nest)) ** 2).mean(axis=1)
        w = np.exp(-d2 / self._h2)
        return mean + float((w * (r - mean)).sum() / (w.sum() + 1.0))  # +1: shrink toward the mean far from any measurement

    def correction(self, p: Pipeline, s: Schedule) -> float:
        """The log-ratio added to the base model's log prediction of (p, s)."""
        h, _, nest = self._base(p, s, None)
        return self._correction(h, nest)

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        return self._corrected(*self._base(p, s, nest))

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """`predict` of each schedule, with one `predict_many` of the base model for the ones
        not cached (each schedule's correction is then applied as `predict` applies it)."""
        if nests is not None and len(nests) != len(schedules):
            raise ValueError(f"{len(nests)} loop nests for {len(schedules)} schedules of {p.name}")
        given = nests or [None] * len(schedules)
        hashes = [s.content_hash() for s in schedules]
        miss: dict[str, tuple[Schedule, LoopNest]] = {}  # hash -> (schedule, nest), first occurrence
        for h, s, n in zip(hashes, schedules, given):
            if h not in self._cache and h not in miss:
                miss[h] = (s, n or build(p, s))
        if miss:
            todo = list(miss.values())
            preds = self.base.predict_many(p, [s for s, _ in todo], [n for _, n in todo])
            for h, (_, n), pr in zip(miss, todo, preds, strict=True):
                self._cache[h] = (pr, n)
        return [self._corrected(h, *self._cache[h]) for h in hashes]

    def _corrected(self, h: str, pr: Prediction, nest: LoopNest) -> Prediction:
        f = math.exp(self._correction(h, nest))
        return Prediction(self.name, pr.total_ms * f, {k: v * f for k, v in pr.stages.items()})
