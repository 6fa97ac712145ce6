"""Guided lessons (issue 18 item 4): data files a teacher can write, and the checks the
engine evaluates on a student's schedule.

A lesson is one JSON file (format documented in docs/LESSONS.md; the shipped ones are in
`resources/lessons/`): title, text, pipeline (a zoo name and size), the starting schedule,
the goal, hints, a reference solution and a `check`: a list of conditions, each either a
property of the loop nest (read from the engine's own model: `schedule.definition_loops`,
the placements, `teaching.trace`'s recompute counts, or Halide's lowered Stmt) or a
measurement ("at least N times faster than the start", measured and verified through
`engine.api.measure`). Everything a lesson file says is checked when it is loaded, so a
mistake is one `LessonError` naming the file and the field, found before a student sees it;
the other files still load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import loops as L
from .. import zoo
from ..ir import Pipeline
from ..measure import Measurement
from ..resources import resource_path
from ..schedule import Kind, Schedule, ScheduleError, default_schedule, definition_loops, validate
from .trace import TraceError, default_extent, trace

FORMAT_VERSION = 1
LESSONS_DIR = resource_path("lessons")  # the shipped lessons
MAX_LESSON_BYTES = 256 * 1024  # a lesson is a page of text and two schedules
NAMED_STARTS = ("default",)  # a start given by name instead of inline schedule JSON

Measure = Callable[[Pipeline, Schedule], Measurement]
Lower = Callable[[Pipeline, Schedule], str]


class LessonError(ValueError):
    """A lesson file that cannot be used: names the file and the field at fault."""

    def __init__(self, path: Path, fieldname: str, message: str) -> None:
        self.path, self.field, self.reason = path, fieldname, message
        super().__init__(f"{path}: field {fieldname!r}: {message}")


# Each condition kind: its arguments (name -> (type, required)) and a sentence for the student.
_STAGE = {"stage": (str, True), "update": (bool, False)}
CONDITIONS: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    "faster": {"factor": ((int, float), True)},
    "computed_at": {"stage": (str, True), "at": (str, True)},
    "stored_at": {"stage": (str, True), "at": (str, True)},
    "no_recompute": {"stage": (str, True), "producer": (str, True)},
    "vectorized": {**_STAGE, "width": (int, True)},
    "parallel": dict(_STAGE),
    "unrolled": {**_STAGE, "dim": (str, False)},
    "innermost_dim": {**_STAGE, "dim": (str, True)},
    "tiled": {**_STAGE, "dims": (list, True)},
    "no_inline": {},
    "stmt": {"pattern": (str, True), "present": (bool, False)},
}
MEASURED = ("faster",)


@dataclass(frozen=True)
class Condition:
    """One condition of a lesson's check: its kind and arguments, as the file gives them."""

    kind: str
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def measured(self) -> bool:
        return self.kind in MEASURED

    def describe(self) -> str:
        """What the condition asks, in a sentence."""
        a = self.args
        defn = " (update definition)" if a.get("update") else ""
        return {
            "faster": lambda: f"at least {a.get('factor')}x faster than the starting schedule (measured, verified)",
            "computed_at": lambda: f"{a.get('stage')} is computed {_at_words(str(a.get('at')))}",
            "stored_at": lambda: f"{a.get('stage')} is stored {_at_words(str(a.get('at')))}",
            "no_recompute": lambda: f"{a.get('producer')} is computed once per point for {a.get('stage')} (no redundant work)",
            "vectorized": lambda: f"the innermost loop of {a.get('stage')}{defn} is vectorized, at least {a.get('width')} lanes",
            "parallel": lambda: f"the outermost loop of {a.get('stage')}{defn} is parallel",
            "unrolled": lambda: f"a loop of {a.get('stage')}{defn}" + (f" over {a['dim']}" if a.get("dim") else "") + " is unrolled",
            "innermost_dim": lambda: f"the innermost loop of {a.get('stage')}{defn} walks dimension {a.get('dim')}",
            "tiled": lambda: f"{a.get('stage')}{defn} is tiled over {', '.join(map(str, a.get('dims', ())))}",
            "no_inline": lambda: "no stage is inlined",
            "stmt": lambda: f"the lowered Stmt {'contains' if a.get('present', True) else 'does not contain'} /{a.get('pattern')}/",
        }[self.kind]()


def _at_words(at: str) -> str:
    return {"root": "at root", "inline": "inline"}.get(at, f"at {at}")


@dataclass(frozen=True)
class Lesson:
    """One lesson, checked when loaded (its schedules validate against its pipeline)."""

    id: str
    title: str
    text: str
    pipeline: str  # a zoo name
    size: str  # small | full
    start: Mapping[str, Any] | str = field(hash=False)  # schedule JSON, or a name in NAMED_STARTS
    goal: str = ""
    hints: tuple[str, ...] = ()
    check: tuple[Condition, ...] = ()
    solution: Mapping[str, Any] = field(default_factory=dict, hash=False)
    stage: str | None = None  # the stage the lesson is about (selected when it starts)
    order: int = 0
    path: Path | None = None

    def load_pipeline(self) -> Pipeline:
        return zoo.get(self.pipeline, self.size)

    def start_schedule(self, p: Pipeline) -> Schedule:
        return _schedule(p, self.start, "start")

    def solution_schedule(self, p: Pipeline) -> Schedule:
        return _schedule(p, self.solution, "solution")

    @property
    def measured(self) -> bool:
        """Whether checking it measures (seconds, a worker process)."""
        return any(c.measured for c in self.check)


def _schedule(p: Pipeline, spec: Mapping[str, Any] | str, name: str) -> Schedule:
    if isinstance(spec, str):
        sched = default_schedule(p)
    else:
        sched = Schedule.from_json(dict(spec))
    sched.name = sched.name or name
    validate(p, sched)
    return sched


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    passed: bool
    detail: str  # what was found, in a sentence


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    details: tuple[ConditionResult, ...]


# --- loading ---------------------------------------------------------------------------
def load_lessons(directory: Path | None = None) -> tuple[list[Lesson], list[LessonError]]:
    """Every `*.json` lesson in `directory` (default: the shipped ones), sorted by order and
    title, and one LessonError for each file that is not a usable lesson."""
    folder = LESSONS_DIR if directory is None else Path(directory)
    lessons: list[Lesson] = []
    problems: list[LessonError] = []
    if not folder.is_dir():
        return [], [LessonError(folder, "(folder)", "not a folder of lessons")]
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            lesson = load_lesson(path)
            if lesson.id in seen:
                raise LessonError(path, "id", f"{lesson.id!r} is already the id of {seen[lesson.id].name}")
        except LessonError as exc:
            problems.append(exc)
            continue
        seen[lesson.id] = path
        lessons.append(lesson)
    lessons.sort(key=lambda x: (x.order, x.title))
    return lessons, problems


def load_lesson(path: Path) -> Lesson:
    """One lesson file (raises LessonError naming the path and field)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_LESSON_BYTES:
            raise LessonError(path, "(file)", f"larger than {MAX_LESSON_BYTES // 1024} KiB: not a lesson")
        body = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LessonError(path, "(file)", f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LessonError(path, "(file)", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise LessonError(path, "(file)", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise LessonError(path, "(file)", "JSON nested too deeply") from None
    return parse_lesson(body, path)


_FIELDS = ("format", "id", "title", "text", "pipeline", "start", "goal", "hints", "check", "solution", "stage", "order")


def parse_lesson(body: Any, path: Path) -> Lesson:
    """A lesson from its JSON object (raises LessonError naming `path` and the field)."""

    def fail(fieldname: str, message: str) -> LessonError:
        return LessonError(path, fieldname, message)

    if not isinstance(body, dict):
        raise fail("(file)", "a lesson is a JSON object")
    extra = sorted(set(body) - set(_FIELDS))
    if extra:
        raise fail(extra[0], f"unknown field (a lesson has: {', '.join(_FIELDS)})")
    if body.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        raise fail("format", f"unsupported format {body.get('format')!r} (this version reads {FORMAT_VERSION})")

    def text(name: str, required: bool = True) -> str:
        v = body.get(name)
        if v is None and not required:
            return ""
        if not isinstance(v, str) or not v.strip():
            raise fail(name, "missing" if v is None else "must be a non-empty string")
        return v

    lesson_id = text("id")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", lesson_id):
        raise fail("id", f"{lesson_id!r}: letters, digits, '_' and '-' only")
    title, lesson_text, goal = text("title"), text("text"), text("goal")
    hints = body.get("hints", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) and h.strip() for h in hints):
        raise fail("hints", "must be a list of non-empty strings")
    order = body.get("order", 0)
    if not isinstance(order, int) or isinstance(order, bool):
        raise fail("order", "must be an integer")

    pipe = body.get("pipeline")
    if not isinstance(pipe, dict) or set(pipe) - {"name", "size"} or not isinstance(pipe.get("name"), str):
        raise fail("pipeline", 'must be {"name": ZOO_NAME, "size": "small" | "full"}')
    name, size = pipe["name"], pipe.get("size", "small")
    if name not in zoo.ZOO:
        raise fail("pipeline.name", f"unknown pipeline {name!r} (built-in: {', '.join(zoo.ZOO)})")
    if size not in zoo.SIZES:
        raise fail("pipeline.size", f"{size!r}: choose one of {', '.join(zoo.SIZES)}")
    p = zoo.get(name, size)

    stage = body.get("stage")
    if stage is not None and stage not in p.stage_map:
        raise fail("stage", f"no stage {stage!r} in {name} (stages: {', '.join(p.stage_map)})")

    start = body.get("start", "default")
    if isinstance(start, str) and start not in NAMED_STARTS:
        raise fail("start", f"{start!r}: give schedule JSON or one of {', '.join(NAMED_STARTS)}")
    if not isinstance(start, (str, dict)):
        raise fail("start", "must be schedule JSON (an object) or a name")
    solution = body.get("solution")
    if not isinstance(solution, dict):
        raise fail("solution", "missing: a lesson ships its reference solution (schedule JSON)")
    for key, spec in (("start", start), ("solution", solution)):
        try:
            _schedule(p, spec, key)
        except ScheduleError as exc:
            raise fail(key, str(exc)) from None

    raw = body.get("check")
    if not isinstance(raw, list) or not raw:
        raise fail("check", "must be a non-empty list of conditions")
    check = tuple(_parse_condition(c, p, f"check[{k}]", fail) for k, c in enumerate(raw))
    return Lesson(lesson_id, title, lesson_text, name, size, start, goal, tuple(hints), check, solution, stage, order, path)


def _parse_condition(c: Any, p: Pipeline, where: str, fail: Callable[[str, str], LessonError]) -> Condition:
    if not isinstance(c, dict) or not isinstance(c.get("kind"), str):
        raise fail(where, f'a condition is {{"kind": ...}} with kind one of {", ".join(CONDITIONS)}')
    kind = c["kind"]
    spec = CONDITIONS.get(kind)
    if spec is None:
        raise fail(f"{where}.kind", f"unknown condition {kind!r} (one of {', '.join(CONDITIONS)})")
    args = {k: v for k, v in c.items() if k != "kind"}
    for arg, (typ, required) in spec.items():
        if arg not in args:
            if required:
                raise fail(f"{where}.{arg}", f"missing (a {kind} condition needs {', '.join(a for a, (_, r) in spec.items() if r)})")
            continue
        v = args[arg]
        if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
            raise fail(f"{where}.{arg}", f"wrong type: {v!r}")
    for arg in args:
        if arg not in spec:
            raise fail(f"{where}.{arg}", f"not an argument of {kind} (its arguments: {', '.join(spec) or 'none'})")
    for arg in ("stage", "producer"):
        if arg in args and args[arg] not in p.stage_map:
            raise fail(f"{where}.{arg}", f"no stage {args[arg]!r} in {p.name} (stages: {', '.join(p.stage_map)})")
    if args.get("update") and not p.stage(args["stage"]).is_reduction:
        raise fail(f"{where}.update", f"{args['stage']} is not a reduction: it has no update definition")
    dims = [args["dim"]] if "dim" in args else list(args.get("dims", []))
    if "stage" in args:
        known = [d.name for d in p.stage(args["stage"]).dims] + _rvar_names(p, args["stage"])
        for d in dims:
            if not isinstance(d, str) or d not in known:
                raise fail(
                    f"{where}.{'dim' if 'dim' in args else 'dims'}", f"{d!r} is not a dimension of {args['stage']} ({', '.join(known)})"
                )
    for arg in ("at",):
        if arg in args:
            _check_at(p, args[arg], f"{where}.{arg}", fail)
    if kind == "faster" and not args["factor"] > 0:
        raise fail(f"{where}.factor", "must be positive")
    if kind == "stmt":
        try:
            re.compile(args["pattern"])
        except re.error as exc:
            raise fail(f"{where}.pattern", f"not a regular expression: {exc}") from None
    return Condition(kind, args)


def _rvar_names(p: Pipeline, stage: str) -> list[str]:
    s = p.stage(stage)
    if not s.is_reduction:
        return []
    return [lp.name for lp in L.initial_loops(s, True, None) if lp.rvar]


def _check_at(p: Pipeline, at: str, where: str, fail: Callable[[str, str], LessonError]) -> None:
    if at in ("root", "inline"):
        return
    consumer, _, loop = at.partition(".")
    if consumer not in p.stage_map or not loop.isidentifier():
        raise fail(where, f"{at!r}: 'root', 'inline' or STAGE.LOOP with a stage of {p.name}")


# --- checking --------------------------------------------------------------------------
def check(
    lesson: Lesson, pipeline: Pipeline, schedule: Schedule, measure: Measure | None = None, lower: Lower | None = None
) -> CheckResult:
    """Evaluate every condition of the lesson on `schedule`. `measure(p, sched)` measures
    (with verification: engine.api.measure); without it a measured condition fails, saying
    so. `lower(p, sched)` gives the lowered Stmt (default: engine.isolated.lowered_stmt, a
    child process). An invalid schedule fails every condition with the engine's message."""
    try:
        validate(pipeline, schedule)
    except ScheduleError as exc:
        return CheckResult(False, tuple(ConditionResult(c, False, f"the schedule is invalid: {exc}") for c in lesson.check))
    results = []
    memo: dict[str, Any] = {}
    for c in lesson.check:
        try:
            ok, detail = _EVAL[c.kind](c.args, lesson, pipeline, schedule, measure, lower, memo)
        except (ScheduleError, TraceError) as exc:
            ok, detail = False, str(exc)
        results.append(ConditionResult(c, ok, detail))
    return CheckResult(all(r.passed for r in results), tuple(results))


def _loops(p: Pipeline, sched: Schedule, args: Mapping[str, Any]) -> list[L.Loop]:
    stage = args["stage"]
    update = args.get("update", p.stage(stage).is_reduction)
    if sched.of(stage).compute().kind == Kind.COMPUTE_INLINE:
        raise ScheduleError(stage, "is inlined: it has no loops of its own")
    return definition_loops(p, sched, stage, bool(update))


def _where(sched: Schedule, stage: str, store: bool) -> str:
    ss = sched.of(stage)
    d = ss.store() if store else ss.compute()
    if d is None:  # storage follows the computation
        d = ss.compute()
    if d.kind in (Kind.COMPUTE_ROOT, Kind.STORE_ROOT):
        return "root"
    if d.kind == Kind.COMPUTE_INLINE:
        return "inline"
    return f"{d.consumer}.{d.loop}"


def _names(loops: Iterable[L.Loop]) -> str:
    return ", ".join(f"{lp.name}{'' if lp.kind == 'serial' else ' (' + lp.kind + ')'}" for lp in loops)


def _computed_at(args: Mapping[str, Any], _l: Lesson, _p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    where = _where(sched, args["stage"], store=False)
    return where == args["at"], f"{args['stage']} is computed {_at_words(where)}"


def _stored_at(args: Mapping[str, Any], _l: Lesson, _p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    where = _where(sched, args["stage"], store=True)
    return where == args["at"], f"{args['stage']} is stored {_at_words(where)}"


def _no_recompute(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    stage, producer = args["stage"], args["producer"]
    if sched.of(producer).compute().kind == Kind.COMPUTE_INLINE:
        return False, f"{producer} is inlined: each of its points is recomputed wherever {stage} reads it"
    t = trace(p, sched, stage, default_extent(p, sched, stage))
    again, total = t.recomputed.get(producer, 0), t.computed.get(producer, 0)
    box = "x".join(map(str, t.extent))
    if total == 0:
        return True, f"{producer} is computed before {stage} starts (not inside its loops): no point twice"
    return again == 0, f"over a {box} region of {stage}: {producer} computed {total} points, {again} of them again"


def _vectorized(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    loops = _loops(p, sched, args)
    inner = loops[-1]
    ok = inner.kind == "vectorized" and inner.extent >= args["width"]
    return ok, f"innermost loop: {inner.name}, {inner.kind}, {inner.extent} iterations (loops: {_names(loops)})"


def _parallel(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    loops = _loops(p, sched, args)
    outer = next((lp for lp in loops if lp.extent > 1), loops[0])  # a loop of one iteration runs nothing in parallel
    return outer.kind == "parallel", f"outermost loop: {outer.name}, {outer.kind} (loops: {_names(loops)})"


def _unrolled(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    loops = _loops(p, sched, args)
    dim = args.get("dim")
    hit = [lp for lp in loops if lp.kind == "unrolled" and (dim is None or any(pt.dim == dim for pt in lp.parts))]
    return bool(hit), (f"unrolled: {_names(hit)}" if hit else f"no such unrolled loop (loops: {_names(loops)})")


def _innermost_dim(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    loops = _loops(p, sched, args)
    inner = loops[-1]
    dims = [pt.dim for pt in inner.parts if pt.stride == 1]
    return args["dim"] in dims, f"innermost loop {inner.name} walks {', '.join(pt.dim for pt in inner.parts) or 'nothing'}"


def _tiled(args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    loops = _loops(p, sched, args)
    outer_pos, inner_pos = [], []
    for d in args["dims"]:
        outer = [k for k, lp in enumerate(loops) if any(pt.dim == d and pt.stride > 1 for pt in lp.parts) and lp.extent > 1]
        inner = [k for k, lp in enumerate(loops) if any(pt.dim == d and pt.stride == 1 for pt in lp.parts) and lp.extent > 1]
        if not outer or not inner:
            return False, f"{d} is not split into an outer and an inner loop (loops: {_names(loops)})"
        outer_pos.append(min(outer))
        inner_pos.append(min(inner))
    ok = max(outer_pos) < min(inner_pos)
    return ok, ("every tile loop is outside every loop within a tile" if ok else "a loop within a tile is outside a tile loop") + (
        f" (loops: {_names(loops)})"
    )


def _no_inline(_a: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, *_: Any) -> tuple[bool, str]:
    inlined = [s.name for s in p.stages if sched.of(s.name).compute().kind == Kind.COMPUTE_INLINE]
    return not inlined, ("inlined: " + ", ".join(inlined)) if inlined else "no stage is inlined"


def _stmt(
    args: Mapping[str, Any], _l: Lesson, p: Pipeline, sched: Schedule, _m: Any, lower: Lower | None, memo: dict[str, Any]
) -> tuple[bool, str]:
    if "stmt" not in memo:
        if lower is None:
            from ..isolated import lowered_stmt  # noqa: PLC0415  # Halide's compiler, only when a lesson reads the Stmt

            lower = lowered_stmt
        memo["stmt"] = lower(p, sched)
    m = re.search(args["pattern"], memo["stmt"])
    want = args.get("present", True)
    found = f"found: {m.group(0)[:80]!r}" if m else "not found"
    return (m is not None) == want, f"in the lowered Stmt: {found}"


def _faster(args: Mapping[str, Any], lesson: Lesson, p: Pipeline, sched: Schedule, measure: Measure | None, *_: Any) -> tuple[bool, str]:
    if measure is None:
        return False, "not measured (this check needs a measurement)"
    start = lesson.start_schedule(p)
    base = measure(p, start)
    now = base if start.content_hash() == sched.content_hash() else measure(p, sched)
    for what, m in (("the start", base), ("your schedule", now)):
        if not (m.ok and m.verified and m.median_ms):
            return False, f"{what} did not measure as verified: {m.error or 'not verified'}"
    assert base.median_ms is not None and now.median_ms is not None
    speedup = base.median_ms / now.median_ms
    return speedup >= args["factor"], f"start {base.median_ms:.3g} ms, yours {now.median_ms:.3g} ms: {speedup:.2f}x (verified)"


_EVAL: dict[str, Callable[..., tuple[bool, str]]] = {
    "faster": _faster,
    "computed_at": _computed_at,
    "stored_at": _stored_at,
    "no_recompute": _no_recompute,
    "vectorized": _vectorized,
    "parallel": _parallel,
    "unrolled": _unrolled,
    "innermost_dim": _innermost_dim,
    "tiled": _tiled,
    "no_inline": _no_inline,
    "stmt": _stmt,
}
assert set(_EVAL) == set(CONDITIONS)
