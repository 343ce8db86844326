"""Conditions and attribute functions as egglog query facts over the encoding's
``rank``/``dim``/``dtype`` functions, attribute Strings and the let analyses."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..egraph.encoding import attr_key
from ..ir.attrs import canonical_attr
from .condeval import CMP
from .sidetext import PV_PREFIX
from .tables import ATTR_FUNCTIONS

__all__ = ["EggFacts", "egg_str", "literal", "NO"]

EGG_CMP = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def egg_str(text: str) -> str:
    """An egglog string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class EggFacts:
    """Translates a conjunct into egglog query facts, or answers None when it cannot."""

    def __init__(self, kinds, fresh: Callable[[], str] | None = None) -> None:
        self.kinds = kinds
        self.fresh = fresh or (lambda: "?__t")
        self.facts: list[str] = []

    def atom(self, node: ast.expr) -> list[str] | None:
        """The facts of one conjunct, or None when egglog cannot test it."""
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
        if isinstance(node, ast.Call) and node.func.id == "leaf":
            # expanded by the rule into one command per kind of leaf (RVar, RConst)
            return [f"(leaf ?{node.args[0].id[len(PV_PREFIX):]})"]
        if isinstance(node, ast.Call) and node.func.id == "once":
            b = "?" + node.args[0].id[len(PV_PREFIX):]
            return [f"(once {b} ?{node.args[1].id[len(PV_PREFIX):]})"]
        if not isinstance(node, ast.Compare):
            return None
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if self.compare(CMP[type(op)], left, right) is None:
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
            value = literal(a)
            if value is NO:
                return None
            out.append(egg_str(attr_key(canonical_attr(value))))
        return out

    def value(self, node: ast.expr) -> tuple[list[str], str] | None:
        """Facts and the variable holding an attribute function's value, or None."""
        if not (isinstance(node, ast.Call) and node.func.id in ATTR_FUNCTIONS):
            return None
        f = ATTR_FUNCTIONS[node.func.id]
        args = self.args(node)
        if f.condition or args is None:
            return None
        out = self.fresh()
        return [f"(= {out} ({f.egg_name} {' '.join(args)}))"], out

    def compare(self, op: str, a: ast.expr, b: ast.expr) -> list[str] | None:
        """Facts for ``a op b`` over Strings or i64s, or None."""
        sa, sb = self.string(a, b), self.string(b, a)
        if sa is not None and sb is not None and op in ("==", "!="):
            self.facts.append(f"({EGG_CMP[op]} {sa} {sb})")
            return self.facts
        guard = "eq" if op == "==" else "concrete"
        ia, ib = self.i64(a, guard), self.i64(b, guard)
        if ia is None or ib is None:
            return None
        self.facts.append(f"({EGG_CMP[op]} {ia} {ib})")
        return self.facts

    def string(self, node: ast.expr, other: ast.expr) -> str | None:
        """An egglog String term (a dtype, an attribute variable, a literal), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(other, ast.Name):
                return self.attr_literal(other, node.value)
            return egg_str(node.value)
        if isinstance(node, ast.Name):
            return "?" + node.id[len(PV_PREFIX):]
        if isinstance(node, ast.Call) and node.func.id == "dtype":
            return f"(dtype ?{node.args[0].id[len(PV_PREFIX):]})"
        if isinstance(other, ast.Name) and literal(node) is not NO:
            return self.attr_literal(other, literal(node))
        return None

    def attr_literal(self, var: ast.Name, value) -> str | None:
        """A literal as the String the attribute variable's op stores for it."""
        site = self.kinds.attr_sites.get(var.id[len(PV_PREFIX):])
        if site is None:
            return None
        from .pattern import canonical_attr_value

        try:
            return egg_str(attr_key(canonical_attr_value(site[0], site[1], value)))
        except Exception:  # noqa: BLE001 - a value the op rejects never matches: not native
            return None

    def i64(self, node: ast.expr, guard: str) -> str | None:
        """An egglog i64 term (ranks, dims with their guards, arithmetic), or None."""
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
            index = literal(node.slice)
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


NO = object()  # not a literal


def literal(node: ast.expr):
    """The value of a literal expression (lists as tuples), or NO."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return NO
    return tuple(value) if isinstance(value, list) else value
