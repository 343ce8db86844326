"""The dataflow executor: compiled once, frees intermediates, fused groups, identical results."""

import tracemalloc

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.eval import compile_function, fused_kernel, values_equal
from relaygraph.ir import Call, Function, If, Let, Op, RefCreate, RefRead, TensorType, Tuple, Var, const
from relaygraph.ops import make_call


def fvar(name, shape):
    return Var(name, TensorType(shape, "float32"))


def test_dataflow_modules_run_on_the_executor_with_identical_results():
    for name, options in [("residual-mlp", {}), ("diamond-chain", {"depth": 300})]:
        mod, params = rg.zoo.get(name, **options)
        assert compile_function(mod["main"]) is not None
        inputs = rg.zoo.example_inputs(mod, params)
        fast = rg.evaluate(mod, **inputs, **params)
        slow = rg.evaluate(mod, **inputs, **params, executor=False)
        assert values_equal(fast, slow)


def test_the_plan_is_topological_and_frees_each_value_after_its_last_use():
    x = fvar("x", (4,))
    a = make_call("exp", x)
    b = make_call("tanh", a)
    c = make_call("add", a, b)  # last use of a and b
    d = make_call("negative", c)
    plan = compile_function(Function([x], d))
    lines = plan.listing().splitlines()
    assert [line.split(" = ")[1].split("(")[0] for line in lines] == ["exp", "tanh", "add", "negative"]
    frees = [line.split("free ")[1] if "free" in line else "" for line in lines]
    # x dies at exp; a is still needed by add, so tanh frees nothing; a and b die at add
    assert frees == ["[0]", "", "[1, 2]", "[3]"]


def test_a_long_chain_keeps_only_a_few_tensors_alive():
    x = fvar("x", (1 << 18,))  # 1 MiB per tensor
    h = x
    for i in range(40):
        h = make_call("exp" if i % 2 else "negative", h)
    func = Function([x], h)
    data = np.full(1 << 18, 0.5, "float32")
    compile_function(func)
    tracemalloc.start()
    try:
        out = rg.evaluate(func, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == data.shape
    assert peak < 4 * data.nbytes  # 40 intermediates computed, at most ~2 alive at once


def test_programs_with_control_flow_go_to_the_interpreter():
    x = Var("x", TensorType((), "int32"))
    branchy = Function([x], If(make_call("greater", x, const(0)), x, make_call("negative", x)))
    assert compile_function(branchy) is None
    assert int(rg.evaluate(branchy, np.int32(-3))) == 3
    with pytest.raises(rg.EvalError, match="not dataflow-only"):
        rg.evaluate(branchy, np.int32(-3), executor=True)
    assert compile_function(Function([x], RefRead(RefCreate(x)))) is None


def primitive(params, body):
    return Function(params, body, attrs={"Primitive": 1})


def test_an_elementwise_fused_group_is_one_numexpr_program():
    p0, p1 = fvar("p0", (64, 64)), fvar("p1", (64,))
    group = primitive([p0, p1], make_call("multiply", make_call("nn.relu", make_call("add", p0, p1)),
                                           const(np.float32(0.5))))
    x, b = fvar("x", (64, 64)), fvar("b", (64,))
    main = Function([x, b], make_call("tanh", Call(group, (x, b))))
    assert fused_kernel(group).uses_numexpr
    rng = np.random.default_rng(0)
    xv, bv = rng.standard_normal((64, 64)).astype("float32"), rng.standard_normal(64).astype("float32")
    fast = rg.evaluate(main, xv, bv)
    slow = rg.evaluate(main, xv, bv, executor=False)
    assert fast.dtype == np.float32  # float constants do not widen the chain to float64
    np.testing.assert_allclose(fast, slow, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fast, np.tanh(np.maximum(xv + bv, 0) * 0.5), rtol=1e-6, atol=1e-7)


def test_a_fused_chain_allocates_only_its_result():
    p = fvar("p", (1 << 18,))
    body = p
    for name in ["exp", "negative", "sigmoid", "abs", "sqrt", "tanh"] * 3:
        body = make_call(name, body)
    group = primitive([p], body)
    x = fvar("x", (1 << 18,))
    func = Function([x], Call(group, (x,)))
    assert fused_kernel(group).uses_numexpr
    data = np.linspace(-1, 1, 1 << 18, dtype="float32")
    rg.evaluate(func, data)  # compile and warm numexpr up outside the measurement
    tracemalloc.start()
    try:
        out = rg.evaluate(func, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * data.nbytes  # 18 ops, one output buffer
    np.testing.assert_allclose(out, rg.evaluate(func, data, executor=False), rtol=2e-6, atol=1e-6)


def test_attribute_constants_keep_the_dtype():
    p = fvar("p", (8,))
    group = primitive([p], make_call("clip", make_call("nn.leaky_relu", p, alpha=0.2), a_min=-0.1, a_max=0.3))
    x = fvar("x", (8,))
    func = Function([x], Call(group, (x,)))
    data = np.linspace(-2, 2, 8, dtype="float32")
    out = rg.evaluate(func, data)
    assert fused_kernel(group).uses_numexpr and out.dtype == np.float32
    np.testing.assert_allclose(out, np.clip(np.where(data > 0, data, 0.2 * data), -0.1, 0.3), rtol=1e-6)


def test_a_group_with_an_opaque_op_runs_its_ops_in_sequence():
    p0, p1, p2 = fvar("p0", (2, 8)), fvar("p1", (4, 8)), fvar("p2", (4,))
    dense = make_call("nn.dense", p0, p1)
    group = primitive([p0, p1, p2], make_call("nn.relu", make_call("nn.bias_add", dense, p2)))
    kernel = fused_kernel(group)
    assert not kernel.uses_numexpr
    x, w, b = fvar("x", (2, 8)), fvar("w", (4, 8)), fvar("b", (4,))
    main = Function([x, w, b], Call(group, (x, w, b)))
    rng = np.random.default_rng(1)
    vals = [rng.standard_normal(s).astype("float32") for s in [(2, 8), (4, 8), (4,)]]
    assert values_equal(rg.evaluate(main, *vals), rg.evaluate(main, *vals, executor=False))


def test_let_bound_primitive_functions_and_inlined_function_literals():
    p = fvar("p", (3,))
    group = primitive([p], make_call("exp", p))
    x, f, y = fvar("x", (3,)), Var("f"), Var("y")
    anf = Function([x], Let(f, group, Let(y, Call(f, (x,)), Call(f, (y,)))))
    assert compile_function(anf) is not None
    data = np.array([0.0, 0.5, 1.0], "float32")
    np.testing.assert_allclose(rg.evaluate(anf, data), np.exp(np.exp(data)), rtol=1e-6)
    # a plain (non-primitive) function literal called in place is inlined
    q = fvar("q", (3,))
    inline = Function([x], Call(Function([q], Tuple([q, make_call("negative", q)])), (x,)))
    assert compile_function(inline) is not None
    out = rg.evaluate(inline, data)
    assert isinstance(out, tuple) and np.array_equal(out[1], -data)


def test_inputs_bind_by_position_and_by_name():
    mod, params = rg.zoo.get("residual-mlp", layers=1, hidden=4)
    data = np.ones((1, 4), "float32")
    by_name = rg.evaluate(mod, data=data, **params)
    by_position = rg.evaluate(mod, data, params["dense0_weight"], params["dense0_bias"])
    assert values_equal(by_name, by_position)


def test_bad_inputs_are_clear_errors():
    mod, params = rg.zoo.get("residual-mlp", layers=1, hidden=4)
    missing = r"missing input %data of @main \(expected Tensor\[\(1, 4\), float32\]\)"
    with pytest.raises(rg.EvalError, match=missing):
        rg.evaluate(mod, **params)
    with pytest.raises(rg.EvalError, match=r"input %data: expected shape \(1, 4\).*given shape \(2, 4\)"):
        rg.evaluate(mod, data=np.ones((2, 4), "float32"), **params)
    with pytest.raises(rg.EvalError, match=r"input %data: expected dtype float32.*given float64"):
        rg.evaluate(mod, data=np.ones((1, 4)), **params)
    with pytest.raises(rg.EvalError, match=r"no parameter named 'weights'.*data, dense0_weight"):
        rg.evaluate(mod, data=np.ones((1, 4), "float32"), weights=1, **params)
    with pytest.raises(rg.EvalError, match="no function @predict"):
        rg.evaluate(mod, entry="predict")


def test_kernel_failures_name_the_operator_and_inputs():
    x, w = Var("x"), Var("w")
    func = Function([x, w], make_call("nn.dense", x, w))
    with pytest.raises(rg.EvalError, match=r"nn.dense failed on inputs \(float32\(2, 3\), float32\(4, 5\)\)"):
        rg.evaluate(func, np.ones((2, 3), "float32"), np.ones((4, 5), "float32"))
    with pytest.raises(rg.EvalError, match=r"nn.dense failed on inputs"):
        rg.evaluate(func, np.ones((2, 3), "float32"), np.ones((4, 5), "float32"), executor=False)


@pytest.mark.parametrize("executor", [True, False])
def test_a_kernel_given_inputs_it_cannot_take_says_why_as_the_type_checker_does(executor):
    # evaluated without type checking, the pool's kernel meets a rank-3 value: the error is the
    # pool's own rule for its input, not the numpy error the kernel ran into
    x = Var("x")
    func = Function([x], make_call("nn.max_pool2d", x, pool_size=(2, 2)))
    with pytest.raises(rg.EvalError, match=r"nn.max_pool2d failed on inputs \(float32\(2, 3, 4\)\): "
                                           r".*data must have rank 4") as info:
        rg.evaluate(func, np.ones((2, 3, 4), "float32"), executor=executor)
    assert "Error:" not in str(info.value)  # no Python exception's name in the message


def test_unknown_operators_are_reported_by_name():
    x = Var("x")
    with pytest.raises(rg.EvalError, match="no_such_op"):
        rg.evaluate(Function([x], Call(Op("no_such_op"), (x,))), np.ones(2, "float32"))


def test_a_fused_group_reading_fields_of_a_tuple_parameter_is_one_numexpr_program():
    t = Var("t", rg.TupleType([TensorType((6,), "float32")] * 2))
    relu = make_call("nn.relu", rg.TupleGetItem(t, 0))
    group = primitive([t], make_call("add", relu, rg.TupleGetItem(t, 1)))
    x = fvar("x", (6,))
    func = Function([x], Call(group, (Tuple([make_call("negative", x), x]),)))
    assert fused_kernel(group).uses_numexpr
    data = np.linspace(-1, 1, 6, dtype="float32")
    out = rg.evaluate(func, data)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.maximum(-data, 0) + data, rtol=1e-6)
    assert values_equal(out, rg.evaluate(func, data, executor=False))


def test_every_fused_op_definition_agrees_with_its_kernel_and_is_recognised():
    from relaygraph.ops import fused_ops
    from relaygraph.ops.registry import lookup

    rng = np.random.default_rng(2)
    for name in fused_ops.FUSED_OPS:
        record = lookup(name)
        assert fused_ops.definition(name) is not None, name
        for types, attrs in record.examples:
            params = [Var(f"p{i}", t) for i, t in enumerate(types)]
            canonical = record.canonical_attrs(attrs)
            body = fused_ops.expand(name, params, canonical)
            assert not any(isinstance(n, Call) and n.op.name.startswith("fused.")
                           for n in rg.post_order(body) if isinstance(n, Call))
            found, found_attrs, args = fused_ops.recognise(body)
            assert found == name and list(args) == params
            assert record.resolve(found_attrs) == record.resolve(canonical)
            vals = [rng.standard_normal(t.shape).astype(t.dtype) for t in types]
            want = rg.evaluate(Function(params, body), *vals, executor=False)  # the parts, op by op
            np.testing.assert_allclose(record.kernel(vals, canonical), want, rtol=1e-5, atol=1e-6)
            group = primitive(params, body)
            kernel = fused_kernel(group)
            assert kernel.label == name and fused_kernel(group, "sequence").label != name
            np.testing.assert_allclose(kernel(vals), want, rtol=1e-5, atol=1e-6)


def test_a_group_that_differs_from_a_fused_op_is_not_taken_for_it():
    p0, p1, p2 = fvar("p0", (2, 8)), fvar("p1", (4, 8)), fvar("p2", (4,))
    dense = make_call("nn.dense", p0, p1)
    exact = primitive([p0, p1, p2], make_call("nn.relu", make_call("nn.bias_add", dense, p2, axis=-1)))
    assert fused_kernel(exact).label == "fused.dense_bias_relu"
    # a different activation, a different attribute, or an input computed inside the group
    for body in [make_call("sigmoid", make_call("nn.bias_add", dense, p2, axis=-1)),
                 make_call("nn.relu", make_call("nn.bias_add", dense, p2, axis=0)),
                 make_call("nn.relu", make_call("nn.bias_add", make_call("nn.dense", make_call("exp", p0),
                                                                         p1), p2, axis=-1))]:
        assert not fused_kernel(primitive([p0, p1, p2], body)).label.startswith("fused.")


def test_a_fused_op_group_with_an_inlined_constant_and_a_repeated_input():
    p0 = fvar("p0", (3, 5))
    softmax = primitive([p0], make_call("nn.softmax", make_call("multiply", p0, const(np.float32(0.25)))))
    twice = primitive([p0], make_call("nn.relu", make_call("add", p0, p0)))
    assert fused_kernel(softmax).label == "fused.multiply_softmax"
    assert fused_kernel(twice).label == "fused.add_relu"
    x = fvar("x", (3, 5))
    func = Function([x], Tuple([Call(softmax, (x,)), Call(twice, (x,))]))
    data = np.linspace(-1, 1, 15, dtype="float32").reshape(3, 5)
    fast, slow = rg.evaluate(func, data), rg.evaluate(func, data, executor=False)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # the kernels wrote into no input
    np.testing.assert_array_equal(data, np.linspace(-1, 1, 15, dtype="float32").reshape(3, 5))
