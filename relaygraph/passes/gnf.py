"""ToGraphNormalForm: inline let bindings back into a shared DAG.

Recursive lets are kept, and so are lets whose value may have effects: the let fixes where and
how often the effect happens, and inlining it would drop an unused write, repeat a call at each
use, or move a read past a write.
"""

from __future__ import annotations

from ..ir.expr import Expr, Function, Let, Var
from ..ir.purity import Purity
from ..ir.traversal import free_vars, iter_post_order
from ._walk import rebuild
from .infra import function_pass

__all__ = ["to_graph_normal_form", "ToGraphNormalForm"]


def to_graph_normal_form(expr: Expr, purity: Purity | None = None) -> Expr:
    """Replace every use of a let-bound pure value by the value; those lets disappear."""
    purity = purity or Purity().learn(expr)
    lets: dict[Var, Let] = {}
    kept: set[Var] = set()  # lets that stay: recursive functions and effects
    for node in iter_post_order(expr):
        if isinstance(node, Let):
            lets[node.var] = node
            if isinstance(node.value, Function) and node.var in free_vars(node.value):
                kept.add(node.var)
            elif not purity.is_pure(node.value):
                kept.add(node.var)
    if not lets:
        return expr

    def kids(node):
        if isinstance(node, Let):
            return (node.value, node.body) if node.var in kept else (node.body,)
        if isinstance(node, Var):
            binding = lets.get(node)
            return (binding.value,) if binding is not None and node not in kept else ()
        return node.children()

    def make(node, res):
        if isinstance(node, Let):
            return Let(node.var, res[0], res[1]) if node.var in kept else res[0]
        if isinstance(node, Var):
            return res[0] if res else node
        return node.with_children(res)

    return rebuild(expr, kids, make)


def ToGraphNormalForm():  # noqa: N802 - Relay's pass name
    """Turn let-bound programs back into graph form (implicit sharing); effectful lets stay."""
    return function_pass(lambda f, mod, ctx: to_graph_normal_form(f, Purity(mod)), opt_level=1,
                         name="ToGraphNormalForm")
