"""Side conditions and computed attributes: a small expression language over shapes and attrs.

The syntax is Python's expression syntax (``and``, ``or``, ``not``, comparisons, ``+ - * // %``,
indexing, lists) with pattern variables ``?x`` and these functions of a class variable:
``rank(?x)``, ``shape(?x)`` (a tuple; ``shape(?x)[0]`` a dimension), ``dtype(?x)``, ``len(...)``,
``leaf(?x)`` (``?x`` is a variable or a constant of the program, such as a weight),
``positive(?x)`` (``?x`` is a constant of the program whose every value is above zero, such as a
batch norm's scale; a class the e-graph computes, or a variable, never is),
``free(?b, ?e)`` (is the let-bound ``?b`` free in ``?e``) and ``once(?b, ?e)`` (is it free exactly
once), and the attribute functions of ``attr_functions.py`` (``compose_axes(?p, ?q)``,
``identity_axes(?p)``). An attribute variable (``?ax`` in
``axis=?ax``) stands for its value. ``?root`` is the matched left side.

Truth is three-valued: a dimension that is ``?`` or symbolic makes comparisons unknown, and a
condition holds only when it is known to be true.

A conjunction's parts that the e-graph can test (comparisons of ranks, concrete dims, dtypes and
attribute values, ``not free(..)``) are lowered to facts (``native.py``) that the e-graph's
rule compiler writes as query facts; the rest is checked in Python.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from ..ir.pyparse import AST_LOCK
from ..ir.types import Type
from .attr_functions import ATTR_FUNCTIONS, AttrFunction
from .condast import (
    NO,
    SCOPE_FUNCS,
    Call,
    Compare,
    Cond,
    CondSyntaxError,
    Index,
    Lit,
    Var,
    Visitor,
    conjuncts,
    from_python,
    literal,
    walk,
)
from .condeval import UNKNOWN, evaluate
from .native import FunctionValue, Lowering
from .sidetext import prepare_expression
from .syntax import Located

__all__ = ["Expression", "UNKNOWN", "parse_expression", "Kinds", "EvalEnv", "evaluate",
           "RuleSyntaxError"]


@dataclass(frozen=True)
class Kinds:
    """What each variable of a rule is: an e-class, an attribute value, or a let binder."""

    classes: frozenset
    attrs: frozenset
    binders: frozenset
    attr_sites: dict  # attr variable -> (op record, attribute name) of its first use


class EvalEnv:
    """What an expression reads: types of class variables, attribute values, free variables."""

    def __init__(self, type_of: Callable[[str], Type | None], attr: Callable[[str], object],
                 occurrences: Callable[[str, str], int | None] | None = None,
                 is_leaf: Callable[[str], bool | None] | None = None,
                 is_positive: Callable[[str], bool | None] | None = None) -> None:
        self.type_of, self.attr, self.occurrences = type_of, attr, occurrences
        self.is_leaf, self.is_positive = is_leaf, is_positive


RuleSyntaxError = CondSyntaxError  # an error in an expression, at a file offset


@dataclass
class Expression:
    """A parsed condition or computed attribute."""

    source: Located
    tree: Cond
    kinds: Kinds

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, env: EvalEnv):
        """The value (UNKNOWN, or None for an unknown truth value, where shapes do not tell)."""
        return evaluate(self.tree, env)

    def holds(self, env: EvalEnv) -> bool:
        """Whether the condition is known to be true."""
        return evaluate(self.tree, env) is True

    def variables(self) -> set[str]:
        """The pattern variables the expression mentions."""
        return {n.name for n in walk(self.tree) if isinstance(n, Var)}

    def attr_functions(self) -> list[AttrFunction]:
        """The attribute functions the expression calls (their tables must be declared)."""
        names = {n.func for n in walk(self.tree) if isinstance(n, Call)}
        return [f for k, f in ATTR_FUNCTIONS.items() if k in names]

    def fixed_ranks(self) -> dict[str, int]:
        """The ranks the condition's conjuncts fix (``rank(?x) == 4``)."""
        out = {}
        for p in conjuncts(self.tree):
            if isinstance(p, Compare) and p.ops == ("==",):
                left, right = p.operands
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, Call) and a.func == "rank" and \
                            isinstance(b, Lit) and type(b.value) is int:
                        out[a.args[0].name] = b.value
        return out

    def fixed_dims(self) -> dict[str, dict[int, int]]:
        """The dimensions the condition's conjuncts fix (``shape(?x)[1] == 1``): variable ->
        {index: size} (a negative index counts from the end)."""
        out: dict[str, dict[int, int]] = {}
        for p in conjuncts(self.tree):
            if not (isinstance(p, Compare) and p.ops == ("==",)):
                continue
            left, right = p.operands
            for a, b in ((left, right), (right, left)):
                if (isinstance(a, Index) and isinstance(a.value, Call) and a.value.func == "shape"
                        and isinstance(a.index, Lit) and type(a.index.value) is int
                        and isinstance(b, Lit) and type(b.value) is int and b.value > 0):
                    out.setdefault(a.value.args[0].name, {})[a.index.value] = b.value
        return out

    def function_args(self) -> list[tuple[str, AttrFunction]]:
        """(attribute variable, function) for each variable passed to an attribute function."""
        out = []
        for n in walk(self.tree):
            if isinstance(n, Call) and n.func in ATTR_FUNCTIONS:
                for a in n.args:
                    if isinstance(a, Var):
                        out.append((a.name, ATTR_FUNCTIONS[n.func]))
        return out

    def native_value(self) -> FunctionValue | None:
        """The value as the e-graph computes it, for an attribute function of attribute
        variables and literals; None when the e-graph cannot compute it."""
        return Lowering(self.kinds).value(self.tree)

    def uses_scoping(self) -> bool:
        """Whether it reads the let analyses (``free``, ``once``)."""
        return any(isinstance(n, Call) and n.func in SCOPE_FUNCS for n in walk(self.tree))

    # -- the native part ----------------------------------------------------------------------
    def split(self) -> tuple[list, list[Cond]]:
        """The facts of the conjuncts the e-graph tests (``relaygraph.rewrite.native``), and
        the conjuncts left to Python."""
        facts, rest = [], []
        for p in conjuncts(self.tree):
            lowered = Lowering(self.kinds).atom(p)
            if lowered is None:
                rest.append(p)
            else:
                facts.extend(lowered)
        return facts, rest


def parse_expression(piece: Located, kinds: Kinds, what: str = "condition") -> Expression:
    """Parse and check a condition or computed attribute; RuleSyntaxError on bad input."""
    prepared = prepare_expression(piece)
    text = "(" + prepared.text + "\n)"
    lines = _line_starts(text)
    try:
        with AST_LOCK:  # (ast.parse is not thread-safe in CPython 3.11.7: see AST_LOCK)
            tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        pos = _abs_pos(lines, exc.lineno or 1, (exc.offset or 1) - 1) - 1
        raise RuleSyntaxError(f"syntax error in the {what}: {exc.msg}",
                              prepared.file_offset(pos)) from None
    except RecursionError:
        raise RuleSyntaxError(f"the {what} is nested too deeply", piece.offset) from None
    # positions inside the tree count the "(" we added
    origin = [piece.offset] + prepared.origin + [prepared.file_offset(len(prepared.text))] * 2

    def offset_of(node: ast.AST) -> int:
        pos = _abs_pos(lines, node.lineno, node.col_offset)
        return origin[max(0, min(pos, len(origin) - 1))]

    try:
        cond = from_python(tree, offset_of)
    except CondSyntaxError as exc:
        raise RuleSyntaxError(f"{what}: {exc}", exc.offset) from None
    checker = _Checker(kinds, what)
    checker.visit(cond)
    top = {id(p) for p in conjuncts(cond)}
    for n in walk(cond):  # leaf() and positive() restrict the pattern, not truth values to combine
        if isinstance(n, Call) and n.func in ("leaf", "positive") and id(n) not in top:
            raise checker.fail(f"{n.func}(?x) must be one of the conditions joined by `and`", n)
    return Expression(piece, cond, kinds)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def _abs_pos(starts: list[int], lineno: int, col: int) -> int:
    return starts[min(max(lineno, 1), len(starts)) - 1] + col


class _Checker(Visitor):
    """Rejects what the language does not have, naming where."""

    def __init__(self, kinds: Kinds, what: str) -> None:
        self.kinds, self.what = kinds, what

    def fail(self, message: str, node: Cond) -> RuleSyntaxError:
        return RuleSyntaxError(f"{self.what}: {message}", node.pos)

    def var(self, node: Cond) -> str:
        if not isinstance(node, Var):
            raise self.fail("expected a pattern variable such as ?x", node)
        return node.name

    def visit_all(self, nodes) -> None:
        for n in nodes:
            if n is not None:
                self.visit(n)

    def visit_Lit(self, node: Lit) -> None:
        pass

    def visit_Var(self, node: Var) -> None:
        k, name = self.kinds, node.name
        if name in k.attrs:
            return
        if name in k.classes or name in k.binders:
            raise self.fail(f"?{name} is an expression; use rank(?{name}), shape(?{name}) or "
                            f"dtype(?{name})", node)
        raise self.fail(f"?{name} does not appear in the left side", node)

    def visit_Seq(self, node) -> None:
        self.visit_all(node.items)

    def visit_BoolOp(self, node) -> None:
        self.visit_all(node.parts)

    def visit_Not(self, node) -> None:
        self.visit(node.operand)

    visit_Neg = visit_Not

    def visit_BinOp(self, node) -> None:
        self.visit_all((node.left, node.right))

    def visit_Compare(self, node) -> None:
        self.visit_all(node.operands)

    def visit_Index(self, node) -> None:
        self.visit_all((node.value, node.index))

    def visit_Slice(self, node) -> None:
        self.visit_all((node.value, node.lower, node.upper, node.step))

    def visit_Call(self, node: Call) -> None:
        k, name = self.kinds, node.func
        if name in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[name]
            if len(node.args) != f.arity:
                raise self.fail(f"{f.name}() takes {f.arity} argument(s)", node)
            for a in node.args:
                if not (isinstance(a, Var) or literal(a) is not NO):
                    raise self.fail(f"the arguments of {f.name}() are attribute variables or "
                                    "literals", a)
                self.visit(a)
            return
        if name == "len":
            if len(node.args) != 1:
                raise self.fail("len() takes one argument", node)
            return self.visit(node.args[0])
        if name in SCOPE_FUNCS:
            if len(node.args) != 2:
                raise self.fail(f"{name}(?binder, ?expr) takes two arguments", node)
            b, e = self.var(node.args[0]), self.var(node.args[1])
            if b not in k.binders:
                raise self.fail(f"?{b} is not bound by a let on the left side", node.args[0])
            if e not in k.classes:
                raise self.fail(f"?{e} is not an expression variable", node.args[1])
            return
        if len(node.args) != 1:
            raise self.fail(f"{name}() takes one pattern variable", node)
        v = self.var(node.args[0])
        if v not in k.classes:
            raise self.fail(f"{name}(?{v}): ?{v} is not an expression variable of the left "
                            "side", node.args[0])
