"""`bench placement`: every placement policy on every model under every device profile.

The graphs: the zoo's pipelines, the sample ONNX models (resources/models) and, when
TensorFlow is installed, the sample TensorFlow models (resources/tf_models). The profiles:
the shipped (simulated) ones. Costs are roofline estimates from each profile's figures, so
every makespan here is the simulator's (labelled simulated), the same on any machine; only
the learned policies' training time depends on the machine and its load.

Per case: each policy's makespan and validity (a placement over a device's memory is invalid
and is never "best"), the best heuristic (the lowest valid makespan of the non-learned
policies) and each policy's ratio to it. The summary, per policy: the geometric mean ratio,
how often it is within 2% of the best heuristic, its worst ratio; and for each learned policy
where it beats the single device, round-robin, m-ETF and m-SCT, by how much, and where it does not.
"""

from __future__ import annotations

import importlib.util
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import api, zoo
from ..placement.costs import roofline_costs
from ..placement.devices import load_profile, shipped_profiles
from ..placement.graph import from_pipeline, random_graph
from ..placement.policies import HEURISTICS, LEARNED_NAMES, Problem, budget_options, place, placers
from ..resources import MODELS_DIR, tf_sample_models

WITHIN = 1.02  # "never worse than the best heuristic by more than 2%"


def _log(msg: str) -> None:
    print(f"[bench placement] {msg}", file=sys.stderr, flush=True)


def _display_order(policy: str) -> tuple[int, str]:
    """The baselines first, then Baechi's, the min-cut, the learned ones, anything else by name."""
    order = ("single", "roundrobin", "chunks", "tfgreedy", "topo", "etf", "sct", "kl", *LEARNED_NAMES)
    return (order.index(policy), "") if policy in order else (len(order), policy)


def default_models() -> list[tuple[str, str]]:
    """(source, path) of the sample models: the ONNX ones, and the TensorFlow ones when TensorFlow is installed."""
    out = [("onnx", str(p)) for p in sorted(MODELS_DIR.glob("*.onnx"))]
    if importlib.util.find_spec("tensorflow") is not None:
        out += [("tensorflow", str(p)) for p in tf_sample_models()]
    return out


def _case(name: str, source: str, problem: Problem, policies: Sequence[str], train_s: float, seed: int) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    for policy in policies:
        options = budget_options(policy, train_s)
        t0 = time.perf_counter()
        res = place(problem, policy, seed, **options)
        sim = res.simulation
        results[policy] = {
            "makespan_ms": sim.makespan_s * 1e3,
            "valid": sim.valid,
            "reason": sim.reason,
            "transfers_mb": sim.transfer_bytes / 1e6,
            "devices_used": len(set(res.placement)),
            "place_s": time.perf_counter() - t0,
            "train_s": res.train_s,
        }
    valid_heuristics = [r["makespan_ms"] for p, r in results.items() if p in HEURISTICS and r["valid"]]
    best_ms = min(valid_heuristics) if valid_heuristics else None
    # Every heuristic at the best makespan (ties are common: on small graphs one device often wins).
    best = (
        "=".join(p for p, r in results.items() if p in HEURISTICS and r["valid"] and r["makespan_ms"] <= best_ms * (1 + 1e-9))
        if best_ms
        else None
    )
    for r in results.values():
        r["ratio"] = r["makespan_ms"] / best_ms if best_ms and r["valid"] else None
    return {
        "graph": name,
        "source": source,
        "stages": len(problem.graph),
        "profile": problem.profile.name,
        "best_heuristic": best,
        "best_heuristic_ms": best_ms,
        "results": results,
    }


def _summary(cases: list[dict[str, Any]], policies: Sequence[str]) -> dict[str, Any]:
    scored = [c for c in cases if c["best_heuristic_ms"]]
    per_policy: dict[str, Any] = {}
    for p in policies:
        ratios = [c["results"][p]["ratio"] for c in scored]
        ok = [r for r in ratios if r is not None]
        per_policy[p] = {
            "cases": len(ratios),
            "invalid": sum(1 for r in ratios if r is None),
            "geomean_ratio": statistics.geometric_mean(ok) if ok else None,
            "within_2pct": sum(1 for r in ok if r <= WITHIN),
            "worst_ratio": max(ok) if ok else None,
            "best_or_tied": sum(1 for r in ok if r <= 1.0 + 1e-9),
        }
    versus: dict[str, Any] = {}
    for learned in (p for p in policies if p in LEARNED_NAMES):
        for rival in ("single", "roundrobin", "etf", "sct"):  # the targets: beats single device and round-robin; m-ETF, m-SCT
            if rival not in policies:
                continue
            wins, losses, ties = [], [], 0
            for c in scored:
                a, b = c["results"][learned], c["results"][rival]
                if not a["valid"]:
                    losses.append({"graph": c["graph"], "profile": c["profile"], "by_pct": None, "note": "learned placement invalid"})
                    continue
                if not b["valid"]:
                    wins.append({"graph": c["graph"], "profile": c["profile"], "by_pct": None, "note": f"{rival} invalid"})
                    continue
                gain = 1.0 - a["makespan_ms"] / b["makespan_ms"]
                row = {"graph": c["graph"], "profile": c["profile"], "by_pct": 100.0 * gain}
                if gain > 1e-3:
                    wins.append(row)
                elif gain < -1e-3:
                    losses.append(row)
                else:
                    ties += 1
            versus[f"{learned}_vs_{rival}"] = {"wins": wins, "ties": ties, "losses": losses}
    return {
        "per_policy": per_policy,
        "versus": versus,
        "no_valid_heuristic": [f"{c['graph']} on {c['profile']}" for c in cases if not c["best_heuristic_ms"]],
    }


def _table(cases: list[dict[str, Any]], summary: dict[str, Any], policies: Sequence[str]) -> str:
    def cell(r: dict[str, Any]) -> str:
        if not r["valid"]:
            return "OOM"
        ratio = r["ratio"]
        if ratio is None or ratio <= 1.0 + 1e-9:
            return f"{r['makespan_ms']:.3f}"
        return f"{r['makespan_ms']:.3f} ({ratio:.3f}x)" if ratio < 1.1 else f"{r['makespan_ms']:.3f} ({ratio:.2f}x)"

    lines = [
        "Simulated makespan in ms (roofline costs from each profile's figures); (Nx): ratio to the best heuristic;"
        " OOM: over a device's memory",
        "",
        "| graph | stages | profile | best heuristic | " + " | ".join(policies) + " |",
        "|---|---:|---|---|" + "---:|" * len(policies),
    ]
    for c in cases:
        best = c["best_heuristic"] or "none valid"
        lines.append(
            f"| {c['graph']} | {c['stages']} | {c['profile']} | {best} | " + " | ".join(cell(c["results"][p]) for p in policies) + " |"
        )
    lines += [
        "",
        "| policy | geomean ratio to best heuristic | within 2% | best or tied | worst ratio | invalid |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in policies:
        s = summary["per_policy"][p]
        gm = f"{s['geomean_ratio']:.3f}" if s["geomean_ratio"] else "-"
        worst = f"{s['worst_ratio']:.2f}" if s["worst_ratio"] else "-"
        lines.append(f"| {p} | {gm} | {s['within_2pct']}/{s['cases']} | {s['best_or_tied']}/{s['cases']} | {worst} | {s['invalid']} |")
    for key, v in summary["versus"].items():
        wins = ", ".join(
            f"{w['graph']}@{w['profile']} ({w['by_pct']:.1f}%)" if w["by_pct"] is not None else f"{w['graph']}@{w['profile']} ({w['note']})"
            for w in v["wins"]
        )
        lines.append(
            f"\n{key.replace('_vs_', ' vs ')}: {len(v['wins'])} wins, {v['ties']} ties, {len(v['losses'])} losses"
            + (f"; wins: {wins}" if wins else "")
        )
    return "\n".join(lines)


def bench_placement(
    pipelines: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    profiles: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    size: str = "full",
    train_s: float = 2.0,
    seed: int = 0,
    random_sizes: Sequence[int] = (),
) -> dict[str, Any]:
    """Every policy (default: all registered) on the zoo (`pipelines`, default all), the sample
    models (`models`: paths, default the shipped ONNX and TensorFlow ones) and random layered
    graphs of `random_sizes` nodes (graph.random_graph, seeded by `seed`) under each profile
    (default the shipped ones). `train_s` is each learned policy's training budget per case."""
    t_start = time.perf_counter()
    chosen = list(policies) if policies is not None else sorted(placers(), key=_display_order)
    graphs: list[tuple[str, str, Any]] = []
    for name in pipelines if pipelines is not None else zoo.names():
        graphs.append((name, "zoo", from_pipeline(api.load_pipeline(name, size))))
    sample = [("onnx" if m.lower().endswith(".onnx") else "model", m) for m in models] if models is not None else default_models()
    for source, path in sample:
        t0 = time.perf_counter()
        g = from_pipeline(api.load_pipeline(path))
        graphs.append((Path(path).stem, source, g))
        _log(f"{path}: {len(g)} stages, imported in {time.perf_counter() - t0:.1f} s")
    for n in random_sizes:
        g = random_graph(n, seed)
        graphs.append((g.name, "random", g))
    cases = []
    for prof_name in profiles if profiles is not None else shipped_profiles():
        prof = load_profile(prof_name)
        for name, source, g in graphs:
            case = _case(name, source, Problem(g, prof, roofline_costs(g, prof)), chosen, train_s, seed)
            cases.append(case)
            _log(f"{name} on {prof_name}: best heuristic {case['best_heuristic']} {case['best_heuristic_ms']}")
    summary = _summary(cases, chosen)
    return {
        "benchmark": "placement",
        "simulated": True,
        "cost_source": "roofline",
        "policies": chosen,
        "learned": [p for p in chosen if p in LEARNED_NAMES],
        "train_s": train_s,
        "seed": seed,
        "size": size,
        "random_sizes": list(random_sizes),
        "host": platform.node(),
        "wall_s": time.perf_counter() - t_start,
        "cases": cases,
        "summary": summary,
        "table": _table(cases, summary, chosen),
    }
