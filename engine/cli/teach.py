"""`animate PIPELINE --stage S [--schedule F] [--extent 16x16] (--out anim.gif | --frames DIR)`:
the iteration order of one stage under a schedule (engine/teaching), as an animated GIF or
PNG frames. Prints, with --json, {pipeline, stage, extent, steps, ticks, frames,
ticks_per_frame, threads, truncated, computed, recomputed, allocations, out}.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import api, zoo
from . import args as A


def register(subparsers: Any) -> None:
    """Add the `animate` command to an `add_subparsers()` object."""
    sp = subparsers.add_parser("animate", help="animate the iteration order of one stage under a schedule (GIF or PNG frames)")
    sp.add_argument("pipeline", help="a built-in pipeline name or a pipeline .json file")
    sp.add_argument("--stage", required=True, help="the stage to trace")
    sp.add_argument("--schedule", default="default", help="default, hand, heuristic or a schedule .json file")
    sp.add_argument("--size", choices=zoo.SIZES, default="small")
    sp.add_argument(
        "--extent", default=None, help="the traced box per dim, outermost first, e.g. 16x16 (default: 16 for the 2 innermost dims)"
    )
    sp.add_argument("--threads", type=A.int_in(1, 64), default=4, help="simulated workers for parallel loops")
    sp.add_argument("--max-frames", type=A.int_in(1, 10_000), default=400, help="at most this many frames (several ticks per frame beyond)")
    sp.add_argument("--frame-ms", type=A.int_in(10, 10_000), default=80)
    sp.add_argument("--cell-px", type=A.int_in(3, 64), default=16)
    out = sp.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=A.output_file, help="write an animated GIF here")
    out.add_argument("--frames", type=A.output_dir, help="write PNG frames (frame_0000.png, ...) into this directory")
    sp.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from ..teaching import animate as AN  # noqa: PLC0415  # Pillow loads with the command only
    from ..teaching.trace import TraceError, parse_extent, trace  # noqa: PLC0415

    p = api.load_pipeline(args.pipeline, args.size)
    sched = api.load_schedule(p, args.schedule)
    if args.stage not in p.stage_map:
        raise A.CliError(f"--stage {args.stage!r}: pipeline {p.name!r} has no such stage (stages: {', '.join(p.stage_map)})")
    try:
        extent = None if args.extent is None else parse_extent(args.extent)
        t = trace(p, sched, args.stage, extent, threads=args.threads)
    except TraceError as exc:
        raise A.CliError(str(exc)) from None
    opts = AN.AnimOptions(cell_px=args.cell_px, max_frames=args.max_frames, frame_ms=args.frame_ms)
    if args.out:
        n = AN.save_gif(t, Path(args.out), opts)
        where = args.out
    else:
        n = AN.save_frames(t, Path(args.frames), opts)
        where = args.frames
    per = AN.ticks_per_frame(t, opts)
    obj = {
        "pipeline": p.name,
        "stage": t.stage,
        "schedule": sched.name or args.schedule,
        "extent": list(t.extent),
        "steps": len(t.steps),
        "ticks": t.ticks,
        "frames": n,
        "ticks_per_frame": per,
        "threads": t.threads,
        "truncated": t.truncated,
        "computed": dict(t.computed),
        "recomputed": dict(t.recomputed),
        "allocations": {
            k: {"compute": a.compute_level, "store": a.store_level, "shape": list(a.shape), "bytes": a.bytes, "folded": list(a.folded)}
            for k, a in t.allocations.items()
        },
        "out": where,
    }
    rec = ", ".join(f"{q} {n_} recomputed of {t.computed[q]}" for q, n_ in t.recomputed.items())
    text = f"{where}: {n} frames ({per} tick(s) each) of {len(t.steps)} steps of {t.stage} over {'x'.join(map(str, t.extent))}"
    text += f", {t.threads} thread(s)" + (f"; {rec}" if rec else "") + (" (trace truncated)" if t.truncated else "")
    A.print_result(args, obj, text)
    return 0
