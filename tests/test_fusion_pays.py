"""Fused ops that pay on a CPU: the ``cpu`` model never prices a fused op above its parts (or the
fused op it extends) run separately, and the fused kernels added for ResNet v2 and BERT compute
what their parts compute.

The suite's profile is the quick calibration conftest.py points ``$RELAYGRAPH_PROFILE_DIR`` at."""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.egraph import cpu_cost
from relaygraph.egraph.cpu_cost import default_profile
from relaygraph.ops.fused_ops import FUSED_OPS, definition

T = rg.TensorType


@pytest.fixture(scope="module")
def model():
    return default_profile(progress=False)


def _examples():
    """(fused op, arg types, resolved attrs, out type) for every example of every fused op."""
    cases = []
    for name in sorted(n for n in FUSED_OPS if definition(n) is not None):
        record = rg.ops.lookup(name)
        for types, attrs in record.examples:
            full = record.resolve(attrs)
            cases.append((name, list(types), full, record.type_relation(list(types), full)))
    return cases


def test_every_fused_op_has_examples_to_check():
    assert {c[0] for c in _examples()} == {n for n in FUSED_OPS if definition(n) is not None}


@pytest.mark.parametrize("case", _examples(), ids=lambda c: f"{c[0]}{[t.shape for t in c[1]]}")
def test_a_fused_op_costs_no_more_than_its_parts_run_separately(model, case):
    name, types, attrs, out = case
    cost = model(name, attrs, types, out)
    parts = [model._part_call(p, attrs, types, out) for p in definition(name).parts]
    separate = sum(model(*p) for p in parts)
    assert cost <= separate - (len(parts) - 1) * model.profile.dispatch + 1e-15
    prefix = cpu_cost._prefix_op(name)
    if prefix is not None:  # ... nor more than the fused op it extends with the steps after it
        head, k, n_args = prefix
        extended = model(head, rg.ops.lookup(head).resolve(attrs), types[:n_args], out)
        steps = sum(min(model.kernel(*p), model(*p) - model.profile.dispatch) for p in parts[k:])
        assert cost <= extended + steps + 1e-15
        assert cost < extended + sum(model(*p) for p in parts[k:])  # fusing the steps always pays


def test_prefixes_are_the_fused_ops_a_step_extends():
    assert cpu_cost._prefix_op("fused.conv2d_bias_relu") == ("fused.conv2d_bias", 2, 3)
    assert cpu_cost._prefix_op("fused.winograd_bias_relu") == ("fused.winograd_bias", 2, 3)
    assert cpu_cost._prefix_op("fused.matmul_bias_gelu") == ("fused.matmul_bias", 2, 3)
    assert cpu_cost._prefix_op("fused.multiply_add_relu") == ("fused.multiply_add", 2, 3)
    # a different step on the same anchor is no prefix: conv2d_add does not extend conv2d_bias
    assert cpu_cost._prefix_op("fused.conv2d_add") is None
    assert cpu_cost._prefix_op("fused.conv2d_bias") is None


@pytest.mark.parametrize("c, o, hw", [(256, 64, 56), (1024, 256, 14)])
def test_fusing_the_relu_after_a_fused_convolution_is_never_predicted_slower(model, c, o, hw):
    """ResNet-50's 1x1 convolutions: conv2d_bias then relu must not look cheaper than
    conv2d_bias_relu (the calibrated ratios of the two ops alone differ by noise)."""
    attrs = rg.ops.lookup("fused.conv2d_bias").resolve({"padding": (0, 0), "channels": o,
                                                        "kernel_size": (1, 1)})
    x, w, b, y = T((1, c, hw, hw), "float32"), T((o, c, 1, 1), "float32"), T((o,), "float32"), \
        T((1, o, hw, hw), "float32")
    fused = model("fused.conv2d_bias_relu", attrs, [x, w, b], y)
    apart = model("fused.conv2d_bias", attrs, [x, w, b], y) + model("nn.relu", {}, [y], y)
    assert fused < apart


# -- fused.add_layer_norm's float32 kernel ---------------------------------------------------------
def _add_layer_norm(a, b, g, be, **attrs):
    x, y = rg.var("x", T(a.shape, str(a.dtype))), rg.var("y", T(b.shape, str(b.dtype)))
    gv, bv = rg.var("g", T(g.shape, str(g.dtype))), rg.var("be", T(be.shape, str(be.dtype)))
    fused = rg.Function([x, y, gv, bv], rg.op.fused.add_layer_norm(x, y, gv, bv, **attrs))
    apart = rg.Function([x, y, gv, bv], rg.op.nn.layer_norm(rg.op.add(x, y), gv, bv, **attrs))
    return rg.evaluate(fused, a, b, g, be), rg.evaluate(apart, a, b, g, be)


@pytest.mark.parametrize("shape, other, attrs", [
    ((1, 128, 768), (1, 128, 768), {"epsilon": 1e-12}),
    ((4, 6, 8), (8,), {}),
    ((2, 3, 5), (3, 1), {"epsilon": 1e-3, "scale": False}),
    ((3, 7), (3, 7), {"center": False, "axis": 1}),
])
def test_add_layer_norm_float32_matches_add_then_layer_norm(shape, other, attrs):
    r = np.random.default_rng(7)
    a = (r.standard_normal(shape) * 4 + 3).astype(np.float32)  # an offset the centring must remove
    b = r.standard_normal(other).astype(np.float32)
    g, be = r.standard_normal(shape[-1]).astype(np.float32), r.standard_normal(shape[-1]).astype(np.float32)
    got, want = _add_layer_norm(a, b, g, be, **attrs)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_add_layer_norm_on_another_axis_or_dtype_keeps_the_float64_path():
    r = np.random.default_rng(3)
    a, b = r.standard_normal((4, 6, 2)), r.standard_normal((6, 1))
    g, be = r.standard_normal(6), r.standard_normal(6)
    got, want = _add_layer_norm(a, b, g, be, axis=1)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got, want = _add_layer_norm(a32, b32, g.astype(np.float32), be.astype(np.float32), axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)



# -- Winograd with its bias and relu inside the kernel ----------------------------------------------
@pytest.mark.parametrize("shape, out_channels, padding", [
    ((1, 16, 14, 14), 8, (1, 1, 1, 1)),
    ((2, 3, 7, 6), 5, (0, 0, 0, 0)),
    ((1, 4, 5, 9), 2, (1, 0, 2, 1)),
    ((1, 2, 9, 8), 3, (-1, 1, 0, -2)),
])
@pytest.mark.parametrize("name", ["fused.winograd_bias", "fused.winograd_relu", "fused.winograd_bias_relu"])
def test_winograd_epilogue_matches_direct_convolution_bias_relu(shape, out_channels, padding, name):
    r = np.random.default_rng(11)
    x = r.standard_normal(shape).astype(np.float32)
    w = r.standard_normal((out_channels, shape[1], 3, 3)).astype(np.float32)
    b = r.standard_normal(out_channels).astype(np.float32)
    xv, wv, bv = (rg.var(n, T(a.shape, "float32")) for n, a in (("x", x), ("w", w), ("b", b)))
    u = rg.op.nn.contrib_conv2d_winograd_weight_transform(wv, tile_size=2)
    has_bias = "bias" in name
    fused_args = (xv, u, bv) if has_bias else (xv, u)
    fused = getattr(rg.op.fused, name.split(".")[1])(*fused_args, tile_size=2, padding=padding)
    direct = rg.op.nn.conv2d(xv, wv, padding=padding)
    direct = rg.op.nn.bias_add(direct, bv) if has_bias else direct
    direct = rg.op.nn.relu(direct) if "relu" in name else direct
    got = rg.evaluate(rg.Function([xv, wv, bv], fused), x, w, b)
    want = rg.evaluate(rg.Function([xv, wv, bv], direct), x, w, b)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if "relu" in name:
        assert got.min() >= 0


# -- a pre-activation before a strided 1x1 convolution runs on the pixels it reads -----------------
def _preactivation_stage_entry(shape=(1, 8, 9, 10), seed=0):
    """ResNet v2's first unit of a stage: batch norm and relu, then two 1x1 stride-2 convolutions
    (the main path's and the projection shortcut's) sharing that activation."""
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = rg.var("x", T(shape, "float32"))
    vecs = [rg.var(n, T((c,), "float32")) for n in ("g", "b", "m", "v")]
    w1, w2 = rg.var("w1", T((4, c, 1, 1), "float32")), rg.var("w2", T((6, c, 1, 1), "float32"))
    act = rg.op.nn.relu(rg.TupleGetItem(rg.op.nn.batch_norm(x, *vecs, epsilon=2e-5), 0))
    main = rg.op.nn.conv2d(act, w1, strides=(2, 2), padding=(0, 0))
    short = rg.op.nn.conv2d(act, w2, strides=(2, 2), padding=(0, 0))
    body = rg.Tuple([main, short])
    mod = rg.IRModule.from_expr(rg.Function([x, *vecs, w1, w2], body))
    params = {"g": rng.uniform(0.5, 2, c).astype(np.float32), "b": rng.standard_normal(c).astype(np.float32),
              "m": rng.standard_normal(c).astype(np.float32),
              "v": rng.uniform(0.1, 2, c).astype(np.float32),
              "w1": rng.standard_normal((4, c, 1, 1)).astype(np.float32),
              "w2": rng.standard_normal((6, c, 1, 1)).astype(np.float32)}
    return mod, params


@pytest.mark.parametrize("shape", [(1, 8, 9, 10), (2, 4, 8, 8)])
def test_preactivation_runs_on_the_strided_pixels_only(shape):
    mod, params = _preactivation_stage_entry(shape)
    # the flops model: which program the cpu model picks depends on this machine's profile (and the
    # latency model prices a strided slice as a full pass)
    res = rg.optimize(mod, params=params, rules=["rules/conv.rules", "rules/cpu.rules", "rules/fusion.rules"],
                      seed=2, repeats=1, timing_budget=0.0, keep_fused_ops=True, cost="flops")
    assert res.check_passed is True, res.check_text()
    assert res.ops_after.get("strided_slice", 0) == 1  # shared by both convolutions
    assert res.ops_after.get("fused.multiply_add_relu", 0) == 1 and "nn.batch_norm" not in res.ops_after
    text = str(res.module)
    assert "strides=[2, 2]" in text and "nn.conv2d" in text
    convs = [line for line in text.splitlines() if "nn.conv2d(" in line]
    assert convs and all("strides=[2, 2]" not in line for line in convs)


def test_preactivation_rules_check_sound(capsys):
    from relaygraph.cli import main

    code = main(["rules", "check", "rules/conv.rules", "--rule", "preactivation-before-strided-1x1",
                 "--trials", "4"])
    out = capsys.readouterr().out
    assert code == 0 and "1 sound" in out and "Traceback" not in out
    code = main(["rules", "check", "rules/conv.rules", "--rule", "preactivation-maximum-before-strided-1x1",
                 "--trials", "4"])
    out = capsys.readouterr().out
    assert code == 0 and "1 sound" in out


@pytest.mark.parametrize("c, hw", [(64, 56), (256, 56), (1024, 14)])
def test_scale_shift_relu_costs_no_more_than_the_batch_norm_and_relu_it_replaces(model, c, hw):
    x, v, s = T((1, c, hw, hw), "float32"), T((c,), "float32"), T((c, 1, 1), "float32")
    norm = model("nn.batch_norm", rg.ops.lookup("nn.batch_norm").resolve({"axis": 1}), [x, v, v, v, v],
                 rg.TupleType((x, v, v)))
    apart = norm + model("nn.relu", {}, [x], x)
    assert model("fused.multiply_add_relu", {}, [x, s, s], x) <= apart - model.profile.dispatch + 1e-15
    # not a batch norm's form (a full-size scale): no such bound
    assert model._batch_norm_relu([x, x, x], x) == float("inf")
