"""Side conditions and computed attributes: a small expression language over shapes and attrs.

The syntax is Python's expression syntax (``and``, ``or``, ``not``, comparisons, ``+ - * // %``,
indexing, lists) with pattern variables ``?x`` and these functions of a class variable:
``rank(?x)``, ``shape(?x)`` (a tuple; ``shape(?x)[0]`` a dimension), ``dtype(?x)``, ``len(...)``,
``leaf(?x)`` (``?x`` is a variable or a constant of the program, such as a weight),
``free(?b, ?e)`` (is the let-bound ``?b`` free in ``?e``) and ``once(?b, ?e)`` (is it free exactly
once), and the attribute functions of ``tables.py`` (``compose_axes(?p, ?q)``,
``identity_axes(?p)``). An attribute variable (``?ax`` in
``axis=?ax``) stands for its value. ``?root`` is the matched left side.

Truth is three-valued: a dimension that is ``?`` or symbolic makes comparisons unknown, and a
condition holds only when it is known to be true.

A conjunction's parts that egglog can test (comparisons of ranks, concrete dims, dtypes and
attribute strings, ``not free(..)``) compile to query facts; the rest is checked in Python.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from ..egraph.encoding import AST_LOCK
from ..ir.types import Type
from .condegg import NO, EggFacts, egg_str, literal
from .condeval import BINOPS, CMP, SCOPE_FUNCS, UNKNOWN, conjuncts, evaluate
from .sidetext import PV_PREFIX, prepare_expression
from .syntax import Located
from .tables import ATTR_FUNCTIONS, AttrFunction

__all__ = ["Expression", "UNKNOWN", "parse_expression", "Kinds", "egg_str", "EvalEnv", "evaluate"]


_FUNCS = {"rank", "shape", "dtype", "free", "once", "leaf", "len", *ATTR_FUNCTIONS}


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
                 is_leaf: Callable[[str], bool | None] | None = None) -> None:
        self.type_of, self.attr, self.occurrences = type_of, attr, occurrences
        self.is_leaf = is_leaf


class RuleSyntaxError(Exception):
    """An error in an expression, at a file offset."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass
class Expression:
    """A parsed condition or computed attribute."""

    source: Located
    tree: ast.expr
    origin: list[int]  # file offset of each character of ``text``
    kinds: Kinds
    text: str  # the text parsed (``?x`` spelled as a Python name, in parentheses)
    _lines: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._lines = _line_starts(self.text)

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, env: EvalEnv):
        """The value (UNKNOWN, or None for an unknown truth value, where shapes do not tell)."""
        return evaluate(self.tree, env)

    def holds(self, env: EvalEnv) -> bool:
        """Whether the condition is known to be true."""
        return evaluate(self.tree, env) is True

    def variables(self) -> set[str]:
        """The pattern variables the expression mentions."""
        return {n.id[len(PV_PREFIX):] for n in ast.walk(self.tree) if isinstance(n, ast.Name)}

    def attr_functions(self) -> list[AttrFunction]:
        """The attribute functions the expression calls (their tables must be declared)."""
        names = {n.func.id for n in ast.walk(self.tree) if isinstance(n, ast.Call)}
        return [f for k, f in ATTR_FUNCTIONS.items() if k in names]

    def fixed_ranks(self) -> dict[str, int]:
        """The ranks the condition's conjuncts fix (``rank(?x) == 4``)."""
        out = {}
        for p in conjuncts(self.tree):
            if isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.Eq):
                for a, b in ((p.left, p.comparators[0]), (p.comparators[0], p.left)):
                    if isinstance(a, ast.Call) and a.func.id == "rank" and \
                            isinstance(b, ast.Constant) and type(b.value) is int:
                        out[a.args[0].id[len(PV_PREFIX):]] = b.value
        return out

    def function_args(self) -> list[tuple[str, AttrFunction]]:
        """(attribute variable, function) for each variable passed to an attribute function."""
        out = []
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Call) and n.func.id in ATTR_FUNCTIONS:
                for a in n.args:
                    if isinstance(a, ast.Name):
                        out.append((a.id[len(PV_PREFIX):], ATTR_FUNCTIONS[n.func.id]))
        return out

    def egglog_value(self, fresh: Callable[[], str]) -> tuple[list[str], str] | None:
        """Facts and a variable holding the value, for an attribute function of attribute
        variables and literals; None when egglog cannot compute the value."""
        return EggFacts(self.kinds, fresh).value(self.tree)

    def uses_scoping(self) -> bool:
        """Whether it reads the let analyses (``free``, ``once``)."""
        return any(isinstance(n, ast.Call) and n.func.id in SCOPE_FUNCS for n in ast.walk(self.tree))

    # -- compilation ---------------------------------------------------------------------------
    def split(self) -> tuple[list[ast.expr], list[ast.expr]]:
        """The conjuncts egglog can test, and the rest."""
        parts = conjuncts(self.tree)
        native, rest = [], []
        for p in parts:
            (native if EggFacts(self.kinds).atom(p) is not None else rest).append(p)
        return native, rest

    def egglog_facts(self, parts: list[ast.expr], fresh: Callable[[], str]) -> list[str]:
        """Query facts for conjuncts that ``split`` found native."""
        egg = EggFacts(self.kinds, fresh)
        facts: list[str] = []
        for p in parts:
            facts.extend(egg.atom(p))
        return facts

    def offset_of(self, node: ast.AST) -> int:
        """The file offset of an AST node."""
        pos = _abs_pos(self._lines, node.lineno, node.col_offset)
        return self.origin[max(0, min(pos, len(self.origin) - 1))] if self.origin else 0



def parse_expression(piece: Located, kinds: Kinds, what: str = "condition") -> Expression:
    """Parse and check a condition or computed attribute; RuleSyntaxError on bad input."""
    prepared = prepare_expression(piece)
    text = prepared.text
    try:
        with AST_LOCK:  # (ast.parse is not thread-safe in CPython 3.11.7: see AST_LOCK)
            tree = ast.parse("(" + text + "\n)", mode="eval").body
    except SyntaxError as exc:
        lines = _line_starts("(" + text + "\n)")
        pos = _abs_pos(lines, exc.lineno or 1, (exc.offset or 1) - 1) - 1
        raise RuleSyntaxError(f"syntax error in the {what}: {exc.msg}",
                              prepared.file_offset(pos)) from None
    # positions inside the tree count the "(" we added
    origin = [piece.offset] + prepared.origin + [prepared.file_offset(len(text))] * 2
    expr = Expression(piece, tree, origin, kinds, "(" + text + "\n)")
    checker = _Checker(expr, kinds, what)
    checker.check(tree, top=True)
    top = {id(p) for p in conjuncts(tree)}
    for n in ast.walk(tree):  # leaf() is a pattern restriction, not a truth value to combine
        if isinstance(n, ast.Call) and n.func.id == "leaf" and id(n) not in top:
            raise checker.fail("leaf(?x) must be one of the conditions joined by `and`", n)
    return expr


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def _abs_pos(starts: list[int], lineno: int, col: int) -> int:
    return starts[min(max(lineno, 1), len(starts)) - 1] + col


class _Checker:
    """Rejects what the language does not have, naming where."""

    def __init__(self, expr: Expression, kinds: Kinds, what: str) -> None:
        self.expr, self.kinds, self.what = expr, kinds, what

    def fail(self, message: str, node: ast.AST) -> RuleSyntaxError:
        return RuleSyntaxError(f"{self.what}: {message}", self.expr.offset_of(node))

    def var(self, node: ast.AST) -> str:
        if not isinstance(node, ast.Name) or not node.id.startswith(PV_PREFIX):
            raise self.fail("expected a pattern variable such as ?x", node)
        return node.id[len(PV_PREFIX):]

    def check(self, node: ast.AST, top: bool = False) -> None:
        k = self.kinds
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[node.func.id]
            if len(node.args) != f.arity or node.keywords:
                raise self.fail(f"{f.name}() takes {f.arity} argument(s)", node)
            for a in node.args:
                if not (isinstance(a, ast.Name) or literal(a) is not NO):
                    raise self.fail(f"the arguments of {f.name}() are attribute variables or "
                                    "literals", a)
                self.check(a)
            return
        if isinstance(node, ast.Name):
            name = node.id[len(PV_PREFIX):] if node.id.startswith(PV_PREFIX) else None
            if name is None:
                raise self.fail(f"unknown name `{node.id}` (pattern variables are written ?name)",
                                node)
            if name in k.attrs:
                return
            if name in k.classes or name in k.binders:
                raise self.fail(f"?{name} is an expression; use rank(?{name}), shape(?{name}) or "
                                f"dtype(?{name})", node)
            raise self.fail(f"?{name} does not appear in the left side", node)
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, (ast.List, ast.Tuple)):
            for e in node.elts:
                self.check(e)
            return
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self.check(v)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            return self.check(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            self.check(node.left)
            return self.check(node.right)
        if isinstance(node, ast.Compare) and all(type(o) in CMP for o in node.ops):
            self.check(node.left)
            for c in node.comparators:
                self.check(c)
            return
        if isinstance(node, ast.Subscript):
            self.check(node.value)
            s = node.slice
            if isinstance(s, ast.Slice):
                for part in (s.lower, s.upper, s.step):
                    if part is not None:
                        self.check(part)
            else:
                self.check(s)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            if node.keywords:
                raise self.fail(f"{node.func.id}() takes no keyword arguments", node)
            name = node.func.id
            if name == "len":
                if len(node.args) != 1:
                    raise self.fail("len() takes one argument", node)
                return self.check(node.args[0])
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
            return
        text = ast.unparse(node).replace(PV_PREFIX, "?")
        raise self.fail(f"`{text}` is not part of the condition language", node)
