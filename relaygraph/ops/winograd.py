"""Winograd convolution F(2x2, 3x3) and F(4x4, 3x3) as TVM splits it:
``nn.contrib_conv2d_winograd_weight_transform`` (the weight in the Winograd domain, folded away
when the weight is a constant) and ``nn.contrib_conv2d_winograd_without_weight_transform`` (the
convolution on a transformed weight).

Each 2x2 block of the output comes from a 4x4 tile of the input: the tile is transformed
(``B^T d B``, additions only), multiplied elementwise by the transformed weight (``G g G^T``,
4x4 per output and input channel), and transformed back (``A^T m A``). Summed over the input
channels, the 16 elementwise products are 16 matrix products of (out channels x in channels) by
(in channels x tiles): 16 multiplies per 4 outputs instead of 36, 2.25x fewer in the GEMMs, and
a transformed input of 4x the input's size instead of the 9x window copy of the direct kernel.
Where there are fewer tiles than output channels (deep layers on small images), the GEMMs take
the weight as it is stored and give the products by output channel, so that BLAS does not read
the larger operand transposed and the output needs no transposing copy. On large images with few
channels (VGG's first blocks) the image goes in bands of tile rows, each band's tiles used while
they are in the cache.
With ``tile_size=4``, F(4x4, 3x3): each 4x4 block of the output from a 6x6 input tile, 36
multiplies per 16 outputs (4x fewer than the direct kernel's, against 2.25x), and a transformed
input of 2.25x the input's size; its transforms take more arithmetic per tile and its rounding
error is larger (up to about 1e-5 of the output's scale in float32), and on small images the whole
4x4 tiles waste more (14x14 computes 16x16). The same code runs both: the transforms by their
matrices, the GEMMs and the bands by the tile's size.
Only 3x3 kernels with stride 1, dilation 1 and one group, in NCHW, are supported (tile_size 2 or 4).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..ir.types import TensorType
from ..ty.dims import dim_add, dim_sub, dims_equal, is_known
from ._base import REQUIRED, PatternKind, ShapeError, defop, fmt, numel, tensor_arg
from .conv import crop_negative_padding, normalize_2d, pad4, pair
from .inplace import relu_in_place
from .registry import lookup

__all__ = ["WINOGRAD_G", "WINOGRAD_G4", "WINOGRAD_GS", "WINOGRAD_B4T", "WINOGRAD_A4T", "winograd_weight",
           "winograd_conv2d"]

F32 = "float32"
_BAND_VALUES = 8192  # values of the output transform's source per band of rows copied (32 KB)
# bytes of transformed input per band of tile rows on a large image (see _winograd_by_tile):
# at 64 channels on 224x224, bands of 4, 7, 10 and 14 tile rows (1.8-6.4 MB) took 47.5, 49.4,
# 51.5 and 50.4 ms (one piece: 66 ms); on 56x56 (1.6 MB in all) one piece is fastest
_BAND_BYTES = 2 << 20
# bands only where the transforms, not the products, take most of the time: channels in times
# out at most this (256 channels on 56x56 ran 5-17% slower in bands of any depth, 128 -> 256
# alike either way, 64 -> 128 and 128 -> 128 on 112x112 1.1-1.4x faster)
_BAND_CHANNELS = 128 * 128
# F(2, 3) (Lavin & Gray): y = A^T [(G g) * (B^T d)]
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
# F(4, 3) on the points 0, 1, -1, 2, -2 and infinity: y = A^T [(G g) * (B^T d)]
WINOGRAD_G4 = np.array([[1 / 4, 0.0, 0.0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                        [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0.0, 0.0, 1.0]])
WINOGRAD_B4T = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                         [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
WINOGRAD_A4T = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                        np.float64)
WINOGRAD_GS = {2: WINOGRAD_G, 4: WINOGRAD_G4}  # G by tile_size
TILE_SIZES = tuple(WINOGRAD_GS)


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _check_tile(tile_size) -> int:
    """The transformed tile's side (4 or 6) for a supported ``tile_size``."""
    if isinstance(tile_size, bool) or tile_size not in TILE_SIZES:
        raise ShapeError(f"tile_size={tile_size!r} is not supported (F(2x2, 3x3): tile_size=2; "
                         f"F(4x4, 3x3): tile_size=4)")
    return int(tile_size) + 2


def tile_of(u: np.ndarray) -> int:
    """The output tile's side (2 or 4) of a transformed weight (alpha, alpha, O, I)."""
    return u.shape[0] - 2


# -- the weight transform --------------------------------------------------------------------------
def _weight_transform_rel(args, a):
    w = tensor_arg(args[0], 0)
    alpha = _check_tile(a["tile_size"])
    if w.ndim != 4:
        raise ShapeError(f"weight must have rank 4 (OIHW), got {fmt(w)}")
    for d, what in ((w.shape[2], "height"), (w.shape[3], "width")):
        if dims_equal(d, 3) is False:
            raise ShapeError(f"kernel {what} must be 3 for Winograd F(mxm, 3x3), got {d}")
    if w.dtype not in ("float16", "float32", "float64"):
        raise ShapeError(f"the Winograd transform needs a float weight, got {w.dtype}")
    return TensorType((alpha, alpha, w.shape[0], w.shape[1]), w.dtype)


def winograd_weight(w: np.ndarray, tile_size: int = 2) -> np.ndarray:
    """An OIHW 3x3 weight in the Winograd domain, (alpha, alpha, O, I) with alpha = tile_size + 2:
    ``G g G^T`` per channel pair."""
    _check_tile(tile_size)
    g = WINOGRAD_GS[tile_size]
    u = np.einsum("ai,ocij,bj->aboc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(w.dtype))


defop("nn.contrib_conv2d_winograd_weight_transform", 1, {"tile_size": REQUIRED},
      _weight_transform_rel, lambda args, a: winograd_weight(args[0], a["tile_size"]), PatternKind.OPAQUE,
      flops=lambda arg_types, out_type, a: 2.0 * 3 * numel(out_type), input_names=("weight",),
      examples=(([_t((4, 3, 3, 3))], {"tile_size": 2}), ([_t((2, 5, 3, 3), "float64")], {"tile_size": 2}),
                ([_t((3, 2, 3, 3))], {"tile_size": 4})),
      doc="a 3x3 OIHW weight in the Winograd F(2x2, 3x3) domain, (4, 4, O, I), or with tile_size=4 "
          "in F(4x4, 3x3)'s, (6, 6, O, I)")


# -- the convolution on a transformed weight ---------------------------------------------------------
def _winograd_rel(args, a):
    x, w = tensor_arg(args[0], 0), tensor_arg(args[1], 1)
    alpha = _check_tile(a["tile_size"])
    if a["data_layout"] != "NCHW" or (a["out_layout"] or "NCHW") != "NCHW":
        raise ShapeError(f"only NCHW data is supported, got data_layout={a['data_layout']!r} "
                         f"out_layout={a['out_layout']!r}")
    for key in ("strides", "dilation"):
        if pair(a[key], key) != (1, 1):
            raise ShapeError(f"{key} must be (1, 1) for Winograd, got {a[key]!r}")
    if a["groups"] != 1:
        raise ShapeError(f"groups must be 1 for Winograd, got {a['groups']!r}")
    if a["kernel_size"] is not None and pair(a["kernel_size"], "kernel_size") != (3, 3):
        raise ShapeError(f"kernel_size must be (3, 3) for Winograd, got {a['kernel_size']!r}")
    if x.ndim != 4:
        raise ShapeError(f"data must have rank 4 (NCHW), got {fmt(x)}")
    if w.ndim != 4 or dims_equal(w.shape[0], alpha) is False or dims_equal(w.shape[1], alpha) is False:
        raise ShapeError(f"weight must be a transformed weight ({alpha}, {alpha}, O, I) for "
                         f"tile_size={a['tile_size']}, got {fmt(w)}")
    if dims_equal(w.shape[3], x.shape[1]) is False:
        raise ShapeError(f"data has {x.shape[1]} channels but the weight takes {w.shape[3]}")
    if a["channels"] is not None and dims_equal(w.shape[2], a["channels"]) is False:
        raise ShapeError(f"weight output channels {w.shape[2]} differ from channels={a['channels']}")
    if x.dtype not in ("float16", "float32", "float64") or w.dtype != x.dtype:
        raise ShapeError(f"Winograd needs float data and a weight of the same dtype, got {x.dtype} "
                         f"and {w.dtype}")
    pt, pl, pb, pr = pad4(a["padding"])  # negative padding crops, as in nn.conv2d
    oh = dim_sub(dim_add(x.shape[2], pt + pb), 2)
    ow = dim_sub(dim_add(x.shape[3], pl + pr), 2)
    if (is_known(oh) and oh <= 0) or (is_known(ow) and ow <= 0):
        raise ShapeError(f"the 3x3 kernel does not fit the padded input {x.shape[2]}x{x.shape[3]}")
    return TensorType((x.shape[0], w.shape[2], oh, ow), a["out_dtype"] or x.dtype)


def _input_transform(x: np.ndarray, padding, th: int, tw: int, tile: int = 2) -> np.ndarray:
    """``B^T d B`` of every (tile + 2)-square input tile (stride ``tile``), as (alpha, alpha, th,
    tw, N, C). The padded input is laid out (H, W, N, C) so each step runs over long contiguous
    rows of channels (NCHW rows of a small image are a few elements long, and numpy's per-row
    overhead would dominate)."""
    if tile == 4:
        return _input_transform4(x, padding, th, tw)
    n, c = x.shape[:2]
    wp = 2 * tw + 2
    xp = _padded(x, padding, 2 * th + 2, wp)
    d0, d1, d2, d3 = (xp[k:k + 2 * th - 1:2] for k in range(4))  # tile rows k of every tile row
    r = np.empty((4, th, wp, n, c), x.dtype)  # B^T d
    np.subtract(d0, d2, out=r[0])
    np.add(d1, d2, out=r[1])
    np.subtract(d2, d1, out=r[2])
    np.subtract(d1, d3, out=r[3])
    v = np.empty((4, 4, th, tw, n, c), x.dtype)  # (B^T d) B
    for a in range(4):
        e0, e1, e2, e3 = (r[a, :, k:k + 2 * tw - 1:2] for k in range(4))
        np.subtract(e0, e2, out=v[a, 0])
        np.add(e1, e2, out=v[a, 1])
        np.subtract(e2, e1, out=v[a, 2])
        np.subtract(e1, e3, out=v[a, 3])
    return v


def _padded(x: np.ndarray, padding, hp: int, wp: int) -> np.ndarray:
    """``x`` (N, C, H, W) laid out (hp, wp, N, C) with ``padding`` (top, left) zeros before it and
    zeros after it to the size (rows and columns past the size are dropped)."""
    n, c, h, wd = x.shape
    pt, pl = padding[0], padding[1]
    xp = np.zeros((hp, wp, n, c), x.dtype)
    rows, cols = min(h, hp - pt), min(wd, wp - pl)
    xp[pt:pt + rows, pl:pl + cols] = x[:, :, :rows, :cols].transpose(2, 3, 0, 1)
    return xp


def _input_transform4(x: np.ndarray, padding, th: int, tw: int) -> np.ndarray:
    """F(4, 3)'s ``B^T d B`` of every 6x6 input tile (stride 4), as (6, 6, th, tw, N, C): each side
    as one matrix product by ``B^T`` over the six rows (then columns) of every tile, gathered
    into one array first (the tiles overlap by two). Its ``B^T`` has coefficients 4 and 5, so
    numpy's passes take 15 per side where F(2, 3)'s take 4; as products they measured 0.46 against
    0.68 ms at 64 channels on 56x56 and 0.18 against 0.33 at 128 on 28x28."""
    n, c = x.shape[:2]
    wp = 4 * tw + 2
    bt = WINOGRAD_B4T.astype(x.dtype)
    xp = _padded(x, padding, 4 * th + 2, wp)
    s0, s1, s2, s3 = xp.strides
    rows = as_strided(xp, (6, th, wp, n, c), (s0, 4 * s0, s1, s2, s3))  # row k of every tile row
    r = np.matmul(bt, np.ascontiguousarray(rows).reshape(6, -1)).reshape(6, th, wp, n, c)  # B^T d
    s0, s1, s2, s3, s4 = r.strides
    cols = as_strided(r, (6, 6, th, tw, n, c), (s0, s2, s1, 4 * s2, s3, s4))  # (row, column k, tile)
    return np.matmul(bt, np.ascontiguousarray(cols).reshape(6, 6, -1)).reshape(6, 6, th, tw, n, c)


def _inverse_tiles(m: np.ndarray, out) -> None:
    """``A^T m A`` over the two leading (alpha, alpha) axes of ``m``: output ``(r, c)`` of every
    tile written into the view ``out(r, c)``. F(4, 3)'s as two matrix products by its ``A^T``
    (coefficients up to 8: 0.28 against 0.39 ms in numpy's passes at 64 channels on 56x56)."""
    if m.shape[0] == 6:
        at = WINOGRAD_A4T.astype(m.dtype)
        rows = np.matmul(at, m.reshape(6, -1))  # A^T m: (4, 6 * rest)
        y = np.matmul(at, rows.reshape(4, 6, -1))  # (A^T m) A, by output row and column
        for r in range(4):
            for c in range(4):
                np.copyto(out(r, c), y[r, c].reshape(m.shape[2:]))
        return
    s0 = m[0] + m[1]
    s0 += m[2]
    s1 = m[1] - m[2]
    s1 -= m[3]
    for r, s in enumerate((s0, s1)):
        left = s[0] + s[1]
        np.add(left, s[2], out=out(r, 0))
        right = s[1] - s[2]
        np.subtract(right, s[3], out=out(r, 1))


def _output_transform(m: np.ndarray, oh: int, ow: int, relu: bool = False,
                      result: np.ndarray | None = None) -> np.ndarray:
    """``A^T m A`` of every tile of (alpha, alpha, th, tw, N, O), written as the (N, O, oh, ow)
    output (into ``result`` when given: a band of rows of the whole output); with ``relu``, the
    maximum with 0 taken in place on that output."""
    _, _, th, tw, n, o = m.shape
    tile = m.shape[0] - 2
    out = np.empty((th, tile, tw, tile, n, o), m.dtype)
    _inverse_tiles(m, lambda r, c: out[:, r, :, c])
    src = out.reshape(tile * th, tile * tw, n, o)[:oh, :ow]
    if result is None:
        result = np.empty((n, o, oh, ow), m.dtype)
    # the transposing copy in bands of rows whose source stays in L1: in one piece each source
    # cache line is fetched again for every value it holds (measured at 64x56x56: 0.22 ms against
    # 0.12 ms in bands; 128x28x28: 0.14 against 0.07)
    rows = max(1, _BAND_VALUES // max(ow * n * o, 1))
    for r0 in range(0, oh, rows):
        np.copyto(result[:, :, r0:r0 + rows], src[r0:r0 + rows].transpose(2, 3, 0, 1))
    # the relu on the contiguous result: a maximum on the transposing copy itself takes numpy's
    # strided scalar loop (measured 0.47 ms at 64x56x56 against 0.23 + 0.06 ms this way)
    if relu:
        if result.flags.c_contiguous:
            relu_in_place(result)
        else:  # a band of the output: a maximum per image and channel, in place
            np.maximum(result, result.dtype.type(0), out=result)
    return result


def _output_transform_by_channel(m: np.ndarray, oh: int, ow: int, relu: bool = False) -> np.ndarray:
    """``A^T m A`` of every tile of (alpha, alpha, O, th, tw, N), written into the (N, O, oh, ow)
    output one tile position at a time (the products are already by channel: no transposing
    copy)."""
    _, _, o, th, tw, n = m.shape
    tile = m.shape[0] - 2
    full = np.empty((n, o, tile * th, tile * tw), m.dtype)
    tiles = full.reshape(n, o, th, tile, tw, tile)
    _inverse_tiles(m, lambda r, c: tiles[:, :, :, r, :, c].transpose(1, 2, 3, 0))
    result = full if (tile * th, tile * tw) == (oh, ow) else np.ascontiguousarray(full[:, :, :oh, :ow])
    return relu_in_place(result) if relu else result


def winograd_conv2d(x: np.ndarray, u: np.ndarray, padding, bias: np.ndarray | None = None,
                    relu: bool = False, band_bytes: int = _BAND_BYTES) -> np.ndarray:
    """Convolution of NCHW ``x`` with a transformed weight ``u`` (alpha, alpha, O, C), stride 1:
    F(2x2, 3x3) for alpha 4, F(4x4, 3x3) for alpha 6; with a channel ``bias`` and a ``relu`` after
    it in the same kernel. The bias goes into the products of tile position (1, 1), whose
    coefficient in every output of its tile is 1 (in both: the point 1 of the transforms; a
    sixteenth or thirty-sixth of a pass instead of one), and the relu in place on the output.
    Where the transformed input would outgrow ``band_bytes``, the image goes in bands of tile
    rows (``_winograd_by_tile``)."""
    x, padding = crop_negative_padding(x, padding)
    n, c, h, wd = x.shape
    o, alpha, tile = u.shape[2], u.shape[0], tile_of(u)
    pt, pl, pb, pr = padding
    oh, ow = h + pt + pb - 2, wd + pl + pr - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    tiles = th * tw * n
    if tiles >= o:
        rows = (_band_rows(th, tw, n, c, x.dtype.itemsize, band_bytes, alpha) if c * o <= _BAND_CHANNELS
                else th)
        return _winograd_by_tile(x, u, padding, bias, relu, rows)
    # Few tiles and many channels: the weight, the larger operand, as it is stored, and the
    # products by output channel, which the output transform then reads in long rows. BLAS
    # reads a transposed weight slower here (the GEMMs measured at 512 channels on 7x7, one thread:
    # 4.4 ms against 2.9 ms; 256 on 14x14: 1.8 against 1.3).
    v = _input_transform(x, padding, th, tw, tile)
    m = np.matmul(u.reshape(alpha * alpha, o, c), v.reshape(alpha * alpha, tiles, c).transpose(0, 2, 1))
    m = m.reshape(alpha, alpha, o, th, tw, n)
    if bias is not None:
        m[1, 1] += bias.astype(m.dtype, copy=False)[:, None, None, None]
    return _output_transform_by_channel(m, oh, ow, relu)


def _band_rows(th: int, tw: int, n: int, c: int, itemsize: int, band_bytes: int, alpha: int = 4) -> int:
    """Tile rows per band: as many as keep a band's transformed input within ``band_bytes``, the
    bands then evened out (a last band of one row made 256 channels on 56x56 15% slower); all
    ``th`` (one piece) where the whole is at most four bands' worth (64 channels on 56x56, 3.2
    MB, ran 5% slower in two bands)."""
    per_row = alpha * alpha * tw * n * c * itemsize
    rows = max(2, band_bytes // max(per_row, 1))
    if rows >= th or th * per_row <= 4 * band_bytes:
        return th
    bands = -(-th // rows)
    return -(-th // bands)


def _winograd_by_tile(x: np.ndarray, u: np.ndarray, padding, bias, relu: bool, rows: int) -> np.ndarray:
    """``winograd_conv2d`` by tile: the GEMMs, one per tile position (16, or 36 for F(4x4, 3x3)),
    (tiles x in channels) by (in channels x out channels), one band of ``rows`` tile rows at a
    time (``tile * rows`` output rows; all of them at once when ``rows`` is the image's), each
    band's transformed input, products and output tiles made and used while they are in the
    cache, and written into its rows of the output. On a large image the whole transformed input
    is tens of MB of fresh memory that every step reads back from DRAM: VGG's 64-channel 3x3
    layer on 224x224 took 66 ms in one piece and 47.5 ms in bands (44 against 52 ms with two
    threads, where the direct kernel takes 43 ms); 128 channels on 112x112, 39 against 29 ms."""
    n, c, h, wd = x.shape
    o, alpha, tile = u.shape[2], u.shape[0], tile_of(u)
    pt, pl, pb, pr = padding
    oh, ow = h + pt + pb - 2, wd + pl + pr - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    weights = u.transpose(0, 1, 3, 2).reshape(alpha * alpha, c, o)
    b = None if bias is None else bias.astype(x.dtype, copy=False)
    result = np.empty((n, o, oh, ow), x.dtype)
    for t0 in range(0, th, rows):
        bt = min(rows, th - t0)
        first = tile * t0 - pt  # the band's first input row (above the image: top padding)
        lo, hi = max(first, 0), min(max(first + tile * bt + 2, 0), h)
        v = _input_transform(x[:, :, lo:max(hi, lo)], (lo - first, pl), bt, tw, tile)
        m = np.matmul(v.reshape(alpha * alpha, bt * tw * n, c), weights).reshape(alpha, alpha, bt, tw, n, o)
        if b is not None:
            m[1, 1] += b
        rows_out = min(tile * bt, oh - tile * t0)
        _output_transform(m, rows_out, ow, relu, result[:, :, tile * t0:tile * t0 + rows_out])
    return result


def _winograd_kernel(args, a):
    x, u = args
    out = winograd_conv2d(x, u.astype(x.dtype, copy=False), pad4(a["padding"]))
    return out.astype(a["out_dtype"] or x.dtype, copy=False)


def _winograd_flops(arg_types, out_type, a) -> float:
    # alpha^2 multiplies (and adds) per output tile and input channel (16 per 2x2 block, 36 per
    # 4x4), plus the transforms
    x, w = arg_types
    if out_type.ndim != 4 or w.ndim != 4:
        return 0.0
    m = w.shape[0] - 2
    tiles = ((out_type.shape[2] + m - 1) // m) * ((out_type.shape[3] + m - 1) // m) * out_type.shape[0]
    return 2.0 * w.shape[0] * w.shape[1] * tiles * w.shape[2] * w.shape[3] + 8.0 * numel(x) \
        + 6.0 * numel(out_type)


def _winograd_infer(args, a):
    x = args[0]
    if (not isinstance(x, TensorType) or a["channels"] is None or x.ndim != 4
            or a["tile_size"] not in TILE_SIZES):
        return None
    alpha = a["tile_size"] + 2
    return [None, TensorType((alpha, alpha, a["channels"], x.shape[1]), x.dtype)]


_WINOGRAD_ATTRS = {"tile_size": REQUIRED, **lookup("nn.conv2d").attrs}  # TVM's Conv2DWinogradAttrs
defop("nn.contrib_conv2d_winograd_without_weight_transform", 2, _WINOGRAD_ATTRS, _winograd_rel,
      _winograd_kernel, PatternKind.OUT_ELEMWISE_FUSABLE, flops=_winograd_flops,
      input_names=("data", "weight"), normalize=normalize_2d, py_defaults={"padding": (0, 0)},
      infer_inputs=_winograd_infer,
      examples=(
          ([_t((1, 3, 8, 8)), _t((4, 4, 5, 3))], {"tile_size": 2, "padding": (1, 1)}),
          ([_t((2, 2, 7, 6)), _t((4, 4, 3, 2))], {"tile_size": 2}),
          ([_t((1, 4, 5, 9)), _t((4, 4, 2, 4))], {"tile_size": 2, "padding": (0, 2, 1, 1),
                                                  "channels": 2, "kernel_size": (3, 3)}),
          ([_t((1, 2, 9, 8)), _t((4, 4, 3, 2))], {"tile_size": 2, "padding": (-1, 1, 0, -2)}),
          ([_t((1, 3, 9, 11)), _t((6, 6, 5, 3))], {"tile_size": 4, "padding": (1, 1)}),
          ([_t((2, 2, 7, 6), "float64"), _t((6, 6, 3, 2), "float64")], {"tile_size": 4}),
          ([_t((1, 2, 10, 9)), _t((6, 6, 3, 2))], {"tile_size": 4, "padding": (-1, 2, 0, -2)}),
      ),
      doc="a 3x3 stride-1 convolution (NCHW) on a weight already in the Winograd domain: F(2x2, 3x3)'s "
          "(4, 4, O, I), or with tile_size=4 F(4x4, 3x3)'s (6, 6, O, I)")
