"""rules/cpu.rules' attention / dense section: dense weights stored (K, N) for the GEMM, the fused
matmul + bias (+ GELU) kernels, the query/key/value products merged into one, and the blocked GELU."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

import relaygraph as rg
import relaygraph.ops.fused_ops as fused_ops
from relaygraph.cli import main
from relaygraph.egraph.cost import latency
from relaygraph.egraph.cpu_cost import default_profile
from relaygraph.ops.fused_ops import expand, gelu_fast
from relaygraph.rewrite import load_rules
from relaygraph.rewrite.soundness import check_rules, format_results

CPU_RULES = "rules/cpu.rules"
MINE = ("dense-weight-kn", "fuse-matmul-bias", "fuse-matmul-bias-gelu", "merge-matmul-bias-split3")
F32 = "float32"


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(F32)


def _gelu_ref(y):
    y = y.astype(np.float64)
    return y * 0.5 * (1 + erf(y * 0.70710677))


# -- soundness ---------------------------------------------------------------------------------------
def test_attention_rules_are_sound():
    rules = [r for r in load_rules(CPU_RULES) if r.name in MINE]
    assert sorted(r.name for r in rules) == sorted(MINE)
    results = check_rules(rules)
    assert all(r.status == "sound" for r in results), format_results(results)


def test_cli_checks_the_attention_rules(capsys):
    assert main(["rules", "check", CPU_RULES, "--trials", "1"]) == 0
    out = capsys.readouterr().out
    for name in MINE:
        assert f"{name} " in out and "unsound" not in out
    assert "Traceback" not in out


# -- the fused kernels against their parts -------------------------------------------------------------
@pytest.mark.parametrize("op", ["fused.matmul_bias", "fused.matmul_bias_gelu"])
@pytest.mark.parametrize("x_shape", [(5, 8), (2, 3, 8)])
def test_fused_matmul_kernels_match_their_parts(op, x_shape):
    rng = np.random.default_rng(0)
    x, w, b = _rand(rng, x_shape), _rand(rng, (8, 6)), _rand(rng, (6,))
    args = [rg.const(x), rg.const(w), rg.const(b)]
    got = rg.evaluate(rg.Call(rg.Op(op), args))
    want = rg.evaluate(expand(op, args))
    assert got.shape == (*x_shape[:-1], 6) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_matmul_kernel_on_a_rank_3_input_is_one_product():
    rng = np.random.default_rng(1)
    x, w = _rand(rng, (2, 3, 4)), _rand(rng, (4, 5))
    got = rg.evaluate(rg.op.nn.matmul(rg.const(x), rg.const(w)))
    np.testing.assert_allclose(got, np.einsum("bik,kn->bin", x, w), rtol=1e-5, atol=1e-6)
    xt = _rand(rng, (2, 4, 3))
    got = rg.evaluate(rg.op.nn.matmul(rg.const(xt), rg.const(w), transpose_a=True))
    np.testing.assert_allclose(got, np.einsum("bki,kn->bin", xt, w), rtol=1e-5, atol=1e-6)


def test_fused_matmul_ops_are_typed_and_refuse_bad_shapes():
    x = rg.var("x", rg.TensorType((4, 8), F32))
    w = rg.var("w", rg.TensorType((8, 6), F32))
    b = rg.var("b", rg.TensorType((6,), F32))
    call = rg.Call(rg.Op("fused.matmul_bias_gelu"), [x, w, b])
    typed = rg.infer_type(rg.IRModule.from_expr(rg.Function([x, w, b], call)))
    assert typed["main"].ret_type == rg.TensorType((4, 6), F32)
    bad = rg.var("bad", rg.TensorType((6, 8), F32))  # (N, K): the dense layout, not matmul's
    with pytest.raises(rg.RelayError, match="K mismatch"):
        rg.infer_type(rg.IRModule.from_expr(rg.Function([x, bad, b], rg.Call(rg.Op("fused.matmul_bias"),
                                                                             [x, bad, b]))))


# -- the blocked GELU ----------------------------------------------------------------------------------
def test_blocked_gelu_matches_the_erf_form_across_blocks(monkeypatch):
    monkeypatch.setattr(fused_ops, "GELU_BLOCK", 1000)  # many blocks and a short last one
    y = np.linspace(-9, 9, 12_345).astype(F32).reshape(3, -1)
    got = gelu_fast(y.copy())
    assert got.shape == y.shape and got.dtype == np.float32
    assert np.abs(got - _gelu_ref(y)).max() < 1e-6


def test_blocked_gelu_on_a_non_contiguous_array_writes_into_it():
    y = np.linspace(-5, 5, 600).astype(F32).reshape(20, 30)
    view = y.T  # not C-contiguous: worked on whole, still in place
    want = _gelu_ref(view)
    out = gelu_fast(view)
    assert out is view
    assert np.abs(y.T - want).max() < 1e-6


def test_blocked_gelu_keeps_special_values():
    y = np.array([np.inf, np.nan, 0.0, -0.0, 30.0, -30.0], F32)
    with np.errstate(all="ignore"):
        got = gelu_fast(y.copy())
    assert got[0] == np.inf and np.isnan(got[1])
    assert got[2] == 0 and got[3] == 0 and got[4] == 30.0 and got[5] == 0


def test_empty_input_to_the_gelu():
    assert gelu_fast(np.zeros((0, 4), F32)).shape == (0, 4)


# -- the rewrites in optimize ----------------------------------------------------------------------------
def _bert_layer(seed=0):
    """One attention + feed-forward block at a small size, weights as params."""
    return rg.zoo.get("bert", num_layers=1, hidden=32, heads=4, seq_len=8, seed=seed)


def _favour(ops: dict):
    """The latency model with the named ops' costs multiplied, so that the test is about which
    rewrite is available, not about this machine's profile."""
    def cost(op, attrs, arg_types, out_type):
        return latency(op, attrs, arg_types, out_type) * ops.get(op, 1.0)

    return cost


def test_optimize_stores_dense_weights_for_the_gemm_and_keeps_values():
    mod, params = _bert_layer()
    res = rg.optimize(mod, params=params, cost=_favour({"fused.dense_bias": 3.0, "fused.dense_bias_gelu": 3.0,
                                                        "nn.dense": 3.0}),
                      extractor="greedy-dag", keep_fused_ops=True, repeats=1, timing_budget=0.0)
    assert res.check_passed is True
    assert res.ops_after.get("fused.matmul_bias", 0) >= 4
    assert res.ops_after.get("fused.matmul_bias_gelu", 0) == 1
    assert res.ops_after.get("nn.dense", 0) == 0 and res.ops_after.get("erf", 0) == 0
    # the transposed weights are constants of the (K, N) layout, computed once
    assert "transpose(" not in rg.astext(res.module)


def test_optimize_can_merge_the_query_key_value_products():
    mod, params = _bert_layer(seed=3)
    # every product call costs a lot more than its size says (one call for three pays), and the
    # dense layout costs more than the (K, N) one
    def cost(op, attrs, arg_types, out_type):
        base = latency(op, attrs, arg_types, out_type)
        if op.startswith(("fused.matmul", "nn.matmul")):
            return base + 1.0
        return base * 3.0 + 1.0 if op.startswith(("fused.dense", "nn.dense")) else base

    res = rg.optimize(mod, params=params, cost=cost, extractor="ilp", keep_fused_ops=True,
                      repeats=1, timing_budget=0.0)  # the merged product is shared: only ILP sees it pay
    assert res.check_passed is True
    assert res.ops_after.get("split", 0) == 1
    # query, key and value in one product, then the attention output's and the feed-forward's
    assert res.ops_after.get("fused.matmul_bias", 0) == 3
    assert res.ops_after.get("fused.matmul_bias_gelu", 0) == 1
    assert not any(op.startswith(("fused.dense", "nn.dense")) for op in res.ops_after)


def test_symbolic_batch_does_not_stop_or_crash_the_rules():
    x = rg.var("x", rg.TensorType((rg.Any, 16), F32))
    w = rg.const(np.random.default_rng(0).standard_normal((8, 16)).astype(F32))
    b = rg.const(np.zeros(8, F32))
    body = rg.op.nn.bias_add(rg.op.nn.dense(x, w), b, axis=-1)
    mod = rg.IRModule.from_expr(rg.Function([x], body))
    # (the latency model cannot cost a '?' dimension; node-count can)
    res = rg.optimize(mod, cost="node-count", check=False, extractor="greedy-dag")
    assert res.saturation.stop_reason != "error"
    value = np.random.default_rng(1).standard_normal((3, 16)).astype(F32)
    np.testing.assert_allclose(rg.evaluate(res.module, value), rg.evaluate(mod, value), rtol=1e-5, atol=1e-6)


def test_cli_optimize_bert_uses_the_rules_without_traceback(capsys, tmp_path):
    out_file = tmp_path / "bert.relay"
    code = main(["optimize", "--model", "bert", "--small", "-o", str(out_file), "--cost", "latency"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Traceback" not in out.out + out.err


# -- the cpu cost of the new ops ------------------------------------------------------------------------
def test_cpu_cost_of_matmul_reads_n_from_the_output():
    model = default_profile(progress=False)
    t = rg.TensorType
    got = model.kernel("nn.matmul", {"transpose_a": False, "transpose_b": False},
                       [t((128, 768), F32), t((768, 3072), F32)], t((128, 3072), F32))
    assert got == pytest.approx(model.gemm_time(128, 3072, 768))
    # the same product as a dense (weight (N, K)) is the same work
    dense = model.kernel("nn.dense", {}, [t((128, 768), F32), t((3072, 768), F32)], t((128, 3072), F32))
    assert dense == pytest.approx(got)


def test_calibration_measures_the_fused_matmul_ops():
    # measured against the matmul kernel per (M, N, K), as the dense-anchored ops are against dense
    rows = default_profile(progress=False).profile.fused
    for op in ("fused.matmul_bias", "fused.matmul_bias_gelu"):
        assert rows.get(op) and all(len(row) == 4 and row[-1] > 0 for row in rows[op])
