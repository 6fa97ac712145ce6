"""Why the engine refused an edit (issue 18 item 6), in the lessons' style.

`explain(error, p, sched)` maps a `ScheduleError` (what `schedule.validate` and the loop
transformations raise) to an `Explanation`: a title, a few sentences, and a picture of the
loop nest as it is now (`sched`, the schedule before the refused edit) with the place the
edit asked for marked and the reason it cannot be marked beside it. The picture is plain
lines with a mark each, so the app paints it (app/teaching/explain_view.py) and a terminal
prints it; nothing here imports Qt.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import loops as L
from ..ir import Pipeline
from ..schedule import Kind, Schedule, ScheduleError, definition_loops

HERE, BAD, NOTE, PLAIN = "here", "bad", "note", ""  # a picture line's mark


@dataclass(frozen=True)
class PictureLine:
    text: str  # one line of the loop nest (indented)
    mark: str = PLAIN  # HERE: where the edit asked to go; BAD: why it cannot; NOTE: context
    note: str = ""  # said beside the line


@dataclass(frozen=True)
class Explanation:
    kind: str  # which refusal (a key of KINDS)
    title: str
    text: str
    picture: tuple[PictureLine, ...]
    stage: str  # the stage whose edit was refused

    def render_text(self) -> str:
        """The picture as text (marks as arrows), for the CLI and tests."""
        width = max((len(x.text) for x in self.picture), default=0)
        sign = {HERE: "<-", BAD: "<- X", NOTE: "<-", PLAIN: ""}
        return "\n".join((f"{x.text:<{width}}  {sign[x.mark]} {x.note}" if x.note else x.text).rstrip() for x in self.picture)


def _loop_lines(loops: list[L.Loop], indent: int, marks: dict[str, tuple[str, str]] | None = None) -> list[PictureLine]:
    out = []
    for k, lp in enumerate(loops):
        kind = "" if lp.kind == "serial" else f" ({lp.kind})"
        mark, note = (marks or {}).get(lp.name, (PLAIN, ""))
        out.append(PictureLine("  " * (indent + k) + f"for {lp.name} in [0, {lp.extent}){kind}:", mark, note))
    return out


def _final_loops(p: Pipeline, sched: Schedule, stage: str) -> list[L.Loop]:
    try:
        return definition_loops(p, sched, stage, p.stage(stage).is_reduction)
    except ScheduleError:
        return []


def _consumer_nest(
    p: Pipeline,
    sched: Schedule,
    consumer: str,
    loop: str | None,
    inside: PictureLine,
    before: list[PictureLine] | None = None,
    also: dict[str, PictureLine] | None = None,
) -> list[PictureLine]:
    """`consumer`'s loops with `inside` placed just inside its loop `loop` (at the top when
    None), and each line of `also` just inside the loop it is keyed by."""
    lines = [*(before or []), PictureLine(f"produce {consumer}:")]
    loops = _final_loops(p, sched, consumer)
    names = [lp.name for lp in loops]
    at = {names.index(loop) + 1 if loop in names else len(loops): [inside]}
    for name, line in (also or {}).items():
        if name in names:
            at.setdefault(names.index(name) + 1, []).insert(0, line)
    for k in range(len(loops) + 1):
        if k:
            lines += _loop_lines([loops[k - 1]], k)
        lines += [PictureLine("  " * (k + 1) + x.text, x.mark, x.note) for x in at.get(k, [])]
    lines.append(PictureLine("  " * (len(loops) + 1) + f"{consumer}(...) = ... {_reads(p, consumer)}"))
    return lines


def _reads(p: Pipeline, stage: str) -> str:
    srcs = sorted(set(p.producers(stage)))
    return f"(reads {', '.join(srcs)})" if srcs else ""


def _arg(e: ScheduleError, name: str) -> str:
    d = e.directive if isinstance(e.directive, dict) else {}
    v = d.get(name)
    return str(v) if v is not None else "?"


def _where(sched: Schedule, stage: str) -> str:
    d = sched.of(stage).compute()
    if d.kind == Kind.COMPUTE_AT:
        return f"at {d.consumer}.{d.loop}"
    return "inline" if d.kind == Kind.COMPUTE_INLINE else "at root"


# --- one builder per refusal -------------------------------------------------------------
def _store_outside_compute(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, at, loop = e.stage, _arg(e, "consumer"), _arg(e, "loop")
    where = _where(sched, s)
    computed = PictureLine(f"produce {s}  # computed {where}", BAD, f"{s} is computed here, outside {at}.{loop}")
    d = sched.of(s).compute()
    inside_at = d.kind == Kind.COMPUTE_AT and d.consumer == at  # both in one nest: mark the compute loop in it
    before, also = ([], {str(d.loop): computed}) if inside_at else ([computed], {})
    buffer = PictureLine(f"allocate {s}", HERE, f"store_at({at}, {loop}) puts the buffer here")
    pic = _consumer_nest(p, sched, at, loop, buffer, before, also)
    return Explanation(
        "store_outside_compute",
        "Storage must enclose the computation",
        f"store_at says where {s}'s buffer is allocated; compute_at says when its values are computed. The buffer has "
        f"to exist whenever values are written into it, so it must be allocated at the compute loop or outside it. "
        f"{s} is computed {where} now, which is outside {at}.{loop}: its values would be written before the buffer "
        f"you asked for exists, and thrown away each time {loop} moves on. Compute {s} at {at}.{loop} (or a loop inside it) "
        f"first, then store it there or further out: storing further out is the sliding window of lesson 7.",
        tuple(pic),
        s,
    )


def _consumer_not_inside(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, at, loop = e.stage, _arg(e, "consumer"), _arg(e, "loop")
    m = re.match(r"(.*) also reads? it", e.reason)
    others = re.findall(r"'([^']+)'", m.group(1)) if m else []
    before = [PictureLine(f"produce {o}:  # computed {_where(sched, o)}", BAD, f"{o} also reads {s}, out here") for o in others]
    pic = _consumer_nest(p, sched, at, loop, PictureLine(f"produce {s}", HERE, f"compute_at({at}, {loop})"), before)
    return Explanation(
        "consumer_not_inside",
        "Every stage that reads it must be inside that loop",
        f"Computed at {at}.{loop}, {s} exists only inside that loop, one piece per iteration, just big enough for what "
        f"{at} reads there. {', '.join(others) or 'Another stage'} also read{'s' if len(others) == 1 else ''} {s} but "
        f"{'runs' if len(others) == 1 else 'run'} outside the loop, where no piece of {s} exists. Pick a loop that encloses "
        f"every reader (compute the other readers inside {at}.{loop} too), or compute {s} at root.",
        tuple(pic),
        s,
    )


def _not_a_consumer(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, at = e.stage, _arg(e, "consumer")
    readers = sorted(p.downstream(s)) if s in p.stage_map else []
    pic = [PictureLine(f"{s}  ->  read by {', '.join(readers) or 'nothing'}", NOTE, "the stages downstream of it")]
    pic += [PictureLine(f"produce {at}:", BAD, f"{at} never reads {s}, directly or through others")]
    pic += _loop_lines(_final_loops(p, sched, at), 1) if at in p.stage_map else []
    return Explanation(
        "not_a_consumer",
        "A stage is computed inside a stage that reads it",
        f"compute_at places {s} inside a loop of a stage that needs its values, so that each iteration computes just "
        f"what it reads. {at} does not read {s} (follow the arrows in the graph), so there is nothing it needs: choose "
        f"one of {', '.join(readers) or 'its readers'}.",
        tuple(pic),
        s,
    )


def _consumer_inlined(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, at = e.stage, _arg(e, "consumer")
    readers = sorted(p.consumers(at)) if at in p.stage_map else []
    pic = [PictureLine(f"{at}: compute_inline", BAD, f"{at} has no loops: no {at}.{_arg(e, 'loop')}")]
    for r in readers[:2]:
        pic += [PictureLine(f"produce {r}:")] + _loop_lines(_final_loops(p, sched, r), 1)
        depth = len(_final_loops(p, sched, r)) + 1
        pic.append(PictureLine("  " * depth + f"{r}(...) = ... {at}'s expression pasted here ...", NOTE, f"where {at} is computed now"))
    return Explanation(
        "consumer_inlined",
        "An inlined stage has no loops",
        f"{at} is inlined: it has no buffer and no loops of its own; its expression is pasted into every stage that reads it. "
        f"So there is no loop of {at} to compute {s} at. Compute {s} at a loop of a stage that reads {at} "
        f"({', '.join(readers) or 'its readers'}), or compute {at} at root or at a loop first.",
        tuple(pic),
        s,
    )


def _rvar_race(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, loop = e.stage, _arg(e, "loop")
    kind = "vectorized" if "vectorized" in e.reason else "parallel"
    loops = []
    try:
        loops = definition_loops(p, sched, s, True) if p.stage(s).is_reduction else []
    except ScheduleError:
        pass
    pure = [lp.name for lp in loops if not lp.rvar]
    pic = [PictureLine(f"produce {s} (update):")]
    pic += _loop_lines(loops, 1, {loop: (BAD, f"{kind} here: every lane/thread adds into the same {s}(...)")})
    pic.append(PictureLine("  " * (len(loops) + 1) + f"{s}({', '.join(pure)}) += ...", NOTE, f"{loop} is not among the indices"))
    return Explanation(
        "rvar_race",
        "A reduction loop must stay serial",
        f"{loop} is a reduction loop: its iterations all update the same point of {s}, each adding to what the "
        f"previous one left. {kind.capitalize()}, they would run at once and read the same old value: all but one update "
        f"would be lost (a race). Make a pure loop ({', '.join(pure) or 'one of its dims'}) {kind} instead; split it and "
        f"move the inner part innermost to vectorize (lesson 8). Unrolling {loop} is fine: it keeps the order.",
        tuple(pic),
        s,
    )


def _store_race(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s = e.stage
    m = re.search(r"the (parallel|vectorized) loop (\w+)\.(\w+)", e.reason)
    kind, at, loop = m.groups() if m else ("parallel", "?", "?")
    d = sched.of(s).compute()
    compute_at = d.consumer if d.kind == Kind.COMPUTE_AT else at
    loops = _final_loops(p, sched, str(compute_at))
    marks = {loop: (BAD, f"{kind}: its iterations run at once, all writing the one buffer")}
    pic = [PictureLine(f"allocate {s}", HERE, "stored out here (one buffer)"), PictureLine(f"produce {compute_at}:")]
    pic += _loop_lines(loops, 1, marks)
    pic.append(PictureLine("  " * (len(loops) + 1) + f"produce {s} ...", NOTE, f"computed in here ({_where(sched, s)})"))
    return Explanation(
        "store_race",
        "A buffer shared by a parallel loop",
        f"{s}'s buffer is allocated outside the {kind} loop {at}.{loop}, but its values are computed inside it. The loop's "
        f"iterations run at the same time, on threads or vector lanes, and would all write into that one buffer: a race. "
        f"(A sliding window needs its loop serial for the same reason: each iteration reuses what the previous one "
        f"computed.) Store {s} inside {at}.{loop}, or keep the loop serial.",
        tuple(pic),
        s,
    )


def _output_at_root(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s = e.stage
    pic = [PictureLine(f"produce {s}:  # an output", BAD, "the caller's buffer: always filled at root")]
    pic += _loop_lines(_final_loops(p, sched, s), 1)
    return Explanation(
        "output_at_root",
        "An output is always computed at root",
        f"{s} is an output of the pipeline: its buffer is the one the caller hands in, and the pipeline's job is to fill all "
        f"of it. There is no consumer to compute it inside, and nothing to inline it into. Schedule its loops instead (split, "
        f"vectorize, parallel), and compute its producers at its loops.",
        tuple(pic),
        s,
    )


def _reduction_inline(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s = e.stage
    pic = [PictureLine(f"produce {s}:")]
    pic += [PictureLine(f"  {s}(...) = initial value", NOTE, "pure definition")]
    pic += [PictureLine(f"  {s}(...) += ... over a loop", BAD, "update definition: a loop, not an expression")]
    return Explanation(
        "reduction_inline",
        "A reduction cannot be inlined",
        f"Inlining pastes a stage's expression where it is read. {s} is a reduction: its value is built by a loop that "
        f"updates it again and again, so there is no single expression to paste. Compute it at root or at a loop of a stage "
        f"that reads it.",
        tuple(pic),
        s,
    )


def _runtime_extent(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s, loop = e.stage, _arg(e, "loop")
    kind = _arg(e, "kind")
    loops = _final_loops(p, sched, s)
    pic = [PictureLine(f"produce {s}:  # at root: sized by the output buffer at run time")]
    pic += _loop_lines(loops, 1, {loop: (BAD, "extent known only when the pipeline runs")})
    return Explanation(
        "runtime_extent",
        "Only a loop of constant extent can be vectorized or unrolled",
        f"A vector has a fixed number of lanes and an unrolled loop a fixed number of copies, chosen when Halide compiles. "
        f"{s} is computed at root, so its loop {loop} runs over whatever size the buffer has at run time. Give a factor "
        f"({kind}({loop}, 8)): Halide then splits off an inner loop of exactly 8 and {kind}s that.",
        tuple(pic),
        s,
    )


def _already_marked(e: ScheduleError, p: Pipeline, sched: Schedule) -> Explanation:
    s = e.stage
    m = re.search(r"'(\w+)'", e.reason)
    loop = m.group(1) if m else _arg(e, "loop")
    loops = _final_loops(p, sched, s) if not e.update else definition_loops(p, sched, s, True)
    pic = [PictureLine(f"produce {s}:")] + _loop_lines(
        loops, 1, {loop: (BAD, "already marked: its iterations are not a plain loop any more")}
    )
    return Explanation(
        "already_marked",
        "A marked loop cannot be split or marked again",
        f"Loop {loop} of {s} is already vectorized, parallel or unrolled: it is no longer a plain loop that can be cut in two "
        f"or given another kind. Split first, then mark one of the pieces (the order of directives in the editor is the order "
        f"Halide applies them).",
        tuple(pic),
        s,
    )


# The refusals explained: kind -> (what the engine's message says, builder).
KINDS: dict[str, tuple[str, Callable[[ScheduleError, Pipeline, Schedule], Explanation]]] = {
    "store_outside_compute": (r"its storage must enclose where it is computed", _store_outside_compute),
    "consumer_not_inside": (r"also reads? it but (is|are) not computed inside", _consumer_not_inside),
    "not_a_consumer": (r"does not consume", _not_a_consumer),
    "consumer_inlined": (r"is inlined, so it has no loops to compute at", _consumer_inlined),
    "rvar_race": (r"on reduction loop .* would race", _rvar_race),
    "store_race": (r"stored outside the (parallel|vectorized) loop", _store_race),
    "output_at_root": (r"an output is always computed at root", _output_at_root),
    "reduction_inline": (r"a reduction cannot be inlined", _reduction_inline),
    "runtime_extent": (r"has a run-time extent", _runtime_extent),
    "already_marked": (r"cannot split '\w+': it is already|is already (vectorized|parallel|unrolled)", _already_marked),
}


def refusal_kind(error: ScheduleError) -> str | None:
    """Which explained refusal `error` is (None: no explanation for it)."""
    for kind, (pattern, _) in KINDS.items():
        if re.search(pattern, error.reason):
            return kind
    return None


def explain(error: Any, p: Pipeline, sched: Schedule) -> Explanation | None:
    """The explanation of a refused edit: `error` the ScheduleError, `sched` the schedule
    before the edit (the picture shows the loop nest as it is). None when the refusal has none."""
    if not isinstance(error, ScheduleError) or error.stage not in p.stage_map:
        return None
    kind = refusal_kind(error)
    if kind is None:
        return None
    return KINDS[kind][1](error, p, sched)
