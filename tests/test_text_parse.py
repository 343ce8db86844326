"""Reading Relay text: every construct builds the right nodes, with TVM's rules."""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ir import (
    Any,
    Call,
    Constant,
    Constructor,
    Function,
    FuncType,
    GlobalVar,
    If,
    IncompleteType,
    Let,
    Match,
    Op,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefType,
    RefWrite,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    TypeCall,
    TypeVar,
    Var,
)
from relaygraph.text import parse, parse_expr, parse_file
from relaygraph.ty.dims import sym

HEADER = '#[version = "0.0.5"]\n'


def expr(text: str):
    return parse_expr(text)


def scalar(node) -> tuple:
    assert isinstance(node, Constant) and node.shape == ()
    return node.data.item(), node.dtype


# -- literals ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, value, dtype", [
    ("1", 1, "int32"), ("-7", -7, "int32"), ("2147483647", 2147483647, "int32"),
    ("2147483648", 2147483648, "int64"), ("-2147483649", -2147483649, "int64"),
    ("3i64", 3, "int64"), ("5i16", 5, "int16"), ("6i32", 6, "int32"), ("1f", 1.0, "float32"),
    ("1.5f", 1.5, "float32"), ("-0.25f", -0.25, "float32"), ("1e-05f", np.float32(1e-05), "float32"),
    ("3f16", 3.0, "float16"), ("2f64", 2.0, "float64"), ("0.1f64", 0.1, "float64"),
    ("True", True, "bool"), ("False", False, "bool"),
])
def test_literals_follow_tvms_rules(text, value, dtype):
    assert scalar(expr(text)) == (value, dtype)


def test_infinity_literal():
    v, dtype = scalar(expr("-inff"))
    assert dtype == "float32" and v == -np.inf


def test_a_minus_glued_to_digits_is_part_of_the_literal():
    call = expr("free_var %x: int32; %x - 1")
    assert call.op is Op("subtract") and scalar(call.args[1]) == (1, "int32")
    call = expr("free_var %x: int32; %x - -1")
    assert scalar(call.args[1]) == (-1, "int32")
    with pytest.raises(rg.ParseError, match="syntax error: unexpected `-1`"):
        expr("free_var %x: int32; %x -1")


def test_equal_literals_are_one_node():
    t = expr("(1f, 1f, 1, 1.0f)")
    assert t.fields[0] is t.fields[1] is t.fields[3] and t.fields[2] is not t.fields[0]


# -- operators --------------------------------------------------------------------------------
def _shape(e) -> str:
    """An operator tree as a fully parenthesized string."""
    if isinstance(e, Call):
        names = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "less": "<",
                 "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==",
                 "not_equal": "!="}
        a, b = e.args
        return f"({_shape(a)} {names[e.op.name]} {_shape(b)})"
    return e.name_hint


@pytest.mark.parametrize("text, shape", [
    ("%a + %b * %c", "(a + (b * c))"),
    ("%a * %b + %c", "((a * b) + c)"),
    ("%a - %b - %c", "((a - b) - c)"),
    ("%a / %b / %c", "((a / b) / c)"),
    ("%a - %b + %c", "((a - b) + c)"),
    ("%a < %b + %c", "(a < (b + c))"),
    ("%a == %b < %c", "(a == (b < c))"),
    ("%a != %b == %c", "((a != b) == c)"),
    ("%a <= %b >= %c", "((a <= b) >= c)"),
    ("%a * (%b + %c)", "(a * (b + c))"),
    ("%a > %b * %c - %a / %b", "(a > ((b * c) - (a / b)))"),
])
def test_binary_operators_have_relays_precedence_and_associativity(text, shape):
    e = expr(f"free_var %a: int32; free_var %b: int32; free_var %c: int32; {text}")
    assert _shape(e) == shape


# -- bindings and sharing -----------------------------------------------------------------------
def test_graph_bindings_are_shared_nodes():
    body = expr("free_var %x: float32; %0 = exp(%x); %1 = add(%0, %0); multiply(%1, %0)")
    (inner, e) = body.args
    assert inner.args[0] is inner.args[1] is e
    assert not isinstance(body, Let)


def test_let_binds_a_new_variable_in_scope():
    e = expr("let %x: int32 = 1; let %y = add(%x, 2); let %x = %y; %x")
    assert isinstance(e, Let) and isinstance(e.body, Let)
    outer, y, inner = e.var, e.body.var, e.body.body.var
    assert outer is not inner and outer.type_annotation == TensorType((), "int32")
    assert e.body.value.args[0] is outer and e.body.body.value is y and e.body.body.body is inner


def test_let_is_recursive():
    e = expr("let %f = fn (%n: int32) -> int32 { %f(%n) }; %f(1)")
    assert e.value.body.op is e.var


def test_sequencing_binds_an_unnamed_variable():
    e = expr("free_var %r: ref(int32); ref_write(%r, 1); ref_read(%r)")
    assert isinstance(e, Let) and e.var.name_hint == "" and isinstance(e.value, RefWrite)
    assert isinstance(e.body, RefRead)


def test_let_scope_ends_with_its_sequence():
    with pytest.raises(rg.ParseError, match="unbound variable %y"):
        expr("(let %y = 1; %y, %y)")


def test_free_var_declarations():
    e = expr("free_var %x: Tensor[(2), float32]; free_var %y; add(%x, %y)")
    x, y = e.args
    assert x.type_annotation == TensorType((2,), "float32") and y.type_annotation is None


def test_blocks_and_parentheses_group():
    assert expr("{ 1 }") is expr("1")
    assert expr("((1))") is expr("1")
    e = expr("(let %x = 2; %x)")
    assert isinstance(e, Let)


# -- functions, globals, calls ----------------------------------------------------------------------
def test_function_with_type_params_attrs_and_return_type():
    f = expr("fn [A](%x: A, %y: int32, Primitive=1, Composite=\"a\") -> A { %x }")
    assert isinstance(f, Function) and len(f.params) == 2 and f.body is f.params[0]
    (a,) = f.type_params
    assert isinstance(a, TypeVar) and f.ret_type is a and f.params[0].type_annotation is a
    assert dict(f.attrs.items) == {"Primitive": 1, "Composite": "a"}


def test_calls_of_functions_globals_and_curried_calls():
    mod = parse(HEADER + "def @k(%x: int32) -> fn (int32) -> int32 { fn (%y: int32) -> int32 "
                "{ %x } }\ndef @main() -> int32 { @k(1)(2) }")
    body = mod["main"].body
    assert isinstance(body.op, Call) and isinstance(body.op.op, GlobalVar)
    assert body.op.op is mod.get_global_var("k")


def test_call_attributes_are_canonical():
    call = expr("free_var %x: Tensor[(1, 3, 8, 8), float32]; free_var %w: Tensor[(4, 3, 3, 3), "
                "float32]; nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, strides=[1, 1], "
                "kernel_size=[3, 3], data_layout=\"NCHW\")")
    assert call.op is Op("nn.conv2d")
    # strides and data_layout are the defaults, so they are not stored
    assert dict(call.attrs.items) == {"padding": (1, 1, 1, 1), "channels": 4, "kernel_size": (3, 3)}
    same = expr("free_var %x: Tensor[(1, 3, 8, 8), float32]; free_var %w: Tensor[(4, 3, 3, 3), "
                "float32]; nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3])")
    assert same.attrs is call.attrs


def test_attribute_values():
    call = expr("free_var %x: Tensor[(2, 3), float32]; nn.batch_norm(%x, %x, %x, %x, %x, "
                "epsilon=2e-05f, scale=False)")
    assert call.attrs["epsilon"] == 2e-05 and call.attrs["scale"] is False
    call = expr("free_var %x: Tensor[(1, 4), float32]; free_var %w: Tensor[(4, 4), float32]; "
                "nn.dense(%x, %w, units=None)")
    assert call.attrs.get("units") is None
    call = expr("free_var %x: Tensor[(2, 3), float32]; reshape(%x, newshape=[-1, 2])")
    assert call.attrs["newshape"] == (-1, 2)


def test_ops_come_from_the_operator_table():
    with pytest.raises(rg.ParseError, match="unknown operator or constructor `nn.conv3x`"):
        expr("free_var %x; nn.conv3x(%x)")
    with pytest.raises(rg.ParseError, match="operator nn.relu has no attribute alpha"):
        expr("free_var %x; nn.relu(%x, alpha=1f)")


def test_global_references_may_come_before_definitions():
    mod = parse(HEADER + "def @even(%n: int32) -> bool { if (%n == 0) { True } else { @odd(%n - 1) } }"
                "\ndef @odd(%n: int32) -> bool { if (%n == 0) { False } else { @even(%n - 1) } }")
    odd = mod.get_global_var("odd")
    assert mod["even"].body.false_branch.op is odd
    assert mod["odd"].body.false_branch.op is mod.get_global_var("even")


# -- tuples, if, refs -------------------------------------------------------------------------------
def test_tuples_and_projection():
    assert expr("()") is Tuple(())
    one = expr("(1,)")
    assert isinstance(one, Tuple) and len(one.fields) == 1
    assert expr("(1)") is expr("1")
    t = expr("free_var %t: ((int32, int32), int32); %t.0.1")
    assert isinstance(t, TupleGetItem) and t.index == 1 and t.tuple_value.index == 0
    assert expr("(1, 2,)") is Tuple((expr("1"), expr("2")))


def test_if_and_refs():
    e = expr("free_var %c: bool; if (%c) { ref(1) } else { ref(2) }")
    assert isinstance(e, If) and isinstance(e.cond, Var) and e.cond.name_hint == "c"
    assert isinstance(e.true_branch, RefCreate) and e.true_branch.value is rg.const(1)
    assert isinstance(e.false_branch, RefCreate) and e.false_branch.value is rg.const(2)
    w = expr("free_var %r: ref(int32); ref_write(%r, ref_read(%r))")
    assert isinstance(w, RefWrite) and isinstance(w.value, RefRead)
    assert w.ref is w.value.ref and w.ref.name_hint == "r" and str(w.ref.type_annotation) == "ref(int32)"


# -- ADTs and match ----------------------------------------------------------------------------------
LIST = HEADER + """
type List[A] {
  Cons(A, List[A]),
  Nil,
}
"""


def test_adt_definitions():
    mod = parse(LIST + "extern type Handle\ntype Unit { U }")
    data = mod.get_type("List")
    cons, nil = data.constructors
    assert cons.name_hint == "Cons" and len(cons.inputs) == 2 and nil.inputs == ()
    (a,) = data.type_vars
    assert cons.inputs[0] is a and cons.inputs[1] == TypeCall(data.header, (a,))
    assert mod.get_type("Handle").constructors == ()
    assert [c.name_hint for c in mod.get_type("Unit").constructors] == ["U"]


def test_a_bare_zero_arity_constructor_is_applied():
    mod = parse(LIST + "def @f() -> List[int32] { Cons(1, Nil) }\ndef @g() -> List[int32] { Nil() }")
    nil = mod.get_constructor("Nil")
    arg = mod["f"].body.args[1]
    assert isinstance(arg, Call) and arg.op is nil and arg.args == ()
    assert mod["g"].body is arg
    assert isinstance(mod["f"].body.op, Constructor)


def test_match_patterns():
    mod = parse(LIST + """
def @f(%xs: List[(int32, int32)]) -> int32 {
  match? (%xs) {
    Cons((%a, _), Cons(%b: (int32, int32), Nil)) => %a,
    Cons(_, %rest) => 0,
  }
}""")
    m = mod["f"].body
    assert isinstance(m, Match) and not m.complete
    first, second = m.clauses
    lhs = first.lhs
    assert isinstance(lhs, PatternConstructor) and lhs.constructor.name_hint == "Cons"
    tup, tail = lhs.patterns
    assert isinstance(tup, PatternTuple) and isinstance(tup.patterns[1], PatternWildcard)
    assert isinstance(tail.patterns[0], PatternVar)
    assert tail.patterns[0].var.type_annotation == TupleType([TensorType((), "int32")] * 2)
    assert first.rhs is tup.patterns[0].var
    assert isinstance(second.lhs.patterns[0], PatternWildcard)


def test_complete_match_and_parse_expr_with_a_module():
    mod = parse(LIST)
    e = parse_expr("free_var %l: List[int32]; match (%l) { Cons(%x, _) => %x, Nil => 0 }", mod=mod)
    assert isinstance(e, Match) and e.complete
    assert e.clauses[0].lhs.constructor is mod.get_constructor("Cons")


# -- types -------------------------------------------------------------------------------------------
def _param_type(text: str):
    return expr(f"fn (%x: {text}) {{ %x }}").params[0].type_annotation


@pytest.mark.parametrize("text, typ", [
    ("Tensor[(1, 3, ?, 224), float32]", TensorType((1, 3, Any, 224), "float32")),
    ("Tensor[(3), float32]", TensorType((3,), "float32")),
    ("Tensor[(3,), float32]", TensorType((3,), "float32")),
    ("Tensor[(), int8]", TensorType((), "int8")),
    ("uint8", TensorType((), "uint8")),
    ("(float32, int64)", TupleType([TensorType((), "float32"), TensorType((), "int64")])),
    ("(float32,)", TupleType([TensorType((), "float32")])),
    ("()", TupleType([])),
    ("fn (float32) -> bool", FuncType([TensorType((), "float32")], TensorType((), "bool"))),
    ("ref(int32)", RefType(TensorType((), "int32"))),
])
def test_type_syntax(text, typ):
    assert _param_type(text) is typ


def test_symbolic_and_generic_types():
    t = _param_type("Tensor[(n, 3, h + 1, floor(w/2)), float32]")
    n, three, h1, half = t.shape
    assert n == sym("n") and three == 3 and h1 == sym("h") + 1
    assert str(half) == "floor(w/2)"
    assert isinstance(_param_type("_"), IncompleteType)
    f = _param_type("fn [T](T) -> T")
    (tv,) = f.type_params
    assert f.arg_types == (tv,) and f.ret_type is tv


# -- metadata ---------------------------------------------------------------------------------------
# A relay.Constant as TVM's own metadata section writes it: float32 [[1, 2, 3], [4, 5, 6]].
TVM_METADATA = """
#[metadata]
{
  "root": 1,
  "nodes": [
    {"type_key": ""},
    {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
    {"type_key": "Array", "data": [3]},
    {"type_key": "relay.Constant",
     "attrs": {"_checked_type_": "0", "data": "0", "span": "0", "virtual_device_": "0"}}
  ],
  "b64ndarrays": [
    "P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAgAAAAIgAQACAAAAAAAAAAMAAAAAAAAAGAAAAAAAAAAAAIA/AAAAQAAAQEAAAIBAAACgQAAAwEA="
  ],
  "attrs": {"tvm_version": "0.8.0"}
}
"""


def test_tvms_metadata_section_is_read():
    mod = parse(HEADER + "def @main(%x: Tensor[(2, 3), float32]) {\n  add(%x, meta[relay.Constant][0])\n}\n"
                + TVM_METADATA)
    const = mod["main"].body.args[1]
    assert const.dtype == "float32" and const.shape == (2, 3)
    np.testing.assert_array_equal(const.data, [[1, 2, 3], [4, 5, 6]])


# -- comments, spans, files ---------------------------------------------------------------------------
def test_comments_are_ignored():
    mod = parse(HEADER + """// a line comment
/* a block /* nested */ comment */
def @main(%x: float32 /* ty=float32 */) -> float32 { // trailing
  %0 = negative(%x) /* ty=float32 span=a.py:3:4 */;
  %0 /* the result */
}
""")
    assert mod["main"].body.op is Op("negative")


def test_parsed_modules_carry_spans_and_sources_are_registered():
    text = HEADER + "def @main(%x: float32) -> float32 {\n  %0 = negative(%x);\n  exp(%0)\n}\n"
    mod = parse(text, source_name="model.relay")
    fn = mod["main"]
    call = fn.body
    spans = mod.source_map
    assert (spans.get(call).source_name, spans.get(call).line, spans.get(call).column) == \
        ("model.relay", 4, 3)
    assert (spans.get(call.args[0]).line, spans.get(call.args[0]).column) == (3, 8)
    assert (spans.get(fn.params[0]).line, spans.get(fn.params[0]).column) == (2, 11)
    assert rg.errors.source_text("model.relay") == text


def test_parse_file_names_the_file(tmp_path):
    path = tmp_path / "bad.relay"
    path.write_text(HEADER + "def @main() {\n  %y\n}\n")
    with pytest.raises(rg.ParseError) as info:
        parse_file(path)
    assert str(info.value).startswith(f"{path}:3:3: error: unbound variable %y")


def test_top_level_exports():
    assert rg.parse is parse and rg.parse_expr is parse_expr
    mod = rg.parse(HEADER + "def @main() -> int32 { 1 }")
    assert isinstance(mod["main"].body, Constant) and isinstance(rg.astext(mod), str)


def test_empty_module_and_header_only():
    mod = parse(HEADER)
    assert len(mod) == 0 and not mod.type_definitions
    assert isinstance(parse_expr(HEADER + "1"), Constant)


def test_var_is_nominal_per_binding():
    mod = parse(HEADER + "def @f(%x: int32) -> int32 { %x }\ndef @g(%x: int32) -> int32 { %x }")
    assert isinstance(mod["f"].params[0], Var) and mod["f"].params[0] is not mod["g"].params[0]


def test_a_long_blank_tail_is_not_tokenized():
    # A metadata section is blanked out before tokenizing; the blank tail must not be scanned
    # (scanning it from every position was quadratic: minutes for a few hundred KB).
    text = '#[version = "0.0.5"]\ndef @main(%x: float32) {\n  %x\n}\n' + " \n" * 150_000
    mod = rg.parse(text)
    assert mod["main"].body is mod["main"].params[0]
