"""`bench core`: every zoo pipeline under the default schedule, the hand schedule and each
of Halide's autoschedulers, measured in the same run on the same machine."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from .. import api, zoo
from ..cluster import ClusterSpec, make_runner
from ..expr import Access, Var
from ..halide_backend import AUTOSCHEDULERS
from ..ir import Dim, Input, Pipeline, Stage
from ..measure import Measurement, MeasureRunner, machine_record


def _trivial() -> Pipeline:
    """One element copied: its time is the runner's own per-run overhead."""
    return Pipeline("overhead", [Input("a", (1,))], [Stage("out", (Dim("x", 1),), Access("a", (Var("x"),)))], ["out"])


def _progress(what: str, m: Measurement) -> None:
    # Progress on stderr: a full run takes tens of minutes.
    print(f"[bench] {what}: " + (f"{m.median_ms:.3f} ms" if m.ok else f"FAILED {m.error_kind}: {m.error}"), file=sys.stderr, flush=True)


def geomean(xs: list[float]) -> float | None:
    """Geometric mean, None for no values (a summary over the pipelines that ran)."""
    return statistics.geometric_mean(xs) if xs else None


def median_cell(p: Pipeline, ms: list[Measurement]) -> dict[str, Any]:
    """Median over rounds of each round's median; the first failure, if any, is the result."""
    bad = next((m for m in ms if not m.ok), None)
    if bad is not None:
        return {"ok": False, "error_kind": bad.error_kind, "error": bad.error}
    medians: list[float] = []
    mins: list[float] = []
    for m in ms:
        assert m.median_ms is not None and m.min_ms is not None, f"{p.name}: a measurement that ran has its times"
        medians.append(m.median_ms)
        mins.append(m.min_ms)
    median = statistics.median(medians)
    return {
        "ok": True, "median_ms": median, "min_ms": min(mins), "round_medians_ms": medians,
        "gflops": p.flops() / (median * 1e6), "verified": all(m.verified for m in ms), "compile_s": ms[0].compile_s,
        "search_s": ms[0].search_s,
    }  # fmt: skip


def bench_core(
    size: str = "full",
    pipelines: Sequence[str] | None = None,
    autoschedulers: Sequence[str] = tuple(AUTOSCHEDULERS),
    repeats: int = 3,
    min_time_s: float = 0.5,
    cluster: ClusterSpec | str = "local",
) -> dict[str, Any]:
    """Every zoo pipeline of `pipelines` (default: all) at `size` under the default and hand
    schedules and each of `autoschedulers` (may be empty), `repeats` rounds of at least
    `min_time_s` timed seconds per variant; the median of the round medians is the figure.
    `cluster` (engine/cluster): where the measurements run (one host kind; its host is the "machine")."""
    names = list(pipelines) if pipelines is not None else zoo.names()
    autos = list(autoschedulers)
    for a in autos:
        if a not in AUTOSCHEDULERS:
            raise ValueError(f"unknown autoscheduler {a!r}")
    opts: dict[str, Any] = {"min_time_s": min_time_s, "timeout_s": 900.0, "profile": False}
    results: dict[str, Any] = {}
    t_start = time.time()
    from .peak import fma_peak_gflops  # noqa: PLC0415  # compiles a Halide kernel: only when benchmarking

    peak_before = fma_peak_gflops()
    runner: MeasureRunner = make_runner(cluster)
    try:
        ov = api.measure(_trivial(), None, runner, None, min_time_s=0.3, rounds=repeats, verify=True)
        overhead_ms = ov.median_ms or 0.0
        for name in names:
            p = zoo.get(name, size)
            variants: dict[str, dict[str, Any]] = {
                "default": {"sched": api.load_schedule(p, "default")},
                "hand": {"sched": api.load_schedule(p, "hand")},
            }
            variants.update({a: {"sched": None, "autoscheduler": a} for a in autos})
            # Rounds outside, variants inside: each variant sees the same stretch of machine
            # load. The worker keeps compiled variants, so later rounds only time them.
            runs: dict[str, list[Measurement]] = {v: [] for v in variants}
            for r in range(repeats):
                for label, v in variants.items():
                    m = api.measure(p, v["sched"], runner, None, autoscheduler=v.get("autoscheduler"), **opts)
                    runs[label].append(m)
                    _progress(f"{name} {label} round {r + 1}", m)
            row: dict[str, Any] = {"gflop": p.flops() / 1e9, "stages": len(p.stages)}
            for label, ms in runs.items():
                row[label] = median_cell(p, ms)
            hand, base, adams = row["hand"], row["default"], row.get("Adams2019", {})
            if hand.get("ok") and base.get("ok"):
                row["hand_speedup_over_default"] = base["median_ms"] / hand["median_ms"]
            if hand.get("ok") and adams.get("ok"):
                row["hand_speedup_over_adams2019"] = adams["median_ms"] / hand["median_ms"]
            results[name] = row
        machine = machine_record(runner.host, runner.target)
        if str(cluster) != "local":
            machine["cluster"] = str(cluster)  # measured there; the FMA peak is this machine's
    finally:
        runner.close()
    peak = max(peak_before["best_gflops"], fma_peak_gflops()["best_gflops"])  # before and after: the quieter one
    for r in results.values():
        if r["hand"].get("ok"):
            r["hand"]["pct_of_peak"] = 100 * r["hand"]["gflops"] / peak
    geo = [r["hand_speedup_over_adams2019"] for r in results.values() if "hand_speedup_over_adams2019" in r]
    return {
        "machine": machine,
        "size": size,
        "repeats": repeats,
        "fma_peak_gflops": peak,
        "runner_overhead_ms": overhead_ms,
        "runner_overhead_pct_of_1ms": 100 * overhead_ms / 1.0,
        "geomean_hand_speedup_over_adams2019": geomean(geo),
        "wall_s": time.time() - t_start,
        "pipelines": results,
        "table": _table(results, autos, overhead_ms) + f"\nFMA peak (microbenchmark, best of 2 runs): {peak:.1f} GFLOP/s",
    }


def _fmt(cell: dict[str, Any]) -> str:
    if not cell:
        return "-"
    if not cell.get("ok"):
        return f"FAIL({cell.get('error_kind')})"
    return f"{cell['median_ms']:.3f}"


def _table(results: dict[str, Any], autos: list[str], overhead_ms: float) -> str:
    cols = (
        ["pipeline", "GFLOP", "default ms", "hand ms"] + [f"{a} ms" for a in autos] + ["hand GFLOP/s", "hand/default", "hand vs Adams2019"]
    )
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        hand = r["hand"]
        cells = [name, f"{r['gflop']:.3f}", _fmt(r["default"]), _fmt(hand)] + [_fmt(r.get(a, {})) for a in autos]
        cells.append(f"{hand['gflops']:.1f} ({hand['pct_of_peak']:.0f}%)" if hand.get("ok") else "-")
        cells.append(f"{r['hand_speedup_over_default']:.1f}x" if "hand_speedup_over_default" in r else "-")
        cells.append(f"{r['hand_speedup_over_adams2019']:.2f}x" if "hand_speedup_over_adams2019" in r else "-")
        lines.append("| " + " | ".join(cells) + " |")
    searches = [
        f"{n}: " + ", ".join(f"{a} {r[a]['search_s']:.1f}s" for a in autos if r.get(a, {}).get("ok") and r[a].get("search_s") is not None)
        for n, r in results.items()
    ]
    lines.append("")
    lines.append(f"runner overhead per timed run: {overhead_ms * 1000:.1f} us ({100 * overhead_ms:.2f}% of a 1 ms kernel)")
    if autos:
        lines.append("autoscheduler search time: " + "; ".join(searches))
    return "\n".join(lines)
