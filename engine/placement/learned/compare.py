"""The graph network without retraining against rl trained per graph, on unseen random graphs.

The issue's target: the graph-network policy places an unseen graph within 5% of the
per-graph-trained policy without retraining. `python -m engine.placement.learned.compare`
places random graphs (engine.placement.graph.random_graph, seeds the shipped network's training
set does not use) under each shipped profile with the shipped `gnn` (no fine-tuning) and with
`rl` trained on that graph for `--rl-s` seconds, and prints (or writes, `--out`) per case both
makespans, their ratio and the best heuristic's; `--rl-from` reuses an earlier run's rl figures
(rl is the slow half; gnn places in well under a second).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..costs import roofline_costs
from ..devices import load_profile, shipped_profiles
from ..graph import random_graph
from ..policies import HEURISTICS, Problem, place
from .gnn import WEIGHTS, load_policy, run_gnn
from .rl import train_rl

SEED_BASE = 900_000  # random_graph seeds of the comparison; the training set uses seed * 100_003 + k, k < problems
WITHIN = 1.05


def compare(
    sizes: Sequence[int],
    profiles: Sequence[str],
    rl_s: float,
    weights: Path = WEIGHTS,
    rl_from: dict[str, Any] | None = None,
    graph_seed: int = 0,
) -> dict[str, Any]:
    """Per (size, profile): the gnn's zero-shot makespan, rl's after `rl_s` s of training (or `rl_from`'s), their ratio.
    The graphs: random_graph(size, SEED_BASE + 1000 x graph_seed + size)."""
    net = load_policy(weights)
    known = {(c["nodes"], c["profile"]): c for c in (rl_from or {}).get("cases", [])}
    cases = []
    for prof_name in profiles:
        prof = load_profile(prof_name)
        for n in sizes:
            g = random_graph(n, SEED_BASE + 1000 * graph_seed + n)
            pr = Problem(g, prof, roofline_costs(g, prof))
            sims = [place(pr, name).simulation for name in HEURISTICS]
            best_h = min((s.makespan_s for s in sims if s.valid), default=None)
            t0 = time.perf_counter()
            gnn = run_gnn(pr, seed=0, model=net)
            gnn_s = time.perf_counter() - t0
            if (n, prof_name) in known:
                rl_ms, rl_steps = known[(n, prof_name)]["rl_ms"], known[(n, prof_name)]["rl_steps"]
            else:
                run = train_rl(pr, seed=0, train_s=rl_s)
                rl_ms, rl_steps = run.result.simulation.makespan_s * 1e3, run.steps
            gnn_ms = gnn.result.simulation.makespan_s * 1e3
            cases.append(
                {
                    "nodes": n,
                    "profile": prof_name,
                    "best_heuristic_ms": best_h * 1e3 if best_h is not None else None,
                    "gnn_ms": gnn_ms,
                    "gnn_valid": gnn.result.simulation.valid,
                    "gnn_place_s": gnn_s,
                    "gnn_source": gnn.source,
                    "rl_ms": rl_ms,
                    "rl_steps": rl_steps,
                    "ratio": gnn_ms / rl_ms,
                }
            )
            print(
                f"{n} nodes on {prof_name}: gnn {gnn_ms:.3f} ms ({gnn_s:.2f} s), rl {rl_ms:.3f} ms, ratio {gnn_ms / rl_ms:.3f}", flush=True
            )
    ratios = [c["ratio"] for c in cases]
    return {
        "benchmark": "gnn zero-shot vs rl per graph",
        "simulated": True,
        "weights": str(weights),
        "rl_s": rl_s,
        "graph_seed": graph_seed,
        "host": platform.node(),
        "cases": cases,
        "within_5pct": sum(1 for r in ratios if r <= WITHIN),
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.placement.learned.compare", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30,60,100", help="random graph sizes (nodes), comma-separated")
    ap.add_argument("--profiles", default=",".join(shipped_profiles()), help="device profiles, comma-separated")
    ap.add_argument("--rl-s", type=float, default=20.0, help="rl's training budget per graph, seconds")
    ap.add_argument("--weights", type=Path, default=WEIGHTS, help="the graph network's weights")
    ap.add_argument("--rl-from", type=Path, help="an earlier run's JSON: reuse its rl makespans")
    ap.add_argument("--graph-seed", type=int, default=0, help="another set of random graphs")
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rl_from = json.loads(args.rl_from.read_text()) if args.rl_from else None
    res = compare(sizes, [p for p in args.profiles.split(",") if p], args.rl_s, args.weights, rl_from, args.graph_seed)
    print(
        f"within 5% of rl: {res['within_5pct']} of {len(res['cases'])}; gnn/rl median {res['median_ratio']:.3f}, "
        f"range {res['min_ratio']:.3f}-{res['max_ratio']:.3f}"
    )
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
