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
from scipy.spatial.distance import pdist

from ..costmodel import CostModel, Prediction
from ..costmodel import features as F
from ..ir import Pipeline
from ..loopnest import LRU, LoopNest, build
from ..schedule import Schedule

CACHE_BYTES = 200 * 2**20  # feature vectors kept (a ResNet-50 vector is 40 KB, harris's 3 KB)
CACHE_ENTRIES = 20_000  # and at most this many schedules


def features_of(nest: LoopNest) -> np.ndarray:
    """Per-stage features (stages in pipeline order, so one pipeline's vectors align; the
    features are log-scaled, so extents and byte counts compare by ratio), float32 as
    the features are."""
    return F.stage_features(nest).ravel()


class OnlineCorrected:
    """`base`'s predictions, corrected by this search's measurements (see module doc).

    The base prediction and feature vector of each schedule are cached by schedule hash
    (at most CACHE_ENTRIES or CACHE_BYTES of vectors, least recently used dropped): the search re-predicts everything
    after each measurement (the correction changed), and that must not rebuild loop nests
    or re-run the base model. Loop nests are not kept: a 10-minute search predicts
    thousands of schedules, and holding each nest grew the process without bound."""

    def __init__(self, base: CostModel) -> None:
        self.base = base
        self.name = f"{base.name} + online correction"
        self._measured = np.zeros((0, 0))  # one row per observed schedule's feature vector
        self._sq = np.zeros(0)  # each row's squared norm
        self._resid: list[float] = []
        self._h2 = 1.0
        self._cache: LRU[str, tuple[Prediction, np.ndarray]] = LRU(CACHE_ENTRIES)

    def _keep(self, h: str, pr: Prediction, vec: np.ndarray) -> tuple[Prediction, np.ndarray]:
        if not len(self._cache):  # the first entry (one pipeline per model: every vector has its size)
            self._cache.maxsize = min(CACHE_ENTRIES, max(1_000, CACHE_BYTES // max(vec.nbytes, 1)))
        return self._cache.put(h, (pr, vec))

    def _base(self, p: Pipeline, s: Schedule, nest: LoopNest | None) -> tuple[str, Prediction, np.ndarray]:
        h = s.content_hash()
        hit = self._cache.get(h)
        if hit is None:
            nest = nest or build(p, s)
            hit = self._keep(h, self.base.predict(p, s, nest), features_of(nest))
        return (h, *hit)

    def observe(self, p: Pipeline, s: Schedule, measured_ms: float) -> None:
        _, pr, vec = self._base(p, s, None)
        if pr.total_ms > 0 and measured_ms > 0 and math.isfinite(pr.total_ms):
            v = vec.astype(np.float64)
            self._measured = np.vstack([self._measured, v[None]]) if len(self._resid) else v[None]
            self._sq = np.append(self._sq, v @ v)
            self._resid.append(math.log(measured_ms / pr.total_ms))
            if len(self._resid) >= 2:  # bandwidth: the typical distance between measured schedules
                # pdist, not an [n, n, features] difference array: that took 2 GB at 577 measurements.
                self._h2 = float(np.median(pdist(self._measured, "sqeuclidean"))) / self._measured.shape[1] or 1.0

    def _correction(self, vec32: np.ndarray) -> float:
        if not self._resid:
            return 0.0
        vec = vec32.astype(np.float64)
        r = np.asarray(self._resid)
        mean = float(r.mean())
        if len(r) < 2:
            return mean
        # Mean squared distance to each measured vector, by norms and one product (no [n, features] temporary).
        d2 = np.maximum(self._sq - 2.0 * (self._measured @ vec) + vec @ vec, 0.0) / len(vec)
        w = np.exp(-d2 / self._h2)
        return mean + float((w * (r - mean)).sum() / (w.sum() + 1.0))  # +1: shrink toward the mean far from any measurement

    def cached(self) -> list[tuple[Prediction, np.ndarray]]:
        """The (base prediction, feature vector) pairs kept, least recently used first."""
        return self._cache.values()

    def correction(self, p: Pipeline, s: Schedule) -> float:
        """The log-ratio added to the base model's log prediction of (p, s)."""
        return self._correction(self._base(p, s, None)[2])

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        return self._corrected(*self._base(p, s, nest)[1:])

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """`predict` of each schedule, with one `predict_many` of the base model for the ones
        not cached (each schedule's correction is then applied as `predict` applies it)."""
        if nests is not None and len(nests) != len(schedules):
            raise ValueError(f"{len(nests)} loop nests for {len(schedules)} schedules of {p.name}")
        given = nests or [None] * len(schedules)
        hashes = [s.content_hash() for s in schedules]
        got: dict[str, tuple[Prediction, np.ndarray]] = {}
        miss: dict[str, tuple[Schedule, LoopNest]] = {}  # hash -> (schedule, nest), first occurrence
        for h, s, n in zip(hashes, schedules, given):
            if h in got or h in miss:
                continue
            hit = self._cache.get(h)
            if hit is None:
                miss[h] = (s, n or build(p, s))
            else:
                got[h] = hit
        if miss:
            todo = list(miss.values())
            preds = self.base.predict_many(p, [s for s, _ in todo], [n for _, n in todo])
            for h, (_, n), pr in zip(miss, todo, preds, strict=True):
                got[h] = self._keep(h, pr, features_of(n))
        return [self._corrected(*got[h]) for h in hashes]

    def _corrected(self, pr: Prediction, vec: np.ndarray) -> Prediction:
        f = math.exp(self._correction(vec))
        return Prediction(self.name, pr.total_ms * f, {k: v * f for k, v in pr.stages.items()})
