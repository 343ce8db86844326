"""Side conditions and computed attributes: a small expression language over shapes and attrs.

The syntax is Python's expression syntax (``and``, ``or``, ``not``, comparisons, ``+ - * // %``,
indexing, lists) with pattern variables ``?x`` and these functions of a class variable:
``rank(?x)``, ``shape(?x)`` (a tuple; ``shape(?x)[0]`` a dimension), ``dtype(?x)``, ``len(...)``,
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
import operator
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from ..egraph.encoding import attr_key
from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType, Type
from .sidetext import PV_PREFIX, prepare_expression
from .syntax import Located
from .tables import ATTR_FUNCTIONS, AttrFunction

__all__ = ["Expression", "UNKNOWN", "parse_expression", "Kinds", "egg_str", "EvalEnv"]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
_FUNCS = {"rank", "shape", "dtype", "free", "once", "len", *ATTR_FUNCTIONS}
_SCOPE_FUNCS = ("free", "once")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_EGG_CMP = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def egg_str(text: str) -> str:
    """An egglog string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
                 occurrences: Callable[[str, str], int | None] | None = None) -> None:
        self.type_of, self.attr, self.occurrences = type_of, attr, occurrences


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
    origin: list[int]
    kinds: Kinds

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, env: EvalEnv):
        """The value (UNKNOWN, or None for an unknown truth value, where shapes do not tell)."""
        return _eval(self.tree, env)

    def holds(self, env: EvalEnv) -> bool:
        """Whether the condition is known to be true."""
        return _eval(self.tree, env) is True

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
        for p in _conjuncts(self.tree):
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
        return _Egg(self.kinds, fresh).value(self.tree)

    def uses_scoping(self) -> bool:
        return any(isinstance(n, ast.Call) and n.func.id in _SCOPE_FUNCS for n in ast.walk(self.tree))

    # -- compilation ---------------------------------------------------------------------------
    def split(self) -> tuple[list[ast.expr], list[ast.expr]]:
        """The conjuncts egglog can test, and the rest."""
        parts = _conjuncts(self.tree)
        native, rest = [], []
        for p in parts:
            (native if _Egg(self.kinds).atom(p) is not None else rest).append(p)
        return native, rest

    def egglog_facts(self, parts: list[ast.expr], fresh: Callable[[], str]) -> list[str]:
        """Query facts for conjuncts that ``split`` found native."""
        egg = _Egg(self.kinds, fresh)
        facts: list[str] = []
        for p in parts:
            facts.extend(egg.atom(p))
        return facts

    def offset_of(self, node: ast.AST) -> int:
        """The file offset of an AST node."""
        pos = _abs_pos(self._lines, node.lineno, node.col_offset)
        return self.origin[max(0, min(pos, len(self.origin) - 1))] if self.origin else 0

    @property
    def _lines(self) -> list[int]:
        return _line_starts(self._text)

    _text: str = ""


def parse_expression(piece: Located, kinds: Kinds, what: str = "condition") -> Expression:
    """Parse and check a condition or computed attribute; RuleSyntaxError on bad input."""
    prepared = prepare_expression(piece)
    text = prepared.text
    try:
        tree = ast.parse("(" + text + "\n)", mode="eval").body
    except SyntaxError as exc:
        lines = _line_starts("(" + text + "\n)")
        pos = _abs_pos(lines, exc.lineno or 1, (exc.offset or 1) - 1) - 1
        raise RuleSyntaxError(f"syntax error in the {what}: {exc.msg}",
                              prepared.file_offset(pos)) from None
    # positions inside the tree count the "(" we added
    origin = [piece.offset] + prepared.origin + [prepared.file_offset(len(text))] * 2
    expr = Expression(piece, tree, origin, kinds)
    expr._text = "(" + text + "\n)"
    _Checker(expr, kinds, what).check(tree, top=True)
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
                if not (isinstance(a, ast.Name) or _literal(a) is not _NO):
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
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self.check(node.left)
            return self.check(node.right)
        if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
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
            if name in _SCOPE_FUNCS:
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


# -- evaluation --------------------------------------------------------------------------------
def _is_plain(v) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


def _dims(t: Type | None):
    if not isinstance(t, TensorType):
        return None
    return tuple(UNKNOWN if d is AnyDim else d for d in t.shape)


def _eval(node: ast.expr, env: EvalEnv):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.attr(node.id[len(PV_PREFIX):])
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(_eval(e, env) for e in node.elts)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in values else (None if any(v is not True for v in values) else True)
        return True if True in values else (None if any(v is not False for v in values) else False)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return None if v is None or v is UNKNOWN else not v
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else UNKNOWN
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(a, tuple) and isinstance(b, tuple) and isinstance(node.op, ast.Add):
            return a + b
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return UNKNOWN
        try:
            return _BINOPS[type(node.op)](a, b)
        except ZeroDivisionError:
            return UNKNOWN
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        result = True
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            r = _compare(_CMP[type(op)], left, right)
            if r is False:
                return False
            if r is None:
                result = None
            left = right
        return result
    if isinstance(node, ast.Subscript):
        v = _eval(node.value, env)
        if not isinstance(v, tuple):
            return UNKNOWN
        s = node.slice
        if isinstance(s, ast.Slice):
            parts = [None if p is None else _eval(p, env) for p in (s.lower, s.upper, s.step)]
            if any(p is not None and not isinstance(p, int) for p in parts):
                return UNKNOWN
            return v[slice(*parts)]
        i = _eval(s, env)
        if not isinstance(i, int) or not -len(v) <= i < len(v):
            return UNKNOWN
        return v[i]
    if isinstance(node, ast.Call):
        name = node.func.id
        if name in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[name]
            args = [_eval(a, env) for a in node.args]
            if any(a is UNKNOWN for a in args):
                return None if f.condition else UNKNOWN
            value = f.python(*args)
            return value if value is not None or f.condition else UNKNOWN
        if name == "len":
            v = _eval(node.args[0], env)
            return len(v) if isinstance(v, tuple) else UNKNOWN
        if name in _SCOPE_FUNCS:
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
        parts = [_compare("==", x, y) for x, y in zip(a, b)]
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


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        out = []
        for v in node.values:
            out.extend(_conjuncts(v))
        return out
    return [node]


# -- compilation to egglog facts ----------------------------------------------------------------
class _Egg:
    """Translates a conjunct into egglog query facts, or answers None when it cannot."""

    def __init__(self, kinds: Kinds, fresh: Callable[[], str] | None = None) -> None:
        self.kinds = kinds
        self.fresh = fresh or (lambda: "?__t")
        self.facts: list[str] = []

    def atom(self, node: ast.expr) -> list[str] | None:
        self.facts = []
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = node.operand
            if isinstance(inner, ast.Call) and inner.func.id == "free":
                b = "?" + inner.args[0].id[len(PV_PREFIX):]
                e = "?" + inner.args[1].id[len(PV_PREFIX):]
                s = self.fresh()
                return [f"(= {s} (fv {e}))", f"(set-not-contains {s} {b})"]
            if isinstance(inner, ast.Compare) and len(inner.ops) == 1 and \
                    isinstance(inner.ops[0], ast.Eq):
                return self.compare("!=", inner.left, inner.comparators[0])
            return None
        if isinstance(node, ast.Call) and node.func.id in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[node.func.id]
            args = self.args(node)
            if not f.condition or args is None:
                return None
            return [f"({f.egg_name} {' '.join(args)})"]
        if isinstance(node, ast.Call) and node.func.id == "once":
            b = "?" + node.args[0].id[len(PV_PREFIX):]
            return [f"(once {b} ?{node.args[1].id[len(PV_PREFIX):]})"]
        if not isinstance(node, ast.Compare):
            return None
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if self.compare(_CMP[type(op)], left, right) is None:
                return None
            left = right
        return self.facts

    def args(self, call: ast.Call) -> list[str] | None:
        """Egglog Strings for the arguments of an attribute function."""
        out = []
        for a in call.args:
            if isinstance(a, ast.Name):
                out.append("?" + a.id[len(PV_PREFIX):])
                continue
            literal = _literal(a)
            if literal is _NO:
                return None
            from ..ir.attrs import canonical_attr

            out.append(egg_str(attr_key(canonical_attr(literal))))
        return out

    def value(self, node: ast.expr) -> tuple[list[str], str] | None:
        if not (isinstance(node, ast.Call) and node.func.id in ATTR_FUNCTIONS):
            return None
        f = ATTR_FUNCTIONS[node.func.id]
        args = self.args(node)
        if f.condition or args is None:
            return None
        out = self.fresh()
        return [f"(= {out} ({f.egg_name} {' '.join(args)}))"], out

    def compare(self, op: str, a: ast.expr, b: ast.expr) -> list[str] | None:
        sa, sb = self.string(a, b), self.string(b, a)
        if sa is not None and sb is not None and op in ("==", "!="):
            self.facts.append(f"({_EGG_CMP[op]} {sa} {sb})")
            return self.facts
        guard = "eq" if op == "==" else "concrete"
        ia, ib = self.i64(a, guard), self.i64(b, guard)
        if ia is None or ib is None:
            return None
        self.facts.append(f"({_EGG_CMP[op]} {ia} {ib})")
        return self.facts

    def string(self, node: ast.expr, other: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(other, ast.Name):
                return self.attr_literal(other, node.value)
            return egg_str(node.value)
        if isinstance(node, ast.Name):
            return "?" + node.id[len(PV_PREFIX):]
        if isinstance(node, ast.Call) and node.func.id == "dtype":
            return f"(dtype ?{node.args[0].id[len(PV_PREFIX):]})"
        if isinstance(other, ast.Name) and _literal(node) is not _NO:
            return self.attr_literal(other, _literal(node))
        return None

    def attr_literal(self, var: ast.Name, value) -> str | None:
        site = self.kinds.attr_sites.get(var.id[len(PV_PREFIX):])
        if site is None:
            return None
        from .pattern import canonical_attr_value

        try:
            return egg_str(attr_key(canonical_attr_value(site[0], site[1], value)))
        except Exception:  # noqa: BLE001 - a value the op rejects never matches: not native
            return None

    def i64(self, node: ast.expr, guard: str) -> str | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return str(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.i64(node.operand, guard)
            return None if inner is None else f"(- 0 {inner})"
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
            left, right = self.i64(node.left, "concrete"), self.i64(node.right, "concrete")
            if left is None or right is None:
                return None
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(node.op)]
            return f"({sym} {left} {right})"
        if isinstance(node, ast.Call) and node.func.id == "rank":
            return f"(rank ?{node.args[0].id[len(PV_PREFIX):]})"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and \
                node.value.func.id == "shape" and not isinstance(node.slice, ast.Slice):
            index = _literal(node.slice)
            if type(index) is not int:
                return None
            v = "?" + node.value.args[0].id[len(PV_PREFIX):]
            at = str(index) if index >= 0 else f"(+ (rank {v}) {index})"
            d = self.fresh()
            self.facts.append(f"(= {d} (dim {v} {at}))")
            if index < 0:
                self.facts.append(f"(>= (+ (rank {v}) {index}) 0)")
            self.facts.append(f"(!= {d} -1)" if guard == "eq" else f"(>= {d} 0)")
            return d
        return None


_NO = object()


def _literal(node: ast.expr):
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return _NO
    return tuple(value) if isinstance(value, list) else value
