"""OnlineCorrected's kernel regression equals its definition (brute force over the measured
feature vectors), and what it keeps is bounded: no loop nests, a capped cache."""

import math
import random

import numpy as np

from engine import zoo
from engine.costmodel import AnalyticModel
from engine.loopnest import build
from engine.sampler import sample_schedule
from engine.search import online
from engine.search.online import OnlineCorrected


def test_correction_equals_the_kernel_regression_written_out() -> None:
    p = zoo.get("harris", "small")
    rng = random.Random(5)
    scheds = [sample_schedule(p, rng) for _ in range(9)]
    m = OnlineCorrected(AnalyticModel())
    measured = list(zip(scheds[:5], (1.0, 4.0, 2.5, 0.7, 9.0)))
    for s, ms in measured:
        m.observe(p, s, ms)
    vecs = np.stack([online.features_of(build(p, s)) for s, _ in measured]).astype(np.float64)
    resid = np.array([math.log(ms / AnalyticModel().predict(p, s).total_ms) for s, ms in measured])
    pair = ((vecs[:, None, :] - vecs[None, :, :]) ** 2).mean(axis=2)
    h2 = float(np.median(pair[np.triu_indices(len(vecs), 1)]))
    for s in scheds:
        v = online.features_of(build(p, s)).astype(np.float64)
        w = np.exp(-((vecs - v) ** 2).mean(axis=1) / h2)
        want = resid.mean() + (w * (resid - resid.mean())).sum() / (w.sum() + 1.0)
        assert math.isclose(m.correction(p, s), want, rel_tol=1e-6, abs_tol=1e-9)


def test_cache_is_capped_and_holds_no_loop_nests(monkeypatch) -> None:
    monkeypatch.setattr(online, "CACHE_ENTRIES", 50)
    p = zoo.get("harris", "small")
    rng = random.Random(1)
    m = OnlineCorrected(AnalyticModel())
    scheds = [sample_schedule(p, rng) for _ in range(80)]
    m.predict_many(p, scheds)
    kept = m.cached()
    assert len(kept) == 50 < len({s.content_hash() for s in scheds})
    assert all(isinstance(vec, np.ndarray) and vec.dtype == np.float32 for _, vec in kept)
