"""The command line: the demo's inspect command and its bad-input path."""

import pytest

import relaygraph as rg
from relaygraph.cli import EXIT_INTERNAL, EXIT_USAGE, cmd_inspect, main


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


def test_unknown_model_is_a_relay_error_that_is_still_a_key_error():
    with pytest.raises(rg.RelayError, match="unknown model 'nope'") as info:
        rg.zoo.get("nope")
    assert isinstance(info.value, KeyError)
    assert str(info.value).startswith("unknown model 'nope'")


def test_bad_model_option_is_a_usage_error(capsys):
    assert main(["optimize", "--model", "vgg-11", "-O", "num_layers=13", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "model 'vgg-11' fixes num_layers=11" in err and "internal error" not in err


def test_file_without_main_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "f.relay"
    path.write_text('#[version = "0.0.5"]\ndef @f(%x: float32) { %x }\n')
    assert main(["optimize", str(path), "--no-progress"]) == 2
    assert "no @main function" in capsys.readouterr().err


def _crash_with(exc):
    def run(args):
        raise exc
    return run


@pytest.mark.parametrize("exc", [KeyError("node-id 17"), ValueError("bad state"), AssertionError()])
def test_unexpected_exception_is_an_internal_error(monkeypatch, capsys, exc):
    monkeypatch.delenv("RELAYGRAPH_DEBUG", raising=False)
    monkeypatch.setattr(cmd_inspect, "_cmd_inspect", _crash_with(exc))
    assert main(["inspect", "--model", "residual-mlp"]) == EXIT_INTERNAL != EXIT_USAGE
    err = capsys.readouterr().err
    assert "relaygraph: internal error:" in err and type(exc).__name__ in err
    assert "please report" in err and "--debug" in err
    assert "relaygraph: error:" not in err and "Traceback" not in err


def test_debug_flag_and_env_print_the_traceback(monkeypatch, capsys):
    monkeypatch.setattr(cmd_inspect, "_cmd_inspect", _crash_with(KeyError("node-id 17")))
    monkeypatch.delenv("RELAYGRAPH_DEBUG", raising=False)
    assert main(["--debug", "inspect", "--model", "residual-mlp"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" in err and "node-id 17" in err
    monkeypatch.setenv("RELAYGRAPH_DEBUG", "1")
    assert main(["inspect", "--model", "residual-mlp"]) == EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err


def test_relay_error_from_a_command_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(cmd_inspect, "_cmd_inspect", _crash_with(rg.RelayError("bad program")))
    assert main(["inspect", "--model", "residual-mlp"]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "relaygraph: error: bad program"
