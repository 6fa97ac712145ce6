"""The TVM-style baseline (Ansor's XGBoost "pack-sum"), LightGBM only (no torch).

Gradient-boosted trees score each stage; the pipeline's prediction is the sum of its
stages' scores, and the trees are fitted to the pipeline totals with a custom objective. Our stage score is a log cost
f_i, the total is S = sum_i exp(f_i) and the loss is (log S - log t)^2, as for the
torch models. Its gradient per stage is 2 r w_i with r = log S - log t and w_i =
exp(f_i) / S, the stage's share; the hessian used is 2 w_i, a diagonal bound that makes
a leaf shared by all stages of a pipeline take the exact Newton step (the exact
per-row hessian 2 w_i^2 would overshoot by the number of stages). Ansor uses squared
error on normalized throughput instead; log time keeps MAPE meaningful across
pipelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from .. import features as F
from ..ir import Pipeline
from ..loopnest import LoopNest
from ..schedule import Schedule
from .base import Prediction
from .dataset import Sample, sample_of
from .files import ModelFileError, lightgbm_text, read_metadata, write_bytes, write_json
from .targets import clip_predictions, log_range, targets_of

TVM_NAME = "TVM-style LightGBM pack-sum (learned prediction)"


def _rows(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows of the costed stages of every sample, and the sample index of each row."""
    xs, gs = [], []
    for k, s in enumerate(samples):
        m = s.costed
        xs.append(s.nodes[m])
        gs.append(np.full(int(m.sum()), k))
    return np.concatenate(xs).astype(np.float64), np.concatenate(gs)


def _pack_sum_objective(y: np.ndarray, group: np.ndarray) -> Any:
    def objective(preds: np.ndarray, _data: lgb.Dataset) -> tuple[np.ndarray, np.ndarray]:
        mx = np.full(len(y), -np.inf)
        np.maximum.at(mx, group, preds)
        ex = np.exp(preds - mx[group])
        tot = np.bincount(group, ex, minlength=len(y))
        share = ex / tot[group]
        r = (mx + np.log(tot) - y)[group]
        return 2 * r * share, 2 * share + 1e-6

    return objective


class TVMModel:
    """LightGBM per-stage log costs, summed per pipeline (pack-sum)."""

    kind = "lightgbm"

    def __init__(self, booster: lgb.Booster, base: float, config: dict[str, Any]) -> None:
        self.booster, self.base, self.config, self.name = booster, base, config, TVM_NAME

    @staticmethod
    def fit(train: Sequence[Sample], rounds: int = 300, target: str = "log", seed: int = 0, **params: Any) -> tuple[TVMModel, dict]:
        y = targets_of(train, target)
        x, group = _rows(train)
        n_costed = np.bincount(group, minlength=len(train))
        base = float(np.mean(y - np.log(np.maximum(n_costed, 1))))  # every stage starts at the mean share
        p = {
            "objective": _pack_sum_objective(y, group), "learning_rate": 0.05, "num_leaves": 31,
            "min_data_in_leaf": max(2, min(20, len(x) // 50)), "feature_fraction": 0.9, "lambda_l2": 1.0,
            "verbose": -1, "seed": seed, "num_threads": 1, "deterministic": True, **params,
        }  # fmt: skip
        data = lgb.Dataset(x, init_score=np.full(len(x), base), feature_name=[f.name for f in F.FEATURES], free_raw_data=False)
        booster = lgb.train(p, data, num_boost_round=rounds)
        cfg = {"kind": "tvm", "rounds": rounds, "target": target, "log_range": log_range(y)}
        model = TVMModel(booster, base, cfg)
        pred, _ = model.predict_samples(train)
        stats = {"rounds": rounds, "samples": len(train), "train_rmse_log": float(np.sqrt(np.mean((np.log(pred) - y) ** 2)))}
        return model, stats

    def predict_samples(self, samples: Sequence[Sample]) -> tuple[np.ndarray, list[np.ndarray]]:
        if not samples:
            return np.zeros(0), []
        x, group = _rows(samples)
        raw = self.booster.predict(x, raw_score=True)
        assert isinstance(raw, np.ndarray), "a dense input gives a dense prediction"  # the stubs also allow sparse ones
        f = self.base + raw
        ms = np.exp(f)
        totals = np.bincount(group, ms, minlength=len(samples))
        stages = []
        for k, s in enumerate(samples):
            full = np.zeros(len(s.nodes))
            full[s.costed] = ms[group == k]
            stages.append(full)
        return clip_predictions(totals, stages, self.config), stages

    def predict(self, p: Pipeline, s: Schedule, nest: LoopNest | None = None) -> Prediction:
        totals, stages = self.predict_samples([sample_of(p, s, nest=nest)])
        return Prediction(self.name, float(totals[0]), {st.name: float(v) for st, v in zip(p.stages, stages[0])})

    def save(self, directory: str | Path, stem: str = "tvm") -> None:
        """`stem`.txt (LightGBM's text format, never pickle) and `stem`.json (base score,
        feature version and the text's sha256), each written atomically."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        digest = write_bytes(d / f"{stem}.txt", self.booster.model_to_string().encode("utf-8"))
        meta = {**self.config, "base": self.base, "feature_version": F.VERSION, "sha256": digest}
        write_json(d / f"{stem}.json", meta)

    @staticmethod
    def load(directory: str | Path, stem: str = "tvm") -> TVMModel:
        """The model saved by `save`; a missing, incomplete or mismatched file is a ModelFileError
        (checked before LightGBM parses it: LightGBM crashes the process on a truncated file)."""
        d = Path(directory)
        meta = d / f"{stem}.json"
        cfg = read_metadata(meta, F.VERSION)
        try:
            base = float(cfg["base"])
        except (KeyError, TypeError, ValueError):
            raise ModelFileError(f"{meta}: no numeric 'base' score") from None
        text = lightgbm_text(d / f"{stem}.txt", cfg.get("sha256"))
        try:
            booster = lgb.Booster(model_str=text)
        except lgb.basic.LightGBMError as exc:
            raise ModelFileError(f"{d / stem}.txt: LightGBM cannot read it ({exc})") from None
        return TVMModel(booster, base, cfg)
