"""Project files: one JSON document with the pipeline, every variant's schedule, the
session's measurements and the user's notes, so a session can be closed and picked up
again (or sent to someone). Saved atomically; read back with every field checked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import zoo
from engine.ir import Pipeline, PipelineError
from engine.measure import Measurement
from engine.schedule import Schedule, ScheduleError

from .code_view import atomic_write
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
            {"label": v.label, "spec": v.spec, "predicted_ms": v.predicted_ms, "schedule": v.schedule.to_json()} for v in history.variants
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
        with path.open(encoding="utf-8") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return f'"format": "{FORMAT}"' in head


def load(path: Path) -> Project:
    """Read a project (raises ProjectError naming the file and the problem)."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProjectError(f"{path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path}: not JSON ({exc})") from None
    try:
        return from_json(d)
    except ProjectError as exc:
        raise ProjectError(f"{path}: {exc}") from None


def from_json(d: Any) -> Project:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ProjectError("not a Schedule Explorer project")
    if d.get("version") != VERSION:
        raise ProjectError(f"project version {d.get('version')!r} is not supported (this app reads version {VERSION})")
    try:
        p = Pipeline.from_json(d["pipeline"])
        sched = Schedule.from_json(d["schedule"])
        variants = []
        for k, v in enumerate(d.get("variants", [])):
            s = Schedule.from_json(v["schedule"])
            pred = v.get("predicted_ms")
            variants.append(Variant(k + 1, s.content_hash(), s, str(v.get("label", "")), str(v.get("spec", "default")), pred))
        measurements = [Measurement.from_json(m) for m in d.get("measurements", [])]
        spec = str(d.get("pipeline_spec", p.name))
        size = str(d.get("size", "full"))
    except (KeyError, TypeError, ValueError, PipelineError, ScheduleError) as exc:
        raise ProjectError(f"damaged project ({type(exc).__name__}: {exc})") from None
    # A built-in pipeline that has changed since the save is kept as saved, not as a zoo entry.
    if spec in zoo.ZOO and (size not in zoo.SIZES or zoo.get(spec, size).content_hash() != p.content_hash()):
        spec = f"{p.name} (from project)"
    return Project(
        p, spec, size, str(d.get("schedule_spec", "default")), str(d.get("spec_hash", "")), sched, variants, measurements,
        str(d.get("notes", "")),
    )  # fmt: skip
