"""Evaluation of the learned cost models on held-out data.

Two test sets, fixed at training time (split.json beside the models): whole pipelines no
model has seen (the headline numbers) and held-out schedules of pipelines seen in
training (`seen_pipelines`). Metrics:
- mape: mean |predicted - measured| / measured;
- kendall_tau: Kendall's tau-b between predicted and measured times within a pipeline,
  averaged over pipelines (1: same order, -1: reversed);
- pairwise_acc: over all pairs of schedules of the same pipeline with different times,
  the fraction the model orders correctly (a tied prediction counts one half);
- top1_regret / top5_regret: per pipeline, how much slower the best of the model's 1 / 5
  fastest-predicted schedules is than the best measured one (0.25 = 25% slower), averaged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..database import Database
from ..ir import Pipeline
from ..schedule import Schedule
from .dataset import Sample, load
from .files import read_json, write_json


class SampleModel(Protocol):
    name: str
    config: dict[str, Any]

    def predict_samples(self, samples: Sequence[Sample]) -> tuple[np.ndarray, list[np.ndarray]]: ...


# --- metrics ------------------------------------------------------------------------------
def _groups(groups: Sequence[Any]) -> list[np.ndarray]:
    by: dict[Any, list[int]] = {}
    for k, g in enumerate(groups):
        by.setdefault(g, []).append(k)
    return [np.array(v) for v in by.values()]


def mape(pred: np.ndarray, true: np.ndarray) -> float:
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    return float(np.mean(np.abs(pred - true) / true)) if len(true) else float("nan")


def kendall_tau(pred: np.ndarray, true: np.ndarray) -> float:
    """Kendall's tau-b of one group (NaN when either side is constant)."""
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    iu = np.triu_indices(len(pred), 1)
    sp = np.sign(pred[:, None] - pred[None, :])[iu]
    st = np.sign(true[:, None] - true[None, :])[iu]
    den = np.sqrt(float(np.count_nonzero(sp)) * float(np.count_nonzero(st)))
    return float(np.sum(sp * st) / den) if den > 0 else float("nan")


def mean_kendall_tau(pred: np.ndarray, true: np.ndarray, groups: Sequence[Any]) -> float:
    taus = [kendall_tau(pred[g], true[g]) for g in _groups(groups) if len(g) >= 2]
    taus = [t for t in taus if not np.isnan(t)]
    return float(np.mean(taus)) if taus else float("nan")


def pairwise_accuracy(pred: np.ndarray, true: np.ndarray, groups: Sequence[Any]) -> float:
    right = total = 0.0
    for g in _groups(groups):
        p, t = np.asarray(pred, float)[g], np.asarray(true, float)[g]
        iu = np.triu_indices(len(g), 1)
        st = np.sign(t[:, None] - t[None, :])[iu]
        sp = np.sign(p[:, None] - p[None, :])[iu]
        keep = st != 0
        right += float(np.sum(sp[keep] == st[keep]) + 0.5 * np.sum(sp[keep] == 0))
        total += float(np.sum(keep))
    return right / total if total else float("nan")


def topk_regret(pred: np.ndarray, true: np.ndarray, groups: Sequence[Any], k: int) -> float:
    regrets = []
    for g in _groups(groups):
        p, t = np.asarray(pred, float)[g], np.asarray(true, float)[g]
        picks = np.argsort(p, kind="stable")[:k]
        regrets.append(float(t[picks].min() / t.min() - 1.0))
    return float(np.mean(regrets)) if regrets else float("nan")


def metrics(pred: np.ndarray, true: np.ndarray, groups: Sequence[Any], absolute: bool = True) -> dict[str, Any]:
    """All metrics; `absolute=False` (a model trained on relative times) leaves MAPE out."""
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    return {
        "mape": mape(pred, true) if absolute else None,
        "kendall_tau": mean_kendall_tau(pred, true, groups),
        "pairwise_acc": pairwise_accuracy(pred, true, groups),
        "top1_regret": topk_regret(pred, true, groups, 1),
        "top5_regret": topk_regret(pred, true, groups, 5),
        "n_pipelines": len(set(groups)),
        "n_samples": len(true),
    }


# --- evaluating models --------------------------------------------------------------------
def _score(pred: np.ndarray, test: Sequence[Sample], absolute: bool) -> dict[str, Any]:
    if not test:
        return metrics(np.zeros(0), np.zeros(0), [], absolute)
    true = np.array([s.time_ms for s in test])
    return metrics(pred, true, [s.pipeline_hash for s in test], absolute)


def evaluate_models(models: Mapping[str, SampleModel], unseen: Sequence[Sample], seen: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """{model: {metrics on unseen pipelines..., "seen_pipelines": {metrics on held-out schedules}}}."""
    out: dict[str, dict[str, Any]] = {}
    for key, m in models.items():
        absolute = m.config.get("target", "log") == "log"
        res = _score(m.predict_samples(unseen)[0], unseen, absolute)
        res["seen_pipelines"] = _score(m.predict_samples(seen)[0], seen, absolute)
        out[key] = res
    return out


def _analytic(db_path: str | Path, tests: list[Sequence[Sample]]) -> list[np.ndarray]:
    """The analytic roofline's predictions for the test samples (a reference line)."""
    from .analytic import AnalyticModel  # noqa: PLC0415

    model = AnalyticModel()
    out = []
    with Database(db_path) as db:
        pipes: dict[str, Pipeline] = {}
        for test in tests:
            pred = []
            for s in test:
                if s.pipeline_hash not in pipes:
                    row = db.conn.execute("SELECT json FROM pipelines WHERE hash=?", (s.pipeline_hash,)).fetchone()
                    pipes[s.pipeline_hash] = Pipeline.from_json(json.loads(row[0]))
                row = db.conn.execute("SELECT json FROM schedules WHERE hash=?", (s.schedule_hash,)).fetchone()
                pred.append(model.predict(pipes[s.pipeline_hash], Schedule.from_json(json.loads(row[0]))).total_ms)
            out.append(np.array(pred))
    return out


def held_out(samples: Sequence[Sample], split_info: dict[str, Any]) -> tuple[list[Sample], list[Sample]]:
    """(unseen-pipeline samples, held-out schedules of seen pipelines) recorded at training."""
    unseen_p = set(split_info["holdout_pipelines"])
    seen_s = {tuple(x) for x in split_info["holdout_schedules"]}
    unseen = [s for s in samples if s.pipeline_hash in unseen_p]
    seen = [s for s in samples if (s.pipeline_hash, s.schedule_hash) in seen_s]
    return unseen, seen


METRICS = ("mape", "kendall_tau", "pairwise_acc", "top1_regret", "top5_regret")


def _spread(values: Sequence[float | None]) -> dict[str, Any]:
    """mean, std (n - 1; 0 for one value), min, max and the values of one metric over seeds."""
    v = np.array([np.nan if x is None else x for x in values], float)
    if np.isnan(v).all():
        return {"mean": None, "std": None, "min": None, "max": None, "values": list(values)}
    std = float(np.nanstd(v, ddof=1)) if np.count_nonzero(~np.isnan(v)) > 1 else 0.0
    return {"mean": float(np.nanmean(v)), "std": std, "min": float(np.nanmin(v)), "max": float(np.nanmax(v)), "values": v.tolist()}


def seed_summary(per_seed: Mapping[int, dict[str, Any]]) -> dict[str, Any]:
    """Every metric's mean and spread over the seeds' results ({seed: evaluate_models' entry of
    one model}), on held-out pipelines and (`seen_pipelines`) on held-out schedules."""
    runs = list(per_seed.values())
    return {
        "seeds": list(per_seed),
        **{k: _spread([r[k] for r in runs]) for k in METRICS},
        "seen_pipelines": {k: _spread([r["seen_pipelines"][k] for r in runs]) for k in METRICS},
    }


def evaluate(db_path: str | Path, model_dir: str | Path, with_analytic: bool = True) -> dict[str, dict[str, Any]]:
    """Metrics of the models saved in `model_dir` on the test sets recorded beside them. When
    they were trained with several seeds (split.json's `seeds`), each model's entry also has
    `seeds`: every metric's mean, std, min and max over the seeds (its own metrics are the first seed's)."""
    from .train import load_models, seed_dirs  # noqa: PLC0415

    d = Path(model_dir)
    info = read_json(d / "split.json")
    target, host, threads = info["environment"]
    samples = load(db_path, target=target, host=host, threads=threads)
    unseen, seen = held_out(samples, info)
    res = evaluate_models(load_models(d), unseen, seen)
    dirs = seed_dirs(d, info)
    if len(dirs) > 1:
        per_seed = {k: res if sd == d else evaluate_models(load_models(sd), unseen, seen) for k, sd in dirs.items()}
        for name in res:
            res[name]["seeds"] = seed_summary({k: r[name] for k, r in per_seed.items() if name in r})
    if with_analytic and (unseen or seen):
        pu, ps = _analytic(db_path, [unseen, seen])
        res["analytic"] = {**_score(pu, unseen, True), "seen_pipelines": _score(ps, seen, True)}
    return res


def noise_ceiling(reports: Mapping[str, Any], target: str, host: str, protocol: str = "baseline") -> dict[str, Any] | None:
    """The labels' noise ceiling to report beside the models, from `reports` (what `costmodel
    noise` keeps, by protocol: engine/costmodel/noise.py): `protocol`'s, the one the dataset's
    labels were taken by ('baseline' for wall-clock labels, 'cpu' for thread-CPU ones), with
    where it was measured and whether that is the data's environment (`same_environment`: a
    ceiling of another machine is a reference, not a bound). None when there is none."""
    rep = reports.get(protocol)
    overall = rep.get("overall") if isinstance(rep, dict) else None
    tau = overall.get("kendall_tau") if isinstance(overall, dict) else None
    if not isinstance(rep, dict) or not isinstance(overall, dict) or not isinstance(tau, (int, float)):
        return None
    return {
        "kendall_tau": float(tau), "median_abs_log_ratio": overall.get("median_abs_log_ratio"),
        "n_samples": overall.get("n_samples"), "protocol": protocol, "host": rep.get("host"), "target": rep.get("target"),
        "same_environment": rep.get("host") == host and rep.get("target") == target,
    }  # fmt: skip


def add_ceiling(results: dict[str, Any], ceiling: dict[str, Any] | None) -> None:
    """Record `ceiling` (`noise_ceiling`) in `results` and every model's tau as a fraction of
    it (`tau_of_ceiling`; for several seeds also of their mean). None: nothing is added."""
    if ceiling is None:
        return
    c = ceiling["kendall_tau"]
    for m in results.values():
        if isinstance(m, dict) and "kendall_tau" in m:
            m["tau_of_ceiling"] = m["kendall_tau"] / c if m["kendall_tau"] is not None and c > 0 else None
            if "seeds" in m and m["seeds"]["kendall_tau"]["mean"] is not None and c > 0:
                m["seeds"]["tau_of_ceiling"] = m["seeds"]["kendall_tau"]["mean"] / c
    results["noise_ceiling"] = ceiling


def choose(results: dict[str, dict[str, Any]], model_dir: str | Path) -> str:
    """Write `default.json` in `model_dir` naming the model that ranks held-out pipelines'
    schedules best (pairwise accuracy, then Kendall tau): what the app and search use."""

    def key(name: str) -> tuple[float, float]:
        m = results[name]
        return (m.get("pairwise_acc") or 0.0, m.get("kendall_tau") or 0.0)

    best = max((n for n in results if isinstance(results[n], dict) and "pairwise_acc" in results[n]), key=key)
    write_json(Path(model_dir, "default.json"), {"model": best, "by": "pairwise_acc on held-out pipelines", **results[best]}, indent=1)
    return best
