"""Per-stage and per-edge features of a scheduled pipeline, from the loop-nest model.

Nodes are the pipeline's stages (in declaration order, inlined ones included so a
pipeline's graph never changes with the schedule); edges are its producer -> consumer
pairs of stages. A node has algorithm features (what the stage computes: its op
histogram, loads and access patterns) and schedule features in the spirit of Halide's
Adams2019 featurization (Featurization.h): realizations, points computed, loop extents,
vectorization, parallelism, bytes at each level, ... all derived from `engine.loopnest`,
never from Halide. Counts spanning orders of magnitude are log-scaled (`log1p`); the
table `FEATURES` says which. Bump `VERSION` whenever a feature changes meaning, so stored
features (engine/costmodel/dataset.py) are recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import expr as E
from .. import loopnest
from ..expr import affine
from ..ir import BYTES_PER_ELEMENT, Pipeline, Stage
from ..loopnest import LRU, LoopNest, pipeline_cache
from ..schedule import STORE_ROOT
from .analytic import INLINE_TERMS, AnalyticModel, flops_per_point, placed_terms, terms_from

VERSION = 2  # 2: analytic_ns, the roofline estimate per stage


@dataclass(frozen=True)
class Feature:
    name: str
    log: bool  # stored as log1p(value)
    doc: str


def _t(*rows: tuple[str, bool, str]) -> tuple[Feature, ...]:
    return tuple(Feature(*r) for r in rows)


# Op kinds of the histogram: float arithmetic (values) and integer arithmetic (indices).
FLOAT_OPS = ("add", "sub", "mul", "div", "min", "max", "cmp", "select", "exp", "log", "sqrt", "tanh", "erf", "sigmoid", "absneg")
INT_OPS = ("addsub", "mul", "divmod", "minmax", "cmp", "logic")
PATTERNS = ("pointwise", "stencil", "transpose", "broadcast", "slice", "reduction", "strided", "nonaffine")

ALGORITHM = (
    tuple(Feature(f"op_f_{k}", True, f"float '{k}' operations per point (pure + update definition)") for k in FLOAT_OPS)
    + tuple(Feature(f"op_i_{k}", True, f"integer (index) '{k}' operations per point") for k in INT_OPS)
    + _t(
        ("loads_input", True, "loads from pipeline inputs per point"),
        ("loads_stage", True, "loads from other stages per point"),
        ("loads_self", False, "1 for a reduction (its update reads its own value)"),
    )
    + tuple(Feature(f"access_{k}", True, f"accesses of pattern '{k}' (see _pattern)") for k in PATTERNS)
    + _t(
        ("flops_per_point", True, "FLOPs per output point of the stage's own definition (reduction included)"),
        ("points", True, "output points of the stage (its size)"),
        ("reduction_extent", True, "points of the reduction domain (1 when pure)"),
        ("rank", False, "number of output dims"),
        ("is_reduction", False, "1 when the stage has an update definition"),
        ("is_output", False, "1 for a pipeline output"),
        ("n_stage_producers", False, "stages it reads"),
        ("n_input_producers", False, "pipeline inputs it reads"),
        ("n_consumers", False, "stages that read it"),
    )
)

SCHEDULE = _t(
    ("compute_inline", False, "1 when inlined into its consumers"),
    ("compute_root", False, "1 when computed at root"),
    ("compute_at", False, "1 when computed at a loop of a consumer"),
    ("store_outer", False, "1 when stored at a level outside where it is computed (store_root / store_at)"),
    ("compute_depth", False, "loops enclosing the compute site, through the chain of consumers"),
    ("store_depth", False, "loops enclosing the store site"),
    ("realizations", True, "allocations of its buffer (trips of the loops outside the store site)"),
    ("productions", True, "times a region of it is computed (trips of the loops outside the compute site)"),
    ("points_per_realization", True, "points computed per allocation"),
    ("points_per_production", True, "points computed per production (its region)"),
    ("points_total", True, "points computed in the whole run (recomputation included)"),
    ("points_minimum", True, "points a correct result needs (the stage size); a reference, schedule-independent"),
    ("recompute_ratio", True, "points_total / points_minimum"),
    ("work_per_point", True, "FLOPs per point with inlined producers substituted (reduction included)"),
    ("work_total", True, "work_per_point * points_total"),
    ("innermost_extent", True, "extent of the innermost loop of the last definition"),
    ("innermost_pure_extent", True, "extent of the innermost non-reduction loop"),
    ("innermost_contiguous", False, "1 when the innermost loop walks the stage's last dim with stride 1"),
    ("innermost_is_rvar", False, "1 when the innermost loop is a reduction loop"),
    ("n_loops", False, "loops of the last definition"),
    ("unroll_extent", True, "product of the unrolled loops' extents"),
    ("inner_parallelism", True, "product of the stage's own parallel loops' extents"),
    ("outer_parallelism", True, "product of the parallel loops of consumers enclosing the compute site"),
    ("parallel_launches", True, "times its outermost parallel loop starts (0 when serial)"),
    ("vector_size", True, "lanes of the vectorized loop (1 when scalar)"),
    ("vector_contiguous", False, "1 when the vectorized loop walks the last dim with stride 1"),
    ("num_vectors", True, "vector iterations of the innermost statement in the whole run"),
    ("num_scalars", True, "scalar iterations of the innermost statement in the whole run"),
    ("tail_points", True, "points computed beyond the region by splits that round up or shift inwards (whole run; ignores guards)"),
    ("guarded_tails", False, "splits with tail='guard_with_if' (their last iteration is guarded, often scalar)"),
    ("bytes_at_realization", True, "bytes of its allocation"),
    ("bytes_at_production", True, "bytes of the region computed per production"),
    ("bytes_at_root", True, "bytes of the whole stage; a reference, schedule-independent"),
    ("innermost_bytes_at_realization", True, "bytes of the allocation along its innermost dim"),
    ("innermost_bytes_at_production", True, "bytes of the region along its innermost dim"),
    ("innermost_bytes_at_root", True, "bytes of the stage along its innermost dim"),
    ("inlined_calls", True, "evaluations of an inlined stage in the whole run (0 unless inlined)"),
    ("unique_bytes_read_per_realization", True, "bytes of inputs and stored stages one production reads"),
    ("unique_bytes_read_per_iteration", True, "bytes read per iteration of the innermost loop"),
    ("bytes_read_total", True, "unique_bytes_read_per_realization * productions"),
    ("working_set", True, "bytes of the region plus the buffers of producers stored inside its loops"),
    ("loads_dense", True, "loads contiguous along the vectorized (else innermost) loop"),
    ("loads_broadcast", True, "loads invariant along the vectorized (else innermost) loop"),
    ("loads_gather", True, "loads strided or indirect along the vectorized (else innermost) loop"),
    ("analytic_ns", True, "the analytic roofline's estimate of the stage on one core, in ns (the GNN learns a correction to it)"),
)

FEATURES: tuple[Feature, ...] = ALGORITHM + SCHEDULE
EDGE_FEATURES: tuple[Feature, ...] = _t(
    ("bytes_per_consumer_realization", True, "bytes of the producer one production of the consumer reads (0 if either is inlined)"),
    ("bytes_per_consumer_iteration", True, "bytes of the producer one innermost iteration of the consumer reads"),
    ("producer_inline", False, "1 when the producer is inlined"),
    ("producer_at_consumer", False, "1 when the producer is computed at a loop of this consumer"),
    ("producer_at_other", False, "1 when the producer is computed at a loop of another stage"),
    ("producer_root", False, "1 when the producer is computed at root"),
    ("consumer_inline", False, "1 when the consumer is inlined"),
    ("accesses", True, "accesses to the producer in the consumer's definitions"),
    ("pointwise", False, "accesses of pattern pointwise"),
    ("stencil", False, "accesses of pattern stencil"),
    ("broadcast", False, "accesses of pattern broadcast"),
    ("reduction", False, "accesses of pattern reduction"),
    ("other", False, "accesses of pattern transpose, slice, strided or nonaffine"),
)
N_FEATURES, N_EDGE_FEATURES = len(FEATURES), len(EDGE_FEATURES)
INDEX = {f.name: k for k, f in enumerate(FEATURES)}
EDGE_INDEX = {f.name: k for k, f in enumerate(EDGE_FEATURES)}
_ANALYTIC = INDEX["analytic_ns"]
_LOG = np.array([f.log for f in FEATURES])
_EDGE_LOG = np.array([f.log for f in EDGE_FEATURES])


# --- algorithm features -----------------------------------------------------------------
_FN_KIND = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "sqrt", "tanh": "tanh", "erf": "erf", "sigmoid": "sigmoid"}
_INT_KIND = {"+": "addsub", "-": "addsub", "*": "mul", "//": "divmod", "%": "divmod", "/": "divmod", "min": "minmax", "max": "minmax"}
_FLOAT_KIND = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "div", "%": "div", "min": "min", "max": "max"}


def op_histogram(e: E.Expr, hist: dict[str, int]) -> str:
    """Count `e`'s operations into `hist` ('f_add', 'i_mul', ...); returns its type: 'f', 'i' or 'b'."""
    if isinstance(e, E.Const):
        return "i" if isinstance(e.value, int) else "f"
    if isinstance(e, E.Var):
        return "i"
    if isinstance(e, E.Access):
        for ix in e.index:
            op_histogram(ix, hist)
        return "f"
    if isinstance(e, E.BinOp):
        ta, tb = op_histogram(e.a, hist), op_histogram(e.b, hist)
        if e.op in ("and", "or"):
            key, out = "i_logic", "b"
        elif e.op in E.COMPARE_OPS:
            key, out = ("f_cmp" if "f" in (ta, tb) else "i_cmp"), "b"
        else:
            out = "f" if "f" in (ta, tb) or e.op == "/" else "i"
            key = f"f_{_FLOAT_KIND[e.op]}" if out == "f" else f"i_{_INT_KIND[e.op]}"
        hist[key] = hist.get(key, 0) + 1
        return out
    if isinstance(e, E.Call):
        t = op_histogram(e.args[0], hist)
        key = f"f_{_FN_KIND.get(e.fn, 'absneg')}"
        if e.fn != "float":
            hist[key] = hist.get(key, 0) + 1
        return "f" if e.fn not in ("abs", "neg") else t
    if isinstance(e, E.Select):
        op_histogram(e.cond, hist)
        t = op_histogram(e.then, hist)
        op_histogram(e.other, hist)
        hist["f_select"] = hist.get("f_select", 0) + 1
        return t
    raise TypeError(f"not an expression: {e!r}")


def _pattern(a: E.Access, aff: list[E.Affine | None], s: Stage, offsets: dict[str, set]) -> str:
    """Access pattern from the matrix of index coefficients w.r.t. the stage's loop vars
    (as Halide's featurization does): identity with one offset -> pointwise, several
    offsets of the same source -> stencil, permuted -> transpose, fewer source dims than
    stage dims -> broadcast, constant indices -> slice, reduction variables -> reduction.
    `aff`: `affine` of each of `a`'s indices."""
    if any(x is None for x in aff):
        return "nonaffine"
    rvars = {r.name for r in s.rdom}
    if any(v in rvars for co, _ in aff for v in co):  # type: ignore[misc]
        return "reduction"
    pure = [d.name for d in s.dims]
    cols: list[int] = []
    const_rows = False
    for co, _ in aff:  # type: ignore[misc]
        if not co:
            const_rows = True
        elif len(co) > 1 or next(iter(co.values())) != 1:
            return "strided"
        else:
            cols.append(pure.index(next(iter(co))))
    if len(set(cols)) != len(cols):
        return "strided"
    if cols != sorted(cols):
        return "transpose"
    if const_rows:
        return "slice"
    if len(cols) < len(pure):
        return "broadcast"
    return "stencil" if len(offsets.get(a.source, ())) > 1 else "pointwise"


def _accesses(s: Stage) -> list[E.Access]:
    return [a for ex in s.exprs() for a in E.accesses(ex)]


def access_patterns(s: Stage, source: str | None = None, acc: list[E.Access] | None = None) -> dict[str, int]:
    """Count of the stage's accesses (to `source`, or to anything) per pattern; `acc`: the
    stage's accesses (`_accesses(s)`) when the caller has them."""
    acc = _accesses(s) if acc is None else acc
    affs = [[affine(i) for i in a.index] for a in acc]  # once per index: the offsets and the patterns read them
    offsets: dict[str, set] = {}
    for a, aff in zip(acc, affs):
        if all(x is not None for x in aff):
            offsets.setdefault(a.source, set()).add(tuple(c for _, c in aff))  # type: ignore[misc]
    out = dict.fromkeys(PATTERNS, 0)
    for a, aff in zip(acc, affs):
        if source is None or a.source == source:
            out[_pattern(a, aff, s, offsets)] += 1
    return out


def algorithm_features(p: Pipeline, s: Stage) -> dict[str, float]:
    hist: dict[str, int] = {}
    for ex in s.exprs():
        op_histogram(ex, hist)
    f: dict[str, float] = {f"op_{k}": float(v) for k, v in hist.items()}
    acc = _accesses(s)
    f["loads_input"] = sum(a.source in p.input_map for a in acc)
    f["loads_stage"] = sum(a.source in p.stage_map for a in acc)
    f["loads_self"] = float(s.is_reduction)
    f.update({f"access_{k}": float(v) for k, v in access_patterns(s, acc=acc).items()})
    red = math.prod(r.extent for r in s.rdom) if s.rdom else 1
    f["flops_per_point"] = s.flops() / s.size
    f["points"], f["reduction_extent"], f["rank"] = s.size, red, len(s.dims)
    f["is_reduction"], f["is_output"] = float(s.is_reduction), float(s.name in p.outputs)
    srcs = s.sources()
    f["n_stage_producers"] = sum(x in p.stage_map for x in srcs)
    f["n_input_producers"] = sum(x in p.input_map for x in srcs)
    f["n_consumers"] = len(p.consumers(s.name))
    return f


# --- schedule features --------------------------------------------------------------------
def _site(nest: LoopNest, name: str, store: bool) -> tuple[int, int, int]:
    """(loops enclosing the site, trips of those loops, product of their parallel extents)."""
    pl = nest.placements[name]
    at = pl.store if store and pl.store is not None else pl.at
    if store and nest.schedule.of(name).store() == STORE_ROOT:
        at = None
    if pl.compute != "at" or at is None:
        return 0, 1, 1
    cons, loop = at
    depth, trips, par = _site(nest, cons, False)
    loops = nest.placements[cons].loops
    idx = [lp.name for lp in loops].index(loop)
    for lp in loops[: idx + 1]:
        trips *= lp.extent
        par *= lp.extent if lp.kind == "parallel" else 1
    return depth + idx + 1, trips, par


def _inlined_calls(nest: LoopNest, name: str) -> float:
    p, pls = nest.pipeline, nest.placements
    total = 0.0
    # Only a stage that reads it through inlined stages calls it (the others add 0): its
    # effective consumers, in stage order as the sum always ran.
    for c in nest.effective_consumers(name):
        cpl = pls[c]
        cs = p.stage(c)
        n_val = nest.effective_access_counts(cs.value, keep=name).get(name, 0)
        n_upd = 0
        if cs.update is not None:
            n_upd = nest.effective_access_counts(cs.update, keep=name).get(name, 0)
        red = math.prod(r.extent for r in cs.rdom) if cs.rdom else 1
        total += (n_val + n_upd * red) * cpl.points_total
    return total


def _loads_along(nest: LoopNest, s: Stage, dim: str | None) -> tuple[int, int, int]:
    """(dense, broadcast, gather) loads of the last definition along loop dim `dim`."""
    loads = _cache(nest.pipeline).loads
    key = (s.name, nest.inline_closure(s.name), dim)  # all the count depends on
    hit = loads.get(key)
    if hit is None:
        hit = loads.put(key, _count_loads(nest, s, dim))
    return hit


def _count_loads(nest: LoopNest, s: Stage, dim: str | None) -> tuple[int, int, int]:
    # Per access (or class of accesses): its count, the variables of each index, and the
    # coefficient of `dim` in the last index (None when there is no index).
    items: Iterable[tuple[int, list[frozenset[str]], int | None]]
    classes = nest.access_classes(s.name, s.update is not None)
    if classes is not None:  # the same counts, offsets of one access pattern together
        items = (
            (n, [vs for _, vs in axes], sum(pp - nn for v, pp, nn in axes[-1][0] if v == dim) if axes else None)
            for (_, axes), n in classes.items()
        )
    else:
        body = s.update if s.update is not None else s.value
        items = (
            (n, [ix.variables for ix in index], index[-1].coefficient(dim) if index else None)
            for (_, index), n in nest.effective_accesses(body).items()
        )
    dense = bcast = gather = 0
    for n, variables, coefficient in items:
        deps = [k for k, vs in enumerate(variables) if dim in vs]
        if not deps:
            bcast += n
        elif deps == [len(variables) - 1] and coefficient == 1:
            dense += n
        else:
            gather += n
    return dense, bcast, gather


def schedule_features(nest: LoopNest, name: str) -> dict[str, float]:
    """Stage `name`'s schedule features (those not set are 0), the analytic estimate left out."""
    return _schedule_features(nest, name)[0]


def _schedule_features(nest: LoopNest, name: str) -> tuple[dict[str, float], tuple[float, ...] | None]:
    """`schedule_features` and the analytic model's terms of the stage (None when inlined),
    made from the same FLOPs and reads the features compute."""
    p, pl = nest.pipeline, nest.placements[name]
    s = p.stage(name)
    f: dict[str, float] = {f"compute_{pl.compute}": 1.0}
    f["points_minimum"] = s.size
    f["bytes_at_root"] = s.size * BYTES_PER_ELEMENT
    f["innermost_bytes_at_root"] = s.dims[-1].extent * BYTES_PER_ELEMENT
    if pl.compute == "inline":
        f["inlined_calls"] = _inlined_calls(nest, name)
        return f, None
    pkey = (name, nest.placement_key(name))
    placed = _cache(p).placed
    part = placed.get(pkey)
    if part is None:
        part = placed.put(pkey, (*_placed_features(nest, name), placed_terms(nest, name)))
    fixed, productions, region, dim, pterms = part
    f.update(fixed)
    per_point = flops_per_point(nest, name)
    f["work_per_point"], f["work_total"] = per_point, per_point * region * productions
    per_real = per_iter = 0
    for src in nest.effective_sources(name):
        per_real += math.prod(nest.required_region(src, name, per="realization"))
        per_iter += math.prod(nest.required_region(src, name, per="iteration"))
    f["unique_bytes_read_per_realization"] = per_real * BYTES_PER_ELEMENT
    f["unique_bytes_read_per_iteration"] = per_iter * BYTES_PER_ELEMENT
    f["bytes_read_total"] = per_real * BYTES_PER_ELEMENT * productions
    inside = sum(math.prod(nest.placements[q].allocation) for q in nest.stored_inside(name))
    f["working_set"] = (region + inside) * BYTES_PER_ELEMENT
    f["loads_dense"], f["loads_broadcast"], f["loads_gather"] = _loads_along(nest, s, dim)
    return f, terms_from(pterms, per_point, per_real)


def _placed_features(nest: LoopNest, name: str) -> tuple[dict[str, float], int, int, str | None]:
    """The features of non-inlined stage `name` that its placement alone fixes (its sites,
    loops and buffers: see `LoopNest.placement_key`), with its productions, the points of its
    region and the loop dim its loads are classified along; cached per pipeline by that key
    (a stage whose closure or neighbours changed keeps its placement). The loops' products
    come from one pass (every fresh placement makes a row: 9% of a fresh prediction)."""
    p, pl = nest.pipeline, nest.placements[name]
    s = p.stage(name)
    depth, productions, outer_par = _site(nest, name, False)
    sdepth, realizations, _ = _site(nest, name, True)
    region = math.prod(pl.region)
    loops = pl.loops
    last_dim = s.dims[-1].name
    inner = loops[-1]
    trips = unroll = par = 1
    launch_trips = 0  # trips of the loops outside the first parallel one (0: none is parallel)
    pure_extent = 1  # of the innermost loop not from a reduction variable
    vec = None  # the innermost vectorized loop
    for lp in loops:
        e, kind = lp.extent, lp.kind
        if kind == "parallel":
            if not launch_trips:
                launch_trips = trips
            par *= e
        elif kind == "unrolled":
            unroll *= e
        elif kind == "vectorized":
            vec = lp
        if not lp.rvar:
            pure_extent = e
        trips *= e
    if pl.pure_loops is loops:
        pure_trips, pure_par = trips, par
    else:
        pure_trips = math.prod(lp.extent for lp in pl.pure_loops)
        pure_par = math.prod(lp.extent for lp in pl.pure_loops if lp.kind == "parallel")
    trips *= productions
    vw = vec.extent if vec is not None else 1
    ss = nest.schedule.of(name)
    alloc = math.prod(pl.allocation)
    f: dict[str, float] = {
        "store_outer": float(sdepth < depth or ss.store() == STORE_ROOT),
        "compute_depth": depth, "store_depth": sdepth, "productions": productions, "realizations": realizations,
        "points_per_production": region, "points_total": region * productions,
        "points_per_realization": region * productions / max(realizations, 1), "recompute_ratio": region * productions / s.size,
        "innermost_extent": inner.extent, "innermost_pure_extent": pure_extent,
        "innermost_contiguous": float(any(pt.dim == last_dim and pt.stride == 1 for pt in inner.parts)),
        "innermost_is_rvar": float(inner.rvar), "n_loops": len(loops), "unroll_extent": unroll,
        "inner_parallelism": max(par, pure_par), "outer_parallelism": outer_par,
        "parallel_launches": productions * launch_trips,
        "vector_size": vw,
        "vector_contiguous": float(vec is not None and any(pt.dim == last_dim and pt.stride == 1 for pt in vec.parts)),
        "num_vectors": trips / vw if vec is not None else 0.0, "num_scalars": 0.0 if vec is not None else trips,
        "tail_points": max(0, pure_trips - region) * productions,
        "guarded_tails": sum(d.tail == "guard_with_if" for d in ss.pure + ss.update),
        "bytes_at_realization": alloc * BYTES_PER_ELEMENT, "bytes_at_production": region * BYTES_PER_ELEMENT,
        "innermost_bytes_at_realization": pl.allocation[-1] * BYTES_PER_ELEMENT,
        "innermost_bytes_at_production": pl.region[-1] * BYTES_PER_ELEMENT,
    }  # fmt: skip
    along = vec if vec is not None else inner
    dim = next((pt.dim for pt in along.parts if pt.stride == 1), along.parts[0].dim if along.parts else None)
    return f, productions, region, dim


# --- arrays ------------------------------------------------------------------------------
def _row(values: dict[str, float], index: dict[str, int], n: int) -> np.ndarray:
    vals = [0.0] * n  # filled as a list: a numpy element store per feature costs more
    for k, v in values.items():
        vals[index[k]] = v
    row = np.array(vals, dtype=np.float64)
    row.flags.writeable = False  # rows are cached and shared
    return row


# Rows kept per pipeline (a row is ~0.7 KB): ~100 fresh schedules of a 140-stage network.
ROW_CACHE = 20_000
EDGE_CACHE = 20_000


class _Cache:
    """Per pipeline: algorithm features per stage, and schedule-dependent rows keyed by the
    loop nest's `stage_key` (everything a row depends on), so a schedule that changes one
    stage recomputes the rows that depend on it and reuses the others."""

    def __init__(self, p: Pipeline) -> None:
        self._algorithm: dict[str, dict[str, float]] = {}
        self._algorithm_row: dict[str, list[float]] = {}
        self._patterns: dict[tuple[str, str], dict[str, int]] | None = None
        self.rows: LRU[tuple, np.ndarray] = LRU(ROW_CACHE)
        self.edge_rows: LRU[tuple, np.ndarray] = LRU(EDGE_CACHE)
        self.loads: LRU[tuple, tuple[int, int, int]] = LRU(ROW_CACHE)
        self.placed: LRU[tuple, tuple] = LRU(ROW_CACHE)  # (stage, placement key) -> (*`_placed_features`, `placed_terms`)
        pos = {s.name: k for k, s in enumerate(p.stages)}
        self.edges = [(prod, s.name) for s in p.stages for prod in s.sources() if prod in p.stage_map]
        self.edge_index = np.array([(pos[a], pos[b]) for a, b in self.edges], dtype=np.int64).T.reshape(2, -1)

    # (The pipeline is passed, not kept: the cache hangs on it.)
    def algorithm(self, p: Pipeline, name: str) -> dict[str, float]:
        """Stage `name`'s algorithm features, made on first use (a model may read few stages' rows)."""
        f = self._algorithm.get(name)
        if f is None:
            f = self._algorithm[name] = algorithm_features(p, p.stage(name))
        return f

    def algorithm_values(self, p: Pipeline, name: str) -> list[float]:
        """`algorithm` as a full row (0 elsewhere), in `FEATURES` order."""
        v = self._algorithm_row.get(name)
        if v is None:
            v = self._algorithm_row[name] = [0.0] * N_FEATURES
            for k, x in self.algorithm(p, name).items():
                v[INDEX[k]] = x
        return v

    def patterns(self, p: Pipeline) -> dict[tuple[str, str], dict[str, int]]:
        """Per edge, the consumer's access patterns to the producer (made when a model that reads edges first asks)."""
        if self._patterns is None:
            self._patterns = {(prod, s): access_patterns(p.stage(s), prod) for prod, s in self.edges}
        return self._patterns


def _cache(p: Pipeline) -> _Cache:
    return pipeline_cache(p, "features", lambda: _Cache(p))


def clear_caches(p: Pipeline) -> None:
    """Forget the rows, placements and regions cached for `p` (the next featurization
    computes everything afresh)."""
    loopnest.clear_caches(p)


_ONE_CORE = AnalyticModel(cores=1)  # the analytic feature must not depend on the machine computing it


def row_key(nest: LoopNest, name: str) -> tuple:
    """What stage `name`'s feature row depends on (with the pipeline): equal keys, equal rows.
    A model whose per-stage output depends on the row alone may cache it by this key."""
    return (name, nest.stage_key(name))


def _raw_row(nest: LoopNest, name: str, cache: _Cache, key: tuple) -> np.ndarray:
    """Stage `name`'s row before the log scaling (cached by its `row_key`, `key`)."""
    row = cache.rows.get(key)
    if row is None:
        vals = list(cache.algorithm_values(nest.pipeline, name))  # the schedule's features written over the algorithm's
        f, terms = _schedule_features(nest, name)
        for k, v in f.items():
            vals[INDEX[k]] = v
        vals[_ANALYTIC] = _ONE_CORE.ms_of_terms(INLINE_TERMS if terms is None else terms) * 1e6
        row = np.array(vals, dtype=np.float64)
        row.flags.writeable = False  # rows are cached and shared
        row = cache.rows.put(key, row)
    return row


def _scaled(rows: list[np.ndarray], log: bool) -> np.ndarray:
    x = np.stack(rows)
    if log:
        x[:, _LOG] = np.log1p(np.maximum(x[:, _LOG], 0.0))
    return x.astype(np.float32)


def stage_features(nest: LoopNest, log: bool = True) -> np.ndarray:
    """[n_stages, N_FEATURES] float32, one row per stage in `pipeline.stages` order."""
    cache = _cache(nest.pipeline)
    return _scaled([_raw_row(nest, s.name, cache, row_key(nest, s.name)) for s in nest.pipeline.stages], log)


def rows_of(items: Sequence[tuple[LoopNest, str, tuple]]) -> np.ndarray:
    """[len(items), N_FEATURES] float32: the row of each (nest, stage, its `row_key`) as
    `stage_features` gives it (the same values: the scaling is per element)."""
    if not items:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    cache = _cache(items[0][0].pipeline)
    return _scaled([_raw_row(nest, name, cache, key) for nest, name, key in items], True)


def _edge_row(nest: LoopNest, prod: str, cons: str, pattern: dict[str, int]) -> np.ndarray:
    pp, cp = nest.placements[prod], nest.placements[cons]
    f: dict[str, float] = {"consumer_inline": float(cp.compute == "inline")}
    if pp.compute == "inline":
        f["producer_inline"] = 1.0
    elif pp.compute == "root":
        f["producer_root"] = 1.0
    elif pp.at is not None and pp.at[0] == cons:
        f["producer_at_consumer"] = 1.0
    else:
        f["producer_at_other"] = 1.0
    if pp.compute != "inline" and cp.compute != "inline":
        f["bytes_per_consumer_realization"] = math.prod(nest.required_region(prod, cons, "realization")) * BYTES_PER_ELEMENT
        f["bytes_per_consumer_iteration"] = math.prod(nest.required_region(prod, cons, "iteration")) * BYTES_PER_ELEMENT
    f["accesses"] = sum(pattern.values())
    for k in ("pointwise", "stencil", "broadcast", "reduction"):
        f[k] = pattern[k]
    f["other"] = pattern["transpose"] + pattern["slice"] + pattern["strided"] + pattern["nonaffine"]
    return _row(f, EDGE_INDEX, N_EDGE_FEATURES)


def edge_index_and_features(nest: LoopNest, log: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Producer -> consumer edges between stages: ([2, E] int64 node indices, [E, N_EDGE_FEATURES] float32)."""
    pls = nest.placements
    cache = _cache(nest.pipeline)
    rows = []
    for prod, cons in cache.edges:
        pk, ck = pls[prod].compute, pls[cons].compute
        # What the row reads: the two placements' kinds, and the consumer's loops and
        # surroundings for the bytes (only when neither is inlined).
        key: tuple = (prod, cons, pk, pk == "at" and pls[prod].at[0] == cons, ck)  # type: ignore[index]
        if pk != "inline" and ck != "inline":
            key += (nest.stage_key(cons),)
        row = cache.edge_rows.get(key)
        if row is None:
            row = cache.edge_rows.put(key, _edge_row(nest, prod, cons, cache.patterns(nest.pipeline)[(prod, cons)]))
        rows.append(row)
    ef = np.stack(rows) if rows else np.zeros((0, N_EDGE_FEATURES))
    if log and len(rows):
        ef[:, _EDGE_LOG] = np.log1p(np.maximum(ef[:, _EDGE_LOG], 0.0))
    return cache.edge_index.copy(), ef.astype(np.float32)


def featurize(nest: LoopNest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node features, edge index, edge features) of one scheduled pipeline."""
    ei, ef = edge_index_and_features(nest)
    return stage_features(nest), ei, ef
