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

Predictions: a stage's score depends on its feature row alone, so `predict_many` caches
scores per pipeline by the row's value (capped, emptied with the pipeline's other caches):
a one-stage mutation scores only the rows it changed. The rows a batch misses are scored
single-threaded below THREADED_ROWS rows (on this 2-core machine under load, LightGBM's
threads cost 1-8 ms of wake-up per call and were slower at every batch size measured, 10
to 60,000 rows: about 7 us a row on one). Below FAST_ROWS rows each goes through
LightGBM's single-row fast path (its C API's `...SingleRowFast`, configured once per
booster): `Booster.predict` sets up a predictor per call, 28 us for one row against 11 us
(8 us a row either way from about 32 rows; Sapphire Rapids, rows of varied values). The
same trees and traversal, so the same doubles (tested).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import lightgbm as lgb
import numpy as np

from ..ir import Pipeline
from ..loopnest import LRU, LoopNest, gc_paused, pipeline_cache
from ..schedule import Schedule
from . import features as F
from .base import Prediction, nests_of, predictions
from .dataset import Sample
from .files import ModelFileError, lightgbm_text, read_metadata, write_bytes, write_json
from .targets import LearnedModel, clip_predictions, log_range, targets_of

TVM_NAME = "TVM-style LightGBM pack-sum (learned prediction)"
THREADED_ROWS = 20_000  # rows from which LightGBM may use its threads
FAST_ROWS = 32  # rows below which each is scored by the single-row fast path
SCORE_CACHE = 20_000  # rows per pipeline and model (~0.5 KB each), as many as features.ROW_CACHE
_SERIAL = itertools.count()  # names each model's caches: two models never share scores


@functools.lru_cache(maxsize=64)
def _nest_index(nests: int, stages: int) -> np.ndarray:
    """Each element's nest in a [nests, stages] array, flattened (read-only: shared)."""
    out = np.repeat(np.arange(nests), stages)
    out.flags.writeable = False
    return out


class _Scores:
    """One model's raw scores on one pipeline's rows, by the row's bytes."""

    def __init__(self) -> None:
        self.scores: LRU[bytes, float] = LRU(SCORE_CACHE)
        self.by_key: LRU[tuple, float] = LRU(SCORE_CACHE)  # the same scores by the row's `F.row_key`


# LightGBM's C API, which its Python package wraps without a public single-row call: the
# loaded library, and the values of c_api.h's C_API_PREDICT_RAW_SCORE and C_API_DTYPE_FLOAT64.
_LIB = lgb.basic._LIB
_PREDICT_RAW_SCORE = 1
_DTYPE_FLOAT64 = 1


def _check(rc: int) -> None:
    if rc != 0:
        raise lgb.basic.LightGBMError(_LIB.LGBM_GetLastError().decode("utf-8"))


class _FastRows:
    """LightGBM's single-row fast predict of one booster's raw scores (float64 rows of
    `n_features`): the configuration `Booster.predict` would make per call, made once.
    Calls hold a lock: the configuration's buffers are per OpenMP thread, which every
    Python thread calling in from outside OpenMP shares."""

    def __init__(self, booster: lgb.Booster) -> None:
        self.booster, self.trees = booster, booster.num_trees()
        self.n_features = booster.num_feature()
        self.lock = threading.Lock()
        self.handle = ctypes.c_void_p()
        _check(
            _LIB.LGBM_BoosterPredictForMatSingleRowFastInit(
                booster._handle,  # the booster's C handle (no public accessor)
                ctypes.c_int(_PREDICT_RAW_SCORE),
                ctypes.c_int(0),  # start_iteration, as Booster.predict's default ...
                ctypes.c_int(booster.best_iteration),  # ... and the num_iteration it then takes
                ctypes.c_int(_DTYPE_FLOAT64),
                ctypes.c_int32(self.n_features),
                ctypes.c_char_p(b"num_threads=1"),
                ctypes.byref(self.handle),
            )
        )
        self._free = _LIB.LGBM_FastConfigFree  # bound now: module globals may be gone when __del__ runs at exit
        self._out = np.empty(1, dtype=np.float64)
        self._out_ptr = self._out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        self._n = ctypes.c_int64(0)

    def usable_for(self, booster: lgb.Booster) -> bool:
        """Still the model `booster` is (the same object with as many trees)?"""
        return booster is self.booster and booster.num_trees() == self.trees

    def scores(self, x: np.ndarray) -> list[float]:
        """The raw score of each row of `x` (C-contiguous float64, `n_features` columns)."""
        if x.ndim != 2 or x.dtype != np.float64 or not x.flags.c_contiguous or x.shape[1] != self.n_features:
            # The C call reads n_features doubles a row: anything else would read past the row.
            raise ValueError(f"rows of {x.shape} {x.dtype} for a booster of {self.n_features} features (C-contiguous float64 needed)")
        call, handle, out = _LIB.LGBM_BoosterPredictForMatSingleRowFast, self.handle, self._out
        n, out_ptr = ctypes.byref(self._n), self._out_ptr
        base, stride, res = x.ctypes.data, x.strides[0], []
        with self.lock:
            for i in range(len(x)):
                _check(call(handle, ctypes.c_void_p(base + i * stride), n, out_ptr))
                res.append(float(out[0]))
        return res

    def __del__(self) -> None:
        if getattr(self, "handle", None) is not None and self.handle.value and getattr(self, "_free", None) is not None:
            self._free(self.handle)


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


def stage_rows(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """The rows the trees score (costed stages) and each row's sample index: what fitting, and
    continued boosting (finetune.py), train on."""
    return _rows(samples)


def pack_sum_objective(y: np.ndarray, group: np.ndarray, weights: np.ndarray | None = None) -> Any:
    """The pack-sum loss's gradient and hessian for LightGBM (targets `y` per sample, `group` the
    sample of each row), each sample's terms scaled by its weight (a label's reliability)."""
    inner = _pack_sum_objective(y, group)
    if weights is None:
        return inner
    w = np.asarray(weights, float)[group]

    def objective(preds: np.ndarray, data: lgb.Dataset) -> tuple[np.ndarray, np.ndarray]:
        g, h = inner(preds, data)
        return g * w, h * w + 1e-6

    return objective


class TVMModel(LearnedModel):
    """LightGBM per-stage log costs, summed per pipeline (pack-sum)."""

    kind = "lightgbm"

    def __init__(self, booster: lgb.Booster, base: float, config: dict[str, Any]) -> None:
        self.booster, self.base, self.config, self.name = booster, base, config, TVM_NAME
        self._cache_name = f"tvm-scores-{next(_SERIAL)}"

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

    def raw_scores(self, x: np.ndarray, pipeline: Pipeline | None = None) -> np.ndarray:
        """The trees' raw score of each row of `x`: the distinct rows not cached with
        `pipeline` (all when None) from one LightGBM call (a row's score depends on it alone)."""
        cache = pipeline_cache(pipeline, self._cache_name, _Scores).scores if pipeline is not None else LRU[bytes, float](len(x))
        out = np.empty(len(x))
        missed: dict[bytes, list[int]] = {}
        for i, row in enumerate(x):
            key = row.tobytes()
            v = cache.get(key)
            if v is None:
                missed.setdefault(key, []).append(i)
            else:
                out[i] = v
        if missed:
            first = [ix[0] for ix in missed.values()]
            for (key, ix), v in zip(missed.items(), self._booster_scores(np.ascontiguousarray(x[first], dtype=np.float64))):
                out[ix] = cache.put(key, v)
        return out

    def _booster_scores(self, x: np.ndarray) -> list[float]:
        """LightGBM's raw scores of the rows `x`: one at a time by the fast path below
        FAST_ROWS rows, else one `Booster.predict`, threaded from THREADED_ROWS (module doc)."""
        if len(x) >= FAST_ROWS:
            threads = 1 if len(x) < THREADED_ROWS else 0  # 0: LightGBM's default
            raw = self.booster.predict(x, raw_score=True, num_threads=threads)
            assert isinstance(raw, np.ndarray), "a dense input gives a dense prediction"  # the stubs also allow sparse ones
            return raw.tolist()
        fast: _FastRows | None = getattr(self, "_fast", None)
        if fast is None or not fast.usable_for(self.booster):
            fast = self._fast = _FastRows(self.booster)
        return fast.scores(x)

    def predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None = None) -> list[Prediction]:
        """`predict_samples` of the schedules' features, without building them where it can:
        a stage's score depends on its feature row alone, and the row on its `F.row_key`, so
        scores are cached per pipeline by that key; only the rows of keys not seen are built
        and scored (one LightGBM call), and no edge features (the trees do not read them).
        The arithmetic after the scores is `predict_samples`' own, so the results are equal."""
        with gc_paused():
            return self._predict_many(p, schedules, nests)

    def _predict_many(self, p: Pipeline, schedules: Sequence[Schedule], nests: Sequence[LoopNest | None] | None) -> list[Prediction]:
        built = nests_of(p, schedules, nests)
        if not built:
            return []
        cache = pipeline_cache(p, self._cache_name, _Scores).by_key
        names = [st.name for st in p.stages]
        pos = {name: k for k, name in enumerate(names)}
        # Per nest, each stage's raw score (None: inlined, not costed as in `Sample.costed`), or
        # the row key of a score still to compute. A nest built from a parent that this model
        # scored starts from the parent's scores and looks up only the stages whose key may differ.
        per_nest: list[list] = []
        in_batch: dict[int, list] = {}  # a parent earlier in this batch: its entries, keys not yet scored
        missed: dict[tuple, None] = {}
        misses: list[tuple[LoopNest, str, tuple]] = []
        # Per nest, the positions that may still hold a key, without repeats (a chain's nests
        # inherit their parent's: as lists they grew with the chain, quadratic in a batch).
        pending: list[dict[int, None]] = []
        pending_of: dict[int, dict[int, None]] = {}
        for nest in built:
            ctx = nest.context
            parent = ctx.parent() if ctx.parent is not None else None
            prev = None if parent is None else in_batch.get(id(parent), parent.derived.get(self._cache_name))
            own = ctx.derived.get(self._cache_name)  # this nest scored before (the app predicts a nest again)
            todo: Iterable[str] = names
            pend: dict[int, None] = {}
            if isinstance(own, list):
                entries, todo = list(own), ()
            elif isinstance(prev, list) and ctx.dirty is not None:
                entries, todo = list(prev), ctx.dirty
                pend = dict.fromkeys(pending_of.get(id(parent), ()))  # keys a parent in this batch left
            else:
                entries = [None] * len(names)
            pls = nest.placements
            for name in todo:
                k = pos[name]
                if pls[name].compute == "inline":
                    entries[k] = None
                    continue
                key = F.row_key(nest, name)
                v = cache.get(key)
                if v is None:
                    if key not in missed:
                        missed[key] = None
                        misses.append((nest, name, key))
                    entries[k] = key
                    pend[k] = None
                else:
                    entries[k] = v
            in_batch[id(ctx)] = entries
            pending_of[id(ctx)] = pend
            per_nest.append(entries)
            pending.append(pend)
        scores: dict[tuple, float] = {}
        if misses:
            for key, v in zip(missed, self.raw_scores(F.rows_of(misses)).tolist()):
                scores[key] = cache.put(key, v)
        for nest, entries, pend in zip(built, per_nest, pending):  # keys become their scores; a later nest may start from these
            for k in pend:
                v = entries[k]
                if type(v) is tuple:
                    entries[k] = scores[v]
            nest.context.derived[self._cache_name] = entries
        raw = np.array(per_nest, dtype=np.float64)  # [nests, stages]; None (inlined, not costed) becomes NaN: scores are finite
        mask = ~np.isnan(raw)
        ms = np.zeros(raw.shape)
        ms[mask] = np.exp(self.base + raw[mask])  # the same elements in the same order as `predict_samples`' exp
        # Per nest, its stages summed in stage order as `predict_samples`' bincount sums them: the
        # zeros of the stages not costed add nothing (x + 0.0 is x): one index of every element, cached per shape.
        # The rows of `ms` are views: clipped in place. (A search predicts a few schedules a call:
        # these arrays are its fixed cost per call.)
        totals = np.bincount(_nest_index(*ms.shape), ms.ravel(), minlength=len(built))
        clipped = clip_predictions(totals, list(ms), self.config).tolist()
        return predictions(self.name, p, clipped, cast(list[list[float]], ms.tolist()))  # one tolist: Python floats, not numpy scalars

    def predict_samples(self, samples: Sequence[Sample], pipeline: Pipeline | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        if not samples:
            return np.zeros(0), []
        x = np.concatenate([s.nodes for s in samples])  # every stage; inlined ones cost 0 below
        costed = np.concatenate([s.costed for s in samples])
        graph = np.repeat(np.arange(len(samples)), [len(s.nodes) for s in samples])
        ms = np.zeros(len(x))
        ms[costed] = np.exp(self.base + self.raw_scores(x[costed], pipeline))
        totals = np.bincount(graph[costed], ms[costed], minlength=len(samples))
        stages = np.split(ms, np.cumsum([len(s.nodes) for s in samples])[:-1])
        return clip_predictions(totals, stages, self.config), stages

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
        if booster.num_feature() != len(F.FEATURES):
            raise ModelFileError(f"{d / stem}.txt: trees over {booster.num_feature()} features, this version's rows have {len(F.FEATURES)}")
        return TVMModel(booster, base, cfg)
