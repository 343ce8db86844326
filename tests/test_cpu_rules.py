"""rules/cpu.rules and the kernels they rely on: batch norm folded into conv2d, the attention scale
folded into the query projection, conv2d / max pool / GELU kernels against references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.optimize import bind_params
from relaygraph.ops.conv import conv2d_nchw
from relaygraph.ops.fused_ops import gelu_fast
from relaygraph.rewrite import load_rules
from relaygraph.rewrite.soundness import check_rules, format_results

CPU_RULES = "rules/cpu.rules"
FUSION_RULES = "rules/fusion.rules"
F32 = "float32"


def _ops(mod) -> dict:
    from relaygraph.ir.dag_export import program_stats

    return program_stats(mod["main"])["ops"]


# -- the rules are sound --------------------------------------------------------------------------
def test_every_cpu_rule_is_sound():
    rules = load_rules(CPU_RULES)
    results = check_rules(rules)
    assert len(results) == len(rules) >= 10
    assert all(r.status == "sound" for r in results), format_results(results)


def test_cli_checks_the_cpu_rules(capsys):
    assert main(["rules", "check", CPU_RULES, "--trials", "1"]) == 0
    out = capsys.readouterr().out
    assert "fold-batch-norm-conv2d" in out and "fold-scale-shift-conv2d" in out
    assert f"{len(load_rules(CPU_RULES))} sound" in out
    assert "Traceback" not in out


# -- batch norm folded into the convolution -------------------------------------------------------
def _conv_bn(channels=4, out_channels=6, groups=1, strides=(1, 1), padding=(1, 1), relu=True,
             shape=(1, 4, 9, 9), seed=0):
    rng = np.random.default_rng(seed)
    x = rg.var("x", rg.TensorType(shape, F32))
    names = ["w", "g", "b", "m", "v"]
    w = rg.var("w", rg.TensorType((out_channels, channels // groups, 3, 3), F32))
    vecs = [rg.var(n, rg.TensorType((out_channels,), F32)) for n in names[1:]]
    y = rg.op.nn.conv2d(x, w, strides=strides, padding=padding, groups=groups)
    y = rg.TupleGetItem(rg.op.nn.batch_norm(y, *vecs, epsilon=1e-3), 0)
    if relu:
        y = rg.op.nn.relu(y)
    mod = rg.IRModule.from_expr(rg.Function([x, w, *vecs], y))
    params = {"w": rng.standard_normal(w.type_annotation.shape).astype(F32),
              "g": rng.uniform(0.5, 2, out_channels).astype(F32),
              "b": rng.standard_normal(out_channels).astype(F32),
              "m": rng.standard_normal(out_channels).astype(F32),
              "v": rng.uniform(0.1, 2, out_channels).astype(F32)}
    return mod, params


@pytest.mark.parametrize("case", [
    dict(), pytest.param(dict(relu=False, strides=(2, 2), padding=(0, 0)), marks=pytest.mark.slow),
    dict(channels=4, out_channels=4, groups=4, shape=(2, 4, 7, 5), padding=(2, 1)),
])
def test_batch_norm_folds_into_conv2d_and_keeps_values(case):
    mod, params = _conv_bn(**case)
    # the latency model: which program the cpu model picks depends on this machine's profile
    res = rg.optimize(mod, params=params, rules=[CPU_RULES, FUSION_RULES], seed=3, repeats=1,
                      timing_budget=0.0, keep_fused_ops=True, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert "nn.batch_norm" not in res.ops_after
    fused = "fused.conv2d_bias_relu" if case.get("relu", True) else "fused.conv2d_bias"
    assert res.ops_after.get(fused) == 1
    # the folded weights are constants of the program: nothing computes them at run time
    assert set(res.ops_after) == {fused}


def test_simplify_inference_form_folds_into_conv2d():
    mod, params = _conv_bn(relu=False)
    mod = bind_params(mod, params)
    mod = rg.transform.Sequential([rg.transform.InferType(), rg.transform.SimplifyInference(),
                                   rg.transform.FoldConstant()])(mod)
    assert {"multiply", "add"} <= set(_ops(mod))
    res = rg.optimize(mod, rules=[CPU_RULES, FUSION_RULES], repeats=1, timing_budget=0.0,
                      keep_fused_ops=True, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert set(res.ops_after) == {"fused.conv2d_bias"}


def test_dropout_goes_at_inference_and_values_are_kept():
    x = rg.var("x", rg.TensorType((1, 8, 6, 6), F32))
    w = rg.var("w", rg.TensorType((4, 8, 1, 1), F32))
    y = rg.TupleGetItem(rg.op.nn.dropout(rg.op.nn.relu(x), rate=0.5), 0)
    mod = rg.IRModule.from_expr(rg.Function([x, w], rg.op.nn.conv2d(y, w)))
    res = rg.optimize(mod, rules=[CPU_RULES], seed=1, repeats=1, timing_budget=0.0, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert "nn.dropout" in res.ops_before and "nn.dropout" not in res.ops_after
    # the mask (the second output) has no such rewrite: a program reading it keeps the dropout
    both = rg.op.nn.dropout(x)
    kept = rg.IRModule.from_expr(rg.Function([x], rg.op.add(rg.TupleGetItem(both, 0),
                                                             rg.TupleGetItem(both, 1))))
    res = rg.optimize(kept, rules=[CPU_RULES], seed=1, repeats=1, timing_budget=0.0, cost="latency")
    assert res.check_passed is True and res.ops_after.get("nn.dropout") == 1


def test_symbolic_shapes_do_not_fire_the_shape_conditioned_rule():
    # conv2d(x, w) * s + t with a symbolic channel count: whether s is one value per output
    # channel cannot be decided, so fold-scale-shift-conv2d does not fire, and nothing crashes
    text = """#[version = "0.0.5"]
    def @main(%x: Tensor[(n, 3, 8, 8), float32], %w: Tensor[(c, 3, 3, 3), float32],
              %s: Tensor[(c, 1, 1), float32], %t: Tensor[(c, 1, 1), float32]) {
      add(multiply(nn.conv2d(%x, %w, padding=[1, 1]), %s), %t)
    }
    """
    mod = rg.parse(text)
    res = rg.optimize(mod, rules=[CPU_RULES], check=False, cost="latency")
    assert res.ops_after.get("nn.conv2d") == 1 and "nn.bias_add" not in res.ops_after
    assert res.ops_after.get("multiply") == 1 and res.ops_after.get("add") == 1


def test_cli_optimize_folds_batch_norm_without_traceback(capsys):
    code = main(["optimize", "--model", "mobilenet", "--small", "-O", "is_shallow=True",
                 "--rules", CPU_RULES, FUSION_RULES, "--no-progress", "--keep-fused-ops",
                 "--cost", "latency"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "nn.batch_norm" in out.out and "->0" in out.out and "speedup: predicted" in out.out
    assert "Traceback" not in out.err


# -- the attention scale moves into the query projection ------------------------------------------
def test_attention_scale_folds_into_the_query_weights():
    rng = np.random.default_rng(0)
    x = rg.var("x", rg.TensorType((4, 8), F32))
    wq, wk = (rg.var(n, rg.TensorType((8, 8), F32)) for n in ("wq", "wk"))
    bq = rg.var("bq", rg.TensorType((8,), F32))

    def heads(t):
        t = rg.op.reshape(t, newshape=(1, 4, 2, 4))
        return rg.op.reshape(rg.op.transpose(t, axes=(0, 2, 1, 3)), newshape=(2, 4, 4))

    q = heads(rg.op.nn.bias_add(rg.op.nn.dense(x, wq), bq, axis=-1))
    k = heads(rg.op.nn.dense(x, wk))
    scores = rg.op.multiply(rg.op.nn.batch_matmul(q, k), rg.const(np.float32(0.5)))
    mod = rg.IRModule.from_expr(rg.Function([x, wq, wk, bq], rg.op.nn.softmax(scores)))
    params = {"wq": rng.standard_normal((8, 8)).astype(F32), "wk": rng.standard_normal((8, 8)).astype(F32),
              "bq": rng.standard_normal(8).astype(F32)}
    res = rg.optimize(mod, params=params, rules=[CPU_RULES], repeats=1, timing_budget=0.0, cost="latency")
    assert res.check_passed is True, res.check_text()
    assert "multiply" not in res.ops_after  # folded into the query weights (a constant)


# -- kernels --------------------------------------------------------------------------------------
def _conv_reference(x, w, strides, padding, dilation, groups):
    pt, pl, pb, pr = padding
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))).astype(np.float64)
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh = (x.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(kh):
            for j in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                          j * dw:j * dw + (ow - 1) * sw + 1:sw]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return out


@pytest.mark.parametrize("kernel", [(1, 1), (3, 3), (3, 2)])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (2, 1)])
@pytest.mark.parametrize("padding", [(0, 0, 0, 0), (1, 1, 1, 1), (2, 0, 1, 3)])
@pytest.mark.parametrize("groups", [1, 4, 2])
def test_conv2d_kernel_matches_a_direct_sum(kernel, strides, padding, groups):
    rng = np.random.default_rng(hash((kernel, strides, padding, groups)) % 2**32)
    x = rng.standard_normal((2, 4, 7, 6)).astype(F32)
    out_channels = 4 if groups == 4 else 6
    w = rng.standard_normal((out_channels, 4 // groups, *kernel)).astype(F32)
    for dilation in ((1, 1), (2, 1)):
        got = conv2d_nchw(x, w, strides, padding, dilation, groups)
        want = _conv_reference(x, w, strides, padding, dilation, groups)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, atol=1e-4)


def test_conv2d_kernel_with_negative_padding_crops():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 8, 8)).astype(F32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(F32)
    got = conv2d_nchw(x, w, (1, 1), (-1, 0, 1, -2), (1, 1), 1)
    want = _conv_reference(x[:, :, 1:, :6], w, (1, 1), (0, 0, 1, 0), (1, 1), 1)
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_max_pool_matches_a_window_maximum():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 9, 8)).astype(F32)
    got = rg.evaluate(rg.op.nn.max_pool2d(rg.const(x), pool_size=(3, 3), strides=(2, 2), padding=(1, 1)))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.empty((1, 3, 5, 4), F32)
    for i in range(5):
        for j in range(4):
            want[:, :, i, j] = padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3))
    assert np.array_equal(got, want)


def test_fast_gelu_is_within_float32_resolution_of_the_erf_form():
    y = np.linspace(-12, 12, 200_001).astype(F32)
    want = y.astype(np.float64) * 0.5 * (1 + erf(y.astype(np.float64) * 0.70710677))
    got = gelu_fast(y.copy())
    assert got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-6
    assert np.isnan(gelu_fast(np.array([np.nan], F32)))[0]
