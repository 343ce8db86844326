"""``nn.conv2d`` and ``nn.conv2d_transpose``: relations with TVM's attributes and layouts,
kernels through sliding windows and einsum (grouped and depthwise included)."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from ..ir.types import TensorType
from ..ty.dims import dim_add, dim_floordiv, dim_mul, dim_sub, dims_equal, is_known
from ._base import PatternKind, ShapeError, defop, fmt, numel, tensor_arg
from .inplace import relu_in_place

__all__ = ["pad4", "pair", "layout_perm", "conv2d_nchw", "to_canonical", "from_canonical"]

F32 = "float32"


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


# -- attribute helpers (also used by pooling) ---------------------------------------------------
def pair(v, what: str) -> tuple[int, int]:
    """A 2-value attribute (an int means both)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, tuple) and len(v) == 1:
        return (v[0], v[0])
    if isinstance(v, tuple) and len(v) == 2:
        return v
    raise ShapeError(f"{what} must have 1 or 2 values, got {v!r}")


def pad4(v) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from 1, 2 or 4 values, as TVM reads it."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v, v, v)
    if isinstance(v, tuple):
        if len(v) == 1:
            return (v[0],) * 4
        if len(v) == 2:
            return (v[0], v[1], v[0], v[1])
        if len(v) == 4:
            return v
    raise ShapeError(f"padding must have 1, 2 or 4 values, got {v!r}")


def normalize_2d(v: dict, keys=("strides", "dilation", "kernel_size")) -> dict:
    """TVM's Python API: single ints become pairs and padding becomes 4 values."""
    for k in keys:
        x = v.get(k)
        if isinstance(x, int) and not isinstance(x, bool):
            v[k] = (x, x)
    if "padding" in v:
        try:
            v["padding"] = pad4(v["padding"])
        except ShapeError:
            pass  # left for the type relation to report with the argument types
    return v


def layout_perm(layout: str, canonical: str, what: str) -> str:
    """Check that a layout is a permutation of the canonical letters (no packed layouts)."""
    if sorted(layout) != sorted(canonical):
        raise ShapeError(f"{what} {layout!r} is not supported (use a permutation of {canonical})")
    return layout


def to_canonical(arr: np.ndarray, layout: str, canonical: str) -> np.ndarray:
    """An array in ``layout`` transposed to the ``canonical`` layout (NCHW, OIHW, ...)."""
    return arr if layout == canonical else np.transpose(arr, [layout.index(c) for c in canonical])


def from_canonical(arr: np.ndarray, canonical: str, layout: str) -> np.ndarray:
    """An array in the ``canonical`` layout transposed to ``layout``."""
    return arr if layout == canonical else np.transpose(arr, [canonical.index(c) for c in layout])


# -- nn.conv2d -----------------------------------------------------------------------------------
def _conv_out(size, pad_lo, pad_hi, k, stride, dilation):
    span = dim_add(dim_mul(dilation, dim_sub(k, 1)), 1)
    return dim_add(dim_floordiv(dim_sub(dim_add(dim_add(size, pad_lo), pad_hi), span), stride), 1)


def _check_dim(got, want, what: str) -> None:
    if dims_equal(got, want) is False:
        raise ShapeError(f"{what}: expected {want}, got {got}")


def _conv2d_rel(args, a):
    x, w = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    dl = layout_perm(a["data_layout"], "NCHW", "data_layout")
    kl = layout_perm(a["kernel_layout"], "OIHW", "kernel_layout")
    ol = layout_perm(a["out_layout"] or dl, "NCHW", "out_layout")
    if x.ndim != 4:
        raise ShapeError(f"data must have rank 4 ({dl}), got {fmt(x)}")
    if w.ndim != 4:
        raise ShapeError(f"weight must have rank 4 ({kl}), got {fmt(w)}")
    n, c, h, wd = (x.shape[dl.index(k)] for k in "NCHW")
    ws = {k: w.shape[kl.index(k)] for k in "OIHW"}
    groups = a["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"groups must be a positive int, got {groups!r}")
    channels, ksize = a["channels"], a["kernel_size"]
    if ksize is not None:
        kh, kw = pair(ksize, "kernel_size")
        _check_dim(ws["H"], kh, "weight height (kernel_size)")
        _check_dim(ws["W"], kw, "weight width (kernel_size)")
    else:
        kh, kw = ws["H"], ws["W"]
    if channels is not None:
        _check_dim(ws["O"], channels, "weight output channels (channels)")
    out_c = channels if channels is not None else ws["O"]
    if dims_equal(dim_mul(ws["I"], groups), c) is False:
        raise ShapeError(f"data has {c} input channels but the weight takes {ws['I']} per group "
                         f"x {groups} groups")
    if is_known(out_c) and out_c % groups:
        raise ShapeError(f"output channels {out_c} are not divisible by groups={groups}")
    pt, pl, pb, pr = pad4(a["padding"])
    sh, sw = pair(a["strides"], "strides")
    dh, dw = pair(a["dilation"], "dilation")
    oh = _conv_out(h, pt, pb, kh, sh, dh)
    ow = _conv_out(wd, pl, pr, kw, sw, dw)
    if (is_known(oh) and oh <= 0) or (is_known(ow) and ow <= 0):
        raise ShapeError(f"the kernel {kh}x{kw} does not fit the padded input {h}x{wd}")
    out = {"N": n, "C": out_c, "H": oh, "W": ow}
    return TensorType(tuple(out[k] for k in ol), a["out_dtype"] or x.dtype)


def _conv2d_infer(args, a):
    x = args[0]
    if not isinstance(x, TensorType) or a["channels"] is None or a["kernel_size"] is None:
        return None
    dl, kl = a["data_layout"], a["kernel_layout"]
    c = x.shape[dl.index("C")]
    kh, kw = pair(a["kernel_size"], "kernel_size")
    ws = {"O": a["channels"], "I": dim_floordiv(c, a["groups"]), "H": kh, "W": kw}
    return [None, TensorType(tuple(ws[k] for k in kl), x.dtype)]


def crop_negative_padding(x, padding):
    """NCHW ``x`` cropped where (top, left, bottom, right) ``padding`` is negative, and the
    padding that is left (none negative)."""
    pt, pl, pb, pr = padding
    x = x[:, :, max(-pt, 0):x.shape[2] - max(-pb, 0), max(-pl, 0):x.shape[3] - max(-pr, 0)]
    return x, tuple(max(p, 0) for p in padding)


def conv2d_nchw(x, w, strides, padding, dilation, groups, out_dtype=None):
    """Convolution of NCHW data with an OIHW weight; padding may be negative (cropping)."""
    out_dtype = out_dtype or x.dtype
    if x.dtype == np.float16 or w.dtype == np.float16:  # accumulate half precision in float32
        x, w = x.astype(np.float32), w.astype(np.float32)
    if min(padding) >= 0:
        if groups == 1:
            return _conv2d_gemm(x, w, strides, padding, dilation).astype(out_dtype, copy=False)
        if w.shape[1] == 1 and w.shape[0] == x.shape[1] == groups:
            return _conv2d_depthwise(x, w, strides, padding, dilation).astype(out_dtype, copy=False)
    x, (pt, pl, pb, pr) = crop_negative_padding(x, padding)
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    span_h, span_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    win = sliding_window_view(x, (span_h, span_w), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    n, c, oh, ow = win.shape[:4]
    if groups == 1:
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # (n, oh, ow, o)
        out = np.moveaxis(out, 3, 1)
    else:
        win = win.reshape(n, groups, c // groups, oh, ow, kh, kw)
        wg = w.reshape(groups, o // groups, cg, kh, kw)
        out = np.einsum("ngchwij,gocij->ngohw", win, wg, optimize=True).reshape(n, o, oh, ow)
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


def _out_range(size: int, out: int, k: int, stride: int, dilation: int, pad: int) -> tuple:
    """For kernel offset ``k``: the output positions whose input position ``o*stride + k*dilation
    - pad`` lies inside ``[0, size)``, as (first, end, first input position)."""
    shift = k * dilation - pad
    first = max(0, -(shift // stride))  # ceil(-shift / stride)
    end = min(out, (size - 1 - shift) // stride + 1)
    return first, max(end, first), first * stride + shift


def _shifted_copies(x, kh, kw, oh, ow, strides, padding, dilation, into):
    """Fill ``into[..., i, j, :, :]`` with the input seen by kernel offset (i, j): each output
    position's input pixel, zero where it falls in the padding (no padded copy of the input)."""
    (sh, sw), (dh, dw) = strides, dilation
    pt, pl = padding[0], padding[1]
    h, wd = x.shape[2], x.shape[3]
    for i in range(kh):
        r0, r1, src_r = _out_range(h, oh, i, sh, dh, pt)
        for j in range(kw):
            c0, c1, src_c = _out_range(wd, ow, j, sw, dw, pl)
            if r1 > r0 and c1 > c0:
                into[:, :, i, j, r0:r1, c0:c1] = x[:, :, src_r:src_r + (r1 - r0 - 1) * sh + 1:sh,
                                                   src_c:src_c + (c1 - c0 - 1) * sw + 1:sw]


def _out_hw(x_shape, w_shape, strides, padding, dilation) -> tuple[int, int]:
    """Output height and width of an NCHW convolution with an OIHW weight."""
    (h, wd), (kh, kw) = x_shape[2:], w_shape[2:]
    pt, pl, pb, pr = padding
    (sh, sw), (dh, dw) = strides, dilation
    return (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1


def _conv2d_gemm(x, w, strides, padding, dilation):
    """groups=1: one matrix product that writes NCHW directly. A 1x1 kernel needs no copy of the
    input at all (stride 1, no padding); otherwise the input is gathered once into columns."""
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    sh, sw = strides
    oh, ow = _out_hw(x.shape, w.shape, strides, padding, dilation)
    if kh == kw == 1 and not any(padding):
        if (sh, sw) != (1, 1):
            x = x[:, :, ::sh, ::sw][:, :, :oh, :ow]
        cols = np.ascontiguousarray(x).reshape(n, c, oh * ow)
        return np.matmul(w.reshape(o, c), cols).reshape(n, o, oh, ow)
    padded = any(padding)
    if (sh, sw) == (kh, kw) and not padded and tuple(dilation) == (1, 1):
        # windows that tile the image (a vision transformer's patch embedding): the columns are
        # one transposing copy, where a copy per kernel offset made ViT's 16x16 patches 256 copies
        # (1.33 ms against 0.78 for 3 -> 192 channels on 224x224)
        tiles = x[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
        cols = np.ascontiguousarray(tiles.transpose(0, 1, 3, 5, 2, 4))
    else:
        cols = (np.zeros if padded else np.empty)((n, c, kh, kw, oh, ow), dtype=x.dtype)
        _shifted_copies(x, kh, kw, oh, ow, strides, padding, dilation, cols)
    out = np.matmul(w.reshape(o, c * kh * kw),
                    cols.reshape(n, c * kh * kw, oh * ow))
    return out.reshape(n, o, oh, ow)


# A per-channel block of the output stays in cache across the kernel's taps and its epilogue
_DEPTHWISE_BLOCK = 131072


def _phase_windows(x_shape, kh, kw, oh, strides, padding, dilation):
    """The strided kernel's phases: tap (i, j) reads phase (a, b) = ((i*dh) % sh, (j*dw) % sw) of
    the padded input, a plane of ``hq x wq`` values flattened per (batch, channel) row, at a fixed
    offset, so that every tap is one long contiguous multiply. Returns (width wq, plane length,
    {phase: (r0, r1, src row, c0, c1, src column)}: where the unpadded input lands in the plane)."""
    _, _, h, wd = x_shape
    pt, pl, pb, pr = padding
    (sh, sw), (dh, dw) = strides, dilation
    hq, wq = -(-(h + pt + pb) // sh), -(-(wd + pl + pr) // sw)
    # the last output row reads up to (kw - 1) * dw // sw values past its phase's plane
    length = max(hq, oh + (kh - 1) * dh // sh) * wq + (kw - 1) * dw // sw + 1
    windows = {}
    for i in range(kh):
        for j in range(kw):
            a, b = (i * dh) % sh, (j * dw) % sw
            if (a, b) not in windows:
                windows[a, b] = _out_range(h, hq, a, sh, 1, pt) + _out_range(wd, wq, b, sw, 1, pl)
    return wq, length, windows


def _conv2d_depthwise(x, w, strides, padding, dilation, epilogue=None):
    """One filter per channel, padding >= 0: per block of channels, the input's phase planes (see
    ``_phase_windows``), a sum of kh*kw scaled shifts of them (no window copy), then
    ``epilogue(block, c0, c1)`` in place on the block (rows: channels c0..c1, padded-width rows),
    all while the block is in cache."""
    n, c, h, wd = x.shape
    _, _, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh, ow = _out_hw(x.shape, w.shape, strides, padding, dilation)
    dtype = np.result_type(x, w)
    out = np.empty((n, c, oh, ow), dtype=dtype)
    if out.size == 0:
        return out
    wq, length, windows = _phase_windows(x.shape, kh, kw, oh, strides, padding, dilation)
    hq = (length - 1) // wq
    span = oh * wq
    block = max(1, min(c, _DEPTHWISE_BLOCK // span))
    planes = {ab: np.zeros((block, length), dtype=dtype) for ab in windows}  # the padding stays zero
    taps = [(planes[(i * dh) % sh, (j * dw) % sw], (i * dh) // sh * wq + (j * dw) // sw,
             np.ascontiguousarray(w[:, 0, i, j]).astype(dtype, copy=False).reshape(c, 1))
            for i in range(kh) for j in range(kw)]
    rows = x.reshape(n * c, h, wd)
    acc = np.empty((block, span), dtype=dtype)
    tmp = np.empty((block, span), dtype=dtype)
    for b in range(n):
        for c0 in range(0, c, block):
            c1 = min(c, c0 + block)
            k, src = c1 - c0, rows[b * c + c0:b * c + c1]
            for ab, (r0, r1, sr, q0, q1, sq) in windows.items():
                if r1 > r0 and q1 > q0:
                    dst = planes[ab][:k, :hq * wq].reshape(k, hq, wq)[:, r0:r1, q0:q1]
                    dst[...] = src[:, sr:sr + (r1 - r0 - 1) * sh + 1:sh, sq:sq + (q1 - q0 - 1) * sw + 1:sw]
            y, t = acc[:k], tmp[:k]
            for m, (plane, off, weight) in enumerate(taps):
                if m == 0:
                    np.multiply(plane[:k, off:off + span], weight[c0:c1], out=y)
                else:
                    np.multiply(plane[:k, off:off + span], weight[c0:c1], out=t)
                    y += t
            if epilogue is not None:
                epilogue(y, c0, c1)
            out[b, c0:c1] = y.reshape(k, oh, wq)[:, :, :ow]
    return out


def _depthwise_padding(x, w, a, data_layout: str, kernel_layout: str):
    """The padding of a depthwise nn.conv2d (resolved attrs ``a``) in these layouts, with padding
    >= 0 and a result that keeps the input's float dtype; None for any other call."""
    if not (a["data_layout"] == data_layout and a["kernel_layout"] == kernel_layout
            and a["out_layout"] in ("", data_layout) and x.ndim == 4 and w.ndim == 4):
        return None
    c = x.shape[data_layout.index("C")]
    if not (w.shape[kernel_layout.index("I")] == 1 and a["groups"] == c == w.shape[kernel_layout.index("O")]
            and x.dtype == w.dtype and x.dtype.kind == "f" and x.dtype != np.float16
            and (a["out_dtype"] or x.dtype) == x.dtype):
        return None
    padding = pad4(a["padding"])
    return None if min(padding) < 0 else padding


def depthwise_with_epilogue(x, w, a, bias=None, relu=False, floor=None):
    """nn.conv2d with resolved attrs ``a``, then a channel ``bias`` and a relu (or the maximum with
    a per-channel ``floor`` of shape (C, 1, 1)), each applied to a block of channels while it is in
    cache; None when the call is not a depthwise NCHW/OIHW convolution with padding >= 0 whose
    result keeps the input's float dtype."""
    x, w = np.asarray(x), np.asarray(w)
    padding = _depthwise_padding(x, w, a, "NCHW", "OIHW")
    if padding is None:
        return None
    c = x.shape[1]
    if bias is not None:
        if np.asarray(bias).dtype != x.dtype or np.shape(bias) != (c,):
            return None
        bias = np.asarray(bias).reshape(c, 1)
    if floor is not None:
        if np.asarray(floor).dtype != x.dtype or np.shape(floor) != (c, 1, 1):
            return None
        floor = np.asarray(floor).reshape(c, 1)

    def epilogue(y, c0, c1):
        if bias is not None:
            y += bias[c0:c1]
        if relu:  # not np.maximum(y, 0): its scalar loop took 0.3 of 1.9 ms at 32x112x112
            relu_in_place(y)
        if floor is not None:
            np.maximum(y, floor[c0:c1], out=y)

    return _conv2d_depthwise(x, w, pair(a["strides"], "strides"), padding, pair(a["dilation"], "dilation"),
                             epilogue if bias is not None or relu or floor is not None else None)


def _conv2d_nhwc(x, w, a):
    """NHWC data with an HWIO weight, computed channels-last without changing layout: a 1x1
    convolution (stride 1, no padding) as one (pixels x C) by (C x O) product, a depthwise one
    (``_conv2d_depthwise_nhwc``); None for any other convolution or dtype."""
    if not (x.ndim == 4 and w.ndim == 4 and x.dtype == w.dtype and x.dtype.kind == "f"
            and x.dtype != np.float16 and (a["out_dtype"] or x.dtype) == x.dtype):
        return None
    n, h, wd, c = x.shape
    kh, kw, ci, o = w.shape
    padding = pad4(a["padding"])
    strides, dilation = pair(a["strides"], "strides"), pair(a["dilation"], "dilation")
    if a["groups"] == 1 and kh == kw == 1 and not any(padding) and strides == (1, 1):
        return np.matmul(x.reshape(n * h * wd, c), w.reshape(ci, o)).reshape(n, h, wd, o)
    if ci == 1 and a["groups"] == c == o and min(padding) >= 0:
        return _conv2d_depthwise_nhwc(x, w, strides, padding, dilation)
    return None


# Rows of a channels-last block kept in cache across the kernel's taps
_NHWC_BLOCK = 65536
# From this many channels a channels-last depthwise convolution sums its taps in one pass over
# windows (``_depthwise_nhwc_windows``). Measured against the tap-by-tap kernel (one thread,
# benchmarks/bench_depthwise.py): 1.1-2.2x faster on 96 to 1024 channels (MobileNet's channels-last
# layers among them), 0.7x on 32 channels and level on 64, where its channel rows are too short.
_WINDOWS_MIN_CHANNELS = 96
# Output values of a band of rows the windowed kernel sums, then hands to the epilogue
_WINDOWS_BAND = 1 << 18


def _conv2d_depthwise_nhwc(x, w, strides, padding, dilation, epilogue=None):
    """One filter per channel on NHWC data (HWIO weight, I = 1), padding >= 0, each block of
    output rows ending with ``epilogue(rows x C block)`` in place while it is in cache. With
    ``_WINDOWS_MIN_CHANNELS`` channels or more, every output value is one pass over its window
    (``_depthwise_nhwc_windows``); with fewer, the taps one after another (``_depthwise_nhwc_taps``)."""
    windows = x.shape[3] >= _WINDOWS_MIN_CHANNELS
    kernel = _depthwise_nhwc_windows if windows else _depthwise_nhwc_taps
    return kernel(x, w, strides, padding, dilation, epilogue)


def _depthwise_nhwc_windows(x, w, strides, padding, dilation, epilogue=None):
    """Channels-last depthwise convolution summing each output's kh*kw window in one pass: the
    input is copied once into a zero-padded image, viewed (no copy) as (rows, columns, kh, kw, C)
    windows, and einsum sums each window against the (kh, kw, C) weight in bands of output rows;
    long contiguous channel rows make its inner loop fast, where the tap-by-tap kernel reads and
    writes the whole block once per tap."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    (sh, sw), (dh, dw) = strides, dilation
    pt, pl, pb, pr = padding
    oh, ow = _out_hw((n, c, h, wd), (c, 1, kh, kw), strides, padding, dilation)
    out = np.empty((n, oh, ow, c), dtype=x.dtype)
    if out.size == 0:
        return out
    image = np.zeros((h + pt + pb, wd + pl + pr, c), dtype=x.dtype)
    taps = np.ascontiguousarray(w[:, :, 0, :])
    s0, s1, s2 = image.strides
    steps = (sh * s0, sw * s1, dh * s0, dw * s1, s2)  # output row and column, tap row and column, channel
    rows = max(1, _WINDOWS_BAND // (ow * c))
    for b in range(n):
        image[pt:pt + h, pl:pl + wd] = x[b]
        for y0 in range(0, oh, rows):
            y1 = min(oh, y0 + rows)
            view = as_strided(image[y0 * sh:], (y1 - y0, ow, kh, kw, c), steps, writeable=False)
            band = out[b, y0:y1]
            np.einsum("yxijc,ijc->yxc", view, taps, out=band, optimize=False)
            if epilogue is not None:
                epilogue(band.reshape(-1, c))
    return out


def _depthwise_nhwc_taps(x, w, strides, padding, dilation, epilogue=None):
    """Channels-last depthwise convolution tap by tap: the phase planes of ``_phase_windows``
    channels-last, so that every tap is one contiguous (pixels x C) multiply by the tap's channel
    weights (long rows however small the image), in blocks of rows in cache."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    (sh, sw), (dh, dw) = strides, dilation
    oh, ow = _out_hw((n, c, h, wd), (c, 1, kh, kw), strides, padding, dilation)
    out = np.empty((n, oh, ow, c), dtype=x.dtype)
    if out.size == 0:
        return out
    wq, length, windows = _phase_windows((n, c, h, wd), kh, kw, oh, strides, padding, dilation)
    hq = (length - 1) // wq
    span = oh * wq
    planes = {ab: np.zeros((length, c), dtype=x.dtype) for ab in windows}  # the padding stays zero
    taps = [(planes[(i * dh) % sh, (j * dw) % sw], (i * dh) // sh * wq + (j * dw) // sw,
             np.ascontiguousarray(w[i, j, 0])) for i in range(kh) for j in range(kw)]
    rows = max(1, _NHWC_BLOCK // c)
    acc = np.empty((span, c), dtype=x.dtype)
    tmp = np.empty((min(rows, span), c), dtype=x.dtype)
    for b in range(n):
        for ab, (r0, r1, sr, q0, q1, sq) in windows.items():
            if r1 > r0 and q1 > q0:
                planes[ab][:hq * wq].reshape(hq, wq, c)[r0:r1, q0:q1] = \
                    x[b, sr:sr + (r1 - r0 - 1) * sh + 1:sh, sq:sq + (q1 - q0 - 1) * sw + 1:sw]
        for s0 in range(0, span, rows):
            s1 = min(span, s0 + rows)
            y, t = acc[s0:s1], tmp[:s1 - s0]
            for m, (plane, off, weight) in enumerate(taps):
                if m == 0:
                    np.multiply(plane[off + s0:off + s1], weight, out=y)
                else:
                    np.multiply(plane[off + s0:off + s1], weight, out=t)
                    y += t
            if epilogue is not None:
                epilogue(y)
        out[b] = acc.reshape(oh, wq, c)[:, :ow]
    return out


def depthwise_nhwc_with_epilogue(x, w, a, bias=None, relu=False, floor=None):
    """nn.conv2d with resolved attrs ``a`` on NHWC data and an HWIO weight, then a channel
    ``bias`` and a relu (or the maximum with a per-channel ``floor`` of shape (C,)), each applied
    to a block of rows while it is in cache; None when the call is not a depthwise convolution
    with padding >= 0 whose result keeps the input's float dtype."""
    x, w = np.asarray(x), np.asarray(w)
    padding = _depthwise_padding(x, w, a, "NHWC", "HWIO")
    if padding is None:
        return None
    c = x.shape[3]
    for v in (bias, floor):
        if v is not None and (np.asarray(v).dtype != x.dtype or np.shape(v) != (c,)):
            return None

    def epilogue(y):
        if bias is not None:
            y += bias
        if relu:
            relu_in_place(y)
        if floor is not None:
            np.maximum(y, floor, out=y)

    return _conv2d_depthwise_nhwc(x, w, pair(a["strides"], "strides"), padding,
                                  pair(a["dilation"], "dilation"),
                                  epilogue if bias is not None or relu or floor is not None else None)


def _conv2d_kernel(args, a):
    x, w = args
    dl, kl = a["data_layout"], a["kernel_layout"]
    ol = a["out_layout"] or dl
    if dl == "NHWC" and kl == "HWIO" and ol == "NHWC" and min(pad4(a["padding"])) >= 0:
        y = _conv2d_nhwc(np.asarray(x), np.asarray(w), a)
        if y is not None:
            return y
    out = conv2d_nchw(to_canonical(x, dl, "NCHW"), to_canonical(w, kl, "OIHW"),
                      pair(a["strides"], "strides"), pad4(a["padding"]),
                      pair(a["dilation"], "dilation"), a["groups"], a["out_dtype"] or x.dtype)
    return from_canonical(out, "NCHW", ol)


def _conv2d_flops(arg_types, out_type, a) -> float:
    w = arg_types[1]
    per_out = numel(w) / w.shape[a["kernel_layout"].index("O")] if w.ndim == 4 else 0
    return 2.0 * numel(out_type) * per_out


_CONV_ATTRS = {
    "strides": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1, "channels": None,
    "kernel_size": None, "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "",
    "out_dtype": "",
}
defop("nn.conv2d", 2, _CONV_ATTRS, _conv2d_rel, _conv2d_kernel, PatternKind.OUT_ELEMWISE_FUSABLE,
      flops=_conv2d_flops, input_names=("data", "weight"), normalize=normalize_2d,
      py_defaults={"padding": (0, 0)},
      infer_inputs=_conv2d_infer,
      examples=(
          ([_t((1, 3, 8, 8)), _t((4, 3, 3, 3))], {}),
          ([_t((2, 3, 9, 7)), _t((4, 3, 3, 3))], {"padding": (1, 1), "strides": (2, 2)}),
          ([_t((1, 2, 8, 8)), _t((3, 2, 3, 2))], {"padding": (1, 0, 2, 1), "dilation": (2, 1)}),
          ([_t((1, 4, 6, 6)), _t((6, 2, 3, 3))], {"groups": 2, "channels": 6,
                                                  "kernel_size": (3, 3)}),
          ([_t((1, 4, 6, 6)), _t((4, 1, 3, 3))], {"groups": 4, "padding": (1, 1)}),
          ([_t((1, 7, 7, 3)), _t((3, 3, 3, 5))], {"data_layout": "NHWC", "kernel_layout": "HWIO",
                                                  "padding": (1, 1)}),
          ([_t((1, 6, 5, 4), "int32"), _t((2, 6, 1, 1), "int32")], {}),
      ))


# -- nn.conv2d_transpose -------------------------------------------------------------------------
def _conv2d_transpose_rel(args, a):
    x, w = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    dl = layout_perm(a["data_layout"], "NCHW", "data_layout")
    kl = layout_perm(a["kernel_layout"], "IOHW", "kernel_layout")
    ol = layout_perm(a["out_layout"] or dl, "NCHW", "out_layout")
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError(f"data and weight must have rank 4, got {fmt(x)} and {fmt(w)}")
    n, c, h, wd = (x.shape[dl.index(k)] for k in "NCHW")
    ws = {k: w.shape[kl.index(k)] for k in "IOHW"}
    groups = a["groups"]
    if a["kernel_size"] is not None:
        kh, kw = pair(a["kernel_size"], "kernel_size")
        _check_dim(ws["H"], kh, "weight height (kernel_size)")
        _check_dim(ws["W"], kw, "weight width (kernel_size)")
    else:
        kh, kw = ws["H"], ws["W"]
    out_c = a["channels"] if a["channels"] is not None else dim_mul(ws["O"], groups)
    if a["channels"] is not None:
        _check_dim(dim_mul(ws["O"], groups), a["channels"], "weight output channels x groups")
    _check_dim(ws["I"], c, "weight input channels (the data's channels)")
    pt, pl, pb, pr = pad4(a["padding"])
    sh, sw = pair(a["strides"], "strides")
    dh, dw = pair(a["dilation"], "dilation")
    oph, opw = pair(a["output_padding"], "output_padding")

    def size(d, k, s, dil, p0, p1, op):
        span = dim_add(dim_mul(dil, dim_sub(k, 1)), 1)
        return dim_add(dim_sub(dim_add(dim_mul(dim_sub(d, 1), s), span), p0 + p1), op)

    out = {"N": n, "C": out_c, "H": size(h, kh, sh, dh, pt, pb, oph),
           "W": size(wd, kw, sw, dw, pl, pr, opw)}
    return TensorType(tuple(out[k] for k in ol), a["out_dtype"] or x.dtype)


def transpose_by_gemm(groups: int, padding, data_dtype: str, weight_dtype: str) -> bool:
    """Whether ``nn.conv2d_transpose`` runs as one matrix product and an add per tap
    (``_conv2d_transpose_gemm``): one group, no negative padding, float32 or float64 data and
    weight alike; otherwise it convolves the input spread by the strides."""
    return (groups == 1 and min(padding) >= 0 and data_dtype in ("float32", "float64")
            and data_dtype == weight_dtype)


def _conv2d_transpose_kernel(args, a):
    x, w = args
    dl, kl = a["data_layout"], a["kernel_layout"]
    x = to_canonical(x, dl, "NCHW")
    w = to_canonical(w, kl, "IOHW")
    g = a["groups"]
    c, og, kh, kw = w.shape
    (sh, sw), (dh, dw) = pair(a["strides"], "strides"), pair(a["dilation"], "dilation")
    pt, pl, pb, pr = pad4(a["padding"])
    oph, opw = pair(a["output_padding"], "output_padding")
    n, _, h, wd = x.shape
    if transpose_by_gemm(g, (pt, pl, pb, pr), str(x.dtype), str(w.dtype)):
        last = kl == "IHWO"  # the weight as given: the product runs channels-last, into NHWC
        out = _conv2d_transpose_gemm(x, args[1] if last else w, (sh, sw), (dh, dw), (pt, pl, pb, pr),
                                     (oph, opw), last=last)
        out = out.astype(a["out_dtype"] or x.dtype, copy=False)
        ol = a["out_layout"] or dl
        if last:
            return out if ol == "NHWC" else np.ascontiguousarray(from_canonical(out, "NHWC", ol))
        return from_canonical(out, "NCHW", ol)
    # the transpose of a strided conv: spread the input by the stride, then convolve with the
    # flipped kernel whose in/out channels are swapped within each group
    spread = np.zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1), dtype=x.dtype)
    spread[:, :, ::sh, ::sw] = x
    wc = w.reshape(g, c // g, og, kh, kw).transpose(0, 2, 1, 3, 4).reshape(g * og, c // g, kh, kw)
    wc = wc[:, :, ::-1, ::-1]
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    pads = (eh - pt, ew - pl, eh - pb + oph, ew - pr + opw)
    out = conv2d_nchw(spread, wc, (1, 1), pads, (dh, dw), g, a["out_dtype"] or x.dtype)
    return from_canonical(out, "NCHW", a["out_layout"] or dl)


def _conv2d_transpose_gemm(x, w, strides, dilation, padding, output_padding, last: bool = False):
    """groups=1: one matrix product gives every input pixel's contribution to each kernel tap,
    (out channels x taps) by pixels, and the taps are added into the output at their strided
    offsets. Spreading the input by the stride and convolving, as the general path does, costs
    stride^2 times the multiplications (DCGAN's 4x4 stride-2 layers: 4x) and a gathering copy.

    ``last``: the weight is laid out IHWO, (in channels, taps, out channels), and the same runs
    channels-last into an NHWC output: the product (pixels x taps x out channels), and the adds
    per tap along the output channels, contiguous on both sides. From IOHW each add's innermost
    run is an input row (4 to 16 pixels on DCGAN's layers), and the adds took 0.3-1.0 ms per layer
    beside products of 2.6-6.3 ms."""
    n, c, h, wd = x.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = strides, dilation, padding, output_padding
    if last:
        _, kh, kw, o = w.shape
        taps = np.matmul(x.reshape(n, c, h * wd).transpose(0, 2, 1), w.reshape(c, kh * kw * o))
        taps = taps.reshape(n, h, wd, kh, kw, o).transpose(0, 5, 3, 4, 1, 2)  # a view, (n, o, kh, kw, h, w)
    else:
        _, o, kh, kw = w.shape
        taps = np.matmul(w.reshape(c, o * kh * kw).T, x.reshape(n, c, h * wd)).reshape(n, o, kh, kw, h, wd)
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    out = np.zeros((n, full_h, full_w, o) if last else (n, o, full_h, full_w), x.dtype)
    view = out.transpose(0, 3, 1, 2) if last else out  # NCHW either way
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
            view[:, :, rows, j * dw:j * dw + (wd - 1) * sw + 1:sw] += taps[:, :, i, j]
    if pt or pl or pb or pr:
        crop = (slice(None), slice(pt, full_h - pb), slice(pl, full_w - pr))
        out = np.ascontiguousarray(out[crop] if last else out[(slice(None),) + crop])
    return out


def _conv2d_transpose_flops(arg_types, out_type, a) -> float:
    x, w = arg_types
    per_in = numel(w) / w.shape[a["kernel_layout"].index("I")] if w.ndim == 4 else 0
    return 2.0 * numel(x) * per_in


_CONVT_ATTRS = {
    "channels": None, "kernel_size": None, "strides": (1, 1), "output_padding": (0, 0),
    "padding": (0, 0), "dilation": (1, 1), "groups": 1, "data_layout": "NCHW",
    "kernel_layout": "IOHW", "out_layout": "", "out_dtype": "",
}
defop("nn.conv2d_transpose", 2, _CONVT_ATTRS, _conv2d_transpose_rel, _conv2d_transpose_kernel,
      PatternKind.OUT_ELEMWISE_FUSABLE, flops=_conv2d_transpose_flops,
      input_names=("data", "weight"), py_defaults={"padding": (0, 0)},
      normalize=lambda v: normalize_2d(v, ("strides", "dilation", "kernel_size", "output_padding")),
      examples=(
          ([_t((1, 4, 4, 4)), _t((4, 2, 4, 4))], {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
          ([_t((1, 3, 5, 5)), _t((3, 2, 3, 3))], {}),
          ([_t((2, 4, 3, 3)), _t((4, 3, 3, 3))], {"groups": 2, "strides": (2, 2),
                                                  "output_padding": (1, 1), "padding": (1, 1)}),
          ([_t((1, 2, 4, 3)), _t((2, 3, 2, 3))], {"dilation": (2, 1), "padding": (1, 0, 0, 1)}),
          ([_t((1, 4, 4, 4)), _t((4, 4, 4, 2))], {"strides": (2, 2), "padding": (1, 1),
                                                  "kernel_layout": "IHWO"}),
      ))
