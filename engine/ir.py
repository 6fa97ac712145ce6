"""Pipeline IR: a DAG of stages, each declared once as dims + expression (+ reduction).

A `Stage` is computed over its output dims (numpy axis order, outermost first). A
reduction stage has an initial value `value` and an update `update` folded over its
reduction domain `rdom` with `reduce` ('sum', 'max' or 'min'). Everything else (the
Halide definition, FLOPs, bytes, footprints, the loop nest) is derived from this.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx

from . import expr as E

REDUCERS = ("sum", "max", "min")
# Names a JIT-compiled Func must not take: they collide with C library symbols at link time.
RESERVED_NAMES = frozenset(
    "abs acos acosh asin asinh atan atan2 atanh cbrt ceil cos cosh erf exp exp2 expm1 fabs floor fma fmax fmin fmod "
    "free hypot log log10 log1p log2 malloc memcpy memset pow printf round sin sinh sqrt tan tanh trunc".split()
)
SOURCE_PATH_KEYS = ("model", "weights")
# Not part of the content hash either: file locations, and display-only metadata (each
# stage's module path in the imported model, for grouping the graph).
SOURCE_UNHASHED_KEYS = (*SOURCE_PATH_KEYS, "scopes")
FORMAT_VERSION = 1
BYTES_PER_ELEMENT = 4  # every buffer is float32


MAX_ELEMENTS = 2**31 - 1  # Halide indexes buffers and loops with 32-bit integers


class PipelineError(ValueError):
    """A pipeline description that is malformed; the message says where."""


@dataclass(frozen=True)
class Dim:
    name: str
    extent: int


@dataclass(frozen=True)
class Input:
    """A float32 input. Test data is drawn uniformly from [low, high), except for a
    `weight` of an imported model, whose values come from the pipeline's weights file."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -1.0
    high: float = 1.0
    weight: bool = False

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "low": self.low, "high": self.high}
        if self.weight:
            d["weight"] = True
        return d

    @staticmethod
    def from_json(i: dict[str, Any]) -> Input:
        return Input(
            str(i["name"]),
            tuple(int(x) for x in i["shape"]),
            str(i.get("dtype", "float32")),
            float(i.get("low", -1.0)),
            float(i.get("high", 1.0)),
            bool(i.get("weight", False)),
        )

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Stage:
    name: str
    dims: tuple[Dim, ...]
    value: E.Expr
    rdom: tuple[Dim, ...] = ()
    update: E.Expr | None = None
    reduce: str | None = None
    op: str = "generic"
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.extent for d in self.dims)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_reduction(self) -> bool:
        return self.update is not None

    def sources(self) -> list[str]:
        """Names read by this stage, in first-use order, without repeats."""
        seen: dict[str, None] = {}
        for ex in self.exprs():
            for a in E.accesses(ex):
                seen.setdefault(a.source, None)
        return list(seen)

    def exprs(self) -> list[E.Expr]:
        return [self.value] + ([self.update] if self.update is not None else [])

    def flops(self) -> int:
        pure = E.flops(self.value) * self.size
        if self.update is None:
            return pure
        # One combine per reduction point plus the body.
        return pure + (E.flops(self.update) + 1) * self.size * math.prod(d.extent for d in self.rdom)

    def ranges(self) -> dict[str, E.Interval]:
        return {d.name: (0, d.extent - 1) for d in self.dims + self.rdom}

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "op": self.op,
            "dims": [[x.name, x.extent] for x in self.dims],
            "value": E.to_json(self.value),
        }
        if self.update is not None:
            d["rdom"] = [[x.name, x.extent] for x in self.rdom]
            d["update"] = E.to_json(self.update)
            d["reduce"] = self.reduce
        if self.attrs:
            d["attrs"] = self.attrs
        return d

    @staticmethod
    def from_json(d: Any) -> Stage:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise PipelineError("stage: expected an object with a 'name'")
        name = d["name"]
        where = f"stage {name!r}"
        try:
            dims = tuple(Dim(str(n), int(x)) for n, x in d["dims"])
            rdom = tuple(Dim(str(n), int(x)) for n, x in d.get("rdom", []))
            value = E.from_json(d["value"], where)
            update = E.from_json(d["update"], where) if "update" in d else None
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise PipelineError(f"{where}: malformed ({type(exc).__name__ if isinstance(exc, RecursionError) else exc})") from None
        return Stage(name, dims, value, rdom, update, d.get("reduce"), str(d.get("op", "generic")), dict(d.get("attrs", {})))


@dataclass
class OpRecord:
    """One operator application, `output = op(inputs, **attrs)`, like a node of an ONNX graph.

    Stages are the lowering of these records; the reference evaluates the records."""

    op: str
    inputs: list[str]
    output: str
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "inputs": self.inputs, "output": self.output, "attrs": self.attrs}

    @staticmethod
    def from_json(d: Any) -> OpRecord:
        return OpRecord(str(d["op"]), [str(x) for x in d["inputs"]], str(d["output"]), dict(d.get("attrs", {})))


@dataclass
class Pipeline:
    name: str
    inputs: list[Input]
    stages: list[Stage]
    outputs: list[str]
    description: str = ""
    ops: list[OpRecord] = field(default_factory=list)
    # Where an imported pipeline came from, e.g. {"kind": "onnx", "model": path, "weights":
    # npz path, "weights_sha256": ...}: the reference and the weight values are read from it.
    source: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def __setattr__(self, name: str, value: Any) -> None:
        # Importers attach `source` after construction: forget a hash computed before that.
        super().__setattr__(name, value)
        self.__dict__.pop("_content_hash", None)

    # --- structure ---------------------------------------------------------------
    @cached_property
    def stage_map(self) -> dict[str, Stage]:
        return {s.name: s for s in self.stages}

    @cached_property
    def input_map(self) -> dict[str, Input]:
        return {i.name: i for i in self.inputs}

    def stage(self, name: str) -> Stage:
        try:
            return self.stage_map[name]
        except KeyError:
            raise PipelineError(f"pipeline {self.name!r} has no stage {name!r}") from None

    def shape_of(self, name: str) -> tuple[int, ...]:
        if name in self.input_map:
            return self.input_map[name].shape
        return self.stage(name).shape

    @cached_property
    def graph(self) -> nx.DiGraph:
        """Producer -> consumer edges over inputs and stages."""
        g = nx.DiGraph()
        for i in self.inputs:
            g.add_node(i.name, kind="input")
        for s in self.stages:
            g.add_node(s.name, kind="output" if s.name in self.outputs else "stage")
            for src in s.sources():
                g.add_edge(src, s.name)
        return g

    def consumers(self, name: str) -> list[str]:
        return [c for c in self.graph.successors(name)]

    def producers(self, name: str) -> list[str]:
        return [p for p in self.graph.predecessors(name) if p in self.stage_map]

    def downstream(self, name: str) -> frozenset[str]:
        """Everything computed from `name` (memoized: validation and the loop-nest model ask
        per stage and per directive, which was quadratic on a ResNet-50)."""
        memo = self.__dict__.setdefault("_downstream_memo", {})
        if name not in memo:
            memo[name] = frozenset(nx.descendants(self.graph, name))
        return memo[name]

    def upstream(self, name: str) -> frozenset[str]:
        """Everything `name` is computed from (memoized like `downstream`)."""
        memo = self.__dict__.setdefault("_upstream_memo", {})
        if name not in memo:
            memo[name] = frozenset(nx.ancestors(self.graph, name))
        return memo[name]

    @cached_property
    def stage_order(self) -> list[str]:
        """Stage names in a topological order (networkx's, computed once)."""
        return [n for n in nx.topological_sort(self.graph) if n in self.stage_map]

    # --- validation ------------------------------------------------------------
    def validate(self) -> None:
        names: set[str] = set()
        for n in [i.name for i in self.inputs] + [s.name for s in self.stages]:
            if not n.isidentifier() or n in RESERVED_NAMES:
                raise PipelineError(f"name {n!r} cannot be used: names must be identifiers and not C library names like 'tanh'")
        for i in self.inputs:
            if i.name in names:
                raise PipelineError(f"duplicate name {i.name!r}")
            if i.dtype != "float32":
                raise PipelineError(f"input {i.name!r}: only float32 is supported, got {i.dtype!r}")
            if not i.shape or any(x <= 0 for x in i.shape):
                raise PipelineError(f"input {i.name!r}: shape must be positive, got {i.shape}")
            if math.prod(i.shape) > MAX_ELEMENTS:
                raise PipelineError(f"input {i.name!r}: {math.prod(i.shape)} elements, past Halide's 32-bit indices ({MAX_ELEMENTS})")
            names.add(i.name)
        for s in self.stages:
            where = f"stage {s.name!r}"
            if s.name in names:
                raise PipelineError(f"{where}: duplicate name")
            if not s.dims or any(d.extent <= 0 for d in s.dims + s.rdom):
                raise PipelineError(f"{where}: every dim needs a positive extent")
            for what, ds in (("elements", s.dims), ("reduction points", s.rdom)):
                count = math.prod(d.extent for d in ds)
                if count > MAX_ELEMENTS:
                    raise PipelineError(f"{where}: {count} {what}, past Halide's 32-bit indices ({MAX_ELEMENTS})")
            loop_vars = [d.name for d in s.dims + s.rdom]
            if len(set(loop_vars)) != len(loop_vars):
                raise PipelineError(f"{where}: repeated loop variable in {loop_vars}")
            if (s.update is None) != (s.reduce is None) or (s.update is not None and not s.rdom):
                raise PipelineError(f"{where}: a reduction needs 'rdom', 'update' and 'reduce' together")
            if s.reduce is not None and s.reduce not in REDUCERS:
                raise PipelineError(f"{where}: unknown reducer {s.reduce!r} (expected one of {REDUCERS})")
            pure_vars = {d.name for d in s.dims}
            if not E.variables(s.value) <= pure_vars:
                raise PipelineError(f"{where}: value uses unknown variables {sorted(E.variables(s.value) - pure_vars)}")
            if s.update is not None and not E.variables(s.update) <= set(loop_vars):
                raise PipelineError(f"{where}: update uses unknown variables {sorted(E.variables(s.update) - set(loop_vars))}")
            for ex in s.exprs():
                for a in E.accesses(ex):
                    if a.source not in names:
                        raise PipelineError(f"{where}: reads {a.source!r}, which is not an input or an earlier stage")
                    shape = self._shape_by_name(a.source)
                    if len(a.index) != len(shape):
                        raise PipelineError(f"{where}: reads {a.source!r} with {len(a.index)} indices, it has {len(shape)} dims")
                    for k, ix in enumerate(a.index):
                        b = E.bounds(ix, s.ranges())
                        if b is not None and (b[0] < 0 or b[1] > shape[k] - 1):
                            raise PipelineError(
                                f"{where}: reads {a.source!r} axis {k} at [{b[0]:.0f}, {b[1]:.0f}], outside its extent {shape[k]}"
                            )
            names.add(s.name)
        if not self.outputs:
            raise PipelineError(f"pipeline {self.name!r} has no outputs")
        for o in self.outputs:
            if o not in {s.name for s in self.stages}:
                raise PipelineError(f"output {o!r} is not a stage")

    def _shape_by_name(self, name: str) -> tuple[int, ...]:
        for i in self.inputs:
            if i.name == name:
                return i.shape
        for s in self.stages:
            if s.name == name:
                return s.shape
        raise PipelineError(f"unknown name {name!r}")

    # --- derived quantities ------------------------------------------------------
    def flops(self) -> int:
        return sum(s.flops() for s in self.stages)

    def bytes(self) -> int:
        """Compulsory traffic: every input read once, every output written once."""
        return BYTES_PER_ELEMENT * (sum(i.size for i in self.inputs) + sum(self.stage(o).size for o in self.outputs))

    def footprint(self, stage: str, source: str) -> tuple[tuple[int, int], ...]:
        """Box of `source` read by all of `stage` (inclusive bounds per axis), clipped to the source."""
        s = self.stage(stage)
        return access_box(s, source, s.ranges(), self.shape_of(source))

    # --- serialization -------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "description": self.description,
            "inputs": [i.to_json() for i in self.inputs],
            "stages": [s.to_json() for s in self.stages],
            "outputs": list(self.outputs),
            "ops": [o.to_json() for o in self.ops],
            "source": dict(self.source),
        }

    @staticmethod
    def from_json(d: Any) -> Pipeline:
        if not isinstance(d, dict):
            raise PipelineError("pipeline: expected a JSON object")
        if d.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            raise PipelineError(f"pipeline: unsupported format version {d.get('format')!r}")
        try:
            inputs = [Input.from_json(i) for i in d["inputs"]]
            stages = [Stage.from_json(s) for s in d["stages"]]
            outputs = [str(o) for o in d["outputs"]]
            ops = [OpRecord.from_json(o) for o in d.get("ops", [])]
            source = dict(d.get("source", {}))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise PipelineError(f"pipeline: missing or malformed field {exc}") from None
        return Pipeline(str(d.get("name", "pipeline")), inputs, stages, outputs, str(d.get("description", "")), ops, source)

    def content_hash(self) -> str:
        """Hash of what is computed; name and description do not change it."""
        return self._content_hash

    @cached_property
    def _content_hash(self) -> str:
        # Cached like stage_map and graph: a Pipeline is not changed after construction.
        body = self.to_json()
        body.pop("name")
        body.pop("description")
        # Files may move; their content (recorded as a digest) is what counts.
        body["source"] = {k: v for k, v in self.source.items() if k not in SOURCE_UNHASHED_KEYS}
        return canonical_hash(body)


def declared_layout(p: Pipeline, name: str) -> tuple[int, ...] | None:
    """The storage order (axes, innermost first) pipeline `p` declares for the buffer of its
    input or output `name` where that is not row-major (`p.source["layouts"]`: a segment's
    buffers between segments, laid out as the stage that writes them stores them), else None."""
    order = p.source.get("layouts", {}).get(name)
    return None if order is None else tuple(int(a) for a in order)


def storage_axes(dims: tuple[Dim, ...], loops: tuple[str, ...]) -> tuple[int, ...]:
    """The axes of a reorder_storage's dim names (innermost first) among `dims` (outermost first)."""
    index = {d.name: k for k, d in enumerate(dims)}
    return tuple(index[n] for n in loops)


def canonical_hash(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def access_box(s: Stage, source: str, ranges: dict[str, E.Interval], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Union over all accesses of `s` to `source` of their index intervals, clipped to `shape`."""
    lo = [math.inf] * len(shape)
    hi = [-math.inf] * len(shape)
    for ex in s.exprs():
        for a in E.accesses(ex):
            if a.source != source:
                continue
            for k, ix in enumerate(a.index):
                b = E.bounds(ix, ranges)
                if b is None:  # data-dependent index: the whole axis
                    b = (0, shape[k] - 1)
                lo[k], hi[k] = min(lo[k], b[0]), max(hi[k], b[1])
    return tuple((int(max(0, a)), int(min(n - 1, b))) for a, b, n in zip(lo, hi, shape) if a != math.inf)
