"""`bench costmodel`: predictions per second of every cost model, and the app's edit latency.

For each pipeline (the zoo at full size and an imported ResNet-50, exported by PyTorch at
run time from resources/models/make_models.py with random weights: nothing is downloaded)
two workloads are drawn before any timing, with one seed:

  fresh     `n` random legal schedules (engine.sampler.sample_schedule)
  mutation  a chain of `n` one-stage mutations, each of the previous one (engine.sampler.mutate:
            what a search walks); the chain's start is predicted first, untimed

and each model predicts them one `predict` at a time and with `predict_many` in batches of
`batch`. Every round starts with the pipeline's caches empty (engine.costmodel.features.clear_caches:
loop-nest placements and regions, feature rows, the analytic terms, the trees' row scores)
and they stay warm within the round (the dropped caches are collected before the clock
starts: a full collection of the previous round's garbage made a round ~10x slower); the
median rate of the rounds is reported with the slowest and fastest. `features` is what the learned models spend before inference (loop
nest with validation, then the feature arrays), one schedule at a time.

Edit latency is what the app does when a schedule is edited (app/model/edits.py, then
app/model/document.py's `_apply`), without Qt: the edit's validation and hash, the loop nest
(not validated again: the edit just was), the schedule hash, the loop-nest text with its spans and the default
model's prediction from that nest. Edits are one-stage mutations applied in sequence, the
previous one predicted (the app shows it); median and 95th percentile over the edits, wall
clock and (`cpu_*`) this process's CPU time.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api, loopnest, zoo
from .. import halide_backend as HB
from ..costmodel import CostModel, default_choice, model_by_name
from ..costmodel import features as F
from ..ir import Pipeline
from ..measure import host_fingerprint, machine_record
from ..sampler import mutate, sample_schedule
from ..schedule import Schedule, validate

MODELS = ("analytic", "tvm", "gnn", "halide")
RESNET50 = "resnet50"
LATENCY_PIPELINES = ("harris", RESNET50)
LARGE_STAGES = 60  # pipelines with more stages get `n_large` schedules per workload (a ResNet-50 samples ~3/s)


def pipeline_names() -> list[str]:
    return [*zoo.names(), RESNET50]


def resnet50(size: int = 224, width: int = 64) -> Pipeline:
    """ResNet-50 exported by PyTorch and imported from ONNX (the file and its weights are
    cached in the temp directory: the export takes a while, the import is what is used)."""
    from ..frontends import import_onnx  # noqa: PLC0415
    from .importing import export_resnet50  # noqa: PLC0415  # torch only for this pipeline

    d = Path(tempfile.gettempdir()) / f"bench-costmodel-resnet50-{os.getuid()}"
    d.mkdir(exist_ok=True)
    path = d / f"resnet50_{size}_{width}.onnx"
    if not path.exists():
        export_resnet50(path, size, width)
    return import_onnx(path, d).pipeline


def load_pipeline(name: str) -> Pipeline:
    return resnet50() if name == RESNET50 else zoo.get(name, "full")


@dataclass
class Workload:
    """The schedules timed on one pipeline: fresh samples, and a mutation chain whose
    first schedule is the start (predicted untimed) and the rest one mutation each."""

    fresh: list[Schedule]
    chain: list[Schedule]


def workload(p: Pipeline, n: int, seed: int) -> Workload:
    rng = random.Random(seed)
    fresh = [sample_schedule(p, rng) for _ in range(n)]
    chain = [fresh[0]]
    while len(chain) <= n:
        chain.append(mutate(p, chain[-1], rng))
    return Workload(fresh, chain)


def spread(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    """Median of the rounds with the slowest and fastest, and every round."""
    return {
        "median": round(statistics.median(values), digits), "min": round(min(values), digits), "max": round(max(values), digits),
        "rounds": [round(v, digits) for v in values],
    }  # fmt: skip


def _rate(
    run: Callable[[Sequence[Schedule]], object], p: Pipeline, scheds: Sequence[Schedule], rounds: int, start: Schedule | None
) -> dict[str, Any]:
    """Schedules per second of `run` over `scheds`, per round, caches emptied first (then
    `start`, when given, run untimed: a search has predicted what it mutates): wall-clock
    rates, and under `cpu_per_s` the rates by this process's CPU time (what one core does,
    less sensitive to other jobs on a shared machine)."""
    out, cpu = [], []
    for _ in range(rounds):
        F.clear_caches(p)
        if start is not None:
            run([start])
        gc.collect()  # the caches just dropped are garbage of the reset, not of the round
        t, c = time.perf_counter(), time.process_time()
        run(scheds)
        out.append(len(scheds) / (time.perf_counter() - t))
        cpu.append(len(scheds) / max(time.process_time() - c, 1e-9))
    return {**spread(out), "cpu_per_s": spread(cpu)}


def _singles(model: CostModel, p: Pipeline) -> Callable[[Sequence[Schedule]], object]:
    return lambda scheds: [model.predict(p, s) for s in scheds]


def _batches(model: CostModel, p: Pipeline, batch: int) -> Callable[[Sequence[Schedule]], object]:
    return lambda scheds: [model.predict_many(p, scheds[k : k + batch]) for k in range(0, len(scheds), batch)]


def _features(p: Pipeline) -> Callable[[Sequence[Schedule]], object]:
    return lambda scheds: [F.featurize(loopnest.build(p, s)) for s in scheds]


def model_rates(model: CostModel, p: Pipeline, w: Workload, rounds: int, batch: int) -> dict[str, dict[str, Any]]:
    """Per workload (fresh, mutation): `predict` one at a time and `predict_many` in batches."""
    out: dict[str, dict[str, Any]] = {}
    for kind, scheds, start in (("fresh", w.fresh, None), ("mutation", w.chain[1:], w.chain[0])):
        out[kind] = {
            "predict_per_s": _rate(_singles(model, p), p, scheds, rounds, start),
            "predict_many_per_s": _rate(_batches(model, p, batch), p, scheds, rounds, start),
        }
    return out


def feature_rates(p: Pipeline, w: Workload, rounds: int) -> dict[str, dict[str, Any]]:
    """Loop nests (validated) and feature arrays per second, one schedule at a time."""
    return {
        "fresh": {"per_s": _rate(_features(p), p, w.fresh, rounds, None)},
        "mutation": {"per_s": _rate(_features(p), p, w.chain[1:], rounds, w.chain[0])},
    }


def edit_latency(model: CostModel, p: Pipeline, w: Workload) -> dict[str, Any]:
    """Milliseconds from an edit to its prediction, as the app computes it (module doc)."""
    F.clear_caches(p)
    model.predict(p, w.chain[0])  # the schedule on screen before the first edit
    phases: dict[str, list[float]] = {"edit_validate": [], "loopnest": [], "text": [], "predict": []}
    totals, cpu = [], []
    for s in w.chain[1:]:
        c0 = time.process_time()
        t0 = time.perf_counter()
        validate(p, s)  # edits.with_directives validates the new schedule ...
        s.content_hash()  # ... and compares its hash with the old one
        t1 = time.perf_counter()
        nest = loopnest.build(p, s, check=False)  # Document._apply: the loop nest (an edit was just validated) ...
        s.content_hash()
        t2 = time.perf_counter()
        nest.render_with_spans()  # ... the loop-nest text with per-stage spans ...
        t3 = time.perf_counter()
        model.predict(p, s, nest=nest)  # ... and the prediction from that nest
        t4 = time.perf_counter()
        for k, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            phases[k].append(dt * 1e3)
        totals.append((t4 - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return {
        "model": model.name, "edits": len(totals), "median_ms": round(statistics.median(totals), 3), "p95_ms": round(_p95(totals), 3),
        "max_ms": round(max(totals), 3), "phase_median_ms": {k: round(statistics.median(v), 3) for k, v in phases.items()},
        "cpu_median_ms": round(statistics.median(cpu), 3), "cpu_p95_ms": round(_p95(cpu), 3),
    }  # fmt: skip


def _p95(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def load_models(keys: Sequence[str]) -> dict[str, CostModel]:
    """The models by key; one that is not trained or does not load is one clear error."""
    out = {}
    for key in keys:
        if key not in MODELS:
            raise api.InputError(f"unknown cost model {key!r} (choose from {', '.join(MODELS)})")
        try:
            out[key] = model_by_name(key)
        except (OSError, ValueError) as exc:  # ModelFileError is a ValueError
            raise api.InputError(f"cost model {key}: {exc}") from None
    return out


def machine() -> dict[str, Any]:
    return {**machine_record(host_fingerprint(), HB.target_string()), "load_avg_1m": os.getloadavg()[0]}


def bench_costmodel(
    models: Sequence[str] = MODELS,
    pipelines: Sequence[str] | None = None,
    *,
    n: int = 64,
    n_large: int = 16,
    batch: int = 64,
    rounds: int = 3,
    latency: Sequence[str] = LATENCY_PIPELINES,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Rates of `models` (keys of MODELS) on `pipelines` (zoo names or 'resnet50'; default
    all of them), and the default model's edit latency on the `latency` pipelines: `n`
    schedules per workload, `n_large` on pipelines of more than LARGE_STAGES stages. Progress
    goes to `log` (default: stderr)."""
    for what, got in (("n", n), ("n_large", n_large), ("batch", batch), ("rounds", rounds)):
        if got < 1:
            raise api.InputError(f"bench costmodel: {what} must be at least 1, got {got}")
    names = list(pipelines) if pipelines is not None else pipeline_names()
    unknown = [x for x in [*names, *latency] if x not in pipeline_names()]
    if unknown:
        raise api.InputError(f"unknown pipeline {', '.join(map(repr, unknown))} (choose from {', '.join(pipeline_names())})")
    t0, before = time.time(), machine()
    loaded = load_models(models)
    default = default_choice().model
    say = log or (lambda msg: print(f"[bench costmodel] {msg}", file=sys.stderr, flush=True))
    results: dict[str, Any] = {}
    latencies: dict[str, Any] = {}
    for name in dict.fromkeys([*names, *latency]):  # each pipeline built and sampled once
        p = load_pipeline(name)
        count = n_large if len(p.stages) > LARGE_STAGES else n
        w = workload(p, count, seed)
        if name in names:
            res: dict[str, Any] = {"stages": len(p.stages), "n": count, "features": feature_rates(p, w, rounds), "models": {}}
            for key, m in loaded.items():
                m.predict(p, w.fresh[0])  # imports and first-use costs, untimed
                res["models"][key] = model_rates(m, p, w, rounds, batch)
                r = res["models"][key]
                med = {k: (v["predict_per_s"]["median"], v["predict_many_per_s"]["median"]) for k, v in r.items()}
                rates = "; ".join(f"{k} {one:.0f}/s, batched {many:.0f}/s" for k, (one, many) in med.items())
                say(f"{name} ({len(p.stages)} stages) {key}: {rates}")
            results[name] = res
        if name in latency:
            latencies[name] = {"stages": len(p.stages), **edit_latency(default, p, w)}
            say(f"{name}: edit -> prediction median {latencies[name]['median_ms']:.1f} ms, p95 {latencies[name]['p95_ms']:.1f} ms")
    out: dict[str, Any] = {
        "models": {k: m.name for k, m in loaded.items()}, "default_model": default.name, "n": n, "n_large": n_large, "batch": batch,
        "rounds": rounds, "seed": seed, "pipelines": results, "edit_latency": latencies,
        "machine": {**before, "load_avg_1m_after": os.getloadavg()[0]}, "wall_s": round(time.time() - t0, 1),
    }  # fmt: skip
    out["table"] = table(out)
    return out


def _cell(s: dict[str, Any]) -> str:
    return f"{s['median']:.0f} ({s['min']:.0f}–{s['max']:.0f})"


def table(r: dict[str, Any]) -> str:
    """Markdown: one row per pipeline and model, rates as median (min–max) per second."""
    lines = [
        f"predictions per second, median of {r['rounds']} rounds (min–max); n schedules per workload; predict_many in batches "
        f"of {r['batch']}; {r['machine']['host']}, {r['machine']['target']}",
        "| pipeline | stages | n | model | fresh predict | fresh predict_many | mutation predict | mutation predict_many |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, res in r["pipelines"].items():
        f = res["features"]
        head = f"| {name} | {res['stages']} | {res['n']} |"
        lines.append(f"{head} (features only) | {_cell(f['fresh']['per_s'])} | | {_cell(f['mutation']['per_s'])} | |")
        for key, m in res["models"].items():
            cells = [_cell(m[k][v]) for k in ("fresh", "mutation") for v in ("predict_per_s", "predict_many_per_s")]
            lines.append(f"{head} {key} | " + " | ".join(cells) + " |")
    if r["edit_latency"]:
        lines += [
            "",
            f"edit -> prediction ({r['default_model']}), ms:",
            "| pipeline | stages | median | p95 | phases (median) |",
            "|---|---|---|---|---|",
        ]
        for name, e in r["edit_latency"].items():
            ph = ", ".join(f"{k} {v:.2f}" for k, v in e["phase_median_ms"].items())
            lines.append(f"| {name} | {e['stages']} | {e['median_ms']:.2f} | {e['p95_ms']:.2f} | {ph} |")
    return "\n".join(lines)
