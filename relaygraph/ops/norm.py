"""Normalisation and dropout: ``nn.batch_norm`` (a 3-tuple), ``nn.layer_norm``, ``nn.dropout``
(a 2-tuple), all in inference form."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType, TupleType
from ..ty.dims import dims_equal
from ._base import PatternKind, ShapeError, defop, flops_per_input, fmt, norm_axis, tensor_arg

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _check_vectors(x: TensorType, axis: int, vecs, names) -> TensorType:
    want = TensorType((x.shape[axis],), x.dtype)
    for t, name in zip(vecs, names, strict=True):
        if t.ndim != 1 or dims_equal(t.shape[0], x.shape[axis]) is False or t.dtype != x.dtype:
            raise ShapeError(f"{name} must be {fmt(want)} (axis {axis} of {fmt(x)}), got {fmt(t)}")
    return want


def _vector_infer(n_vectors: int):
    def infer(args, a):
        x = args[0]
        if not isinstance(x, TensorType):
            return None
        vec = TensorType((x.shape[norm_axis(a["axis"], x.ndim)],), x.dtype)
        return [None] + [vec] * n_vectors
    return infer


def _along(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


# -- nn.batch_norm -------------------------------------------------------------------------------
_BN_NAMES = ("gamma", "beta", "moving_mean", "moving_var")


def _batch_norm_rel(args, a):
    x = tensor_arg(args[0], 0)
    axis = norm_axis(a["axis"], x.ndim)
    vecs = [tensor_arg(t, i + 1) for i, t in enumerate(args[1:])]
    vec = _check_vectors(x, axis, vecs, _BN_NAMES)
    return TupleType((x, vec, vec))


def _batch_norm_kernel(args, a):
    x, gamma, beta, mean, var = args
    axis = norm_axis(a["axis"], x.ndim)
    inv = 1.0 / np.sqrt(var + a["epsilon"])
    scale = gamma * inv if a["scale"] else inv
    shift = -mean * scale + (beta if a["center"] else 0)
    # the shift added in place: one output and no temporary, as the fused kernels' epilogues do
    # (x * scale + shift made a temporary; 1.1-1.2x slower looped, 0.5-0.7 ms of MobileNet's,
    # ResNet-50's and DenseNet-121's programs)
    out = np.multiply(x, _along(scale, axis, x.ndim))
    out += _along(shift, axis, x.ndim)
    return out.astype(x.dtype, copy=False), mean.copy(), var.copy()


defop("nn.batch_norm", 5, {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
      _batch_norm_rel, _batch_norm_kernel, PatternKind.OPAQUE, flops=flops_per_input(2),
      input_names=("data", *_BN_NAMES), domain=("any", "any", "any", "any", "positive"),
      infer_inputs=_vector_infer(4),
      examples=(([_t((2, 3, 4, 4)), *[_t((3,))] * 4], {}),
                ([_t((2, 5)), *[_t((5,))] * 4], {"axis": -1, "epsilon": 2e-5, "scale": False}),
                ([_t((1, 4, 2, 3)), *[_t((3,))] * 4], {"axis": 3, "center": False})))


# -- nn.layer_norm -------------------------------------------------------------------------------
def _layer_norm_rel(args, a):
    x = tensor_arg(args[0], 0)
    axis = norm_axis(a["axis"], x.ndim)
    vecs = [tensor_arg(t, i + 1) for i, t in enumerate(args[1:])]
    _check_vectors(x, axis, vecs, ("gamma", "beta"))
    return x


def layer_norm_core(xf: np.ndarray, gamma, beta, a: dict, dtype) -> np.ndarray:
    """Layer norm of ``xf``, a float64 array this function may overwrite, cast to ``dtype``.

    Statistics in float64 (mean, then the mean square of the centred values), updated in place:
    one working buffer and one output, so that a fused op can hand in its own float64 sum.
    """
    axis = norm_axis(a["axis"], xf.ndim)
    n = xf.shape[axis]
    # ufunc reductions directly: np.mean's Python wrapper costs more than the sums on small rows
    xf -= np.add.reduce(xf, axis=axis, keepdims=True) / n
    var = np.add.reduce(np.square(xf), axis=axis, keepdims=True)
    var /= n
    var += a["epsilon"]
    np.sqrt(var, out=var)
    xf /= var
    last = axis == xf.ndim - 1  # vectors along the last axis broadcast as they are
    if a["scale"]:
        xf *= gamma if last else _along(gamma, axis, xf.ndim)
    if a["center"]:
        xf += beta if last else _along(beta, axis, xf.ndim)
    return xf.astype(dtype)


def _layer_norm_kernel(args, a):
    x, gamma, beta = args
    return layer_norm_core(x.astype("float64"), gamma, beta, a, x.dtype)


defop("nn.layer_norm", 3, {"axis": -1, "epsilon": 1e-5, "center": True, "scale": True},
      _layer_norm_rel, _layer_norm_kernel, PatternKind.OPAQUE, flops=flops_per_input(8),
      input_names=("data", "gamma", "beta"), infer_inputs=_vector_infer(2),
      examples=(([_t((2, 3, 8)), _t((8,)), _t((8,))], {}),
                ([_t((4, 6, 2)), _t((6,)), _t((6,))], {"axis": 1, "epsilon": 1e-3})))


# -- nn.dropout ----------------------------------------------------------------------------------
def _dropout_rel(args, a):
    x = tensor_arg(args[0], 0)
    return TupleType((x, x))


defop("nn.dropout", 1, {"rate": 0.5}, _dropout_rel,
      lambda args, a: (args[0].copy(), np.ones_like(args[0])), PatternKind.OPAQUE,
      input_names=("data",), examples=(([_t((2, 4))], {}), ([_t((3,))], {"rate": 0.2})))
