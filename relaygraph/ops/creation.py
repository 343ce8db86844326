"""Tensor creation and shape queries: ``full``, ``zeros``, ``ones``, ``shape_of``."""

from __future__ import annotations

import numpy as np

from ..ir.types import DTYPES, TensorType
from ._base import REQUIRED, PatternKind, ShapeError, defop, fmt, tensor_arg

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _shape_attr(a: dict) -> tuple:
    shape = a["shape"]
    if shape is None:
        raise ShapeError("a shape is required")
    if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in shape):
        raise ShapeError(f"shape must hold non-negative ints, got {shape!r}")
    return tuple(shape)


def _dtype_attr(dtype: str, fallback: str | None = None) -> str:
    dtype = dtype or fallback
    if not dtype:
        raise ShapeError("a dtype is required")
    if dtype not in DTYPES:
        raise ShapeError(f"unknown dtype {dtype!r}")
    return dtype


def _int_tuple(v: dict) -> dict:
    if isinstance(v.get("shape"), int) and not isinstance(v["shape"], bool):
        v["shape"] = (v["shape"],)
    return v


def _full_rel(args, a):
    fill = tensor_arg(args[0], 0)
    if fill.ndim != 0:
        raise ShapeError(f"fill_value must be a scalar, got {fmt(fill)}")
    return TensorType(_shape_attr(a), _dtype_attr(a["dtype"], fill.dtype))


def _full_kernel(args, a):
    fill = args[0]
    return np.full(tuple(a["shape"]), np.asarray(fill).item(), dtype=a["dtype"] or fill.dtype)


def _np(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


defop("full", 1, {"shape": REQUIRED, "dtype": ""}, _full_rel, _full_kernel, PatternKind.ELEMWISE,
      input_names=("fill_value",), normalize=_int_tuple,
      examples=(([_t(())], {"shape": (2, 3)}), ([_t((), "int32")], {"shape": (4,), "dtype": "float32"})))

for _name, _fill in (("zeros", 0), ("ones", 1)):
    defop(_name, 0, {"shape": REQUIRED, "dtype": ""},
          lambda args, a: TensorType(_shape_attr(a), _dtype_attr(a["dtype"])),
          (lambda fill: lambda args, a: np.full(tuple(a["shape"]), fill, dtype=_np(a["dtype"])))(_fill),
          PatternKind.ELEMWISE, py_defaults={"dtype": "float32"}, normalize=_int_tuple,
          examples=(([], {"shape": (2, 3), "dtype": "float32"}), ([], {"shape": (), "dtype": "int32"})))


def _shape_of_rel(args, a):
    x = tensor_arg(args[0], 0)
    return TensorType((x.ndim,), _dtype_attr(a["dtype"], "int32"))


defop("shape_of", 1, {"dtype": ""}, _shape_of_rel,
      lambda args, a: np.asarray(args[0].shape, dtype=a["dtype"] or "int32"), PatternKind.OPAQUE,
      input_names=("data",), py_defaults={"dtype": "int32"},
      examples=(([_t((2, 3, 4))], {}), ([_t(())], {"dtype": "int64"})))
