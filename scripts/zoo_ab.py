"""Same-run A/B of built-in (zoo) pipelines' hand and heuristic schedules as two source trees
make them (e.g. an old commit in `git worktree add /tmp/base <commit>`, and this tree), timed
by this thread's CPU time in this process (HL_NUM_THREADS=1; rounds interleaved, order
alternating), every output checked against the first tree's hand schedule's. For the
recipes' effect on pipelines that have no ONNX file (scripts/conv_ab.py times ONNX models
against ONNX Runtime).

Usage: [HL_JIT_TARGET=...] .venv/bin/python scripts/zoo_ab.py conv_relu,resnet_block ROOT [ROOT ...] [--size full] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HL_THREADS = os.environ.setdefault("HL_NUM_THREADS", "1")  # before halide is imported: this thread's CPU time is all of it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def schedules(root: str, names: list[str], size: str) -> dict[str, Any]:
    """{pipeline: {"hand": JSON, "heuristic": JSON}} as source tree `root` makes them, in a child process."""
    code = (
        f"import sys, json; sys.path.insert(0, {root!r})\n"
        "from engine import zoo\nfrom engine.hand_schedules import hand_schedule\nfrom engine.heuristic import heuristic_schedule\n"
        f"ps = {{n: zoo.get(n, {size!r}) for n in json.loads(sys.argv[1])}}\n"
        "print(json.dumps({n: {'hand': hand_schedule(p).to_json(), 'heuristic': heuristic_schedule(p).to_json()} for n, p in ps.items()}))"
    )
    res = subprocess.run([sys.executable, "-c", code, json.dumps(names)], capture_output=True, text=True, cwd=root)
    if res.returncode:
        raise SystemExit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def time_cpu(p: Any, scheds: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    """Thread CPU time (ms a run) of each schedule, outputs checked against the first's."""
    from engine import reference as R  # noqa: PLC0415
    from scripts.cpu_ab import compile_checked, time_interleaved  # noqa: PLC0415

    return time_interleaved(compile_checked(p, scheds, R.make_inputs(p, 0)), rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pipelines")
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--size", default="full")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    if HL_THREADS != "1":
        ap.error(f"this thread's CPU time is timed, so Halide must run on it alone: HL_NUM_THREADS={HL_THREADS} (unset or 1)")
    from engine import zoo  # noqa: PLC0415
    from engine.halide_backend import target_string  # noqa: PLC0415

    names = args.pipelines.split(",")
    by_root = {r: schedules(r, names, args.size) for r in args.roots}
    labels = {r: Path(r).name or r for r in args.roots}
    result: dict[str, Any] = {"target": target_string(), "clock": "thread CPU time", "rounds": args.rounds, "load_start": os.getloadavg()}
    for n in names:
        scheds = {f"{kind} {labels[r]}": by_root[r][n][kind] for kind in ("hand", "heuristic") for r in args.roots}
        times = time_cpu(zoo.get(n, args.size), scheds, args.rounds)
        row = {k: {"best_ms": min(v), "median_ms": statistics.median(v)} for k, v in times.items()}
        result[n] = row
        print(f"{n}: " + " | ".join(f"{k}: {v['best_ms']:.3f} med {v['median_ms']:.3f}" for k, v in row.items()), flush=True)
    from scripts.cpu_ab import finish  # noqa: PLC0415

    finish(result, args.out)


if __name__ == "__main__":
    main()
