"""The pattern nodes of the dataflow pattern language and their constructors (TVM's names).

Patterns are small Python objects compared by identity: a pattern object used twice in one
pattern is one node, so it must match one expression (a diamond). They are not interned.
"""

from __future__ import annotations

from typing import Any

from ...errors import RelayError, UnknownNameError
from ...ir.attrs import canonical_attr
from ...ir.expr import Constant, Expr, Op, as_expr
from ...ir.types import Type
from ...ops.registry import lookup

__all__ = [
    "DFPattern", "DFPatternError", "WildcardPattern", "VarPattern", "ConstantPattern", "ExprPattern",
    "CallPattern", "TuplePattern", "TupleGetItemPattern", "IfPattern", "LetPattern",
    "FunctionPattern", "AltPattern", "AttrPattern", "TypePattern", "DataTypePattern", "ShapePattern",
    "DominatorPattern", "wildcard", "is_var", "is_constant", "is_expr", "is_op", "is_tuple",
    "is_tuple_get_item", "is_if", "is_let", "has_attr", "has_type", "has_dtype", "has_shape",
    "dominates",
]


class DFPatternError(RelayError):
    """A malformed dataflow pattern or callback: names the pattern and the offending part."""


def _pattern(value: Any, where: str) -> DFPattern:
    if isinstance(value, DFPattern):
        return value
    if isinstance(value, Expr):
        return ExprPattern(value)
    raise DFPatternError(f"{where}: expected a pattern (DFPattern) or an expression, got "
                         f"{type(value).__name__} {value!r}")


class DFPattern:
    """Base class of dataflow patterns; Python operators build call patterns (TVM's sugar)."""

    __slots__ = ()

    def __call__(self, *args: Any) -> CallPattern:
        if len(args) == 1 and args[0] is None:
            return CallPattern(self, None)
        return CallPattern(self, list(args))

    def __or__(self, other: DFPattern) -> AltPattern:
        return AltPattern(self, other)

    def __add__(self, other: Any) -> CallPattern:
        return is_op("add")(self, other)

    def __sub__(self, other: Any) -> CallPattern:
        return is_op("subtract")(self, other)

    def __mul__(self, other: Any) -> CallPattern:
        return is_op("multiply")(self, other)

    def __truediv__(self, other: Any) -> CallPattern:
        return is_op("divide")(self, other)

    def __getitem__(self, index: int) -> TupleGetItemPattern:
        return TupleGetItemPattern(self, index)

    def has_attr(self, attrs: dict) -> AttrPattern:
        """This pattern, where the match also has these attributes (call, op or function)."""
        return AttrPattern(self, attrs)

    def has_type(self, ttype: Type) -> TypePattern:
        """This pattern, where the match also has this checked type."""
        return TypePattern(self, ttype)

    def has_dtype(self, dtype: str) -> DataTypePattern:
        """This pattern, where the match is also a tensor of this dtype."""
        return DataTypePattern(self, dtype)

    def has_shape(self, shape) -> ShapePattern:
        """This pattern, where the match is also a tensor of this shape."""
        return ShapePattern(self, shape)

    def match(self, expr: Expr) -> bool:
        """Whether this pattern matches ``expr`` (rooted at it)."""
        from .matcher import match

        return match(self, expr)

    def partition(self, expr: Expr, attrs: dict | None = None, check=None) -> Expr:
        """``expr`` with every match of this pattern made a call of a function (TVM's partition)."""
        from .rewriter import partition

        return partition(self, expr, attrs, check)

    def dominates(self, parent: DFPattern, path: DFPattern | None = None) -> DominatorPattern:
        """A dominator pattern: this (the child) dominates ``parent`` along ``path``."""
        return DominatorPattern(parent, wildcard() if path is None else path, self)

    def optional(self, option_constructor) -> AltPattern:
        """This pattern, or ``option_constructor(this)`` (an optional op on top)."""
        return self | option_constructor(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {describe(self)}>"

    def __str__(self) -> str:
        return describe(self)


class WildcardPattern(DFPattern):
    """Matches any expression."""

    __slots__ = ()


class VarPattern(DFPattern):
    """Matches a Var (with this name hint, unless the name is empty)."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        if not isinstance(name, str):
            raise DFPatternError(f"is_var: the name must be a string, got {name!r}")
        self.name = name

    def name_hint(self) -> str:
        return self.name


class ConstantPattern(DFPattern):
    """Matches any Constant."""

    __slots__ = ()


class ExprPattern(DFPattern):
    """Matches exactly one expression (an Op, a Var, a Constant, ...)."""

    __slots__ = ("expr",)

    def __init__(self, expr: Expr) -> None:
        if not isinstance(expr, Expr):
            raise DFPatternError(f"is_expr: expected a Relay expression, got {type(expr).__name__}")
        self.expr = expr


class CallPattern(DFPattern):
    """Matches a call whose callee and arguments match (``args`` None: any arguments)."""

    __slots__ = ("op", "args")

    def __init__(self, op: DFPattern, args: list | None) -> None:
        self.op = _pattern(op, "call pattern callee")
        if args is None:
            self.args = None
            return
        self.args = tuple(_pattern(a, f"argument {i} of a call of {describe(self.op)}")
                          for i, a in enumerate(args))
        if isinstance(self.op, ExprPattern) and isinstance(self.op.expr, Op):
            opdef = lookup(self.op.expr.name)
            n = opdef.num_inputs if opdef is not None else None
            if n is not None and n != len(self.args):
                raise DFPatternError(f"pattern {self.op.expr.name}({', '.join(map(describe, self.args))}): "
                                     f"{self.op.expr.name} takes {n} argument(s), the pattern gives "
                                     f"{len(self.args)}")


class FunctionPattern(DFPattern):
    """Matches a function whose parameters (None: any) and body match."""

    __slots__ = ("params", "body")

    def __init__(self, params: list | None, body: DFPattern) -> None:
        self.params = None if params is None else tuple(
            _pattern(p, f"parameter {i} of a function pattern") for i, p in enumerate(params))
        self.body = _pattern(body, "body of a function pattern")


class TuplePattern(DFPattern):
    """Matches a tuple whose fields match (``fields`` None: any tuple)."""

    __slots__ = ("fields",)

    def __init__(self, fields: list | None) -> None:
        self.fields = None if fields is None else tuple(
            _pattern(f, f"field {i} of a tuple pattern") for i, f in enumerate(fields))

    def __getitem__(self, index: int) -> TupleGetItemPattern:
        return TupleGetItemPattern(self, index)

    def __len__(self) -> int:
        return len(self.fields or ())


class TupleGetItemPattern(DFPattern):
    """Matches ``tuple.index`` (index -1: any index)."""

    __slots__ = ("tuple", "index")

    def __init__(self, tuple_value: DFPattern, index: int | None = None) -> None:
        self.tuple = _pattern(tuple_value, "tuple of a tuple_get_item pattern")
        if index is None:
            index = -1
        if not isinstance(index, int) or isinstance(index, bool) or index < -1:
            raise DFPatternError(f"is_tuple_get_item({describe(self.tuple)}, {index!r}): the index "
                                 f"must be a non-negative int or None")
        self.index = index


class IfPattern(DFPattern):
    """Matches ``if (cond) {t} else {f}``."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: DFPattern, true_branch: DFPattern, false_branch: DFPattern) -> None:
        self.cond = _pattern(cond, "condition of an if pattern")
        self.true_branch = _pattern(true_branch, "true branch of an if pattern")
        self.false_branch = _pattern(false_branch, "false branch of an if pattern")


class LetPattern(DFPattern):
    """Matches ``let var = value; body``."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var: DFPattern, value: DFPattern, body: DFPattern) -> None:
        self.var = _pattern(var, "variable of a let pattern")
        self.value = _pattern(value, "value of a let pattern")
        self.body = _pattern(body, "body of a let pattern")


class AltPattern(DFPattern):
    """Matches what ``left`` matches, else what ``right`` matches."""

    __slots__ = ("left", "right")

    def __init__(self, left: DFPattern, right: DFPattern) -> None:
        self.left = _pattern(left, "left side of |")
        self.right = _pattern(right, "right side of |")


class AttrPattern(DFPattern):
    """Matches what ``pattern`` matches if it also has these attributes."""

    __slots__ = ("pattern", "attrs")

    def __init__(self, pattern: DFPattern, attrs: dict) -> None:
        self.pattern = _pattern(pattern, "pattern of has_attr")
        if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
            raise DFPatternError(f"has_attr on {describe(self.pattern)}: attrs must be a dict from "
                                 f"attribute names to values, got {attrs!r}")
        self.attrs = {k: canonical_attr(v, f"has_attr[{k!r}]") for k, v in attrs.items()}


class TypePattern(DFPattern):
    """Matches what ``pattern`` matches if its checked type is ``type``."""

    __slots__ = ("pattern", "type")

    def __init__(self, pattern: DFPattern, ttype: Type) -> None:
        self.pattern = _pattern(pattern, "pattern of has_type")
        if not isinstance(ttype, Type):
            raise DFPatternError(f"has_type on {describe(self.pattern)}: expected a Type, got {ttype!r}")
        self.type = ttype


class DataTypePattern(DFPattern):
    """Matches what ``pattern`` matches if it is a tensor of this dtype."""

    __slots__ = ("pattern", "dtype")

    def __init__(self, pattern: DFPattern, dtype: str) -> None:
        self.pattern = _pattern(pattern, "pattern of has_dtype")
        if not isinstance(dtype, str):
            raise DFPatternError(f"has_dtype on {describe(self.pattern)}: expected a dtype string, "
                                 f"got {dtype!r}")
        self.dtype = dtype


class ShapePattern(DFPattern):
    """Matches what ``pattern`` matches if it is a tensor of this shape."""

    __slots__ = ("pattern", "shape")

    def __init__(self, pattern: DFPattern, shape) -> None:
        self.pattern = _pattern(pattern, "pattern of has_shape")
        try:
            self.shape = tuple(int(d) if isinstance(d, int) else d for d in shape)
        except TypeError:
            raise DFPatternError(f"has_shape on {describe(self.pattern)}: expected a sequence of "
                                 f"dimensions, got {shape!r}") from None


class DominatorPattern(DFPattern):
    """Matches ``child`` when every path from it back to ``parent`` goes through ``path``."""

    __slots__ = ("parent", "path", "child")

    def __init__(self, parent: DFPattern, path: DFPattern, child: DFPattern) -> None:
        self.parent = _pattern(parent, "parent of a dominator pattern")
        self.path = _pattern(path, "path of a dominator pattern")
        self.child = _pattern(child, "child of a dominator pattern")


def children(p: DFPattern) -> tuple:
    """The sub-patterns of ``p`` in TVM's visiting order (its pattern graph's inputs)."""
    if isinstance(p, CallPattern):
        return (p.op, *(p.args or ()))
    if isinstance(p, TuplePattern):
        return p.fields or ()
    if isinstance(p, TupleGetItemPattern):
        return (p.tuple,)
    if isinstance(p, IfPattern):
        return (p.cond, p.true_branch, p.false_branch)
    if isinstance(p, LetPattern):
        return (p.var, p.value, p.body)
    if isinstance(p, FunctionPattern):
        return (*(p.params or ()), p.body)
    if isinstance(p, AltPattern):
        return (p.left, p.right)
    if isinstance(p, (AttrPattern, TypePattern, DataTypePattern, ShapePattern)):
        return (p.pattern,)
    if isinstance(p, DominatorPattern):
        return (p.parent, p.path, p.child)
    return ()


def pattern_post_order(root: DFPattern) -> list[DFPattern]:
    """Every pattern node once, sub-patterns first (iterative)."""
    out, seen, stack = [], set(), [(root, False)]
    while stack:
        p, done = stack.pop()
        if done:
            out.append(p)
            continue
        if id(p) in seen:
            continue
        seen.add(id(p))
        stack.append((p, True))
        stack.extend((c, False) for c in reversed(children(p)) if id(c) not in seen)
    return out


def describe(p: DFPattern) -> str:
    """A short one-line text of a pattern (deep sub-patterns elided)."""
    return _describe(p, 3)


def _describe(p: DFPattern, depth: int) -> str:
    if depth <= 0:
        return "..."
    d = depth - 1
    if isinstance(p, WildcardPattern):
        return "*"
    if isinstance(p, VarPattern):
        return f"is_var({p.name!r})" if p.name else "is_var()"
    if isinstance(p, ConstantPattern):
        return "is_constant()"
    if isinstance(p, ExprPattern):
        if isinstance(p.expr, Op):
            return p.expr.name
        return "is_constant(...)" if isinstance(p.expr, Constant) else f"is_expr({type(p.expr).__name__})"
    if isinstance(p, CallPattern):
        args = "None" if p.args is None else ", ".join(_describe(a, d) for a in p.args)
        return f"{_describe(p.op, d)}({args})"
    if isinstance(p, TuplePattern):
        return "(" + ("..." if p.fields is None else ", ".join(_describe(f, d) for f in p.fields)) + ")"
    if isinstance(p, TupleGetItemPattern):
        return f"{_describe(p.tuple, d)}.{'*' if p.index == -1 else p.index}"
    if isinstance(p, AltPattern):
        return f"({_describe(p.left, d)} | {_describe(p.right, d)})"
    if isinstance(p, AttrPattern):
        return f"{_describe(p.pattern, d)}.has_attr({p.attrs})"
    if isinstance(p, TypePattern):
        return f"{_describe(p.pattern, d)}.has_type({p.type})"
    if isinstance(p, DataTypePattern):
        return f"{_describe(p.pattern, d)}.has_dtype({p.dtype!r})"
    if isinstance(p, ShapePattern):
        return f"{_describe(p.pattern, d)}.has_shape({p.shape})"
    if isinstance(p, DominatorPattern):
        return f"dominates({_describe(p.parent, d)}, {_describe(p.path, d)}, {_describe(p.child, d)})"
    return type(p).__name__


# -- constructors, with TVM's names ----------------------------------------------------------------
def wildcard() -> WildcardPattern:
    """A pattern that matches anything."""
    return WildcardPattern()


def is_var(name: str = "") -> VarPattern:
    """A pattern matching a Var (named ``name`` unless empty)."""
    return VarPattern(name)


def is_constant() -> ConstantPattern:
    """A pattern matching any constant."""
    return ConstantPattern()


def is_expr(expr: Any) -> ExprPattern:
    """A pattern matching exactly this expression."""
    return ExprPattern(as_expr(expr) if not isinstance(expr, Expr) else expr)


def is_op(op_name: str) -> ExprPattern:
    """A pattern matching the operator named ``op_name`` (call it on argument patterns)."""
    if not isinstance(op_name, str) or lookup(op_name) is None:
        try:
            from ...ops.registry import get

            get(str(op_name))
        except UnknownNameError as e:
            raise UnknownNameError(f"is_op({op_name!r}): {e}") from None
    return ExprPattern(Op(op_name))


def is_tuple(fields: list | None) -> TuplePattern:
    """A pattern matching a tuple of these field patterns (None: any tuple)."""
    return TuplePattern(fields)


def is_tuple_get_item(tuple_value: DFPattern, index: int | None = None) -> TupleGetItemPattern:
    """A pattern matching a projection of a tuple (index None: any index)."""
    return TupleGetItemPattern(tuple_value, index)


def is_if(cond: DFPattern, true_branch: DFPattern, false_branch: DFPattern) -> IfPattern:
    """A pattern matching an if expression."""
    return IfPattern(cond, true_branch, false_branch)


def is_let(var: DFPattern, value: DFPattern, body: DFPattern) -> LetPattern:
    """A pattern matching a let expression."""
    return LetPattern(var, value, body)


def has_attr(attrs: dict, pattern: DFPattern | None = None) -> AttrPattern:
    """A pattern requiring these attributes (of ``pattern``, default a wildcard)."""
    return (wildcard() if pattern is None else pattern).has_attr(attrs)


def has_type(ttype: Type, pattern: DFPattern | None = None) -> TypePattern:
    """A pattern requiring this checked type (of ``pattern``, default a wildcard)."""
    return (wildcard() if pattern is None else pattern).has_type(ttype)


def has_dtype(dtype: str, pattern: DFPattern | None = None) -> DataTypePattern:
    """A pattern requiring this dtype (of ``pattern``, default a wildcard)."""
    return (wildcard() if pattern is None else pattern).has_dtype(dtype)


def has_shape(shape, pattern: DFPattern | None = None) -> ShapePattern:
    """A pattern requiring this shape (of ``pattern``, default a wildcard)."""
    return (wildcard() if pattern is None else pattern).has_shape(shape)


def dominates(parent: DFPattern, path: DFPattern, child: DFPattern) -> DominatorPattern:
    """A pattern: ``child`` dominates ``parent``, every path between them matching ``path``."""
    return DominatorPattern(parent, path, child)
