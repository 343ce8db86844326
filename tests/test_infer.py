"""InferType on the whole language: recursion, generics, ADTs, tuples, refs, checked types."""

from __future__ import annotations

import pytest

import relaygraph as rg
from relaygraph.ir import (
    Call,
    Clause,
    Constructor,
    Function,
    FuncType,
    GlobalTypeVar,
    GlobalVar,
    If,
    IncompleteType,
    IRModule,
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
    TypeData,
    TypeVar,
    Var,
    const,
)
from relaygraph.ty import infer_type, infer_type_expr, known_type, type_of

I32 = TensorType((), "int32")
F32 = TensorType((), "float32")


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def test_type_of_every_node_and_the_input_is_not_mutated():
    x = Var("x", T(2, 3))
    y = rg.op.nn.relu(rg.op.add(x, const(1.0)))
    mod = IRModule.from_expr(Function([x], y))
    before = dict(mod.functions)
    typed = infer_type(mod)
    assert typed is not mod and mod.functions == before and mod["main"].ret_type is None
    main = typed["main"]
    assert main.ret_type == T(2, 3)
    assert type_of(main.body) == T(2, 3)
    assert type_of(main.body.args[0].args[1]) == F32
    assert type_of(x) == T(2, 3)
    assert type_of(main) == FuncType([T(2, 3)], T(2, 3))
    assert type_of(typed.get_global_var("main")) == FuncType([T(2, 3)], T(2, 3))


def test_type_of_unchecked_node_raises():
    with pytest.raises(rg.RelayError, match="has not been type-checked"):
        type_of(Var("never", T(1)))
    assert known_type(Var("never", T(1))) is None


def test_unannotated_vars_get_annotations_like_tvm():
    x = Var("x", T(4))
    v = Var("v")
    inner_p = Var("p")
    inner = Function([inner_p], rg.op.negative(inner_p))
    body = Let(v, rg.op.exp(x), Call(inner, (v,)))
    typed = infer_type(IRModule.from_expr(Function([x], body)))
    let = typed["main"].body
    assert let.var.type_annotation == T(4)
    assert let.body.op.params[0].type_annotation == T(4)
    assert let.body.op.ret_type == T(4)
    assert type_of(let.var) == T(4) and type_of(let.body) == T(4)


def test_let_bound_recursive_function():
    n = Var("n", I32)
    f = Var("f")
    body = If(rg.op.less(n, const(1)), const(0),
              rg.op.add(Call(f, (rg.op.subtract(n, const(1)),)), n))
    e = infer_type_expr(Let(f, Function([n], body), Call(f, (const(10),))))
    assert type_of(e) == I32
    assert e.var.type_annotation == FuncType([I32], I32)


def test_mutually_recursive_globals_without_return_types():
    mod = IRModule()
    even, odd = GlobalVar("even"), GlobalVar("odd")
    a, b = Var("a", I32), Var("b", I32)
    mod.add(even, Function([a], If(rg.op.equal(a, const(0)), const(True),
                                   Call(odd, (rg.op.subtract(a, const(1)),)))))
    mod.add(odd, Function([b], If(rg.op.equal(b, const(0)), const(False),
                                  Call(even, (rg.op.subtract(b, const(1)),)))))
    typed = infer_type(mod)
    assert typed["even"].ret_type == TensorType((), "bool") == typed["odd"].ret_type


def _list_module():
    a = TypeVar("a")
    lst = GlobalTypeVar("List")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    nil = Constructor("Nil", [], lst)
    mod = IRModule()
    mod.add_type(TypeData(lst, [a], [cons, nil]))
    return mod, lst, cons, nil


def test_generic_function_instantiated_per_call():
    mod, lst, cons, nil = _list_module()
    t = TypeVar("t")
    xs = Var("xs", TypeCall(lst, [t]))
    h, rest = Var("h"), Var("rest")
    length = GlobalVar("length")
    body = Match(xs, [
        Clause(PatternConstructor(cons, [PatternWildcard(), PatternVar(rest)]),
               rg.op.add(const(1), Call(length, (rest,)))),
        Clause(PatternConstructor(nil, []), const(0)),
    ])
    mod.add(length, Function([xs], body, I32, [t]))
    x, y = Var("x", T(3)), Var("y", I32)
    one = Call(length, (Call(cons, (x, Call(nil, ()))),))
    two = Call(length, (Call(cons, (y, Call(nil, ()))),))
    mod.add("main", Function([x, y], Tuple([one, two])))
    typed = infer_type(mod)
    assert typed["main"].ret_type == TupleType([I32, I32])
    assert type_of(typed["main"].body.fields[0].args[0]) == TypeCall(lst, [T(3)])
    assert type_of(typed["main"].body.fields[1].args[0]) == TypeCall(lst, [I32])
    del h


def test_identity_generic_and_explicit_type_args():
    t = TypeVar("t")
    p = Var("p", t)
    mod = IRModule()
    ident = mod.add("id", Function([p], p, t, [t]))
    x = Var("x", T(2))
    mod.add("main", Function([x], Tuple([Call(ident, (x,)), Call(ident, (const(1),), None, [I32])])))
    assert infer_type(mod)["main"].ret_type == TupleType([T(2), I32])


def test_match_arms_unified_and_tuple_patterns():
    mod, lst, cons, nil = _list_module()
    pair = Var("pair", TupleType([I32, TypeCall(lst, [I32])]))
    a, h = Var("a"), Var("h")
    m = Match(pair, [
        Clause(PatternTuple([PatternVar(a), PatternConstructor(nil, [])]), a),
        Clause(PatternTuple([PatternWildcard(), PatternConstructor(cons, [PatternVar(h),
                                                                          PatternWildcard()])]), h),
    ])
    typed = infer_type(IRModule.from_expr(Function([pair], m), type_defs=mod.type_definitions))
    assert typed["main"].ret_type == I32


def test_incomplete_match_is_not_checked_for_exhaustiveness():
    mod, lst, cons, nil = _list_module()
    xs = Var("xs", TypeCall(lst, [I32]))
    h = Var("h")
    m = Match(xs, [Clause(PatternConstructor(cons, [PatternVar(h), PatternWildcard()]), h)],
              complete=False)
    typed = infer_type(IRModule.from_expr(Function([xs], m), type_defs=mod.type_definitions))
    assert typed["main"].ret_type == I32


def test_tuples_projection_and_refs():
    x = Var("x", T(2, 2))
    t = Var("t")
    r = Var("r")
    body = Let(t, Tuple([x, const(1)]),
               Let(r, RefCreate(TupleGetItem(t, 0)),
                   Tuple([RefWrite(r, rg.op.exp(RefRead(r))), RefRead(r), TupleGetItem(t, 1)])))
    typed = infer_type(IRModule.from_expr(Function([x], body)))
    assert typed["main"].ret_type == TupleType([TupleType(()), T(2, 2), I32])
    assert typed["main"].body.body.var.type_annotation == RefType(T(2, 2))


def test_projection_of_a_tuple_known_only_later():
    # %t's type comes from a later use; the projection waits for it
    t = Var("t")
    f = Function([t], rg.op.nn.relu(TupleGetItem(t, 1)))
    x = Var("x", T(3))
    e = infer_type_expr(Function([x], Call(f, (Tuple([x, x]),))))
    assert type_of(e) == FuncType([T(3)], T(3))


def test_weight_types_inferred_backwards_from_attrs():
    x = Var("x", T(1, 3, 8, 8))
    w = Var("w")
    b = Var("b")
    body = rg.op.nn.bias_add(rg.op.nn.conv2d(x, w, channels=4, kernel_size=3, padding=(1, 1)), b)
    typed = infer_type(IRModule.from_expr(Function([x, w, b], body)))
    params = typed["main"].params
    assert params[1].type_annotation == T(4, 3, 3, 3)
    assert params[2].type_annotation == T(4)
    assert typed["main"].ret_type == T(1, 4, 8, 8)
    d = Var("d")
    dense = infer_type_expr(Function([x, d], rg.op.nn.dense(rg.op.nn.batch_flatten(x), d, units=10)))
    assert dense.params[1].type_annotation == T(10, 192)


def test_unannotated_unused_parameter_is_an_error():
    x, y = Var("x", T(2)), Var("y")
    with pytest.raises(rg.TypeError, match=r"%y: cannot infer its type"):
        infer_type(IRModule.from_expr(Function([x, y], x)))


def test_call_of_operator_as_value_is_refused():
    x = Var("x", T(2))
    with pytest.raises(rg.TypeError, match="used as a value"):
        infer_type(IRModule.from_expr(Function([x], Call(Function([], Op("add")), ()))))


@pytest.mark.parametrize("depth", [10_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_deep_chain_is_iterative(depth):
    x = Var("x", T(4))
    h = x
    for _ in range(depth):
        h = Call(Op("negative"), (h,))
    typed = infer_type(IRModule.from_expr(Function([x], h)))
    assert typed["main"].ret_type == T(4)
    assert type_of(typed["main"].body.args[0].args[0]) == T(4)


@pytest.mark.parametrize("depth", [5_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_deep_let_chain_is_iterative(depth):
    x = Var("x", T(4))
    vs = [Var(f"v{i}") for i in range(depth)]
    body = vs[-1]
    for i in range(len(vs) - 1, -1, -1):
        body = Let(vs[i], rg.op.exp(vs[i - 1] if i else x), body)
    typed = infer_type(IRModule.from_expr(Function([x], body)))
    assert typed["main"].ret_type == T(4)


def test_infer_type_rejects_other_values():
    with pytest.raises(rg.RelayError, match="expected an IRModule or an Expr"):
        infer_type(42)
    assert isinstance(IncompleteType(), IncompleteType)
