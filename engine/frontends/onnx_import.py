"""Import an ONNX model into the pipeline IR.

The model is loaded and checked, shapes are inferred (static shapes only), batch norms
that follow a convolution are folded into its weights, constant subgraphs (shape
arithmetic and the like) are evaluated with ONNX's numpy reference evaluator, and every
other node is mapped by `onnx_ops.HANDLERS`. Unsupported nodes are collected and reported
together; nothing is imported approximately. The reference of the result is ONNX Runtime
on the original file (engine/reference.py), named in `pipeline.source`.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .common import (
    Emitter,
    ImportReport,
    ImportResult,
    ModelImportError,
    Unsupported,
    UnsupportedModelError,
    Value,
    default_weights_dir,
    fold_batchnorm,
    onnx_scope,
    sanitize,
    write_weights,
)
from .onnx_ops import HANDLERS, SEQUENCE_OPS, Ctx, Node

# ONNX element types a graph input may have (numpy names): float32 is the IR's own; the
# others are carried in float32 buffers (see import_onnx).
INPUT_TYPES = {1: "float32", 10: "float16", 11: "float64", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool"}
# (op, input position) where an input is a shape or axes, so its value must be known at import.
SHAPE_SLOTS = {
    "Expand": (1,), "Reshape": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3), "Unsqueeze": (1,), "Squeeze": (1,), "Split": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,),
    "ReduceMin": (1,), "Resize": (1, 2, 3), "Upsample": (1,), "TopK": (1,), "OneHot": (1,), "SplitToSequence": (1,),
    "SequenceAt": (1,), "SequenceInsert": (2,), "SequenceErase": (1,),
}  # fmt: skip
# Ops whose output depends only on the input's (static) shape: constant even on data.
SHAPE_OPS = ("Shape", "Size")
# Never folded: their value is not a function of their inputs.
NONDETERMINISTIC = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli")
# Sequences are lists of values, resolved by their handlers; an If with a constant condition is
# its branch, inlined (its branches read outer values that may be data).
NEVER_FOLDED = frozenset(NONDETERMINISTIC) | SEQUENCE_OPS | {"If"}
SMALL_INITIALIZER = 4096  # elements: larger initializers are weights, not shape arithmetic
_MISSING = object()  # an output a handler did not produce (e.g. a pooling's Indices)
_POISON = object()  # downstream of an unsupported node: skipped, not reported again


def import_onnx(
    path: str | Path,
    weights_dir: str | Path | None = None,
    input_values: dict[str, np.ndarray] | None = None,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
) -> ImportResult:
    """Import an .onnx file; weights go to an .npz in `weights_dir` (default: the user cache).

    `input_values` fixes graph inputs to given values (constants of the pipeline): an input
    that gives a shape (Expand's, Reshape's: `shape_inputs`) must be fixed, since the IR's
    shapes are static. `input_shapes` gives inputs with dynamic dimensions a static shape
    (the model is imported at that shape). Integer inputs otherwise are data, carried as float32 values (exact
    below 2**24); float64 / float16 inputs are computed in float32 (both reported)."""
    t0 = time.perf_counter()
    path = Path(path).expanduser().resolve()
    model, model_sha, light = _load(path)
    if input_shapes:
        _set_input_shapes(model, light, input_shapes, path)
    graph = model.graph
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    types = _infer(light, path)
    env: dict[str, Any] = _initializers(graph, path)
    em = Emitter(sanitize(path.stem, "model"), f"imported from {path.name}")
    input_names: dict[str, str] = {}
    dtypes: dict[str, str] = {}  # IR input -> numpy dtype of the ONNX input, where not float32
    fixed: dict[str, Any] = {}
    scalars: list[str] = []
    for name, value in (input_values or {}).items():
        if name not in {vi.name for vi in graph.input} or name in env:
            raise ModelImportError(f"{path}: input_values names {name!r}, which is not a graph input")
        env[name] = np.asarray(value)
        fixed[name] = {"dtype": str(env[name].dtype), "shape": list(env[name].shape), "value": env[name].reshape(-1).tolist()}
        em.simplifications.append(f"input {name!r} fixed to its given value {env[name].reshape(-1).tolist()[:8]} (a constant)")
    for vi in graph.input:
        if vi.name in env:
            continue
        shape = _static_shape(vi, path)
        elem = vi.type.tensor_type.elem_type
        if elem not in INPUT_TYPES:
            raise ModelImportError(f"{path}: input {vi.name!r} has element type {_type_name(elem)}; the IR computes on numbers only")
        if not shape:  # a scalar input: a one-element tensor (ONNX broadcasts it the same way)
            shape = (1,)
            scalars.append(vi.name)
            em.simplifications.append(f"input {vi.name!r} is a scalar: imported as a one-element tensor")
        env[vi.name] = em.input(vi.name, shape)
        input_names[env[vi.name]] = vi.name
        if elem != 1:
            dtypes[env[vi.name]] = INPUT_TYPES[elem]
            what = "integer values carried as float32 (exact below 2**24)" if "int" in INPUT_TYPES[elem] else "computed in float32"
            em.simplifications.append(f"input {vi.name!r} is {INPUT_TYPES[elem]}: {what}")
    nodes = [_node(n, k, path) for k, n in enumerate(graph.node)]
    _check_references(nodes, set(env), [o.name for o in graph.output], path)
    graph_outputs = {o.name for o in graph.output}
    try:
        nodes = _fold_batchnorms(nodes, env, graph_outputs, em.simplifications)
        nodes = _fuse_matmul_bias(nodes, env, graph_outputs, types, em.simplifications)
        _walk(nodes, env, em, opset, types, graph_outputs, path)
        outputs = []
        for o in graph.output:
            if env.get(o.name) is _MISSING:
                raise ModelImportError(f"{path}: graph output {o.name!r} is an output the importer does not produce")
            if isinstance(env[o.name], list):
                node = next(n for n in nodes if o.name in n.outputs)
                reason = "its result, a tensor sequence, is a graph output (the IR's outputs are tensors)"
                raise UnsupportedModelError(str(path), [{"op": node.op, "node": node.hint, "reason": reason}])
            outputs.append((o.name, env[o.name]))
        try:
            pipeline, out_names = em.finish(outputs)
        except Unsupported as exc:  # an output that is a constant of no numeric type
            raise UnsupportedModelError(str(path), [{"op": "graph output", "node": outputs[0][0], "reason": str(exc)}]) from None
    except ModelImportError:
        raise
    except ValueError as exc:  # a PipelineError too: a model whose values do not fit together
        raise ModelImportError(f"{path}: {exc}") from None
    source: dict[str, Any] = {
        "kind": "onnx",
        "model": str(path),
        "model_sha256": model_sha,
        "input_names": input_names,
        "output_names": {ir: o.name for ir, o in zip(out_names, graph.output)},
    }
    if dtypes:
        source["input_dtypes"] = dtypes
    if fixed:
        source["fixed_inputs"] = fixed
    if scalars:
        source["scalar_inputs"] = scalars
    index_ranges = {n: r for n, r in em.index_ranges.items() if n in input_names}
    if index_ranges:
        source["index_ranges"] = index_ranges
    weights_info: dict[str, Any] = {"arrays": len(em.weights), "bytes": int(sum(a.nbytes for a in em.weights.values()))}
    if em.weights:
        wpath, wsha = write_weights(
            em.weights, Path(weights_dir) if weights_dir else default_weights_dir(), f"{sanitize(path.stem, 'model')}-{model_sha[:16]}"
        )
        source.update(weights=str(wpath), weights_sha256=wsha)
        weights_info.update(path=str(wpath), sha256=wsha)
    if em.scopes:
        source["scopes"] = em.scopes
    pipeline.source = source
    report = ImportReport(
        stages=len(pipeline.stages),
        inputs=[{"name": n, "onnx": o, "shape": list(pipeline.shape_of(n))} for n, o in input_names.items()],
        outputs=[{"name": n, "onnx": o.name, "shape": list(pipeline.shape_of(n))} for n, o in zip(out_names, graph.output)],
        simplifications=em.simplifications,
        unsupported=[],
        ops_mapped=dict(sorted(em.mapped.items())),
        weights=weights_info,
        seconds=time.perf_counter() - t0,
    )
    return ImportResult(pipeline, report)


def _set_input_shapes(model: Any, light: Any, shapes: dict[str, tuple[int, ...]], path: Path) -> None:
    """Static shapes for graph inputs (in the loaded model and the one shape inference reads)."""
    for g in {id(model.graph): model.graph, id(light.graph): light.graph}.values():
        by_name = {vi.name: vi for vi in g.input}
        for name, shape in shapes.items():
            if name not in by_name:
                raise ModelImportError(f"{path}: input_shapes names {name!r}, which is not a graph input")
            dims = by_name[name].type.tensor_type.shape.dim
            if len(dims) != len(shape):
                raise ModelImportError(f"{path}: input_shapes gives {name!r} rank {len(shape)}; the model declares rank {len(dims)}")
            for d, n in zip(dims, shape):
                if d.HasField("dim_value") and d.dim_value != n:
                    raise ModelImportError(f"{path}: input_shapes gives {name!r} shape {list(shape)}; the model fixes a size {d.dim_value}")
                d.dim_value = int(n)


def shape_inputs(model: Any) -> list[str]:
    """Graph inputs (not initializers) that some node reads as a shape or axes: their values
    must be given (`import_onnx(input_values=...)`), the IR's shapes being static."""
    init = {t.name for t in model.graph.initializer}
    names = {i.name for i in model.graph.input if i.name not in init}
    found = [x for n in model.graph.node for k, x in enumerate(n.input) if k in SHAPE_SLOTS.get(n.op_type, ()) and x in names]
    return list(dict.fromkeys(found))


def _type_name(elem: int) -> str:
    from onnx import TensorProto  # noqa: PLC0415

    try:
        return TensorProto.DataType.Name(elem)
    except ValueError:
        return f"#{elem}"


def _walk(
    nodes: list[Node], env: dict[str, Any], em: Emitter, opset: int, types: dict[str, Any], graph_outputs: set[str], path: Path
) -> None:
    """Fold or map every node in order. Every problem is collected (unmapped types, then the
    cases a mapping rejects) and raised at once; what only reads a bad value is skipped."""
    unmapped = _unmapped(nodes, {k for k, v in env.items() if isinstance(v, np.ndarray)})
    unsupported: list[dict[str, str]] = []
    folded: Counter[str] = Counter()
    queue, pos = list(nodes), 0
    while pos < len(queue):
        node = queue[pos]
        pos += 1
        ins = [None if not i else env[i] for i in node.inputs]
        outs: list[Any]
        if id(node) in unmapped:
            unsupported.append(unmapped[id(node)])
            outs = [_POISON] * len(node.outputs)
        elif any(v is _POISON for v in ins):
            outs = [_POISON] * len(node.outputs)
        elif node.op == "If" and isinstance(ins[0], np.ndarray):  # a constant condition: the branch taken, inlined
            taken = bool(np.asarray(ins[0]).reshape(-1)[0])
            branch = _branch_nodes(node, taken, env, path)
            unmapped.update(_unmapped(branch, {k for k, v in env.items() if isinstance(v, np.ndarray)}))
            queue[pos:pos] = branch
            em.simplifications.append(f"If {node.hint!r}: its condition is constant, the {'then' if taken else 'else'} branch inlined")
            continue  # its outputs are bound by the branch's last (Identity) nodes
        elif node.op == "If":
            unsupported.append({"op": "If", "node": node.hint, "reason": "control flow on a computed condition"})
            outs = [_POISON] * len(node.outputs)
        elif node.op in SHAPE_OPS or all(v is None or isinstance(v, np.ndarray) for v in ins) and node.op not in NEVER_FOLDED:
            try:
                outs = _fold(node, ins, em, opset)
                folded[node.op] += 1
            except Unsupported as exc:
                unsupported.append({"op": node.op, "node": node.hint, "reason": str(exc)})
                outs = [_POISON] * len(node.outputs)
        else:
            try:
                _check_integer_op(node, types)
                outs = _map(node, ins, em, opset, graph_outputs, types)
            except Unsupported as exc:
                unsupported.append({"op": node.op, "node": node.hint, "reason": str(exc)})
                outs = [_POISON] * len(node.outputs)
            except ValueError as exc:  # an operator rejected its operands: a model we misread
                raise ModelImportError(f"{path}: node {node.hint!r} ({node.op}): {exc}") from None
        for k, name in enumerate(node.outputs):
            if name:
                env[name] = outs[k] if k < len(outs) else _MISSING
                _check_shape(em, node, name, env[name], types, path)
    if unsupported:
        raise UnsupportedModelError(str(path), unsupported)
    if folded:
        what = ", ".join(f"{op} x{n}" for op, n in sorted(folded.items()))
        em.simplifications.append(f"constant-folded {sum(folded.values())} node(s) ({what})")


# Operators whose result on integer values is the same integer computed in float32 (exactly,
# below 2**24): integer data may flow through these only.
# A sequence op moves tensors around; SequenceLength counts them (a constant).
INTEGER_EXACT = SEQUENCE_OPS | frozenset(
    "Identity Dropout Add Sub Mul Neg Abs Relu Max Min Sum Sign Concat Gather Squeeze Unsqueeze Reshape Transpose Flatten Slice Expand "
    "Tile Pad Split ReduceSum ReduceMax ReduceMin Where Cast Equal Less Greater LessOrEqual GreaterOrEqual Not And Or".split()
)


def _check_integer_op(node: Node, types: dict[str, Any]) -> None:
    ints_out = [o for o in node.outputs if o and types.get(o, (1,))[0] in (2, 3, 5, 6, 7, 9)]
    if ints_out and node.op not in INTEGER_EXACT:
        raise Unsupported(f"{node.op} computing integers from data (integers are carried in float32 through exact operators only)")


def _map(node: Node, ins: list[Any], em: Emitter, opset: int, graph_outputs: set[str], types: dict[str, Any]) -> list[Any]:
    bad = [k for k, v in enumerate(ins) if v is _MISSING]
    if bad:
        raise Unsupported(f"reads an output its producer does not provide ({node.inputs[bad[0]]!r})")
    # A graph output's stage is named after the output; other stages after their node.
    hint = node.outputs[0] if node.outputs and node.outputs[0] in graph_outputs else node.hint
    for i, v in zip(node.inputs, ins):
        em.name_const(v, i)  # weight inputs are named after their initializers
    start = len(em.b.stages)
    outs = HANDLERS[node.op](Ctx(em, opset, hint, types), node, ins)
    em.scoped(onnx_scope(node.name), start)
    em.mapped[node.op] += 1
    return outs


# --- loading and checking ---------------------------------------------------------------
def _initializers(graph: Any, path: Path) -> dict[str, np.ndarray]:
    from onnx import numpy_helper  # noqa: PLC0415

    out = {}
    for t in graph.initializer:
        try:
            out[t.name] = numpy_helper.to_array(t)
        except Exception as exc:  # noqa: BLE001  # the checker saw the weights' shapes, not their data
            raise ModelImportError(f"{path}: initializer {t.name!r} is malformed ({type(exc).__name__}: {exc})") from None
    return out


def _load(path: Path) -> tuple[Any, str, Any]:
    """The model, the file's sha256 (the file is read once for both) and the model without
    its weights, checked (the checker and shape inference would otherwise each serialize
    and parse all of a ResNet-50's 100 MB again; the weights are checked as they convert)."""
    import onnx  # noqa: PLC0415
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data  # noqa: PLC0415

    if not path.is_file():
        raise ModelImportError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelImportError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        model = onnx.load_model_from_string(data)
        if any(uses_external_data(t) for t in model.graph.initializer):
            load_external_data_for_model(model, str(path.parent))
    except Exception as exc:  # noqa: BLE001  # protobuf raises several types for a bad file
        why = f"{type(exc).__name__}: {exc}"
        raise ModelImportError(f"{path}: not a readable ONNX model ({why}); truncated, or not an ONNX file?") from None
    if not model.graph.node and not model.graph.output:
        raise ModelImportError(f"{path}: not an ONNX model (no graph: empty, truncated or another file type)")
    _check_text(model, path, "model")
    light = _without_weights(model)
    try:
        onnx.checker.check_model(light)
    except Exception as exc:  # noqa: BLE001
        raise ModelImportError(f"{path}: invalid ONNX model: {str(exc).strip().splitlines()[0]}") from None
    return model, hashlib.sha256(data).hexdigest(), light


def _check_text(msg: Any, path: Path, where: str) -> None:
    """Every text field is UTF-8: protobuf does not check ONNX's (proto2) strings, and hands
    one that is not over as bytes, which the importer would trip on much later."""
    for field, value in msg.ListFields():
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        items = list(value) if repeated else [value]
        if field.type == field.TYPE_STRING and any(isinstance(v, bytes) for v in items):
            raise ModelImportError(f"{path}: {where}.{field.name} is not UTF-8 text")
        if field.type == field.TYPE_MESSAGE:
            for k, v in enumerate(items):
                _check_text(v, path, f"{where}.{field.name}" + (f"[{k}]" if repeated else ""))


def _infer(model: Any, path: Path) -> dict[str, tuple[int, list[int | None]]]:
    """Element type and (possibly partial) shape of every value shape inference knows."""
    import onnx  # noqa: PLC0415

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001
        # One line: the first node it names (later ones usually follow from it) and how many more.
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
        nodes = [x for x in lines if "(op_type:" in x] or lines or [type(exc).__name__]
        more = f" (and {len(nodes) - 1} more)" if len(nodes) > 1 else ""
        raise ModelImportError(f"{path}: ONNX shape inference failed: {nodes[0]}{more}") from None
    out = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        out[vi.name] = (tt.elem_type, [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim])
    return out


def _without_weights(model: Any) -> Any:
    """The model with its large initializers as typed graph inputs: shape inference needs their
    shapes, not their values (small ones, such as Reshape's shape, stay for data propagation),
    and a model with 100 MB of weights is otherwise serialized for it."""
    from onnx import helper  # noqa: PLC0415

    g = model.graph
    big = [t for t in g.initializer if math.prod(t.dims) > SMALL_INITIALIZER]
    if not big:
        return model
    declared = {i.name for i in g.input}
    inputs = list(g.input) + [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in big if t.name not in declared]
    small = [t for t in g.initializer if math.prod(t.dims) <= SMALL_INITIALIZER]
    graph = helper.make_graph(list(g.node), g.name, inputs, list(g.output), small, value_info=list(g.value_info))
    light = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    light.functions.extend(model.functions)
    return light


def _static_shape(vi: Any, path: Path) -> tuple[int, ...]:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise ModelImportError(f"{path}: input {vi.name!r} has no shape; re-export the model with static input shapes")
    shape = []
    for k, d in enumerate(tt.shape.dim):
        if not d.HasField("dim_value") or d.dim_value <= 0:
            what = f"'{d.dim_param}'" if d.dim_param else "an unknown size"
            raise ModelImportError(
                f"{path}: input {vi.name!r} has a dynamic dimension {what} at axis {k}; only static shapes are supported "
                "(re-export with fixed sizes, e.g. without dynamic_axes)"
            )
        shape.append(int(d.dim_value))
    return tuple(shape)


def _node(n: Any, k: int, path: Path) -> Node:
    from onnx import helper, numpy_helper  # noqa: PLC0415

    attrs = {}
    for a in n.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            try:
                v = v.decode()
            except UnicodeDecodeError:
                raise ModelImportError(f"{path}: node {n.name or k!r} ({n.op_type}): attribute {a.name!r} is not UTF-8 text") from None
        elif hasattr(v, "dims") and hasattr(v, "data_type"):
            v = numpy_helper.to_array(v)
        attrs[a.name] = v
    return Node(n.op_type, n.name or _name_from_outputs(n, k), list(n.input), list(n.output), attrs, n.domain, n)


def _name_from_outputs(n: Any, k: int) -> str:
    """A name for a node the exporter left unnamed: its first output tensor's name, which
    usually carries the module path ('/layer1/layer1.0/conv1/Conv_output_0', so the stage
    groups with its layer); a bare number ('123') gets the operator in front ('Conv_123').
    The emitter sanitizes it to an identifier and makes it unique."""
    out = next((o for o in n.output if o), "")
    if not out:
        return f"{n.op_type}_{k}"
    out = re.sub(r"_output_\d+$", "", out)  # PyTorch's exporter: '/layer1/relu/Relu_output_0' names node '/layer1/relu/Relu'
    return out if not out.lstrip("/")[:1].isdigit() else f"{n.op_type}_{out}"


def _branch_nodes(node: Node, taken: bool, env: dict[str, Any], path: Path) -> list[Node]:
    """The nodes of an If's branch (its initializers into `env`), then an Identity per output
    binding the branch's result to the If's output name."""
    from onnx import helper  # noqa: PLC0415

    graph = node.attrs["then_branch" if taken else "else_branch"]
    env.update(_initializers(graph, path))
    out = [_node(n, k, path) for k, n in enumerate(graph.node)]
    for k, (src, dst) in enumerate(zip([o.name for o in graph.output], node.outputs)):
        if dst:
            out.append(Node("Identity", f"{node.hint}_out{k}", [src], [dst], {}, "", helper.make_node("Identity", [src], [dst])))
    return out


def _check_references(nodes: list[Node], defined: set[str], outputs: list[str], path: Path) -> None:
    known = set(defined)
    for node in nodes:
        for i in node.inputs:
            if i and i not in known:
                raise ModelImportError(
                    f"{path}: node {node.hint!r} ({node.op}) reads {i!r}, which nothing defines before it (malformed or truncated file?)"
                )
        known.update(o for o in node.outputs if o)
    for o in outputs:
        if o not in known:
            raise ModelImportError(f"{path}: graph output {o!r} is never computed (malformed or truncated file?)")


def _unmapped(nodes: list[Node], consts: set[str]) -> dict[int, dict[str, str]]:
    """Nodes (by id) that are neither constant nor of a mapped type, with their report entry."""
    bad = {}
    for node in nodes:
        const = node.op in SHAPE_OPS or (node.op not in NEVER_FOLDED and all(not i or i in consts for i in node.inputs))
        if const:
            consts.update(node.outputs)
        elif node.domain not in ("", "ai.onnx") or (node.op not in HANDLERS and node.op != "If"):
            domain = f" (domain {node.domain})" if node.domain not in ("", "ai.onnx") else ""
            bad[id(node)] = {"op": node.op, "node": node.hint, "reason": f"no mapping for this operator{domain}"}
    return bad


def _check_shape(em: Emitter, node: Node, name: str, v: Any, types: dict[str, tuple[int, list[int | None]]], path: Path) -> None:
    """Our shape must equal ONNX's inferred one: a mapping bug fails here, not silently."""
    if v is _MISSING or v is _POISON or name not in types:
        return
    theirs = types[name][1]
    ours = list(em.shape(v))
    if isinstance(v, str) and types[name][0] not in (0, 1) and types[name][0] not in INPUT_TYPES:
        raise ModelImportError(f"{path}: node {node.hint!r} ({node.op}) computes a {_type_name(types[name][0])} tensor from data")
    if None in theirs or (not theirs and ours == [1]):
        return
    if ours != theirs:
        raise ModelImportError(f"{path}: node {node.hint!r} ({node.op}): imported shape {ours} differs from ONNX's inferred {theirs}")


# --- graph rewrites -----------------------------------------------------------------------
def _fold_batchnorms(nodes: list[Node], env: dict[str, Any], graph_outputs: set[str], notes: list[str]) -> list[Node]:
    """Conv -> BatchNormalization, where only the BN reads the conv: new conv weights, no BN."""
    producers = {o: n for n in nodes for o in n.outputs}
    users = Counter(i for n in nodes for i in n.inputs)
    dropped: set[int] = set()
    for bn in nodes:
        if (
            bn.op != "BatchNormalization"
            or bn.attrs.get("training_mode", 0)
            or len([o for o in bn.outputs if o]) != 1
            or not bn.attrs.get("spatial", 1)
        ):
            continue
        conv = producers.get(bn.inputs[0])
        if conv is None or conv.op != "Conv" or users[bn.inputs[0]] != 1 or bn.inputs[0] in graph_outputs:
            continue
        w = env.get(conv.inputs[1])
        b = env.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        params = [p for p in (env.get(i) for i in bn.inputs[1:5]) if isinstance(p, np.ndarray)]
        if not isinstance(w, np.ndarray) or len(params) != 4:  # scale, B, mean, var: all constants
            continue
        if len(conv.inputs) > 2 and conv.inputs[2] and not isinstance(b, np.ndarray):
            continue
        c = w.shape[0] if w.ndim else 0
        per_channel = [*params, *([b] if b is not None else [])]
        if any(x.shape != (c,) for x in per_channel):
            shapes = [list(x.shape) for x in per_channel]
            raise ValueError(f"BatchNormalization {bn.hint!r} after Conv {conv.hint!r}: parameter shapes {shapes}, Conv channels {c}")
        gamma, beta, mean, var = params
        w2, b2 = fold_batchnorm(w, b, gamma, beta, mean, var, float(bn.attrs.get("epsilon", 1e-5)))
        wname, bname = f"{conv.hint}::bn_folded_W", f"{conv.hint}::bn_folded_B"
        env[wname], env[bname] = w2, b2
        conv.inputs = [conv.inputs[0], wname, bname]
        conv.outputs = [bn.outputs[0]]
        conv.proto = _rewired(conv)
        dropped.add(id(bn))
        notes.append(f"BatchNormalization {bn.hint!r} folded into Conv {conv.hint!r} (new weight and bias arrays)")
    return [n for n in nodes if id(n) not in dropped]


def _fuse_matmul_bias(
    nodes: list[Node], env: dict[str, Any], graph_outputs: set[str], types: dict[str, Any], notes: list[str]
) -> list[Node]:
    """MatMul -> Add(constant bias along the last axis), the MatMul read only by the Add: one
    matmul stage whose reduction starts from the bias (a linear layer as PyTorch exports it)."""
    producers = {o: n for n in nodes for o in n.outputs}
    users = Counter(i for n in nodes for i in n.inputs)
    dropped: set[int] = set()
    for add in nodes:
        if add.op != "Add" or len(add.inputs) != 2:
            continue
        for k in (0, 1):
            mm, bias = producers.get(add.inputs[k]), env.get(add.inputs[1 - k])
            if mm is None or mm.op != "MatMul" or len(mm.inputs) != 2 or users[add.inputs[k]] != 1 or add.inputs[k] in graph_outputs:
                continue
            out_shape = types.get(mm.outputs[0], (0, [None]))[1]
            if not isinstance(bias, np.ndarray) or bias.ndim != 1 or None in out_shape or len(out_shape) < 2:
                continue
            if (
                bias.shape[0] != out_shape[-1]
                or isinstance(env.get(mm.inputs[0]), np.ndarray)
                and isinstance(env.get(mm.inputs[1]), np.ndarray)
            ):
                continue
            mm.inputs = [*mm.inputs, add.inputs[1 - k]]
            mm.outputs = list(add.outputs)
            mm.proto = _rewired(mm)
            dropped.add(id(add))
            notes.append(f"Add {add.hint!r} folded into MatMul {mm.hint!r} (the bias initializes the sum)")
            break
    return [n for n in nodes if id(n) not in dropped]


def _rewired(node: Node) -> Any:
    """A copy of the node's proto with its current inputs and outputs (for constant folding)."""
    proto = type(node.proto)()
    proto.CopyFrom(node.proto)
    del proto.input[:], proto.output[:]
    proto.input.extend(node.inputs)
    proto.output.extend(node.outputs)
    return proto


def _fold(node: Node, ins: list[Value | None], em: Emitter, opset: int) -> list[np.ndarray]:
    """Evaluate a node on constants (shape ops read the static shape of data tensors)."""
    if node.op in SHAPE_OPS:
        if ins[0] is None:
            raise ValueError(f"{node.op} {node.hint!r} has no input")
        shape = em.shape(ins[0])
        if node.op == "Size":
            return [np.array(int(np.prod(shape)), dtype=np.int64)]
        start, end = int(node.attrs.get("start", 0)), node.attrs.get("end")
        return [np.array(shape[start : None if end is None else int(end)], dtype=np.int64)]
    from onnx import TypeProto, helper  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    feeds = {i: np.asarray(v) for i, v in zip(node.inputs, ins) if i and v is not None}
    try:
        # A one-node model at the model's opset: evaluating the bare node would use the newest
        # opset's definition (opset-9 Unsqueeze's `axes` attribute fails there).
        graph = helper.make_graph(
            [node.proto],
            "fold",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for i, v in feeds.items()],
            [helper.make_value_info(o, TypeProto()) for o in node.outputs if o],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        outs = ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # noqa: BLE001  # ONNX's evaluator has no clear message to pass on: reported as unsupported
        raise Unsupported("a constant computation the importer cannot evaluate (constant folding failed)") from None
    got = iter([np.asarray(o) for o in outs])
    return [next(got) if o else _MISSING for o in node.outputs]  # type: ignore[misc]  # _MISSING marks an unnamed output
