"""Type errors name the node, its source position (when parsed) and both types."""

from __future__ import annotations

import pytest

import relaygraph as rg
from relaygraph.errors import Span, register_source
from relaygraph.ir import Function, IRModule, TensorType, Var

HEADER = '#[version = "0.0.5"]\n'


def fails(src: str, name: str = "bad.relay") -> str:
    """The message of the type error that checking ``src`` raises."""
    mod = rg.parse(HEADER + src, source_name=name)
    with pytest.raises(rg.TypeError) as info:
        rg.infer_type(mod)
    assert isinstance(info.value, rg.RelayTypeError)
    return str(info.value)


def test_wrong_rank():
    msg = fails("""def @main(%x: Tensor[(3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  nn.conv2d(%x, %w, padding=[1, 1])
}
""")
    assert msg.startswith("bad.relay:3:3: error: nn.conv2d: data must have rank 4")
    assert "Tensor[(3, 8, 8), float32]" in msg and "Tensor[(4, 3, 3, 3), float32]" in msg
    assert "\n    nn.conv2d(%x, %w, padding=[1, 1])\n    ^" in msg


def test_broadcast_conflict():
    msg = fails("""def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(4, 3), float32]) {
  %0 = exp(%a);
  add(%0, %b)
}
""")
    assert "bad.relay:4:3: error: add: incompatible broadcast dimensions 2 and 4" in msg
    assert "Tensor[(2, 3), float32] with Tensor[(4, 3), float32]" in msg


def test_dense_reduction_mismatch():
    msg = fails("""def @main(%x: Tensor[(2, 8), float32], %w: Tensor[(4, 7), float32]) {
  nn.dense(%x, %w, units=4)
}
""")
    assert "bad.relay:3:3: error: nn.dense: reduction dimension K mismatch" in msg
    assert "Tensor[(2, 8), float32] has K=8 but Tensor[(4, 7), float32] has K=7" in msg


def test_concatenate_rank_mismatch():
    msg = fails("""def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(2, 3, 1), float32]) {
  concatenate((%a, %b), axis=1)
}
""")
    assert "bad.relay:3:3: error: concatenate: rank mismatch" in msg
    assert "field 0 is Tensor[(2, 3), float32] but field 1 is Tensor[(2, 3, 1), float32]" in msg


def test_wrong_number_of_arguments():
    msg = fails("""def @f(%a: Tensor[(3), float32], %b: Tensor[(3), float32]) {
  add(%a, %b)
}

def @main(%x: Tensor[(3), float32]) {
  @f(%x)
}
""")
    assert "bad.relay:7:3: error: call of @f: @f takes 2 argument(s) but is given 1" in msg
    assert "fn (Tensor[(3), float32], Tensor[(3), float32])" in msg
    assert "the arguments have types (Tensor[(3), float32])" in msg


@pytest.mark.parametrize("call", ["nn.layer_norm(%x, %g)",
                                  "nn.conv2d(%x, %g, %g, channels=4, kernel_size=[3, 3])"])
def test_wrong_number_of_op_arguments_with_an_untyped_input(call):
    # the op guesses its untyped inputs' types first; a wrong count must still be a type error
    msg = fails(f"def @main(%x: Tensor[(1, 2, 3, 3), float32], %g) {{\n  {call}\n}}\n")
    op, want, given = ("nn.layer_norm", 3, 2) if "layer_norm" in call else ("nn.conv2d", 2, 3)
    assert msg.startswith(f"bad.relay:3:3: error: {op} takes {want} argument(s), got {given}")


def test_argument_type_mismatch_names_the_dimension():
    msg = fails("""def @f(%a: Tensor[(3), float32]) {
  %a
}

def @main(%x: Tensor[(4), float32]) {
  @f(%x)
}
""")
    assert "call of @f: argument 0 of @f has the wrong type" in msg
    assert "Tensor[(3), float32] vs Tensor[(4), float32] (dimension 0: 3 vs 4)" in msg


def test_non_bool_if_condition():
    msg = fails("""def @main(%c: Tensor[(1), float32], %x: Tensor[(2), float32]) {
  if (%c) {
    %x
  } else {
    %x
  }
}
""")
    assert "bad.relay:3:3: error: if: the condition must be a bool scalar (bool)" in msg
    assert "got Tensor[(1), float32]" in msg


def test_if_branches_differ():
    msg = fails("""def @main(%c: bool, %x: Tensor[(2), float32], %y: Tensor[(2), int32]) {
  if (%c) {
    %x
  } else {
    %y
  }
}
""")
    assert "the two branches have different types: Tensor[(2), float32] vs Tensor[(2), int32]" in msg


def test_non_exhaustive_match():
    msg = fails("""type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%h, _) => %h,
  }
}
""")
    assert "bad.relay:8:3: error: match: the match on List[int32] is not exhaustive" in msg
    assert "no clause matches Nil" in msg


def test_nested_non_exhaustive_match_names_the_missing_value():
    msg = fails("""type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%h, Nil) => %h,
    Nil => 0,
  }
}
""")
    assert "no clause matches Cons(_, Cons(_, _))" in msg


def test_declared_return_type_mismatch():
    msg = fails("""def @main(%x: Tensor[(2, 3), float32]) -> Tensor[(3, 2), float32] {
  nn.relu(%x)
}
""")
    assert "function: the body's type does not match the declared return type" in msg
    assert "Tensor[(3, 2), float32] vs Tensor[(2, 3), float32]" in msg


def test_errors_of_built_programs_use_spans_when_attached():
    register_source("built.relay", "line one\n  the call here\n")
    x = Var("x", TensorType((2, 3)))
    call = rg.op.nn.dense(x, Var("w", TensorType((5, 4))))
    mod = IRModule.from_expr(Function(list(rg.free_vars(call)), call))
    mod.source_map.add(call, Span("built.relay", 2, 3))
    with pytest.raises(rg.TypeError) as info:
        rg.infer_type(mod)
    assert str(info.value).startswith("built.relay:2:3: error: nn.dense: reduction dimension K")
    assert "  the call here\n    ^" in str(info.value)


def test_errors_without_spans_still_name_the_node():
    x = Var("x", TensorType((2, 3)))
    with pytest.raises(rg.TypeError, match=r"^error: nn.softmax: axis=2 is out of range for rank 2"):
        rg.infer_type(IRModule.from_expr(Function([x], rg.op.nn.softmax(x, axis=2))))
