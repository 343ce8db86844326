"""The condition language's syntax tree: small frozen nodes, parsed once from Python's ``ast``.

Conditions and computed attributes are written in Python's expression syntax (see ``cond.py``).
``from_python`` turns Python's tree into these nodes, refusing what the language does not have;
checking (``cond.py``), evaluation (``condeval.py``) and the lowering of its native part (``native.py``)
are visitors over them. Conditions are a line or two of text: the parser bounds their nesting
(``MAX_DEPTH``), so the visitors may recurse on it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .attr_functions import ATTR_FUNCTIONS
from .sidetext import PV_PREFIX

__all__ = [
    "Cond", "Lit", "Var", "Seq", "BoolOp", "Not", "Neg", "BinOp", "Compare", "Index", "Slice",
    "Call", "Visitor", "from_python", "conjuncts", "walk", "literal", "NO", "FUNCS", "SCOPE_FUNCS",
    "BINOPS", "CMPS", "MAX_DEPTH", "CondSyntaxError",
]

MAX_DEPTH = 64
SCOPE_FUNCS = ("free", "once")
FUNCS = frozenset({"rank", "shape", "dtype", "free", "once", "leaf", "positive", "len"})
BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
CMPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True, slots=True)
class Cond:
    """A node of a condition; ``pos`` is the file offset it was written at."""

    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Lit(Cond):
    """A literal: an int, float, string, bool or None."""

    value: object


@dataclass(frozen=True, slots=True)
class Var(Cond):
    """A pattern variable ``?name`` (an attribute value, an e-class or a let binder)."""

    name: str


@dataclass(frozen=True, slots=True)
class Seq(Cond):
    """A list or tuple ``[a, b]``; its value is a tuple."""

    items: tuple


@dataclass(frozen=True, slots=True)
class BoolOp(Cond):
    """``a and b and ...`` or ``a or b or ...`` (``op`` is ``"and"`` or ``"or"``)."""

    op: str
    parts: tuple


@dataclass(frozen=True, slots=True)
class Not(Cond):
    """``not a``."""

    operand: Cond


@dataclass(frozen=True, slots=True)
class Neg(Cond):
    """``-a``."""

    operand: Cond


@dataclass(frozen=True, slots=True)
class BinOp(Cond):
    """``a op b`` for ``op`` in ``+ - * // %``."""

    op: str
    left: Cond
    right: Cond


@dataclass(frozen=True, slots=True)
class Compare(Cond):
    """A chain ``a < b <= c``: ``len(operands) == len(ops) + 1``."""

    ops: tuple
    operands: tuple


@dataclass(frozen=True, slots=True)
class Index(Cond):
    """``value[index]``."""

    value: Cond
    index: Cond


@dataclass(frozen=True, slots=True)
class Slice(Cond):
    """``value[lower:upper:step]`` (absent parts are None)."""

    value: Cond
    lower: Cond | None
    upper: Cond | None
    step: Cond | None


@dataclass(frozen=True, slots=True)
class Call(Cond):
    """A call of a built-in (``rank``, ``shape``, ...) or of an attribute function."""

    func: str
    args: tuple


class CondSyntaxError(Exception):
    """Text outside the condition language, at a file offset."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class Visitor:
    """Dispatches ``visit(node)`` to ``visit_<NodeClass>(node)``."""

    def visit(self, node: Cond):
        """The visitor's result for ``node``."""
        return getattr(self, "visit_" + type(node).__name__)(node)


def children(node: Cond) -> tuple:
    """The direct sub-expressions of ``node``."""
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, BoolOp):
        return node.parts
    if isinstance(node, (Not, Neg)):
        return (node.operand,)
    if isinstance(node, BinOp):
        return (node.left, node.right)
    if isinstance(node, Compare):
        return node.operands
    if isinstance(node, Index):
        return (node.value, node.index)
    if isinstance(node, Slice):
        return tuple(p for p in (node.value, node.lower, node.upper, node.step) if p is not None)
    if isinstance(node, Call):
        return node.args
    return ()


def walk(node: Cond) -> Iterator[Cond]:
    """Every node of the tree, parents before children (iterative)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def conjuncts(node: Cond) -> list[Cond]:
    """The parts of a conjunction (the expression itself when it is not one)."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, BoolOp) and n.op == "and":
            stack.extend(reversed(n.parts))
        else:
            out.append(n)
    return out


NO = object()  # not a literal


def literal(node: Cond):
    """The value of a literal expression (lists as tuples), or NO."""
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Lit):
        v = node.operand.value
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else NO
    if isinstance(node, Seq):
        items = tuple(literal(i) for i in node.items)
        return NO if any(i is NO for i in items) else items
    return NO


def from_python(tree: ast.expr, offset_of: Callable[[ast.AST], int]) -> Cond:
    """The condition tree of a Python expression; CondSyntaxError for what the language lacks."""
    return _Converter(offset_of).convert(tree, 0)


class _Converter:
    def __init__(self, offset_of: Callable[[ast.AST], int]) -> None:
        self.offset_of = offset_of

    def fail(self, message: str, node: ast.AST) -> CondSyntaxError:
        return CondSyntaxError(message, self.offset_of(node))

    def convert(self, node: ast.AST, depth: int) -> Cond:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep", node)
        pos, d = self.offset_of(node), depth + 1
        if isinstance(node, ast.Constant):
            return Lit(node.value, pos=pos)
        if isinstance(node, ast.Name):
            if not node.id.startswith(PV_PREFIX):
                raise self.fail(f"unknown name `{node.id}` (pattern variables are written ?name)",
                                node)
            return Var(node.id[len(PV_PREFIX):], pos=pos)
        if isinstance(node, (ast.List, ast.Tuple)):
            return Seq(tuple(self.convert(e, d) for e in node.elts), pos=pos)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return BoolOp(op, tuple(self.convert(v, d) for v in node.values), pos=pos)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.convert(node.operand, d), pos=pos)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return Neg(self.convert(node.operand, d), pos=pos)
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            return BinOp(BINOPS[type(node.op)], self.convert(node.left, d),
                         self.convert(node.right, d), pos=pos)
        if isinstance(node, ast.Compare) and all(type(o) in CMPS for o in node.ops):
            operands = (node.left, *node.comparators)
            return Compare(tuple(CMPS[type(o)] for o in node.ops),
                           tuple(self.convert(o, d) for o in operands), pos=pos)
        if isinstance(node, ast.Subscript):
            value, s = self.convert(node.value, d), node.slice
            if isinstance(s, ast.Slice):
                lower, upper, step = (None if p is None else self.convert(p, d)
                                      for p in (s.lower, s.upper, s.step))
                return Slice(value, lower, upper, step, pos=pos)
            return Index(value, self.convert(s, d), pos=pos)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                (node.func.id in FUNCS or node.func.id in ATTR_FUNCTIONS):
            if node.keywords:
                raise self.fail(f"{node.func.id}() takes no keyword arguments", node)
            return Call(node.func.id, tuple(self.convert(a, d) for a in node.args), pos=pos)
        text = ast.unparse(node).replace(PV_PREFIX, "?")
        raise self.fail(f"`{text}` is not part of the condition language", node)
