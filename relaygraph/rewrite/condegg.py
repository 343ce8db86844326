"""Conditions and attribute functions as egglog query facts over the encoding's
``rank``/``dim``/``dtype`` functions, attribute Strings and the let analyses."""

from __future__ import annotations

from collections.abc import Callable

from ..egraph.encoding import attr_key
from ..ir.attrs import canonical_attr
from .attr_functions import ATTR_FUNCTIONS
from .condast import NO, BinOp, Call, Compare, Cond, Index, Lit, Neg, Not, Var, literal

__all__ = ["EggFacts", "egg_str"]

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

    def atom(self, node: Cond) -> list[str] | None:
        """The facts of one conjunct, or None when egglog cannot test it."""
        self.facts = []
        if isinstance(node, Not):
            inner = node.operand
            if isinstance(inner, Call) and inner.func == "free":
                b, e = "?" + inner.args[0].name, "?" + inner.args[1].name
                s = self.fresh()
                return [f"(= {s} (fv {e}))", f"(set-not-contains {s} {b})"]
            if isinstance(inner, Compare) and inner.ops == ("==",):
                return self.compare("!=", *inner.operands)
            return None
        if isinstance(node, Call) and node.func in ATTR_FUNCTIONS:
            f = ATTR_FUNCTIONS[node.func]
            args = self.args(node)
            if not f.condition or args is None:
                return None
            return [f"({f.egg_name} {' '.join(args)})"]
        if isinstance(node, Call) and node.func == "leaf":
            # expanded by the rule into one command per kind of leaf (RVar, RConst)
            return [f"(leaf ?{node.args[0].name})"]
        if isinstance(node, Call) and node.func == "once":
            return [f"(once ?{node.args[0].name} ?{node.args[1].name})"]
        if not isinstance(node, Compare):
            return None
        left = node.operands[0]
        for op, right in zip(node.ops, node.operands[1:], strict=True):
            if self.compare(op, left, right) is None:
                return None
            left = right
        return self.facts

    def args(self, call: Call) -> list[str] | None:
        """Egglog Strings for the arguments of an attribute function."""
        out = []
        for a in call.args:
            if isinstance(a, Var):
                out.append("?" + a.name)
                continue
            value = literal(a)
            if value is NO:
                return None
            out.append(egg_str(attr_key(canonical_attr(value))))
        return out

    def value(self, node: Cond) -> tuple[list[str], str] | None:
        """Facts and the variable holding an attribute function's value, or None."""
        if not (isinstance(node, Call) and node.func in ATTR_FUNCTIONS):
            return None
        f = ATTR_FUNCTIONS[node.func]
        args = self.args(node)
        if f.condition or args is None:
            return None
        out = self.fresh()
        return [f"(= {out} ({f.egg_name} {' '.join(args)}))"], out

    def compare(self, op: str, a: Cond, b: Cond) -> list[str] | None:
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

    def string(self, node: Cond, other: Cond) -> str | None:
        """An egglog String term (a dtype, an attribute variable, a literal), or None."""
        if isinstance(node, Lit) and isinstance(node.value, str):
            if isinstance(other, Var):
                return self.attr_literal(other, node.value)
            return egg_str(node.value)
        if isinstance(node, Var):
            return "?" + node.name
        if isinstance(node, Call) and node.func == "dtype":
            return f"(dtype ?{node.args[0].name})"
        if isinstance(other, Var) and literal(node) is not NO:
            return self.attr_literal(other, literal(node))
        return None

    def attr_literal(self, var: Var, value) -> str | None:
        """A literal as the String the attribute variable's op stores for it."""
        site = self.kinds.attr_sites.get(var.name)
        if site is None:
            return None
        from .pattern import canonical_attr_value

        try:
            return egg_str(attr_key(canonical_attr_value(site[0], site[1], value)))
        except Exception:  # noqa: BLE001 - a value the op rejects never matches: not native
            return None

    def i64(self, node: Cond, guard: str) -> str | None:
        """An egglog i64 term (ranks, dims with their guards, arithmetic), or None."""
        if isinstance(node, Lit) and type(node.value) is int:
            return str(node.value)
        if isinstance(node, Neg):
            inner = self.i64(node.operand, guard)
            return None if inner is None else f"(- 0 {inner})"
        if isinstance(node, BinOp) and node.op in ("+", "-", "*"):
            left, right = self.i64(node.left, "concrete"), self.i64(node.right, "concrete")
            if left is None or right is None:
                return None
            return f"({node.op} {left} {right})"
        if isinstance(node, Call) and node.func == "rank":
            return f"(rank ?{node.args[0].name})"
        if isinstance(node, Index) and isinstance(node.value, Call) and node.value.func == "shape":
            index = literal(node.index)
            if type(index) is not int:
                return None
            v = "?" + node.value.args[0].name
            at = str(index) if index >= 0 else f"(+ (rank {v}) {index})"
            d = self.fresh()
            self.facts.append(f"(= {d} (dim {v} {at}))")
            if index < 0:
                self.facts.append(f"(>= (+ (rank {v}) {index}) 0)")
            self.facts.append(f"(!= {d} -1)" if guard == "eq" else f"(>= {d} 0)")
            return d
        return None
