"""Interning, immutability, canonical attrs and constructor errors of IR nodes."""

import gc
import weakref

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ir import Attrs, NodeError, live_interned_count


def test_same_structure_is_same_object():
    x, y = rg.var("x"), rg.var("y")
    assert rg.Call(rg.Op("add"), (x, y)) is rg.Call(rg.Op("add"), [x, y])
    assert (x + y) * (x + y) is rg.Call(rg.Op("multiply"), (x + y, x + y))
    assert rg.Tuple([x, y])[1] is rg.TupleGetItem(rg.Tuple((x, y)), 1)
    assert rg.Call(rg.Op("add"), (x, y)) is not rg.Call(rg.Op("add"), (y, x))


def test_vars_are_nominal():
    a, b = rg.Var("x"), rg.Var("x")
    assert a is not b and a != b and hash(a) != hash(b)
    assert rg.GlobalVar("f") is not rg.GlobalVar("f")
    assert (a + b) is not (b + a)


def test_constants_keyed_by_dtype_shape_and_bytes():
    assert rg.const(1.0) is rg.const(1.0)
    assert rg.const(1.0) is not rg.const(1.0, "float64")
    assert rg.const(np.zeros((2, 3))) is rg.const(np.zeros((2, 3)))
    assert rg.const(np.zeros((2, 3))) is not rg.const(np.zeros((3, 2)))
    assert rg.const(np.float32(-0.0)) is not rg.const(np.float32(0.0))
    c = rg.const(np.arange(6, dtype="int64").reshape(2, 3))
    assert c.dtype == "int64" and c.shape == (2, 3) and not c.data.flags.writeable
    assert rg.const(3).dtype == "int32" and rg.const(2**40).dtype == "int64"
    assert rg.const(True).dtype == "bool" and rg.const(1.5).shape == ()


def test_constant_data_is_copied_not_aliased():
    arr = np.ones(3, dtype="float32")
    c = rg.const(arr)
    arr[0] = 7
    assert c.data[0] == 1


def test_attrs_are_canonical():
    assert Attrs(padding=[1, 1], axis=-1) is Attrs({"axis": -1, "padding": (1, 1)})
    assert Attrs(a=1) is not Attrs(a=1.0) and Attrs(a=1) is not Attrs(a=True)
    assert Attrs(a=0.0) is not Attrs(a=-0.0)
    assert Attrs(a=float("nan")) is Attrs(a=float("nan"))
    assert Attrs(a=np.int64(3))["a"] == 3 and type(Attrs(a=np.int64(3))["a"]) is int
    assert Attrs() is rg.ir.EMPTY_ATTRS
    x = rg.var("x")
    assert rg.Call(rg.Op("nn.relu"), (x,), {"a": [1]}) is rg.Call(rg.Op("nn.relu"), (x,), Attrs(a=(1,)))


def test_nodes_are_immutable_and_replace_is_cheap():
    x = rg.var("x")
    call = x + x
    with pytest.raises(AttributeError, match="immutable"):
        call.args = ()
    assert call.replace() is call
    assert call.replace(args=call.args) is call
    y = rg.var("y")
    assert call.replace(args=(y, y)) is y + y


def test_with_children_of_another_arity_builds_a_new_node():
    # children that extend (or cut) the old ones are a new node, never the old one
    x, y, z, f = rg.var("x"), rg.var("y"), rg.var("z"), rg.var("f")
    call = rg.Call(f, (x, y))
    assert call.with_children((f, x, y)) is call
    assert call.with_children((f, x, y, z)).args == (x, y, z)
    assert call.with_children((f, x)).args == (x,)
    fn = rg.Function([x], x)
    assert fn.with_children((x, y, x)).params == (x, y)
    match = rg.ir.Match(x, [rg.ir.Clause(rg.ir.PatternWildcard(), y)])
    extra = rg.ir.Clause(rg.ir.PatternVar(z), z)
    assert match.with_children((x, *match.clauses, extra)).clauses == (*match.clauses, extra)


def test_unused_nodes_are_collected():
    x = rg.var("x")
    before = live_interned_count()
    node = rg.Call(rg.Op("exp"), (rg.Call(rg.Op("log"), (x,)),))
    ref = weakref.ref(node)
    assert live_interned_count() >= before + 2
    del node
    gc.collect()
    assert ref() is None
    assert live_interned_count() <= before


def test_spans_live_in_source_maps_not_on_nodes():
    from relaygraph.errors import Span
    from relaygraph.ir.module import SourceMap

    x = rg.var("x")
    a, b = SourceMap(), SourceMap()
    a.add(rg.Call(rg.Op("exp"), (x,)), Span("a.relay", 3, 4))
    b.add(rg.Call(rg.Op("exp"), (x,)), Span("b.relay", 9, 9))
    node = rg.Call(rg.Op("exp"), (x,))
    assert a.get(node) == Span("a.relay", 3, 4) and b.get(node) == Span("b.relay", 9, 9)
    assert not hasattr(node, "span") and not hasattr(node, "with_span")


@pytest.mark.parametrize("build, words", [
    (lambda: rg.Call(rg.Op("add"), (rg.var("x"), "y")), ["Call.args[1]", "Expr", "str"]),
    (lambda: rg.Call("add", ()), ["Call.op", "str"]),
    (lambda: rg.Function(["x"], rg.var("y")), ["Function.params[0]", "Var"]),
    (lambda: rg.Function([rg.const(1)], rg.var("y")), ["Function.params[0]", "Constant"]),
    (lambda: rg.TupleGetItem(rg.var("t"), -1), ["TupleGetItem.index", ">= 0"]),
    (lambda: rg.TupleGetItem(rg.var("t"), "0"), ["TupleGetItem.index"]),
    (lambda: rg.Let(rg.const(1), rg.const(1), rg.const(1)), ["Let.var", "Var"]),
    (lambda: rg.If(rg.var("c"), 1, rg.var("b")), ["If.true_branch"]),
    (lambda: rg.Var(3), ["Var.name_hint"]),
    (lambda: rg.Op("not an op!"), ["Op.name"]),
    (lambda: rg.TensorType((1, -2), "float32"), ["TensorType.shape[1]"]),
    (lambda: rg.TensorType((1, 2), "float33"), ["TensorType.dtype", "float33"]),
    (lambda: rg.Tuple(5), ["Tuple.fields"]),
    (lambda: rg.const("text"), ["Constant.data", "dtype"]),
    (lambda: rg.Call(rg.Op("nn.relu"), (rg.var("x"),), {"a": object()}), ["Attrs['a']"]),
    (lambda: rg.Match(rg.var("x"), [rg.var("y")]), ["Match.clauses[0]", "Clause"]),
])
def test_bad_fields_name_the_node_and_field(build, words):
    with pytest.raises((TypeError, ValueError)) as info:
        build()
    assert isinstance(info.value, NodeError)
    for w in words:
        assert w in str(info.value)


def test_sugar_builds_relay_calls():
    x = rg.var("x")
    assert (x - 1.0).op.name == "subtract" and (x - 1.0).args[1] is rg.const(1.0)
    assert (2 * x).args[0] is rg.const(2)
    assert (-x).op.name == "negative" and (x / x).op.name == "divide"
    assert (x < x).op.name == "less" and (x >= x).op.name == "greater_equal"
    f = rg.Function([x], x)
    assert f(x) is rg.Call(f, (x,))
    assert x[2] is rg.TupleGetItem(x, 2)


def test_types_are_interned_and_printed_as_relay():
    t = rg.TensorType((1, 3, None, 224), "float32")
    assert t is rg.TensorType([1, 3, rg.Any, 224])
    assert str(t) == "Tensor[(1, 3, ?, 224), float32]"
    assert str(rg.TensorType((), "int64")) == "int64"
    assert str(rg.TensorType((5,), "bool")) == "Tensor[(5), bool]"
    tt = rg.TupleType([t, rg.TensorType((), "float32")])
    assert tt is rg.TupleType((t, rg.TensorType((), "float32")))
    a = rg.TypeVar("A")
    assert str(rg.FuncType([a], a, [a])) == "fn [A](A) -> A"
    assert rg.TypeVar("A") is not a


def test_diagnostics_show_line_and_caret():
    from relaygraph.errors import ParseError, Span, register_source

    register_source("m.relay", "fn (%x) {\n  add(%x, %y)\n}\n")
    err = ParseError("unbound variable %y", Span("m.relay", 2, 11))
    assert str(err) == "m.relay:2:11: error: unbound variable %y\n    add(%x, %y)\n  " + " " * 10 + "^"
    assert str(ParseError("no position")) == "error: no position"


def test_paused_gc_is_reentrant_and_restores_state():
    import gc

    from relaygraph.ir import node

    assert gc.isenabled()
    with node.paused_gc():
        assert not gc.isenabled()
        with node.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
