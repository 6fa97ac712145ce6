"""Large pipelines compile as segments: groups of stages cut at buffers computed at root,
each its own Halide pipeline, identical segments compiled once.

Why: LLVM's JIT compile of one Halide pipeline grows with its loop nests (ResNet-50's 139
stages: 4.6 s as one pipeline), while a network repeats its layer shapes (51 distinct
stages in those 139). A segment's key is its canonical form (inputs and stages renamed by
position, plus its schedule), so identical segments share compiled code, kept per process
(LRU): editing one stage of a big model recompiles only that stage's segment. Segments run
in order on intermediate buffers allocated once per runner. The cut never changes what is
computed: every stage still covers its whole declared extent (the IR checks that reads stay
inside), and a stage whose tail would write past its own extent stays with its consumers.
"""

from __future__ import annotations

import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import halide as hl
import numpy as np

from . import expr as E
from . import halide_backend as HB
from .fpenv import flush_denormals
from .ir import Input, Pipeline, Stage, canonical_hash, declared_layout, storage_axes
from .schedule import Kind, Schedule, ScheduleError, StageSchedule, Wrapper, effective_consumers, validate, writes_in_bounds

SEGMENT_MIN_STAGES = 48  # smaller pipelines compile as one Halide pipeline
MAX_SEGMENT_STAGES = 24  # consecutive one-off stages are grouped up to this many per compile
CACHE_SIZE = 512
_CACHE: OrderedDict[tuple[str, bool], HB.Lowered] = OrderedDict()
_MARKER = "@@segment "
_CANON = re.compile(r"\b(seg(?:in|st)\d+)\b")


@dataclass(frozen=True)
class Segment:
    """Stages compiled together (topological order; an inlined producer is repeated in every
    segment that reads it), what they read from outside and what others read from them."""

    stages: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class _Part:
    seg: Segment
    key: str
    pipeline: Pipeline  # canonical: inputs segin0.., stages segst0..
    schedule: Schedule
    names: dict[str, str]  # canonical name -> real name


# --- partition ---------------------------------------------------------------------------
def units(p: Pipeline, sched: Schedule) -> list[list[str]]:
    """The smallest groups of non-inlined stages that must compile together, as runs of the
    topological order: a stage computed or stored inside another's loops joins it and its
    consumers, and so does a root stage whose tail would write past its own extent."""
    kind = _kinds(p, sched)
    mat = [n for n in p.stage_order if kind[n] != "compute_inline"]
    pos = {n: k for k, n in enumerate(mat)}
    reach = list(range(len(mat)))  # reach[k]: the last position that must share k's group
    for n in mat:
        ss = sched.of(n)
        cons = [pos[c] for c in effective_consumers(p, sched, n)]
        joined = [pos[d.consumer] for d in ss.pure if d.consumer is not None]  # compute_at / store_at
        # A root buffer laid out otherwise than its stage's dims (reorder_storage) may be cut
        # at: the segments declare it in that layout (_canonical), the runner allocates it so.
        if kind[n] != "compute_root" or joined or not writes_in_bounds(p, sched, n):
            reach[pos[n]] = max([pos[n], *cons, *joined])
    groups: list[list[str]] = []
    end = -1
    for k, n in enumerate(mat):
        if k > end:
            groups.append([])
        groups[-1].append(n)
        end = max(end, reach[k])
    return groups


def partition(p: Pipeline, sched: Schedule, max_stages: int = MAX_SEGMENT_STAGES) -> list[Segment]:
    """Units grouped into segments: a unit that recurs (same canonical form elsewhere) is a
    segment of its own so its compiled code is shared; runs of one-off units are grouped
    (up to `max_stages`) so they pay LLVM's fixed cost per compile once."""
    us = units(p, sched)
    kind = _kinds(p, sched)
    keys = [_canonical(p, sched, _segment(p, sched, [u], kind))[0] for u in us]
    count = Counter(keys)
    groups: list[list[list[str]]] = []
    open_run = False  # the last group holds one-off units and may take more
    for u, k in zip(us, keys, strict=True):
        one_off = count[k] == 1
        if one_off and open_run and sum(map(len, groups[-1])) + len(u) <= max_stages:
            groups[-1].append(u)
        else:
            groups.append([u])
        open_run = one_off
    return [_segment(p, sched, g, kind) for g in groups]


def _kinds(p: Pipeline, sched: Schedule) -> dict[str, str]:
    return {s.name: sched.of(s.name).compute().kind for s in p.stages}


def _segment(p: Pipeline, sched: Schedule, group: list[list[str]], kind: dict[str, str]) -> Segment:
    members = {n for u in group for n in u}
    todo = list(members)
    while todo:  # inlined producers come along
        for src in p.stage(todo.pop()).sources():
            if src in p.stage_map and kind[src] == "compute_inline" and src not in members:
                members.add(src)
                todo.append(src)
    stages = tuple(n for n in p.stage_order if n in members)
    inputs: dict[str, None] = {}
    for n in stages:
        for src in p.stage(n).sources():
            if src not in members:
                inputs.setdefault(src, None)
    # Read elsewhere, possibly through another segment's copy of an inlined stage.
    outs = tuple(n for n in stages if kind[n] != "compute_inline" and (n in p.outputs or bool(effective_consumers(p, sched, n) - members)))
    return Segment(stages, tuple(inputs), outs)


def _canonical(p: Pipeline, sched: Schedule, seg: Segment) -> tuple[str, Pipeline, Schedule, dict[str, str]]:
    """The segment renamed by position (inputs segin0.., stages segst0..; names no Halide
    loop or definition takes) with its schedule, and its key."""
    ren = {n: f"segin{k}" for k, n in enumerate(seg.inputs)} | {n: f"segst{k}" for k, n in enumerate(seg.stages)}

    def rename(e: E.Expr) -> E.Expr:
        return E.rebuild(e, lambda x: E.Access(ren[x.source], x.index) if isinstance(x, E.Access) else None)

    weights = {i.name for i in p.inputs if i.weight}  # a part may pack them (pack_input)
    ins = [Input(ren[n], p.shape_of(n), weight=n in weights) for n in seg.inputs]
    stages = []
    for n in seg.stages:
        s = p.stage(n)
        upd = rename(s.update) if s.update is not None else None
        stages.append(Stage(ren[n], s.dims, rename(s.value), s.rdom, upd, s.reduce, s.op))
    # Buffers between segments in the layout their writer stores them in (reorder_storage):
    # declared on both sides, so each segment reads and writes them as the whole pipeline would.
    layouts = {ren[n]: list(order) for n in (*seg.inputs, *seg.outputs) if (order := stored_order(p, sched, n)) is not None}
    cp = Pipeline("segment", ins, stages, [ren[n] for n in seg.outputs], source={"layouts": layouts} if layouts else {})
    # The wrappers its stages read (their sources are its stages or inputs, their placements its loops).
    wraps = [renamed_wrapper(w, ren) for w in sched.wrappers.values() if w.consumer in seg.stages]
    cs = Schedule({ren[n]: _renamed(sched.of(n), ren) for n in seg.stages}, sched.name, {w.name: w for w in wraps})
    body = {"p": cp.to_json(), "s": cs.to_json()}
    body["p"].pop("name", None)
    for i in body["p"]["inputs"]:  # keys (and tuning records) as before inputs said they were weights
        i.pop("weight", None)
    body["s"].pop("name", None)
    return canonical_hash(body), cp, cs, {v: k for k, v in ren.items()}


def stored_order(p: Pipeline, sched: Schedule, n: str) -> tuple[int, ...] | None:
    """The storage order (axes, innermost first) of stage `n`'s buffer where its schedule
    relays it (reorder_storage) and it is not a pipeline output; None for an input or a
    row-major buffer."""
    if n not in p.stage_map or n in p.outputs:
        return None
    d = next((d for d in sched.of(n).pure if d.kind == Kind.REORDER_STORAGE), None)
    return None if d is None or d.loops is None else storage_axes(p.stage(n).dims, d.loops)


def canonical_form(p: Pipeline, sched: Schedule, seg: Segment) -> tuple[str, Pipeline, Schedule, dict[str, str]]:
    """`seg` renamed by position: (key of pipeline and schedule, canonical pipeline, its
    schedule, canonical name -> real name). Whole-model tuning (engine/tuning) groups
    segments whose canonical pipelines are equal into one task."""
    return _canonical(p, sched, seg)


def renamed(ss: StageSchedule, ren: dict[str, str]) -> StageSchedule:
    """`ss` with the consumers its compute_at / store_at name (and the inputs its pack_input
    names) renamed by `ren`."""
    return _renamed(ss, ren)


def renamed_wrapper(w: Wrapper, ren: dict[str, str]) -> Wrapper:
    """Wrapper `w` with its source, consumer and the stage its compute_at names renamed by `ren`."""
    pure = tuple(replace(d, consumer=ren[d.consumer]) if d.consumer is not None else d for d in w.pure)
    return Wrapper(ren[w.source], ren[w.consumer], pure)


def _renamed(ss: StageSchedule, ren: dict[str, str]) -> StageSchedule:
    pure = tuple(
        replace(d, consumer=ren[d.consumer]) if d.consumer is not None else replace(d, input=ren[d.input]) if d.input is not None else d
        for d in ss.pure
    )
    return StageSchedule(pure, ss.update)


# --- compile and run ---------------------------------------------------------------------
@dataclass
class Segmented:
    """A pipeline lowered as segments; the same calls as HB.Lowered (compile, bind, runner,
    profile_totals), so the worker runs either."""

    pipeline: Pipeline
    parts: list[_Part]
    compiled_for: str | None = None
    compiles: int = 0  # Halide compiles the last `compile` did (the rest came from the cache)
    extra: dict[str, Any] = field(default_factory=dict)
    schedule_source: str = ""
    _compiled: dict[str, HB.Lowered] = field(default_factory=dict)
    _inputs: dict[str, hl.Buffer] = field(default_factory=dict)
    _arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def unique(self) -> int:
        return len({pt.key for pt in self.parts})

    def compile(self, profile: bool = False) -> float:
        t0 = time.perf_counter()
        self.compiles = 0
        compiled: dict[str, HB.Lowered] = {}
        for pt in self.parts:
            if pt.key not in compiled:
                compiled[pt.key] = self._compile_part(pt, profile)
        self._compiled, self.compiled_for = compiled, "profile" if profile else "plain"
        return time.perf_counter() - t0

    def _compile_part(self, pt: _Part, profile: bool) -> HB.Lowered:
        ck = (pt.key, profile)
        if ck in _CACHE:
            _CACHE.move_to_end(ck)
            return _CACHE[ck]
        try:
            low = HB.lower(pt.pipeline, pt.schedule)
            HB.static_bounds(low, strides=True)  # the runner's buffers are dense, in the declared layouts
            HB.compile_jit(low, profile)
        except ScheduleError as exc:
            real = _CANON.sub(lambda m: pt.names.get(m.group(1), m.group(1)), exc.reason)
            d = exc.directive and {k: pt.names.get(v, v) if k in ("consumer", "input") else v for k, v in exc.directive.items()}
            raise ScheduleError(pt.names.get(exc.stage, exc.stage), real, d, exc.index, exc.update) from None
        self.compiles += 1
        _CACHE[ck] = low
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
        return low

    def bind(self, arrays: dict[str, np.ndarray]) -> list[hl.Buffer]:
        self._inputs = HB.input_buffers(self.pipeline, arrays)
        self._arrays = arrays  # the weights a part reads packed are packed from these (runner)
        return list(self._inputs.values())

    def runner(self, outs: dict[str, np.ndarray]) -> Callable[[], None]:
        """Runs the segments in order; buffers between them are allocated here, once, and
        one whose last reader has run is reused by a later segment's output of its shape."""
        p = self.pipeline
        HB.check_outputs(p, outs)
        flush_denormals()
        staged = HB.staged_outputs(outs)
        arrays: dict[str, np.ndarray] = {}
        bufs: dict[str, hl.Buffer] = dict(self._inputs)
        last = {n: k for k, pt in enumerate(self.parts) for n in pt.seg.inputs if n in p.stage_map and n not in p.outputs}
        # Memory whose last reader has run, most recently freed last: the next buffer takes
        # the most recent block big enough (still in cache), in its own shape and layout.
        free: list[np.ndarray] = []
        flat: dict[str, np.ndarray] = {}
        for k, pt in enumerate(self.parts):
            canon = {v: c for c, v in pt.names.items()}
            for n in pt.seg.outputs:
                if n in p.outputs:
                    arrays[n] = staged.get(n, outs[n])
                else:
                    size = p.stage(n).size
                    j = next((j for j in range(len(free) - 1, -1, -1) if free[j].size >= size), None)
                    flat[n] = free.pop(j) if j is not None else HB.aligned_empty((size,))
                    arrays[n] = HB.shaped(flat[n], p.stage(n).shape, declared_layout(pt.pipeline, canon[n]))
                bufs[n] = hl.Buffer(arrays[n])
            for n in pt.seg.inputs:  # after this segment's outputs are placed: never read and written at once
                if last.get(n) == k:
                    free.append(flat[n])
        steps = []
        keep: list[np.ndarray] = []
        for k, pt in enumerate(self.parts):
            canon = {v: c for c, v in pt.names.items()}
            binds = [(canon[n], bufs[n]) for n in pt.seg.inputs]
            packed = self._compiled[pt.key].packed
            if packed:  # packed once here, not per run (as the whole pipeline's bind does)
                ins = {canon[n]: self._arrays[n] for n in pt.seg.inputs if n in self._arrays}
                pairs = HB.packed_buffers(self._compiled[pt.key], ins)
                binds += [(name, buf) for name, (_, buf) in pairs.items()]
                keep += [a for a, _ in pairs.values()]  # the buffers' memory (a Buffer does not own it)
            dst = [bufs[n] for n in pt.seg.outputs]
            steps.append((k, pt.key, binds, dst if len(dst) > 1 else dst[0]))

        copies = [(outs[o], a) for o, a in staged.items()]

        def run() -> None:
            marker = self.compiled_for == "profile"
            for k, key, binds, dst in steps:
                low = self._compiled[key]
                for name, b in binds:
                    low.params[name].set(b)
                if marker:  # the profiler reports in canonical names: say whose report follows
                    print(f"\n{_MARKER}{k}", flush=True)  # the same stream as Halide's reports
                assert low.hl_pipeline is not None  # every entry of _compiled was compiled
                low.hl_pipeline.realize(dst)
                for name, _ in binds:  # the cached pipeline must not keep this runner's buffers alive
                    low.params[name].reset()
            for user, a in copies:
                np.copyto(user, a)

        # A plain function, as HB.make_runner's: no method dispatch in the timed call.
        run.buffers = [*bufs.values(), *keep]  # type: ignore[attr-defined]
        run.arrays = arrays  # type: ignore[attr-defined]
        return run

    def profile_totals(self, text: str) -> dict[str, float]:
        """Per-stage profiler ms from the reports of a profiled run, in real stage names."""
        totals = {s.name: 0.0 for s in self.pipeline.stages}
        for chunk in text.split(_MARKER)[1:]:
            head, _, body = chunk.partition("\n")
            pt = self.parts[int(head)]
            # The part's own Lowered: it knows its wrappers' Halide names (their copies' time).
            for canon, ms in self._compiled[pt.key].profile_totals(body).items():
                real = pt.names[canon]
                if real in totals:
                    totals[real] += ms
        return totals


def lower(p: Pipeline, sched: Schedule, segmented: bool | None = None, max_stages: int = MAX_SEGMENT_STAGES) -> HB.Lowered | Segmented:
    """Lower for running: as segments when the pipeline is large (or `segmented` says so),
    else as one Halide pipeline."""
    if segmented is None:
        segmented = len(p.stages) >= SEGMENT_MIN_STAGES
    if not segmented:
        return HB.lower(p, sched)
    validate(p, sched)
    parts = []
    for seg in partition(p, sched, max_stages):
        key, cp, cs, names = _canonical(p, sched, seg)
        parts.append(_Part(seg, key, cp, cs, names))
    return Segmented(p, parts)


def clear_cache() -> None:
    _CACHE.clear()
