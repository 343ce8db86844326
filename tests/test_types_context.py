"""Checked types belong to the result of type inference, not to the interned node.

``Nil`` is one interned node wherever it appears; its type depends on the program (and on the
use) that checked it. These tests pin that each typed result answers for itself and that a node
used at several types is reported as such instead of getting one of them silently.
"""

from __future__ import annotations

import gc

import pytest

import relaygraph as rg
from relaygraph.errors import RelayError
from relaygraph.ir import (
    Call,
    Constructor,
    Function,
    GlobalTypeVar,
    IRModule,
    TensorType,
    Tuple,
    TypeCall,
    TypeData,
    TypeVar,
    Var,
)
from relaygraph.ty import TypeMap, infer_type, infer_type_expr, known_type, types_of

I32, F32 = TensorType((), "int32"), TensorType((), "float32")

# the prelude's list, written in the module
LIST_TEXT = """
type List[A] {
  Cons(A, List[A]),
  Nil,
}
"""


def _list_module():
    a = TypeVar("a")
    lst = GlobalTypeVar("List")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    nil = Constructor("Nil", [], lst)
    mod = IRModule()
    mod.add_type(TypeData(lst, [a], [cons, nil]))
    return mod, lst, cons, nil


def _one_list(mod, lst, cons, nil, dtype: str, name: str = "main") -> Call:
    """``@name(%x) = Cons(%x, Nil)`` over a scalar of ``dtype``; returns the ``Nil()`` call."""
    x = Var("x", TensorType((), dtype))
    empty = Call(nil, ())
    mod.add(name, Function([x], Call(cons, (x, empty))))
    return empty


def test_nil_at_two_types_in_one_module_is_not_given_one_of_them():
    mod = rg.parse('#[version = "0.0.5"]\n' + LIST_TEXT + """
def @main(%x: int32, %y: float32) {
  (Cons(%x, Nil), Cons(%y, Nil))
}
""")
    typed = infer_type(mod)
    lst = typed.get_global_type_var("List")
    body = typed["main"].body
    ints, floats = body.fields
    nil = ints.args[1]
    assert nil is floats.args[1]  # one interned node, two uses
    # the expressions around each use have their own, unique types
    assert typed.type_of(ints) == TypeCall(lst, [I32])
    assert typed.type_of(floats) == TypeCall(lst, [F32])
    # the shared node itself: every type is recorded, a lookup asks for the context
    assert set(types_of(nil, typed)) == {TypeCall(lst, [I32]), TypeCall(lst, [F32])}
    with pytest.raises(RelayError, match=r"several types .*List\[float32\], List\[int32\]"):
        typed.type_of(nil)
    with pytest.raises(RelayError, match="several types"):
        rg.type_of(nil, mod=typed)
    # the printer does not pick one either
    text = rg.astext(typed, show_types=True)
    assert "ty=List[int32]" in text and "ty=List[float32]" in text


def test_two_modules_sharing_nil_each_report_their_own_type():
    base, lst, cons, nil = _list_module()
    mod_a, mod_b = base.copy(), base.copy()
    nil_a = _one_list(mod_a, lst, cons, nil, "int32")
    nil_b = _one_list(mod_b, lst, cons, nil, "float32")
    assert nil_a is nil_b  # hash-consing shares it between the two programs
    typed_a = infer_type(mod_a)
    assert rg.type_of(nil_a, mod=typed_a) == TypeCall(lst, [I32])
    assert rg.type_of(nil_a) == TypeCall(lst, [I32])  # the only live result that checked it
    typed_b = infer_type(mod_b)
    # checking B does not change A's answers
    assert rg.type_of(nil_a, mod=typed_a) == TypeCall(lst, [I32])
    assert typed_a.type_of(typed_a["main"].body) == TypeCall(lst, [I32])
    assert typed_b.type_of(nil_b) == TypeCall(lst, [F32])
    assert typed_b.type_of(typed_b["main"].body) == TypeCall(lst, [F32])
    # without a module the live results disagree: a clear error, not the last one checked
    with pytest.raises(RelayError, match=r"several types .*List\[float32\], List\[int32\].*mod="):
        rg.type_of(nil_a)
    assert set(types_of(nil_a)) == {TypeCall(lst, [I32]), TypeCall(lst, [F32])}
    # once B's result is gone, A's is the only answer again
    del typed_b
    gc.collect()
    assert rg.type_of(nil_a) == TypeCall(lst, [I32])
    assert known_type(nil_a) == TypeCall(lst, [I32])


def test_checking_b_after_a_changes_nothing_in_a_printed_or_looked_up():
    base, lst, cons, nil = _list_module()
    mod_a, mod_b = base.copy(), base.copy()
    nil_a = _one_list(mod_a, lst, cons, nil, "int32")
    _one_list(mod_b, lst, cons, nil, "float32")
    typed_a = infer_type(mod_a)
    before = rg.astext(typed_a, show_types=True)
    answers = {id(n): typed_a.type_of(n) for n in (nil_a, typed_a["main"], typed_a["main"].body)}
    typed_b = infer_type(mod_b)
    assert rg.astext(typed_a, show_types=True) == before
    assert {id(n): typed_a.type_of(n) for n in (nil_a, typed_a["main"], typed_a["main"].body)} == answers
    assert "List[float32]" not in before and "List[float32]" in rg.astext(typed_b, show_types=True)


def test_expression_results_live_with_the_expression():
    base, lst, cons, nil = _list_module()
    x = Var("x", I32)
    expr = Call(cons, (x, Call(nil, ())))
    typed, types = infer_type_expr(expr, base, with_types=True)
    assert isinstance(types, TypeMap)
    assert types.type_of(typed) == TypeCall(lst, [I32])
    assert rg.type_of(typed) == TypeCall(lst, [I32])
    assert rg.type_of(x) == I32
    # the same expression in another module context is another result
    y = Var("y", F32)
    other = infer_type_expr(Call(cons, (y, Call(nil, ()))), base)
    assert rg.type_of(other) == TypeCall(lst, [F32])
    assert rg.type_of(typed) == TypeCall(lst, [I32])


def test_types_of_a_module_are_kept_by_its_functions():
    x = Var("x", TensorType((2, 3)))
    mod = IRModule.from_expr(Function([x], rg.op.nn.relu(x)))
    fn = infer_type(mod)["main"]  # the typed module itself is gone at once
    gc.collect()
    assert rg.type_of(fn) == rg.FuncType([TensorType((2, 3))], TensorType((2, 3)))
    assert rg.type_of(fn.body) == TensorType((2, 3))


def test_reinferring_the_same_program_does_not_pile_up_results():
    from relaygraph.ty import checked

    x = Var("x", TensorType((4,)))
    fn = Function([x], rg.op.exp(x))
    for _ in range(20):
        infer_type(IRModule.from_expr(fn))
        infer_type_expr(fn)
    gc.collect()
    assert len(checked._ANCHORED.get(fn, ())) <= 2  # one module result and one expression result


def test_untyped_or_unchecked_programs_give_relay_errors():
    mod = IRModule.from_expr(Function([Var("x", I32)], Var("x", I32)))
    with pytest.raises(RelayError, match="has not been type-checked"):
        mod.type_of(mod["main"])
    with pytest.raises(RelayError, match="has not been type-checked"):
        rg.type_of(Var("never", I32))
    typed = infer_type(mod)
    with pytest.raises(RelayError, match="not type-checked in this program"):
        typed.type_of(Tuple([Var("elsewhere", I32)]))


def test_the_egraph_reads_types_from_the_typed_module_it_is_given():
    from relaygraph.egraph import RelayEGraph

    x = Var("x", TensorType((2, 3), "float16"))
    mod = IRModule.from_expr(Function([x], rg.op.nn.relu(x)))
    typed = infer_type(mod)
    eg = RelayEGraph(typed)
    assert eg.type_of(eg.root) == TensorType((2, 3), "float16")
    # an unchecked free variable in a rule's right side is a user mistake, said plainly
    with pytest.raises(RelayError, match="has no type"):
        eg.add_expr(rg.op.nn.relu(Var("z")))
