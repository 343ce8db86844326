"""ONNX Resize and Upsample as Relay: one axis at a time, each a fixed linear map of that axis.

Every ONNX resize mode (nearest, linear, cubic, with or without antialias, each coordinate
transformation) is separable, and along one axis it is ``y[o] = sum_i W[o, i] x[i] + b[o]`` with
``W`` known at import. Nearest neighbour is a gather (``take``); the others are ``nn.dense``
against ``W`` with the axis moved last. The coefficients follow the ONNX operator description.
"""

from __future__ import annotations

import math

import numpy as np

from .onnx_ops import converter, norm_axis

__all__ = ["axis_weights"]


def _source(mode: str, x: int, scale: float, n_in: int, n_out: int, roi) -> float:
    """The input coordinate of output index ``x`` (ONNX coordinate_transformation_mode)."""
    length = scale * n_in  # the output length before rounding
    if mode == "align_corners":
        return 0.0 if length == 1 else x * (n_in - 1) / (length - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if length == 1:
            return (end - start) * (n_in - 1) / 2 + start * (n_in - 1)
        return x * (end - start) * (n_in - 1) / (length - 1) + start * (n_in - 1)
    if mode == "pytorch_half_pixel":
        return -0.5 if length == 1 else (x + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (x + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {mode!r} is not supported")


def _nearest(ratio: float, scale: float, how: str) -> list[float]:
    if float(ratio).is_integer():
        return [0.0, 1.0]
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
          "ceil": True}[how]
    return [0.0, 1.0] if up else [1.0, 0.0]


def _linear(ratio: float, scale: float, antialias: bool) -> list[float]:
    if not antialias:
        return [1 - ratio, ratio]
    scale = min(scale, 1.0)
    start = int(math.floor(-1 / scale) + 1)
    taps = [min(max(1 - abs((i - ratio) * scale), 0.0), 1.0) for i in range(start, 2 - start)]
    return [t / sum(taps) for t in taps]


def _cubic(ratio: float, scale: float, a: float, antialias: bool) -> list[float]:
    def kernel(t: float) -> float:
        t = abs(t)
        if t <= 1:
            return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
        if t < 2:
            return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
        return 0.0

    if not antialias:
        return [kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)]
    scale = min(scale, 1.0)
    start = int(math.floor(-2 / scale) + 1)
    taps = [kernel(scale * (i - ratio)) for i in range(start, 2 - start)]
    return [t / sum(taps) for t in taps]


def _neighbours(x: float, n: int, limit: int) -> list[int]:
    """The ``n`` integers in [0, limit) nearest to ``x``, ties to the smaller, ascending."""
    base = math.floor(x)
    cands = [i for i in range(base - n - 1, base + n + 2) if 0 <= i < limit]
    return sorted(sorted(cands, key=lambda i: (abs(x - i), i))[:n])


def axis_weights(n_in: int, n_out: int, scale: float, a: dict, roi=(0.0, 1.0)):
    """(W, b) with ``y = W @ x + b`` for one axis resized from ``n_in`` to ``n_out``."""
    mode = a.get("mode", "nearest")
    coord = a.get("coordinate_transformation_mode", "half_pixel")
    antialias = bool(a.get("antialias", 0))
    if mode == "nearest":
        def coeffs(r, s):
            return _nearest(r, s, a.get("nearest_mode", "round_prefer_floor"))
    elif mode == "linear":
        def coeffs(r, s):
            return _linear(r, s, antialias)
    elif mode == "cubic":
        def coeffs(r, s):
            return _cubic(r, s, a.get("cubic_coeff_a", -0.75), antialias)
    else:
        raise ValueError(f"mode {mode!r} is not supported")
    w = np.zeros((n_out, n_in))
    b = np.zeros(n_out)
    for o in range(n_out):
        x = _source(coord, o, scale, n_in, n_out, roi)
        if coord == "tf_crop_and_resize" and (x < 0 or x > n_in - 1):
            b[o] = a.get("extrapolation_value", 0.0)
            continue
        ratio = 1.0 if float(x).is_integer() else x - math.floor(x)
        c = coeffs(ratio, scale)
        pad = math.ceil(len(c) / 2)
        idx = [i - pad for i in _neighbours(x + pad, len(c), n_in + 2 * pad)]
        if a.get("exclude_outside", 0):
            c = [ci if 0 <= i < n_in else 0.0 for ci, i in zip(c, idx, strict=True)]
            total = sum(c)
            c = [ci / total for ci in c]
        for ci, i in zip(c, idx, strict=True):
            w[o, min(max(i, 0), n_in - 1)] += ci  # edge padding: outside reads the border
    return w, b


def _resize(imp, x, a, scales, sizes, roi):
    shape = imp.shape(x)
    rank = len(shape)
    axes = [norm_axis(i, rank) for i in a.get("axes", range(rank))]
    if any(not isinstance(shape[i], int) for i in axes):
        raise imp.error("resizing a symbolic dimension is not supported")
    if sizes is not None:
        out = dict(zip(axes, (int(s) for s in sizes), strict=True))
        factors = {i: out[i] / shape[i] for i in axes}
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(factors.values())
            factors = dict.fromkeys(axes, s)
            out = {i: int(s * shape[i] + 0.5) for i in axes}
    else:
        factors = dict(zip(axes, (float(s) for s in scales), strict=True))
        out = {i: int(factors[i] * shape[i]) for i in axes}
    rois = {}
    if roi is not None and len(roi):
        for k, i in enumerate(axes):
            rois[i] = (float(roi[k]), float(roi[k + len(axes)]))
    float_x = imp.dtype_of(x).startswith("float")
    for i in axes:
        r = rois.get(i, (0.0, 1.0))
        if math.isclose(factors[i], 1.0) and out[i] == shape[i] and r == (0.0, 1.0):
            continue
        try:
            w, b = axis_weights(shape[i], out[i], factors[i], a, r)
        except ValueError as exc:
            raise imp.error(str(exc)) from None
        x = _apply(imp, x, i, w, b, float_x)
    return x


def _apply(imp, x, axis, w, b, float_x):
    onehot = not b.any() and np.all((w == 0) | (w == 1)) and np.all(w.sum(axis=1) == 1)
    if onehot:
        return imp.call("take", x, imp.const(w.argmax(axis=1).astype(np.int64)), axis=axis)
    if not float_x:
        raise imp.error("interpolating an integer tensor is not supported (only nearest)")
    rank = imp.rank(x)
    perm = [i for i in range(rank) if i != axis] + [axis]
    moved = x if axis == rank - 1 else imp.call("transpose", x, axes=tuple(perm))
    dtype = imp.dtype_of(x)
    y = imp.call("nn.dense", moved, imp.const(w.astype(dtype)), units=w.shape[0])
    if b.any():
        y = imp.call("add", y, imp.const(b.astype(dtype)))
    if axis == rank - 1:
        return y
    back = [perm.index(i) for i in range(rank)]
    return imp.call("transpose", y, axes=tuple(back))


def _floats(imp, expr, what):
    if expr is None:
        return None
    v = np.asarray(imp.static(expr, what)).reshape(-1)
    return v if v.size else None


@converter("Resize", since=10)
def _resize_node(imp, inputs, a):
    x = inputs[0]
    if imp.opset < 11:  # Resize-10 has Upsample's coordinates
        a = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor", **a}
        return _resize(imp, x, a, _floats(imp, inputs[1], "scales"), None, None)
    roi = _floats(imp, inputs[1] if len(inputs) > 1 else None, "roi")
    scales = _floats(imp, inputs[2] if len(inputs) > 2 else None, "scales")
    sizes = _floats(imp, inputs[3] if len(inputs) > 3 else None, "sizes")
    if scales is None and sizes is None:
        raise imp.error("one of scales and sizes must be given")
    return _resize(imp, x, a, scales, sizes, roi)


@converter("Upsample", since=9)
def _upsample(imp, inputs, a):
    a = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor", **a}
    return _resize(imp, inputs[0], a, _floats(imp, inputs[1], "scales"), None, None)
