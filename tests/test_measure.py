"""The runner: verified timings, per-stage profile, and isolation of crashing or hanging jobs."""

import pytest

from engine import api, zoo
from engine.database import Database
from engine.measure import Job, Runner


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


def test_measurement_is_verified_and_profiled(runner):
    p = zoo.get("blur", "small")
    m = api.measure(p, None, runner, None, profile=True, min_time_s=0.05)
    assert m.ok and m.verified, m.error
    assert 0 < m.min_ms <= m.median_ms <= m.max_ms
    assert m.runs >= 5 and m.threads >= 1 and m.compile_s > 0
    assert "avx" in m.target or "x86" in m.target or "arm" in m.target
    assert m.max_abs_err is not None and m.max_abs_err < 1e-4
    assert set(m.stages) == {"blur_x", "blur_y"}
    assert sum(m.stages.values()) == pytest.approx(m.median_ms, rel=1e-6)


def test_crash_and_hang_are_isolated_and_the_next_job_succeeds(runner):
    p = zoo.get("blur", "small").to_json()
    crash = runner.run(Job(p, {"stages": {}}, fault="crash"))
    assert not crash.ok and crash.error_kind == "crash"
    assert "SIGSEGV" in crash.error
    hang = runner.run(Job(p, {"stages": {}}, fault="hang", timeout_s=3))
    assert not hang.ok and hang.error_kind == "timeout"
    ok = runner.run(Job(p, {"stages": {}}, min_time_s=0.02))
    assert ok.ok and ok.verified


def test_wrong_result_is_an_error_and_is_not_stored(runner, tmp_path):
    p = zoo.get("blur", "small")
    d = p.to_json()
    d["stages"][1]["value"]["args"][1] = 0.0  # declare blur_y wrongly; the op records still say blur
    with Database(tmp_path / "db.sqlite") as db:
        from engine.ir import Pipeline

        bad = Pipeline.from_json(d)
        m = api.measure(bad, None, runner, db, min_time_s=0.02)
        assert not m.ok and m.error_kind == "verification" and not m.verified
        assert "does not match the reference" in m.error
        assert db.count() == 0
        assert db.failures()[0]["kind"] == "verification"


def test_invalid_schedule_is_reported_without_a_worker(runner):
    p = zoo.get("blur", "small").to_json()
    m = runner.run(Job(p, {"stages": {"blur_y": {"pure": [{"kind": "vectorize", "loop": "nope"}]}}}))
    assert not m.ok and m.error_kind == "invalid_schedule" and "blur_y" in m.error


@pytest.mark.parametrize("name", zoo.names())
@pytest.mark.parametrize("schedule", ["default", "hand"])
def test_every_zoo_pipeline_verifies_at_small_size(runner, name, schedule):
    p = zoo.get(name, "small")
    m = api.measure(p, api.load_schedule(p, schedule), runner, None, min_time_s=0.01, min_runs=2)
    assert m.ok and m.verified, m.error
