"""`place MODEL_OR_PIPELINE --devices PROFILE --policy NAME`: device placement from the command line.

Prints, with --json, {makespan_ms, per_device, transfers_mb, peak_mem_mb, valid, policy,
placement, simulated, train_s, ...}: the policy's placement of the pipeline's stages on the
profile's devices and its simulated timing (roofline costs from the devices' figures, or
`--costs measured` on this machine's cores). `--run` (with `--devices local`) also runs the
placement for real on this machine's cores and adds the measured makespan and the
simulator's error against it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import api, zoo
from . import args as A

# The policies the command offers: the names (learned: rl, hrl, gnn) and the chunking baseline.
POLICIES = ("rl", "hrl", "gnn", "etf", "sct", "topo", "tfgreedy", "kl", "roundrobin", "single", "chunks")


def register(subparsers: Any) -> None:
    """Add the `place` command to an `add_subparsers()` object."""
    sp = subparsers.add_parser("place", help="place a pipeline's stages on devices (simulated; --run: for real on this machine)")
    sp.add_argument("pipeline", help="a built-in pipeline name, a pipeline .json file or a model (.onnx, .keras, a SavedModel directory)")
    sp.add_argument("--size", choices=zoo.SIZES, default="full")
    sp.add_argument(
        "--devices", default="cpu_gpu", help="a shipped profile (cpu_gpu, cpu_4gpu_pcie, 2hosts_2gpu, memory_tight), local, or a .json file"
    )
    sp.add_argument("--policy", choices=POLICIES, default="etf")
    sp.add_argument("--train-s", type=A.positive_seconds, default=None, help="training budget of a learned policy (rl, hrl, gnn)")
    sp.add_argument("--seed", type=A.seed, default=0)
    sp.add_argument(
        "--costs",
        choices=("roofline", "measured"),
        default="roofline",
        help="per-stage costs: from the devices' figures or measured here (local devices)",
    )
    sp.add_argument("--run", action="store_true", help="also run the placement for real on this machine's cores (needs --devices local)")
    sp.add_argument("--rounds", type=A.positive_int, default=7, help="timed rounds of --run and of --costs measured")
    sp.add_argument("--json", action="store_true")


def _problem(args: argparse.Namespace) -> tuple[Any, Any]:
    """The pipeline and the placement problem, every bad input one CliError."""
    from ..placement.costs import roofline_costs  # noqa: PLC0415  # scipy and networkx load with the command only
    from ..placement.devices import ProfileError, load_profile  # noqa: PLC0415
    from ..placement.graph import from_pipeline  # noqa: PLC0415
    from ..placement.policies import Problem  # noqa: PLC0415

    try:
        profile = load_profile(args.devices)
    except ProfileError as exc:
        raise A.CliError(str(exc)) from None
    if args.run and not all(d.measured for d in profile.devices):
        raise A.CliError(f"--run executes on this machine's cores: use --devices local, not {args.devices!r} (a simulated profile)")
    p = api.load_pipeline(args.pipeline, args.size)
    g = from_pipeline(p)
    if args.costs == "measured":
        if not any(d.measured for d in profile.devices):
            raise A.CliError(f"--costs measured needs devices of this machine (--devices local); {profile.name!r} is simulated")
        execute = _execute()
        costs = execute.measured_costs(p, g, profile, rounds=args.rounds)
    else:
        costs = roofline_costs(g, profile)
    return p, Problem(g, profile, costs)


def _execute() -> Any:
    """engine.placement.execute, imported when first needed (it starts worker processes)."""
    try:
        from ..placement import execute  # noqa: PLC0415  # only --run and --costs measured need it
    except ImportError as exc:
        raise A.CliError(f"real execution is not available in this installation (engine.placement.execute: {exc})") from None
    return execute


def result_json(problem: Any, result: Any) -> dict[str, Any]:
    """The placement and its simulation as the command's JSON object."""
    sim, prof, g = result.simulation, problem.profile, problem.graph
    mb = 1e6
    per_device = []
    for d, dev in enumerate(prof.devices):
        per_device.append(
            {
                "device": dev.name,
                "kind": dev.kind,
                "stages": sum(1 for x in result.placement if x == d),
                "busy_ms": sim.busy_s[d] * 1e3,
                "peak_mem_mb": sim.peak_memory_bytes[d] / mb,
                "capacity_mb": dev.memory_bytes / mb,
                "costs": problem.costs.source[d],
            }
        )
    return {
        "pipeline": g.name,
        "profile": prof.name,
        "policy": result.policy,
        "makespan_ms": sim.makespan_s * 1e3,
        "valid": sim.valid,
        "reason": sim.reason,
        "per_device": per_device,
        "transfers": sim.transfers,
        "transfers_mb": sim.transfer_bytes / mb,
        "transfer_ms": sim.transfer_s * 1e3,
        "peak_mem_mb": {dev.name: sim.peak_memory_bytes[d] / mb for d, dev in enumerate(prof.devices)},
        "placement": {node.name: prof.devices[d].name for node, d in zip(g.nodes, result.placement, strict=True)},
        "simulated": True,  # the makespan above is the simulator's; --run adds the measured one
        "profile_simulated": prof.simulated,
        "cost_source": sorted(set(problem.costs.source)),
        "train_s": result.train_s,
    }


def run(args: argparse.Namespace) -> int:
    from ..placement.policies import LEARNED_NAMES, PolicyError, budget_options, place  # noqa: PLC0415

    if args.train_s is not None and args.policy not in LEARNED_NAMES:
        raise A.CliError(f"--train-s is a learned policy's budget ({', '.join(LEARNED_NAMES)}); {args.policy!r} does not train")
    p, problem = _problem(args)
    options = budget_options(args.policy, args.train_s)
    try:
        result = place(problem, args.policy, args.seed, **options)
    except PolicyError as exc:
        raise A.CliError(str(exc)) from None
    obj = result_json(problem, result)
    if args.run:
        execute = _execute()
        run_placement = getattr(execute, "run_placement", None)
        if run_placement is None:
            raise A.CliError("real execution is not available yet: engine.placement.execute has no run_placement")
        try:
            ex = run_placement(p, result.placement, args.rounds, profile=problem.profile, seed=args.seed)
        except execute.ExecutionError as exc:
            raise A.CliError(str(exc)) from None
        measured = ex.makespan_s
        obj["measured"] = {
            "makespan_ms": measured * 1e3,
            "makespan_min_ms": ex.makespan_min_s * 1e3,
            "makespan_max_ms": ex.makespan_max_s * 1e3,
            "rounds": ex.rounds,
            "verified": ex.verified,
            "busy_ms": [b * 1e3 for b in ex.busy_s],
            "host": ex.host,
            "target": ex.target,
        }
        obj["simulator_error"] = (result.simulation.makespan_s - measured) / measured if measured > 0 else None
    lines = [
        f"{obj['pipeline']} on {obj['profile']} ({', '.join(d['device'] for d in obj['per_device'])}), policy {obj['policy']}:",
        f"  makespan {obj['makespan_ms']:.3f} ms (simulated, {'/'.join(obj['cost_source'])} costs)"
        + ("" if obj["valid"] else f", INVALID: {obj['reason']}"),
        f"  transfers {obj['transfers']} ({obj['transfers_mb']:.2f} MB, {obj['transfer_ms']:.3f} ms)",
    ]
    for d in obj["per_device"]:
        lines.append(
            f"  {d['device']:>6} {d['kind']}: {d['stages']} stages, busy {d['busy_ms']:.3f} ms, "
            f"peak memory {d['peak_mem_mb']:.2f} of {d['capacity_mb']:.0f} MB"
        )
    if "measured" in obj:
        m = obj["measured"]
        verdict = "verified" if m["verified"] else "NOT verified"
        lines.append(
            f"  measured {m['makespan_ms']:.3f} ms (median of {m['rounds']}, {verdict}); simulator error {obj['simulator_error']:+.1%}"
        )
    if result.train_s:
        lines.append(f"  trained {result.train_s:.1f} s")
    A.print_result(args, obj, "\n".join(lines))
    if not obj["valid"]:
        print(f"warning: the placement does not fit: {obj['reason']}", file=sys.stderr)
    return 0
