"""Train the three learned cost models from the measurement database and save them.

`train_all(db, out_dir)` loads the samples of one environment (target, host, threads:
the most common one unless given), holds out whole pipelines and some schedules of the
others (recorded in split.json so evaluation uses the same test sets), trains the GNN,
the Halide-style MLP and the TVM-style LightGBM on the rest, and writes:

  gnn.pt, halide.pt     torch state_dicts (loaded with weights_only=True)
  gnn.json, halide.json architecture, target, feature version, the weights' sha256
  tvm.txt, tvm.json     LightGBM's text model format and its base score and sha256 (never pickle)
  split.json            environment and held-out pipelines / schedules
  seeds/<k>/            with seeds > 1: the same models trained with seeds seed+1, ... on
                        the same split (evaluate.py reports every metric's mean and spread)

each atomically (engine/costmodel/files.py): an interrupted run leaves the old file or the new.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..database import Database
from . import default_dir, load_model
from . import features as F
from .baselines import train_halide
from .dataset import Sample, environments, load, split
from .files import write_json
from .gnn import TorchCostModel, train_gnn
from .trees import TVMModel

MODELS = ("gnn", "halide", "tvm")
SEEDS_DIR = "seeds"  # beside the models: seeds/<seed>/ holds the same models trained with another seed


def train_all(
    db_path: str | Path,
    out_dir: str | Path | None = None,
    *,
    models: Sequence[str] = MODELS,
    epochs: int = 60,
    batch: int = 64,
    rounds: int = 300,
    hidden: int = 64,
    layers: int = 3,
    target: str = "log",
    rank_weight: float = 0.0,
    list_weight: float = 0.0,
    loss: str = "mse",
    gnn_options: dict[str, bool] | None = None,
    seeds: int = 1,
    holdout_pipelines: float = 0.2,
    holdout_schedules: float = 0.2,
    seed: int = 0,
    environment: tuple[str, str, int] | None = None,
    threads: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train `models` on the database at `db_path`, save them to `out_dir`; returns a summary.
    `seed` fixes the split and the first models; with `seeds` > 1 the models are trained
    again with seeds seed+1 ... on the same training set, into `out_dir`/seeds/<seed>/."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    unknown = set(models) - set(MODELS)
    if unknown:
        raise ValueError(f"unknown models {sorted(unknown)} (choose from {', '.join(MODELS)})")
    if threads:
        import torch  # noqa: PLC0415

        torch.set_num_threads(threads)
    out = Path(out_dir) if out_dir else default_dir()
    if environment is None:
        with Database(db_path) as db:
            envs = environments(db)
        if not envs:
            raise ValueError(f"{db_path}: no measurements to train on")
        environment = envs[0][:3]
    tgt, host, thr = environment
    samples = load(db_path, target=tgt, host=host, threads=thr)
    train, seen, unseen = split(samples, holdout_pipelines, holdout_schedules, seed)
    if not train:
        raise ValueError(f"{db_path}: no training samples in environment {environment}")
    out.mkdir(parents=True, exist_ok=True)
    info = {
        "environment": list(environment),
        "seed": seed,
        "feature_version": F.VERSION,
        "holdout_pipelines": sorted({s.pipeline_hash for s in unseen}),
        "holdout_schedules": sorted([s.pipeline_hash, s.schedule_hash] for s in seen),
        "train_samples": len(train),
        "train_pipelines": len({s.pipeline_hash for s in train}),
        "seeds": list(range(seed, seed + seeds)),  # the first in out_dir, the others in seeds/<seed>/
    }
    write_json(out / "split.json", info, indent=1)
    fit = {"epochs": epochs, "batch": batch, "target": target, "rank_weight": rank_weight, "seed": seed, "log": log}
    stats: dict[str, Any] = {}
    for k in range(seeds):
        where = out if k == 0 else out / SEEDS_DIR / str(seed + k)
        run = {**fit, "seed": seed + k}
        st = _train_models(train, where, models, run, rounds, hidden, layers, {"loss": loss, "list_weight": list_weight}, gnn_options)
        if k == 0:
            stats = st
        else:
            for name, v in st.items():
                stats[name].setdefault("other_seeds", {})[seed + k] = v
    return {
        "out": str(out),
        "samples": len(samples),
        "train": len(train),
        "test_seen": len(seen),
        "test_unseen": len(unseen),
        "pipelines": len({s.pipeline_hash for s in samples}),
        "models": stats,
    }


def _train_models(
    train: Sequence[Sample],
    out: Path,
    models: Sequence[str],
    fit: dict[str, Any],
    rounds: int,
    hidden: int,
    layers: int,
    gnn_fit: dict[str, Any],
    gnn_options: dict[str, bool] | None,
) -> dict[str, Any]:
    """Train and save each of `models` (fit's seed); their training stats by name."""
    out.mkdir(parents=True, exist_ok=True)
    log = fit.get("log")
    stats: dict[str, Any] = {}
    for name in models:
        t0 = time.time()
        if name == "gnn":
            m, st = train_gnn(train, hidden, layers, gnn_options, **fit, **gnn_fit)
            m.save(out, "gnn")
        elif name == "halide":
            m, st = train_halide(train, hidden, **fit)
            m.save(out, "halide")
        else:
            tm, st = TVMModel.fit(train, rounds=rounds, target=fit["target"], seed=fit["seed"])
            tm.save(out, "tvm")
        stats[name] = {**st, "seed": fit["seed"], "seconds": round(time.time() - t0, 2)}
        if log is not None:
            log(f"{name} (seed {fit['seed']}): {stats[name]}")
    return stats


def seed_dirs(directory: str | Path, split_info: dict[str, Any]) -> dict[int, Path]:
    """Every seed's model directory recorded in `split_info` (the split.json in `directory`):
    the first seed's is `directory`, the others' seeds/<seed>/ beside it (one missing is an error)."""
    d = Path(directory)
    seeds = [int(x) for x in split_info.get("seeds", [split_info.get("seed", 0)])]
    out = {k: d if i == 0 else d / SEEDS_DIR / str(k) for i, k in enumerate(seeds)}
    missing = [str(p) for p in out.values() if not p.is_dir()]
    if missing:
        raise FileNotFoundError(f"{d / 'split.json'} names seeds {seeds}, but {', '.join(missing)} is missing (retrain)")
    return out


def load_models(directory: str | Path | None = None) -> dict[str, TorchCostModel | TVMModel]:
    """The trained models found in `directory`, by key (gnn, halide, tvm)."""
    d = Path(directory) if directory else default_dir()
    found = {k: load_model(d, k) for k in MODELS if (d / f"{k}.json").exists()}
    if not found:
        raise FileNotFoundError(f"no trained cost models in {d} (run `costmodel train`)")
    return found
