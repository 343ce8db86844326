"""The part of a condition the e-graph tests itself, as a small tree of facts.

A conjunct that the e-graph can test (comparisons of ranks, concrete dims, dtypes and attribute
values, ``not free(..)``, ``once(..)``, ``leaf(..)``, ``positive(..)``, attribute-function
relations) is lowered here to facts over terms; the rest is checked in Python. The e-graph's rule
compiler (``relaygraph.egraph.rule_compiler``) writes the facts in its own syntax; this module
decides what is native and knows no syntax.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import canonical_attr
from .attr_functions import ATTR_FUNCTIONS
from .condast import NO, BinOp, Call, Compare, Cond, Index, Lit, Neg, Not, Var, literal

__all__ = ["VarTerm", "StrTerm", "AttrTerm", "DtypeTerm", "IntTerm", "NegTerm", "ArithTerm",
           "RankTerm", "DimTerm", "CmpFact", "NotFreeFact", "OnceFact", "LeafFact", "PositiveFact",
           "RelationFact",
           "FunctionValue", "Lowering"]


@dataclass(frozen=True)
class VarTerm:
    """A pattern variable: an e-class, or the value of an attribute variable."""

    name: str


@dataclass(frozen=True)
class StrTerm:
    """A string literal (a dtype)."""

    value: str


@dataclass(frozen=True)
class AttrTerm:
    """An attribute value as the op stores it (canonical)."""

    value: object


@dataclass(frozen=True)
class DtypeTerm:
    """The dtype of a class variable."""

    var: str


@dataclass(frozen=True)
class IntTerm:
    """An integer literal."""

    value: int


@dataclass(frozen=True)
class NegTerm:
    """``-operand``."""

    operand: object


@dataclass(frozen=True)
class ArithTerm:
    """``left op right`` for ``op`` in ``+ - *``."""

    op: str
    left: object
    right: object


@dataclass(frozen=True)
class RankTerm:
    """The rank of a class variable."""

    var: str


@dataclass(frozen=True)
class DimTerm:
    """Dimension ``index`` of a class variable (negative: from the end). ``guard`` ``"eq"``
    needs it known (not ``?``), ``"concrete"`` needs it a number (not symbolic either)."""

    var: str
    index: int
    guard: str


@dataclass(frozen=True)
class CmpFact:
    """``left op right`` over strings or integers."""

    op: str
    left: object
    right: object


@dataclass(frozen=True)
class NotFreeFact:
    """The let binder ``binder`` is not free in the class ``expr``."""

    binder: str
    expr: str


@dataclass(frozen=True)
class OnceFact:
    """The let binder ``binder`` is used exactly once in ``expr``."""

    binder: str
    expr: str


@dataclass(frozen=True)
class LeafFact:
    """``var`` is a variable or a constant of the program."""

    var: str


@dataclass(frozen=True)
class PositiveFact:
    """``var`` is a constant of the program whose every value is above zero."""

    var: str


@dataclass(frozen=True)
class RelationFact:
    """An attribute function that is a condition, of variables and attribute values."""

    func: str
    args: tuple


@dataclass(frozen=True)
class FunctionValue:
    """The value of an attribute function of variables and attribute values."""

    func: str
    args: tuple


class Lowering:
    """Lowers a conjunct to facts, or answers None when the e-graph cannot test it."""

    def __init__(self, kinds) -> None:
        self.kinds = kinds
        self.facts: list = []

    def atom(self, node: Cond) -> list | None:
        """The facts of one conjunct, or None when the e-graph cannot test it."""
        self.facts = []
        if isinstance(node, Not):
            inner = node.operand
            if isinstance(inner, Call) and inner.func == "free":
                return [NotFreeFact(inner.args[0].name, inner.args[1].name)]
            if isinstance(inner, Compare) and inner.ops == ("==",):
                return self.compare("!=", *inner.operands)
            return None
        if isinstance(node, Call) and node.func in ATTR_FUNCTIONS:
            args = self.args(node)
            if not ATTR_FUNCTIONS[node.func].condition or args is None:
                return None
            return [RelationFact(node.func, args)]
        if isinstance(node, Call) and node.func == "leaf":
            return [LeafFact(node.args[0].name)]
        if isinstance(node, Call) and node.func == "positive":
            return [PositiveFact(node.args[0].name)]
        if isinstance(node, Call) and node.func == "once":
            return [OnceFact(node.args[0].name, node.args[1].name)]
        if not isinstance(node, Compare):
            return None
        left = node.operands[0]
        for op, right in zip(node.ops, node.operands[1:], strict=True):
            if self.compare(op, left, right) is None:
                return None
            left = right
        return self.facts

    def args(self, call: Call) -> tuple | None:
        """The arguments of an attribute function: variables and attribute values."""
        out = []
        for a in call.args:
            if isinstance(a, Var):
                out.append(VarTerm(a.name))
                continue
            value = literal(a)
            if value is NO:
                return None
            out.append(AttrTerm(canonical_attr(value)))
        return tuple(out)

    def value(self, node: Cond) -> FunctionValue | None:
        """An attribute function's value, or None when the e-graph cannot compute it."""
        if not (isinstance(node, Call) and node.func in ATTR_FUNCTIONS):
            return None
        args = self.args(node)
        if ATTR_FUNCTIONS[node.func].condition or args is None:
            return None
        return FunctionValue(node.func, args)

    def compare(self, op: str, a: Cond, b: Cond) -> list | None:
        """Facts for ``a op b`` over strings or integers, or None."""
        sa, sb = self.string(a, b), self.string(b, a)
        if sa is not None and sb is not None and op in ("==", "!="):
            self.facts.append(CmpFact(op, sa, sb))
            return self.facts
        guard = "eq" if op == "==" else "concrete"
        ia, ib = self.integer(a, guard), self.integer(b, guard)
        if ia is None or ib is None:
            return None
        self.facts.append(CmpFact(op, ia, ib))
        return self.facts

    def string(self, node: Cond, other: Cond):
        """A string term (a dtype, an attribute variable, a literal), or None."""
        if isinstance(node, Lit) and isinstance(node.value, str):
            if isinstance(other, Var):
                return self.attr_literal(other, node.value)
            return StrTerm(node.value)
        if isinstance(node, Var):
            return VarTerm(node.name)
        if isinstance(node, Call) and node.func == "dtype":
            return DtypeTerm(node.args[0].name)
        if isinstance(other, Var) and literal(node) is not NO:
            return self.attr_literal(other, literal(node))
        return None

    def attr_literal(self, var: Var, value) -> AttrTerm | None:
        """A literal as the value the attribute variable's op stores for it."""
        site = self.kinds.attr_sites.get(var.name)
        if site is None:
            return None
        from .pattern import canonical_attr_value

        try:
            return AttrTerm(canonical_attr_value(site[0], site[1], value))
        except Exception:  # noqa: BLE001 - a value the op rejects never matches: not native
            return None

    def integer(self, node: Cond, guard: str):
        """An integer term (ranks, dims with their guards, arithmetic), or None."""
        if isinstance(node, Lit) and type(node.value) is int:
            return IntTerm(node.value)
        if isinstance(node, Neg):
            inner = self.integer(node.operand, guard)
            return None if inner is None else NegTerm(inner)
        if isinstance(node, BinOp) and node.op in ("+", "-", "*"):
            left, right = self.integer(node.left, "concrete"), self.integer(node.right, "concrete")
            if left is None or right is None:
                return None
            return ArithTerm(node.op, left, right)
        if isinstance(node, Call) and node.func == "rank":
            return RankTerm(node.args[0].name)
        if isinstance(node, Index) and isinstance(node.value, Call) and node.value.func == "shape":
            index = literal(node.index)
            if type(index) is not int:
                return None
            return DimTerm(node.value.args[0].name, index, guard)
        return None
