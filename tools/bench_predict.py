"""Predictions per second of the default cost model (a timing script, not a test).

For each pipeline (zoo, full size; optionally an imported ResNet-50): (a) fresh random
schedules (engine.sampler.sample_schedule) and (b) one-stage mutations of a schedule
(engine.sampler.mutate, each of the previous one: what a search walks). The schedules are
drawn before timing; timed are `model.predict(pipeline, schedule)` and, apart, what it spends
on features (`loopnest.build` with validation, then `features.featurize`). Caches start empty
at each round (engine.features.clear_caches where it exists) and stay warm within a round.

    .venv/bin/python tools/bench_predict.py [--n 40] [--rounds 3] [--resnet50] [pipeline ...]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from engine import features as F
from engine import loopnest, zoo
from engine.costmodel import default_model
from engine.ir import Pipeline
from engine.sampler import mutate, sample_schedule
from engine.schedule import Schedule

DEFAULT_PIPELINES = ("harris", "conv_relu", "unsharp", "resnet_block")


def resnet50(size: int = 224) -> Pipeline:
    """ResNet-50 exported by PyTorch and imported from ONNX (cached in the temp directory)."""
    from engine.bench.importing import export_resnet50  # noqa: PLC0415
    from engine.frontends import import_onnx  # noqa: PLC0415

    d = Path(tempfile.gettempdir()) / "bench-predict-resnet50"
    d.mkdir(exist_ok=True)
    path = d / f"resnet50_{size}.onnx"
    if not path.exists():
        export_resnet50(path, size, 64)
    return import_onnx(path, d).pipeline


def _clear(p: Pipeline) -> None:
    clear = getattr(F, "clear_caches", None)  # absent before issue 12
    if clear is not None:
        clear(p)


def predict(p: Pipeline, s: Schedule) -> object:
    return default_model().predict(p, s)


def featurize(p: Pipeline, s: Schedule) -> object:
    """What the default model's prediction spends on features: the loop nest (validation
    included) and its feature arrays."""
    return F.featurize(loopnest.build(p, s))


def rate(fn: Callable[[Pipeline, Schedule], object], p: Pipeline, scheds: list, rounds: int, warm: Schedule | None = None) -> float:
    """Median over rounds of calls per second of `fn` on `scheds` (after one on `warm`,
    untimed: a search has predicted the schedule it mutates)."""
    out = []
    for _ in range(rounds):
        _clear(p)
        if warm is not None:
            fn(p, warm)
        t = time.perf_counter()
        for s in scheds:
            fn(p, s)
        out.append(len(scheds) / (time.perf_counter() - t))
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipelines", nargs="*", default=list(DEFAULT_PIPELINES))
    ap.add_argument("--n", type=int, default=40, help="schedules per kind and round (default 40)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--resnet50", action="store_true", help="also an imported ResNet-50 (needs torch)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pipes = [zoo.get(n, "full") for n in args.pipelines] + ([resnet50()] if args.resnet50 else [])
    m = default_model()
    results = {}
    for p in pipes:
        rng = random.Random(args.seed)
        fresh = [sample_schedule(p, rng) for _ in range(args.n)]
        chain = [fresh[0]]
        while len(chain) <= args.n:
            chain.append(mutate(p, chain[-1], rng))
        m.predict(p, fresh[0])  # imports, model load
        res: dict[str, float] = {"stages": len(p.stages)}
        for what, fn in (("predict", predict), ("featurize", featurize)):
            res[f"{what}_fresh_per_s"] = round(rate(fn, p, fresh, args.rounds), 1)
            res[f"{what}_mutation_per_s"] = round(rate(fn, p, chain[1:], args.rounds, warm=chain[0]), 1)
        results[p.name] = res
        print(
            f"{p.name:14s} stages {len(p.stages):4d}  predict: fresh {res['predict_fresh_per_s']:8.1f}/s mutation "
            f"{res['predict_mutation_per_s']:8.1f}/s   featurize: fresh {res['featurize_fresh_per_s']:8.1f}/s mutation "
            f"{res['featurize_mutation_per_s']:8.1f}/s",
            flush=True,
        )
    print(json.dumps({"model": m.name, "n": args.n, "rounds": args.rounds, "results": results}, indent=1))


if __name__ == "__main__":
    main()
