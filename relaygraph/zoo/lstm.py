"""An unrolled LSTM, as TVM's ``relay.testing.lstm`` builds it.

Each step calls its own cell function (a function literal whose body is a chain of typed
``let`` bindings) on that step's input and the previous step's states. Weights are
``(4 * hidden, hidden)`` as ``nn.dense`` expects. Step inputs are named ``inputs_{i}`` (as in
TVM's first version of this workload; later versions name every step's input ``data``, which
would make them impossible to pass by name).
"""

from __future__ import annotations

from ..errors import OptionValueError
from ..ir.expr import Call, Function, Let, Tuple, TupleGetItem, Var
from ..ir.types import TensorType, TupleType
from .layers import Net

__all__ = ["lstm", "lstm_cell"]


def _lets(bindings, result):
    body = result
    for var, value in reversed(bindings):
        body = Let(var, value, body)
    return body


def lstm_cell(net: Net, num_hidden: int, batch_size: int, name: str) -> Function:
    """One cell: ``fn(inputs, states, i2h_weight, i2h_bias, h2h_weight, h2h_bias) -> (h, (h, c))``."""
    dtype = net.dtype
    input_type = TensorType((batch_size, num_hidden), dtype)
    dense_type = TensorType((batch_size, 4 * num_hidden), dtype)
    state_type = TupleType([input_type, input_type])
    ret_type = TupleType([input_type, state_type])
    inputs, states = Var("inputs", input_type), Var("states", state_type)
    i2h_w = Var("i2h_weight", TensorType((4 * num_hidden, num_hidden), dtype))
    i2h_b = Var("i2h_bias", TensorType((4 * num_hidden,), dtype))
    h2h_w = Var("h2h_weight", TensorType((4 * num_hidden, num_hidden), dtype))
    h2h_b = Var("h2h_bias", TensorType((4 * num_hidden,), dtype))
    for v in (inputs, i2h_w, i2h_b, h2h_w, h2h_b):
        net.shapes[v] = v.type_annotation.shape
    hidden = TupleGetItem(states, 0)
    net.shapes[hidden] = (batch_size, num_hidden)

    def var(label, ty):
        v = Var(label, ty)
        if isinstance(ty, TensorType):
            net.shapes[v] = ty.shape
        return v

    i2h, h2h, gates = var("i2h", dense_type), var("h2h", dense_type), var("gates", dense_type)
    slices = var("slice_gates", TupleType([input_type] * 4))
    in_gate, forget_gate = var("in_gate", input_type), var("forget_gate", input_type)
    in_transform, out_gate = var("in_transform", input_type), var("out_gate", input_type)
    next_c, next_h, ret = var("next_c", input_type), var("next_h", input_type), var("ret", ret_type)
    split = net.call("split", (gates,), None, indices_or_sections=4, axis=1)
    gate = [TupleGetItem(slices, i) for i in range(4)]
    for g in gate:
        net.shapes[g] = (batch_size, num_hidden)
    cell = TupleGetItem(states, 1)
    net.shapes[cell] = (batch_size, num_hidden)
    body = _lets([
        (i2h, net.dense_add_bias(inputs, f"{name}i2h", 4 * num_hidden, i2h_w, i2h_b)),
        (h2h, net.dense_add_bias(hidden, f"{name}h2h", 4 * num_hidden, h2h_w, h2h_b)),
        (gates, net.binary("add", i2h, h2h)),
        (slices, split),
        (in_gate, net.unary("sigmoid", gate[0])),
        (forget_gate, net.unary("sigmoid", gate[1])),
        (in_transform, net.unary("tanh", gate[2])),
        (out_gate, net.unary("sigmoid", gate[3])),
        (next_c, net.binary("add", net.binary("multiply", forget_gate, cell),
                            net.binary("multiply", in_gate, in_transform))),
        (next_h, net.binary("multiply", out_gate, net.unary("tanh", next_c))),
        (ret, Tuple([next_h, Tuple([next_h, next_c])])),
    ], ret)
    return Function([inputs, states, i2h_w, i2h_b, h2h_w, h2h_b], body, ret_type)


def lstm(iterations: int = 8, num_hidden: int = 512, batch_size: int = 1, dtype: str = "float32",
         seed: int = 0, small: bool = False):
    """An LSTM unrolled over ``iterations`` steps: ``(IRModule, params)``; returns the last h.

    ``small=True`` is the test configuration: 3 steps, 16 hidden units.
    """
    if small:
        iterations, num_hidden = 3, 16
    if iterations < 1:
        raise OptionValueError(f"lstm: iterations must be >= 1, got {iterations}")
    net = Net(seed, dtype)
    input_type = TensorType((batch_size, num_hidden), dtype)
    state_type = TupleType([input_type, input_type])
    cell_type = TupleType([input_type, state_type])
    zeros = Var("zeros", input_type)
    init_states = Var("init_states", state_type)
    bindings = [(zeros, net.call("zeros", (), None, shape=(batch_size, num_hidden), dtype=dtype)),
                (init_states, Tuple([zeros, zeros]))]
    states, out = init_states, None
    for i in range(iterations):
        inputs = net.input(f"inputs_{i}", (batch_size, num_hidden))
        weights = [net.param(f"i2h_{i}_weight", (4 * num_hidden, num_hidden)),
                   net.param(f"i2h_{i}_bias", (4 * num_hidden,), "bias"),
                   net.param(f"h2h_{i}_weight", (4 * num_hidden, num_hidden)),
                   net.param(f"h2h_{i}_bias", (4 * num_hidden,), "bias")]
        cell = lstm_cell(net, num_hidden, batch_size, f"lstm_{i}")
        call = Var(f"call_{i}", cell_type)
        out, new_states = Var(f"out_{i}", input_type), Var(f"states_{i}", state_type)
        bindings += [(call, Call(cell, (inputs, states, *weights))),
                     (out, TupleGetItem(call, 0)),
                     (new_states, TupleGetItem(call, 1))]
        states = new_states
    return net.module(_lets(bindings, out), input_type)
