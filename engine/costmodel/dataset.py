"""Training data for the learned cost models: pipelines x random schedules, measured.

`generate` measures, for each random pipeline (engine/randpipe.py) and optionally each zoo
pipeline at 'small' size, the default schedule, the hand schedule where there is one and
random schedules (engine/sampler.py: fresh samples and mutations of earlier ones) until
`per_pipeline` verified timings exist. Everything goes through `api.measure` into the
SQLite database, keyed by pipeline hash and schedule hash (and target, host, threads), so
a second run skips what is stored: the candidate sequence of a pipeline is a pure
function of (seed, pipeline hash), and failed schedules are remembered in the failures
table. Features are stored beside the timings (table `cm_features` of engine/database.py, keyed the same way,
with the feature version) so loading is fast; they are recomputed when the version changes.

`load` reads the samples back: one `Sample` per stored (pipeline hash, schedule hash),
features computed from the pipeline whose content hash is that key (checked), never from
a pipeline of the same name.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import api, zoo
from ..database import Database
from ..ir import Pipeline
from ..loopnest import LoopNest, build
from ..measure import Job, Measurement, MeasureRunner, Runner, check_clock, default_threads, log_range, round_spread, scaled_options
from ..randpipe import random_pipeline
from ..sampler import mutate, sample_schedule
from ..schedule import Schedule, default_schedule
from . import features as F

# Job options for dataset timings: short, few runs (the ranking matters more than the last
# percent), no per-stage profile (it doubles the cost; the models train on totals).
JOB_OPTIONS: dict[str, Any] = {"min_time_s": 0.05, "min_runs": 3, "warmup": 1, "profile": False, "timeout_s": 20.0}


@dataclass
class Sample:
    """One measured (pipeline, schedule): graph features and the verified median time."""

    pipeline_hash: str
    pipeline: str  # name, for reports only; the hash is the key
    schedule_hash: str
    time_ms: float
    nodes: np.ndarray  # [n_stages, N_FEATURES]
    edge_index: np.ndarray  # [2, E]
    edges: np.ndarray  # [E, N_EDGE_FEATURES]
    spread: float = 0.0  # the label's relative spread: IQR of its run times / median (0: unknown)

    @property
    def costed(self) -> np.ndarray:
        """Stages that have a cost of their own (not inlined)."""
        return self.nodes[:, F.INDEX["compute_inline"]] < 0.5


def sample_of(p: Pipeline, s: Schedule, time_ms: float = float("nan"), nest: LoopNest | None = None, spread: float = 0.0) -> Sample:
    x, ei, ef = F.featurize(nest or build(p, s))
    return Sample(p.content_hash(), p.name, s.content_hash(), time_ms, x, ei, ef, spread)


# Which time of a measurement is a sample's label. "median": the median run (the shipped data's
# labels, what the app shows as measured); "fastest": the fastest run. Every stored measurement
# keeps both (its record has min_ms), so either can be read back. Interference only ever slows
# a run, but with the dataset's few runs per label (3 in a 50 ms window for a 15 ms kernel) a
# burst over the whole window moves the fastest as much as the median: measured in the same
# runs at load 11-14 on 2 shared cores (README, "The model on your machine"), two labellings
# disagree by a median 0.16 (median) vs 0.27 (fastest) in log time on the standard sample and
# 0.23 vs 0.24 on five unseen pipelines (the fastest has the smaller tail: p90 0.84 vs 1.39).
# Not steadier, so the median stays the default label; `--label fastest` reads the other.
LABELS = ("median", "fastest")
DEFAULT_LABEL = "median"


def label_sql(kind: str) -> str:
    """The SQL expression of a `measurements m` row's label of `kind` (LABELS)."""
    if kind == "median":
        return "m.median_ms"
    if kind == "fastest":
        return "COALESCE(json_extract(m.json, '$.min_ms'), m.median_ms)"  # a record without min_ms: its median
    raise ValueError(f"unknown label {kind!r} (choose from {', '.join(LABELS)})")


def label_of(m: Measurement, kind: str) -> float:
    """The label of `kind` (LABELS) of a verified measurement, as `label_sql` reads it back."""
    label_sql(kind)  # checks the kind
    ms = m.min_ms if kind == "fastest" and m.min_ms else m.median_ms
    if not ms:
        raise ValueError(f"{m.pipeline} schedule {m.schedule_hash}: no time to label it with")
    return float(ms)


RELIABLE_SPREAD = 0.2  # a label whose run times' IQR is 20% of its median counts half in fine-tuning


def label_weights(samples: Sequence[Sample], half_at: float = RELIABLE_SPREAD) -> np.ndarray:
    """Each label's weight in training: 1 for a steady label, 1/2 at spread `half_at`, falling
    as 1 / (1 + (spread / half_at)^2): noisy labels count less instead of misleading the fit."""
    sp = np.array([s.spread for s in samples], float)
    return 1.0 / (1.0 + (sp / half_at) ** 2)


def reliable(samples: Sequence[Sample], max_spread: float) -> list[Sample]:
    """The samples whose label spread is at most `max_spread` (the unreliable ones dropped)."""
    return [s for s in samples if s.spread <= max_spread]


def samples_to_predict(p: Pipeline, nests: Sequence[LoopNest]) -> list[Sample]:
    """Unmeasured samples of built loop nests of `p`, for a prediction: no time and no
    schedule hash (nothing stores them, and hashing costs as much as a cached row)."""
    ph = p.content_hash()
    return [Sample(ph, p.name, "", float("nan"), *F.featurize(n)) for n in nests]


# --- storage -------------------------------------------------------------------------------
def _blob(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _array(b: bytes) -> np.ndarray:
    return np.load(io.BytesIO(b), allow_pickle=False)


def store_features(db: Database, smp: Sample) -> None:
    with db.conn:
        db.conn.execute(
            "INSERT OR REPLACE INTO cm_features VALUES (?, ?, ?, ?, ?, ?)",
            (smp.pipeline_hash, smp.schedule_hash, F.VERSION, _blob(smp.nodes), _blob(smp.edge_index), _blob(smp.edges)),
        )


def _has_features(db: Database, ph: str, sh: str) -> bool:
    row = db.conn.execute("SELECT version FROM cm_features WHERE pipeline_hash=? AND schedule_hash=?", (ph, sh)).fetchone()
    return row is not None and row[0] == F.VERSION


# --- generation ----------------------------------------------------------------------------
def dataset_pipelines(
    n_pipelines: int, seed: int, with_zoo: bool, max_stages: int = 8, size: str = "small"
) -> list[tuple[Pipeline, str, int]]:
    """(pipeline, origin, seed) for random pipelines seed, seed+1, ... and the small zoo."""
    out = [(random_pipeline(seed + k, max_stages, size), "random", seed + k) for k in range(n_pipelines)]
    if with_zoo:
        out += [(zoo.get(n, "small"), "zoo", -1) for n in zoo.names()]
    return out


def candidates(p: Pipeline, seed: int) -> Iterator[Schedule]:
    """The pipeline's schedule sequence: default, hand (zoo), then random samples and
    (a quarter) mutations of earlier ones. A pure function of (seed, content hash)."""
    rng = random.Random(f"{seed}:{p.content_hash()}")
    yield default_schedule(p)
    if p.name in zoo.ZOO:
        from ..hand_schedules import hand_schedule  # noqa: PLC0415

        try:
            yield hand_schedule(p)
        except KeyError:
            pass
    pool: list[Schedule] = []
    while True:
        s = mutate(p, rng.choice(pool), rng) if pool and rng.random() < 0.25 else sample_schedule(p, rng)
        pool.append(s)
        yield s


CAREFUL_REMEASURE = 0.05  # |log| disagreement of a careful label's rounds that earns a second measurement


def careful_label(p: Pipeline, s: Schedule, runner: MeasureRunner, db: Database, first: Measurement, job: dict[str, Any]) -> Measurement:
    """A careful label for (p, s), from the quick `first` measurement: measured again with a
    window and warm-up scaled to the kernel and 3 inner rounds (measure.scaled_options), and
    once more when those rounds disagree by over CAREFUL_REMEASURE; the label is then the
    median of both, with all their round medians (its spread). Stored over the quick one."""
    opts = {**job, **scaled_options(float(first.median_ms or 0.0))}
    m = api.measure(p, s, runner, db, force=True, **opts)
    if not (m.ok and m.verified and m.median_ms) or round_spread(m) <= CAREFUL_REMEASURE:
        return m
    again = api.measure(p, s, runner, db, force=True, **opts)
    if not (again.ok and again.verified and again.median_ms):
        return again
    both = dataclasses.replace(
        again, median_ms=statistics.median([m.median_ms, again.median_ms]), round_medians_ms=m.round_medians_ms + again.round_medians_ms
    )
    db.record(both)
    return both


@dataclass
class _Ctx:
    db_path: Path
    per_pipeline: int
    seed: int
    threads: int
    job: dict[str, Any]
    local: threading.local
    runners: list[MeasureRunner]
    lock: threading.Lock
    shared: MeasureRunner | None = None  # one runner for every thread (a cluster's), else one Runner each
    careful: bool = False  # labels re-measured with a window scaled to the kernel (see careful_label)

    def runner_db(self) -> tuple[MeasureRunner, Database]:
        if not hasattr(self.local, "runner"):
            self.local.runner, self.local.db = self.shared or Runner(self.threads), Database(self.db_path)
            if self.shared is None:
                with self.lock:
                    self.runners.append(self.local.runner)
        return self.local.runner, self.local.db


def _one_pipeline(ctx: _Ctx, p: Pipeline, origin: str, pseed: int) -> Counter:
    runner, db = ctx.runner_db()
    ph = p.content_hash()
    with db.conn:
        db.conn.execute("INSERT OR IGNORE INTO cm_pipelines VALUES (?, ?, ?, ?)", (ph, p.name, origin, pseed))
    failed = {f["schedule_hash"] for f in db.failures(ph)}
    stats: Counter = Counter()
    seen: set[str] = set()
    done = attempts = 0
    for s in candidates(p, ctx.seed):
        if done >= ctx.per_pipeline or attempts >= 4 * ctx.per_pipeline + 2:
            break
        attempts += 1
        sh = s.content_hash()
        if sh in seen:
            stats["duplicates"] += 1
            continue
        seen.add(sh)
        if sh in failed:
            stats["known_failures"] += 1
            continue
        m = api.measure(p, s, runner, db, **ctx.job)
        if ctx.careful and m.ok and m.verified and not m.cached and m.median_ms:
            m = careful_label(p, s, runner, db, m, ctx.job)
        if not (m.ok and m.verified):
            stats["failed"] += 1
            continue
        done += 1
        stats["cached" if m.cached else "measured"] += 1
        if not _has_features(db, ph, sh):
            store_features(db, sample_of(p, s, m.median_ms or float("nan")))
    stats["samples"] += done
    return stats


def generate(
    db_path: str | Path,
    n_pipelines: int,
    per_pipeline: int,
    seed: int = 0,
    workers: int = 1,
    *,
    with_zoo: bool = True,
    max_stages: int = 8,
    size: str = "small",
    threads: int | None = None,
    job_options: dict[str, Any] | None = None,
    progress: Callable[[int, int, dict[str, int]], None] | None = None,
    runner: MeasureRunner | None = None,
    careful: bool = False,
) -> dict[str, Any]:
    """Measure `per_pipeline` schedules of each dataset pipeline into the database at `db_path`.

    `workers` Runner processes are driven from a thread pool, one pipeline at a time each
    (so a worker's reference cache hits); each gets `threads` Halide threads (default: the
    cores divided among the workers). Parallel workers share the machine, so their timings
    disturb each other: use 1 worker for the cleanest data. With `runner` (a cluster's,
    engine/cluster; the caller closes it) the `workers` threads all send their jobs through
    it, with its threads; each result is stored as it arrives either way. `careful`: each new
    label is re-measured as `careful_label` says (about 3x the time; the labels' noise
    ceiling, `costmodel noise --protocol careful`, is higher)."""
    t0 = time.time()
    pipes = dataset_pipelines(n_pipelines, seed, with_zoo, max_stages, size)
    ctx = _Ctx(
        Path(db_path), per_pipeline, seed, runner.threads if runner else threads or max(1, default_threads() // max(1, workers)),
        {**JOB_OPTIONS, **(job_options or {})}, threading.local(), [], threading.Lock(), runner, careful,
    )  # fmt: skip
    check_clock(ctx.job.get("clock", "wall"), ctx.threads)
    total: Counter = Counter()
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
            # Several workers: the costliest pipelines (by flops) first, so that the last ones to
            # finish are small and no worker or node idles long while one finishes its schedules.
            order = sorted(pipes, key=lambda t: -t[0].flops()) if workers > 1 else pipes
            for k, st in enumerate(ex.map(lambda t: _one_pipeline(ctx, *t), order), start=1):
                total.update(st)
                if progress is not None:
                    progress(k, len(pipes), dict(total))
    finally:
        for r in ctx.runners:
            r.close()
    return {"db": str(db_path), "pipelines": len(pipes), "threads": ctx.threads, "seconds": round(time.time() - t0, 2), **dict(total)}


# --- relabelling ----------------------------------------------------------------------------
RELABEL_REMEASURE = 0.1  # |log| disagreement of a label's passes that earns one more measurement


def relabel(
    db_path: str | Path,
    runner: MeasureRunner,
    pipelines: Sequence[str] | None = None,
    *,
    passes: int = 1,
    remeasure_above: float = RELABEL_REMEASURE,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Measure the stored labels of `runner`'s machine again (of `pipelines`: names or hashes;
    default all) in `passes` more passes, each over every schedule of every pipeline in a new
    random order, so that a change of the machine's load over the minutes of measuring lands
    on all of them alike (on a pipeline's training and held-out schedules, which are split
    afterwards), not on the ones measured last. A label whose pass medians disagree by more
    than `remeasure_above` in log time gets one more measurement. The stored label becomes
    the fastest of its pass medians (interference only ever slows a run: the fastest median
    is the least disturbed), `round_medians_ms` all of them, `iqr_ms` their range (so
    `Sample.spread` and the training weights see the disagreement); each pass is timed with
    the stored record's own clock and job options of the dataset (JOB_OPTIONS)."""
    with Database(db_path) as db:
        rows = db.conn.execute(
            "SELECT m.pipeline_hash, m.schedule_hash, m.json, p.name, p.json, s.json FROM measurements m "
            "JOIN pipelines p ON p.hash = m.pipeline_hash JOIN schedules s ON s.hash = m.schedule_hash "
            "WHERE m.target=? AND m.host=? AND m.threads=? ORDER BY m.pipeline_hash, m.schedule_hash",
            (runner.target, runner.host, runner.threads),
        ).fetchall()
    want = set(pipelines or [])
    items = [r for r in rows if not want or r[0] in want or r[3] in want]
    if not items:
        raise ValueError(
            f"{db_path}: no stored measurements of {', '.join(sorted(want)) or 'any pipeline'} on {runner.host} "
            f"({runner.target}) with {runner.threads} Halide thread{'' if runner.threads == 1 else 's'} (--threads)"
        )
    rng = random.Random(seed)
    medians: dict[tuple[str, str], list[float]] = {(r[0], r[1]): [] for r in items}
    mins: dict[tuple[str, str], list[float]] = {k: [] for k in medians}
    failed: list[str] = []
    t0, load0 = time.time(), os.getloadavg()[0]

    def measure_all(batch: list[Any], done: int, total: int) -> int:
        for ph, sh, mj, name, pj, sj in batch:
            opts = {**JOB_OPTIONS, "clock": json.loads(mj).get("clock", "wall")}
            m = runner.run(Job(json.loads(pj), json.loads(sj), **opts))
            if m.ok and m.verified and m.median_ms:
                medians[(ph, sh)].append(float(m.median_ms))
                mins[(ph, sh)].append(float(m.min_ms or m.median_ms))
            else:
                failed.append(f"{name} {sh}: {m.error_kind}: {m.error}")
            done += 1
            if progress is not None:
                progress(done, total)
        return done

    done = 0
    for _ in range(passes):
        order = list(items)
        rng.shuffle(order)
        done = measure_all(order, done, passes * len(items))
    stored = {(r[0], r[1]): Measurement.from_json(json.loads(r[2])) for r in items}
    for k, old in stored.items():
        medians[k].insert(0, float(old.median_ms or 0.0))
        mins[k].insert(0, float(old.min_ms or old.median_ms or 0.0))
    again = [r for r in items if len(medians[(r[0], r[1])]) >= 2 and log_range(medians[(r[0], r[1])]) > remeasure_above]
    rng.shuffle(again)
    measure_all(again, 0, len(again))
    with Database(db_path) as db:
        for k, old in stored.items():
            ms = [x for x in medians[k] if x > 0]
            best = min(ms)
            db.record(dataclasses.replace(
                old, median_ms=best, min_ms=min(x for x in mins[k] if x > 0), round_medians_ms=ms,
                iqr_ms=best * (math.exp(log_range(ms)) - 1.0), created=time.time(),
            ))  # fmt: skip
    ranges = [log_range(v) for v in medians.values() if len(v) >= 2]
    return {
        "db": str(db_path), "labels": len(items), "pipelines": len({r[0] for r in items}), "passes": passes,
        "remeasured": len(again), "failed": failed, "median_pass_log_range": float(np.median(ranges)) if ranges else None,
        "p90_pass_log_range": float(np.quantile(ranges, 0.9)) if ranges else None, "host": runner.host, "target": runner.target,
        "threads": runner.threads, "load_before": load0, "load_after": os.getloadavg()[0], "seconds": round(time.time() - t0, 1),
    }  # fmt: skip


# --- loading -------------------------------------------------------------------------------
def environments(db: Database) -> list[tuple[str, str, int, int]]:
    """(target, host, threads, count) of the stored timings, most common first."""
    rows = db.conn.execute("SELECT target, host, threads, COUNT(*) FROM measurements GROUP BY target, host, threads ORDER BY 4 DESC")
    return [tuple(r) for r in rows]


CLOCK_SQL = "COALESCE(json_extract(m.json, '$.clock'), 'wall')"  # a `measurements m` row's clock (older records: wall)


def labels_sql(dataset_only: bool) -> str:
    """FROM / WHERE of the labels `load` reads of one environment (target, host, threads as
    parameters): timings with a schedule (not an autoscheduler's), of the dataset's pipelines
    only with `dataset_only`."""
    sql = (
        "FROM measurements m JOIN pipelines p ON p.hash = m.pipeline_hash JOIN schedules s ON s.hash = m.schedule_hash "
        "WHERE m.target=? AND m.host=? AND m.threads=?"
    )
    return sql + " AND m.pipeline_hash IN (SELECT hash FROM cm_pipelines)" if dataset_only else sql


def label_clocks(db_path: str | Path, target: str, host: str, threads: int, dataset_only: bool = False) -> set[str]:
    """The clocks (measure.CLOCKS) of exactly the labels `load` reads of one environment."""
    with Database(db_path) as db:
        return {r[0] for r in db.conn.execute(f"SELECT DISTINCT {CLOCK_SQL} {labels_sql(dataset_only)}", (target, host, threads))}


def load(
    db_path: str | Path,
    *,
    target: str | None = None,
    host: str | None = None,
    threads: int | None = None,
    dataset_only: bool = False,
    label: str = DEFAULT_LABEL,
    clock: str | None = None,
) -> list[Sample]:
    """Every stored timing with a schedule (not an autoscheduler's) of one environment
    (target, host, threads: by default the most common one), with its features; each
    sample's label of kind `label` (LABELS), its spread the run times' IQR over their median.
    Timings of one clock (measure.CLOCKS: `clock`, by default the only one stored; labels of
    two clocks are never mixed silently: a ValueError names them)."""
    label_expr = label_sql(label)
    with Database(db_path) as db:
        want = (target, host, threads)
        envs = [e for e in environments(db) if all(w is None or w == v for w, v in zip(want, e[:3]))]
        if not envs:
            return []
        target, host, threads = envs[0][:3]
        # The clocks are those of exactly the rows loaded (not autoscheduler records or, with
        # dataset_only, other pipelines'), so a selection of one clock is never refused.
        rows_sql = labels_sql(dataset_only)
        q = (
            f"SELECT m.pipeline_hash, m.schedule_hash, {label_expr}, p.name, p.json, s.json, "
            f"COALESCE(json_extract(m.json, '$.iqr_ms') / m.median_ms, 0.0) {rows_sql}"
        )
        args: tuple[Any, ...] = (target, host, threads)
        clocks = [r[0] for r in db.conn.execute(f"SELECT DISTINCT {CLOCK_SQL} {rows_sql}", args)]
        if clock is None and len(clocks) > 1:
            raise ValueError(f"database {db_path}: labels timed by {' and '.join(sorted(clocks))} clocks on {host}: choose one (--clock)")
        if clock is not None:
            q, args = q + f" AND {CLOCK_SQL}=?", (*args, clock)
        rows = db.conn.execute(q + " ORDER BY m.pipeline_hash, m.schedule_hash", args).fetchall()
        feats = {
            (r[0], r[1]): r[2:]
            for r in db.conn.execute(
                "SELECT pipeline_hash, schedule_hash, nodes, edge_index, edges FROM cm_features WHERE version=?", (F.VERSION,)
            )
        }
        pipes: dict[str, Pipeline] = {}
        stale: set[str] = set()
        out: list[Sample] = []
        for ph, sh, ms, name, pjson, sjson, spread in rows:
            if (ph, sh) in feats:
                x, ei, ef = (_array(b) for b in feats[(ph, sh)])
                out.append(Sample(ph, name, sh, float(ms), x, ei, ef, float(spread)))
                continue
            if ph in stale:
                continue
            if ph not in pipes:
                pipes[ph] = Pipeline.from_json(json.loads(pjson))
                if pipes[ph].content_hash() != ph:
                    # Stored by a build that hashed differently: its timings cannot be tied to
                    # this pipeline for sure, so they are left out (never attributed to it).
                    now = pipes[ph].content_hash()
                    print(f"database {db_path}: pipeline {name} stored under {ph} hashes to {now}; skipped", file=sys.stderr)
                    stale.add(ph)
                    continue
            smp = sample_of(pipes[ph], Schedule.from_json(json.loads(sjson)), float(ms), spread=float(spread))
            if smp.schedule_hash != sh:
                raise ValueError(f"database {db_path}: schedule stored under {sh} hashes to {smp.schedule_hash}")
            store_features(db, smp)
            out.append(smp)
        return out


def split(
    samples: list[Sample], holdout_pipelines: float = 0.2, holdout_schedules: float = 0.2, seed: int = 0
) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """(train, held-out schedules of seen pipelines, held-out pipelines): whole pipelines
    are held out by hash, so no schedule of a held-out pipeline is ever trained on."""
    by: dict[str, list[Sample]] = {}
    for smp in samples:
        by.setdefault(smp.pipeline_hash, []).append(smp)
    rng = random.Random(seed)
    hashes = sorted(by)
    rng.shuffle(hashes)
    n_out = int(round(holdout_pipelines * len(hashes))) if len(hashes) > 1 else 0
    unseen = [s for h in hashes[:n_out] for s in by[h]]
    train: list[Sample] = []
    seen: list[Sample] = []
    for h in sorted(hashes[n_out:]):
        grp = sorted(by[h], key=lambda s: s.schedule_hash)
        rng.shuffle(grp)
        k = int(holdout_schedules * len(grp)) if len(grp) >= 4 else 0
        seen += grp[:k]
        train += grp[k:]
    return train, seen, unseen
