"""The fused elementwise kernels (an add or multiply anchor, then unary steps): the same values as
their parts run apart, on every dtype and broadcast; and the sigmoid kernel off its scipy path
(float16; tests/test_pipeline_reach.py checks float32 and float64)."""

from __future__ import annotations

import numpy as np
import pytest

from relaygraph.eval.kernels import kernel_of
from relaygraph.ir.expr import var
from relaygraph.ir.types import TensorType
from relaygraph.ops.builders import make_call


def _run(name, arrays):
    params = [var(f"a{i}", TensorType(a.shape, str(a.dtype))) for i, a in enumerate(arrays)]
    call = make_call(name, *params)
    return kernel_of(call.op)(list(arrays), call.attrs)


def _inputs(shapes, dtype):
    rng = np.random.default_rng(3)
    return [np.asarray(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]


STEPS = {"relu": "nn.relu", "tanh": "tanh", "sigmoid": "sigmoid"}


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("shapes", [((1, 512), (1, 512)), ((3, 1), (4,)), ((), ()), ((2, 3, 8), (8,))])
def test_add_then_unary_fused_equals_apart(step, dtype, shapes):
    if dtype == "int32" and step != "relu":
        pytest.skip("tanh and sigmoid are float ops")
    a, b = _inputs(shapes, dtype)
    apart = _run(STEPS[step], [_run("add", [a, b])])
    fused = _run(f"fused.add_{step}", [a, b])
    assert fused.dtype == apart.dtype and fused.shape == apart.shape
    assert np.array_equal(fused, apart, equal_nan=True)
    # the inputs are never written
    a2, b2 = _inputs(shapes, dtype)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)


def test_fused_kernel_on_numpy_scalars_and_mixed_dtypes_takes_the_general_path():
    a = np.float32(1.5)
    b = np.asarray([-2.0, 3.0], np.float32)
    assert np.array_equal(_run("fused.add_relu", [np.asarray(a), b]), np.asarray([0.0, 4.5], np.float32))
    # a result that is an input's own buffer is never written in place
    x = np.asarray([-1.0, 2.0], np.float32)
    zero = np.zeros(2, np.float32)
    out = _run("fused.add_relu", [x, zero])
    assert np.array_equal(out, [0.0, 2.0]) and np.array_equal(x, [-1.0, 2.0])


def test_sigmoid_float16_keeps_its_dtype():
    x = np.linspace(-30, 30, 61).astype(np.float16)
    got = _run("sigmoid", [x])
    assert got.dtype == np.float16
    assert np.allclose(got.astype(np.float64), 1.0 / (1.0 + np.exp(-x.astype(np.float64))), atol=1e-3)
