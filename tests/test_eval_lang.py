"""The interpreter on the whole language: closures, recursion, ADTs and match, refs, errors."""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.eval import ConstructorValue, Interpreter, from_list, to_list
from relaygraph.ir import (
    Call,
    Clause,
    Constructor,
    Function,
    GlobalTypeVar,
    GlobalVar,
    If,
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
    RefWrite,
    TensorType,
    Tuple,
    TupleGetItem,
    TypeCall,
    TypeData,
    TypeVar,
    Var,
    const,
)


def op(name, *args, **attrs):
    return Call(Op(name), tuple(rg.ir.as_expr(a) for a in args), attrs or None)


def i32(name):
    return Var(name, TensorType((), "int32"))


def list_module():
    """A module with ``type List[a] { Cons(a, List[a]), Nil }`` and map/foldl/length/nth."""
    mod = IRModule()
    lst, a = GlobalTypeVar("List"), TypeVar("a")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    nil = Constructor("Nil", [], lst)
    mod.add_type(TypeData(lst, [a], [cons, nil]))

    gmap, gfoldl, glength, gnth = (GlobalVar(n) for n in ("map", "foldl", "length", "nth"))
    f, xs, h, t = Var("f"), Var("xs"), Var("h"), Var("t")
    mod.add(gmap, Function([f, xs], Match(xs, [
        Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]),
               cons(Call(f, (h,)), Call(gmap, (f, t)))),
        Clause(PatternConstructor(nil), nil()),
    ])))
    f, acc, xs, h, t = Var("f"), Var("acc"), Var("xs"), Var("h"), Var("t")
    mod.add(gfoldl, Function([f, acc, xs], Match(xs, [
        Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]),
               Call(gfoldl, (f, Call(f, (acc, h)), t))),
        Clause(PatternConstructor(nil), acc),
    ])))
    xs, t = Var("xs"), Var("t")
    mod.add(glength, Function([xs], Match(xs, [
        Clause(PatternConstructor(cons, [PatternWildcard(), PatternVar(t)]),
               op("add", const(1), Call(glength, (t,)))),
        Clause(PatternWildcard(), const(0)),
    ])))
    xs, n, h, t = Var("xs"), i32("n"), Var("h"), Var("t")
    mod.add(gnth, Function([xs, n], Match(xs, [
        Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]),
               If(op("equal", n, const(0)), h, Call(gnth, (t, op("subtract", n, const(1)))))),
    ], complete=False)))
    return mod, cons, nil


def run(mod, expr):
    return Interpreter(mod).eval(expr)


def test_closure_captures_its_definition_environment():
    # The language reference's example: %f closes over the zeros bound inside %g.
    x_inner, x_outer, y = Var("x"), Var("x"), Var("y")
    g, f = Var("g"), Var("f")
    zeros, ones = np.zeros((10, 10), "float32"), np.ones((10, 10), "float32")
    g_body = Let(x_inner, const(zeros), Function([y], op("multiply", y, x_inner)))
    prog = Let(g, Function([], g_body),
               Let(f, Call(g, ()),
                   Let(x_outer, const(ones), Call(f, (x_outer,)))))
    out = rg.evaluate(prog)
    assert out.shape == (10, 10) and not out.any()


def test_closure_value_prints_readably():
    x, y = Var("x"), Var("y")
    clo = run(IRModule(), Let(x, const(1), Function([y], op("add", x, y))))
    assert repr(clo).startswith("<closure fn(%y)") and "%x" in repr(clo)
    assert repr(rg.evaluate(Function([y], y))) == "<closure fn(%y)>"  # a function evaluates to itself


def test_factorial_through_a_recursive_global():
    mod = IRModule()
    fact, n = GlobalVar("fact"), i32("n")
    mod.add(fact, Function([n], If(op("equal", n, const(0)), const(1),
                                    op("multiply", n, Call(fact, (op("subtract", n, const(1)),))))))
    assert int(run(mod, Call(fact, (const(10),)))) == 3628800


def test_factorial_through_a_let_bound_function():
    f, n = Var("fact"), i32("n")
    body = If(op("equal", n, const(0)), const(1), op("multiply", n, Call(f, (op("subtract", n, const(1)),))))
    prog = Let(f, Function([n], body), Call(f, (const(6),)))
    assert int(rg.evaluate(prog)) == 720


def test_ackermann_on_small_integers():
    mod = IRModule()
    ack, m, n = GlobalVar("ack"), i32("m"), i32("n")
    one = const(1)
    mod.add(ack, Function([m, n], If(
        op("equal", m, const(0)), op("add", n, one),
        If(op("equal", n, const(0)), Call(ack, (op("subtract", m, one), one)),
           Call(ack, (op("subtract", m, one), Call(ack, (m, op("subtract", n, one)))))))))
    assert int(run(mod, Call(ack, (const(2), const(3))))) == 9
    assert int(run(mod, Call(ack, (const(3), const(3))))) == 61


def test_recursive_sum_to_ten_thousand_does_not_hit_the_recursion_limit():
    # Not a tail call: the machine's continuation stack grows 10,000 deep, Python's does not.
    mod = IRModule()
    total, n = GlobalVar("sum"), i32("n")
    mod.add(total, Function([n], If(op("equal", n, const(0)), const(0),
                                     op("add", n, Call(total, (op("subtract", n, const(1)),))))))
    mod.add("main", Function([], Call(total, (const(10_000),))))
    assert int(rg.evaluate(mod)) == 50_005_000


def test_mutual_recursion_between_globals():
    mod = IRModule()
    even, odd = GlobalVar("even"), GlobalVar("odd")
    n1, n2 = i32("n"), i32("n")
    mod.add(even, Function([n1], If(op("equal", n1, const(0)), const(True),
                                     Call(odd, (op("subtract", n1, const(1)),)))))
    mod.add(odd, Function([n2], If(op("equal", n2, const(0)), const(False),
                                    Call(even, (op("subtract", n2, const(1)),)))))
    interp = Interpreter(mod)
    assert bool(interp.eval(Call(even, (const(10_001),)))) is False
    assert bool(interp.eval(Call(odd, (const(10_001),)))) is True
    assert bool(interp.eval(Call(even, (const(0),)))) is True


def test_list_functions_map_foldl_length_nth():
    mod, cons, nil = list_module()
    xs = from_list([1, 2, 3, 4], cons, nil)
    x, a, b = i32("x"), i32("a"), i32("b")
    double = Function([x], op("multiply", x, const(2)))
    plus = Function([a, b], op("add", a, b))
    interp = Interpreter(mod)
    gv = mod.get_global_var
    lst = Var("xs")

    def bind(body):
        return Function([lst], body)

    mapped = interp.call(interp.eval(bind(Call(gv("map"), (double, lst)))), [xs])
    assert [int(v) for v in to_list(mapped)] == [2, 4, 6, 8]
    assert repr(mapped) == "Cons(2, Cons(4, Cons(6, Cons(8, Nil))))"
    summed = interp.call(interp.eval(bind(Call(gv("foldl"), (plus, const(0), lst)))), [xs])
    assert int(summed) == 10
    assert int(interp.call(interp.global_closure(gv("length")), [xs])) == 4
    assert int(interp.call(interp.global_closure(gv("nth")), [xs, np.int32(2)])) == 3


def test_long_lists_build_match_and_print_without_recursion():
    mod, cons, nil = list_module()
    xs = from_list(range(20_000), cons, nil)
    interp = Interpreter(mod)
    assert int(interp.call(interp.global_closure(mod.get_global_var("length")), [xs])) == 20_000
    assert repr(xs).startswith("Cons(0, Cons(1, ") and repr(xs).endswith("Nil" + ")" * 20_000)
    assert xs == from_list(range(20_000), cons, nil)


def test_nested_patterns_and_wildcards():
    mod, cons, nil = list_module()
    xs, second, tup = Var("xs"), Var("second"), Var("p")
    # match xs { Cons(_, Cons(s, _)) => s; _ => -1 }
    pick = Function([xs], Match(xs, [
        Clause(PatternConstructor(cons, [PatternWildcard(),
                                         PatternConstructor(cons, [PatternVar(second), PatternWildcard()])]),
               second),
        Clause(PatternWildcard(), const(-1)),
    ]))
    interp = Interpreter(mod)
    clo = interp.eval(pick)
    assert int(interp.call(clo, [from_list([7, 8, 9], cons, nil)])) == 8
    assert int(interp.call(clo, [from_list([7], cons, nil)])) == -1
    # tuple patterns: match (1, (2, 3)) { (a, (_, c)) => a + c }
    a, c = i32("a"), i32("c")
    swap = Match(Tuple([const(1), Tuple([const(2), const(3)])]), [
        Clause(PatternTuple([PatternVar(a), PatternTuple([PatternWildcard(), PatternVar(c)])]),
               op("add", a, c))])
    assert int(interp.eval(swap)) == 4
    del tup


def test_failed_match_is_a_clear_runtime_error():
    mod, cons, nil = list_module()
    interp = Interpreter(mod)
    nth = interp.global_closure(mod.get_global_var("nth"))
    with pytest.raises(rg.EvalError, match=r"match failed: no clause matches a value built by Nil"):
        interp.call(nth, [from_list([1, 2], cons, nil), np.int32(5)])


def test_failed_match_names_the_source_position_when_parsed():
    mod, cons, nil = list_module()
    xs = Var("xs")
    m = Match(xs, [Clause(PatternConstructor(nil), const(0))], complete=False)
    from relaygraph.errors import Span

    mod.source_map.add(m, Span("prog.relay", 3, 5))
    interp = Interpreter(mod)
    with pytest.raises(rg.EvalError, match=r"prog.relay:3:5: error: match failed.*Cons"):
        interp.call(interp.eval(Function([xs], m)), [from_list([1], cons, nil)])


def test_wrong_arity_names_the_function_and_counts():
    mod = IRModule()
    x, y = Var("x"), Var("y")
    g = mod.add("pair", Function([x, y], Tuple([x, y])))
    with pytest.raises(rg.EvalError, match=r"@pair takes 2, given 1"):
        run(mod, Call(g, (const(1),)))
    z = Var("z")
    with pytest.raises(rg.EvalError, match=r"fn\(%z\) takes 1, given 2"):
        run(mod, Call(Function([z], z), (const(1), const(2))))
    with pytest.raises(rg.EvalError, match=r"fn\(%z\) takes 1, given 2"):  # on the executor
        rg.evaluate(IRModule.from_expr(Call(Function([z], z), (const(1), const(2)))))
    _, cons, _ = list_module()
    with pytest.raises(rg.EvalError, match=r"constructor Cons takes 2, given 1"):
        run(mod, cons(const(1)))


def test_refs_make_a_counter():
    c, incr, u1, u2 = Var("c"), Var("incr"), Var("u1"), Var("u2")
    bump = Function([], Let(u1, RefWrite(c, op("add", RefRead(c), const(1))), RefRead(c)))
    prog = Let(c, RefCreate(const(0)),
               Let(incr, bump,
                   Let(u1, Call(incr, ()),
                       Let(u2, Call(incr, ()),
                           Tuple([Call(incr, ()), RefRead(c)])))))
    out = rg.evaluate(prog)
    assert [int(v) for v in out] == [3, 3]


def test_two_equal_ref_creations_are_two_cells():
    # ref(0) twice is one interned node; it must still make two distinct cells.
    a, b, u = Var("a"), Var("b"), Var("u")
    prog = Let(a, RefCreate(const(0)), Let(b, RefCreate(const(0)),
               Let(u, RefWrite(a, const(5)), Tuple([RefRead(a), RefRead(b)]))))
    out = rg.evaluate(prog)
    assert (int(out[0]), int(out[1])) == (5, 0)


def test_if_needs_a_bool_scalar():
    assert int(rg.evaluate(If(const(True), const(1), const(2)))) == 1
    assert int(rg.evaluate(If(const(False), const(1), const(2)))) == 2
    with pytest.raises(rg.EvalError, match="condition of an if must be a bool scalar, got int32"):
        rg.evaluate(If(const(1), const(1), const(2)))


def test_tuples_and_projection():
    t = Tuple([const(1), Tuple([const(2.5), const(True)])])
    out = rg.evaluate(TupleGetItem(t, 1))
    assert isinstance(out, tuple) and float(out[0]) == 2.5
    assert rg.eval.format_value(rg.evaluate(t)) == "(1, (2.5, True))"
    with pytest.raises(rg.EvalError, match=r"projection \.0 of a non-tuple"):
        rg.evaluate(TupleGetItem(const(1), 0))
    for engine in (True, False):
        with pytest.raises(rg.EvalError, match=r"projection \.2 out of range for a tuple of 2"):
            rg.evaluate(IRModule.from_expr(TupleGetItem(t, 2)), executor=engine)


def test_evaluation_is_left_to_right():
    # The first argument writes the cell before the second reads it.
    r, u = Var("r"), Var("u")
    prog = Let(r, RefCreate(const(1)),
               Tuple([RefWrite(r, const(2)), RefRead(r)]))
    assert int(rg.evaluate(prog)[1]) == 2
    del u


def test_constructor_values_print_and_compare():
    _, cons, nil = list_module()
    v = from_list([1], cons, nil)
    assert repr(v) == "Cons(1, Nil)"
    assert v == ConstructorValue(cons, (np.asarray(1, "int32"), ConstructorValue(nil)))
    assert v != from_list([2], cons, nil)
    assert repr(rg.evaluate(RefCreate(const(3)))) == "ref(3)"


def test_constructors_are_first_class_functions():
    mod, cons, nil = list_module()
    f, x = Var("f"), Var("x")
    prog = Let(f, cons, Call(f, (const(1), nil)))
    assert repr(run(mod, prog)) == "Cons(1, Nil)"
    del x


def test_deep_let_chain_and_deep_graph_evaluate():
    x = Var("x", TensorType((), "float32"))
    body = x
    for _ in range(100_000):
        body = op("add", body, const(1.0))
    expected = np.float32(100_000.0)
    assert float(rg.evaluate(Function([x], body), np.float32(0.0), executor=False)) == expected
    assert float(rg.evaluate(Function([x], body), np.float32(0.0))) == expected
    # the same in A-normal form: 100,000 nested lets
    v = Var("v0", TensorType((), "float32"))
    vars_ = [Var(f"v{i}") for i in range(1, 100_001)]
    body = vars_[-1]
    prev = v
    lets = []
    for cur in vars_:
        lets.append((cur, op("add", prev, const(1.0))))
        prev = cur
    for cur, value in reversed(lets):
        body = Let(cur, value, body)
    assert float(rg.evaluate(Function([v], body), np.float32(0.0), executor=False)) == expected


def test_shared_nodes_are_evaluated_once():
    # A chain of 200 diamonds: tree-walking without sharing would take 2**200 steps.
    mod, _ = rg.zoo.get("diamond-chain", depth=200)
    x = np.linspace(-1, 1, 4).astype("float32")
    interp = rg.evaluate(mod, x, executor=False)
    assert np.array_equal(interp, rg.evaluate(mod, x))


def test_shared_calls_of_pure_function_literals_are_evaluated_once():
    # Each level's call is used twice: without sharing, 60 levels would take 2**60 calls.
    h = x = Var("x", TensorType((), "float32"))
    for _ in range(60):
        p = Var("p")
        g = Call(Function([p], op("tanh", p)), (h,))
        h = op("add", g, g)
    out = rg.evaluate(Function([x], h), np.float32(0.1), executor=False)
    assert np.isfinite(out) and np.array_equal(out, rg.evaluate(Function([x], h), np.float32(0.1)))
