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


TY = "Tensor[(2, 3), float32]"
PRELUDE = f"""#[version = "0.0.5"]
type Opt {{
  Some({TY}),
  No,
}}

def @rep(%n: int32, %r: ref({TY}), %x: {TY}) -> () {{
  if (greater(%n, 0)) {{
    let %w = ref_write(%r, tanh(add(ref_read(%r), %x)));
    @rep(subtract(%n, 1), %r, %x)
  }} else {{
    ()
  }}
}}

"""


@st.composite
def effect_programs(draw):
    """A typed random module (as text, so equal subterms are interned as a parse makes them)
    with ref cells created, read and written, closures over them, recursion through a global
    and through a let-bound function, an ADT built under an if and taken apart by match, and
    calls of effectful closures used twice in one expression."""
    tensors, refs, fns = ["%p0", "%p1"], ["%r0"], []
    lines = ["let %r0 = ref(%p0);"]

    def pick(pool):
        return pool[draw(st.integers(0, len(pool) - 1))]

    for k in range(1, draw(st.integers(2, 9)) + 1):
        kind = draw(st.integers(0, 10))
        a, b, r = pick(tensors), pick(tensors), pick(refs)
        v = f"%v{k}"
        if kind == 0:
            lines.append(f"let {v} = {draw(st.sampled_from(['tanh', 'sigmoid', 'negative']))}({a});")
        elif kind == 1:
            lines.append(f"let %r{k} = ref({a});")
            refs.append(f"%r{k}")
            continue
        elif kind == 2:
            lines.append(f"let {v} = ref_read({r});")
        elif kind == 3:
            lines.append(f"let %u{k} = ref_write({r}, add(ref_read({r}), {a}));")
            continue
        elif kind == 4:  # a closure with effects, called twice on one line (one interned call)
            lines.append(f"let %f{k} = fn (%y: {TY}) {{ let %w = ref_write({r}, "
                         f"add(ref_read({r}), %y)); ref_read({r}) }};")
            fns.append(f"%f{k}")
            lines.append(f"let {v} = add(%f{k}({a}), %f{k}({a}));")
        elif kind == 5 and fns:  # the same call let-bound twice: two calls, never merged
            f = pick(fns)
            lines.append(f"let {v}a = {f}({a});")
            lines.append(f"let {v} = {f}({a});")
            tensors.append(f"{v}a")
        elif kind == 6:  # recursion through a global
            lines.append(f"let %u{k} = @rep({draw(st.integers(0, 3))}, {r}, {a});")
            continue
        elif kind == 7:  # recursion through a let-bound function
            lines.append(f"let %g{k} = fn (%n: int32) -> () {{ if (greater(%n, 0)) {{ "
                         f"let %w = ref_write({r}, sigmoid(ref_read({r}))); "
                         f"%g{k}(subtract(%n, 1)) }} else {{ () }} }};")
            lines.append(f"let %u{k} = %g{k}({draw(st.integers(0, 3))});")
            continue
        elif kind == 8:  # an ADT built under an if, taken apart by match, effects in arms
            lines.append(f"let %o{k} = if (less(sum({a}), sum({b}))) {{ Some({a}) }} else {{ No }};")
            lines.append(f"let {v} = match (%o{k}) {{ Some(%z) => {{ let %w = ref_write({r}, %z); "
                         f"add(%z, ref_read({r})) }}, No => ref_read({r}), }};")
        elif kind == 9:  # an if with a write in one branch
            lines.append(f"let {v} = if (less(sum({a}), 0f)) {{ let %w = ref_write({r}, {b}); "
                         f"{a} }} else {{ ref_read({r}) }};")
        else:  # pure duplicates and constants: what CSE, DCE and FoldConstant act on
            lines.append(f"let {v}a = add({a}, multiply({b}, 2f));")
            lines.append(f"let {v} = add({a}, multiply({b}, add(1f, 1f)));")
            tensors.append(f"{v}a")
        tensors.append(v)
    result = ", ".join([tensors[-1]] + [f"ref_read({r})" for r in refs])
    body = "\n  ".join(lines)
    return rg.parse(f"{PRELUDE}def @main(%p0: {TY}, %p1: {TY}) {{\n  {body}\n  ({result})\n}}\n")


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
@given(mod=effect_programs(), seed=st.integers(0, 2**16))
def test_pass_preserves_values_of_programs_with_effects(name, mod, seed):
    note(rg.astext(mod))
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(SHAPE).astype("float32") for _ in mod["main"].params]
    before = rg.evaluate(mod, *args)
    with T.PassContext(opt_level=3):
        try:
            after_mod = T.Sequential(PIPELINES[name])(mod)
        except rg.RelayError as exc:
            # FuseOps refuses a call with effects shared in graph form; after ANF it must run.
            assert name.startswith(("FuseOps", "DefuseOps")), exc
            assert "used more than once in graph form" in str(exc)
            after_mod = T.Sequential([T.ToANormalForm(), *PIPELINES[name]])(mod)
    after = rg.evaluate(after_mod, *args)
    assert _same(before, after), rg.astext(after_mod)


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
