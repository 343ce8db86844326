"""EliminateCommonSubexpr.

Hash-consing already merges structurally equal dataflow nodes, so what is left for this pass is
let-bound duplicates: ``let %b = V`` where an enclosing ``let %a = V`` is visible becomes a use of
``%a``. Values are compared after earlier replacements, so chains of duplicates collapse too.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.expr import Expr, Let, Var, is_atomic
from ..ir.module import IRModule
from .infra import PassContext, function_pass
from .purity import Purity

__all__ = ["eliminate_common_subexpr", "EliminateCommonSubexpr"]


def eliminate_common_subexpr(expr: Expr, fskip: Callable[[Expr], bool] | None = None,
                             purity: Purity | None = None) -> Expr:
    """Replace let bindings of a value already bound in an enclosing let by that variable."""
    purity = purity or Purity()
    memo: dict[Expr, Expr] = {}
    alias: dict[Var, Var] = {}
    visible: dict[Expr, Var] = {}  # rewritten value -> the variable bound to it in scope
    # Frames: [node, index of next child, entry recorded in `visible` (to undo on exit)]
    stack: list = [[expr, 0, None]]
    while stack:
        frame = stack[-1]
        node, i = frame[0], frame[1]
        kids = node.children()
        if i < len(kids):
            frame[1] += 1
            if isinstance(node, Let):
                if i == 0:
                    continue  # the binder is not a use; its alias is decided below
                if i == 2:
                    _bind(node, memo, alias, visible, frame, fskip, purity)
            child = kids[i]
            if child not in memo:
                stack.append([child, 0, None])
            continue
        stack.pop()
        if isinstance(node, Var):
            memo[node] = alias.get(node, node)
            continue
        if isinstance(node, Let):
            if frame[2] is not None:  # leaving the let: its binding is no longer visible
                visible.pop(frame[2], None)
            if node.var in alias:
                memo[node] = memo[node.body]
            else:
                memo[node] = Let(node.var, memo[node.value], memo[node.body])
            continue
        memo[node] = node.with_children(tuple(memo[c] for c in kids))
    return memo[expr]


def _bind(let: Let, memo, alias, visible, frame, fskip, purity) -> None:
    # Called after the value is rewritten and before the body: decide about this binding.
    value = memo[let.value]
    if is_atomic(value) or not purity.is_pure(value) or (fskip is not None and fskip(value)):
        return
    earlier = visible.get(value)
    if earlier is not None:
        alias[let.var] = earlier
    else:
        visible[value] = let.var
        frame[2] = value


def EliminateCommonSubexpr(fskip: Callable[[Expr], bool] | None = None):  # noqa: N802
    """Merge duplicate let-bound values (dataflow duplicates are merged by interning)."""

    def run(func, mod: IRModule, ctx: PassContext):
        return eliminate_common_subexpr(func, fskip, Purity(mod))

    return function_pass(run, opt_level=3, name="EliminateCommonSubexpr")
