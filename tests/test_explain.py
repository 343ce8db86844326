"""``rg.optimize(..., explain=True)`` / ``relaygraph optimize --explain``: the rules that made each
changed op of the result, replayed from the original program's local terms."""

from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.optimize import bind_params

FUSION = str(Path(__file__).resolve().parents[1] / "rules" / "fusion.rules")
QUICK = dict(rules=[FUSION], cost="latency", node_limit=5000, iter_limit=4, time_limit=30, check=False,
             progress=False)


@pytest.fixture(scope="module")
def bert_explained():
    mod, params = rg.zoo.get("bert", small=True)
    res = rg.optimize(bind_params(mod, params), explain=True, **QUICK)
    return res, rg.rules.explain(res)


def test_every_change_of_bert_is_explained_by_the_rules_that_made_it(bert_explained):
    res, ex = bert_explained
    assert ex.changes and all(c.derivation is not None and c.derivation.proved for c in ex.changes)
    by_op = {c.ops_after[0]: c for c in ex.changes}
    dense = by_op["fused.dense_bias"]
    assert dense.derivation.steps == [(1, ["fuse-dense-bias"])]
    assert dense.ops_before == ["nn.bias_add", "nn.dense"]
    gelu = by_op["fused.dense_bias_gelu"]  # made in two steps: dense+bias first, then the gelu around it
    assert gelu.derivation.rules == ["fuse-dense-bias", "fuse-dense-bias-gelu"]
    assert "erf" in gelu.ops_before
    # every kind of fused op in the result is explained
    fused = {op for op in res.ops_after if op.startswith("fused.")}
    assert fused and fused <= {op for c in ex.changes for op in c.ops_after}


def test_the_explanation_text(bert_explained):
    _, ex = bert_explained
    text = ex.text()
    assert text.startswith("explanation: ") and "distinct local change(s)" in text
    assert "was: nn.bias_add(nn.dense(%v0, %v1), %v2)" in text
    assert "now: fused.dense_bias(%v0, %v1, %v2)" in text
    assert "rules: iteration 1: fuse-dense-bias; iteration 2: fuse-dense-bias, fuse-dense-bias-gelu" in text
    assert ex.to_json()[0]["proved"] is True


def test_an_unchanged_program_has_nothing_to_explain():
    x = rg.var("x", shape=(2, 3))
    res = rg.optimize(rg.Function([x], rg.op.exp(x)), explain=True, **QUICK)
    text = rg.rules.explain(res).text()
    assert text == "explanation: the extracted program is the original one (no op changed)"


def test_a_result_without_explain_says_how_to_get_one():
    x = rg.var("x", shape=(2, 3))
    res = rg.optimize(rg.Function([x], rg.op.exp(x)), **QUICK)
    with pytest.raises(rg.RelayError, match=r"run rg.optimize\(\.\.\., explain=True\)"):
        rg.rules.explain(res)


def test_cli_optimize_explain(capsys):
    argv = ["optimize", "--model", "bert", "--small", "--rules", FUSION, "--cost", "latency", "--no-check",
            "--iter-limit", "3", "--time-limit", "30", "--no-progress", "--explain"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "explanation: " in out and "rules: iteration 1: fuse-dense-bias" in out
