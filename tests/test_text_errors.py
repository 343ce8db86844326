"""Malformed Relay text: a ParseError naming file:line:column, with the line and a caret."""

import random
import re
import signal
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.text import parse, parse_expr

HEADER = '#[version = "0.0.5"]\n'
GOLDEN = Path(__file__).parent / "golden" / "text"
TVM = Path(__file__).parent / "data" / "tvm-text"


def error_of(text: str, expr: bool = False) -> rg.ParseError:
    with pytest.raises(rg.ParseError) as info:
        (parse_expr if expr else parse)(text, source_name="prog.relay")
    return info.value


def check(err: rg.ParseError, text: str, line: int, column: int, message: str) -> None:
    """The diagnostic's position, message, source line and caret."""
    assert (err.span.line, err.span.column) == (line, column), str(err)
    assert re.search(message, err.message), err.message
    head, shown, caret = str(err).split("\n")
    assert head == f"prog.relay:{line}:{column}: error: {err.message}"
    assert shown == "  " + text.splitlines()[line - 1]
    assert caret.startswith("  " + " " * (column - 1) + "^")


# (text, line, column, message)
CASES = {
    "syntax": (HEADER + "def @main(%x: float32) {\n  add(%x,, %x)\n}\n", 3, 10,
               r"syntax error: unexpected `,`"),
    "unbound": (HEADER + "def @main(%x: float32) {\n  %0 = exp(%x);\n  add(%0, %y)\n}\n", 4, 11,
                r"unbound variable %y"),
    "unknown op": (HEADER + "def @main(%x: float32) {\n  nn.relux(%x)\n}\n", 3, 3,
                   r"unknown operator or constructor `nn.relux`; did you mean nn.relu"),
    "unknown constructor": (HEADER + "type L { N }\ndef @main() {\n  Cons(1, N)\n}\n", 4, 3,
                            r"unknown operator or constructor `Cons`"),
    "unknown pattern constructor": (
        HEADER + "type L { N }\ndef @f(%l: L) -> int32 {\n  match (%l) {\n    M => 0,\n  }\n}\n",
        5, 5, r"unknown constructor M in a pattern"),
    "duplicate global": (HEADER + "def @f() { 1 }\ndef @g() { 2 }\ndef @f() { 3 }\n", 4, 5,
                         r"duplicate definition of global @f"),
    "duplicate type": (HEADER + "type T { A }\ntype T { B }\n", 3, 6, r"duplicate definition of type T"),
    "duplicate constructor": (HEADER + "type T { A }\ntype U { A }\n", 3, 10,
                              r"duplicate definition of constructor A"),
    "int32 overflow": (HEADER + "def @main() {\n  add(1, 2147483648i32)\n}\n", 3, 10,
                       r"the integer `2147483648i32` does not fit in int32"),
    "float without suffix": (HEADER + "def @main() {\n  (1, 1.5)\n}\n", 3, 7,
                             r"`1.5` needs a dtype suffix: write `1.5f`"),
    "bad float suffix": (HEADER + "def @main() {\n  2.5f8\n}\n", 3, 3, r"invalid float suffix `f8`"),
    "float16 overflow": (HEADER + "def @main() {\n  1e5f16\n}\n", 3, 3, r"does not fit in float16"),
    "undefined global": (HEADER + "def @main() {\n  @nope(1)\n}\n", 3, 3, r"undefined global @nope"),
    "undefined graph variable": (HEADER + "def @main(%x: float32) {\n  %0 = exp(%x);\n  add(%0, %1)\n}\n",
                                 4, 11, r"graph variable %1 is used before"),
    "undefined type": (HEADER + "def @main(%x: Tree[int32]) {\n  %x\n}\n", 2, 15, r"undefined type Tree"),
    "unknown dtype": (HEADER + "def @main(%x: Tensor[(3), float31]) {\n  %x\n}\n", 2, 27,
                      r"unknown dtype float31"),
    "missing header": ("def @main() {\n  1\n}\n", 1, 1, r"expected the version header"),
    "wrong version": ('#[version = "0.0.4"]\ndef @main() { 1 }\n', 1, 1,
                      r'unsupported text format version "0.0.4"'),
    "unterminated comment": (HEADER + "def @main() {\n  /* a /* b */\n  1\n}\n", 3, 3,
                             r"unterminated comment"),
    "unterminated string": (HEADER + "def @main(%x: float32) {\n  nn.softmax(%x, axis=\"1)\n}\n",
                            3, 23, r"unterminated string"),
    "bad character": (HEADER + "def @main() {\n  1 $ 2\n}\n", 3, 5, r"unexpected character '\$'"),
    "unknown attribute": (HEADER + "def @main(%x: float32) {\n  nn.softmax(%x, axes=1)\n}\n", 3, 18,
                          r"operator nn.softmax has no attribute axes"),
    "attribute before argument": (HEADER + "def @main(%x: float32) {\n  add(%x, axis=1, %x)\n}\n", 3, 3,
                                  r"arguments must come before attributes"),
    "missing metadata": (HEADER + "def @main() {\n  meta[relay.Constant][0]\n}\n", 3, 3,
                         r"refers to a #\[metadata\] section, but there is none"),
    "pattern arity": (HEADER + "type L { C(int32) }\ndef @f(%l: L) -> int32 {\n"
                      "  match (%l) {\n    C(%a, %b) => 0,\n  }\n}\n", 5, 5,
                      r"constructor C has 1 field\(s\), the pattern gives 2"),
    "projection index": (HEADER + "def @main(%t: (int32,)) {\n  %t.x\n}\n", 3, 6,
                         r"syntax error: unexpected `x`"),
    "end of text": (HEADER + "def @main() {\n  (1, 2\n", 3, 8, r"the text ends early; expected"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_positions_and_messages(name):
    text, line, column, message = CASES[name]
    check(error_of(text), text, line, column, message)


def test_metadata_index_out_of_range():
    text = (GOLDEN / "dataflow.relay").read_text().replace("meta[relay.Constant][0]",
                                                           "meta[relay.Constant][3]")
    err = error_of(text)
    assert "meta[relay.Constant][3] is out of range: the metadata section has 1" in err.message


def test_broken_metadata_json():
    text = (GOLDEN / "dataflow.relay").read_text()
    err = error_of(text[: text.index('"b64ndarrays"')])
    assert "the metadata section is not valid JSON" in err.message
    assert err.span.line == text.count("\n", 0, text.index("#[metadata]")) + 1


def test_expression_errors():
    err = error_of("let %x = 1;\n%y", expr=True)
    assert (err.span.line, err.span.column) == (2, 1) and err.message == "unbound variable %y"


# -- fuzzing -------------------------------------------------------------------------------------
_TOKEN = re.compile(r'%[\w/]+|@\w+|meta\[[^\]]*\]\[\d+\]|"[^"\n]*"|-?\d[\w.+-]*|[A-Za-z_][\w.]*|->|=>|'
                    r"==|!=|<=|>=|\S")


def _programs() -> list[str]:
    paths = [p for p in sorted(GOLDEN.glob("*.relay")) if not p.name.endswith(".in.relay")]
    texts = [p.read_text().split("#[metadata]")[0] for p in paths]
    texts.append(re.sub(r"/\*[^*]*\*/", "", (TVM / "dcgan.relay").read_text()))
    return texts


def _mutate(text: str, rng: random.Random) -> str:
    """Delete, duplicate, swap or replace a few tokens of a program (keeping its header)."""
    tokens = _TOKEN.findall(text[len(HEADER):])
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(tokens))
        kind = rng.choice(["delete", "duplicate", "swap", "replace"])
        if kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap":
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            tokens[i] = tokens[rng.randrange(len(tokens))]
    return HEADER + " ".join(tokens)


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def test_mutated_programs_raise_only_parse_errors():
    rng = random.Random(20240617)
    programs = _programs()
    previous = signal.signal(signal.SIGALRM, _alarm)
    outcomes = {"parsed": 0, "error": 0}
    try:
        for _ in range(400):
            text = _mutate(rng.choice(programs), rng)
            signal.setitimer(signal.ITIMER_REAL, 20.0)  # a watchdog against hangs, not a timing
            try:
                mod = parse(text, source_name="fuzz.relay")
                rg.astext(mod)
                outcomes["parsed"] += 1
            except rg.ParseError as err:
                assert str(err).startswith("fuzz.relay:") and "\n  " in str(err), str(err)
                outcomes["error"] += 1
            except _Hang:
                pytest.fail(f"parsing hung on:\n{text}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert outcomes["error"] > 200 and outcomes["parsed"] > 0, outcomes
