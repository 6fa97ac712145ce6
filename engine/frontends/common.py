"""What the ONNX and PyTorch importers share: errors, the report, names, the weights file,
and `Emitter`, the tensor-level layer both map their graphs onto.

A value of an imported graph is either a folded constant (`np.ndarray`) or the name of a
tensor of the pipeline being built (an input, a stage or a view). Constants become weight
inputs only where a computed tensor consumes them; scalars are inlined into expressions.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import os
import re
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..ir import Pipeline
from .nd_conv import NdBuilder

Value = np.ndarray | str
LOOP_NAME = re.compile(r"[ncyxzijkbr]|r[cyxz]|[rdb]\d+")
# C math library names: a Func named 'tanh' breaks Halide's first JIT compile in a process
# ("Symbol not found: <input>.buffer"); stage names avoid them all.
LIBM_NAMES = frozenset(
    "exp exp2 expm1 log log2 log10 log1p sqrt cbrt sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh "
    "erf erfc pow abs fabs floor ceil round trunc fmod fmin fmax hypot lgamma tgamma main malloc free memcpy memset".split()
)


H = TypeVar("H", bound=Callable[..., Any])


def handler_registry(handlers: dict[str, H]) -> Callable[..., Callable[[H], H]]:
    """`@handles("OpA", "OpB")` for a frontend's op table: registers the function under each name."""

    def handles(*ops: str) -> Callable[[H], H]:
        def deco(fn: H) -> H:
            for op in ops:
                handlers[op] = fn
            return fn

        return deco

    return handles


def ints(v: Any) -> list[int]:
    """An attribute or constant (scalar, list, array) as a flat list of ints."""
    return [int(x) for x in np.asarray(v).reshape(-1)]


class ModelImportError(ValueError):
    """A model that cannot be imported; the message names the file or node and the problem."""


class UnsupportedModelError(ModelImportError):
    """Operators the importer does not map; `unsupported` lists every one (op, node, reason)."""

    def __init__(self, source: str, unsupported: list[dict[str, str]]) -> None:
        self.unsupported = unsupported
        items = "; ".join(f"{u['op']} (node {u['node']!r}{': ' + u['reason'] if u.get('reason') else ''})" for u in unsupported)
        super().__init__(f"{source}: {len(unsupported)} unsupported node(s): {items}")


class Unsupported(Exception):
    """Raised by an operator mapping for a case it does not handle (collected, then reported)."""


@dataclass
class ImportReport:
    stages: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    simplifications: list[str]
    unsupported: list[dict[str, str]]
    ops_mapped: dict[str, int]
    weights: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "stages": self.stages,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "simplifications": self.simplifications,
            "unsupported": self.unsupported,
            "ops_mapped": self.ops_mapped,
            "weights": self.weights,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class ImportResult:
    pipeline: Pipeline
    report: ImportReport


# --- names and files ----------------------------------------------------------------
def onnx_scope(node_name: str) -> str:
    """Module path of an exported node: '/layer1/layer1.0/conv1/Conv' -> 'layer1/layer1.0/conv1'
    (the last part is the operator); '' for a name without a path."""
    parts = [x for x in node_name.split("/") if x]
    return "/".join(parts[:-1]) if "/" in node_name else ""


def sanitize(name: str, fallback: str = "t") -> str:
    """An identifier from a graph name: '/layer1/0/conv1/Conv_output_0' -> 'layer1_0_conv1_Conv_output_0'."""
    s = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_")
    s = re.sub(r"_+", "_", s) or fallback
    if s[0].isdigit():
        s = f"{fallback}_{s}"
    return s + "_" if keyword.iskeyword(s) else s


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_weights_dir() -> Path:
    from platformdirs import user_cache_dir  # noqa: PLC0415

    return Path(user_cache_dir("schedule-explorer")) / "weights"


def write_weights(arrays: dict[str, np.ndarray], directory: Path, stem: str) -> tuple[Path, str]:
    """Write an .npz (readable by np.load with allow_pickle=False) byte-for-byte reproducibly:
    sorted names and fixed zip timestamps, so the file's sha256 identifies its content. The
    write is atomic (temp file + rename): concurrent imports of one model are harmless.
    Arrays stream straight into the file (a ResNet-50 has 100 MB of weights: no copies in memory)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.npz"
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(fd, "w+b") as fh:
            with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
                for name in sorted(arrays):
                    _write_npy(zf, name, arrays[name])
            fh.flush()
            fh.seek(0)
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a weights file is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path.resolve(), digest


def _write_npy(zf: zipfile.ZipFile, name: str, arr: np.ndarray) -> None:
    """One member `name.npy`, the same bytes as `zf.writestr(info, <.npy bytes>)` would write."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype == object:
        raise ModelImportError(f"weight {name!r} is not a numeric array")
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(arr))
    info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zf.compression
    info.file_size = head.tell() + arr.nbytes
    with zf.open(info, "w") as dest:
        dest.write(head.getvalue())
        dest.write(arr.reshape(-1).data.cast("B") if arr.size else b"")


# --- the tensor-level layer ------------------------------------------------------------------
class Emitter:
    """Builds a pipeline from graph values; both frontends call it, so they map alike."""

    def __init__(self, name: str, description: str = "") -> None:
        self.b = NdBuilder(name, description)
        self.weights: dict[str, np.ndarray] = {}
        self.simplifications: list[str] = []
        self.mapped: Counter[str] = Counter()
        self._const_inputs: dict[int, str] = {}
        self._const_names: dict[int, str] = {}  # id(array) -> the graph's name for it
        self._keep: list[np.ndarray] = []  # keeps constants alive so their ids stay unique
        # Integer data inputs read as indices (Gather's): input -> [low, high) of valid values,
        # so random test data stays in range (engine/reference.py make_inputs draws integers).
        self.index_ranges: dict[str, list[int]] = {}
        # Stage -> module path of the graph node it came from ('layer1/layer1.0/conv1'): the
        # app groups a large graph's stages by it. Display only: not part of the content hash.
        self.scopes: dict[str, str] = {}

    def scoped(self, scope: str, start: int) -> None:
        """The stages added since there were `start` came from a node in module path `scope`."""
        if scope:
            for s in self.b.stages[start:]:
                self.scopes[s.name] = scope

    def name(self, hint: str) -> str:
        s = sanitize(hint)
        # A tensor named like a loop variable ('x', 'rc', 'd0') would shadow it in exported source.
        return self.b.fresh(s + "_" if LOOP_NAME.fullmatch(s) or s in LIBM_NAMES else s)

    def shape(self, v: Value) -> tuple[int, ...]:
        return tuple(v.shape) if isinstance(v, np.ndarray) else self.b.shape(v)

    def input(self, hint: str, shape: tuple[int, ...]) -> str:
        if not shape or any(int(n) <= 0 for n in shape):
            raise ModelImportError(f"input {hint!r}: shape {list(shape)} is not static and positive")
        return self.b.input(self.name(hint), shape)

    def name_const(self, v: Value | None, name: str) -> None:
        """Remember the graph's name of a constant: its weight input (if any) is named after it."""
        if isinstance(v, np.ndarray) and id(v) not in self._const_names:
            self._const_names[id(v)] = name
            self._keep.append(v)

    def tensor(self, v: Value, hint: str = "const") -> str:
        """The tensor for a value: a constant becomes a weight input (once per array)."""
        if isinstance(v, str):
            return v
        if id(v) in self._const_inputs:
            return self._const_inputs[id(v)]
        hint = self._const_names.get(id(v), hint)
        arr = np.asarray(v)
        if arr.dtype.kind not in "fiub":
            raise Unsupported(f"constant of type {arr.dtype} used as a tensor")
        arr = arr.astype(np.float32, copy=False).reshape(arr.shape or (1,))  # no copy of float32 weights (100 MB for a ResNet-50)
        name = self.b.input(self.name(hint), arr.shape, weight=True)
        self.weights[name] = arr
        self._const_inputs[id(v)] = name
        self._keep.append(v)
        return name

    @staticmethod
    def scalar(v: Value | float | None) -> float | None:
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, np.ndarray) and v.size == 1:
            return float(v.reshape(-1)[0])
        return None

    # --- elementwise, with scalar constants inlined ---------------------------------------
    def binary(self, fn: str, a: Value | float, b: Value | float, hint: str) -> str:
        def operand(v: Value | float, other: Value | float) -> str | float:
            if isinstance(v, (str, int, float)):
                return float(v) if not isinstance(v, str) else v
            s = self.scalar(v)
            other_shape = () if isinstance(other, (int, float)) else self.shape(other)
            if s is not None and np.broadcast_shapes(v.shape, other_shape) == tuple(other_shape):
                return s  # inlined: no weight input for a scalar
            return self.tensor(v, f"{hint}_const")

        return self.b.binary(self.name(hint), operand(a, b), operand(b, a), fn)

    def unary(self, fn: str, x: Value, hint: str, **params: Any) -> str:
        return self.b.unary(self.name(hint), self.tensor(x), fn, **params)

    # --- reshape-like ops as views ------------------------------------------------------
    def reshape(self, x: Value, shape: tuple[int, ...], hint: str, kind: str = "Reshape") -> Value:
        if isinstance(x, np.ndarray):
            return x.reshape(shape)
        if tuple(shape) == self.shape(x):
            return x
        out = self.b.reshape(self.name(hint), x, shape)
        self.note_view(kind, hint)
        return out

    def transpose(self, x: Value, perm: list[int], hint: str) -> Value:
        if isinstance(x, np.ndarray):
            return np.transpose(x, perm)
        if list(perm) == list(range(len(perm))):
            return x
        out = self.b.transpose(self.name(hint), x, perm)
        self.note_view("Transpose", hint)
        return out

    def note_view(self, kind: str, hint: str) -> None:
        self.simplifications.append(f"{kind} {hint!r} is an index remapping of its consumers (no copy stage)")

    def slice(self, x: Value, axes: list[int], starts: list[int], ends: list[int], steps: list[int], hint: str) -> Value:
        """Python-style slicing (clamped bounds, negative indices and steps) along `axes`."""
        shape = list(self.shape(x))
        st, sp, out = [0] * len(shape), [1] * len(shape), list(shape)
        slices = [slice(None)] * len(shape)
        for a, b, e, s in zip(axes, starts, ends, steps):
            a %= len(shape)
            rng = range(shape[a])[slice(int(b), int(e), int(s))]
            if len(rng) == 0:
                raise Unsupported(f"slice of axis {a} is empty")
            st[a], sp[a], out[a] = rng.start, rng.step, len(rng)
            slices[a] = slice(int(b), int(e), int(s))
        if isinstance(x, np.ndarray):
            return x[tuple(slices)]
        if out == shape and all(s == 1 for s in sp):
            return x
        name = self.b.slice(self.name(hint), x, st, sp, out)
        self.note_view("Slice", hint)
        return name

    def expand(self, x: Value, shape: tuple[int, ...], hint: str) -> Value:
        if isinstance(x, np.ndarray):
            return np.broadcast_to(x, np.broadcast_shapes(x.shape, shape)).copy()
        new = tuple(int(n) for n in np.broadcast_shapes(self.shape(x), tuple(shape)))
        if new == self.shape(x):
            return x
        out = self.b.expand(self.name(hint), x, new)
        self.note_view("Expand", hint)
        return out

    def concat(self, xs: list[Value], axis: int, hint: str) -> Value:
        if all(isinstance(x, np.ndarray) for x in xs):
            return np.concatenate(xs, axis=axis)
        return self.b.concat(self.name(hint), [self.tensor(x, f"{hint}_const") for x in xs], axis)

    def matmul(self, a: Value, b: Value, hint: str, bias: Value | None = None, alpha: float = 1.0, beta: float = 1.0) -> Value:
        """numpy matmul semantics incl. 1-D operands (promoted, then the axis dropped again)."""
        ta, tb = self.tensor(a, f"{hint}_A"), self.tensor(b, f"{hint}_B")
        sa, sb = self.shape(ta), self.shape(tb)
        if len(sa) == 1:
            ta = self.b.reshape(self.b.fresh(f"{self.name(hint)}_a2d"), ta, (1, sa[0]))
        if len(sb) == 1:
            tb = self.b.reshape(self.b.fresh(f"{self.name(hint)}_b2d"), tb, (sb[0], 1))
        tc = None if bias is None else self.tensor(bias, f"{hint}_C")
        name = self.name(hint)
        if len(sa) == 1 or len(sb) == 1:
            full = self.b.matmul_nd(self.b.fresh(f"{name}_2d"), ta, tb, tc, alpha, beta)
            shape = self.shape(full)
            drop = [len(shape) - 2] if len(sa) == 1 else []
            drop += [len(shape) - 1] if len(sb) == 1 else []
            new = tuple(n for k, n in enumerate(shape) if k not in drop) or (1,)
            return self.b.reshape(name, full, new)
        return self.b.matmul_nd(name, ta, tb, tc, alpha, beta)

    def batchnorm(self, x: Value, scale: np.ndarray, shift: np.ndarray, hint: str) -> str:
        """Inference batch norm not folded into a conv: a per-channel affine (axis 1)."""
        c = self.shape(x)[1]
        s = self.tensor(np.asarray(scale, np.float32).reshape(c), f"{hint}_scale")
        t = self.tensor(np.asarray(shift, np.float32).reshape(c), f"{hint}_shift")
        return self.b.channel_affine(self.name(hint), self.tensor(x), s, t, axis=1)

    # --- finishing --------------------------------------------------------------------------
    def _blocked_output(self, t: str) -> bool:
        """Is stage `t` a conv or matmul that would be a pipeline output? It gets a copy stage
        as the output: the heuristic's recipes register-block a conv's or matmul's
        accumulators at the tiles of a pointwise consumer; as an output it accumulates in
        place in the caller's buffer and layout. Sapphire Rapids, 1 thread, against ONNX
        Runtime: a 64->256 3x3 conv at 13x13 9.3x -> 1.2x, 256->64 1x1 at 56x56 4.0x -> 1.2x,
        a 196x512x512 MatMul 1.55x -> 1.1x."""
        st = next(s for s in self.b.stages if s.name == t)
        if not st.is_reduction:
            return False
        # A one-row matmul (a classifier's Gemm) is a vector-matrix product: at root it is as fast.
        return (st.op in ("conv2d", "depthwise_conv2d") and len(st.dims) == 4) or (
            st.op == "matmul" and len(st.dims) >= 2 and st.shape[-2] > 1
        )

    def finish(self, outputs: list[tuple[str, Value]]) -> tuple[Pipeline, list[str]]:
        """The pipeline with a stage per output (views, inputs and constants get a copy stage);
        inputs that an operator needs positive get test data inside that domain (reported)."""
        names: list[str] = []
        stage_names = {s.name for s in self.b.stages}
        for hint, v in outputs:
            t = self.tensor(v, f"{hint}_const")
            blocked = t in stage_names and t not in names and self._blocked_output(t)
            if t not in stage_names or t in names or blocked:
                src, t = t, self.b.materialize(self.name(hint), t)
                if blocked:
                    self.simplifications.append(
                        f"output {hint!r} is a copy stage {t!r} of {src!r}: the conv or matmul is register-blocked at the copy's tiles"
                    )
            names.append(t)
        p = self.b.build(names)
        if self.index_ranges:
            rng = self.index_ranges
            p = replace(p, inputs=[replace(i, low=rng[i.name][0], high=rng[i.name][1]) if i.name in rng else i for i in p.inputs])
        needs = positive_inputs(p)
        if needs:
            lo, hi = POSITIVE_RANGE
            p = replace(p, inputs=[replace(i, low=lo, high=hi) if i.name in needs else i for i in p.inputs])
            self.simplifications += [
                f"input {n!r} feeds {why}: its random test data is drawn from U[{lo:g}, {hi:g}) (inside that domain), not U[-1, 1)"
                for n, why in sorted(needs.items())
            ]
        return p, names


POSITIVE_RANGE = (0.5, 1.5)  # away from 0 too: 1/x and log x stay well conditioned
# Operators that only return the values of their input (rearranged, repeated or cropped): an
# input seen through them is still that input, with its domain.
_VIEW_OPS = frozenset({"reshape", "transpose", "slice", "expand", "copy", "crop", "gather", "concat"})


def positive_inputs(p: Pipeline) -> dict[str, str]:
    """Data inputs (not weights) that an operator's domain needs positive, read directly or
    through views: log, sqrt, reciprocal, a fractional power, a divisor. Input -> why."""
    data = {i.name for i in p.inputs if not i.weight}
    origin: dict[str, set[str]] = {n: {n} for n in data}
    needs: dict[str, str] = {}
    for rec in p.ops:
        srcs = [origin.get(x) for x in rec.inputs]
        if rec.op in _VIEW_OPS and all(s is not None for s in srcs):
            origin[rec.output] = set().union(*[s for s in srcs if s is not None])
            continue
        fn = rec.attrs.get("fn")
        pow_exp = rec.attrs.get("p")
        domain = rec.op == "unary" and (
            fn in ("log", "sqrt", "reciprocal") or (fn == "pow" and isinstance(pow_exp, (int, float)) and float(pow_exp) != int(pow_exp))
        )
        read = rec.inputs[:1] if domain else []
        if rec.op in ("binary", "div") and (fn == "div" or rec.op == "div") and "b" not in rec.attrs and rec.inputs:
            read, domain = rec.inputs[-1:], True  # the divisor
        for x in read:
            for n in origin.get(x, ()):
                needs.setdefault(n, f"{fn or rec.op} (stage {rec.output!r})")
    return needs


def fold_batchnorm(
    w: np.ndarray, b: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Conv weights and bias with an inference batch norm applied (computed in float64)."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    # Multiplied in float64 and rounded once to float32, chunk by chunk (no float64 copy of the weights).
    w2 = np.multiply(w, scale.reshape(-1, *([1] * (w.ndim - 1))), out=np.empty(w.shape, np.float32), dtype=np.float64, casting="same_kind")
    b0 = np.zeros(w.shape[0]) if b is None else np.asarray(b, np.float64)
    b2 = (b0 - np.asarray(mean, np.float64)) * scale + np.asarray(beta, np.float64)
    return w2, b2.astype(np.float32)


def bn_scale_shift(gamma: Any, beta: Any, mean: Any, var: Any, eps: float) -> tuple[np.ndarray, np.ndarray]:
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    return scale.astype(np.float32), (np.asarray(beta, np.float64) - np.asarray(mean, np.float64) * scale).astype(np.float32)
