"""ONNX op converters for the neural-network ops: convolution, pooling, normalization,
activations, Gemm/MatMul, softmax, reductions, Pad, LRN (registered into ``onnx_ops.CONVERTERS``)."""

from __future__ import annotations

import math

import numpy as np

from ..ty.dims import dims_equal
from .onnx_ops import converter, int_list, norm_axis, reshape_to, scalar

__all__: list[str] = []


# -- convolution and pooling -----------------------------------------------------------------------
def _spatial(imp, x, what: str) -> int:
    n = imp.rank(x) - 2
    if n not in (1, 2):
        raise imp.error(f"{n}-D {what} is not supported (1-D and 2-D are)")
    return n


def _auto_pads(imp, a, in_dims, kernel, strides, dilations):
    """ONNX's pads [b1, b2, e1, e2] with auto_pad resolved against the input size."""
    n = len(kernel)
    mode = a.get("auto_pad", "NOTSET")
    if mode in ("NOTSET", ""):
        return list(a.get("pads", [0] * (2 * n)))
    if mode == "VALID":
        return [0] * (2 * n)
    begin, end = [], []
    for d, k, s, dl in zip(in_dims, kernel, strides, dilations, strict=True):
        if not isinstance(d, int):
            raise imp.error(f"auto_pad={mode} on a symbolic dimension is not supported")
        out = -(-d // s)
        total = max((out - 1) * s + (k - 1) * dl + 1 - d, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else big)
        end.append(big if mode == "SAME_UPPER" else small)
    return begin + end


def _to_2d(imp, x, n):
    """A 1-D (N, C, L) tensor as (N, C, 1, L) so the 2-D op applies."""
    return imp.call("expand_dims", x, axis=2) if n == 1 else x


def _from_2d(imp, y, n):
    return imp.call("squeeze", y, axis=(2,)) if n == 1 else y


def _two(values, n, fill):
    values = list(values) if values is not None else [fill] * n
    return ([fill] + values) if n == 1 else values


def _pads2(pads, n):
    return (0, pads[0], 0, pads[1]) if n == 1 else tuple(pads)


@converter("Conv")
def _conv(imp, inputs, a):
    x, w = inputs[0], inputs[1]
    n = _spatial(imp, x, "convolution")
    kernel = a.get("kernel_shape", list(imp.shape(w)[2:]))
    strides = a.get("strides", [1] * n)
    dil = a.get("dilations", [1] * n)
    pads = _auto_pads(imp, a, imp.shape(x)[2:], kernel, strides, dil)
    w2 = _to_2d(imp, w, n)
    y = imp.call("nn.conv2d", _to_2d(imp, x, n), w2, strides=tuple(_two(strides, n, 1)),
                 padding=_pads2(pads, n), dilation=tuple(_two(dil, n, 1)), groups=a.get("group", 1),
                 channels=imp.shape(w)[0], kernel_size=tuple(_two(kernel, n, 1)))
    if len(inputs) > 2 and inputs[2] is not None:
        y = imp.call("nn.bias_add", y, inputs[2], axis=1)
    return _from_2d(imp, y, n)


@converter("ConvTranspose")
def _conv_transpose(imp, inputs, a):
    x, w = inputs[0], inputs[1]
    n = _spatial(imp, x, "transposed convolution")
    group = a.get("group", 1)
    kernel = a.get("kernel_shape", list(imp.shape(w)[2:]))
    strides = a.get("strides", [1] * n)
    dil = a.get("dilations", [1] * n)
    out_pad = list(a.get("output_padding", [0] * n))
    in_dims = imp.shape(x)[2:]
    if "output_shape" in a or a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        target = list(a["output_shape"])[-n:] if "output_shape" in a else \
            [d * s for d, s in zip(in_dims, strides, strict=True)]
        begin, end = [], []
        for i in range(n):
            total = strides[i] * (in_dims[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - target[i]
            if total < 0:  # the output is larger than the pads can give: the rest is output padding
                out_pad[i] -= total
                total = 0
            small, big = total // 2, total - total // 2
            upper = a.get("auto_pad", "NOTSET") != "SAME_LOWER"
            begin.append(small if upper else big)
            end.append(big if upper else small)
        pads = begin + end
    elif a.get("auto_pad", "NOTSET") == "VALID":
        pads = [0] * (2 * n)
    else:
        pads = list(a.get("pads", [0] * (2 * n)))
    y = imp.call("nn.conv2d_transpose", _to_2d(imp, x, n), _to_2d(imp, w, n),
                 channels=imp.shape(w)[1] * group, kernel_size=tuple(_two(kernel, n, 1)),
                 strides=tuple(_two(strides, n, 1)), padding=_pads2(pads, n),
                 output_padding=tuple(_two(out_pad, n, 0)), dilation=tuple(_two(dil, n, 1)),
                 groups=group)
    if len(inputs) > 2 and inputs[2] is not None:
        y = imp.call("nn.bias_add", y, inputs[2], axis=1)
    return _from_2d(imp, y, n)


def _pool(kind):
    def conv(imp, inputs, a):
        x = inputs[0]
        n = _spatial(imp, x, "pooling")
        kernel = a["kernel_shape"]
        strides = a.get("strides", [1] * n)
        dil = a.get("dilations", [1] * n)
        pads = _auto_pads(imp, a, imp.shape(x)[2:], kernel, strides, dil)
        if imp.n_outputs > 1:
            raise imp.error("the Indices output of MaxPool is not supported")
        if a.get("storage_order", 0):
            raise imp.error("storage_order=1 is not supported")
        extra = {"count_include_pad": bool(a.get("count_include_pad", 0))} if kind == "avg" else {}
        if kind == "avg" and any(d != 1 for d in dil):
            raise imp.error("dilated average pooling is not supported")
        y = imp.call(f"nn.{kind}_pool2d", _to_2d(imp, x, n), pool_size=tuple(_two(kernel, n, 1)),
                     strides=tuple(_two(strides, n, 1)), dilation=tuple(_two(dil, n, 1)),
                     padding=_pads2(pads, n), ceil_mode=bool(a.get("ceil_mode", 0)), **extra)
        if a.get("ceil_mode", 0):
            y = _onnx_ceil(imp, y, x, n, kernel, strides, dil, pads)
        return _from_2d(imp, y, n)
    return conv


def _onnx_ceil(imp, y, x, n, kernel, strides, dil, pads):
    """ONNX drops a ceil-mode window that would start in the end padding; Relay keeps it."""
    got = imp.shape(y)[2:]
    for i, d in enumerate(imp.shape(x)[2:]):
        if not isinstance(d, int):
            continue
        k = (kernel[i] - 1) * dil[i] + 1
        out = -(-(d + pads[i] + pads[i + n] - k) // strides[i]) + 1
        if (out - 1) * strides[i] >= d + pads[i]:
            out -= 1
        axis = 3 if n == 1 else 2 + i
        if got[axis - 2] > out:
            y = imp.call("strided_slice", y, begin=(0,), end=(out,), strides=(1,), axes=(axis,))
    return y


converter("MaxPool")(_pool("max"))
converter("AveragePool")(_pool("avg"))


def _global(relay_name):
    def conv(imp, inputs, a):
        x = inputs[0]
        return imp.call(relay_name, x, axis=tuple(range(2, imp.rank(x))), keepdims=True)
    return conv


converter("GlobalAveragePool")(_global("mean"))
converter("GlobalMaxPool")(_global("max"))


# -- normalization -----------------------------------------------------------------------------------
def _channel(imp, v, rank):
    """A per-channel vector (C,) shaped (C, 1, ..., 1) to broadcast against (N, C, ...)."""
    return reshape_to(imp, v, [imp.shape(v)[0]] + [1] * (rank - 2)) if rank > 2 else v


@converter("BatchNormalization")
def _batch_norm(imp, inputs, a):
    if a.get("training_mode", 0) or imp.n_outputs > 1 and imp.opset >= 14:
        raise imp.error("training mode (the running-statistics outputs) is not supported")
    x, scale, bias, mean, var = inputs
    y = imp.call("nn.batch_norm", x, scale, bias, mean, var, axis=1, epsilon=a.get("epsilon", 1e-5))
    return imp.item(y, 0)


@converter("InstanceNormalization")
def _instance_norm(imp, inputs, a):
    x, scale, bias = inputs
    rank = imp.rank(x)
    axes = tuple(range(2, rank))
    mean = imp.call("mean", x, axis=axes, keepdims=True)
    var = imp.call("variance", x, mean, axis=axes, keepdims=True)
    eps = scalar(imp, a.get("epsilon", 1e-5), x)
    y = imp.call("divide", imp.call("subtract", x, mean), imp.call("sqrt", imp.call("add", var, eps)))
    y = imp.call("multiply", y, _channel(imp, scale, rank))
    return imp.call("add", y, _channel(imp, bias, rank))


@converter("LayerNormalization", since=17)
def _layer_norm(imp, inputs, a):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    rank = imp.rank(x)
    axis = norm_axis(a.get("axis", -1), rank)
    eps = a.get("epsilon", 1e-5)
    if a.get("stash_type", 1) != 1:
        raise imp.error("stash_type other than float32 is not supported")
    dtype = imp.dtype_of(x)
    xf = imp.call("cast", x, dtype="float32") if dtype != "float32" else x
    axes = tuple(range(axis, rank))
    mean = imp.call("mean", xf, axis=axes, keepdims=True)
    d = imp.call("subtract", xf, mean)
    var = imp.call("mean", imp.call("multiply", d, d), axis=axes, keepdims=True)
    inv = imp.call("rsqrt", imp.call("add", var, scalar(imp, eps, var)))
    y = imp.call("multiply", d, inv)
    if dtype != "float32":
        y = imp.call("cast", y, dtype=dtype)
    y = imp.call("multiply", y, scale)
    if bias is not None:
        y = imp.call("add", y, bias)
    return [y, mean, inv][: imp.n_outputs]


@converter("LRN")
def _lrn(imp, inputs, a):
    x = inputs[0]
    size = a["size"]
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    rank = imp.rank(x)
    channels = imp.shape(x)[1]
    sq = imp.call("multiply", x, x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    pad = [(0, 0)] * rank
    pad[1] = (before, after)
    padded = imp.call("nn.pad", sq, scalar(imp, 0, x), pad_width=tuple(pad))
    total = None
    for i in range(size):
        part = imp.call("strided_slice", padded, begin=(i,), end=(i + channels,), strides=(1,), axes=(1,))
        total = part if total is None else imp.call("add", total, part)
    denom = imp.call("add", scalar(imp, bias, x), imp.call("multiply", scalar(imp, alpha / size, x), total))
    return imp.call("divide", x, imp.call("power", denom, scalar(imp, beta, x)))


# -- activations -----------------------------------------------------------------------------------
@converter("LeakyRelu")
def _leaky_relu(imp, inputs, a):
    return imp.call("nn.leaky_relu", inputs[0], alpha=a.get("alpha", 0.01))


@converter("PRelu")
def _prelu(imp, inputs, a):
    x, slope = inputs
    neg = imp.call("less", x, scalar(imp, 0, x))
    return imp.call("where", neg, imp.call("multiply", x, slope), x)


def _elu_part(imp, x, alpha):
    em1 = imp.call("subtract", imp.call("exp", x), scalar(imp, 1, x))
    pos = imp.call("greater", x, scalar(imp, 0, x))
    return imp.call("where", pos, x, imp.call("multiply", scalar(imp, alpha, x), em1))


@converter("Elu")
def _elu(imp, inputs, a):
    return _elu_part(imp, inputs[0], a.get("alpha", 1.0))


@converter("Selu")
def _selu(imp, inputs, a):
    x = inputs[0]
    y = _elu_part(imp, x, a.get("alpha", 1.67326319217681884765625))
    return imp.call("multiply", scalar(imp, a.get("gamma", 1.05070102214813232421875), x), y)


@converter("Celu")
def _celu(imp, inputs, a):
    x = inputs[0]
    alpha = a.get("alpha", 1.0)
    scaled = imp.call("divide", x, scalar(imp, alpha, x))
    neg = imp.call("multiply", scalar(imp, alpha, x),
                   imp.call("subtract", imp.call("exp", scaled), scalar(imp, 1, x)))
    return imp.call("add", imp.call("nn.relu", x), imp.call("minimum", scalar(imp, 0, x), neg))


@converter("ThresholdedRelu")
def _thresholded_relu(imp, inputs, a):
    x = inputs[0]
    keep = imp.call("greater", x, scalar(imp, a.get("alpha", 1.0), x))
    return imp.call("where", keep, x, scalar(imp, 0, x))


@converter("HardSigmoid")
def _hard_sigmoid(imp, inputs, a):
    x = inputs[0]
    y = imp.call("add", imp.call("multiply", scalar(imp, a.get("alpha", 0.2), x), x),
                 scalar(imp, a.get("beta", 0.5), x))
    return imp.call("clip", y, a_min=0.0, a_max=1.0)


@converter("HardSwish")
def _hard_swish(imp, inputs, a):
    x = inputs[0]
    y = imp.call("add", imp.call("multiply", scalar(imp, 1 / 6, x), x), scalar(imp, 0.5, x))
    return imp.call("multiply", x, imp.call("clip", y, a_min=0.0, a_max=1.0))


def _softplus_expr(imp, x):
    return imp.call("log", imp.call("add", imp.call("exp", x), scalar(imp, 1, x)))


@converter("Softplus")
def _softplus(imp, inputs, a):
    return _softplus_expr(imp, inputs[0])


@converter("Softsign")
def _softsign(imp, inputs, a):
    x = inputs[0]
    return imp.call("divide", x, imp.call("add", scalar(imp, 1, x), imp.call("abs", x)))


@converter("Mish")
def _mish(imp, inputs, a):
    x = inputs[0]
    return imp.call("multiply", x, imp.call("tanh", _softplus_expr(imp, x)))


@converter("Gelu", since=20)
def _gelu(imp, inputs, a):
    x = inputs[0]
    half = imp.call("multiply", scalar(imp, 0.5, x), x)
    if a.get("approximate", "none") == "tanh":
        cube = imp.call("multiply", imp.call("multiply", x, x), x)
        inner = imp.call("add", x, imp.call("multiply", scalar(imp, 0.044715, x), cube))
        t = imp.call("tanh", imp.call("multiply", scalar(imp, math.sqrt(2 / math.pi), x), inner))
    else:
        t = imp.call("erf", imp.call("multiply", x, scalar(imp, 1 / math.sqrt(2), x)))
    return imp.call("multiply", half, imp.call("add", scalar(imp, 1, x), t))


@converter("Clip")
def _clip(imp, inputs, a):
    x = inputs[0]
    if imp.opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo = imp.value(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
        hi = imp.value(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
        for i, v in ((1, lo), (2, hi)):
            if v is None and len(inputs) > i and inputs[i] is not None:
                y = imp.call("maximum" if i == 1 else "minimum", x, inputs[i])
                return _clip(imp, [y] + [None if j == i else inputs[j] for j in (1, 2)
                                         if j < len(inputs)], a)
    y = x
    if lo is not None:
        y = imp.call("maximum", y, scalar(imp, lo, x))
    if hi is not None:
        y = imp.call("minimum", y, scalar(imp, hi, x))
    return y


# -- linear algebra --------------------------------------------------------------------------------
@converter("Gemm")
def _gemm(imp, inputs, a):
    x, w = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if a.get("transA", 0):
        x = imp.call("transpose", x, axes=(1, 0))
    if not a.get("transB", 0):
        w = imp.call("transpose", w, axes=(1, 0))
    y = imp.call("nn.dense", x, w, units=imp.shape(w)[0])
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if alpha != 1.0:
        y = imp.call("multiply", y, scalar(imp, alpha, y))
    if c is not None:
        if beta != 1.0:
            c = imp.call("multiply", c, scalar(imp, beta, c))
        y = imp.call("add", y, c)
    return y


@converter("MatMul")
def _matmul(imp, inputs, a):
    x, y = inputs
    rx, ry = imp.rank(x), imp.rank(y)
    if rx == 1:
        out = _matmul(imp, [imp.call("expand_dims", x, axis=0), y], a)
        return imp.call("squeeze", out, axis=(imp.rank(out) - (1 if ry == 1 else 2),))
    if ry == 1:
        out = _matmul(imp, [x, imp.call("expand_dims", y, axis=1)], a)
        return imp.call("squeeze", out, axis=(imp.rank(out) - 1,))
    if ry == 2:
        wt = imp.call("transpose", y, axes=(1, 0))
        return imp.call("nn.dense", x, wt, units=imp.shape(y)[1])
    return _batched(imp, x, y)


def _batched(imp, x, y):
    sx, sy = list(imp.shape(x)), list(imp.shape(y))
    rank = max(len(sx), len(sy))
    sx, sy = [1] * (rank - len(sx)) + sx, [1] * (rank - len(sy)) + sy
    batch = []
    for p, q in zip(sx[:-2], sy[:-2], strict=True):
        batch.append(q if (isinstance(p, int) and p == 1) else p)
    for arr, shape in ((0, sx), (1, sy)):
        v = (x, y)[arr]
        same = all(dims_equal(d, b) is True for d, b in zip(shape[:-2], batch, strict=True))
        if not same or imp.rank(v) != rank:
            if not all(isinstance(d, int) for d in batch + shape[-2:]):
                raise imp.error("broadcasting symbolic batch dims of a MatMul is not supported")
            v = imp.call("broadcast_to", reshape_to(imp, v, shape), shape=tuple(batch + shape[-2:]))
        if arr == 0:
            x = v
        else:
            y = v
    while imp.rank(x) > 3:
        x = imp.call("reshape", x, newshape=(-3, -2))
        y = imp.call("reshape", y, newshape=(-3, -2))
    if imp.rank(x) == 2:
        x, y = imp.call("expand_dims", x, axis=0), imp.call("expand_dims", y, axis=0)
    out = imp.call("nn.batch_matmul", x, y, transpose_a=False, transpose_b=False)
    target = batch + [sx[-2], sy[-1]]
    if len(batch) == 1:
        return out
    if all(isinstance(d, int) for d in batch) or len(batch) != 2 or not isinstance(batch[1], int):
        return reshape_to(imp, out, target)
    # (b1 * b2, M, N) -> (b1, b2, M, N) with b1 symbolic: split the first dim (-4), keep the rest (-2)
    return imp.call("reshape", out, newshape=(-4, -1, batch[1], -2))


# -- softmax and reductions ------------------------------------------------------------------------
def _softmax(relay_name):
    def conv(imp, inputs, a):
        x = inputs[0]
        rank = imp.rank(x)
        if imp.opset >= 13:
            return imp.call(relay_name, x, axis=norm_axis(a.get("axis", -1), rank))
        axis = norm_axis(a.get("axis", 1), rank)
        shape = imp.shape(x)
        flat = reshape_to(imp, x, [_prod(shape[:axis]), _prod(shape[axis:])])
        return reshape_to(imp, imp.call(relay_name, flat, axis=1), list(shape))
    return conv


def _prod(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


converter("Softmax")(_softmax("nn.softmax"))
converter("LogSoftmax")(_softmax("nn.log_softmax"))

# op -> (relay reduction, elementwise before, elementwise after, opset from which axes is an input)
_REDUCE = {"ReduceSum": ("sum", None, None, 13), "ReduceMean": ("mean", None, None, 18),
           "ReduceMax": ("max", None, None, 18), "ReduceMin": ("min", None, None, 18),
           "ReduceProd": ("prod", None, None, 18), "ReduceL1": ("sum", "abs", None, 18),
           "ReduceL2": ("sum", "square", "sqrt", 18), "ReduceSumSquare": ("sum", "square", None, 18),
           "ReduceLogSum": ("sum", None, "log", 18), "ReduceLogSumExp": ("sum", "exp", "log", 18)}


def _reduce(op_type):
    relay_name, pre, post, axes_input_from = _REDUCE[op_type]

    def conv(imp, inputs, a):
        x = inputs[0]
        if imp.opset >= axes_input_from:
            axes = int_list(imp, inputs[1], "axes") if len(inputs) > 1 and inputs[1] is not None else None
        else:
            axes = a.get("axes")
        keep = bool(a.get("keepdims", 1))
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(imp.rank(x)))
        if pre == "square":
            x = imp.call("multiply", x, x)
        elif pre is not None:
            x = imp.call(pre, x)
        y = imp.call(relay_name, x, axis=tuple(norm_axis(i, imp.rank(x)) for i in axes), keepdims=keep)
        return imp.call(post, y) if post else y
    return conv


for _op in _REDUCE:
    converter(_op)(_reduce(_op))


def _arg(relay_name):
    def conv(imp, inputs, a):
        y = imp.call(relay_name, inputs[0], axis=(a.get("axis", 0),), keepdims=bool(a.get("keepdims", 1)),
                     select_last_index=bool(a.get("select_last_index", 0)))
        return imp.call("cast", y, dtype="int64") if imp.dtype_of(y) != "int64" else y
    return conv


converter("ArgMax")(_arg("argmax"))
converter("ArgMin")(_arg("argmin"))


# -- padding ---------------------------------------------------------------------------------------
@converter("Pad")
def _pad(imp, inputs, a):
    x = inputs[0]
    rank = imp.rank(x)
    mode = a.get("mode", "constant")
    if imp.opset < 11:
        pads, value = list(a["pads"]), a.get("value", 0.0)
    else:
        pads = int_list(imp, inputs[1], "pads")
        value = 0
        if len(inputs) > 2 and inputs[2] is not None:
            v = imp.static(inputs[2], "constant_value")
            value = np.asarray(v).reshape(-1)[0] if np.asarray(v).size else 0
    axes = int_list(imp, inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None else None
    axes = list(range(rank)) if axes is None else [norm_axis(i, rank) for i in axes]
    width = [[0, 0] for _ in range(rank)]
    for i, axis in enumerate(axes):
        width[axis] = [pads[i], pads[i + len(axes)]]
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise imp.error(f"pad mode {mode!r} is not supported")
    if any(p < 0 for w in width for p in w):
        raise imp.error("negative pads are not supported")
    mode = {"wrap": "wrap"}.get(mode, mode)
    if mode == "wrap":
        raise imp.error("pad mode 'wrap' is not supported")
    return imp.call("nn.pad", x, scalar(imp, value, x), pad_width=tuple(tuple(w) for w in width),
                    pad_mode=mode)
