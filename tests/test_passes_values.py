"""Every pass preserves the value of random programs (evaluated before and after)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import relaygraph as rg
from relaygraph import transform as T

SHAPE = (2, 3)
TT = rg.TensorType(SHAPE, "float32")


def op(name, *args, **attrs):
    return rg.Call(rg.Op(name), tuple(args), attrs or None)


@st.composite
def programs(draw):
    """A typed random program over (2, 3) float32 tensors with DAG sharing, lets, ifs, tuples,
    closures, constant-only subexpressions, reshape/transpose chains and batch_norm."""
    params = [rg.var(f"p{i}", TT) for i in range(draw(st.integers(1, 3)))]
    pool = list(params)
    for _ in range(draw(st.integers(1, 14))):
        pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]  # noqa: E731
        kind = draw(st.integers(0, 9))
        if kind == 0:
            e = op(draw(st.sampled_from(["tanh", "sigmoid", "negative", "nn.relu"])), pick())
        elif kind == 1:
            e = op(draw(st.sampled_from(["add", "multiply", "subtract", "maximum"])), pick(), pick())
        elif kind == 2:
            e = rg.Tuple([pick(), pick()])[draw(st.integers(0, 1))]
        elif kind == 3:
            v = rg.var("t", TT)
            e = rg.Let(v, pick(), op("add", v, pick()))
        elif kind == 4:
            cond = op("less", op("sum", pick()), op("sum", pick()))
            e = rg.If(cond, pick(), op("tanh", pick()))
        elif kind == 5:
            y = rg.var("y", TT)
            e = rg.Call(rg.Function([y], op("multiply", y, pick())), (pick(),))
        elif kind == 6:
            c = rg.const(np.full(SHAPE, draw(st.floats(-1, 1, width=32)), "float32"))
            e = op("add", pick(), op("multiply", c, rg.const(np.float32(2.0))))
        elif kind == 7:
            r = op("reshape", op("reshape", pick(), newshape=(6,)), newshape=(3, 2))
            e = op("multiply", op("transpose", op("transpose", r, axes=(1, 0)), axes=(1, 0)),
                   rg.const(np.ones((3, 2), "float32")))
            e = op("reshape", e, newshape=SHAPE)
        elif kind == 8:
            g = rg.const(np.linspace(0.5, 1.5, 2, dtype="float32"))
            bn = op("nn.batch_norm", pick(), g, g, g, g, axis=0)
            e = bn[0]
        else:
            e = op("add", pick(), rg.const(np.float32(0.0)))
        pool.append(e)
    return rg.IRModule.from_expr(rg.Function(params, pool[-1]))


PIPELINES = {
    "ToANormalForm": [T.ToANormalForm()],
    "ToGraphNormalForm": [T.ToANormalForm(), T.ToGraphNormalForm()],
    "ToBasicBlockNormalForm": [T.ToBasicBlockNormalForm()],
    "DeadCodeElimination": [T.DeadCodeElimination(inline_once=True)],
    "EliminateCommonSubexpr": [T.ToANormalForm(), T.EliminateCommonSubexpr()],
    "FoldConstant": [T.FoldConstant()],
    "SimplifyExpr": [T.InferType(), T.SimplifyExpr()],
    "SimplifyInference": [T.InferType(), T.SimplifyInference()],
    "FuseOps": [T.InferType(), T.FuseOps()],
    "FuseOps-0": [T.InferType(), T.FuseOps(fuse_opt_level=0)],
    "DefuseOps": [T.InferType(), T.FuseOps(), T.DefuseOps()],
    "LambdaLift": [T.LambdaLift()],
    "Inline": [T.Inline()],
    "InferType": [T.InferType()],
}


def _same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b, strict=True))
    return np.allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(PIPELINES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mod=programs(), seed=st.integers(0, 2**16))
def test_pass_preserves_values(name, mod, seed):
    note(rg.astext(mod))
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(SHAPE).astype("float32") for _ in mod["main"].params]
    before = rg.evaluate(mod, *args)
    with T.PassContext(opt_level=3):
        after_mod = T.Sequential(PIPELINES[name])(mod)
    after = rg.evaluate(after_mod, *args)
    assert _same(before, after), rg.astext(after_mod)
