"""Lowering to Halide: pipeline + schedule -> Halide Funcs -> JIT-compiled code.

Also: the lowered Stmt (text or HTML) and Halide's own autoschedulers (Adams2019,
Mullapudi2016, Li2018) run on the same Funcs as baselines.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import halide as hl
import numpy as np

from . import expr as E
from . import loops as L
from .fpenv import flush_denormals
from .ir import Pipeline, Stage, declared_layout, storage_axes
from .schedule import (
    COMPUTE_KINDS,
    PLACEMENT_KINDS,
    STORAGE_KINDS,
    Directive,
    Kind,
    Schedule,
    ScheduleError,
    Wrapper,
    packed_inputs,
    validate,
    wrapper_initial_loops,
)

AUTOSCHEDULERS = {
    "Adams2019": "libautoschedule_adams2019.so",
    "Mullapudi2016": "libautoschedule_mullapudi2016.so",
    "Li2018": "libautoschedule_li2018.so",
}
TAIL = {
    "auto": hl.TailStrategy.Auto,
    "guard_with_if": hl.TailStrategy.GuardWithIf,
    "shift_inwards": hl.TailStrategy.ShiftInwards,
    "round_up": hl.TailStrategy.RoundUp,
}
MEMORY = {"register": hl.MemoryType.Register, "stack": hl.MemoryType.Stack, "heap": hl.MemoryType.Heap}
_loaded_plugins: set[str] = set()
_PROFILE_LINE = re.compile(r"^\s+([A-Za-z_][\w$.]*):\s+([0-9.]+)ms\s+\(")
# Halide's per-buffer runtime checks (type, dims, bounds, allocation sizes) and bounds-query
# mode are compiled out: the engine binds every buffer itself, at the pipeline's static
# shapes, checked in Python (bind_inputs, make_runner). With a hundred weight inputs those
# branches made LLVM's compile of a ResNet-50 about 2x slower, and they never fire here.
CODEGEN_FEATURES = (hl.TargetFeature.NoAsserts, hl.TargetFeature.NoBoundsQuery)
# Compiled code runs with denormals flushed (engine/fpenv.py: lanes computed past a row can
# hold denormal garbage, and an FMA on one costs ~100 cycles): this thread now, and the
# thread that makes a runner (threads started later, Halide's pool among them, inherit it).
flush_denormals()


def host_target(profile: bool = False) -> hl.Target:
    t = hl.get_jit_target_from_environment()
    for f in CODEGEN_FEATURES:
        t = t.with_feature(f)
    return t.with_feature(hl.TargetFeature.Profile) if profile else t


def target_string() -> str:
    return str(hl.get_jit_target_from_environment())


@dataclass
class Lowered:
    """Halide objects for one pipeline: Funcs, input params, and per-definition loop vars."""

    pipeline: Pipeline
    funcs: dict[str, hl.Func]
    params: dict[str, hl.ImageParam]
    rdoms: dict[str, hl.RDom]
    hl_pipeline: hl.Pipeline | None = None
    compiled_for: str | None = None
    schedule_source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # A wrapper's Halide name (`Bs_in_prod$0`, an input's `A_im_in_prod$0`) -> its consumer: the
    # profiler reports a copy's time under that name, and it is charged to the consumer.
    wrapper_consumers: dict[str, str] = field(default_factory=dict)
    # A packed weight's param name -> (the input, dim, block): `pack_input` (bound packed).
    packed: dict[str, tuple[str, int, int]] = field(default_factory=dict)

    def output_funcs(self) -> list[hl.Func]:
        return [self.funcs[o] for o in self.pipeline.outputs]

    # The calls a runner makes; engine/segments.py's Segmented answers the same ones.
    def compile(self, profile: bool = False) -> float:
        return compile_jit(self, profile)

    def bind(self, arrays: dict[str, np.ndarray]) -> list[Any]:
        return bind_inputs(self, arrays)

    def runner(self, outs: dict[str, np.ndarray]) -> Any:
        return make_runner(self, outs)

    def profile_totals(self, text: str) -> dict[str, float]:
        return parse_profile(text, [s.name for s in self.pipeline.stages], self.wrapper_consumers)


# --- algorithm ---------------------------------------------------------------------------
def define(p: Pipeline, packs: dict[tuple[str, str], tuple[int, int]] | None = None) -> Lowered:
    """Build the Halide Funcs of the pipeline's algorithm (no schedule yet). `packs`:
    (stage, input) -> (dim, block) of the weights a stage reads packed (`packed_inputs`)."""
    params = {i.name: hl.ImageParam(hl.Float(32), len(i.shape), i.name) for i in p.inputs}
    for i in p.inputs:
        order = declared_layout(p, i.name)
        if order is not None:
            _dense_along(params[i.name], len(i.shape), order[0])
    packed: dict[str, tuple[str, int, int]] = {}
    funcs: dict[str, hl.Func] = {}
    rdoms: dict[str, hl.RDom] = {}
    for s in p.stages:
        f = hl.Func(s.name)
        env: dict[str, Any] = {d.name: hl.Var(d.name) for d in s.dims}
        args = [env[d.name] for d in reversed(s.dims)]  # Halide's first dim is innermost
        mine = {inp: _packed_param(params, packed, inp, dim, blk) for (st, inp), (dim, blk) in (packs or {}).items() if st == s.name}
        f[args] = _as_float(_expr(s.value, env, funcs, params, mine))
        if s.update is not None and s.reduce is not None:  # a reduction (validated: both or neither)
            r = hl.RDom([hl.Range(0, d.extent) for d in reversed(s.rdom)], "r")
            rdoms[s.name] = r
            for k, d in enumerate(reversed(s.rdom)):
                env[d.name] = r[k]
            body = _as_float(_expr(s.update, env, funcs, params, mine))
            cur = f[args]
            combine = {"sum": lambda a, b: a + b, "max": hl.max, "min": hl.min}[s.reduce]
            f[args] = combine(cur, body)
        funcs[s.name] = f
    return Lowered(p, funcs, params, rdoms, packed=packed)


def _packed_param(
    params: dict[str, hl.ImageParam], packed: dict[str, tuple[str, int, int]], inp: str, dim: int, blk: int
) -> tuple[hl.ImageParam, int, int]:
    """The param of input `inp` packed by `blk` along `dim` (one per layout, shared by the
    stages that read it so): rank + 1, the block innermost (`pack_array`)."""
    name = f"{inp}_pack{dim}x{blk}"
    if name not in params:
        params[name] = hl.ImageParam(hl.Float(32), params[inp].dimensions() + 1, name)
        packed[name] = (inp, dim, blk)
    return params[name], dim, blk


def pack_array(a: np.ndarray, dim: int, blk: int) -> np.ndarray:
    """`a` with dimension `dim` cut into blocks of `blk`, the block moved innermost:
    [..., n, ...] -> [..., ceil(n / blk), ..., blk], contiguous (what a packed param reads).
    A last partial block is padded with zeros: a kernel that computes whole channel vectors
    (1000 classes in blocks of 16) reads the padding as zero weights, never past the buffer."""
    n = a.shape[dim]
    if n % blk:
        pad = [(0, 0)] * a.ndim
        pad[dim] = (0, -n % blk)
        a = np.pad(a, pad)
    shape = a.shape
    split = np.moveaxis(a.reshape(*shape[:dim], shape[dim] // blk, blk, *shape[dim + 1 :]), dim + 1, -1)
    out = aligned_empty(split.shape)  # aligned as the engine's outputs are (ALIGN_BYTES)
    out[...] = split
    return out


def _to_expr(e: Any) -> Any:
    return e if isinstance(e, hl.Expr) else hl.Expr(e)


def _as_float(e: Any) -> Any:
    e = _to_expr(e)
    return e if e.type() == hl.Float(32) else hl.cast(hl.Float(32), e)


def _expr(
    e: E.Expr, env: dict[str, Any], funcs: dict[str, hl.Func], params: dict[str, hl.ImageParam], packed: dict[str, Any] | None = None
) -> Any:
    rec = lambda x: _expr(x, env, funcs, params, packed)
    if isinstance(e, E.Const):
        return hl.Expr(int(e.value)) if isinstance(e.value, int) else hl.f32(e.value)
    if isinstance(e, E.Var):
        return _to_expr(env[e.name])
    if isinstance(e, E.Access):
        if packed and e.source in packed:
            prm, dim, blk = packed[e.source]
            ix = [rec(i) for i in e.index]
            return _to_expr(prm[[ix[dim] % blk, *reversed(ix[dim + 1 :]), ix[dim] / blk, *reversed(ix[:dim])]])
        src = funcs.get(e.source) or params[e.source]
        return _to_expr(src[[rec(i) for i in reversed(e.index)]])
    if isinstance(e, E.BinOp):
        a, b = rec(e.a), rec(e.b)
        op = e.op
        if op == "/":
            return _as_float(a) / _as_float(b)
        table = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "//": lambda: a / b,  # Halide integer division rounds down
            "%": lambda: a % b,
            "min": lambda: hl.min(a, b),
            "max": lambda: hl.max(a, b),
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
            "==": lambda: a == b,
            "!=": lambda: a != b,
            "and": lambda: a & b,
            "or": lambda: a | b,
        }
        return table[op]()
    if isinstance(e, E.Call):
        a = rec(e.args[0])
        fa = _as_float(a) if e.fn != "abs" else a
        table = {
            "exp": lambda: hl.exp(fa),
            "log": lambda: hl.log(fa),
            "sqrt": lambda: hl.sqrt(fa),
            "rsqrt": lambda: hl.f32(1.0) / hl.sqrt(fa),
            "tanh": lambda: hl.tanh(fa),
            "erf": lambda: hl.erf(fa),
            "abs": lambda: hl.abs(a),
            "neg": lambda: -a,
            "float": lambda: _as_float(a),
            "sigmoid": lambda: hl.f32(1.0) / (hl.f32(1.0) + hl.exp(-fa)),
        }
        return table[e.fn]()
    if isinstance(e, E.Select):
        return hl.select(rec(e.cond), rec(e.then), rec(e.other))
    raise TypeError(f"cannot lower {e!r}")


# --- schedule ----------------------------------------------------------------------------
def apply_schedule(low: Lowered, sched: Schedule) -> None:
    """Apply a validated schedule to freshly defined Funcs; Halide errors become ScheduleError."""
    p = low.pipeline
    validate(p, sched)
    var_maps: dict[tuple[str, bool], dict[str, Any]] = {}
    for s in p.stages:
        ss = sched.of(s.name)
        var_maps[(s.name, False)] = _apply_loops(low, s, ss.pure, False)
        if s.is_reduction:
            var_maps[(s.name, True)] = _apply_loops(low, s, ss.update, True)
    for s in p.stages:
        f = low.funcs[s.name]
        directives = sched.of(s.name).pure
        if not any(d.kind in COMPUTE_KINDS for d in directives):
            f.compute_root()
        for k, d in enumerate(directives):
            if d.kind not in PLACEMENT_KINDS and d.kind not in STORAGE_KINDS:
                continue
            try:
                if d.kind == Kind.REORDER_STORAGE:
                    if s.name in p.outputs:  # laid out as the pipeline declares (validated): the caller's buffer
                        _dense_along(f.output_buffer(), len(s.dims), storage_axes(s.dims, tuple(L.need(d.loops)))[0])
                    else:
                        f.reorder_storage([hl.Var(n) for n in L.need(d.loops)])
                elif d.kind == Kind.STORE_IN:
                    f.store_in(MEMORY[L.need(d.memory)])
                elif d.kind == Kind.PACK_INPUT:
                    pass  # how the algorithm reads the input (define)
                elif d.kind in (Kind.COMPUTE_AT, Kind.STORE_AT):
                    c = L.need(d.consumer)
                    v = var_maps[(c, p.stage(c).is_reduction)][L.need(d.loop)]
                    getattr(f, d.kind)(low.funcs[c], v)
                else:
                    getattr(f, d.kind)()
            except hl.HalideError as exc:
                raise ScheduleError(s.name, _halide_message(exc), d, k) from None
    for _, w in sorted(sched.wrappers.items()):
        f = low.extra.setdefault("wrappers", {})[w.name] = _apply_wrapper(low, w, var_maps)
        low.wrapper_consumers[f.name()] = w.consumer  # whole: a second lowering in a process names it `Bs$1_in_prod$1$0`


def _apply_wrapper(low: Lowered, w: Wrapper, var_maps: dict[tuple[str, bool], dict[str, Any]]) -> hl.Func:
    """`source.in_(consumer)`, scheduled by the wrapper's directives (compute_root when none
    places it: Halide's default for a wrapper is inline, no copy at all)."""
    p = low.pipeline
    src = low.funcs.get(w.source) or low.params[w.source]
    f = src.in_(low.funcs[w.consumer])
    args = f.args()  # innermost first; the wrapper's dims are outermost first
    loops = wrapper_initial_loops(p, w)
    vars_: dict[str, Any] = {lp.name: args[len(loops) - 1 - k] for k, lp in enumerate(loops)}
    if not any(d.kind in COMPUTE_KINDS for d in w.pure):
        f.compute_root()
    for k, d in enumerate(w.pure):
        try:
            if d.kind == Kind.COMPUTE_AT:
                c = L.need(d.consumer)
                f.compute_at(low.funcs[c], var_maps[(c, p.stage(c).is_reduction)][L.need(d.loop)])
            elif d.kind in PLACEMENT_KINDS:
                getattr(f, d.kind)()
            else:
                _halide_directive(f, d, vars_, loops)
                loops = L.apply(loops, d)
        except hl.HalideError as exc:
            raise ScheduleError(w.label, _halide_message(exc), d, k) from None
    return f


def _apply_loops(low: Lowered, s: Stage, directives: tuple[Directive, ...], update: bool) -> dict[str, Any]:
    f = low.funcs[s.name]
    stage = f.update(0) if update else f
    vars_: dict[str, Any] = {d.name: hl.Var(d.name) for d in s.dims}
    if update:
        r = low.rdoms[s.name]
        for k, dim in enumerate(reversed(s.rdom)):
            vars_[dim.name] = r[k]
    loops = L.initial_loops(s, update)
    for k, d in enumerate(directives):
        if d.kind in PLACEMENT_KINDS or d.kind in STORAGE_KINDS:
            continue
        try:
            _halide_directive(stage, d, vars_, loops)
            loops = L.apply(loops, d)
        except hl.HalideError as exc:
            raise ScheduleError(s.name, _halide_message(exc), d, k, update) from None
    return vars_


def _new_var(vars_: dict[str, Any], name: str, rvar: bool) -> Any:
    if name not in vars_:
        vars_[name] = hl.RVar(name) if rvar else hl.Var(name)
    return vars_[name]


def _halide_directive(stage: Any, d: Directive, vars_: dict[str, Any], loops: list[L.Loop]) -> None:
    kind, need = d.kind, L.need
    is_r = {lp.name: lp.rvar for lp in loops}
    tail = TAIL[d.tail or "auto"]
    if kind == Kind.SPLIT:
        loop = need(d.loop)
        old = vars_[loop]
        outer = _new_var(vars_, need(d.outer), is_r[loop]) if d.outer != loop else old
        inner = _new_var(vars_, need(d.inner), is_r[loop])
        stage.split(old, outer, inner, d.factor, tail)
    elif kind == Kind.TILE:
        x, y = need(d.x), need(d.y)
        xs = [_new_var(vars_, need(n), is_r[a]) for n, a in ((d.xo, x), (d.yo, y), (d.xi, x), (d.yi, y))]
        stage.tile(vars_[x], vars_[y], *xs, d.xf, d.yf, tail)
    elif kind == Kind.REORDER:
        stage.reorder([hl.VarOrRVar(vars_[n]) for n in need(d.loops)])
    elif kind == Kind.FUSE:
        fused = _new_var(vars_, need(d.fused), is_r[need(d.inner)])
        stage.fuse(vars_[need(d.inner)], vars_[need(d.outer)], fused)
    else:
        mk, loop = L.MARKED[kind], need(d.loop)
        v = vars_[loop]
        if d.factor:
            inner = _new_var(vars_, L.split_name(loop, mk), is_r[loop])
            stage.split(v, v, inner, d.factor, tail)
            getattr(stage, kind)(v if kind == "parallel" else inner)
        else:
            getattr(stage, kind)(v)


_UNIQUE_NAME = re.compile(r"\b([A-Za-z_]\w*)\$\d+")  # Halide's unique Func names: 'blur_x$2'


def _halide_message(exc: Exception) -> str:
    """Halide's message on one line, in the names the user wrote (not 'blur_x$2')."""
    msg = str(exc).strip()
    if msg.startswith("Error:"):
        msg = msg[len("Error:") :].strip()
    return "Halide rejected it: " + _UNIQUE_NAME.sub(r"\1", " ".join(msg.split()))


def _stage_in_message(p: Pipeline, msg: str) -> str:
    hits = [s.name for s in p.stages if s.name in msg]
    return max(hits, key=len) if hits else p.outputs[0]


# --- compile and run ------------------------------------------------------------------------
def lower(p: Pipeline, sched: Schedule) -> Lowered:
    packs = packed_inputs(sched)
    low = define(p, packs)
    apply_schedule(low, sched)
    if packs:
        static_bounds(low)
    low.hl_pipeline = hl.Pipeline(low.output_funcs())
    return low


def static_bounds(low: Lowered, strides: bool = False) -> None:
    """Tell Halide the buffers' shapes (the engine binds them at these, checked in Python):
    a packed weight's `c % block` and `c / block` then simplify to a dense vector load only
    where the channel loop's start is known to be a multiple of the block. Applied to the
    schedules that pack a weight only (the others keep the code they were measured with).
    With `strides`, every buffer's strides too: each one dense, in the layout the pipeline
    declares (row-major unless `declared_layout` says otherwise), as the engine's runners give
    them (inputs copied into it when bound, outputs checked or staged). Segments are compiled
    so, their buffers between segments being the runner's own arrays: address arithmetic folds
    into constants as inside one whole pipeline (Sapphire Rapids, 1 thread, MobileNetV2 in
    segments 8.64 -> 8.06 ms, whole 7.71; SqueezeNet 6.77 -> 6.44, 6.11)."""
    p = low.pipeline

    def fix(buf: Any, shape: tuple[int, ...], order: tuple[int, ...] | None) -> None:
        nd, stride = len(shape), 1
        for ax in order if order is not None else tuple(reversed(range(nd))):  # innermost first
            d = buf.dim(nd - 1 - ax).set_bounds(0, shape[ax])
            if strides:
                d.set_stride(stride)
            stride *= shape[ax]

    for o in p.outputs:
        fix(low.funcs[o].output_buffer(), p.stage(o).shape, declared_layout(p, o))
    for i in p.inputs:
        fix(low.params[i.name], i.shape, declared_layout(p, i.name))
    for name, (inp, dim, blk) in low.packed.items():
        fix(low.params[name], pack_array_shape(p.shape_of(inp), dim, blk), None)


def pack_array_shape(shape: tuple[int, ...], dim: int, blk: int) -> tuple[int, ...]:
    """The shape `pack_array` gives an array of `shape`."""
    return (*shape[:dim], -(-shape[dim] // blk), *shape[dim + 1 :], blk)


def compile_jit(low: Lowered, profile: bool = False) -> float:
    """JIT-compile; returns seconds taken. A Halide failure names the stage it mentions."""
    assert low.hl_pipeline is not None
    t0 = time.perf_counter()
    try:
        low.hl_pipeline.compile_jit(host_target(profile))
    except hl.HalideError as exc:
        msg = _halide_message(exc)
        raise ScheduleError(_stage_in_message(low.pipeline, msg), msg) from None
    low.compiled_for = "profile" if profile else "plain"
    return time.perf_counter() - t0


def bind_inputs(low: Lowered, arrays: dict[str, np.ndarray]) -> list[Any]:
    """Point the input params at numpy arrays (no copy; a packed weight is packed here, once,
    outside any timed run); keep the returned buffers (and packed arrays) alive."""
    bufs = input_buffers(low.pipeline, arrays)
    packed = packed_buffers(low, arrays)
    for name, param in low.params.items():
        param.set(packed[name][1] if name in packed else bufs[name])
    return [*bufs.values(), *(x for pair in packed.values() for x in pair)]


def packed_buffers(low: Lowered, arrays: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, hl.Buffer]]:
    """The packed param name -> (the packed copy of its weight, a Halide buffer over it). A
    Halide buffer does not own numpy memory: whoever sets a param to it keeps the array."""
    out = {}
    for name, (inp, dim, blk) in low.packed.items():
        a = pack_array(np.asarray(arrays[inp], np.float32), dim, blk)
        out[name] = (a, hl.Buffer(a))
    return out


def input_buffers(p: Pipeline, arrays: dict[str, np.ndarray]) -> dict[str, hl.Buffer]:
    """Halide buffers over the input arrays (no copy), their shapes checked against the pipeline."""
    bufs = {}
    for i in p.inputs:
        a = in_layout(arrays[i.name], declared_layout(p, i.name))
        if a.shape != i.shape:  # Halide's own checks are compiled out
            raise ValueError(f"input {i.name!r}: array of shape {a.shape}, the pipeline declares {i.shape}")
        bufs[i.name] = hl.Buffer(a)
    return bufs


# Halide, given a buffer's bounds statically (`static_bounds`), emits aligned vector accesses
# to outputs (a 16-byte-aligned numpy output segfaulted ResNet-50 on AVX-512): the engine's
# own arrays are allocated at this alignment and a runner stages any other through one.
ALIGN_BYTES = 64


def _dense_along(buf: Any, ndim: int, axis: int) -> None:
    """Halide's buffer constraint for a buffer stored with `axis` innermost (stride 1) in
    place of its default (the last axis, Halide's dim 0): vectors along that axis are dense loads."""
    buf.dim(0).set_stride(hl.Expr())
    buf.dim(ndim - 1 - axis).set_stride(1)


def aligned_empty(shape: tuple[int, ...], order: tuple[int, ...] | None = None) -> np.ndarray:
    """An uninitialised float32 array whose data starts on an `ALIGN_BYTES` boundary, stored
    row-major or, given `order` (axes, innermost first), in that order (a transposed view)."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(n + ALIGN_BYTES // 4, np.float32)
    start = (-raw.ctypes.data % ALIGN_BYTES) // 4
    return shaped(raw[start : start + n], shape, order)


def shaped(flat: np.ndarray, shape: tuple[int, ...], order: tuple[int, ...] | None = None) -> np.ndarray:
    """The first elements of 1-d array `flat` as an array of `shape`, stored row-major or in
    storage order `order` (axes, innermost first: a transposed view)."""
    n = int(np.prod(shape, dtype=np.int64))
    if order is None:
        return flat[:n].reshape(shape)
    outer_first = list(reversed(order))
    return flat[:n].reshape(tuple(shape[a] for a in outer_first)).transpose([outer_first.index(k) for k in range(len(shape))])


def has_layout(a: np.ndarray, order: tuple[int, ...] | None) -> bool:
    """Is `a` dense in storage order `order` (axes innermost first; None: C order)?"""
    if order is None:
        return bool(a.flags.c_contiguous)
    stride = a.itemsize
    for ax in order:
        if a.shape[ax] > 1 and a.strides[ax] != stride:
            return False
        stride *= a.shape[ax]
    return True


def in_layout(a: np.ndarray, order: tuple[int, ...] | None) -> np.ndarray:
    """`a` as float32 in storage order `order` (no copy where it already is)."""
    a = np.asarray(a, dtype=np.float32)
    if has_layout(a, order):
        return a
    out = aligned_empty(a.shape, order)
    np.copyto(out, a)
    return out


def is_aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGN_BYTES == 0


def output_arrays(p: Pipeline) -> dict[str, np.ndarray]:
    outs = {o: aligned_empty(p.stage(o).shape, declared_layout(p, o)) for o in p.outputs}
    for a in outs.values():
        a.fill(0.0)
    return outs


def staged_outputs(outs: dict[str, np.ndarray], p: Pipeline | None = None) -> dict[str, np.ndarray]:
    """Aligned stand-ins for the arrays of `outs` that are not aligned (copied back after a
    run), in the storage order `p` declares for them."""
    return {o: aligned_empty(a.shape, declared_layout(p, o) if p else None) for o, a in outs.items() if not is_aligned(a)}


def check_outputs(p: Pipeline, outs: dict[str, np.ndarray]) -> None:
    for o in p.outputs:  # Halide's own checks are compiled out
        a, order = outs[o], declared_layout(p, o)
        if a.shape != p.stage(o).shape or a.dtype != np.float32 or not has_layout(a, order):
            how = "C-contiguous" if order is None else f"dense in axis order {order} (innermost first)"
            raise ValueError(f"output {o!r}: needs a {how} float32 array of shape {p.stage(o).shape}")


def parse_profile(text: str, stage_names: list[str], wrapper_consumers: dict[str, str] | None = None) -> dict[str, float]:
    """Sum per-Func milliseconds over all of Halide's profiler reports in `text`. A wrapper's
    copies (`wrapper_consumers`: its Halide name -> consumer) count as its consumer's time:
    the copy is part of how the consumer is scheduled, and per-stage views and the database
    key times by stage, so a copy's time is neither dropped nor spread over other stages."""
    totals = {s: 0.0 for s in stage_names}
    charge = wrapper_consumers or {}
    for line in text.splitlines():
        m = _PROFILE_LINE.match(line)
        if not m:
            continue
        name = charge.get(m.group(1)) or m.group(1).split("$")[0]
        if name in totals:
            totals[name] += float(m.group(2))
    return totals


def make_runner(low: Lowered, outs: dict[str, np.ndarray]) -> Any:
    """A zero-argument callable that realizes into `outs` (numpy memory, no copies)."""
    assert low.hl_pipeline is not None
    check_outputs(low.pipeline, outs)
    flush_denormals()
    staged = staged_outputs(outs, low.pipeline)
    bufs = [hl.Buffer(staged.get(o, outs[o])) for o in low.pipeline.outputs]
    hp = low.hl_pipeline
    dst = bufs if len(bufs) > 1 else bufs[0]
    copies = [(outs[o], a) for o, a in staged.items()]

    def run() -> None:
        hp.realize(dst)
        for user, a in copies:
            np.copyto(user, a)

    # Attributes on a plain function (mypy has no type for that): a callable object would add
    # a method dispatch to every timed call.
    run.buffers = [*bufs, *staged.values()]  # type: ignore[attr-defined]
    return run


def lowered_stmt(p: Pipeline, sched: Schedule, html: bool = False) -> str:
    low = lower(p, sched)
    assert low.hl_pipeline is not None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stmt.html" if html else "stmt.txt")
        fmt = hl.StmtOutputFormat.HTML if html else hl.StmtOutputFormat.Text
        args = [low.params[i.name] for i in p.inputs] + [low.params[n] for n in low.packed]
        try:
            low.hl_pipeline.compile_to_lowered_stmt(path, args, fmt, host_target())
        except hl.HalideError as exc:
            msg = _halide_message(exc)
            raise ScheduleError(_stage_in_message(p, msg), msg) from None
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()


# --- Halide's autoschedulers -----------------------------------------------------------------
def set_estimates(low: Lowered) -> None:
    p = low.pipeline
    for i in p.inputs:
        low.params[i.name].set_estimates([(0, n) for n in reversed(i.shape)])
    for o in p.outputs:
        low.funcs[o].set_estimates([(0, n) for n in reversed(p.stage(o).shape)])


def autoschedule(p: Pipeline, name: str, threads: int | None = None) -> Lowered:
    """Run one of Halide's autoschedulers on the pipeline; the result carries its search time
    (`extra['search_s']`) and generated schedule source."""
    if name not in AUTOSCHEDULERS:
        raise ValueError(f"unknown autoscheduler {name!r} (choose from {', '.join(AUTOSCHEDULERS)})")
    lib = os.path.join(os.path.dirname(hl.__file__), "lib64", AUTOSCHEDULERS[name])
    if lib not in _loaded_plugins:
        hl.load_plugin(lib)
        _loaded_plugins.add(lib)
    low = define(p)
    set_estimates(low)
    low.hl_pipeline = hl.Pipeline(low.output_funcs())
    par = str(threads or os.cpu_count() or 1)
    t0 = time.perf_counter()
    res = low.hl_pipeline.apply_autoscheduler(host_target(), hl.AutoschedulerParams(name, {"parallelism": par}))
    low.extra["search_s"] = time.perf_counter() - t0
    low.schedule_source = res.schedule_source
    return low
