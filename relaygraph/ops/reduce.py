"""Reductions (``sum``, ``mean``, ``max``, ``min``, ``prod``, ``argmax``, ``argmin``,
``variance``) and the softmax family."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from ._base import PatternKind, ShapeError, defop, flops_per_input, fmt, norm_axis, tensor_arg
from .elemwise import broadcast_shapes

__all__ = ["reduce_axes"]

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _axis_tuple(v: dict) -> dict:
    # TVM's Python API turns a single int axis into a list
    if isinstance(v.get("axis"), int) and not isinstance(v["axis"], bool):
        v["axis"] = (v["axis"],)
    return v


def reduce_axes(ndim: int, axis, exclude: bool) -> tuple[int, ...]:
    """The reduced axes, as TVM computes them (no axis means every axis)."""
    if axis is None:
        return tuple(range(ndim))
    axes = []
    for ax in axis:
        a = norm_axis(ax, ndim)
        if a in axes:
            raise ShapeError(f"axis {ax} appears twice in {tuple(axis)}")
        axes.append(a)
    if exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return tuple(sorted(axes))


def _reduced_shape(x: TensorType, a: dict) -> tuple:
    axes = reduce_axes(x.ndim, a["axis"], a["exclude"])
    if a["keepdims"]:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _reduce_rel(out_dtype=None):
    def rel(args, a):
        x = tensor_arg(args[0], 0)
        return TensorType(_reduced_shape(x, a), out_dtype or x.dtype)
    return rel


def _reduce_kernel(fn):
    def kernel(args, a):
        x = args[0]
        axes = reduce_axes(x.ndim, a["axis"], a["exclude"])
        out = fn(x, axis=axes, keepdims=a["keepdims"])
        return np.asarray(out).astype(x.dtype, copy=False)
    return kernel


def _arg_kernel(fn):
    def kernel(args, a):
        x = args[0]
        axes = reduce_axes(x.ndim, a["axis"], a["exclude"])
        kept = [i for i in range(x.ndim) if i not in axes]
        # move the reduced axes last and flatten them, so one numpy arg-reduction does it all
        moved = np.transpose(x, kept + list(axes)).reshape([x.shape[i] for i in kept] + [-1])
        if a["select_last_index"]:
            idx = moved.shape[-1] - 1 - fn(moved[..., ::-1], axis=-1)
        else:
            idx = fn(moved, axis=-1)
        if a["keepdims"]:
            idx = idx.reshape([1 if i in axes else x.shape[i] for i in range(x.ndim)])
        return np.asarray(idx, dtype="int32")
    return kernel


def _variance_rel(args, a):
    x, m = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if m.dtype != x.dtype:
        raise ShapeError(f"mean has dtype {m.dtype}, data has {x.dtype}")
    try:
        broadcast_shapes(x.shape, m.shape)
    except ShapeError:
        raise ShapeError(f"mean {fmt(m)} does not broadcast against the data {fmt(x)}") from None
    return TensorType(_reduced_shape(x, a), x.dtype)


def _variance_kernel(args, a):
    x, m = args
    axes = reduce_axes(x.ndim, a["axis"], a["exclude"])
    sq = np.square(x.astype("float64") - m)
    count = int(np.prod([x.shape[i] for i in axes])) if axes else 1
    total = np.sum(sq, axis=axes, keepdims=a["keepdims"])
    denom = count - 1 if a["unbiased"] else count
    return (total / max(denom, 1)).astype(x.dtype)


def _softmax_rel(args, a):
    x = tensor_arg(args[0], 0)
    norm_axis(a["axis"], x.ndim)
    return x


def _exp_normalize(e: np.ndarray, axis: int) -> np.ndarray:
    np.exp(e, out=e)
    e /= np.add.reduce(e, axis=axis, keepdims=True)  # the ufunc reductions skip np.sum's wrapper
    return e


def softmax_in_place(e: np.ndarray, axis: int) -> np.ndarray:
    """Softmax along ``axis`` of a fresh floating-point array ``e``, written into ``e``."""
    e -= np.maximum.reduce(e, axis=axis, keepdims=True)
    return _exp_normalize(e, axis)


def _softmax(x, axis):
    if x.dtype.kind != "f":
        x = x.astype("float64")
    return _exp_normalize(x - np.maximum.reduce(x, axis=axis, keepdims=True), axis)


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


_REDUCE_ATTRS = {"axis": None, "keepdims": False, "exclude": False}
_REDUCE_EX = (
    ([_t((2, 3, 4))], {"axis": (1,)}),
    ([_t((2, 3, 4))], {}),
    ([_t((2, 3, 4))], {"axis": (0, -1), "keepdims": True}),
    ([_t((2, 3, 4))], {"axis": (1,), "exclude": True}),
    ([_t((3, 5), "int32")], {"axis": (0,)}),
)
_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
for _name, _fn in _REDUCE.items():
    defop(_name, 1, _REDUCE_ATTRS, _reduce_rel(), _reduce_kernel(_fn), PatternKind.COMM_REDUCE,
          flops=flops_per_input(1), input_names=("data",), normalize=_axis_tuple,
          domain="small" if _name == "prod" else "any", examples=_REDUCE_EX)

_ARG_ATTRS = {"axis": None, "keepdims": False, "select_last_index": False, "exclude": False}
for _name, _fn in {"argmax": np.argmax, "argmin": np.argmin}.items():
    defop(_name, 1, _ARG_ATTRS, _reduce_rel("int32"), _arg_kernel(_fn), PatternKind.COMM_REDUCE,
          flops=flops_per_input(1), input_names=("data",), normalize=_axis_tuple,
          examples=_REDUCE_EX + (([_t((3, 4))], {"axis": (1,), "select_last_index": True}),))

defop("variance", 2, {"axis": None, "keepdims": False, "exclude": False, "unbiased": False},
      _variance_rel, _variance_kernel, PatternKind.COMM_REDUCE, flops=flops_per_input(3),
      input_names=("data", "mean"), normalize=_axis_tuple,
      examples=(([_t((2, 3, 4)), _t((2, 1, 4))], {"axis": (1,)}),
                ([_t((2, 3)), _t((1, 1))], {"unbiased": True}),
                ([_t((2, 3, 4)), _t((2, 3, 1))], {"axis": (2,), "keepdims": True})))

defop("nn.softmax", 1, {"axis": -1}, _softmax_rel,
      lambda args, a: _softmax(args[0], a["axis"]).astype(args[0].dtype, copy=False),
      PatternKind.OPAQUE, flops=flops_per_input(5), input_names=("data",),
      examples=(([_t((2, 10))], {}), ([_t((2, 3, 4))], {"axis": 1})))
defop("nn.log_softmax", 1, {"axis": -1}, _softmax_rel,
      lambda args, a: _log_softmax(args[0], a["axis"]).astype(args[0].dtype, copy=False),
      PatternKind.OPAQUE, flops=flops_per_input(5), input_names=("data",),
      examples=(([_t((2, 10))], {}), ([_t((2, 3, 4))], {"axis": 0})))
