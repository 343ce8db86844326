"""Algebraic data types: constructors, type definitions, patterns and ``match``."""

from __future__ import annotations

import itertools

from .expr import Expr, Var, expect_expr, short_repr
from .node import Node, NodeError
from .types import GlobalTypeVar, Kind, Type, TypeVar

__all__ = [
    "Constructor", "TypeData", "Pattern", "PatternWildcard", "PatternVar", "PatternConstructor",
    "PatternTuple", "Clause", "Match",
]

_tags = itertools.count(1)


class Constructor(Expr):
    """An ADT constructor (``Cons``), callable like a function; nominal, tagged per definition."""

    __slots__ = ("name_hint", "inputs", "belong_to", "tag")
    _nominal = True

    def __new__(cls, name_hint: str, inputs, belong_to: GlobalTypeVar) -> Constructor:
        if not isinstance(name_hint, str) or not name_hint:
            raise NodeError(f"Constructor.name_hint: expected a non-empty str, got {short_repr(name_hint)}")
        inputs = tuple(inputs)
        for i, t in enumerate(inputs):
            if not isinstance(t, Type):
                raise NodeError(f"Constructor.inputs[{i}]: expected a Type, got {short_repr(t)}")
        if not isinstance(belong_to, GlobalTypeVar):
            raise NodeError(f"Constructor.belong_to: expected a GlobalTypeVar, got {short_repr(belong_to)}")
        return cls._make_nominal(name_hint, inputs, belong_to, next(_tags))

    def __repr__(self) -> str:
        return f"<Constructor {self.name_hint} of {self.belong_to.name_hint}>"


class TypeData(Type):
    """An ADT definition: ``type List[A] { Cons(A, List[A]), Nil }``."""

    __slots__ = ("header", "type_vars", "constructors")

    def __new__(cls, header: GlobalTypeVar, type_vars, constructors) -> TypeData:
        if not isinstance(header, GlobalTypeVar):
            raise NodeError(f"TypeData.header: expected a GlobalTypeVar, got {short_repr(header)}")
        type_vars = tuple(type_vars)
        for i, t in enumerate(type_vars):
            if not isinstance(t, TypeVar):
                raise NodeError(f"TypeData.type_vars[{i}]: expected a TypeVar, got {short_repr(t)}")
        constructors = tuple(constructors)
        for i, c in enumerate(constructors):
            if not isinstance(c, Constructor):
                raise NodeError(f"TypeData.constructors[{i}]: expected a Constructor, got {short_repr(c)}")
            if c.belong_to is not header:
                raise NodeError(f"TypeData.constructors[{i}]: {c.name_hint} belongs to "
                                f"{c.belong_to.name_hint}, not {header.name_hint}")
        return cls._make(header, type_vars, constructors)

    @property
    def kind(self) -> Kind:
        return Kind.TypeData


class Pattern(Node):
    """Base of match patterns."""

    __slots__ = ()

    def children(self) -> tuple:
        return ()

    def with_children(self, children: tuple) -> Pattern:
        return self


class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""

    __slots__ = ()

    def __new__(cls) -> PatternWildcard:
        return cls._make()


class PatternVar(Pattern):
    """A variable pattern: matches anything and binds it."""

    __slots__ = ("var",)

    def __new__(cls, var: Var) -> PatternVar:
        if not isinstance(var, Var):
            raise NodeError(f"PatternVar.var: expected a Var, got {short_repr(var)}")
        return cls._make(var)

    def children(self) -> tuple:
        return (self.var,)

    def with_children(self, children: tuple) -> PatternVar:
        (v,) = children
        return self if v is self.var else PatternVar(v)


def _patterns(values, where: str) -> tuple:
    values = tuple(values)
    for i, p in enumerate(values):
        if not isinstance(p, Pattern):
            raise NodeError(f"{where}[{i}]: expected a Pattern, got {short_repr(p)}")
    return values


class PatternConstructor(Pattern):
    """``Cons(p1, p2)``: matches a value built by that constructor."""

    __slots__ = ("constructor", "patterns")

    def __new__(cls, constructor: Constructor, patterns=()) -> PatternConstructor:
        if not isinstance(constructor, Constructor):
            raise NodeError(f"PatternConstructor.constructor: expected a Constructor, got "
                            f"{short_repr(constructor)}")
        patterns = _patterns(patterns, "PatternConstructor.patterns")
        if len(patterns) != len(constructor.inputs):
            raise NodeError(f"PatternConstructor: {constructor.name_hint} takes "
                            f"{len(constructor.inputs)} fields, the pattern has {len(patterns)}")
        return cls._make(constructor, patterns)

    def children(self) -> tuple:
        return (self.constructor, *self.patterns)

    def with_children(self, children: tuple) -> PatternConstructor:
        c, *ps = children
        if c is self.constructor and len(ps) == len(self.patterns) and all(
                a is b for a, b in zip(ps, self.patterns, strict=True)):
            return self
        return PatternConstructor(c, ps)


class PatternTuple(Pattern):
    """``(p1, p2)``: matches a tuple field by field."""

    __slots__ = ("patterns",)

    def __new__(cls, patterns=()) -> PatternTuple:
        return cls._make(_patterns(patterns, "PatternTuple.patterns"))

    def children(self) -> tuple:
        return self.patterns

    def with_children(self, children: tuple) -> PatternTuple:
        children = tuple(children)
        return self if children == self.patterns else PatternTuple(children)


class Clause(Node):
    """One arm of a match: ``pattern => rhs``."""

    __slots__ = ("lhs", "rhs")

    def __new__(cls, lhs: Pattern, rhs: Expr) -> Clause:
        if not isinstance(lhs, Pattern):
            raise NodeError(f"Clause.lhs: expected a Pattern, got {short_repr(lhs)}")
        return cls._make(lhs, expect_expr(rhs, "Clause.rhs"))

    def children(self) -> tuple:
        return (self.lhs, self.rhs)

    def with_children(self, children: tuple) -> Clause:
        lhs, rhs = children
        return self if lhs is self.lhs and rhs is self.rhs else Clause(lhs, rhs)


class Match(Expr):
    """``match (data) { clauses }``; ``complete=False`` is ``match?`` (no exhaustiveness check)."""

    __slots__ = ("data", "clauses", "complete")

    def __new__(cls, data: Expr, clauses, complete: bool = True) -> Match:
        clauses = tuple(clauses)
        for i, c in enumerate(clauses):
            if not isinstance(c, Clause):
                raise NodeError(f"Match.clauses[{i}]: expected a Clause, got {short_repr(c)}")
        return cls._make(expect_expr(data, "Match.data"), clauses, bool(complete))

    def children(self) -> tuple:
        return (self.data, *self.clauses)

    def with_children(self, children: tuple) -> Match:
        d, *cs = children
        if d is self.data and len(cs) == len(self.clauses) and all(
                a is b for a, b in zip(cs, self.clauses, strict=True)):
            return self
        return Match(d, cs, self.complete)


def pattern_vars(pattern: Pattern) -> list[Var]:
    """The variables a pattern binds, left to right."""
    out, stack = [], [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, PatternConstructor):
            stack.extend(reversed(p.patterns))
        elif isinstance(p, PatternTuple):
            stack.extend(reversed(p.patterns))
    return out
