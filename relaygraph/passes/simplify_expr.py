"""SimplifyExpr: local algebraic clean-ups that keep types exactly.

Reshape chains collapse to one reshape (and a reshape to the same shape disappears), a transpose
of a transpose becomes one transpose (or nothing), ``x + 0``, ``x - 0``, ``x * 1``, ``x / 1``
become ``x`` when the constant does not change the shape or dtype, and a cast to the same dtype
disappears. Types must be checked (run InferType first).
"""

from __future__ import annotations

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Op
from ..ir.traversal import ExprMutator
from ..ir.types import TensorType
from .infra import function_pass

__all__ = ["simplify_expr", "SimplifyExpr"]

_IDENTITY = {"add": 0, "subtract": 0, "multiply": 1, "divide": 1}
_RIGHT_ONLY = {"subtract", "divide"}


def _checked(mod):
    if mod.checked_types is None:
        raise RelayError("SimplifyExpr needs checked types: run InferType first")
    return mod.checked_types


def _is_op(e: Expr, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _all_equal(c: Expr, value: float) -> bool:
    return isinstance(c, Constant) and c.data.size > 0 and bool(np.all(c.data == value))


class _Simplify(ExprMutator):
    def __init__(self, types) -> None:
        super().__init__()
        self.types = types

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if not isinstance(post.op, Op):
            return post
        name, out_t = post.op.name, self.types.get(pre)
        if name == "reshape":
            inner = post.args[0]
            while _is_op(inner, "reshape"):
                inner = inner.args[0]
            in_t = self.types.get(_orig_data(pre))
            if isinstance(out_t, TensorType) and in_t == out_t:
                return inner
            if inner is not post.args[0] and isinstance(out_t, TensorType) and out_t.is_concrete:
                return Call(Op("reshape"), (inner,), {"newshape": tuple(out_t.shape)})
            return post
        if name == "transpose" and _is_op(post.args[0], "transpose"):
            inner = post.args[0]
            t_in = self.types.get(pre.args[0].args[0]) if _is_op(pre.args[0], "transpose") else None
            if isinstance(t_in, TensorType):
                perm = _compose(_axes(inner, t_in.ndim), _axes(post, t_in.ndim))
                if perm == list(range(t_in.ndim)):
                    return inner.args[0]
                return Call(Op("transpose"), (inner.args[0],), {"axes": tuple(perm)})
            return post
        if name == "cast":
            in_t = self.types.get(pre.args[0])
            if isinstance(in_t, TensorType) and in_t.dtype == post.attrs.get("dtype"):
                return post.args[0]
            return post
        if name in _IDENTITY and isinstance(out_t, TensorType):
            unit = _IDENTITY[name]
            x, c = post.args
            if _all_equal(c, unit) and self.types.get(pre.args[0]) == out_t:
                return x
            if name not in _RIGHT_ONLY and _all_equal(x, unit) and self.types.get(pre.args[1]) == out_t:
                return c
        return post


def _orig_data(call: Call) -> Expr:
    inner = call.args[0]
    while _is_op(inner, "reshape"):
        inner = inner.args[0]
    return inner


def _axes(call: Call, ndim: int) -> list[int]:
    axes = call.attrs.get("axes")
    if axes is None:
        return list(range(ndim - 1, -1, -1))
    return [a + ndim if a < 0 else a for a in axes]


def _compose(first: list[int], second: list[int]) -> list[int]:
    # transpose(transpose(x, first), second) == transpose(x, [first[i] for i in second])
    return [first[i] for i in second]


def simplify_expr(expr: Expr, types=None) -> Expr:
    """Apply the local simplifications bottom-up; ``types`` are the expression's checked types
    (its typed module's TypeMap; by default, its own inference)."""
    if types is None:
        from ..ty import infer_type_expr

        types = infer_type_expr(expr, with_types=True)[1]
    return _Simplify(types).visit(expr)


def SimplifyExpr():  # noqa: N802 - Relay's pass name
    """Collapse reshape/transpose chains and remove identity arithmetic and casts."""
    return function_pass(lambda f, mod, ctx: simplify_expr(f, _checked(mod)), opt_level=0,
                         name="SimplifyExpr",
                         required=["InferType"])
