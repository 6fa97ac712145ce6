"""Schedule recipes shared by the hand schedules (engine/hand_schedules.py) and the
rule-based heuristic (engine/heuristic.py).

Each recipe appends directives for one stage or one producer/consumer pair to a schedule.
Loop names come from the stages' own dims (a zoo conv's `c, y, x`, an imported batched
matmul's `b0, b1, i, j`), so the same code serves the built-in pipelines and imported
models; new loops are named after the dim they split (`x` -> `xo`, `x_v`, ...). Recipes
that create a loop other stages can be computed at return its name.

Why these recipes (timed on a 2-core AVX-512 machine; details with each function):
- Register blocking: a reduction (matmul, conv) is computed at a small constant-size
  tile of a pointwise consumer, with the reduction loops outside a fully unrolled block
  of vector accumulators; LLVM then keeps the tile in registers. The tile needs a
  compile-time-constant size, so consumers split their loops by constant factors
  (ShiftInwards tails keep inner tiles full size).
- An output that is itself a reduction can't be computed at anything, so it
  accumulates in the output buffer: a load and a store per FMA (see dense_output).
- Row reductions can't vectorize their reduction loop; a block of rows is vectorized
  instead, one lane per row (vector_update).
- Splits of an output's update definition use factors that divide the extent: such a
  split can neither round up (it would write past the buffer) nor shift inwards (it
  would update some points twice).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from . import expr as E
from .ir import BYTES_PER_ELEMENT, Pipeline
from .loops import MAX_UNROLL
from .schedule import Kind, S, Schedule, StageSchedule, Wrapper, wrapper_dims

VEC = 16  # float32 lanes of an AVX-512 vector (the recipes' lanes come from VectorTarget.lanes)


@dataclass(frozen=True)
class VectorTarget:
    """What register blocking needs to know about a Halide target: float32 lanes per vector
    register, how many vector registers there are, and how many of them a register block's
    accumulators may take (the rest hold the operands: a broadcast and a vector or two).

    x86 with AVX-512: 16 lanes, 32 zmm registers, 16 accumulators (the blocks measured
    best on a 2-core AVX-512 machine: 8 x 2 matmul, 4 channels x 4 vectors conv);
    AVX/AVX2: 8 lanes, 16 ymm registers, 12 accumulators (6 x 2 for a matmul: 12 + 2 B
    vectors + 1 broadcast = 15 registers; with 16 accumulators LLVM spills every one);
    SSE: 4 lanes, 16 xmm registers; 64-bit ARM: 4 lanes, 32 registers."""

    target: str
    lanes: int
    registers: int
    # The core runs each 512-bit op as two 256-bit halves (Zen 4: Halide's avx512_zen4 without
    # avx512_zen5), so 8-lane vectors lose no FMA throughput against 16-lane ones, and a row
    # of whole 8-lane vectors (W=56: 7 ymm) beats one rounded up to 16 lanes (64).
    split_wide: bool = False
    # L1 data cache per core, bytes (set by _vector_target; see X86_L1_BYTES).
    l1_bytes: int = 32 * 1024

    @property
    def accumulators(self) -> int:
        # FMA latency x throughput (4 cycles x 2 ports) needs 8 independent chains; more
        # than 16 measured no faster on AVX-512 and leave fewer registers for operands.
        return max(8, min(16, self.registers - 4))

    @property
    def block_limit(self) -> int:
        """The most accumulators a register block can have before LLVM spills them (four
        registers left for a broadcast, loaded vectors and addresses)."""
        return max(4, self.registers - 4)

    def block_fits(self, accumulators: int, loads: int) -> bool:
        """Does a register block of `accumulators` vector accumulators that loads `loads`
        vectors per step (and broadcasts one scalar) fit the registers with one to spare?
        A 4 x 3 ymm conv block takes all 16 of AVX2's (12 + 3 + 1) and LLVM spilled one
        accumulator every tap: 2.7-3.4x slower than 4 x 2 or 6 x 2 at 64->256 1x1, W=56."""
        return accumulators <= self.accumulators and accumulators + loads + 2 <= self.registers

    @property
    def fma_chains(self) -> int:
        """Independent FMA chains a peak kernel can keep in registers (one register
        reserved for the added constant, a few for the compiler)."""
        return max(8, min(16, self.registers - 4))


def vector_target(target: str | VectorTarget | None = None) -> VectorTarget:
    """The `VectorTarget` of a Halide target string (None: the JIT target of this process,
    as the measurement worker compiles for). ValueError names a string Halide can't parse."""
    if isinstance(target, VectorTarget):
        return target
    return _vector_target(target or _host_target())


@functools.cache
def _host_target() -> str:
    import halide as hl  # noqa: PLC0415  # only when a recipe needs the host's vector width

    return str(hl.get_jit_target_from_environment())


# L1 data cache of the x86 cores the recipes were measured on and of their class: 32 KiB on
# Zen 2-4 and Skylake(-X). A Halide target names an ISA, not a cache, so a later core with
# the same features (48 KiB: Zen 5, Ice Lake and later) gets this too; the only use so far
# (_x_vectors' half-width rows) is on Zen 4 targets (split_wide) alone.
X86_L1_BYTES = 32 * 1024


@functools.cache
def _vector_target(target: str) -> VectorTarget:
    import halide as hl  # noqa: PLC0415

    if not hl.Target.validate_target_string(target):
        raise ValueError(f"target {target!r}: not a Halide target string (like x86-64-linux-avx-avx2-fma)")
    t = hl.Target(target)
    lanes = max(1, t.natural_vector_size(hl.Float(32)))
    wide = t.has_feature(hl.TargetFeature.AVX512) or (t.arch == hl.TargetArch.ARM and t.bits == 64)
    split = lanes == 16 and t.has_feature(hl.TargetFeature.AVX512_Zen4) and not t.has_feature(hl.TargetFeature.AVX512_Zen5)
    return VectorTarget(target, lanes, 32 if wide else 16, split, X86_L1_BYTES)


def fit(factor: int, extent: int) -> int:
    """Largest power of two <= min(factor, extent) (at least 1)."""
    n = max(1, min(factor, extent))
    return 1 << (n.bit_length() - 1)


def dividing(factor: int, extent: int) -> int:
    """Largest power of two <= min(factor, extent) that divides extent."""
    f = fit(factor, extent)
    while extent % f:
        f //= 2
    return f


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# How many producers deep widening_overreads follows a wider region. ResNet's residual chains
# reach a padding (where the growth stops) only 10-30 stages up; at 8 every conv reading a
# block's output was refused whole vectors (7-lane rows at 7x7, 4-lane ones at 28x28).
OVERREAD_DEPTH = 64


def widening_overreads(p: Pipeline, stage: str, var: str, extra: int, depth: int = OVERREAD_DEPTH) -> bool:
    """Would computing `stage` with `var` running `extra` points past its extent (a split
    that rounds up) read past the end of a pipeline input, directly or through producers
    whose computed region grows with it? Clamped reads (paddings) stop the growth."""
    return overread_walk(p, stage, var, extra, depth).overreads


@dataclass(frozen=True)
class OverreadWalk:
    """widening_overreads' answer and how many (stage, region) visits the walk made."""

    overreads: bool
    visits: int


def overread_walk(p: Pipeline, stage: str, var: str, extra: int, depth: int = OVERREAD_DEPTH, memo: bool = True) -> OverreadWalk:
    """widening_overreads with the number of visits. Each block of a residual chain offers
    two paths back (through its convs and through its skip), so the walk without a memo
    (`memo` False) visits a stage once per path: exponential in the blocks (12 1x1 blocks:
    28,669 visits). With it, a region of a stage already found not to over-read with at
    least as much depth left is not walked again (the answer can't differ: less depth
    only ever turns an answer to True), so the visits grow with the stages, not the paths."""
    ranges = p.stage(stage).ranges()
    ranges[var] = (ranges[var][0], ranges[var][1] + extra)
    walk = _Walk({} if memo else None)
    return OverreadWalk(_overreads(p, stage, ranges, depth, walk), walk.visits)


@dataclass
class _Walk:
    # (stage, region) -> the least depth it was walked with and found not to over-read
    cleared: dict[tuple[str, tuple[tuple[str, E.Interval], ...]], int] | None
    visits: int = 0


def _overreads(p: Pipeline, stage: str, ranges: dict[str, E.Interval], depth: int, walk: _Walk) -> bool:
    walk.visits += 1
    key = (stage, tuple(sorted(ranges.items())))
    if walk.cleared is not None and walk.cleared.get(key, depth + 1) <= depth:
        return False
    for ex in p.stage(stage).exprs():
        for a in E.accesses(ex):
            shape = p.shape_of(a.source)
            maybe = [E.bounds(ix, ranges) for ix in a.index]
            box = [b for b in maybe if b is not None]
            if len(box) < len(maybe):
                return True  # data-dependent index: assume the worst
            if all(b[0] >= 0 and b[1] <= n - 1 for b, n in zip(box, shape)):
                continue
            if a.source in p.input_map or a.source in p.outputs or depth == 0:
                return True
            src = p.stage(a.source)
            grown = src.ranges() | {d.name: (min(0, b[0]), max(d.extent - 1, b[1])) for d, b in zip(src.dims, box)}
            if _overreads(p, a.source, grown, depth - 1, walk):
                return True
    if walk.cleared is not None:
        walk.cleared[key] = depth
    return False


def _dim(p: Pipeline, stage: str, k: int) -> str:
    return p.stage(stage).dims[k].name


# --- single stages --------------------------------------------------------------------------
def root_vec(s: Schedule, p: Pipeline, stage: str, par: str, target: str | VectorTarget | None = None) -> None:
    """Compute at root, vectorized along the innermost dim, parallel along `par`."""
    last = p.stage(stage).dims[-1]
    S(s, stage).compute_root().vectorize(last.name, fit(vector_target(target).lanes, last.extent)).parallel(par)


def strips(
    s: Schedule,
    p: Pipeline,
    stage: str,
    rows: int = 32,
    parallel: bool = True,
    min_strips: int = 1,
    target: str | VectorTarget | None = None,
) -> str | None:
    """Strips of `rows` rows: the dim outside the vectorized one is split, its outer loop
    made outermost (so a strip covers all channels/batches, and producers computed per
    strip are computed once for all of them) and parallel. Strips shrink (down to 8 rows)
    until there are `min_strips` of them, so that all cores get work. Returns the strip
    loop, or None for a stage with a single non-trivial dim."""
    st = p.stage(stage)
    lanes = vector_target(target).lanes
    names = [d.name for d in st.dims]
    big = [k for k, d in enumerate(st.dims) if d.extent > 1] or [len(names) - 1]
    v = big[-1]
    rk = next((k for k in reversed(big) if k < v), None)
    o = S(s, stage)
    if rk is None:
        o.vectorize(names[v], fit(lanes, st.dims[v].extent))
        return None
    row, outer, ext = names[rk], f"{names[rk]}o", st.dims[rk].extent
    f = fit(rows, ext)
    while f > 8 and ext // f < min_strips:
        f //= 2
    o.split(row, outer, row, f)
    if rk > 0:  # outer dims (channels, batch) inside the strip loop
        o.reorder(*reversed(names[:rk]), outer)
    o.vectorize(names[v], fit(lanes, st.dims[v].extent))
    if parallel:
        o.parallel(outer)
    return outer


def vector_update(s: Schedule, p: Pipeline, f: str, dim: str, vw: int, unroll: bool = False, tail: str | None = None) -> S:
    """Update of reduction `f`, vectorized along pure `dim` with the reduction loops just
    outside the vector (one accumulator per lane, kept in a register for the whole
    reduction); `unroll` unrolls the reduction loops too (small windows: the taps of a
    depthwise conv or a pool inside each output vector). `tail` as for split."""
    rvars = [d.name for d in p.stage(f).rdom]
    u = S(s, f).update().split(dim, dim, f"{dim}_v", vw, tail=tail).reorder(f"{dim}_v", *reversed(rvars), dim).vectorize(f"{dim}_v")
    if unroll:
        for r in reversed(rvars):
            u.unroll(r)
    return u


def taps_per_vector(s: Schedule, p: Pipeline, f: str, vw: int) -> None:
    """Update of a small-window reduction (ry, rx): the taps unrolled inside each output
    vector, so the accumulator stays in a register for the whole window."""
    vector_update(s, p, f, _dim(p, f, -1), vw, unroll=True)


def row_reduce_at(s: Schedule, p: Pipeline, f: str, consumer: str, loop: str, rows: int) -> None:
    """A row reduction `f[i]` over r, computed per block of `rows` rows at `loop` of
    `consumer`. The block's rows are the vector lanes (one strided load per row, but
    independent accumulators); 8 rows measured best, more rows 4 KiB apart thrash L1."""
    i = _dim(p, f, -1)
    S(s, f).compute_at(consumer, loop).vectorize(i, rows)
    vector_update(s, p, f, i, rows)


# --- register-blocked reductions ------------------------------------------------------------
def matmul_block(
    s: Schedule,
    p: Pipeline,
    prod: str,
    out: str,
    rows: int | None = None,
    vecs: int = 2,
    panel: int = 64,
    kblock: int = 128,
    parallel: bool = True,
    target: str | VectorTarget | None = None,
    tile_blocks: int | None = None,
) -> str:
    """`out[.., i, j]` reads `prod[.., i, j]` pointwise; `prod[.., i, j]` sums over k.

    `out` is tiled into panel x (tile_blocks*vecs*lanes) tiles, parallel over row panels,
    and `prod` is computed per tile (a stack buffer). Its k loop is split into blocks; per k
    block, each rows x (vecs*lanes) register block of the tile runs the inner k loop with
    its rows*vecs accumulators in vector registers. Blocking k keeps the kblock x
    (vecs*lanes) block of B in L2 while the panel's row blocks reuse it (B's rows are
    4 KiB apart, so cache-set conflicts limit how much of a B column strip stays cached).
    `rows` None: as many as the target's accumulators allow (8 x 2 zmm on AVX-512,
    6 x 2 ymm on AVX2, where 8 x 2 spilled); the panel is then a multiple of the rows
    (60 for 6), its last one shifted inwards. Leading (batch) dims stay outermost.
    Returns the panel loop of `out`."""
    vt = vector_target(target)
    m, n = p.shape_of(out)[-2:]
    i, j = _dim(p, out, -2), _dim(p, out, -1)
    pi, pj, k = _dim(p, prod, -2), _dim(p, prod, -1), p.stage(prod).rdom[0].name
    vw = fit(vt.lanes, n)
    cb = vw * fit(vecs, max(1, n // vw))
    nv = cb // vw
    if rows is None:
        rows = max(1, min(8, vt.accumulators // nv))
    rb = fit(rows, m) if rows > m or rows & (rows - 1) == 0 else rows
    pb = max(rb, fit(panel, m))
    if pb % rb:  # rows that are not a power of two: the panel a multiple of them
        pb = rb * max(1, pb // rb)
    # Tile columns: `tile_blocks` register blocks side by side (None: 128 columns, 512 bytes
    # of each B row per visit). A B row segment is then 8 cache lines of one page, used by
    # 8 blocks in turn, instead of one line per page (B's rows are pages apart at n=1024):
    # on AVX2 (Zen 3) 1024^3 ran 1.4-1.6x faster at 8 blocks of 16 columns than at 1.
    blocks = tile_blocks if tile_blocks is not None else max(1, 128 // cb)
    tw = cb * fit(blocks, max(1, n // cb))
    io, ii, jo, ji = f"{i}o", f"{i}i", f"{j}o", f"{j}i"
    o = S(s, out).split(i, io, ii, pb).split(j, jo, ji, tw).reorder(ji, ii, jo, io).vectorize(ji, vw)
    if parallel:
        o.parallel(io)
    S(s, prod).compute_at(out, jo).vectorize(pj, vw)
    u = S(s, prod).update().split(k, f"{k}o", f"{k}i", fit(kblock, p.stage(prod).rdom[0].extent))
    u.split(pi, pi, f"{pi}_u", rb).split(pj, pj, f"{pj}_v", vw).split(pj, pj, f"{pj}_u", cb // vw)
    # ko, (j, i: blocks of the tile), ki, register block
    u.reorder(f"{pj}_v", f"{pj}_u", f"{pi}_u", f"{k}i", pi, pj, f"{k}o")
    u.vectorize(f"{pj}_v").unroll(f"{pj}_u").unroll(f"{pi}_u")
    return io


def matmul_panels(s: Schedule, p: Pipeline, prod: str, out: str, parallel: bool = True, target: str | VectorTarget | None = None) -> str:
    """`out[.., i, j]` reads `prod[.., i, j]` pointwise; `prod[.., i, j]` sums over k: a GEMM
    with B packed. `out` runs column panels of one register block's width (`packed_block`),
    parallel over them, and within a panel row blocks; `prod` is computed per block and sums
    all of k in its rows x vecs vector accumulators. B is read through a wrapper
    (`B.in(prod)`, a packed copy) computed per panel: k x (vecs*lanes) floats, contiguous,
    made once and read by every row block of the panel, where B's own rows are 4 KiB apart
    at n = 1024 (cache-set aliasing and TLB misses: blocking k without packing stayed near
    75% of the FMA peak). The packed panel is k x 256 bytes on AVX-512 (256 KiB at k = 1024:
    in L2, streamed once per row block). No buffer of partial sums: each block's sums go to
    `out` once, where a k-blocked schedule re-reads and re-writes them per k block.
    Leading (batch) dims stay outermost. Returns the panel loop of `out`."""
    vt = vector_target(target)
    m, n = p.shape_of(out)[-2:]
    i, j = _dim(p, out, -2), _dim(p, out, -1)
    pi, pj, k = _dim(p, prod, -2), _dim(p, prod, -1), p.stage(prod).rdom[0].name
    vw = fit(vt.lanes, n)
    rows, vecs = packed_block(vt)
    rb, nv = min(rows, m), max(1, min(vecs, n // vw))
    cb = nv * vw
    jo, ji, io, ii = f"{j}o", f"{j}i", f"{i}o", f"{i}i"
    o = S(s, out).split(j, jo, ji, cb).split(i, io, ii, rb).reorder(ji, ii, io, jo)
    o.split(ji, ji, f"{ji}_v", vw).vectorize(f"{ji}_v").unroll(ji).unroll(ii)
    if parallel:
        o.parallel(jo)
    blocked = S(s, prod).compute_at(out, io)
    for d in (blocked, S(s, prod).update()):  # the block's own loops, all constant: unrolled around the vectors
        d.split(pj, pj, f"{pj}_v", vw).split(pj, pj, f"{pj}_u", nv).split(pi, pi, f"{pi}_u", rb)
    S(s, prod).vectorize(f"{pj}_v").unroll(f"{pj}_u").unroll(f"{pi}_u")
    S(s, prod).update().reorder(f"{pj}_v", f"{pj}_u", f"{pi}_u", k, pi, pj).vectorize(f"{pj}_v").unroll(f"{pj}_u").unroll(f"{pi}_u")
    b = _matmul_rhs(p, prod)
    S(s, prod).wrap(b).compute_at(out, jo).vectorize(wrapper_dims(p, Wrapper(b, prod))[-1].name, vw)
    return jo


def matmul_panels_root(s: Schedule, p: Pipeline, f: str, parallel: bool = True, target: str | VectorTarget | None = None) -> str:
    """Matmul `f[.., i, j] (+)= A[.., i, k] * B[.., k, j]` with no pointwise consumer to be
    blocked at (a graph output, or a fused QKV projection that several matmuls read):
    computed at root in its own buffer, with B packed and the update in column panels of
    register blocks as in `matmul_panels`. The packed copy is computed at the update's panel
    loop (Halide's compute_at at a Func with an update means its last definition's loops).
    LLVM keeps a root buffer's accumulators in memory across the k loop (a load and a store
    per FMA, as in dense_output), so k is split by ROOT_KUNROLL, unrolled inside the block
    and just outside the vector: each accumulator takes that many FMAs in a row through a
    register (1024^3 on Zen 4, 1 thread, CPU time: 24 ms, against 59 ms with k outside the
    block, 92 ms dense_output and 20 ms for matmul_panels at a consumer; AVX2: 48, 89 and
    30 ms). Halide's rfactor would give the block a buffer of its own (registers) but the
    schedule language has no rfactor. The update can't round up (it would write or read past
    a buffer) nor shift inwards (it would add twice): the block's vectors divide the row's,
    and rows that don't divide m are guarded (Halide keeps the guard out of the steady state:
    m = 128, 768 -> 2304, 4 x 6 zmm guarded 4.95 ms vs 5.01 exact; m = 197, 192 -> 576: 6 x 4
    guarded 0.40 ms, 1 x 12 exact 0.77, dense_output 1.07). ValueError when no such block
    has MIN_PACKED_ACCUMULATORS. Producers of A are needed whole per panel (at root).
    Returns the update's panel loop."""
    vt = vector_target(target)
    m, n = p.shape_of(f)[-2:]
    i, j, k = _dim(p, f, -2), _dim(p, f, -1), p.stage(f).rdom[0].name
    vw = dividing(vt.lanes, n)
    rows, vecs = packed_block(vt, None, n // vw)
    rows = min(rows, m)
    if vw < vt.lanes or rows * vecs < MIN_PACKED_ACCUMULATORS:
        raise ValueError(f"{f!r}: no register block of full vectors divides its rows of {n}")
    cb, jo, ji, io, ii, ku = vecs * vw, f"{j}o", f"{j}i", f"{i}o", f"{i}i", f"{k}_u"
    S(s, f).compute_root().vectorize(j, vw)
    u = S(s, f).update().split(j, jo, ji, cb).split(ji, ji, f"{ji}_v", vw)
    u.split(i, io, ii, rows, tail="guard_with_if" if m % rows else None)
    u.split(k, k, ku, dividing(ROOT_KUNROLL, p.stage(f).rdom[0].extent))
    u.reorder(f"{ji}_v", ku, ji, ii, k, io, jo).vectorize(f"{ji}_v").unroll(ku).unroll(ji).unroll(ii)
    if parallel:
        u.parallel(jo)
    b = _matmul_rhs(p, f)
    S(s, f).wrap(b).compute_at(f, jo).vectorize(wrapper_dims(p, Wrapper(b, f))[-1].name, vw)
    return jo


ROOT_KUNROLL = 4  # 1024^3 as above, 4 x 4 zmm: 4 -> 24 ms, 8 -> 30, 16 -> 42 (8 x 2: 4 -> 36, 8 -> 28)
MIN_PACKED_ACCUMULATORS = 8  # independent FMA chains that hide the FMA latency (4 cycles x 2 ports)


def packed_block(vt: VectorTarget, rows_divide: int | None = None, vecs_divide: int | None = None) -> tuple[int, int]:
    """(rows, vectors) of `matmul_panels`' register block: the most FMAs per load (rows*vecs
    FMAs per vecs loads and rows broadcasts) whose accumulators, loaded vectors and a
    broadcast fit the vector registers, at most 24 accumulators; ties to more rows. AVX-512:
    6 x 4 zmm (24 + 4 + 1 of 32); AVX2: 4 x 3 ymm (12 + 3 + 1: all 16). Packed 1024^3 on
    Zen 4, 1 thread, CPU time: AVX-512 6 x 4 107 GFLOP/s, 4 x 6 100, 5 x 5 97, 8 x 2 102-104;
    AVX2 4 x 3 96-100, 6 x 2 93, 4 x 2 87 (3 x 4 spilled: 37). `rows_divide`, `vecs_divide`:
    only rows dividing the one, vectors dividing the other (a block that tiles an update
    exactly: matmul_panels_root)."""
    best = (0.0, 1, 1)
    for vecs in range(1, vt.registers):
        for rows in range(1, MAX_ACCUMULATORS // vecs + 1):
            if (rows_divide and rows_divide % rows) or (vecs_divide and vecs_divide % vecs):
                continue
            if rows * vecs + vecs + 1 <= vt.registers:
                best = max(best, (rows * vecs / (rows + vecs), rows, vecs))
    return best[1], best[2]


MAX_ACCUMULATORS = 24  # of a packed matmul's block: 5 x 5 zmm (25) measured 10% slower than 6 x 4


def _matmul_rhs(p: Pipeline, prod: str) -> str:
    """The right-hand operand of matmul `prod` that a wrapper can pack: read once by the
    update, contiguous along the output's columns (its last index is j plus batch terms or a
    constant: a row-major B, or a column slice of one, as an attention head's V) and along k
    in another index, i nowhere. ValueError otherwise (a transposed B, as Q.K^T's K: a copy
    keeps the source's layout, so its columns would still be strided; or a source read twice,
    which one wrapper would copy for both reads)."""
    st = p.stage(prod)
    if st.update is None or len(st.rdom) != 1 or len(st.dims) < 2:
        raise ValueError(f"{prod!r} is not a matmul (one reduction over k, at least two dims)")
    k, i, j = st.rdom[0].name, st.dims[-2].name, st.dims[-1].name
    batch = {d.name for d in st.dims[:-2]}
    reads = E.accesses(st.update)
    for a in reads:
        forms = [E.affine(ix) for ix in a.index]
        if any(f is None for f in forms) or len({x.index for x in reads if x.source == a.source}) != 1:
            continue
        last, inner = forms[-1], forms[:-1]
        assert last is not None
        if last[0].get(j) != 1 or not set(last[0]) <= batch | {j}:
            continue
        ks = [f for f in inner if f is not None and k in f[0]]
        if len(ks) == 1 and ks[0][0][k] == 1 and all(f is not None and not ({i, j} & set(f[0])) for f in inner):
            return a.source
    raise ValueError(f"{prod!r} reads no operand contiguous along {j!r} and indexed by {k!r}: nothing to pack")


PACK_MIN_ROW_BLOCKS = 4  # a packed panel is read by at least this many row blocks (the copy is one more pass over B)


def packed_rhs(p: Pipeline, prod: str, target: str | VectorTarget | None = None) -> str | None:
    """The operand `matmul_panels` packs for matmul `prod` when packing pays, else None.
    The copy costs one pass over B (a load and a store per element); it saves, per row block
    after the first, re-reading a k x (vecs*lanes) strip of B whose rows are n floats apart
    (4 KiB at n = 1024: the strip's lines share few L1 sets, and each row is another page).
    So it pays when the panel is read by PACK_MIN_ROW_BLOCKS row blocks or more and B does
    not fit L1 anyway (`VectorTarget.l1_bytes`: a small B stays cached whatever its layout, as an
    attention head's 64 x 128 K or V), with at least one full vector of columns."""
    vt = vector_target(target)
    try:
        b = _matmul_rhs(p, prod)
    except ValueError:
        return None
    st = p.stage(prod)
    m, n, k = st.shape[-2], st.shape[-1], st.rdom[0].extent
    rows, _ = packed_block(vt)
    if n < vt.lanes or m < PACK_MIN_ROW_BLOCKS * rows or BYTES_PER_ELEMENT * k * n <= vt.l1_bytes:
        return None
    return b


def conv_blocking(
    c: int, w: int, target: str | VectorTarget | None = None, lanes: int | None = None, max_xvecs: int | None = None
) -> tuple[int, int]:
    """The register block of a conv with `c` output channels at output width `w`:
    (channels, vectors along x), chosen for FMAs per load times the share of x lanes
    that are useful. A block of ch x xv accumulators takes ch broadcasts of a weight and
    xv input vectors per tap for ch*xv FMAs, at most VectorTarget.accumulators of them;
    x is covered by blocks of xv vectors (the last shifted inwards, a short row rounded
    up), and the block must fit the registers with its loads (VectorTarget.block_fits).
    AVX-512 at W=56: 4 x 4 zmm (the block measured best there); AVX2 at W=56: 4 x 2 ymm
    at 64 channels, 6 x 2 at 96 or 144 (4 x 3 spilled: the 1x1 convs ran 2-3x slower).
    `lanes`: the vector width when not the target's (narrower vectors that divide W);
    `max_xvecs`: at most this many vectors per block (blocks that must stay inside the row)."""
    return _blocking(c, w, vector_target(target), lanes, max_xvecs)[1:]


def _blocking(c: int, w: int, vt: VectorTarget, lanes: int | None, max_xvecs: int | None) -> tuple[float, int, int]:
    """(score, channels, x vectors) of conv_blocking; the score is FMAs per load times the
    useful share of the lanes and of the channels computed (a last channel block shifted
    inwards recomputes some). Channels: powers of two and the divisors of c (6 x 2 ymm for
    MobileNet's 96 or 144 channels: 12 accumulators + 2 loads + a broadcast)."""
    vw = lanes or fit(vt.lanes, w)
    nvec = ceil_div(w, vw)
    best: tuple[float, int, int] = (0.0, 1, 1)
    top = min(c, vt.accumulators, MAX_BLOCK_CHANNELS)
    for ch in sorted({1 << b for b in range(top.bit_length())} | {d for d in range(1, top + 1) if c % d == 0}):
        for xv in range(1, min(nvec, max_xvecs or nvec) + 1):
            if not vt.block_fits(ch * xv, xv):
                break
            covered = nvec * vw if xv == nvec else ceil_div(w, xv * vw) * xv * vw
            score = ch * xv / (ch + xv) * (w / covered) * (c / (ceil_div(c, ch) * ch))
            best = max(best, (score, ch, xv))
    return best


# Channels of a conv's register block at most: each is a stream of weight broadcasts (one
# output channel's weights, 1-16 KiB apart). ResNet-50's 14x14 convs on AVX-512 (one 16-lane
# vector a row), 1 thread, Zen 4, CPU time against ONNX Runtime: 16 x 1 zmm 2.8x (1x1
# 1024->256: 16 weight rows 4 KiB apart, one L1 set of 8 ways) and 1.7x (3x3 256->256),
# 8 x 1 1.0-1.1x and 1.2x.
MAX_BLOCK_CHANNELS = 8


def _x_vectors(p: Pipeline, convs: tuple[str, ...], c: int, w: int, vt: VectorTarget, out: str | None = None) -> tuple[int, bool]:
    """The vector width of a conv's x blocks and whether they must stay inside the row
    (x blocks of whole vectors, the last shifted inwards) because rounding the row up
    would read past an input, or because the tile of `out` (the conv's pointwise consumer)
    can't round up with it (an output): the rounded lanes would then read producer columns
    never written (rounds_tile). Otherwise the row rounds up to whole vectors (a row shorter
    than the lanes to one vector). When rounding up would over-read, of narrower vectors
    that divide W (full rows) and full vectors in blocks inside the row, the one with more
    useful lanes x FMAs per load (AVX2 at W=28: 8-lane blocks of 2 vectors over 4-lane
    ones; W=14: 8 lanes over 2). A row shorter than the lanes is one vector of W lanes."""
    vw = min(vt.lanes, 1 << max(0, (w - 1).bit_length()))  # a row shorter than the lanes: one vector
    extra = ceil_div(w, vw) * vw - w
    half = vt.lanes // 2
    pointwise = all(conv_taps(p, cv) == 1 for cv in convs)
    row_bytes = max(p.stage(cv).rdom[0].extent for cv in convs) * w * BYTES_PER_ELEMENT  # an input row, all its channels
    if vt.split_wide and pointwise and 2 * row_bytes <= vt.l1_bytes and w > vt.lanes and w % vt.lanes and w % half == 0:
        # Whole half-width vectors where full ones would round up (Zen 4 at W=56: conv_block's
        # 3 x 7 ymm, not 4 x 4 zmm rounded to 64), for 1x1 convs whose input row fits half the
        # L1 (3 channels a block: more passes over it). 1 thread, Zen 4, CPU time against ONNX
        # Runtime, 56x56 1x1 convs reading a max pool, best of 3 rounds, old = b914ba3
        # (docs/bench/convs-cpu-ab-2026-12-02-s8-avx512-c4b32c0.json): 64->256 1.40x -> 1.24x,
        # 64->64 1.51x -> 1.45x (14 KiB input rows); 256->64 1.34x -> 1.32x, no faster, and
        # mobilenet_block's 144->24 projection 5-10% slower (3 runs): their input rows (56 KiB,
        # 31.5 KiB) are over half the L1, which excludes them. Not 3x3 convs: 64->64 within
        # the noise (1.23x -> 1.24x there; 1.26x -> 1.23x and 1.26x -> 1.34x in two earlier runs).
        return half, False
    if extra == 0 or (
        not any(widening_overreads(p, cv, _dim(p, cv, -1), extra) for cv in convs) and (out is None or rounds_tile(p, out, extra))
    ):
        return vw, False
    if w < vt.lanes:
        return w, False  # the whole row as one vector register (7 of 8 lanes): no tail, no over-read
    narrow = dividing(vt.lanes // 2, w)
    inside = fit(vt.lanes, w)
    nvec = ceil_div(w, narrow)
    if vt.split_wide and nvec * ((vt.block_limit - 4) // nvec) >= vt.accumulators:
        # conv_block's narrow full-row block (Zen 4 at W=56: 3 x 7 ymm, measured there). Only
        # where 512-bit operations run as two halves: on a core with full-width FMAs (Sapphire
        # Rapids) half-width vectors halve the FMA rate, and full vectors in blocks inside the
        # row (scored below) keep it.
        return narrow, False
    if _blocking(c, w, vt, inside, w // inside)[0] * inside > _blocking(c, w, vt, narrow, None)[0] * narrow:
        return inside, True
    return narrow, False


def rounds_tile(p: Pipeline, out: str, extra: int) -> bool:
    """Should `out`'s tile round its rows up by `extra` points with a reduction computed at it
    whose update rounds up (conv_block, depthwise_block)? Halide computes the producers of an
    update over the stage's own required region, not over its rounded-up loop: the last
    vector's extra lanes then read columns of the producer (a padding, a root buffer) that are
    allocated but never written. Rounding the tile of `out` (a pure definition) makes the
    reduction's required region, and so its producers', the rounded one. Uninitialized lanes
    are discarded, but their time is not: on an Intel Sapphire Rapids core (AVX-512, 1
    thread) a 192 x 28x28 depthwise conv + ReLU6 read stack garbage in 4 of 32 lanes and took
    0.15 or 1.35-1.46 ms by what the garbage was, 0.013-0.036 ms with the padding computed
    over the columns read (ONNX Runtime 0.109 ms); on Zen 4 the same garbage cost nothing
    measurable (56 rounded to 64 measured 0-6% slower there, resnet_block's hand schedule).
    Not where rounding `out` would read past an input (widening_overreads)."""
    return extra > 0 and out not in p.outputs and not widening_overreads(p, out, _dim(p, out, -1), extra)


def conv_block(
    s: Schedule,
    p: Pipeline,
    conv: str,
    out: str,
    chans: int | None = None,
    target: str | VectorTarget | None = None,
    xvecs: int | None = None,
    also: tuple[str, ...] = (),
) -> str:
    """`out[n, c, y, x]` reads `conv[n, c, y, x]` pointwise; `conv` sums over (rc,) ry, rx.
    `also`: more convs `out` reads pointwise (a residual add of two convs: a bottleneck's
    last conv and its downsampling one), each computed at the same tile with the same block.

    `out` is tiled into chans x 1 row x full-width tiles (x split by the full width so
    the tile size is a constant), parallel over rows. `conv` is computed per tile with
    the reduction outside a block of chans x ceil(W/lanes) vector accumulators. When W is
    not a multiple of the lanes the block rounds x up (on AVX-512, 8 of 64 lanes wasted
    at W=56), which still measured ~25% faster than exact 8-wide blocks (4 x 7 ymm
    accumulators plus operands don't fit in 32 registers; 3 x 7 fit but run slower).
    A row that needs more vectors than the registers hold (AVX2: 16 ymm) is cut into
    x blocks of at most VectorTarget.block_limit vectors (the last shifted inwards).
    `chans` None: 4 where they fit (AVX-512: 4 x 4 zmm at W=56), else what the
    accumulators allow (AVX2: 1 x 7 ymm at W=56; 4 x 7 spilled), at most MAX_BLOCK_CHANNELS;
    on AVX-512 (ROWS_MIN_LANES), a row of at most half a vector (7x7) whose height has a
    divisor from 2 to 8 gets a block over rows (rows_of_plane: 3 channels x 7 rows), and
    where FMAs run full width (not split_wide) so does a row of one vector (13x13, 14x14:
    full_rows_block, the last block of rows shifted inwards), the tile then chans x rows x
    the width. Where the rows round up to
    whole vectors, so does `out`'s tile (rounds_tile); where it can't (an output), the
    conv's rows don't round up either (_x_vectors).
    Returns the per-row loop of `out` (where the conv's producers can be computed)."""
    vt = vector_target(target)
    shape = p.shape_of(out)
    c, w = shape[-3], shape[-1]
    chans_given = chans
    oc, oy, ox = (_dim(p, out, k) for k in (-3, -2, -1))
    vw, inside = _x_vectors(p, (conv, *also), c, w, vt, out)
    nvec = ceil_div(w, vw)
    narrowed = vw < fit(vt.lanes, w)
    if inside:  # blocks of whole vectors inside the row, the last shifted inwards
        nvec = w // vw
        chans, xv = (chans, min(nvec, max(1, vt.block_limit // chans))) if chans else conv_blocking(c, w, vt, vw, nvec)
    elif chans is None and narrowed and nvec * ((vt.block_limit - 4) // nvec) >= vt.accumulators:
        # Narrow vectors, full rows, as many channels as leave 8 registers (AVX-512: 3 x 7
        # zmm at W=56, as measured there); where that block is small (AVX2: 1 x 7), the model.
        chans, xv = (vt.block_limit - 4) // nvec, nvec
    elif chans is None:
        chans, xv = conv_blocking(c, w, vt, lanes=vw)
    else:  # the caller's channels, the x vectors that fit with them
        xv = min(nvec, max(1, vt.block_limit // chans))
    cb = min(chans, c)
    nvec = min(nvec, xvecs or xv)
    rb, full = 1, False
    if (
        ROWS_MIN_LANES <= vt.lanes
        and not inside
        and nvec == 1
        and (2 * vw <= vt.lanes or not vt.split_wide)
        and chans_given is None
        and all(x_stride(p, cv) == 1 for cv in (conv, *also))
    ):
        # A row of at most half a vector (AVX-512 at 7x7: 8 of 16 lanes): the block spans rows.
        # Not for strided convs: each row's input is a strided load (two loads and a shuffle),
        # and at 14x14 -> 7x7, 1024 -> 2048 (ResNet-50's last downsampling), 3 x 7 ran 1.3x
        # slower than 8 x 1 (2.5x vs 2.0x ONNX Runtime, CPU time, Zen 4). A height with no
        # divisor from 2 to 8 (1x1 planes after a global pool, 13 rows) has no such block: the
        # channels stay conv_blocking's.
        full = 2 * vw > vt.lanes
        rows_cb, rows_rb = rows_of_plane(c, shape[-2], vt, full=full)
        if rows_rb > 1:
            cb, rb = rows_cb, rows_rb
    xb = w if nvec * vw >= w else nvec * vw  # the x extent one register block covers
    wide = xb == w and nvec * vw > w and out not in p.outputs and not inside and rounds_tile(p, out, nvec * vw - w)
    co, ci, xo, yo = f"{oc}o", f"{oc}i", f"{ox}o", f"{oy}o"
    # Where the weights outweigh the output plane (ResNet's stages 2-4, the 1x1 convs of
    # 1024-2048 channels at 14x14 and 7x7), a channel block's weights are reused across
    # every row (channels outermost, parallel; each tile at the x block loop). Otherwise
    # each row is a parallel strip with all channels inside it (the input row reused).
    weights_first = _weights_first(p, conv, cb)
    row = yo if rb > 1 else oy
    outer = (xo, row, co) if weights_first else (co, xo, row)
    ovw = fit(vw, w) if out in p.outputs else vw  # an output's vectors can't be wider than its row
    o = S(s, out).split(oc, co, ci, cb)
    if rb > 1:
        o.split(oy, yo, oy, rb)
    o.split(ox, xo, ox, nvec * vw if wide else xb, tail="round_up" if wide else None)
    o.reorder(ox, *((oy,) if rb > 1 else ()), ci, *outer).vectorize(ox, ovw).parallel(outer[-1])
    at, strip = (xo, co) if weights_first else (co, xo)
    for cv in (conv, *also):
        cc, cy, cx = _dim(p, cv, -3), _dim(p, cv, -2), _dim(p, cv, -1)
        # Initialize the rounded-up lanes too, or they would accumulate onto uninitialized
        # (possibly denormal) memory.
        S(s, cv).compute_at(out, at).split(cx, cx, f"{cx}_v", vw, tail="round_up").vectorize(f"{cx}_v")
        rvars = [d.name for d in p.stage(cv).rdom]
        u = S(s, cv).update().split(cx, cx, f"{cx}_v", vw).split(cx, cx, f"{cx}_u", nvec)
        u.reorder(f"{cx}_v", f"{cx}_u", *((cy,) if rb > 1 else ()), cc, *reversed(rvars), cx).vectorize(f"{cx}_v").unroll(f"{cx}_u")
        if rb > 1:
            u.unroll(cy, rb) if full else u.unroll(cy)
        # The channel loop has cb iterations at the tile; validation bounds an unroll by the
        # stage's declared extent, so more channels than an unroll may have (1024 in ResNet-50's
        # stage 3), or than its product with the rows of a full-width block does (14 x 384 x
        # 14 lanes), are unrolled as a split by cb (an outer loop of one iteration).
        if c > MAX_UNROLL or full:
            u.unroll(cc, cb)
        else:
            u.unroll(cc)
    return strip


# conv_channels_block: the widest plane a 1x1 conv takes it at (at 56x56 a 1x1 conv's short
# reduction, 64 or 256 steps, does not pay for the strided stores of its outputs: 1.7-1.9x ->
# 2.1-2.6x ONNX Runtime; at 28x28 1.9-2.2x -> 1.1-1.3x); convs with more taps take it at any
# width (3x3 at 55x55 and 56x56: 1.4-1.5x -> 1.05-1.2x). Its register block, output channels
# (vectors) x x positions: 4 x 7 = 28 zmm accumulators.
CHANNELS_MAX_WIDTH = 28
CHANNELS_VECTORS = 4
CHANNELS_X = 7
# A stride-1 conv with more than one tap over rows of at least CHANNELS_WIDE_X positions takes
# 2 vectors x 14 positions instead (28 accumulators as well): each weight vector feeds twice
# the positions, and a block's weights are half as many bytes (a 3x3 128 -> 128 block: 147 KB,
# where the 4-vector block's 295 KB competes with a 2 MB plane for L2). Sapphire Rapids, 1
# thread, vs ORT, 4x7 -> 2x14: 3x3 256 at 14x14 1.11x -> 1.02x, 128 and 256 at 28x28 1.16x ->
# 1.08x and 1.14x -> 1.04x, 32 -> 128 at 27x27 1.22x -> 1.10x, 128 at 56x56 1.19x -> 1.10x,
# 128 at 64x64 1.37x -> 1.30x. Not 1x1 convs (512 -> 128 at 28x28 1.16x -> 1.26x), strided
# ones (128 at 56 -> 28 1.46x -> 1.86x) or rows of 13 (1.17x -> 1.91x).
CHANNELS_WIDE_X = 14
# Shortest reduction per output (input channels x taps) the channels block takes: its tile is
# stored as channel vectors into NCHW planes (a scatter per vector), which a short reduction
# cannot pay for. Sapphire Rapids, 1 thread, vs conv_block: SqueezeNet's first conv (3 -> 64,
# 3x3 stride 2, 27 per output) 1.53 -> 4.10 ms. Strided convs: measured faster from 256 (the
# 1x1 downsamples, 3x3 at 128+ channels); ResNet-50's first conv (7x7 stride 2, 147) was
# 2.18x -> 1.93x ORT in one run and 1.58x -> 1.82x in another, so it stays with conv_block.
CHANNELS_MIN_REDUCTION = 32
STRIDED_MIN_REDUCTION = 256


def conv_taps(p: Pipeline, conv: str) -> int:
    """The window of conv `conv` (its reduction over rc, ry, rx): taps per input channel (1 for a 1x1)."""
    return math.prod(d.extent for d in p.stage(conv).rdom[1:])


def conv_weight(p: Pipeline, conv: str) -> str | None:
    """The weight input a conv reads as `W[c, rc, ry, rx]` (c its output channel, the rest
    its reduction variables in order), when there is exactly one such read, else None."""
    st = p.stage(conv)
    if st.update is None or len(st.dims) != 4 or len(st.rdom) != 3:
        return None
    want = (st.dims[1].name, *(d.name for d in st.rdom))
    weights = {i.name for i in p.inputs if i.weight}
    hits = {a.source for a in E.accesses(st.update) if a.source in weights and tuple(getattr(i, "name", None) for i in a.index) == want}
    return hits.pop() if len(hits) == 1 else None


def channels_block_fits(p: Pipeline, convs: tuple[str, ...], target: str | VectorTarget | None = None) -> tuple[int, int] | None:
    """(channel vectors, x positions) of conv_channels_block's register block for `convs`
    (a conv and the residual ones computed at the same tile), or None where it does not
    apply: a 16-lane target with 32 registers (full-width FMAs or, Zen 4, split_wide ones),
    convs of stride 1 or 2 (1x1 convs over output planes at most CHANNELS_MAX_WIDTH wide),
    each with its weight as `W[c, rc, ry, rx]`, their channels in whole blocks of vectors
    (`channel_vectors`; a last partial vector where the reads along c are weights: `channel_reads`), at
    least CHANNELS_MIN_REDUCTION products per output (STRIDED_MIN_REDUCTION strided). Two
    convs at one tile split the accumulators (both blocks are live at once). A stride only
    spaces the x positions' broadcasts: ResNet-50's strided 3x3 convs (Sapphire Rapids, 1
    thread, CPU time vs ORT, conv_block -> this) 128 at 56->28 2.58x -> 1.45x, 256 at
    28->14 2.04x -> 1.31x, 512 at 14->7 2.51x -> 0.99x; its layer4.0 unit (with the strided
    1x1 downsample at the add's tile) 2.32x -> 1.09x. Zen 4 (512-bit ops as two halves), same
    clock, conv_block -> this: 3x3 128 at 28x28 2.10x -> 1.05x, 512 at 7x7 1.67x -> 1.04x,
    128 at 56->28 stride 2 2.49x -> 1.19x, 1x1 512->128 at 28x28 1.94x -> 0.95x, 2048->512
    at 7x7 1.59x -> 0.97x; MobileNetV2's 7x7 units 1.85x -> 1.08x (none slower)."""
    vt = vector_target(target)
    if vt.lanes != 16 or vt.registers < 32:
        return None
    c, _, w = p.shape_of(convs[0])[-3:]
    vecs = channel_vectors(c, CHANNELS_VECTORS // len(convs), vt.lanes)
    one_tap = all(conv_taps(p, cv) == 1 for cv in convs)
    if vecs < 1 or (one_tap and w > CHANNELS_MAX_WIDTH):
        return None
    for cv in convs:
        st = p.stage(cv)
        if st.op != "conv2d" or p.shape_of(cv) != p.shape_of(convs[0]) or conv_weight(p, cv) is None or x_stride(p, cv) > 2:
            return None
        if math.prod(d.extent for d in st.rdom) < (STRIDED_MIN_REDUCTION if x_stride(p, cv) > 1 else CHANNELS_MIN_REDUCTION):
            return None
        if c % vt.lanes and channel_reads(p, cv) is None:
            return None
    return vecs, min(CHANNELS_X, w)


def wide_channels_tile(p: Pipeline, convs: tuple[str, ...], target: str | VectorTarget | None = None) -> tuple[int, int] | None:
    """conv_channels_block's tile for one stride-1 conv of more than one tap over rows of at
    least CHANNELS_WIDE_X positions whose channels hold 2 vectors a block: (2, CHANNELS_WIDE_X);
    else None (the block channels_block_fits gives)."""
    vt = vector_target(target)
    (cv, *more) = convs
    c, _, w = p.shape_of(cv)[-3:]
    if more or conv_taps(p, cv) == 1 or x_stride(p, cv) != 1 or w < CHANNELS_WIDE_X or channel_vectors(c, 2, vt.lanes) != 2:
        return None
    return 2, CHANNELS_WIDE_X


def channel_vectors(c: int, most: int, lanes: int) -> int:
    """Channel vectors of the channels block for `c` output channels: the most, up to `most`,
    that divide the whole vectors ceil(c / lanes), so that every block is full but the last
    vector's lanes (1000 classes: 63 vectors, 21 blocks of 3; 144 channels: 3 x 3). 0 (it
    does not apply) below 2 vectors (a prime count of vectors above `most`: 5, 7; unmeasured)
    or where the last vector's padding exceeds a quarter of the channels (24 = 16 + 8: a 1x1
    64 -> 24 at 28x28 ran 0.77x ORT before, 0.86x padded; 40 = 3 x 16 - 8 ran 1.17x -> 0.84x).
    Sapphire Rapids, 1 thread, CPU time, conv + ReLU against ONNX Runtime, conv_block ->
    this: 1x1 512 -> 1000 at 13x13 1.94x -> 1.03x, 576 -> 96 at 14x14 1.82x -> 1.18x, 960 ->
    160 at 7x7 2.66x -> 0.89x, 192 -> 32 at 28x28 1.60x -> 1.16x, 3x3 40 at 28x28 1.85x -> 0.94x."""
    nv = ceil_div(c, lanes)
    v = max(d for d in range(1, min(most, nv) + 1) if nv % d == 0)
    return v if v >= 2 and 4 * (nv * lanes - c) <= c else 0


def channel_reads(p: Pipeline, conv: str) -> tuple[tuple[str, int], ...] | None:
    """(weight, dim) of each input a conv reads along its output channel c, where every read
    that depends on c indexes a weight by c itself (its weight, a bias): packed by the lanes
    along that dim, these read zeros past the channels, so the conv can compute a last
    partial vector whole. None where another read depends on c."""
    st = p.stage(conv)
    c = st.dims[1].name
    weights = {i.name for i in p.inputs if i.weight}
    found: dict[str, int] = {}
    for ex in st.exprs():
        for a in E.accesses(ex):
            uses = [k for k, ix in enumerate(a.index) if c in E.variables(ix)]
            if not uses:
                continue
            k = uses[0]
            if a.source not in weights or len(uses) > 1 or getattr(a.index[k], "name", None) != c or found.get(a.source, k) != k:
                return None
            found[a.source] = k
    return tuple(found.items())


def conv_channels_block(
    s: Schedule, p: Pipeline, conv: str, out: str, target: str | VectorTarget | None = None, also: tuple[str, ...] = ()
) -> str:
    """`out[n, c, y, x]` reads `conv` (and `also`) pointwise; each conv sums over rc, ry, rx
    reading its weight as `W[c, rc, ry, rx]`. Output channels are the vector dimension, as
    ONNX Runtime's NCHWc kernels: the weight is packed in blocks of the lanes along c
    (`pack_input`: each step of the reduction loads whole vectors of consecutive channels'
    weights, contiguous from one step to the next), each conv is computed per tile of `out`
    (channel vectors x CHANNELS_X positions of one row) in a buffer laid out channels
    innermost and held in registers (`reorder_storage`, `store_in(register)`), the
    reduction outside the block: per step, one weight vector per channel vector and one
    broadcast input per x position feed vectors x positions FMAs. `out` stores the tile
    with channel vectors (a strided store, once per output). Channel blocks are outermost
    and parallel: a block's packed weights are reused over the whole plane.

    Where a row is one vector or less (7x7, 13x13, 14x14 on AVX-512) this is what
    conv_block cannot do: its x vectors leave lanes unused, or a block over rows loads a
    vector per row. Sapphire Rapids, 1 thread, CPU time, best of 3 against ONNX Runtime
    (scripts/conv_ab.py --clock cpu, conv_block before -> this): ResNet-50's 1x1 2048->512 at
    7x7 2.35x -> 0.93x, 3x3 512 at 7x7 2.31x -> 0.97x, 3x3 256 at 14x14 1.87x -> 1.04x,
    MobileNetV2's 1x1 160->960 at 7x7 2.76x -> 1.15x (docs/bench/channels-block-*.json). The
    channels-innermost layout alone (weights unpacked) ran 3.2x, output channels as vectors
    over the NCHW weights 25x. Returns the parallel channel-block loop of `out`."""
    vt = vector_target(target)
    convs = (conv, *also)
    fits = channels_block_fits(p, convs, vt)
    if fits is None:
        raise ValueError(f"{conv}: conv_channels_block does not apply (target, plane, stride, weights or channels)")
    vecs, xb = wide_channels_tile(p, convs, vt) or fits
    lanes = vt.lanes
    on, oc, oy, ox = (_dim(p, out, k) for k in range(4))
    co, ci, xo = f"{oc}o", f"{oc}i", f"{ox}o"
    # Channels that are not whole vectors (1000 classes): the last block of `out` is guarded
    # (its stores only: the convs compute whole vectors, their weights and biases packed
    # with zeros past the channels, so each conv's block is the same code every time).
    tail = "guard_with_if" if p.shape_of(out)[-3] % lanes else None
    o = S(s, out).split(oc, co, ci, vecs * lanes, tail=tail).split(ox, xo, ox, xb)
    o.reorder(ci, ox, xo, oy, co, on).vectorize(ci, lanes).unroll(ci).unroll(ox).parallel(co)
    for cv in convs:
        cn, cc, cy, cx = (_dim(p, cv, k) for k in range(4))
        rvars = [d.name for d in p.stage(cv).rdom]
        weight = conv_weight(p, cv)
        assert weight is not None  # channels_block_fits checked it
        reads = channel_reads(p, cv) if tail else None
        pure = S(s, cv).compute_at(out, xo).reorder_storage(cc, cx, cy, cn).store_in("register")
        for name, dim in reads or ((weight, 0),):
            pure.pack_input(name, dim, lanes)
        pure.vectorize(cc, lanes).unroll(cc, vecs).unroll(cx, xb)
        u = S(s, cv).update().vectorize(cc, lanes).unroll(cc, vecs).unroll(cx, xb)
        u.reorder(f"{cc}_v", f"{cc}_u", f"{cx}_u", *reversed(rvars), cx, cc, cy, cn)
    return co


INNERMOST_WINDOW_TAPS = 49  # the largest pooling window channels_innermost unrolls (7x7)


def channels_innermost(s: Schedule, p: Pipeline, n: str, target: str | VectorTarget | None = None) -> None:
    """Stage `n[n, c, y, x]` (a padding, a concat, a pooling window) rebuilt with its buffer
    laid out channels innermost (`reorder_storage`), channels the innermost loop and the
    vector (lanes dividing the channels; a pooling's window loops outside the vector,
    unrolled), where it stays (its compute_at), else at root parallel along rows: for a
    stage whose sources are channels innermost (a channels block's tiles) and whose readers
    take any layout (a channels block's broadcasts), so that it reads and writes whole
    vectors where NCHW would gather. ValueError where the channels hold no vector of 8
    lanes or more, or a reduction is not a small window."""
    vt = vector_target(target)
    st = p.stage(n)
    if len(st.dims) != 4 or (st.is_reduction and math.prod(d.extent for d in st.rdom) > INNERMOST_WINDOW_TAPS):
        raise ValueError(f"{n}: channels_innermost takes a 4-d pointwise stage or small window")
    lanes = dividing(vt.lanes, st.shape[1])
    if lanes < 8:
        raise ValueError(f"{n}: {st.shape[1]} channels hold no vector")
    at = [d for d in s.of(n).pure if d.kind is Kind.COMPUTE_AT]
    s.stages[n] = StageSchedule(tuple(at))
    cn, cc, cy, cx = (_dim(p, n, k) for k in range(4))
    o = S(s, n).reorder_storage(cc, cx, cy, cn).reorder(cc, cx, cy, cn).vectorize(cc, lanes)
    if not at:
        o.parallel(cy)
    if st.is_reduction:
        rvars = [d.name for d in st.rdom]
        u = S(s, n).update().split(cc, cc, f"{cc}_v", lanes).reorder(f"{cc}_v", *reversed(rvars), cc, cx, cy, cn)
        u.vectorize(f"{cc}_v")
        for r in rvars:
            u.unroll(r)
        if not at:
            u.parallel(cy)


def x_stride(p: Pipeline, conv: str) -> int:
    """The stride along x of a conv's reads of its input (2 for a strided conv; 1 if no read
    is affine in the output's x)."""
    x = _dim(p, conv, -1)
    strides = [1]
    for ex in p.stage(conv).exprs():
        for a in E.accesses(ex):
            form = E.affine(a.index[-1]) if a.index else None
            if form is not None and form[0].get(x):
                strides.append(abs(form[0][x]))
    return max(strides)


# The narrowest target (float32 lanes) whose convs conv_block blocks over rows: AVX-512, where
# a row of at most half a vector (7x7: 8 of 16 lanes) leaves half of every register unused and
# 32 registers hold a block over a whole plane. Measured there only (Zen 4); on AVX2 (8 lanes,
# 16 registers) the rows block would fire at 2x2-4x4 planes, unmeasured.
ROWS_MIN_LANES = 16


def rows_of_plane(c: int, h: int, target: str | VectorTarget | None = None, full: bool = False) -> tuple[int, int]:
    """(channels, rows) of conv_block's register block where a row is one vector of at most
    half the target's lanes (AVX-512 at 7x7: 8-lane vectors): rows = the largest divisor of
    h up to 8 (the whole 7x7 plane), channels as many as fit MAX_ACCUMULATORS and the
    registers with a vector per row and a broadcast (3 x 7 on AVX-512), at most
    MAX_BLOCK_CHANNELS. Each weight broadcast then feeds a whole plane, not one row: 1
    thread, Zen 4, CPU time against ONNX Runtime, ResNet-50's 7x7 convs: 1x1 2048->512 4.6x
    -> 1.08x (16 channels x one 7-lane row before), 3x3 512->512 2.6x -> 0.96x; 4 x 7 within
    5%, 2 x 7 15-25% slower. Not on 14x14 (one 16-lane vector a row): 2 x 7 there ran
    1.2-1.5x slower than 8 x 1. Rows 1 (a height with no divisor from 2 to 8): no block
    over rows; conv_block then keeps conv_blocking's channels.

    The accumulators are bounded by MAX_ACCUMULATORS (24: a packed matmul's block, 5 x 5 zmm
    measured slower than 6 x 4), not by VectorTarget.accumulators (16 on AVX-512, where more
    16-lane conv accumulators measured no faster): the measured best 3 x 7 block above has
    21, and 2 x 7 (14, within 16) was the 15-25% slower one; 21 + 7 row vectors + a
    broadcast fit the 32 registers."""
    vt = vector_target(target)
    if full:
        return full_rows_block(c, h, vt)
    rb = max(d for d in range(1, min(h, 8) + 1) if h % d == 0)
    return max(1, min(c, MAX_BLOCK_CHANNELS, MAX_ACCUMULATORS // rb, (vt.registers - rb - 2) // rb)), rb


def full_rows_block(c: int, h: int, target: str | VectorTarget | None = None) -> tuple[int, int]:
    """(channels, rows) of conv_block's block over rows where a row is one vector of more than
    half the lanes (AVX-512 at 13x13 and 14x14) on a core with full-width FMAs (not split_wide):
    a channels x 1 block (8 x 1) loads 9 operands for 8 FMAs, and at two 512-bit FMAs a cycle
    the loads bound it; ch x rows loads ch + rows for ch x rows FMAs. Chosen for FMAs per load
    times the share of rows computed once (the last block of rows shifts inwards where rows
    don't divide h), within MAX_ACCUMULATORS and the registers with a vector per row and a
    broadcast. Rows 1: no such block. Zen 5 (full-width AVX-512), 1 thread, CPU time against
    ONNX Runtime, best of 3 (scripts/conv_ab.py, old = 8 x 1): SqueezeNet's 1x1 512->1000 at
    13x13 1.91x -> 1.58x (6 x 4), 3x3 48->192 at 13x13 2.03x -> 1.60x, MobileNetV2's 1x1
    96->576 at 14x14 1.56x -> 1.41x, 64->384 1.58x -> 1.42x. Measured on Zen 5 only: Intel
    AVX-512 targets (Skylake-X, Sapphire Rapids) take the same blocks unmeasured."""
    vt = vector_target(target)
    best: tuple[float, int, int] = (0.0, 1, 1)
    for rb in range(2, min(h, 8) + 1):
        for ch in range(1, min(c, MAX_BLOCK_CHANNELS) + 1):
            if ch * rb > MAX_ACCUMULATORS or ch * rb + rb + 2 > vt.registers:
                break
            score = ch * rb / (ch + rb) * h / (ceil_div(h, rb) * rb) * c / (ceil_div(c, ch) * ch)
            best = max(best, (score, ch, rb))
    return (best[1], best[2]) if best[0] > MAX_BLOCK_CHANNELS / (MAX_BLOCK_CHANNELS + 1) else (MAX_BLOCK_CHANNELS, 1)


def pad_lanes(target: str | VectorTarget | None = None) -> int:
    """Vector width of a constant padding computed in its own buffer for a depthwise conv or
    a pool: a 128-bit vector (4 float lanes). Its clamped read makes the two edge vectors of
    every row gathers assembled lane by lane, so their cost grows with the lanes while the
    interior is a plain copy; its consumers do too little work per element to hide that.
    Depthwise 128 x 56^2 on Zen 4, the padding per channel, 16 / 8 / 4 lanes: 0.25 / 0.21 /
    0.21 ms best of rounds (AVX-512); 8 / 4 lanes within 3% on AVX2."""
    return min(vector_target(target).lanes, 4)


def depthwise_lanes(w: int, target: str | VectorTarget | None = None) -> int:
    """Vector width of a depthwise conv's row of `w` outputs computed in a tile buffer (the
    row rounds up to whole vectors): the target's lanes or, for vectors wider than 256 bits,
    half of them, whichever rounds up less (ties: the wider). The conv is load-bound (a tap
    is one load and one FMA), so lanes wasted past the row are loads wasted, and a core may
    split 512-bit loads in two (Zen 4): 8-lane rows at W=56 ran 1.3x faster than 16-lane ones
    rounded up to 64 there. 256-bit vectors stay whole (AVX2 at W=28: 4 x 8 lanes 1.28x ORT,
    7 x 4 lanes 1.64x, best of rounds). A row shorter than the lanes: one vector."""
    vt = vector_target(target)
    short = 1 << max(0, (w - 1).bit_length())
    cands = [min(vt.lanes, short)] + ([min(vt.lanes // 2, short)] if vt.lanes > 8 else [])
    return min(cands, key=lambda v: (ceil_div(w, v) * v - w, -v))


def depthwise_block(s: Schedule, p: Pipeline, dw: str, out: str, rows: int = 4, target: str | VectorTarget | None = None) -> str:
    """`out[n, c, y, x]` reads `dw[n, c, y, x]` pointwise; `dw` is a depthwise conv (one input
    channel per output channel, a small ry x rx window). `out` is tiled into one channel x
    a block of rows (the first of `rows`..2*`rows` that divides the height, else `rows`) x the
    full width, parallel over channels; `dw` is computed per tile in a small
    buffer, each row rounded up to whole vectors of depthwise_lanes (no scalar tail: the
    buffer is the tile's own), with the taps unrolled inside each vector (its accumulator
    stays in a register) and the tile's rows and vectors unrolled around them, so the loads of
    an input row shared by consecutive output rows are one load (4 rows: (4 + 2) x 3 loads
    for 36 FMAs a vector instead of 36; 2 rows measured slower). Measured on MobileNetV2 depthwise shapes (1 thread,
    AVX-512, best of rounds against ONNX Runtime): 128 x 56^2 1.44x -> 0.91x, 384 x 14^2
    3.05x -> 1.83x, 96 x 112^2 stride 2 2.12x -> 1.02x, against the same conv per strip of
    all channels with guarded (scalar) tails. ValueError where rounding the row up would read
    past an input. Returns the channel loop of `out` (producers: per channel plane)."""
    vt = vector_target(target)
    c, h, w = p.shape_of(out)[-3:]
    oc, oy, ox = (_dim(p, out, k) for k in (-3, -2, -1))
    dx, dy = _dim(p, dw, -1), _dim(p, dw, -2)
    vw = depthwise_lanes(w, vt)
    nvec = ceil_div(w, vw)
    if nvec * vw > w and widening_overreads(p, dw, dx, nvec * vw - w):
        raise ValueError(f"{dw}: rounding its rows up to {nvec * vw} would read past an input")
    # Rows that divide the height where one of rows..2*rows does (7 at 7x7 and 14x14: no row
    # computed twice by a shifted last tile, half the tiles; 384 x 14^2 1.86x -> 1.59x ORT).
    rb = next((d for d in range(rows, 2 * rows + 1) if h % d == 0), fit(rows, h))
    yo = f"{oy}o"
    o = S(s, out).split(oy, yo, oy, rb)
    if rounds_tile(p, out, nvec * vw - w):  # the tile's rows rounded up with the conv's (see rounds_tile)
        o.split(ox, f"{ox}o", ox, nvec * vw, tail="round_up").reorder(ox, oy, f"{ox}o", yo, oc).vectorize(ox, vw)
    else:
        o.reorder(ox, oy, yo, oc).vectorize(ox, fit(vw, w))
    o.parallel(oc)
    S(s, dw).compute_at(out, yo).split(dx, dx, f"{dx}_v", vw, tail="round_up").vectorize(f"{dx}_v")
    rvars = [d.name for d in p.stage(dw).rdom]
    # The tile's rows split off by their count: unrolled, they are rb copies, where the whole
    # plane's rows would count as h against the unroll limit (MobileNetV2's 32 x 112^2: 112 x 9
    # taps x 7 vectors x 16 lanes is over it, so that conv had fallen back to strips).
    u = S(s, dw).update().split(dx, dx, f"{dx}_v", vw).split(dx, dx, f"{dx}_u", nvec).split(dy, dy, f"{dy}_t", rb)
    # Per vector of the row, the tile's rows one after another (an input row's loads are used
    # by the next rows while still in registers; rows outside the vectors measured 1.2-1.3x
    # slower on AVX2, 16 registers, at W=56 and W=28).
    u.reorder(f"{dx}_v", *reversed(rvars), f"{dy}_t", f"{dx}_u", dx, dy).vectorize(f"{dx}_v")
    for r in reversed(rvars):
        u.unroll(r)
    u.unroll(f"{dy}_t").unroll(f"{dx}_u")
    return oc


def _weights_first(p: Pipeline, conv: str, cb: int) -> bool:
    """Do a conv's weights (channels x taps) outweigh its output plane, with more than one
    block of `cb` channels? Then channel blocks go outermost (parallel), each block's
    weights reused across every row."""
    st = p.stage(conv)
    c, h, w = st.shape[-3:]
    return c * conv_taps(p, conv) > h * w and c // cb > 1


def conv_root_block(s: Schedule, p: Pipeline, conv: str, target: str | VectorTarget | None = None) -> str:
    """A conv `conv[n, c, y, x]` (+)= ... computed at root in its own buffer (no pointwise
    consumer to tile: MobileNetV2's projections feed the next block's conv, or an output):
    its update register-blocked in place (root_conv_blocking: channels x x vectors with the
    reduction loops outside the block), so LLVM keeps the block in registers for the whole
    reduction instead of one accumulator chain per vector. The splits divide the extents:
    an update can neither round up past its buffer nor shift inwards (points would be
    updated twice), and a guarded vector tail runs scalar (measured 2-2.5x slower than a
    full-row vector of 7 or 14 lanes at MobileNetV2's 7x7 / 14x14 projections on AVX2).
    Channels outermost and parallel where the weights outweigh the output plane (as
    conv_block), else rows. Returns the parallel loop of the update."""
    vt = vector_target(target)
    st = p.stage(conv)
    c, _, w = st.shape[-3:]
    cc, cy, cx = (_dim(p, conv, k) for k in (-3, -2, -1))
    cb, vw, xv = root_conv_blocking(c, w, vt)
    rvars = [d.name for d in st.rdom]
    S(s, conv).compute_root().vectorize(cx, vw)
    u = S(s, conv).update().split(cc, f"{cc}o", f"{cc}i", cb).split(cx, cx, f"{cx}_v", vw).split(cx, cx, f"{cx}_u", xv)
    outer = [cy, f"{cc}o"] if _weights_first(p, conv, cb) else [f"{cc}o", cy]
    u.reorder(f"{cx}_v", f"{cx}_u", f"{cc}i", *reversed(rvars), cx, *outer).vectorize(f"{cx}_v").unroll(f"{cx}_u").unroll(f"{cc}i")
    S(s, conv).parallel(cy)
    u.parallel(outer[-1])
    return outer[-1]


def conv_root_channels(s: Schedule, p: Pipeline, conv: str, target: str | VectorTarget | None = None, kunroll: int = 8) -> str:
    """A conv computed at root in its own buffer (no pointwise consumer: MobileNetV2's
    projections feed the next block's 1x1 conv), with output channels as the vectors as in
    conv_channels_block, the buffer laid out channels innermost (`reorder_storage`) so that
    the accumulators are whole vectors in memory: for readers that take any layout (a
    channels block's broadcasts of its input, or its tile's channel vectors; the heuristic
    checks). The update blocks channel vectors x positions of a row with `kunroll` steps of
    the reduction unrolled outside the block: LLVM keeps an in-place accumulator in memory,
    and within the unrolled steps it forwards each one through a register. Channels in
    whole vectors and positions that divide the row (an update can neither round up past
    its buffer nor shift inwards). ValueError where the channels block does not fit, the
    conv is an output (its layout is the caller's), or the channels are not whole vectors.
    Sapphire Rapids, 1 thread, CPU time, a MobileNetV2 unit (depthwise, the 960 -> 320
    projection, the 320 -> 960 1x1 + ReLU) against ORT: conv_root_rows 1.07-1.39 ms -> this
    0.83-1.04 ms (ORT 0.80-0.83), kunroll 8 (4 and 16 slower). Returns the parallel loop."""
    vt = vector_target(target)
    st = p.stage(conv)
    fits = channels_block_fits(p, (conv,), vt)
    c, _, w = st.shape[-3:]
    if fits is None or conv in p.outputs or c % vt.lanes:
        raise ValueError(f"{conv}: no channels block in place (target, shape, an output, or channels not whole vectors)")
    vecs, lanes = fits[0], vt.lanes
    xb = max(k for k in range(1, CHANNELS_X + 1) if w % k == 0)
    cn, cc, cy, cx = (_dim(p, conv, k) for k in range(4))
    weight = conv_weight(p, conv)
    assert weight is not None  # channels_block_fits checked it
    rvars = [d.name for d in st.rdom]
    rc, co, ci, xo = rvars[0], f"{cc}o", f"{cc}i", f"{cx}o"
    S(s, conv).compute_root().reorder_storage(cc, cx, cy, cn).pack_input(weight, 0, lanes).vectorize(cc, lanes).parallel(cy)
    u = S(s, conv).update().split(cc, co, ci, vecs * lanes).split(cx, xo, cx, xb)
    u.split(rc, rc, f"{rc}_u", dividing(kunroll, st.rdom[0].extent)).vectorize(ci, lanes)
    u.reorder(f"{ci}_v", ci, cx, f"{rc}_u", *reversed(rvars), xo, cy, co, cn)
    u.unroll(f"{rc}_u").unroll(ci).unroll(cx).parallel(co)
    return co


def conv_root_rows(s: Schedule, p: Pipeline, conv: str, target: str | VectorTarget | None = None, kunroll: int = 8) -> str:
    """A conv computed at root in its own buffer, as conv_root_block, where the buffer is not
    an output and its rows may round up to whole vectors (no input read past: a padding or a
    stage computes the wider region): full vectors of the target's lanes (a row shorter than
    them: one vector), and a register block of channels x rows x the row's vectors
    (rows_blocking), the rows and channels dividing their extents. The block spans rows where
    a row holds few vectors (14x14, 7x7: one vector a row, so one row per block loads an input
    vector per FMA or two). ValueError where rounding up would read past an input.
    MobileNetV2's projections, 1 thread, AVX-512, best of rounds against ONNX Runtime: 96->24
    at 56^2 1.48x -> 1.25x, 384->96 at 14^2 2.99x -> 1.99x with full vectors alone (before
    the blocks of rows and the unrolled reduction). Returns the parallel loop."""
    vt = vector_target(target)
    st = p.stage(conv)
    c, h, w = st.shape[-3:]
    cc, cy, cx = (_dim(p, conv, k) for k in (-3, -2, -1))
    vw = min(vt.lanes, 1 << max(0, (w - 1).bit_length()))
    nvec = ceil_div(w, vw)
    if conv in p.outputs or (nvec * vw > w and widening_overreads(p, conv, cx, nvec * vw - w)):
        raise ValueError(f"{conv}: an output, or its rows can't round up to whole vectors")
    cb, rb, xv = rows_blocking(c, h, nvec, vt)
    rvars = [d.name for d in st.rdom]
    S(s, conv).compute_root().split(cx, cx, f"{cx}_v", vw, tail="round_up").vectorize(f"{cx}_v")
    u = S(s, conv).update().split(cc, f"{cc}o", f"{cc}i", cb).split(cy, f"{cy}o", f"{cy}i", rb)
    u.split(cx, cx, f"{cx}_v", vw).split(cx, cx, f"{cx}_u", xv)
    # LLVM keeps an in-place accumulator in memory (the buffer may alias the inputs, for all
    # it knows): a load and a store per FMA. With `kunroll` channels of the reduction unrolled
    # innermost, each accumulator's consecutive FMAs forward through a register (one load and
    # store per kunroll FMAs): 384->96 at 14^2 2.2x faster (AVX-512, profiled); 4 and 16 slower.
    rc = rvars[0]
    ku = dividing(kunroll, st.rdom[0].extent)
    u.split(rc, rc, f"{rc}_u", ku)
    outer = [f"{cy}o", f"{cc}o"] if _weights_first(p, conv, cb) else [f"{cc}o", f"{cy}o"]
    u.reorder(f"{cx}_v", f"{rc}_u", f"{cx}_u", f"{cy}i", f"{cc}i", *reversed(rvars), cx, *outer).vectorize(f"{cx}_v")
    u.unroll(f"{rc}_u").unroll(f"{cx}_u").unroll(f"{cy}i").unroll(f"{cc}i")
    S(s, conv).parallel(cy)
    u.parallel(outer[-1])
    return outer[-1]


def rows_blocking(c: int, h: int, nvec: int, target: str | VectorTarget | None = None) -> tuple[int, int, int]:
    """(channels, rows, x vectors) of conv_root_rows' register block: channels x rows x
    vectors of a row, each dividing its extent (an update can't shift inwards, and more
    channels than the weights hold would read past them; a block of several rows takes
    whole rows). It fits the registers with its loads (VectorTarget.block_fits: a broadcast
    per channel, a vector per row and vector), chosen for FMAs per load (ch x v / (ch + v),
    v = rows x vectors)."""
    vt = vector_target(target)
    best: tuple[float, int, int, int] = (0.0, 1, 1, 1)
    for rb in (d for d in range(1, h + 1) if h % d == 0):
        for xv in (d for d in range(1, nvec + 1) if nvec % d == 0 and (rb == 1 or d == nvec)):
            v = rb * xv
            for ch in (d for d in range(1, min(c, vt.accumulators) + 1) if c % d == 0):
                if vt.block_fits(ch * v, v):
                    best = max(best, (ch * v / (ch + v), ch, rb, xv))
    return best[1], best[2], best[3]


def root_conv_blocking(c: int, w: int, target: str | VectorTarget | None = None) -> tuple[int, int, int]:
    """(channels, vector width, vectors along x) of conv_root_block's register block: every
    factor divides its extent. Vector widths: the lanes where they divide W, else a divisor
    of W up to twice the lanes (a whole short row: 7 = one ymm, 14 = two); a vector of vw
    lanes takes ceil(vw / lanes) registers. Chosen for useful lanes per load (ch broadcasts
    and the x vectors' registers per tap) with ch x registers at most the accumulators."""
    vt = vector_target(target)
    best: tuple[float, int, int, int] = (0.0, 1, 1, 1)
    for vw in range(1, min(w, 2 * vt.lanes) + 1):
        if w % vw:
            continue
        regs = ceil_div(vw, vt.lanes)
        for xv in range(1, w // vw + 1):
            if (w // vw) % xv or xv * regs > vt.accumulators:
                continue
            for ch in range(1, min(c, vt.accumulators // (xv * regs)) + 1):
                if c % ch == 0:
                    best = max(best, (ch * xv * vw / (ch + xv * regs), ch, vw, xv))
    return best[1], best[2], best[3]


def dense_output(
    s: Schedule, p: Pipeline, f: str, panel: int = 8, vecs: int = 8, kunroll: int = 8, target: str | VectorTarget | None = None
) -> str:
    """A matmul `f[.., i, j] (+)= a[.., i, k] * b[.., k, j]` computed at root in its own
    buffer (an output, or a matmul without a pointwise consumer to tile): it can't be
    computed at a tile of anything, so its accumulators live in the buffer, and LLVM
    keeps them in memory (the buffer may alias the inputs): a load and a store per
    FMA. Measured best: parallel over panels of rows; per row, k outside a block of
    vecs x 16 columns, k unrolled so consecutive updates forward through registers.
    Producers computed per panel go at the returned loop ("i") of the update."""
    m, n = p.shape_of(f)[-2:]
    i, j, k = _dim(p, f, -2), _dim(p, f, -1), p.stage(f).rdom[0].name
    vw = dividing(vector_target(target).lanes, n)
    pb = dividing(panel, m)
    S(s, f).vectorize(j, vw).parallel(i, pb)
    # The column block: any divisor of the vectors (1000 columns = 125 x 8: 5 accumulators, where
    # the power of two that divides was 1; ResNet-50's GAP + Gemm head 0.85 -> 0.64-0.76 ms, ORT
    # 0.54, Sapphire Rapids, 1 thread).
    ju = max(d for d in range(1, min(vecs, n // vw) + 1) if (n // vw) % d == 0)
    u = S(s, f).update().split(i, i, f"{i}_p", pb).split(j, j, f"{j}_v", vw).split(j, j, f"{j}_u", ju)
    u.split(k, k, f"{k}_u", dividing(kunroll, p.stage(f).rdom[0].extent))
    u.reorder(f"{j}_v", f"{j}_u", f"{k}_u", k, j, f"{i}_p", i)  # i, i_p, j, k, k_u, j_u, j_v
    u.vectorize(f"{j}_v").unroll(f"{j}_u").unroll(f"{k}_u").parallel(i)
    return i
