"""ONNX ops with no Relay op of their own, composed from several: hyperbolic and inverse
functions, IsNaN/IsInf, Swish, Range, Tile, Size, Hardmax, OneHot, EyeLike, Trilu,
DepthToSpace/SpaceToDepth, and the Lp/RMS/group/mean-variance normalizations."""

from __future__ import annotations

import numpy as np

from .onnx_ops import converter, int_list, norm_axis, reshape_to, scalar

__all__: list[str] = []


def _c(imp, x, v):
    return scalar(imp, v, x)


# -- elementwise -----------------------------------------------------------------------------------
@converter("Tan")
def _tan(imp, inputs, a):
    x = inputs[0]
    return imp.call("divide", imp.call("sin", x), imp.call("cos", x))


def _exp_pair(imp, x):
    return imp.call("exp", x), imp.call("exp", imp.call("negative", x))


@converter("Sinh")
def _sinh(imp, inputs, a):
    p, n = _exp_pair(imp, inputs[0])
    return imp.call("multiply", imp.call("subtract", p, n), _c(imp, inputs[0], 0.5))


@converter("Cosh")
def _cosh(imp, inputs, a):
    p, n = _exp_pair(imp, inputs[0])
    return imp.call("multiply", imp.call("add", p, n), _c(imp, inputs[0], 0.5))


@converter("Asinh")
def _asinh(imp, inputs, a):
    x = inputs[0]
    root = imp.call("sqrt", imp.call("add", imp.call("multiply", x, x), _c(imp, x, 1)))
    return imp.call("log", imp.call("add", x, root))


@converter("Acosh")
def _acosh(imp, inputs, a):
    x = inputs[0]
    root = imp.call("sqrt", imp.call("subtract", imp.call("multiply", x, x), _c(imp, x, 1)))
    return imp.call("log", imp.call("add", x, root))


@converter("Atanh")
def _atanh(imp, inputs, a):
    x = inputs[0]
    ratio = imp.call("divide", imp.call("add", _c(imp, x, 1), x), imp.call("subtract", _c(imp, x, 1), x))
    return imp.call("multiply", imp.call("log", ratio), _c(imp, x, 0.5))


@converter("IsNaN")
def _isnan(imp, inputs, a):
    return imp.call("not_equal", inputs[0], inputs[0])


@converter("IsInf")
def _isinf(imp, inputs, a):
    x = inputs[0]
    pos = imp.call("equal", x, _c(imp, x, np.inf))
    neg = imp.call("equal", x, _c(imp, x, -np.inf))
    want_pos, want_neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    if want_pos and want_neg:
        return imp.call("logical_or", pos, neg)
    if want_pos:
        return pos
    if want_neg:
        return neg
    return imp.call("logical_and", pos, neg)  # neither: never true


@converter("Swish", since=24)
def _swish(imp, inputs, a):
    x = inputs[0]
    scaled = imp.call("multiply", x, _c(imp, x, a.get("alpha", 1.0)))
    return imp.call("multiply", x, imp.call("sigmoid", scaled))


@converter("Shrink")
def _shrink(imp, inputs, a):
    x = inputs[0]
    lambd, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
    low = imp.call("less", x, _c(imp, x, -lambd))
    high = imp.call("greater", x, _c(imp, x, lambd))
    return imp.call("where", low, imp.call("add", x, _c(imp, x, bias)),
                    imp.call("where", high, imp.call("subtract", x, _c(imp, x, bias)), _c(imp, x, 0)))


# -- tensors made from shapes ----------------------------------------------------------------------
@converter("Range", since=11)
def _range(imp, inputs, a):
    start, limit, delta = (np.asarray(imp.static(x, "start/limit/delta")) for x in inputs)
    return imp.const(np.arange(start, limit, delta, dtype=start.dtype))


@converter("Size")
def _size(imp, inputs, a):
    shape = imp.shape(inputs[0])
    if not all(isinstance(d, int) for d in shape):
        raise imp.error("Size of a tensor with symbolic dims is not supported")
    return imp.const(np.asarray(int(np.prod(shape)), dtype=np.int64))


@converter("EyeLike")
def _eye_like(imp, inputs, a):
    x = inputs[0]
    n, m = imp.shape(x)
    dtype = imp.dtype_of(x)
    if "dtype" in a:
        from .onnx_import import onnx_dtype

        dtype = onnx_dtype(a["dtype"])
    return imp.const(np.eye(n, m, k=a.get("k", 0), dtype=dtype))


@converter("Trilu", since=14)
def _trilu(imp, inputs, a):
    x = inputs[0]
    k = int_list(imp, inputs[1], "k")[0] if len(inputs) > 1 and inputs[1] is not None else 0
    n, m = imp.shape(x)[-2:]
    keep = np.triu(np.ones((n, m), bool), k) if a.get("upper", 1) else np.tril(np.ones((n, m), bool), k)
    return imp.call("where", imp.const(keep), x, _c(imp, x, 0))


@converter("OneHot", since=9)
def _one_hot(imp, inputs, a):
    idx, depth, values = inputs
    depth = int(np.asarray(imp.static(depth, "depth")).reshape(-1)[0])
    rank = imp.rank(idx)
    axis = norm_axis(a.get("axis", -1), rank + 1)
    idx = imp.call("cast", idx, dtype="int64") if imp.dtype_of(idx) != "int64" else idx
    idx = imp.call("where", imp.call("less", idx, scalar(imp, 0, idx)),
                   imp.call("add", idx, scalar(imp, depth, idx)), idx)
    shape = [1] * (rank + 1)
    shape[axis] = depth
    arange = imp.const(np.arange(depth, dtype=np.int64).reshape(shape))
    hot = imp.call("equal", imp.call("expand_dims", idx, axis=axis), arange)
    off, on = (imp.call("take", values, imp.const(np.asarray(i, dtype=np.int64)), axis=0) for i in (0, 1))
    return imp.call("where", hot, on, off)


@converter("Hardmax")
def _hardmax(imp, inputs, a):
    x = inputs[0]
    rank = imp.rank(x)
    if imp.opset < 13:
        raise imp.error("Hardmax before opset 13 (flattening semantics) is not supported")
    axis = norm_axis(a.get("axis", -1), rank)
    arg = imp.call("argmax", x, axis=(axis,), keepdims=True)
    depth = imp.shape(x)[axis]
    shape = [1] * rank
    shape[axis] = depth
    arange = imp.const(np.arange(depth, dtype=imp.dtype_of(arg)).reshape(shape))
    return imp.call("cast", imp.call("equal", arg, arange), dtype=imp.dtype_of(x))


@converter("Tile", since=6)
def _tile(imp, inputs, a):
    x = inputs[0]
    reps = int_list(imp, inputs[1], "repeats")
    shape = list(imp.shape(x))
    if not all(isinstance(d, int) for d in shape):
        raise imp.error("tiling a tensor with symbolic dims is not supported")
    for axis, r in enumerate(reps):
        if r == 1:
            continue
        expanded = reshape_to(imp, x, shape[:axis] + [1] + shape[axis:])
        target = shape[:axis] + [r] + shape[axis:]
        x = reshape_to(imp, imp.call("broadcast_to", expanded, shape=tuple(target)),
                       shape[:axis] + [r * shape[axis]] + shape[axis + 1:])
        shape[axis] *= r
    return x


def _space_depth(imp, x, block, to_depth, mode="DCR"):
    n, c, h, w = imp.shape(x)
    b = block
    if to_depth:
        y = reshape_to(imp, x, [n, c, h // b, b, w // b, b])
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        y = imp.call("transpose", y, axes=perm)
        return reshape_to(imp, y, [n, c * b * b, h // b, w // b])
    if mode == "DCR":
        y = reshape_to(imp, x, [n, b, b, c // (b * b), h, w])
        y = imp.call("transpose", y, axes=(0, 3, 4, 1, 5, 2))
    else:
        y = reshape_to(imp, x, [n, c // (b * b), b, b, h, w])
        y = imp.call("transpose", y, axes=(0, 1, 4, 2, 5, 3))
    return reshape_to(imp, y, [n, c // (b * b), h * b, w * b])


@converter("DepthToSpace")
def _depth_to_space(imp, inputs, a):
    return _space_depth(imp, inputs[0], a["blocksize"], False, a.get("mode", "DCR"))


@converter("SpaceToDepth")
def _space_to_depth(imp, inputs, a):
    return _space_depth(imp, inputs[0], a["blocksize"], True, a.get("mode", "DCR"))


# -- normalizations --------------------------------------------------------------------------------
@converter("LpNormalization")
def _lp_norm(imp, inputs, a):
    x = inputs[0]
    axis = norm_axis(a.get("axis", -1), imp.rank(x))
    if a.get("p", 2) == 1:
        norm = imp.call("sum", imp.call("abs", x), axis=(axis,), keepdims=True)
    else:
        norm = imp.call("sqrt", imp.call("sum", imp.call("multiply", x, x), axis=(axis,), keepdims=True))
    zero = imp.call("equal", norm, _c(imp, x, 0))
    safe = imp.call("where", zero, _c(imp, x, 1), norm)
    return imp.call("where", zero, _c(imp, x, 0), imp.call("divide", x, safe))


@converter("MeanVarianceNormalization")
def _mvn(imp, inputs, a):
    x = inputs[0]
    axes = tuple(norm_axis(i, imp.rank(x)) for i in a.get("axes", [0, 2, 3]))
    mean = imp.call("mean", x, axis=axes, keepdims=True)
    d = imp.call("subtract", x, mean)
    var = imp.call("mean", imp.call("multiply", d, d), axis=axes, keepdims=True)
    return imp.call("divide", d, imp.call("add", imp.call("sqrt", var), _c(imp, x, 1e-9)))


@converter("RMSNormalization", since=23)
def _rms_norm(imp, inputs, a):
    x, scale = inputs[0], inputs[1]
    rank = imp.rank(x)
    axes = tuple(range(norm_axis(a.get("axis", -1), rank), rank))
    dtype = imp.dtype_of(x)
    xf = imp.call("cast", x, dtype="float32") if dtype != "float32" and a.get("stash_type", 1) == 1 else x
    ms = imp.call("mean", imp.call("multiply", xf, xf), axis=axes, keepdims=True)
    y = imp.call("multiply", xf, imp.call("rsqrt", imp.call("add", ms, _c(imp, xf, a.get("epsilon", 1e-5)))))
    if imp.dtype_of(y) != dtype:
        y = imp.call("cast", y, dtype=dtype)
    return imp.call("multiply", y, scale)


@converter("GroupNormalization", since=18)
def _group_norm(imp, inputs, a):
    x, scale, bias = inputs
    shape = list(imp.shape(x))
    g = a["num_groups"]
    n, c = shape[0], shape[1]
    grouped = reshape_to(imp, x, [n, g, -1])
    if imp.dtype_of(grouped) != "float32" and a.get("stash_type", 1) == 1:
        grouped = imp.call("cast", grouped, dtype="float32")
    mean = imp.call("mean", grouped, axis=(2,), keepdims=True)
    d = imp.call("subtract", grouped, mean)
    var = imp.call("mean", imp.call("multiply", d, d), axis=(2,), keepdims=True)
    y = imp.call("multiply", d, imp.call("rsqrt", imp.call("add", var, _c(imp, var, a.get("epsilon", 1e-5)))))
    y = reshape_to(imp, imp.call("cast", y, dtype=imp.dtype_of(x)) if imp.dtype_of(y) != imp.dtype_of(x)
                   else y, shape)
    per = [c] + [1] * (len(shape) - 2)
    if imp.opset < 21:  # GroupNormalization-18 had per-group scale and bias
        owner = imp.const(np.repeat(np.arange(g, dtype=np.int64), c // g))
        scale, bias = (imp.call("take", v, owner, axis=0) for v in (scale, bias))
    y = imp.call("multiply", y, reshape_to(imp, scale, per))
    return imp.call("add", y, reshape_to(imp, bias, per))
