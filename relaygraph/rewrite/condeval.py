"""Evaluating conditions and computed attributes in Python, with three-valued truth.

A dimension that is ``?`` (Any) or symbolic makes comparisons unknown (None) and arithmetic
UNKNOWN; a condition holds only when it is known to be true.
"""

from __future__ import annotations

import ast
import operator

import sympy

from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType, Type
from .sidetext import PV_PREFIX
from .tables import ATTR_FUNCTIONS

__all__ = ["UNKNOWN", "evaluate", "conjuncts", "BINOPS", "CMP", "SCOPE_FUNCS"]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
SCOPE_FUNCS = ("free", "once")
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

def _dims(t: Type | None):
    if not isinstance(t, TensorType):
        return None
    return tuple(UNKNOWN if d is AnyDim else d for d in t.shape)


def evaluate(node: ast.expr, env):
    """The value of an expression tree (UNKNOWN, or None for an unknown truth value)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.attr(node.id[len(PV_PREFIX):])
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(evaluate(e, env) for e in node.elts)
    if isinstance(node, ast.BoolOp):
        values = [evaluate(v, env) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in values else (None if any(v is not True for v in values) else True)
        return True if True in values else (None if any(v is not False for v in values) else False)
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, env)
        if isinstance(node.op, ast.Not):
            return None if v is None or v is UNKNOWN else not v
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else UNKNOWN
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, env), evaluate(node.right, env)
        if isinstance(a, tuple) and isinstance(b, tuple) and isinstance(node.op, ast.Add):
            return a + b
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return UNKNOWN
        try:
            return BINOPS[type(node.op)](a, b)
        except ZeroDivisionError:
            return UNKNOWN
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, env)
        result = True
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = evaluate(comp, env)
            r = _compare(CMP[type(op)], left, right)
            if r is False:
                return False
            if r is None:
                result = None
            left = right
        return result
    if isinstance(node, ast.Subscript):
        v = evaluate(node.value, env)
        if not isinstance(v, tuple):
            return UNKNOWN
        s = node.slice
        if isinstance(s, ast.Slice):
            parts = [None if p is None else evaluate(p, env) for p in (s.lower, s.upper, s.step)]
            if any(p is not None and not isinstance(p, int) for p in parts):
                return UNKNOWN
            return v[slice(*parts)]
        i = evaluate(s, env)
        if not isinstance(i, int) or not -len(v) <= i < len(v):
            return UNKNOWN
        return v[i]
    if isinstance(node, ast.Call):
        name = node.func.id
        if name in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[name]
            args = [evaluate(a, env) for a in node.args]
            if any(a is UNKNOWN for a in args):
                return None if f.condition else UNKNOWN
            value = f.python(*args)
            return value if value is not None or f.condition else UNKNOWN
        if name == "len":
            v = evaluate(node.args[0], env)
            return len(v) if isinstance(v, tuple) else UNKNOWN
        if name == "leaf":
            return None if env.is_leaf is None else env.is_leaf(node.args[0].id[len(PV_PREFIX):])
        if name in SCOPE_FUNCS:
            count = None if env.occurrences is None else env.occurrences(
                node.args[0].id[len(PV_PREFIX):], node.args[1].id[len(PV_PREFIX):])
            if count is None:
                return None
            return count > 0 if name == "free" else count == 1
        t = env.type_of(node.args[0].id[len(PV_PREFIX):])
        if not isinstance(t, TensorType):
            return UNKNOWN if not isinstance(t, TupleType) or name != "rank" else UNKNOWN
        if name == "rank":
            return len(t.shape)
        if name == "dtype":
            return t.dtype
        return _dims(t)
    return UNKNOWN


def _compare(op: str, a, b):
    if a is UNKNOWN or b is UNKNOWN:
        return None
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or op not in ("==", "!="):
            return None if op not in ("==", "!=") else (op == "!=")
        if len(a) != len(b):
            return op == "!="
        parts = [_compare("==", x, y) for x, y in zip(a, b, strict=True)]
        eq = False if False in parts else (None if None in parts else True)
        return eq if op == "==" or eq is None else not eq
    symbolic = isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic)
    if symbolic:
        if op == "==" and sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0:
            return True
        if op == "!=" and sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0:
            return False
        return None
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def conjuncts(node: ast.expr) -> list[ast.expr]:
    """The parts of a conjunction (the expression itself when it is not one)."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        out = []
        for v in node.values:
            out.extend(conjuncts(v))
        return out
    return [node]

