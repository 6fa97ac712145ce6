"""Hand-written schedules for the built-in pipelines (engine/zoo.py).

`hand_schedule(p)` dispatches on `p.name`. Every schedule reads its extents from the
pipeline, so the same function serves the 'small' and the 'full' size.

The recipes they are built from (register blocking, dense outputs, taps per vector, row
blocks, strips) are in engine/recipes.py, shared with the rule-based heuristic
(engine/heuristic.py); their docstrings say why each works. Further ideas specific to the
hand schedules (timed on a 2-core AVX-512 machine; see each function for specifics):
- Stencils run per strip of rows of their consumer, parallel over strips.
- Large root intermediates are avoided where a per-row or per-panel buffer does: each
  run mallocs and frees them, and big blocks come back as fresh pages whose page faults
  can cost as much as the compute.
"""

from __future__ import annotations

from collections.abc import Callable

from . import zoo
from .ir import Pipeline
from .recipes import (
    VEC,
    VectorTarget,
    conv_block,
    dense_output,
    dividing,
    fit,
    matmul_block,
    matmul_panels,
    root_vec,
    row_reduce_at,
    strips,
    taps_per_vector,
    vector_target,
)
from .schedule import S, Schedule

__all__ = ["SCHEDULES", "VEC", "fit", "hand_schedule"]


# --- image pipelines ------------------------------------------------------------------------
def blur(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Strips of 32 rows in parallel with blur_x inlined: 9 loads per output, all from
    cache, beat storing blur_x per strip; this runs at memory bandwidth."""
    s = Schedule(name="hand")
    strips(s, p, "blur_y", 32, target=vt)
    S(s, "blur_x").compute_inline()
    return s


def unsharp(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Strips of output rows in parallel (y outside c so a strip covers all channels):
    gray and blur_y per strip, ratio per row (shared by the 3 channels) with blur_x,
    sharpen and the crops inlined."""
    s = Schedule(name="hand")
    _, h, w = p.shape_of("output")
    vw = fit(vt.lanes, w)
    S(s, "output").split("y", "yo", "yi", fit(32, h)).reorder("x", "c", "yi", "yo").vectorize("x", vw).parallel("yo")
    for f in ("gray_c", "input_c", "sharpen", "blur_x"):
        S(s, f).compute_inline()
    S(s, "ratio").compute_at("output", "yi").vectorize("x", vw)
    for f in ("blur_y", "gray"):
        S(s, f).compute_at("output", "yo").vectorize("x", vw)
    return s


def harris(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Strips of rows in parallel: gray, Ix, Iy per strip; the products and the 3x3 box
    sums inlined into the response (storing them measured slower)."""
    s = Schedule(name="hand")
    vw = fit(vt.lanes, p.shape_of("harris")[-1])
    strips(s, p, "harris", 32, target=vt)
    for f in ("Ixx", "Iyy", "Ixy", "Sxx", "Syy", "Sxy"):
        S(s, f).compute_inline()
    for f in ("Ix", "Iy", "gray"):
        S(s, f).compute_at("harris", "yo").vectorize("x", vw)
    return s


# --- convolutions ---------------------------------------------------------------------------
def conv_relu(p: Pipeline, vt: VectorTarget) -> Schedule:
    """conv register-blocked per 4 channels x 1 row of relu; the padded rows a row needs
    (all channels, 3 rows) computed per row: a small cache-resident buffer."""
    s = Schedule(name="hand")
    conv_block(s, p, "conv", "relu", target=vt)
    S(s, "conv_pad").compute_at("relu", "xo").vectorize("x", fit(vt.lanes, p.shape_of("conv_pad")[-1]))
    return s


def depthwise_conv(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Parallel over channels, the padded channel computed per channel, taps unrolled
    per output vector."""
    s = Schedule(name="hand")
    w = p.shape_of("dwconv")[-1]
    vw = dividing(vt.lanes, w)
    S(s, "dwconv").vectorize("x", vw).parallel("c")
    taps_per_vector(s, p, "dwconv", vw)
    S(s, "dwconv").update().parallel("c")
    S(s, "dwconv_pad").compute_at("dwconv", "c").vectorize("x", fit(vt.lanes, w))
    return s


def maxpool(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Parallel over channels, taps unrolled per output vector, padding inlined
    (measured faster than storing it)."""
    s = Schedule(name="hand")
    vw = dividing(vt.lanes, p.shape_of("pool")[-1])
    S(s, "pool").vectorize("x", vw).parallel("c")
    taps_per_vector(s, p, "pool", vw)
    S(s, "pool").update().parallel("c")
    S(s, "pool_pad").compute_inline()
    return s


def resnet_block(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Two conv_relu-style blocks: conv1 per tile of a root relu1 (bn1 inlined), conv2 per
    tile of the output (bn2 inlined); each padding computed per row of its consumer."""
    s = Schedule(name="hand")
    S(s, "relu1").compute_root()
    conv_block(s, p, "conv1", "relu1", target=vt)
    conv_block(s, p, "conv2", "output", target=vt)
    S(s, "bn1").compute_inline()
    S(s, "bn2").compute_inline()
    vw = fit(vt.lanes, p.shape_of("conv1_pad")[-1])
    S(s, "conv1_pad").compute_at("relu1", "xo").vectorize("x", vw)
    S(s, "conv2_pad").compute_at("output", "xo").vectorize("x", vw)
    return s


def mobilenet_block(p: Pipeline, vt: VectorTarget) -> Schedule:
    """expand (1x1) register-blocked per tile of a root expand_relu6, padding at root;
    per output row, the depthwise conv of all channels (taps unrolled per vector, relu6
    inlined), then project (1x1) register-blocked per tile of the output."""
    s = Schedule(name="hand")
    S(s, "expand_relu6").compute_root()
    conv_block(s, p, "expand", "expand_relu6", target=vt)
    root_vec(s, p, "dw_pad", "c", target=vt)
    conv_block(s, p, "project", "output", target=vt)
    vw = fit(vt.lanes, p.shape_of("dw")[-1])
    S(s, "dw").compute_at("output", "xo").vectorize("x", vw)
    taps_per_vector(s, p, "dw", vw)
    S(s, "dw_relu6").compute_inline()
    return s


# --- linear algebra -------------------------------------------------------------------------
def matmul(p: Pipeline, vt: VectorTarget) -> Schedule:
    """A GEMM: B packed per column panel, register blocks from the target (matmul_panels)."""
    s = Schedule(name="hand")
    matmul_panels(s, p, "prod", "C", target=vt)
    return s


def mlp(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Each layer mixes columns within a row only, so the network runs per panel of 64
    batch rows: fc3 (the output) is parallel over panels; relu1 and relu2 are computed
    per panel, with fc1 and fc2 register-blocked at their tiles."""
    s = Schedule(name="hand")
    dense_output(s, p, "fc3", panel=64, target=vt)
    for relu, fc in (("relu1", "fc1"), ("relu2", "fc2")):
        S(s, relu).compute_at("fc3", "i")
        matmul_block(s, p, fc, relu, parallel=False, target=vt)
    return s


def softmax(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Per block of 8 rows (parallel): row max, exp (stored, vectorized) and row sum,
    then the division, vectorized along the row."""
    s = Schedule(name="hand")
    m, n = p.shape_of("softmax")
    rb = fit(8, m)
    vw = fit(vt.lanes, n)
    S(s, "softmax").split("i", "io", "i", rb).vectorize("j", vw).parallel("io")
    row_reduce_at(s, p, "softmax_max", "softmax", "io", rb)
    row_reduce_at(s, p, "softmax_sum", "softmax", "io", rb)
    S(s, "softmax_exp").compute_at("softmax", "io").vectorize("j", vw)
    return s


def layernorm(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Per block of 8 rows (parallel): row mean and variance, then the normalization."""
    s = Schedule(name="hand")
    m, n = p.shape_of("layernorm")
    rb = fit(8, m)
    S(s, "layernorm").split("i", "io", "i", rb).vectorize("j", fit(vt.lanes, n)).parallel("io")
    row_reduce_at(s, p, "layernorm_mean", "layernorm", "io", rb)
    row_reduce_at(s, p, "layernorm_var", "layernorm", "io", rb)
    return s


def attention(p: Pipeline, vt: VectorTarget) -> Schedule:
    """Per panel of 8 query rows of `out` (parallel): scores register-blocked at tiles of
    `scaled`, row max and sum vectorized across the panel's rows, exp stored per panel,
    the division inlined into out's accumulation."""
    s = Schedule(name="hand")
    m, n = p.shape_of("scaled")
    rb = fit(8, m)
    vw = fit(vt.lanes, n)
    cb = vw * fit(2, max(1, n // vw))
    dense_output(s, p, "out", panel=rb, target=vt)
    S(s, "scaled").compute_at("out", "i").split("j", "jo", "ji", cb).split("i", "io", "ii", rb).reorder("ji", "ii", "jo", "io").vectorize(
        "ji", vw
    )
    S(s, "scores").compute_at("scaled", "jo").vectorize("j", vw)
    rbs = fit(vt.accumulators // (cb // vw), rb)  # register block rows: 8 x 2 zmm, 4 x 2 ymm (8 x 2 spill on AVX2)
    u = S(s, "scores").update().split("i", "i", "i_u", rbs).split("j", "j", "j_v", vw).split("j", "j", "j_u", cb // vw)
    u.reorder("j_v", "j_u", "i_u", "j", "i", "k").vectorize("j_v").unroll("j_u").unroll("i_u")
    row_reduce_at(s, p, "probs_max", "out", "i", rb)
    row_reduce_at(s, p, "probs_sum", "out", "i", rb)
    S(s, "probs_exp").compute_at("out", "i").vectorize("j", vw)
    S(s, "probs").compute_inline()
    return s


SCHEDULES: dict[str, Callable[[Pipeline, VectorTarget], Schedule]] = {
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


def hand_schedule(p: Pipeline, target: str | VectorTarget | None = None) -> Schedule:
    """The hand schedule for built-in pipeline `p`, at any of its sizes, for Halide target
    `target` (None: the host's JIT target): vector widths and register blocks follow it.

    KeyError for an unknown name, or for a pipeline that has a built-in's name but not
    its stages and loop names (say, an edited JSON copy)."""
    if p.name not in SCHEDULES:
        raise KeyError(f"no hand schedule for pipeline {p.name!r} (have: {', '.join(SCHEDULES)})")
    if _shape_free(p) != _shape_free(zoo.get(p.name, "small")):
        raise KeyError(f"pipeline {p.name!r} does not have the stages of the built-in {p.name!r}")
    return SCHEDULES[p.name](p, vector_target(target))
