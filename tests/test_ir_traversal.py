"""Traversals, substitution, module handling and the 100,000-deep chain."""

import sys

import pytest

import relaygraph as rg
from relaygraph.ir import ExprMutator, ExprVisitor, iter_post_order, program_stats


def test_post_order_visits_shared_nodes_once_children_first():
    x = rg.var("x")
    a = rg.Call(rg.Op("log"), (x,))
    b = a + a
    order = rg.post_order(b)
    assert order.count(a) == 1
    assert order.index(x) < order.index(a) < order.index(b)
    assert rg.node_count(b) == 3


def test_visitor_dispatches_by_kind():
    class Counter(ExprVisitor):
        def __init__(self):
            self.calls, self.vars = [], 0

        def visit_call(self, call):
            self.calls.append(call.op.name)

        def visit_var(self, v):
            self.vars += 1

    x = rg.var("x")
    e = rg.Call(rg.Op("exp"), (x,)) * x
    c = Counter()
    c.visit(e)
    assert c.calls == ["exp", "multiply"] and c.vars == 1


def test_mutator_rewrites_bottom_up_and_keeps_sharing():
    class ExpToTanh(ExprMutator):
        def rewrite_call(self, pre, post):
            if post.op is rg.Op("exp"):
                return rg.Call(rg.Op("tanh"), post.args)
            return post

    x = rg.var("x")
    e = rg.Call(rg.Op("exp"), (x,))
    out = ExpToTanh().visit(e + e)
    t = rg.Call(rg.Op("tanh"), (x,))
    assert out is t + t
    untouched = x + x
    assert ExpToTanh().visit(untouched) is untouched


def test_free_and_bound_vars():
    x, y, z = rg.var("x"), rg.var("y"), rg.var("z")
    body = rg.Let(z, x + y, z * x)
    f = rg.Function([x], body)
    assert rg.free_vars(f) == [y]
    assert rg.bound_vars(f) == [x, z]
    assert rg.free_vars(body) == [x, y]


def test_free_vars_in_match_patterns():
    nat = rg.GlobalTypeVar("Nat")
    z = rg.Constructor("Z", [], nat)
    s = rg.Constructor("S", [rg.TypeCall(nat, [])], nat)
    p, q = rg.var("p"), rg.var("q")
    m = rg.Match(q, [rg.Clause(rg.PatternConstructor(s, [rg.PatternVar(p)]), p),
                     rg.Clause(rg.PatternConstructor(z, []), q)])
    assert rg.free_vars(m) == [q]
    assert rg.bound_vars(m) == [p]


def test_free_type_vars():
    a, b = rg.TypeVar("A"), rg.TypeVar("B")
    x = rg.var("x", rg.TupleType([a, b]))
    f = rg.Function([x], x, type_params=[a])
    assert rg.free_type_vars(f) == [b]
    assert rg.free_type_vars(rg.FuncType([a], b, [a])) == [b]


def test_substitute_replaces_free_occurrences_only():
    x, y = rg.var("x"), rg.var("y")
    one = rg.const(1.0)
    inner = rg.Function([x], x * x)  # binds x: must not be touched
    e = rg.Tuple([x + y, inner])
    out = rg.substitute(e, {x: one})
    assert out.fields[0] is one + y
    assert out.fields[1] is inner
    let = rg.Let(x, y, x)  # x is rebound: its body keeps the binder
    assert rg.substitute(let, {x: one}) is let


def test_substitute_avoids_capture():
    x, y = rg.var("x"), rg.var("y")
    f = rg.Function([y], x + y)
    out = rg.substitute(f, {x: y})  # the free y must not be captured by the parameter
    (param,) = out.params
    assert param is not y and out.body is y + param
    assert rg.alpha_equal(out, rg.Function([rg.var("q")], y + rg.var("q"))) is False
    q = rg.var("q")
    assert rg.alpha_equal(out, rg.Function([q], y + q))


def test_module_add_lookup_update_and_mutual_recursion():
    mod = rg.IRModule()
    even, odd = rg.GlobalVar("even"), rg.GlobalVar("odd")
    n = rg.var("n")
    m = rg.var("m")
    mod.add(even, rg.Function([n], odd(n)))
    mod.add(odd, rg.Function([m], even(m)))
    assert mod.get_global_var("even") is even and mod["odd"].body.op is even
    with pytest.raises(rg.NodeError, match="already defined"):
        mod.add(even, rg.Function([n], n))
    mod.update_func("even", rg.Function([n], n))
    assert mod["even"].body is n
    with pytest.raises(KeyError, match="no global @nope"):
        mod.get_global_var("nope")
    copy = mod.copy()
    copy.remove("odd")
    assert "odd" in mod and "odd" not in copy


def test_module_from_expr_wraps_free_vars():
    x, y = rg.var("x"), rg.var("y")
    mod = rg.IRModule.from_expr(x + y)
    assert mod["main"].params == (x, y)
    f = rg.Function([x], x)
    assert rg.IRModule.from_expr(f)["main"] is f


def test_adt_definitions_in_modules():
    lst = rg.GlobalTypeVar("List")
    a = rg.TypeVar("A")
    cons = rg.Constructor("Cons", [a, rg.TypeCall(lst, [a])], lst)
    nil = rg.Constructor("Nil", [], lst)
    mod = rg.IRModule()
    mod.add_type(rg.TypeData(lst, [a], [cons, nil]))
    assert mod.get_constructor("Nil") is nil and mod.get_type("List").constructors == (cons, nil)
    other = rg.GlobalTypeVar("Other")
    with pytest.raises(rg.NodeError, match="belongs to List"):
        rg.TypeData(other, [], [nil])


def test_to_networkx_and_stats():
    x = rg.var("x")
    a = rg.Call(rg.Op("log"), (x,))
    g = rg.to_networkx(a + a)
    assert g.number_of_nodes() == 3
    ops = sorted(d["op"] for _, d in g.nodes(data=True) if d["op"])
    assert ops == ["add", "log"]
    stats = program_stats(a + a)
    assert stats == {"nodes": 3, "tree_size": 5, "depth": 3, "ops": {"add": 1, "log": 1},
                     "calls": 2, "shared": 1}


DEPTH = 100_000


@pytest.fixture(scope="module")
def deep_chain():
    x = rg.var("x")
    h = x
    for i in range(DEPTH):
        h = rg.Call(rg.Op("tanh" if i % 2 else "exp"), (h,))
    return x, h


def test_deep_chain_everywhere(deep_chain):
    x, h = deep_chain
    limit = sys.getrecursionlimit()
    assert rg.node_count(h) == DEPTH + 1
    assert sum(1 for _ in iter_post_order(h)) == DEPTH + 3  # plus the two Op handles

    class Swap(ExprMutator):
        def rewrite_call(self, pre, post):
            return rg.Call(rg.Op("exp" if post.op.name == "tanh" else "tanh"), post.args)

    swapped = Swap().visit(h)
    back = Swap().visit(swapped)
    assert back is h
    f1, y = rg.Function([x], h), rg.var("y")
    f2 = rg.Function([y], rg.substitute(h, {x: y}))
    assert rg.alpha_equal(f1, f2) and not rg.alpha_equal(f1, rg.Function([y], swapped))
    assert rg.structural_hash(f1) == rg.structural_hash(f2)
    assert rg.free_vars(h) == [x]
    assert rg.to_networkx(h).number_of_nodes() == DEPTH + 1
    assert program_stats(h)["depth"] == DEPTH + 1
    assert sys.getrecursionlimit() == limit


def test_lint_clean():
    """The code base passes ruff (configured in pyproject.toml)."""
    import shutil
    import subprocess
    from pathlib import Path

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff (a test dependency in pyproject.toml) is not installed"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([ruff, "check", "relaygraph", "tests", "benchmarks"], cwd=root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_rich_display_draws_small_programs_and_summarises_big_ones():
    from relaygraph.ir.display import SVG_NODE_LIMIT

    x = rg.var("x", rg.TensorType((2,), "float32"))
    small = rg.Function([x], rg.Call(rg.Op("exp"), (x,)) + x)
    page = small._repr_html_()
    assert "<svg" in page and "exp" in page and "distinct nodes" in page
    h = x
    for _ in range(SVG_NODE_LIMIT + 5):
        h = rg.Call(rg.Op("tanh"), (h,))
    big = rg.IRModule.from_expr(rg.Function([x], h))
    page = big._repr_html_()
    assert "<svg" not in page and f"tanh&nbsp;×{SVG_NODE_LIMIT + 5}" in page
    assert "def @main" in page
