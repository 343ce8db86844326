"""ONNX op converters: elementwise, tensor and shape ops (the table; nn ops in ``onnx_nn``).

``CONVERTERS[op_type]`` is a list of ``(since_version, converter)``, newest last; a node uses the
newest converter whose version is at most the model's opset. A converter is
``(imp, inputs, attrs) -> Expr | list[Expr]`` where ``inputs`` holds None for an omitted optional
input and ``imp`` is the :class:`~.onnx_import.Importer` (typed building, static values).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir import Any, Constant, Tuple
from ..ty.dims import dims_equal, simplify_dim
from .onnx_import import Importer, OnnxImportError, close_names, onnx_dtype

__all__ = ["CONVERTERS", "convert_node", "covered_ops", "converter"]

CONVERTERS: dict[str, list] = {}


def converter(*op_types: str, since: int = 1):
    """Register a converter for ``op_types`` from opset ``since`` on."""
    def deco(fn):
        for op_type in op_types:
            entries = CONVERTERS.setdefault(op_type, [])
            entries.append((since, fn))
            entries.sort(key=lambda e: e[0])
        return fn
    return deco


def covered_ops() -> list[str]:
    """The ONNX op types (default domain) the importer converts."""
    _load()
    return sorted(CONVERTERS)


def _load() -> None:
    from . import onnx_more, onnx_nn, onnx_resize  # noqa: F401 - they register their converters


def _attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def convert_node(imp: Importer, node: onnx.NodeProto) -> None:
    """Convert one node and record its outputs in ``imp.values``."""
    _load()
    if node.domain not in ("", "ai.onnx"):
        raise imp.error(f"operator domain {node.domain!r} is not supported (only the default "
                        "ONNX domain)")
    entries = CONVERTERS.get(node.op_type)
    if not entries:
        near = close_names(node.op_type, CONVERTERS)
        hint = (f"; close covered ops: {', '.join(near)}" if near
                else "; no covered op has a similar name")
        raise imp.error(f"unsupported operator {node.op_type!r}{hint} (covered: "
                        f"{len(CONVERTERS)} ops; see relaygraph.frontend.onnx_coverage)")
    usable = [fn for since, fn in entries if since <= imp.opset]
    if not usable:
        raise imp.error(f"operator {node.op_type!r} is covered from opset {entries[0][0]} on")
    inputs = []
    for name in node.input:
        if not name:
            inputs.append(None)
            continue
        if name not in imp.values:
            raise imp.error(f"input {name!r} is produced by no earlier node")
        inputs.append(imp.values[name])
    attrs = _attrs(node)
    imp.n_outputs = len(node.output)
    result = usable[-1](imp, inputs, attrs)
    outs = list(result) if isinstance(result, (list, tuple)) else [result]
    if node.op_type in SHAPE_FNS:
        _propagate_dims(imp, node.op_type, inputs, attrs, outs)
    for name, value in zip(node.output, outs, strict=False):
        if name:
            imp.values[name] = value
    missing = [n for n in node.output[len(outs):] if n]
    if missing:
        raise imp.error(f"output(s) {', '.join(map(repr, missing))} are not supported")


# -- helpers ---------------------------------------------------------------------------------------
def scalar(imp: Importer, value, like) -> Constant:
    """A rank-0 constant of ``like``'s dtype."""
    return imp.const(np.asarray(value, dtype=imp.dtype_of(like)))


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def int_list(imp: Importer, expr, what: str) -> list[int]:
    return [int(v) for v in np.asarray(imp.static(expr, what)).reshape(-1)]


def reshape_to(imp: Importer, x, target) -> object:
    """``x`` reshaped to the dims ``target`` (ints, or symbols expressed through 0 / -1 codes)."""
    target = [d if not isinstance(d, (np.integer,)) else int(d) for d in target]
    if all(isinstance(d, int) for d in target):
        if tuple(target) == imp.shape(x):
            return x
        return imp.call("reshape", x, newshape=tuple(target), allowzero=0 in target)
    shape = imp.shape(x)
    codes = []
    for i, d in enumerate(target):
        if isinstance(d, int):
            codes.append(d)
        elif i < len(shape) and dims_equal(d, shape[i]) is True:
            codes.append(0)
        else:
            codes.append(-1)
    if codes.count(-1) > 1:
        raise imp.error(f"cannot reshape {shape} to the symbolic shape {tuple(target)} with a static "
                        "newshape (more than one unknown dimension)")
    out = imp.call("reshape", x, newshape=tuple(codes))
    if not all(dims_equal(a, b) is not False for a, b in zip(imp.shape(out), target, strict=True)):
        raise imp.error(f"reshaping {shape} to {tuple(target)} gives {imp.shape(out)}")
    return out


def _prod(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


# -- constants and shapes --------------------------------------------------------------------------
@converter("Constant")
def _constant(imp, inputs, a):
    if "value" in a:
        return imp.const(numpy_helper.to_array(a["value"]))
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return imp.const(np.asarray(a[key], dtype=dtype))
    raise imp.error(f"only tensor, float(s) and int(s) constants are supported (got {sorted(a)})")


@converter("ConstantOfShape")
def _constant_of_shape(imp, inputs, a):
    value = numpy_helper.to_array(a["value"]).reshape(-1) if "value" in a else np.zeros(1, np.float32)
    dims = imp.dims_value(inputs[0])
    if dims is None or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise imp.error("its shape input must be known at import")
    return imp.const(np.full(tuple(int(d) for d in dims), value[0], dtype=value.dtype))


@converter("Shape")
def _shape(imp, inputs, a):
    shape = imp.shape(inputs[0])
    imp.note_dims(inputs[0])
    start, end = a.get("start", 0), a.get("end", len(shape))
    dims = shape[slice(start, end)]
    if all(isinstance(d, int) for d in dims):
        return imp.const(np.asarray(dims, dtype=np.int64))
    out = imp.call("shape_of", inputs[0], dtype="int64")
    if (start, end) != (0, len(shape)):
        s, e, _ = slice(start, end).indices(len(shape))
        out = imp.call("strided_slice", out, begin=(s,), end=(e,), strides=(1,), axes=None)
    return out


def _shape_dims(imp, inputs, a):
    shape = imp.shape(inputs[0])
    return np.asarray(list(shape[slice(a.get("start", 0), a.get("end", len(shape)))]) + [0],
                      dtype=object)[:-1]


@converter("Identity")
def _identity(imp, inputs, a):
    return inputs[0]


@converter("Dropout")
def _dropout(imp, inputs, a):
    if len(inputs) > 2 and inputs[2] is not None and bool(imp.static(inputs[2], "training_mode")):
        raise imp.error("training_mode=True is not supported (inference only)")
    x = inputs[0]
    mask = imp.const(np.ones(imp.shape(x), dtype=bool)) if _static_shape(imp, x) else None
    return [x, mask] if mask is not None else [x]


def _static_shape(imp, x) -> bool:
    return all(isinstance(d, int) for d in imp.shape(x))


@converter("Cast")
def _cast(imp, inputs, a):
    try:
        dtype = onnx_dtype(a["to"])
    except OnnxImportError as exc:
        raise imp.error(str(exc)) from None
    if a.get("saturate", 1) != 1 and dtype.startswith("float8"):
        raise imp.error("saturate=0 is only meaningful for float8")
    if dtype == imp.dtype_of(inputs[0]):
        return inputs[0]
    return imp.call("cast", inputs[0], dtype=dtype)


@converter("CastLike")
def _cast_like(imp, inputs, a):
    dtype = imp.dtype_of(inputs[1])
    return inputs[0] if dtype == imp.dtype_of(inputs[0]) else imp.call("cast", inputs[0], dtype=dtype)


# -- elementwise -----------------------------------------------------------------------------------
_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Equal": "equal", "Less": "less",
           "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal",
           "And": "logical_and", "Or": "logical_or", "Xor": "not_equal"}
_UNARY = {"Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Neg": "negative", "Abs": "abs", "Sqrt": "sqrt", "Erf": "erf", "Floor": "floor",
          "Ceil": "ceil", "Sign": "sign", "Sin": "sin", "Cos": "cos", "Not": "logical_not",
          "Round": "round"}


def _binary(relay_name):
    def conv(imp, inputs, a):
        return imp.call(relay_name, inputs[0], inputs[1])
    return conv


def _unary(relay_name):
    def conv(imp, inputs, a):
        return imp.call(relay_name, inputs[0])
    return conv


for _onnx, _relay in _BINARY.items():
    converter(_onnx)(_binary(_relay))
for _onnx, _relay in _UNARY.items():
    converter(_onnx)(_unary(_relay))


@converter("Div")
def _div(imp, inputs, a):
    x, y = inputs
    if imp.dtype_of(x).startswith(("int", "uint")):
        # integer division truncates toward zero in ONNX
        q = imp.call("divide", imp.call("cast", x, dtype="float64"), imp.call("cast", y, dtype="float64"))
        return imp.call("cast", q, dtype=imp.dtype_of(x))
    return imp.call("divide", x, y)


@converter("Pow")
def _pow(imp, inputs, a):
    x, y = inputs
    if imp.dtype_of(y) != imp.dtype_of(x):
        y = imp.call("cast", y, dtype=imp.dtype_of(x))
    return imp.call("power", x, y)


@converter("Mod")
def _mod(imp, inputs, a):
    x, y = inputs
    if a.get("fmod", 0):
        return imp.call("mod", x, y)  # C fmod: the sign of the dividend
    # Python's mod: the sign of the divisor (fmod, shifted by the divisor where the signs differ)
    r = imp.call("mod", x, y)
    zero = scalar(imp, 0, x)
    differ = imp.call("logical_and", imp.call("not_equal", r, zero),
                      imp.call("not_equal", imp.call("less", r, zero), imp.call("less", y, zero)))
    return imp.call("where", differ, imp.call("add", r, y), r)


@converter("Reciprocal")
def _reciprocal(imp, inputs, a):
    return imp.call("divide", scalar(imp, 1, inputs[0]), inputs[0])


def _variadic(relay_name):
    def conv(imp, inputs, a):
        out = inputs[0]
        for x in inputs[1:]:
            out = imp.call(relay_name, out, x)
        return out
    return conv


converter("Sum")(_variadic("add"))
converter("Max")(_variadic("maximum"))
converter("Min")(_variadic("minimum"))


@converter("Mean")
def _mean(imp, inputs, a):
    total = _variadic("add")(imp, inputs, a)
    return imp.call("divide", total, scalar(imp, len(inputs), inputs[0]))


@converter("Where")
def _where(imp, inputs, a):
    return imp.call("where", *inputs)


# -- shape manipulation ----------------------------------------------------------------------------
@converter("Reshape", since=5)
def _reshape(imp, inputs, a):
    x = inputs[0]
    dims = imp.dims_value(inputs[1])
    if dims is None:
        raise imp.error("its shape input must be known at import (a constant, an initializer, or "
                        "computed from input shapes)")
    shape = imp.shape(x)
    target = []
    for i, d in enumerate(dims):
        if isinstance(d, (int, np.integer)) and int(d) == 0 and not a.get("allowzero", 0):
            target.append(shape[i])
        else:
            target.append(int(d) if isinstance(d, (int, np.integer)) else d)
    if -1 in target:
        known = _prod(d for d in target if not (isinstance(d, int) and d == -1))
        total = _prod(shape)
        if any(d is Any for d in shape):
            raise imp.error("cannot infer -1 in the target shape of an input with unknown dims")
        fill = total // known if isinstance(total, int) and isinstance(known, int) else total / known
        target[target.index(-1)] = fill
    return reshape_to(imp, x, target)


@converter("Flatten")
def _flatten(imp, inputs, a):
    x = inputs[0]
    shape = imp.shape(x)
    axis = norm_axis(a.get("axis", 1), len(shape))
    return reshape_to(imp, x, [_prod(shape[:axis]), _prod(shape[axis:])])


@converter("Transpose")
def _transpose(imp, inputs, a):
    rank = imp.rank(inputs[0])
    perm = a.get("perm", list(range(rank))[::-1])
    if list(perm) == list(range(rank)):
        return inputs[0]
    return imp.call("transpose", inputs[0], axes=tuple(perm))


@converter("Concat")
def _concat(imp, inputs, a):
    xs = [x for x in inputs if x is not None]
    if len(xs) == 1:
        return xs[0]
    return imp.call("concatenate", Tuple(xs), axis=a["axis"])


def _split_sizes(imp, inputs, a, dim):
    if len(inputs) > 1 and inputs[1] is not None:
        return int_list(imp, inputs[1], "split")
    if "split" in a:
        return list(a["split"])
    if not isinstance(dim, int):
        raise imp.error("splitting a symbolic dimension is not supported")
    n = a.get("num_outputs", imp.n_outputs)
    chunk = -(-dim // n)
    return [min(chunk, dim - i * chunk) for i in range(n)]


@converter("Split")
def _split(imp, inputs, a):
    x = inputs[0]
    axis = norm_axis(a.get("axis", 0), imp.rank(x))
    sizes = _split_sizes(imp, inputs, a, imp.shape(x)[axis])
    if len(sizes) == 1:
        return [x]
    cuts = tuple(int(c) for c in np.cumsum(sizes)[:-1])
    tup = imp.call("split", x, indices_or_sections=cuts, axis=axis)
    return [imp.item(tup, i) for i in range(len(sizes))]


def _axes(imp, inputs, a, index=1):
    if len(inputs) > index and inputs[index] is not None:
        return int_list(imp, inputs[index], "axes")
    return a.get("axes")


@converter("Squeeze")
def _squeeze(imp, inputs, a):
    x = inputs[0]
    axes = _axes(imp, inputs, a)
    rank = imp.rank(x)
    if axes is None:
        axes = [i for i, d in enumerate(imp.shape(x)) if d == 1]
    return imp.call("squeeze", x, axis=tuple(sorted(norm_axis(i, rank) for i in axes)))


@converter("Unsqueeze")
def _unsqueeze(imp, inputs, a):
    x = inputs[0]
    axes = _axes(imp, inputs, a)
    out_rank = imp.rank(x) + len(axes)
    for axis in sorted(norm_axis(i, out_rank) for i in axes):
        x = imp.call("expand_dims", x, axis=axis)
    return x


@converter("Expand", since=8)
def _expand(imp, inputs, a):
    x = inputs[0]
    dims = imp.dims_value(inputs[1])
    if dims is None:
        raise imp.error("its shape input must be known at import")
    shape = list(imp.shape(x))
    target = [int(d) if isinstance(d, (int, np.integer)) else d for d in dims]
    rank = max(len(shape), len(target))
    shape = [1] * (rank - len(shape)) + shape
    target = [1] * (rank - len(target)) + target
    out = [s if (isinstance(t, int) and t == 1) else t for s, t in zip(shape, target, strict=True)]
    if out == shape:
        return reshape_to(imp, x, out) if len(out) != imp.rank(x) else x
    if not all(isinstance(d, int) for d in out):
        raise imp.error(f"expanding to the symbolic shape {tuple(out)} is not supported")
    return imp.call("broadcast_to", x, shape=tuple(out))


@converter("Gather")
def _gather(imp, inputs, a):
    x, idx = inputs
    axis = norm_axis(a.get("axis", 0), imp.rank(x))
    v = imp.value(idx)
    dim = imp.shape(x)[axis]
    if v is not None and isinstance(dim, int):
        idx = imp.const(np.where(v < 0, v + dim, v).astype(v.dtype))
        return imp.call("take", x, idx, axis=axis, mode="clip")
    return imp.call("take", x, idx, axis=axis, mode="wrap")


@converter("Slice")
def _slice(imp, inputs, a):
    x = inputs[0]
    rank = imp.rank(x)
    if imp.opset < 10:
        starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
    else:
        axes = int_list(imp, inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None else None
        starts = dim_list(imp, inputs[1], "starts")
        ends = dim_list(imp, inputs[2], "ends")
        steps = int_list(imp, inputs[4], "steps") if len(inputs) > 4 and inputs[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [norm_axis(i, rank) for i in axes]
    steps = steps or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise imp.error(f"starts, ends, axes and steps differ in length ({len(starts)}, {len(ends)}, "
                        f"{len(axes)}, {len(steps)})")
    for axis, s, e, st in zip(axes, starts, ends, steps, strict=True):
        dim = imp.shape(x)[axis]
        if isinstance(e, int) or dims_equal(e, dim) is not True:
            pass
        elif st == 1:
            e = 1 << 62  # a symbolic end equal to the dim: to the end of the axis
        if not isinstance(s, int) or not isinstance(e, int):
            x = _slice_to_symbolic(imp, x, axis, s, e, st)
        elif isinstance(dim, int):
            idx = np.arange(dim)[slice(s, e, st)]
            if st == 1 and len(idx) and len(idx) == dim:
                continue
            if st > 0 and len(idx):
                x = imp.call("strided_slice", x, begin=(int(idx[0]),), end=(int(idx[-1]) + 1,),
                             strides=(st,), axes=(axis,))
            else:
                x = imp.call("take", x, imp.const(idx.astype(np.int64)), axis=axis)
        elif st == 1 and s >= 0 and (e >= 0 or e <= -(1 << 62)):
            if s == 0 and e >= 1 << 62:
                continue
            end = min(e, 1 << 31)
            x = imp.call("strided_slice", x, begin=(s,), end=(end,), strides=(1,), axes=(axis,))
        else:
            raise imp.error(f"slicing the symbolic dimension {dim} with start {s}, end {e}, "
                            f"step {st} is not supported")
    return x


def _slice_to_symbolic(imp, x, axis, s, e, st):
    """``x[s:e]`` on ``axis`` where ``e`` is a symbolic size and the dim a static one (a buffer
    such as GPT-2's causal mask sliced to the sequence length): slice_like a tensor of size ``e``.
    The size is ``e`` where ``e`` fits the buffer; a larger one is an error at run time."""
    dim = imp.shape(x)[axis]
    if st != 1 or not isinstance(s, int) or s < 0 or isinstance(e, int):
        raise imp.error(f"slicing the dimension {dim} from {s} to {e} with step {st} is not supported "
                        "(the result's size would be known only at run time)")
    if not isinstance(dim, int):
        raise imp.error(f"slicing the dimension {dim} to the symbolic end {e} is not supported (the "
                        "result's size, the smaller of the two, is known only at run time)")
    like = _sized_like(imp, e, axis, imp.rank(x))
    if like is None:
        raise imp.error(f"slicing the dimension {dim} to the symbolic end {e} is not supported (no "
                        "tensor of the model has that size, so it is known only at run time)")
    x = imp.call("slice_like", x, like, axes=(axis,))
    if s:
        x = imp.call("strided_slice", x, begin=(s,), end=(1 << 31,), strides=(1,), axes=(axis,))
    return x


def _sized_like(imp, d, axis: int, rank: int):
    """A tensor whose dim ``axis`` is ``d`` (for slice_like), or None if no value has that dim."""
    sources = imp.dim_sources.get(d, [])
    for expr, j in sources:
        if j == axis:
            return expr
    if not sources:
        return None
    # the dim is at another axis: gather index 0 of every other axis, then reshape it into place
    expr, j = sources[0]
    zero = imp.const(np.asarray(0, dtype=np.int64))
    for k in reversed(range(imp.rank(expr))):
        if k != j:
            expr = imp.call("take", expr, zero, axis=k, mode="fast")
    return imp.call("reshape", expr, newshape=tuple(-1 if k == axis else 1 for k in range(rank)))


def dim_list(imp: Importer, expr, what: str) -> list:
    """An int tensor input known at import, as dims: ints, or sympy expressions over dim symbols
    where it is computed from symbolic shapes."""
    dims = imp.dims_value(expr)
    if dims is None:
        imp.static(expr, what)  # the clear error: computed at run time
    out = []
    for d in np.asarray(dims).reshape(-1):
        if d is Any:
            imp.static(expr, what)
        out.append(simplify_dim(d))
    return out


# -- value propagation through shape subgraphs ---------------------------------------------------
def _ints(v):
    return [int(i) for i in np.asarray(v).reshape(-1)]


def _gather_dims(imp, inputs, a, vals):
    idx = np.asarray(vals[1]).astype(np.int64)
    return np.take(vals[0], idx, axis=a.get("axis", 0))


def _binop(fn):
    return lambda imp, inputs, a, vals: np.asarray(fn(vals[0], vals[1]), dtype=object)


SHAPE_FNS = {
    "Shape": None,
    "Gather": _gather_dims,
    "Concat": lambda imp, inputs, a, vals: np.concatenate([np.asarray(v).reshape(-1) for v in vals]),
    "Unsqueeze": lambda imp, inputs, a, vals: np.asarray(vals[0]).reshape(-1),
    "Squeeze": lambda imp, inputs, a, vals: np.asarray(vals[0]).reshape(()),
    "Cast": lambda imp, inputs, a, vals: vals[0],
    "Identity": lambda imp, inputs, a, vals: vals[0],
    "Mul": _binop(lambda x, y: x * y),
    "Add": _binop(lambda x, y: x + y),
    "Sub": _binop(lambda x, y: x - y),
    "Div": _binop(lambda x, y: np.asarray([p // q if isinstance(p, int) and isinstance(q, int)
                                           else p / q for p, q in np.broadcast(x, y)],
                                          dtype=object).reshape(np.broadcast(x, y).shape)),
    "Slice": lambda imp, inputs, a, vals: vals[0][slice(*(_ints(v)[0] for v in vals[1:3]))]
    if len(vals) >= 3 else None,
}


def _propagate_dims(imp, op_type, inputs, attrs, outs) -> None:
    out = outs[0]
    if out is None or isinstance(out, Constant) or imp.rank(out) > 1:
        return
    if op_type == "Shape":
        imp.symvals[out] = _shape_dims(imp, inputs, attrs)
        return
    vals = [imp.dims_value(x) if x is not None else None for x in inputs]
    if op_type in ("Unsqueeze", "Squeeze", "Cast", "Identity"):
        vals = vals[:1]
    if any(v is None for v in vals):
        return
    try:
        value = SHAPE_FNS[op_type](imp, inputs, attrs, vals)
    except (IndexError, ValueError, TypeError, ZeroDivisionError):
        return
    if value is not None:
        imp.symvals[out] = np.asarray(value, dtype=object)


__all__ += ["reshape_to", "scalar", "norm_axis", "int_list", "dim_list"]
