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
