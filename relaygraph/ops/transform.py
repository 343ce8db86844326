"""Shape changes: ``reshape`` (TVM's newshape codes 0, -1, -2, -3, -4), ``transpose``,
``squeeze``, ``expand_dims``, ``nn.batch_flatten``, ``broadcast_to``."""

from __future__ import annotations

import functools

import numpy as np

from ..ir.types import Any as AnyDim
from ..ir.types import TensorType
from ..ty.dims import dim_floordiv, dim_mul, dim_prod, dims_equal, is_known
from ._base import REQUIRED, PatternKind, ShapeError, defop, fmt, norm_axis, tensor_arg
from .elemwise import broadcast_shapes

__all__ = ["reshape_shape"]

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _int_tuple(v: dict, key: str) -> dict:
    x = v.get(key)
    if isinstance(x, int) and not isinstance(x, bool):
        v[key] = (x,)
    return v


# -- reshape -------------------------------------------------------------------------------------
def reshape_shape(ishape: tuple, newshape, allowzero: bool = False) -> tuple:
    """The output shape of ``reshape(newshape)`` with TVM's special codes.

    0 copies an input dimension, -1 is inferred from the rest, -2 copies every remaining input
    dimension, -3 merges two input dimensions, -4 splits one into the next two values (one of
    which may be -1).
    """
    if newshape is None or isinstance(newshape, (int, str)):
        raise ShapeError(f"newshape must be a sequence of ints, got {newshape!r}")
    newshape = tuple(newshape)
    out: list = []
    used_in: set[int] = set()
    used_out: set[int] = set()
    src = 0
    infer_at = -1
    i = 0

    def take() -> object:
        nonlocal src
        if src >= len(ishape):
            raise ShapeError(f"newshape {newshape} uses more input dimensions than {len(ishape)}")
        used_in.add(src)
        src += 1
        return ishape[src - 1]

    while i < len(newshape):
        v = newshape[i]
        if not isinstance(v, int) or isinstance(v, bool):
            raise ShapeError(f"newshape entries must be ints, got {v!r}")
        if v > 0 or (v == 0 and allowzero):
            out.append(v)
            src += 1
        elif v == 0:
            used_out.add(len(out))
            out.append(take())
        elif v == -1:
            if infer_at >= 0:
                raise ShapeError(f"newshape {newshape} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            while src < len(ishape):
                used_out.add(len(out))
                out.append(take())
        elif v == -3:
            d1, d2 = take(), take()
            used_out.add(len(out))
            out.append(AnyDim if AnyDim in (d1, d2) else dim_mul(d1, d2))
        elif v == -4:
            if i + 2 >= len(newshape):
                raise ShapeError(f"-4 in newshape {newshape} needs two values after it")
            d0 = take()
            d1, d2 = newshape[i + 1], newshape[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise ShapeError("the two dimensions after -4 cannot both be -1")
            if d1 == -1:
                d1 = AnyDim if d0 is AnyDim else dim_floordiv(d0, d2)
            elif d2 == -1:
                d2 = AnyDim if d0 is AnyDim else dim_floordiv(d0, d1)
            used_out.update((len(out), len(out) + 1))
            out += [d1, d2]
        else:
            raise ShapeError(f"unsupported value {v} in newshape {newshape}")
        i += 1
    if infer_at >= 0:
        rest_in = [d for j, d in enumerate(ishape) if j not in used_in]
        rest_out = [d for j, d in enumerate(out) if j not in used_out and j != infer_at]
        if AnyDim in rest_in or AnyDim in rest_out:
            out[infer_at] = AnyDim
        else:
            known = dim_prod(rest_out)
            if known == 0:
                raise ShapeError(f"cannot infer -1 in newshape {newshape}: other dims multiply to 0")
            total = dim_prod(rest_in)
            if is_known(total) and is_known(known) and total % known:
                raise ShapeError(f"cannot reshape {ishape} to {newshape}: {total} elements do not "
                                 f"divide into {known}")
            out[infer_at] = dim_floordiv(total, known)
    return tuple(out)


def _reshape_rel(args, a):
    x = tensor_arg(args[0], 0)
    shape = reshape_shape(x.shape, a["newshape"], a["allowzero"])
    if AnyDim not in x.shape and AnyDim not in shape:
        if dims_equal(dim_prod(x.shape), dim_prod(shape)) is False:
            raise ShapeError(f"cannot reshape {fmt(x)} to {shape}: element counts differ")
    return TensorType(shape, x.dtype)


@functools.lru_cache(maxsize=4096)
def concrete_reshape(ishape: tuple, newshape: tuple, allowzero: bool) -> tuple:
    """``reshape_shape`` for a concrete input shape, remembered (kernels call it on every run)."""
    return reshape_shape(ishape, newshape, allowzero)


def _reshape_kernel(args, a):
    x = args[0]
    return x.reshape(concrete_reshape(x.shape, a["newshape"], a["allowzero"]))


defop("reshape", 1, {"newshape": REQUIRED, "allowzero": False}, _reshape_rel, _reshape_kernel,
      PatternKind.INJECTIVE, input_names=("data",), normalize=lambda v: _int_tuple(v, "newshape"),
      examples=(
          ([_t((2, 3, 4))], {"newshape": (6, 4)}),
          ([_t((2, 3, 4))], {"newshape": (-1,)}),
          ([_t((2, 3, 4))], {"newshape": (0, -1)}),
          ([_t((2, 3, 4, 5))], {"newshape": (-3, -2)}),
          ([_t((2, 12))], {"newshape": (0, -4, 3, -1)}),
          ([_t((6, 4))], {"newshape": (-4, -1, 2, 0)}),
          ([_t((2, 3, 4))], {"newshape": (2, -2)}),
      ))


# -- transpose -----------------------------------------------------------------------------------
def _axes(x_ndim: int, axes) -> list[int]:
    if axes is None or len(axes) == 0:
        return list(range(x_ndim - 1, -1, -1))
    norm = [norm_axis(ax, x_ndim) for ax in axes]
    if sorted(norm) != list(range(x_ndim)):
        raise ShapeError(f"axes {tuple(axes)} are not a permutation of the {x_ndim} dimensions")
    return norm


def _transpose_rel(args, a):
    x = tensor_arg(args[0], 0)
    return TensorType(tuple(x.shape[i] for i in _axes(x.ndim, a["axes"])), x.dtype)


defop("transpose", 1, {"axes": REQUIRED}, _transpose_rel,
      lambda args, a: np.transpose(args[0], _axes(args[0].ndim, a["axes"])), PatternKind.INJECTIVE,
      input_names=("data",), py_defaults={"axes": None},
      examples=(([_t((2, 3, 4))], {}), ([_t((2, 3, 4))], {"axes": (1, 0, 2)}),
                ([_t((2, 3))], {"axes": (-1, 0)})))


# -- squeeze / expand_dims -----------------------------------------------------------------------
def _squeeze_axes(x: TensorType | np.ndarray, axis) -> list[int]:
    if axis is None:
        return [i for i, d in enumerate(x.shape) if is_known(d) and d == 1]
    axes = [norm_axis(ax, len(x.shape)) for ax in axis]
    for ax in axes:
        d = x.shape[ax]
        if is_known(d) and d != 1:
            raise ShapeError(f"cannot squeeze axis {ax} of size {d}")
    return axes


def _squeeze_rel(args, a):
    x = tensor_arg(args[0], 0)
    drop = _squeeze_axes(x, a["axis"])
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in drop), x.dtype)


defop("squeeze", 1, {"axis": None}, _squeeze_rel,
      lambda args, a: np.squeeze(args[0], axis=tuple(_squeeze_axes(args[0], a["axis"]))),
      PatternKind.INJECTIVE, input_names=("data",), normalize=lambda v: _int_tuple(v, "axis"),
      examples=(([_t((1, 3, 1, 2))], {}), ([_t((1, 3, 1, 2))], {"axis": (2,)}),
                ([_t((1, 1))], {"axis": (-1, 0)})))


def _expand_rel(args, a):
    x = tensor_arg(args[0], 0)
    n = a["num_newaxis"]
    if not isinstance(n, int) or n < 0:
        raise ShapeError(f"num_newaxis must be an int >= 0, got {n!r}")
    pivot = norm_axis(a["axis"], x.ndim, extra=1)
    return TensorType((*x.shape[:pivot], *([1] * n), *x.shape[pivot:]), x.dtype)


def _expand_kernel(args, a):
    x = args[0]
    pivot = norm_axis(a["axis"], x.ndim, extra=1)
    return x.reshape((*x.shape[:pivot], *([1] * a["num_newaxis"]), *x.shape[pivot:]))


defop("expand_dims", 1, {"axis": REQUIRED, "num_newaxis": 1}, _expand_rel, _expand_kernel,
      PatternKind.BROADCAST, input_names=("data",),
      examples=(([_t((2, 3))], {"axis": 0}), ([_t((2, 3))], {"axis": -1, "num_newaxis": 2}),
                ([_t(())], {"axis": 0})))


# -- nn.batch_flatten / broadcast_to -------------------------------------------------------------
def _batch_flatten_rel(args, a):
    x = tensor_arg(args[0], 0)
    if x.ndim < 1:
        raise ShapeError(f"data must have rank >= 1, got {fmt(x)}")
    rest = x.shape[1:]
    return TensorType((x.shape[0], AnyDim if AnyDim in rest else dim_prod(rest)), x.dtype)


defop("nn.batch_flatten", 1, {}, _batch_flatten_rel,
      lambda args, a: args[0].reshape(args[0].shape[0], -1), PatternKind.INJECTIVE,
      input_names=("data",), examples=(([_t((2, 3, 4, 5))], {}), ([_t((4,))], {})))


def _broadcast_to_rel(args, a):
    x = tensor_arg(args[0], 0)
    shape = a["shape"]
    if shape is None:
        raise ShapeError("broadcast_to needs a shape")
    shape = tuple(shape)
    try:
        out = broadcast_shapes(x.shape, shape)
    except ShapeError as exc:
        raise ShapeError(f"cannot broadcast {fmt(x)} to {shape}: {exc}") from None
    if len(out) != len(shape) or any(dims_equal(o, s) is False for o, s in zip(out, shape, strict=True)):
        raise ShapeError(f"cannot broadcast {fmt(x)} to {shape}")
    return TensorType(shape, x.dtype)


defop("broadcast_to", 1, {"shape": REQUIRED, "dtype": ""}, _broadcast_to_rel,
      lambda args, a: np.broadcast_to(args[0], tuple(a["shape"])).copy(), PatternKind.BROADCAST,
      input_names=("data",), normalize=lambda v: _int_tuple(v, "shape"),
      examples=(([_t((3, 1))], {"shape": (2, 3, 4)}), ([_t(())], {"shape": (5,)})))


# -- repeat ----------------------------------------------------------------------------------------
def _repeat_rel(args, a):
    x = tensor_arg(args[0], 0)
    n = a["repeats"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ShapeError(f"repeats must be an int >= 1, got {n!r}")
    axis = norm_axis(a["axis"], x.ndim)
    shape = list(x.shape)
    shape[axis] = AnyDim if shape[axis] is AnyDim else dim_mul(shape[axis], n)
    return TensorType(tuple(shape), x.dtype)


defop("repeat", 1, {"repeats": REQUIRED, "axis": REQUIRED}, _repeat_rel,
      lambda args, a: np.repeat(args[0], a["repeats"], axis=norm_axis(a["axis"], args[0].ndim)),
      PatternKind.BROADCAST, input_names=("data",),
      examples=(([_t((2, 3))], {"repeats": 2, "axis": 1}), ([_t((2, 1))], {"repeats": 4, "axis": -1})))
