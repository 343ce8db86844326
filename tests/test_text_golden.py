"""Golden files for the text format, and the Relay text TVM printed for real models.

``tests/golden/text/NAME.relay`` is canonical text: it must parse and print back byte for byte.
``NAME.in.relay`` (when present) is the same program written by hand, with sugar (operators,
comments, sequencing, bare constructors); it must print as ``NAME.relay``. Regenerate the
canonical files with ``RELAYGRAPH_UPDATE_GOLDEN=1 pytest tests/test_text_golden.py`` and review
the diff.
"""

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.ir import Call, Function, Op, iter_post_order
from relaygraph.text import astext, parse, parse_file

GOLDEN = Path(__file__).parent / "golden" / "text"
TVM = Path(__file__).parent / "data" / "tvm-text"
UPDATE = os.environ.get("RELAYGRAPH_UPDATE_GOLDEN") == "1"
CASES = sorted(p.name[: -len(".in.relay")] for p in GOLDEN.glob("*.in.relay"))
MODELS = ["resnet18", "mobilenet", "vgg11", "dcgan"]


@pytest.mark.parametrize("name", CASES)
def test_sugared_input_prints_as_the_golden_file(name):
    source = GOLDEN / f"{name}.in.relay"
    expected = GOLDEN / f"{name}.relay"
    mod = parse_file(source)
    text = astext(mod)
    if UPDATE:
        expected.write_text(text)
    assert text == expected.read_text()
    assert rg.alpha_equal(parse(text), mod, map_free_vars=True)


@pytest.mark.parametrize("name", CASES)
def test_canonical_text_prints_back_byte_for_byte(name):
    text = (GOLDEN / f"{name}.relay").read_text()
    mod = parse(text, source_name=f"{name}.relay")
    assert astext(mod) == text


def test_golden_files_cover_every_construct():
    kinds = set()
    for name in CASES:
        mod = parse_file(GOLDEN / f"{name}.relay")
        for _, fn in mod:
            kinds.update(type(n).__name__ for n in iter_post_order(fn))
        if mod.type_definitions:
            kinds.add("TypeData")
    expected = {"Call", "Clause", "Constant", "Constructor", "Function", "GlobalVar", "If", "Let",
                "Match", "Op", "PatternConstructor", "PatternTuple", "PatternVar", "PatternWildcard",
                "RefCreate", "RefRead", "RefWrite", "Tuple", "TupleGetItem", "TypeData", "Var"}
    assert expected <= kinds, expected - kinds
    texts = "".join((GOLDEN / f"{n}.relay").read_text() for n in CASES)
    for construct in ["match?", "#[metadata]", "meta[relay.Constant][0]", "type Handle {\n}",
                      "fn [T](T) -> T", "Tensor[(3), int64]", "?", " = (\n    let ", "2147483648i64",
                      "3.25f16", "2f64", "inff", "True", "(int32,)", "ref(float32)"]:
        assert construct in texts, construct


@pytest.mark.parametrize("model", MODELS)
def test_tvm_dumps_parse_and_round_trip(model):
    path = TVM / f"{model}.relay"
    mod = parse_file(path)
    text = astext(mod)
    again = parse(text)
    assert rg.alpha_equal(again, mod)
    assert astext(again) == text
    # What TVM printed, minus its /* ty=... */ comments, is exactly what we print.
    assert text == re.sub(r" /\* ty=[^*]* \*/", "", path.read_text())


@pytest.mark.parametrize("model", MODELS)
def test_tvm_dumps_print_back_identically_with_types(model):
    path = TVM / f"{model}.relay"
    typed = rg.infer_type(parse_file(path))
    assert astext(typed, show_types=True) == path.read_text()


@pytest.mark.parametrize("model", MODELS)
def test_tvm_dumps_have_the_op_histogram_tvm_reported(model):
    facts = json.loads((TVM / "facts.json").read_text())[f"{model}.relay"]
    mod = parse_file(TVM / f"{model}.relay")
    ops = Counter(n.op.name for _, fn in mod for n in iter_post_order(fn)
                  if isinstance(n, Call) and isinstance(n.op, Op))
    assert dict(ops) == facts["ops"]
    assert sum(ops.values()) == facts["op_calls"]
    assert ("#[metadata]" in (TVM / f"{model}.relay").read_text()) == facts["meta"]
    assert isinstance(mod["main"], Function)
