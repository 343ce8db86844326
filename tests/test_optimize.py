"""rg.optimize and ``relaygraph optimize``: end to end on zoo models, and every kind of bad input."""

import json

import pytest

import relaygraph as rg
from relaygraph.cli import main


@pytest.mark.parametrize("name", ["bert", "resnet-18", "mobilenet"])
def test_optimize_small_models_end_to_end(name):
    mod, params = rg.zoo.get(name, small=True)
    res = rg.optimize(mod, params=params, time_limit=60, repeats=1, timing_budget=0)
    assert res.check_passed, res.summary()
    assert res.cost_after <= res.cost_before * (1 + 1e-9)
    assert res.saturation.iterations and res.nodes_after > 0
    text = rg.astext(res.module)
    assert rg.alpha_equal(rg.parse(text), res.module)


def test_optimize_fuses_bert_bias_and_activation():
    mod, params = rg.zoo.get("bert", small=True)
    res = rg.optimize(mod, params=params, repeats=1, timing_budget=0)
    assert res.ops_after.get("fused.dense_bias_gelu", 0) >= 1
    assert res.ops_after.get("nn.bias_add", 0) < res.ops_before["nn.bias_add"]


@pytest.mark.parametrize("extractor", ["tree", "ilp"])
def test_optimize_with_other_extractors_and_costs(extractor):
    mod, params = rg.zoo.get("residual-mlp", layers=2, hidden=16)
    res = rg.optimize(mod, params=params, extractor=extractor, cost="flops", repeats=1, timing_budget=0)
    assert res.check_passed
    if extractor == "ilp":
        assert res.optimal is True


def test_cli_optimize_writes_program_and_report(tmp_path, capsys):
    out, report = tmp_path / "opt.relay", tmp_path / "report.json"
    code = main(["optimize", "--model", "bert", "--small", "-o", str(out), "--report", str(report),
                 "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    for heading in ("program nodes", "e-graph", "saturation", "cost (latency)", "extractor", "check",
                    "numpy time"):
        assert heading in printed
    assert rg.parse(out.read_text())["main"]
    data = json.loads(report.read_text())
    assert data["check_passed"] is True and data["cost_after"] <= data["cost_before"]


def test_cli_optimize_a_file(tmp_path, capsys):
    path = tmp_path / "p.relay"
    path.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(4), float32]) {\n'
                    '  %0 = nn.relu(%x);\n  add(%0, 0f)\n}\n')
    assert main(["optimize", str(path), "--no-progress"]) == 0
    assert "optimized program" in capsys.readouterr().out


BAD = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(4), float32]) {\n  add(%x, %y)\n}\n'
ILL_TYPED = ('#[version = "0.0.5"]\ndef @main(%x: Tensor[(4), float32], %y: Tensor[(3), float32]) {\n'
             '  add(%x, %y)\n}\n')


@pytest.mark.parametrize("case, words", [
    ("missing", ["no such file"]),
    ("syntax", ["p.relay:3:11", "unbound variable %y"]),
    ("types", ["add"]),
    ("model", ["unknown model 'no-such'"]),
    ("rules", ["bad.rules"]),
])
def test_cli_optimize_bad_input_exit_2(tmp_path, capsys, case, words):
    prog = tmp_path / "p.relay"
    rules = tmp_path / "bad.rules"
    rules.write_text("rule broken : add(?a, => ?a\n")
    argv = {
        "missing": ["optimize", str(tmp_path / "nope.relay")],
        "syntax": ["optimize", str(prog)],
        "types": ["optimize", str(prog)],
        "model": ["optimize", "--model", "no-such"],
        "rules": ["optimize", "--model", "residual-mlp", "--rules", str(rules)],
    }[case]
    prog.write_text(ILL_TYPED if case == "types" else BAD)
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert "Traceback" not in err


def test_cli_optimize_unknown_cost_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["optimize", "--model", "bert", "--cost", "nope"])
    assert info.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_bert_query_key_value_are_merged():
    mod, params = rg.zoo.get("bert", small=True)
    res = rg.optimize(mod, params=params, repeats=1, timing_budget=0)
    layers = res.ops_before["nn.layer_norm"] // 2
    assert res.ops_after.get("split", 0) == layers  # one merged Q/K/V dense per layer, split back
    assert res.ops_after.get("fused.dense_bias", 0) == res.ops_before["nn.dense"] - 2 * layers \
        - res.ops_after.get("fused.dense_bias_gelu", 0)
    # Every add & norm, the scaled softmax and the heads' reshape/transpose/reshape are fused too:
    # four head reshapes per layer (query, key, value split off, the heads merged back).
    assert res.ops_after.get("fused.add_layer_norm", 0) == res.ops_before["nn.layer_norm"]
    assert res.ops_after.get("fused.multiply_softmax", 0) == res.ops_before["nn.softmax"] == layers
    assert res.ops_after.get("fused.reshape_transpose_reshape", 0) == 4 * layers
    assert "nn.layer_norm" not in res.ops_after and "transpose" not in res.ops_after
    assert res.check_passed
