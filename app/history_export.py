"""The session's measurement history as a table (its CSV export): one row per variant in the
order it appeared, then the baselines that are not variants (Halide's autoschedulers), with
everything a measurement records (time, schedule hash, median, spread, verification, host,
target, threads, ...). Unmeasured variants have their prediction and empty measurement cells."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.measure import Measurement, autoscheduler_of

from .chart_export import Table
from .model.history import SessionHistory

HISTORY_COLUMNS = [
    "variant", "measured_at_utc", "label", "schedule_spec", "schedule_hash", "predicted_ms", "median_ms", "min_ms", "max_ms",
    "iqr_ms", "runs", "rounds", "verified", "ok", "stored_result", "error_kind", "error", "max_abs_err", "max_rel_err",
    "verify_method", "threads", "host", "target", "compile_s", "gflops", "pipeline", "pipeline_hash",
]  # fmt: skip


def _measured_cells(m: Measurement | None) -> list[object]:
    if m is None:
        return [""] * 21
    when = datetime.fromtimestamp(m.created, tz=UTC).isoformat(timespec="seconds")
    return [
        when, m.median_ms, m.min_ms, m.max_ms, m.iqr_ms, m.runs, len(m.round_medians_ms) or "", m.verified, m.ok, m.cached,
        m.error_kind or "", m.error or "", m.max_abs_err, m.max_rel_err, m.verify_method, m.threads, m.host, m.target,
        m.compile_s, m.gflops, m.pipeline,
    ]  # fmt: skip


def history_table(history: SessionHistory) -> Table:
    """Every variant of the session (and every baseline measurement) as HISTORY_COLUMNS rows."""
    rows: list[list[object]] = []
    seen: set[str] = set()
    for v in history.variants:
        m = v.measurement
        cells = _measured_cells(m)
        rows.append([v.number, cells[0], v.label, v.spec, v.hash, v.predicted_ms, *cells[1:], history.pipeline_hash])
        seen.add(v.hash)
    for key, m in history.measurements.items():
        if key in seen:
            continue
        name = autoscheduler_of(key)
        label = f"Halide {name}" if name else "measured outside the session's variants"
        cells = _measured_cells(m)
        rows.append(["", cells[0], label, "", key, None, *cells[1:], history.pipeline_hash])
    return Table(list(HISTORY_COLUMNS), rows)
