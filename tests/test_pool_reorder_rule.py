"""The bias and relu before a max pool move after it (rules/conv.rules: bias-relu-after-max-pool*):
values kept on odd shapes and strides, the pool padded by 1 or not at all; pools whose windows may
lie wholly in the padding are left alone."""

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
