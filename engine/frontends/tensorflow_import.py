"""Import a TensorFlow model into the pipeline IR, directly from its GraphDef.

Three kinds of files: a Keras model (`.keras`, loaded with Keras' `safe_mode=True`, which
refuses Lambda layers and other pickled Python), a SavedModel directory (its serving
signature; `tf.saved_model.load` runs TensorFlow graph ops only, never Python from the file,
and a SavedModel with ops that call Python or write files is refused before it loads) and a
frozen GraphDef (`.pb`). Each becomes one frozen
graph (variables as constants, `convert_variables_to_constants_v2`), its inputs fixed to
static shapes (an unknown batch size becomes 1). Nodes that do not depend on the inputs
are evaluated by TensorFlow in one run (only pure operators: constants, shape arithmetic
and the mapped math), per-channel constants after a convolution or matmul (its bias, a
Keras batch norm) fold into its weights, and every other node is mapped by
`tensorflow_ops.HANDLERS`; unsupported nodes are collected and reported together, each by
op type and node name. TensorFlow then runs the frozen graph once on the test inputs and
its outputs are stored beside the weights (`input::NAME`, `output::NAME`): the pipeline's
reference. Every node's shape is checked against TensorFlow's own shape inference.

TensorFlow is imported only here, when a TensorFlow model is imported (it takes seconds).
"""

from __future__ import annotations

import hashlib
import os
import time
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .common import (
    Emitter,
    ImportReport,
    ImportResult,
    ModelImportError,
    Unsupported,
    UnsupportedModelError,
    default_weights_dir,
    onnx_scope,
    sanitize,
    write_weights,
)
from .tensorflow_ops import HANDLERS, MISSING, Ctx, TfNode

INSTALL_HINT = (
    "TensorFlow is not installed: pip install 'schedule-explorer[tensorflow]' (in a checkout: .venv/bin/pip install -e '.[tensorflow]')"
)
SAVED_MODEL_FILE = "saved_model.pb"
# Ops whose output depends only on the input's (static) shape: constant even on data.
SHAPE_OPS = frozenset({"Shape", "Size", "Rank"})
# Ops TensorFlow may evaluate on constants at import: pure functions of their inputs (no
# files, no Python, no state), so running them cannot do anything but compute.
CONST_OPS = frozenset(HANDLERS) | {
    "Const", "Fill", "Range", "Prod", "Cast", "ZerosLike", "OnesLike", "Floor", "Ceil", "Round", "FloorDiv", "FloorMod",
    "Tile", "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "Select", "SelectV2", "BroadcastTo",
    "BroadcastArgs", "OneHot", "ArgMax", "ArgMin", "Pow", "Transpose", "Shape", "Size", "Rank", "LogicalAnd", "LogicalOr",
    "LogicalNot", "Cumsum",
}  # fmt: skip
_POISON = object()  # downstream of an unsupported node: skipped, not reported again
NOT_DATA = frozenset({"NoOp", "Const"})


@dataclass
class _Graph:
    """One frozen graph with static input shapes, and what it came from."""

    graph_def: Any
    inputs: list[tuple[str, str]]  # (tensor name 'x:0', hint)
    outputs: list[tuple[str, str]]  # (tensor name, hint)
    kind: str  # keras | saved_model | graphdef
    where: str  # the file (or model) named in errors
    notes: list[str] = field(default_factory=list)


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up banners on stderr
    try:
        import tensorflow as tf  # noqa: PLC0415  # seconds to import: only when a TF model is opened
    except ImportError:
        raise ModelImportError(INSTALL_HINT) from None
    return tf


def is_tensorflow_model(path: str | Path) -> bool:
    """A path this importer reads: a .keras file, a .pb file or a SavedModel directory."""
    p = Path(path)
    return p.suffix.lower() in (".keras", ".pb") or (p.is_dir() and (p / SAVED_MODEL_FILE).is_file())


def import_tensorflow(path: str | Path, weights_dir: str | Path | None = None) -> ImportResult:
    """Import a .keras file, a SavedModel directory (or its saved_model.pb) or a frozen GraphDef .pb."""
    t0 = time.perf_counter()
    path = Path(path).expanduser().resolve()
    if path.name == SAVED_MODEL_FILE:
        path = path.parent
    if not path.exists():
        raise ModelImportError(f"{path}: no such file or directory")
    if path.is_dir():
        if not (path / SAVED_MODEL_FILE).is_file():
            raise ModelImportError(f"{path}: a directory without {SAVED_MODEL_FILE}, so not a SavedModel")
        graph = _from_saved_model(path)
    elif path.suffix.lower() == ".keras":
        graph = _from_keras_file(path)
    elif path.suffix.lower() == ".pb":
        graph = _from_graphdef_file(path)
    else:
        raise ModelImportError(f"{path}: not a TensorFlow model (.keras, .pb or a SavedModel directory)")
    return _import(graph, sanitize(path.stem, "model"), str(path), _digest(path), weights_dir, t0)


def import_keras(model: Any, name: str | None = None, weights_dir: str | Path | None = None) -> ImportResult:
    """Import an in-memory Keras model (as called in inference mode)."""
    t0 = time.perf_counter()
    label = name or getattr(model, "name", None) or type(model).__name__
    graph = _from_keras_model(model, f"Keras model {label!r}")
    return _import(graph, sanitize(label, "model"), f"keras:{label}", None, weights_dir, t0)


# --- loading: one frozen graph per kind of file ------------------------------------------------
def _from_keras_file(path: Path) -> _Graph:
    _tf()
    import keras  # noqa: PLC0415

    if not zipfile.is_zipfile(path):
        raise ModelImportError(
            f"{path}: not a loadable Keras model (a .keras file is a zip archive; this is not: truncated or another file type?)"
        )
    try:
        model = keras.saving.load_model(str(path), compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001  # Keras raises many types for a bad or unsafe file
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "safe_mode" in why:  # Keras' own advice (safe_mode=False) is not ours to take
            why = why.split(". ")[0] + "; Schedule Explorer never runs code from a model file (it loads Keras files with safe_mode=True)"
        raise ModelImportError(f"{path}: not a loadable Keras model ({type(exc).__name__}: {why})") from None
    graph = _from_keras_model(model, str(path))
    graph.kind = "keras"
    return graph


def _from_keras_model(model: Any, where: str) -> _Graph:
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: PLC0415

    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):
        raise ModelImportError(f"{where}: the model has no defined inputs (build it with keras.Input or call it once)") from None
    notes: list[str] = []
    specs = []
    for k, i in enumerate(inputs):
        hint = sanitize(str(getattr(i, "name", "") or f"input_{k}"), "input")
        shape = _static(list(i.shape), f"{where}: input {hint!r}", notes)
        if str(i.dtype) not in ("float32", "<dtype: 'float32'>"):
            raise ModelImportError(f"{where}: input {hint!r} is {i.dtype}; only float32 inputs are supported")
        specs.append(tf.TensorSpec(shape, tf.float32, name=hint))

    def call(*xs: Any) -> Any:
        return model(list(xs) if len(xs) > 1 else xs[0], training=False)

    try:
        concrete = tf.function(call).get_concrete_function(*specs)
        frozen = convert_variables_to_constants_v2(concrete)
    except Exception as exc:  # noqa: BLE001  # the model's own code rejects the inputs
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
        # A traced error opens with 'in user code:' and a stack; its reason is the last line.
        why = (lines[-1] if lines and lines[0].startswith("in user code") else lines[0]) if lines else ""
        raise ModelImportError(
            f"{where}: tracing it on inputs {[list(s.shape) for s in specs]} failed ({type(exc).__name__}: {why})"
        ) from None
    names = list(getattr(model, "output_names", None) or [])
    if len(names) != len(frozen.outputs):
        names = ["output"] if len(frozen.outputs) == 1 else [f"output_{k}" for k in range(len(frozen.outputs))]
    return _Graph(
        frozen.graph.as_graph_def(),
        [(t.name, s.name) for t, s in zip(frozen.inputs, specs)],
        [(t.name, sanitize(n, "output")) for t, n in zip(frozen.outputs, names)],
        "keras",
        where,
        notes,
    )


def _from_saved_model(path: Path) -> _Graph:
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: PLC0415

    _check_saved_model_ops(path)
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # noqa: BLE001  # protobuf, checkpoint and graph errors
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelImportError(f"{path}: not a loadable SavedModel ({type(exc).__name__}: {why})") from None
    sigs = dict(getattr(loaded, "signatures", {}) or {})
    key = "serving_default" if "serving_default" in sigs else next(iter(sigs), None) if len(sigs) == 1 else None
    if key is None:
        what = f"signatures {sorted(sigs)} and none is 'serving_default'" if sigs else "no signatures"
        raise ModelImportError(f"{path}: the SavedModel has {what} (save it with signatures=..., or Keras' model.export)")
    try:
        frozen = convert_variables_to_constants_v2(sigs[key])
    except Exception as exc:  # noqa: BLE001
        raise ModelImportError(f"{path}: signature {key!r} cannot be frozen ({type(exc).__name__}: {exc})") from None
    gd = frozen.graph.as_graph_def()
    outs = frozen.structured_outputs
    out_names = sorted(outs) if isinstance(outs, dict) and len(outs) == len(frozen.outputs) else None
    outputs = [
        (t.name, sanitize(out_names[k] if out_names else ("output" if len(frozen.outputs) == 1 else f"output_{k}"), "output"))
        for k, t in enumerate(frozen.outputs)
    ]
    graph = _Graph(gd, [(t.name, sanitize(t.name.split(":")[0], "input")) for t in frozen.inputs], outputs, "saved_model", str(path))
    graph.notes.append(f"SavedModel signature {key!r}")
    _fix_placeholders(graph)
    return graph


# Ops a SavedModel must not contain: loading one runs its restore and resource-initializer
# graph functions, so these are refused before anything loads (Python callbacks; file writes,
# except the checkpoint writes of the model's own saver function, which loading never calls).
CALLS_PYTHON = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
SAVER_OPS = frozenset({"SaveV2", "MergeV2Checkpoints"})
WRITES_FILES = SAVER_OPS | {
    "WriteFile", "Save", "SaveSlices", "SaveDataset", "SaveDatasetV2", "ExperimentalSaveDataset", "DatasetToTFRecord",
    "ExperimentalDatasetToTFRecord", "CreateSummaryFileWriter", "WriteSummary", "WriteScalarSummary", "WriteHistogramSummary",
    "WriteImageSummary", "WriteAudioSummary", "WriteRawProtoSummary", "WriteGraphSummary", "ImportEvent", "DebugIdentityV2",
    "DebugIdentityV3",
}  # fmt: skip


def _check_saved_model_ops(path: Path) -> None:
    """Refuse a SavedModel whose graphs call Python or write files (see CALLS_PYTHON, WRITES_FILES)."""
    from tensorflow.core.protobuf import saved_model_pb2  # noqa: PLC0415

    try:
        sm = saved_model_pb2.SavedModel.FromString((path / SAVED_MODEL_FILE).read_bytes())
    except Exception as exc:  # noqa: BLE001  # protobuf's DecodeError, an unreadable file
        raise ModelImportError(f"{path}: not a loadable SavedModel ({SAVED_MODEL_FILE}: {type(exc).__name__}: {exc})") from None
    for mg in sm.meta_graphs:
        lib = {f.signature.name: f for f in mg.graph_def.library.function}
        graph_nodes = {n.name: n for n in mg.graph_def.node}
        saver = graph_nodes.get(mg.saver_def.save_tensor_name.split(":")[0])
        saver_fns = _called(lib, [saver] if saver is not None else [])
        places: list[tuple[str | None, Any]] = [(None, n) for n in mg.graph_def.node]
        places += [(name, n) for name, f in lib.items() for n in f.node_def]
        for fn, n in places:
            own_saver = n.op in SAVER_OPS and fn in saver_fns
            if n.op in CALLS_PYTHON or (n.op in WRITES_FILES and not own_saver):
                why = "calls Python" if n.op in CALLS_PYTHON else "writes files"
                where = "the graph" if fn is None else f"function {fn!r}"
                raise ModelImportError(f"{path}: refused: node {n.name!r} in {where} is {n.op}, which {why}; nothing was loaded or run")


def _called(lib: dict[str, Any], nodes: list[Any]) -> set[str]:
    """Names of the library functions `nodes` call, directly or through the functions they call."""
    seen: set[str] = set()
    todo = list(nodes)
    while todo:
        n = todo.pop()
        for a in n.attr.values():
            for fn in [a.func, *a.list.func] if a.HasField("func") or a.list.func else []:
                if fn.name in lib and fn.name not in seen:
                    seen.add(fn.name)
                    todo += list(lib[fn.name].node_def)
    return seen


def _from_graphdef_file(path: Path) -> _Graph:
    tf = _tf()
    try:
        gd = tf.compat.v1.GraphDef.FromString(path.read_bytes())
    except OSError as exc:
        raise ModelImportError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except Exception as exc:  # noqa: BLE001  # protobuf's DecodeError and friends
        raise ModelImportError(f"{path}: not a readable GraphDef ({type(exc).__name__}: {exc}); truncated, or not a .pb graph?") from None
    if not gd.node:
        raise ModelImportError(f"{path}: an empty GraphDef (no nodes): empty, truncated or another file type")
    used = {_tensor(i)[0] for n in gd.node for i in n.input}
    inputs = [(f"{n.name}:0", sanitize(n.name, "input")) for n in gd.node if n.op == "Placeholder"]
    sinks = [n for n in gd.node if n.name not in used and n.op not in ("NoOp", "Const", "Placeholder", "Assert")]
    if not sinks:
        raise ModelImportError(f"{path}: the graph has no output (every node's result is read by another)")
    graph = _Graph(gd, inputs, [(f"{n.name}:0", sanitize(n.name, "output")) for n in sinks], "graphdef", str(path))
    _fix_placeholders(graph)
    return graph


def _static(dims: list[Any], where: str, notes: list[str]) -> list[int]:
    """Static dims: an unknown batch size (axis 0) becomes 1 (noted); other unknown sizes are an error."""
    out = []
    for k, d in enumerate(dims):
        if d is None or int(d) < 0:
            if k != 0:
                raise ModelImportError(
                    f"{where} has an unknown size at axis {k}; only static shapes (and an unknown batch size) are supported"
                )
            notes.append(f"{where.split(': ')[-1]}: unknown batch size fixed at 1")
            d = 1
        if int(d) == 0:
            raise ModelImportError(f"{where} has a zero-size axis {k}")
        out.append(int(d))
    if not out:
        raise ModelImportError(f"{where} is a scalar; the IR's inputs are tensors of rank 1 or more")
    return out


def _fix_placeholders(graph: _Graph) -> None:
    """Placeholders get static shapes in the GraphDef, so TensorFlow's shape inference gives
    every node a static shape too."""
    by_name = {n.name: n for n in graph.graph_def.node}
    for tname, _ in graph.inputs:
        node = by_name[tname.split(":")[0]]
        if node.attr["dtype"].type != 1:  # DT_FLOAT
            raise ModelImportError(f"{graph.where}: input {node.name!r} is not float32 (the IR's only type)")
        shp = node.attr["shape"].shape
        if shp.unknown_rank:
            raise ModelImportError(f"{graph.where}: input {node.name!r} has an unknown rank; only static shapes are supported")
        dims = _static([d.size for d in shp.dim], f"{graph.where}: input {node.name!r}", graph.notes)
        del shp.dim[:]
        for d in dims:
            shp.dim.add(size=d)


def _digest(path: Path) -> str:
    """sha256 of a model file, or of a SavedModel directory's files (names and contents)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path.parent)).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# --- the graph ---------------------------------------------------------------------------------
def _tensor(name: str) -> tuple[str, int]:
    """'node:1' -> ('node', 1); 'node' -> ('node', 0); control inputs '^node' -> ('node', -1)."""
    if name.startswith("^"):
        return name[1:], -1
    node, _, k = name.partition(":")
    return node, int(k) if k else 0


def _attr(v: Any, tf: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "s":
        return v.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b"):
        return getattr(v, kind)
    if kind == "type":
        return tf.dtypes.as_dtype(v.type).name
    if kind == "tensor":
        return tf.make_ndarray(v.tensor)
    if kind == "shape":
        return [d.size for d in v.shape.dim]
    if kind == "list":
        lst = v.list
        return list(lst.i) or list(lst.f) or [s.decode("utf-8", "replace") for s in lst.s] or list(lst.b)
    return None


def _load_graph(graph: _Graph) -> tuple[Any, list[TfNode]]:
    """The GraphDef imported into a TensorFlow graph (which infers every shape), and its nodes
    in topological order (data inputs; control inputs only order).

    The graph TensorFlow runs has no control edges: running a mapped node must run nothing
    but its data inputs (each mapped or checked pure), never a node a control edge hangs on
    it (a WriteFile, say); once variables are constants, control edges order nothing."""
    tf = _tf()
    g = tf.Graph()
    runnable = type(graph.graph_def)()
    runnable.CopyFrom(graph.graph_def)
    for n in runnable.node:
        data_only = [i for i in n.input if not i.startswith("^")]
        del n.input[:]
        n.input.extend(data_only)
    try:
        with g.as_default():
            tf.graph_util.import_graph_def(runnable, name="")
    except Exception as exc:  # noqa: BLE001  # invalid graphs: unknown ops, bad references, bad attrs
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelImportError(f"{graph.where}: TensorFlow rejects the graph ({type(exc).__name__}: {why})") from None
    nodes: dict[str, TfNode] = {}
    deps: dict[str, set[str]] = {}
    for n in graph.graph_def.node:
        op = g.get_operation_by_name(n.name)
        attrs = {k: _attr(v, tf) for k, v in n.attr.items() if not k.startswith("_")}
        data_inputs = [i if ":" in i else f"{i}:0" for i in n.input if not i.startswith("^")]
        nodes[n.name] = TfNode(n.op, n.name, data_inputs, attrs, len(op.outputs))
        deps[n.name] = {_tensor(i)[0] for i in n.input}
    # Kahn's algorithm, ties broken by the GraphDef's own order (which usually follows the model's
    # layers and time steps): stages then come in the order a reader of the model expects.
    dag = nx.DiGraph()
    dag.add_nodes_from(nodes)
    dag.add_edges_from((d, n) for n, ds in deps.items() for d in ds if d in nodes)
    position = {name: k for k, name in enumerate(nodes)}
    try:
        order = [nodes[n] for n in nx.lexicographical_topological_sort(dag, key=position.__getitem__)]
    except nx.NetworkXUnfeasible:
        cycle = [a for a, _ in nx.find_cycle(dag)]
        raise ModelImportError(f"{graph.where}: the graph has a cycle through node {cycle[0]!r} (a loop; unroll it)") from None
    return g, order


def _import(graph: _Graph, name: str, model: str, model_sha: str | None, weights_dir: str | Path | None, t0: float) -> ImportResult:
    g, order = _load_graph(graph)
    where = graph.where
    em = Emitter(name, f"imported from TensorFlow ({graph.kind}) {Path(model).name}")
    em.simplifications += graph.notes
    input_tensors = {t for t, _ in graph.inputs}
    data: set[str] = set()
    for n in order:
        if f"{n.name}:0" in input_tensors or (n.op not in SHAPE_OPS and any(_tensor(i)[0] in data for i in n.inputs)):
            data.add(n.name)
    missing = [t for t in input_tensors if t.split(":")[0] not in data]
    if missing:
        raise ModelImportError(f"{where}: input {missing[0]!r} is not a node of the graph")
    users: dict[str, list[TfNode]] = defaultdict(list)
    for n in order:
        if n.name in data:
            for i in n.inputs:
                users[i].append(n)
    graph_outputs = {t for t, _ in graph.outputs}
    env, folded_count, unsupported = _constants(g, order, data, users, graph_outputs, where)
    folded: dict[str, str] = {}
    hints = _hints(order, data, graph.outputs, input_tensors)
    for tname, hint in graph.inputs:
        shape = tuple(g.get_tensor_by_name(tname).shape.as_list())
        env[tname] = em.input(hint, shape)
    for n in order:
        if n.name not in data or f"{n.name}:0" in input_tensors:
            continue
        outs = _map_node(n, env, em, folded, users, graph_outputs, hints, unsupported, where)
        for k in range(n.outputs):
            v = outs[k] if k < len(outs) else MISSING
            env[f"{n.name}:{k}"] = v
            _check(g, n, k, v, em, where)
    if unsupported:
        raise UnsupportedModelError(where, unsupported)
    if folded_count:
        what = ", ".join(f"{op} x{c}" for op, c in sorted(folded_count.items()))
        em.simplifications.append(f"constant-folded {sum(folded_count.values())} node(s) by TensorFlow ({what})")
    outputs = []
    for tname, hint in graph.outputs:
        v = env.get(tname, MISSING)
        if v is MISSING:
            raise ModelImportError(f"{where}: graph output {tname!r} is an output the importer does not produce")
        outputs.append((hint, v))
    try:
        pipeline, out_names = em.finish(outputs)
    except ValueError as exc:  # a PipelineError too: values that do not fit together
        raise ModelImportError(f"{where}: {exc}") from None
    input_names = [env[t] for t, _ in graph.inputs]
    # Test inputs drawn inside the operators' domains (em.finish set each input's range), and
    # TensorFlow's own outputs on them: the reference.
    rng = np.random.default_rng(0)
    by_name = {i.name: i for i in pipeline.inputs}
    feeds = {ir: rng.uniform(by_name[ir].low, by_name[ir].high, size=by_name[ir].shape).astype(np.float32) for ir in input_names}
    expected = _run(g, {t: feeds[env[t]] for t, _ in graph.inputs}, [t for t, _ in graph.outputs], where)
    arrays = dict(em.weights)
    arrays.update({f"input::{ir}": x for ir, x in feeds.items()})
    for ir, out in zip(out_names, expected):
        want = pipeline.shape_of(ir)
        arrays[f"output::{ir}"] = np.asarray(out, np.float32).reshape(want)
    digest = hashlib.sha256(b"".join(a.tobytes() for _, a in sorted(arrays.items()))).hexdigest()
    wpath, wsha = write_weights(arrays, Path(weights_dir) if weights_dir else default_weights_dir(), f"{name}-{digest[:16]}")
    source: dict[str, Any] = {
        "kind": "tensorflow",
        "format": graph.kind,
        "model": model,
        "input_names": {ir: t for ir, (t, _) in zip(input_names, graph.inputs)},
        "output_names": {ir: t for ir, (t, _) in zip(out_names, graph.outputs)},
        "weights": str(wpath),
        "weights_sha256": wsha,
    }
    if model_sha:
        source["model_sha256"] = model_sha
    if em.scopes:
        source["scopes"] = em.scopes
    pipeline.source = source
    report = ImportReport(
        stages=len(pipeline.stages),
        inputs=[{"name": ir, "tensorflow": t, "shape": list(pipeline.shape_of(ir))} for ir, (t, _) in zip(input_names, graph.inputs)],
        outputs=[{"name": ir, "tensorflow": t, "shape": list(pipeline.shape_of(ir))} for ir, (t, _) in zip(out_names, graph.outputs)],
        simplifications=em.simplifications,
        unsupported=[],
        ops_mapped=dict(sorted(em.mapped.items())),
        weights={"arrays": len(em.weights), "bytes": int(sum(a.nbytes for a in em.weights.values())), "path": str(wpath), "sha256": wsha},
        seconds=time.perf_counter() - t0,
    )
    return ImportResult(pipeline, report)


PASS_THROUGH = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics"})


def _hints(order: list[TfNode], data: set[str], outputs: list[tuple[str, str]], inputs: set[str]) -> dict[str, str]:
    """Stage-name hints per node ('tensor:0' -> hint): the node's name without the scope every
    computing node shares ('StatefulPartitionedCall/lstm_lm_1/'); a node whose value is a graph
    output (directly or through Identity-like nodes) is named after that output."""
    nodes = [n for n in order if n.name in data and f"{n.name}:0" not in inputs]
    common: list[str] = []
    # Over the nodes that compute: Identity-like ones (a function call's inputs, the outputs) make no stages.
    parts = [n.name.split("/")[:-1] for n in nodes if n.op not in PASS_THROUGH]
    if parts:
        for level in zip(*parts):
            if len(set(level)) != 1:
                break
            common.append(level[0])
    prefix = "/".join(common) + "/" if common else ""
    hints = {f"{n.name}:0": n.name.removeprefix(prefix) for n in nodes}
    by_name = {n.name: n for n in order}
    for t, h in outputs:
        node = by_name.get(t.split(":")[0])
        while node is not None and node.op in PASS_THROUGH and t.endswith(":0") and node.inputs:
            t = node.inputs[0]
            node = by_name.get(t.split(":")[0])
        if t.endswith(":0") and t in hints and not any(hints[t] == x for _, x in outputs):
            hints[t] = h
    return hints


def _map_node(
    n: TfNode,
    env: dict[str, Any],
    em: Emitter,
    folded: dict[str, str],
    users: dict[str, list[TfNode]],
    graph_outputs: set[str],
    hints: dict[str, str],
    unsupported: list[dict[str, str]],
    where: str,
) -> list[Any]:
    """The values of one data node's outputs (POISON when it or what it reads is unsupported)."""
    if n.name in folded:  # a bias or batch norm folded into the convolution / matmul before it
        return [env[folded[n.name]]]
    ins = [env[i] for i in n.inputs]
    if any(v is _POISON for v in ins):
        return [_POISON] * n.outputs
    if n.op not in HANDLERS:
        unsupported.append({"op": n.op, "node": n.name, "reason": "no mapping for this operator"})
        return [_POISON] * n.outputs
    if any(v is MISSING for v in ins):
        unsupported.append({"op": n.op, "node": n.name, "reason": "reads an output its producer does not provide"})
        return [_POISON] * n.outputs
    hint = hints[f"{n.name}:0"]
    start = len(em.b.stages)
    cx = Ctx(em, hint, n, users, graph_outputs, env, folded)
    try:
        outs = HANDLERS[n.op](cx, ins)
    except Unsupported as exc:
        unsupported.append({"op": n.op, "node": n.name, "reason": str(exc)})
        return [_POISON] * n.outputs
    except ValueError as exc:  # an operator rejected its operands: a graph we misread
        raise ModelImportError(f"{where}: node {n.name!r} ({n.op}): {exc}") from None
    em.scoped(onnx_scope(hint), start)
    em.mapped[n.op] += 1
    return outs


def _constants(
    g: Any, order: list[TfNode], data: set[str], users: dict[str, list[TfNode]], graph_outputs: set[str], where: str
) -> tuple[dict[str, Any], Counter[str], list[dict[str, str]]]:
    """Values of the constant tensors that data nodes (or graph outputs) read: Const nodes
    parsed, shape queries from static shapes, the rest evaluated by TensorFlow in one run
    (only ops in CONST_OPS). Returns (tensor -> value, folded op counts, unsupported)."""
    tf = _tf()
    by_name = {n.name: n for n in order}
    env: dict[str, Any] = {}
    feeds: dict[str, np.ndarray] = {}
    needed = [t for t in set(users) | graph_outputs if _tensor(t)[0] not in data and _tensor(t)[0] in by_name]
    todo, seen = list(needed), set()
    unsupported: list[dict[str, str]] = []
    counts: Counter[str] = Counter()
    while todo:  # the constant nodes the needed tensors depend on
        node = by_name[_tensor(todo.pop())[0]]
        if node.name in seen:
            continue
        seen.add(node.name)
        if node.op in SHAPE_OPS:
            src = g.get_tensor_by_name(node.inputs[0]).shape
            if not src.is_fully_defined():
                raise ModelImportError(f"{where}: node {node.name!r} ({node.op}) reads a tensor of unknown shape")
            dims = src.as_list()
            val = {"Shape": dims, "Size": int(np.prod(dims)), "Rank": len(dims)}[node.op]
            feeds[f"{node.name}:0"] = np.asarray(val, dtype=node.attrs.get("out_type", "int32"))
            counts[node.op] += 1
            continue
        if node.op not in CONST_OPS:
            unsupported.append({"op": node.op, "node": node.name, "reason": "not evaluated on constants at import (not a pure operator)"})
            continue
        if node.op != "Const":
            counts[node.op] += 1
        todo += [i for i in node.inputs]
    if unsupported:
        return env, counts, unsupported
    fetch = sorted(t for t in needed if by_name[_tensor(t)[0]].op != "Const" and t not in feeds)
    for t in needed:
        node = by_name[_tensor(t)[0]]
        if node.op == "Const":
            env[t] = np.asarray(node.attrs["value"])
        elif t in feeds:
            env[t] = feeds[t]
    if fetch:
        try:
            with tf.compat.v1.Session(graph=g) as sess:
                vals = sess.run(fetch, feed_dict={g.get_tensor_by_name(t): v for t, v in feeds.items()})
        except Exception as exc:  # noqa: BLE001
            raise ModelImportError(f"{where}: evaluating the graph's constant nodes failed ({_run_error(exc)})") from None
        env.update({t: np.asarray(v) for t, v in zip(fetch, vals)})
    # One array per distinct value: a variable read once per time step (an RNN's recurrent
    # kernel) is one weight input, not one per read.
    distinct: dict[tuple[str, tuple[int, ...], bytes], np.ndarray] = {}
    for t, v in env.items():
        if v.size > 1:
            env[t] = distinct.setdefault((v.dtype.str, v.shape, hashlib.sha256(v.tobytes()).digest()), v)
    return env, counts, unsupported


def _check(g: Any, n: TfNode, k: int, v: Any, em: Emitter, where: str) -> None:
    """Our shape must equal TensorFlow's inferred one, and data must be float32: a mapping bug
    fails here, not silently."""
    if v is MISSING or v is _POISON or isinstance(v, np.ndarray):
        return
    t = g.get_operation_by_name(n.name).outputs[k]
    if t.dtype.name != "float32":
        raise ModelImportError(f"{where}: node {n.name!r} ({n.op}) computes a {t.dtype.name} tensor from data; the IR is float32 only")
    theirs = t.shape.as_list() if t.shape.rank is not None else None
    ours = list(em.shape(v))
    if theirs is None or None in theirs or (not theirs and ours == [1]):
        return
    if ours != theirs:
        raise ModelImportError(f"{where}: node {n.name!r} ({n.op}): imported shape {ours} differs from TensorFlow's {theirs}")


def _run(g: Any, feeds: dict[str, np.ndarray], fetches: list[str], where: str) -> list[np.ndarray]:
    """TensorFlow's outputs of the frozen graph (graph ops only: no Python from the model)."""
    tf = _tf()
    try:
        with tf.compat.v1.Session(graph=g) as sess:
            return [np.asarray(v) for v in sess.run(fetches, feed_dict={g.get_tensor_by_name(t): x for t, x in feeds.items()})]
    except Exception as exc:  # noqa: BLE001
        raise ModelImportError(f"{where}: TensorFlow failed to run the model on the test inputs ({_run_error(exc)})") from None


def _run_error(exc: Exception) -> str:
    """One line from a TensorFlow run error: the failing node and TensorFlow's reason (its
    message opens with 'Graph execution error:' and ends with a stack trace)."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    node = next((x.removeprefix("Node: ") for x in lines if x.startswith("Node: ")), None)
    skip = ("Graph execution error", "Detected at node", "Node: ", "[[", "Original stack trace")
    why = next((x for x in lines if not x.startswith(skip)), type(exc).__name__)
    return f"{type(exc).__name__}: {'node ' + node + ': ' if node else ''}{why}"
