"""Pooling and resizing: ``nn.max_pool2d``, ``nn.avg_pool2d`` (padding, dilation, ceil_mode and
count_include_pad as TVM computes them), global and adaptive pools, ``nn.upsampling``."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from ..ty.dims import dim_add, dim_ceildiv, dim_floordiv, dim_mul, dim_round, dim_sub, is_known
from ._base import REQUIRED, PatternKind, ShapeError, defop, flops_per_input, fmt, numel, tensor_arg
from .conv import from_canonical, layout_perm, normalize_2d, pad4, pair, to_canonical

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _layouts(x: TensorType, a: dict) -> tuple[str, str]:
    layout = layout_perm(a["layout"], "NCHW", "layout")
    out_layout = layout_perm(a["out_layout"] or layout, "NCHW", "out_layout")
    if x.ndim != 4:
        raise ShapeError(f"data must have rank 4 ({layout}), got {fmt(x)}")
    return layout, out_layout


def _pool_size(d, k, s, dil, p0, p1, ceil_mode):
    span = dim_add(dim_mul(dil, dim_sub(k, 1)), 1)
    room = dim_sub(dim_add(d, p0 + p1), span)
    if ceil_mode:
        return dim_add(dim_ceildiv(room, s), 1)
    return dim_add(dim_floordiv(room, s), 1)


def _window(h, w, a: dict, what: str) -> tuple:
    """The window's size, strides, dilation, padding and the output size over data of height
    ``h`` and width ``w`` (``what`` names the data in errors), checked once for the type relation
    and the kernels: a window of positive size, stride and dilation that fits the padded data."""
    kh, kw = pair(a["pool_size"], "pool_size")
    sh, sw = pair(a["strides"], "strides")
    dh, dw = pair(a["dilation"], "dilation")
    for name, v in (("pool_size", (kh, kw)), ("strides", (sh, sw)), ("dilation", (dh, dw))):
        if min(v) < 1:
            raise ShapeError(f"{name} must be positive, got {list(v)}")
    pads = pad4(a["padding"])
    oh = _pool_size(h, kh, sh, dh, pads[0], pads[2], a["ceil_mode"])
    ow = _pool_size(w, kw, sw, dw, pads[1], pads[3], a["ceil_mode"])
    if any(is_known(d) and d <= 0 for d in (oh, ow)):
        raise ShapeError(f"the pool window {kh}x{kw} does not fit the padded input of {what}")
    return (kh, kw), (sh, sw), (dh, dw), pads, (oh, ow)


def _pool2d_rel(args, a):
    x = tensor_arg(args[0], 0)
    layout, out_layout = _layouts(x, a)
    dims = {k: x.shape[layout.index(k)] for k in "NCHW"}
    *_, (dims["H"], dims["W"]) = _window(dims["H"], dims["W"], a, fmt(x))
    return TensorType(tuple(dims[k] for k in out_layout), x.dtype)


def _geometry(x: np.ndarray, a: dict) -> dict:
    """Output size, pads (including ceil-mode overhang), window spans, strides and dilation of a
    pool over NCHW data ``x``."""
    h, w = x.shape[2:]
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow) = _window(
        h, w, a, f"{x.dtype}{tuple(x.shape)} data")
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    # ceil mode may need windows that run past the declared padding
    xb = max(pb, (oh - 1) * sh + span[0] - h - pt)
    xr = max(pr, (ow - 1) * sw + span[1] - w - pl)
    return {"out": (oh, ow), "pads": (pt, pl, pb, pr), "extra": (xb, xr), "span": span,
            "step": (sh, sw), "dil": (dh, dw)}


def _pad_to(x: np.ndarray, g: dict, fill) -> np.ndarray:
    (pt, pl, _, _), (xb, xr) = g["pads"], g["extra"]
    if not (pt or pl or xb or xr):
        return x  # np.pad copies even when it adds nothing (0.54 ms on VGG's 64x224x224)
    return np.pad(x, ((0, 0), (0, 0), (pt, xb), (pl, xr)), constant_values=fill)


def _window_reduce(padded: np.ndarray, g: dict, combine) -> np.ndarray:
    """``combine`` (``np.maximum`` or ``np.add``) over every window of already padded NCHW data,
    separably: over each window's rows first, on views whose rows stay whole (contiguous), then
    over its columns, one pass per window row and per window column. The maximum of kh*kw views
    strided in both axes took 4.2 ms on VGG's 2x2 pool of 64x224x224, this way 2.6-2.9 ms, and
    ResNet's, SqueezeNet's and Inception's max pools 1.7x less; a sum over a sliding view's window
    axes, which walk memory with large strides, took 12-14 ms on Inception's 3x3 stride-1 average
    pool of 192x35x35, this way 1.1 ms (measured alternated)."""
    (sh, sw), (dh, dw), (oh, ow) = g["step"], g["dil"], g["out"]
    span_h, span_w = g["span"]
    kh, kw = (span_h - 1) // dh + 1, (span_w - 1) // dw + 1
    by_rows = np.array(padded[:, :, 0:(oh - 1) * sh + 1:sh, :])
    for i in range(1, kh):
        combine(by_rows, padded[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, :], out=by_rows)
    out = np.array(by_rows[..., 0:(ow - 1) * sw + 1:sw])
    for j in range(1, kw):
        combine(out, by_rows[..., j * dw:j * dw + (ow - 1) * sw + 1:sw], out=out)
    return out


def _lowest(dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _max_pool_kernel(args, a):
    layout, out_layout = a["layout"], a["out_layout"] or a["layout"]
    x = to_canonical(args[0], layout, "NCHW")
    g = _geometry(x, a)
    out = _window_reduce(_pad_to(x, g, _lowest(x.dtype)), g, np.maximum)
    return from_canonical(out.astype(x.dtype, copy=False), "NCHW", out_layout)


def _avg_pool_kernel(args, a):
    layout, out_layout = a["layout"], a["out_layout"] or a["layout"]
    x = to_canonical(args[0], layout, "NCHW")
    h, w = x.shape[2:]
    g = _geometry(x, a)
    total = _window_reduce(_pad_to(x.astype("float64"), g, 0.0), g, np.add)
    # the divisor counts the window's cells inside the data (or inside the declared padding
    # with count_include_pad); cells added only to complete a ceil-mode window never count
    (pt, pl, pb, pr), (xb, xr) = g["pads"], g["extra"]
    mask = np.zeros((1, 1, pt + h + xb, pl + w + xr))
    if a["count_include_pad"]:
        mask[..., :pt + h + pb, :pl + w + pr] = 1.0
    else:
        mask[..., pt:pt + h, pl:pl + w] = 1.0
    count = np.maximum(_window_reduce(mask, g, np.add), 1.0)
    return from_canonical((total / count).astype(x.dtype), "NCHW", out_layout)


def _pool_flops(arg_types, out_type, a) -> float:
    kh, kw = pair(a["pool_size"], "pool_size")
    return numel(out_type) * kh * kw


_POOL = {"pool_size": REQUIRED, "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0),
         "layout": "NCHW", "out_layout": "", "ceil_mode": False}
_POOL_EX = (
    ([_t((1, 2, 8, 8))], {"pool_size": (2, 2), "strides": (2, 2)}),
    ([_t((1, 2, 7, 7))], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)}),
    ([_t((2, 3, 7, 6))], {"pool_size": (3, 2), "strides": (2, 2), "ceil_mode": True}),
    ([_t((1, 6, 6, 2))], {"pool_size": (2, 2), "layout": "NHWC", "padding": (0, 1, 1, 0)}),
    ([_t((1, 1, 9, 9))], {"pool_size": (2, 2), "dilation": (2, 2), "strides": (3, 3)}),
)


def _pool_normalize(v: dict) -> dict:
    return normalize_2d(v, ("pool_size", "strides", "dilation"))


defop("nn.max_pool2d", 1, _POOL, _pool2d_rel, _max_pool_kernel,
      PatternKind.OUT_ELEMWISE_FUSABLE, flops=_pool_flops, input_names=("data",),
      normalize=_pool_normalize, py_defaults={"pool_size": (1, 1), "padding": (0, 0)},
      examples=_POOL_EX)
defop("nn.avg_pool2d", 1, {**_POOL, "count_include_pad": False}, _pool2d_rel, _avg_pool_kernel,
      PatternKind.OUT_ELEMWISE_FUSABLE, flops=_pool_flops, input_names=("data",),
      normalize=_pool_normalize, py_defaults={"pool_size": (1, 1), "padding": (0, 0)},
      examples=_POOL_EX + (([_t((1, 2, 7, 7))], {"pool_size": (3, 3), "strides": (2, 2),
                                                 "padding": (1, 1), "count_include_pad": True,
                                                 "ceil_mode": True}),))


# -- global and adaptive pools -------------------------------------------------------------------
def _adaptive_rel(args, a):
    x = tensor_arg(args[0], 0)
    layout, out_layout = _layouts(x, a)
    dims = {k: x.shape[layout.index(k)] for k in "NCHW"}
    size = a.get("output_size", (1, 1))  # global pools have no output_size: they give 1x1
    if size is None or len(size) == 0:
        size = (dims["H"], dims["W"])
    elif len(size) == 1:
        size = (size[0], size[0])
    elif len(size) != 2:
        raise ShapeError(f"output_size must have 1 or 2 values, got {size!r}")
    dims["H"], dims["W"] = size
    return TensorType(tuple(dims[k] for k in out_layout), x.dtype)


def _adaptive_pool(x: np.ndarray, oh: int, ow: int, mode: str) -> np.ndarray:
    """Adaptive pooling of NCHW data: bin i covers [floor(i*H/oh), ceil((i+1)*H/oh))."""
    h, w = x.shape[2:]
    if oh == ow == 1 and h * w > 0:  # one bin: a plain reduction over each channel's plane
        flat = x.reshape(x.shape[:2] + (1, h * w))
        if mode == "avg":
            return np.mean(flat, axis=3, keepdims=True, dtype="float64").astype(x.dtype)
        return np.max(flat, axis=3, keepdims=True)
    hs = (np.arange(oh) * h) // oh
    he = -((-(np.arange(oh) + 1) * h) // oh)
    ws = (np.arange(ow) * w) // ow
    we = -((-(np.arange(ow) + 1) * w) // ow)
    if mode == "avg":
        # sums of every bin at once from a 2-D prefix sum
        c = np.zeros(x.shape[:2] + (h + 1, w + 1), dtype="float64")
        c[:, :, 1:, 1:] = x.astype("float64").cumsum(2).cumsum(3)
        s = (c[:, :, he][:, :, :, we] - c[:, :, hs][:, :, :, we]
             - c[:, :, he][:, :, :, ws] + c[:, :, hs][:, :, :, ws])
        area = (he - hs)[:, None] * (we - ws)[None, :]
        return (s / area).astype(x.dtype)
    # max: reduce rows then columns, each bin by a masked max (vectorised over bins)
    rows = np.where((np.arange(h)[None, :] >= hs[:, None]) & (np.arange(h)[None, :] < he[:, None]),
                    0, -np.inf)
    cols = np.where((np.arange(w)[None, :] >= ws[:, None]) & (np.arange(w)[None, :] < we[:, None]),
                    0, -np.inf)
    xf = x.astype("float64")
    r = np.max(xf[:, :, None, :, :] + rows[None, None, :, :, None], axis=3)
    out = np.max(r[:, :, :, None, :] + cols[None, None, None, :, :], axis=4)
    return out.astype(x.dtype)


def _adaptive_kernel(mode: str, global_pool: bool):
    def kernel(args, a):
        layout, out_layout = a["layout"], a["out_layout"] or a["layout"]
        x = to_canonical(args[0], layout, "NCHW")
        h, w = x.shape[2:]
        if global_pool:
            oh, ow = 1, 1
        else:
            size = a["output_size"] or (h, w)
            oh, ow = (size[0], size[0]) if len(size) == 1 else size
        return from_canonical(_adaptive_pool(x, oh, ow, mode), "NCHW", out_layout)
    return kernel


_GLOBAL_EX = (([_t((1, 4, 5, 5))], {}), ([_t((2, 3, 3, 4))], {"layout": "NHWC"}))
for _mode in ("avg", "max"):
    defop(f"nn.global_{_mode}_pool2d", 1, {"layout": "NCHW", "out_layout": ""}, _adaptive_rel,
          _adaptive_kernel(_mode, True), PatternKind.OUT_ELEMWISE_FUSABLE,
          flops=flops_per_input(1), input_names=("data",), examples=_GLOBAL_EX)

defop("nn.adaptive_avg_pool2d", 1, {"output_size": (), "layout": "NCHW", "out_layout": ""},
      _adaptive_rel, _adaptive_kernel("avg", False), PatternKind.OUT_ELEMWISE_FUSABLE,
      flops=flops_per_input(1), input_names=("data",),
      normalize=lambda v: {**v, "output_size": () if v.get("output_size") is None
                           else (v["output_size"],) if isinstance(v["output_size"], int)
                           else v["output_size"]},
      examples=(([_t((1, 3, 7, 7))], {"output_size": (3, 3)}),
                ([_t((1, 2, 5, 8))], {"output_size": (2, 3)}), ([_t((1, 2, 4, 4))], {})))


# -- nn.upsampling -------------------------------------------------------------------------------
def _upsampling_rel(args, a):
    x = tensor_arg(args[0], 0)
    layout, _ = _layouts(x, {"layout": a["layout"], "out_layout": ""})
    if a["method"] not in ("nearest_neighbor", "bilinear", "bicubic"):
        raise ShapeError(f"unknown method {a['method']!r}")
    shape = list(x.shape)
    for k, scale in (("H", a["scale_h"]), ("W", a["scale_w"])):
        i = layout.index(k)
        shape[i] = dim_round(shape[i], scale)
    return TensorType(tuple(shape), x.dtype)


def _float_scales(v: dict) -> dict:
    for k in ("scale_h", "scale_w"):
        if isinstance(v.get(k), int) and not isinstance(v[k], bool):
            v[k] = float(v[k])
    return v


def _source_index(out_n: int, in_n: int, align: bool) -> np.ndarray:
    o = np.arange(out_n, dtype="float64")
    if align:
        return o * ((in_n - 1) / (out_n - 1)) if out_n > 1 else np.zeros(out_n)
    return o * (in_n / out_n)


def _upsampling_kernel(args, a):
    layout = a["layout"]
    x = to_canonical(args[0], layout, "NCHW")
    h, w = x.shape[2:]
    oh, ow = dim_round(h, a["scale_h"]), dim_round(w, a["scale_w"])
    ys, xs = _source_index(oh, h, a["align_corners"]), _source_index(ow, w, a["align_corners"])
    if a["method"] == "nearest_neighbor":
        to_int = np.round if a["align_corners"] else np.floor
        yi = np.clip(to_int(ys).astype(int), 0, h - 1)
        xi = np.clip(to_int(xs).astype(int), 0, w - 1)
        out = x[:, :, yi][:, :, :, xi]
    elif a["method"] == "bilinear":
        y0 = np.clip(np.floor(ys).astype(int), 0, h - 1)
        x0 = np.clip(np.floor(xs).astype(int), 0, w - 1)
        y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
        fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
        xf = x.astype("float64")
        top = xf[:, :, y0][:, :, :, x0] * (1 - fx) + xf[:, :, y0][:, :, :, x1] * fx
        bot = xf[:, :, y1][:, :, :, x0] * (1 - fx) + xf[:, :, y1][:, :, :, x1] * fx
        out = (top * (1 - fy) + bot * fy).astype(x.dtype)
    else:
        raise NotImplementedError("nn.upsampling with method='bicubic' has no kernel yet")
    return from_canonical(np.ascontiguousarray(out), "NCHW", layout)


defop("nn.upsampling", 1, {"scale_h": REQUIRED, "scale_w": REQUIRED, "layout": "NCHW",
                           "method": "nearest_neighbor", "align_corners": False},
      _upsampling_rel, _upsampling_kernel, PatternKind.INJECTIVE, input_names=("data",),
      py_defaults={"scale_h": 1.0, "scale_w": 1.0}, normalize=_float_scales,
      examples=(([_t((1, 2, 3, 4))], {"scale_h": 2.0, "scale_w": 2.0}),
                ([_t((1, 2, 3, 3))], {"scale_h": 2.0, "scale_w": 3.0, "method": "bilinear"}),
                ([_t((1, 3, 4, 2))], {"scale_h": 1.5, "scale_w": 2.0, "layout": "NHWC",
                                      "method": "bilinear", "align_corners": True})))
