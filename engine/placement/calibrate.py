"""Simulator against real execution on this machine's cores: error per placement.

For each pipeline: per-stage costs measured on each pinned core (`measured_costs`), placements
from the heuristic policies and a few random ones, each run for real (`LocalDevices.run`, median
of rounds, outputs verified) and simulated (`simulate` with the local profile and the measured
costs). The link (shared memory) is simulated twice: with the local profile's own figures, and
with figures measured from the runs' own send events (bytes / copy time, median; latency: the
median delay from a send's end to a waiting receiver reading the message), shared by every
pipeline and placement. `python -m engine.placement.calibrate [--json]` prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..ir import Pipeline
from .devices import DeviceProfile, local_profile
from .execute import Execution, LocalDevices, accelerator_note, costs_from_runs, measured_costs, with_links
from .graph import from_pipeline
from .policies import Problem, place
from .simulator import simulate

POLICIES = ("single", "roundrobin", "chunks", "topo", "etf", "sct", "tfgreedy", "kl")
DEFAULT_PIPELINES = ("resnet_block", "attention", "unsharp", "resources/models/transformer_layer.onnx")


@dataclass(frozen=True)
class Row:
    pipeline: str
    placement_name: str  # the policies that chose it, or "randomK"
    placement: str  # a device digit per stage, in the graph's order
    measured_ms: float  # median over rounds
    measured_min_ms: float
    measured_max_ms: float
    simulated_ms: float  # local profile's link figures
    simulated_link_ms: float  # the measured link figures
    transfers: int
    verified: bool

    @property
    def error(self) -> float:
        return (self.simulated_ms - self.measured_ms) / self.measured_ms

    @property
    def error_link(self) -> float:
        return (self.simulated_link_ms - self.measured_ms) / self.measured_ms


def measured_link(runs: list[Execution]) -> tuple[float, float]:
    """(latency s, bandwidth bytes/s) of the shared-memory link from real runs' events: a send's
    duration (the copy and the message) fitted as fixed cost + bytes / bandwidth (least squares,
    the Theil-Sen median slope being overkill for two parameters), the latency being that fixed
    cost plus the median delay from a send's end to a waiting receiver reading the message."""
    sizes, times, delays = [], [], []
    for ex in runs:
        recv = {(e.node, e.device): e for e in ex.events if e.kind == "recv"}
        for e in ex.events:
            if e.kind != "send":
                continue
            sizes.append(float(e.bytes))
            times.append(e.end_s - e.start_s)
            r = recv.get((e.node, e.peer))
            if r is not None and r.start_s < e.end_s:  # the receiver was already waiting
                delays.append(max(0.0, r.end_s - e.end_s))
    if not sizes:
        raise ValueError("no transfers in these runs: the link cannot be measured")
    if len(set(sizes)) > 1:
        slope, fixed = np.polyfit(sizes, times, 1)
    else:
        slope, fixed = statistics.median(times) / sizes[0], 0.0
    if slope <= 0:  # no size dependence visible: all fixed cost
        slope, fixed = 1e-12, statistics.median(times)
    return float(max(0.0, fixed) + (statistics.median(delays) if delays else 0.0)), float(1.0 / slope)


def calibrate(
    pipelines: list[Pipeline],
    rounds: int = 9,
    random_placements: int = 2,
    seed: int = 0,
    profile: DeviceProfile | None = None,
    nice: int = 0,
    realtime: bool = False,
) -> dict[str, Any]:
    """Every pipeline's placements measured and simulated; rows, the link figures and a Markdown table.

    Placements are chosen by the policies on costs from a first short pass; then, round by round,
    every placement of a pipeline runs once (one warm-up, one timed round) *interleaved* with the
    single-device runs the simulated costs come from, so a change in the machine's load during
    the calibration reaches the measured and the simulated side alike. `nice` < 0 and `realtime`
    raise the device processes' priority (see LocalDevices)."""
    prof = profile if profile is not None else local_profile()
    rng = random.Random(seed)
    nd = len(prof.devices)
    results = []
    cost_tables: dict[str, list[list[float]]] = {}
    load = [os.getloadavg()[0]]
    t0 = time.monotonic()
    with LocalDevices(prof, nice=nice, realtime=realtime) as devices:
        for p in pipelines:
            g = from_pipeline(p)
            first = measured_costs(p, g, prof, 3, devices=devices)
            problem = Problem(g, prof, first)
            chosen: dict[tuple[int, ...], list[str]] = {}
            for pol in POLICIES:
                chosen.setdefault(tuple(place(problem, pol, seed).placement), []).append(pol)
            for r in range(random_placements):
                chosen.setdefault(tuple(rng.randrange(nd) for _ in g.nodes), []).append(f"random{r}")
            singles = [tuple([d] * len(g.nodes)) for d in range(nd)]
            order = list(dict.fromkeys([*singles, *chosen]))
            runs: dict[tuple[int, ...], list[Execution]] = {pl: [] for pl in order}
            for r in range(rounds):
                print(f"calibrate: {p.name} round {r + 1}/{rounds}, {len(order)} placements", file=sys.stderr, flush=True)
                for pl in order:
                    runs[pl].append(devices.run(p, pl, 1, warmup=1, seed=seed))
                load.append(os.getloadavg()[0])
            costs = costs_from_runs(g, prof, {d: runs[singles[d]] for d in range(nd)})
            cost_tables[p.name] = [list(row) for row in costs.seconds]
            results.append((p, g, costs, chosen, runs))
    every = [ex for _, _, _, _, runs in results for exs in runs.values() for ex in exs]
    latency, bandwidth = measured_link(every)
    linked = with_links(prof, latency, bandwidth)
    rows = []
    for p, g, costs, chosen, runs in results:
        for pl, names in chosen.items():
            spans = [ex.makespan_s * 1e3 for ex in runs[pl]]
            rows.append(
                Row(
                    p.name,
                    "/".join(names),
                    "".join(map(str, pl)),
                    statistics.median(spans),
                    min(spans),
                    max(spans),
                    simulate(g, prof, costs, pl).makespan_s * 1e3,
                    simulate(g, linked, costs, pl).makespan_s * 1e3,
                    runs[pl][0].transfers,
                    all(ex.verified for ex in runs[pl]),
                )
            )
    link = {
        "profile_latency_us": prof.links[0].latency_s * 1e6 if prof.links else None,
        "profile_bandwidth_gbs": prof.links[0].bandwidth / 1e9 if prof.links else None,
        "measured_latency_us": latency * 1e6,
        "measured_bandwidth_gbs": bandwidth / 1e9,
    }
    errors = [abs(r.error_link) for r in rows]
    return {
        "rows": [asdict(r) | {"error": r.error, "error_link": r.error_link} for r in rows],
        "link": link,
        "costs_s": cost_tables,
        "rounds": rounds,
        "nice": nice,
        "realtime": realtime,
        "within_15pct": int(sum(e < 0.15 for e in errors)),
        "placements": len(rows),
        "median_abs_error_link": statistics.median(errors) if errors else None,
        "host": every[0].host if every else "",
        "target": every[0].target if every else "",
        "load_avg_1min": {"min": min(load), "max": max(load)},
        "wall_s": time.monotonic() - t0,
        "note": accelerator_note(),
        "table": table(rows, link),
    }


def table(rows: list[Row], link: dict[str, Any]) -> str:
    lines = [
        "| pipeline | placement (policies) | simulated ms | simulated ms, measured link "
        "| measured ms median [min-max] | error % | error %, measured link |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.pipeline} | `{r.placement}` ({r.placement_name}) | {r.simulated_ms:.2f} | {r.simulated_link_ms:.2f} | "
            f"{r.measured_ms:.2f} [{r.measured_min_ms:.2f}-{r.measured_max_ms:.2f}] | {r.error:+.1%} | {r.error_link:+.1%} |"
        )
    lines.append(
        f"\nLink: local profile {link['profile_latency_us']:.1f} us + bytes / {link['profile_bandwidth_gbs']:.1f} GB/s; "
        f"measured from the sends {link['measured_latency_us']:.1f} us + bytes / {link['measured_bandwidth_gbs']:.1f} GB/s."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .. import api  # noqa: PLC0415  # pipelines by name or file, as the CLI loads them

    ap = argparse.ArgumentParser(prog="python -m engine.placement.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--pipelines", default=",".join(DEFAULT_PIPELINES), help="comma list: zoo names, pipeline JSON or ONNX files")
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--random", type=int, default=2, help="random placements per pipeline")
    ap.add_argument(
        "--nice", type=int, default=0, help="the device processes' nice value (< 0 needs root: a larger CPU share on a loaded machine)"
    )
    ap.add_argument("--realtime", action="store_true", help="SCHED_FIFO during rounds (needs root): the cores are the run's alone")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    pipelines = [api.load_pipeline(s, args.size) for s in args.pipelines.split(",") if s]
    out = calibrate(pipelines, args.rounds, args.random, nice=args.nice, realtime=args.realtime)
    print(json.dumps(out, indent=1) if args.json else out["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
