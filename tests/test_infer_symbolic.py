"""Symbolic shapes: models over batch ``n`` and image ``h, w`` infer simplified symbolic shapes,
and substituting numbers gives the concrete inference."""

from __future__ import annotations

import pytest
import sympy

import relaygraph as rg
from relaygraph.ir import Any, Function, GlobalVar, IRModule, Op, TensorType, Var, post_order
from relaygraph.ir.expr import Expr
from relaygraph.ty import infer_type, parse_dim, simplify_dim, sym, type_of
from relaygraph.ty.dims import dim_add, dim_floordiv, dim_mul, dims_equal, substitute_dim

n, h, w = sym("n"), sym("h"), sym("w")


def conv_net(batch, height, width):
    """conv(stride 2) -> relu -> max_pool -> conv -> reshape -> global pool -> dense -> softmax."""
    x = Var("data", TensorType((batch, 3, height, width)))
    w1 = Var("w1", TensorType((16, 3, 3, 3)))
    w2 = Var("w2", TensorType((32, 16, 3, 3)))
    fc = Var("fc", TensorType((10, 32)))
    y = rg.op.nn.relu(rg.op.nn.conv2d(x, w1, strides=2, padding=1))
    y = rg.op.nn.max_pool2d(y, pool_size=2, strides=2, ceil_mode=True)
    y = rg.op.nn.conv2d(y, w2, padding=(1, 1))
    y = rg.op.reshape(y, newshape=(0, 0, -1))
    y = rg.op.mean(y, axis=2)
    y = rg.op.nn.softmax(rg.op.nn.dense(y, fc))
    return IRModule.from_expr(Function([x, w1, w2, fc], y))


def test_conv2d_output_is_floor_of_symbolic_size():
    x = Var("x", TensorType((n, 3, h, w)))
    k = Var("k", TensorType((64, 3, 3, 3)))
    typed = infer_type(IRModule.from_expr(Function([x, k], rg.op.nn.conv2d(x, k, strides=2,
                                                                            padding=1))))
    out = typed["main"].ret_type
    assert out.shape[:2] == (n, 64)
    assert sympy.simplify(out.shape[2] - (sympy.floor((h - 1) / 2) + 1)) == 0
    assert sympy.simplify(out.shape[3] - (sympy.floor((w - 1) / 2) + 1)) == 0
    assert out.shape[2] == simplify_dim(out.shape[2])  # already simplified


def test_symbolic_model_matches_concrete_inference():
    typed = infer_type(conv_net(n, h, w))
    assert typed["main"].ret_type == TensorType((n, 10))
    sym_nodes = [e for e in post_order(typed["main"].body) if isinstance(e, Expr) and not isinstance(e, Op)]
    for values in ({n: 1, h: 32, w: 32}, {n: 4, h: 31, w: 17}, {n: 2, h: 9, w: 64}):
        concrete = infer_type(conv_net(values[n], values[h], values[w]))
        con_nodes = [e for e in post_order(concrete["main"].body)
                     if isinstance(e, Expr) and not isinstance(e, Op)]
        assert len(con_nodes) == len(sym_nodes)
        checked = 0
        for s, c in zip(sym_nodes, con_nodes, strict=True):
            st, ct = type_of(s), type_of(c)
            if isinstance(st, TensorType):
                assert tuple(substitute_dim(d, values) for d in st.shape) == ct.shape, (st, ct)
                checked += 1
        assert checked >= 8


def test_reshape_and_flatten_stay_symbolic():
    x = Var("x", TensorType((n, 4, h, w)))
    flat = infer_type(IRModule.from_expr(Function([x], rg.op.nn.batch_flatten(x))))
    assert flat["main"].ret_type == TensorType((n, 4 * h * w))
    back = rg.op.reshape(rg.op.nn.batch_flatten(x), newshape=(0, -1, 2))
    out = infer_type(IRModule.from_expr(Function([x], back)))["main"].ret_type
    assert out.shape[0] == n and out.shape[2] == 2
    assert sympy.simplify(out.shape[1] - 2 * h * w) == 0


def test_broadcast_with_symbols_and_any():
    x = Var("x", TensorType((n, 3)))
    y = Var("y", TensorType((1, 3)))
    z = Var("z", TensorType((Any, 1)))
    typed = infer_type(IRModule.from_expr(Function([x, y, z], rg.op.add(rg.op.add(x, y), z))))
    assert typed["main"].ret_type == TensorType((Any, 3))
    assert type_of(typed["main"].body.args[0]) == TensorType((n, 3))


def test_a_symbol_binds_to_a_concrete_dimension():
    a = Var("a", TensorType((n, 3)))
    mod = IRModule()
    f = mod.add("f", Function([a], rg.op.exp(a)))
    x = Var("x", TensorType((2, 3)))
    mod.add("main", Function([x], rg.op.nn.relu(f(x))))
    typed = infer_type(mod)
    assert typed["main"].ret_type == TensorType((2, 3))
    assert type_of(typed.get_global_var("f")).ret_type == TensorType((2, 3))
    assert isinstance(typed.get_global_var("f"), GlobalVar)


def test_any_unifies_with_anything():
    x = Var("x", TensorType((Any, 3)))
    k = Var("k", TensorType((5, 3)))
    typed = infer_type(IRModule.from_expr(Function([x, k], rg.op.nn.dense(x, k))))
    assert typed["main"].ret_type == TensorType((Any, 5))
    c = Var("c", TensorType((1, 3, Any, 8)))
    wt = Var("wt", TensorType((2, 3, 3, 3)))
    typed = infer_type(IRModule.from_expr(Function([c, wt], rg.op.nn.conv2d(c, wt))))
    assert typed["main"].ret_type == TensorType((1, 2, Any, 6))


def test_dims_helpers():
    assert dim_add(2, 3) == 5 and type(dim_mul(4, 5)) is int
    assert dim_floordiv(7, 2) == 3 and dim_add(Any, 1) is Any
    assert dims_equal(h + 1, 1 + h) is True and dims_equal(2, 3) is False
    assert dims_equal(h, w) is None
    assert parse_dim("?") is Any and parse_dim("12") == 12
    assert parse_dim("floor((h - 1)/2) + 1") == simplify_dim(sympy.floor((h - 1) / 2) + 1)
    assert parse_dim("n") is n and substitute_dim(h * w, {h: 3, w: 4}) == 12
    with pytest.raises(ValueError, match="not a dimension expression"):
        parse_dim("(((")


@pytest.mark.parametrize("name", ["sequence", "N", "E", "I", "S", "beta", "gamma", "pi", "test"])
def test_names_sympy_knows_parse_as_dimension_symbols(name):
    # ONNX models name dims "sequence", "N"...: sympy alone reads them as its functions/constants
    assert parse_dim(name) is sym(name)
    assert parse_dim(f"2*{name} + 1") == 2 * sym(name) + 1
    assert parse_dim(f"Max({name}, 3)") == sympy.Max(sym(name), 3)
    mod = rg.parse(f'#[version = "0.0.5"]\ndef @main(%x: Tensor[({name}, 4), float32]) {{ nn.relu(%x) }}\n')
    assert infer_type(mod)["main"].ret_type.shape == (sym(name), 4)


def test_symbolic_text_model():
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(n, 3, h, w), float32], %k: Tensor[(8, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %k, strides=[2, 2], padding=[1, 1, 1, 1]);
  %1 = nn.max_pool2d(%0, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0]);
  nn.batch_flatten(%1)
}
"""
    typed = infer_type(rg.parse(text))
    out = typed["main"].ret_type
    assert out.shape[0] == n and out.shape[1].free_symbols == {h, w}
    conv_h, conv_w = (sympy.floor((d - 1) / 2) + 1 for d in (h, w))
    pool_h, pool_w = (sympy.floor((d - 2) / 2) + 1 for d in (conv_h, conv_w))
    assert sympy.expand(out.shape[1] - 8 * pool_h * pool_w) == 0
    for values in ({n: 1, h: 32, w: 30}, {n: 3, h: 15, w: 9}):
        concrete = text.replace("(n, 3, h, w)", f"({values[n]}, 3, {values[h]}, {values[w]})")
        want = infer_type(rg.parse(concrete))["main"].ret_type
        assert tuple(substitute_dim(d, values) for d in out.shape) == want.shape
    assert infer_type(rg.parse(rg.astext(typed)))["main"].ret_type == out
