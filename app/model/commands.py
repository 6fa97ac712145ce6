"""Undoable schedule changes. Each command holds the document's schedule before and after
(deep copies) and swaps them on undo/redo through Document.replace_schedule; views follow
the document's `changed` signal and are never touched here. The "after" schedule is built
and validated in the constructor, so an invalid edit raises ScheduleError before anything
reaches the undo stack."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from engine.schedule import Schedule, format_directive

from . import edits
from .document import Document, schedule_label
from .edits import Directive


class ScheduleCommand(QUndoCommand):
    """Replace the document's schedule (and optionally its spec); undo puts the old one back."""

    def __init__(
        self, doc: Document, after: Schedule, text: str, spec: str | None = None, stage: str | None = None, validated: bool = False
    ) -> None:
        super().__init__(text)
        self.doc = doc
        self.stage = stage  # the stage edited, if one: the editor shows it after undo/redo
        self.validated = validated  # `after` came from an edit (edits.py), which validated it against doc.pipeline
        self.before = doc.schedule.copy(), doc.schedule_spec
        self.after = after.copy(), spec or doc.schedule_spec

    def redo(self) -> None:
        sched, spec = self.after
        self.doc.replace_schedule(sched.copy(), spec, self.text(), validated=self.validated)

    def undo(self) -> None:
        sched, spec = self.before
        self.doc.replace_schedule(sched.copy(), spec, f"undo {self.text()}")


def _where(stage: str, update: bool) -> str:
    return f"{stage}{'.update' if update else ''}"


class StageEdit(ScheduleCommand):
    """An edit of one stage's directives. The packed copies (wrappers) it left invalid, which
    the edit dropped, are in `dropped` (each with why it no longer fits) and in the text,
    so the undo list says so ("prod: root; B.in(prod) dropped")."""

    def __init__(self, doc: Document, after: Schedule, text: str, stage: str) -> None:
        assert doc.pipeline is not None
        self.dropped = [(w, edits.wrapper_problem(doc.pipeline, after, w)) for w in edits.dropped_wrappers(doc.schedule, after)]
        if self.dropped:
            text += f"; {', '.join(w.label for w, _ in self.dropped)} dropped"
        super().__init__(doc, after, text, stage=stage, validated=True)


class AddDirective(StageEdit):
    def __init__(self, doc: Document, stage: str, update: bool, d: Directive) -> None:
        assert doc.pipeline is not None
        after = edits.add(doc.pipeline, doc.schedule, stage, update, d)
        text = f"{_where(stage, update)}: add {format_directive(d)}"
        super().__init__(doc, after, text, stage)


class EditDirective(StageEdit):
    def __init__(self, doc: Document, stage: str, update: bool, index: int, d: Directive) -> None:
        assert doc.pipeline is not None
        after = edits.replace(doc.pipeline, doc.schedule, stage, update, index, d)
        text = f"{_where(stage, update)}: #{index} → {format_directive(d)}"
        super().__init__(doc, after, text, stage)


class RemoveDirective(StageEdit):
    def __init__(self, doc: Document, stage: str, update: bool, index: int) -> None:
        assert doc.pipeline is not None
        old = edits.directives(doc.schedule, stage, update)[index]
        after = edits.remove(doc.pipeline, doc.schedule, stage, update, index)
        text = f"{_where(stage, update)}: remove {format_directive(old)}"
        super().__init__(doc, after, text, stage)


class MoveDirective(StageEdit):
    def __init__(self, doc: Document, stage: str, update: bool, index: int, delta: int) -> None:
        assert doc.pipeline is not None
        d = edits.directives(doc.schedule, stage, update)[index]
        after = edits.move(doc.pipeline, doc.schedule, stage, update, index, delta)
        word = "up" if delta < 0 else "down"
        text = f"{_where(stage, update)}: move {format_directive(d)} {word}"
        super().__init__(doc, after, text, stage)


class QuickAction(StageEdit):
    def __init__(self, doc: Document, stage: str, update: bool, action: str) -> None:
        assert doc.pipeline is not None
        label, _tip, fn = edits.QUICK_ACTIONS[action]
        after = fn(doc.pipeline, doc.schedule, stage, update)
        text = f"{_where(stage, update)}: {label.lower()}"
        super().__init__(doc, after, text, stage)


class RemoveWrapper(ScheduleCommand):
    """Remove a packed copy (wrapper `name`): its consumer reads the source itself again."""

    def __init__(self, doc: Document, name: str) -> None:
        assert doc.pipeline is not None
        w = doc.schedule.wrappers.get(name)
        after = edits.remove_wrapper(doc.pipeline, doc.schedule, name)
        assert w is not None  # remove_wrapper refused an unknown name
        super().__init__(doc, after, f"{w.consumer}: remove packed copy {w.label}", stage=w.consumer, validated=True)


class UseSchedule(ScheduleCommand):
    """Switch to a named schedule (default, hand, a file); raises api.InputError."""

    def __init__(self, doc: Document, spec: str) -> None:
        super().__init__(doc, doc.load_spec(spec), f"use the {schedule_label(spec)} schedule", spec=spec)


class RestoreVariant(ScheduleCommand):
    """Go back to a schedule seen earlier in the session (from the history plot)."""

    def __init__(self, doc: Document, schedule: Schedule, spec: str, number: int) -> None:
        super().__init__(doc, schedule, f"return to variant {number}", spec=spec)
