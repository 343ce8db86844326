"""SimplifyInference: inference-time forms of batch_norm, layer_norm and dropout (TVM's).

``batch_norm(x, g, b, m, v).0`` becomes ``x * scale + shift`` with ``scale = 1 / sqrt(v + eps)
* g`` and ``shift = -m * scale + b`` broadcast along the channel axis; ``layer_norm`` becomes
``(x - mean) / sqrt(variance + eps) * g + b``; ``dropout(x).0`` becomes ``x``.
"""

from __future__ import annotations

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Op, TupleGetItem
from ..ir.traversal import ExprMutator
from ..ir.types import TensorType
from .infra import function_pass

__all__ = ["simplify_inference", "SimplifyInference"]


def _op(name: str, *args: Expr, **attrs) -> Call:
    return Call(Op(name), args, attrs or None)


def _scalar(value: float, dtype: str) -> Constant:
    return Constant(np.asarray(value, dtype=dtype))


def _expand_to_axis(bias: Expr, ndim: int, axis: int) -> Expr:
    # As TVM's ExpandBiasToMatchAxis: a 1-d bias on `axis` gets trailing unit axes.
    trailing = ndim - axis - 1
    return _op("expand_dims", bias, axis=1, num_newaxis=trailing) if trailing > 0 else bias


def _data_type(types, expr: Expr) -> TensorType:
    t = types.get(expr) if types is not None else None
    if not isinstance(t, TensorType):
        raise RelayError("SimplifyInference needs checked types: run InferType first")
    return t


def _batch_norm(call: Call, ttype: TensorType) -> Expr:
    data, gamma, beta, mean, var = call.args
    a = call.attrs
    dtype, ndim = ttype.dtype, ttype.ndim
    axis = a.get("axis", 1)
    axis = axis + ndim if axis < 0 else axis
    scale = _op("divide", _scalar(1.0, dtype),
                _op("sqrt", _op("add", var, _scalar(float(a.get("epsilon", 1e-5)), dtype))))
    if a.get("scale", True):
        scale = _op("multiply", scale, gamma)
    shift = _op("multiply", _op("negative", mean), scale)
    if a.get("center", True):
        shift = _op("add", shift, beta)
    scale = _expand_to_axis(scale, ndim, axis)
    shift = _expand_to_axis(shift, ndim, axis)
    return _op("add", _op("multiply", data, scale), shift)


def _layer_norm(call: Call, ttype: TensorType) -> Expr:
    data, gamma, beta = call.args
    a = call.attrs
    dtype, ndim = ttype.dtype, ttype.ndim
    axis = a.get("axis", -1)
    mean = _op("mean", data, axis=(axis,), keepdims=True)
    var = _op("variance", data, mean, axis=(axis,), keepdims=True)
    denom = _op("sqrt", _op("add", var, _scalar(float(a.get("epsilon", 1e-5)), dtype)))
    out = _op("divide", _op("subtract", data, mean), denom)
    axis = axis + ndim if axis < 0 else axis
    if a.get("scale", True):
        out = _op("multiply", out, _expand_to_axis(gamma, ndim, axis))
    if a.get("center", True):
        out = _op("add", out, _expand_to_axis(beta, ndim, axis))
    return out


class _Simplify(ExprMutator):
    def __init__(self, types) -> None:
        super().__init__()
        self.types = types

    def rewrite_tuple_get_item(self, pre: TupleGetItem, post: TupleGetItem) -> Expr:
        inner = post.tuple_value
        if post.index != 0 or not isinstance(inner, Call) or not isinstance(inner.op, Op):
            return post
        if inner.op.name == "nn.batch_norm":
            return _batch_norm(inner, _data_type(self.types, pre.tuple_value.args[0]))
        if inner.op.name == "nn.dropout":
            return inner.args[0]
        return post

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if isinstance(post.op, Op) and post.op.name == "nn.layer_norm":
            return _layer_norm(post, _data_type(self.types, pre.args[0]))
        return post


def simplify_inference(expr: Expr, types=None) -> Expr:
    """Expand normalisations for inference and drop dropout; ``types`` are the expression's
    checked types (its typed module's TypeMap; by default, its own inference)."""
    if types is None:
        from ..ty import infer_type_expr

        types = infer_type_expr(expr, with_types=True)[1]
    return _Simplify(types).visit(expr)


def SimplifyInference():  # noqa: N802 - Relay's pass name
    """Replace batch_norm/layer_norm/dropout by their inference-time arithmetic."""
    return function_pass(lambda f, mod, ctx: simplify_inference(f, mod.checked_types), opt_level=0,
                         name="SimplifyInference", required=["InferType"])
