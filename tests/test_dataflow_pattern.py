"""The dataflow pattern language (TVM's ``relay.dataflow_pattern``): match, rewrite, partition.

Expected programs are written as Relay text, as TVM prints them, and compared alpha-equal.
"""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.dataflow_pattern import (
    DFPatternCallback,
    DFPatternError,
    FunctionPattern,
    dominates,
    has_attr,
    has_dtype,
    has_shape,
    has_type,
    is_constant,
    is_expr,
    is_if,
    is_let,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    partition,
    rewrite,
    wildcard,
)
from relaygraph.errors import RelayError

op = rg.op
T4 = rg.TensorType((1, 4), "float32")


def v(name, shape=(1, 4)):
    return rg.var(name, shape=shape, dtype="float32")


def same(actual, expected_text, params):
    """``actual`` (closed over ``params``) is alpha-equal to the Relay text ``expected_text``."""
    got = rg.Function(params, actual)
    want = rg.parse_expr(expected_text)
    assert rg.alpha_equal(got, want), rg.astext(got)
    return rg.astext(got)


def conv_bias_relu():
    x, w, b = v("x", (1, 3, 8, 8)), v("w", (4, 3, 3, 3)), v("b", (4,))
    return x, w, b, op.nn.relu(op.nn.bias_add(op.nn.conv2d(x, w, padding=(1, 1)), b))


CBR = ("fn (%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32], "
       "%b: Tensor[(4), float32]) {")


# -- constructors -------------------------------------------------------------------------------
def test_wildcard_var_constant_and_expr_patterns():
    x, y = v("x"), v("y")
    c = rg.const(np.ones((1, 4), "float32"))
    assert wildcard().match(x) and wildcard().match(op.add(x, y))
    assert is_var().match(x) and is_var("x").match(x) and not is_var("y").match(x)
    assert not is_var().match(c) and is_constant().match(c) and not is_constant().match(x)
    assert is_expr(x).match(x) and not is_expr(x).match(y) and is_expr(c).match(c)


def test_op_and_call_patterns():
    x, y = v("x"), v("y")
    add = op.add(x, y)
    assert is_op("add").match(add.op) and not is_op("subtract").match(add.op)
    assert is_op("add")(is_var("x"), is_var("y")).match(add)
    assert not is_op("add")(is_var("y"), is_var("y")).match(add)
    assert is_op("add")(None).match(add)  # any arguments
    assert not is_op("add")(None).match(op.subtract(x, y))
    assert wildcard()(None).match(add) and not wildcard()(None).match(x)


def test_arithmetic_operators_build_call_patterns():
    x, y = v("x"), v("y")
    a, b = is_var("x"), is_var("y")
    assert (a + b).match(x + y) and (a - b).match(x - y) and (a * b).match(x * y)
    assert (a / b).match(x / y) and not (a - b).match(x + y) and not (a / b).match(y / x)


def test_tuple_and_tuple_get_item_patterns():
    x, y = v("x"), v("y")
    t = rg.Tuple((x, y))
    assert is_tuple([is_var("x"), is_var("y")]).match(t)
    assert not is_tuple([is_var("x")]).match(t) and is_tuple(None).match(t)
    assert is_tuple_get_item(is_tuple(None), 1).match(t[1])
    assert not is_tuple_get_item(is_tuple(None), 0).match(t[1])
    assert is_tuple_get_item(wildcard()).match(t[0]) and is_tuple_get_item(wildcard()).match(t[1])


def test_if_let_and_function_patterns():
    x, y = v("x"), v("y")
    cond = rg.var("c", shape=(), dtype="bool")
    e = rg.If(cond, x, y)
    assert is_if(is_var("c"), is_var("x"), is_var("y")).match(e)
    assert not is_if(is_var("c"), is_var("y"), is_var("x")).match(e)
    lv = rg.var("t")
    let = rg.Let(lv, op.add(x, y), op.nn.relu(lv))
    assert is_let(is_var("t"), is_op("add")(wildcard(), wildcard()), is_op("nn.relu")(is_var("t"))).match(let)
    assert not is_let(wildcard(), is_op("subtract")(None), wildcard()).match(let)
    fn = rg.Function([x, y], op.add(x, y))
    assert FunctionPattern([wildcard(), wildcard()], is_op("add")(None)).match(fn)
    assert FunctionPattern(None, is_op("add")(None)).match(fn)
    assert not FunctionPattern([wildcard()], is_op("add")(None)).match(fn)


def test_alternation_and_optional():
    x = v("x")
    pat = is_op("nn.relu")(wildcard()) | is_op("tanh")(wildcard())
    assert pat.match(op.nn.relu(x)) and pat.match(op.tanh(x)) and not pat.match(op.sigmoid(x))
    conv_opt_relu = is_op("nn.conv2d")(wildcard(), wildcard()).optional(lambda p: is_op("nn.relu")(p))
    _, w, _, _ = conv_bias_relu()
    xi = v("xi", (1, 3, 8, 8))
    conv = op.nn.conv2d(xi, w)
    assert conv_opt_relu.match(conv) and conv_opt_relu.match(op.nn.relu(conv))
    assert not conv_opt_relu.match(op.tanh(conv))


# -- memoised diamonds and commutativity -----------------------------------------------------------
def test_a_pattern_node_used_twice_is_a_diamond():
    x, w1, w2 = v("x", (1, 3, 8, 8)), v("w1", (4, 3, 3, 3)), v("w2", (4, 3, 3, 3))
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    diamond = is_op("add")(is_op("nn.relu")(conv), is_op("nn.leaky_relu")(conv))
    c1 = op.nn.conv2d(x, w1)
    assert diamond.match(op.add(op.nn.relu(c1), op.nn.leaky_relu(c1)))
    c2 = op.nn.conv2d(x, w2)  # same shape of graph, two different convolutions: no diamond
    assert not diamond.match(op.add(op.nn.relu(c1), op.nn.leaky_relu(c2)))
    same_input = is_op("add")(wildcard(), wildcard())
    a = wildcard()
    assert same_input.match(op.add(x, c1)) and not is_op("add")(a, a).match(op.add(x, c1))
    assert is_op("add")(a, a).match(op.add(x, x))


def test_add_and_multiply_match_swapped_arguments_but_subtract_does_not():
    x, y = v("x"), v("y")
    relu = is_op("nn.relu")(wildcard())
    assert is_op("add")(relu, is_var("x")).match(op.add(x, op.nn.relu(y)))
    assert is_op("multiply")(relu, is_var("x")).match(op.multiply(x, op.nn.relu(y)))
    assert not is_op("subtract")(relu, is_var("x")).match(op.subtract(x, op.nn.relu(y)))
    # divide/multiply associate, as in TVM: (a * b) / c matches a * (b / c)
    z = v("z")
    pat = is_op("divide")(is_op("multiply")(is_var("x"), is_var("y")), is_var("z"))
    assert pat.match(op.multiply(x, op.divide(y, z)))


# -- attribute, type and dominator patterns ---------------------------------------------------------
def test_attribute_patterns_on_calls_ops_and_functions():
    _, _, _, out = conv_bias_relu()
    conv = out.args[0].args[0]
    pconv = is_op("nn.conv2d")(wildcard(), wildcard())
    assert pconv.has_attr({"padding": [1, 1, 1, 1]}).match(conv)
    assert pconv.has_attr({"data_layout": "NCHW"}).match(conv)  # a default is an attribute too
    assert not pconv.has_attr({"padding": [0, 0, 0, 0]}).match(conv)
    assert not pconv.has_attr({"no_such_field": 1}).match(conv)  # a missing field fails
    elemwise = wildcard().has_attr({"TOpPattern": 0})  # kElemWise, the op's fusion kind
    assert is_op("nn.relu").has_attr({"TOpPattern": 0}).match(out.op)
    assert elemwise(wildcard()).match(out) and not elemwise(None).match(conv)
    x = v("x")
    fn = rg.Function([x], op.nn.relu(x)).with_attr("Composite", "relu_only")
    assert FunctionPattern(None, wildcard()).has_attr({"Composite": "relu_only"}).match(fn)
    assert not has_attr({"Composite": "other"}).match(fn)
    assert not has_attr({"Composite": "relu_only"}).match(x)


def test_type_dtype_and_shape_patterns_type_check_the_candidate():
    x, w, _, out = conv_bias_relu()
    conv = out.args[0].args[0]
    assert has_type(rg.TensorType((1, 4, 8, 8), "float32")).match(conv)
    assert not has_type(rg.TensorType((1, 4, 6, 6), "float32")).match(conv)
    assert has_dtype("float32").match(out) and not has_dtype("int32").match(out)
    assert has_shape((1, 4, 8, 8)).match(out) and not has_shape((1, 4, 8)).match(out)
    assert is_op("nn.relu")(wildcard()).has_shape([1, 4, 8, 8]).match(out)
    assert not is_op("nn.relu")(wildcard()).has_dtype("int32").match(out)
    assert has_dtype("float32", is_var("x")).match(x)


def _elemwise_diamond():
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    unary_elemwise = wildcard().has_attr({"TOpPattern": 0})(wildcard())
    return conv, dominates(conv, unary_elemwise, is_op("add")(wildcard(), wildcard()))


def test_dominator_pattern_checks_every_path():
    _, pattern = _elemwise_diamond()
    x, w = v("x", (1, 3, 8, 8)), v("w", (4, 3, 3, 3))
    relu = op.nn.relu(op.nn.conv2d(x, w))
    good = op.add(op.tanh(op.sigmoid(relu)), op.nn.relu(relu))
    assert pattern.match(good)
    # the other spelling builds the same pattern
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    path = wildcard().has_attr({"TOpPattern": 0})(wildcard())
    spelled = is_op("add")(wildcard(), wildcard()).dominates(conv, path)
    assert spelled.match(good)
    # a path through a non-elementwise op, or one that never reaches the conv, fails
    assert not pattern.match(op.add(op.nn.softmax(relu), op.nn.relu(relu)))
    assert not pattern.match(op.add(op.tanh(relu), v("y", (1, 4, 8, 8))))


def test_dominator_pattern_rejects_a_parent_the_child_does_not_post_dominate():
    _, pattern = _elemwise_diamond()
    x, w = v("x", (1, 3, 8, 8)), v("w", (4, 3, 3, 3))
    conv = op.nn.conv2d(x, w)
    inner = op.add(op.tanh(conv), op.nn.relu(conv))
    # the conv is also used outside the add, so the add does not post-dominate it
    program = rg.Tuple((inner, op.sigmoid(conv)))
    assert pattern.match(inner)  # alone, it does
    from relaygraph.dataflow_pattern import DFPatternMatcher

    assert not DFPatternMatcher(program).match(pattern, inner)


# -- rewrite ---------------------------------------------------------------------------------------------
class DoubleRelu(DFPatternCallback):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.x = wildcard()
        self.pattern = is_op("nn.relu")(is_op("nn.relu")(self.x))

    def callback(self, pre, post, node_map):
        return rg.op.nn.relu(node_map[self.x][0])


def test_rewrite_runs_rounds_to_a_fixed_point():
    x = v("x")
    e = x
    for _ in range(9):
        e = op.nn.relu(e)
    out = rewrite(DoubleRelu(), e)
    same(out, "fn (%x: Tensor[(1, 4), float32]) { nn.relu(%x) }", [x])
    data = np.random.default_rng(0).normal(size=(1, 4)).astype("float32")
    np.testing.assert_allclose(rg.evaluate(rg.Function([x], out), data),
                               rg.evaluate(rg.Function([x], e), data))
    once = rewrite(DoubleRelu(rewrite_once=True), e)  # one round: non-overlapping pairs only
    assert rg.node_count(once) > rg.node_count(out) > 1
    assert DoubleRelu().rewrite(e) is out


def test_rewrite_gives_the_callback_rewritten_matches():
    seen = []

    class AddToMul(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.a, self.b = wildcard(), wildcard()
            self.pattern = self.a + self.b

        def callback(self, pre, post, node_map):
            seen.append((pre, post))
            return node_map[self.a][0] * node_map[self.b][0]

    x, y, z = v("x"), v("y"), v("z")
    out = rewrite(AddToMul(), op.add(op.add(x, y), z))
    same(out, "fn (%x: Tensor[(1, 4), float32], %y: Tensor[(1, 4), float32], %z: Tensor[(1, 4), float32]) "
              "{ multiply(multiply(%x, %y), %z) }", [x, y, z])
    assert seen


def test_more_than_a_hundred_rounds_is_an_error():
    class Grow(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.a, self.b = wildcard(), wildcard()
            self.pattern = is_op("add")(self.a, self.b)

        def callback(self, pre, post, node_map):
            return op.add(node_map[self.a][0], op.multiply(node_map[self.b][0], rg.const(1.0)))

    x, y = v("x"), v("y")
    e = op.add(x, y)
    with pytest.raises(DFPatternError, match="100 rewrite passes.*Grow"):
        rewrite(Grow(), e)
    assert rg.node_count(e) == 3  # the input is untouched


def test_rewrite_with_require_type_sees_checked_types():
    class Shapes(DFPatternCallback):
        def __init__(self):
            super().__init__(require_type=True)
            self.pattern = is_op("nn.relu")(wildcard())
            self.shapes = []

        def callback(self, pre, post, node_map):
            self.shapes.append(rg.type_of(pre).shape)
            return post

    cb = Shapes()
    rewrite(cb, op.nn.relu(v("x")))
    assert cb.shapes == [(1, 4)]


# -- partition ----------------------------------------------------------------------------------------
def test_partition_names_the_function_and_its_parameters():
    x, w, b, out = conv_bias_relu()
    pat = is_op("nn.relu")(is_op("nn.bias_add")(is_op("nn.conv2d")(wildcard(), wildcard()), wildcard()))
    got = pat.partition(out, {"Composite": "conv_bias_relu"})
    text = same(got, CBR + """
  %2 = fn (%FunctionVar_0_0, %FunctionVar_0_1, %FunctionVar_0_2, Composite="conv_bias_relu",
           PartitionedFromPattern="nn.conv2d_nn.bias_add_nn.relu_") {
    %0 = nn.conv2d(%FunctionVar_0_0, %FunctionVar_0_1, padding=[1, 1, 1, 1]);
    %1 = nn.bias_add(%0, %FunctionVar_0_2);
    nn.relu(%1)
  };
  %2(%x, %w, %b)
}""", [x, w, b])
    assert "%FunctionVar_0_0, %FunctionVar_0_1, %FunctionVar_0_2" in text
    assert 'PartitionedFromPattern="nn.conv2d_nn.bias_add_nn.relu_"' in text
    assert rg.alpha_equal(partition(pat, out, {"Composite": "conv_bias_relu"}), got)
    rng = np.random.default_rng(1)
    args = [rng.normal(size=s).astype("float32") for s in ((1, 3, 8, 8), (4, 3, 3, 3), (4,))]
    np.testing.assert_allclose(rg.evaluate(rg.Function([x, w, b], got), *args),
                               rg.evaluate(rg.Function([x, w, b], out), *args), rtol=1e-5)


def test_partition_numbers_groups_and_embeds_matched_constants():
    x = v("x")
    c1, c2 = rg.const(2.0), rg.const(3.0)
    e = op.nn.relu(op.add(op.nn.relu(op.add(x, c1)), c2))
    pat = is_op("nn.relu")(is_op("add")(wildcard(), is_constant()))
    got = pat.partition(e)
    # groups are found from the output down: the outer match is group 0
    text = same(got, """fn (%x: Tensor[(1, 4), float32]) {
  %0 = fn (%FunctionVar_1_0, PartitionedFromPattern="add_nn.relu_") {
    nn.relu(add(%FunctionVar_1_0, 2f))
  };
  %1 = %0(%x);
  %2 = fn (%FunctionVar_0_0, PartitionedFromPattern="add_nn.relu_") {
    nn.relu(add(%FunctionVar_0_0, 3f))
  };
  %2(%1)
}""", [x])
    assert "%FunctionVar_1_0" in text and "%FunctionVar_0_0" in text
    # a constant matched by a wildcard is a parameter, not embedded
    as_param = is_op("nn.relu")(is_op("add")(wildcard(), wildcard())).partition(op.nn.relu(op.add(x, c1)))
    assert [p.name_hint for p in as_param.op.params] == ["FunctionVar_0_0", "FunctionVar_0_1"]
    assert as_param.args[1] is c1
    data = np.ones((1, 4), "float32")
    np.testing.assert_allclose(rg.evaluate(rg.Function([x], got), data),
                               rg.evaluate(rg.Function([x], e), data))


def test_partition_rejects_a_match_whose_interior_is_used_outside():
    x, w = v("x", (1, 3, 8, 8)), v("w", (4, 3, 3, 3))
    conv = op.nn.conv2d(x, w)
    e = op.add(op.nn.relu(conv), conv)  # the conv is also used by the add
    pat = is_op("nn.relu")(is_op("nn.conv2d")(wildcard(), wildcard()))
    assert pat.partition(e) is e
    alone = op.nn.relu(conv)
    assert isinstance(pat.partition(alone).op, rg.Function)


def test_partition_skips_partitioned_functions_and_honours_check():
    x, w, b, out = conv_bias_relu()
    pat = is_op("nn.relu")(is_op("nn.bias_add")(is_op("nn.conv2d")(wildcard(), wildcard()), wildcard()))
    once = pat.partition(out)
    assert pat.partition(once) is once
    assert pat.partition(out, check=lambda pre: False) is out
    assert pat.partition(out, check=lambda pre: pre is out) is not out


def test_partition_with_a_dominator_pattern_takes_the_whole_diamond():
    _, pattern = _elemwise_diamond()
    x, w = v("x", (1, 3, 8, 8)), v("w", (4, 3, 3, 3))
    conv = op.nn.conv2d(x, w)
    e = op.add(op.tanh(conv), op.nn.relu(conv))
    got = pattern.partition(e)
    text = rg.astext(got)
    assert 'PartitionedFromPattern="nn.conv2d_tanh_nn.relu_add_"' in text
    assert [a.name_hint for a in got.args] == ["x", "w"]


# -- bad input and deep programs ---------------------------------------------------------------
def test_malformed_patterns_name_the_pattern_and_the_part():
    with pytest.raises(RelayError, match="nn.no_such_op"):
        is_op("nn.no_such_op")
    with pytest.raises(DFPatternError, match=r"nn.relu\(\*, \*\).*takes 1 argument"):
        is_op("nn.relu")(wildcard(), wildcard())
    with pytest.raises(DFPatternError, match="argument 1 of a call of add"):
        is_op("add")(wildcard(), 3)
    with pytest.raises(DFPatternError, match="index"):
        is_tuple_get_item(wildcard(), "0")


def test_a_callback_returning_a_non_expression_is_named_and_changes_nothing():
    class Bad(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("nn.relu")(wildcard())

        def callback(self, pre, post, node_map):
            return "not an expression"

    x = v("x")
    e = op.add(op.nn.relu(x), x)
    with pytest.raises(DFPatternError, match=r"Bad.callback for pattern nn.relu\(\*\) returned str"):
        rewrite(Bad(), e)
    assert rg.astext(e).endswith("add(%0, %x)")


def test_deep_chains_match_rewrite_and_partition_without_recursion():
    x = v("x")
    e = x
    for _ in range(100_000):
        e = op.nn.relu(e)
    deep = is_op("nn.relu")(is_op("nn.relu")(is_var("x")))
    got = deep.partition(e)
    bottom = [n for n in rg.post_order(got) if isinstance(n, rg.Function)]
    assert len(bottom) == 1 and bottom[0].attrs["PartitionedFromPattern"] == "nn.relu_nn.relu_"
    dom = dominates(is_var("x"), wildcard(), is_op("nn.relu")(wildcard()))
    assert dom.match(e)
