"""Peak RSS of a long search, sampled in the search process every 15 s (README, "Memory").

Usage: .venv/bin/python scripts/search_rss.py PIPELINE STRATEGY SECONDS OUT.json
"""

import json
import os
import resource
import sys
import threading
import time

from engine import halide_backend as HB
from engine.api import load_pipeline
from engine.loops import cache_stats
from engine.measure import host_fingerprint, machine_record
from engine.search import run_search
from engine.search.base import Budget


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(pipe: str, strategy: str, wall_s: float, out: str) -> None:
    p = load_pipeline(pipe, "full")
    load_before = os.getloadavg()[0]
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(round(rss_mb(), 1))
            stop.wait(15)

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.monotonic()
    r = run_search(p, strategy, Budget(trials=10_000, wall_s=wall_s), seed=0)
    stop.set()
    res = {
        "machine": machine_record(host_fingerprint(), HB.target_string(), load_before),
        "pipeline": pipe,
        "strategy": strategy,
        "budget_s": wall_s,
        "search_s": time.monotonic() - t0,
        "seen": r.seen,
        "trials": len(r.trials),
        "best_ms": r.best_ms,
        "verified": r.verified,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_mb_every_15s": samples,
        "cache_stats": cache_stats(p),
    }
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k not in ("rss_mb_every_15s", "cache_stats")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4])
