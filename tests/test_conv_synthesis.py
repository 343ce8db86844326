"""Synthesized rules over convolutions and pools (rules/synthesized.rules, shipped with the defaults):
an average pool commutes with a 1x1 convolution; a bias does not commute with a padded pool that
counts its padding."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.optimize import DEFAULT_RULES, default_rule_files
from relaygraph.eval import evaluate
from relaygraph.ir.expr import Call, Function, Op, Var
from relaygraph.ir.traversal import post_order
from relaygraph.ir.types import TensorType
from relaygraph.ops.builders import make_call
from relaygraph.rewrite import Rule, load_rules, parse_rules
from relaygraph.rewrite.soundness import check_rules
from relaygraph.synth import synthesize
from relaygraph.synth.derive import rule_derivation
from relaygraph.synth.samples import works_on_images

SHIPPED = Path(__file__).resolve().parent.parent / "rules" / "synthesized.rules"
POOL_CONV = re.compile(r"nn\.avg_pool2d\(nn\.conv2d\(\?a, \?b, .*\*\*\?c\), .*\*\*\?g\) <=> "
                       r"nn\.conv2d\(nn\.avg_pool2d\(\?a, .*\*\*\?g\), \?b, .*\*\*\?c\) "
                       r"if rank\(\?b\) == 4 and shape\(\?b\)\[2\] == 1 and shape\(\?b\)\[3\] == 1")


@pytest.fixture(scope="module")
def pool_conv():
    """Rules over nn.conv2d and nn.avg_pool2d, as rules/synthesized.rules was written."""
    return synthesize(["nn.conv2d", "nn.avg_pool2d"], size=2, variables_count=2, literals=(), both_ways=True,
                      progress=False)


def _statements(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("rule ")]


def _shipped_rule() -> Rule:
    [rule] = [r for r in load_rules(SHIPPED) if isinstance(r, Rule) and POOL_CONV.search(r.text)
              and not r.name.endswith("<=")]
    return rule


def test_the_synthesizer_finds_that_an_average_pool_commutes_with_a_1x1_convolution(pool_conv):
    found = [r for r in pool_conv.rules if POOL_CONV.search(r.statement)]
    assert len(found) == 1, pool_conv.text
    # the conv attributes the zoo writes out (channels, kernel_size) and every pool window are left
    # to rest variables: the checker passed the generalization
    assert "then for every nn.avg_pool2d's" in found[0].comment
    assert 'padding=[0, 0, 0, 0], strides=[1, 1]' in found[0].statement
    assert all(check.status == "sound" for check in check_rules(pool_conv.load()))


def test_the_shipped_file_is_what_its_command_line_writes(tmp_path, capsys):
    text = SHIPPED.read_text()
    command = re.search(r"^# written by: (relaygraph rules synthesize .*)$", text, re.M).group(1)
    args = command.split()[1:]
    args[args.index("--literals") + 1] = ""  # the shell's '' for no literals
    out = tmp_path / "again.rules"
    args[args.index("--out") + 1] = str(out)
    assert main(args) == 0
    assert "rules written to" in capsys.readouterr().out
    assert _statements(out.read_text()) == _statements(text)
    assert "synthesized.rules" in DEFAULT_RULES and SHIPPED in default_rule_files()
    assert main(["rules", "check", str(SHIPPED)]) == 0
    assert "unsound" not in capsys.readouterr().out


def test_the_rule_is_not_derivable_from_the_hand_written_default_rules():
    hand = [r for f in default_rule_files() if f.name != SHIPPED.name
            for r in load_rules(f) if isinstance(r, Rule)]
    d = rule_derivation(_shipped_rule(), hand, iterations=5, trials=1, minimize=False)
    assert d is not None and not d.proved


@pytest.mark.parametrize("window", [dict(pool_size=(2, 2), strides=(2, 2)),
                                    dict(pool_size=(3, 3), padding=(1, 1), count_include_pad=True),
                                    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1), ceil_mode=True)])
def test_the_rule_preserves_values(window):
    # both ways: the optimizer picks a side by cost; the values agree on random inputs
    x, w = Var("x", TensorType((1, 8, 7, 7), "float32")), Var("w", TensorType((3, 8, 1, 1), "float32"))
    y = Var("y", TensorType((1, 3, 7, 7), "float32"))
    conv = {"channels": 3, "kernel_size": (1, 1)}
    pool_first = make_call("nn.conv2d", make_call("nn.avg_pool2d", x, **window), w, **conv)
    conv_first = make_call("nn.avg_pool2d", make_call("nn.conv2d", x, w, **conv), **window)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 8, 7, 7)).astype("float32"),
              rng.standard_normal((3, 8, 1, 1)).astype("float32")]
    lowered = []
    for body in (pool_first, conv_first):
        # an add on the side keeps the program from being only the pattern
        fn = Function([x, w, y], make_call("add", body, make_call("nn.avg_pool2d", y, **window)))
        mod = rg.IRModule.from_expr(fn)
        res = rg.optimize(mod, rules=[SHIPPED], cost="flops", check=False, repeats=1)
        ops = [n.op.name for n in post_order(res.module["main"])
               if isinstance(n, Call) and isinstance(n.op, Op)]
        assert "nn.conv2d" in ops
        extra = rng.standard_normal((1, 3, 7, 7)).astype("float32")
        before = np.asarray(evaluate(mod, *inputs, extra))
        after = np.asarray(evaluate(res.module, *inputs, extra))
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)
        lowered.append(res.cost_after < res.cost_before * (1 - 1e-9))
    assert any(lowered)  # one of the two sides is cheaper, and the rule reaches it from the other


def _pooled_channels(mod) -> list[int]:
    """The channels of every 2x2 average pool's input."""
    typed = rg.infer_type(mod)
    out = []
    for n in post_order(typed["main"]):
        if isinstance(n, Call) and isinstance(n.op, Op) and n.op.name == "nn.avg_pool2d" \
                and tuple(n.attrs["pool_size"]) == (2, 2):
            out.append(int(rg.type_of(n.args[0], mod=typed).shape[1]))
    return out


def test_densenet_pools_before_its_transition_convolutions():
    # structure: pinned to the latency model (the cpu model's choice depends on this machine)
    mod, params = rg.zoo.get("densenet-121", small=True)
    typed = rg.infer_type(mod)
    pools = [n for n in post_order(mod["main"]) if isinstance(n, Call) and isinstance(n.op, Op)
             and n.op.name == "nn.avg_pool2d" and tuple(n.attrs["pool_size"]) == (2, 2)]
    conv_in = [int(rg.type_of(p.args[0].args[0], mod=typed).shape[1]) for p in pools]  # per transition
    before = _pooled_channels(mod)
    assert len(before) == 3 and all(b * 2 == c for b, c in zip(before, conv_in, strict=True))
    without = [f for f in default_rule_files() if f.name != SHIPPED.name]
    base = rg.optimize(mod, rules=without, cost="latency", check=False, params=params, repeats=1)
    assert _pooled_channels(base.module) == before
    res = rg.optimize(mod, cost="latency", check=True, params=params, repeats=1)  # the default rules
    after = _pooled_channels(res.module)
    # a transition now pools the convolution's input (twice the channels, 4x fewer positions to convolve)
    assert len(after) == 3 and any(a == c for a, c in zip(after, conv_in, strict=True)), (after, conv_in)
    assert res.cost_after <= base.cost_after
    assert res.check_passed


def test_a_bias_does_not_move_through_a_padded_pool_that_counts_its_padding():
    assert works_on_images("nn.conv2d")
    result = synthesize(["nn.avg_pool2d", "nn.bias_add"], size=2, variables_count=2, literals=(),
                        both_ways=True, progress=False)
    bias_moves = [r.statement for r in result.rules if "bias_add" in r.statement]
    # through the unpadded 2x2 pool, yes; through Inception's padded pool (count_include_pad), never
    assert any("pool_size=[2, 2]" in s for s in bias_moves), result.text
    assert not any("count_include_pad=True" in s or "**?g" in s for s in bias_moves), result.text
    # written by hand, the checker refuses both the padded pool and every window (**?g)
    padded = ('pool_size=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], ceil_mode=False, '
              'count_include_pad=True, layout="NCHW", out_layout=""')
    text = (f"rule padded : nn.bias_add(nn.avg_pool2d(?a, {padded}), ?b, axis=1) => "
            f"nn.avg_pool2d(nn.bias_add(?a, ?b, axis=1), {padded})\n"
            'rule any-window : nn.bias_add(nn.avg_pool2d(?a, layout="NCHW", **?g), ?b, axis=1) => '
            'nn.avg_pool2d(nn.bias_add(?a, ?b, axis=1), layout="NCHW", **?g)\n')
    results = check_rules(parse_rules(text, "t.rules", "t"))
    assert [r.status for r in results] == ["unsound", "unsound"], [r.detail for r in results]
