"""The labels' noise ceiling (engine/costmodel/noise.py) on a deterministic fake runner: known
answers for the ceiling, the interleaved rounds, the careful protocol's scaled window and
re-measurement, the fixed sample drawn from a real SQLite database."""

import dataclasses
import json
import math
import random
import statistics
import time

import pytest

from engine import api
from engine.costmodel import noise as N
from engine.costmodel.dataset import JOB_OPTIONS, careful_label
from engine.database import Database
from engine.ir import Pipeline
from engine.measure import Job, Measurement, scaled_options
from engine.ops import Builder
from engine.sampler import sample_schedule
from engine.schedule import Schedule


def _blur(n: int = 32, name: str = "blur"):
    b = Builder(name)
    inp = b.input("input", (n + 2, n + 2))
    bx = b.stencil("blur_x", inp, [((0, k), 1 / 3) for k in range(3)])
    return b.build([b.stencil("blur_y", bx, [((k, 0), 1 / 3) for k in range(3)])])


class FakeRunner:
    """Deterministic timings: each schedule's true time from its hash, each round's median that
    times exp(N(0, sigma)) from a seeded stream, `noisy` schedules 4x noisier. Records the jobs."""

    threads, slots, host, target = 1, 1, "fake host", "fake-target"

    def __init__(self, sigma: float, noisy: frozenset[str] = frozenset()) -> None:
        self.sigma, self.noisy, self.jobs = sigma, noisy, []
        self.rng = random.Random(7)

    @staticmethod
    def true_ms(key: str) -> float:
        return 0.05 * 1.5 ** (int(key[:6], 16) % 16)  # 0.05 .. 22 ms: every size class

    def run(self, job: Job, should_cancel=None) -> Measurement:
        self.jobs.append(job)
        key = Schedule.from_json(job.schedule).content_hash()
        sigma = self.sigma * (4 if key in self.noisy else 1)
        rounds = [self.true_ms(key) * math.exp(self.rng.gauss(0, sigma)) for _ in range(max(1, job.rounds))]
        med = statistics.median(rounds)
        p = Pipeline.from_json(job.pipeline)
        env = {"host": self.host, "target": self.target, "threads": self.threads}
        return Measurement(p.name, p.content_hash(), key, True, True, median_ms=med, iqr_ms=0.0, round_medians_ms=rounds, **env)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def items():
    p = _blur()
    rng = random.Random(3)
    scheds = {}
    while len(scheds) < 12:
        s = sample_schedule(p, rng)
        scheds[s.content_hash()] = s
    return [N.Item(p, s, FakeRunner.true_ms(h)) for h, s in sorted(scheds.items())]


def test_ceiling_known_answers():
    a, g = [1.0, 2.0, 3.0, 4.0], ["p"] * 4
    assert N.ceiling(a, a, g)["kendall_tau"] == 1.0 and N.ceiling(a, a, g)["median_abs_log_ratio"] == 0.0
    c = N.ceiling(a, [1.0, 3.0, 2.0, 8.0], g)  # one discordant pair of six; ratios 1, 1.5, 2/3, 2
    assert c["kendall_tau"] == pytest.approx(4 / 6)
    assert c["median_abs_log_ratio"] == pytest.approx(math.log(1.5))
    assert N.fraction_of_ceiling(0.5, 0.8) == pytest.approx(0.625) and N.fraction_of_ceiling(0.5, None) is None
    with pytest.raises(ValueError, match="3 first and 2 second"):
        N.ceiling([1, 2, 3], [1, 2], ["p"] * 3)
    assert [N.size_class(x) for x in (0.05, 0.5, 5.0, 50.0)] == [name for _, name in N.SIZE_CLASSES]


def test_estimate_interleaves_rounds_and_reports_per_class(items):
    exact = N.estimate(items, FakeRunner(0.0))
    assert exact.overall["kendall_tau"] == pytest.approx(1.0) and exact.overall["median_abs_log_ratio"] == 0.0
    assert exact.overall["n_samples"] == 12 and exact.jobs == 24 and not exact.failed
    assert set(exact.classes) <= {name for _, name in N.SIZE_CLASSES} and len(exact.classes) >= 2
    assert sum(c["n_samples"] for c in exact.classes.values()) == 12
    runner = FakeRunner(0.3)
    noisy = N.estimate(items, runner)
    assert noisy.overall["kendall_tau"] < 1.0 and noisy.overall["median_abs_log_ratio"] > 0.05
    order = [Schedule.from_json(j.schedule).content_hash() for j in runner.jobs]
    keys = [it.key[1] for it in items]
    assert order == keys + keys[::-1]  # round 1 over every item, then round 2 in reverse: interleaved
    assert all(j.min_time_s == N.BASELINE.options["min_time_s"] for j in runner.jobs)


def test_careful_protocol_scales_remeasures_and_raises_the_ceiling(items):
    noisy_key = items[0].key[1]
    base = N.estimate(items, FakeRunner(0.3, frozenset({noisy_key})), N.BASELINE)
    runner = FakeRunner(0.3, frozenset({noisy_key}))
    careful = N.estimate(items, runner, N.CAREFUL)
    assert careful.overall["median_abs_log_ratio"] < base.overall["median_abs_log_ratio"]
    assert careful.overall["kendall_tau"] >= base.overall["kendall_tau"]
    probe, timed = runner.jobs[0], runner.jobs[1]
    assert probe.rounds == 1 and timed.rounds == 3
    want = scaled_options(FakeRunner.true_ms(noisy_key) * 1.0)  # scaled to the kernel: the window and warm-up follow its time
    assert timed.warmup >= 2 and timed.min_time_s <= want["min_time_s"] * 50
    # Rounds that disagree by more than remeasure_above (5%) are measured again: the noisy one always.
    per_key = [Schedule.from_json(j.schedule).content_hash() for j in runner.jobs].count(noisy_key)
    assert per_key == 6 and careful.jobs > 2 * 2 * len(items)
    assert all(s["spread"][0] >= 0 for s in careful.samples)


def test_scaled_options_follow_the_kernel():
    fast, slow = scaled_options(0.02), scaled_options(50.0)
    assert fast["warmup"] == 200 and slow["warmup"] == 2  # ~50 ms of warm-up either way, within bounds
    assert fast["min_time_s"] == pytest.approx(0.05 / 3) and slow["min_time_s"] == pytest.approx(0.6 / 3)
    assert scaled_options(5.0)["min_time_s"] == pytest.approx(30 * 0.005 / 3) and fast["rounds"] == 3
    with pytest.raises(ValueError, match="positive number of ms"):
        scaled_options(float("nan"))


def test_fixed_sample_from_a_database(tmp_path, items):
    db_path = tmp_path / "d.sqlite"
    pipes = [_blur(16, "small"), _blur(64, "large")]
    with Database(db_path) as db:
        for k, p in enumerate(pipes):
            ph = p.content_hash()
            db.put_pipeline(ph, p.name, p.to_json())
            with db.conn:
                db.conn.execute("INSERT INTO cm_pipelines VALUES (?, ?, 'random', ?)", (ph, p.name, k))
            for j, it in enumerate(items[:6]):
                s = it.schedule
                db.put_schedule(s.content_hash(), s.to_json())
                db.record(Measurement(p.name, ph, s.content_hash(), True, True, median_ms=(k * 10 + 1) * (j + 1), target="t", host="h"))
    got = N.fixed_sample(db_path, 2, 4, seed=1)
    assert len(got) == 8 and {it.pipeline.name for it in got} == {"small", "large"}
    assert [it.key for it in got] == [it.key for it in N.fixed_sample(db_path, 2, 4, seed=1)]  # fixed
    assert all(it.stored_ms > 0 for it in got)
    only = N.fixed_sample(db_path, 1, 4, only={pipes[1].content_hash()})
    assert {it.pipeline.name for it in only} == {"large"}
    with pytest.raises(ValueError, match="only 2 dataset pipelines have 4"):
        N.fixed_sample(db_path, 3, 4)


def test_report_saved_and_read_back(tmp_path, items):
    rep = N.estimate(items[:4], FakeRunner(0.1))
    path = N.save_report(rep, tmp_path / "noise.json")
    assert N.last_ceiling("fake host", "fake-target", "baseline", path) == pytest.approx(rep.overall["kendall_tau"])
    assert N.last_ceiling("other host", "fake-target", "baseline", path) is None  # another machine's ceiling is not this one's
    stored = json.loads(path.read_text())
    stored["baseline"]["fastest"]["kendall_tau"] = 0.123  # the same runs' fastest-run labels agree less (as measured here)
    path.write_text(json.dumps(stored))
    assert N.last_ceiling("fake host", "fake-target", "baseline", path, label="fastest") == 0.123
    assert N.last_ceiling("fake host", "fake-target", "baseline", path) == pytest.approx(rep.overall["kendall_tau"])


def test_careful_dataset_label_is_stored_over_the_quick_one(tmp_path, items):
    it = items[0]
    runner = FakeRunner(0.3, frozenset({it.key[1]}))  # its rounds disagree: measured twice more
    with Database(tmp_path / "d.sqlite") as db:
        first = api.measure(it.pipeline, it.schedule, runner, db, **JOB_OPTIONS)
        got = careful_label(it.pipeline, it.schedule, runner, db, first, JOB_OPTIONS)
        assert len(runner.jobs) == 3 and [j.rounds for j in runner.jobs] == [1, 3, 3]
        assert len(got.round_medians_ms) == 6 and got.median_ms != first.median_ms
        stored = db.lookup(it.key[0], it.key[1], runner.target, runner.host, runner.threads)
        assert stored is not None and stored.median_ms == got.median_ms and len(stored.round_medians_ms) == 6
        steady = FakeRunner(0.0)
        m = careful_label(it.pipeline, it.schedule, steady, db, first, JOB_OPTIONS)
        assert len(steady.jobs) == 1 and m.median_ms == pytest.approx(FakeRunner.true_ms(it.key[1]))  # steady: one more job


# --- the thread-CPU clock and interleaved relabelling -----------------------------------------
def test_thread_cpu_clock_does_not_count_time_off_the_core():
    """A run that waits (the core given to another process) costs wall time but no CPU time."""
    from engine.measure import timed_rounds

    def wait():
        time.sleep(0.005)

    wall = timed_rounds(wait, Job({}, {}, min_time_s=0.0, min_runs=3, warmup=1))
    cpu = timed_rounds(wait, Job({}, {}, min_time_s=0.0, min_runs=3, warmup=1, clock="thread_cpu"))
    assert min(wall[0]) >= 0.005 and max(cpu[0]) < 0.004
    with pytest.raises(ValueError, match="unknown clock"):
        timed_rounds(wait, Job({}, {}, clock="sundial"))
    assert N.PROTOCOLS["cpu"].options["clock"] == "thread_cpu"


def test_a_stored_label_of_another_clock_is_measured_again(tmp_path, items):
    """The database keys a label by pipeline, schedule, target, host and threads, not clock: a
    wall-clock record must not answer a thread-CPU request (calibrate-host, generate)."""

    class ClockRunner(FakeRunner):
        def run(self, job: Job, should_cancel=None) -> Measurement:
            return dataclasses.replace(super().run(job), clock=job.clock)

    it, runner = items[0], ClockRunner(0.0)
    with Database(tmp_path / "d.sqlite") as db:
        api.measure(it.pipeline, it.schedule, runner, db, **JOB_OPTIONS)
        again = api.measure(it.pipeline, it.schedule, runner, db, **JOB_OPTIONS)
        assert len(runner.jobs) == 1 and again.cached  # same clock: the stored label
        cpu = api.measure(it.pipeline, it.schedule, runner, db, **{**JOB_OPTIONS, "clock": "thread_cpu"})
        assert len(runner.jobs) == 2 and cpu.clock == "thread_cpu" and not cpu.cached
        # One label per schedule and machine, the latest, with its clock: the app's wall-clock
        # lookup no longer finds a time, the thread-CPU one does.
        assert api.stored_measurement(it.pipeline, db, it.key[1], 1, runner) is None
        assert api.stored_measurement(it.pipeline, db, it.key[1], 1, runner, "thread_cpu").clock == "thread_cpu"


def test_the_cpu_clock_with_several_threads_is_refused_everywhere(tmp_path, items):
    """The thread CPU clock counts the timing thread only: with 2 Halide threads every label would
    leave out the other thread's work, so the runner, the worker and each labelling entry point
    refuse it with one message, before measuring anything."""
    from engine import worker
    from engine.costmodel.dataset import generate
    from engine.measure import Runner, check_clock

    it = items[0]
    job = Job(it.pipeline.to_json(), it.schedule.to_json(), clock="thread_cpu")
    with Runner(2) as runner:
        m = runner.run(job)
        assert not m.ok and "1 Halide thread" in (m.error or "") and runner.worker_pid is None  # no worker started
    got = worker.execute(job, 2)  # a cluster node's path
    assert not got.ok and "1 Halide thread" in (got.error or "")

    class TwoThreads(FakeRunner):
        threads = 2

    with pytest.raises(ValueError, match="1 Halide thread"):
        N.estimate(items[:2], TwoThreads(0.0), N.PROTOCOLS["cpu"])
    with pytest.raises(ValueError, match="1 Halide thread"):
        generate(tmp_path / "g.sqlite", 1, 1, with_zoo=False, threads=2, job_options={"clock": "thread_cpu"})
    assert not (tmp_path / "g.sqlite").exists()  # refused before the database was opened
    check_clock("thread_cpu", 1)
    check_clock("wall", 8)


class DriftRunner(FakeRunner):
    """FakeRunner whose job k is slowed by `slow(k)` (the machine's load over time); records each job's clock."""

    def __init__(self, slow) -> None:
        super().__init__(0.0)
        self.slow = slow

    def run(self, job: Job, should_cancel=None) -> Measurement:
        m = super().run(job)
        f = self.slow(len(self.jobs) - 1)
        return dataclasses.replace(m, median_ms=m.median_ms * f, min_ms=m.median_ms * f, clock=job.clock)


def _stored_db(tmp_path, items, factor, clock="thread_cpu"):
    path = tmp_path / "r.sqlite"
    with Database(path) as db:
        for k, it in enumerate(items):
            ph, sh = it.key
            db.put_pipeline(ph, it.pipeline.name, it.pipeline.to_json())
            db.put_schedule(sh, it.schedule.to_json())
            env = {"host": FakeRunner.host, "target": FakeRunner.target, "threads": 1, "clock": clock}
            ms = FakeRunner.true_ms(sh) * factor(k)
            db.record(Measurement(it.pipeline.name, ph, sh, True, True, median_ms=ms, min_ms=ms, **env))
    return path


def test_relabel_keeps_the_fastest_pass_and_remeasures_disagreement(tmp_path, items):
    """The first half of the stored labels were taken under load (3x slow); one interleaved pass
    on a quiet machine puts every label back at its true time, re-measures exactly the ones
    whose passes disagreed, times each with its record's clock, and stores the passes."""
    from engine.costmodel.dataset import load, relabel

    half = len(items) // 2
    path = _stored_db(tmp_path, items, lambda k: 3.0 if k < half else 1.0)
    runner = DriftRunner(lambda k: 1.0)
    rep = relabel(path, runner, passes=1, seed=1)
    assert rep["labels"] == len(items) and rep["remeasured"] == half and not rep["failed"]
    assert len(runner.jobs) == len(items) + half and {j.clock for j in runner.jobs} == {"thread_cpu"}
    got = {s.schedule_hash: s for s in load(path)}
    for it in items:
        assert got[it.key[1]].time_ms == pytest.approx(FakeRunner.true_ms(it.key[1]))
    slow = {it.key[1] for it in items[:half]}
    assert all((got[h].spread > 1.0) == (h in slow) for h in got)  # the passes' disagreement is the label's spread
    with Database(path) as db:
        rec = json.loads(db.conn.execute("SELECT json FROM measurements LIMIT 1").fetchone()[0])
    assert rec["clock"] == "thread_cpu" and len(rec["round_medians_ms"]) >= 2


def test_relabel_passes_are_in_random_order(tmp_path, items):
    """Each pass takes the labels in a new random order, so drift over the minutes of measuring
    never follows the stored order."""
    from engine.costmodel.dataset import relabel

    path = _stored_db(tmp_path, items, lambda k: 1.0)
    runner = DriftRunner(lambda k: 1.0)
    relabel(path, runner, passes=2, seed=4)
    order = [Schedule.from_json(j.schedule).content_hash() for j in runner.jobs]
    first, second = order[: len(items)], order[len(items) : 2 * len(items)]
    assert sorted(first) == sorted(second) == sorted(it.key[1] for it in items)
    assert first != second and first != sorted(first)
    with pytest.raises(ValueError, match="no stored measurements"):
        relabel(path, runner, ["nope"])


def test_labels_of_two_clocks_are_never_mixed_silently(tmp_path, items):
    from engine.costmodel.dataset import load
    from engine.measure import autoscheduler_key

    path = _stored_db(tmp_path, items, lambda k: 1.0)
    it = items[0]
    with Database(path) as db:  # an autoscheduler's wall-clock time is not a label: no refusal for it
        db.record(Measurement(it.pipeline.name, it.key[0], autoscheduler_key("Adams2019"), True, True, median_ms=1.0,
                              host=FakeRunner.host, target=FakeRunner.target, threads=1))  # fmt: skip
    assert len(load(path)) == len(items)
    with Database(path) as db:  # one wall-clock label of a schedule measured beside them
        db.record(Measurement(it.pipeline.name, it.key[0], "f" * 16, True, True, median_ms=1.0, host=FakeRunner.host,
                              target=FakeRunner.target, threads=1))  # fmt: skip
        db.put_schedule("f" * 16, it.schedule.to_json())
    with pytest.raises(ValueError, match="thread_cpu and wall clocks"):
        load(path)
    from engine.costmodel.dataset import label_clocks

    assert label_clocks(path, FakeRunner.target, FakeRunner.host, 1) == {"thread_cpu", "wall"}
    assert len(load(path, clock="thread_cpu")) == len(items)
