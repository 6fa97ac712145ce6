"""The noise ceiling of the cost-model labels: how well two independent measurements of the
same schedules agree with each other.

No model can rank schedules better than the labels agree with themselves: when two runs of
the same 64 schedules give Kendall tau 0.77 between them, a model's tau of 0.6 is 0.6 / 0.77
of what the data allow. `estimate` re-measures a fixed sample of stored dataset schedules
in independent rounds, interleaved (round 1 measures every sample, then round 2 every
sample in reverse order, so slow drift of the machine's load lands on both sides), with one
labelling `Protocol` each round, and reports the ceiling (`ceiling`: mean within-pipeline
tau and median |log ratio| between the rounds) overall and per size class.

Two protocols: `BASELINE` is how the dataset's labels were taken (dataset.JOB_OPTIONS: a
fixed 50 ms window, one warm-up run); `CAREFUL` first times the kernel briefly, then
measures with a window and warm-up scaled to it and 3 inner rounds
(measure.scaled_options), and measures again when those rounds disagree by more than
`remeasure_above` (the label is then the median of both). `label` is one protocol's label
of one schedule, with its spread, for whoever makes labels (dataset.generate's careful
mode uses the same functions).

`fraction_of_ceiling(tau, ceiling)` is how every model's tau is reported against it.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..database import Database
from ..ir import Pipeline
from ..measure import Job, Measurement, MeasureRunner, check_clock, round_spread, scaled_options
from ..schedule import Schedule
from .dataset import JOB_OPTIONS
from .evaluate import mean_kendall_tau
from .files import read_json, write_json

SIZE_CLASSES = ((0.1, "under 0.1 ms"), (1.0, "0.1-1 ms"), (10.0, "1-10 ms"), (math.inf, "10 ms and over"))


def size_class(ms: float) -> str:
    """The size class of a run time (by the stored label: the same sample is in the same class
    whichever round is slower)."""
    return next(name for bound, name in SIZE_CLASSES if ms < bound)


@dataclass(frozen=True)
class Protocol:
    """How one label is taken: `scaled` probes the kernel and scales the window and warm-up
    to it; `remeasure_above` (a |log| spread between the inner rounds) triggers one more
    measurement (0: never)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    scaled: bool = False
    remeasure_above: float = 0.0


BASELINE = Protocol("baseline", dict(JOB_OPTIONS))
CAREFUL = Protocol("careful", {"profile": False, "timeout_s": 60.0}, scaled=True, remeasure_above=0.05)
# The dataset's window timed by the timing thread's CPU time (measure.CLOCKS): with 1 Halide thread
# the kernel runs on that thread, and the time other processes hold the core is not counted.
CPU = Protocol("cpu", {**JOB_OPTIONS, "clock": "thread_cpu"})
PROTOCOLS = {p.name: p for p in (BASELINE, CAREFUL, CPU)}
PROBE = {"min_time_s": 0.01, "min_runs": 1, "warmup": 1, "rounds": 1, "profile": False}


@dataclass
class Label:
    """One schedule's label under a protocol: the time, its spread (max |log| distance of the
    inner rounds' medians from each other, 0 with one round), how many jobs it took."""

    ms: float
    spread: float
    jobs: int
    min_ms: float = 0.0  # the fastest single run: interference on a shared machine only ever slows a run


spread_of = round_spread  # the |log| range of a measurement's round medians (0 with one round)


class LabelError(RuntimeError):
    """A schedule that no longer measures (crash, timeout, wrong output): named in the message."""


def _run(runner: MeasureRunner, p: Pipeline, s: Schedule, options: dict[str, Any]) -> Measurement:
    m = runner.run(Job(p.to_json(), s.to_json(), **options))
    if not (m.ok and m.verified and m.median_ms):
        raise LabelError(f"{p.name} schedule {s.content_hash()}: {m.error_kind or 'unverified'}: {m.error or 'not verified'}")
    return m


def label(runner: MeasureRunner, p: Pipeline, s: Schedule, protocol: Protocol) -> Label:
    """Measure (p, s) under `protocol` (fresh: nothing is read from or written to a database)."""
    if not protocol.scaled:
        m = _run(runner, p, s, protocol.options)
        return Label(float(m.median_ms or 0.0), spread_of(m), 1, float(m.min_ms or m.median_ms or 0.0))
    probe = _run(runner, p, s, {**protocol.options, **PROBE})  # compiles; the worker keeps it compiled for the next job
    opts = {**protocol.options, **scaled_options(float(probe.median_ms or 0.0))}
    m = _run(runner, p, s, opts)
    ms, spread, jobs, fastest = [float(m.median_ms or 0.0)], spread_of(m), 2, float(m.min_ms or m.median_ms or 0.0)
    if protocol.remeasure_above and spread > protocol.remeasure_above:
        again = _run(runner, p, s, opts)
        ms.append(float(again.median_ms or 0.0))
        spread, jobs = max(spread, spread_of(again), abs(math.log(ms[1] / ms[0]))), 3
        fastest = min(fastest, float(again.min_ms or again.median_ms or 0.0))
    return Label(statistics.median(ms), spread, jobs, fastest)


# --- the ceiling ------------------------------------------------------------------------------
def ceiling(first: Sequence[float], second: Sequence[float], groups: Sequence[Any]) -> dict[str, Any]:
    """How two labellings of the same samples agree: mean within-pipeline Kendall tau (the
    groups are pipelines), median and 90th-percentile |log ratio|, counts."""
    a, b = np.asarray(first, float), np.asarray(second, float)
    if len(a) != len(b) or len(a) != len(groups):
        raise ValueError(f"{len(a)} first and {len(b)} second labels for {len(groups)} samples")
    if not len(a):
        return {"kendall_tau": None, "median_abs_log_ratio": None, "p90_abs_log_ratio": None, "n_samples": 0, "n_pipelines": 0}
    r = np.abs(np.log(a / b))
    tau = mean_kendall_tau(a, b, list(groups))
    return {
        "kendall_tau": None if math.isnan(tau) else tau,
        "median_abs_log_ratio": float(np.median(r)),
        "p90_abs_log_ratio": float(np.quantile(r, 0.9)),
        "n_samples": len(a),
        "n_pipelines": len(set(groups)),
    }


def fraction_of_ceiling(tau: float | None, noise_tau: float | None) -> float | None:
    """A model's tau as a fraction of the labels' own (None when either is unknown)."""
    if tau is None or noise_tau is None or not noise_tau > 0 or math.isnan(tau):
        return None
    return float(tau / noise_tau)


# --- the sample -------------------------------------------------------------------------------
@dataclass
class Item:
    """A stored dataset schedule to re-measure, with its stored label (the size class's key)."""

    pipeline: Pipeline
    schedule: Schedule
    stored_ms: float

    @property
    def key(self) -> tuple[str, str]:
        return (self.pipeline.content_hash(), self.schedule.content_hash())


def fixed_sample(
    db_path: str | Path,
    pipelines: int = 4,
    per_pipeline: int = 16,
    seed: int = 0,
    *,
    only: set[str] | None = None,
    exclude: set[str] | None = None,
) -> list[Item]:
    """`per_pipeline` stored schedules of each of `pipelines` dataset pipelines, the same for
    the same database and seed. Pipelines with at least `per_pipeline` samples are sorted by
    their median label and taken at evenly spaced quantiles (so the size classes are all
    represented), the schedules at random (seeded). `only` / `exclude`: pipeline hashes to
    sample from / to leave out (a model's held-out pipelines)."""
    if pipelines < 1 or per_pipeline < 2:
        raise ValueError(f"a noise sample needs at least 1 pipeline and 2 schedules each (asked {pipelines} x {per_pipeline})")
    with Database(db_path) as db:
        rows = db.conn.execute(
            "SELECT m.pipeline_hash, m.schedule_hash, MIN(m.median_ms) FROM measurements m "
            "WHERE m.pipeline_hash IN (SELECT hash FROM cm_pipelines) GROUP BY m.pipeline_hash, m.schedule_hash "
            "ORDER BY m.pipeline_hash, m.schedule_hash"
        ).fetchall()
        by: dict[str, list[tuple[str, float]]] = {}
        for ph, sh, ms in rows:
            by.setdefault(ph, []).append((sh, float(ms)))
        full = sorted(
            (statistics.median(ms for _, ms in v), ph)
            for ph, v in by.items()
            if len(v) >= per_pipeline and (only is None or ph in only) and (exclude is None or ph not in exclude)
        )
        if len(full) < pipelines:
            raise ValueError(f"{db_path}: only {len(full)} dataset pipelines have {per_pipeline} stored schedules ({pipelines} asked)")
        picks = [full[int((k + 0.5) * len(full) / pipelines)][1] for k in range(pipelines)]
        rng = random.Random(seed)
        out: list[Item] = []
        for ph in picks:
            pj = db.conn.execute("SELECT json FROM pipelines WHERE hash=?", (ph,)).fetchone()[0]
            p = Pipeline.from_json(json.loads(pj))
            for sh, ms in rng.sample(sorted(by[ph]), per_pipeline):
                sj = db.conn.execute("SELECT json FROM schedules WHERE hash=?", (sh,)).fetchone()[0]
                out.append(Item(p, Schedule.from_json(json.loads(sj)), ms))
    return out


# --- estimating it ----------------------------------------------------------------------------
@dataclass
class NoiseReport:
    """Two interleaved rounds of one protocol over a fixed sample: the ceiling overall and
    per size class, each sample's labels, what it cost."""

    protocol: str
    host: str
    target: str
    threads: int
    overall: dict[str, Any]
    classes: dict[str, dict[str, Any]]
    samples: list[dict[str, Any]]
    failed: list[str]
    jobs: int
    seconds: float
    fastest: dict[str, Any] = field(default_factory=dict)  # the same ceiling with each label's fastest run instead of its median

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def estimate(
    items: Sequence[Item],
    runner: MeasureRunner,
    protocol: Protocol = BASELINE,
    *,
    progress: Callable[[int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> NoiseReport:
    """Label every item twice under `protocol`, in two interleaved rounds (the second in reverse
    order), and compare the rounds. An item that fails to measure in either round is left out
    and named in `failed`; cancelling stops between jobs (the report covers what finished)."""
    check_clock(protocol.options.get("clock", "wall"), runner.threads)
    t0 = time.time()
    labels: list[dict[tuple[str, str], Label]] = [{}, {}]
    failed: list[str] = []
    bad: set[tuple[str, str]] = set()
    order = [list(items), list(reversed(items))]
    total, done = 2 * len(items), 0
    for rnd in range(2):
        for it in order[rnd]:
            if should_cancel is not None and should_cancel():
                break
            done += 1
            if it.key in bad:
                continue
            try:
                labels[rnd][it.key] = label(runner, it.pipeline, it.schedule, protocol)
            except LabelError as exc:
                bad.add(it.key)
                failed.append(str(exc))
            if progress is not None:
                progress(done, total)
    both = [it for it in items if it.key in labels[0] and it.key in labels[1]]
    a = [labels[0][it.key].ms for it in both]
    b = [labels[1][it.key].ms for it in both]
    groups = [it.key[0] for it in both]
    fastest = ceiling([labels[0][it.key].min_ms for it in both], [labels[1][it.key].min_ms for it in both], groups)
    classes: dict[str, dict[str, Any]] = {}
    for _, name in SIZE_CLASSES:
        ix = [k for k, it in enumerate(both) if size_class(it.stored_ms) == name]
        if ix:
            classes[name] = ceiling([a[k] for k in ix], [b[k] for k in ix], [groups[k] for k in ix])
    samples = [
        {
            "pipeline": it.pipeline.name, "pipeline_hash": it.key[0], "schedule_hash": it.key[1], "stored_ms": it.stored_ms,
            "round_ms": [labels[0][it.key].ms, labels[1][it.key].ms],
            "round_min_ms": [labels[0][it.key].min_ms, labels[1][it.key].min_ms],
            "spread": [labels[0][it.key].spread, labels[1][it.key].spread],
        }
        for it in both
    ]  # fmt: skip
    jobs = sum(lb.jobs for rnd in labels for lb in rnd.values())
    return NoiseReport(
        protocol.name, runner.host, runner.target, runner.threads, ceiling(a, b, groups), classes, samples, failed, jobs,
        round(time.time() - t0, 1), fastest,
    )  # fmt: skip


# --- the last measured ceiling, for reports ---------------------------------------------------
def report_path() -> Path:
    """Where `costmodel noise` keeps its last report per protocol (the user data directory)."""
    from . import default_dir  # noqa: PLC0415

    return default_dir().parent / "noise.json"


def save_report(report: NoiseReport, path: Path | None = None) -> Path:
    """Keep `report` (atomically) beside the other protocols' last reports."""
    path = path or report_path()
    stored = read_json(path) if path.exists() else {}
    stored[report.protocol] = report.to_json()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, stored, indent=1)
    return path


def last_ceiling(host: str, target: str, protocol: str = "baseline", path: Path | None = None, label: str = "median") -> float | None:
    """The noise ceiling's tau last measured on this host and target under `protocol`, or None;
    of labels of kind `label` (dataset.LABELS: each report has both, from the same runs)."""
    path = path or report_path()
    if not path.exists():
        return None
    rep = read_json(path).get(protocol)
    if not isinstance(rep, dict) or rep.get("host") != host or rep.get("target") != target:
        return None
    tau = (rep.get("fastest" if label == "fastest" else "overall") or {}).get("kendall_tau")
    return float(tau) if isinstance(tau, (int, float)) else None
