"""Fine-tuning the default cost model on this machine's own measurements (issue 13 items 2, 3).

The shipped models were trained on another machine's timings (a Zen 4 with AVX-512); every
verified measurement the app or the CLI makes lands in the database under this machine's
target and host, and becomes training data for this host here:

- `Environment` is what a measurement and a model belong to (Halide target, host
  fingerprint, threads); `host_samples` loads only this environment's measurements and
  refuses (`HostMismatchError`, naming both) another's unless asked;
- `fine_tune` fits two levels, each label weighted by its reliability: the host (the
  shipped TVM-style trees' constant moved by the median log residual, boosting continued
  with LightGBM's `init_model` on pipelines with few measurements) and, for each pipeline
  with MIN_PIPELINE or more, a `PipelineCorrection` of the host's log prediction (none,
  offset, affine, residual trees over every stage's features: whichever 5-fold
  cross-validation on its measurements picks). The result is a `finetuned.FineTunedModel`;
  a model fine-tuned for one host refuses to be fine-tuned further on another's data
  unless asked;
- `finetune_splits` is the unseen-pipeline benchmark (N measurements to fit, the rest to
  judge, over seeded splits);
- `finetune_on_db` splits each pipeline's measurements into training and held-out ones,
  fits, reports before/after (`error_of`: median |log error| as a factor, and Kendall tau),
  and saves the model atomically in the user data directory (files.new_version: a whole
  version directory becomes current in one rename; the shipped files are never written),
  only when it is not worse on the held-out measurements;
- `model_error` is the line the app shows: "model error on your N measurements: median
  xE, tau T", for any cost model over this host's stored measurements;
- `calibrate_host` measures a small standard set of dataset schedules on a new host (a time
  budget, progress, cancel) and fine-tunes on it.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import api
from ..database import Database
from ..ir import Pipeline
from ..measure import MeasureRunner, check_clock, default_threads, host_fingerprint
from ..schedule import Schedule
from . import SHIPPED, CostModel
from . import features as F
from .dataset import CLOCK_SQL, DEFAULT_LABEL, JOB_OPTIONS, Sample, environments, label_of, label_sql, label_weights, labels_sql, load
from .evaluate import mean_kendall_tau
from .files import finetuned_dir, model_environment, new_version, read_json, reset_finetuned, write_json

if TYPE_CHECKING:  # trees imports LightGBM (2.7 s): loaded when a model is, not when the app starts
    from .finetuned import FineTunedModel
    from .trees import TVMModel

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class HostMismatchError(ValueError):
    """Measurements of one machine offered to a model of (or for) another: the message names both."""


class Cancelled(RuntimeError):
    """The caller's cancel flag was set: nothing was saved."""


@dataclass(frozen=True)
class Environment:
    """Where measurements come from: Halide target, host fingerprint, Halide threads."""

    target: str
    host: str
    threads: int

    @staticmethod
    def of(values: Sequence[Any]) -> Environment:
        return Environment(str(values[0]), str(values[1]), int(values[2]))

    def to_list(self) -> list[Any]:
        return [self.target, self.host, self.threads]

    def same_machine(self, other: Environment) -> bool:
        """Same target and host (a model serves any thread count of its machine)."""
        return (self.target, self.host) == (other.target, other.host)

    def describe(self) -> str:
        features = [f for f in self.target.split("-") if f.startswith(("avx", "tune_"))]
        return f"{self.host}, {' '.join(features) or self.target}, {self.threads} threads"


def current_environment(threads: int | None = None) -> Environment:
    """This machine: the local Runner's target and host, `threads` (default: its cores)."""
    from ..halide_backend import target_string  # noqa: PLC0415  # Halide loads only when asked

    return Environment(target_string(), host_fingerprint(), threads or default_threads())


def check_host(data: Environment, model: Environment | None, what: str, allow_other_host: bool = False) -> None:
    """Refuse data of `data`'s machine for a model of `model`'s machine (unless allowed)."""
    if model is None or allow_other_host or data.same_machine(model):
        return
    raise HostMismatchError(
        f"{what}: the measurements come from {data.describe()} (target {data.target}) but the model is for "
        f"{model.describe()} (target {model.target}); models never mix hosts silently: pass --allow-other-host "
        "(allow_other_host=True) to use them anyway"
    )


# --- this host's measurements ----------------------------------------------------------------
def host_samples(
    db_path: str | Path,
    env: Environment,
    *,
    pipeline: str | None = None,
    allow_other_host: bool = False,
    label: str = DEFAULT_LABEL,
    clock: str | None = None,
) -> tuple[list[Sample], Environment]:
    """The stored measurements of `env` (of one pipeline: a name or content hash; labels of
    kind `label`, dataset.LABELS), with the environment they are of. None on this host: a HostMismatchError naming what the database
    holds instead, unless `allow_other_host` (then the most common other environment's)."""
    with Database(db_path) as db:
        envs = [(Environment.of(e[:3]), int(e[3])) for e in environments(db)]
    used = env
    if not any(e == env for e, _ in envs):
        if not envs:
            raise ValueError(f"{db_path}: no measurements yet (measure some schedules first)")
        if not allow_other_host:
            held = "; ".join(f"{n} from {e.describe()}" for e, n in envs[:3])
            raise HostMismatchError(
                f"{db_path}: no measurements of this host ({env.describe()}); it holds {held}: measure on this machine, "
                "or pass --allow-other-host to use another host's"
            )
        used = envs[0][0]
    samples = load(db_path, target=used.target, host=used.host, threads=used.threads, label=label, clock=clock)
    if pipeline is not None:
        chosen = [s for s in samples if pipeline in (s.pipeline, s.pipeline_hash)]
        if not chosen:
            names = sorted({s.pipeline for s in samples})
            raise ValueError(
                f"{db_path}: no measurements of pipeline {pipeline!r} on {used.describe()} (measured: {', '.join(names[:12])})"
            )
        samples = chosen
    return samples, used


def split_host(samples: Sequence[Sample], holdout: float, seed: int = 0, max_train: int | None = None) -> tuple[list[Sample], list[Sample]]:
    """(train, held-out): within each pipeline a seeded share `holdout` of its schedules is held
    out (one at least when it has 2 or more); at most `max_train` training samples are kept."""
    by: dict[str, list[Sample]] = {}
    for s in samples:
        by.setdefault(s.pipeline_hash, []).append(s)
    rng = random.Random(seed)
    train: list[Sample] = []
    test: list[Sample] = []
    for h in sorted(by):
        grp = sorted(by[h], key=lambda s: s.schedule_hash)
        rng.shuffle(grp)
        k = max(1, int(round(holdout * len(grp)))) if holdout > 0 and len(grp) >= 2 else 0
        test += grp[:k]
        train += grp[k:]
    if max_train is not None and len(train) > max_train:
        rng.shuffle(train)
        train = train[:max_train]
    return train, test


# --- error ----------------------------------------------------------------------------------
@dataclass
class ErrorLine:
    """How wrong a model has been on measurements: median |log error| as a factor (x1.30: 30%
    off either way), mean within-pipeline Kendall tau (None with no pipeline of 2+)."""

    n: int
    median_factor: float | None
    kendall_tau: float | None
    n_pipelines: int

    @property
    def median_abs_log(self) -> float | None:
        return None if self.median_factor is None else math.log(self.median_factor)

    @property
    def text(self) -> str:
        if not self.n:
            return "model error on your measurements: none on this machine yet"
        tau = "–" if self.kendall_tau is None else f"{self.kendall_tau:.2f}"
        assert self.median_factor is not None
        return f"model error on your {self.n} measurements: median ×{self.median_factor:.2f}, τ {tau}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "median_abs_log_error": self.median_abs_log, "text": self.text}


def error_of(pred_ms: Sequence[float] | np.ndarray, true_ms: Sequence[float] | np.ndarray, groups: Sequence[Any]) -> ErrorLine:
    """The error line of predictions against measurements (groups: each one's pipeline)."""
    pred, true = np.asarray(pred_ms, float), np.asarray(true_ms, float)
    if not len(true):
        return ErrorLine(0, None, None, 0)
    err = np.abs(np.log(np.maximum(pred, 1e-300) / true))
    tau = mean_kendall_tau(pred, true, list(groups))
    return ErrorLine(len(true), float(math.exp(np.median(err))), None if math.isnan(tau) else tau, len(set(groups)))


def sample_error(model: TVMModel, samples: Sequence[Sample]) -> ErrorLine:
    return error_of(model.predict_samples(samples)[0], [s.time_ms for s in samples], [s.pipeline_hash for s in samples])


def model_error(
    model: CostModel,
    db_path: str | Path,
    env: Environment,
    pipeline_hash: str | None = None,
    cache: dict[tuple[str, str], float] | None = None,
    label: str | None = None,
    clock: str = "wall",
) -> ErrorLine:
    """The error line of `model` (any cost model: what the app predicts with) on every stored
    verified measurement of `env`'s machine and threads (of one pipeline when given): each
    schedule predicted with `predict_many`, as the app does, against its stored median.
    `cache` (pipeline hash, schedule hash) -> predicted ms, kept by a caller that asks again
    with the same model, is read and filled: only new measurements are predicted. `label`:
    which time of each measurement it is compared with (dataset.LABELS; by default the one
    the model was fitted to, recorded in a fine-tuned model's config, else the median). Only
    labels timed by `clock` count (the app measures by the wall clock; labels of two clocks
    are never mixed)."""
    kind = label or getattr(model, "config", {}).get("label", "median")
    q = f"SELECT m.pipeline_hash, m.schedule_hash, {label_sql(kind)} {labels_sql(False)} AND {CLOCK_SQL}=?"
    args: tuple[Any, ...] = (env.target, env.host, env.threads, clock)
    if pipeline_hash is not None:
        q, args = q + " AND m.pipeline_hash=?", (*args, pipeline_hash)
    known = {} if cache is None else cache
    with Database(db_path) as db:
        rows = db.conn.execute(q + " ORDER BY m.pipeline_hash, m.schedule_hash", args).fetchall()
        missing: dict[str, list[str]] = {}
        for ph, sh, _ in rows:
            if (ph, sh) not in known:
                missing.setdefault(ph, []).append(sh)
        for ph, shs in missing.items():
            p = Pipeline.from_json(json.loads(db.conn.execute("SELECT json FROM pipelines WHERE hash=?", (ph,)).fetchone()[0]))
            if p.content_hash() != ph:
                continue  # stored by a build that hashed differently: not attributed to this pipeline
            scheds = [
                Schedule.from_json(json.loads(db.conn.execute("SELECT json FROM schedules WHERE hash=?", (sh,)).fetchone()[0]))
                for sh in shs
            ]
            for sh, pr in zip(shs, model.predict_many(p, scheds)):
                known[(ph, sh)] = pr.total_ms
    hit = [(ph, sh, float(ms)) for ph, sh, ms in rows if (ph, sh) in known]
    return error_of([known[(ph, sh)] for ph, sh, _ in hit], [ms for _, _, ms in hit], [ph for ph, _, _ in hit])


# --- fine-tuning ----------------------------------------------------------------------------
def base_model() -> tuple[TVMModel, Environment | None]:
    """The shipped trees (the warm start) and the environment they were trained on."""
    from .trees import TVMModel  # noqa: PLC0415

    env = model_environment(SHIPPED, "tvm")
    return TVMModel.load(SHIPPED), Environment.of(env) if env else None


def default_rounds(n_samples: int) -> int:
    """Boosting rounds added for `n_samples` measurements: few for few (more fit the noise of
    50 labels: measured on two unseen pipelines), up to 100."""
    return int(min(100, max(20, n_samples)))


# --- per-pipeline corrections -------------------------------------------------------------
CORRECTIONS = "corrections.json"  # beside a fine-tuned model's trees: its per-pipeline corrections
MIN_PIPELINE = 12  # training measurements of a pipeline from which it gets a correction of its own
CV_FOLDS = 5


def schedule_vector(nodes: np.ndarray) -> np.ndarray:
    """A schedule of one pipeline as one row: every stage's features in stage order, inlined
    stages included (the trees score costed stages only, so an inlined producer's recompute
    is invisible to them: the correction sees it)."""
    return np.asarray(nodes, np.float64).ravel()


@dataclass
class PipelineCorrection:
    """A log-time correction for one pipeline of the host model's log prediction `lp`:
    corrected = offset + slope * lp (+ small boosted trees over the schedule's vector and `lp`,
    LightGBM text, checked by its sha256 before parsing, when the pipeline's own measurements
    earned them). `method` and `cv_error` say what cross-validation on the pipeline's
    measurements chose, and why."""

    offset: float
    method: str
    n: int
    cv_error: dict[str, float]
    trees: str | None = None
    rounds: int = 0
    slope: float = 1.0

    def __post_init__(self) -> None:
        self._booster: Any = None

    def log_correction(self, nodes: Sequence[np.ndarray], log_pred: np.ndarray) -> np.ndarray:
        """What to add to the host model's log predictions `log_pred` of schedules with these
        feature rows (Sample.nodes)."""
        lp = np.asarray(log_pred, float)
        out = self.offset + (self.slope - 1.0) * lp
        if self.trees and len(nodes):
            if self._booster is None:
                import lightgbm as lgb  # noqa: PLC0415

                self._booster = lgb.Booster(model_str=self.trees)
            x = _tree_rows(nodes, lp)
            if x.shape[1] != self._booster.num_feature():
                raise ValueError(f"pipeline correction for {self._booster.num_feature()} features, given {x.shape[1]}")
            out += np.asarray(self._booster.predict(x, num_threads=1), float)
        return out

    def to_json(self) -> dict[str, Any]:
        import hashlib  # noqa: PLC0415

        d = {k: v for k, v in asdict(self).items()}
        d["sha256"] = hashlib.sha256(self.trees.encode("utf-8")).hexdigest() if self.trees else None
        return d

    @staticmethod
    def from_json(d: Any, where: str) -> PipelineCorrection:
        import hashlib  # noqa: PLC0415

        from .files import ModelFileError  # noqa: PLC0415

        try:
            c = PipelineCorrection(float(d["offset"]), str(d["method"]), int(d["n"]), dict(d["cv_error"]), d.get("trees"),
                                   int(d.get("rounds", 0)), float(d.get("slope", 1.0)))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{where}: not a pipeline correction ({exc!r})") from None
        if c.trees is not None and (not isinstance(c.trees, str) or hashlib.sha256(c.trees.encode("utf-8")).hexdigest() != d.get("sha256")):
            raise ModelFileError(f"{where}: its trees do not match their sha256 (a damaged file): reset the fine-tuned model")
        if not (math.isfinite(c.offset) and math.isfinite(c.slope)):
            raise ModelFileError(f"{where}: offset {c.offset!r} or slope {c.slope!r} is not a finite number")
        return c


def _tree_rows(nodes: Sequence[np.ndarray], log_pred: np.ndarray) -> np.ndarray:
    return np.column_stack([np.stack([schedule_vector(n) for n in nodes]), np.asarray(log_pred, float)])


def _residual_trees(
    nodes: Sequence[np.ndarray], lp: np.ndarray, r: np.ndarray, w: np.ndarray, seed: int, rounds: int | None = None
) -> tuple[str, int] | None:
    """Small boosted trees fitted to residuals `r` of schedules (their vectors and the host's
    log prediction `lp`; Huber: a few wild labels do not steer them), `rounds` of them or, by
    default, as many as early stopping keeps in 5-fold cross-validation on these measurements
    (None when fewer than 2 help)."""
    import lightgbm as lgb  # noqa: PLC0415

    x = _tree_rows(nodes, lp)
    params = {
        "objective": "huber", "alpha": 0.3, "learning_rate": 0.1, "num_leaves": 4, "min_data_in_leaf": max(3, min(10, len(r) // 8)),
        "lambda_l2": 1.0, "feature_fraction": 0.9, "verbose": -1, "seed": seed, "num_threads": 1, "deterministic": True,
    }  # fmt: skip
    data = lgb.Dataset(x, r, weight=w, free_raw_data=False)
    if rounds is None:
        cv = lgb.cv(params, data, num_boost_round=150, nfold=min(CV_FOLDS, len(r) // 2), stratified=False, seed=seed,
                    callbacks=[lgb.early_stopping(10, verbose=False)])  # fmt: skip
        means = [v for k, v in cv.items() if k.endswith("-mean") and isinstance(v, list)]
        rounds = len(means[0]) if means else 0  # the rounds early stopping kept
    if rounds < 2:
        return None
    return lgb.train(params, data, num_boost_round=rounds).model_to_string(), rounds


SLOPES = (0.5, 2.0)  # the affine correction's slope is kept within these (50 labels cannot support more)


def fit_correction(
    nodes: Sequence[np.ndarray], lp: np.ndarray, y: np.ndarray, w: np.ndarray, method: str, seed: int = 0, rounds: int | None = None
) -> PipelineCorrection:
    """One pipeline's correction of `method` fitted to its labels `y` (log ms) against the host
    model's log predictions `lp`: "none"; "offset" (the median residual); "affine" (offset and
    slope, Theil-Sen: robust to a few wild labels; the model often compresses one pipeline's
    range); "trees" / "affine+trees" (and small boosted trees on what is left: `rounds`, by
    default chosen by early stopping)."""
    from scipy.stats import theilslopes  # noqa: PLC0415

    if method == "none":
        return PipelineCorrection(0.0, "none", len(y), {})
    slope = 1.0
    if method.startswith("affine") and len(y) >= 3 and np.ptp(lp) > 0:
        slope = float(np.clip(theilslopes(y, lp)[0], *SLOPES))
    offset = float(np.median(y - slope * lp))
    kind = "affine" if method.startswith("affine") else "offset"
    r = y - (offset + slope * lp)
    fitted = _residual_trees(nodes, lp, r, w, seed, rounds) if method.endswith("trees") and len(y) >= MIN_PIPELINE else None
    if fitted is None:
        return PipelineCorrection(offset, kind, len(y), {}, slope=slope)
    return PipelineCorrection(offset, method, len(y), {}, *fitted, slope=slope)


CORRECTION_METHODS = ("none", "offset", "affine", "trees", "affine+trees")


def cv_folds(n: int, seed: int) -> list[list[int]]:
    """The 5 cross-validation folds of `n` measurements (seeded): the same for every method compared."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return [idx[k::CV_FOLDS] for k in range(CV_FOLDS)]


def _boost_cv_error(
    samples: Sequence[Sample], y: np.ndarray, lp: np.ndarray, base: TVMModel, env: Environment, seed: int, rounds: int | None, **params: Any
) -> float:
    """Cross-validated median |log error| of the host level alone on one pipeline's measurements
    (`y`: their log labels, `lp`: `base`'s log predictions of them, which the caller has):
    in each fold the shipped trees, their constant moved by the fold's median residual, with
    boosting continued on the fold's training part."""
    e: list[float] = []
    for fold in cv_folds(len(samples), seed):
        held = set(fold)
        tr = [i for i in range(len(samples)) if i not in held]
        host = _host_trees(base, [samples[i] for i in tr], env, float(np.median(y[tr] - lp[tr])), rounds, seed, None, None, **params)
        e += np.abs(np.log(host.predict_samples([samples[i] for i in fold])[0]) - y[fold]).tolist()
    return float(np.median(e))


def choose_correction(nodes: Sequence[np.ndarray], lp: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int = 0) -> PipelineCorrection:
    """The correction whose 5-fold cross-validated median |log error| on this pipeline's
    measurements is lowest (ties: the simpler), fitted on all of them: a pipeline the host
    model already predicts well keeps it, a biased one gets an offset, one whose error has a
    shape the trees can learn (a costly inlined producer, say) gets trees. A method's trees
    get the rounds early stopping keeps on all the measurements, in every fold (choosing
    them again inside each fold cost 5x the time and changed little)."""
    idx = list(range(len(y)))
    folds = cv_folds(len(y), seed)
    errs: dict[str, float] = {}
    full = {m: fit_correction(nodes, lp, y, w, m, seed) for m in CORRECTION_METHODS}
    for method in CORRECTION_METHODS:
        if method.endswith("trees") and full[method].trees is None:  # no round helped: it is its plain method
            continue
        e: list[float] = []
        for fold in folds:
            held = set(fold)
            tr = [i for i in idx if i not in held]
            c = fit_correction([nodes[i] for i in tr], lp[tr], y[tr], w[tr], method, seed, full[method].rounds or None)
            e += np.abs(y[fold] - lp[fold] - c.log_correction([nodes[i] for i in fold], lp[fold])).tolist()
        errs[method] = float(np.median(e))
    best = min(errs, key=lambda m: (round(errs[m], 4), CORRECTION_METHODS.index(m)))
    chosen = full[best]
    chosen.cv_error = errs
    return chosen


def fine_tune(
    base: TVMModel,
    train: Sequence[Sample],
    env: Environment,
    *,
    rounds: int | None = None,
    seed: int = 0,
    allow_other_host: bool = False,
    progress: Progress | None = None,
    should_cancel: Callable[[], bool] | None = None,
    per_pipeline: bool = True,
    label: str = DEFAULT_LABEL,
    **params: Any,
) -> FineTunedModel:
    """`base` fine-tuned on `train` (measurements of `env`, labels of kind `label`): a new
    model, `base` untouched. A base already fine-tuned for another machine refuses `env`'s
    data unless `allow_other_host`. Each label is weighted by its reliability
    (dataset.label_weights).

    Two levels. The host: the constant outside the trees moves by the median log residual
    (the machine's speed), and boosting continues (`params` override LightGBM's) on the
    measurements of pipelines with too few of their own for a correction. The pipeline: each
    pipeline with MIN_PIPELINE or more measurements (and `per_pipeline`) gets its own
    correction of the host model's log prediction, the one of `CORRECTION_METHODS` that
    5-fold cross-validation on its measurements picks (`choose_correction`); the host trees
    never see those measurements, so the correction is fitted to honest residuals."""
    if not train:
        raise ValueError("no measurements to fine-tune on")
    prior = base.config.get("finetuned_for")
    check_host(env, Environment.of(prior) if prior else None, "fine-tuning", allow_other_host)
    by: dict[str, list[int]] = {}
    for k, smp in enumerate(train):
        by.setdefault(smp.pipeline_hash, []).append(k)
    own = {ph: ix for ph, ix in by.items() if per_pipeline and len(ix) >= MIN_PIPELINE}
    rest = [smp for smp in train if smp.pipeline_hash not in own]
    y = np.log(np.array([smp.time_ms for smp in train]))
    base_lp = np.log(base.predict_samples(train)[0])
    offset = float(np.median(y - base_lp))  # the machine's speed: robust to a few outliers
    from .finetuned import FineTunedModel  # noqa: PLC0415

    w = label_weights(train)

    def corrections_against(host: TVMModel) -> dict[str, PipelineCorrection]:
        lp = np.log(host.predict_samples(train)[0])
        out: dict[str, PipelineCorrection] = {}
        for n, (ph, ix) in enumerate(sorted(own.items())):
            if should_cancel is not None and should_cancel():
                raise Cancelled("fine-tuning cancelled")
            out[ph] = choose_correction([train[i].nodes for i in ix], lp[ix], y[ix], w[ix], seed)
            if progress is not None:
                progress("pipeline corrections", n + 1, len(own))
        return out

    def rounds_for(rest: list[Sample]) -> int | None:
        return rounds if rounds is not None else host_rounds(base, rest, env, seed, should_cancel, **params)

    host = _host_trees(base, rest, env, offset, rounds_for(rest), seed, progress, should_cancel, **params)
    corrections = corrections_against(host) if own else {}
    # A pipeline whose measurements teach the host trees more than any correction of its own
    # (continued boosting on them alone, cross-validated on the same folds) gives them to the trees,
    # provided the host level then does boost (its rounds are chosen again on the new rest, and 0
    # rounds would leave such a pipeline with neither its correction nor the boosting it won by).
    boost = {
        ph
        for ph, c in corrections.items()
        if _boost_cv_error([train[i] for i in own[ph]], y[own[ph]], base_lp[own[ph]], base, env, seed, rounds, **params)
        < min(c.cv_error.values())
    }
    if boost:
        own2 = {ph: ix for ph, ix in own.items() if ph not in boost}
        rest2 = [smp for smp in train if smp.pipeline_hash not in own2]
        r2 = rounds_for(rest2)
        if r2 == 0:
            boost = set()
        else:
            own, rest = own2, rest2
            host = _host_trees(base, rest, env, offset, r2, seed, progress, should_cancel, **params)
            corrections = corrections_against(host) if own else {}
    lo, hi = base.config.get("log_range", [float(y.min()) - 3, float(y.max()) + 3])
    cfg = {
        **host.config, "environment": env.to_list(), "finetuned_for": env.to_list(), "label": label,
        "log_range": [min(lo, float(y.min()) - 3), max(hi, float(y.max()) + 3)],
        "finetune": {
            **host.config.get("finetune", {}), "samples": len(train), "offset": offset, "created": time.time(),
            "pipelines_corrected": len(corrections), "host_tree_samples": len(rest), "pipelines_to_the_trees": len(boost),
        },
    }  # fmt: skip
    return FineTunedModel(host.booster, host.base, cfg, corrections)


HOST_ROUNDS = (0, 10, 25)  # continued-boosting rounds host_rounds compares (and default_rounds of the data)
HOST_CV_PIPELINES = 4  # pipelines from which host_rounds cross-validates by whole pipelines
HOST_CV_TIE = 0.005  # |log| error within which fewer rounds win


def host_rounds(
    base: TVMModel, rest: Sequence[Sample], env: Environment, seed: int, should_cancel: Callable[[], bool] | None = None, **params: Any
) -> int:
    """The boosting rounds the host level continues with on `rest` (measurements of pipelines
    without a correction of their own: the host trees must carry over to other pipelines):
    of HOST_ROUNDS and default_rounds, the one with the lowest median |log error| over 4-fold
    cross-validation by whole pipelines (each fold's offset from its own training part; ties
    within HOST_CV_TIE: fewer). 0 keeps the shipped trees (only the constant moves). With
    fewer than HOST_CV_PIPELINES pipelines there is nothing to judge by: default_rounds.
    `should_cancel` is polled between its fits (Cancelled).
    Why (calibrate-host, Sapphire Rapids host, 96 standard schedules of
    12 pipelines): the default 96 rounds lowered tau on 12 unseen pipelines 0.54 -> 0.49 at
    the same error as 0 rounds, which this cross-validation picks (session 9, commit 588032c)."""
    pipes = sorted({s.pipeline_hash for s in rest})
    if len(pipes) < HOST_CV_PIPELINES:
        return default_rounds(len(rest))
    random.Random(seed).shuffle(pipes)
    folds = [set(pipes[k::HOST_CV_PIPELINES]) for k in range(HOST_CV_PIPELINES)]
    errs: dict[int, float] = {}
    for r in sorted({*HOST_ROUNDS, default_rounds(len(rest))}):
        e: list[float] = []
        for out in folds:
            tr = [s for s in rest if s.pipeline_hash not in out]
            te = [s for s in rest if s.pipeline_hash in out]
            y = np.log([s.time_ms for s in tr])
            off = float(np.median(y - np.log(base.predict_samples(tr)[0])))
            host = _host_trees(base, tr, env, off, r, seed, None, should_cancel, **params)
            e += np.abs(np.log(host.predict_samples(te)[0]) - np.log([s.time_ms for s in te])).tolist()
        errs[r] = float(np.median(e))
    best = min(errs.values())
    return min(r for r, v in errs.items() if v <= best + HOST_CV_TIE)


def _host_trees(
    base: TVMModel,
    train: Sequence[Sample],
    env: Environment,
    offset: float,
    rounds: int | None,
    seed: int,
    progress: Progress | None,
    should_cancel: Callable[[], bool] | None,
    **params: Any,
) -> TVMModel:
    """`base` with its constant moved by `offset` and boosting continued on `train` for `rounds`
    (None: default_rounds; none added with 0 rounds or fewer than 2 samples)."""
    import lightgbm as lgb  # noqa: PLC0415

    from .trees import TVMModel, pack_sum_objective, stage_rows  # noqa: PLC0415

    if len(train) < 2 or rounds == 0:
        return TVMModel(
            base.booster, base.base + offset, {**base.config, "finetune": {"rounds": 0, "base_trees": base.booster.num_trees()}}
        )
    y = np.log(np.array([s.time_ms for s in train]))
    weights = label_weights(train)
    x, group = stage_rows(train)
    n_rounds = rounds or default_rounds(len(train))
    params = {
        # Continued boosting sees raw scores; the model's constant base is outside the trees.
        "objective": pack_sum_objective(y - (base.base + offset), group, weights),
        "learning_rate": 0.05, "num_leaves": 4, "min_data_in_leaf": max(5, min(20, len(x) // 20)), "lambda_l2": 1.0,
        "feature_fraction": 0.9, "verbose": -1, "seed": seed, "num_threads": 1, "deterministic": True, **params,
    }  # fmt: skip

    def report(env_: Any) -> None:
        if should_cancel is not None and should_cancel():
            raise Cancelled("fine-tuning cancelled")
        done = env_.iteration - env_.begin_iteration + 1  # the shipped trees' iterations come first
        if progress is not None and done % 10 == 0:
            progress("fitting", done, n_rounds)

    data = lgb.Dataset(x, feature_name=[f.name for f in F.FEATURES], free_raw_data=False)
    booster = lgb.train(params, data, num_boost_round=n_rounds, init_model=base.booster, callbacks=[report])
    return TVMModel(booster, base.base + offset, {**base.config, "finetune": {"rounds": n_rounds, "base_trees": base.booster.num_trees()}})


def save_finetuned(model: TVMModel, report: dict[str, Any], root: Path | None = None) -> Path:
    """Save `model` as the fine-tuned model in use (a new version directory, made current in one
    atomic step): tvm.txt / tvm.json (and a FineTunedModel's corrections.json), default.json
    naming it, finetune.json (the report)."""
    with new_version(root) as d:
        model.save(d, "tvm")
        write_json(d / "default.json", {"model": "tvm", "by": "costmodel finetune on this host's measurements"})
        write_json(d / "finetune.json", report, indent=1)
    return d


def load_finetuned(env: Environment, root: Path | None = None, allow_other_host: bool = False) -> FineTunedModel | None:
    """The fine-tuned model in use (None: none), refused when it is for another machine."""
    d = finetuned_dir(root)
    if d is None:
        return None
    from .finetuned import FineTunedModel  # noqa: PLC0415

    model = FineTunedModel.load(d)
    prior = model.config.get("finetuned_for")
    check_host(env, Environment.of(prior) if prior else None, f"fine-tuned model {d}", allow_other_host)
    return model


def reset(root: Path | None = None) -> bool:
    """Back to the shipped model (the default model is loaded again on its next use)."""
    from . import default_choice  # noqa: PLC0415

    had = reset_finetuned(root)
    default_choice.cache_clear()
    return had


def _ceiling(used: Environment, label: str) -> float | None:
    """The noise ceiling's tau of `used`'s machine (`costmodel noise` there, if run)."""
    from .noise import last_ceiling  # noqa: PLC0415

    return last_ceiling(used.host, used.target, label=label)


def _fit_and_judge(
    db_path: str | Path,
    samples: Sequence[Sample],
    used: Environment,
    base: tuple[TVMModel, Environment | None],
    ceiling: float | None,
    *,
    pipeline: str | None,
    holdout: float,
    max_train: int | None,
    rounds: int | None,
    seed: int,
    allow_other_host: bool,
    progress: Progress | None,
    should_cancel: Callable[[], bool] | None,
    label: str,
    per_pipeline: bool,
) -> tuple[FineTunedModel, dict[str, Any]]:
    """`finetune_on_db`'s fit of `samples` (of `used`, loaded from `db_path`) split by `seed`,
    from `base` (base_model(): loaded once by a caller that fits many splits), and its report
    (before/after on the held-out ones; `ceiling`: the noise ceiling's tau), nothing saved."""
    base_trees, base_env = base
    train, test = split_host(samples, holdout, seed, max_train)
    if len(train) < 2:
        raise ValueError(f"{db_path}: {len(samples)} measurements on {used.describe()}: too few to fine-tune on (need 3 or more)")
    model = fine_tune(base_trees, train, used, rounds=rounds, seed=seed, allow_other_host=allow_other_host, progress=progress,
                      should_cancel=should_cancel, label=label, per_pipeline=per_pipeline)  # fmt: skip
    judged = test or train  # no held-out measurement: in-sample, and said so
    before, after = sample_error(base_trees, judged), sample_error(model, judged)
    rep: dict[str, Any] = {
        "environment": used.to_list(), "host": used.describe(), "pipeline": pipeline,
        "base_environment": base_env.to_list() if base_env else None,
        "base_host": base_env.describe() if base_env else None, "host_differs": bool(base_env and not base_env.same_machine(used)),
        "n_train": len(train), "n_test": len(test), "held_out": bool(test), "pipelines": len({s.pipeline_hash for s in samples}),
        "rounds": model.config["finetune"]["rounds"], "label": label, "before": before.to_json(), "after": after.to_json(),
        "corrections": {
            ph: {"method": c.method, "n": c.n, "slope": c.slope, "cv_error": c.cv_error} for ph, c in model.corrections.items()
        },
        "median_error_cut": None if not before.median_abs_log else 1 - (after.median_abs_log or 0.0) / before.median_abs_log,
        "saved": None, "seconds": 0.0,
    }  # fmt: skip
    from .noise import fraction_of_ceiling  # noqa: PLC0415

    rep["noise_ceiling_tau"] = ceiling
    for key in ("before", "after"):
        rep[key]["tau_fraction_of_ceiling"] = fraction_of_ceiling(rep[key]["kendall_tau"], ceiling)
    return model, rep


def finetune_on_db(
    db_path: str | Path,
    env: Environment,
    *,
    pipeline: str | None = None,
    holdout: float = 0.3,
    max_train: int | None = None,
    rounds: int | None = None,
    seed: int = 0,
    allow_other_host: bool = False,
    save: bool = True,
    root: Path | None = None,
    progress: Progress | None = None,
    should_cancel: Callable[[], bool] | None = None,
    label: str = DEFAULT_LABEL,
    per_pipeline: bool = True,
    clock: str | None = None,
) -> dict[str, Any]:
    """Fine-tune the shipped trees on `env`'s measurements in `db_path` (labels of kind
    `label`, dataset.LABELS: by default the median run; of `clock`, dataset.load); before/after on
    the held-out ones, with the same labels; saved (when `save` and not worse on them).
    Returns the report."""
    t0 = time.time()
    if progress is not None:
        progress("loading", 0, 1)
    samples, used = host_samples(db_path, env, pipeline=pipeline, allow_other_host=allow_other_host, label=label, clock=clock)
    model, rep = _fit_and_judge(db_path, samples, used, base_model(), _ceiling(used, label), pipeline=pipeline, holdout=holdout,
                                max_train=max_train, rounds=rounds, seed=seed, allow_other_host=allow_other_host, progress=progress,
                                should_cancel=should_cancel, label=label, per_pipeline=per_pipeline)  # fmt: skip
    better = (rep["after"]["median_abs_log_error"] or 0.0) <= (rep["before"]["median_abs_log_error"] or 0.0)
    if save and better:
        if should_cancel is not None and should_cancel():
            raise Cancelled("fine-tuning cancelled")
        rep["saved"] = str(save_finetuned(model, rep, root))
        from . import default_choice  # noqa: PLC0415

        default_choice.cache_clear()  # the next prediction uses it
    elif save:
        rep["not_saved"] = "the fine-tuned model was not better on the held-out measurements; the current model is kept"
    rep["seconds"] = round(time.time() - t0, 2)
    return rep


def finetune_splits(
    db_path: str | Path,
    env: Environment,
    pipelines: Sequence[str],
    *,
    n_train: int = 50,
    splits: int = 5,
    label: str = DEFAULT_LABEL,
    allow_other_host: bool = False,
    progress: Progress | None = None,
    per_pipeline: bool = True,
    clock: str | None = None,
) -> dict[str, Any]:
    """The fine-tuning benchmark of issue 13: for each pipeline (its measurements of `env` in
    `db_path`, a pipeline no shipped model trained on), `splits` seeded splits into `n_train`
    measurements to fine-tune on and the rest to judge by (nothing saved); per pipeline the
    median over the splits of the median |log error| and Kendall tau before and after, then
    the median over the pipelines of the cut and the tau change, and on how many pipelines the
    error is halved, tau is better, and both (`target_met`: issue 13's target)."""
    out: dict[str, Any] = {"n_train": n_train, "splits": splits, "label": label, "per_pipeline": per_pipeline, "pipelines": {}}
    base: tuple[TVMModel, Environment | None] | None = None  # the shipped trees, loaded once for every fit
    for k, name in enumerate(pipelines):
        samples, used = host_samples(db_path, env, pipeline=name, allow_other_host=allow_other_host, label=label, clock=clock)
        if len(samples) < n_train + 5:
            raise ValueError(f"{db_path}: {len(samples)} measurements of {name}: need {n_train} to train on and 5 or more to judge by")
        base = base or base_model()
        ceiling = _ceiling(used, label)
        runs = []
        for sp in range(splits):
            _, rep = _fit_and_judge(db_path, samples, used, base, ceiling, pipeline=name, holdout=1 - n_train / len(samples),
                                    max_train=None, rounds=None, seed=sp, allow_other_host=allow_other_host, progress=None,
                                    should_cancel=None, label=label, per_pipeline=per_pipeline)  # fmt: skip
            runs.append({key: rep[key] for key in ("n_train", "n_test", "before", "after", "corrections")})
        med = {f"{w}_{m}": float(np.median([r[w][m] for r in runs if r[w][m] is not None]))
               for w in ("before", "after") for m in ("median_abs_log_error", "kendall_tau")}  # fmt: skip
        med["cut"] = 1 - med["after_median_abs_log_error"] / med["before_median_abs_log_error"]
        out["pipelines"][name] = {**med, "splits": runs, "environment": used.to_list()}
        if progress is not None:
            progress("pipelines", k + 1, len(pipelines))
    rows = list(out["pipelines"].values())
    out["median_cut"] = float(np.median([r["cut"] for r in rows]))
    out["median_tau_change"] = float(np.median([r["after_kendall_tau"] - r["before_kendall_tau"] for r in rows]))
    out["halved"] = sum(r["cut"] >= 0.5 for r in rows)
    out["tau_improved"] = sum(r["after_kendall_tau"] > r["before_kendall_tau"] for r in rows)
    # the target, per pipeline: the error at least halved *and* tau better
    out["target_met"] = sum(r["cut"] >= 0.5 and r["after_kendall_tau"] > r["before_kendall_tau"] for r in rows)
    return out


# --- a new host -----------------------------------------------------------------------------
def _samples(items: Sequence[Any], ms: dict[tuple[str, str], tuple[float, float]]) -> list[Sample]:
    """Samples of the items measured (time, spread), features from the items themselves."""
    from .dataset import sample_of  # noqa: PLC0415

    return [sample_of(it.pipeline, it.schedule, ms[it.key][0], spread=ms[it.key][1]) for it in items if it.key in ms]


def calibrate_host(
    db_path: str | Path,
    runner: MeasureRunner,
    *,
    pipelines: int = 16,
    per_pipeline: int = 10,
    eval_pipelines: int = 0,
    budget_s: float = 600.0,
    seed: int = 0,
    save: bool = True,
    root: Path | None = None,
    progress: Progress | None = None,
    should_cancel: Callable[[], bool] | None = None,
    clock: str = "wall",
) -> dict[str, Any]:
    """On a new host: measure a standard set of shipped dataset schedules (pipelines the
    shipped models trained on) within `budget_s`, and fine-tune the shipped trees on them.
    With `eval_pipelines`, also measure that many of the shipped models' held-out pipelines
    (after the budget) and report tau on them: the shipped model against the original
    host's labels, and before / after against this host's fresh measurements. `clock`:
    measure.CLOCKS ("thread_cpu" only with a 1-thread runner: the other threads' time is not
    counted)."""
    check_clock(clock, runner.threads)
    from .export import shipped_db  # noqa: PLC0415
    from .noise import fixed_sample  # noqa: PLC0415

    t0, load0 = time.time(), os.getloadavg()[0]
    src = shipped_db()
    info = read_json(SHIPPED / "split.json")
    held = set(info.get("holdout_pipelines", []))
    env = Environment(runner.target, runner.host, runner.threads)
    items = fixed_sample(src, pipelines, per_pipeline, seed, exclude=held)
    evals = fixed_sample(src, eval_pipelines, per_pipeline, seed, only=held) if eval_pipelines else []
    got: dict[tuple[str, str], tuple[float, float]] = {}

    def run(batch: Sequence[Any], phase: str, limit: float) -> None:
        start = time.time()
        with Database(db_path) as db:
            for k, it in enumerate(batch):
                if time.time() - start > limit:
                    break
                if should_cancel is not None and should_cancel():
                    raise Cancelled(f"{phase} cancelled")
                m = api.measure(it.pipeline, it.schedule, runner, db, **{**JOB_OPTIONS, "clock": clock})
                if m.ok and m.verified and m.median_ms:
                    got[it.key] = (label_of(m, DEFAULT_LABEL), float((m.iqr_ms or 0.0) / m.median_ms))
                if progress is not None:
                    progress(phase, k + 1, len(batch))

    run(items, "measuring the standard set", budget_s)
    measured_s = round(time.time() - t0, 1)
    train = _samples(items, got)
    if len(train) < 2:
        raise ValueError(f"calibrate-host: only {len(train)} of {len(items)} standard schedules measured within {budget_s:g} s")
    base, base_env = base_model()
    model = fine_tune(base, train, env, seed=seed, progress=progress, should_cancel=should_cancel)
    rep: dict[str, Any] = {
        "environment": env.to_list(), "host": env.describe(), "base_environment": base_env.to_list() if base_env else None,
        "base_host": base_env.describe() if base_env else None, "host_differs": bool(base_env and not base_env.same_machine(env)),
        "standard_set": len(items), "measured": len(train), "clock": clock,
        "measure_seconds": measured_s, "load_before": load0,
        "train_fit": {"before": sample_error(base, train).to_json(), "after": sample_error(model, train).to_json()},
    }  # fmt: skip
    if evals:
        run(evals, "measuring held-out pipelines", math.inf)
        fresh = _samples(evals, got)
        original = [sample_of_item(it) for it in evals if it.key in got]
        rep["eval"] = {
            "pipelines": len({s.pipeline_hash for s in fresh}), "samples": len(fresh),
            "original_host": sample_error(base, original).to_json(),
            "this_host_before": sample_error(base, fresh).to_json(), "this_host_after": sample_error(model, fresh).to_json(),
        }  # fmt: skip
    if save:
        rep["saved"] = str(save_finetuned(model, rep, root))
        from . import default_choice  # noqa: PLC0415

        default_choice.cache_clear()
    rep["seconds"], rep["load_after"] = round(time.time() - t0, 1), os.getloadavg()[0]
    return rep


def sample_of_item(it: Any) -> Sample:
    """A noise/standard-set item as a sample with its stored (original host's) label."""
    from .dataset import sample_of  # noqa: PLC0415

    return sample_of(it.pipeline, it.schedule, it.stored_ms)


def host_note(choice: Any, env: Environment) -> str:
    """What to tell the user about the model in use (`costmodel.default_choice()`) on `env`'s
    machine: "" when it was trained or fine-tuned here (or is the analytic estimate), else
    which machine it comes from, briefly (the target features that machine had and this one
    lacks, e.g. "with avx512, avx512_cannonlake, …")."""
    if choice.source == "analytic":
        return ""
    d = Path(choice.source)
    try:
        name = read_json(d / "default.json").get("model")
        trained = model_environment(d, str(name)) if isinstance(name, str) else None
    except ValueError:
        return ""
    if trained is None:
        return "the model does not record the machine it was trained on"
    other = Environment.of(trained)
    if other.same_machine(env):
        return ""
    mine, theirs = set(env.target.split("-")), other.target.split("-")
    extra = [f for f in theirs if f not in mine and not f.startswith("tune_")]
    what = f"with {', '.join(extra[:2])}{', …' if len(extra) > 2 else ''}" if extra else other.host
    return f"trained on another machine ({what})"
