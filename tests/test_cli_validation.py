"""Bad input is refused up front, in one line that names the file or the option, with exit code 2
and no traceback, the same way through the command line and the API."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.extract import from_json, ilp
from relaygraph.validate import EXTRACTORS, cost_model_names, read_text

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32]) {
  %0 = nn.dense(%x, %w, units=3);
  nn.relu(%0)
}
"""
BINARY = b"rule a : add(?a, ?b) => add(?b, ?a)\nrule b \xff\xfe\x00 : x\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "m.relay").write_text(PROGRAM)
    (tmp_path / "bin.rules").write_bytes(BINARY)
    (tmp_path / "bin.relay").write_bytes(b'#[version = "0.0.5"]\n\x00\x01\x02')
    (tmp_path / "empty.rules").write_text("")
    (tmp_path / "empty.relay").write_text("\n")
    (tmp_path / "comments.rules").write_text("# nothing here yet\n")
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "drop-dense.rules").write_text("rule add-commute : add(?a, ?b) => add(?b, ?a)\n"
                                               "rule drop-dense : nn.dense(?x, ?w) => ?x\n")
    return tmp_path


def run(capsys, *argv):
    """Exit code and stderr of the command line; an exception escaping main fails the test."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return code, err


# -- item 3: binary files ------------------------------------------------------------------------

def test_binary_rule_file_through_rules_check_and_optimize(files, capsys):
    code, err = run(capsys, "rules", "check", files / "bin.rules")
    assert code == 2
    assert err.startswith(f"{files / 'bin.rules'}:2:8: error: not a text file: byte 0xff is not UTF-8 "
                          f"(at byte offset 43)")
    assert err.count("error:") == 1
    code, err = run(capsys, "optimize", files / "m.relay", "--rules", files / "bin.rules", "--no-check")
    assert code == 2 and "bin.rules:2:8: error: not a text file" in err


def test_binary_files_through_the_api_name_the_file_and_position(files):
    with pytest.raises(rg.RuleError) as info:
        rg.load_rules(files / "bin.rules")
    assert info.value.span.line == 2 and info.value.span.column == 8
    assert "byte 0xff is not UTF-8 (at byte offset 43)" in str(info.value)
    with pytest.raises(rg.ParseError, match=r"bin.relay:2:1: error: not a text file: a NUL byte "
                                            r"\(at byte offset 21\)"):
        rg.text.parse_file(files / "bin.relay")
    with pytest.raises(rg.RuleError, match="not a text file"):
        rg.optimize(rg.text.parse_file(files / "m.relay"), rules=files / "bin.rules", check=False)


def test_binary_relay_file_through_fmt_passes_and_inspect(files, capsys):
    for argv in (["fmt"], ["passes", "-p", "InferType"], ["inspect"], ["optimize"]):
        code, err = run(capsys, *argv, files / "bin.relay")
        assert code == 2 and "bin.relay:2:1: error: not a text file: a NUL byte" in err, argv


def test_unreadable_file_is_named(files, capsys, monkeypatch):
    locked = files / "m.relay"
    real = Path.read_bytes

    def refuse(self):  # a file this user may not read (chmod does not stop root, so simulate it)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    code, err = run(capsys, "fmt", locked)
    assert code == 2 and err == f"relaygraph: error: {locked}: cannot read it: Permission denied\n"
    with pytest.raises(rg.ParseError, match="m.relay: cannot read it: Permission denied"):
        rg.text.parse_file(locked)


# -- item 4: limits and names checked before any work --------------------------------------------

@pytest.mark.parametrize("flag,value,message", [
    ("--time-limit", "-5", "--time-limit must be a positive number of seconds, got -5.0"),
    ("--time-limit", "0", "--time-limit must be a positive number of seconds, got 0.0"),
    ("--node-limit", "0", "--node-limit must be a positive integer, got 0"),
    ("--iter-limit", "-1", "--iter-limit must be a positive integer, got -1"),
    ("--cost", "bogus",
     "unknown cost model 'bogus'; known: node-count, flops, bytes, latency, measured, cpu"),
    ("--extractor", "bogus", "unknown extractor 'bogus'; known: tree, greedy-dag, greedy-dag+ls, ilp"),
])
def test_optimize_refuses_bad_limits_and_names(files, capsys, flag, value, message):
    code, err = run(capsys, "optimize", files / "m.relay", flag, value)
    assert code == 2 and err == f"relaygraph: error: {message}\n"
    assert "optimizing" not in capsys.readouterr().out  # refused before the program was read


@pytest.mark.parametrize("argv,message", [
    (["rules", "check", "--trials", "0"], "--trials must be a positive integer, got 0"),
    (["extract-bench", "--time-limit", "-1"], "--time-limit must be a positive number of seconds"),
    (["extract-bench", "--jobs", "0"], "--jobs must be a positive integer, got 0"),
    (["inspect", "--limit", "0"], "--limit must be a positive integer, got 0"),
])
def test_other_commands_refuse_non_positive_counts(files, capsys, argv, message):
    target = files / ("drop-dense.rules" if argv[0] == "rules" else "m.relay")
    code, err = run(capsys, *argv, target)
    assert code == 2 and message in err


@pytest.mark.parametrize("options,message", [
    ({"cost": "bogus"}, "unknown cost model 'bogus'; known: node-count, flops"),
    ({"extractor": "bogus"}, r"unknown extractor 'bogus'; known: tree, greedy-dag, greedy-dag\+ls, ilp"),
    ({"time_limit": -5}, "time_limit must be a positive number of seconds, got -5"),
    ({"node_limit": 0}, "node_limit must be a positive integer, got 0"),
    ({"iter_limit": -1}, "iter_limit must be a positive integer, got -1"),
    ({"iter_limit": 2.5}, "iter_limit must be a positive integer or None, got 2.5"),
    ({"ilp_time_limit": 0}, "ilp_time_limit must be a positive number of seconds, got 0"),
])
def test_api_optimize_refuses_bad_options_before_any_work(files, options, message, monkeypatch):
    import relaygraph.egraph.saturation as saturation

    def never(*args, **kwargs):
        raise AssertionError("saturation started")

    monkeypatch.setattr(saturation, "saturate", never)
    with pytest.raises(rg.RelayError, match=message):
        rg.optimize(rg.text.parse_file(files / "m.relay"), **options)


def test_api_saturate_and_ilp_refuse_non_positive_limits():
    fn = rg.Function([x := rg.var("x", shape=(2,))], rg.op.add(x, x))
    with pytest.raises(rg.RelayError, match="node_limit must be a positive integer, got 0"):
        rg.saturate(fn, [], node_limit=0)
    graph = from_json({"nodes": {"a": {"op": "a", "eclass": "0", "children": [], "cost": 1.0},
                                 "b": {"op": "b", "eclass": "1", "children": ["a"], "cost": 1.0}},
                       "root_eclasses": ["1"]})
    with pytest.raises(rg.RelayError, match="time_limit must be a positive number of seconds, got -1"):
        ilp(graph, time_limit=-1)
    assert ilp(graph, time_limit=5).choice  # a positive limit is fine


def test_the_names_in_the_help_are_those_the_validator_knows():
    from relaygraph.cli.cmd_optimize import COSTS
    from relaygraph.egraph.cost import COST_MODELS

    assert list(COSTS) == cost_model_names() == list(COST_MODELS)
    assert set(EXTRACTORS) <= {"tree", "greedy-dag", "greedy-dag+ls", "ilp"}


# -- item 5: directories and empty files ---------------------------------------------------------

def test_fmt_on_a_directory_says_it_is_one(files, capsys):
    code, err = run(capsys, "fmt", files / "empty-dir")
    assert code == 2
    assert err == f"relaygraph: error: {files / 'empty-dir'}: is a directory, not a Relay file\n"
    code, err = run(capsys, "fmt", files / "missing.relay")
    assert code == 2 and err == f"relaygraph: error: {files / 'missing.relay'}: no such file\n"


@pytest.mark.parametrize("name,message", [
    ("empty-dir", "empty-dir: no .rules or .egg files in this directory"),
    ("empty.rules", "empty.rules: empty rule file"),
    ("comments.rules", "comments.rules: no rules (only comments)"),
])
def test_rules_check_on_nothing_to_check_is_bad_input(files, capsys, name, message):
    code, err = run(capsys, "rules", "check", files / name)
    assert code == 2 and err.startswith("relaygraph: error: ") and message in err
    assert err.count("\n") == 1
    with pytest.raises(rg.RuleError, match=re.escape(message)):
        rg.load_rules(files / name)


def test_empty_relay_file_is_bad_input(files, capsys):
    code, err = run(capsys, "fmt", files / "empty.relay")
    assert code == 2 and err == f"relaygraph: error: {files / 'empty.relay'}: empty Relay file\n"
    with pytest.raises(rg.ParseError, match="empty Relay file"):
        rg.text.parse_file(files / "empty.relay")
    with pytest.raises(rg.ParseError, match="is a directory"):
        rg.text.parse_file(files / "empty-dir")


def test_read_text_returns_the_text_of_a_good_file(files):
    assert read_text(files / "m.relay") == PROGRAM


# -- item 6: messages ----------------------------------------------------------------------------

def test_error_is_said_once_for_a_diagnostic(files, capsys):
    bad = files / "bad.relay"
    bad.write_text('#[version = "0.0.5"]\ndef @main(%x) {\n  add(%x, %y)\n}\n')
    for argv in (["fmt"], ["passes", "-p", "InferType"], ["optimize"]):
        code, err = run(capsys, *argv, bad)
        assert code == 2
        assert err.splitlines()[0] == f"{bad}:3:11: error: unbound variable %y", argv
        assert err.count("error:") == 1


def test_type_changing_rule_under_optimize_gives_file_line_and_both_types(files, capsys):
    rules = files / "drop-dense.rules"
    code, err = run(capsys, "optimize", files / "m.relay", "--rules", rules, "--extractor", "tree",
                    "--no-check", "--no-progress")
    assert code == 2
    first = err.splitlines()[0]  # at the rule's file:line, with the type before and after
    assert f"{rules}:2" in first and "rule drop-dense changes type: Tensor[" in first
    assert " vs Tensor[" in first and err.count("error:") == 1
    with pytest.raises(rg.RuleError) as info:
        rg.optimize(rg.text.parse_file(files / "m.relay"), rules=rules, extractor="tree", check=False)
    assert info.value.span.line == 2 and "changes type" in info.value.message


def test_type_changing_rule_in_a_worker_is_located_too(files):
    with pytest.raises(rg.RuleError) as info:
        rg.saturate(rg.text.parse_file(files / "m.relay"), rg.load_rules(files / "drop-dense.rules"),
                    time_limit=30, isolate=True, progress=False)
    assert info.value.span is not None and info.value.span.line == 2
    assert "changes type" in info.value.message


@pytest.mark.parametrize("text,where,message", [
    ("rule r : multiply(?a, add(?b, ?c) => ?a\n", (1, 35),
     "missing `)`: the `(` at line 1, column 18 is still open at the arrow"),
    ("rule r : add(?a,\n    ?b => add(?b, ?a)\n", (2, 8),
     "missing `)`: the `(` at line 1, column 13 is still open at the arrow"),
    ("rule r : add(?a, ?b\n", (1, 20), "missing `)`: the `(` at line 1, column 13 is never closed"),
    ("rule r : add(?a, ?b)) => ?a\n", (1, 21), "`)` closes nothing"),
])
def test_bracket_errors_in_rules_point_where_reading_stopped(files, capsys, text, where, message):
    path = files / "paren.rules"
    path.write_text(text)
    with pytest.raises(rg.RuleError) as info:
        rg.load_rules(path)
    assert (info.value.span.line, info.value.span.column) == where
    assert message in info.value.message
    code, err = run(capsys, "rules", "check", path)
    assert code == 2 and err.startswith(f"{path}:{where[0]}:{where[1]}: error: rule r: {message}")


# -- item 7: zoo options and inspect -------------------------------------------------------------

def test_optimize_small_diamond_chain_works(capsys):
    code = main(["optimize", "--model", "diamond-chain", "--small", "--extractor", "tree",
                 "--no-progress", "--time-limit", "20"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("optimizing diamond-chain: 1 inputs")


def test_unknown_model_option_lists_those_accepted(files, capsys):
    code, err = run(capsys, "optimize", "--model", "diamond-chain", "-O", "layers=3")
    assert code == 2
    assert err == ("relaygraph: error: model 'diamond-chain' takes no option layers; it takes: "
                   "batch_size, depth, dtype, seed, size, small\n")
    code, err = run(capsys, "inspect", "--model", "residual-mlp", "-O", "batch-size=0")
    assert code == 2 and "option batch_size must be a positive integer, got 0" in err
    code, err = run(capsys, "optimize", files / "m.relay", "--small")
    assert code == 2 and "--small and -O are options of --model" in err


def test_inspect_takes_a_file(files, capsys):
    assert main(["inspect", str(files / "m.relay")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"file {files / 'm.relay'}\n@main(%x: Tensor[(2, 4), float32]")
    assert "  %0 = nn.dense(%x, %w)" in out and "op calls: 2 (nn.dense x1, nn.relu x1)" in out
    assert main(["inspect", "--model", "diamond-chain", "--small", "-O", "batch_size=2"]) == 0
    assert "@main(%x: Tensor[(2, 4), float32])" in capsys.readouterr().out
    code, err = run(capsys, "inspect")
    assert code == 2 and "give a Relay file or --model NAME" in err


# -- the installed command, as a user runs it ----------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["fmt", "."], "relaygraph: error: .: is a directory, not a Relay file"),
    (["optimize", "--model", "diamond-chain", "--node-limit", "0"],
     "relaygraph: error: --node-limit must be a positive integer, got 0"),
])
def test_the_command_in_a_subprocess_prints_one_line(argv, message, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "relaygraph", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr == message + "\n"


def test_a_binary_rule_file_in_a_subprocess(files):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "relaygraph", "rules", "check", "bin.rules"],
                          cwd=files, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("bin.rules:2:8: error: not a text file: byte 0xff is not UTF-8")
