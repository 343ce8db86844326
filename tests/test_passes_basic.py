"""Structural checks of the IR-level passes (value checks live in test_passes_values.py)."""

import pytest

import relaygraph as rg
from relaygraph import transform as T
from relaygraph.passes import (
    dead_code_elimination,
    defuse_ops,
    eliminate_common_subexpr,
    to_a_normal_form,
    to_basic_block_normal_form,
    to_graph_normal_form,
)


def op(name, *args, **attrs):
    return rg.Call(rg.Op(name), tuple(args), attrs or None)


def lets_of(expr):
    """The chain of (var, value) of a let sequence and its final body."""
    out = []
    while isinstance(expr, rg.Let):
        out.append((expr.var, expr.value))
        expr = expr.body
    return out, expr


def test_anf_binds_a_shared_node_once():
    x = rg.var("x")
    lg = op("log", x)
    f = rg.Function([x], lg + lg)
    anf = to_a_normal_form(f)
    binds, result = lets_of(anf.body)
    assert [v.op.name for _, v in binds] == ["log", "add"]
    (lv, _), (av, add) = binds
    assert add.args == (lv, lv) and result is av
    assert rg.alpha_equal(to_graph_normal_form(anf), f)


def test_anf_places_bindings_in_the_innermost_covering_scope():
    c, x = rg.var("c"), rg.var("x")
    shared, only_true = op("log", x), op("exp", x)
    f = rg.Function([c, x], rg.If(c, shared + only_true, shared))
    anf = to_a_normal_form(f)
    binds, _ = lets_of(anf.body)
    # log is used by both branches: bound before the if; exp only inside the true branch.
    assert binds[0][1] is shared
    if_node = binds[1][1]
    assert isinstance(if_node, rg.If)
    true_binds, _ = lets_of(if_node.true_branch)
    assert [v.op.name for _, v in true_binds] == ["exp", "add"]
    assert if_node.false_branch is binds[0][0]
    assert rg.alpha_equal(to_graph_normal_form(anf), f)


def test_anf_keeps_closure_bodies_inside_the_closure():
    x, y = rg.var("x"), rg.var("y")
    inner = rg.Function([y], op("exp", y) + x)
    f = rg.Function([x], rg.Call(inner, (op("log", x),)))
    anf = to_a_normal_form(f)
    binds, _ = lets_of(anf.body)
    fn_values = [v for _, v in binds if isinstance(v, rg.Function)]
    assert len(fn_values) == 1
    inner_binds, _ = lets_of(fn_values[0].body)
    assert [v.op.name for _, v in inner_binds] == ["exp", "add"]
    assert rg.alpha_equal(to_graph_normal_form(anf), f)


def test_anf_binds_constants_and_keeps_primitive_functions_whole():
    x, p = rg.var("x"), rg.var("p")
    prim = rg.Function([p], op("exp", p) + rg.const(1.0), attrs={"Primitive": 1})
    f = rg.Function([x], rg.Call(prim, (x,)) * rg.const(2.0))
    binds, _ = lets_of(to_a_normal_form(f).body)
    values = [v for _, v in binds]
    assert rg.const(2.0) in values and prim in values
    assert rg.const(1.0) not in values


def test_anf_of_existing_lets_flattens_like_tvm():
    x, a = rg.var("x"), rg.var("a")
    f = rg.Function([x], rg.Let(a, op("log", x), a + a))
    binds, result = lets_of(to_a_normal_form(f).body)
    assert binds[0][0] is a and binds[0][1] is op("log", x)
    assert binds[1][1] is a + a
    assert binds[-1][1] is binds[-2][0] and result is binds[-1][0]


def test_basic_block_form_binds_only_cross_scope_sharing():
    c, x = rg.var("c"), rg.var("x")
    shared, local = op("log", x), op("exp", x)
    f = rg.Function([c, x], rg.If(c, shared + local, shared * local))
    bb = to_basic_block_normal_form(f)
    binds, body = lets_of(bb.body)
    assert [v for _, v in binds][:2] == [shared, local]  # both used in two branches
    assert isinstance(body, rg.If) and body.true_branch.args == (binds[0][0], binds[1][0])
    plain = rg.Function([x], op("log", x) + op("exp", x))
    assert to_basic_block_normal_form(plain) is plain
    assert rg.alpha_equal(to_graph_normal_form(bb), f)


def test_gnf_keeps_recursive_lets():
    n, f = rg.var("n"), rg.var("f")
    body = rg.If(n < rg.const(1), rg.const(0), rg.Call(f, (n - rg.const(1),)))
    rec = rg.Let(f, rg.Function([n], body), rg.Call(f, (rg.const(5),)))
    assert to_graph_normal_form(rec) is rec


def test_dce_removes_unused_pure_lets_and_keeps_effects():
    x, a, b, r = rg.var("x"), rg.var("a"), rg.var("b"), rg.var("r")
    e = rg.Let(a, op("log", x), rg.Let(b, op("exp", x), b))
    assert dead_code_elimination(e) is rg.Let(b, op("exp", x), b)
    write = rg.RefWrite(r, x)
    effect = rg.Let(r, rg.RefCreate(x), rg.Let(a, write, x))
    assert dead_code_elimination(effect) is effect
    chain = rg.Let(a, op("log", x), rg.Let(b, op("exp", a), x))  # b dead makes a dead
    assert dead_code_elimination(chain) is x


def test_dce_inline_once():
    x, a, b = rg.var("x"), rg.var("a"), rg.var("b")
    e = rg.Let(a, op("log", x), rg.Let(b, op("exp", a), b + b))
    out = dead_code_elimination(e, inline_once=True)
    assert out is rg.Let(b, op("exp", op("log", x)), b + b)


def test_cse_merges_let_bound_duplicates_in_chains():
    x, a, b, c, d = (rg.var(n) for n in "xabcd")
    e = rg.Let(a, op("log", x), rg.Let(b, op("log", x),
               rg.Let(c, op("exp", a), rg.Let(d, op("exp", b), c + d))))
    out = eliminate_common_subexpr(e)
    assert out is rg.Let(a, op("log", x), rg.Let(c, op("exp", a), c + c))
    skip = eliminate_common_subexpr(e, fskip=lambda v: v.op.name == "log")
    assert lets_of(skip)[0][1][0] is b


def test_cse_does_not_merge_across_sibling_scopes():
    c, x, a, b = rg.var("c"), rg.var("x"), rg.var("a"), rg.var("b")
    e = rg.If(c, rg.Let(a, op("log", x), a), rg.Let(b, op("log", x), b))
    assert eliminate_common_subexpr(e) is e


def test_inline_marked_globals_and_remove_unused():
    mod = rg.IRModule()
    y = rg.var("y")
    helper = mod.add("helper", rg.Function([y], op("exp", y), attrs={"Inline": 1}))
    unused = mod.add("unused", rg.Function([rg.var("z")], rg.const(0.0)))
    x = rg.var("x")
    mod.add("main", rg.Function([x], rg.Call(helper, (x,)) + x))
    out = T.Inline()(mod)
    assert out["main"].body is op("exp", out["main"].params[0]) + out["main"].params[0]
    assert "helper" not in out and "unused" in out
    assert "unused" not in T.RemoveUnusedFunctions()(out)
    assert unused in mod.functions  # the input module is untouched


def test_defuse_ops():
    x, p, q = rg.var("x"), rg.var("p"), rg.var("q")
    prim = rg.Function([p, q], op("exp", p) * q, attrs={"Primitive": 1})
    e = rg.Call(prim, (op("log", x), x))
    assert defuse_ops(e) is op("exp", op("log", x)) * x
    # a call of the wrong arity is refused, not defused into a program with a free parameter
    with pytest.raises(rg.RelayError, match=r"DefuseOps: the fused function fn\(%p, %q\) takes 2 "
                                            r"argument\(s\) but is called with 1"):
        defuse_ops(rg.Call(prim, (x,)))


def test_lambda_lift_closures_and_recursion():
    x, y = rg.var("x"), rg.var("y")
    closure = rg.Function([y], y + x)
    mod = rg.IRModule.from_expr(rg.Function([x], rg.Call(closure, (x,))))
    out = T.LambdaLift()(mod)
    lifted = [gv for gv, _ in out if gv.name_hint.startswith("lifted_main")]
    assert len(lifted) == 1
    glob = out[lifted[0]]
    assert len(glob.params) == 1 and glob.body.attrs.get("Closure") == 1
    assert out["main"].body.op.op is lifted[0]  # main calls @lifted(%x)(%x)
    n, f = rg.var("n"), rg.var("f")
    rec = rg.Function([n], rg.If(n < rg.const(1), n, rg.Call(f, (n - rg.const(1),))))
    mod2 = rg.IRModule.from_expr(rg.Function([], rg.Let(f, rec, rg.Call(f, (rg.const(3),)))))
    out2 = T.LambdaLift()(mod2)
    (name,) = [gv for gv, _ in out2 if gv.name_hint != "main"]
    assert any(node is name for node in rg.post_order(out2[name]))  # calls itself as a global


DEEP = 100_000


@pytest.fixture(scope="module")
def deep():
    x = rg.var("x")
    h = x
    for i in range(DEEP):
        h = op("exp" if i % 2 else "tanh", h)
    return rg.IRModule.from_expr(rg.Function([x], h))


@pytest.mark.parametrize("name", ["ToANormalForm", "ToGraphNormalForm", "ToBasicBlockNormalForm",
                                  "DeadCodeElimination", "EliminateCommonSubexpr", "Inline",
                                  "DefuseOps", "LambdaLift", "RemoveUnusedFunctions"])
def test_every_pass_handles_a_100k_chain(deep, name):
    out = T.get_pass(name)(deep)
    assert rg.node_count(out["main"]) >= DEEP


def test_anf_round_trip_on_a_deep_chain(deep):
    anf = T.ToANormalForm()(deep)
    assert len(lets_of(anf["main"].body)[0]) == DEEP
    back = T.ToGraphNormalForm()(anf)
    assert rg.alpha_equal(back["main"], deep["main"])


def test_anf_scope_of_a_node_reached_through_a_sibling_first():
    # The tuple is used only by the projection %1, which is used both before the if and inside
    # its branch: the tuple must be bound in the outer scope (found by hypothesis).
    c0, c1 = rg.var("p0"), rg.var("p1")
    proj = rg.Tuple([c0, c0])[0]
    cond = op("less", op("sum", proj), op("sum", c0))
    f = rg.Function([c0, c1], rg.If(cond, proj, op("tanh", c0)))
    anf = to_a_normal_form(f)
    binds, _ = lets_of(anf.body)
    assert isinstance(binds[0][1], rg.Tuple)
    assert rg.alpha_equal(to_graph_normal_form(anf), f)
