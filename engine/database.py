"""SQLite store (WAL) of verified measurements and of failures, keyed by pipeline hash,
schedule hash, Halide target, host fingerprint and thread count."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .measure import Measurement

SCHEMA_VERSION = 1
ENV_VAR = "SCHEDULE_EXPLORER_DB"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pipelines (
    hash TEXT PRIMARY KEY, name TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schedules (
    hash TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
    pipeline_hash TEXT NOT NULL, schedule_hash TEXT NOT NULL, target TEXT NOT NULL,
    host TEXT NOT NULL, threads INTEGER NOT NULL, median_ms REAL NOT NULL,
    created REAL NOT NULL, json TEXT NOT NULL,
    PRIMARY KEY (pipeline_hash, schedule_hash, target, host, threads));
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT, pipeline_hash TEXT NOT NULL,
    schedule_hash TEXT NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_by_pipeline ON measurements (pipeline_hash);
-- The cost-model dataset (engine/costmodel/dataset.py): which pipelines were generated for
-- it, and each sample's features beside its timing (recomputed when the version changes).
CREATE TABLE IF NOT EXISTS cm_pipelines (
    hash TEXT PRIMARY KEY, name TEXT NOT NULL, origin TEXT NOT NULL, seed INTEGER);
CREATE TABLE IF NOT EXISTS cm_features (
    pipeline_hash TEXT NOT NULL, schedule_hash TEXT NOT NULL, version INTEGER NOT NULL,
    nodes BLOB NOT NULL, edge_index BLOB NOT NULL, edges BLOB NOT NULL,
    PRIMARY KEY (pipeline_hash, schedule_hash));
"""


def default_path() -> Path:
    """$SCHEDULE_EXPLORER_DB, else the platform's user-data directory."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    from platformdirs import user_data_dir  # noqa: PLC0415

    return Path(user_data_dir("schedule-explorer", appauthor=False)) / "measurements.sqlite"


class Database:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self.conn:
            self.conn.executescript(_SCHEMA)
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        version = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        if int(version) != SCHEMA_VERSION:
            raise RuntimeError(f"{self.path}: database schema version {version}, this build reads {SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- writes ------------------------------------------------------------------------
    def put_pipeline(self, h: str, name: str, body: dict[str, Any]) -> None:
        with self.conn:
            self.conn.execute("INSERT OR IGNORE INTO pipelines VALUES (?, ?, ?)", (h, name, json.dumps(body)))

    def put_schedule(self, h: str, body: dict[str, Any]) -> None:
        with self.conn:
            self.conn.execute("INSERT OR IGNORE INTO schedules VALUES (?, ?)", (h, json.dumps(body)))

    def record(self, m: Measurement) -> None:
        """Store a measurement: verified ones as timings, everything else as a failure."""
        with self.conn:
            if m.ok and m.verified and m.median_ms is not None:
                self.conn.execute(
                    "INSERT OR REPLACE INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (m.pipeline_hash, m.schedule_hash, m.target, m.host, m.threads, m.median_ms, m.created, json.dumps(m.to_json())),
                )
            else:
                self.conn.execute(
                    "INSERT INTO failures (pipeline_hash, schedule_hash, kind, message, created) VALUES (?, ?, ?, ?, ?)",
                    (m.pipeline_hash, m.schedule_hash, m.error_kind or "unverified", m.error or "not verified", time.time()),
                )

    # --- reads ---------------------------------------------------------------------------
    def lookup(self, pipeline_hash: str, schedule_hash: str, target: str, host: str, threads: int) -> Measurement | None:
        row = self.conn.execute(
            "SELECT json FROM measurements WHERE pipeline_hash=? AND schedule_hash=? AND target=? AND host=? AND threads=?",
            (pipeline_hash, schedule_hash, target, host, threads),
        ).fetchone()
        if row is None:
            return None
        m = Measurement.from_json(json.loads(row[0]))
        m.cached = True
        return m

    def measurements(self, pipeline_hash: str | None = None) -> Iterator[Measurement]:
        q, args = "SELECT json FROM measurements", ()
        if pipeline_hash:
            q, args = q + " WHERE pipeline_hash=?", (pipeline_hash,)
        for (body,) in self.conn.execute(q + " ORDER BY created", args):
            yield Measurement.from_json(json.loads(body))

    def failures(self, pipeline_hash: str | None = None) -> list[dict[str, Any]]:
        q, args = "SELECT pipeline_hash, schedule_hash, kind, message, created FROM failures", ()
        if pipeline_hash:
            q, args = q + " WHERE pipeline_hash=?", (pipeline_hash,)
        cols = ("pipeline_hash", "schedule_hash", "kind", "message", "created")
        return [dict(zip(cols, r)) for r in self.conn.execute(q + " ORDER BY id", args)]

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
