"""``relaygraph fmt``: canonical text out, diagnostics and exit code 2 on bad input."""

from pathlib import Path

from relaygraph.cli import main

TVM = Path(__file__).parent / "data" / "tvm-text"
GOLDEN = Path(__file__).parent / "golden" / "text"


def test_fmt_prints_canonical_text(capsys):
    assert main(["fmt", str(GOLDEN / "nat.in.relay")]) == 0
    assert capsys.readouterr().out == (GOLDEN / "nat.relay").read_text()


def test_fmt_with_types_reproduces_tvms_dump(capsys):
    assert main(["fmt", "--types", str(TVM / "vgg11.relay")]) == 0
    assert capsys.readouterr().out == (TVM / "vgg11.relay").read_text()


def test_fmt_reports_parse_errors_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.relay"
    bad.write_text('#[version = "0.0.5"]\ndef @main() {\n  add(%x, 1)\n}\n')
    assert main(["fmt", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:3:7: error: unbound variable %x\n    add(%x, 1)\n")
    assert "Traceback" not in err


def test_fmt_usage_errors(tmp_path, capsys):
    assert main(["fmt", str(tmp_path / "missing.relay")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_fmt_check_and_in_place(tmp_path, capsys):
    path = tmp_path / "prog.relay"
    path.write_text((GOLDEN / "ackermann.in.relay").read_text())
    assert main(["fmt", "--check", str(path)]) == 1
    assert "not in canonical form" in capsys.readouterr().err
    assert main(["fmt", "-i", str(path)]) == 0
    assert path.read_text() == (GOLDEN / "ackermann.relay").read_text()
    assert main(["fmt", "--check", str(path)]) == 0
