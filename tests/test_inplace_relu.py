"""The fused kernels' in-place relu (``ops.inplace.relu_in_place``): the same values as
``np.maximum(y, 0)`` on every size, layout and dtype, and the fused ops using it (Winograd's
epilogue, the convolution and scale-shift epilogues) against their unfused definitions on arrays
large enough to take its fast path."""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ops.inplace import _ROW, _zero_row, relu, relu_in_place

T = rg.TensorType


@pytest.mark.parametrize("size", [1, _ROW - 1, _ROW, _ROW + 3, 3 * _ROW, 5 * _ROW + 17])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_relu_in_place_matches_maximum_with_zero(size, dtype):
    y = np.random.default_rng(size).standard_normal(size).astype(dtype)
    want = np.maximum(y, np.asarray(0, dtype))
    got = relu_in_place(y)
    assert got is y and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


def test_relu_in_place_keeps_nan_and_clamps_infinities():
    y = np.random.default_rng(0).standard_normal(2 * _ROW + 5).astype(np.float32)
    y[[0, 7, _ROW + 1, 2 * _ROW + 4]] = [np.nan, -np.inf, np.inf, -np.nan]
    y[9] = -0.0
    want = np.maximum(y, np.float32(0))
    relu_in_place(y)
    np.testing.assert_array_equal(y, want)  # NaN where np.maximum has NaN
    assert np.isnan(y[0]) and np.isnan(y[2 * _ROW + 4]) and y[7] == 0 and y[_ROW + 1] == np.inf


@pytest.mark.parametrize("view", ["transposed", "strided", "int32", "2-d"])
def test_relu_in_place_on_views_and_integers(view):
    base = np.random.default_rng(1).standard_normal((96, 160)).astype(np.float32)
    if view == "int32":
        base = (base * 100).astype(np.int32)
    arr = {"transposed": base.T, "strided": base[:, ::2], "int32": base, "2-d": base}[view]
    want = np.maximum(arr, 0)
    got = relu_in_place(arr)
    assert got is arr
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, base)  # written where the view points, no copy


def test_the_zero_row_is_read_only_and_stays_zero():
    row = _zero_row(np.dtype(np.float32))
    assert not row.flags.writeable and row.size == _ROW
    relu_in_place(np.full(3 * _ROW, -1.0, np.float32))
    assert not row.any()


def _evaluate(params, body, *values):
    return rg.evaluate(rg.Function(params, body), *values)


@pytest.mark.parametrize("shape, out_channels", [
    ((1, 8, 30, 30), 16), ((2, 5, 17, 21), 14),
    ((2, 4, 23, 19), 96),  # the NCHW copy in 12 bands of 2 rows, the last one short
])
@pytest.mark.parametrize("name", ["fused.winograd_relu", "fused.winograd_bias_relu"])
def test_winograd_relu_on_large_outputs_matches_the_direct_convolution(shape, out_channels, name):
    """Also the output transform's banded NCHW copy (odd sizes crop the last tile row and column)."""
    r = np.random.default_rng(3)
    x = r.standard_normal(shape).astype(np.float32)
    w = r.standard_normal((out_channels, shape[1], 3, 3)).astype(np.float32)
    b = r.standard_normal(out_channels).astype(np.float32)
    xv, wv, bv = (rg.var(n, T(a.shape, "float32")) for n, a in (("x", x), ("w", w), ("b", b)))
    u = rg.op.nn.contrib_conv2d_winograd_weight_transform(wv, tile_size=2)
    has_bias = "bias" in name
    fused = getattr(rg.op.fused, name.split(".")[1])(*((xv, u, bv) if has_bias else (xv, u)),
                                                      tile_size=2, padding=(1, 1))
    direct = rg.op.nn.conv2d(xv, wv, padding=(1, 1))
    direct = rg.op.nn.relu(rg.op.nn.bias_add(direct, bv) if has_bias else direct)
    got = _evaluate([xv, wv, bv], fused, x, w, b)
    want = _evaluate([xv, wv, bv], direct, x, w, b)
    assert got.size > _ROW and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert got.min() == 0 and (got == 0).mean() > 0.2


def test_fused_convolution_bias_relu_and_scale_shift_relu_match_their_parts():
    r = np.random.default_rng(4)
    x = r.standard_normal((1, 6, 40, 40)).astype(np.float32)
    w = r.standard_normal((12, 6, 1, 1)).astype(np.float32)
    b, s = r.standard_normal(12).astype(np.float32), r.standard_normal((6, 1, 1)).astype(np.float32)
    t = r.standard_normal((6, 1, 1)).astype(np.float32)
    xv, wv, bv, sv, tv = (rg.var(n, T(a.shape, "float32"))
                          for n, a in (("x", x), ("w", w), ("b", b), ("s", s), ("t", t)))
    params = [xv, wv, bv, sv, tv]
    cases = [
        (rg.op.fused.conv2d_bias_relu(xv, wv, bv),
         rg.op.nn.relu(rg.op.nn.bias_add(rg.op.nn.conv2d(xv, wv), bv))),
        (rg.op.fused.multiply_add_relu(xv, sv, tv), rg.op.nn.relu(rg.op.add(rg.op.multiply(xv, sv), tv))),
    ]
    for fused, parts in cases:
        got = _evaluate(params, fused, x, w, b, s, t)
        want = _evaluate(params, parts, x, w, b, s, t)
        assert got.size > _ROW
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(5,), (1, 64, 56, 56), (3, _ROW + 7)])
def test_nn_relu_runs_the_same_loop_and_leaves_its_input(shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, -np.inf, -0.0]
    before = x.copy()
    got = relu(x)
    assert got is not x and got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, np.maximum(before, np.float32(0)))
    np.testing.assert_array_equal(x, before)  # a new array: the input is not touched
    np.testing.assert_array_equal(relu(x.T), np.maximum(before.T, np.float32(0)))  # a view
    v = rg.Var("x", rg.TensorType(shape, "float32"))
    out = rg.evaluate(rg.IRModule.from_expr(rg.Function([v], rg.op.nn.relu(v))), x)
    np.testing.assert_array_equal(out, np.maximum(before, np.float32(0)))


@pytest.mark.parametrize("op", ["fused.dense_bias_relu", "fused.dense_bias", "fused.dense_relu",
                                "fused.matmul_bias"])
@pytest.mark.parametrize("x_shape", [(1, 64), (2, 3, 64), (200, 64)])  # the last one: 12,800 outputs
def test_fused_products_write_their_epilogue_into_the_product_and_leave_the_inputs(op, x_shape):
    r = np.random.default_rng(5)
    x = r.standard_normal(x_shape).astype(np.float32)
    x.reshape(-1)[0] = np.nan
    w = r.standard_normal((64, 64)).astype(np.float32)
    b = r.standard_normal(64).astype(np.float32)
    args = [x, w, b] if "bias" in op else [x, w]
    before = [a.copy() for a in args]
    got = rg.ops.get(op).kernel(args, {})
    y = x @ (w if op.startswith("fused.matmul") else w.T)
    want = np.maximum(y + b, 0) if op.endswith("bias_relu") else y + b if "bias" in op else np.maximum(y, 0)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(got.reshape(-1)[:64]).all()  # the NaN's row stays NaN, through the relu too
    for a, kept in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, kept)


def test_a_fused_product_with_a_bias_of_another_dtype_takes_the_general_path():
    r = np.random.default_rng(6)
    x, w = r.standard_normal((2, 8)).astype(np.float32), r.standard_normal((5, 8)).astype(np.float32)
    b = r.standard_normal(5)  # float64: not added in place into the float32 product
    got = rg.ops.get("fused.dense_bias_relu").kernel([x, w, b], {})
    want = rg.ops.get("nn.relu").kernel([rg.ops.get("nn.bias_add").kernel([x @ w.T, b], {"axis": -1})])
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
