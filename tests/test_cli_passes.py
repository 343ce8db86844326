"""``relaygraph convert`` and ``relaygraph passes``."""

import pytest

from relaygraph.cli import main

PROGRAM = '#[version = "0.0.5"]\ndef @main(%x: float32) {\n  %1 = log(%x);\n  add(%1, %1)\n}\n'


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "p.relay"
    path.write_text(PROGRAM)
    return path


def test_convert_to_anf_and_back(program, capsys, tmp_path):
    assert main(["convert", "--to", "anf", str(program)]) == 0
    anf = capsys.readouterr().out
    assert "let %x1 = log(%x);" in anf and "let %x2 = add(%x1, %x1);" in anf
    anf_path = tmp_path / "anf.relay"
    anf_path.write_text(anf)
    assert main(["convert", "--to", "gnf", str(anf_path)]) == 0
    assert capsys.readouterr().out == PROGRAM.replace("%1", "%0")


def test_passes_pipeline_with_timing(program, capsys):
    assert main(["passes", str(program), "-p", "ToANormalForm,DeadCodeElimination", "--timing"]) == 0
    out = capsys.readouterr().out
    assert "// pass timing" in out and "ToANormalForm:" in out and "DeadCodeElimination:" in out


def test_passes_runs_a_named_pipeline(tmp_path, capsys):
    path = tmp_path / "bn.relay"
    path.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 2, 4, 4), float32], '
                    '%w: Tensor[(2, 2, 3, 3), float32], %g: Tensor[(2), float32], %b: Tensor[(2), float32], '
                    '%m: Tensor[(2), float32], %v: Tensor[(2), float32]) {\n'
                    '  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);\n'
                    '  %1 = nn.batch_norm(%0, %g, %b, %m, %v);\n  %1.0\n}\n')
    assert main(["passes", str(path), "-p", "tvm-o3"]) == 0
    out = capsys.readouterr().out
    assert "nn.batch_norm" not in out and "Primitive=1" in out


@pytest.mark.parametrize("argv, words", [
    (["passes", "{p}", "-p", "Bogus"], ["unknown pass 'Bogus'", "ToANormalForm"]),
    (["passes", "{p}", "-p", "FuseOps(depth=1)"], ["no option 'depth'"]),
    (["convert", "--to", "anf", "/no/such/file.relay"], ["no such file"]),
])
def test_bad_input_is_exit_code_2_with_one_message(program, capsys, argv, words):
    argv = [a.replace("{p}", str(program)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "Traceback" not in err


def test_syntax_errors_show_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.relay"
    bad.write_text('#[version = "0.0.5"]\ndef @main(%x: float32) {\n  add(%x, %y)\n}\n')
    assert main(["convert", "--to", "anf", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3:11" in err and "unbound variable %y" in err and "^" in err


def test_optimize_compare_pipeline_prints_the_three_programs(capsys):
    argv = ["optimize", "--model", "resnet-18", "--small", "--time-limit", "20", "--iter-limit", "2",
            "--no-progress", "--compare-pipeline"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "original vs the tvm-o3 pipeline vs the e-graph" in out
    for label in ("original", "tvm-o3 pipeline", "e-graph"):
        assert any(line.startswith(label) and " ms " in line for line in out.splitlines())
    assert "ops changed by tvm-o3 pipeline: " in out and "nn.batch_norm -" in out


def test_optimize_compare_pipeline_refuses_an_unknown_pipeline(capsys):
    assert main(["optimize", "--model", "resnet-18", "--small", "--compare-pipeline", "tvm-o9"]) == 2
    err = capsys.readouterr().err
    assert "unknown pipeline 'tvm-o9'; known: tvm-o3, tvm-o4" in err and "Traceback" not in err
