"""Winograd F(2x2, 3x3) and F(4x4, 3x3): the weight transform and the convolution on a transformed
weight (values against nn.conv2d, type errors), the fused Winograd ops, rules/conv.rules, and its
cpu cost."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.cpu_cost import WINOGRAD, default_profile, nearest, tile_waste, winograd_features
from relaygraph.errors import RelayTypeError
from relaygraph.ops.conv import conv2d_nchw
from relaygraph.ops.winograd import (
    WINOGRAD_A4T,
    WINOGRAD_B4T,
    WINOGRAD_G,
    WINOGRAD_G4,
    _band_rows,
    winograd_conv2d,
    winograd_weight,
)
from relaygraph.rewrite import load_rules
from relaygraph.rewrite.soundness import check_rules, format_results

CONV_RULES = "rules/conv.rules"
F32 = "float32"
HEADER = '#[version = "0.0.5"]\n'


def _program(x_shape, w_shape, call: str, extra: str = "", dtype=F32) -> rg.IRModule:
    params = f"%x: Tensor[{x_shape}, {dtype}], %w: Tensor[{w_shape}, {dtype}]{extra}"
    return rg.parse(HEADER + f"def @main({params}) {{\n  {call}\n}}\n")


@pytest.mark.parametrize("x_shape, out_channels, padding", [
    ((1, 3, 8, 8), 5, (1, 1, 1, 1)),
    ((2, 4, 9, 7), 3, (0, 0, 0, 0)),      # odd output: the last tile row and column are cropped
    ((1, 2, 6, 11), 4, (2, 0, 1, 3)),     # asymmetric padding
    ((1, 3, 10, 9), 2, (-1, 1, 0, -2)),   # negative padding crops, as nn.conv2d does
    # fewer tiles than output channels: the products by output channel (the weight as stored)
    ((2, 4, 3, 4), 40, (1, 1, 1, 1)),     # two images, an odd output height
    ((1, 5, 2, 2), 9, (1, 1, 1, 1)),      # one tile
    ((1, 3, 13, 14), 5, (1, 1, 1, 1)),    # F(4x4, 3x3): sides that whole 4x4 tiles overrun by 3 and 2
])
@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_matches_conv2d(x_shape, out_channels, padding, tile):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(F32)
    w = rng.standard_normal((out_channels, x_shape[1], 3, 3)).astype(F32)
    pad = ", ".join(str(p) for p in padding)
    mod = _program(x_shape, (out_channels, x_shape[1], 3, 3),
                   f"%0 = nn.contrib_conv2d_winograd_weight_transform(%w, tile_size={tile});\n"
                   "  nn.contrib_conv2d_winograd_without_weight_transform("
                   f"%x, %0, tile_size={tile}, padding=[{pad}])")
    got = rg.evaluate(mod, x, w)
    want = conv2d_nchw(x, w, (1, 1), padding, (1, 1), 1)
    assert got.shape == want.shape == tuple(rg.infer_type(mod)["main"].ret_type.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, o, padding", [
    ((1, 3, 13, 9), 2, (1, 1, 1, 1)),     # an odd output: the last band is one tile row, cropped
    ((2, 4, 12, 7), 3, (2, 0, 1, 3)),     # two images, asymmetric padding
    ((1, 2, 9, 6), 2, (6, 1, 5, 1)),      # bands wholly in the top and the bottom padding
    ((1, 3, 15, 8), 2, (-1, 1, 0, -2)),   # negative padding crops first
])
@pytest.mark.parametrize("epilogue", ["none", "bias", "relu", "bias_relu"])
@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_in_bands_matches_conv2d(x_shape, o, padding, epilogue, tile):
    # a band budget a few tile rows deep, so that small images take the large images' path
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(F32)
    w = rng.standard_normal((o, x_shape[1], 3, 3)).astype(F32)
    b = rng.standard_normal(o).astype(F32) if "bias" in epilogue else None
    relu = "relu" in epilogue
    n, c, height, width = x_shape
    tw = -(-(width + padding[1] + padding[3] - 2) // tile)
    th = -(-(height + padding[0] + padding[2] - 2) // tile)
    band_bytes = (tile + 2) ** 2 * tw * n * c * 4 // 2  # half a tile row: bands of two tile rows
    assert _band_rows(th, tw, n, c, 4, band_bytes, tile + 2) < th  # (more than one band)
    u = winograd_weight(w, tile)
    got = winograd_conv2d(x, u, padding, b, relu, band_bytes=band_bytes)
    whole = winograd_conv2d(x, u, padding, b, relu, band_bytes=1 << 40)
    want = conv2d_nchw(x, w, (1, 1), padding, (1, 1), 1)
    if b is not None:
        want = want + b[:, None, None]
    if relu:
        want = np.maximum(want, 0)
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)


def test_weight_transform_is_g_w_g_transposed():
    w = np.random.default_rng(1).standard_normal((2, 3, 3, 3)).astype(F32)
    u = winograd_weight(w)
    assert u.shape == (4, 4, 2, 3) and u.dtype == np.float32
    np.testing.assert_allclose(u[:, :, 1, 2], WINOGRAD_G @ w[1, 2] @ WINOGRAD_G.T, rtol=1e-6)
    u4 = winograd_weight(w, 4)
    assert u4.shape == (6, 6, 2, 3) and u4.dtype == np.float32
    np.testing.assert_allclose(u4[:, :, 1, 2], WINOGRAD_G4 @ w[1, 2] @ WINOGRAD_G4.T, rtol=1e-6)


def test_f4x4_matrices_compute_a_one_dimensional_correlation():
    # F(4, 3) in one dimension: A^T [(G g) * (B^T d)] is the 3-tap correlation of a 6-long input
    rng = np.random.default_rng(11)
    d, g = rng.standard_normal(6), rng.standard_normal(3)
    y = WINOGRAD_A4T @ ((WINOGRAD_G4 @ g) * (WINOGRAD_B4T @ d))
    np.testing.assert_allclose(y, np.correlate(d, g, mode="valid"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fused, tail", [
    ("fused.winograd_bias", "nn.bias_add(%1, %b)"),
    ("fused.winograd_relu", "nn.relu(%1)"),
    ("fused.winograd_bias_relu", "nn.relu(nn.bias_add(%1, %b))"),
])
@pytest.mark.parametrize("x_shape, o", [((1, 3, 7, 8), 4), ((2, 3, 3, 5), 24)])  # more tiles; more channels
@pytest.mark.parametrize("tile", [2, 4])
def test_fused_winograd_ops_match_their_parts(fused, tail, x_shape, o, tile):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape).astype(F32)
    w = rng.standard_normal((o, x_shape[1], 3, 3)).astype(F32)
    b = rng.standard_normal(o).astype(F32)
    bias = ", %b" if "bias" in fused else ""
    mod = _program(x_shape, (o, x_shape[1], 3, 3),
                   f"%0 = nn.contrib_conv2d_winograd_weight_transform(%w, tile_size={tile});\n"
                   f"  %1 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]);\n"
                   f"  ({fused}(%x, %0{bias}, tile_size={tile}, padding=[1, 1, 1, 1]), {tail})",
                   extra=f", %b: Tensor[({o}), float32]")
    got, want = rg.evaluate(mod, x, w, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("w_shape, call, message", [
    ((4, 4, 5, 3), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2, "
                   "strides=[2, 2])", "strides must be (1, 1)"),
    ((4, 4, 5, 3), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=3)",
     "tile_size=3 is not supported"),
    ((4, 4, 5, 3), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=4)",
     "must be a transformed weight (6, 6, O, I) for tile_size=4"),
    ((4, 4, 5, 2), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2)",
     "data has 3 channels but the weight takes 2"),
    ((5, 3, 3, 3), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2)",
     "must be a transformed weight (4, 4, O, I)"),
    ((4, 4, 5, 3), "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2, "
                   "data_layout=\"NHWC\")", "only NCHW data is supported"),
    ((5, 3, 5, 5), "nn.contrib_conv2d_winograd_weight_transform(%w, tile_size=2)",
     "must be 3 for Winograd"),
    ((5, 3, 3, 3), "nn.contrib_conv2d_winograd_weight_transform(%w, tile_size=6)",
     "tile_size=6 is not supported"),
])
def test_unsupported_winograd_calls_are_type_errors(w_shape, call, message):
    with pytest.raises(RelayTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rg.infer_type(_program((1, 3, 8, 8), w_shape, call))


def test_integer_data_is_refused():
    with pytest.raises(RelayTypeError, match="needs a float weight"):
        rg.infer_type(_program((1, 3, 8, 8), (5, 3, 3, 3),
                               "nn.contrib_conv2d_winograd_weight_transform(%w, tile_size=2)", dtype="int32"))


def test_cli_reports_a_bad_winograd_call_without_traceback(tmp_path, capsys):
    path = tmp_path / "bad.relay"
    path.write_text(rg.astext(_program((1, 3, 8, 8), (4, 4, 5, 3), "%w")).replace(
        "  %w\n",
        "  nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2, strides=[2, 2])\n"))
    assert main(["passes", "-p", "InferType", str(path)]) == 2
    captured = capsys.readouterr()
    assert "strides must be (1, 1)" in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_weight_transform_exports_to_onnx_and_the_convolution_is_refused_clearly(tile):
    from onnx.reference import ReferenceEvaluator

    w = np.random.default_rng(10).standard_normal((4, 3, 3, 3)).astype(F32)
    mod = _program((1, 3, 7, 8), (4, 3, 3, 3),
                   f"nn.contrib_conv2d_winograd_weight_transform(%w, tile_size={tile})")
    feeds = {"x": np.zeros((1, 3, 7, 8), F32), "w": w}
    (got,) = ReferenceEvaluator(rg.frontend.to_onnx(mod)).run(None, feeds)
    np.testing.assert_allclose(got, winograd_weight(w, tile), rtol=1e-5, atol=1e-6)
    conv = _program((1, 3, 7, 8), (4, 4, 5, 3),
                    "nn.contrib_conv2d_winograd_without_weight_transform(%x, %w, tile_size=2)")
    with pytest.raises(rg.RelayError, match="nn.contrib_conv2d_winograd_without_weight_transform"):
        rg.frontend.to_onnx(conv)


# -- the rules -------------------------------------------------------------------------------------
def test_conv_rules_are_sound():
    results = check_rules(load_rules(CONV_RULES))
    assert [r.rule for r in results] == ["conv2d-winograd", "conv2d-winograd-4x4", "fuse-winograd-bias",
                                         "fuse-winograd-relu",
                                         "fuse-winograd-bias-relu", "fuse-conv2d-add", "batch-norm-relu",
                                         "batch-norm-relu-scale-into-conv2d",
                                         "batch-norm-relu-scale-into-conv2d-batch-norm",
                                         "fold-batch-norm-conv2d-transpose", "conv2d-transpose-ihwo",
                                         "bias-relu-after-max-pool",
                                         "bias-relu-after-max-pool-3x3", "shift-through-conv2d-1x1-bias",
                                         "shift-through-conv2d-1x1-bias-add-relu",
                                         "fold-scale-maximum-conv2d", "preactivation-before-strided-1x1",
                                         "preactivation-maximum-before-strided-1x1",
                                         "preactivation-add-relu-before-strided-1x1",
                                         "preactivation-plain-maximum-before-strided-1x1",
                                         "conv2d-nhwc-pointwise", "conv2d-bias-nhwc-pointwise",
                                         "conv2d-bias-relu-nhwc-pointwise",
                                         "conv2d-nhwc-depthwise", "conv2d-maximum-nhwc-depthwise",
                                         "nhwc-round-trip"]
    assert all(r.status == "sound" for r in results), format_results(results)


def test_cli_checks_the_conv_rules(capsys):
    assert main(["rules", "check", CONV_RULES]) == 0
    out = capsys.readouterr().out
    assert "conv2d-winograd" in out and "26 sound" in out and "Traceback" not in out


def _conv_bias_relu(strides=(1, 1), kernel=3, seed=0, shape=(1, 8, 12, 12)):
    rng = np.random.default_rng(seed)
    x = rg.var("x", rg.TensorType(shape, F32))
    w = rg.var("w", rg.TensorType((8, 8, kernel, kernel), F32))
    b = rg.var("b", rg.TensorType((8,), F32))
    y = rg.op.nn.relu(rg.op.nn.bias_add(rg.op.nn.conv2d(x, w, strides=strides, padding=(1, 1)), b))
    mod = rg.IRModule.from_expr(rg.Function([x, w, b], y))
    params = {"w": rng.standard_normal((8, 8, kernel, kernel)).astype(F32),
              "b": rng.standard_normal(8).astype(F32)}
    return mod, params


def test_optimize_picks_winograd_with_its_weight_folded():
    mod, params = _conv_bias_relu()
    # the flops model: which kernel the cpu model picks depends on this machine's profile
    res = rg.optimize(mod, params=params, rules=["rules/fusion.rules", CONV_RULES], repeats=1,
                      timing_budget=0.0, keep_fused_ops=True, cost="flops")
    assert res.check_passed is True, res.check_text()
    assert "nn.conv2d" not in res.ops_after
    assert any("winograd" in op for op in res.ops_after)
    # the transformed weight is a constant: no weight transform runs
    assert "nn.contrib_conv2d_winograd_weight_transform" not in res.ops_after


@pytest.mark.parametrize("case", [dict(strides=(2, 2)), dict(kernel=5)])
def test_strided_and_larger_kernels_keep_the_direct_convolution(case):
    mod, params = _conv_bias_relu(**case)
    res = rg.optimize(mod, params=params, rules=[CONV_RULES], repeats=1, timing_budget=0.0,
                      keep_fused_ops=True, cost="flops")
    assert res.check_passed is True, res.check_text()
    assert not any("winograd" in op for op in res.ops_after)


def test_large_images_may_take_winograd():
    # no bound on the image: on 224x224 Winograd runs in bands and beats the direct kernel, whose
    # gathered columns leave the caches; the cost model decides (here flops) and the value is kept
    mod, params = _conv_bias_relu(shape=(1, 8, 6, 230))
    res = rg.optimize(mod, params=params, rules=[CONV_RULES], repeats=1, timing_budget=0.0,
                      keep_fused_ops=True, cost="flops")
    assert res.check_passed is True, res.check_text()
    assert any("winograd" in op for op in res.ops_after)


@pytest.mark.parametrize("x_shape, w_shape", [
    ("(n, 3, h, w)", "(4, 3, 3, 3)"),   # symbolic data: the rule may fire, the output stays symbolic
    ("(1, 3, 8, 8)", "(4, 3, k, k)"),   # a symbolic kernel size is not known to be 3x3: no Winograd
])
def test_symbolic_shapes_never_crash_the_winograd_rule(x_shape, w_shape):
    mod = rg.parse(HEADER + f"def @main(%x: Tensor[{x_shape}, float32], %w: Tensor[{w_shape}, float32]) {{\n"
                   "  nn.conv2d(%x, %w, padding=[1, 1])\n}\n")
    res = rg.optimize(mod, rules=[CONV_RULES], check=False, cost="flops")
    if "k" in w_shape:
        assert res.ops_after == {"nn.conv2d": 1}
        return
    x = np.random.default_rng(6).standard_normal((2, 3, 5, 7)).astype(F32)
    w = np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype(F32)
    np.testing.assert_allclose(rg.evaluate(res.module, x, w), rg.evaluate(mod, x, w), rtol=1e-4, atol=1e-4)


def test_residual_add_fuses_into_the_convolution():
    rng = np.random.default_rng(4)
    x = rg.var("x", rg.TensorType((1, 8, 6, 6), F32))
    w = rg.var("w", rg.TensorType((8, 8, 1, 1), F32))
    y = rg.op.add(rg.op.nn.conv2d(x, w), x)  # a 1x1 convolution and its shortcut
    mod = rg.IRModule.from_expr(rg.Function([x, w], y))
    res = rg.optimize(mod, params={"w": rng.standard_normal((8, 8, 1, 1)).astype(F32)},
                      rules=[CONV_RULES], repeats=1, timing_budget=0.0, keep_fused_ops=True, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert res.ops_after == {"fused.conv2d_add": 1}


@pytest.mark.parametrize("bn_attrs", [{}, {"scale": False, "epsilon": 1e-3}, {"center": False}])
def test_pre_activation_batch_norm_and_relu_become_one_kernel(bn_attrs):
    rng = np.random.default_rng(8)
    x = rg.var("x", rg.TensorType((2, 6, 5, 5), F32))
    vecs = [rg.var(n, rg.TensorType((6,), F32)) for n in "gbmv"]
    y = rg.op.nn.relu(rg.TupleGetItem(rg.op.nn.batch_norm(x, *vecs, **bn_attrs), 0))
    mod = rg.IRModule.from_expr(rg.Function([x, *vecs], y))
    params = {"g": rng.uniform(0.5, 2, 6), "b": rng.standard_normal(6), "m": rng.standard_normal(6),
              "v": rng.uniform(0.1, 2, 6)}
    params = {k: v.astype(F32) for k, v in params.items()}
    res = rg.optimize(mod, params=params, rules=[CONV_RULES], repeats=1, timing_budget=0.0,
                      keep_fused_ops=True, cost="latency")
    assert res.check_passed is True, res.check_text()
    # the scale and shift are constants: only the fused kernel runs
    assert res.ops_after == {"fused.multiply_add_relu": 1}


def test_batch_norm_folds_into_a_transposed_convolution():
    rng = np.random.default_rng(9)
    x = rg.var("x", rg.TensorType((1, 4, 5, 5), F32))
    w = rg.var("w", rg.TensorType((4, 3, 4, 4), F32))  # IOHW
    vecs = [rg.var(n, rg.TensorType((3,), F32)) for n in "gbmv"]
    y = rg.op.nn.conv2d_transpose(x, w, strides=(2, 2), padding=(1, 1))
    y = rg.op.nn.relu(rg.TupleGetItem(rg.op.nn.batch_norm(y, *vecs, epsilon=1e-3), 0))
    mod = rg.IRModule.from_expr(rg.Function([x, w, *vecs], y))
    params = {"w": rng.standard_normal((4, 3, 4, 4)), "g": rng.uniform(0.5, 2, 3),
              "b": rng.standard_normal(3), "m": rng.standard_normal(3), "v": rng.uniform(0.1, 2, 3)}
    params = {k: v.astype(F32) for k, v in params.items()}
    res = rg.optimize(mod, params=params, rules=[CONV_RULES], repeats=1, timing_budget=0.0,
                      keep_fused_ops=True, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert "nn.batch_norm" not in res.ops_after and res.ops_after.get("nn.conv2d_transpose") == 1


def test_conv2d_add_broadcasting_beyond_the_convolution_keeps_values():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 5, 5)).astype(F32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(F32)
    y = rng.standard_normal((2, 3, 3, 3)).astype(F32)  # the sum is larger than the convolution
    mod = _program((1, 2, 5, 5), (3, 2, 3, 3), "(fused.conv2d_add(%x, %w, %y), add(nn.conv2d(%x, %w), %y))",
                   extra=", %y: Tensor[(2, 3, 3, 3), float32]")
    got, want = rg.evaluate(mod, x, w, y)
    assert got.shape == (2, 3, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- the cpu cost ----------------------------------------------------------------------------------
def test_cpu_cost_is_the_direct_kernel_times_the_measured_ratio():
    model = default_profile(progress=False)
    rows = model.profile.winograd
    assert rows, "calibration measures Winograd against the direct kernel"
    x, out = rg.TensorType((1, 32, 28, 28), F32), rg.TensorType((1, 48, 28, 28), F32)
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    direct = model.kernel("nn.conv2d", attrs, [x, rg.TensorType((48, 32, 3, 3), F32)], out)
    wino = model.kernel(WINOGRAD, dict(attrs, tile_size=2), [x, rg.TensorType((4, 4, 48, 32), F32)], out)
    assert wino == pytest.approx(direct * nearest(rows, winograd_features(32, 48, 48 * 28 * 28)))
    bias = rg.TensorType((48,), F32)
    fused = model.kernel("fused.winograd_bias_relu", dict(attrs, tile_size=2),
                         [x, rg.TensorType((4, 4, 48, 32), F32), bias], out)
    # the fused kernel: the plain one, the bias added to one tile position's products (14x14
    # tiles), one relu pass over the output (not the direct kernel's fused ratio)
    tiles = rg.TensorType((14 * 14, 48), F32)
    epilogue = model.kernel("add", {}, [tiles, bias], tiles) + model.kernel("nn.relu", {}, [out], out)
    assert fused == pytest.approx(wino + epilogue)


def test_cpu_cost_prices_f4x4_from_its_own_rows_and_tile_waste():
    model = default_profile(progress=False)
    rows = model.profile.winograd4
    assert rows, "calibration measures F(4x4, 3x3) against the direct kernel"
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    for side in (28, 14):  # 4x4 tiles fit 28 exactly and overrun 14 (16x16 computed: 1.31x)
        x, out = rg.TensorType((1, 32, side, side), F32), rg.TensorType((1, 48, side, side), F32)
        direct = model.kernel("nn.conv2d", attrs, [x, rg.TensorType((48, 32, 3, 3), F32)], out)
        wino = model.kernel(WINOGRAD, dict(attrs, tile_size=4), [x, rg.TensorType((6, 6, 48, 32), F32)], out)
        ratio = nearest(rows, winograd_features(32, 48, 48 * side * side))
        assert wino == pytest.approx(direct * ratio * tile_waste(side, side, 4))
    assert tile_waste(14, 14, 4) == pytest.approx((16 / 14) ** 2) and tile_waste(28, 28, 4) == 1.0
    # the epilogue's bias goes into one tile position's products: 7x7 tiles of 4x4 on 28x28
    x, out = rg.TensorType((1, 32, 28, 28), F32), rg.TensorType((1, 48, 28, 28), F32)
    bias = rg.TensorType((48,), F32)
    plain = model.kernel(WINOGRAD, dict(attrs, tile_size=4), [x, rg.TensorType((6, 6, 48, 32), F32)], out)
    fused = model.kernel("fused.winograd_bias", dict(attrs, tile_size=4),
                         [x, rg.TensorType((6, 6, 48, 32), F32), bias], out)
    tiles = rg.TensorType((7 * 7, 48), F32)
    assert fused == pytest.approx(plain + model.kernel("add", {}, [tiles, bias], tiles))
    # a profile without F(4x4, 3x3)'s rows never prices it below the kernels it measured
    model.profile.winograd4 = []
    try:
        assert model.kernel(WINOGRAD, dict(attrs, tile_size=4), [x, rg.TensorType((6, 6, 48, 32), F32)],
                            out) == float("inf")
    finally:
        model.profile.winograd4 = rows


# -- the depthwise kernel's channels-last path (small images, many channels) -----------------------
@pytest.mark.parametrize("shape, strides, padding, dilation", [
    ((2, 64, 9, 7), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 64, 10, 11), (2, 2), (1, 0, 2, 1), (1, 1)),
    ((1, 96, 12, 12), (1, 2), (2, 2, 2, 2), (2, 1)),
])
def test_depthwise_channels_last_path_matches_a_direct_sum(shape, strides, padding, dilation):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(F32)
    w = rng.standard_normal((shape[1], 1, 3, 3)).astype(F32)
    got = conv2d_nchw(x, w, strides, padding, dilation, shape[1])
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])))
    (sh, sw), (dh, dw) = strides, dilation
    oh, ow = got.shape[2:]
    want = np.zeros_like(got)
    for i in range(3):
        for j in range(3):
            view = xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            want += view * w[:, 0, i, j].reshape(1, -1, 1, 1)
    assert got.flags.c_contiguous and oh <= 28
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
