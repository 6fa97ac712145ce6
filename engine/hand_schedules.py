"""Hand-written schedules for the built-in pipelines (engine/zoo.py).

`hand_schedule(p)` dispatches on `p.name`. Every schedule reads its extents from the
pipeline, so the same function serves the 'small' and the 'full' size.

Recurring ideas (timed on a 2-core AVX-512 machine; see each function for specifics):
- Register blocking: a reduction (matmul, conv) is computed at a small constant-size
  tile of a pointwise consumer, with the reduction loops outside a fully unrolled block
  of vector accumulators; LLVM then keeps the tile in registers. The tile needs a
  compile-time-constant size, so consumers split their loops by constant factors
  (ShiftInwards tails keep inner tiles full size).
- An output that is itself a reduction can't be computed at anything, so it
  accumulates in the output buffer: a load and a store per FMA (see _dense_output).
- Stencils run per strip of rows of their consumer, parallel over strips.
- Row reductions (softmax, layernorm) can't vectorize their reduction loop; a block of
  rows is vectorized instead, one lane per row.
- Large root intermediates are avoided where a per-row or per-panel buffer does: each
  run mallocs and frees them, and big blocks come back as fresh pages whose page faults
  can cost as much as the compute.
- Splits of an output's update definition use factors that divide the extent: such a
  split can neither round up (it would write past the buffer) nor shift inwards (it
  would update some points twice).
"""

from __future__ import annotations

from collections.abc import Callable

from . import expr as E
from . import zoo
from .ir import Pipeline
from .schedule import S, Schedule

VEC = 16  # float32 lanes of an AVX-512 vector


def fit(factor: int, extent: int) -> int:
    """Largest power of two <= min(factor, extent) (at least 1)."""
    n = max(1, min(factor, extent))
    return 1 << (n.bit_length() - 1)


def _dividing(factor: int, extent: int) -> int:
    """Largest power of two <= min(factor, extent) that divides extent."""
    f = fit(factor, extent)
    while extent % f:
        f //= 2
    return f


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _reads_input_along(p: Pipeline, stage: str, var: str) -> bool:
    """Does `stage` read a pipeline input with an innermost index that depends on `var`?"""
    return any(a.source in p.input_map and var in E.variables(a.index[-1]) for ex in p.stage(stage).exprs() for a in E.accesses(ex))


def _root_vec(s: Schedule, p: Pipeline, stage: str, par: str) -> None:
    """Compute at root, vectorized along the innermost dim, parallel along `par`."""
    last = p.stage(stage).dims[-1]
    S(s, stage).compute_root().vectorize(last.name, fit(VEC, last.extent)).parallel(par)


def _taps_per_vector(s: Schedule, f: str, vw: int) -> None:
    """Update of a small-window reduction (ry, rx): the taps unrolled inside each output
    vector, so the accumulator stays in a register for the whole window."""
    S(s, f).update().split("x", "x", "x_v", vw).reorder("x_v", "rx", "ry", "x").vectorize("x_v").unroll("rx").unroll("ry")


# --- register-blocked reductions ------------------------------------------------------------
def _matmul_block(
    s: Schedule,
    p: Pipeline,
    prod: str,
    out: str,
    rows: int = 8,
    vecs: int = 2,
    panel: int = 64,
    kblock: int = 128,
    parallel: bool = True,
) -> None:
    """`out[i, j]` reads `prod[i, j]` pointwise; `prod[i, j]` sums over k.

    `out` is tiled into panel x (vecs*16) tiles, parallel over row panels, and `prod` is
    computed per tile (a small stack buffer). Its k loop is split into blocks; per k
    block, each rows x (vecs*16) register block of the tile runs the inner k loop with
    its rows*vecs accumulators in zmm registers. Blocking k keeps the kblock x (vecs*16)
    block of B in L2 while the panel's row blocks reuse it (B's rows are 4 KiB apart,
    so cache-set conflicts limit how much of a B column strip stays cached)."""
    m, n = p.shape_of(out)
    vw = fit(VEC, n)
    cb = vw * fit(vecs, max(1, n // vw))
    rb = fit(rows, m)
    pb = max(rb, fit(panel, m))
    o = S(s, out).split("i", "io", "ii", pb).split("j", "jo", "ji", cb).reorder("ji", "ii", "jo", "io").vectorize("ji", vw)
    if parallel:
        o.parallel("io")
    S(s, prod).compute_at(out, "jo").vectorize("j", vw)
    u = S(s, prod).update().split("k", "ko", "ki", fit(kblock, p.stage(prod).rdom[0].extent))
    u.split("i", "i", "i_u", rb).split("j", "j", "j_v", vw).split("j", "j", "j_u", cb // vw)
    u.reorder("j_v", "j_u", "i_u", "ki", "i", "j", "ko")  # ko, (j, i: blocks of the tile), ki, register block
    u.vectorize("j_v").unroll("j_u").unroll("i_u")


def _conv_block(s: Schedule, p: Pipeline, conv: str, out: str, chans: int = 4) -> None:
    """`out[n, c, y, x]` reads `conv[n, c, y, x]` pointwise; `conv` sums over (rc,) ry, rx.

    `out` is tiled into chans x 1 row x full-width tiles (x split by the full width so
    the tile size is a constant), parallel over rows. `conv` is computed per tile with
    the reduction outside a block of chans x ceil(W/16) vector accumulators. When W is
    not a multiple of 16 the block rounds x up (8 of 64 lanes wasted at W=56), which
    still measured ~25% faster than exact 8-wide blocks (4 x 7 ymm accumulators plus
    operands don't fit in 32 registers; 3 x 7 fit but run slower)."""
    _, c, _, w = p.shape_of(out)
    vw = fit(VEC, w)
    cb = min(chans, c)
    if w % vw and _reads_input_along(p, conv, "x"):
        # Rounding up would read past the end of an input buffer: vectors that divide
        # the width instead, with fewer channels so the block still fits in registers.
        vw = _dividing(VEC // 2, w)
        cb = min(max(1, 24 // _ceil_div(w, vw)), c)
    S(s, out).split("c", "co", "ci", cb).split("x", "xo", "x", w).reorder("x", "ci", "co", "xo", "y").vectorize("x", vw).parallel("y")
    # Initialize the rounded-up lanes too, or they would accumulate onto uninitialized
    # (possibly denormal) memory.
    S(s, conv).compute_at(out, "co").split("x", "x", "x_v", vw, tail="round_up").vectorize("x_v")
    rvars = [d.name for d in p.stage(conv).rdom]
    u = S(s, conv).update().split("x", "x", "x_v", vw).split("x", "x", "x_u", _ceil_div(w, vw))
    u.reorder("x_v", "x_u", "c", *reversed(rvars), "x").vectorize("x_v").unroll("x_u").unroll("c")


def _dense_output(s: Schedule, p: Pipeline, f: str, panel: int = 8, vecs: int = 8, kunroll: int = 8) -> None:
    """A matmul `f[i, j] (+)= a[i, k] * b[k, j]` that is itself an output: it can't be
    computed at a tile of anything, so its accumulators live in the output buffer, and
    LLVM keeps them in memory (the buffer may alias the inputs): a load and a store per
    FMA. Measured best: parallel over panels of rows; per row, k outside a block of
    vecs x 16 columns, k unrolled so consecutive updates forward through registers.
    Producers computed per panel go at loop "i" of the update."""
    m, n = p.shape_of(f)
    vw = _dividing(VEC, n)
    pb = _dividing(panel, m)
    S(s, f).vectorize("j", vw).parallel("i", pb)
    u = S(s, f).update().split("i", "i", "i_p", pb).split("j", "j", "j_v", vw).split("j", "j", "j_u", _dividing(vecs, n // vw))
    u.split("k", "k", "k_u", _dividing(kunroll, p.stage(f).rdom[0].extent))
    u.reorder("j_v", "j_u", "k_u", "k", "j", "i_p", "i")  # i, i_p, j, k, k_u, j_u, j_v
    u.vectorize("j_v").unroll("j_u").unroll("k_u").parallel("i")


def _row_reduce_at(s: Schedule, p: Pipeline, f: str, consumer: str, loop: str, rows: int) -> None:
    """A row reduction `f[i]` over r, computed per block of `rows` rows at `loop` of
    `consumer`. The block's rows are the vector lanes (one strided load per row, but
    independent accumulators); 8 rows measured best, more rows 4 KiB apart thrash L1."""
    S(s, f).compute_at(consumer, loop).vectorize("i", rows)
    S(s, f).update().split("i", "i", "i_v", rows).reorder("i_v", "r", "i").vectorize("i_v")


# --- image pipelines ------------------------------------------------------------------------
def blur(p: Pipeline) -> Schedule:
    """Strips of 32 rows in parallel with blur_x inlined: 9 loads per output, all from
    cache, beat storing blur_x per strip; this runs at memory bandwidth."""
    s = Schedule(name="hand")
    h, w = p.shape_of("blur_y")
    S(s, "blur_y").split("y", "yo", "y", fit(32, h)).vectorize("x", fit(VEC, w)).parallel("yo")
    S(s, "blur_x").compute_inline()
    return s


def unsharp(p: Pipeline) -> Schedule:
    """Strips of output rows in parallel (y outside c so a strip covers all channels):
    gray and blur_y per strip, ratio per row (shared by the 3 channels) with blur_x,
    sharpen and the crops inlined."""
    s = Schedule(name="hand")
    _, h, w = p.shape_of("output")
    vw = fit(VEC, w)
    S(s, "output").split("y", "yo", "yi", fit(32, h)).reorder("x", "c", "yi", "yo").vectorize("x", vw).parallel("yo")
    for f in ("gray_c", "input_c", "sharpen", "blur_x"):
        S(s, f).compute_inline()
    S(s, "ratio").compute_at("output", "yi").vectorize("x", vw)
    for f in ("blur_y", "gray"):
        S(s, f).compute_at("output", "yo").vectorize("x", vw)
    return s


def harris(p: Pipeline) -> Schedule:
    """Strips of rows in parallel: gray, Ix, Iy per strip; the products and the 3x3 box
    sums inlined into the response (storing them measured slower)."""
    s = Schedule(name="hand")
    h, w = p.shape_of("harris")
    vw = fit(VEC, w)
    S(s, "harris").split("y", "yo", "y", fit(32, h)).vectorize("x", vw).parallel("yo")
    for f in ("Ixx", "Iyy", "Ixy", "Sxx", "Syy", "Sxy"):
        S(s, f).compute_inline()
    for f in ("Ix", "Iy", "gray"):
        S(s, f).compute_at("harris", "yo").vectorize("x", vw)
    return s


# --- convolutions ---------------------------------------------------------------------------
def conv_relu(p: Pipeline) -> Schedule:
    """conv register-blocked per 4 channels x 1 row of relu; the padded rows a row needs
    (all channels, 3 rows) computed per row: a small cache-resident buffer."""
    s = Schedule(name="hand")
    _conv_block(s, p, "conv", "relu")
    S(s, "conv_pad").compute_at("relu", "xo").vectorize("x", fit(VEC, p.shape_of("conv_pad")[-1]))
    return s


def depthwise_conv(p: Pipeline) -> Schedule:
    """Parallel over channels, the padded channel computed per channel, taps unrolled
    per output vector."""
    s = Schedule(name="hand")
    w = p.shape_of("dwconv")[-1]
    vw = _dividing(VEC, w)
    S(s, "dwconv").vectorize("x", vw).parallel("c")
    _taps_per_vector(s, "dwconv", vw)
    S(s, "dwconv").update().parallel("c")
    S(s, "dwconv_pad").compute_at("dwconv", "c").vectorize("x", fit(VEC, w))
    return s


def maxpool(p: Pipeline) -> Schedule:
    """Parallel over channels, taps unrolled per output vector, padding inlined
    (measured faster than storing it)."""
    s = Schedule(name="hand")
    vw = _dividing(VEC, p.shape_of("pool")[-1])
    S(s, "pool").vectorize("x", vw).parallel("c")
    _taps_per_vector(s, "pool", vw)
    S(s, "pool").update().parallel("c")
    S(s, "pool_pad").compute_inline()
    return s


def resnet_block(p: Pipeline) -> Schedule:
    """Two conv_relu-style blocks: conv1 per tile of a root relu1 (bn1 inlined), conv2 per
    tile of the output (bn2 inlined); each padding computed per row of its consumer."""
    s = Schedule(name="hand")
    S(s, "relu1").compute_root()
    _conv_block(s, p, "conv1", "relu1")
    _conv_block(s, p, "conv2", "output")
    S(s, "bn1").compute_inline()
    S(s, "bn2").compute_inline()
    vw = fit(VEC, p.shape_of("conv1_pad")[-1])
    S(s, "conv1_pad").compute_at("relu1", "xo").vectorize("x", vw)
    S(s, "conv2_pad").compute_at("output", "xo").vectorize("x", vw)
    return s


def mobilenet_block(p: Pipeline) -> Schedule:
    """expand (1x1) register-blocked per tile of a root expand_relu6, padding at root;
    per output row, the depthwise conv of all channels (taps unrolled per vector, relu6
    inlined), then project (1x1) register-blocked per tile of the output."""
    s = Schedule(name="hand")
    S(s, "expand_relu6").compute_root()
    _conv_block(s, p, "expand", "expand_relu6")
    _root_vec(s, p, "dw_pad", "c")
    _conv_block(s, p, "project", "output")
    vw = fit(VEC, p.shape_of("dw")[-1])
    S(s, "dw").compute_at("output", "xo").vectorize("x", vw)
    _taps_per_vector(s, "dw", vw)
    S(s, "dw_relu6").compute_inline()
    return s


# --- linear algebra -------------------------------------------------------------------------
def matmul(p: Pipeline) -> Schedule:
    s = Schedule(name="hand")
    _matmul_block(s, p, "prod", "C")
    return s


def mlp(p: Pipeline) -> Schedule:
    """Each layer mixes columns within a row only, so the network runs per panel of 64
    batch rows: fc3 (the output) is parallel over panels; relu1 and relu2 are computed
    per panel, with fc1 and fc2 register-blocked at their tiles."""
    s = Schedule(name="hand")
    _dense_output(s, p, "fc3", panel=64)
    for relu, fc in (("relu1", "fc1"), ("relu2", "fc2")):
        S(s, relu).compute_at("fc3", "i")
        _matmul_block(s, p, fc, relu, parallel=False)
    return s


def softmax(p: Pipeline) -> Schedule:
    """Per block of 8 rows (parallel): row max, exp (stored, vectorized) and row sum,
    then the division, vectorized along the row."""
    s = Schedule(name="hand")
    m, n = p.shape_of("softmax")
    rb = fit(8, m)
    vw = fit(VEC, n)
    S(s, "softmax").split("i", "io", "i", rb).vectorize("j", vw).parallel("io")
    _row_reduce_at(s, p, "softmax_max", "softmax", "io", rb)
    _row_reduce_at(s, p, "softmax_sum", "softmax", "io", rb)
    S(s, "softmax_exp").compute_at("softmax", "io").vectorize("j", vw)
    return s


def layernorm(p: Pipeline) -> Schedule:
    """Per block of 8 rows (parallel): row mean and variance, then the normalization."""
    s = Schedule(name="hand")
    m, n = p.shape_of("layernorm")
    rb = fit(8, m)
    S(s, "layernorm").split("i", "io", "i", rb).vectorize("j", fit(VEC, n)).parallel("io")
    _row_reduce_at(s, p, "layernorm_mean", "layernorm", "io", rb)
    _row_reduce_at(s, p, "layernorm_var", "layernorm", "io", rb)
    return s


def attention(p: Pipeline) -> Schedule:
    """Per panel of 8 query rows of `out` (parallel): scores register-blocked at tiles of
    `scaled`, row max and sum vectorized across the panel's rows, exp stored per panel,
    the division inlined into out's accumulation."""
    s = Schedule(name="hand")
    m, n = p.shape_of("scaled")
    rb = fit(8, m)
    vw = fit(VEC, n)
    cb = vw * fit(2, max(1, n // vw))
    _dense_output(s, p, "out", panel=rb)
    S(s, "scaled").compute_at("out", "i").split("j", "jo", "ji", cb).split("i", "io", "ii", rb).reorder("ji", "ii", "jo", "io").vectorize(
        "ji", vw
    )
    S(s, "scores").compute_at("scaled", "jo").vectorize("j", vw)
    u = S(s, "scores").update().split("i", "i", "i_u", rb).split("j", "j", "j_v", vw).split("j", "j", "j_u", cb // vw)
    u.reorder("j_v", "j_u", "i_u", "j", "i", "k").vectorize("j_v").unroll("j_u").unroll("i_u")
    _row_reduce_at(s, p, "probs_max", "out", "i", rb)
    _row_reduce_at(s, p, "probs_sum", "out", "i", rb)
    S(s, "probs_exp").compute_at("out", "i").vectorize("j", vw)
    S(s, "probs").compute_inline()
    return s


SCHEDULES: dict[str, Callable[[Pipeline], Schedule]] = {
    "blur": blur,
    "unsharp": unsharp,
    "harris": harris,
    "conv_relu": conv_relu,
    "depthwise_conv": depthwise_conv,
    "maxpool": maxpool,
    "matmul": matmul,
    "mlp": mlp,
    "softmax": softmax,
    "layernorm": layernorm,
    "resnet_block": resnet_block,
    "mobilenet_block": mobilenet_block,
    "attention": attention,
}


def _shape_free(p: Pipeline) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(st.name, tuple(d.name for d in st.dims), tuple(d.name for d in st.rdom)) for st in p.stages]


def hand_schedule(p: Pipeline) -> Schedule:
    """The hand schedule for built-in pipeline `p`, at any of its sizes.

    KeyError for an unknown name, or for a pipeline that has a built-in's name but not
    its stages and loop names (say, an edited JSON copy)."""
    if p.name not in SCHEDULES:
        raise KeyError(f"no hand schedule for pipeline {p.name!r} (have: {', '.join(SCHEDULES)})")
    if _shape_free(p) != _shape_free(zoo.get(p.name, "small")):
        raise KeyError(f"pipeline {p.name!r} does not have the stages of the built-in {p.name!r}")
    return SCHEDULES[p.name](p)
