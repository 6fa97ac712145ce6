"""The core subcommands: `pipelines`, `show`, `measure`, `forget`, `autoschedule`, `lower`,
`export` and `import` (engine/cli/__init__.py wires every CLI module's `register` and `run`).

With --json each prints one JSON object on stdout; an error is raised (`CliError`, or the
engine's own error types) and printed on one line by `main`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import api, isolated, zoo
from ..database import Database
from ..halide_backend import AUTOSCHEDULERS
from ..loopnest import build as build_loopnest
from ..measure import Measurement, Runner
from ..schedule import to_source
from . import args as A
from .args import CliError, print_result


def _common(sp: argparse.ArgumentParser, schedule: bool = True) -> None:
    sp.add_argument("pipeline", help="a built-in pipeline name, a pipeline .json file or an .onnx model")
    sp.add_argument("--size", choices=zoo.SIZES, default="full", help="built-in pipelines: test size or realistic size")
    if schedule:
        sp.add_argument("--schedule", default="default", help="default, hand, heuristic, or a schedule .json file")
    sp.add_argument("--json", action="store_true", help="print one JSON object")


def _measure_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--db", help="SQLite file (default: $SCHEDULE_EXPLORER_DB or the user data directory)")
    sp.add_argument("--no-db", action="store_true", help="neither read nor write the database")
    sp.add_argument("--force", action="store_true", help="measure again even if a stored result exists")
    sp.add_argument("--threads", type=A.threads, default=None, help=f"Halide threads, 1 to {A.MAX_THREADS} (default: all cores)")
    sp.add_argument("--min-time", type=A.nonneg_seconds, default=0.3, help="minimum total timed seconds")
    sp.add_argument("--timeout", type=A.positive_seconds, default=600.0, help="seconds before the job is killed")
    sp.add_argument("--no-profile", action="store_true", help="skip the per-stage profile")


def register(sub: Any) -> None:
    """Add the core subcommands to an `add_subparsers()` object."""
    sp = sub.add_parser("pipelines", help="list the built-in pipelines")
    sp.add_argument("--json", action="store_true")
    _common(sub.add_parser("show", help="pipeline, schedule and loop nest"))
    sp = sub.add_parser("measure", help="compile, time and verify a schedule")
    _common(sp)
    _measure_opts(sp)
    sp.add_argument("--peers", action="store_true", help="also time ONNX Runtime and PyTorch on the same input (engine/bench/peers.py)")
    sp = sub.add_parser(
        "forget",
        help="clear the stored measurements of one pipeline (every schedule), so the next measure runs again",
        description="Removes the pipeline's verified measurements and recorded failures from the database; "
        "other pipelines' results are kept. `measure --force` re-measures one schedule instead.",
    )
    sp.add_argument("pipeline", help="a built-in pipeline name, a pipeline .json file or an .onnx model")
    sp.add_argument("--size", choices=zoo.SIZES, default="full", help="built-in pipelines: test size or realistic size")
    sp.add_argument("--db", help="SQLite file (default: $SCHEDULE_EXPLORER_DB or the user data directory)")
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp = sub.add_parser("autoschedule", help="run one of Halide's autoschedulers and measure its result")
    _common(sp, schedule=False)
    sp.add_argument("--with", dest="autoscheduler", choices=list(AUTOSCHEDULERS), default="Adams2019")
    sp.add_argument(
        "--out", type=A.output_file, help="also write its schedule, read back into directives, as JSON (loads with --schedule FILE)"
    )
    _measure_opts(sp)
    sp = sub.add_parser("lower", help="Halide's lowered Stmt for a schedule")
    _common(sp)
    sp.add_argument("--html", type=A.output_file, help="also write the HTML Stmt to this file")
    sp = sub.add_parser("export", help="the schedule as Halide C++ or Python source")
    _common(sp)
    sp.add_argument("--lang", choices=["cpp", "python"], default="cpp")
    sp = sub.add_parser(
        "import",
        help="import an ONNX, TensorFlow or PyTorch model into a pipeline and report the mapping",
        description="MODEL.onnx, a TensorFlow model (MODEL.keras, a SavedModel directory, a frozen GraphDef .pb), "
        "or path/model.py:ClassName with --input-shape. A .py file is imported, which RUNS ITS CODE: "
        "name only your own files. Its class is built without arguments and traced with torch.fx.",
    )
    sp.add_argument(
        "model", help="MODEL.onnx, MODEL.keras, a SavedModel directory, a .pb, or path/to/model.py:ClassName (runs that file's code)"
    )
    sp.add_argument(
        "--input-shape", action="append", default=[], help="PyTorch: an example input's shape, e.g. 1,3,224,224 (once per input)"
    )
    sp.add_argument("--weights-dir", type=A.output_dir, help="where the weights .npz goes (default: the user cache directory)")
    sp.add_argument("--out", type=A.output_file, help="also write the pipeline JSON to this file (then usable by show / measure / ...)")
    sp.add_argument("--json", action="store_true")


def cmd_pipelines(args: argparse.Namespace) -> int:
    rows = []
    for n in zoo.names():
        p = zoo.get(n, "full")
        rows.append({"name": n, "stages": len(p.stages), "description": p.description, "gflop": round(p.flops() / 1e9, 4)})
    text = "\n".join(f"{r['name']:<16} {r['stages']:>3} stages  {r['description']}" for r in rows)
    print_result(args, {"pipelines": rows}, text)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    s = api.load_schedule(p, args.schedule)
    nest = build_loopnest(p, s).render()
    obj = {
        "pipeline": p.to_json(),
        "pipeline_hash": p.content_hash(),
        "schedule": s.to_json(),
        "schedule_hash": s.content_hash(),
        "loop_nest": nest,
    }
    print_result(args, obj, f"# {p.name}: {p.description}\n# schedule {s.name or '?'} ({s.content_hash()})\n\n{nest}")
    return 0


def _runner_db(args: argparse.Namespace) -> tuple[Runner, Database | None]:
    db = None if args.no_db else Database(args.db)
    return Runner(args.threads), db


def _job_opts(args: argparse.Namespace) -> dict[str, Any]:
    return {"min_time_s": args.min_time, "timeout_s": args.timeout, "profile": not args.no_profile}


def _report(args: argparse.Namespace, m: Measurement, extra: dict[str, Any]) -> int:
    obj = {**extra, **m.to_json()}
    if m.ok:
        stages = ", ".join(f"{k} {v:.3f}" for k, v in m.stages.items())
        text = (
            f"{m.pipeline} [{extra.get('schedule')}]: median {m.median_ms:.3f} ms (min {m.min_ms:.3f}, IQR {m.iqr_ms:.3f}, {m.runs} runs), "
            f"{m.gflops:.2f} GFLOP/s, compile {m.compile_s:.2f} s, verified ({m.verify_method}, max abs err {m.max_abs_err:.3g}), "
            f"{m.threads} threads{' [cached]' if m.cached else ''}" + (f"\nper stage (ms, profiled): {stages}" if stages else "")
        )
        print_result(args, obj, text)
        return 0
    if args.json:
        print(json.dumps(obj, indent=2))
    raise CliError(f"{m.error_kind}: {m.error}")


def cmd_measure(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    s = api.load_schedule(p, args.schedule)
    runner, db = _runner_db(args)
    with runner:
        m = api.measure(p, s, runner, db, force=args.force, **_job_opts(args))
    extra: dict[str, Any] = {"schedule": s.name or args.schedule, "size": args.size}
    if args.peers and m.ok:
        from ..bench.peers import measure_peers  # noqa: PLC0415  # onnxruntime / torch load only when asked

        extra["peers"] = [t.to_json() for t in measure_peers(p, runner.threads, args.min_time)]
    code = _report(args, m, extra)
    for t in extra.get("peers", []) if not args.json else []:
        print(
            f"  {t['peer']}: "
            + (f"median {t['median_ms']:.3f} ms (min {t['min_ms']:.3f}), verified {t['verified']}" if t["ok"] else t["error"])
        )
    return code


def cmd_forget(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    with Database(args.db) as db:
        gone, failed = api.forget_measurements(p, db)
        path = db.path
    obj = {"pipeline": p.name, "pipeline_hash": p.content_hash(), "measurements": gone, "failures": failed, "db": str(path)}
    plural = ("" if gone == 1 else "s", "" if failed == 1 else "s")
    print_result(args, obj, f"{p.name}: removed {gone} stored measurement{plural[0]} and {failed} failure record{plural[1]} from {path}")
    return 0


def cmd_autoschedule(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    runner, db = _runner_db(args)
    with runner:
        m = api.measure(p, None, runner, db, autoscheduler=args.autoscheduler, force=args.force, **_job_opts(args))
    extra: dict[str, Any] = {"schedule": args.autoscheduler, "size": args.size}
    if args.out and m.ok:
        from ..halide_source import SourceError, from_halide_source  # noqa: PLC0415

        try:
            sched, notes = from_halide_source(p, m.schedule_source)
        except SourceError as exc:
            raise CliError(f"--out: {args.autoscheduler}'s schedule cannot be read into directives: {exc}") from None
        Path(args.out).write_text(sched.dumps() + "\n")
        extra |= {"out": args.out, "dropped": notes}
    code = _report(args, m, extra)
    if args.out and m.ok and not args.json:
        print(f"schedule written to {args.out}" + "".join(f"\n  {n}" for n in extra["dropped"]))
    return code


def cmd_lower(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    s = api.load_schedule(p, args.schedule)
    text = isolated.lowered_stmt(p, s)  # in a child process: a compiler crash cannot take the CLI down
    if args.html:
        Path(args.html).write_text(isolated.lowered_stmt(p, s, html=True))
    print_result(args, {"pipeline": p.name, "schedule_hash": s.content_hash(), "stmt": text, "html": args.html}, text)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    p = api.load_pipeline(args.pipeline, args.size)
    s = api.load_schedule(p, args.schedule)
    src = to_source(p, s, args.lang)
    print_result(args, {"pipeline": p.name, "lang": args.lang, "source": src}, src)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .. import frontends  # noqa: PLC0415  # onnx / torch load only for this command

    wdir = Path(args.weights_dir) if args.weights_dir else None
    if frontends.is_model_file(args.model):  # ONNX, or TensorFlow (.keras, .pb, a SavedModel directory)
        if args.input_shape:
            raise CliError("--input-shape is for PyTorch modules; an ONNX or TensorFlow model's shapes are in the file")
        res = frontends.import_model(args.model, wdir)
    else:
        if not args.input_shape:
            raise CliError("a PyTorch module needs --input-shape (e.g. --input-shape 1,3,224,224), or give an .onnx file")
        from ..frontends.torch_import import example_inputs_for, load_module_from_file  # noqa: PLC0415

        module = load_module_from_file(args.model)  # runs the named file's code: this command's purpose
        res = frontends.import_torch(module, example_inputs_for(args.input_shape), weights_dir=wdir)
    p = res.pipeline
    if args.out:
        Path(args.out).write_text(json.dumps(p.to_json(), indent=1))
    obj = {**res.report.to_json(), "pipeline": p.name, "pipeline_hash": p.content_hash(), "source": p.source}
    r = res.report
    text = "\n".join(
        [f"{p.name}: {r.stages} stages, {len(p.inputs) - len(r.inputs)} weight arrays, imported in {r.seconds:.2f} s"]
        + [f"  input  {i['name']} {i['shape']}" for i in r.inputs]
        + [f"  output {o['name']} {o['shape']}" for o in r.outputs]
        + ["  mapped: " + ", ".join(f"{k} x{v}" for k, v in r.ops_mapped.items())]
        + [f"  - {s}" for s in r.simplifications]
    )
    print_result(args, obj, text)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "pipelines": cmd_pipelines,
    "show": cmd_show,
    "measure": cmd_measure,
    "forget": cmd_forget,
    "autoschedule": cmd_autoschedule,
    "lower": cmd_lower,
    "export": cmd_export,
    "import": cmd_import,
}


def run(args: argparse.Namespace) -> int:
    return COMMANDS[args.cmd](args)
