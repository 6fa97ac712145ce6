"""Fixtures shared by the cost-model tests."""

import random

import pytest

from engine.costmodel.analytic import AnalyticModel
from engine.database import Database
from engine.measure import Measurement
from engine.randpipe import random_pipeline
from engine.sampler import sample_schedule
from engine.schedule import default_schedule


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """6 random pipelines x 6 schedules, timed by the analytic model (no measuring), in a
    database (target "t", host "h", 1 thread). Tests only read it."""
    path = tmp_path_factory.mktemp("cm") / "syn.sqlite"
    model = AnalyticModel(2)
    with Database(path) as db:
        for seed in range(6):
            p = random_pipeline(seed, max_stages=5)
            rng = random.Random(seed)
            for s in [default_schedule(p)] + [sample_schedule(p, rng) for _ in range(5)]:
                db.put_pipeline(p.content_hash(), p.name, p.to_json())
                db.put_schedule(s.content_hash(), s.to_json())
                ms = model.predict(p, s).total_ms
                m = Measurement(p.name, p.content_hash(), s.content_hash(), True, True, median_ms=ms, target="t", host="h", threads=1)
                db.record(m)
    return path
