"""The command line: the demo's inspect command and its bad-input path."""

import relaygraph as rg
from relaygraph.cli import main


def test_inspect_prints_real_structure(capsys):
    assert main(["inspect", "--model", "residual-mlp"]) == 0
    out = capsys.readouterr().out
    mod, _ = rg.zoo.get("residual-mlp")
    assert f"distinct nodes: {rg.node_count(mod['main'])}" in out
    assert "nn.dense x3" in out and "%0 = nn.dense(%data, %dense0_weight)" in out


def test_unknown_model_is_a_clear_usage_error(capsys):
    assert main(["inspect", "--model", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'no-such-model'" in err and "residual-mlp" in err
    assert "Traceback" not in err
