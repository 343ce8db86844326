"""FoldConstant: evaluate what only depends on constants.

Calls of ops whose arguments are all constants (or tuples of constants) become constants,
computed by the ops' own numpy kernels; a projection of a literal tuple becomes the field; an
``if`` on a constant condition becomes the chosen branch; a let bound to a constant is inlined.
Ops that create values from nothing (``zeros``, ``full`` with no inputs) are left alone, and so
are ops marked stateful in the op table (``OpDef.extra["stateful"]``).
"""

from __future__ import annotations

import numpy as np

from ..ir.attrs import Attrs
from ..ir.expr import Call, Constant, Expr, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.purity import Purity
from ..ops.registry import lookup
from ._walk import let_rebuild
from .infra import function_pass

__all__ = ["fold_constant", "FoldConstant"]


def _is_constant(e: Expr) -> bool:
    if isinstance(e, Constant):
        return True
    return isinstance(e, Tuple) and all(_is_constant(f) for f in e.fields)


def _value(e: Expr):
    return e.data if isinstance(e, Constant) else tuple(_value(f) for f in e.fields)


def _to_expr(value) -> Expr:
    if isinstance(value, (tuple, list)):
        return Tuple(tuple(_to_expr(v) for v in value))
    return Constant(np.asarray(value))


def _fold(post: Expr, purity: Purity) -> Expr:
    """One node, its children already folded."""
    if isinstance(post, Call):
        if not isinstance(post.op, Op) or not post.args:
            return post
        opdef = lookup(post.op.name)
        if opdef is None or opdef.extra.get("stateful") or opdef.extra.get("non_computational"):
            return post
        if not all(_is_constant(a) for a in post.args):
            return post
        attrs = post.attrs if isinstance(post.attrs, Attrs) else Attrs(post.attrs)
        return _to_expr(opdef.kernel([_value(a) for a in post.args], attrs))
    if isinstance(post, TupleGetItem) and isinstance(post.tuple_value, Tuple):
        fields = post.tuple_value.fields
        # The other fields go away with the tuple: only when they have no effects.
        if all(purity.is_pure(f) for i, f in enumerate(fields) if i != post.index):
            return fields[post.index]
    if isinstance(post, If) and isinstance(post.cond, Constant) and post.cond.shape == ():
        return post.true_branch if bool(post.cond.data) else post.false_branch
    return post


def fold_constant(expr: Expr, purity: Purity | None = None) -> Expr:
    """The expression with every constant subcomputation evaluated."""
    purity = purity or Purity().learn(expr)
    constants: dict[Var, Expr] = {}

    def after_value(let: Let, value: Expr) -> None:
        if _is_constant(value):
            constants[let.var] = value

    def make(node, memo):
        if isinstance(node, Var):
            return constants.get(node, node)
        if isinstance(node, Let):
            if node.var in constants:
                return memo[node.body]
            return Let(node.var, memo[node.value], memo[node.body])
        return _fold(node.with_children(tuple(memo[c] for c in node.children())), purity)

    return let_rebuild(expr, make, after_value)


def FoldConstant():  # noqa: N802 - Relay's pass name
    """Evaluate constant subexpressions with the op kernels."""
    return function_pass(lambda f, mod, ctx: fold_constant(f, Purity(mod)), opt_level=2,
                         name="FoldConstant")

