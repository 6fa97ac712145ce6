"""A cost model fine-tuned on this machine (finetune.fine_tune): the host's trees (TVMModel)
plus a correction of their log prediction for each pipeline measured enough here.

Its own module because it subclasses the trees' TVMModel, and the trees import LightGBM:
finetune.py (which the app imports at start-up for its error line) stays light. It is loaded
where a fine-tuned directory is: `costmodel.load_model` picks it when `corrections.json` is
beside the trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from ..ir import Pipeline
from ..loopnest import LoopNest
from ..schedule import Schedule
from . import features as F
from .base import Prediction, nests_of
from .dataset import Sample
from .files import ModelFileError, read_json, write_json
from .finetune import CORRECTIONS, PipelineCorrection
from .targets import clip_predictions
from .trees import TVMModel


class FineTunedModel(TVMModel):
    """TVMModel's trees (the host level) with `corrections` by pipeline content hash: a
    pipeline with one is predicted as its correction says (finetune.PipelineCorrection), any
    other as the trees do. Saved as the trees' files plus `corrections.json`."""

    def __init__(self, booster: lgb.Booster, base: float, config: dict[str, Any], corrections: dict[str, PipelineCorrection]) -> None:
        super().__init__(booster, base, config)
        self.corrections = dict(corrections)

    def _factors(self, ph: str, nodes: Sequence[np.ndarray], totals: np.ndarray) -> np.ndarray | None:
        c = self.corrections.get(ph)
        if c is None or not len(totals):
            return None
        lp = np.log(np.maximum(totals, 1e-300))
        corrected = clip_predictions(np.exp(lp + c.log_correction(nodes, lp)), [], self.config)
        return corrected / np.maximum(totals, 1e-300)

    def predict_samples(self, samples: Sequence[Sample], pipeline: Pipeline | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        totals, stages = super().predict_samples(samples, pipeline)
        by: dict[str, list[int]] = {}
        for k, smp in enumerate(samples):
            by.setdefault(smp.pipeline_hash, []).append(k)
        for ph, ix in by.items():
            f = self._factors(ph, [samples[i].nodes for i in ix], totals[ix])
            if f is not None:
                totals[ix] *= f
                for i, fi in zip(ix, f):
                    stages[i] = stages[i] * fi
        return totals, stages

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """The trees' `predict_many`, then the pipeline's correction (on every stage's feature
        row, as `predict_samples` has them: the same numbers)."""
        built = nests_of(p, schedules, nests)
        preds = super().predict_many(p, schedules, built)
        ph = p.content_hash()
        if ph not in self.corrections or not preds:
            return preds
        # only a correction with residual trees reads the feature rows; the others need none built
        nodes = [F.stage_features(n) for n in built] if self.corrections[ph].trees else []
        f = self._factors(ph, nodes, np.array([pr.total_ms for pr in preds]))
        assert f is not None
        return [Prediction(pr.model, pr.total_ms * fi, {k: v * fi for k, v in pr.stages.items()}) for pr, fi in zip(preds, f.tolist())]

    def save(self, directory: str | Path, stem: str = "tvm") -> None:
        super().save(directory, stem)
        write_json(
            Path(directory) / CORRECTIONS, {"format": 1, "pipelines": {ph: c.to_json() for ph, c in sorted(self.corrections.items())}}
        )

    @staticmethod
    def load(directory: str | Path, stem: str = "tvm") -> FineTunedModel:
        """The trees (TVMModel.load) and the corrections beside them; a damaged corrections file
        is a ModelFileError naming it."""
        trees = TVMModel.load(directory, stem)
        path = Path(directory) / CORRECTIONS
        data = read_json(path) if path.exists() else {"pipelines": {}}
        pipes = data.get("pipelines") if isinstance(data, dict) else None
        if not isinstance(pipes, dict):
            raise ModelFileError(f"{path}: no 'pipelines' object in it")
        corrections = {str(ph): PipelineCorrection.from_json(d, f"{path} (pipeline {ph})") for ph, d in pipes.items()}
        return FineTunedModel(trees.booster, trees.base, trees.config, corrections)
