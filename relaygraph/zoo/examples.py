"""Small hand-built programs: the demo's example and stress shapes for tests and benchmarks."""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Function, Op, Var
from ..ir.module import IRModule
from ..ir.types import TensorType

__all__ = ["residual_mlp", "diamond_chain"]


def residual_mlp(layers: int = 3, hidden: int = 64, batch_size: int = 1, dtype: str = "float32",
                 seed: int = 0, small: bool = False):
    """A stack of residual blocks ``x + relu(dense(x, w) + b)``: every block's input is shared.

    ``small=True`` is the test configuration: 2 blocks of 16 units.
    """
    if small:
        layers, hidden = min(layers, 2), min(hidden, 16)
    rng = np.random.default_rng(seed)
    x = Var("data", TensorType((batch_size, hidden), dtype))
    params: dict[str, np.ndarray] = {}
    free = [x]
    h = x
    for i in range(layers):
        w = Var(f"dense{i}_weight", TensorType((hidden, hidden), dtype))
        b = Var(f"dense{i}_bias", TensorType((hidden,), dtype))
        free += [w, b]
        params[w.name_hint] = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
        params[b.name_hint] = (rng.standard_normal(hidden) * 0.1).astype(dtype)
        dense = Call(Op("nn.dense"), (h, w), {"units": hidden})
        act = Call(Op("nn.relu"), (Call(Op("nn.bias_add"), (dense, b)),))
        h = h + act
    out = Call(Op("nn.softmax"), (h,))
    return IRModule.from_expr(Function(free, out)), params


def diamond_chain(depth: int = 1000, size: int = 4, batch_size: int | None = None,
                  dtype: str = "float32", seed: int = 0, small: bool = False):
    """``depth`` diamonds ``y = tanh(x) + exp(-x)`` in a chain: deep and shared, no weights.

    The input is ``(size,)``, or ``(batch_size, size)`` when a batch size is given. There are no
    weights, so ``seed`` changes nothing (it is taken as every model takes it). ``small=True``:
    depth 10.
    """
    del seed  # no parameters to draw
    if small:
        depth = min(depth, 10)
    shape = (size,) if batch_size is None else (batch_size, size)
    x = Var("x", TensorType(shape, dtype))
    h = x
    for _ in range(depth):
        h = Call(Op("tanh"), (h,)) + Call(Op("exp"), (Call(Op("negative"), (h,)),))
    return IRModule.from_expr(Function([x], h)), {}
