"""The SQLite store: WAL mode, keyed cache of verified measurements, forced re-measurement."""

import sqlite3

from engine import api, zoo
from engine.database import Database, default_path
from engine.measure import Runner


def test_cache_returns_stored_measurement_without_rerunning(tmp_path):
    p = zoo.get("blur", "small")
    with Runner() as runner, Database(tmp_path / "m.sqlite") as db:
        first = api.measure(p, None, runner, db, min_time_s=0.02)
        assert first.ok and not first.cached
        second = api.measure(p, None, runner, db, min_time_s=0.02)
        assert second.cached and second.median_ms == first.median_ms and second.created == first.created
        forced = api.measure(p, None, runner, db, force=True, min_time_s=0.02)
        assert not forced.cached and forced.created > first.created
        assert db.count() == 1  # same key replaced
        assert [m.schedule_hash for m in db.measurements(p.content_hash())] == [first.schedule_hash]
        other = zoo.get("blur", "full")
        assert db.lookup(other.content_hash(), first.schedule_hash, first.target, first.host, first.threads) is None


def test_wal_mode_and_schema(tmp_path):
    path = tmp_path / "w.sqlite"
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"measurements", "failures", "pipelines", "schedules", "meta"} <= tables


def test_default_path_follows_override(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDULE_EXPLORER_DB", str(tmp_path / "x.sqlite"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("SCHEDULE_EXPLORER_DB")
    assert "schedule-explorer" in str(default_path())
