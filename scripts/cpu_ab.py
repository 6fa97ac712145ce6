"""Shared by scripts/conv_ab.py and scripts/zoo_ab.py: compile a pipeline's schedules, check
their outputs, and time them (and any other callables, e.g. ONNX Runtime) by this thread's
CPU time in interleaved rounds. The caller sets HL_NUM_THREADS=1 before halide is imported
(Halide's worker threads' time would go uncounted); nothing here imports halide before it
is called.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BoundRun:
    """A compiled schedule bound to its inputs: calling it runs the pipeline once."""

    run: Callable[[], object]
    keep: Any  # the bound buffers, alive as long as `run` may be called

    def __call__(self) -> object:
        return self.run()


def compile_checked(
    p: Any, scheds: dict[str, Any], inputs: dict[str, np.ndarray], refs: dict[str, np.ndarray] | None = None, ref_label: str | None = None
) -> dict[str, BoundRun]:
    """Each schedule (JSON) of `p` compiled, bound to `inputs` and run once, its outputs
    verified against `refs` (None: the first schedule's outputs) by the engine's own check
    (`reference.verify`, the runner's tolerance); SystemExit names the schedule and what
    differs otherwise. `ref_label` names the reference (default: the first schedule's label)."""
    from engine import halide_backend as HB  # noqa: PLC0415
    from engine import reference as R  # noqa: PLC0415
    from engine.schedule import Schedule  # noqa: PLC0415

    label_of_ref = ref_label or next(iter(scheds), "")
    runs: dict[str, BoundRun] = {}
    for label, sj in scheds.items():
        low = HB.lower(p, Schedule.from_json(sj))
        low.compile()
        keep = low.bind(inputs)
        outs = HB.output_arrays(p)
        run = low.runner(outs)
        run()
        if refs is None:
            refs = {k: v.copy() for k, v in outs.items()}
        check = R.verify(p, outs, refs, label_of_ref)
        if not check.ok:
            raise SystemExit(f"{p.name} {label}: differs from {label_of_ref}: {check.message}")
        runs[label] = BoundRun(run, keep)
    return runs


def time_interleaved(runs: Mapping[str, Callable[[], object]], rounds: int, timing_s: float = 0.003) -> dict[str, list[float]]:
    """Milliseconds of this thread's CPU time per call of each of `runs`: `rounds` rounds, the
    order alternating between rounds, 5 timings a round of as many calls as the first entry
    takes `timing_s` for (one call of it measured first)."""
    first = next(iter(runs.values()))
    t0 = time.thread_time()
    first()
    reps = max(1, int(timing_s / max(time.thread_time() - t0, 1e-6)))
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(rounds):
        for label in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            for _ in range(5):
                t0 = time.thread_time()
                for _ in range(reps):
                    runs[label]()
                times[label].append((time.thread_time() - t0) / reps * 1e3)
    return times


def finish(result: dict[str, Any], out: str | None) -> None:
    """Close an A/B run's record: the load at the end, a one-line summary, the JSON to `out`."""
    result["load_end"] = os.getloadavg()
    print(f"target {result['target']}, load {result['load_start'][0]:.1f} -> {result['load_end'][0]:.1f}")
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
