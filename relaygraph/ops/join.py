"""Joining, splitting and indexing: ``concatenate``, ``stack``, ``split`` (a tuple), ``take``,
``strided_slice`` and ``nn.pad``."""

from __future__ import annotations

import numpy as np

from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType
from ..ty.dims import dim_add, dim_ceildiv, dim_floordiv, dim_min, dim_mul, dim_sub, dims_equal, is_known
from ._base import REQUIRED, PatternKind, ShapeError, defop, fmt, norm_axis, tensor_arg, tuple_arg

F32 = "float32"
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


# -- concatenate / stack -------------------------------------------------------------------------
def _concat_rel(args, a):
    fields = tuple_arg(args[0])
    first = fields[0]
    axis = norm_axis(a["axis"], first.ndim)
    total = 0
    for i, t in enumerate(fields):
        if t.ndim != first.ndim:
            raise ShapeError(f"rank mismatch: field 0 is {fmt(first)} but field {i} is {fmt(t)}")
        if t.dtype != first.dtype:
            raise ShapeError(f"dtype mismatch: field 0 is {fmt(first)} but field {i} is {fmt(t)}")
        for d in range(first.ndim):
            if d != axis and dims_equal(t.shape[d], first.shape[d]) is False:
                raise ShapeError(f"dimension {d} differs: field 0 is {fmt(first)} but field {i} "
                                 f"is {fmt(t)}")
        total = AnyDim if AnyDim in (total, t.shape[axis]) else dim_add(total, t.shape[axis])
    shape = list(first.shape)
    shape[axis] = total
    return TensorType(tuple(shape), first.dtype)


def _stack_rel(args, a):
    fields = tuple_arg(args[0])
    first = fields[0]
    axis = norm_axis(a["axis"], first.ndim, extra=1)
    for i, t in enumerate(fields):
        if t.ndim != first.ndim or t.dtype != first.dtype or any(
                dims_equal(x, y) is False for x, y in zip(t.shape, first.shape, strict=True)):
            raise ShapeError(f"stacked tensors must have one type: field 0 is {fmt(first)} but "
                             f"field {i} is {fmt(t)}")
    shape = list(first.shape)
    shape.insert(axis, len(fields))
    return TensorType(tuple(shape), first.dtype)


def _tuple_value(arg) -> list:
    return list(arg) if isinstance(arg, (tuple, list)) else [arg]


_cat = defop("concatenate", 1, {"axis": 0}, _concat_rel,
             lambda args, a: np.concatenate(_tuple_value(args[0]), axis=a["axis"]),
             PatternKind.INJECTIVE, input_names=("data",),
             examples=(([TupleType([_t((2, 3)), _t((4, 3))])], {}),
                       ([TupleType([_t((2, 3)), _t((2, 1)), _t((2, 2))])], {"axis": -1}),
                       ([TupleType([_t((5,), "int32")])], {})))
_stk = defop("stack", 1, {"axis": 0}, _stack_rel,
             lambda args, a: np.stack(_tuple_value(args[0]), axis=a["axis"]), PatternKind.INJECTIVE,
             input_names=("data",),
             examples=(([TupleType([_t((2, 3)), _t((2, 3))])], {}),
                       ([TupleType([_t((4,)), _t((4,)), _t((4,))])], {"axis": -1})))
_cat.extra["tuple_input"] = _stk.extra["tuple_input"] = True


# -- split ---------------------------------------------------------------------------------------
def _split_points(dim, ios) -> list:
    """Boundaries [0, ..., dim] of the pieces for sections (an int) or indices (a tuple)."""
    if isinstance(ios, int) and not isinstance(ios, bool):
        if ios <= 0:
            raise ShapeError(f"indices_or_sections={ios} must be positive")
        if is_known(dim) and dim % ios:
            raise ShapeError(f"a dimension of size {dim} does not split into {ios} equal sections")
        step = AnyDim if dim is AnyDim else dim_floordiv(dim, ios)
        if step is AnyDim:
            return [0] + [AnyDim] * (ios - 1) + [dim]
        return [0] + [dim_mul(step, i) for i in range(1, ios)] + [dim]
    if not isinstance(ios, tuple):
        raise ShapeError(f"indices_or_sections must be an int or a tuple, got {ios!r}")
    return [0, *ios, dim]


def _split_rel(args, a):
    x = tensor_arg(args[0], 0)
    axis = norm_axis(a["axis"], x.ndim)
    points = _split_points(x.shape[axis], a["indices_or_sections"])
    fields = []
    for lo, hi in zip(points, points[1:], strict=False):  # consecutive pairs
        size = AnyDim if AnyDim in (lo, hi) else dim_sub(hi, lo)
        if is_known(size) and size < 0:
            raise ShapeError(f"split indices {a['indices_or_sections']} are out of order or past "
                             f"the dimension {x.shape[axis]}")
        shape = list(x.shape)
        shape[axis] = size
        fields.append(TensorType(tuple(shape), x.dtype))
    return TupleType(fields)


def _split_kernel(args, a):
    # Basic slicing (views, as np.split gives) without np.split's Python-level overhead.
    x = args[0]
    axis = norm_axis(a["axis"], x.ndim)
    n = x.shape[axis]
    ios = a["indices_or_sections"]
    if isinstance(ios, tuple):
        bounds = [0, *ios, n]
    else:
        if ios <= 0 or n % ios:
            raise ValueError(f"split: {ios} sections do not divide an axis of {n} equally")
        bounds = list(range(0, n + 1, n // ios)) if n else [0] * (ios + 1)
    lead = (slice(None),) * axis
    # consecutive pairs of bounds: the shorter second list ends the zip
    return tuple(x[(*lead, slice(lo, hi))] for lo, hi in zip(bounds, bounds[1:], strict=False))


defop("split", 1, {"indices_or_sections": REQUIRED, "axis": 0}, _split_rel, _split_kernel,
      PatternKind.INJECTIVE, input_names=("data",),
      examples=(([_t((6, 4))], {"indices_or_sections": 3}),
                ([_t((2, 7))], {"indices_or_sections": (2, 5), "axis": 1}),
                ([_t((4, 4))], {"indices_or_sections": (1,), "axis": -1})))


# -- take ----------------------------------------------------------------------------------------
def _take_rel(args, a):
    x, idx = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if idx.dtype not in INT_DTYPES:
        raise ShapeError(f"indices must have an integer dtype, got {fmt(idx)}")
    if a["mode"] not in ("clip", "wrap", "fast"):
        raise ShapeError(f"mode must be clip, wrap or fast, got {a['mode']!r}")
    if a["axis"] is None:
        return TensorType(idx.shape, x.dtype)
    axis = norm_axis(a["axis"], x.ndim)
    b = a["batch_dims"] % idx.ndim if idx.ndim and a["batch_dims"] < 0 else a["batch_dims"]
    if b > axis or b > idx.ndim:
        raise ShapeError(f"batch_dims={a['batch_dims']} must not exceed axis {axis} or the "
                         f"indices' rank {idx.ndim}")
    return TensorType((*x.shape[:axis], *idx.shape[b:], *x.shape[axis + 1:]), x.dtype)


def _take_kernel(args, a):
    x, idx = args
    axis = None if a["axis"] is None else norm_axis(a["axis"], x.ndim)
    n = x.size if axis is None else x.shape[axis]
    if a["mode"] == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif a["mode"] == "wrap":
        idx = np.mod(idx, n)
    if axis is None:
        return x.reshape(-1)[idx]
    b = a["batch_dims"] % idx.ndim if idx.ndim and a["batch_dims"] < 0 else a["batch_dims"]
    if b == 0:
        return np.take(x, idx, axis=axis)
    # batch_dims: fold the shared leading dims into one and gather along the axis per batch
    batch = x.shape[:b]
    nb = int(np.prod(batch))
    pre, post = x.shape[b:axis], x.shape[axis + 1:]
    xs = x.reshape(nb, int(np.prod(pre)), n, int(np.prod(post)))
    ind = idx.reshape(nb, -1)
    gathered = xs[np.arange(nb)[:, None], :, ind, :]  # (nb, I, P, Q)
    gathered = np.moveaxis(gathered, 2, 1)
    return gathered.reshape((*batch, *pre, *idx.shape[b:], *post))


def _take_sampler(arg_types, attrs, rng, draw):
    x, idx = arg_types
    data = draw(x, "any")
    axis = attrs.get("axis")
    n = int(np.prod(data.shape)) if axis is None else data.shape[axis]
    return [data, rng.integers(0, max(n, 1), size=[int(d) for d in idx.shape]).astype(idx.dtype)]


defop("take", 2, {"batch_dims": 0, "axis": None, "mode": "clip"}, _take_rel, _take_kernel,
      PatternKind.INJECTIVE, input_names=("data", "indices"), domain=("any", "index"),
      sampler=_take_sampler,
      examples=(([_t((5, 3)), _t((4,), "int32")], {"axis": 0}),
                ([_t((2, 3, 4)), _t((2, 2), "int64")], {"axis": 2}),
                ([_t((3, 4)), _t((5,), "int32")], {}),
                ([_t((2, 5, 3)), _t((2, 4), "int32")], {"axis": 1, "batch_dims": 1})))


# -- strided_slice -------------------------------------------------------------------------------
def _slices(shape: tuple, a: dict) -> dict[int, tuple]:
    """Axis -> (begin, end or None, stride) for every sliced axis, as TVM reads the attrs."""
    begin, end, strides = a["begin"], a["end"], a["strides"]
    if begin is None or end is None:
        raise ShapeError("strided_slice needs begin and end")
    begin, end = tuple(begin), tuple(end)
    strides = tuple(strides) if strides else (1,)
    ndim = len(shape)
    if a["axes"] is not None:
        axes = [norm_axis(ax, ndim) for ax in a["axes"]]
        if len(begin) != len(axes) or len(end) != len(axes):
            raise ShapeError(f"begin, end and axes must have one value per axis: {a['axes']}")
        strides = strides * len(axes) if len(strides) == 1 else strides
    else:
        if len(begin) > ndim:
            raise ShapeError(f"begin {begin} has more entries than the rank {ndim}")
        axes = list(range(len(begin)))
    out = {}
    for i, ax in enumerate(axes):
        s = strides[i] if i < len(strides) else 1
        e = end[i] if i < len(end) else None
        b = begin[i]
        if a["slice_mode"] == "size":
            s = 1  # end holds sizes; a negative size means "to the end"
            if e is not None:
                if e < 0:
                    e = None
                elif b < 0:
                    e = b + e if b + e < 0 else None
                else:
                    e = b + e
        elif a["slice_mode"] != "end":
            raise ShapeError(f"slice_mode must be end or size, got {a['slice_mode']!r}")
        if s == 0:
            raise ShapeError("strides must be non-zero")
        out[ax] = (b, e, s)
    return out


def _slice_len(d, b, e, s):
    if is_known(d):
        return len(range(*slice(b, e, s).indices(d)))
    if d is AnyDim or s < 0:
        return AnyDim
    lo = dim_add(d, b) if b < 0 else b
    if e is None or e >= 2**31 - 1:
        hi = d
    elif e < 0:
        hi = dim_add(d, e)
    else:
        hi = dim_min(e, d)
    return dim_ceildiv(dim_sub(hi, lo), s)


def _strided_slice_rel(args, a):
    x = tensor_arg(args[0], 0)
    shape = list(x.shape)
    for ax, (b, e, s) in _slices(x.shape, a).items():
        shape[ax] = _slice_len(x.shape[ax], b, e, s)
    return TensorType(tuple(shape), x.dtype)


def _strided_slice_kernel(args, a):
    x = args[0]
    index = [slice(None)] * x.ndim
    for ax, (b, e, s) in _slices(x.shape, a).items():
        index[ax] = slice(b, e, s)
    return x[tuple(index)].copy()


defop("strided_slice", 1, {"begin": REQUIRED, "end": REQUIRED, "strides": REQUIRED,
                           "slice_mode": "end", "axes": REQUIRED},
      _strided_slice_rel, _strided_slice_kernel, PatternKind.INJECTIVE, input_names=("data",),
      py_defaults={"strides": (1,), "axes": None},
      examples=(([_t((4, 5))], {"begin": (1, 0), "end": (3, 5)}),
                ([_t((6, 5, 4))], {"begin": (0, 1), "end": (6, 5), "strides": (2, 2)}),
                ([_t((6,))], {"begin": (-1,), "end": (-7,), "strides": (-2,)}),
                ([_t((3, 8))], {"begin": (2,), "end": (100,), "axes": (1,)}),
                ([_t((4, 5))], {"begin": (1, 1), "end": (2, -1), "slice_mode": "size"})))


# -- slice_like ----------------------------------------------------------------------------------
def _slice_like_axes(x_ndim: int, like_ndim: int, axes) -> list[int]:
    if axes is None:
        if x_ndim != like_ndim:
            raise ShapeError(f"slice_like without axes needs inputs of one rank, got {x_ndim} and "
                             f"{like_ndim}")
        return list(range(x_ndim))
    out = [norm_axis(ax, x_ndim) for ax in axes]
    if any(ax >= like_ndim for ax in out):
        raise ShapeError(f"slice_like axes {tuple(axes)} are out of range for shape_like's rank "
                         f"{like_ndim}")
    return out


def _slice_like_rel(args, a):
    x, like = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    shape = list(x.shape)
    for ax in _slice_like_axes(x.ndim, like.ndim, a["axes"]):
        d, want = x.shape[ax], like.shape[ax]
        if is_known(d) and is_known(want) and want > d:
            raise ShapeError(f"slice_like cannot slice {fmt(x)} to {fmt(like)} on axis {ax} "
                             f"({want} > {d})")
        shape[ax] = want
    return TensorType(tuple(shape), x.dtype)


def _slice_like_kernel(args, a):
    x, like = args
    index = [slice(None)] * x.ndim
    for ax in _slice_like_axes(x.ndim, like.ndim, a["axes"]):
        if like.shape[ax] > x.shape[ax]:
            raise ShapeError(f"slice_like cannot slice a dim of {x.shape[ax]} to {like.shape[ax]} "
                             f"(axis {ax})")
        index[ax] = slice(0, like.shape[ax])
    return x[tuple(index)].copy()


# TVM's slice_like: data sliced from 0 to the dims of shape_like on ``axes`` (all when None); the
# size may be symbolic, so a slice to a size known only from another tensor's shape is static IR
defop("slice_like", 2, {"axes": None}, _slice_like_rel, _slice_like_kernel, PatternKind.INJECTIVE,
      input_names=("data", "shape_like"), normalize=lambda v: _axes_tuple(v),
      examples=(([_t((4, 5)), _t((2, 3))], {}),
                ([_t((1, 1, 8, 8)), _t((2, 4, 3, 5))], {"axes": (2, 3)}),
                ([_t((6, 5)), _t((3, 2), "int64")], {"axes": (-2,)})))


def _axes_tuple(v: dict) -> dict:
    x = v.get("axes")
    if isinstance(x, int) and not isinstance(x, bool):
        v["axes"] = (x,)
    return v


# -- nn.pad --------------------------------------------------------------------------------------
def _pad_width(x_ndim: int, pw) -> list[tuple[int, int]]:
    if pw is None or len(pw) != x_ndim:
        raise ShapeError(f"pad_width must have one (before, after) pair per dimension ({x_ndim}), "
                         f"got {pw!r}")
    out = []
    for p in pw:
        if not isinstance(p, tuple) or len(p) != 2 or any(not isinstance(v, int) or v < 0 for v in p):
            raise ShapeError(f"each pad_width entry must be (before, after) >= 0, got {p!r}")
        out.append(p)
    return out


def _pad_rel(args, a):
    x, v = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    if v.ndim != 0:
        raise ShapeError(f"pad_value must be a scalar, got {fmt(v)}")
    if a["pad_mode"] not in ("constant", "edge", "reflect"):
        raise ShapeError(f"pad_mode must be constant, edge or reflect, got {a['pad_mode']!r}")
    pw = _pad_width(x.ndim, a["pad_width"])
    shape = tuple(AnyDim if d is AnyDim else dim_add(d, lo + hi)
                  for d, (lo, hi) in zip(x.shape, pw, strict=True))
    return TensorType(shape, x.dtype)


def _pad_kernel(args, a):
    x, v = args
    pw = [tuple(p) for p in a["pad_width"]]
    if a["pad_mode"] == "constant":
        return np.pad(x, pw, mode="constant", constant_values=np.asarray(v).item())
    return np.pad(x, pw, mode=a["pad_mode"])


defop("nn.pad", 2, {"pad_width": REQUIRED, "pad_mode": "constant"}, _pad_rel, _pad_kernel,
      PatternKind.INJECTIVE, input_names=("data", "pad_value"),
      examples=(([_t((2, 3)), _t(())], {"pad_width": ((1, 0), (2, 2))}),
                ([_t((1, 2, 4, 4)), _t(())], {"pad_width": ((0, 0), (0, 0), (1, 1), (2, 1)),
                                              "pad_mode": "edge"}),
                ([_t((5,)), _t(())], {"pad_width": ((2, 3),), "pad_mode": "reflect"})))
