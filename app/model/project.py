"""Project files: one JSON document with the pipeline, every variant's schedule, the
session's measurements and the user's notes, so a session can be closed and picked up
again (or sent to someone). Saved atomically; read back with every field checked."""

from __future__ import annotations

import json
import math
import reprlib
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from engine import zoo
from engine.ir import Pipeline, PipelineError, canonical_hash
from engine.measure import Measurement
from engine.schedule import Schedule, ScheduleError, default_schedule, validate

from ..code_view import atomic_write
from .document import Document
from .history import SessionHistory, Variant

FORMAT = "schedule-explorer-project"
VERSION = 1
SUFFIX = ".sxproj"


class ProjectError(ValueError):
    """A file that is not a readable project; the message says why."""


@dataclass
class Project:
    pipeline: Pipeline
    pipeline_spec: str  # the zoo name it was opened as, or the pipeline file
    size: str
    schedule_spec: str
    spec_hash: str  # the spec's schedule as first loaded (so "edited" survives a save)
    schedule: Schedule  # the current one
    variants: list[Variant] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    notes: str = ""
    schedule_error: str = ""  # why the saved current schedule did not open (the default is active instead)


def snapshot(doc: Document, history: SessionHistory, notes: str) -> dict[str, Any]:
    """The project JSON for the current session."""
    assert doc.pipeline is not None
    return {
        "format": FORMAT,
        "version": VERSION,
        "pipeline": doc.pipeline.to_json(),
        "pipeline_spec": doc.pipeline_spec,
        "size": doc.size,
        "schedule_spec": doc.schedule_spec,
        "spec_hash": doc.spec_hash(doc.schedule_spec) or doc.schedule_hash,
        "schedule": doc.schedule.to_json(),
        "variants": [
            {
                "label": v.label,
                "spec": v.spec,
                "predicted_ms": v.predicted_ms,
                "schedule": v.raw if v.raw is not None else v.schedule.to_json(),
            }
            for v in history.variants
        ],
        "measurements": [m.to_json() for m in history.measurements.values()],
        "notes": notes,
    }


def save(path: Path, doc: Document, history: SessionHistory, notes: str) -> None:
    atomic_write(path, json.dumps(snapshot(doc, history, notes), indent=1) + "\n")


def is_project(path: Path) -> bool:
    """Whether `path` looks like a project file (its suffix, or a JSON object saying so)."""
    if path.suffix == SUFFIX:
        return True
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:  # a binary file is simply not one
            head = fh.read(4096)
    except OSError:
        return False
    return f'"format": "{FORMAT}"' in head


def load(path: Path) -> Project:
    """Read a project (raises ProjectError naming the file, the field and the problem)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProjectError(f"{path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectError(f"{path}: not a text file (invalid UTF-8 at byte {exc.start})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProjectError(f"{path}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ProjectError(f"{path}: JSON nested too deeply (over {MAX_DEPTH} levels)") from None
    try:
        return from_json(d)
    except ProjectError as exc:
        raise ProjectError(f"{path}: {exc}") from None


def from_json(d: Any) -> Project:
    """A project from its JSON, every field checked (raises ProjectError naming the field).
    A saved schedule that no longer validates against the pipeline does not refuse the
    project: its variant is marked invalid, and the current one falls back to the default."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        top = "" if isinstance(d, dict) else f" (the top level is {_kind(d)}, not an object)"
        raise ProjectError(f"not a Schedule Explorer project{top}")
    version = d.get("version")
    if type(version) is not int or version != VERSION:
        raise ProjectError(f"project version {version!r} is not supported (this app reads version {VERSION})")
    deep = _too_deep(d, MAX_DEPTH)
    if deep is not None:
        raise ProjectError(f"{deep}: nested deeper than {MAX_DEPTH} levels")
    p = _pipeline(_get(d, "pipeline", "pipeline"))
    spec = _str(d.get("pipeline_spec", p.name), "pipeline_spec")
    size = _str(d.get("size", "full"), "size")
    if size not in zoo.SIZES:
        raise ProjectError(f"size: expected one of {', '.join(zoo.SIZES)}, got {_show(size)}")
    schedule_spec = _str(d.get("schedule_spec", "default"), "schedule_spec")
    spec_hash = _str(d.get("spec_hash", ""), "spec_hash")
    sched_json = _object(_get(d, "schedule", "schedule"), "schedule")
    sched, unreadable = _schedule_or_reason(sched_json, "schedule")
    variants = [_variant(v, f"variants[{k}]", k + 1) for k, v in enumerate(_list(d.get("variants", []), "variants"))]
    measurements = [_measurement(m, f"measurements[{k}]") for k, m in enumerate(_list(d.get("measurements", []), "measurements"))]
    notes = _str(d.get("notes", ""), "notes")
    # Schedules are checked against the pipeline last, once per distinct schedule.
    reasons: dict[str, str] = {}
    for v in variants:
        if v.hash not in reasons:
            reasons[v.hash] = v.invalid or _invalid_reason(p, v.schedule)
        v.invalid = reasons[v.hash]
    key = sched.content_hash() if not unreadable else canonical_hash(sched_json)
    schedule_error = unreadable or reasons.get(key)
    if schedule_error is None:
        schedule_error = _invalid_reason(p, sched)
    if schedule_error:
        if key not in reasons:  # kept as an invalid variant, so a save loses nothing
            kept = Variant(len(variants) + 1, key, sched, "saved schedule", schedule_spec, None, raw=sched_json if unreadable else None)
            kept.invalid = schedule_error
            variants.append(kept)
        sched, schedule_spec, spec_hash = default_schedule(p), "default", ""
    # A built-in pipeline that has changed since the save is kept as saved, not as a zoo entry.
    if spec in zoo.ZOO and zoo.get(spec, size).content_hash() != p.content_hash():
        spec = f"{p.name} (from project)"
    return Project(p, spec, size, schedule_spec, spec_hash, sched, variants, measurements, notes, schedule_error)


# --- field checks: each names the field's path in the project JSON -----------------------
MAX_DEPTH = 200  # far above any real project (the zoo and imported models: under 30), far below Python's recursion limit
# What the engine's decoders can raise on malformed input besides their own errors: turned
# into ProjectError at this boundary, so a damaged file never escapes as a crash.
_DECODER_FAULTS = (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError, RecursionError)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(v), "a number")


def _show(v: Any) -> str:
    return reprlib.repr(v)


def _fail(path: str, expected: str, v: Any) -> ProjectError:
    return ProjectError(f"{path}: expected {expected}, got {_show(v)}")


def _too_deep(d: Any, limit: int) -> str | None:
    """The path of the first value nested deeper than `limit` (iterative: the depth itself is the hazard)."""
    shown = 6  # levels of the path named in the message
    stack: list[tuple[Any, str, int]] = [(d, "", 1)]
    while stack:
        v, path, depth = stack.pop()
        if depth > limit:
            return path
        if depth == shown:
            path += "…"
        if isinstance(v, dict):
            stack.extend((x, path if depth >= shown else f"{path}.{k}" if path else str(k), depth + 1) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, path if depth >= shown else f"{path}[{k}]", depth + 1) for k, x in enumerate(v))
    return None


def _get(d: dict[str, Any], key: str, path: str) -> Any:
    if key not in d:
        raise ProjectError(f"{path}: missing")
    return d[key]


def _object(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _fail(path, "an object", v)
    return v


def _list(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise _fail(path, "a list", v)
    return v


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise _fail(path, "a string", v)
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(path, "true or false", v)
    return v


def _int(v: Any, path: str) -> int:
    if type(v) is not int:  # not bool, not 7.0
        raise _fail(path, "a whole number", v)
    if v < 0:
        raise _fail(path, "a whole number ≥ 0", v)
    return v


def _number(v: Any, path: str) -> float:
    """Times, counts of work, errors: every number a project holds is finite and ≥ 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(path, "a number", v)
    if not math.isfinite(v) or v < 0:
        raise _fail(path, "a finite number ≥ 0", v)
    return float(v)


def _typed(v: Any, tp: Any, path: str) -> Any:
    """Check `v` against a field's type hint (str, bool, int, float, X | None, list[X], dict[str, X])."""
    if tp in _SCALARS:
        return _SCALARS[tp](v, path)
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return None if v is None else _typed(v, inner, path)
    if origin is list:
        return [_typed(x, args[0], f"{path}[{k}]") for k, x in enumerate(_list(v, path))]
    if origin is dict and args[0] is str:
        return {k: _typed(x, args[1], f"{path}.{k}") for k, x in _object(v, path).items()}
    raise TypeError(f"{path}: no check for fields of type {tp}")  # a new kind of field: add its check here


_SCALARS: dict[Any, Any] = {str: _str, bool: _bool, int: _int, float: _number}
_MEASUREMENT_TYPES = typing.get_type_hints(Measurement)
_MEASUREMENT_REQUIRED = [f.name for f in fields(Measurement) if f.default is MISSING and f.default_factory is MISSING]


def _measurement(v: Any, path: str) -> Measurement:
    d = _object(v, path)
    for name in _MEASUREMENT_REQUIRED:
        _get(d, name, f"{path}.{name}")
    # Keys this version does not know (a newer app's) are left out, as Measurement.from_json does.
    return Measurement(**{k: _typed(x, _MEASUREMENT_TYPES[k], f"{path}.{k}") for k, x in d.items() if k in _MEASUREMENT_TYPES})


def _pipeline(v: Any) -> Pipeline:
    d = _object(v, "pipeline")
    try:
        return Pipeline.from_json(d)
    except PipelineError as exc:
        msg = str(exc)  # most already start with "pipeline:"
        raise ProjectError(msg if msg.startswith("pipeline:") else f"pipeline: {msg}") from None
    except _DECODER_FAULTS as exc:  # the engine's decoder tripped over input it did not expect
        raise ProjectError(f"pipeline: cannot be read ({type(exc).__name__}: {exc})") from None


def _schedule_or_reason(v: Any, path: str) -> tuple[Schedule, str]:
    """A schedule read from the file. A directive (of a stage or a wrapper) that is not even
    an object is a damaged file (ProjectError naming its path); one that is an object but not a directive this
    version reads (another version's) does not refuse the project: an empty stand-in and
    the reason come back, and the caller keeps the JSON so that a save loses nothing.
    Whether a readable schedule applies to the pipeline is `_invalid_reason`'s question."""
    obj = _object(v, path)
    stages = obj.get("stages")
    for name, sd in stages.items() if isinstance(stages, dict) else ():
        for part in ("pure", "update"):
            directives = sd.get(part) if isinstance(sd, dict) else None
            for k, x in enumerate(directives if isinstance(directives, list) else ()):
                _object(x, f"{path}.stages.{name}.{part}[{k}]")
    wrappers = obj.get("wrappers")
    for j, w in enumerate(wrappers if isinstance(wrappers, list) else ()):
        directives = w.get("pure") if isinstance(w, dict) else None
        for k, x in enumerate(directives if isinstance(directives, list) else ()):
            _object(x, f"{path}.wrappers[{j}].pure[{k}]")
    try:
        return Schedule.from_json(obj), ""
    except ScheduleError as exc:
        if not isinstance(stages, dict):
            raise ProjectError(f"{path}: {exc}") from None
        return Schedule(), str(exc)


def _variant(v: Any, path: str, number: int) -> Variant:
    d = _object(v, path)
    obj = _object(_get(d, "schedule", f"{path}.schedule"), f"{path}.schedule")
    s, unreadable = _schedule_or_reason(obj, f"{path}.schedule")
    pred = d.get("predicted_ms")
    return Variant(
        number, canonical_hash(obj) if unreadable else s.content_hash(), s, _str(d.get("label", ""), f"{path}.label"),
        _str(d.get("spec", "default"), f"{path}.spec"), None if pred is None else _number(pred, f"{path}.predicted_ms"),
        invalid=unreadable, raw=obj if unreadable else None,
    )  # fmt: skip


def _invalid_reason(p: Pipeline, sched: Schedule) -> str:
    """Why `sched` does not apply to `p` ("" when it does)."""
    try:
        validate(p, sched)
    except ScheduleError as exc:
        return str(exc)
    except _DECODER_FAULTS as exc:  # a directive the engine's checks did not expect
        return f"invalid schedule ({type(exc).__name__}: {exc})"
    return ""
