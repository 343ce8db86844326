"""The op table drives these tests: every op's examples are checked end to end."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ir import Call, Function, IRModule, Op, TensorType, TupleType, Var
from relaygraph.ops import REQUIRED, PatternKind, all_ops, get, random_inputs
from relaygraph.ty import sym

CASES = [(op.name, i) for op in all_ops() for i in range(len(op.examples))]


def _outputs(t):
    return list(t.fields) if isinstance(t, TupleType) else [t]


@pytest.mark.parametrize("name,index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_kernel_matches_inferred_type(name, index):
    op = get(name)
    arg_types, given = op.examples[index]
    call = rg.op.make_call(name, *[Var(f"a{i}", t) for i, t in enumerate(arg_types)], **given)
    typed = rg.infer_type(IRModule.from_expr(call))
    out_type = typed["main"].ret_type
    assert out_type == op.type_relation(arg_types, call.attrs)
    for seed in (0, 1):
        args = random_inputs(op, arg_types, call.attrs, rng=seed)
        result = op.kernel(args, call.attrs)
        results = list(result) if isinstance(result, tuple) else [result]
        expected = _outputs(out_type)
        assert len(results) == len(expected)
        for got, want in zip(results, expected, strict=True):
            assert isinstance(got, np.ndarray)
            assert got.shape == tuple(want.shape), f"{name}: kernel shape {got.shape} vs {want}"
            assert str(got.dtype) == want.dtype, f"{name}: kernel dtype {got.dtype} vs {want}"
            if got.dtype.kind == "f":
                assert np.all(np.isfinite(got)), f"{name}: non-finite output on its own domain"
    costs = op.resolve(call.attrs)
    assert op.flops(arg_types, out_type, costs) >= 0.0
    assert op.bytes(arg_types, out_type, costs) > 0.0 or out_type == TupleType(())


@pytest.mark.parametrize("op", all_ops(), ids=lambda o: o.name)
def test_every_op_is_complete(op):
    assert op.examples, f"{op.name} has no examples for the table tests"
    assert op.num_inputs is None or op.num_inputs == len(op.examples[0][0])
    assert isinstance(op.pattern, PatternKind)
    assert callable(op.kernel) and callable(op.type_relation)
    assert len(op.input_names) == (op.num_inputs or 0) or op.num_inputs == 0


@pytest.mark.parametrize("op", all_ops(), ids=lambda o: o.name)
def test_canonical_attrs_round_trip(op):
    # canonical attrs hold exactly what differs from TVM's defaults, so resolving them and
    # canonicalising again is the identity, and every default resolves to itself
    for _, given in op.examples:
        attrs = op.builder_attrs(given)
        assert op.canonical_attrs(op.resolve(attrs)) is attrs
        assert set(op.resolve(attrs)) == set(op.attrs)
        assert all(k in attrs for k, v in op.attrs.items() if v is REQUIRED)


@pytest.mark.parametrize("name,index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_attrs_round_trip_through_text(name, index):
    op = get(name)
    arg_types, given = op.examples[index]
    call = rg.op.make_call(name, *[Var(f"a{i}", t) for i, t in enumerate(arg_types)], **given)
    mod = IRModule.from_expr(call)
    back = rg.parse(rg.astext(mod))
    body = back["main"].body
    assert isinstance(body, Call) and body.op == Op(name)
    assert op.resolve(body.attrs) == op.resolve(call.attrs)


def test_tvm_attribute_schemas():
    conv = get("nn.conv2d")
    assert list(conv.attrs.items()) == [
        ("strides", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)), ("groups", 1),
        ("channels", None), ("kernel_size", None), ("data_layout", "NCHW"),
        ("kernel_layout", "OIHW"), ("out_layout", ""), ("out_dtype", ""),
    ]
    assert get("nn.conv2d_transpose").attrs["kernel_layout"] == "IOHW"
    assert list(get("nn.max_pool2d").attrs) == ["pool_size", "strides", "dilation", "padding",
                                                "layout", "out_layout", "ceil_mode"]
    assert get("nn.batch_norm").attrs == {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True}
    assert get("nn.dense").attrs == {"units": REQUIRED, "out_dtype": ""}
    assert list(get("strided_slice").attrs) == ["begin", "end", "strides", "slice_mode", "axes"]
    assert get("reshape").attrs == {"newshape": REQUIRED, "allowzero": False}
    assert list(get("argmax").attrs) == ["axis", "keepdims", "select_last_index", "exclude"]
    assert get("nn.softmax").attrs == {"axis": -1}
    assert get("nn.dropout").attrs == {"rate": 0.5}
    assert get("nn.batch_matmul").py_defaults == {"transpose_b": True}


def test_tvm_pattern_kinds():
    kinds = {
        "add": PatternKind.BROADCAST, "exp": PatternKind.ELEMWISE, "nn.relu": PatternKind.ELEMWISE,
        "sum": PatternKind.COMM_REDUCE, "nn.conv2d": PatternKind.OUT_ELEMWISE_FUSABLE,
        "nn.dense": PatternKind.OUT_ELEMWISE_FUSABLE, "reshape": PatternKind.INJECTIVE,
        "expand_dims": PatternKind.BROADCAST, "nn.bias_add": PatternKind.BROADCAST,
        "nn.softmax": PatternKind.OPAQUE, "nn.batch_norm": PatternKind.OPAQUE,
        "nn.max_pool2d": PatternKind.OUT_ELEMWISE_FUSABLE, "concatenate": PatternKind.INJECTIVE,
        "shape_of": PatternKind.OPAQUE, "where": PatternKind.BROADCAST,
        "nn.batch_flatten": PatternKind.INJECTIVE, "argmax": PatternKind.COMM_REDUCE,
    }
    for name, kind in kinds.items():
        assert get(name).pattern is kind, name


def test_builders_follow_tvm_python_api():
    x = Var("x", TensorType((1, 3, 8, 8)))
    w = Var("w", TensorType((4, 3, 3, 3)))
    c = rg.op.nn.conv2d(x, w, padding=(1, 1), strides=2)
    assert dict(c.attrs.items) == {"padding": (1, 1, 1, 1), "strides": (2, 2)}
    assert dict(rg.op.nn.conv2d(x, w).attrs.items) == {"padding": (0, 0, 0, 0)}
    assert rg.op.nn.dense(x, w).attrs["units"] is None
    assert rg.op.nn.batch_matmul(x, w).attrs["transpose_b"] is True
    assert rg.op.nn.leaky_relu(x, alpha=1).attrs["alpha"] == 1.0
    assert rg.op.reshape(x, (3, -1)).attrs["newshape"] == (3, -1)
    assert rg.op.sum(x, axis=1).attrs["axis"] == (1,)
    cat = rg.op.concatenate([x, x], axis=1)
    assert isinstance(cat.args[0], rg.Tuple)
    from relaygraph.ops.nn import conv2d

    assert conv2d is rg.op.nn.conv2d


def test_builder_errors_are_clear():
    x = Var("x", TensorType((2, 3)))
    with pytest.raises(rg.NodeError,
                       match=r"nn.conv2d has no attribute\(s\) 'pading'; valid attributes: strides"):
        rg.op.nn.conv2d(x, x, pading=(1, 1))
    with pytest.raises(rg.NodeError, match=r"reshape: attribute 'newshape' is required"):
        rg.op.reshape(x)
    with pytest.raises(rg.NodeError, match=r"add takes 2 input\(s\) \(lhs, rhs\), got 1"):
        rg.op.add(x)
    with pytest.raises(KeyError, match="did you mean"):
        get("nn.conv2")


def test_unknown_attr_in_a_call_is_a_type_error():
    x = Var("x", TensorType((2, 3)))
    call = Call(Op("nn.relu"), (x,), {"alpha": 0.1})
    with pytest.raises(rg.TypeError, match=r"nn.relu has no attribute\(s\) 'alpha'"):
        rg.infer_type(IRModule.from_expr(Function([x], call)))


def test_random_inputs_respect_domains():
    t = TensorType((200,))
    assert np.all(random_inputs("log", [t], rng=3)[0] > 0)
    assert np.all(random_inputs("divide", [t, t], rng=3)[1] != 0)
    data, idx = random_inputs("take", [TensorType((7, 2)), TensorType((50,), "int32")],
                              {"axis": 0}, rng=3)
    assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() < 7
    assert random_inputs("logical_not", [TensorType((4,), "bool")])[0].dtype == np.bool_
    with pytest.raises(rg.RelayError, match="concrete shapes"):
        random_inputs("exp", [TensorType((sym("n"),))])
