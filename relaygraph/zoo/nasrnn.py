"""The NasRNN cell unrolled over time steps (the recurrent cell of TASO's and TENSAT's
benchmarks, from "Neural Architecture Search with Reinforcement Learning").

Each step mixes the step's input and the previous state through eight dense pairs
(``x W1 + h W2``) and combines them with relu, sigmoid and tanh into the next state.
"""

from __future__ import annotations

from .layers import Net

__all__ = ["nasrnn"]


def _combine(net: Net, x, h, name: str, hidden: int):
    wx = net.param(f"{name}_x_weight", (hidden, net.shape(x)[1]))
    wh = net.param(f"{name}_h_weight", (hidden, net.shape(h)[1]))
    return net.binary("add", net.dense(x, wx, hidden), net.dense(h, wh, hidden))


def _cell(net: Net, state, x, step: int, hidden: int):
    t = [_combine(net, x, state, f"step{step}_combine{j}", hidden) for j in range(8)]
    u, b = net.unary, net.binary
    m0 = b("add", u("nn.relu", t[0]), u("sigmoid", t[3]))
    m1 = b("add", u("sigmoid", t[1]), u("tanh", t[2]))
    m2 = b("multiply", u("sigmoid", t[4]), u("tanh", t[5]))
    m3 = b("multiply", u("sigmoid", t[6]), u("nn.relu", t[7]))
    m4 = b("add", u("sigmoid", m1), u("tanh", m2))
    m5 = b("multiply", u("tanh", m0), u("tanh", m3))
    m6 = b("multiply", u("tanh", m4), u("tanh", m5))
    return u("tanh", m6)


def nasrnn(steps: int = 5, hidden: int = 512, batch_size: int = 1, dtype: str = "float32",
           seed: int = 0, small: bool = False):
    """NasRNN over ``steps`` inputs ``data_{t}`` of shape (batch, hidden): ``(IRModule, params)``.

    The initial state is the parameter ``init_state``. ``small=True``: 2 steps, hidden 16.
    """
    if small:
        steps, hidden = 2, 16
    net = Net(seed, dtype)
    xs = [net.input(f"data_{t}", (batch_size, hidden)) for t in range(steps)]
    state = net.param("init_state", (batch_size, hidden), "normal")
    for t, x in enumerate(xs):
        state = _cell(net, state, x, t, hidden)
    return net.module(state)
