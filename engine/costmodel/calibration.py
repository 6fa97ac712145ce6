"""How far each cost model's predictions are from measurements at the sizes users run.

The training data is random pipelines at small and medium size; `costmodel calibrate`
measures the zoo's pipelines (by default at full size) under their default, hand and
rule-based schedules (verified; stored in and reused from the measurement database) and
reports per model: mean |ln(predicted / measured)| (0.69 = off by 2x on average), the
median predicted/measured ratio, the share within 2x, and pairwise order accuracy among
each pipeline's schedules (does the model rank them as measured).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import api, zoo
from ..database import Database
from ..measure import MeasureRunner
from .base import CostModel
from .evaluate import pairwise_accuracy

SCHEDULES = ("default", "hand", "heuristic")


def calibrate(
    models: Mapping[str, CostModel],
    pipelines: list[str],
    runner: MeasureRunner,
    db: Database | None,
    size: str = "full",
    min_time_s: float = 0.2,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure every (pipeline, schedule) once (or reuse the stored measurement) and compare
    each model's prediction with it."""
    rows: list[dict[str, Any]] = []
    for name in pipelines:
        p = zoo.get(name, size)
        for sname in SCHEDULES:
            row: dict[str, Any] = {"pipeline": name, "schedule": sname}
            rows.append(row)
            try:
                sched = api.load_schedule(p, sname)
            except api.InputError as exc:  # e.g. no hand-written schedule for this pipeline
                row["error"] = str(exc)
                continue
            m = api.measure(p, sched, runner, db, min_time_s=min_time_s, min_runs=3, timeout_s=300.0)
            if not (m.ok and m.verified and m.median_ms):
                row["error"] = m.error or "not verified"
            else:
                row["measured_ms"] = m.median_ms
                row["predicted_ms"] = {k: model.predict(p, sched).total_ms for k, model in models.items()}
            if progress:
                progress(f"{name} {sname}: " + (f"{row['measured_ms']:.3f} ms" if "measured_ms" in row else row["error"]))
    return {"size": size, "rows": rows, "models": {k: summary(rows, k) for k in models}}


def summary(rows: list[dict[str, Any]], model: str) -> dict[str, Any]:
    ok = [r for r in rows if "measured_ms" in r]
    if not ok:
        return {"n": 0}
    true = np.array([r["measured_ms"] for r in ok])
    pred = np.array([max(r["predicted_ms"][model], 1e-9) for r in ok])
    err = np.log(pred / true)
    return {
        "n": len(ok),
        "mean_abs_log_err": float(np.mean(np.abs(err))),
        "median_ratio": float(math.exp(statistics.median(err.tolist()))),
        "within_2x": float(np.mean(np.abs(err) <= math.log(2.0))),
        "order_acc": pairwise_accuracy(pred, true, [r["pipeline"] for r in ok]),
    }


def table(res: dict[str, Any]) -> str:
    lines = [
        f"zoo at {res['size']} size, {len(res['rows'])} schedules measured",
        "| model | mean abs ln error | median pred/measured | within 2x | order accuracy |",
        "|---|---|---|---|---|",
    ]
    for k, s in res["models"].items():
        if s["n"]:
            lines.append(f"| {k} | {s['mean_abs_log_err']:.2f} | {s['median_ratio']:.2f} | {s['within_2x']:.0%} | {s['order_acc']:.2f} |")
    return "\n".join(lines)
