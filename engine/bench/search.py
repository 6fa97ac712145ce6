"""`bench search`: every search strategy and every Halide autoscheduler on every zoo
pipeline, in the same run on the same machine.

Per pipeline: each autoscheduler runs once (its search time is part of its result); each
strategy searches with a wall budget of Adams2019's search time plus `--extra-s` seconds
of measurement (the issue's rule) unless `--budget-s` is given; then every result (the
autoschedulers' and each strategy's best schedule) is measured again in interleaved rounds
(rounds outside, variants inside, so all see the same machine load) and the median of the
round medians is the figure. The summary is the geometric mean speedup of each strategy
over Adams2019 and over Mullapudi2016, with every pipeline where a strategy loses listed.

With `zero_measure`, zero-measurement greedy (`greedy0`: the offline value function alone,
from an empty schedule, nothing measured while it searches) joins as a variant: its search
seconds against Adams2019's (which also schedules without measuring), and its schedule timed
in the same interleaved rounds as everything else. `greedy_v` (a strategy name here) is the
measuring greedy search seeded by that schedule instead of the heuristic's.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

from .. import api, zoo
from ..cluster import ClusterSpec, make_runner
from ..costmodel import model_by_name
from ..halide_backend import AUTOSCHEDULERS
from ..measure import Measurement, MeasureRunner
from ..schedule import Schedule
from .core import geomean, median_cell


def _log(msg: str) -> None:
    print(f"[bench search] {msg}", file=sys.stderr, flush=True)


def _verified_row(p: Any, ms: list[Measurement]) -> dict[str, Any]:
    """bench core's cell (median of round medians); an unverified result counts as failed."""
    cell = median_cell(p, ms)
    return cell if not cell["ok"] or cell["verified"] else {"ok": False, "error": "not verified"}


ZERO = "greedy0"  # zero-measurement greedy's column
ZERO_V = "greedy0_v"  # the earlier form (V alone, no capacity-traffic term, beam 3; search/reuse.py): with zero_baseline


def _zero_one(p: Any, seed: int, reuse: bool = True) -> tuple[dict[str, Any], Schedule]:
    from ..search.greedy import zero_measure_search  # noqa: PLC0415
    from ..search.value_offline import BEAM, BEAM_V_ALONE  # noqa: PLC0415

    z = zero_measure_search(p, seed, reuse=reuse, beam=BEAM if reuse else BEAM_V_ALONE)
    label = ZERO if reuse else ZERO_V
    _log(f"{p.name} {label}: decided in {z.search_s:.2f} s by V alone (V predicted {z.value_ms:.3f} ms), 0 measurements")
    return {"search_s": z.search_s, "model_s": z.search_s, "trials": 0, "value_predicted_ms": z.value_ms, "value": z.value_name}, z.schedule


def _search_one(
    p: Any, strategy: str, budget_s: float, trials: int, seed: int, model: str, runner: MeasureRunner
) -> tuple[dict[str, Any], Schedule | None]:
    from ..search import Budget, run_search  # noqa: PLC0415

    res = run_search(p, strategy, Budget(trials, budget_s), seed, model=model_by_name(model), runner=runner, db=None)
    info = {
        "search_s": res.search_s, "model_s": res.model_s, "measure_s": res.measure_s, "trials": len(res.trials),
        "failed_trials": sum(1 for t in res.trials if not t.verified), "seen": res.seen, "budget_s": budget_s,
        "search_best_ms": res.best_ms, "model": res.model,
    }  # fmt: skip
    _log(f"{p.name} {strategy}: best {res.best_ms} ms in {res.search_s:.1f} s ({res.model_s:.1f} s model), {len(res.trials)} trials")
    return info, res.best


def bench_search(
    pipelines: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
    size: str = "full",
    budget_s: float | None = None,
    extra_s: float = 60.0,
    trials: int = 24,
    seed: int = 0,
    model: str = "default",
    repeats: int = 3,
    min_time_s: float = 0.3,
    cluster: ClusterSpec | str = "local",
    zero_measure: bool = False,
    zero_baseline: bool = False,
) -> dict[str, Any]:
    """`strategies` (default: every one) against Halide's autoschedulers on the zoo
    `pipelines` (default: all) at `size`: each search with `trials` measurements at most,
    cost model `model`, and `budget_s` wall seconds (None: Adams2019's search time plus
    `extra_s`); then `repeats` interleaved rounds of >= `min_time_s` seconds per result.
    `cluster` (engine/cluster): where everything is measured (one host kind: the "machine").
    `zero_measure`: zero-measurement greedy beside them (see the module doc); `zero_baseline`:
    also its V-alone form (no capacity-traffic term, column greedy0_v), for a same-run before/after."""
    from ..search import STRATEGIES, VARIANTS  # noqa: PLC0415

    names = list(pipelines) if pipelines is not None else zoo.names()
    strats = list(strategies) if strategies is not None else sorted(STRATEGIES)
    for s in strats:
        if s not in STRATEGIES and s not in VARIANTS:
            raise ValueError(f"unknown strategy {s!r}; expected one of {', '.join(sorted(STRATEGIES | VARIANTS))}")
    if zero_measure:
        from ..search.value_offline import shipped_value  # noqa: PLC0415

        shipped_value()  # before any measurement: a missing or broken value function fails now
    try:
        model_by_name(model)  # before any measurement: a model that is not trained fails now
    except ValueError as exc:
        raise api.InputError(str(exc)) from None
    opts: dict[str, Any] = {"min_time_s": min_time_s, "timeout_s": 900.0, "profile": False}
    t_start = time.time()
    cols = strats + ([ZERO] if zero_measure else []) + ([ZERO_V] if zero_measure and zero_baseline else [])
    results: dict[str, Any] = {}
    runner: MeasureRunner = make_runner(cluster)
    try:
        for name in names:
            p = zoo.get(name, size)
            row: dict[str, Any] = {"stages": len(p.stages), "gflop": p.flops() / 1e9}
            variants: dict[str, tuple[Schedule | None, str | None]] = {}
            for a in AUTOSCHEDULERS:
                m = api.measure(p, None, runner, None, autoscheduler=a, **opts)
                row[a] = {"search_s": m.search_s}
                variants[a] = (None, a)
                _log(f"{name} {a}: " + (f"{m.median_ms:.3f} ms, search {m.search_s:.1f} s" if m.ok else f"FAILED {m.error}"))
            adams_s = row["Adams2019"]["search_s"] or 0.0
            budget = budget_s if budget_s is not None else adams_s + extra_s
            if zero_measure:
                row[ZERO], zs = _zero_one(p, seed)
                variants[ZERO] = (zs, None)
                if zero_baseline:
                    row[ZERO_V], zv = _zero_one(p, seed, reuse=False)
                    variants[ZERO_V] = (zv, None)
            for s in strats:
                row[s], best = _search_one(p, s, budget, trials, seed, model, runner)
                if best is not None:
                    variants[s] = (best, None)
            runs: dict[str, list[Measurement]] = {v: [] for v in variants}
            for _ in range(repeats):
                for label, (sched, auto) in variants.items():
                    runs[label].append(api.measure(p, sched, runner, None, autoscheduler=auto, **opts))
            for label, ms in runs.items():
                row[label] = {**_verified_row(p, ms), **row[label]}  # the search's own figures stay
            for s in cols:
                for a in ("Adams2019", "Mullapudi2016"):
                    if row[s].get("ok") and row[a].get("ok"):
                        row[s][f"speedup_over_{a.lower()}"] = row[a]["median_ms"] / row[s]["median_ms"]
                if adams_s > 0:
                    row[s]["search_s_over_adams2019"] = row[s]["search_s"] / adams_s
            results[name] = row
            _log(f"{name}: " + ", ".join(f"{k} {v.get('median_ms', float('nan')):.3f}" for k, v in row.items() if isinstance(v, dict)))
        machine = {"host": runner.host, "cores": os.cpu_count(), "target": runner.target, "python": platform.python_version()}
        if str(cluster) != "local":
            machine["cluster"] = str(cluster)
    finally:
        runner.close()
    summary = {}
    for s in cols:
        over = {
            a: [r[s][f"speedup_over_{a.lower()}"] for r in results.values() if f"speedup_over_{a.lower()}" in r[s]]
            for a in ("Adams2019", "Mullapudi2016")
        }
        summary[s] = {
            "geomean_speedup_over_adams2019": geomean(over["Adams2019"]),
            "geomean_speedup_over_mullapudi2016": geomean(over["Mullapudi2016"]),
            "loses_to_adams2019": [n for n, r in results.items() if r[s].get("speedup_over_adams2019", 0.0) < 1.0],
            "max_model_s": max((r[s]["model_s"] for r in results.values()), default=None),
            "max_search_s": max((r[s]["search_s"] for r in results.values()), default=None),
            "total_search_s": sum(r[s]["search_s"] for r in results.values()),
            "total_adams2019_search_s": sum(r["Adams2019"]["search_s"] or 0.0 for r in results.values()),
        }
    return {
        "machine": machine,
        "size": size, "repeats": repeats, "trials": trials, "seed": seed, "model": model,
        "budget": f"{budget_s} s" if budget_s is not None else f"Adams2019 search time + {extra_s} s",
        "wall_s": time.time() - t_start, "summary": summary, "pipelines": results, "table": _table(results, cols, summary),
    }  # fmt: skip


def _fmt(cell: dict[str, Any]) -> str:
    return f"{cell['median_ms']:.3f}" if cell.get("ok") else "FAIL"


def _table(results: dict[str, Any], strategies: list[str], summary: dict[str, Any]) -> str:
    autos = list(AUTOSCHEDULERS)
    cols = ["pipeline"] + [f"{a} ms (search s)" for a in autos] + [f"{s} ms (search s)" for s in strategies]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        cells = [name] + [f"{_fmt(r[a])} ({r[a]['search_s'] or 0:.1f})" for a in autos]
        cells += [f"{_fmt(r[s])} ({r[s]['search_s']:.1f})" for s in strategies]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for s, v in summary.items():
        ga, gm = v["geomean_speedup_over_adams2019"], v["geomean_speedup_over_mullapudi2016"]
        lines.append(
            f"{s}: geomean {ga:.2f}x over Adams2019, {gm:.2f}x over Mullapudi2016; loses on {', '.join(v['loses_to_adams2019']) or 'none'}"
            f"; search {v['total_search_s']:.1f} s in all (Adams2019 {v['total_adams2019_search_s']:.1f} s), max {v['max_search_s']:.1f} s"
            if ga and gm
            else f"{s}: no comparable results"
        )
    return "\n".join(lines)
