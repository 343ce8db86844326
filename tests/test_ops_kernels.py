"""Kernels against independent references: scipy.signal for convolution, direct loops and
formulas for pooling and normalisation, numpy slicing for strided_slice, TVM's documented
reshape examples."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.signal import correlate2d
from scipy.special import log_softmax as sp_log_softmax
from scipy.special import softmax as sp_softmax

import relaygraph as rg
from relaygraph.errors import RelayError
from relaygraph.ir import TensorType
from relaygraph.ops import get

RNG = np.random.default_rng(42)


def run(name, args, **attrs):
    op = get(name)
    canonical = op.builder_attrs(attrs)
    out = op.kernel(args, canonical)
    want = op.type_relation([TensorType(a.shape, str(a.dtype)) for a in args], canonical)
    # a tuple-valued op (split, batch_norm) checks each field against its type too
    outs, wants = (out, want.fields) if isinstance(out, tuple) else ((out,), (want,))
    assert len(outs) == len(wants)
    for o, w in zip(outs, wants, strict=True):
        assert isinstance(o, np.ndarray) and o.shape == tuple(w.shape) and str(o.dtype) == w.dtype
    return out


def pad4(p):
    return {1: lambda p: p * 4, 2: lambda p: (p[0], p[1], p[0], p[1]), 4: lambda p: p}[len(p)](p)


# -- nn.conv2d -----------------------------------------------------------------------------------
def ref_conv2d(x, w, strides, padding, dilation, groups):
    """NCHW x OIHW through scipy.signal.correlate2d, one (batch, out, in) channel triple at a time."""
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    wd = np.zeros((o, cg, dh * (kh - 1) + 1, dw * (kw - 1) + 1))
    wd[:, :, ::dh, ::dw] = w
    og = o // groups
    rows = []
    for n in range(x.shape[0]):
        chans = []
        for oc in range(o):
            g = oc // og
            acc = sum(correlate2d(xp[n, g * cg + ci], wd[oc, ci], mode="valid") for ci in range(cg))
            chans.append(acc[::sh, ::sw])
        rows.append(chans)
    return np.array(rows)


CONV_CASES = [
    # (C, O, H, W, kh, kw, strides, padding, dilation, groups)
    (3, 4, 7, 6, 3, 3, (1, 1), (0,), (1, 1), 1),
    (3, 4, 7, 6, 3, 3, (1, 1), (1,), (1, 1), 1),
    (3, 2, 8, 7, 3, 2, (2, 2), (1, 2), (1, 1), 1),
    (2, 3, 9, 9, 3, 3, (2, 1), (1, 0, 2, 1), (2, 2), 1),
    (4, 6, 6, 6, 3, 3, (1, 1), (1, 1), (1, 1), 2),
    (4, 4, 6, 5, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 4),   # depthwise
    (3, 6, 5, 5, 3, 3, (1, 1), (2,), (2, 1), 3),           # depthwise, channel multiplier 2
    (2, 3, 5, 6, 1, 1, (1, 2), (0, 0, 0, 0), (1, 1), 1),
    # windows that tile the image (a patch embedding): the columns in one transposing copy
    (3, 5, 8, 8, 4, 4, (4, 4), (0,), (1, 1), 1),
    (2, 3, 9, 7, 3, 2, (3, 2), (0,), (1, 1), 1),           # rows and a column left over
    (2, 3, 8, 8, 2, 2, (2, 2), (0,), (2, 2), 1),           # dilated: the general path
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv2d_nchw(case):
    c, o, h, w, kh, kw, strides, padding, dilation, groups = case
    x = RNG.standard_normal((2, c, h, w))
    wt = RNG.standard_normal((o, c // groups, kh, kw))
    got = run("nn.conv2d", [x, wt], strides=strides, padding=padding, dilation=dilation,
              groups=groups)
    want = ref_conv2d(x, wt, strides, pad4(padding), dilation, groups)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv2d_on_tiling_windows_of_a_strided_view():
    """Tiling windows (stride = kernel) read from a view that is not contiguous: the transposing
    copy gathers the same columns as the copy per kernel offset."""
    base = RNG.standard_normal((1, 6, 12, 10))
    x = base[:, ::2]  # every second channel: strided
    wt = RNG.standard_normal((4, 3, 2, 5))
    got = run("nn.conv2d", [x, wt], strides=(2, 5))
    want = ref_conv2d(x, wt, (2, 5), (0, 0, 0, 0), (1, 1), 1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layouts", [("NHWC", "HWIO"), ("NHWC", "OHWI"), ("NCHW", "HWIO")])
def test_conv2d_layouts(layouts):
    data_layout, kernel_layout = layouts
    x = RNG.standard_normal((1, 4, 6, 7))
    wt = RNG.standard_normal((6, 2, 3, 3))
    want = ref_conv2d(x, wt, (2, 1), (1, 1, 0, 2), (1, 1), 2)
    xl = np.transpose(x, ["NCHW".index(k) for k in data_layout])
    wl = np.transpose(wt, ["OIHW".index(k) for k in kernel_layout])
    got = run("nn.conv2d", [xl, wl], strides=(2, 1), padding=(1, 1, 0, 2), groups=2,
              data_layout=data_layout, kernel_layout=kernel_layout)
    np.testing.assert_allclose(got, np.transpose(want, ["NCHW".index(k) for k in data_layout]),
                               rtol=1e-10, atol=1e-10)


def test_conv2d_out_dtype_and_ints():
    x = RNG.integers(-3, 4, (1, 2, 5, 5)).astype("int32")
    wt = RNG.integers(-3, 4, (3, 2, 3, 3)).astype("int32")
    got = run("nn.conv2d", [x, wt], padding=(1, 1), out_dtype="int64")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref_conv2d(x, wt, (1, 1), (1, 1, 1, 1), (1, 1), 1))


# -- nn.conv2d_transpose -------------------------------------------------------------------------
def ref_conv2d_transpose(x, w, strides, padding, dilation, groups, output_padding):
    """Scatter every input pixel times the kernel into the output, then crop the padding."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw), (oph, opw) = strides, dilation, output_padding
    pt, pl, pb, pr = padding
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    out = np.zeros((n, og * groups, full_h, full_w))
    cg = c // groups
    for i, j, a, b in itertools.product(range(h), range(wd), range(kh), range(kw)):
        for g in range(groups):
            contrib = np.einsum("nc,co->no", x[:, g * cg:(g + 1) * cg, i, j],
                                w[g * cg:(g + 1) * cg, :, a, b])
            out[:, g * og:(g + 1) * og, i * sh + a * dh, j * sw + b * dw] += contrib
    oh = full_h - pt - pb
    ow = full_w - pl - pr
    return out[:, :, pt:pt + oh, pl:pl + ow]


@pytest.mark.parametrize("case", [
    ((2, 2), (1, 1, 1, 1), (1, 1), 1, (0, 0)),
    ((1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((2, 3), (1, 0, 2, 1), (1, 2), 1, (1, 2)),
    ((2, 2), (1, 1, 1, 1), (1, 1), 2, (1, 1)),
])
def test_conv2d_transpose(case):
    strides, padding, dilation, groups, output_padding = case
    x = RNG.standard_normal((2, 4, 3, 4))
    wt = RNG.standard_normal((4, 3, 3, 2))
    got = run("nn.conv2d_transpose", [x, wt], strides=strides, padding=padding,
              dilation=dilation, groups=groups, output_padding=output_padding)
    want = ref_conv2d_transpose(x, wt, strides, padding, dilation, groups, output_padding)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # float32 runs the one-product path for one group (and the spread-and-convolve path for two)
    got32 = run("nn.conv2d_transpose", [x.astype("float32"), wt.astype("float32")], strides=strides,
                padding=padding, dilation=dilation, groups=groups, output_padding=output_padding)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [
    ((2, 2), (1, 1, 1, 1), (1, 1), (0, 0), ""),
    ((1, 1), (0, 0, 0, 0), (1, 1), (0, 0), "NHWC"),
    ((2, 3), (1, 0, 2, 1), (1, 2), (1, 2), ""),
    ((3, 2), (0, 2, 1, 0), (2, 1), (2, 0), "NHWC"),
])
def test_conv2d_transpose_with_an_ihwo_weight(case):
    # the channels-last path (weight (I, kh, kw, O)): the reference's value, NCHW or NHWC out
    strides, padding, dilation, output_padding, out_layout = case
    x = RNG.standard_normal((2, 5, 3, 4))
    wt = RNG.standard_normal((5, 6, 3, 2))
    want = ref_conv2d_transpose(x, wt, strides, padding, dilation, 1, output_padding)
    for dtype, tol in (("float64", 1e-10), ("float32", 1e-4)):
        got = run("nn.conv2d_transpose", [x.astype(dtype), wt.transpose(0, 2, 3, 1).astype(dtype)],
                  strides=strides, padding=padding, dilation=dilation, output_padding=output_padding,
                  kernel_layout="IHWO", out_layout=out_layout)
        assert got.dtype == dtype and got.flags.c_contiguous
        if out_layout == "NHWC":
            got = got.transpose(0, 3, 1, 2)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_conv2d_transpose_paths_agree_on_a_generator_layer():
    # DCGAN's 4x4 stride-2 layer, NHWC in and out: the one-product path against the spread input
    # convolved with the flipped kernel (the general path, taken for int data)
    x = RNG.integers(-3, 4, (1, 4, 4, 6))
    wt = RNG.integers(-3, 4, (6, 5, 4, 4))
    attrs = dict(strides=(2, 2), padding=(1, 1), data_layout="NHWC", out_layout="NHWC")
    want = run("nn.conv2d_transpose", [x.astype("int64"), wt.astype("int64")], **attrs)
    got = run("nn.conv2d_transpose", [x.astype("float32"), wt.astype("float32")], **attrs)
    assert got.shape == want.shape == (1, 8, 8, 5)
    np.testing.assert_array_equal(got, want.astype("float32"))


# -- pooling -------------------------------------------------------------------------------------
def ref_pool(x, kind, pool, strides, padding, dilation, ceil_mode, count_include_pad):
    """TVM's pooling, one output pixel at a time."""
    (kh, kw), (sh, sw), (dh, dw) = pool, strides, dilation
    pt, pl, pb, pr = padding
    n, c, h, w = x.shape

    def size(d, k, s, dil, p0, p1):
        room = d + p0 + p1 - (dil * (k - 1) + 1)
        return (-(-room // s) if ceil_mode else room // s) + 1

    oh, ow = size(h, kh, sh, dh, pt, pb), size(w, kw, sw, dw, pl, pr)
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        ys = [i * sh - pt + a * dh for a in range(kh)]
        xs = [j * sw - pl + b * dw for b in range(kw)]
        cells = [(y, z) for y in ys for z in xs]
        inside = [(y, z) for y, z in cells if 0 <= y < h and 0 <= z < w]
        if kind == "max":
            out[:, :, i, j] = np.max([x[:, :, y, z] for y, z in inside], axis=0)
        else:
            total = sum(x[:, :, y, z] for y, z in inside)
            if count_include_pad:
                count = sum(1 for y, z in cells if -pt <= y < h + pb and -pl <= z < w + pr)
            else:
                count = len(inside)
            out[:, :, i, j] = total / count
    return out


POOL_CASES = [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, True),
    ((3, 2), (2, 2), (0, 0, 0, 0), (1, 1), True, False),
    ((3, 3), (2, 2), (1, 0, 1, 1), (1, 1), True, True),
    ((2, 2), (1, 2), (0, 1, 1, 0), (2, 2), False, False),
]


POOL_RUNS = [(k, c) for k in ("max", "avg") for c in POOL_CASES if k == "avg" or not c[-1]]


@pytest.mark.parametrize("kind,case", POOL_RUNS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POOL_RUNS)])
def test_pool2d(kind, case):
    pool, strides, padding, dilation, ceil_mode, include = case
    x = RNG.standard_normal((2, 3, 7, 8))
    attrs = dict(pool_size=pool, strides=strides, padding=padding, dilation=dilation,
                 ceil_mode=ceil_mode)
    if kind == "avg":
        attrs["count_include_pad"] = include
    got = run(f"nn.{kind}_pool2d", [x], **attrs)
    want = ref_pool(x, kind, pool, strides, padding, dilation, ceil_mode, include)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_pool2d_nhwc():
    x = RNG.standard_normal((1, 3, 6, 7))
    want = ref_pool(x, "max", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False)
    got = run("nn.max_pool2d", [np.transpose(x, (0, 2, 3, 1))], pool_size=3, strides=2,
              padding=(1, 1), layout="NHWC")
    np.testing.assert_allclose(got, np.transpose(want, (0, 2, 3, 1)))


def test_global_and_adaptive_pools():
    x = RNG.standard_normal((2, 3, 7, 5))
    np.testing.assert_allclose(run("nn.global_avg_pool2d", [x]), x.mean(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(run("nn.global_max_pool2d", [x]), x.max(axis=(2, 3), keepdims=True))
    got = run("nn.adaptive_avg_pool2d", [x], output_size=(3, 2))
    for i, j in itertools.product(range(3), range(2)):
        h0, h1 = (i * 7) // 3, -((-(i + 1) * 7) // 3)
        w0, w1 = (j * 5) // 2, -((-(j + 1) * 5) // 2)
        np.testing.assert_allclose(got[:, :, i, j], x[:, :, h0:h1, w0:w1].mean(axis=(2, 3)))


def test_upsampling():
    x = RNG.standard_normal((1, 2, 3, 4))
    got = run("nn.upsampling", [x], scale_h=2, scale_w=3)
    np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    corners = run("nn.upsampling", [x], scale_h=2, scale_w=2, method="bilinear", align_corners=True)
    np.testing.assert_allclose(corners[:, :, [0, -1]][:, :, :, [0, -1]], x[:, :, [0, -1]][:, :, :, [0, -1]])


# -- normalisation and softmax -------------------------------------------------------------------
def test_batch_norm():
    x = RNG.standard_normal((2, 3, 4, 5))
    gamma, beta, mean = (RNG.standard_normal(3) for _ in range(3))
    var = RNG.uniform(0.5, 2, 3)
    out, m, v = run("nn.batch_norm", [x, gamma, beta, mean, var], epsilon=1e-3)
    c = (slice(None), None, None)
    want = (x - mean[c]) / np.sqrt(var[c] + 1e-3) * gamma[c] + beta[c]
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_array_equal(m, mean)
    np.testing.assert_array_equal(v, var)
    out2, _, _ = run("nn.batch_norm", [x, gamma, beta, mean, var], axis=-3, center=False,
                     scale=False)
    np.testing.assert_allclose(out2, (x - mean[c]) / np.sqrt(var[c] + 1e-5), rtol=1e-12)


def test_layer_norm():
    x = RNG.standard_normal((2, 5, 3))
    gamma, beta = RNG.standard_normal(3), RNG.standard_normal(3)
    mu = x.mean(axis=-1, keepdims=True)
    sd = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(run("nn.layer_norm", [x, gamma, beta]), (x - mu) / sd * gamma + beta,
                               rtol=1e-12)
    g5, b5 = RNG.standard_normal(5), RNG.standard_normal(5)
    mu1 = x.mean(axis=1, keepdims=True)
    sd1 = np.sqrt(((x - mu1) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(run("nn.layer_norm", [x, g5, b5], axis=1),
                               (x - mu1) / sd1 * g5[:, None] + b5[:, None], rtol=1e-12)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    x = RNG.standard_normal((3, 4, 5)) * 10
    np.testing.assert_allclose(run("nn.softmax", [x], axis=axis), sp_softmax(x, axis=axis),
                               rtol=1e-12)
    np.testing.assert_allclose(run("nn.log_softmax", [x], axis=axis), sp_log_softmax(x, axis=axis),
                               rtol=1e-12, atol=1e-12)


def test_reductions():
    x = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(run("sum", [x], axis=(1,), exclude=True), x.sum(axis=(0, 2)))
    np.testing.assert_allclose(run("variance", [x, x.mean(axis=1, keepdims=True)], axis=1,
                                   unbiased=True), x.var(axis=1, ddof=1))
    y = np.array([[1.0, 3.0, 3.0, 0.0]])
    assert run("argmax", [y], axis=1).tolist() == [1]
    assert run("argmax", [y], axis=1, select_last_index=True).tolist() == [2]
    assert run("argmin", [x], axis=(0, 2), keepdims=True).shape == (1, 3, 1)


# -- reshape codes (TVM's documented examples) and strided_slice ---------------------------------
@pytest.mark.parametrize("shape,newshape,want", [
    ((2, 3, 4), (6, 1, -1), (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), (3, 1, 8)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), (2, 3, 4)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4, 5), (-3, -3), (6, 20)),
    ((2, 3, 4), (0, -3), (2, 12)),
    ((2, 3, 4), (-3, -2), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), (2, 1, 3, 4)),
])
def test_reshape_codes(shape, newshape, want):
    x = np.arange(int(np.prod(shape))).reshape(shape).astype("float32")
    got = run("reshape", [x], newshape=newshape)
    assert got.shape == want
    np.testing.assert_array_equal(got.ravel(), x.ravel())


@pytest.mark.parametrize("attrs,index", [
    (dict(begin=(1, 0), end=(3, 4)), np.s_[1:3, 0:4]),
    (dict(begin=(0, 1), end=(4, 5), strides=(2, 2)), np.s_[0:4:2, 1:5:2]),
    (dict(begin=(-1,), end=(-5,), strides=(-1,)), np.s_[-1:-5:-1]),
    (dict(begin=(1,), end=(100,)), np.s_[1:100]),
    (dict(begin=(2,), end=(100,), axes=(1,)), np.s_[:, 2:100]),
    (dict(begin=(1, 1), end=(2, -1), slice_mode="size"), np.s_[1:3, 1:]),
    (dict(begin=(0, 3, 1), end=(5, 0, 5), strides=(1, -1, 2)), np.s_[0:5, 3:0:-1, 1:5:2]),
])
def test_strided_slice(attrs, index):
    x = RNG.standard_normal((5, 6, 7))
    got = run("strided_slice", [x], **attrs)
    np.testing.assert_array_equal(got, x[index])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_modes(mode):
    x = RNG.standard_normal((4, 5))
    idx = np.array([[0, 7], [-2, 3]], dtype="int32")
    np.testing.assert_array_equal(run("take", [x, idx], axis=1, mode=mode),
                                  np.take(x, idx, axis=1, mode=mode))
    b = RNG.standard_normal((2, 3, 4))
    bi = np.array([[0, 2], [1, 1]], dtype="int32")
    got = run("take", [b, bi], axis=1, batch_dims=1)
    want = np.stack([b[k][bi[k]] for k in range(2)])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_global_pools_one_bin_reduction(dtype):
    """Global pools reduce each channel's plane directly: float64 accumulation, the input's dtype
    out, NaN kept, any layout and batch."""
    x = (RNG.standard_normal((3, 5, 7, 6)) * 10).astype(dtype)
    want_avg = x.astype("float64").mean(axis=(2, 3), keepdims=True).astype(dtype)
    np.testing.assert_allclose(run("nn.global_avg_pool2d", [x]), want_avg, rtol=1e-6)
    np.testing.assert_array_equal(run("nn.global_max_pool2d", [x]), x.max(axis=(2, 3), keepdims=True))
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(run("nn.global_avg_pool2d", [nhwc], layout="NHWC"),
                               want_avg.transpose(0, 2, 3, 1), rtol=1e-6)
    np.testing.assert_allclose(run("nn.adaptive_avg_pool2d", [x], output_size=(1, 1)), want_avg, rtol=1e-6)
    if dtype != "int32":
        x[1, 2, 3, 4] = np.nan
        assert np.isnan(run("nn.global_avg_pool2d", [x])[1, 2, 0, 0])
        assert np.isnan(run("nn.global_max_pool2d", [x])[1, 2, 0, 0])


@pytest.mark.parametrize("kind,include", [("max", False), ("avg", False), ("avg", True)])
def test_pools_separable_match_the_window_reference_everywhere(kind, include):
    # the kernels take the maximum (or the sum) over each window's rows, then over its columns:
    # every window shape, stride, dilation, padding (even and uneven) and ceil mode against the
    # reference, which visits each window's cells
    rng = np.random.default_rng(5)
    checked = 0
    for (h, w), pool, strides, padding, dilation, ceil_mode in itertools.product(
            ((7, 7), (8, 9), (5, 6)), ((1, 1), (2, 2), (3, 2), (2, 3)), ((1, 1), (2, 2), (3, 2)),
            ((0, 0, 0, 0), (1, 1, 1, 1), (1, 2, 0, 1)), ((1, 1), (2, 1)), (False, True)):
        x = rng.standard_normal((1, 2, h, w))
        attrs = dict(pool_size=pool, strides=strides, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
        if kind == "avg":
            attrs["count_include_pad"] = include
        try:
            got = run(f"nn.{kind}_pool2d", [x], **attrs)
        except RelayError:
            continue  # the window does not fit: the type relation says so
        try:
            want = ref_pool(x, kind, pool, strides, padding, dilation, ceil_mode, include)
        except (ValueError, ZeroDivisionError):  # a window wholly in the padding: no cell to visit
            assert np.isneginf(got).any() if kind == "max" else (got == 0).any()
            continue
        if kind == "max":
            assert got.shape == want.shape and np.array_equal(got, want), attrs
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(attrs))
        checked += 1
    assert checked > 200
    if kind == "max":
        ints = (rng.standard_normal((1, 3, 9, 8)) * 100).astype(np.int32)  # padded with int32's lowest
        got = run("nn.max_pool2d", [ints], pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
        want = ref_pool(ints, "max", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False)
        assert got.dtype == np.int32 and np.array_equal(got, want)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pools_refuse_a_window_that_cannot_slide_with_a_clear_error(kind):
    # one check for the type relation and the kernels: a stride of 0 had raised a bare
    # ZeroDivisionError from the output size, and a window larger than the data reached the
    # separable kernel (which would return an empty output) when a program ran without types
    x = np.ones((1, 1, 2, 2))
    cases = (({"pool_size": (2, 2), "strides": (0, 1)}, r"strides must be positive, got \[0, 1\]"),
             ({"pool_size": (0, 2)}, r"pool_size must be positive"),
             ({"pool_size": (2, 2), "dilation": (1, -1)}, r"dilation must be positive"),
             ({"pool_size": (3, 3)}, r"the pool window 3x3 does not fit"))
    build = getattr(rg.op.nn, f"{kind}_pool2d")
    for attrs, message in cases:
        data = rg.var("data", shape=(1, 1, 2, 2), dtype="float64")
        with pytest.raises(RelayError, match=message):  # type-checked
            rg.infer_type(rg.IRModule.from_expr(rg.Function([data], build(data, **attrs))))
        with pytest.raises(RelayError, match=message):  # run as written, without types
            rg.evaluate(build(rg.const(x), **attrs))
