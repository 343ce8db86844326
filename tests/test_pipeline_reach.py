"""What TVM's pipeline does, the e-graph can choose too: bias_add as a broadcast add (CanonicalizeOps),
with extraction deciding by the cost model; and the sigmoid kernel the programs of both run."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.cost import COST_MODELS
from relaygraph.ops.elemwise import sigmoid
from relaygraph.rewrite import load_rules
from relaygraph.rewrite.soundness import check_rules, format_results

ALGEBRAIC = "rules/algebraic.rules"
NAMES = ("bias-add-last-as-add", "bias-add-rows-as-add")
F32 = "float32"


def _rules(names=NAMES):
    return [r for r in load_rules(ALGEBRAIC) if r.name in names]


def test_bias_add_as_add_rules_are_sound():
    rules = _rules()
    assert [r.name for r in rules] == list(NAMES)
    results = check_rules(rules, trials=4)
    assert all(r.status == "sound" for r in results), format_results(results)


def test_cli_checks_the_bias_add_rules(capsys):
    assert main(["rules", "check", ALGEBRAIC, "--trials", "1"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES) and "Traceback" not in out


def _dense_bias(axis: int, rank3: bool = False):
    """relu(bias_add(dense(x, w), b)) (rank 3 input with axis=-1 when ``rank3``), with its inputs."""
    rng = np.random.default_rng(0)
    shape = (2, 3, 8) if rank3 else (3, 8)
    x = rg.var("x", rg.TensorType(shape, F32))
    w = rg.var("w", rg.TensorType((5, 8), F32))
    b = rg.var("b", rg.TensorType((5,), F32))
    y = rg.op.nn.relu(rg.op.nn.bias_add(rg.op.nn.dense(x, w), b, axis=axis))
    mod = rg.IRModule.from_expr(rg.Function([x, w, b], y))
    values = [rng.standard_normal(shape).astype(F32), rng.standard_normal((5, 8)).astype(F32),
              rng.standard_normal(5).astype(F32)]
    return mod, values


def _priced(expensive: str):
    """The latency model with ``expensive`` made three times dearer: which form extraction picks
    then follows the price, not this machine's profile."""
    latency = COST_MODELS["latency"]

    def cost(op, attrs, arg_types, out_type):
        base = latency(op, attrs, arg_types, out_type)
        return base * 3 if op == expensive else base
    return cost


@pytest.mark.parametrize("axis, rank3", [(-1, False), (1, False), (-1, True)])
def test_extraction_picks_the_add_when_it_is_cheaper(axis, rank3):
    mod, values = _dense_bias(axis, rank3)
    before = rg.evaluate(mod, *values)
    res = rg.optimize(mod, rules=[ALGEBRAIC], cost=_priced("nn.bias_add"), repeats=1, timing_budget=0.0)
    assert res.check_passed is True, res.check_text()
    assert res.ops_before.get("nn.bias_add") == 1 and "add" not in res.ops_before
    assert "nn.bias_add" not in res.ops_after and res.ops_after.get("add") == 1
    np.testing.assert_allclose(rg.evaluate(res.module, *values), before, rtol=1e-6, atol=1e-6)


def test_extraction_keeps_bias_add_when_the_add_is_dearer():
    mod, values = _dense_bias(-1)
    res = rg.optimize(mod, rules=[ALGEBRAIC], cost=_priced("add"), repeats=1, timing_budget=0.0)
    assert res.check_passed is True, res.check_text()
    assert res.ops_after.get("nn.bias_add") == 1 and "add" not in res.ops_after


def test_bias_add_on_channels_of_an_image_is_not_rewritten():
    # axis=1 of a rank-4 tensor needs the bias reshaped: these rules leave it alone
    x = rg.var("x", rg.TensorType((1, 5, 4, 4), F32))
    b = rg.var("b", rg.TensorType((5,), F32))
    mod = rg.IRModule.from_expr(rg.Function([x, b], rg.op.nn.bias_add(x, b, axis=1)))
    res = rg.optimize(mod, rules=[ALGEBRAIC], cost=_priced("nn.bias_add"), repeats=1, timing_budget=0.0)
    assert res.check_passed is True, res.check_text()
    assert res.ops_after == {"nn.bias_add": 1}


# -- the sigmoid kernel -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_kernel_matches_the_formula_and_saturates_without_warnings(dtype):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(1000) * 8, [-1e4, -100, -20, 0, 20, 100, 1e4, np.inf, -np.inf]])
    x = x.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = sigmoid(x)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    with np.errstate(over="ignore"):  # exp(1e4) is inf, and 1 / inf the 0 wanted
        reference = 1 / (1 + np.exp(-x.astype(np.float64)))
    tiny = np.finfo(dtype).tiny
    np.testing.assert_allclose(y, reference, rtol=4 * np.finfo(dtype).eps, atol=tiny)
    assert y[-2] == 1 and y[-1] == 0 and np.all((y >= 0) & (y <= 1))
    assert np.isnan(sigmoid(np.array([np.nan], dtype)))[0]
    assert sigmoid(np.asarray(0, dtype)).shape == ()


def test_sigmoid_through_the_executor_keeps_values():
    x = rg.var("x", rg.TensorType((4, 6), F32))
    mod = rg.IRModule.from_expr(rg.Function([x], rg.op.sigmoid(x)))
    value = np.linspace(-30, 30, 24, dtype=F32).reshape(4, 6)
    out = np.asarray(rg.evaluate(mod, value))
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-value.astype(np.float64))), rtol=1e-6, atol=1e-30)
