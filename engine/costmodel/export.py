"""The dataset as a small shippable file: gzipped JSON lines, no code, no pickle.

`export_dataset` writes the verified timings of one environment (target, host, threads),
or of every environment stored, from a measurement database, with each pipeline's and
schedule's JSON (each timing record names its own environment); `import_dataset`
writes them into a database again, checking every pipeline and schedule against its
content hash (features are recomputed from them on load, so the file stays small and
never goes stale with the feature version). `shipped_db()` is the dataset in
`resources/costmodel/` imported once into the user cache: what `costmodel eval` reads when
it evaluates the shipped models.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from ..database import Database
from ..ir import Pipeline
from ..measure import Measurement
from ..schedule import Schedule, ScheduleError
from . import SHIPPED
from .dataset import environments, labels_sql
from .files import atomic_open, atomic_path

FORMAT = 1
SHIPPED_DATASET = SHIPPED / "dataset.jsonl.gz"


class DatasetFileError(ValueError):
    """A dataset file that is malformed or whose records do not match their hashes."""


def export_dataset(db_path: str | Path, out: str | Path, *, all_environments: bool = False) -> dict[str, Any]:
    """Write the verified timings of the dataset's pipelines: of the most common environment,
    or of every stored one (`all_environments`; loading still takes one at a time)."""
    with Database(db_path) as db:
        envs = environments(db)
        if not envs:
            raise ValueError(f"{db_path}: no measurements to export")
        chosen = [e[:3] for e in envs] if all_environments else [envs[0][:3]]
        pipes = db.conn.execute(
            "SELECT p.hash, p.name, c.origin, c.seed, p.json FROM pipelines p JOIN cm_pipelines c ON c.hash = p.hash ORDER BY p.hash"
        ).fetchall()
        per_env = [
            db.conn.execute(f"SELECT m.json, s.json {labels_sql(True)} ORDER BY m.pipeline_hash, m.schedule_hash", env).fetchall()
            for env in chosen
        ]
    if all_environments:  # environments without a dataset label (app measurements only) are left out
        chosen, per_env = [e for e, r in zip(chosen, per_env) if r], [r for r in per_env if r]
    if not chosen:
        raise ValueError(f"{db_path}: no measurements of dataset pipelines to export")
    rows = [row for r in per_env for row in r]
    header: dict[str, Any] = {"kind": "header", "format": FORMAT, "environment": list(chosen[0])}
    if all_environments:
        header["environments"] = [list(e) for e in chosen]
    # The gzip header names the file (not the temp file it is written as).
    with atomic_open(out, "wb") as raw, io.TextIOWrapper(gzip.GzipFile(Path(out).name, "wb", fileobj=raw), encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for h, name, origin, seed, body in pipes:
            f.write(
                json.dumps({"kind": "pipeline", "hash": h, "name": name, "origin": origin, "seed": seed, "pipeline": json.loads(body)})
                + "\n"
            )
        for mjson, sjson in rows:
            f.write(json.dumps({"kind": "sample", "measurement": json.loads(mjson), "schedule": json.loads(sjson)}) + "\n")
    res: dict[str, Any] = {"out": str(out), "pipelines": len(pipes), "samples": len(rows), "environment": list(chosen[0])}
    if all_environments:
        res["environments"] = [[*e, len(r)] for e, r in zip(chosen, per_env)]  # the samples written of each
    return res


def import_dataset(path: str | Path, db_path: str | Path) -> dict[str, int]:
    """Load a dataset file into the database at `db_path` (every hash checked)."""
    counts = {"pipelines": 0, "samples": 0}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f, Database(db_path) as db:
            header = json.loads(f.readline() or "{}")
            if header.get("kind") != "header" or header.get("format") != FORMAT:
                raise DatasetFileError(f"{path}: not a dataset file of format {FORMAT}")
            for n, line in enumerate(f, start=2):
                rec = json.loads(line)
                if rec["kind"] == "pipeline":
                    p = Pipeline.from_json(rec["pipeline"])
                    if p.content_hash() != rec["hash"]:
                        raise DatasetFileError(f"{path}:{n}: pipeline {rec['name']} hashes to {p.content_hash()}, not {rec['hash']}")
                    db.put_pipeline(rec["hash"], rec["name"], rec["pipeline"])
                    with db.conn:
                        db.conn.execute(
                            "INSERT OR IGNORE INTO cm_pipelines VALUES (?, ?, ?, ?)", (rec["hash"], rec["name"], rec["origin"], rec["seed"])
                        )
                    counts["pipelines"] += 1
                elif rec["kind"] == "sample":
                    m = Measurement.from_json(rec["measurement"])
                    try:
                        sched = Schedule.from_json(rec["schedule"])
                    except ScheduleError as exc:
                        raise DatasetFileError(f"{path}:{n}: {exc}") from None
                    if sched.content_hash() != m.schedule_hash:
                        raise DatasetFileError(f"{path}:{n}: schedule does not hash to {m.schedule_hash}")
                    db.put_schedule(m.schedule_hash, rec["schedule"])
                    db.record(m)
                    counts["samples"] += 1
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError, RecursionError, KeyError, TypeError) as exc:
        raise DatasetFileError(f"{path}: malformed dataset file ({type(exc).__name__}: {exc})") from None
    return counts


def shipped_db(path: Path = SHIPPED_DATASET) -> Path:
    """The shipped dataset as a database in the user cache (imported on first use)."""
    from platformdirs import user_cache_dir  # noqa: PLC0415

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    db = Path(user_cache_dir("schedule-explorer", appauthor=False)) / f"dataset-{digest}.sqlite"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(db) as tmp:  # a half-imported file is never taken for the dataset
            import_dataset(path, tmp)
    return db
