"""Matrix products and bias: ``nn.dense``, ``nn.matmul``, ``nn.batch_matmul``, ``nn.bias_add``."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from ..ty.dims import dims_equal
from ._base import (
    REQUIRED,
    PatternKind,
    ShapeError,
    defop,
    flops_per_output,
    fmt,
    norm_axis,
    numel,
    tensor_arg,
)
from .elemwise import broadcast_dim

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _check_k(k_data, k_weight, x, w, what="reduction dimension"):
    if dims_equal(k_data, k_weight) is False:
        raise ShapeError(f"{what} K mismatch: {fmt(x)} has K={k_data} but {fmt(w)} has "
                         f"K={k_weight}")


# -- nn.dense: x (..., K) times w (units, K) transposed ------------------------------------------
def _dense_rel(args, a):
    x, w = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if x.ndim < 1:
        raise ShapeError(f"data must have rank >= 1, got {fmt(x)}")
    if w.ndim != 2:
        raise ShapeError(f"weight must have rank 2 (units, K), got {fmt(w)}")
    _check_k(x.shape[-1], w.shape[1], x, w)
    units = a["units"]
    if units is not None and dims_equal(w.shape[0], units) is False:
        raise ShapeError(f"units={units} but the weight {fmt(w)} has {w.shape[0]} rows")
    return TensorType((*x.shape[:-1], units if units is not None else w.shape[0]),
                      a["out_dtype"] or x.dtype)


def _dense_infer(args, a):
    x = args[0]
    if isinstance(x, TensorType) and x.ndim >= 1 and a["units"] is not None:
        return [None, TensorType((a["units"], x.shape[-1]), x.dtype)]
    return None


def _dense_kernel(args, a):
    x, w = args
    if x.ndim > 2:  # as one 2-D product: numpy's batched matmul by a transposed weight skips BLAS
        out = np.matmul(x.reshape(-1, x.shape[-1]), w.T).reshape(*x.shape[:-1], w.shape[0])
    else:
        out = np.matmul(x, w.T)
    return out.astype(a["out_dtype"] or x.dtype, copy=False)


def _matmul_flops(arg_types, out_type, a) -> float:
    x = arg_types[0]
    k = x.shape[-2] if a.get("transpose_a") else x.shape[-1]
    return 2.0 * numel(out_type) * k


defop("nn.dense", 2, {"units": REQUIRED, "out_dtype": ""}, _dense_rel, _dense_kernel,
      PatternKind.OUT_ELEMWISE_FUSABLE, flops=_matmul_flops, input_names=("data", "weight"),
      py_defaults={"units": None},
      infer_inputs=_dense_infer,
      examples=(([_t((2, 8)), _t((5, 8))], {}), ([_t((3, 2, 4)), _t((6, 4))], {"units": 6}),
                ([_t((4, 3), "int32"), _t((2, 3), "int32")], {})))


# -- nn.matmul: a (..., K) [or (..., K, M) transposed] times b (K, N) [or (N, K)] ----------------
def _matmul_rel(args, a):
    x, w = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if w.ndim != 2:
        raise ShapeError(f"tensor_b must have rank 2, got {fmt(w)}")
    if x.ndim < 1 or (a["transpose_a"] and x.ndim < 2):
        raise ShapeError(f"tensor_a has too few dimensions: {fmt(x)}")
    out = list(x.shape)
    k = x.shape[-1]
    if a["transpose_a"]:
        k = x.shape[-2]
        out[-2] = x.shape[-1]
    kw, n = (w.shape[1], w.shape[0]) if a["transpose_b"] else (w.shape[0], w.shape[1])
    _check_k(k, kw, x, w)
    if a["units"] is not None:
        if dims_equal(n, a["units"]) is False:
            raise ShapeError(f"units={a['units']} but tensor_b {fmt(w)} gives {n} columns")
        n = a["units"]
    out[-1] = n
    return TensorType(tuple(out), a["out_dtype"] or x.dtype)


def _matmul_kernel(args, a):
    x, w = args
    if a["transpose_a"]:
        x = np.swapaxes(x, -1, -2)
    if a["transpose_b"]:
        w = w.T
    if x.ndim > 2 and not a["transpose_a"]:  # as one 2-D product (numpy's batched matmul skips BLAS)
        out = np.matmul(x.reshape(-1, x.shape[-1]), w).reshape(*x.shape[:-1], w.shape[1])
    else:
        out = np.matmul(x, w)
    return out.astype(a["out_dtype"] or args[0].dtype, copy=False)


defop("nn.matmul", 2, {"units": REQUIRED, "out_dtype": "", "transpose_a": False,
                      "transpose_b": False},
      _matmul_rel, _matmul_kernel, PatternKind.OUT_ELEMWISE_FUSABLE, flops=_matmul_flops,
      py_defaults={"units": None},
      input_names=("tensor_a", "tensor_b"),
      examples=(([_t((2, 8)), _t((8, 5))], {}), ([_t((2, 8)), _t((5, 8))], {"transpose_b": True}),
                ([_t((3, 8, 2)), _t((8, 4))], {"transpose_a": True})))


# -- nn.batch_matmul: x (B, M, K) times y (B, N, K) transposed (TVM's Python default) ------------
def _batch_matmul_rel(args, a):
    x, y = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if x.ndim != 3 or y.ndim != 3:
        raise ShapeError(f"both inputs must have rank 3, got {fmt(x)} and {fmt(y)}")
    b = broadcast_dim(x.shape[0], y.shape[0])
    m, k = (x.shape[2], x.shape[1]) if a["transpose_a"] else (x.shape[1], x.shape[2])
    ky, n = (y.shape[2], y.shape[1]) if a["transpose_b"] else (y.shape[1], y.shape[2])
    _check_k(k, ky, x, y)
    return TensorType((b, m, n), a["out_dtype"] or x.dtype)


def _batch_matmul_kernel(args, a):
    x, y = args
    if a["transpose_a"]:
        x = np.swapaxes(x, 1, 2)
    if a["transpose_b"]:
        y = np.swapaxes(y, 1, 2)
    return np.matmul(x, y).astype(a["out_dtype"] or args[0].dtype, copy=False)


def _batch_matmul_flops(arg_types, out_type, a) -> float:
    x = arg_types[0]
    return 2.0 * numel(out_type) * (x.shape[1] if a["transpose_a"] else x.shape[2])


defop("nn.batch_matmul", 2, {"out_dtype": "", "transpose_a": False, "transpose_b": False},
      _batch_matmul_rel, _batch_matmul_kernel, PatternKind.OUT_ELEMWISE_FUSABLE,
      flops=_batch_matmul_flops, input_names=("x", "y"), py_defaults={"transpose_b": True},
      examples=(([_t((2, 3, 4)), _t((2, 5, 4))], {"transpose_b": True}),
                ([_t((1, 3, 4)), _t((6, 4, 5))], {"transpose_b": False}),
                ([_t((2, 4, 3)), _t((2, 5, 4))], {"transpose_a": True, "transpose_b": True})))


# -- nn.bias_add ---------------------------------------------------------------------------------
def _bias_add_rel(args, a):
    x, b = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    axis = norm_axis(a["axis"], x.ndim)
    if b.ndim != 1 or dims_equal(b.shape[0], x.shape[axis]) is False:
        raise ShapeError(f"bias must have shape ({x.shape[axis]},) for axis {a['axis']} of "
                         f"{fmt(x)}, got {fmt(b)}")
    if b.dtype != x.dtype:
        raise ShapeError(f"bias dtype {b.dtype} differs from the data's {x.dtype}")
    return x


def _bias_add_infer(args, a):
    x = args[0]
    if isinstance(x, TensorType):
        return [None, TensorType((x.shape[norm_axis(a["axis"], x.ndim)],), x.dtype)]
    return None


def _bias_add_kernel(args, a):
    x, b = args
    axis = norm_axis(a["axis"], x.ndim)
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x + b.reshape(shape)).astype(x.dtype, copy=False)


defop("nn.bias_add", 2, {"axis": 1}, _bias_add_rel, _bias_add_kernel, PatternKind.BROADCAST,
      flops=flops_per_output(1), input_names=("data", "bias"), infer_inputs=_bias_add_infer,
      examples=(([_t((1, 4, 3, 3)), _t((4,))], {}), ([_t((2, 10)), _t((10,))], {"axis": -1})))
