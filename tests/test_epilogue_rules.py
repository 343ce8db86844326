"""Rules that move a pre-activation's or a convolution's epilogue to where it costs less (rules/conv.rules):
a channel bias and relu after a max pool whose windows all hold data, and a pre-activation's shift
through the 1x1 convolution after it; values kept, and the rules left alone where they would not be."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main

RNG = np.random.default_rng(3)


def _program(shape, **pool):
    c = shape[1]
    x = rg.var("x", shape=shape, dtype="float32")
    w = rg.const(RNG.standard_normal((c, c, 1, 1)).astype(np.float32))
    y = rg.op.nn.conv2d(x, w, channels=c, kernel_size=(1, 1))
    y = rg.op.nn.relu(rg.op.nn.bias_add(y, rg.const(RNG.standard_normal(c).astype(np.float32))))
    return rg.IRModule.from_expr(rg.Function([x], rg.op.nn.max_pool2d(y, **pool)))


def _pool_reads(mod) -> str:
    """The op whose result the program's max pool reads."""
    from relaygraph.ir.traversal import iter_post_order

    pools = [e for e in iter_post_order(mod["main"]) if isinstance(e, rg.ir.Call)
             and getattr(e.op, "name", "") == "nn.max_pool2d"]
    assert len(pools) == 1
    return pools[0].args[0].op.name


def _optimize(mod):
    # only conv.rules (no fusion), and the flops model: the structure does not depend on the machine
    return rg.optimize(mod, rules=["rules/conv.rules"], cost="flops", check=False, repeats=1,
                       timing_budget=0.0)


@pytest.mark.parametrize("shape, pool", [
    ((1, 4, 11, 9), dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1))),
    ((2, 3, 8, 7), dict(pool_size=(2, 2), strides=(2, 2))),
    ((1, 2, 7, 7), dict(pool_size=(3, 2), strides=(1, 2))),
])
def test_bias_relu_move_after_the_pool_and_keep_the_value(shape, pool):
    mod = _program(shape, **pool)
    res = _optimize(mod)
    data = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-5, atol=1e-5)
    assert _pool_reads(mod) == "nn.relu"
    assert _pool_reads(res.module) == "nn.conv2d"  # the bias and relu run on the pooled output


@pytest.mark.parametrize("pool", [dict(pool_size=(3, 3), strides=(2, 2), padding=(2, 2)),
                                  dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1), ceil_mode=True),
                                  dict(pool_size=(3, 3), padding=(1, 1), dilation=(2, 2))])
def test_pools_whose_windows_may_miss_the_data_keep_the_bias_and_relu_before(pool):
    mod = _program((1, 2, 5, 5), **pool)
    res = _optimize(mod)
    data = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-5, atol=1e-5)
    assert _pool_reads(res.module) == "nn.relu"


def test_rules_check_cli_finds_the_pool_rules_sound(capsys):
    assert main(["rules", "check", "rules/conv.rules"]) == 0
    out = capsys.readouterr().out
    assert "bias-relu-after-max-pool " in out and "bias-relu-after-max-pool-3x3" in out
    assert "unsound" not in out


# -- a pre-activation's shift through the 1x1 convolution after it ------------------------------
@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (3, 1, 1), (3, 1, 1)), ((7,), (7,), (7,)),
                                    ((1, 4, 3, 3), (4, 1, 1), ())])
def test_multiply_maximum_matches_its_parts(shapes):
    from relaygraph.ops import get

    op = get("fused.multiply_maximum")
    a, s, t = (RNG.standard_normal(sh).astype(np.float32) for sh in shapes)
    a_before = a.copy()
    got = op.kernel([a, s, t], op.builder_attrs({}))
    np.testing.assert_array_equal(got, np.maximum(a * s, t))
    np.testing.assert_array_equal(a, a_before)  # the input is never written
    # a result the inputs broadcast beyond: the parts' own kernels
    wide = op.kernel([np.float32(2.0), s, a], op.builder_attrs({}))
    np.testing.assert_array_equal(wide, np.maximum(np.float32(2.0) * s, a))


def _preact_program(c=6, o=5, size=(7, 5), strides=(1, 1)):
    """ResNet v2's pre-activation batch norm and relu, then a 1x1 convolution and its own batch norm."""
    x = rg.var("x", shape=(2, c, *size), dtype="float32")

    def bn(y, n):
        vec = [rg.const(RNG.uniform(-1.0, 1.0, n).astype(np.float32)) for _ in range(3)]
        var = rg.const(RNG.uniform(0.5, 1.5, n).astype(np.float32))
        return rg.op.nn.batch_norm(y, vec[0], vec[1], vec[2], var)[0]

    y = rg.op.nn.relu(bn(x, c))
    w = rg.const(RNG.standard_normal((o, c, 1, 1)).astype(np.float32))
    y = bn(rg.op.nn.conv2d(y, w, strides=strides, channels=o, kernel_size=(1, 1)), o)
    return rg.IRModule.from_expr(rg.Function([x], rg.op.nn.relu(y)))


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_shift_moves_through_the_1x1_convolution_and_keeps_the_value(strides):
    mod = _preact_program(strides=strides)
    res = rg.optimize(mod, rules=["rules/cpu.rules", "rules/conv.rules", "rules/fusion.rules"], cost="flops",
                      check=False, repeats=1, timing_budget=0.0)
    data = RNG.standard_normal((2, 6, 7, 5)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-4, atol=1e-4)
    assert res.ops_after.get("fused.multiply_maximum") == 1, res.ops_after
    assert "fused.multiply_add_relu" not in res.ops_after and "nn.batch_norm" not in res.ops_after


def test_shift_stays_before_a_padded_convolution():
    """A 3x3 convolution pads the relu's result with zeros: the shift cannot move through it."""
    c = 4
    x = rg.var("x", shape=(1, c, 6, 6), dtype="float32")
    vec = [rg.const(RNG.uniform(0.5, 1.5, c).astype(np.float32)) for _ in range(4)]
    y = rg.op.nn.relu(rg.op.nn.batch_norm(x, *vec)[0])
    w = rg.const(RNG.standard_normal((c, c, 3, 3)).astype(np.float32))
    y = rg.op.nn.bias_add(rg.op.nn.conv2d(y, w, padding=(1, 1), channels=c, kernel_size=(3, 3)), vec[0])
    mod = rg.IRModule.from_expr(rg.Function([x], y))
    res = rg.optimize(mod, rules=["rules/conv.rules"], cost="flops", check=False, repeats=1,
                      timing_budget=0.0)
    assert "fused.multiply_maximum" not in res.ops_after
    data = RNG.standard_normal((1, c, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(res.module, data), rg.evaluate(mod, data), rtol=1e-4, atol=1e-4)


# -- a positive pre-activation scale moves into the convolutions' weights ---------------------------
def _positive_preact(gamma, kernel=(1, 1), padding=(0, 0), strides=(1, 1), c=6, o=5, size=(7, 5)):
    """ResNet v2's pre-activation: relu(batch_norm(x + y)) with gamma ``gamma`` (constants), then a
    convolution and its own batch norm (which folds into the convolution's bias)."""
    x = rg.var("x", shape=(2, c, *size), dtype="float32")
    y = rg.var("y", shape=(2, c, *size), dtype="float32")
    g = rg.const(np.asarray(gamma, dtype=np.float32))
    b, m = (rg.const(RNG.uniform(-1.0, 1.0, c).astype(np.float32)) for _ in range(2))
    v = rg.const(RNG.uniform(0.5, 1.5, c).astype(np.float32))
    act = rg.op.nn.relu(rg.op.nn.batch_norm(rg.op.add(x, y), g, b, m, v)[0])
    w = rg.const(RNG.standard_normal((o, c, *kernel)).astype(np.float32))
    out = rg.op.nn.conv2d(act, w, strides=strides, padding=padding, channels=o, kernel_size=kernel)
    vec = [rg.const(RNG.uniform(0.5, 1.5, o).astype(np.float32)) for _ in range(4)]
    out = rg.op.nn.batch_norm(out, *vec)[0]
    return rg.IRModule.from_expr(rg.Function([x, y], rg.op.nn.relu(out)))


def _scaled_optimize(mod):
    return rg.optimize(mod, rules=["rules/cpu.rules", "rules/conv.rules", "rules/fusion.rules"], cost="flops",
                       check=False, repeats=1, timing_budget=0.0)


def _same_value(mod, res, c=6, size=(7, 5)):
    for _ in range(3):
        data = [RNG.standard_normal((2, c, *size)).astype(np.float32) for _ in range(2)]
        want = rg.evaluate(mod, *data)
        np.testing.assert_allclose(rg.evaluate(res.module, *data), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_positive_scale_moves_into_the_1x1_weights_leaving_a_maximum(strides):
    mod = _positive_preact(RNG.uniform(0.2, 2.0, 6), strides=strides)
    res = _scaled_optimize(mod)
    _same_value(mod, res)
    # the pass over the activations is one maximum: no scale left on them
    assert res.ops_after.get("maximum") == 1, res.ops_after
    assert not {"fused.multiply_maximum", "fused.multiply_add_relu", "nn.batch_norm"} & set(res.ops_after)


def test_positive_scale_moves_into_a_padded_convolution_leaving_an_add_and_relu():
    mod = _positive_preact(RNG.uniform(0.2, 2.0, 6), kernel=(3, 3), padding=(1, 1))
    res = _scaled_optimize(mod)
    _same_value(mod, res)
    assert res.ops_after.get("fused.add_relu") == 1, res.ops_after
    assert not {"fused.multiply_add_relu", "nn.batch_norm"} & set(res.ops_after)


@pytest.mark.parametrize("bad", [-0.5, 0.0, float("nan")])
def test_a_scale_not_above_zero_everywhere_stays_on_the_activations(bad):
    gamma = RNG.uniform(0.2, 2.0, 6)
    gamma[3] = bad
    mod = _positive_preact(gamma)
    res = _scaled_optimize(mod)
    if bad == bad:  # with a NaN gamma that channel is NaN in both programs: only the ops are checked
        _same_value(mod, res)
    assert res.ops_after.get("fused.multiply_maximum") == 1, res.ops_after
    assert "maximum" not in res.ops_after


def test_positive_condition_is_what_keeps_the_rule_sound():
    """Without positive(?g) the checker finds a counterexample in its default three trials (a
    channel whose scale is negative: relu(s x + t) >= 0 where s relu(x + t / s) <= 0); with it,
    none. (Drawn at random, a few channels' gammas are often all positive: the checker draws signed
    tensors with values of both signs.)"""
    from relaygraph.rewrite import parse_rules
    from relaygraph.rewrite.soundness import check_rule

    rule = next(r for r in rg.load_rules("rules/conv.rules") if r.name == "batch-norm-relu-scale-into-conv2d")
    assert check_rule(rule, trials=8).status == "sound"
    source = open("rules/conv.rules").read()
    start = source.index("rule batch-norm-relu-scale-into-conv2d :")
    body = source[start:source.index("\nrule ", start + 1)]
    assert "positive(?g) and " in body
    unguarded = parse_rules(body.replace("positive(?g) and ", ""), ruleset="conv")
    result = check_rule(unguarded[0])
    assert result.status == "unsound", result.detail


def test_the_checker_draws_small_signed_tensors_with_both_signs():
    from relaygraph.rewrite.soundness import _both_signs

    rng = np.random.default_rng(0)
    for sign in (1.0, -1.0):
        got = _both_signs(np.full(3, sign, dtype=np.float32), "any", rng)
        assert (got > 0).any() and (got < 0).any()
    kept = np.full(3, 2.0, dtype=np.float32)
    assert (_both_signs(kept.copy(), "positive", rng) == kept).all()  # a positive domain stays so
    assert (_both_signs(np.ones(1, dtype=np.float32), "any", rng) == 1).all()  # one value: left alone


def test_positive_must_be_a_conjunct_of_the_condition():
    from relaygraph.rewrite import parse_rules

    with pytest.raises(rg.RelayError, match=r"positive\(\?x\) must be one of the conditions joined by `and`"):
        parse_rules("rule r : multiply(?x, ?y) => multiply(?y, ?x) if positive(?x) or rank(?y) == 1")
