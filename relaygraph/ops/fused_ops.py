"""Fused operators: a conv2d or dense with its bias and activation, and short elementwise chains,
as single ops that ``rules/fusion.rules`` rewrites programs into.

Each is defined by its parts: an anchor op (whose attributes the fused op takes) followed by
steps. The type relation and the kernel run the parts' own relations and kernels in one
function; FLOPs are the sum of the parts'; bytes are only the fused op's inputs and output,
since the intermediate results never leave the kernel.

The parts are also kept as data (``definition(name)``): ``expand`` builds a fused op's body from
its parts (how ``rg.optimize`` writes fused ops as TVM's ``Primitive=1`` functions), and
``recognise`` finds a fused op in such a body (how the executor runs the group as one kernel).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Op
from ..ir.types import TensorType
from . import conv, elemwise, linear, norm, reduce, transform, winograd  # noqa: F401 - the parts, registered first
from ._base import REQUIRED, PatternKind, defop, io_bytes, norm_axis
from .inplace import relu_in_place
from .registry import lookup

__all__ = ["FUSED_OPS", "Arg", "Step", "Part", "Definition", "definition", "expand", "recognise",
           "argument_order"]

F32 = "float32"
_GELU_SCALE = np.float32(0.70710677)  # 1/sqrt(2), as float32 (BERT's constant)


def _t(shape, dtype=F32) -> TensorType:
    return TensorType(shape, dtype)


def _conv_channel_axis(attrs: dict) -> int:
    return (attrs["out_layout"] or attrs["data_layout"]).index("C")


# A step: (op name, which extra input it takes or None, attrs from the anchor's attrs)
def _bias_conv(attrs):
    return {"axis": _conv_channel_axis(attrs)}


_LAST_AXIS: dict = {"axis": -1}
_NO_ATTRS: dict = {}


def _bias_dense(attrs):
    return _LAST_AXIS


def _none(attrs):
    return _NO_ATTRS


def _gelu(y):
    from scipy.special import erf

    half = (y * np.asarray(0.5, y.dtype)).astype(y.dtype, copy=False)
    inner = erf((y * _GELU_SCALE.astype(y.dtype)).astype(y.dtype, copy=False)).astype(y.dtype)
    return (half * (np.asarray(1, y.dtype) + inner)).astype(y.dtype, copy=False)


def _gelu_parts(y: int) -> list:
    """GELU of part ``y`` as BERT writes it: (y * 0.5) * (1 + erf(y * 0.70710677))."""
    return [Part("multiply", (Step(y), np.float32(0.5)), _none),
            Part("multiply", (Step(y), _GELU_SCALE), _none),
            Part("erf", (Step(y + 2),), _none),
            Part("add", (np.float32(1), Step(y + 3)), _none),
            Part("multiply", (Step(y + 1), Step(y + 4)), _none)]


# erf by Abramowitz & Stegun 7.1.26: 1 - erf(a) = t (a1 + t (a2 + ... + t a5)) exp(-a^2) with
# t = 1 / (1 + p a) for a >= 0, to within 1.5e-7, below float32's resolution of 1 + erf. It runs
# as a few in-place numpy passes, faster than scipy's erf (about a fifth of BERT-base's time).
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# The passes run over blocks of this many elements, so that the block and its two scratch buffers
# stay in the core's cache between passes (over a whole (128, 3072) activation, each of the twenty
# passes would go to memory: measured here, blocks made the GELU about 4x faster).
GELU_BLOCK = 16384


def gelu_fast(y: np.ndarray) -> np.ndarray:
    """GELU as BERT writes it (``y * 0.5 * (1 + erf(y * 0.70710677))``) written into ``y`` (a
    writeable float array), erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26)."""
    dt = y.dtype.type
    scale = float(_GELU_SCALE)
    p = dt(_AS_P * scale)  # t = 1 / (1 + p |z|) with z = y / sqrt(2)
    half = [dt(a * 0.5) for a in _AS_A]  # q = (1 - erf(|z|)) / 2 directly
    flat = y.reshape(-1) if y.flags.c_contiguous else None
    blocks = [y] if flat is None else [flat[s:s + GELU_BLOCK] for s in range(0, flat.size, GELU_BLOCK)]
    size = max((b.size for b in blocks), default=0)
    buffers = [np.empty(size, y.dtype) for _ in range(3)]
    for block in blocks:
        t, e, q = (buf[:block.size].reshape(block.shape) for buf in buffers)
        np.multiply(block, block, out=e)
        e *= dt(-scale * scale)
        np.exp(e, out=e)  # exp(-z^2)
        np.abs(block, out=t)
        t *= p
        t += dt(1)
        np.reciprocal(t, out=t)
        # q = (1 - erf(|z|)) / 2 = t (a1 + t (a2 + ...)) exp(-z^2) / 2, by Horner's rule
        np.multiply(t, half[4], out=q)
        for a in half[3::-1]:
            q += a
            q *= t
        q *= e
        # GELU(y) = y (1 - q) for y >= 0 and y q for y < 0, since erf is odd: y times
        # 1/2 + copysign(1/2 - q, y), without a masked copy
        np.subtract(dt(0.5), q, out=q)
        np.copysign(q, block, out=q)
        q += dt(0.5)
        block *= q
    return y


def _gelu_in_place(y):
    """``y * 0.5 * (1 + erf(y / sqrt(2)))`` written into ``y`` (float32 without scipy's erf,
    see ``gelu_fast``)."""
    from scipy.special import erf

    if not (y.flags.writeable and y.dtype.kind == "f"):
        return _gelu(y)
    if y.dtype == np.float32:  # float64 keeps scipy's erf, exact to its own precision
        return gelu_fast(y)
    t = np.multiply(y, _GELU_SCALE.astype(y.dtype))
    erf(t, out=t)
    t += np.asarray(1, y.dtype)
    t *= np.asarray(0.5, y.dtype)
    y *= t
    return y


def _elementwise_in_place(ufunc):
    def run(y, other, attrs):
        other = np.asarray(other)
        if other.dtype != y.dtype or (other.shape != y.shape and not _fits(y.shape, other.shape)):
            return None  # the result would not fit in y: use the op's own kernel
        return ufunc(y, other, out=y)

    return run


def _fits(shape: tuple, other: tuple) -> bool:
    """True when an array of shape ``other`` broadcasts to ``shape`` (the result fits in place).
    Spelled out: np.broadcast_shapes took 2 us a call, more than the add it guarded on small data."""
    if len(other) > len(shape):
        return False
    for o, d in zip(reversed(other), reversed(shape), strict=False):
        if o != 1 and o != d:
            return False
    return True


def _bias_in_place(y, bias, attrs):
    axis = attrs.get("axis", 1)
    axis = axis + y.ndim if axis < 0 else axis
    if bias.dtype != y.dtype or bias.ndim != 1 or not 0 <= axis < y.ndim:
        return None
    if axis == y.ndim - 1:
        return np.add(y, bias, out=y)
    shape = [1] * y.ndim
    shape[axis] = bias.shape[0]
    return np.add(y, bias.reshape(shape), out=y)


# Steps that can update the anchor's fresh result in place: (y, extra input, attrs) -> y or None.
_IN_PLACE = {
    "nn.bias_add": _bias_in_place,
    "nn.relu": lambda y, _, attrs: relu_in_place(y),
    "add": _elementwise_in_place(np.add),
    "multiply": _elementwise_in_place(np.multiply),
    "maximum": _elementwise_in_place(np.maximum),
}


# Elementwise anchors the fused kernel calls as their ufunc, and unary steps on the anchor's fresh
# float result (the step's own kernel, in place where numpy allows it)
_ELEMENTWISE_ANCHORS = {"add": np.add, "multiply": np.multiply}
_UNARY_STEPS = {"nn.relu": relu_in_place, "tanh": lambda y: np.tanh(y, out=y),
                "sigmoid": elemwise.sigmoid}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# Anchors whose kernel returns a fresh array (np.matmul's result, or a view of it), never an input.
_FRESH_PRODUCTS = ("nn.dense", "nn.matmul")


def _is_input(y, args) -> bool:
    """True when ``y`` may share memory with an input (writing into it would change the input).
    A kernel's fresh result is often a reshaped view of its own buffer, which is safe to write."""
    if type(y) is np.ndarray and y.base is None:
        # y owns its buffer: only y itself or a view of it can share it. Checked by identity, as
        # np.may_share_memory per input cost more than the relu step on small data (a dense, a
        # bias and a relu fused on (1, 64) ran slower than the three ops apart)
        for a in args:
            if a is y or (type(a) is np.ndarray and a.base is y):
                return True
        return False
    for a in args:
        if y is a or (type(a) is np.ndarray and np.may_share_memory(y, a)):
            return True
    return False


# -- a fused op's definition as data -------------------------------------------------------------
class Arg(NamedTuple):
    """A part's input: the fused op's argument ``index``."""

    index: int


class Step(NamedTuple):
    """A part's input: the result of the definition's part ``index`` (an earlier one)."""

    index: int


class Part(NamedTuple):
    """One op of a fused op's definition: its inputs (``Arg``, ``Step`` or a numpy scalar, a
    constant) and its attrs as a function of the fused op's resolved attrs."""

    op: str
    inputs: tuple
    attrs: object  # Callable[[dict], dict]


class Definition(NamedTuple):
    """A fused op as its parts in order (the last is the result), and the inverse of the attrs
    mapping: the fused op's attrs from its parts' resolved attrs."""

    parts: tuple
    attrs_from_parts: object  # Callable[[list[dict]], dict]


_DEFINITIONS: dict[str, Definition] = {}
_BY_RESULT: dict[str, list[str]] = {}  # the op of a definition's last part -> fused ops


def _define(name: str, parts: list, attrs_from_parts) -> None:
    _DEFINITIONS[name] = Definition(tuple(parts), attrs_from_parts)
    same_result = _BY_RESULT.setdefault(parts[-1].op, [])
    same_result.append(name)
    # the longest definition first: relu(multiply(a, b) + c) is multiply_add_relu, not add_relu
    same_result.sort(key=lambda n: -len(_DEFINITIONS[n].parts))


def definition(name: str) -> Definition | None:
    """The parts of fused op ``name`` (None for an op that is not a fused op)."""
    return _DEFINITIONS.get(name)


def expand(name: str, args, attrs=None) -> Expr:
    """The body of fused op ``name`` on ``args`` (expressions): its parts as calls of their ops."""
    d = _DEFINITIONS.get(name)
    if d is None:
        raise RelayError(f"{name} is not a fused op with a definition (known: {', '.join(_DEFINITIONS)})")
    record = lookup(name)
    if len(args) != record.num_inputs:
        raise RelayError(f"{name} takes {record.num_inputs} argument(s), given {len(args)}")
    full = record.resolve(attrs)
    built: list = []
    for part in d.parts:
        inputs = tuple(args[r.index] if type(r) is Arg else built[r.index] if type(r) is Step
                       else Constant(r) for r in part.inputs)
        built.append(Call(Op(part.op), inputs, lookup(part.op).canonical_attrs(part.attrs(full))))
    return built[-1]


def argument_order(name: str) -> list[int]:
    """The fused op's argument indices in the order TVM's FuseOps makes a group's parameters:
    post-order from the result, inputs left to right, each argument at the part that reads it."""
    parts = _DEFINITIONS[name].parts
    order: list[int] = []
    done: set[int] = set()
    stack: list = [(len(parts) - 1, False)]
    while stack:
        j, expanded = stack.pop()
        if expanded:
            order.extend(r.index for r in parts[j].inputs if type(r) is Arg and r.index not in order)
            continue
        if j in done:
            continue
        done.add(j)
        stack.append((j, True))
        stack.extend((r.index, False) for r in reversed(parts[j].inputs) if type(r) is Step)
    return order


def recognise(body: Expr) -> tuple | None:
    """``(name, attrs, args)`` when ``body`` is exactly a fused op's definition applied to ``args``
    (the expressions standing for its arguments), else None."""
    if type(body) is not Call or type(body.op) is not Op:
        return None
    for name in _BY_RESULT.get(body.op.name, ()):
        hit = _match(name, _DEFINITIONS[name], body)
        if hit is not None:
            return hit
    return None


def _match(name: str, d: Definition, body: Call) -> tuple | None:
    parts = d.parts
    nodes: list = [None] * len(parts)
    nodes[-1] = body
    args: dict[int, Expr] = {}
    for j in range(len(parts) - 1, -1, -1):  # a part's inputs are earlier parts: assigned first
        node, part = nodes[j], parts[j]
        if (type(node) is not Call or type(node.op) is not Op or node.op.name != part.op
                or len(node.args) != len(part.inputs)):
            return None
        for ref, value in zip(part.inputs, node.args, strict=True):
            if type(ref) is Step:
                if nodes[ref.index] is None:
                    nodes[ref.index] = value
                elif nodes[ref.index] is not value:
                    return None
            elif type(ref) is Arg and args.setdefault(ref.index, value) is not value:
                return None
    record = lookup(name)
    if sorted(args) != list(range(record.num_inputs)):
        return None
    try:
        attrs = record.canonical_attrs(d.attrs_from_parts(
            [lookup(p.op).resolve(n.attrs) for p, n in zip(parts, nodes, strict=True)]))
        ordered = tuple(args[i] for i in range(record.num_inputs))
        # The attrs each part derives from the fused op's must be the ones the body has.
        return (name, attrs, ordered) if expand(name, ordered, attrs) is body else None
    except RelayError:
        return None


def _first(parts_attrs: list) -> dict:
    return parts_attrs[0]


def _second(parts_attrs: list) -> dict:
    return parts_attrs[1]


def _same_attrs(attrs: dict) -> dict:
    return attrs


_WINOGRAD = "nn.contrib_conv2d_winograd_without_weight_transform"


def _winograd_with_epilogue(args, attrs, step_ops):
    """A Winograd convolution with its channel bias and/or relu in its own kernel
    (``winograd.winograd_conv2d``), or None when the dtypes ask for the general path."""
    x, u = args[0], args[1]
    bias = args[2] if step_ops[0] == "nn.bias_add" else None
    if x.dtype.kind != "f" or u.dtype != x.dtype or (attrs.get("out_dtype") or x.dtype) != x.dtype:
        return None
    if bias is not None and (bias.dtype != x.dtype or bias.ndim != 1):
        return None
    return winograd.winograd_conv2d(x, u, conv.pad4(attrs["padding"]), bias, step_ops[-1] == "nn.relu")


def _make(name: str, anchor: str | None, n_anchor: int, steps: list, extra_names: tuple,
          examples: tuple, gelu: bool = False, doc: str = "") -> None:
    """Register ``fused.<name>``: the anchor op, then ``steps`` (op, takes an extra input, attrs)."""
    anchor_op = lookup(anchor)
    n_extra = sum(1 for _, takes, _ in steps if takes)

    def run_rel(arg_types, attrs):
        t = anchor_op.type_relation(arg_types[:n_anchor], attrs)
        types = [t]
        k = n_anchor
        for op, takes, step_attrs in steps:
            inputs = [t] + ([arg_types[k]] if takes else [])
            k += takes
            t = lookup(op).type_relation(inputs, step_attrs(attrs))
            types.append(t)
        return t, types

    def rel(arg_types, attrs):
        return run_rel(arg_types, attrs)[0]

    anchor_kernel = anchor_op.extra["resolved_kernel"]
    # Per step: takes an extra input, its attrs from the fused op's, the in-place update, the op.
    plan = [(takes, step_attrs, _IN_PLACE.get(op), lookup(op)) for op, takes, step_attrs in steps]

    # A depthwise convolution with a channel bias and/or relu runs them per block, in cache.
    step_ops = [op for op, _, _ in steps]
    blocked = anchor == "nn.conv2d" and not gelu and step_ops in (
        ["nn.bias_add"], ["nn.relu"], ["nn.bias_add", "nn.relu"], ["maximum"])
    # A Winograd convolution takes its bias and relu inside its own transforms.
    epilogue_in_winograd = anchor == _WINOGRAD and step_ops in (
        ["nn.bias_add"], ["nn.relu"], ["nn.bias_add", "nn.relu"])

    # A product with its bias and/or relu: the product's result is always a fresh array of its
    # own (np.matmul's), so the steps write into it with no check of where it came from, one
    # ufunc call each. At (1, 64) the general path below took 7.1 us where the three ops looped
    # apart took 6.5 and the product alone 2.2: its checks cost more than fusing saves.
    lean = anchor in _FRESH_PRODUCTS and not gelu and step_ops in (
        ["nn.bias_add"], ["nn.relu"], ["nn.bias_add", "nn.relu"])
    lean_bias, lean_relu = step_ops[0] == "nn.bias_add", step_ops[-1] == "nn.relu"

    def lean_kernel(args, attrs):
        y = anchor_kernel(args[:2], attrs)
        if lean_bias:
            bias = args[2]
            if type(bias) is not np.ndarray or bias.ndim != 1 or bias.dtype != y.dtype:
                return run_steps(y, args, attrs)  # the steps as the general path runs them
            np.add(y, bias, out=y)
        if lean_relu:
            relu_in_place(y)
        return y

    def general(args, attrs):
        if epilogue_in_winograd:
            y = _winograd_with_epilogue(args, attrs, step_ops)
            if y is not None:
                return y
        if blocked and attrs.get("groups", 1) != 1:
            bias = args[2] if step_ops[0] == "nn.bias_add" else None
            floor = args[2] if step_ops[0] == "maximum" else None
            y, relu = None, step_ops[-1] == "nn.relu"
            if attrs["data_layout"] == "NHWC":  # channels-last: the epilogue per block of rows
                y = conv.depthwise_nhwc_with_epilogue(args[0], args[1], attrs, bias, relu, floor)
            elif bias is None or _conv_channel_axis(attrs) == 1:
                y = conv.depthwise_with_epilogue(args[0], args[1], attrs, bias, relu, floor)
            if y is not None:
                return y
        # The anchor's result is a fresh array; the steps update it in place where they can, so
        # the whole group makes one output and at most one temporary (that is what fusing buys).
        y = np.asarray(anchor_kernel(args[:n_anchor], attrs))
        flags = y.flags
        if not flags.writeable or _is_input(y, args):
            y = np.array(y)  # never write into an input
        return run_steps(y, args, attrs)

    def run_steps(y, args, attrs):
        """The steps after the anchor on its result ``y``, in place where they can be."""
        k = n_anchor
        for takes, step_attrs, fast, op in plan:
            extra = args[k] if takes else None
            k += takes
            done = fast(y, extra, step_attrs(attrs)) if fast is not None else None
            if done is None:
                done = op.kernel([y] + ([extra] if takes else []), step_attrs(attrs))
            y = done
        return _gelu_in_place(y) if gelu else y

    # An elementwise anchor on two arrays of one float dtype, then unary steps: the anchor's ufunc
    # makes a fresh result and each step runs on it directly, with none of the general path's
    # checks. At (1, 512) those checks made add-then-sigmoid fused take 14.6 us against 10.9 for
    # the add and sigmoid kernels apart.
    elem_ufunc = _ELEMENTWISE_ANCHORS.get(anchor) if n_anchor == 2 and not gelu else None
    unary = [_UNARY_STEPS.get(op) for op in step_ops] if elem_ufunc is not None else [None]

    def elementwise_kernel(args, attrs):
        a, b = args
        if not (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype
                and a.dtype in _FLOATS):
            return general(args, attrs)
        y = elem_ufunc(a, b)
        if type(y) is not np.ndarray:  # 0-d inputs: numpy returns a scalar
            y = np.asarray(y)
        for step in unary:
            y = step(y)
        return y

    if elem_ufunc is not None and None not in unary:
        kernel = elementwise_kernel
    else:
        kernel = lean_kernel if lean else general

    def flops(arg_types, out_type, attrs):
        _, types = run_rel(arg_types, attrs)
        total = anchor_op.flops(arg_types[:n_anchor], types[0], attrs)
        k = n_anchor
        for (op, takes, step_attrs), before, after in zip(steps, types[:-1], types[1:], strict=True):
            inputs = [before] + ([arg_types[k]] if takes else [])
            k += takes
            total = total + lookup(op).flops(inputs, after, step_attrs(attrs))
        if gelu:
            for part in _gelu_parts(0):
                total = total + lookup(part.op).flops([out_type, out_type], out_type, {})
        return total

    inputs = tuple(anchor_op.input_names[:n_anchor]) + extra_names
    assert len(inputs) == n_anchor + n_extra
    parts = [Part(anchor, tuple(Arg(i) for i in range(n_anchor)), _same_attrs)]
    k = n_anchor
    for op, takes, step_attrs in steps:
        parts.append(Part(op, (Step(len(parts) - 1),) + ((Arg(k),) if takes else ()), step_attrs))
        k += takes
    if gelu:
        parts.extend(_gelu_parts(len(parts) - 1))
    _define(f"fused.{name}", parts, _first)
    defop(f"fused.{name}", n_anchor + n_extra, dict(anchor_op.attrs), rel, kernel,
          PatternKind.OUT_ELEMWISE_FUSABLE, flops=flops, bytes=io_bytes,
          domain=anchor_op.domain if isinstance(anchor_op.domain, str) else "any",
          input_names=inputs, py_defaults=dict(anchor_op.py_defaults),
          normalize=anchor_op.normalize, infer_inputs=None, examples=examples, doc=doc)


_CONV_EX = (
    ([_t((1, 3, 8, 8)), _t((4, 3, 3, 3))], {}),
    ([_t((2, 3, 9, 7)), _t((4, 3, 3, 3))], {"padding": (1, 1), "strides": (2, 2)}),
    ([_t((1, 4, 6, 6)), _t((6, 2, 3, 3))], {"groups": 2, "channels": 6, "kernel_size": (3, 3)}),
)
_DENSE_EX = (
    ([_t((2, 8)), _t((5, 8))], {}),
    ([_t((3, 2, 4)), _t((6, 4))], {"units": 6}),
)


def _with(examples, extra):
    """Examples of the anchor with extra inputs appended (shaped from the anchor's output)."""
    out = []
    for types, attrs in examples:
        channels = types[1].shape[0]
        out.append(([*types, *[f(channels) for f in extra]], attrs))
    return tuple(out)


def _vec(c):
    return _t((c,))


_make("conv2d_bias", "nn.conv2d", 2, [("nn.bias_add", True, _bias_conv)], ("bias",),
      _with(_CONV_EX, [_vec]), doc="nn.conv2d then nn.bias_add on the channel axis")
_make("conv2d_relu", "nn.conv2d", 2, [("nn.relu", False, _none)], (),
      _with(_CONV_EX, []), doc="nn.conv2d then nn.relu")
_make("conv2d_bias_relu", "nn.conv2d", 2,
      [("nn.bias_add", True, _bias_conv), ("nn.relu", False, _none)], ("bias",),
      _with(_CONV_EX, [_vec]), doc="nn.conv2d, nn.bias_add on the channel axis, nn.relu")
_make("conv2d_add", "nn.conv2d", 2, [("add", True, _none)], ("addend",),
      _with(_CONV_EX, [lambda c: _t((1, c, 1, 1))]),
      doc="nn.conv2d then add (a residual connection), added in place on the convolution's output")
_make("conv2d_maximum", "nn.conv2d", 2, [("maximum", True, _none)], ("floor",),
      _with(_CONV_EX, [lambda c: _t((c, 1, 1))]),
      doc="nn.conv2d then maximum with a per-channel floor (a folded batch norm's relu whose shift "
          "moved on: maximum(conv, -t)), in place; per block in cache for a depthwise convolution")
_WINOGRAD_EX = (
    ([_t((1, 3, 8, 8)), _t((4, 4, 5, 3))], {"tile_size": 2, "padding": (1, 1)}),
    ([_t((2, 2, 7, 6)), _t((4, 4, 3, 2))], {"tile_size": 2}),
)


def _with_winograd(extra):
    return tuple(([*types, *[f(types[1].shape[2]) for f in extra]], attrs) for types, attrs in _WINOGRAD_EX)


_make("winograd_bias", _WINOGRAD, 2, [("nn.bias_add", True, _bias_conv)], ("bias",),
      _with_winograd([_vec]), doc="Winograd conv2d then nn.bias_add on the channel axis")
_make("winograd_relu", _WINOGRAD, 2, [("nn.relu", False, _none)], (),
      _with_winograd([]), doc="Winograd conv2d then nn.relu")
_make("winograd_bias_relu", _WINOGRAD, 2,
      [("nn.bias_add", True, _bias_conv), ("nn.relu", False, _none)], ("bias",),
      _with_winograd([_vec]), doc="Winograd conv2d, nn.bias_add on the channel axis, nn.relu")
_make("dense_bias", "nn.dense", 2, [("nn.bias_add", True, _bias_dense)], ("bias",),
      _with(_DENSE_EX, [_vec]), doc="nn.dense then nn.bias_add on the last axis")
_make("dense_relu", "nn.dense", 2, [("nn.relu", False, _none)], (),
      _with(_DENSE_EX, []), doc="nn.dense then nn.relu")
_make("dense_bias_relu", "nn.dense", 2,
      [("nn.bias_add", True, _bias_dense), ("nn.relu", False, _none)], ("bias",),
      _with(_DENSE_EX, [_vec]), doc="nn.dense, nn.bias_add on the last axis, nn.relu")
_make("dense_bias_gelu", "nn.dense", 2, [("nn.bias_add", True, _bias_dense)], ("bias",),
      _with(_DENSE_EX, [_vec]), gelu=True,
      doc="nn.dense, nn.bias_add, then GELU as BERT writes it: (y*0.5) * (1 + erf(y*0.70710677))")

# The same with the weight stored (K, N): a product whose weight is laid out as the GEMM reads it
# (rules/cpu.rules moves bound dense weights into this layout).
_MATMUL_BIAS_EX = (([_t((2, 8)), _t((8, 5)), _t((5,))], {}),
                   ([_t((3, 2, 4)), _t((4, 6)), _t((6,))], {"units": 6}))
_make("matmul_bias", "nn.matmul", 2, [("nn.bias_add", True, _bias_dense)], ("bias",),
      _MATMUL_BIAS_EX, doc="nn.matmul then nn.bias_add on the last axis")
_make("matmul_bias_gelu", "nn.matmul", 2, [("nn.bias_add", True, _bias_dense)], ("bias",),
      _MATMUL_BIAS_EX, gelu=True,
      doc="nn.matmul, nn.bias_add, then GELU as BERT writes it: (y*0.5) * (1 + erf(y*0.70710677))")

_ELEM_EX = (([_t((2, 3, 4)), _t((3, 1))], {}), ([_t((4,)), _t((4,))], {}))
_make("add_relu", "add", 2, [("nn.relu", False, _none)], (), _ELEM_EX,
      doc="add then nn.relu")
_make("add_tanh", "add", 2, [("tanh", False, _none)], (), _ELEM_EX, doc="add then tanh")
_make("add_sigmoid", "add", 2, [("sigmoid", False, _none)], (), _ELEM_EX, doc="add then sigmoid")
_make("multiply_add", "multiply", 2, [("add", True, _none)], ("addend",),
      (([_t((2, 3, 4)), _t((3, 1)), _t((4,))], {}), ([_t((4,)), _t((4,)), _t((4,))], {})),
      doc="multiply then add (a * b + c)")
_make("multiply_add_relu", "multiply", 2, [("add", True, _none), ("nn.relu", False, _none)], ("addend",),
      (([_t((2, 3, 4, 4)), _t((3, 1, 1)), _t((3, 1, 1))], {}), ([_t((4,)), _t((4,)), _t((4,))], {})),
      doc="multiply, add, nn.relu (an inference batch norm as scale and shift, and the relu after it)")
_make("multiply_maximum", "multiply", 2, [("maximum", True, _none)], ("floor",),
      (([_t((2, 3, 4, 4)), _t((3, 1, 1)), _t((3, 1, 1))], {}), ([_t((4,)), _t((4,)), _t((4,))], {})),
      doc="multiply then maximum (relu(a * s + t) is maximum(a * s, -t) + t: the + t may move on)")


# -- a residual add with the layer norm after it, a scale with the softmax after it --------------
def _pair(name: str, first: str, second: str, n_second_extra: int, kernel, input_names: tuple,
          examples: tuple, doc: str) -> None:
    """Register ``fused.<name>``: ``second(first(a, b), *extra, **attrs)``, taking ``second``'s attrs."""
    first_op, second_op = lookup(first), lookup(second)

    def types(arg_types, attrs):
        t = first_op.type_relation(arg_types[:2])
        return t, second_op.type_relation([t, *arg_types[2:]], attrs)

    def flops(arg_types, out_type, attrs):
        t, _ = types(arg_types, attrs)
        return (first_op.flops(arg_types[:2], t)
                + second_op.flops([t, *arg_types[2:]], out_type, attrs))

    _define(f"fused.{name}", [Part(first, (Arg(0), Arg(1)), _none),
                              Part(second, (Step(0), *(Arg(2 + i) for i in range(n_second_extra))),
                                   _same_attrs)], _second)
    defop(f"fused.{name}", 2 + n_second_extra, dict(second_op.attrs), lambda a, attrs: types(a, attrs)[1],
          kernel, PatternKind.OPAQUE, flops=flops, bytes=io_bytes, input_names=input_names,
          examples=examples, doc=doc)


def _add_layer_norm_f32(s, gamma, beta, attrs):
    """Layer norm over the last axis of ``s`` (a fresh float32 sum), in place in float32: numpy's
    sums along a contiguous axis are pairwise, so the mean and the variance of the centred
    values stay within a few ulp over BERT's 768-wide rows, and there is no float64 copy (the
    fused kernel then runs in a third of nn.layer_norm's time at BERT-base width, measured)."""
    n = s.shape[-1]
    inv_n = np.float32(1.0 / n)
    mean = np.add.reduce(s, axis=-1, keepdims=True)
    mean *= inv_n
    s -= mean
    var = np.add.reduce(np.square(s), axis=-1, keepdims=True)
    var *= inv_n
    var += np.float32(attrs["epsilon"])
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    s *= var
    if attrs["scale"]:
        s *= gamma
    if attrs["center"]:
        s += beta
    return s


def _add_layer_norm_kernel(args, attrs):
    a, b, gamma, beta = args
    if (a.dtype == b.dtype == gamma.dtype == beta.dtype == np.float32 and a.ndim >= 1
            and norm_axis(attrs["axis"], a.ndim) == a.ndim - 1 and a.shape[-1] > 0
            and np.broadcast_shapes(a.shape, b.shape) == a.shape):
        return _add_layer_norm_f32(np.add(a, b), gamma, beta, attrs)
    if a.dtype == b.dtype and a.dtype.kind == "f" and (
            a.shape == b.shape or np.broadcast_shapes(a.shape, b.shape) == a.shape):
        # The sum is rounded as add rounds it, then widened into the buffer the norm works in.
        return norm.layer_norm_core(np.add(a, b).astype(np.float64), gamma, beta, attrs, a.dtype)
    x = lookup("add").kernel([a, b])
    return lookup("nn.layer_norm").extra["resolved_kernel"]([x, gamma, beta], attrs)


def _multiply_softmax_kernel(args, attrs):
    data, scale = args
    if data.dtype == scale.dtype and data.dtype.kind == "f" and scale.ndim == 0:
        return reduce.softmax_in_place(np.multiply(data, scale), attrs["axis"])
    return lookup("nn.softmax").extra["resolved_kernel"]([lookup("multiply").kernel(args)], attrs)


_pair("add_layer_norm", "add", "nn.layer_norm", 2, _add_layer_norm_kernel,
      ("lhs", "rhs", "gamma", "beta"),
      (([_t((2, 3, 8)), _t((2, 3, 8)), _t((8,)), _t((8,))], {}),
       ([_t((4, 6, 2)), _t((6, 1)), _t((6,)), _t((6,))], {"axis": 1, "epsilon": 1e-3})),
      doc="add then nn.layer_norm (a residual connection and the norm after it, as in BERT)")
_pair("multiply_softmax", "multiply", "nn.softmax", 0, _multiply_softmax_kernel, ("data", "scale"),
      (([_t((2, 3, 4)), _t(())], {}), ([_t((2, 5)), _t((2, 1))], {"axis": 0})),
      doc="multiply then nn.softmax (attention scores scaled, then normalised)")


# -- reshape, transpose, reshape: how attention splits and merges heads ---------------------------
_RTR_ATTRS = {"newshape": REQUIRED, "allowzero": False, "axes": REQUIRED, "newshape2": REQUIRED,
              "allowzero2": False}


def _rtr_parts(attrs):
    return ({"newshape": attrs["newshape"], "allowzero": attrs["allowzero"]}, {"axes": attrs["axes"]},
            {"newshape": attrs["newshape2"], "allowzero": attrs["allowzero2"]})


def _rtr_rel(args, attrs):
    first, perm, second = _rtr_parts(attrs)
    t = lookup("reshape").type_relation(args, first)
    return lookup("reshape").type_relation([lookup("transpose").type_relation([t], perm)], second)


def _rtr_kernel(args, attrs):
    x = args[0]
    y = x.reshape(transform.concrete_reshape(x.shape, attrs["newshape"], attrs["allowzero"]))
    y = np.transpose(y, transform._axes(y.ndim, attrs["axes"]))  # transpose's own reading of axes
    return y.reshape(transform.concrete_reshape(y.shape, attrs["newshape2"], attrs["allowzero2"]))


def _rtr_normalize(attrs):
    for key in ("newshape", "newshape2", "axes"):
        if attrs.get(key) is not None:
            attrs[key] = tuple(int(v) for v in attrs[key])
    return attrs


def _rtr_attrs(parts_attrs: list) -> dict:
    first, perm, second = parts_attrs
    return {"newshape": first["newshape"], "allowzero": first["allowzero"], "axes": perm["axes"],
            "newshape2": second["newshape"], "allowzero2": second["allowzero"]}


_define("fused.reshape_transpose_reshape",
        [Part("reshape", (Arg(0),), lambda attrs: _rtr_parts(attrs)[0]),
         Part("transpose", (Step(0),), lambda attrs: _rtr_parts(attrs)[1]),
         Part("reshape", (Step(1),), lambda attrs: _rtr_parts(attrs)[2])], _rtr_attrs)
defop("fused.reshape_transpose_reshape", 1, _RTR_ATTRS, _rtr_rel, _rtr_kernel, PatternKind.INJECTIVE,
      input_names=("data",), normalize=_rtr_normalize,
      examples=(([_t((6, 8))], {"newshape": (1, 6, 2, 4), "axes": (0, 2, 1, 3), "newshape2": (2, 6, 4)}),
                ([_t((2, 3, 4))], {"newshape": (0, -1), "axes": (1, 0), "newshape2": (-1,)})),
      doc="reshape, transpose, reshape in one step (how attention splits its heads and merges them)")

FUSED_OPS = ("fused.conv2d_bias", "fused.conv2d_relu", "fused.conv2d_bias_relu", "fused.dense_bias",
             "fused.dense_relu", "fused.dense_bias_relu", "fused.dense_bias_gelu", "fused.matmul_bias",
             "fused.matmul_bias_gelu", "fused.add_relu",
             "fused.add_tanh", "fused.add_sigmoid", "fused.multiply_add",
             "fused.add_layer_norm", "fused.multiply_softmax", "fused.reshape_transpose_reshape",
             "fused.winograd_bias", "fused.winograd_relu", "fused.winograd_bias_relu", "fused.conv2d_add",
             "fused.multiply_add_relu", "fused.multiply_maximum", "fused.conv2d_maximum")
