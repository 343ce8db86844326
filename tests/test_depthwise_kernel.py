"""The depthwise convolution kernel (phase planes, channel blocks) and its fused bias/relu
epilogue, against a direct sum over a padded copy, on odd shapes, strides, padding, dilation and
batches; and the fused ops that use it against their parts."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ir import TensorType
from relaygraph.ops import conv, get

RNG = np.random.default_rng(7)


def ref_depthwise(x, w, strides, padding, dilation):
    """Direct definition: out[n, c, r, q] = sum_ij w[c, 0, i, j] * xpad[n, c, r*sh + i*dh, q*sw + j*dw]."""
    pt, pl, pb, pr = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    (sh, sw), (dh, dw) = strides, dilation
    _, _, kh, kw = w.shape
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for r in range(oh):
        for q in range(ow):
            for i in range(kh):
                for j in range(kw):
                    out[:, :, r, q] += w[:, 0, i, j] * xp[:, :, r * sh + i * dh, q * sw + j * dw]
    return out


CASES = [
    # (N, C, H, W, kh, kw, strides, padding (t, l, b, r), dilation)
    (1, 3, 7, 6, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (2, 5, 9, 11, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),
    (3, 4, 8, 7, 3, 3, (2, 2), (0, 0, 0, 0), (1, 1)),
    (1, 6, 10, 9, 3, 3, (2, 1), (1, 0, 2, 1), (2, 2)),
    (2, 3, 13, 12, 5, 5, (3, 2), (2, 2, 2, 2), (1, 1)),
    (1, 4, 6, 5, 1, 3, (1, 2), (0, 1, 0, 1), (1, 3)),
    (1, 2, 5, 5, 2, 2, (1, 1), (1, 0, 0, 1), (1, 1)),
    (2, 7, 4, 4, 3, 3, (1, 1), (3, 3, 3, 3), (1, 1)),   # padding wider than the kernel
    (1, 3, 3, 3, 3, 3, (2, 2), (0, 0, 0, 0), (1, 1)),   # one output pixel
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("block", [conv._DEPTHWISE_BLOCK, 5])
def test_depthwise_against_definition(case, block, monkeypatch):
    n, c, h, wd, kh, kw, strides, padding, dilation = case
    monkeypatch.setattr(conv, "_DEPTHWISE_BLOCK", block)  # 5: one channel per block
    x = RNG.standard_normal((n, c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((c, 1, kh, kw)).astype(np.float32)
    got = conv._conv2d_depthwise(x, w, strides, padding, dilation)
    assert got.shape == ref_depthwise(x, w, strides, padding, dilation).shape
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, ref_depthwise(x, w, strides, padding, dilation), rtol=1e-5, atol=1e-5)


def test_depthwise_float64_and_ints_exact():
    x = RNG.integers(-4, 5, (2, 3, 7, 8)).astype(np.int32)
    w = RNG.integers(-3, 4, (3, 1, 3, 3)).astype(np.int32)
    got = conv._conv2d_depthwise(x, w, (2, 1), (1, 2, 0, 1), (1, 2))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref_depthwise(x, w, (2, 1), (1, 2, 0, 1), (1, 2)).astype(np.int32))
    x64 = RNG.standard_normal((1, 4, 9, 9))
    w64 = RNG.standard_normal((4, 1, 3, 3))
    np.testing.assert_allclose(conv._conv2d_depthwise(x64, w64, (1, 1), (1, 1, 1, 1), (1, 1)),
                               ref_depthwise(x64, w64, (1, 1), (1, 1, 1, 1), (1, 1)), rtol=1e-12, atol=1e-12)


def _fused(name, args, **attrs):
    op = get(name)
    a = op.builder_attrs(attrs)
    out = op.kernel(args, a)
    want_type = op.type_relation([TensorType(v.shape, str(v.dtype)) for v in args], a)
    assert out.shape == tuple(want_type.shape) and str(out.dtype) == want_type.dtype
    return out


@pytest.mark.parametrize("case", CASES[:6], ids=[str(i) for i in range(6)])
@pytest.mark.parametrize("name", ["fused.conv2d_bias_relu", "fused.conv2d_bias", "fused.conv2d_relu",
                                  "fused.conv2d_maximum"])
def test_fused_depthwise_epilogue(case, name, monkeypatch):
    n, c, h, wd, kh, kw, strides, padding, dilation = case
    monkeypatch.setattr(conv, "_DEPTHWISE_BLOCK", 7)
    x = RNG.standard_normal((n, c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((c, 1, kh, kw)).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)
    want = ref_depthwise(x, w, strides, padding, dilation)
    args = [x, w]
    if "bias" in name:
        want = want + bias.reshape(1, c, 1, 1)
        args.append(bias)
    if name.endswith("relu"):
        want = np.maximum(want, 0)
    if name.endswith("maximum"):
        floor = RNG.standard_normal((c, 1, 1)).astype(np.float32)
        want = np.maximum(want, floor)
        args.append(floor)
    x_before = x.copy()
    got = _fused(name, args, strides=strides, padding=padding, dilation=dilation, groups=c,
                 channels=c, kernel_size=(kh, kw))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, x_before)  # the input is never written


def test_epilogue_declines_other_calls():
    """Layouts, dtypes and shapes the blocked epilogue does not handle fall back to the parts."""
    op = get("nn.conv2d")
    a = dict(op.resolve(op.builder_attrs({"groups": 3, "padding": (1, 1)})))
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 1, 3, 3)).astype(np.float32)
    assert conv.depthwise_with_epilogue(x, w, a, np.zeros(3, np.float64)) is None  # bias dtype
    assert conv.depthwise_with_epilogue(x, w, dict(a, padding=(-1, 0, 0, 0))) is None
    assert conv.depthwise_with_epilogue(x, w, dict(a, data_layout="NHWC")) is None
    assert conv.depthwise_with_epilogue(x, w, dict(a, out_dtype="float64")) is None
    # a grouped (not depthwise) convolution through the fused op still matches its parts
    xg = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
    wg = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    got = _fused("fused.conv2d_bias_relu", [xg, wg, bias], padding=(1, 1), groups=2, channels=6,
                 kernel_size=(3, 3))
    want = np.maximum(conv.conv2d_nchw(xg, wg, (1, 1), (1, 1, 1, 1), (1, 1), 2) + bias.reshape(1, 6, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_program_with_fused_depthwise_matches_original():
    """A depthwise block (conv, batch norm, relu) optimized under the latency model fuses, and the
    optimized program computes what the original does."""
    c = 6
    x = rg.var("x", shape=(2, c, 9, 9), dtype="float32")
    w = rg.const(RNG.standard_normal((c, 1, 3, 3)).astype(np.float32))
    y = rg.op.nn.conv2d(x, w, padding=(1, 1), strides=(2, 2), groups=c, channels=c, kernel_size=(3, 3))
    vec = [rg.const(RNG.uniform(0.5, 1.5, c).astype(np.float32)) for _ in range(4)]
    y = rg.op.nn.batch_norm(y, *vec)[0]
    mod = rg.IRModule.from_expr(rg.Function([x], rg.op.nn.relu(y)))
    res = rg.optimize(mod, cost="latency", check=False, repeats=1, timing_budget=0.0)
    ops = str(res.module)
    assert "fused.conv2d_bias_relu" in ops or "Primitive" in ops
    data = RNG.standard_normal((2, c, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-4, atol=1e-4)


def test_conv2d_maximum_on_other_convolutions_runs_in_place():
    """A grouped or dense convolution's maximum runs on its output in place: the parts' value."""
    x = RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
    for w, groups in ((RNG.standard_normal((6, 2, 3, 3)).astype(np.float32), 2),
                      (RNG.standard_normal((6, 4, 1, 1)).astype(np.float32), 1)):
        floor = RNG.standard_normal((6, 1, 1)).astype(np.float32)
        pad = (1, 1, 1, 1) if groups == 2 else (0, 0, 0, 0)
        got = _fused("fused.conv2d_maximum", [x, w, floor], groups=groups, padding=pad)
        want = np.maximum(conv.conv2d_nchw(x, w, (1, 1), pad, (1, 1), groups), floor)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a floor of another shape declines the blocked path and is broadcast by the parts
    xd = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    wd = RNG.standard_normal((3, 1, 3, 3)).astype(np.float32)
    got = _fused("fused.conv2d_maximum", [xd, wd, np.float32(0.25) * np.ones((1, 1, 1), np.float32)],
                 groups=3, padding=(1, 1))
    want = np.maximum(conv.conv2d_nchw(xd, wd, (1, 1), (1, 1, 1, 1), (1, 1), 3), 0.25)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mobilenet_block_runs_its_relu_in_the_depthwise_kernel():
    """Depthwise conv, batch norm, relu, 1x1 conv, batch norm, relu (flops model, so the structure
    does not depend on the machine): the first norm's shift moves into the 1x1 convolution's bias,
    its scale into the depthwise weights, and the relu's maximum into the depthwise kernel."""
    c, o = 6, 5
    x = rg.var("x", shape=(2, c, 9, 8), dtype="float32")

    def bn(y, n):
        vec = [rg.const(RNG.uniform(-1.0, 1.0, n).astype(np.float32)) for _ in range(3)]
        var = rg.const(RNG.uniform(0.5, 1.5, n).astype(np.float32))
        return rg.op.nn.batch_norm(y, vec[0], vec[1], vec[2], var)[0]

    y = rg.op.nn.conv2d(x, rg.const(RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)), padding=(1, 1),
                        strides=(2, 2), groups=c, channels=c, kernel_size=(3, 3))
    y = rg.op.nn.relu(bn(y, c))
    y = rg.op.nn.conv2d(y, rg.const(RNG.standard_normal((o, c, 1, 1)).astype(np.float32)), channels=o,
                        kernel_size=(1, 1))
    mod = rg.IRModule.from_expr(rg.Function([x], rg.op.nn.relu(bn(y, o))))
    res = rg.optimize(mod, cost="flops", check=False, repeats=1, timing_budget=0.0)
    data = RNG.standard_normal((2, c, 9, 8)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-4, atol=1e-4)
    assert res.ops_after.get("fused.conv2d_maximum") == 1, res.ops_after
    assert "nn.batch_norm" not in res.ops_after
