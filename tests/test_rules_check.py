"""The soundness checker and `relaygraph rules check`: shipped rules are sound, bad ones are caught."""

from __future__ import annotations

import re

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.errors import RuleError
from relaygraph.ops.fused_ops import FUSED_OPS
from relaygraph.rewrite import Rule, load_rules, parse_rules
from relaygraph.rewrite.soundness import check_rule, check_rules, format_results

RULES = "rules"


def _check(text: str, **kw):
    return check_rules(parse_rules(text, "t.rules", "t"), **kw)


def test_every_shipped_rule_is_sound():
    rules = load_rules(RULES)
    results = check_rules(rules)
    egglog_only = {r.name for r in rules if not isinstance(r, Rule)}  # tested in an e-graph
    bad = [r for r in results if r.status != "sound" and r.rule not in egglog_only]
    assert not bad, format_results(bad)
    assert sum(r.status == "sound" for r in results) >= 80
    skipped = [r for r in results if r.rule in egglog_only]
    assert skipped and all(r.status == "skipped" for r in skipped)


def test_a_wrong_rule_is_caught_with_a_counterexample():
    [result] = _check("rule bad : subtract(?a, ?b) => subtract(?b, ?a)")
    assert result.status == "unsound" and not result.ok
    assert "?a: " in result.detail and "?b: " in result.detail  # the shapes
    assert "inputs: ?a: [" in result.detail  # the inputs
    assert "max abs error" in result.detail and "left" in result.detail and "right" in result.detail


def test_a_rule_that_changes_a_type_is_refused():
    rule = parse_rules("rule bad : sum(?x) => ?x", "t.rules", "t")[0]
    with pytest.raises(RuleError, match=r"t.rules:1:1: error: rule bad changes type: Tensor\["):
        check_rule(rule)
    [result] = check_rules([rule])
    assert result.status == "refused" and "changes type" in result.detail


def test_domains_and_conditions_are_respected():
    # log needs positive inputs: drawn from log's domain, so the identity holds
    [ok] = _check("rule log-exp : exp(log(?x)) => ?x")
    assert ok.status == "sound", ok.detail
    # ... but a product of inputs from no domain is not positive: caught
    [bad] = _check("rule log-mul : log(multiply(?a, ?b)) => add(log(?a), log(?b))")
    assert bad.status == "unsound"
    # a condition limits the instances
    [cond] = _check("rule r : reshape(?x) => ?x if shape(?x) == shape(?root)")
    assert cond.status == "sound" and cond.trials == 3


def test_omitted_left_attributes_are_tried_with_other_values():
    # strides is omitted on the left (any value) but defaulted on the right: wrong for stride 2
    [r] = _check("rule r : nn.conv2d(?x, ?w, padding=[1, 1]) => nn.conv2d(?x, ?w, padding=[1, 1])",
                 trials=8)
    assert r.status in ("unsound", "refused"), r.detail


def test_not_instantiable_is_not_sound():
    [r] = _check("rule r : negative(?x) => negative(?x) if rank(?x) == 2 and rank(?x) == 3")
    assert r.status == "not instantiable" and r.trials == 0 and not r.ok


def test_python_right_sides_are_checked_through_apply():
    [r] = _check("rule r : reshape(?x) => reshape(reshape(?x, newshape=[-1]), newshape=shape(?root))")
    assert r.status == "sound", r.detail
    [bad] = _check("rule r : reshape(reshape(?x)) => reshape(?x, newshape=[shape(?x)[0], -1])")
    assert bad.status == "refused"


def test_let_rules_use_the_bound_variable():
    [_, ok] = _check("rule r : let ?x = ?v; ?b => subst(?b, ?x, ?v)")
    assert ok.status == "sound", ok.detail
    [bad] = _check("rule r : let ?x = ?v; ?b => ?b")  # ?b may use ?x
    assert bad.status == "refused" and "outside the let" in bad.detail
    [_, wrong] = _check("rule r : let ?x = ?v; ?b => subst(?b, ?x, negative(?v))", trials=5)
    assert wrong.status == "unsound"


def test_egg_rules_are_skipped(tmp_path):
    path = tmp_path / "x.egg"
    path.write_text('(ruleset x)\n(rewrite (r:exp ?a) (r:exp ?a) :ruleset x :name "same")\n')
    [r] = check_rules(load_rules(path))
    assert r.status == "skipped" and r.ok


def test_fused_kernels_agree_with_their_parts():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((2, 8), (5, 8), (5,)))
    got = rg.ops.get("fused.dense_bias_gelu").kernel([x, w, b], {})
    y = x @ w.T + b
    from scipy.special import erf

    want = (y * 0.5) * (1 + erf(y * np.float32(0.70710677)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    conv = rg.ops.get("fused.conv2d_bias_relu")
    assert conv.pattern is rg.ops.PatternKind.OUT_ELEMWISE_FUSABLE
    t = [rg.TensorType((1, 3, 8, 8)), rg.TensorType((4, 3, 3, 3)), rg.TensorType((4,))]
    out = conv.type_relation(t, {})
    parts = rg.ops.get("nn.conv2d").flops(t[:2], out, {}) + 2 * 4 * 36
    assert conv.flops(t, out, {}) == pytest.approx(parts)
    assert conv.bytes(t, out, {}) == 4 * (3 * 64 + 4 * 27 + 4 + 4 * 36)  # inputs and output only
    assert len(FUSED_OPS) == len([o for o in rg.ops.all_ops() if o.name.startswith("fused.")])


def test_cli_checks_rules(capsys, tmp_path):
    assert main(["rules", "check", f"{RULES}/fusion.rules", "--trials", "1"]) == 0
    out = capsys.readouterr().out
    assert "fuse-conv2d-bias-relu" in out and "17 sound" in out
    bad = tmp_path / "bad.rules"
    bad.write_text("rule fine : add(?a, ?b) => add(?b, ?a)\n"
                   "rule bad : subtract(?a, ?b) => subtract(?b, ?a)\n")
    assert main(["rules", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^bad +unsound", out, re.M) and "1 sound, 1 unsound" in out
    assert main(["rules", "check", str(bad), "--rule", "fine"]) == 0
    capsys.readouterr()


def test_cli_bad_input_exits_2(capsys, tmp_path):
    assert main(["rules", "check", str(tmp_path / "missing.rules")]) == 2
    assert "no such rule file" in capsys.readouterr().err
    broken = tmp_path / "broken.rules"
    broken.write_text("rule oops : add(?a, ?b => ?a\n")
    assert main(["rules", "check", str(broken)]) == 2
    err = capsys.readouterr().err
    assert f"{broken}:1:" in err and "rule oops" in err and "^" in err


def test_bert_saturates_with_the_shipped_rules_and_merges_qkv():
    mod, params = rg.zoo.get("bert", small=True)
    rules = load_rules([f"{RULES}/algebraic.rules", f"{RULES}/fusion.rules"])
    report = rg.saturate(mod, rules, node_limit=50_000, time_limit=None, progress=False)
    assert report.stop_reason in ("saturated", "node-limit", "iter-limit")
    assert report.matches.get("merge-dense-split", 0) > 0
    assert report.matches.get("fuse-dense-bias", 0) > 0
    best = rg.IRModule.from_expr(report.egraph.extract("greedy-dag"))
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 8, 32)).astype("float32")
    want = rg.evaluate(mod, data=data, **params)
    got = rg.evaluate(best, data=data, **params)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- edge cases: 1x1 images, pool windows wholly in padding ------------------------------------------

_FLATTEN_BIAS = ("rule flatten-bias : nn.bias_add(nn.batch_flatten(?a), ?b, axis=1) => add(?a, ?b) "
                 "if rank(?a) == 2 or rank(?a) == 4")
_RELU_MAX_POOL = "rule relu-max-pool : nn.max_pool2d(nn.relu(?a), **?w) <=> nn.relu(nn.max_pool2d(?a, **?w))"


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_bias_through_batch_flatten_is_refused_on_a_1x1_image(seed):
    # right for (n, c) inputs; for a (n, c, 1, 1) image the add broadcasts to another type, which
    # only an image whose spatial dimensions are 1 reaches (all dimensions equal never types)
    [result] = _check(_FLATTEN_BIAS, seed=seed)
    assert result.status == "refused", result.detail
    assert re.search(r"\?a: Tensor\[\(\d+, \d+, 1, 1\), float32\]", result.detail), result.detail


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_relu_through_any_max_pool_is_refused(seed):
    # a window wholly inside the padding gives -inf before the relu, 0 after it
    results = _check(_RELU_MAX_POOL, seed=seed)
    assert [r.status for r in results] == ["unsound", "unsound"], format_results(results)
    assert any("-inf" in r.detail for r in results)
    # with the window pinned to one that always holds data, it stays sound
    window = 'pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], ceil_mode=False, layout="NCHW", **?w'
    [ok] = _check(f"rule r : nn.max_pool2d(nn.relu(?a), {window}) => nn.relu(nn.max_pool2d(?a, {window}))",
                  seed=seed)
    assert ok.status == "sound", ok.detail


def test_cli_refuses_the_edge_case_rules_with_a_counterexample(capsys, tmp_path):
    bad = tmp_path / "edges.rules"
    bad.write_text(f"{_FLATTEN_BIAS}\n{_RELU_MAX_POOL}\n")
    assert main(["rules", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^flatten-bias +refused", out, re.M) and ", 1, 1)" in out
    assert re.search(r"^relu-max-pool +unsound", out, re.M) and "-inf" in out
    assert "Traceback" not in out
