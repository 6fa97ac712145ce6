"""The open document: one pipeline, the schedule applied to it, and what is derived from
both (the loop nest, the cost model's prediction). Views read it and redraw on `changed`;
the schedule editor changes it only through undoable commands (app/model/commands.py), which
call `replace_schedule`, so no view keeps its own copy of the state."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine import api, zoo
from engine.costmodel import Prediction, default_model
from engine.ir import Pipeline
from engine.loopnest import LoopNest
from engine.loopnest import build as build_loopnest
from engine.schedule import Schedule, ScheduleError, to_source

BUILTIN_SCHEDULES = ("default", "hand")
# Imported models have no hand-written schedule; the rule-based one is the useful start.
MODEL_SCHEDULES = ("default", "heuristic")
NAMED_SCHEDULES = frozenset(BUILTIN_SCHEDULES + MODEL_SCHEDULES)
MODEL_SUFFIX = ".onnx"


def is_model_spec(spec: str) -> bool:
    """Whether a pipeline spec names a model file to import (not a zoo name or pipeline JSON):
    ONNX, or TensorFlow's .keras, .pb or SavedModel directory."""
    from engine.frontends import is_model_file  # noqa: PLC0415

    return is_model_file(spec)


def schedule_label(spec: str) -> str:
    """Short name of a schedule spec for titles and combos: default, hand, heuristic or the file's stem."""
    return spec if spec in NAMED_SCHEDULES else Path(spec).stem


# Rule-based and hand schedules depend on the pipeline alone: remembered per (pipeline hash,
# spec), as the schedule combo asks which specs apply after every change (a ResNet-50's
# heuristic schedule takes about a second).
_MEMO: OrderedDict[tuple[str, str], Schedule | str] = OrderedDict()
_MEMO_SIZE = 16


def load_schedule(p: Pipeline, spec: str) -> Schedule:
    """api.load_schedule with every failure turned into api.InputError, so callers can fall back."""
    if spec not in ("hand", "heuristic"):
        return _load_schedule(p, spec)
    key = (p.content_hash(), spec)
    if key not in _MEMO:
        try:
            _MEMO[key] = _load_schedule(p, spec)
        except api.InputError as exc:
            _MEMO[key] = str(exc)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    _MEMO.move_to_end(key)
    got = _MEMO[key]
    if isinstance(got, str):
        raise api.InputError(got)
    return got.copy()  # a fresh copy: callers may edit theirs


def _load_schedule(p: Pipeline, spec: str) -> Schedule:
    try:
        return api.load_schedule(p, spec)
    except api.InputError:
        raise
    except ScheduleError as exc:  # a schedule file written for another pipeline
        raise api.InputError(f"{schedule_label(spec)}: {exc}") from None
    except Exception as exc:  # engine/hand_schedules.py is still being written: a broken one must not stop the app
        if spec != "hand":
            raise
        raise api.InputError(f"hand-written schedules are unavailable ({type(exc).__name__}: {exc})") from None


class Document(QObject):
    """Current pipeline + schedule. Emits `changed` after every successful change."""

    changed = Signal()
    pipeline_changed = Signal()  # just before `changed`, when another pipeline (or size) was opened

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pipeline: Pipeline | None = None
        self.pipeline_spec = ""  # zoo name or pipeline .json path
        self.size = "full"
        self.schedule = Schedule()
        self.schedule_spec = "default"  # "default", "hand" or a schedule .json path
        self.loopnest: LoopNest | None = None
        self.loopnest_text = ""
        self.spans: dict[str, tuple[int, int]] = {}
        self.schedule_hash = self.schedule.content_hash()
        self.prediction: Prediction | None = None
        self.prediction_error = ""
        self._spec_hashes: dict[str, str] = {}  # hash of each spec's schedule as loaded
        self.change_label = ""  # what made the current schedule: a spec's name or an edit's text

    @property
    def is_builtin(self) -> bool:
        return self.pipeline_spec in zoo.ZOO

    @property
    def is_model(self) -> bool:
        """The pipeline was imported from a model file (ONNX)."""
        return is_model_spec(self.pipeline_spec)

    @property
    def title(self) -> str:
        if self.pipeline is None:
            return ""
        size = f" ({self.size})" if self.is_builtin else ""
        return f"{self.pipeline.name}{size} · {schedule_label(self.schedule_spec)}{' (edited)' if self.edited else ''}"

    @property
    def edited(self) -> bool:
        """Whether the schedule differs from its spec's as loaded (edits undone read as unedited)."""
        return self._spec_hashes.get(self.schedule_spec, self.schedule_hash) != self.schedule_hash

    def open(self, spec: str, size: str, schedule_spec: str) -> str | None:
        """Load a pipeline (raises api.InputError) with `schedule_spec`, or with the default
        schedule if that one does not apply; returns a note saying why when it fell back."""
        p = api.load_pipeline(spec, size)
        note = None
        try:
            sched = load_schedule(p, schedule_spec)
        except api.InputError as exc:
            if schedule_spec == "default":
                raise
            note = f"{exc}; showing the default schedule"
            schedule_spec, sched = "default", load_schedule(p, "default")
        self.load(p, spec, size, schedule_spec, sched)
        return note

    def load(
        self, p: Pipeline, spec: str, size: str, schedule_spec: str, sched: Schedule, spec_hash: str | None = None, validated: bool = False
    ) -> None:
        """Show a pipeline object with a schedule (raises ScheduleError, changing nothing).
        `spec_hash`: the hash of `schedule_spec`'s schedule as first loaded (a project keeps
        it, so a schedule saved while edited still reads as edited). `validated`: the caller
        has just validated `sched` against `p` (a project's loader does)."""
        before = self.pipeline, self.pipeline_spec, self.size, self._spec_hashes
        self.pipeline, self.pipeline_spec, self.size = p, spec, size
        self._spec_hashes = {schedule_spec: spec_hash or sched.content_hash()}
        try:
            self._apply(schedule_spec, sched, emit=False, check=not validated)  # validates before it changes anything
        except Exception:
            self.pipeline, self.pipeline_spec, self.size, self._spec_hashes = before
            raise
        self.pipeline_changed.emit()  # listeners see the new pipeline with its schedule
        self.changed.emit()

    @staticmethod
    def load_schedule_for(p: Pipeline, spec: str) -> Schedule:
        """A spec's schedule for a pipeline not yet shown (raises api.InputError)."""
        return load_schedule(p, spec)

    def spec_hash(self, spec: str) -> str | None:
        return self._spec_hashes.get(spec)

    def set_schedule(self, spec: str) -> None:
        """Switch the schedule of the current pipeline (raises api.InputError)."""
        self.replace_schedule(self.load_spec(spec), spec)

    def load_spec(self, spec: str) -> Schedule:
        """The schedule a spec names for the current pipeline (raises api.InputError)."""
        if self.pipeline is None:
            raise api.InputError("no pipeline is open")
        sched = load_schedule(self.pipeline, spec)
        self._spec_hashes[spec] = sched.content_hash()
        return sched

    def replace_schedule(self, sched: Schedule, spec: str | None = None, label: str = "", validated: bool = False) -> None:
        """Show `sched` (validated: raises ScheduleError, leaving the document as it was).
        Undoable commands call this with copies; `spec` defaults to the current one.
        `validated`: the caller has just validated `sched` against this pipeline (an edit
        does), so it is not validated again (~17 ms on ResNet-50)."""
        if self.pipeline is None:
            raise api.InputError("no pipeline is open")
        spec = self.schedule_spec if spec is None else spec
        self._apply(spec, sched, label, check=not validated)

    def schedule_options(self, specs: list[str]) -> dict[str, str | None]:
        """For each spec, None if it applies to the current pipeline, else the reason it does not."""
        out: dict[str, str | None] = {}
        for spec in specs:
            try:
                if self.pipeline is None:
                    raise api.InputError("no pipeline is open")
                load_schedule(self.pipeline, spec)
                out[spec] = None
            except api.InputError as exc:
                out[spec] = str(exc)
        return out

    def source(self, lang: str) -> str:
        """The schedule as Halide source, 'cpp' or 'python'."""
        if self.pipeline is None:
            return ""
        return to_source(self.pipeline, self.schedule, lang)

    def placement_text(self, stage: str) -> str:
        """Where a stage is computed: root, inline, or at consumer.loop."""
        if self.loopnest is None:
            return ""
        pl = self.loopnest.placements[stage]
        if pl.compute == "at" and pl.at is not None:
            return f"at {pl.at[0]}.{pl.at[1]}"
        return pl.compute

    def _apply(self, spec: str, sched: Schedule, label: str = "", emit: bool = True, check: bool = True) -> None:
        assert self.pipeline is not None
        nest = build_loopnest(self.pipeline, sched, check)  # validates first (check): raises before anything changes
        self.schedule, self.schedule_spec, self.loopnest = sched, spec, nest
        self.change_label = label or schedule_label(spec)
        self.schedule_hash = sched.content_hash()
        self.loopnest_text, self.spans = nest.render_with_spans()
        self.prediction, self.prediction_error = self._predict()
        if emit:
            self.changed.emit()

    def repredict(self) -> None:
        """Predict the current schedule again (the default cost model changed: fine-tuned or reset)."""
        if self.pipeline is not None:
            self.prediction, self.prediction_error = self._predict()
            self.changed.emit()

    def _predict(self) -> tuple[Prediction | None, str]:
        assert self.pipeline is not None
        try:
            return default_model().predict(self.pipeline, self.schedule, nest=self.loopnest), ""
        except Exception as exc:  # noqa: BLE001  # a model failure must not stop an edit from showing
            return None, f"{type(exc).__name__}: {exc}"
