"""Tuning records: each task's best verified schedule, in the measurement database (table
`tuning_records` of engine/database.py), keyed by task (its canonical pipeline hash),
Halide target, host fingerprint and thread count. Re-tuning a model resumes from them, and
another model with the same tasks starts from them; `similar` finds records of tasks with
the same operators (other shapes) as starting points."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ..database import Database
from ..schedule import Schedule, ScheduleError


@dataclass(frozen=True)
class Record:
    task_key: str
    target: str
    host: str
    threads: int
    signature: str
    best_ms: float
    trials: int
    schedule: Schedule


@dataclass(frozen=True)
class Where:
    """What a record is measured on (a cluster runner's nodes, or this machine)."""

    target: str
    host: str
    threads: int


def _record(row: tuple) -> Record | None:
    try:
        sched = Schedule.from_json(json.loads(row[8]))
    except (ScheduleError, ValueError):  # a record another build wrote: ignored, never fatal
        return None
    return Record(row[0], row[1], row[2], int(row[3]), row[4], float(row[5]), int(row[6]), sched)


def load(db: Database, task_key: str, where: Where) -> Record | None:
    row = db.conn.execute(
        "SELECT * FROM tuning_records WHERE task_key=? AND target=? AND host=? AND threads=?",
        (task_key, where.target, where.host, where.threads),
    ).fetchone()
    return _record(row) if row else None


def similar(db: Database, signature: str, where: Where, exclude: str, limit: int = 4) -> list[Record]:
    """Records of other tasks with the same operators (`signature`), fastest first."""
    rows = db.conn.execute(
        "SELECT * FROM tuning_records WHERE signature=? AND target=? AND host=? AND threads=? AND task_key<>? "
        "ORDER BY updated DESC LIMIT ?",
        (signature, where.target, where.host, where.threads, exclude, limit),
    ).fetchall()
    return [r for r in map(_record, rows) if r is not None]


def save(db: Database, task_key: str, where: Where, signature: str, best_ms: float, trials: int, sched: Schedule) -> None:
    """Store a task's best (replacing an older record: the caller keeps the better one)."""
    with db.conn:
        db.conn.execute(
            "INSERT OR REPLACE INTO tuning_records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (task_key, where.target, where.host, where.threads, signature, best_ms, trials, time.time(), json.dumps(sched.to_json())),
        )
