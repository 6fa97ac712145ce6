"""A rule-based schedule for any pipeline (built-in or imported), from the recipes the hand
schedules use (engine/recipes.py). `heuristic_schedule(p)` returns it; `plan(p)` also
says which rule placed each stage.

The rules, decided consumers first:
1. Anchors: a conv2d or matmul whose values are all consumed, at the same point, by a
   chain of pointwise stages of its shape is register-blocked at tiles of the last stage
   of that chain (the anchor); the stages in between are inlined into the anchor. A
   matmul whose B is worth packing (recipes.packed_rhs: a contiguous B larger than L1,
   read by at least 4 row blocks) runs in column panels instead, B copied per panel
   through a wrapper (matmul_panels); others in row panels (matmul_block).
2. Inlining: a pointwise stage that is not an output is inlined when inlining computes
   each of its values once (or, for a cheap stage of at most one flop reading no inlined
   stage and read by no reduction, at most CHEAP_REUSE times: a product feeding a 3x3
   box sum).
3. Per strip: a stage whose consumers all run inside the same loop of one root stage
   (the rows of a conv anchor, the row panels of a matmul, the strips of a pointwise
   stage, the parallel slices of a reduction) is computed at that loop, as long as that
   computes it at most RECOMPUTE_LIMIT times over (overlapping stencil windows), and more
   than twice only for consumers doing REUSE_WORK times the work recomputed. Not a
   padding whose producer would follow it into the strips (a pooling before a conv):
   that padding goes to root, and its producer per strip of the padding. Not a conv (it
   goes to root, register-blocked in its own buffer).
4. Root: a pointwise stage in parallel strips of rows, vectorized along its innermost
   dim; a conv register-blocked in its own buffer (conv_root_channels, channel vectors
   in a channels-innermost buffer, where every reader is a channels block's; else
   conv_root_rows where its rows may round up to whole vectors, else conv_root_block); a matmul
   accumulating in its own buffer (dense_output), or, where packing B pays
   (recipes.packed_rhs), in column panels of exact register blocks with B packed per
   panel (matmul_panels_root); any other reduction
   vectorized along its innermost non-trivial pure dim (reduction loops outside the
   vector, small windows unrolled), parallel along an outer one.
5. Layout, last: the buffers between channels blocks (conv_channels_block's tiles, the
   paddings, pools and concats between them) are laid out channels innermost, so channel
   vectors are stored and read whole; a concat read only by 1x1 channels blocks of one
   block of channels is inlined into them (a select per broadcast). Only where every reader
   takes any layout, and never an output.
Every rule is applied tentatively: if the schedule stops validating (or the rule's own
check fails), it is undone and the next, simpler rule is tried, down to plain
compute_root, so the result is always a valid schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from functools import partial

from . import expr as E
from .ir import Pipeline, PipelineError
from .loopnest import placements
from .recipes import (
    VectorTarget,
    channels_block_fits,
    channels_innermost,
    conv_block,
    conv_channels_block,
    conv_root_block,
    conv_root_channels,
    conv_root_rows,
    conv_taps,
    dense_output,
    depthwise_block,
    dividing,
    fit,
    matmul_block,
    matmul_panels,
    matmul_panels_root,
    packed_rhs,
    pad_lanes,
    strips,
    vector_target,
    vector_update,
)
from .schedule import Directive, Kind, S, Schedule, ScheduleError, StageSchedule, validate, validate_stage, validate_wrappers

RECOMPUTE_LIMIT = 4.0  # a per-strip producer may compute this many times its size (3 rows of a 3x3 window per row: 3)
REUSE_WORK = 16  # ...beyond twice, only if its consumers do this many times the flops recomputed
CHEAP_FLOPS = 1  # "cheap" stages (one multiply, a copy, a crop) may be inlined although recomputed...
CHEAP_REUSE = 9.0  # ...up to this many times (a 3x3 window)
WINDOW_TAPS = 25  # reductions over at most this many points unroll them inside each vector (taps per vector)
ROW_LANES = 8  # lanes when the vector runs across rows (strided loads): more rows thrash L1 (see row_reduce_at)
_CHEAP_WINDOWS = ("depthwise_conv2d", "maxpool", "avgpool")  # a few flops per input element: a padding's cost shows
DEPTHWISE_ROWS = 4  # rows of a depthwise conv unrolled together (recipes.depthwise_block)
MIN_STRIPS = 8  # root pointwise stages: at least this many strips when rows allow (work for every core)


@dataclass
class Plan:
    """The schedule and, per stage, the rule that placed it (for reports and debugging)."""

    schedule: Schedule
    rules: dict[str, str] = field(default_factory=dict)


class _Rejected(Exception):
    """A rule's own check failed; the next rule is tried."""


def heuristic_schedule(p: Pipeline, target: str | VectorTarget | None = None) -> Schedule:
    """The rule-based schedule of `p` (valid for every pipeline; see the module docstring)
    for Halide target `target` (None: the host's JIT target): vector widths and register
    blocks follow it (recipes.VectorTarget)."""
    return plan(p, target).schedule


def plan(p: Pipeline, target: str | VectorTarget | None = None) -> Plan:
    h = _Heuristic(p, vector_target(target))
    h.run()
    return Plan(h.s, h.rules)


def _identity(a: E.Access, dims: tuple) -> bool:
    return a.index == tuple(E.Var(d.name) for d in dims)


class _Heuristic:
    def __init__(self, p: Pipeline, vt: VectorTarget) -> None:
        self.p = p
        self.vt = vt
        self.s = Schedule(name="heuristic")
        self.rules: dict[str, str] = {}
        self.order = _topo(p)
        self.pos = {n: k for k, n in enumerate(self.order)}
        self.inline: set[str] = set()
        self.anchor_of: dict[str, str] = {}  # anchor -> the reduction blocked at its tiles
        self.blocked: dict[str, str] = {}  # reduction -> its anchor
        self.also: dict[str, list[str]] = {}  # anchor -> more convs blocked at its tiles (a residual add of two)
        # Where a stage's producers may be computed: (root stage, loop), or None for "at root".
        self.host: dict[str, tuple[str, str] | None] = {}
        # Stages of a channels block (its convs broadcast their inputs, its tile is channel
        # vectors): they read a channels-innermost buffer as fast as planes (conv_root_channels).
        self.channels_tiled: set[str] = set()

    def run(self) -> None:
        for r in self.order:
            self._pick_anchor(r)
        self._pick_inlines()
        for n in reversed(self.order):
            self._place(n)
        self._channels_last()
        validate(self.p, self.s)  # every step was validated; this guards the invariant

    # --- rule 1: anchors ---------------------------------------------------------------
    def _pick_anchor(self, r: str) -> None:
        p, st = self.p, self.p.stage(r)
        ok_shape = (st.op in ("conv2d", "depthwise_conv2d") and len(st.dims) == 4) or (
            st.op == "matmul" and len(st.dims) >= 2 and len(st.rdom) == 1
        )
        if not st.is_reduction or not ok_shape or r in p.outputs:
            return
        best = None
        for a in sorted(p.downstream(r) & p.stage_map.keys(), key=self.pos.__getitem__)[:16]:
            between = (p.downstream(r) & _ancestors(p, a)) - {a}
            if a not in self.anchor_of and self._anchor_ok(r, a, between):
                best = (a, between)
        if best is None:
            self._pick_second(r)
            return
        a, between = best
        self.anchor_of[a], self.blocked[r] = r, a
        for b in between:
            self.inline.add(b)
            self.rules[b] = f"inline into {a} (between {r} and the tiles it is blocked at)"

    def _pick_second(self, r: str) -> None:
        """A conv whose values all go, pointwise, into the anchor of another conv of its
        shape through stages already inlined there (ResNet's residual add of a bottleneck's
        last conv and its downsampling conv): blocked at the same tiles (conv_block's `also`)."""
        p, st = self.p, self.p.stage(r)
        if st.op != "conv2d":
            return
        for a, first in self.anchor_of.items():
            if p.stage(first).op != "conv2d" or p.stage(first).shape != st.shape or a not in p.downstream(r):
                continue
            between = (p.downstream(r) & _ancestors(p, a)) - {a}
            if between <= self.inline and self._pointwise_into(r, a, between):
                self.also.setdefault(a, []).append(r)
                self.blocked[r] = a
                return

    def _anchor_ok(self, r: str, a: str, between: Set[str]) -> bool:
        p, shape = self.p, self.p.stage(r).shape
        group = between | {a}
        if any(p.stage(g).is_reduction or p.stage(g).shape != shape or g in self.anchor_of or g in self.inline for g in group):
            return False
        return not any(g in p.outputs for g in between) and self._pointwise_into(r, a, between)

    def _pointwise_into(self, r: str, a: str, between: Set[str]) -> bool:
        """Do all of `r`'s values go into `a` only through `between` (no other consumer of
        `r` or of a stage between), each read at the point it is computed for? Then the
        tile of `a` needs exactly the same tile of `r`."""
        p, group = self.p, between | {a}
        if not set(p.consumers(r)) <= group or any(not set(p.consumers(g)) <= group for g in between):
            return False
        return all(_identity(x, p.stage(g).dims) for g in group for x in E.accesses(p.stage(g).value) if x.source in between | {r})

    # --- rule 2: inlining --------------------------------------------------------------
    def _inlinable(self, n: str) -> bool:
        return not self.p.stage(n).is_reduction and n not in self.p.outputs and n not in self.anchor_of and n not in self.inline

    def _reuse(self, n: str) -> float:
        """How many times each value of `n` would be computed if it were inlined (given the
        inlining decided so far): reads per consumer point, times consumer points."""
        p, total = self.p, 0.0
        for c in p.consumers(n):
            cs = p.stage(c)
            reads = len({x for x in E.accesses(cs.value) if x.source == n}) * cs.size
            if cs.update is not None:
                reads += len({x for x in E.accesses(cs.update) if x.source == n}) * cs.size * math.prod(d.extent for d in cs.rdom)
            total += reads * (self._reuse(c) if c in self.inline else 1.0)
        return total / p.stage(n).size

    def _pick_inlines(self) -> None:
        for n in reversed(self.order):  # consumers first: their own inlining multiplies the reuse
            if self._inlinable(n) and self._reuse(n) <= 1.0 + 1e-9:
                self.inline.add(n)
                self.rules[n] = "inline (each value used once)"
        for n in reversed(self.order):
            st = self.p.stage(n)
            if not self._inlinable(n) or E.flops(st.value) > CHEAP_FLOPS or any(x in self.inline for x in st.sources()):
                continue
            if any(self.p.stage(c).is_reduction for c in self.p.consumers(n)):
                continue  # not into a reduction's inner loop: a padding's select per tap costs more than the tap
            reuse = self._reuse(n)
            if reuse <= CHEAP_REUSE:
                self.inline.add(n)
                self.rules[n] = f"inline (cheap: {E.flops(st.value)} flop, recomputed {reuse:.0f}x)"

    # --- placement -------------------------------------------------------------------------
    def _place(self, n: str) -> None:
        if n in self.inline:
            S(self.s, n).compute_inline()
            return
        if n in self.blocked:  # placed with its anchor, or unblocked when that failed
            return
        if n in self.anchor_of:
            if self._try(n, lambda: self._block(n)):
                return
            r = self.anchor_of.pop(n)  # the recipe does not apply: both fall back to simpler rules
            for b in (r, *self.also.pop(n, ())):
                del self.blocked[b]
        h = self._single_host(n)
        if h is not None and self._try(n, lambda: self._at_host(n, h)):
            return
        if self._try(n, lambda: self._root(n)):
            return
        self.host[n] = None
        self.rules[n] = "root (no recipe applied)"

    def _try(self, n: str, rule: Callable[[], str]) -> bool:
        """Apply `rule` (it returns its description); undo it if the schedule no longer
        validates or the rule rejects its own result."""
        saved, hosts, tiled = self.s.copy(), dict(self.host), set(self.channels_tiled)
        try:
            why = rule()
            # Only the stages the rule changed are checked: stages are placed consumers first,
            # so nothing placed before refers to them (run() validates the whole at the end).
            for name in self.s.stages:
                if name not in saved.stages or self.s.of(name) != saved.of(name):
                    validate_stage(self.p, self.s, name)
            added = {k: w for k, w in self.s.wrappers.items() if saved.wrappers.get(k) != w}
            if added:  # a copy the rule made (matmul_panels) is checked with it, so a bad one falls back
                validate_wrappers(self.p, Schedule(self.s.stages, self.s.name, added))
        except (_Rejected, ScheduleError, PipelineError, ValueError, KeyError, IndexError, ArithmeticError):
            # A recipe that does not fit this stage (a loop name taken, a shape it does not expect).
            self.s, self.host, self.channels_tiled = saved, hosts, tiled
            return False
        self.rules[n] = why
        return True

    def _block(self, a: str) -> str:
        p, r = self.p, self.anchor_of[a]
        shape = p.shape_of(a)
        if p.stage(r).op == "conv2d":
            also = tuple(self.also.get(a, ()))
            strip, recipe = self._channels_block(r, a, also), "conv_channels_block"
            if strip is None:
                # The register block (channels x x vectors) from the target's accumulators (recipes.conv_blocking).
                strip, recipe = conv_block(self.s, p, r, a, target=self.vt, also=also), "conv_block"
            for b in also:
                self.host[b] = (a, strip)
                self.rules[b] = f"register-blocked at tiles of {a} with {r} ({recipe})"
        elif p.stage(r).op == "depthwise_conv2d":
            strip, recipe = depthwise_block(self.s, p, r, a, target=self.vt), "depthwise_block"
        elif packed_rhs(p, r, self.vt) is not None:
            # B packed per column panel; A is read whole per panel, so its producers go to root.
            matmul_panels(self.s, p, r, a, target=self.vt)
            self.host[a] = self.host[r] = None
            self.rules[r] = f"register-blocked at tiles of {a}, B packed per panel (matmul_panels)"
            return f"root, column panels; {r} register-blocked per block (matmul_panels)"
        else:
            panel = fit(64, max(8, shape[-2] // 4))  # at least 4 row panels where rows allow
            strip, recipe = matmul_block(self.s, p, r, a, panel=panel, target=self.vt), "matmul_block"
        self.host[a] = self.host[r] = (a, strip)
        self.rules[r] = f"register-blocked at tiles of {a} ({recipe})"
        return f"root, tiled; {r} register-blocked per tile ({recipe})"

    def _channels_block(self, conv: str, out: str, also: tuple[str, ...]) -> str | None:
        """recipes.conv_channels_block where it applies (small planes, 16-lane targets: output
        channels as vectors, the weights packed) and validates, else None (conv_block then)."""
        if channels_block_fits(self.p, (conv, *also), self.vt) is None:
            return None
        saved = self.s.copy()
        try:
            strip = conv_channels_block(self.s, self.p, conv, out, target=self.vt, also=also)
            for n in (conv, out, *also):
                validate_stage(self.p, self.s, n)
        except (ScheduleError, ValueError):
            self.s = saved
            return None
        self.channels_tiled |= {conv, out, *also}
        return strip

    def _single_host(self, n: str) -> tuple[str, str] | None:
        """The one loop all the (effective) consumers of `n` run inside, if there is one."""
        if n in self.p.outputs:
            return None
        hosts = {self.host.get(c) for c in self._consumers(n)}
        if len(hosts) != 1 or None in hosts:
            return None
        h = hosts.pop()
        assert h is not None
        a = self.p.stage(h[0])
        # A producer of a reduction's initial value can't be computed inside its update's loops.
        if a.is_reduction and n in self._reads(a.value):
            return None
        return h

    def _at_host(self, n: str, h: tuple[str, str]) -> str:
        st = self.p.stage(n)
        if self._pads_a_strip_producer(n):
            raise _Rejected(f"{n}: pads a stage that would be recomputed with it per strip")
        if st.op == "conv2d" and len(st.dims) == 4:
            # Per strip it would be one accumulator chain per vector; at root, register-blocked
            # (conv_root_block: 2-3x faster on MobileNetV2's projections at 7x7, AVX2).
            raise _Rejected(f"{n}: a conv without a tile to be blocked at goes to root, blocked in place")
        S(self.s, n).compute_at(*h)
        validate_stage(self.p, self.s, n)
        place = placements(self.p, self.s, check=False, only=self.p.downstream(n) | {n})[n]
        ratio = place.points_total / st.size
        if ratio > RECOMPUTE_LIMIT:
            raise _Rejected(f"{n} at {h}: computed {ratio:.1f}x")
        if ratio > 1 and tuple(place.region) == tuple(st.shape):
            # The whole tensor per iteration (a padding read whole by each channel block of a
            # packed conv): nothing gets more local, at root it is computed once. ResNet-50's
            # layer3.1, Sapphire Rapids, 1 thread: 7.41 -> 6.61 ms (ORT 5.40).
            raise _Rejected(f"{n} at {h}: the whole tensor each iteration ({ratio:.1f}x)")
        # Recomputing only pays when its consumers do much more work (a conv's padding, not
        # a depthwise conv's, nor a whole tensor or reduction recomputed per strip).
        extra = (ratio - 1) * max(st.flops(), st.size)
        if ratio > 2 and sum(self.p.stage(c).flops() for c in self._consumers(n)) < REUSE_WORK * extra:
            raise _Rejected(f"{n} at {h}: computed {ratio:.1f}x for too little work")
        # Vectors sized by the region computed per iteration of the host loop: a vector
        # wider than the region would compute (and read) past it.
        if st.is_reduction:
            self._vector_reduce(n, place.region, parallel=False)
        else:
            k = max((k for k, e in enumerate(place.region) if e > 1), default=len(st.dims) - 1)
            S(self.s, n).vectorize(st.dims[k].name, fit(self._lanes(n), place.region[k]))
        self.host[n] = h
        return f"at {h[0]}.{h[1]} (per strip of its consumers; {ratio:.2g}x its points)"

    def _lanes(self, n: str) -> int:
        """Vector lanes of pointwise stage `n` in its own buffer: a padding read only by
        depthwise convs and pools at 128-bit vectors (recipes.pad_lanes: its edge vectors are
        gathers), else the target's."""
        p = self.p
        if p.stage(n).op == "pad" and all(p.stage(c).op in _CHEAP_WINDOWS for c in self._consumers(n)):
            return pad_lanes(self.vt)
        return self.vt.lanes

    def _pads_a_strip_producer(self, n: str) -> bool:
        """A padding whose producer would follow it into each strip (a pooling before a conv):
        both recomputed per strip, and the padding's clamped reads of a recomputed tensor
        cost more than the locality saves (small_cnn: 30% of its time, 17% faster at root)."""
        if self.p.stage(n).op != "pad":
            return False
        free = lambda m: m not in self.inline and m not in self.anchor_of and m not in self.blocked
        return any(free(m) and self._consumers(m) == {n} for m in self.p.producers(n))

    def _root(self, n: str) -> str:
        p, st = self.p, self.p.stage(n)
        if st.is_reduction and st.op == "conv2d" and len(st.dims) == 4:
            # The first that applies: channel vectors in a channels-innermost buffer (for readers
            # that take any layout), full vectors with blocks across rows (where the buffer's rows
            # may round up), else conv_root_block (always applies).
            makers = [conv_root_rows, conv_root_block]
            if self._consumers(n) <= self.channels_tiled:
                makers.insert(0, conv_root_channels)
            for make in makers:
                try:
                    loop, recipe = make(self.s, p, n, target=self.vt), make.__name__
                    break
                except ValueError:
                    continue
            else:
                raise ValueError(f"{n}: no root conv recipe applies")
            # Producers per row of the update; a channel block reads every row (producers at root).
            self.host[n] = (n, loop) if loop == st.dims[-2].name else None
            return f"root, conv register-blocked in its own buffer ({recipe}), parallel along {loop}"
        if st.is_reduction and st.op == "matmul" and len(st.dims) >= 2 and len(st.rdom) == 1:
            if packed_rhs(p, n, self.vt) is not None:
                try:  # B packed, blocks that tile the update exactly (A's producers at root: read whole per panel)
                    loop = matmul_panels_root(self.s, p, n, target=self.vt)
                    self.host[n] = None
                    return f"root, matmul in column panels along {loop}, B packed per panel (matmul_panels_root)"
                except ValueError:
                    pass
            self.host[n] = (n, dense_output(self.s, p, n, target=self.vt))
            return "root, matmul accumulating in its own buffer (dense_output)"
        if st.is_reduction:
            par = self._vector_reduce(n, st.shape, parallel=True)
            self.host[n] = (n, par) if par else None
            return f"root, vectorized reduction{f', parallel along {par}' if par else ''}"
        strip = strips(self.s, p, n, min_strips=MIN_STRIPS, target=self.vt)
        self.host[n] = (n, strip) if strip else None
        return "root, parallel strips of rows (strips)" if strip else "root, vectorized"

    def _vector_reduce(self, n: str, region: tuple[int, ...], parallel: bool) -> str | None:
        """Vectorized along the innermost pure dim with more than one point in `region`
        (reduction loops outside the vector), small windows unrolled; parallel along an
        outer pure dim. Returns that dim."""
        st = self.p.stage(n)
        big = [k for k, e in enumerate(region) if e > 1]
        if not big:
            return None
        v, ext = st.dims[big[-1]].name, region[big[-1]]
        assert st.update is not None
        # Lanes along a dim all reads of it are contiguous in: full vectors; across rows (strided): ROW_LANES.
        along = [x for x in E.accesses(st.update) if any(v in E.variables(ix) for ix in x.index)]
        contiguous = bool(along) and all(v in E.variables(x.index[-1]) for x in along)
        lanes = self.vt.lanes if contiguous else min(ROW_LANES, self.vt.lanes)
        # An output takes a vector that divides its width (14 = 7 x 2 lanes, rows unrolled
        # around the taps); where none does (a 55-wide pool), full vectors with the update's
        # tail guarded (scalar there) instead of a scalar row.
        exact = dividing(lanes, ext)
        vw = exact if n in self.p.outputs and exact > 1 else fit(lanes, ext)
        window = math.prod(d.extent for d in st.rdom) <= WINDOW_TAPS
        o = S(self.s, n)
        if vw > 1:
            o.vectorize(v, vw)
            # A rounded-up update would compute, and read, past the region: guard the tail instead.
            u = vector_update(self.s, self.p, n, v, vw, unroll=window, tail="guard_with_if" if ext % vw else None)
            if window and st.op == "depthwise_conv2d" and len(big) > 1 and not ext % vw:
                # Rows unrolled around the taps: consecutive rows share input rows (one load
                # for up to 3 rows; see recipes.depthwise_block). A divisor: an update can't round up.
                y, rb = st.dims[big[-2]].name, dividing(DEPTHWISE_ROWS, region[big[-2]])
                if rb > 1:
                    u.split(y, y, f"{y}_u", rb).reorder(f"{y}_u", v).unroll(f"{y}_u")
        else:
            u = o.update()
        par = next((st.dims[k].name for k in big[:-1]), None) if parallel else None
        if par:
            o.parallel(par)
            u.parallel(par)
        return par

    # --- rule 5: layout ---------------------------------------------------------------------
    def _channels_last(self) -> None:
        """Buffers between channels blocks laid out channels innermost: a channels block's
        tile (its anchor) stores channel vectors, in NCHW a scatter per vector; channels
        innermost they are whole vectors. Where every reader takes any layout (a channels
        block: its convs broadcast their inputs, its tiles read channel vectors) or is a
        padding or concat whose own sources are all such buffers (then itself rebuilt
        channels innermost: recipes.channels_innermost). Not an output (its layout is the
        caller's). SqueezeNet 1.1, Sapphire Rapids, 1 thread, CPU time against ONNX Runtime:
        fires 9-12 1.44x -> 1.30x, the whole model 1.64x -> 1.4x."""
        p, tiled = self.p, self.channels_tiled
        for n in self.order:
            if p.stage(n).op != "concat" or n in p.outputs or n in self.inline:
                continue
            cons = self._consumers(n)
            if cons <= tiled and all(self._one_broadcast(c) for c in cons) and self._try(n, partial(self._inline_concat, n)):
                self.inline.add(n)
        anchors = {n for n in tiled if not p.stage(n).is_reduction and n not in p.outputs}
        flex = {
            n
            for n in self.order
            if p.stage(n).op in ("pad", "concat", "maxpool", "avgpool")
            and len(p.stage(n).dims) == 4
            and n not in tiled | self.inline | set(p.outputs)
        }
        cl = set(anchors)
        for n in self.order:  # producers first: a flex stage joins when its sources have
            if n in flex and self._all_reads(n) <= cl:
                cl.add(n)
        changed = True
        while changed:  # a buffer leaves when a reader needs planes, and its flex readers with it
            keep = {n for n in cl if self._consumers(n) <= tiled | cl and (n not in flex or self._all_reads(n) <= cl)}
            changed, cl = keep != cl, keep
        for n in sorted(cl, key=self.pos.__getitem__):
            self._try(n, partial(self._flex_channels if n in flex else self._store_channels, n))

    def _one_broadcast(self, conv: str) -> bool:
        """Does channels-block conv `conv` broadcast each input value once (a 1x1 window, its
        output channels one block)? Then a select per broadcast costs less than a buffer."""
        st = self.p.stage(conv)
        fits = channels_block_fits(self.p, (conv,), self.vt) if st.op == "conv2d" else None
        return fits is not None and conv_taps(self.p, conv) == 1 and st.shape[1] <= fits[0] * self.vt.lanes

    def _inline_concat(self, n: str) -> str:
        # A channels block's conv reads its input by scalar broadcasts: through an inlined
        # concat each is a select between two loads, where a concat buffer of channel vectors
        # gathers (its clamped channel index is no dense vector). SqueezeNet's fires 9-12,
        # Sapphire Rapids, 1 thread: 1.40x -> 1.21x ONNX Runtime.
        self.s.stages[n] = StageSchedule((Directive(Kind.COMPUTE_INLINE),))
        return "inline into the channels blocks that read it (each broadcast selects its source)"

    def _store_channels(self, n: str) -> str:
        cn, cc, cy, cx = (d.name for d in self.p.stage(n).dims)
        S(self.s, n).reorder_storage(cc, cx, cy, cn)
        return f"{self.rules.get(n, '')}; stored channels innermost (its readers take any layout)"

    def _flex_channels(self, n: str) -> str:
        where = self.rules[n].split(" (")[0] if self.rules.get(n, "").startswith("at ") else "root, parallel along rows"
        channels_innermost(self.s, self.p, n, target=self.vt)
        return f"{where}; channels innermost, vectors of channels (channels_innermost)"

    # --- graph helpers (through inlined stages) ------------------------------------------
    def _consumers(self, n: str) -> set[str]:
        out: set[str] = set()
        for c in self.p.consumers(n):
            out |= self._consumers(c) if c in self.inline else {c}
        return out

    def _all_reads(self, n: str) -> set[str]:
        st = self.p.stage(n)
        return self._reads(st.value) | (self._reads(st.update) if st.update is not None else set())

    def _reads(self, e: E.Expr) -> set[str]:
        out: set[str] = set()
        for x in E.accesses(e):
            out |= self._reads(self.p.stage(x.source).value) if x.source in self.inline else {x.source}
        return out


def _topo(p: Pipeline) -> list[str]:
    return list(p.stage_order)


def _ancestors(p: Pipeline, n: str) -> frozenset[str]:
    return p.upstream(n)
