"""Evaluating conditions and computed attributes in Python, with three-valued truth.

A dimension that is ``?`` (Any) or symbolic makes comparisons unknown (None) and arithmetic
UNKNOWN; a condition holds only when it is known to be true.
"""

from __future__ import annotations

import operator

from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, Type
from ..ty.dims import dims_equal, is_symbolic
from .attr_functions import ATTR_FUNCTIONS
from .condast import SCOPE_FUNCS, Cond, Visitor, conjuncts

__all__ = ["UNKNOWN", "evaluate", "conjuncts"]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
          "%": operator.mod}


def _dims(t: Type | None):
    if not isinstance(t, TensorType):
        return None
    return tuple(UNKNOWN if d is AnyDim else d for d in t.shape)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def evaluate(node: Cond, env):
    """The value of a condition tree (UNKNOWN, or None for an unknown truth value)."""
    return _Evaluator(env).visit(node)


class _Evaluator(Visitor):
    """The value of each node under ``env`` (see ``cond.EvalEnv``)."""

    def __init__(self, env) -> None:
        self.env = env

    def visit_Lit(self, node):
        return node.value

    def visit_Var(self, node):
        return self.env.attr(node.name)

    def visit_Seq(self, node):
        return tuple(self.visit(e) for e in node.items)

    def visit_BoolOp(self, node):
        values = [self.visit(v) for v in node.parts]
        if node.op == "and":
            return False if False in values else (None if any(v is not True for v in values) else True)
        return True if True in values else (None if any(v is not False for v in values) else False)

    def visit_Not(self, node):
        v = self.visit(node.operand)
        return None if v is None or v is UNKNOWN else not v

    def visit_Neg(self, node):
        v = self.visit(node.operand)
        return -v if _number(v) else UNKNOWN

    def visit_BinOp(self, node):
        a, b = self.visit(node.left), self.visit(node.right)
        if isinstance(a, tuple) and isinstance(b, tuple) and node.op == "+":
            return a + b
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return UNKNOWN
        try:
            return _ARITH[node.op](a, b)
        except ZeroDivisionError:
            return UNKNOWN

    def visit_Compare(self, node):
        left = self.visit(node.operands[0])
        result = True
        for op, comp in zip(node.ops, node.operands[1:], strict=True):
            right = self.visit(comp)
            r = _compare(op, left, right)
            if r is False:
                return False
            if r is None:
                result = None
            left = right
        return result

    def visit_Index(self, node):
        v = self.visit(node.value)
        if not isinstance(v, tuple):
            return UNKNOWN
        i = self.visit(node.index)
        if not isinstance(i, int) or not -len(v) <= i < len(v):
            return UNKNOWN
        return v[i]

    def visit_Slice(self, node):
        v = self.visit(node.value)
        if not isinstance(v, tuple):
            return UNKNOWN
        parts = [None if p is None else self.visit(p) for p in (node.lower, node.upper, node.step)]
        if any(p is not None and not isinstance(p, int) for p in parts):
            return UNKNOWN
        return v[slice(*parts)]

    def visit_Call(self, node):
        name, env = node.func, self.env
        if name in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[name]
            args = [self.visit(a) for a in node.args]
            if any(a is UNKNOWN for a in args):
                return None if f.condition else UNKNOWN
            value = f.python(*args)
            return value if value is not None or f.condition else UNKNOWN
        if name == "len":
            v = self.visit(node.args[0])
            return len(v) if isinstance(v, tuple) else UNKNOWN
        if name == "leaf":
            return None if env.is_leaf is None else env.is_leaf(node.args[0].name)
        if name == "positive":
            return None if env.is_positive is None else env.is_positive(node.args[0].name)
        if name in SCOPE_FUNCS:
            count = None if env.occurrences is None else env.occurrences(
                node.args[0].name, node.args[1].name)
            if count is None:
                return None
            return count > 0 if name == "free" else count == 1
        t = env.type_of(node.args[0].name)
        if not isinstance(t, TensorType):
            return UNKNOWN
        if name == "rank":
            return len(t.shape)
        if name == "dtype":
            return t.dtype
        return _dims(t)


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
    if is_symbolic(a) or is_symbolic(b):
        # only a proof of equality decides: symbolic sizes may still meet at run time
        if op in ("==", "!=") and dims_equal(a, b) is True:
            return op == "=="
        return None
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
