"""Import a PyTorch nn.Module into the pipeline IR via torch.fx.

The module is traced symbolically (torch.fx.symbolic_trace), shapes are propagated on the
example inputs (ShapeProp), BatchNorm modules that only read a Conv2d are folded into its
weights, nodes that do not depend on the inputs (parameters, shape arithmetic) are
evaluated, and the rest is mapped by `torch_ops`. The module runs once in eval mode under
no_grad on the example inputs: those inputs and its outputs are stored beside the weights
(`input::NAME`, `output::NAME`) and are the pipeline's reference.

`load_module_from_file` imports a user's .py file, which runs its code: it exists for the
explicit `import path/model.py:Class` command, never for files opened otherwise.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from . import torch_views  # noqa: F401  # registers the matmul / attention / shape mappings
from .common import (
    Emitter,
    ImportReport,
    ImportResult,
    ModelImportError,
    Unsupported,
    UnsupportedModelError,
    default_weights_dir,
    fold_batchnorm,
    sanitize,
    write_weights,
)
from .torch_ops import FUNCTIONS, METHODS, MODULES, Args

# Methods / attributes that read only a tensor's static shape: constant even on data.
SHAPE_METHODS = ("size", "dim")
SHAPE_ATTRS = ("shape", "ndim")
_POISON = object()  # downstream of an unsupported node: skipped, not reported again
MAX_INPUT_ELEMENTS = 2**28  # 1 GiB of float32 per example input: a larger one is a typo (and may not fit in memory)


def import_torch(
    module: nn.Module, example_inputs: tuple[torch.Tensor, ...], name: str | None = None, weights_dir: str | Path | None = None
) -> ImportResult:
    """Import `module` as called on `example_inputs` (static shapes: those of the examples)."""
    t0 = time.perf_counter()
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    cls = type(module).__name__
    name = sanitize(name or cls, "model")
    was_training = module.training
    module.eval()
    try:
        try:
            with torch.no_grad():
                expected = _flatten_outputs(module(*example_inputs))
        except Exception as exc:  # noqa: BLE001  # the module's own code rejects the inputs (wrong rank, count...)
            shapes = ", ".join(f"input {k} of shape {list(x.shape)}" for k, x in enumerate(example_inputs))
            why = (str(exc).strip().splitlines() or [""])[0]
            raise ModelImportError(f"{cls}: calling it on {shapes or 'no inputs'} failed ({type(exc).__name__}: {why})") from None
        try:
            gm = torch.fx.symbolic_trace(module)
        except Exception as exc:  # noqa: BLE001  # fx raises many types for untraceable code
            raise ModelImportError(f"{cls}: torch.fx cannot trace it ({type(exc).__name__}: {exc})") from None
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
        em, outputs, input_names = _convert(gm, cls, example_inputs, name)
    finally:
        module.train(was_training)
    pipeline, out_names = em.finish(outputs)
    ranged = {i.name: i for i in pipeline.inputs if not i.weight and (i.low, i.high) != (-1.0, 1.0)}
    if ranged:  # an operator's domain needs other data than the examples: record outputs on data inside it
        g = torch.Generator().manual_seed(0)
        example_inputs = tuple(
            torch.empty_like(ex).uniform_(ranged[ir].low, ranged[ir].high, generator=g) if ir in ranged else ex
            for ir, ex in zip(input_names, example_inputs)
        )
        try:
            module.eval()
            with torch.no_grad():
                expected = _flatten_outputs(module(*example_inputs))
        finally:
            module.train(was_training)
    if len(out_names) != len(expected):
        raise ModelImportError(f"{cls}: traced {len(out_names)} outputs but the module returned {len(expected)}")
    arrays = dict(em.weights)
    for ir, ex in zip(input_names, example_inputs):
        arrays[f"input::{ir}"] = ex.detach().numpy().astype(np.float32)
    for ir, out in zip(out_names, expected):
        arrays[f"output::{ir}"] = out
    digest = hashlib.sha256(b"".join(a.tobytes() for _, a in sorted(arrays.items()))).hexdigest()
    wpath, wsha = write_weights(arrays, Path(weights_dir) if weights_dir else default_weights_dir(), f"{name}-{digest[:16]}")
    pipeline.source = {"kind": "torch", "module": cls, "weights": str(wpath), "weights_sha256": wsha}
    if em.scopes:
        pipeline.source["scopes"] = em.scopes
    report = ImportReport(
        stages=len(pipeline.stages),
        inputs=[{"name": n, "shape": list(pipeline.shape_of(n))} for n in input_names],
        outputs=[{"name": n, "shape": list(pipeline.shape_of(n))} for n in out_names],
        simplifications=em.simplifications,
        unsupported=[],
        ops_mapped=dict(sorted(em.mapped.items())),
        weights={"arrays": len(em.weights), "bytes": int(sum(a.nbytes for a in em.weights.values())), "path": str(wpath), "sha256": wsha},
        seconds=time.perf_counter() - t0,
    )
    return ImportResult(pipeline, report)


def _convert(
    gm: torch.fx.GraphModule, cls: str, example_inputs: tuple[torch.Tensor, ...], name: str
) -> tuple[Emitter, list[tuple[str, Any]], list[str]]:
    em = Emitter(name, f"imported from PyTorch module {cls}")
    nodes = list(gm.graph.nodes)
    folds = _batchnorm_folds(gm, nodes)
    data = _data_nodes(nodes)
    unmapped = _unmapped(gm, nodes, data)
    env: dict[torch.fx.Node, Any] = {}
    params: dict[str, np.ndarray] = {}
    input_names: list[str] = []
    outputs: list[tuple[str, Any]] = []
    folded: Counter[str] = Counter()
    unsupported: list[dict[str, str]] = []
    out_hints = {n: h for h, n in _named_outputs(nodes[-1].args[0]) if isinstance(n, torch.fx.Node)}
    placeholders = iter(example_inputs)
    for node in nodes:  # every problem is collected, then reported at once
        if node in unmapped:
            unsupported.append(unmapped[node])
        if node in unmapped or any(env[i] is _POISON for i in node.all_input_nodes):
            env[node] = _POISON
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        if node.op == "placeholder":
            ex = next(placeholders)
            if ex.dtype != torch.float32:
                raise ModelImportError(f"{cls}: input {node.name!r} is {ex.dtype}; only float32 inputs are supported")
            env[node] = em.input(node.name, tuple(ex.shape))
            input_names.append(env[node])
        elif node.op == "output":
            outputs = _named_outputs(args[0])
        elif node.op == "get_attr":
            env[node] = _param(gm, node.target, params, em)
        elif node not in data or _is_shape_query(node):
            env[node] = _evaluate(gm, node, env, em)
            if node.op != "get_attr":
                folded[_kind(node)] += 1
        else:
            try:
                start = len(em.b.stages)
                env[node] = _map(gm, node, args, kwargs, em, params, folds, out_hints.get(node, node.name))
                em.scoped(_scope(node), start)
            except Unsupported as exc:
                unsupported.append({"op": _kind(node), "node": node.name, "reason": str(exc)})
                env[node] = _POISON
                continue
            except ValueError as exc:  # an operator rejected its operands: a graph we misread
                raise ModelImportError(f"{cls}: node {node.name!r} ({_kind(node)}): {exc}") from None
            _check_meta(node, env[node], em, cls)
    if unsupported:
        raise UnsupportedModelError(cls, unsupported)
    if folded:
        what = ", ".join(f"{k} x{n}" for k, n in sorted(folded.items()))
        em.simplifications.append(f"constant-folded {sum(folded.values())} node(s) ({what})")
    return em, outputs, input_names


def _name(node: torch.fx.Node) -> str:
    """A call_module / call_method / get_attr node's target: a qualified name or a method name
    (fx types every target as a callable or a string; only call_function targets are callables)."""
    assert isinstance(node.target, str), f"{node.op} node {node.name!r} has a callable target"
    return node.target


def _map(gm: torch.fx.GraphModule, node: torch.fx.Node, args: Any, kwargs: Any, em: Emitter, params: dict, folds: dict, hint: str) -> Any:
    module = gm.get_submodule(_name(node)) if node.op == "call_module" else None
    handler = _handler(gm, node)
    target = str(node.target) if node.op == "call_module" else ""

    def param(attr: str) -> np.ndarray:
        return _param(gm, f"{target}.{attr}", params, em)

    a = Args(em, hint, tuple(args), dict(kwargs), module, target, folds.get(node), param)
    em.mapped[_kind(node)] += 1
    return handler(a)


def _scope(node: torch.fx.Node) -> str:
    """The node's module path ('layer1/layer1.0/layer1.0.conv1'), from what fx records while tracing."""
    stack = node.meta.get("nn_module_stack") or {}
    return "/".join(str(v[0]) if isinstance(v, tuple) else str(k).split("@")[0] for k, v in stack.items())


def _handler(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Any:
    if node.op == "call_module":
        return MODULES.get(type(gm.get_submodule(_name(node))))
    if node.op == "call_method":
        return METHODS.get(_name(node))
    return FUNCTIONS.get(node.target)


def _kind(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        gm = node.graph.owning_module
        assert gm is not None, "a traced graph belongs to its GraphModule"
        return type(gm.get_submodule(_name(node))).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    return getattr(node.target, "__name__", str(node.target))


# --- analysis ---------------------------------------------------------------------------------
def _is_shape_query(node: torch.fx.Node) -> bool:
    if node.op == "call_method" and node.target in SHAPE_METHODS:
        return True
    return node.op == "call_function" and node.target is builtins.getattr and node.args[1] in SHAPE_ATTRS


def _data_nodes(nodes: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """Nodes whose value depends on the inputs' values (not just their shapes)."""
    data: set[torch.fx.Node] = set()
    for n in nodes:
        if n.op == "placeholder" or (not _is_shape_query(n) and any(i in data for i in n.all_input_nodes)):
            data.add(n)
    return data


def _unmapped(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], data: set) -> dict[torch.fx.Node, dict[str, str]]:
    """Calls on data that have no mapping, with their report entry."""
    bad = {}
    for n in nodes:
        if n in data and n.op.startswith("call_") and not _is_shape_query(n) and _handler(gm, n) is None:
            bad[n] = {"op": _kind(n), "node": n.name, "reason": "no mapping for this module / function / method"}
    return bad


def _batchnorm_folds(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, tuple[np.ndarray, np.ndarray]]:
    """Conv2d -> BatchNorm2d where only the BN reads the conv: folded weights for both nodes
    (the conv computes with them, the BN node becomes an alias of the conv)."""
    folds = {}
    for bn in nodes:
        if bn.op != "call_module":
            continue
        m = gm.get_submodule(_name(bn))
        if not isinstance(m, nn.BatchNorm2d):
            continue
        conv = bn.args[0]
        if not isinstance(conv, torch.fx.Node) or conv.op != "call_module" or len(conv.users) != 1 or conv in folds:
            continue
        c = gm.get_submodule(_name(conv))
        if type(c) is not nn.Conv2d or m.running_mean is None or m.running_var is None:  # no statistics: not foldable
            continue
        arr = lambda t: t.detach().numpy()
        gamma = arr(m.weight) if m.affine else np.ones(m.num_features, np.float32)
        beta = arr(m.bias) if m.affine else np.zeros(m.num_features, np.float32)
        bias = None if c.bias is None else arr(c.bias)
        w, b = fold_batchnorm(arr(c.weight), bias, gamma, beta, arr(m.running_mean), arr(m.running_var), m.eps)
        folds[conv] = folds[bn] = (w, b)
    return folds


def _check_meta(node: torch.fx.Node, v: Any, em: Emitter, cls: str) -> None:
    """Shape and dtype as ShapeProp saw them on the real module: a mapping bug fails here."""
    meta = node.meta.get("tensor_meta")
    if not isinstance(v, str) or meta is None or not hasattr(meta, "shape"):
        return
    if meta.dtype != torch.float32:
        raise ModelImportError(f"{cls}: node {node.name!r} computes a {meta.dtype} tensor from the inputs; the IR is float32 only")
    if tuple(meta.shape) != em.shape(v) and not (tuple(meta.shape) == () and em.shape(v) == (1,)):
        raise ModelImportError(f"{cls}: node {node.name!r}: imported shape {list(em.shape(v))} differs from PyTorch's {list(meta.shape)}")


# --- values --------------------------------------------------------------------------------
def _param(gm: torch.fx.GraphModule, target: str, cache: dict[str, np.ndarray], em: Emitter) -> Any:
    if target not in cache:
        v = _attr(gm, target)
        cache[target] = v.detach().numpy().copy() if isinstance(v, torch.Tensor) else v
        em.name_const(cache[target], target)
    return cache[target]


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _evaluate(gm: torch.fx.GraphModule, node: torch.fx.Node, env: dict[torch.fx.Node, Any], em: Emitter) -> Any:
    """Run a node that does not depend on input values; data tensors (only their shapes are
    read here) become meta tensors of their shape."""

    def value(n: torch.fx.Node) -> Any:
        to_t = lambda v: (
            torch.from_numpy(v) if isinstance(v, np.ndarray) else torch.empty(em.shape(v), device="meta") if isinstance(v, str) else v
        )
        return _tree_map(to_t, env[n])

    args, kwargs = torch.fx.node.map_arg(node.args, value), torch.fx.node.map_arg(node.kwargs, value)
    try:
        with torch.no_grad():
            if node.op == "call_module":
                out = gm.get_submodule(_name(node))(*args, **kwargs)
            elif node.op == "call_method":
                out = getattr(args[0], _name(node))(*args[1:], **kwargs)
            else:
                fn = node.target
                assert callable(fn), f"call_function node {node.name!r} has a string target"
                out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        raise ModelImportError(f"node {node.name!r}: evaluating it on constants failed ({type(exc).__name__}: {exc})") from None
    return _tree_map(lambda v: v.detach().numpy().copy() if isinstance(v, torch.Tensor) else v, out)


def _tree_map(fn: Any, v: Any) -> Any:
    if isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
        return type(v)(_tree_map(fn, x) for x in v)
    if isinstance(v, dict):
        return {k: _tree_map(fn, x) for k, x in v.items()}
    return fn(v)


def _flatten_outputs(out: Any) -> list[np.ndarray]:
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy().astype(np.float32)]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in _flatten_outputs(o)]
    raise ModelImportError(f"the module returned a {type(out).__name__}; only tensors (or tuples / lists / dicts of them) are supported")


def _named_outputs(v: Any) -> list[tuple[str, Any]]:
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        flat = [x for o in v for _, x in _named_outputs(o)]
        return [(f"output_{k}", x) for k, x in enumerate(flat)]
    return [("output", v)]


# --- the developer command: a model class from a .py file -------------------------------------------
def load_module_from_file(spec: str) -> nn.Module:
    """`path/model.py:ClassName` -> an instance (constructed without arguments).

    This executes the file's code, like `python path/model.py` would: call it only for a file
    the user named explicitly on the command line, never for a file opened otherwise."""
    file, sep, cls_name = spec.rpartition(":")
    path = Path(file).expanduser()
    if not sep or not cls_name or path.suffix != ".py":
        raise ModelImportError(f"{spec!r}: expected path/to/model.py:ClassName")
    if not path.is_file():
        raise ModelImportError(f"{path}: no such file")
    mod_spec = importlib.util.spec_from_file_location(f"_schedule_explorer_user_{sanitize(path.stem)}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise ModelImportError(f"{path}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, str(path.parent.resolve()))  # let the file import its neighbours
    try:
        mod_spec.loader.exec_module(mod)
        cls = getattr(mod, cls_name, None)
        if cls is None:
            raise ModelImportError(f"{path}: defines no {cls_name!r}")
        obj = cls()
    except ModelImportError:
        raise
    except Exception as exc:  # noqa: BLE001  # the user's code may raise anything
        raise ModelImportError(f"{path}: running it to build {cls_name} failed ({type(exc).__name__}: {exc})") from None
    finally:
        sys.path.remove(str(path.parent.resolve()))
    if not isinstance(obj, nn.Module):
        raise ModelImportError(f"{path}: {cls_name} is not a torch.nn.Module")
    return obj


def example_inputs_for(shapes: list[str], seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random normal example inputs from shapes like '1,3,224,224' (fixed seed)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        try:
            dims = [int(x) for x in s.replace("x", ",").split(",") if x.strip()]
        except ValueError:
            raise ModelImportError(f"--input-shape {s!r}: expected integers like 1,3,224,224") from None
        if not dims or any(d <= 0 for d in dims):
            raise ModelImportError(f"--input-shape {s!r}: every dimension must be positive")
        if math.prod(dims) > MAX_INPUT_ELEMENTS:
            raise ModelImportError(f"--input-shape {s!r}: {math.prod(dims)} elements; an example input has at most 2**28")
        out.append(torch.randn(*dims, generator=g))
    return tuple(out)
