"""How each covered Relay operator is written as ONNX nodes (the exporter's op table).

A converter takes the graph being built (``Emitter``) and one call (``Site``: its input value
names, input and output types, and resolved attrs) and returns the ONNX name of its value, or a
list of names for a tuple-valued op (``nn.batch_norm``, ``split``). Shapes written into the
graph (Reshape, Expand, Split sizes) come from the call's checked types, so a symbolic dim is
kept as a copied dim (``0`` / ``1``) or an inferred one (``-1``) instead of a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import RelayError
from ..ir.types import TensorType
from ..ty.dims import dims_equal, is_known

__all__ = ["CONVERTERS", "Site", "covered_ops"]

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


@dataclass
class Site:
    """One call being exported: ONNX names of its inputs, their types, its type and attrs."""

    op: str
    ins: list
    in_types: list
    out_type: object
    attrs: dict


def _fail(site: Site, why: str) -> RelayError:
    return RelayError(f"cannot export {site.op} to ONNX: {why}")


def _rank(t: TensorType) -> int:
    return len(t.shape)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _static(site: Site, t: TensorType, what: str) -> tuple:
    if not all(is_known(d) for d in t.shape):
        raise _fail(site, f"{what} needs a static shape, got {t}")
    return tuple(int(d) for d in t.shape)


def _simple(onnx_op: str, **attrs) -> Callable:
    def convert(g, s: Site):
        return g.add(onnx_op, s.ins, **attrs)
    return convert


def _chain(*ops: str) -> Callable:
    def convert(g, s: Site):
        out = g.add(ops[0], s.ins)
        for op in ops[1:]:
            out = g.add(op, [out])
        return out
    return convert


def _perm(site: Site, layout: str, want: str) -> list[int] | None:
    """The Transpose perm from ``layout`` to ``want`` (None when they are the same)."""
    if layout == want or not layout:
        return None
    if sorted(layout) != sorted(want):
        raise _fail(site, f"the layout {layout!r} is not a permutation of {want} (blocked layouts "
                          "are not covered)")
    return [layout.index(c) for c in want]


def _to_layout(g, site: Site, name: str, layout: str, want: str) -> str:
    perm = _perm(site, layout, want)
    return name if perm is None else g.add("Transpose", [name], perm=perm)


def _from_nchw(g, site: Site, name: str, layout: str) -> str:
    """A result in NCHW transposed back to ``layout``."""
    if _perm(site, layout, "NCHW") is None:
        return name
    return g.add("Transpose", [name], perm=["NCHW".index(c) for c in layout])


def _float_only(site: Site) -> None:
    dtype = site.in_types[0].dtype
    if not dtype.startswith(("float", "bfloat")):
        raise _fail(site, f"ONNX's convolutions and pools take floating point, not {dtype}")


# -- elementwise ------------------------------------------------------------------------------------
def _scalar(g, value, dtype) -> str:
    return g.const(np.asarray(value, dtype=dtype))


def _clip(g, s: Site):
    dt = s.in_types[0].dtype
    return g.add("Clip", [s.ins[0], _scalar(g, s.attrs["a_min"], dt), _scalar(g, s.attrs["a_max"], dt)])


def _floor_divide(g, s: Site):
    if s.out_type.dtype.startswith(("float", "bfloat")):
        return g.add("Floor", [g.add("Div", s.ins)])
    # integers: (a - a mod b) / b is exact, with mod taking the divisor's sign (floor semantics)
    a, b = s.ins
    return g.add("Div", [g.add("Sub", [a, g.add("Mod", [a, b], fmod=0)]), b])


def _like(value: float) -> Callable:
    def convert(g, s: Site):
        fill = np.full((1,), value, dtype=s.out_type.dtype)
        return g.add("ConstantOfShape", [g.add("Shape", s.ins)], value=g.tensor(fill))
    return convert


def _cast(g, s: Site):
    return g.add("Cast", s.ins, to=g.dtype(s.out_type.dtype))


def _prelu(g, s: Site):
    rank = _rank(s.in_types[0])
    axis = _axis(s.attrs["axis"], rank)
    slope = g.add("Reshape", [s.ins[1], g.ints([-1] + [1] * (rank - axis - 1))])
    return g.add("PRelu", [s.ins[0], slope])


def _dropout(g, s: Site):
    return [g.add("Identity", s.ins[:1]), None]  # the mask of inference-mode dropout is not kept


def _creation(g, s: Site):
    shape = _static(s, s.out_type, s.op)
    if s.op == "full":
        return g.add("Expand", [g.add("Cast", s.ins[:1], to=g.dtype(s.out_type.dtype)), g.ints(shape)])
    return g.const(np.full(shape, 1 if s.op == "ones" else 0, dtype=s.out_type.dtype))


def _shape_of(g, s: Site):
    out = g.add("Shape", s.ins)
    return out if s.out_type.dtype == "int64" else g.add("Cast", [out], to=g.dtype(s.out_type.dtype))


# -- convolution and pooling ------------------------------------------------------------------------
def _pads(padding) -> list[int]:
    p = list(padding)
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = p * 2
    return [int(v) for v in p]  # Relay's (top, left, bottom, right) is ONNX's begins then ends


def _conv(g, s: Site):
    a = s.attrs
    _float_only(s)
    transpose = s.op == "nn.conv2d_transpose"
    data_layout, out_layout = a["data_layout"], a["out_layout"] or a["data_layout"]
    x = _to_layout(g, s, s.ins[0], data_layout, "NCHW")
    w = _to_layout(g, s, s.ins[1], a["kernel_layout"], "IOHW" if transpose else "OIHW")
    kl = a["kernel_layout"]
    ws = s.in_types[1].shape
    opts = dict(kernel_shape=[int(ws[kl.index("H")]), int(ws[kl.index("W")])], strides=list(a["strides"]),
                pads=_pads(a["padding"]), dilations=list(a["dilation"]), group=int(a["groups"]))
    if transpose:
        y = g.add("ConvTranspose", [x, w], output_padding=list(a["output_padding"]), **opts)
    else:
        y = g.add("Conv", [x, w], **opts)
    return _from_nchw(g, s, y, out_layout)


def _pool(g, s: Site):
    a = s.attrs
    _float_only(s)
    x = _to_layout(g, s, s.ins[0], a["layout"], "NCHW")
    opts = dict(kernel_shape=list(a["pool_size"]), strides=list(a["strides"]), pads=_pads(a["padding"]),
                ceil_mode=int(a["ceil_mode"]))
    dilated = any(d != 1 for d in a["dilation"])
    if s.op == "nn.max_pool2d":
        y = g.add("MaxPool", [x], dilations=list(a["dilation"]), **opts)
    else:
        if dilated and g.opset < 19:
            raise _fail(s, "a dilated average pool needs opset 19 or newer")
        if dilated:
            opts["dilations"] = list(a["dilation"])
        y = g.add("AveragePool", [x], count_include_pad=int(a["count_include_pad"]), **opts)
    return _from_nchw(g, s, y, a["out_layout"] or a["layout"])


def _global_pool(onnx_op: str) -> Callable:
    def convert(g, s: Site):
        _float_only(s)
        x = _to_layout(g, s, s.ins[0], s.attrs["layout"], "NCHW")
        return _from_nchw(g, s, g.add(onnx_op, [x]), s.attrs["out_layout"] or s.attrs["layout"])
    return convert


def _adaptive_avg(g, s: Site):
    _float_only(s)
    layout = s.attrs["layout"]
    x = _to_layout(g, s, s.ins[0], layout, "NCHW")
    out = tuple(s.attrs["output_size"])
    if out in ((1,), (1, 1)):
        y = g.add("GlobalAveragePool", [x])
        return _from_nchw(g, s, y, s.attrs["out_layout"] or layout)
    in_t = s.in_types[0]
    hw = [in_t.shape[layout.index("H")], in_t.shape[layout.index("W")]]
    if not all(is_known(d) for d in hw):
        raise _fail(s, "an adaptive pool to a size other than 1 needs static H and W")
    hw = [int(d) for d in hw]
    size = hw if out == () else list(out) * 2 if len(out) == 1 else list(out)
    y = x
    for axis, (n, m) in zip((2, 3), zip(hw, size, strict=True), strict=True):
        if n == m:
            continue
        # each output cell averages input rows floor(i*n/m) .. ceil((i+1)*n/m): one mean per cell
        cells = []
        for i in range(m):
            lo, hi = g.ints([i * n // m]), g.ints([-(-(i + 1) * n // m)])
            cell = g.add("Slice", [y, lo, hi, g.ints([axis])])
            cells.append(g.reduce("ReduceMean", cell, [axis], keepdims=1))
        y = g.add("Concat", cells, axis=axis) if len(cells) > 1 else cells[0]
    if y == x:
        y = g.add("Identity", [x])
    return _from_nchw(g, s, y, s.attrs["out_layout"] or layout)


def _upsampling(g, s: Site):
    a = s.attrs
    if a["layout"] != "NCHW":
        raise _fail(s, f"layout={a['layout']!r}; ONNX's Resize here takes NCHW")
    if a["method"] == "nearest_neighbor":
        if a["align_corners"]:
            raise _fail(s, "nearest_neighbor with align_corners rounds ties unlike any ONNX nearest_mode")
        mode = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    elif a["method"] == "bilinear":
        ctm = "align_corners" if a["align_corners"] else "asymmetric"
        mode = dict(mode="linear", coordinate_transformation_mode=ctm)
    else:
        raise _fail(s, f"method {a['method']!r} is not covered (nearest_neighbor, bilinear are)")
    sizes = g.ints(_static(s, s.out_type, "nn.upsampling"))
    return g.add("Resize", [s.ins[0], "", "", sizes], **mode)


# -- normalisation ----------------------------------------------------------------------------------
def _channel_vector(g, s: Site, name: str | None, value: float, channels) -> str:
    if name is not None:
        return name
    if not is_known(channels):
        raise _fail(s, "center=False or scale=False needs a static channel count")
    return g.const(np.full((int(channels),), value, dtype=s.in_types[0].dtype))


def _batch_norm(g, s: Site):
    a = s.attrs
    x_t = s.in_types[0]
    rank = _rank(x_t)
    axis = _axis(a["axis"], rank)
    c = x_t.shape[axis]
    gamma = _channel_vector(g, s, s.ins[1] if a["scale"] else None, 1.0, c)
    beta = _channel_vector(g, s, s.ins[2] if a["center"] else None, 0.0, c)
    x = s.ins[0]
    perm = None
    if axis != 1:  # ONNX normalises axis 1: move the channel axis there and back
        perm = [0, axis] + [i for i in range(1, rank) if i != axis]
        x = g.add("Transpose", [x], perm=perm)
    y = g.add("BatchNormalization", [x, gamma, beta, s.ins[3], s.ins[4]], epsilon=float(a["epsilon"]))
    if perm is not None:
        y = g.add("Transpose", [y], perm=[perm.index(i) for i in range(rank)])
    return [y, s.ins[3], s.ins[4]]  # inference form: the moving statistics pass through


def _broadcast_on(g, vector: str, axis: int, rank: int) -> str:
    """A per-channel vector reshaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    if axis == rank - 1:
        return vector
    return g.add("Reshape", [vector, g.ints([-1] + [1] * (rank - axis - 1))])


def _layer_norm(g, s: Site):
    a = s.attrs
    rank = _rank(s.in_types[0])
    axis = _axis(a["axis"], rank)
    eps = float(a["epsilon"])
    if g.opset >= 17 and axis == rank - 1:
        c = s.in_types[0].shape[axis]
        gamma = _channel_vector(g, s, s.ins[1] if a["scale"] else None, 1.0, c)
        ins = [s.ins[0], gamma] + ([s.ins[2]] if a["center"] else [])
        return g.add("LayerNormalization", ins, axis=-1, epsilon=eps)
    x = s.ins[0]
    dt = s.out_type.dtype
    mean = g.reduce("ReduceMean", x, [axis], keepdims=1)
    d = g.add("Sub", [x, mean])
    var = g.reduce("ReduceMean", g.add("Mul", [d, d]), [axis], keepdims=1)
    y = g.add("Div", [d, g.add("Sqrt", [g.add("Add", [var, _scalar(g, eps, dt)])])])
    if a["scale"]:
        y = g.add("Mul", [y, _broadcast_on(g, s.ins[1], axis, rank)])
    if a["center"]:
        y = g.add("Add", [y, _broadcast_on(g, s.ins[2], axis, rank)])
    return y


def _bias_add(g, s: Site):
    rank = _rank(s.in_types[0])
    return g.add("Add", [s.ins[0], _broadcast_on(g, s.ins[1], _axis(s.attrs["axis"], rank), rank)])


# -- linear algebra ---------------------------------------------------------------------------------
def _last_two(rank: int) -> list[int]:
    return list(range(rank - 2)) + [rank - 1, rank - 2]


def _dense(g, s: Site):
    if _rank(s.in_types[0]) == 2:
        return g.add("Gemm", s.ins, transB=1)
    return g.add("MatMul", [s.ins[0], g.add("Transpose", s.ins[1:], perm=[1, 0])])


def _matmul(g, s: Site):
    a, b = s.ins
    if s.op == "nn.matmul" and _rank(s.in_types[0]) == 2 and not s.attrs["transpose_a"]:
        return g.add("Gemm", [a, b], transB=int(s.attrs["transpose_b"]))
    if s.attrs["transpose_a"]:
        a = g.add("Transpose", [a], perm=_last_two(_rank(s.in_types[0])))
    if s.attrs["transpose_b"]:
        b = g.add("Transpose", [b], perm=_last_two(_rank(s.in_types[1])))
    return g.add("MatMul", [a, b])


# -- shapes and data movement -----------------------------------------------------------------------
def _reshape(g, s: Site):
    src, dst = s.in_types[0].shape, s.out_type.shape
    target, free = [], []
    for i, d in enumerate(dst):
        if is_known(d) and int(d) != 0:
            target.append(int(d))
        elif i < len(src) and dims_equal(src[i], d) is True:
            target.append(0)  # copied from the input: keeps a symbolic dim symbolic
        else:
            target.append(-1)
            free.append(i)
    if len(free) <= 1:
        return g.add("Reshape", [s.ins[0], g.ints(target)])
    # several symbolic dims moved: read those equal to an input dim from the input's shape at run
    # time (a 0 in a runtime shape would still mean "copy", so every entry is explicit)
    shape, pieces, left = None, [], 0
    for i, d in enumerate(dst):
        if i not in free:
            pieces.append(g.ints([target[i]]) if target[i] != 0 else None)
            if target[i] == 0:
                shape = shape or g.add("Shape", [s.ins[0]])
                pieces[-1] = g.add("Gather", [shape, g.ints([i])], axis=0)
            continue
        j = next((j for j, e in enumerate(src) if dims_equal(e, d) is True), None)
        if j is None:
            left += 1
            pieces.append(g.ints([-1]))
        else:
            shape = shape or g.add("Shape", [s.ins[0]])
            pieces.append(g.add("Gather", [shape, g.ints([j])], axis=0))
    if left > 1:
        raise _fail(s, f"the result {s.out_type} has more than one dim not known from its input")
    return g.add("Reshape", [s.ins[0], g.add("Concat", pieces, axis=0)])


def _transpose(g, s: Site):
    axes = s.attrs["axes"]
    rank = _rank(s.in_types[0])
    perm = list(reversed(range(rank))) if axes is None else [_axis(a, rank) for a in axes]
    return g.add("Transpose", s.ins, perm=perm)


def _concatenate(g, s: Site):
    return g.add("Concat", list(s.ins[0]), axis=_axis(s.attrs["axis"], _rank(s.out_type)))


def _stack(g, s: Site):
    axis = _axis(s.attrs["axis"], _rank(s.out_type))
    parts = [g.add("Unsqueeze", [x, g.ints([axis])]) for x in s.ins[0]]
    return g.add("Concat", parts, axis=axis)


def _split(g, s: Site):
    rank = _rank(s.in_types[0])
    axis = _axis(s.attrs["axis"], rank)
    sizes = [f.shape[axis] for f in s.out_type.fields]
    if not all(is_known(d) for d in sizes):
        raise _fail(s, f"the split sizes {sizes} along axis {axis} must be static")
    return g.add("Split", [s.ins[0], g.ints([int(d) for d in sizes])], outputs=len(sizes), axis=axis)


def _squeeze(g, s: Site):
    shape = s.in_types[0].shape
    axes = s.attrs["axis"]
    if axes is None:
        axes = [i for i, d in enumerate(shape) if is_known(d) and int(d) == 1]
    return g.add("Squeeze", [s.ins[0], g.ints([_axis(a, len(shape)) for a in axes])])


def _expand_dims(g, s: Site):
    axis = _axis(s.attrs["axis"], _rank(s.in_types[0]) + 1)
    n = s.attrs["num_newaxis"]
    if n == 0:
        return g.add("Identity", s.ins)
    return g.add("Unsqueeze", [s.ins[0], g.ints(list(range(axis, axis + n)))])


def _broadcast_to(g, s: Site):
    src, dst = list(s.in_types[0].shape), list(s.out_type.shape)
    src = [1] * (len(dst) - len(src)) + src
    target = []
    for a, b in zip(src, dst, strict=True):
        if is_known(b):
            target.append(int(b))
        elif dims_equal(a, b) is True:
            target.append(1)  # Expand broadcasts both ways: 1 keeps the input's symbolic dim
        else:
            raise _fail(s, f"the target dim {b} is neither static nor the input's")
    return g.add("Expand", [s.ins[0], g.ints(target)])


def _strided_slice(g, s: Site):
    a = s.attrs
    rank = _rank(s.in_types[0])
    begin, end = list(a["begin"]), list(a["end"])
    axes = list(range(len(begin))) if a["axes"] is None else [_axis(x, rank) for x in a["axes"]]
    strides = list(a["strides"] or (1,))
    strides = strides * len(axes) if len(strides) == 1 else strides
    starts, ends, steps = [], [], []
    for i, _ax in enumerate(axes):
        b, e = int(begin[i]), end[i] if i < len(end) else None
        st = int(strides[i]) if i < len(strides) else 1
        if a["slice_mode"] == "size":
            st = 1
            e = None if e is None or e < 0 or (b < 0 and b + e >= 0) else b + e
        if e is None or e >= 2**31 - 1:
            e = INT64_MAX if st > 0 else INT64_MIN
        starts.append(b)
        ends.append(int(e))
        steps.append(st)
    return g.add("Slice", [s.ins[0], g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)])


def _slice_like(g, s: Site):
    rank = _rank(s.in_types[0])
    axes = (list(range(rank)) if s.attrs["axes"] is None
            else [_axis(a, rank) for a in s.attrs["axes"]])
    want = [s.in_types[1].shape[a] for a in axes]
    if all(is_known(d) for d in want):
        ends = g.ints([int(d) for d in want])
    else:  # the sizes are shape_like's dims, read at run time
        ends = g.add("Gather", [g.add("Shape", [s.ins[1]]), g.ints(axes)], axis=0)
    return g.add("Slice", [s.ins[0], g.ints([0] * len(axes)), ends, g.ints(axes)])


def _repeat(g, s: Site):
    # np.repeat(x, n, axis): a new axis after ``axis``, expanded to n, merged back into ``axis``
    rank = _rank(s.in_types[0])
    axis = _axis(s.attrs["axis"], rank)
    n = int(s.attrs["repeats"])
    if n == 1:
        return g.add("Identity", s.ins)
    wide = g.add("Unsqueeze", [s.ins[0], g.ints([axis + 1])])
    wide = g.add("Expand", [wide, g.ints([1] * (axis + 1) + [n] + [1] * (rank - axis - 1))])
    if all(is_known(d) for d in s.out_type.shape):
        return g.add("Reshape", [wide, g.ints([int(d) for d in s.out_type.shape])])
    # symbolic dims: the input's own dims around the merged axis, read at run time
    shape = g.add("Shape", s.ins[:1])
    pieces = [g.add("Slice", [shape, g.ints([0]), g.ints([axis])]), g.ints([-1]),
              g.add("Slice", [shape, g.ints([axis + 1]), g.ints([rank])])]
    return g.add("Reshape", [wide, g.add("Concat", pieces, axis=0)])


def _take(g, s: Site):
    data, idx = s.ins
    x_t, i_t = s.in_types
    axis = s.attrs["axis"]
    if axis is None:
        data, axis, dim = g.add("Reshape", [data, g.ints([-1])]), 0, None
        if all(is_known(d) for d in x_t.shape):
            dim = int(np.prod([int(d) for d in x_t.shape]))
    else:
        axis = _axis(axis, _rank(x_t))
        dim = x_t.shape[axis]
    mode = s.attrs["mode"]
    if mode in ("clip", "wrap"):
        if dim is None or not is_known(dim):
            raise _fail(s, f"mode={mode!r} needs the size of the gathered axis to be static")
        if mode == "clip":
            idx = g.add("Clip", [idx, _scalar(g, 0, i_t.dtype), _scalar(g, int(dim) - 1, i_t.dtype)])
        else:
            idx = g.add("Mod", [idx, _scalar(g, int(dim), i_t.dtype)])
    batch = int(s.attrs["batch_dims"])
    if batch:
        batch = _axis(batch, _rank(i_t))
        if batch != axis:
            raise _fail(s, f"batch_dims={batch} with axis={axis}: ONNX's GatherND needs them equal")
        idx = g.add("Unsqueeze", [g.add("Cast", [idx], to=g.dtype("int64")), g.ints([-1])])
        return g.add("GatherND", [data, idx], batch_dims=batch)
    return g.add("Gather", [data, idx], axis=axis)


def _pad(g, s: Site):
    pw = s.attrs["pad_width"]
    pads = [int(p[0]) for p in pw] + [int(p[1]) for p in pw]
    mode = s.attrs["pad_mode"]
    if mode == "constant":
        return g.add("Pad", [s.ins[0], g.ints(pads), s.ins[1]], mode="constant")
    return g.add("Pad", [s.ins[0], g.ints(pads)], mode=mode)


# -- reductions ------------------------------------------------------------------------------------
def _reduce_axes(s: Site) -> list[int] | None:
    rank = _rank(s.in_types[0])
    axis = s.attrs["axis"]
    axes = None if axis is None else [_axis(a, rank) for a in ((axis,) if isinstance(axis, int) else axis)]
    if s.attrs.get("exclude"):
        axes = [i for i in range(rank) if i not in (axes or [])]
    return axes


def _reduce(onnx_op: str) -> Callable:
    def convert(g, s: Site):
        axes = _reduce_axes(s)
        if axes == []:
            return g.add("Identity", s.ins[:1])
        return g.reduce(onnx_op, s.ins[0], axes, keepdims=int(s.attrs["keepdims"]))
    return convert


def _arg(onnx_op: str) -> Callable:
    def convert(g, s: Site):
        rank = _rank(s.in_types[0])
        axes = _reduce_axes(s)
        axes = list(range(rank)) if axes is None else sorted(axes)
        keep, last = int(s.attrs["keepdims"]), int(s.attrs["select_last_index"])
        if len(axes) == 1:
            out = g.add(onnx_op, s.ins, axis=axes[0], keepdims=keep, select_last_index=last)
        else:  # as Relay does: the reduced axes moved last and flattened into one
            kept = [i for i in range(rank) if i not in axes]
            moved = g.add("Transpose", s.ins, perm=kept + axes)
            flat = g.add("Reshape", [moved, g.ints([0] * len(kept) + [-1])])
            out = g.add(onnx_op, [flat], axis=len(kept), keepdims=0, select_last_index=last)
            if keep:
                out = g.add("Unsqueeze", [out, g.ints(axes)])
        return out if s.out_type.dtype == "int64" else g.add("Cast", [out], to=g.dtype(s.out_type.dtype))
    return convert


def _variance(g, s: Site):
    axes = _reduce_axes(s)
    d = g.add("Sub", s.ins)
    keep = int(s.attrs["keepdims"])
    out = (g.reduce("ReduceMean", g.add("Mul", [d, d]), axes, keepdims=keep) if axes != []
           else g.add("Mul", [d, d]))
    if s.attrs["unbiased"]:
        shape = s.in_types[0].shape
        picked = range(len(shape)) if axes is None else axes
        n = 1
        for i in picked:
            if not is_known(shape[i]):
                raise _fail(s, "unbiased variance needs static reduced dims")
            n *= int(shape[i])
        out = g.add("Mul", [out, _scalar(g, n / max(n - 1, 1), s.out_type.dtype)])
    return out


def _softmax(onnx_op: str) -> Callable:
    def convert(g, s: Site):
        return g.add(onnx_op, s.ins, axis=_axis(s.attrs["axis"], _rank(s.in_types[0])))
    return convert


def _not_equal(g, s: Site):
    return g.add("Not", [g.add("Equal", s.ins)])


CONVERTERS: dict[str, Callable] = {
    # elementwise and broadcasting arithmetic
    "add": _simple("Add"), "subtract": _simple("Sub"), "multiply": _simple("Mul"),
    "divide": _simple("Div"), "power": _simple("Pow"), "maximum": _simple("Max"),
    "minimum": _simple("Min"), "mod": _simple("Mod", fmod=1), "floor_divide": _floor_divide,
    "equal": _simple("Equal"), "not_equal": _not_equal, "less": _simple("Less"),
    "greater": _simple("Greater"), "less_equal": _simple("LessOrEqual"),
    "greater_equal": _simple("GreaterOrEqual"), "logical_and": _simple("And"),
    "logical_or": _simple("Or"), "logical_not": _simple("Not"), "where": _simple("Where"),
    "abs": _simple("Abs"), "ceil": _simple("Ceil"), "floor": _simple("Floor"), "cos": _simple("Cos"),
    "sin": _simple("Sin"), "exp": _simple("Exp"), "log": _simple("Log"), "erf": _simple("Erf"),
    "negative": _simple("Neg"), "sqrt": _simple("Sqrt"), "rsqrt": _chain("Sqrt", "Reciprocal"),
    "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"), "sign": _simple("Sign"),
    "round": _simple("Round"), "copy": _simple("Identity"), "clip": _clip, "cast": _cast,
    "nn.relu": _simple("Relu"), "nn.leaky_relu": lambda g, s: g.add("LeakyRelu", s.ins,
                                                                     alpha=float(s.attrs["alpha"])),
    "nn.prelu": _prelu, "nn.dropout": _dropout, "zeros_like": _like(0), "ones_like": _like(1),
    "zeros": _creation, "ones": _creation, "full": _creation, "shape_of": _shape_of,
    # convolution, pooling, normalisation
    "nn.conv2d": _conv, "nn.conv2d_transpose": _conv, "nn.max_pool2d": _pool, "nn.avg_pool2d": _pool,
    "nn.global_avg_pool2d": _global_pool("GlobalAveragePool"),
    "nn.global_max_pool2d": _global_pool("GlobalMaxPool"), "nn.adaptive_avg_pool2d": _adaptive_avg,
    "nn.upsampling": _upsampling, "nn.batch_norm": _batch_norm, "nn.layer_norm": _layer_norm,
    "nn.bias_add": _bias_add,
    # linear algebra
    "nn.dense": _dense, "nn.matmul": _matmul, "nn.batch_matmul": _matmul,
    "nn.batch_flatten": lambda g, s: g.add("Flatten", s.ins, axis=1),
    # shapes and data movement
    "reshape": _reshape, "transpose": _transpose, "concatenate": _concatenate, "stack": _stack,
    "split": _split, "squeeze": _squeeze, "expand_dims": _expand_dims, "broadcast_to": _broadcast_to,
    "strided_slice": _strided_slice, "take": _take, "repeat": _repeat,
    "slice_like": _slice_like, "nn.pad": _pad,
    # reductions and normalised exponentials
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "max": _reduce("ReduceMax"),
    "min": _reduce("ReduceMin"), "prod": _reduce("ReduceProd"), "argmax": _arg("ArgMax"),
    "argmin": _arg("ArgMin"), "variance": _variance, "nn.softmax": _softmax("Softmax"),
    "nn.log_softmax": _softmax("LogSoftmax"),
}


def _winograd_weight_transform(g, s: Site):
    from ..ops.winograd import WINOGRAD_GS

    _float_only(s)
    gm = WINOGRAD_GS[s.attrs["tile_size"]].astype(np.dtype(s.in_types[0].dtype))
    u = g.add("MatMul", [g.add("MatMul", [g.const(gm), s.ins[0]]), g.const(np.ascontiguousarray(gm.T))])
    return g.add("Transpose", [u], perm=[2, 3, 0, 1])  # (O, I, a, a) -> (a, a, O, I)


# nn.contrib_conv2d_winograd_without_weight_transform has no converter: ONNX has no Winograd
# convolution, and a Conv on a weight recovered from the transformed one is exact only for weights
# the transform made.
CONVERTERS["nn.contrib_conv2d_winograd_weight_transform"] = _winograd_weight_transform


def covered_ops() -> list[str]:
    """The Relay operators the exporter writes (fused ops are expanded into these first)."""
    return sorted(CONVERTERS)
