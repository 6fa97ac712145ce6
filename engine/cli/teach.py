"""Teaching mode from the command line (engine/teaching).

`animate PIPELINE --stage S [--schedule F] [--extent 16x16] (--out anim.gif | --frames DIR)`:
the iteration order of one stage under a schedule, as an animated GIF or PNG frames; with
--json {pipeline, stage, extent, steps, ticks, frames, ticks_per_frame, threads, truncated,
computed, recomputed, allocations, out}.

`footprint PIPELINE --stage S [--loop L] [--schedule F]`: per iteration of the loop (default:
one whole realization), the region of each source read and the buffers allocated there,
beside this machine's cache sizes; with --json {stage, loop, loops, iterations, reads,
stored, read_bytes, stored_bytes, fits, caches}.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import api, zoo
from ..ir import Pipeline
from ..schedule import Schedule
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

    fp = subparsers.add_parser("footprint", help="what one iteration of a stage's loop reads and allocates, beside the cache sizes")
    fp.add_argument("pipeline", help="a built-in pipeline name or a pipeline .json file")
    fp.add_argument("--stage", required=True, help="the stage")
    fp.add_argument("--loop", default=None, help="one of the stage's loops (default: one whole realization)")
    fp.add_argument("--schedule", default="default", help="default, hand, heuristic or a schedule .json file")
    fp.add_argument("--size", choices=zoo.SIZES, default="full")
    fp.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    return _footprint(args) if args.cmd == "footprint" else _animate(args)


def _pipeline_schedule_stage(args: argparse.Namespace) -> tuple[Pipeline, Schedule]:
    """The pipeline and schedule the options name, with --stage checked to be one of its stages."""
    p = api.load_pipeline(args.pipeline, args.size)
    sched = api.load_schedule(p, args.schedule)
    if args.stage not in p.stage_map:
        raise A.CliError(f"--stage {args.stage!r}: pipeline {p.name!r} has no such stage (stages: {', '.join(p.stage_map)})")
    return p, sched


def _footprint(args: argparse.Namespace) -> int:
    from ..teaching.footprint import FootprintError, footprint, loop_levels  # noqa: PLC0415

    p, sched = _pipeline_schedule_stage(args)
    try:
        f = footprint(p, sched, args.stage, args.loop)
    except FootprintError as exc:
        raise A.CliError(str(exc)) from None
    obj = {
        "stage": f.stage,
        "loop": f.loop,
        "loops": loop_levels(p, sched, args.stage),
        "iterations": f.iterations,
        "reads": [
            {"source": r.source, "kind": r.kind, "region": list(r.region), "elements": r.elements, "bytes": r.bytes} for r in f.reads
        ],
        "stored": [
            {"stage": b.stage, "level": b.level, "shape": list(b.shape), "elements": b.elements, "bytes": b.bytes} for b in f.stored
        ],
        "read_bytes": f.read_bytes,
        "stored_bytes": f.stored_bytes,
        "fits": f.fits(),
        "caches": [{"level": c.level, "type": c.type, "size_bytes": c.size_bytes, "source": c.source} for c in f.caches],
    }
    where = f"per iteration of {f.stage}.{f.loop} ({f.iterations} iterations)" if f.loop else f"per realization of {f.stage}"
    lines = [f"{where}: reads {f.read_bytes} bytes, allocates {f.stored_bytes} bytes"]
    lines += [f"  reads {r.source} ({r.kind}) {'x'.join(map(str, r.region))} = {r.bytes} bytes" for r in f.reads]
    lines += [f"  allocates {b.stage} at {b.level} {'x'.join(map(str, b.shape))} = {b.bytes} bytes" for b in f.stored]
    caches = ", ".join(f"{c.label} {c.size_bytes if c.size_bytes else 'unknown'}" for c in f.caches)
    lines.append(f"  caches: {caches}; the reads fit in {f.fits() or 'none of them'}")
    A.print_result(args, obj, "\n".join(lines))
    return 0


def _animate(args: argparse.Namespace) -> int:
    from ..teaching import animate as AN  # noqa: PLC0415  # Pillow loads with the command only
    from ..teaching.trace import TraceError, parse_extent, trace  # noqa: PLC0415

    p, sched = _pipeline_schedule_stage(args)
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
