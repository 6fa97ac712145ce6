"""`bench strategies`: search strategies compared at equal budgets, as best-so-far curves.

Two objectives, every strategy from the same start (the heuristic seed is every strategy's
first evaluation), over several seeds:

- the cost model (`evals` evaluations per run): the objective is the model's prediction;
  an evaluation is one distinct schedule predicted (a strategy's screening predictions
  count: at this objective, predicting is evaluating). The model is wrapped so that it
  counts and stops the strategy at the budget; a strategy's "measurement" is the same
  prediction (no hardware). Each run's best schedule is then measured once on hardware,
  verified: its final verified time.
- the hardware (`measurements` per run): run_search with the real runner and the model as
  the strategies' guide; best-so-far of verified measurements against measurements and
  against the predictions made (evaluations); then every run's best is measured again in
  `repeats` interleaved rounds (median of round medians: its final verified time).

Per pipeline, objective and strategy: the curves' median and interquartile range across
seeds on a grid, each run's final best, and the strategy with the lowest median final best.
The summary counts the pipelines where LaMCTS or PlaLaM has the lowest median of all.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import api, zoo
from ..costmodel import CostModel, Prediction, model_by_name
from ..ir import Pipeline
from ..loopnest import LoopNest
from ..measure import Measurement, MeasureRunner, Runner, machine_record
from ..schedule import Schedule

LEARNED = ("lamcts", "plalam")  # the strategies the target is about
DEFAULT_STRATEGIES = ("random", "evolution", "cmaes", "lamcts", "plalam")
GRID_POINTS = 40


def _log(msg: str) -> None:
    print(f"[bench strategies] {msg}", file=sys.stderr, flush=True)


class ModelObjective:
    """A cost model that records every distinct schedule it predicts (in order: the run's
    evaluations) and sets `cancel` once `budget` of them are made (the strategy then stops
    at its next check)."""

    def __init__(self, base: CostModel, budget: int, cancel: threading.Event) -> None:
        self.base, self.budget, self.cancel = base, budget, cancel
        self.name = f"{base.name} (as objective)"
        self.ms: dict[str, float] = {}  # schedule hash -> predicted ms
        self.values: list[float] = []  # predicted ms per evaluation, in order
        self.best: tuple[float, Schedule] | None = None  # best within the budget

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        preds = self.base.predict_many(p, schedules, nests)
        for s, pr in zip(schedules, preds, strict=True):
            h = s.content_hash()
            if h not in self.ms:
                ms = float(pr.total_ms) if math.isfinite(pr.total_ms) and pr.total_ms > 0 else math.inf
                self.ms[h] = ms
                if len(self.values) < self.budget:
                    self.values.append(ms)
                    if self.best is None or ms < self.best[0]:
                        self.best = (ms, s)
        if len(self.values) >= self.budget:
            self.cancel.set()
        return preds

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        return self.predict_many(p, [s], [nest] if nest is not None else None)[0]

    def measure(self, p: Pipeline, s: Schedule) -> Measurement:
        """The strategy's 'measurement' at this objective: the prediction (no hardware)."""
        h = s.content_hash()
        ms = self.ms[h] if h in self.ms else float(self.predict(p, s).total_ms)
        ok = math.isfinite(ms)
        return Measurement(p.name, p.content_hash(), h, ok, ok, None if ok else "unpredictable", median_ms=ms if ok else None)


def best_so_far(values: Sequence[float | None]) -> list[float]:
    """Running minimum (None and inf: nothing better yet; inf until the first value)."""
    out, best = [], math.inf
    for v in values:
        if v is not None and v < best:
            best = v
        out.append(best)
    return out


def grid(n: int, points: int = GRID_POINTS) -> list[int]:
    """About `points` evaluation counts from 1 to n, denser at the start (geometric)."""
    return sorted({max(1, min(n, round(v))) for v in np.geomspace(1, n, points)} | {n})


def band(curves: list[list[float]], xs: list[int]) -> dict[str, list[Any]]:
    """Median and quartiles across runs of the curves sampled at counts `xs` (1-based: a
    curve's value after x evaluations; a run that stopped earlier keeps its last value)."""
    out: dict[str, list[Any]] = {"x": list(xs), "median": [], "q1": [], "q3": []}
    for x in xs:
        vals = [c[min(x, len(c)) - 1] for c in curves if c]
        vals = [v for v in vals if math.isfinite(v)]
        q = np.percentile(vals, [25, 50, 75]) if vals else [None] * 3
        out["q1"].append(None if q[0] is None else float(q[0]))
        out["median"].append(None if q[1] is None else float(q[1]))
        out["q3"].append(None if q[2] is None else float(q[2]))
    return out


def _stats(vals: list[float | None]) -> dict[str, Any]:
    v = [x for x in vals if x is not None and math.isfinite(x)]
    if not v:
        return {"median_ms": None, "q1_ms": None, "q3_ms": None, "n": 0}
    q1, med, q3 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    return {"median_ms": med, "q1_ms": q1, "q3_ms": q3, "n": len(v)}


def model_run(p: Pipeline, strategy: str, model: CostModel, evals: int, seed: int, wall_s: float) -> dict[str, Any]:
    """One run on the model objective: the strategy until `evals` evaluations (or `wall_s`)."""
    from ..search import STRATEGIES, Budget, Cancelled, SearchContext  # noqa: PLC0415

    cancel = threading.Event()
    obj = ModelObjective(model, evals, cancel)
    ctx = SearchContext(p, obj, obj.measure, Budget(trials=10**9, wall_s=wall_s), seed, strategy=strategy, cancel=cancel)
    t = time.perf_counter()
    try:
        STRATEGIES[strategy](ctx)
    except Cancelled:
        pass
    wall = time.perf_counter() - t
    best = obj.best
    return {
        "seed": seed, "evaluations": len(obj.values), "wall_s": round(wall, 2), "best_ms": best[0] if best else None,
        "curve": best_so_far(obj.values), "schedule": best[1] if best else None,
    }  # fmt: skip


def hardware_run(
    p: Pipeline, strategy: str, model: CostModel, measurements: int, seed: int, wall_s: float, runner: MeasureRunner
) -> dict[str, Any]:
    """One run on hardware: run_search with `measurements` at most (no confirmation rounds:
    the final figure is the interleaved re-measurement of every run's best)."""
    from ..search import Budget, Progress, run_search  # noqa: PLC0415

    steps: list[tuple[int, float | None]] = []  # (predictions made, best verified ms) after each measurement

    def progress(pr: Progress) -> None:
        if pr.trial is not None:
            steps.append((pr.seen, pr.best_measured_ms))

    res = run_search(p, strategy, Budget(measurements, wall_s), seed, model=model, runner=runner, progress=progress, confirm=False)
    by_meas = best_so_far([t.measured_ms if t.verified else None for t in res.trials])
    return {
        "seed": seed, "measurements": len(res.trials), "failed": sum(1 for t in res.trials if not t.verified),
        "evaluations": res.seen, "wall_s": round(res.search_s, 2), "model_s": round(res.model_s, 2), "best_ms": res.best_ms,
        "curve": by_meas, "steps": steps, "schedule": res.best,
    }  # fmt: skip


def _eval_curve(steps: list[tuple[int, float | None]], n: int) -> list[float]:
    """Best verified ms against predictions made (1..n) from a run's (seen, best) steps."""
    out, k, best = [], 0, math.inf
    for x in range(1, n + 1):
        while k < len(steps) and steps[k][0] <= x:
            v = steps[k][1]
            if v is not None:
                best = min(best, v)
            k += 1
        out.append(best)
    return out


def _verify(p: Pipeline, runs: dict[str, list[dict[str, Any]]], runner: MeasureRunner, repeats: int, min_time_s: float) -> None:
    """Measure each run's best schedule `repeats` times in interleaved rounds: its final verified
    time (median of round medians; None when it failed or did not verify)."""
    todo = [(r, r["schedule"]) for rs in runs.values() for r in rs if r.get("schedule") is not None]
    got: dict[int, list[float | None]] = {id(r): [] for r, _ in todo}
    cache: dict[str, list[float | None]] = {}
    for rnd in range(repeats):
        for r, s in todo:
            h = s.content_hash()
            if len(cache.setdefault(h, [])) <= rnd:  # the same schedule found by two runs is measured once per round
                m = api.measure(p, s, runner, None, min_time_s=min_time_s, profile=False, timeout_s=300.0, force=rnd > 0)
                cache[h].append(m.median_ms if m.ok and m.verified else None)
            got[id(r)].append(cache[h][rnd])
    for r, _ in todo:
        vals = got[id(r)]
        r["verified_ms"] = None if any(v is None for v in vals) else statistics.median(v for v in vals if v is not None)


def _summarize(runs: dict[str, list[dict[str, Any]]], axis: str, n: int, extra_axis: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    xs = grid(n)
    for s, rs in runs.items():
        row = {
            "final": _stats([r["best_ms"] for r in rs]),
            "verified": _stats([r.get("verified_ms") for r in rs]),
            f"curve_{axis}": band([r["curve"] for r in rs], xs if axis == "evaluations" else list(range(1, n + 1))),
            "runs": [{k: v for k, v in r.items() if k not in ("schedule", "steps", "curve")} for r in rs],
        }
        if extra_axis:  # hardware: also against the predictions made
            m = max((r["evaluations"] for r in rs), default=1)
            row["curve_evaluations"] = band([_eval_curve(r["steps"], m) for r in rs], grid(m))
        out[s] = row
    return out


def _winner(row: dict[str, Any], key: str) -> str | None:
    meds = {s: v[key]["median_ms"] for s, v in row.items() if v[key]["median_ms"] is not None}
    return min(meds, key=meds.__getitem__) if meds else None


def bench_strategies(
    pipelines: Sequence[str] | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    size: str = "full",
    seeds: int = 5,
    evals: int = 2000,
    measurements: int = 64,
    hw_pipelines: Sequence[str] | None = None,
    hw_seeds: int = 3,
    model: str = "default",
    wall_s: float = 1800.0,
    repeats: int = 3,
    min_time_s: float = 0.2,
    verify_model: bool = True,
    checkpoint: str | None = None,
) -> dict[str, Any]:
    """Best-so-far curves of `strategies` on the zoo `pipelines` (default all) at `size`:
    on the cost model `model` with `evals` evaluations, `seeds` seeds (0..seeds-1), each best
    then measured once (`verify_model`); on hardware with `measurements` per run (0: skip) on
    `hw_pipelines` (default: `pipelines`) with `hw_seeds` seeds, each best measured again in
    `repeats` interleaved rounds. `wall_s` caps one run (a run it stops is reported shorter).
    `checkpoint`: a file the result so far is written to (as JSON, "partial": true) after
    each pipeline's model runs and each hardware seed, so a long run that is stopped keeps
    what it did."""
    from ..search import STRATEGIES  # noqa: PLC0415

    names = list(pipelines) if pipelines is not None else zoo.names()
    hw_names = list(hw_pipelines) if hw_pipelines is not None else names
    for s in strategies:
        if s not in STRATEGIES:
            raise api.InputError(f"unknown strategy {s!r}; expected one of {', '.join(sorted(STRATEGIES))}")
    for n in {*names, *hw_names} - set(zoo.names()):
        raise api.InputError(f"unknown pipeline {n!r}; expected one of {', '.join(zoo.names())}")
    try:
        cost_model = model_by_name(model)  # before any work: a model that is not trained fails now
    except ValueError as exc:
        raise api.InputError(str(exc)) from None
    t_start, load = time.time(), [os.getloadavg()]
    results: dict[str, Any] = {}
    runner: MeasureRunner = Runner()
    machine = machine_record(runner.host, runner.target)
    settings = {
        "size": size, "seeds": seeds, "evals": evals, "measurements": measurements, "hw_seeds": hw_seeds, "model": cost_model.name,
        "strategies": list(strategies), "repeats": repeats,
    }  # fmt: skip

    def result(partial: bool) -> dict[str, Any]:
        summary = _summary(results, strategies)
        out = {"machine": machine, "load_avg": [round(v[0], 2) for v in load], **settings, "wall_s": round(time.time() - t_start, 1)}
        out.update(summary=summary, pipelines=results, table=_table(results, strategies, summary))
        if partial:
            out["partial"] = True
            if checkpoint:
                Path(checkpoint).write_text(json.dumps(out, indent=1))
        return out

    try:
        # The model objective: seeds outermost, then pipelines, strategies innermost, so a run
        # that is stopped has every pipeline and strategy at the same number of seeds.
        pipes = {name: zoo.get(name, size) for name in dict.fromkeys(names + (hw_names if measurements else []))}
        model_runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {s: [] for s in strategies} for n in names}
        for seed in range(seeds):
            for name in names:
                p = pipes[name]
                for s in strategies:
                    r = model_run(p, s, cost_model, evals, seed, wall_s)
                    model_runs[name][s].append(r)
                    _log(f"{name} model {s} seed {seed}: best {r['best_ms']:.4g} ms in {r['evaluations']} evals, {r['wall_s']:.0f} s")
                row = results.setdefault(name, {"stages": len(p.stages)})
                row["model"] = _summarize(model_runs[name], "evaluations", evals, False)
                load.append(os.getloadavg())
                result(partial=True)  # not yet measured: "verified" is empty
        for name in names if seeds > 0 and verify_model else []:
            _verify(pipes[name], model_runs[name], runner, 1, min_time_s)
            results[name]["model"] = _summarize(model_runs[name], "evaluations", evals, False)
            result(partial=True)
        for name in hw_names if measurements else []:
            p = pipes[name]
            row = results.setdefault(name, {"stages": len(p.stages)})
            hw: dict[str, list[dict[str, Any]]] = {s: [] for s in strategies}
            for seed in range(hw_seeds):
                for s in strategies:
                    r = hardware_run(p, s, cost_model, measurements, seed, wall_s, runner)
                    hw[s].append(r)
                    _log(f"{name} hardware {s} seed {seed}: best {r['best_ms']} ms, {r['measurements']} measured, {r['wall_s']:.0f} s")
                    row["hardware"] = _summarize({k: v for k, v in hw.items() if v}, "measurements", measurements, True)
                    result(partial=True)  # not yet re-measured: "verified" is empty
            _verify(p, hw, runner, repeats, min_time_s)
            row["hardware"] = _summarize(hw, "measurements", measurements, True)
            load.append(os.getloadavg())
    finally:
        runner.close()
    return result(partial=False)


def _summary(results: dict[str, Any], strategies: Sequence[str]) -> dict[str, Any]:
    """Per objective: the winner per pipeline and where a learned strategy (LaMCTS/PlaLaM)
    has a lower median final best than every baseline."""
    out: dict[str, Any] = {}
    for obj, key in (("model", "final"), ("hardware", "verified")):
        rows = {n: r[obj] for n, r in results.items() if obj in r}
        if not rows:
            continue
        base = [s for s in strategies if s not in LEARNED]
        wins, winners = [], {}
        for n, row in rows.items():
            winners[n] = _winner(row, key)
            med = {s: row[s][key]["median_ms"] for s in strategies if s in row and row[s][key]["median_ms"] is not None}
            learned = [v for s, v in med.items() if s in LEARNED]
            others = [v for s, v in med.items() if s in base]
            if learned and others and min(learned) < min(others):
                wins.append(n)
        out[obj] = {"by": key, "winner": winners, "learned_beats_all_baselines": wins, "pipelines": len(rows)}
    return out


def _cell(st: dict[str, Any]) -> str:
    if st["median_ms"] is None:
        return "-"
    return f"{st['median_ms']:.4g} [{st['q1_ms']:.4g}-{st['q3_ms']:.4g}]"


def _table(results: dict[str, Any], strategies: Sequence[str], summary: dict[str, Any]) -> str:
    lines = []
    for obj in ("model", "hardware"):
        if obj not in summary:
            continue
        for key in ("final", "verified"):
            what = {"final": "best predicted ms" if obj == "model" else "best measured ms in the search", "verified": "final verified ms"}[
                key
            ]
            lines += [f"{obj} objective, {what}: median [IQR] over seeds", ""]
            lines += ["| pipeline | " + " | ".join(strategies) + " | winner |", "|" + "---|" * (len(strategies) + 2)]
            for n, r in results.items():
                if obj in r:
                    row = r[obj]
                    cells = [_cell(row[s][key]) if s in row else "-" for s in strategies]
                    lines.append(f"| {n} | " + " | ".join(cells) + f" | {_winner(row, key)} |")
            lines.append("")
        sm = summary[obj]
        lines.append(
            f"{obj}: LaMCTS/PlaLaM lowest median on {len(sm['learned_beats_all_baselines'])} of {sm['pipelines']} pipelines "
            f"({', '.join(sm['learned_beats_all_baselines']) or 'none'})"
        )
        lines.append("")
    return "\n".join(lines)
