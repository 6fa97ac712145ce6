"""Expressions of the pipeline IR: constants, loop variables, accesses and operators.

Expressions are immutable trees of plain dataclasses. Index expressions (the arguments
of an `Access`) are integer expressions of loop variables; values are float32. The same
tree is lowered to Halide, interpreted by the numpy reference, counted for FLOPs and
bounded by interval arithmetic for footprints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Number = int | float

# Operators with two operands; the integer ones are only legal in index expressions.
BINARY_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "<", "<=", ">", ">=", "==", "!=", "and", "or")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=", "and", "or")
# Functions with one operand, evaluated in float32.
UNARY_FNS = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "abs", "neg", "float", "sigmoid")
# Cost of each call in floating-point operations, for FLOP counts.
FN_FLOPS = {"exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "abs": 1, "neg": 1, "float": 0, "sigmoid": 3}


class Expr:
    """Base of all expression nodes; arithmetic operators build new nodes."""

    def _bin(self, op: str, other: Any, swap: bool = False) -> Expr:
        o = wrap(other)
        return BinOp(op, o, self) if swap else BinOp(op, self, o)

    def __add__(self, o: Any) -> Expr:
        return self._bin("+", o)

    def __radd__(self, o: Any) -> Expr:
        return self._bin("+", o, True)

    def __sub__(self, o: Any) -> Expr:
        return self._bin("-", o)

    def __rsub__(self, o: Any) -> Expr:
        return self._bin("-", o, True)

    def __mul__(self, o: Any) -> Expr:
        return self._bin("*", o)

    def __rmul__(self, o: Any) -> Expr:
        return self._bin("*", o, True)

    def __truediv__(self, o: Any) -> Expr:
        return self._bin("/", o)

    def __rtruediv__(self, o: Any) -> Expr:
        return self._bin("/", o, True)

    def __floordiv__(self, o: Any) -> Expr:
        return self._bin("//", o)

    def __mod__(self, o: Any) -> Expr:
        return self._bin("%", o)

    def __neg__(self) -> Expr:
        return Call("neg", (self,))


@dataclass(frozen=True)
class Const(Expr):
    value: Number


@dataclass(frozen=True)
class Var(Expr):
    """A loop variable: a pure dimension or a reduction variable of the stage."""

    name: str


@dataclass(frozen=True)
class Access(Expr):
    """A read of an input or an earlier stage at integer indices (numpy axis order)."""

    source: str
    index: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    then: Expr
    other: Expr


def wrap(v: Any) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"cannot use {v!r} in an expression")
    return Const(v)


# Small builders used by the operator library.
def call(fn: str, *args: Any) -> Expr:
    if fn not in UNARY_FNS:
        raise ValueError(f"unknown function {fn!r}")
    return Call(fn, tuple(wrap(a) for a in args))


def emin(a: Any, b: Any) -> Expr:
    return BinOp("min", wrap(a), wrap(b))


def emax(a: Any, b: Any) -> Expr:
    return BinOp("max", wrap(a), wrap(b))


def clamp(v: Any, lo: Any, hi: Any) -> Expr:
    return emin(emax(v, lo), hi)


def cmp(op: str, a: Any, b: Any) -> Expr:
    if op not in COMPARE_OPS:
        raise ValueError(f"unknown comparison {op!r}")
    return BinOp(op, wrap(a), wrap(b))


def select(c: Expr, a: Any, b: Any) -> Expr:
    return Select(c, wrap(a), wrap(b))


def relu(v: Expr) -> Expr:
    return emax(v, 0.0)


# --- JSON -----------------------------------------------------------------------------
def to_json(e: Expr) -> Any:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return {"var": e.name}
    if isinstance(e, Access):
        return {"at": e.source, "idx": [to_json(i) for i in e.index]}
    if isinstance(e, BinOp):
        return {"op": e.op, "args": [to_json(e.a), to_json(e.b)]}
    if isinstance(e, Call):
        return {"op": e.fn, "args": [to_json(a) for a in e.args]}
    if isinstance(e, Select):
        return {"op": "select", "args": [to_json(e.cond), to_json(e.then), to_json(e.other)]}
    raise TypeError(f"not an expression: {e!r}")


def from_json(d: Any, where: str = "expression") -> Expr:
    """Parse an expression; raises ValueError naming `where` on anything malformed."""
    if isinstance(d, bool):
        raise ValueError(f"{where}: booleans are not expressions")
    if isinstance(d, (int, float)):
        if isinstance(d, float) and not math.isfinite(d) and not math.isinf(d):
            raise ValueError(f"{where}: NaN constant")
        return Const(d)
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected a number or an object, got {type(d).__name__}")
    if "var" in d:
        if not isinstance(d["var"], str):
            raise ValueError(f"{where}: variable name must be a string")
        return Var(d["var"])
    if "at" in d:
        idx = d.get("idx")
        if not isinstance(d["at"], str) or not isinstance(idx, list):
            raise ValueError(f"{where}: access needs 'at' (a name) and 'idx' (a list)")
        return Access(d["at"], tuple(from_json(i, where) for i in idx))
    op, args = d.get("op"), d.get("args")
    if not isinstance(op, str) or not isinstance(args, list):
        raise ValueError(f"{where}: expected 'var', 'at' or 'op' with 'args'")
    parsed = tuple(from_json(a, where) for a in args)
    if op == "select" and len(parsed) == 3:
        return Select(*parsed)
    if op in BINARY_OPS and len(parsed) == 2:
        return BinOp(op, *parsed)
    if op in UNARY_FNS and len(parsed) == 1:
        return Call(op, parsed)
    raise ValueError(f"{where}: unknown operator {op!r} with {len(parsed)} operands")


# --- Traversal ------------------------------------------------------------------------
def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Access):
        return e.index
    if isinstance(e, BinOp):
        return (e.a, e.b)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Select):
        return (e.cond, e.then, e.other)
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    yield e
    for c in children(e):
        yield from walk(c)


def accesses(e: Expr) -> list[Access]:
    return [n for n in walk(e) if isinstance(n, Access)]


def variables(e: Expr) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def rebuild(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild bottom-up; `fn` may return a replacement for a node (or None to keep it)."""
    if isinstance(e, Access):
        new: Expr = Access(e.source, tuple(rebuild(i, fn) for i in e.index))
    elif isinstance(e, BinOp):
        new = BinOp(e.op, rebuild(e.a, fn), rebuild(e.b, fn))
    elif isinstance(e, Call):
        new = Call(e.fn, tuple(rebuild(a, fn) for a in e.args))
    elif isinstance(e, Select):
        new = Select(rebuild(e.cond, fn), rebuild(e.then, fn), rebuild(e.other, fn))
    else:
        new = e
    out = fn(new)
    return new if out is None else out


def substitute_vars(e: Expr, mapping: dict[str, Expr]) -> Expr:
    return rebuild(e, lambda n: mapping.get(n.name) if isinstance(n, Var) else None)


def own_flops(e: Expr) -> int:
    """Floating-point operations of the node `e` itself, without its operands."""
    if isinstance(e, BinOp):
        return 0 if e.op in COMPARE_OPS else 1
    if isinstance(e, Call):
        return FN_FLOPS.get(e.fn, 1)
    return 1 if isinstance(e, Select) else 0


def flops(e: Expr) -> int:
    """Floating-point operations to evaluate `e` once; index arithmetic is not counted."""
    if isinstance(e, (Const, Var, Access)):
        return 0
    return own_flops(e) + sum(flops(c) for c in children(e))


# --- Interval arithmetic (footprints) -------------------------------------------------
Interval = tuple[float, float]


AccessBounds = Callable[[Access, Mapping[str, Interval | None]], Interval | None]


def bounds(e: Expr, ranges: Mapping[str, Interval | None], access: AccessBounds | None = None) -> Interval | None:
    """Inclusive interval of an integer index expression given variable ranges.

    Returns None where the value depends on data (an access inside an index). `access`,
    when given, bounds an access instead (the loop-nest model bounds an inlined stage's
    definition there); evaluation is bottom-up and the same at every node, so bounding a
    variable by the interval of an expression equals bounding that expression in its place."""
    if isinstance(e, Const):
        return (e.value, e.value)
    if isinstance(e, Var):
        return ranges.get(e.name)
    if isinstance(e, BinOp):
        a, b = bounds(e.a, ranges, access), bounds(e.b, ranges, access)
        if a is None or b is None:
            return None
        if e.op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if e.op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if e.op == "*":
            p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return (min(p), max(p))
        if e.op == "//" and b[0] == b[1] and b[0] > 0:
            return (a[0] // b[0], a[1] // b[0])
        if e.op == "%" and b[0] == b[1] and b[0] > 0:
            return (0, b[0] - 1) if a[1] - a[0] + 1 >= b[0] else (min(a[0] % b[0], a[1] % b[0]), max(a[0] % b[0], a[1] % b[0]))
        if e.op == "min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if e.op == "max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        return None
    if isinstance(e, Select):
        a, b = bounds(e.then, ranges, access), bounds(e.other, ranges, access)
        if a is None or b is None:
            return None
        return (min(a[0], b[0]), max(a[1], b[1]))
    if access is not None and isinstance(e, Access):
        return access(e, ranges)
    return None


Affine = tuple[dict[str, int], int]  # ({var: coefficient}, constant)
Leaf = tuple[Number | None, Affine | None]  # (constant value or None, affine form or None)


def _const_value(e: Expr, leaf: Callable[[Expr], Leaf] | None) -> Number | None:
    if isinstance(e, Const):
        return e.value
    if leaf is not None and isinstance(e, (Var, Access)):
        return leaf(e)[0]
    return None


def affine(e: Expr, leaf: Callable[[Expr], Leaf] | None = None) -> Affine | None:
    """`e` as ({var: coefficient}, constant), or None when it is not affine.

    `leaf`, when given, stands for what replaces each variable and access (the loop-nest
    model substitutes inlined stages): (its value when it is a constant, else None; its
    affine form). The rules are the same as on the substituted expression itself."""
    if isinstance(e, Const):
        return ({}, e.value) if isinstance(e.value, int) else None
    if leaf is not None and isinstance(e, (Var, Access)):
        return leaf(e)[1]
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = affine(e.a, leaf), affine(e.b, leaf)
        if a is None or b is None:
            return None
        s = 1 if e.op == "+" else -1
        co = dict(a[0])
        for v, c in b[0].items():
            co[v] = co.get(v, 0) + s * c
        return {v: c for v, c in co.items() if c}, a[1] + s * b[1]
    if isinstance(e, BinOp) and e.op == "*":
        for k, o in ((e.a, e.b), (e.b, e.a)):
            kv = _const_value(k, leaf)
            if isinstance(kv, int):
                t = affine(o, leaf)
                return None if t is None else ({v: c * kv for v, c in t[0].items() if c * kv}, t[1] * kv)
    return None


def is_affine(e: Expr) -> bool:
    """True when `e` is a sum of constant multiples of variables plus a constant."""
    if isinstance(e, (Const, Var)):
        return True
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        return is_affine(e.a) and is_affine(e.b)
    if isinstance(e, BinOp) and e.op == "*":
        return (isinstance(e.a, Const) and is_affine(e.b)) or (isinstance(e.b, Const) and is_affine(e.a))
    return False


# --- Pretty printing ---------------------------------------------------------------------
_PREC = {"or": 1, "and": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5}


def format_expr(e: Expr, prec: int = 0) -> str:
    """Readable infix text, e.g. `max(conv(n, c, y, x), 0.0)`."""
    if isinstance(e, Const):
        return (
            repr(e.value)
            if isinstance(e.value, int)
            else f"{e.value:.6g}" + ("" if "." in f"{e.value:.6g}" or "e" in f"{e.value:.6g}" else ".0")
        )
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Access):
        return f"{e.source}({', '.join(format_expr(i) for i in e.index)})"
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
        p = _PREC[e.op]
        text = f"{format_expr(e.a, p)} {e.op} {format_expr(e.b, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, Call):
        if e.fn == "neg":
            return f"-{format_expr(e.args[0], 6)}"
        return f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.then)}, {format_expr(e.other)})"
    return repr(e)
