"""The engine's public entry points used by the CLI and the app: load pipelines and
schedules by name or file, and measure them through the runner and the database cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import zoo
from .database import Database
from .halide_backend import target_string
from .ir import Pipeline, PipelineError
from .measure import Job, Measurement, MeasureRunner, host_fingerprint
from .schedule import Schedule, ScheduleError, default_schedule, validate


class InputError(ValueError):
    """A name or file the user gave that cannot be used; the message says why."""


def read_text(path: Path) -> str:
    """A user's text file (UTF-8, a byte-order mark allowed); a file that cannot be read (a
    directory, no permission) or is not UTF-8 is an InputError naming it."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None


# A pipeline's JSON nests about 30 levels (zoo, imported and random pipelines); much deeper
# parses, but then overflows Python's recursion in the engine's tree walks (hashing, jobs).
MAX_PIPELINE_DEPTH = 200


def json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON (without recursion: it may be deep)."""
    best, todo = 0, [(obj, 1)]
    while todo:
        x, d = todo.pop()
        best = max(best, d)
        if isinstance(x, dict):
            todo += [(v, d + 1) for v in x.values()]
        elif isinstance(x, list):
            todo += [(v, d + 1) for v in x]
    return best


def load_pipeline(spec: str, size: str = "full") -> Pipeline:
    """A zoo name, a pipeline JSON file, or a model (imported; weights cached): ONNX, or
    TensorFlow's .keras, frozen GraphDef .pb or SavedModel directory."""
    if spec in zoo.ZOO:
        return zoo.get(spec, size)
    path = Path(spec)
    from .frontends import ModelImportError, import_model, is_model_file  # noqa: PLC0415  # onnx / tensorflow load only when used

    if is_model_file(path):
        try:
            return import_model(path).pipeline
        except ModelImportError as exc:
            raise InputError(str(exc)) from None
    if path.suffix == ".json" and path.exists():
        text = read_text(path)
        try:
            body = json.loads(text)
            depth = json_depth(body)
            if depth > MAX_PIPELINE_DEPTH:
                raise InputError(f"{path}: nested {depth} levels deep; a pipeline has at most {MAX_PIPELINE_DEPTH}")
            return Pipeline.from_json(body)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        except RecursionError:  # from the JSON parser or from reading its nested expressions
            raise InputError(f"{path}: nested too deeply to be a pipeline") from None
        except PipelineError as exc:
            raise InputError(f"{path}: {exc}") from None
    raise InputError(
        f"unknown pipeline {spec!r}: not a built-in ({', '.join(zoo.names())}), an existing .json file "
        "nor a model (.onnx, .keras, .pb, a SavedModel directory)"
    )


def load_schedule(p: Pipeline, spec: str | None) -> Schedule:
    """'default', 'hand', 'heuristic' (rule-based, any pipeline), or a schedule JSON file; validated against the pipeline."""
    if spec in (None, "default"):
        sched = default_schedule(p)
    elif spec == "hand":
        from .hand_schedules import hand_schedule  # noqa: PLC0415

        try:
            sched = hand_schedule(p)
        except KeyError:
            raise InputError(f"pipeline {p.name!r} has no hand-written schedule") from None
        sched.name = "hand"
    elif spec == "heuristic":
        from .heuristic import heuristic_schedule  # noqa: PLC0415

        sched = heuristic_schedule(p)
    else:
        path = Path(spec)
        if not path.exists():
            raise InputError(f"schedule {spec!r}: expected default, hand or an existing JSON file, or heuristic")
        try:
            sched = Schedule.loads(read_text(path))
        except ScheduleError as exc:
            if exc.directive is not None:  # a directive at fault: named with its stage, as validation names it
                raise
            raise InputError(f"{path}: {exc.reason}") from None
        sched.name = sched.name or path.stem
    validate(p, sched)
    return sched


def stored_measurement(
    p: Pipeline, db: Database, schedule_key: str, threads: int, runner: MeasureRunner | None = None, clock: str = "wall"
) -> Measurement | None:
    """The measurement `db` holds for pipeline `p` and `schedule_key` (a schedule's content
    hash, or measure.autoscheduler_key(name)) on this target and host (or those `runner`
    measures on: a cluster's node kind) with `threads` threads, timed by `clock` (marked
    `cached`), or None. The cache lookup `measure` does, without measuring. The database keeps
    one label per schedule and machine, the latest, with the clock it was timed by: a label of
    another clock is not returned (the app's times are wall-clock times)."""
    target, host = (runner.target, runner.host) if runner is not None else (target_string(), host_fingerprint())
    hit = db.lookup(p.content_hash(), schedule_key, target, host, threads)
    return hit if hit is not None and hit.clock == clock else None


def forget_measurements(p: Pipeline, db: Database) -> tuple[int, int]:
    """Clear what `db` stores for pipeline `p` (its verified measurements of every schedule,
    and its recorded failures), so the next `measure` runs the worker again; other
    pipelines' results are kept. Returns (measurements, failures) removed."""
    return db.forget(p.content_hash())


def measure(
    p: Pipeline,
    sched: Schedule | None,
    runner: MeasureRunner,
    db: Database | None = None,
    *,
    autoscheduler: str | None = None,
    force: bool = False,
    should_cancel: Callable[[], bool] | None = None,
    **job_options: Any,
) -> Measurement:
    """Measure a schedule (or Halide's autoscheduler result); a stored verified measurement for
    the same pipeline, schedule, target, host and threads, timed by the same clock, is
    returned unless `force`.
    `should_cancel` is polled while the job runs (Runner.run): when it returns True the job's
    worker process is killed and the result is a failed Measurement."""
    job = Job(p.to_json(), None if autoscheduler else (sched or default_schedule(p)).to_json(), autoscheduler, **job_options)
    key = job.schedule_key()
    if db is not None and not force:
        hit = stored_measurement(p, db, key, runner.threads, runner, job.clock)
        if hit is not None:
            return hit
    m = runner.run(job, should_cancel)
    if db is not None:
        db.put_pipeline(p.content_hash(), p.name, p.to_json())
        if job.schedule is not None:
            db.put_schedule(key, job.schedule)
        db.record(m)
    return m


def run_once(p: Pipeline, sched: Schedule, seed: int = 0) -> tuple[dict[str, Any], Any]:
    """Compile and run once in this process (no timing, no isolation), then verify.

    Returns {"inputs", "outputs", "refs", "method"} and the Verification. For tests and
    quick checks; measurements go through the Runner."""
    from . import halide_backend as HB  # noqa: PLC0415
    from . import reference as R  # noqa: PLC0415
    from . import segments  # noqa: PLC0415

    low = segments.lower(p, sched)
    low.compile()
    ins = R.make_inputs(p, seed=seed)
    _keep = low.bind(ins)
    outs = HB.output_arrays(p)
    low.runner(outs)()
    refs, method = R.reference(p, ins)
    return {"inputs": ins, "outputs": outs, "refs": refs, "method": method}, R.verify(p, outs, refs, method)
