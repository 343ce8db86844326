"""CanonicalizeOps: ``nn.bias_add`` as a broadcast ``add`` (TVM's, opt_level 3).

``bias_add(x, b, axis)`` becomes ``add(x, expand_dims(b, axis=1, num_newaxis=ndim - axis - 1))``
so later passes and fusion see one elementwise op kind.
"""

from __future__ import annotations

from ..errors import RelayError
from ..ir.expr import Call, Expr, Op
from ..ir.traversal import ExprMutator
from ..ir.types import TensorType
from .infra import function_pass

__all__ = ["CanonicalizeOps", "canonicalize_ops"]


class _Canonicalize(ExprMutator):
    def __init__(self, types) -> None:
        super().__init__()
        self.types = types

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if not (isinstance(post.op, Op) and post.op.name == "nn.bias_add"):
            return post
        t = self.types.get(pre.args[0])
        if not isinstance(t, TensorType):
            return post
        axis = post.attrs.get("axis", 1)
        axis = axis + t.ndim if axis < 0 else axis
        bias = post.args[1]
        pad = t.ndim - axis - 1
        if pad > 0:
            bias = Call(Op("expand_dims"), (bias,), {"axis": 1, "num_newaxis": pad})
        return Call(Op("add"), (post.args[0], bias), None)


def canonicalize_ops(expr: Expr, types=None) -> Expr:
    """``expr`` with bias_add written as add (``types``: its checked types)."""
    if types is None:
        from ..ty import infer_type_expr

        types = infer_type_expr(expr, with_types=True)[1]
    return _Canonicalize(types).visit(expr)


def CanonicalizeOps():  # noqa: N802 - Relay's pass name
    """Write nn.bias_add as add with an expanded bias."""

    def run(f, mod, ctx):
        if mod.checked_types is None:
            raise RelayError("CanonicalizeOps needs checked types: run InferType first")
        return canonicalize_ops(f, mod.checked_types)

    return function_pass(run, opt_level=3, name="CanonicalizeOps", required=["InferType"])
