"""FoldScaleAxis, CombineParallel*, CanonicalizeOps and TVM's build pipeline: structure and values.

The cases follow TVM v0.13's own tests of these passes (test_pass_fold_scale_axis.py,
test_pass_combine_parallel_*.py); every rewrite is also checked by evaluating before and after.
"""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.egraph.optimize import bind_params
from relaygraph.eval.inputs import random_inputs
from relaygraph.ir.traversal import post_order
from relaygraph.passes import (
    BackwardFoldScaleAxis,
    CanonicalizeOps,
    CombineParallelBatchMatmul,
    CombineParallelConv2D,
    CombineParallelDense,
    FoldScaleAxis,
    ForwardFoldScaleAxis,
    PassContext,
    PassError,
    Sequential,
    get_pass,
    named_pipeline,
    parse_pipeline,
)

RNG = np.random.default_rng(0)


def op(name, *args, **attrs):
    return rg.Call(rg.Op(name), tuple(args), attrs or None)


def const(shape, low=-1.0, high=1.0):
    return rg.const(RNG.uniform(low, high, size=shape).astype("float32"))


def module(params, body):
    return rg.IRModule.from_expr(rg.Function(list(params), body))


def ops_of(mod):
    return [n.op.name for n in post_order(mod["main"]) if isinstance(n, rg.Call) and isinstance(n.op, rg.Op)]


def run(pass_, mod, opt_level=4):
    with PassContext(opt_level=opt_level):
        return pass_(mod)


def same_values(before, after, seed=0, rtol=1e-4, atol=1e-4):
    args = random_inputs(before, seed=seed)
    want = rg.evaluate(before, *args)
    got = rg.evaluate(after, *args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# -- FoldScaleAxis: forward ------------------------------------------------------------------------
def _conv(x, w, channels, **kw):
    return op("nn.conv2d", x, w, channels=channels, kernel_size=(3, 3), padding=(1, 1, 1, 1), **kw)


def test_forward_fold_moves_an_input_scale_into_the_conv_weights():
    x = rg.var("x", shape=(2, 4, 10, 10), dtype="float32")
    scale = const((4, 1, 1), 0.5, 2.0)
    bias = const((4, 1, 1))
    y = op("nn.relu", op("add", op("multiply", x, scale), bias))
    body = _conv(y, const((8, 4, 3, 3)), 8)
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)  # folded into the (constant) weight and the bias
    same_values(mod, out)


def test_forward_fold_refuses_a_negative_scale_through_relu():
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    scale = rg.const(np.array([-1.0, 2.0, 0.5, 1.0], "float32").reshape(4, 1, 1))
    body = _conv(op("nn.relu", op("multiply", x, scale)), const((4, 4, 3, 3)), 4)
    mod = rg.infer_type(module([x], body))
    out = run(ForwardFoldScaleAxis(), mod, opt_level=3)
    assert "multiply" in ops_of(out)
    same_values(mod, out)


def test_forward_fold_needs_every_user_to_absorb_the_scale():
    # TVM's test_fold_fwd_fail: the scaled value also feeds an exp, so nothing moves
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    y = op("multiply", x, const((4, 1, 1), 0.5, 2.0))
    body = rg.Tuple((_conv(y, const((4, 4, 3, 3)), 4), op("exp", y)))
    mod = rg.infer_type(module([x], body))
    out = run(ForwardFoldScaleAxis(), mod, opt_level=3)
    assert rg.alpha_equal(out["main"], mod["main"])


def test_forward_fold_through_two_convolutions_of_one_scaled_input():
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    y = op("multiply", x, const((4, 1, 1), 0.5, 2.0))
    body = op("add", _conv(y, const((4, 4, 3, 3)), 4), _conv(y, const((4, 4, 3, 3)), 4))
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)


def test_forward_fold_into_dense_and_depthwise_conv():
    x = rg.var("x", shape=(3, 5), dtype="float32")
    body = op("nn.dense", op("multiply", x, const((5,), 0.5, 2.0)), const((7, 5)), units=7)
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    dw = op("nn.conv2d", op("multiply", x, const((4, 1, 1), 0.5, 2.0)), const((4, 1, 3, 3)), channels=4,
            kernel_size=(3, 3), padding=(1, 1, 1, 1), groups=4)
    mod = rg.infer_type(module([x], dw))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)


def test_forward_fold_nhwc():
    x = rg.var("x", shape=(1, 6, 6, 4), dtype="float32")
    body = op("nn.conv2d", op("multiply", x, const((4,), 0.5, 2.0)), const((3, 3, 4, 5)), channels=5,
              kernel_size=(3, 3), padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO")
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)


# -- FoldScaleAxis: backward -----------------------------------------------------------------------
def test_backward_fold_moves_an_output_scale_through_bias_and_relu():
    x = rg.var("x", shape=(2, 4, 8, 8), dtype="float32")
    y = op("nn.relu", op("nn.bias_add", _conv(x, const((6, 4, 3, 3)), 6), const((6,))))
    body = op("multiply", y, const((6, 1, 1), 0.5, 2.0))
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)


def test_backward_fold_of_a_residual_sum_scales_both_convolutions():
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    s = op("add", _conv(x, const((4, 4, 3, 3)), 4), _conv(x, const((4, 4, 3, 3)), 4))
    mod = rg.infer_type(module([x], op("multiply", s, const((4, 1, 1), 0.5, 2.0))))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)


def test_backward_fold_stops_at_a_shared_convolution():
    # TVM's test_fold_bwd_fail: the conv has two users, so its weight must not change
    x = rg.var("x", shape=(1, 4, 6, 6), dtype="float32")
    c = _conv(x, const((4, 4, 3, 3)), 4)
    body = rg.Tuple((op("multiply", c, const((4, 1, 1), 0.5, 2.0)), op("exp", c)))
    mod = rg.infer_type(module([x], body))
    out = run(BackwardFoldScaleAxis(), mod, opt_level=3)
    assert rg.alpha_equal(out["main"], mod["main"])


def test_backward_fold_into_dense_and_refuses_rank_3_dense():
    x = rg.var("x", shape=(3, 5), dtype="float32")
    body = op("multiply", op("nn.dense", x, const((7, 5)), units=7), const((7,), 0.5, 2.0))
    mod = rg.infer_type(module([x], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    assert "multiply" not in ops_of(out)
    same_values(mod, out)
    x3 = rg.var("x", shape=(2, 7, 5), dtype="float32")
    body = op("multiply", op("nn.dense", x3, const((7, 5)), units=7), const((7, 1), 0.5, 2.0))
    mod = rg.infer_type(module([x3], body))
    out = run(FoldScaleAxis(), mod, opt_level=3)
    same_values(mod, out)


def test_fold_scale_axis_is_opt_level_3():
    x = rg.var("x", shape=(3, 5), dtype="float32")
    body = op("multiply", op("nn.dense", x, const((7, 5)), units=7), const((7,), 0.5, 2.0))
    mod = rg.infer_type(module([x], body))
    assert rg.alpha_equal(run(Sequential([FoldScaleAxis()]), mod, opt_level=2)["main"], mod["main"])


def test_simplify_inference_then_fold_scale_axis_folds_batch_norm_into_the_conv():
    x = rg.var("x", shape=(1, 3, 8, 8), dtype="float32")
    bn = op("nn.batch_norm", _conv(x, const((4, 3, 3, 3)), 4), const((4,), 0.5, 2.0), const((4,)),
            const((4,)), const((4,), 0.5, 2.0))
    mod = rg.infer_type(module([x], rg.TupleGetItem(bn, 0)))
    out = run(parse_pipeline("SimplifyInference,FoldConstant,FoldScaleAxis"), mod, opt_level=3)
    assert sorted(set(ops_of(out))) == ["add", "nn.conv2d"]
    same_values(mod, out)


# -- CombineParallel* ------------------------------------------------------------------------------
def test_combine_parallel_conv2d_with_following_ops():
    x = rg.var("x", shape=(1, 4, 8, 8), dtype="float32")
    branches = []
    for co in (4, 6, 5):
        c = _conv(x, const((co, 4, 3, 3)), co)
        branches.append(op("nn.relu", op("add", c, const((co, 1, 1)))))
    mod = rg.infer_type(module([x], rg.Tuple(tuple(branches))))
    out = run(CombineParallelConv2D(), mod)
    names = ops_of(out)
    assert names.count("nn.conv2d") == 1 and names.count("nn.relu") == 1 and names.count("strided_slice") == 3
    same_values(mod, out)


def test_combine_parallel_conv2d_needs_min_branches_and_opt_level_4():
    x = rg.var("x", shape=(1, 4, 8, 8), dtype="float32")
    body = rg.Tuple(tuple(_conv(x, const((co, 4, 3, 3)), co) for co in (4, 6)))
    mod = rg.infer_type(module([x], body))
    assert ops_of(run(CombineParallelConv2D(), mod)).count("nn.conv2d") == 2
    assert ops_of(run(CombineParallelConv2D(min_num_branches=2), mod)).count("nn.conv2d") == 1
    three = rg.infer_type(module([x], rg.Tuple(tuple(_conv(x, const((4, 4, 3, 3)), 4) for _ in range(3)))))
    assert ops_of(run(Sequential([CombineParallelConv2D()]), three, opt_level=3)).count("nn.conv2d") == 3


def test_combine_parallel_conv2d_leaves_different_kernel_sizes_apart():
    x = rg.var("x", shape=(1, 4, 8, 8), dtype="float32")
    a = [_conv(x, const((4, 4, 3, 3)), 4) for _ in range(3)]
    b = [op("nn.conv2d", x, const((4, 4, 1, 1)), channels=4, kernel_size=(1, 1)) for _ in range(2)]
    mod = rg.infer_type(module([x], rg.Tuple(tuple(a + b))))
    out = run(CombineParallelConv2D(), mod)
    assert ops_of(out).count("nn.conv2d") == 3  # the 3x3 group is combined, the two 1x1 are not
    same_values(mod, out)


def test_combine_parallel_dense_to_batch_matmul_and_to_dense():
    x = rg.var("x", shape=(4, 8), dtype="float32")
    body = rg.Tuple(tuple(op("add", op("nn.dense", x, const((6, 8)), units=6), const((6,)))
                          for _ in range(3)))
    mod = rg.infer_type(module([x], body))
    out = run(CombineParallelDense(), mod)
    names = ops_of(out)
    assert "nn.batch_matmul" in names and "nn.dense" not in names
    same_values(mod, out)
    body = rg.Tuple(tuple(op("nn.relu", op("nn.dense", x, const((u, 8)), units=u)) for u in (3, 5, 7)))
    mod = rg.infer_type(module([x], body))
    out = run(CombineParallelDense(to_batch=False), mod)
    assert ops_of(out).count("nn.dense") == 1
    same_values(mod, out)


def test_combine_parallel_dense_to_dense_repeats_a_scalar_argument():
    x = rg.var("x", shape=(4, 8), dtype="float32")
    body = rg.Tuple(tuple(op("multiply", op("nn.dense", x, const((u, 8)), units=u), rg.const(2.0 + u))
                          for u in (3, 5, 7)))
    mod = rg.infer_type(module([x], body))
    out = run(CombineParallelDense(to_batch=False), mod)
    assert "repeat" in ops_of(out) and ops_of(out).count("nn.dense") == 1
    same_values(mod, out)


def test_combine_parallel_batch_matmul():
    x = rg.var("x", shape=(2, 5, 8), dtype="float32")
    body = rg.Tuple(tuple(op("nn.batch_matmul", x, const((2, u, 8)), transpose_b=True) for u in (3, 4, 6)))
    mod = rg.infer_type(module([x], body))
    out = run(CombineParallelBatchMatmul(), mod)
    assert ops_of(out).count("nn.batch_matmul") == 1
    same_values(mod, out)


# -- CanonicalizeOps and the pipeline --------------------------------------------------------------
def test_canonicalize_ops_writes_bias_add_as_add():
    x = rg.var("x", shape=(1, 4, 3, 3), dtype="float32")
    mod = rg.infer_type(module([x], op("nn.bias_add", x, const((4,)))))
    out = run(CanonicalizeOps(), mod, opt_level=3)
    assert "nn.bias_add" not in ops_of(out) and "add" in ops_of(out)
    same_values(mod, out)


@pytest.mark.parametrize("name", ["tvm-o3", "tvm-o4"])
def test_tvm_pipeline_on_a_zoo_model_keeps_values(name):
    mod, params = rg.zoo.get("resnet-18", small=True)
    mod = bind_params(mod, params)
    out = named_pipeline(name)(rg.infer_type(mod))
    names = ops_of(out)
    assert "nn.batch_norm" not in names
    same_values(mod, out, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("model", ["bert", "inception-v3"])
def test_tvm_o4_pipeline_combines_parallel_branches_and_keeps_values(model):
    mod, params = rg.zoo.get(model, small=True)
    mod = bind_params(mod, params)
    out = named_pipeline("tvm-o4")(rg.infer_type(mod))
    combined = {"bert": "nn.batch_matmul", "inception-v3": "strided_slice"}[model]
    assert ops_of(out).count(combined) > ops_of(mod).count(combined)
    same_values(mod, out, rtol=1e-3, atol=1e-3)


def test_named_pipeline_errors():
    with pytest.raises(PassError, match="unknown pipeline 'tvm-o9'; known: tvm-o3, tvm-o4"):
        named_pipeline("tvm-o9")
    with pytest.raises(PassError, match="min_num_branches"):
        get_pass("CombineParallelConv2D", min_num_branches=0)


def test_compare_pipeline_reports_three_programs_with_their_changes():
    from relaygraph.egraph.compare import compare_pipeline

    mod, params = rg.zoo.get("resnet-18", small=True)
    res = rg.optimize(bind_params(mod, params), time_limit=30, node_limit=2000, iter_limit=2, progress=False)
    cmp = compare_pipeline(res, runs=1, budget=0.0)
    assert [r["label"] for r in cmp.rows] == ["original", "tvm-o3 pipeline", "e-graph"]
    piped = cmp.row("tvm-o3 pipeline")
    assert piped["changed"]["nn.batch_norm"] == -ops_of(rg.infer_type(mod)).count("nn.batch_norm")
    assert all(r["measured"] > 0 and r["predicted"] > 0 for r in cmp.rows)
    text = cmp.table()
    assert "ops changed by tvm-o3 pipeline: " in text and "nn.batch_norm -" in text
    # the pipeline fuses convolutions but keeps their layouts; the row says so
    assert piped["layouts"] == cmp.row("original")["layouts"] and not piped["layouts_changed"]
    assert "layouts changed by tvm-o3 pipeline: none" in text
