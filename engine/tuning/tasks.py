"""A model's distinct tasks: the units segments.py cuts at root buffers, grouped by their
canonical form (stages and inputs renamed by position, the schedule left out), so identical
layers are one task tuned once and its schedule applied to every occurrence.

A unit is the smallest group of stages that must compile together under the start schedule
(a stage computed inside another's loops joins it). Moves (moves.py) keep every stage's
placement, so a tuned task schedule never changes where the cuts are and applies to each
occurrence by renaming.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import segments
from ..ir import Pipeline
from ..schedule import Schedule, ScheduleError, validate


@dataclass(frozen=True)
class Occurrence:
    """Where a task occurs: canonical stage name -> real stage name (canonical order), and
    canonical input name -> real input or stage (what a wrapper of an input is renamed by)."""

    names: tuple[tuple[str, str], ...]
    inputs: tuple[tuple[str, str], ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(real for _, real in self.names)


@dataclass
class Task:
    """One distinct unit of the model: its canonical pipeline (inputs segin0.., stages
    segst0..), the start schedule (the first occurrence's, in canonical names) and where it
    occurs. `key` is the canonical pipeline's content hash: equal for identical layers, in
    this model or another."""

    index: int
    key: str
    pipeline: Pipeline
    start: Schedule
    occurrences: list[Occurrence] = field(default_factory=list)

    @property
    def weight(self) -> int:
        """How many times the model runs this task."""
        return len(self.occurrences)

    @property
    def signature(self) -> str:
        """What similar tasks share (same operators in the same order, other shapes): the
        key results transfer by."""
        return "+".join(s.op for s in self.pipeline.stages)

    @property
    def label(self) -> str:
        """A readable name: the first occurrence's first non-trivial stage and the ops."""
        first = self.occurrences[0].stages if self.occurrences else ()
        main = next((real for (c, real) in self.occurrences[0].names if self.pipeline.stage(c).op not in ("pad",)), None) if first else None
        return f"{main or (first[0] if first else self.key[:8])} [{self.signature}]"

    def flops(self) -> float:
        return float(self.pipeline.flops())


def extract_tasks(p: Pipeline, sched: Schedule) -> list[Task]:
    """The distinct tasks of `p` under `sched` (each unit of segments.units once), in the
    order they first occur; every unit is one occurrence of exactly one task."""
    validate(p, sched)
    tasks: dict[str, Task] = {}
    for seg in segments.partition(p, sched, max_stages=0):  # no grouping: one unit per segment
        _, cp, cs, names = segments.canonical_form(p, sched, seg)
        key = cp.content_hash()
        task = tasks.get(key)
        if task is None:
            task = tasks[key] = Task(len(tasks), key, cp, Schedule(dict(cs.stages), f"task {len(tasks)}", dict(cs.wrappers)))
        stages, inputs = (tuple((c, names[c]) for c in cs) for cs in ([s.name for s in cp.stages], [i.name for i in cp.inputs]))
        task.occurrences.append(Occurrence(stages, inputs))
    return list(tasks.values())


def apply_tasks(p: Pipeline, base: Schedule, tasks: list[Task], chosen: dict[str, Schedule], name: str = "tuned") -> Schedule:
    """`base` with each task's chosen schedule (canonical names; key -> schedule) applied to
    every occurrence of the task; tasks not in `chosen` keep `base`'s decisions. Validated
    against `p` (raises ScheduleError naming the real stage at fault)."""
    out = base.copy(name)
    for t in tasks:
        s = chosen.get(t.key)
        if s is None:
            continue
        for occ in t.occurrences:
            ren = dict(occ.names) | dict(occ.inputs)
            for canon, real in occ.names:
                out.stages[real] = segments.renamed(s.of(canon), ren)
            # The occurrence's wrappers are the task schedule's (packed copies its stages read), renamed.
            reals = set(occ.stages)
            out.wrappers = {k: w for k, w in out.wrappers.items() if w.consumer not in reals}
            for w in s.wrappers.values():
                rw = segments.renamed_wrapper(w, ren)
                out.wrappers[rw.name] = rw
    validate(p, out)
    return out


def transfer(s: Schedule, task: Task) -> Schedule | None:
    """Another task's schedule `s` as a starting point for `task` (a similar one: same
    operators, another shape; canonical stage names are the same): `s` itself where it
    validates on `task`'s pipeline, else None."""
    if set(s.stages) != set(task.start.stages):
        return None
    try:
        validate(task.pipeline, s)
    except (ScheduleError, ValueError):
        return None
    return Schedule(dict(s.stages), task.start.name, dict(s.wrappers))
