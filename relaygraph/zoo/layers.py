"""The layer helpers the workloads are written with (after TVM's ``relay.testing.layers``).

A ``Net`` makes parameter variables with seeded random values and remembers the static shape of
every expression it builds, so weight shapes follow from the layers' inputs without running
type inference. Every parameter variable carries its tensor type, so a built module can be
type-checked, printed and evaluated on its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir.expr import Constant, Expr, Function, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import free_vars
from ..ir.types import TensorType
from ..ops import make_call

__all__ = ["Net", "conv_out", "pool_out"]


def conv_out(size: int, kernel: int, stride: int, pad_before: int, pad_after: int | None = None,
             dilation: int = 1) -> int:
    """Output length of a convolution or pooling window along one axis."""
    pad_after = pad_before if pad_after is None else pad_after
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


pool_out = conv_out


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _pad_attr(padding) -> tuple:
    return _pair(padding) if isinstance(padding, int) else tuple(padding)


def _pads(padding) -> tuple[int, int, int, int]:
    p = _pair(padding) if isinstance(padding, int) or len(padding) == 2 else tuple(padding)
    return (p[0], p[1], p[0], p[1]) if len(p) == 2 else p


class Net:
    """Builds one workload: inputs, parameters with seeded values, and shape-tracked layers."""

    def __init__(self, seed: int = 0, dtype: str = "float32") -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.params: dict[str, np.ndarray] = {}
        self.shapes: dict[Expr, tuple] = {}

    # -- variables ------------------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: str | None = None) -> Var:
        """An input variable (not a parameter: no value is made for it)."""
        v = Var(name, TensorType(tuple(shape), dtype or self.dtype))
        self.shapes[v] = tuple(shape)
        return v

    def param(self, name: str, shape: Sequence[int], init: str = "xavier") -> Var:
        """A parameter variable with a seeded random value (``init``: xavier, bias, gamma,
        beta, mean, var, normal)."""
        if name in self.params:
            raise ValueError(f"parameter {name!r} is made twice")
        shape = tuple(int(d) for d in shape)
        self.params[name] = self._value(shape, init).astype(self.dtype)
        v = Var(name, TensorType(shape, self.dtype))
        self.shapes[v] = shape
        return v

    def _value(self, shape: tuple, init: str) -> np.ndarray:
        rng = self.rng
        if init == "xavier":  # TVM's default initializer: uniform, averaged fans, magnitude 3
            receptive = math.prod(shape[2:]) if len(shape) > 2 else 1
            fan_in = shape[1] * receptive if len(shape) > 1 else shape[0]
            fan_out = shape[0] * receptive
            scale = math.sqrt(3.0 / max(1.0, (fan_in + fan_out) / 2.0))
            return rng.uniform(-scale, scale, shape)
        if init in ("bias", "beta", "mean"):
            return rng.normal(0.0, 0.05, shape)
        if init == "gamma":
            return rng.uniform(0.8, 1.2, shape)
        if init == "var":
            return rng.uniform(0.5, 1.5, shape)
        if init == "normal":
            return rng.normal(0.0, 1.0, shape)
        raise ValueError(f"unknown initializer {init!r}")

    # -- bookkeeping ------------------------------------------------------------------------
    def shape(self, expr: Expr) -> tuple:
        """The static shape of an expression built here."""
        return self.shapes[expr]

    def call(self, name: str, args, out_shape: tuple | None, **attrs) -> Expr:
        """``name(args, attrs)`` with its output shape recorded (attributes in canonical form)."""
        node = make_call(name, *args, **attrs)
        if out_shape is not None:
            self.shapes[node] = tuple(out_shape)
        return node

    def module(self, out: Expr, ret_type=None) -> tuple[IRModule, dict]:
        """``(IRModule, params)`` with ``@main`` over the free variables, as TVM's workloads."""
        return IRModule.from_expr(Function(free_vars(out), out, ret_type)), self.params

    # -- layers (TVM's relay.testing.layers and the nn ops they wrap) ------------------------
    def conv2d(self, data: Expr, name: str, channels: int, kernel_size=(3, 3), strides=(1, 1),
               padding=(0, 0), groups: int = 1, weight: Var | None = None, **layout) -> Expr:
        """``nn.conv2d`` with a weight ``{name}_weight`` of shape (O, I/groups, kh, kw)."""
        n, c, h, w = self.shape(data)
        kh, kw = _pair(kernel_size)
        if weight is None:
            weight = self.param(f"{name}_weight", (channels, c // groups, kh, kw))
        sh, sw = _pair(strides)
        top, left, bottom, right = _pads(padding)
        out = (n, channels, conv_out(h, kh, sh, top, bottom), conv_out(w, kw, sw, left, right))
        # Only non-default attributes are set, which is what TVM's printer shows.
        attrs: dict = {}
        if (sh, sw) != (1, 1):
            attrs["strides"] = (sh, sw)
        if any(_pads(padding)):
            attrs["padding"] = _pad_attr(padding)
        attrs.update(channels=channels, kernel_size=(kh, kw))
        if groups != 1:
            attrs["groups"] = groups
        attrs.update(layout)
        return self.call("nn.conv2d", (data, weight), out, **attrs)

    def conv2d_transpose(self, data: Expr, name: str, channels: int, kernel_size, strides,
                         padding, output_padding=(0, 0)) -> Expr:
        """``nn.conv2d_transpose`` with a weight of shape (I, O, kh, kw)."""
        n, c, h, w = self.shape(data)
        kh, kw = _pair(kernel_size)
        sh, sw = _pair(strides)
        ph, pw = _pair(padding)
        oh, ow = _pair(output_padding)
        weight = self.param(f"{name}_weight", (c, channels, kh, kw))
        out = (n, channels, (h - 1) * sh - 2 * ph + kh + oh, (w - 1) * sw - 2 * pw + kw + ow)
        return self.call("nn.conv2d_transpose", (data, weight), out, channels=channels,
                         kernel_size=(kh, kw), strides=(sh, sw), padding=(ph, pw),
                         output_padding=(oh, ow))

    def batch_norm_infer(self, data: Expr, name: str, epsilon: float = 1e-5, axis: int = 1,
                         scale: bool = True) -> Expr:
        """``nn.batch_norm(...)[0]`` with ``{name}_gamma/_beta/_moving_mean/_moving_var``."""
        shape = self.shape(data)
        c = (shape[axis],)
        gamma = self.param(f"{name}_gamma", c, "gamma")
        beta = self.param(f"{name}_beta", c, "beta")
        mean = self.param(f"{name}_moving_mean", c, "mean")
        var = self.param(f"{name}_moving_var", c, "var")
        attrs = {"epsilon": epsilon}
        if axis != 1:
            attrs["axis"] = axis
        if not scale:
            attrs["scale"] = False
        bn = self.call("nn.batch_norm", (data, gamma, beta, mean, var), None, **attrs)
        out = TupleGetItem(bn, 0)
        self.shapes[out] = shape
        return out

    def dense(self, data: Expr, weight: Var, units: int | None = None) -> Expr:
        """``nn.dense(data, weight)``: (…, in) x (units, in) -> (…, units)."""
        shape = self.shape(data)
        units = units if units is not None else self.shape(weight)[0]
        return self.call("nn.dense", (data, weight), (*shape[:-1], units), units=units)

    def dense_add_bias(self, data: Expr, name: str, units: int, weight: Var | None = None,
                       bias: Var | None = None) -> Expr:
        """``nn.bias_add(nn.dense(data, {name}_weight), {name}_bias, axis=-1)``."""
        inp = self.shape(data)[-1]
        weight = weight if weight is not None else self.param(f"{name}_weight", (units, inp))
        bias = bias if bias is not None else self.param(f"{name}_bias", (units,), "bias")
        return self.bias_add(self.dense(data, weight, units), bias, axis=-1)

    def bias_add(self, data: Expr, bias: Var, axis: int = 1) -> Expr:
        """``nn.bias_add`` (the bias is added along ``axis``)."""
        attrs = {} if axis == 1 else {"axis": axis}
        return self.call("nn.bias_add", (data, bias), self.shape(data), **attrs)

    def unary(self, name: str, data: Expr, **attrs) -> Expr:
        """A shape-preserving op such as ``nn.relu``, ``tanh``, ``sigmoid`` or ``nn.softmax``."""
        return self.call(name, (data,), self.shape(data), **attrs)

    def binary(self, name: str, a: Expr, b: Expr) -> Expr:
        """A broadcasting binary op (``add``, ``multiply``, ...)."""
        return self.call(name, (a, b), tuple(np.broadcast_shapes(self.shape(a), self.shape(b))))

    def const(self, value: float) -> Constant:
        """A scalar constant of the net's dtype."""
        node = Constant(np.asarray(value, dtype=self.dtype))
        self.shapes[node] = ()
        return node

    def max_pool2d(self, data: Expr, pool_size, strides=(1, 1), padding=(0, 0), **attrs) -> Expr:
        """``nn.max_pool2d``."""
        return self._pool("nn.max_pool2d", data, pool_size, strides, padding, **attrs)

    def avg_pool2d(self, data: Expr, pool_size, strides=(1, 1), padding=(0, 0), **attrs) -> Expr:
        """``nn.avg_pool2d``."""
        return self._pool("nn.avg_pool2d", data, pool_size, strides, padding, **attrs)

    def _pool(self, name, data, pool_size, strides, padding, **attrs) -> Expr:
        n, c, h, w = self.shape(data)
        kh, kw = _pair(pool_size)
        sh, sw = _pair(strides)
        top, left, bottom, right = _pads(padding)
        out = (n, c, pool_out(h, kh, sh, top, bottom), pool_out(w, kw, sw, left, right))
        full: dict = {"pool_size": (kh, kw)}
        if (sh, sw) != (1, 1):
            full["strides"] = (sh, sw)
        if any(_pads(padding)):
            full["padding"] = _pad_attr(padding)
        full.update(attrs)
        return self.call(name, (data,), out, **full)

    def global_avg_pool2d(self, data: Expr, **attrs) -> Expr:
        """``nn.global_avg_pool2d``: (n, c, h, w) -> (n, c, 1, 1)."""
        n, c, _, _ = self.shape(data)
        return self.call("nn.global_avg_pool2d", (data,), (n, c, 1, 1), **attrs)

    def batch_flatten(self, data: Expr) -> Expr:
        """``nn.batch_flatten``: (n, ...) -> (n, prod(...))."""
        shape = self.shape(data)
        return self.call("nn.batch_flatten", (data,), (shape[0], math.prod(shape[1:])))

    def dropout(self, data: Expr, rate: float = 0.5) -> Expr:
        """``nn.dropout(data)[0]`` (the identity at inference)."""
        out = TupleGetItem(self.call("nn.dropout", (data,), None, rate=rate), 0)
        self.shapes[out] = self.shape(data)
        return out

    def concatenate(self, items: Sequence[Expr], axis: int = 1) -> Expr:
        """``concatenate((a, b, ...), axis)``."""
        shapes = [self.shape(x) for x in items]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return self.call("concatenate", (Tuple(list(items)),), tuple(out), axis=axis)

    def reshape(self, data: Expr, newshape: Sequence[int]) -> Expr:
        """``reshape(data, newshape)`` (one ``-1`` allowed)."""
        total = math.prod(self.shape(data))
        known = math.prod(d for d in newshape if d != -1)
        out = tuple(total // known if d == -1 else d for d in newshape)
        return self.call("reshape", (data,), out, newshape=tuple(newshape))

    def transpose(self, data: Expr, axes: Sequence[int]) -> Expr:
        """``transpose(data, axes)``."""
        shape = self.shape(data)
        return self.call("transpose", (data,), tuple(shape[a] for a in axes), axes=tuple(axes))

    def batch_matmul(self, a: Expr, b: Expr) -> Expr:
        """``nn.batch_matmul(a, b)`` = a @ b^T: (B, M, K) x (B, N, K) -> (B, M, N)."""
        (batch, m, _), (_, n, _) = self.shape(a), self.shape(b)
        return self.call("nn.batch_matmul", (a, b), (batch, m, n))

    def split_heads(self, data: Expr, batch: int, seq: int, heads: int, head_dim: int) -> Expr:
        """Attention heads: (batch * seq, heads * head_dim) -> (batch * heads, seq, head_dim)."""
        t = self.reshape(data, (batch, seq, heads, head_dim))
        t = self.transpose(t, (0, 2, 1, 3))
        return self.reshape(t, (batch * heads, seq, head_dim))

    def merge_heads(self, data: Expr, batch: int, seq: int, heads: int, head_dim: int) -> Expr:
        """``split_heads`` undone: (batch * heads, seq, head_dim) -> (batch * seq, heads * head_dim)."""
        t = self.reshape(data, (batch, heads, seq, head_dim))
        return self.reshape(self.transpose(t, (0, 2, 1, 3)), (batch * seq, heads * head_dim))

    def gelu(self, data: Expr) -> Expr:
        """GELU written with ``erf``, as BERT defines it: 0.5 * x * (1 + erf(x / sqrt(2)))."""
        erf = self.unary("erf", self.binary("multiply", data, self.const(1.0 / math.sqrt(2.0))))
        return self.binary("multiply", self.binary("multiply", data, self.const(0.5)),
                           self.binary("add", self.const(1.0), erf))

    def layer_norm(self, data: Expr, name: str, epsilon: float = 1e-5, axis: int = -1) -> Expr:
        """``nn.layer_norm`` with ``{name}_gamma`` and ``{name}_beta``."""
        c = (self.shape(data)[axis],)
        gamma = self.param(f"{name}_gamma", c, "gamma")
        beta = self.param(f"{name}_beta", c, "beta")
        return self.call("nn.layer_norm", (data, gamma, beta), self.shape(data), axis=axis,
                         epsilon=epsilon)
