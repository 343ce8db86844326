"""alpha_equal and structural_hash: positives, negatives, and a hypothesis property."""

from hypothesis import given, settings
from hypothesis import strategies as st

import relaygraph as rg


def fn1(body_of):
    x = rg.var("x")
    return rg.Function([x], body_of(x))


def test_renamed_binders_are_equal():
    assert rg.alpha_equal(fn1(lambda x: x * x), fn1(lambda y: y * y))
    assert rg.structural_hash(fn1(lambda x: x * x)) == rg.structural_hash(fn1(lambda y: y * y))


def test_swapped_binders_differ():
    x, y = rg.var("x"), rg.var("y")
    a = rg.Function([x, y], x - y)
    b = rg.Function([y, x], x - y)
    assert not rg.alpha_equal(a, b)
    p, q = rg.var("p"), rg.var("q")
    assert rg.alpha_equal(a, rg.Function([p, q], p - q))


def test_shadowing():
    x1, x2 = rg.var("x"), rg.var("x")
    inner_uses_inner = rg.Let(x1, rg.const(1.0), rg.Let(x2, rg.const(2.0), x2))
    inner_uses_outer = rg.Let(x1, rg.const(1.0), rg.Let(x2, rg.const(2.0), x1))
    a, b = rg.var("a"), rg.var("b")
    assert rg.alpha_equal(inner_uses_inner, rg.Let(a, rg.const(1.0), rg.Let(b, rg.const(2.0), b)))
    assert not rg.alpha_equal(inner_uses_inner, inner_uses_outer)
    assert rg.alpha_equal(inner_uses_outer, rg.Let(a, rg.const(1.0), rg.Let(b, rg.const(2.0), a)))


def test_free_vars_need_identity_unless_mapped():
    x, y = rg.var("x"), rg.var("y")
    assert not rg.alpha_equal(x + x, y + y)
    assert rg.alpha_equal(x + x, y + y, map_free_vars=True)
    assert not rg.alpha_equal(x + y, y + y, map_free_vars=True)  # a bijection, not any map
    assert rg.alpha_equal(x + y, x + y)


def test_identical_subtree_under_a_renamed_binder():
    p, q = rg.var("p"), rg.var("q")
    g = rg.Call(rg.Op("exp"), (p,))
    # Same body object, but p is bound on the left and free on the right.
    assert not rg.alpha_equal(rg.Function([p], g), rg.Function([q], g))


def test_annotations_attrs_and_constants_matter():
    a = rg.Function([rg.var("x", shape=(1, 2))], rg.const(1.0))
    b = rg.Function([rg.var("x", shape=(2, 1))], rg.const(1.0))
    assert not rg.alpha_equal(a, b)
    x = rg.var("x")
    assert not rg.alpha_equal(rg.Call(rg.Op("sum"), (x,), {"axis": 0}),
                              rg.Call(rg.Op("sum"), (x,), {"axis": 1}))
    assert not rg.alpha_equal(x + rg.const(1.0), x + rg.const(2.0))


def _list_adt():
    lst = rg.GlobalTypeVar("List")
    a = rg.TypeVar("A")
    cons = rg.Constructor("Cons", [a, rg.TypeCall(lst, [a])], lst)
    nil = rg.Constructor("Nil", [], lst)
    return cons, nil


def _head_or(default_of_tail: bool, cons, nil):
    xs, h, t = rg.var("xs"), rg.var("h"), rg.var("t")
    pat = rg.PatternConstructor(cons, [rg.PatternVar(h), rg.PatternVar(t)])
    rhs = t if default_of_tail else h
    return rg.Function([xs], rg.Match(xs, [rg.Clause(pat, rhs),
                                           rg.Clause(rg.PatternWildcard(), xs)]))


def test_match_patterns():
    cons, nil = _list_adt()
    assert rg.alpha_equal(_head_or(False, cons, nil), _head_or(False, cons, nil))
    assert not rg.alpha_equal(_head_or(False, cons, nil), _head_or(True, cons, nil))
    # Constructors compare by name, so a re-declared List matches.
    cons2, nil2 = _list_adt()
    assert rg.alpha_equal(_head_or(True, cons, nil), _head_or(True, cons2, nil2))
    assert rg.structural_hash(_head_or(True, cons, nil)) == rg.structural_hash(_head_or(True, cons2, nil2))


def test_modules_compare_globals_by_name():
    def make():
        mod = rg.IRModule()
        f, g = rg.GlobalVar("f"), rg.GlobalVar("g")
        x, y = rg.var("x"), rg.var("y")
        mod.add(f, rg.Function([x], g(x)))
        mod.add(g, rg.Function([y], f(y)))
        return mod

    assert rg.alpha_equal(make(), make())
    other = make()
    other.update_func("g", rg.Function([rg.var("z")], rg.const(0.0)))
    assert not rg.alpha_equal(make(), other)
    assert rg.structural_hash(make()) == rg.structural_hash(make())


# ---- property: random DAG programs equal their own renaming, and hashes agree -----------------

UNARY = ["exp", "tanh", "negative", "sigmoid"]
BINARY = ["add", "multiply", "subtract"]


@st.composite
def programs(draw):
    """A random function: lets, tuples, projections, ifs, and DAG sharing of earlier nodes."""
    params = [rg.var(f"p{i}") for i in range(draw(st.integers(1, 3)))]
    pool: list = list(params) + [rg.const(draw(st.floats(-2, 2, width=32)))]
    steps = draw(st.lists(st.integers(0, 5), min_size=1, max_size=25))
    for kind in steps:
        pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]  # noqa: E731
        if kind == 0:
            e = rg.Call(rg.Op(draw(st.sampled_from(UNARY))), (pick(),))
        elif kind == 1:
            e = rg.Call(rg.Op(draw(st.sampled_from(BINARY))), (pick(), pick()))
        elif kind == 2:
            e = rg.Tuple([pick(), pick()])[draw(st.integers(0, 1))]
        elif kind == 3:
            v = rg.var("t")
            e = rg.Let(v, pick(), v * pick())
        elif kind == 4:
            e = rg.If(pick() < pick(), pick(), pick())
        else:
            y = rg.var("y")
            e = rg.Call(rg.Function([y], y + pick()), (pick(),))
        pool.append(e)
    return rg.Function(params, pool[-1])


def rename_all(f):
    """A copy of ``f`` with every bound variable replaced by a fresh one."""
    mapping = {v: rg.var(v.name_hint) for v in rg.bound_vars(f)}

    class Rename(rg.ExprMutator):
        def rewrite_var(self, pre, post):
            return mapping.get(pre, pre)

    return Rename().visit(f)


@settings(max_examples=150, deadline=None)
@given(programs())
def test_alpha_equal_to_renaming_with_same_hash(f):
    g = rename_all(f)
    assert g is not f or not rg.bound_vars(f)
    assert rg.alpha_equal(f, g) and rg.alpha_equal(g, f)
    assert rg.structural_hash(f) == rg.structural_hash(g)


@settings(max_examples=100, deadline=None)
@given(programs(), programs())
def test_alpha_equal_agrees_with_hash(f, g):
    if rg.alpha_equal(f, g):
        assert rg.structural_hash(f) == rg.structural_hash(g)
    else:
        assert not rg.alpha_equal(g, f)
