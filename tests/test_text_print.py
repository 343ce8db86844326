"""Printing Relay text with TVM's rules, and reading it back."""

import sys

import numpy as np
import pytest

import relaygraph as rg
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
from relaygraph.text import astext, parse, parse_expr

HEADER = '#[version = "0.0.5"]\n'
F32 = TensorType((), "float32")


def body(text: str) -> str:
    """The printed text without the version header."""
    assert text.startswith(HEADER)
    return text[len(HEADER):]


def op(name, *args, **attrs):
    return rg.op.make_call(name, *args, **attrs)


def roundtrip(e):
    back = parse_expr(astext(e))
    assert rg.alpha_equal(back, e, map_free_vars=True)
    return back


def test_shared_nodes_and_non_atomic_arguments_are_bound_once():
    x = Var("x", F32)
    e = op("exp", x)
    out = Function([x], op("add", e, op("multiply", e, e)))
    assert body(astext(out)) == (
        "fn (%x: float32) {\n"
        "  %0 = exp(%x);\n"
        "  %1 = multiply(%0, %0);\n"
        "  add(%0, %1)\n"
        "}")
    roundtrip(out)


def test_atoms_stay_inline():
    x = Var("x", F32)
    f = Function([x], op("add", x, const(1.5)))
    assert body(astext(f)) == "fn (%x: float32) {\n  add(%x, 1.5f)\n}"


def test_bindings_go_to_the_innermost_scope_that_holds_all_uses():
    c, x = Var("c", TensorType((), "bool")), Var("x", F32)
    only_then = op("exp", x)
    both = op("log", x)
    f = Function([c, x], If(c, op("add", only_then, both), op("negative", both)))
    assert body(astext(f)) == (
        "fn (%c: bool, %x: float32) {\n"
        "  %1 = log(%x);\n"
        "  if (%c) {\n"
        "    %0 = exp(%x);\n"
        "    add(%0, %1)\n"
        "  } else {\n"
        "    negative(%1)\n"
        "  }\n"
        "}")
    roundtrip(f)


def test_lets_print_flat_with_annotations():
    x, y = Var("x", F32), Var("y")
    e = Let(x, const(1.0), Let(y, op("add", x, x), y))
    assert body(astext(e)) == "let %x: float32 = 1f;\nlet %y = add(%x, %x);\n%y"
    roundtrip(e)


def test_a_shared_let_prints_in_parentheses():
    t = Var("t", F32)
    inner = Let(t, const(2.0), op("multiply", t, t))
    e = op("add", inner, inner)
    assert body(astext(e)) == "%0 = (\n  let %t: float32 = 2f;\n  multiply(%t, %t)\n);\nadd(%0, %0)"
    roundtrip(e)


def test_only_non_default_attributes_print_in_the_ops_order():
    x = Var("x", TensorType((1, 3, 8, 8), "float32"))
    w = Var("w", TensorType((8, 3, 3, 3), "float32"))
    call = op("nn.conv2d", x, w, kernel_size=(3, 3), channels=8, padding=(1, 1), strides=(1, 1))
    assert body(astext(call)).endswith(
        "nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3])")
    # attributes equal to the defaults print nothing, even when stored
    plain = Call(Op("nn.conv2d"), (x, w), {"strides": (1, 1), "groups": 1})
    assert body(astext(plain)).endswith("nn.conv2d(%x, %w)")
    bn = op("nn.batch_norm", x, *[Var(n, TensorType((3,), "float32")) for n in "abcd"],
            epsilon=2e-05, scale=False, center=True)
    assert "epsilon=2e-05f, scale=False)" in astext(bn)


@pytest.mark.parametrize("value, dtype, text", [
    (1, "int32", "1"), (-3, "int32", "-3"), (3, "int64", "3i64"), (7, "int16", "7i16"),
    (1.0, "float32", "1f"), (0.1, "float32", "0.1f"), (1e-05, "float32", "1e-05f"),
    (1 / 3, "float32", "0.33333334f"), (2.5, "float16", "2.5f16"), (0.1, "float64", "0.1f64"),
    (1 / 3, "float64", "0.3333333333333333f64"), (np.inf, "float32", "inff"),
    (-np.inf, "float32", "-inff"), (True, "bool", "True"), (False, "bool", "False"),
    (-0.0, "float32", "-0f"),
])
def test_scalar_constants_print_as_literals_that_read_back_exactly(value, dtype, text):
    c = const(value, dtype)
    assert body(astext(c)) == text
    back = parse_expr(astext(c))
    assert back is c


@pytest.mark.parametrize("array", [
    np.arange(6, dtype="float32").reshape(2, 3), np.array([1, -2, 3], dtype="int8"),
    np.array([[True, False]]), np.arange(4, dtype="uint16"), np.array(5, dtype="uint8"),
    np.array(np.nan, dtype="float32"), np.array(np.inf, dtype="float64"),
    np.linspace(0, 1, 7, dtype="float16"), np.zeros((0, 3), dtype="float64"),
])
def test_tensor_constants_go_to_the_metadata_section_exactly(array):
    c = rg.ir.Constant(array)
    text = astext(Tuple([c, c]))
    assert "meta[relay.Constant][0]" in text and "meta[relay.Constant][1]" not in text
    assert "\n#[metadata]\n" in text
    back = parse_expr(text)
    assert back.fields[0] is c and back.fields[1] is c
    assert back.fields[0].data.dtype == array.dtype
    assert back.fields[0].data.tobytes() == array.tobytes()


def test_variable_names_are_made_unique_like_tvm():
    a, b, c = Var("x"), Var("x"), Var("x1")
    f = Function([a, b, c], Tuple([a, b, c]))
    assert body(astext(f)).startswith("fn (%x, %x1, %x11) {")
    odd = Function([Var(""), Var("0a"), Var("a-b.c")], Tuple([]))
    assert body(astext(odd)).startswith("fn (%v, %v0a, %a_b_c) {")
    roundtrip(f)


def test_module_items_are_sorted_types_first():
    mod = parse(HEADER + """
def @zeta() -> int32 { 1 }
type B { Bx }
def @alpha() -> int32 { 2 }
type A { Ax }
""")
    text = astext(mod)
    assert [line.split("(")[0].split("{")[0].strip() for line in text.splitlines()
            if line.startswith(("def", "type"))] == ["type A", "type B", "def @alpha", "def @zeta"]
    assert text.endswith("}\n") and "}\n\ndef @zeta" in text


def test_tuples_projection_and_refs():
    x = Var("x", F32)
    t = Tuple([x])
    e = Function([x], Tuple([TupleGetItem(t, 0), Tuple([]), RefCreate(x)]))
    assert body(astext(e)) == (
        "fn (%x: float32) {\n"
        "  %0 = (%x,);\n"
        "  %1 = %0.0;\n"
        "  %2 = ();\n"
        "  %3 = ref(%x);\n"
        "  (%1, %2, %3)\n"
        "}")


def test_a_shared_read_of_a_reference_is_one_binding():
    # Ref nodes are nominal: one RefRead used three times is one read, bound once.
    r = Var("r")
    read = RefRead(r)
    e = Function([r], Tuple([read, op("add", read, read)]))
    text = body(astext(e))
    assert text.count("ref_read(%r)") == 1
    back = roundtrip(e)
    assert len([n for n in rg.ir.traversal.post_order(back) if isinstance(n, RefRead)]) == 1


def test_free_variables_are_declared():
    x = Var("x", TensorType((3,), "float32"))
    assert body(astext(op("exp", x))) == "free_var %x: Tensor[(3), float32];\nexp(%x)"


def test_show_types_adds_type_comments_after_inference():
    mod = parse(HEADER + "def @main(%x: Tensor[(2, 3), float32]) {\n  %0 = exp(%x);\n  add(%0, %0)\n}\n")
    typed = rg.infer_type(mod)
    assert astext(typed, show_types=True) == HEADER + (
        "def @main(%x: Tensor[(2, 3), float32] /* ty=Tensor[(2, 3), float32] */) "
        "-> Tensor[(2, 3), float32] {\n"
        "  %0 = exp(%x) /* ty=Tensor[(2, 3), float32] */;\n"
        "  add(%0, %0) /* ty=Tensor[(2, 3), float32] */\n"
        "}\n")
    assert "/*" not in astext(typed)


def test_types_and_type_data_print_alone():
    assert astext(TensorType((1, 3), "float32")) == "Tensor[(1, 3), float32]"
    mod = parse(HEADER + "type L[A] { C(A, L[A]), N }")
    assert astext(mod.get_type("L")) == HEADER + "type L[A] {\n  C(A, L[A]),\n  N,\n}\n"
    with pytest.raises(TypeError, match="expected an IRModule, an Expr or a Type"):
        astext(42)


def test_modules_print_every_function():
    x = Var("x", F32)
    mod = IRModule()
    mod.add("f", Function([x], op("negative", x)))
    f = mod.get_global_var("f")
    y = Var("y", F32)
    mod.add("main", Function([y], Call(f, (y,))))
    text = astext(mod)
    assert "def @f(%x: float32) {\n  negative(%x)\n}\n\ndef @main(%y: float32) {\n  @f(%y)\n}\n" in text
    assert rg.alpha_equal(parse(text), mod)
    assert isinstance(f, GlobalVar)


def test_no_recursion_on_depth():
    """Parsing and printing walk explicit stacks: a tiny recursion limit does not matter."""
    n = 3000
    graph = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  %{i} = negative(%{i - 1 if i else 'x'});\n" for i in range(n)) + \
        f"  negative(%{n - 1})\n}}\n"
    lets = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  let %v{i} = negative(%{'v' + str(i - 1) if i else 'x'});\n" for i in range(n)) + \
        f"  %v{n - 1}\n}}\n"
    nested = "free_var %c: bool; " + "if (%c) { 1 } else { " * 300 + "0" + " }" * 300
    calls = "free_var %x: float32; " + "negative(" * n + "%x" + ")" * n
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        g, lt = parse(graph), parse(lets)
        ifs, deep = parse_expr(nested), parse_expr(calls)
        texts = [astext(g), astext(lt), astext(ifs), astext(deep)]
    finally:
        sys.setrecursionlimit(limit)
    assert texts[0] == graph and texts[1] == lets
    assert rg.alpha_equal(parse_expr(texts[2]), ifs, map_free_vars=True)
    assert texts[3].count("negative(") == n


@pytest.mark.slow
def test_hundred_thousand_deep_chains():
    n = 100_000
    graph = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  %{i} = negative(%{i - 1});\n" if i else "  %0 = negative(%x);\n" for i in range(n)) + \
        f"  negative(%{n - 1})\n}}\n"
    assert astext(parse(graph)) == graph
    lets = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  let %v{i} = negative(%{'v' + str(i - 1) if i else 'x'});\n" for i in range(n)) + \
        f"  %v{n - 1}\n}}\n"
    assert astext(parse(lets)) == lets
    calls = "free_var %x: float32; " + "negative(" * n + "%x" + ")" * n
    assert astext(parse_expr(calls)).count("negative(") == n


def test_a_node_reached_by_two_paths_is_bound_before_both_uses():
    # %n is found first under the outer if's else branch, then again under %i; it must still
    # be placed where both of its users can see it (a post-order that is a topological order).
    c = Var("c", TensorType((), "bool"))
    n = op("negative", c)
    inner = If(c, n, n)
    x = Var("x2")
    e = Function([c], If(c, Let(x, c, op("add", c, inner)), inner))
    text = astext(e)
    assert body(text).index("negative(%c)") < body(text).index("if (%c) {\n    %0")
    roundtrip(e)


def test_calls_print_per_use_when_the_program_touches_references():
    # Three uses of the one interned call %incr() are three calls: each prints on its own.
    c, incr, u, u1, u2 = Var("c"), Var("incr"), Var("u"), Var("u1"), Var("u2")
    bump = Function([], Let(u, rg.ir.RefWrite(c, op("add", RefRead(c), const(1))), RefRead(c)))
    call = Call(incr, ())
    prog = Let(c, RefCreate(const(0)), Let(incr, bump, Let(u1, call, Let(u2, call,
                                                                         Tuple([call, RefRead(c)])))))
    text = astext(prog)
    assert text.count("%incr()") == 3
    back = roundtrip(prog)
    assert [int(v) for v in rg.evaluate(back)] == [int(v) for v in rg.evaluate(prog)] == [3, 3]
    # Without references anywhere, a shared call is still bound once.
    x = Var("x", F32)
    g = Function([x], op("exp", x))
    shared = Call(g, (const(1.0),))
    assert astext(Tuple([shared, shared])).count("(1f)") == 1


def test_metadata_constants_are_numbered_in_tvms_visiting_order():
    # TVM numbers a tensor constant when it visits it: the subgraph below a call depth first,
    # arguments in turn, so the first argument's constant comes before the second's inside.
    c0, c1 = rg.ir.Constant(np.arange(3, dtype="float32")), rg.ir.Constant(np.ones(3, "float32"))
    e = op("add", c1, op("exp", c0))
    assert body(astext(e)).startswith("%0 = exp(meta[relay.Constant][1]);\n"
                                      "add(meta[relay.Constant][0], %0)")
    back = roundtrip(e)
    assert back.args[0] is c1 and back.args[1].args[0] is c0


def test_free_variables_are_declared_where_tvm_first_prints_them():
    x, y = Var("x", F32), Var("y", F32)
    e = op("add", op("log", x), y)
    assert body(astext(e)) == (
        "free_var %x: float32;\n%0 = log(%x);\nfree_var %y: float32;\nadd(%0, %y)")
    roundtrip(e)


def test_a_callee_is_bound_after_the_arguments_nearest_its_call():
    x, a = Var("x", F32), Var("a", F32)
    f = Function([a], op("negative", a))
    closure = Let(Var("k"), const(0.0), f)  # a bound, non-atomic callee
    e = Function([x], Call(closure, (op("exp", x),)))
    assert body(astext(e)) == (
        "fn (%x: float32) {\n"
        "  %0 = exp(%x);\n"
        "  %1 = (\n"
        "    let %k = 0f;\n"
        "    fn (%a: float32) {\n"
        "      negative(%a)\n"
        "    }\n"
        "  );\n"
        "  %1(%0)\n"
        "}")
    roundtrip(e)


def test_a_free_variable_of_a_def_is_declared_in_its_body():
    x, y = Var("x", F32), Var("y", F32)
    mod = IRModule()
    mod.add("main", Function([x], op("add", x, y)))
    text = astext(mod)
    assert text == HEADER + "def @main(%x: float32) {\n  free_var %y: float32;\n  add(%x, %y)\n}\n"
    assert rg.alpha_equal(parse(text)["main"], mod["main"], map_free_vars=True)


def list_module():
    header, a = GlobalTypeVar("List"), TypeVar("A")
    cons = Constructor("Cons", [a, TypeCall(header, [a])], header)
    nil = Constructor("Nil", [], header)
    return IRModule(type_definitions={header: TypeData(header, [a], [cons, nil])}), cons, nil


def reads_back(mod, text):
    """Parse ``text``, check it prints back the same, and return the parse."""
    back = parse(text)
    assert astext(back) == text
    assert rg.alpha_equal(back, mod), text
    return back


def test_a_clause_shared_by_two_matches_prints_in_full_in_each():
    # Interning makes the equal clauses of both matches one node; each match prints its own
    # copy, with the bindings that use the pattern's variables inside, renamed per copy.
    mod, cons, nil = list_module()
    y = Var("y", F32)

    def build(h, t):
        return Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]),
                      op("add", op("multiply", h, h), h))

    shared = build(Var("h"), Var("t"))
    zero = Clause(PatternWildcard(), const(0.0))  # an atomic rhs, shared too
    m1 = Match(Call(cons, (y, Call(nil, ()))), [shared, zero], complete=False)
    m2 = Match(Call(cons, (op("negative", y), Call(nil, ()))), [shared, zero], complete=False)
    assert m1.clauses[0] is m2.clauses[0] and m1.clauses[1] is m2.clauses[1]
    mod.add("main", Function([y], op("add", m1, m2)))
    text = astext(mod)
    assert text.endswith(
        "  %5 = (match? (%0) {\n"
        "    Cons(%h, %t) => {\n"
        "      %1 = multiply(%h, %h);\n"
        "      add(%1, %h)\n"
        "    },\n"
        "    _ => {\n"
        "      0f\n"
        "    },\n"
        "  });\n"
        "  %6 = (match? (%3) {\n"
        "    Cons(%h1, %t1) => {\n"
        "      %4 = multiply(%h1, %h1);\n"
        "      add(%4, %h1)\n"
        "    },\n"
        "    _ => {\n"
        "      0f\n"
        "    },\n"
        "  });\n"
        "  add(%5, %6)\n"
        "}\n")
    back = parse(text)
    assert astext(back) == text
    # One clause binding its variables in two places reads back as two clauses, each with
    # variables of its own: the same program written as a tree.
    tree, _, _ = list_module()
    tree.add("main", Function([y], op("add", Match(m1.data, [build(Var("h"), Var("t")), zero],
                                                   complete=False),
                                      Match(m2.data, [build(Var("h"), Var("t")), zero],
                                            complete=False))))
    assert rg.alpha_equal(back, tree)
    assert float(rg.evaluate(back, 3.0)) == float(rg.evaluate(mod, 3.0)) == 18.0


def test_a_shared_clause_calling_a_global_prints_the_call_in_each_copy():
    # With references in the program a call of a global may touch them, so it prints at each
    # use: the shared clause's call once in each match, never twice in one.
    mod, cons, nil = list_module()
    count = GlobalVar("count")
    c, u = Var("c"), Var("u")
    mod.add(count, Function([c], Let(u, RefWrite(c, op("add", RefRead(c), const(1.0))),
                                     RefRead(c))))
    y, r, a, b = Var("y", F32), Var("r"), Var("a"), Var("b")
    again = Clause(PatternWildcard(), Call(count, (r,)))

    def head():
        h, t = Var("h"), Var("t")
        return Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]), h)

    m1 = Match(Call(nil, ()), [head(), again], complete=False)
    m2 = Match(Call(cons, (y, Call(nil, ()))), [again, head()], complete=False)
    m3 = Match(Call(nil, ()), [head(), again, again], complete=False)  # twice in one match
    mod.add("main", Function([y], Let(r, RefCreate(const(0.0)), Let(a, m1, Let(
        b, m3, Tuple([a, m2, b, RefRead(r)]))))))
    text = astext(mod)
    assert text.count("@count(%r)") == 4
    back = reads_back(mod, text)
    assert [float(v) for v in rg.evaluate(back, 5.0)] == [
        float(v) for v in rg.evaluate(mod, 5.0)] == [1.0, 3.0, 2.0, 3.0]


def test_shared_clauses_nest_and_keep_outer_bindings_once():
    # A shared clause holding an if, a let and a match with a shared clause of its own: every
    # copy is printed whole, while a node used in and out of the clauses stays one outer binding.
    y = Var("y", F32)
    outer = op("exp", y)

    def program(k1, k2):
        mod, cons, nil = list_module()
        inner = Clause(PatternWildcard(), op("add", op("negative", outer), outer))
        branch = If(op("less", y, const(0.0)), op("multiply", outer, op("tanh", y)),
                    Match(Call(nil, ()), [inner], complete=False))

        def clause(k):
            return Clause(PatternWildcard(), Let(k, op("tanh", branch), Match(
                Call(cons, (k, Call(nil, ()))), [inner], complete=False)))

        m1 = Match(Call(nil, ()), [clause(k1)], complete=False)
        m2 = Match(Call(cons, (y, Call(nil, ()))), [clause(k2)], complete=False)
        mod.add("main", Function([y], Tuple([m1, m2, outer])))
        return mod

    k = Var("k", F32)
    mod = program(k, k)
    assert mod["main"].body.fields[0].clauses[0] is mod["main"].body.fields[1].clauses[0]
    text = astext(mod)
    assert text.count("exp(%y)") == 1
    assert text.count("let %k: float32 =") == 1 and text.count("let %k1: float32 =") == 1
    assert text.count("negative(%1)") == 4  # the inner clause, in each of its four copies
    # Read back, the two copies are two clauses whose equal parts are shared again.
    back = parse(text)
    assert rg.alpha_equal(back, program(Var("k", F32), Var("k", F32)))
    for v in (2.0, -1.5):
        assert [float(x) for x in rg.evaluate(back, v)] == [float(x) for x in rg.evaluate(mod, v)]


def test_shared_scoped_expressions_are_bound_once():
    # Unlike a clause, a shared if, function, let or match is an expression: it binds once, in
    # the scope holding its uses, and so do equal branches of two ifs.
    y, p = Var("y", F32), Var("p", F32)
    mod, cons, nil = list_module()
    same = op("add", op("exp", y), y)
    cond = op("less", y, const(1.0))
    ifs = [If(cond, same, op("negative", same)), If(op("less", y, const(2.0)), same,
                                                      op("negative", same))]
    fn = Function([p], op("multiply", op("tanh", p), p))
    let = Let(Var("v", F32), op("exp", y), op("sqrt", op("exp", y)))
    match = Match(Call(cons, (y, Call(nil, ()))), [Clause(PatternWildcard(), op("tanh", y))])
    shared = [ifs[0], let, match]
    mod.add("main", Function([y], Tuple([*ifs, *shared, Call(fn, (y,)), Call(fn, (same,)),
                                         If(cond, let, match)])))
    text = astext(mod)
    assert text.count("exp(%y)") == 1 and text.count("tanh(%p)") == 1
    assert text.count("if (") == 3 and text.count("match (") == 1
    back = reads_back(mod, text)
    for v in (0.5, 1.5, 3.0):
        got, want = rg.evaluate(back, v), rg.evaluate(mod, v)
        assert [float(x) for x in got] == [float(x) for x in want]


def test_the_shared_wildcard_clause_found_by_the_property_test():
    # Two matches share `_ => @helper(%x)`; with references in the module the call prints at
    # each use, and it printed twice in the second match (text that does not read back).
    mod, cons, _ = list_module()
    helper, x = GlobalVar("helper"), Var("x")
    neg = op("negative", x)

    def arms():
        return Clause(PatternConstructor(cons, [PatternVar(Var("x")), PatternVar(Var("x"))]), neg)

    again = Clause(PatternWildcard(), Call(helper, (x,)))
    first = Match(x, [arms(), again], complete=False)
    mod.add(helper, Function([x], Match(first, [arms(), again], complete=False)))
    mod.add("main", Function([], RefRead(RefCreate(const(1.0)))))
    text = astext(mod)
    assert text.startswith(HEADER + "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n\n"
                           "def @helper(%x) {\n"
                           "  %0 = negative(%x);\n"
                           "  %1 = (match? (%x) {\n"
                           "    Cons(%x1, %x2) => {\n"
                           "      %0\n"
                           "    },\n"
                           "    _ => {\n"
                           "      @helper(%x)\n"
                           "    },\n"
                           "  });\n"
                           "  match? (%1) {\n"
                           "    Cons(%x3, %x4) => {\n"
                           "      %0\n"
                           "    },\n"
                           "    _ => {\n"
                           "      @helper(%x)\n"
                           "    },\n"
                           "  }\n"
                           "}\n")
    reads_back(mod, text)
