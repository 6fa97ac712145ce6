"""The runner: verified timings, per-stage profile, and isolation of crashing or hanging jobs."""

import time

import pytest

from engine import api, zoo
from engine.database import Database
from engine.measure import Job, Runner, autoscheduler_key
from engine.schedule import default_schedule


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


def test_a_worker_that_closes_its_pipe_but_does_not_exit_is_a_crash_not_an_exception(runner):
    """The runner waits a bounded time for a worker on its way out; one that stays (as a killed
    process can on a saturated machine) is killed and reported, and the next job runs."""
    p = zoo.get("blur", "small").to_json()
    t0 = time.monotonic()
    stuck = runner.run(Job(p, {"stages": {}}, fault="close_and_hang", timeout_s=60))
    assert not stuck.ok and stuck.error_kind == "crash" and "closed its result pipe" in stuck.error, stuck.error
    assert time.monotonic() - t0 < 30  # the 5 s grace, not the 60 s job timeout
    assert runner.run(Job(p, {"stages": {}}, min_time_s=0.02)).verified


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


def test_measure_can_be_cancelled_and_its_cache_lookup_is_public(runner, tmp_path):
    """api.measure's `should_cancel` reaches the running job (the app cancels through it), and
    api.stored_measurement is the lookup api.measure does before measuring."""
    p = zoo.get("blur", "small")
    key = default_schedule(p).content_hash()
    polls = {"n": 0}

    def after_a_few_polls() -> bool:  # the job is running in its worker by then
        polls["n"] += 1
        return polls["n"] > 3

    with Database(tmp_path / "db.sqlite") as db:
        assert api.stored_measurement(p, db, key, runner.threads) is None
        cancelled = api.measure(p, None, runner, db, should_cancel=after_a_few_polls, min_time_s=60.0, max_runs=10**9)
        assert not cancelled.ok and cancelled.error == "cancelled" and polls["n"] == 4
        assert api.stored_measurement(p, db, key, runner.threads) is None  # a cancelled job is no timing
        m = api.measure(p, None, runner, db, min_time_s=0.02)  # the killed worker was replaced
        assert m.ok and m.verified and not m.cached
        hit = api.stored_measurement(p, db, key, runner.threads)
        assert hit is not None and hit.cached and hit.median_ms == m.median_ms
        again = api.measure(p, None, runner, db, should_cancel=lambda: True)  # answered by the cache: nothing runs
        assert again.cached and again.median_ms == m.median_ms
        assert api.stored_measurement(p, db, autoscheduler_key("Adams2019"), runner.threads) is None


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
