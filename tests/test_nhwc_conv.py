"""Channels-last (NHWC) convolutions: the native NHWC kernels (1x1 as one product, depthwise over
channels-last phase planes with its epilogue per block of rows) against the NCHW definition; the
fused ops on them; the conv.rules layout rules evaluated before and after; the cpu model's price
of an NHWC depthwise convolution; ONNX export of the NHWC form."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_depthwise_kernel import CASES, ref_depthwise

import relaygraph as rg
from relaygraph.egraph import cpu_cost
from relaygraph.egraph.cost import COST_MODELS, flops
from relaygraph.ir import TensorType
from relaygraph.ops import conv, get

RNG = np.random.default_rng(11)


def _nhwc(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _hwio(w):
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0))


def _run(name, args, **attrs):
    """``name``'s kernel on ``args`` (NHWC data, HWIO weight), checked against its type relation."""
    op = get(name)
    a = op.builder_attrs(dict(attrs, data_layout="NHWC", kernel_layout="HWIO"))
    out = op.kernel(args, a)
    want = op.type_relation([TensorType(v.shape, str(v.dtype)) for v in args], a)
    assert out.shape == tuple(want.shape) and str(out.dtype) == want.dtype
    return out


# The two channels-last depthwise kernels, each with its usual blocks and with one row per block:
# (path, block of the tap-by-tap kernel, band of the windowed one)
PATHS = [("taps", conv._NHWC_BLOCK, None), ("taps", 5, None), ("windows", None, conv._WINDOWS_BAND),
         ("windows", None, 5)]
PATH_IDS = ["taps", "taps-row-blocks", "windows", "windows-row-bands"]


def _use_path(monkeypatch, path) -> None:
    """Route channels-last depthwise convolutions of any width through one kernel."""
    kind, block, band = path
    monkeypatch.setattr(conv, "_WINDOWS_MIN_CHANNELS", 1 if kind == "windows" else 1 << 30)
    if block is not None:
        monkeypatch.setattr(conv, "_NHWC_BLOCK", block)
    if band is not None:
        monkeypatch.setattr(conv, "_WINDOWS_BAND", band)


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("path", PATHS, ids=PATH_IDS)
def test_depthwise_nhwc_against_definition(case, path, monkeypatch):
    n, c, h, wd, kh, kw, strides, padding, dilation = case
    _use_path(monkeypatch, path)
    x = RNG.standard_normal((n, c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((c, 1, kh, kw)).astype(np.float32)
    got = _run("nn.conv2d", [_nhwc(x), _hwio(w)], strides=strides, padding=padding, dilation=dilation,
               groups=c, channels=c, kernel_size=(kh, kw))
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), ref_depthwise(x, w, strides, padding, dilation),
                               rtol=1e-5, atol=1e-5)


def test_pointwise_nhwc_is_one_product_and_others_fall_back():
    """1x1 stride 1 runs as one product; a strided, padded, grouped or int convolution in NHWC
    falls back to the canonical kernel and still matches NCHW."""
    x = RNG.standard_normal((2, 6, 6, 7)).astype(np.float32)
    cases = [((4, 6, 1, 1), (1, 1), (0, 0, 0, 0), 1), ((4, 6, 1, 1), (2, 2), (0, 0, 0, 0), 1),
             ((4, 6, 3, 3), (1, 1), (1, 1, 1, 1), 1), ((6, 2, 3, 3), (1, 1), (1, 1, 1, 1), 3)]
    for wshape, strides, pad, groups in cases:
        w = RNG.standard_normal(wshape).astype(np.float32)
        got = _run("nn.conv2d", [_nhwc(x), _hwio(w)], strides=strides, padding=pad, groups=groups)
        want = conv.conv2d_nchw(x, w, strides, pad, (1, 1), groups)
        np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-5)
    xi = RNG.integers(-3, 4, (1, 3, 4, 4)).astype(np.int32)
    wi = RNG.integers(-3, 4, (2, 3, 1, 1)).astype(np.int32)
    got = _run("nn.conv2d", [_nhwc(xi), _hwio(wi)])
    want = conv.conv2d_nchw(xi, wi, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    np.testing.assert_array_equal(got.transpose(0, 3, 1, 2), want)


@pytest.mark.parametrize("case", CASES[:6], ids=[str(i) for i in range(6)])
@pytest.mark.parametrize("name", ["fused.conv2d_bias_relu", "fused.conv2d_bias", "fused.conv2d_relu",
                                  "fused.conv2d_maximum"])
@pytest.mark.parametrize("path", [("taps", 7, None), ("windows", None, 7)], ids=["taps", "windows"])
def test_fused_depthwise_nhwc_epilogue(case, name, path, monkeypatch):
    """The fused ops on an NHWC depthwise convolution: bias and floor are channel vectors (C,);
    the epilogue runs on every block (a few rows each here) of either kernel."""
    n, c, h, wd, kh, kw, strides, padding, dilation = case
    _use_path(monkeypatch, path)
    x = RNG.standard_normal((n, c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((c, 1, kh, kw)).astype(np.float32)
    want = ref_depthwise(x, w, strides, padding, dilation).transpose(0, 2, 3, 1)
    args = [_nhwc(x), _hwio(w)]
    if "bias" in name:
        bias = RNG.standard_normal(c).astype(np.float32)
        want = want + bias
        args.append(bias)
    if name.endswith("relu"):
        want = np.maximum(want, 0)
    if name.endswith("maximum"):
        floor = RNG.standard_normal(c).astype(np.float32)
        want = np.maximum(want, floor)
        args.append(floor)
    before = args[0].copy()
    got = _run(name, args, strides=strides, padding=padding, dilation=dilation, groups=c, channels=c,
               kernel_size=(kh, kw))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(args[0], before)  # the input is never written


def test_windowed_depthwise_float64_and_its_channel_threshold(monkeypatch):
    """The windowed kernel keeps float64 (to float64's precision), and a channels-last depthwise
    convolution takes it from ``_WINDOWS_MIN_CHANNELS`` channels up, the tap-by-tap one below."""
    x = RNG.standard_normal((2, 6, 9, 8))
    w = RNG.standard_normal((6, 1, 3, 3))
    got = conv._depthwise_nhwc_windows(_nhwc(x), _hwio(w), (2, 1), (1, 2, 0, 1), (1, 2))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), ref_depthwise(x, w, (2, 1), (1, 2, 0, 1), (1, 2)),
                               rtol=1e-12, atol=1e-12)
    taken = []
    for kind in ("windows", "taps"):
        monkeypatch.setattr(conv, f"_depthwise_nhwc_{kind}", lambda *a, kind=kind, **k: taken.append(kind))
    for c in (conv._WINDOWS_MIN_CHANNELS - 1, conv._WINDOWS_MIN_CHANNELS, 2 * conv._WINDOWS_MIN_CHANNELS):
        conv._conv2d_depthwise_nhwc(np.zeros((1, 4, 4, c), np.float32), np.zeros((3, 3, 1, c), np.float32),
                                    (1, 1), (1, 1, 1, 1), (1, 1))
    assert taken == ["taps", "windows", "windows"]


def test_nhwc_epilogue_declines_other_calls():
    """Layouts, dtypes and shapes the channels-last epilogue does not handle return None, and the
    fused op then runs its parts."""
    op = get("nn.conv2d")
    a = dict(op.resolve(op.builder_attrs({"groups": 3, "padding": (1, 1), "data_layout": "NHWC",
                                          "kernel_layout": "HWIO"})))
    x = _nhwc(RNG.standard_normal((1, 3, 5, 5)).astype(np.float32))
    w = _hwio(RNG.standard_normal((3, 1, 3, 3)).astype(np.float32))
    assert conv.depthwise_nhwc_with_epilogue(x, w, a, np.zeros(3, np.float64)) is None  # bias dtype
    assert conv.depthwise_nhwc_with_epilogue(x, w, a, floor=np.zeros((3, 1, 1), np.float32)) is None
    assert conv.depthwise_nhwc_with_epilogue(x, w, dict(a, padding=(-1, 0, 0, 0))) is None
    assert conv.depthwise_nhwc_with_epilogue(x, w, dict(a, data_layout="NCHW")) is None
    assert conv.depthwise_nhwc_with_epilogue(x.astype(np.float16), w.astype(np.float16), a) is None
    # a floor that broadcasts as a scalar takes the parts' path
    got = _run("fused.conv2d_maximum", [x, w, np.full((1,), 0.25, np.float32)], groups=3, padding=(1, 1))
    want = np.maximum(conv.conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (1, 1), (1, 1, 1, 1),
                                       (1, 1), 3), 0.25)
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-5)


def _mobilenet_tail(c=8, o=12, size=7):
    """Depthwise conv, batch norm, relu, 1x1 conv, batch norm, relu, twice: MobileNet's last layers."""
    x = rg.var("x", shape=(1, c, size, size), dtype="float32")

    def bn(y, n):
        vec = [rg.const(RNG.uniform(-1.0, 1.0, n).astype(np.float32)) for _ in range(3)]
        var = rg.const(RNG.uniform(0.5, 1.5, n).astype(np.float32))
        return rg.op.nn.batch_norm(y, vec[0], vec[1], vec[2], var)[0]

    y = x
    for cin, cout in ((c, o), (o, o)):
        dw = rg.const(RNG.standard_normal((cin, 1, 3, 3)).astype(np.float32))
        y = rg.op.nn.conv2d(y, dw, padding=(1, 1), groups=cin, channels=cin, kernel_size=(3, 3))
        y = rg.op.nn.relu(bn(y, cin))
        y = rg.op.nn.conv2d(y, rg.const(RNG.standard_normal((cout, cin, 1, 1)).astype(np.float32)),
                            channels=cout, kernel_size=(1, 1))
        y = rg.op.nn.relu(bn(y, cout))
    return rg.IRModule.from_expr(rg.Function([x], y)), (1, c, size, size)


def _nhwc_favoured(op, attrs, arg_types, out_type):
    """FLOPs, with channels-last convolutions ten times cheaper: a model under which the layout
    rules must pay (the structure does not depend on this machine's profile)."""
    cost = flops(op, attrs, arg_types, out_type)
    if op in ("nn.conv2d", "fused.conv2d_bias", "fused.conv2d_bias_relu", "fused.conv2d_maximum") \
            and attrs is not None and dict(attrs).get("data_layout") == "NHWC":
        return cost / 10.0
    return cost


def test_layout_rules_take_a_run_of_convolutions_channels_last(monkeypatch):
    """Under a model that favours NHWC, every convolution of the tail runs channels-last with one
    transpose in and one out (the ones between cancel), and the program's value is unchanged."""
    monkeypatch.setitem(COST_MODELS, "nhwc-favoured", _nhwc_favoured)
    mod, shape = _mobilenet_tail()
    res = rg.optimize(mod, cost="nhwc-favoured", check=False, repeats=1, timing_budget=0.0)
    text = str(res.module)
    assert text.count('data_layout="NHWC"') == 4, text
    assert res.ops_after.get("transpose") == 2, res.ops_after
    # the op counts say fused convolutions replaced plain ones; the layout counts say where they run
    assert res.layouts_before == {"nn.conv2d NCHW/OIHW": 4}
    assert res.layouts_after == {"nn.conv2d NHWC/HWIO": 4}, res.layouts_after
    assert "layouts changed" in res.summary()
    assert "nn.conv2d NCHW/OIHW 4->0, nn.conv2d NHWC/HWIO 0->4" in res.summary()
    assert res.to_json()["layouts_after"] == {"nn.conv2d NHWC/HWIO": 4}
    data = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-4, atol=1e-4)


def test_layout_rules_leave_large_images_and_latency_model_alone():
    """Images over 56 pixels keep NCHW; under the latency model (no layout preference) the
    transposes never pay."""
    mod, shape = _mobilenet_tail(c=4, o=4, size=60)
    for m in (mod, _mobilenet_tail()[0]):
        res = rg.optimize(m, cost="latency", check=False, repeats=1, timing_budget=0.0)
        assert "NHWC" not in str(res.module)
        assert "transpose" not in res.ops_after
        # fusing the convolutions changes the op counts, not the layouts
        assert res.layouts_after == res.layouts_before == {"nn.conv2d NCHW/OIHW": 4}
        assert re.search(r"^layouts changed +none$", res.summary(), re.M), res.summary()


def test_cpu_model_prices_nhwc_depthwise_by_its_measured_ratio():
    """The cpu model prices an NHWC depthwise convolution as the NCHW one times the channels-last
    ratio calibrated nearest its shape."""
    model = cpu_cost.default_profile(progress=False)
    rows = model.profile.depthwise_nhwc
    assert rows and all(r[-1] > 0 for r in rows)
    attrs = {"padding": (1, 1), "groups": 32, "channels": 32, "kernel_size": (3, 3)}
    nchw = model.kernel("nn.conv2d", attrs, [TensorType((1, 32, 14, 14), "float32"),
                                            TensorType((32, 1, 3, 3), "float32")],
                        TensorType((1, 32, 14, 14), "float32"))
    nhwc = model.kernel("nn.conv2d", dict(attrs, data_layout="NHWC", kernel_layout="HWIO"),
                        [TensorType((1, 14, 14, 32), "float32"), TensorType((3, 3, 1, 32), "float32")],
                        TensorType((1, 14, 14, 32), "float32"))
    ratio = cpu_cost.nearest(rows, cpu_cost.depthwise_features(32, 14, 32 * 196.0))
    assert nhwc == pytest.approx(nchw * ratio)


def test_cpu_model_prices_nhwc_pointwise_by_its_measured_ratio():
    """A channels-last 1x1 convolution is the NCHW one times the ratio calibrated nearest its
    shape (a fused one too, through its anchor); a 3x3 one is not a single product: no ratio."""
    model = cpu_cost.default_profile(progress=False)
    rows = model.profile.pointwise_nhwc
    assert rows and all(r[-1] > 0 for r in rows)
    nchw_types = [TensorType((1, 64, 7, 7), "float32"), TensorType((96, 64, 1, 1), "float32")]
    nhwc_types = [TensorType((1, 7, 7, 64), "float32"), TensorType((1, 1, 64, 96), "float32")]
    nhwc_attrs = {"data_layout": "NHWC", "kernel_layout": "HWIO"}
    ratio = cpu_cost.nearest(rows, cpu_cost.conv_features(96, 64, 1, 1, 96 * 49.0))
    for op, extra in (("nn.conv2d", []), ("fused.conv2d_bias_relu", [TensorType((96,), "float32")])):
        nchw = model.kernel(op, {}, nchw_types + extra, TensorType((1, 96, 7, 7), "float32"))
        nhwc = model.kernel(op, nhwc_attrs, nhwc_types + extra, TensorType((1, 7, 7, 96), "float32"))
        assert nhwc == pytest.approx(nchw * ratio)
    # a 3x3 one (not a single product) takes no ratio, even from rows that would double it
    doubled = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data,
                                                     pointwise_nhwc=[[*r[:-1], 2.0] for r in rows])))
    x3, w3 = TensorType((1, 64, 7, 7), "float32"), TensorType((96, 64, 3, 3), "float32")
    x3l, w3l = TensorType((1, 7, 7, 64), "float32"), TensorType((3, 3, 64, 96), "float32")
    three = doubled.kernel("nn.conv2d", dict(nhwc_attrs, padding=(1, 1)), [x3l, w3l],
                           TensorType((1, 7, 7, 96), "float32"))
    out_nchw, out_nhwc = TensorType((1, 96, 7, 7), "float32"), TensorType((1, 7, 7, 96), "float32")
    assert three == doubled.kernel("nn.conv2d", {"padding": (1, 1)}, [x3, w3], out_nchw)
    one = doubled.kernel("nn.conv2d", nhwc_attrs, nhwc_types, out_nhwc)
    assert one == pytest.approx(2.0 * doubled.kernel("nn.conv2d", {}, nchw_types, out_nchw))


def test_nhwc_program_exports_to_onnx():
    """The channels-last form exports: its convolutions as ONNX Conv between transposes."""
    from relaygraph.frontend import from_onnx, to_onnx

    x = rg.var("x", shape=(1, 7, 7, 4), dtype="float32")
    w = rg.const(RNG.standard_normal((3, 3, 1, 4)).astype(np.float32))
    floor = rg.const(RNG.standard_normal(4).astype(np.float32))
    y = rg.op.maximum(rg.op.nn.conv2d(x, w, padding=(1, 1), groups=4, channels=4, kernel_size=(3, 3),
                                      data_layout="NHWC", kernel_layout="HWIO"), floor)
    mod = rg.IRModule.from_expr(rg.Function([x], y))
    model = to_onnx(mod)
    assert "Conv" in [n.op_type for n in model.graph.node]
    back, _ = from_onnx(model)  # weights frozen into the program
    data = RNG.standard_normal((1, 7, 7, 4)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(back, data), rg.evaluate(mod, data), rtol=1e-5, atol=1e-5)


def test_cpu_model_prices_a_layout_change_as_the_copy_it_costs():
    """NCHW <-> NHWC transposes cost the permuting copy (their calibrated curves, growing with
    size); any other transpose keeps the op's own curve."""
    model = cpu_cost.default_profile(progress=False)
    small, big = TensorType((1, 8, 8, 8), "float32"), TensorType((1, 64, 28, 28), "float32")
    for axes, curve in (((0, 2, 3, 1), "transpose_nhwc"), ((0, 3, 1, 2), "transpose_nchw")):
        points = model.profile.curve(curve)
        assert points and all(p[1] > 0 for p in points)
        assert model.kernel("transpose", {"axes": axes}, [big], big) == pytest.approx(
            cpu_cost.curve_at(points, 64 * 28 * 28))
        assert model.kernel("transpose", {"axes": axes}, [small], small) < \
            model.kernel("transpose", {"axes": axes}, [big], big)
    other = model.kernel("transpose", {"axes": (0, 1, 3, 2)}, [big], big)
    assert other == pytest.approx(cpu_cost.curve_at(model.profile.curve("transpose"), 64 * 28 * 28))
