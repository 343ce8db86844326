"""Spans belong to the parse that made them: an interned node shared by two files has two places."""

from __future__ import annotations

import pytest

import relaygraph as rg
from relaygraph.errors import Span
from relaygraph.text import parse_expr, parse_file

HEADER = '#[version = "0.0.5"]\n'

# The same closed, ill-typed call (float32 + int32) in two files, on different lines.
A_TEXT = HEADER + """def @main() {
  add(1f, 2)
}
"""
B_TEXT = HEADER + """// b.relay: a helper first, so the bad call sits further down
def @id(%x: float32) {
  %x
}

def @main() {
  %0 = multiply(1f, 1f);
  %1 = add(1f, 2);
  (%0, %1)
}
"""


def type_error(mod: rg.IRModule) -> rg.RelayTypeError:
    with pytest.raises(rg.RelayTypeError) as info:
        rg.infer_type(mod)
    return info.value


@pytest.fixture
def files(tmp_path):
    a, b = tmp_path / "a.relay", tmp_path / "b.relay"
    a.write_text(A_TEXT)
    b.write_text(B_TEXT)
    return a, b


def test_the_bad_call_is_one_interned_node_in_both_files(files):
    a, b = files
    mod_a, mod_b = parse_file(a), parse_file(b)
    bad_a = mod_a["main"].body
    bad_b = mod_b["main"].body.fields[1]
    assert bad_a is bad_b


def test_error_names_the_checked_files_line_after_parsing_the_other_first(files):
    a, b = files
    parse_file(a)
    err = type_error(parse_file(b))
    assert (err.span.source_name, err.span.line, err.span.column) == (str(b), 9, 8)
    assert str(err).startswith(f"{b}:9:8: error: add:")
    assert "\n    %1 = add(1f, 2);\n         ^" in str(err)


def test_error_names_the_checked_files_line_in_either_order(files):
    a, b = files
    mod_b = parse_file(b)
    mod_a = parse_file(a)
    err_a = type_error(mod_a)
    assert (err_a.span.source_name, err_a.span.line, err_a.span.column) == (str(a), 3, 3)
    assert "\n    add(1f, 2)\n    ^" in str(err_a)
    # and b, parsed first, still reports its own place after a was parsed and checked
    err_b = type_error(mod_b)
    assert (err_b.span.source_name, err_b.span.line) == (str(b), 9)


def test_the_same_node_twice_in_one_file_reports_the_first_occurrence():
    text = HEADER + """def @main() {
  %0 = multiply(1f, 1f);
  (add(1f, 2),
   %0,
   add(1f, 2))
}
"""
    mod = rg.parse(text, source_name="twice.relay")
    fields = mod["main"].body.fields
    assert fields[0] is fields[2]
    err = type_error(mod)
    assert (err.span.line, err.span.column) == (4, 4)
    assert str(err).startswith("twice.relay:4:4: error: add:")


def test_module_copies_made_by_passes_keep_the_spans(files):
    a, b = files
    parse_file(a)
    mod_b = parse_file(b)
    moved = rg.transform.DeadCodeElimination()(mod_b)
    assert moved is not mod_b and moved.source_map is mod_b.source_map
    err = type_error(moved)
    assert (err.span.source_name, err.span.line) == (str(b), 9)


def test_two_texts_under_one_name_show_their_own_lines():
    first = rg.parse(HEADER + "def @main() {\n  add(1f, 2)\n}\n")
    second = rg.parse(HEADER + "def @main() {\n  %0 = negative(1f);\n  (%0, add(1f, 2))\n}\n")
    err = type_error(first)
    assert (err.span.line, err.span.column) == (3, 3)
    assert "\n    add(1f, 2)\n    ^" in str(err)
    err = type_error(second)
    assert (err.span.line, err.span.column) == (4, 8)
    assert "\n    (%0, add(1f, 2))\n         ^" in str(err)


def test_parse_expr_fills_a_source_map_given():
    spans = rg.SourceMap()
    expr = parse_expr("(negative(1f),\n add(1f, 2))", source_name="e.relay", source_map=spans)
    assert spans.get(expr.fields[1]) == Span("e.relay", 2, 2)
    assert spans.get(expr.fields[0]) == Span("e.relay", 1, 2)
    mod = rg.IRModule(source_map=spans)
    with pytest.raises(rg.RelayTypeError) as info:
        rg.ty.infer_type_expr(expr, mod)
    assert str(info.value).startswith("e.relay:2:2: error: add:")
    # without the map the same expression still type-checks to an error, without a place
    with pytest.raises(rg.RelayTypeError, match=r"^error: add:"):
        rg.infer_type(expr)


def test_a_second_parse_into_one_map_keeps_the_first_occurrence():
    spans = rg.SourceMap()
    first = parse_expr("add(1f, 2)", source_name="one.relay", source_map=spans)
    second = parse_expr("\n\nadd(1f, 2)", source_name="two.relay", source_map=spans)
    assert first is second
    assert spans.get(first) == Span("one.relay", 1, 1)


def test_merging_modules_merges_their_spans(files):
    a, b = files
    mod_a, mod_b = parse_file(a), parse_file(b)
    helper = rg.IRModule()
    helper.update(mod_b)
    ident = mod_b["id"]
    assert helper.source_map.get(ident.body) == Span(str(b), 3, 9)  # %x, at its binding
    merged = mod_a.copy()
    merged.update(mod_b)  # b's @main replaces a's; nodes both have keep a's place
    assert merged.source_map.get(ident.body) == Span(str(b), 3, 9)
    assert merged.source_map.get(mod_a["main"].body).source_name == str(a)
    assert mod_a.source_map.get(ident.body) is None  # the original is not changed


def test_evaluation_errors_use_the_evaluated_modules_spans():
    text = HEADER + """type L { C(int32), N }

def @main() {
  match? (N) {
    C(%x) => %x,
  }
}
"""
    mod = rg.parse(text, source_name="m.relay")
    with pytest.raises(rg.EvalError, match=r"^m.relay:5:3: error: match failed"):
        rg.evaluate(mod)
