"""SQLite store (WAL) of verified measurements and of failures, keyed by pipeline hash,
schedule hash, Halide target, host fingerprint and thread count."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .measure import Measurement

SCHEMA_VERSION = 1  # also the file's `PRAGMA user_version`; a newer one is refused
ENV_VAR = "SCHEDULE_EXPLORER_DB"
_MAGIC = b"SQLite format 3\x00"


class DatabaseError(ValueError):
    """The measurement database cannot be used: the message names the file and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"database {path}: {reason}")
        self.path, self.reason = path, reason


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
-- Whole-model tuning (engine/tuning/records.py): each task's best verified schedule so far,
-- per target, host and threads, so re-tuning resumes and other models start from it.
CREATE TABLE IF NOT EXISTS tuning_records (
    task_key TEXT NOT NULL, target TEXT NOT NULL, host TEXT NOT NULL, threads INTEGER NOT NULL,
    signature TEXT NOT NULL, best_ms REAL NOT NULL, trials INTEGER NOT NULL, updated REAL NOT NULL,
    schedule TEXT NOT NULL, PRIMARY KEY (task_key, target, host, threads));
"""


def default_path() -> Path:
    """$SCHEDULE_EXPLORER_DB, else the platform's user-data directory."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    from platformdirs import user_data_dir  # noqa: PLC0415

    return Path(user_data_dir("schedule-explorer", appauthor=False)) / "measurements.sqlite"


def _sqlite_reason(exc: sqlite3.Error) -> str:
    msg = str(exc)
    if "readonly" in msg:
        return "cannot be written (read-only file or directory)"
    if "unable to open" in msg:
        return "cannot be opened (missing or read-only directory, or not a file)"
    if "not a database" in msg or "malformed" in msg:
        return f"not a usable SQLite database ({msg}; truncated or corrupted?)"
    return f"SQLite error: {msg}"


class _Cursor:
    """A cursor whose SQLite errors are `DatabaseError`s (rows are read lazily: a damaged
    page can first show while fetching)."""

    def __init__(self, cur: sqlite3.Cursor, path: Path) -> None:
        self._cur, self._path = cur, path

    def fetchone(self) -> Any:
        with _errors(self._path):
            return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        with _errors(self._path):
            return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class _Connection:
    """The part of sqlite3.Connection the engine uses, with every SQLite error raised as a
    `DatabaseError` naming the file (callers such as the cost-model dataset query directly)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn, self._path = conn, path

    def execute(self, sql: str, params: Any = ()) -> _Cursor:
        with _errors(self._path):
            return _Cursor(self._conn.execute(sql, params), self._path)

    def commit(self) -> None:
        with _errors(self._path):
            self._conn.commit()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: Any) -> None:
        with _errors(self._path):
            self._conn.__exit__(*exc)


@contextmanager
def _errors(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise DatabaseError(path, _sqlite_reason(exc)) from None


def _check_file(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that is not a regular file or whose first
    bytes are not an SQLite database (a truncated file: shorter than its header says)."""
    if path.parent.exists() and not path.parent.is_dir():
        raise DatabaseError(path, f"{path.parent} is not a directory")
    # SQLite writes FILE-wal and FILE-shm beside the file: the directory must be writable too
    # (checked first: SQLite would leave those files behind when the database itself is read-only).
    if path.parent.is_dir() and not os.access(path.parent, os.W_OK | os.X_OK):
        raise DatabaseError(path, f"cannot be written (directory {path.parent} is read-only)")
    if not path.exists():
        return
    if path.is_dir():
        raise DatabaseError(path, "is a directory, not a database file")
    if not path.is_file():
        raise DatabaseError(path, "is not a regular file")
    if not os.access(path, os.R_OK | os.W_OK):
        raise DatabaseError(path, "cannot be written (read-only file)")
    try:
        with path.open("rb") as f:
            head = f.read(100)
        size = path.stat().st_size
    except OSError as exc:
        raise DatabaseError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not head:
        return  # an empty file is an empty database
    if len(head) < 100 or not head.startswith(_MAGIC):
        raise DatabaseError(path, "not an SQLite database (wrong header)")
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        return  # pages may still live in the write-ahead log: SQLite itself judges the file
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages, changed, valid_for = (int.from_bytes(head[a : a + 4], "big") for a in (28, 24, 92))
    if page < 512 or page & (page - 1):
        raise DatabaseError(path, f"not an SQLite database (page size {page} in its header)")
    # The header's page count is current when its change counter matches (SQLite >= 3.7.0).
    if size % page or (changed == valid_for and size < pages * page):
        raise DatabaseError(path, f"truncated ({size} bytes; its header says {pages} pages of {page} bytes)")


class Database:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        _check_file(self.path)
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(self.path, f"its directory cannot be created ({exc.strerror or exc})") from None
        try:
            self.conn = _Connection(self._open(), self.path)
        except DatabaseError:
            if created:  # a bad place for a database leaves nothing behind
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            raise

    def _open(self) -> sqlite3.Connection:
        with _errors(self.path):
            conn = sqlite3.connect(self.path, timeout=30)
        try:
            with _errors(self.path):
                stamp = "" if self._check_version(conn) == SCHEMA_VERSION else f"PRAGMA user_version = {SCHEMA_VERSION};"
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                # BEGIN IMMEDIATE takes the write lock: a read-only file fails here, not after a measurement.
                conn.executescript(
                    f"BEGIN IMMEDIATE; {_SCHEMA}; INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}'); {stamp} COMMIT;"
                )
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_version(self, conn: sqlite3.Connection) -> int:
        """The file's `user_version` (0: new, or from before it was set); a newer schema or another
        program's database is refused."""
        stamped = version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and "meta" in tables:  # written before user_version was set: its meta row says
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row and str(row[0]).isdigit() else 0
        if version > SCHEMA_VERSION:
            raise DatabaseError(self.path, f"schema version {version} is newer than this build reads ({SCHEMA_VERSION}); update it")
        other = sorted(tables - {"sqlite_sequence"})
        if version == 0 and other:
            raise DatabaseError(self.path, f"not a Schedule Explorer database (it has other tables: {', '.join(other[:5])})")
        return stamped

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

    def forget(self, pipeline_hash: str) -> tuple[int, int]:
        """Remove every stored measurement and failure of one pipeline (all schedules,
        targets, hosts and thread counts; other pipelines' are kept). Returns how many
        measurements and failures were removed."""
        with self.conn:
            self.conn.execute("DELETE FROM measurements WHERE pipeline_hash=?", (pipeline_hash,))
            gone = int(self.conn.execute("SELECT changes()").fetchone()[0])
            self.conn.execute("DELETE FROM failures WHERE pipeline_hash=?", (pipeline_hash,))
            failed = int(self.conn.execute("SELECT changes()").fetchone()[0])
        return gone, failed

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
        args: tuple[str, ...]
        q, args = "SELECT json FROM measurements", ()
        if pipeline_hash:
            q, args = q + " WHERE pipeline_hash=?", (pipeline_hash,)
        for (body,) in self.conn.execute(q + " ORDER BY created", args):
            yield Measurement.from_json(json.loads(body))

    def failures(self, pipeline_hash: str | None = None) -> list[dict[str, Any]]:
        args: tuple[str, ...]
        q, args = "SELECT pipeline_hash, schedule_hash, kind, message, created FROM failures", ()
        if pipeline_hash:
            q, args = q + " WHERE pipeline_hash=?", (pipeline_hash,)
        cols = ("pipeline_hash", "schedule_hash", "kind", "message", "created")
        return [dict(zip(cols, r)) for r in self.conn.execute(q + " ORDER BY id", args)]

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
