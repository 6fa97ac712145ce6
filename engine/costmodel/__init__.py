"""Cost models: predict a schedule's run time without running it.

Every model implements `CostModel.predict(pipeline, schedule) -> Prediction`; the app and
the search only see this interface. A `Prediction` is always labelled with the model that
made it and is never mixed up with a measurement.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..resources import COSTMODEL_DIR
from .analytic import AnalyticModel
from .base import CostModel, ModelChoice, Prediction, short_label, unmodelled
from .files import ModelFileError, read_json

if TYPE_CHECKING:  # load_model's return type only: the modules themselves load lazily (torch, LightGBM)
    from .gnn import TorchCostModel
    from .trees import TVMModel

__all__ = [
    "ENV_VAR", "AnalyticModel", "CostModel", "ModelChoice", "ModelFileError", "Prediction", "default_choice", "default_model", "load_model",
    "model_by_name", "model_dirs", "short_label", "unmodelled",
]  # fmt: skip

SHIPPED = COSTMODEL_DIR  # the trained models shipped in resources/costmodel
ENV_VAR = "SCHEDULE_EXPLORER_COSTMODEL"  # "analytic", or a directory of trained models


def default_dir() -> Path:
    """Where `costmodel train` saves models by default: the user data directory."""
    from platformdirs import user_data_dir  # noqa: PLC0415

    return Path(user_data_dir("schedule-explorer", appauthor=False)) / "costmodel"


def load_model(directory: str | Path, key: str) -> TorchCostModel | TVMModel:
    """One trained model (gnn, halide or tvm) from `directory`, importing only what it needs
    (torch for the networks, LightGBM alone for the trees): opening the app stays quick."""
    d = Path(directory)
    if key == "gnn":
        from .gnn import load_gnn  # noqa: PLC0415

        return load_gnn(d)
    if key in ("halide", "tvm"):
        if key == "tvm":
            if (d / "corrections.json").exists():  # fine-tuned here: trees plus per-pipeline corrections
                from .finetuned import FineTunedModel  # noqa: PLC0415

                return FineTunedModel.load(d)
            from .trees import TVMModel  # noqa: PLC0415  # no torch: LightGBM only

            return TVMModel.load(d)
        from .baselines import load_halide  # noqa: PLC0415

        return load_halide(d)
    raise ValueError(f"unknown cost model {key!r} (choose from gnn, halide, tvm)")


def model_dirs() -> list[Path]:
    """Where trained models are looked for, first wins: $SCHEDULE_EXPLORER_COSTMODEL, the
    user's own fine-tuned for this host (`costmodel finetune`), the user's own (`costmodel
    train`'s default output), then the ones shipped in resources/."""
    from .files import finetuned_for_this_host  # noqa: PLC0415

    env = os.environ.get(ENV_VAR)
    return ([Path(env)] if env and env != "analytic" else []) + finetuned_for_this_host() + [default_dir(), SHIPPED]


@lru_cache(maxsize=1)
def default_choice() -> ModelChoice:
    """The best available model: the learned model that `default.json` in the first model
    directory names (chosen by `costmodel eval` on held-out pipelines), else the analytic
    estimate. A model that fails to load (a truncated or corrupt file, another feature
    version) is reported on stderr and in the choice's `fallback_reason`, and skipped.
    Loaded once per process: every prediction reuses it."""
    if os.environ.get(ENV_VAR) == "analytic":
        return ModelChoice(AnalyticModel(), "analytic")
    failed: list[str] = []
    for d in model_dirs():
        choice = d / "default.json"
        if not choice.exists():  # checked before importing torch: a plain start stays fast
            continue
        try:
            name = read_json(choice).get("model")
            if not isinstance(name, str):
                raise ModelFileError(f"{choice}: no model name in it")
            return ModelChoice(AnalyticModel() if name == "analytic" else load_model(d, name), str(d), "; ".join(failed))
        except (OSError, ValueError) as exc:  # ModelFileError is a ValueError
            failed.append(f"cost model in {d} not usable ({exc})")
            print(f"{failed[-1]}; trying the next", file=sys.stderr)
    return ModelChoice(AnalyticModel(), "analytic", "; ".join(failed))


def default_model() -> CostModel:
    """`default_choice()`'s model (cached: loaded once per process, not per prediction)."""
    return default_choice().model


default_model.cache_clear = default_choice.cache_clear  # type: ignore[attr-defined]  # resetting either resets both


def model_by_name(name: str) -> CostModel:
    """`default` (see default_model), `analytic`, or a trained model's key (gnn, halide, tvm)
    from the first model directory that has it."""
    if name == "default":
        return default_model()
    if name == "analytic":
        return AnalyticModel()
    for d in model_dirs():
        if (d / f"{name}.json").exists():
            return load_model(d, name)
    raise ValueError(f"no trained cost model {name!r} in {', '.join(map(str, model_dirs()))}")
