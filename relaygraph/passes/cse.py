"""EliminateCommonSubexpr.

Hash-consing already merges structurally equal dataflow nodes, so what is left for this pass is
let-bound duplicates: ``let %b = V`` where an enclosing ``let %a = V`` is visible becomes a use of
``%a``. Values are compared after earlier replacements, so chains of duplicates collapse too.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.expr import Expr, Let, Var, is_atomic
from ..ir.module import IRModule
from ..ir.purity import Purity
from ._walk import let_rebuild
from .infra import PassContext, function_pass

__all__ = ["eliminate_common_subexpr", "EliminateCommonSubexpr"]


def eliminate_common_subexpr(expr: Expr, fskip: Callable[[Expr], bool] | None = None,
                             purity: Purity | None = None) -> Expr:
    """Replace let bindings of a value already bound in an enclosing let by that variable."""
    purity = purity or Purity().learn(expr)
    alias: dict[Var, Var] = {}
    visible: dict[Expr, Var] = {}  # rewritten value -> the variable bound to it in scope
    opened: dict[Let, Expr] = {}  # let -> the entry it added to `visible` (removed on exit)

    def after_value(let: Let, value: Expr) -> None:
        if is_atomic(value) or not purity.is_pure(value) or (fskip is not None and fskip(value)):
            return
        earlier = visible.get(value)
        if earlier is not None:
            alias[let.var] = earlier
        else:
            visible[value] = let.var
            opened[let] = value

    def make(node, memo):
        if isinstance(node, Var):
            return alias.get(node, node)
        if isinstance(node, Let):
            if node in opened:  # leaving the let: its binding is no longer visible
                visible.pop(opened.pop(node), None)
            if node.var in alias:
                return memo[node.body]
            return Let(node.var, memo[node.value], memo[node.body])
        return node.with_children(tuple(memo[c] for c in node.children()))

    return let_rebuild(expr, make, after_value)


def EliminateCommonSubexpr(fskip: Callable[[Expr], bool] | None = None):  # noqa: N802
    """Merge duplicate let-bound values (dataflow duplicates are merged by interning)."""

    def run(func, mod: IRModule, ctx: PassContext):
        return eliminate_common_subexpr(func, fskip, Purity(mod))

    return function_pass(run, opt_level=3, name="EliminateCommonSubexpr")
