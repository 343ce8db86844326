"""Small hand-built programs: the demo's example and stress shapes for tests and benchmarks."""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Function, Op, Var
from ..ir.module import IRModule
from ..ir.types import TensorType

__all__ = ["residual_mlp", "diamond_chain"]


def residual_mlp(layers: int = 3, hidden: int = 64, batch: int = 1, seed: int = 0):
    """A stack of residual blocks ``x + relu(dense(x, w) + b)``: every block's input is shared."""
    rng = np.random.default_rng(seed)
    x = Var("data", TensorType((batch, hidden), "float32"))
    params: dict[str, np.ndarray] = {}
    free = [x]
    h = x
    for i in range(layers):
        w = Var(f"dense{i}_weight", TensorType((hidden, hidden), "float32"))
        b = Var(f"dense{i}_bias", TensorType((hidden,), "float32"))
        free += [w, b]
        params[w.name_hint] = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype("float32")
        params[b.name_hint] = rng.standard_normal(hidden).astype("float32") * 0.1
        dense = Call(Op("nn.dense"), (h, w), {"units": hidden})
        act = Call(Op("nn.relu"), (Call(Op("nn.bias_add"), (dense, b)),))
        h = h + act
    out = Call(Op("nn.softmax"), (h,))
    return IRModule.from_expr(Function(free, out)), params


def diamond_chain(depth: int = 1000, size: int = 4):
    """``depth`` diamonds ``y = tanh(x) + exp(x)`` in a chain: deep and shared, no weights."""
    x = Var("x", TensorType((size,), "float32"))
    h = x
    for _ in range(depth):
        h = Call(Op("tanh"), (h,)) + Call(Op("exp"), (Call(Op("negative"), (h,)),))
    return IRModule.from_expr(Function([x], h)), {}
