"""FoldScaleAxis: fold per-channel scales into the weights of conv2d and dense (TVM v0.13's).

Backward folding moves a scale applied *after* a convolution or dense (``conv2d(x, w) * s``, through
``nn.bias_add``, ``add``/``subtract`` and ``nn.relu``) into the weight's output axis:
``conv2d(x, w * s')``. Forward folding moves a scale applied *before* one
(``conv2d(x * s, w)``, through ``add``/``subtract`` and ``nn.relu``) into the weight's input axis.
A scale passes through relu only when it is a non-negative constant. ``FoldScaleAxis`` runs
Backward, Forward, then FoldConstant, so constant weights come out already scaled.

As in TVM, a scale moves backward only through expressions with one user, and forward only when
every user of the scaled value can absorb it; a scale never passes through a let, an if, a tuple
or a function boundary; grouped convolutions other than depthwise are left alone, and blocked
layouts (``NCHW4c``) are not folded. Unlike TVM, dense folds only on rank-2 data (TVM sends axis 1
for any rank, which is not the feature axis of a rank-3 input), and a scale that cannot be
consumed is put back as the original multiply instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Function, If, Let, Op, Tuple
from ..ir.traversal import ExprMutator, post_order
from ..ir.types import TensorType
from .fold_constant import FoldConstant
from .infra import Sequential, function_pass

__all__ = ["ForwardFoldScaleAxis", "BackwardFoldScaleAxis", "FoldScaleAxis", "fold_scale_axis"]

# A chain of scale-carrying calls longer than this is not folded (keeps the transform's descent
# bounded; real networks have chains of a few calls between a scale and its convolution).
MAX_CHAIN = 64


@dataclass(frozen=True)
class Message:
    """The axes a value may be scaled on, and whether the scale must be non-negative."""

    axes: tuple[int, ...]
    require_positive: bool
    chain: int = 0


def _intersect(a: Message | None, b: Message | None) -> Message | None:
    if a is None or b is None:
        return None
    axes = tuple(x for x in a.axes if x in b.axes)
    if not axes:
        return None
    return Message(axes, a.require_positive or b.require_positive, max(a.chain, b.chain))


def _op(name: str, *args: Expr, **attrs) -> Call:
    return Call(Op(name), args, attrs or None)


def _name(e: Expr) -> str | None:
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


def _static(d) -> bool:
    return isinstance(d, int)


class _Types:
    def __init__(self, types) -> None:
        self.types = types

    def __call__(self, e: Expr) -> TensorType | None:
        t = self.types.get(e)
        return t if isinstance(t, TensorType) else None


def _match_broadcast(tl: TensorType, tr: TensorType, axes: tuple[int, ...], rhs: Expr | None = None):
    """TVM's MatchBroadcastToLeftAxes: ``rhs`` broadcast onto ``lhs`` varies only along ``axes``,
    where it equals lhs. Returns (ok, rhs squeezed to the axes' dims)."""
    if tl.ndim < tr.ndim:
        return False, rhs
    base = tl.ndim - tr.ndim
    if tr.ndim == 0 and rhs is not None and axes:
        if not all(_static(tl.shape[a]) for a in axes):
            return False, rhs
        rhs = _op("expand_dims", rhs, axis=0, num_newaxis=len(axes))
        for i, a in enumerate(axes):
            rhs = _op("repeat", rhs, repeats=tl.shape[a], axis=i)
        return True, rhs
    squeeze, j = [], 0
    for i in range(tl.ndim):
        if j < len(axes) and i == axes[j]:
            if i < base or tl.shape[i] != tr.shape[i - base]:
                return False, rhs
            j += 1
        elif i >= base:
            if tr.shape[i - base] != 1:
                return False, rhs
            squeeze.append(i - base)
    if rhs is not None and squeeze:
        rhs = _op("squeeze", rhs, axis=tuple(squeeze))
    return True, rhs


def _all_positive_constant(e: Expr) -> bool:
    while _name(e) in ("expand_dims", "reshape", "transpose", "squeeze", "repeat"):
        e = e.args[0]
    if not isinstance(e, Constant):
        return False
    data = np.asarray(e.data)
    if data.dtype.name not in ("float32", "float64", "int8", "int32", "uint8", "uint32"):
        return False
    return bool(np.all(data >= 0))


def _expand_to_axis(scale: Expr, ndim: int, axis: int) -> Expr:
    """TVM's ExpandBiasToMatchAxis for one axis: trailing unit axes after ``axis``."""
    pad = ndim - axis - 1
    return _op("expand_dims", scale, axis=1, num_newaxis=pad) if pad > 0 else scale


def _reshape_to_axes(scale: Expr, shape: tuple, axes: tuple[int, ...]) -> Expr | None:
    new = []
    for i, d in enumerate(shape):
        if i in axes:
            if not _static(d):
                return None
            new.append(d)
        else:
            new.append(1)
    return _op("reshape", scale, newshape=tuple(new))


def _reshape_or_expand(scale: Expr, shape: tuple, axes: tuple[int, ...]) -> Expr | None:
    if len(axes) > 1:
        return _reshape_to_axes(scale, shape, axes)
    return _expand_to_axis(scale, len(shape), axes[0])


def _conv_layouts(call: Call, out: bool):
    """(channel axis, kernel layout, depthwise?) of a conv2d with a simple layout, else None."""
    a = call.attrs
    data_layout = a.get("data_layout", "NCHW")
    layout = (a.get("out_layout") or data_layout) if out else data_layout
    kernel = a.get("kernel_layout", "OIHW")
    if any(c.islower() for c in layout + kernel) or "C" not in layout:
        return None
    return layout.index("C"), kernel


def _is_depthwise(call: Call, kernel_layout: str, wtype: TensorType | None) -> bool:
    if wtype is None or len(kernel_layout) != wtype.ndim:
        return False
    o = wtype.shape[kernel_layout.index("O")]
    i = wtype.shape[kernel_layout.index("I")]
    return o == call.attrs.get("groups", 1) and i == 1


def _conv_message(call: Call, types: _Types, out: bool) -> Message | None:
    lay = _conv_layouts(call, out)
    if lay is None:
        return None
    c, kernel = lay
    if call.attrs.get("groups", 1) == 1 or _is_depthwise(call, kernel, types(call.args[1])):
        return Message((c,), False)
    return None


def _dense_message(call: Call, types: _Types, arg: Expr) -> Message | None:
    t = types(arg)
    return Message((1,), False) if t is not None and t.ndim == 2 else None


# -- forward ----------------------------------------------------------------------------------------
_FORWARD_OPS = ("nn.relu", "nn.leaky_relu", "add", "subtract", "nn.conv2d", "nn.dense")


def _forward_prep(call: Call, out: Message | None, types: _Types) -> list[Message | None]:
    name, none = _name(call), [None] * len(call.args)
    if name in ("nn.relu", "nn.leaky_relu"):
        if out is None or out.chain >= MAX_CHAIN:
            return none
        return [Message(out.axes, True, out.chain + 1)]
    if name in ("add", "subtract"):
        tl, tr = types(call.args[0]), types(call.args[1])
        if out is None or tl is None or tr is None or out.chain >= MAX_CHAIN:
            return none
        msg = Message(out.axes, out.require_positive, out.chain + 1)
        if _match_broadcast(tl, tr, out.axes)[0]:
            return [msg, None]
        if _match_broadcast(tr, tl, out.axes)[0]:
            return [None, msg]
        return none
    if name == "nn.conv2d":
        return [_conv_message(call, types, out=False), None]
    if name == "nn.dense":
        return [_dense_message(call, types, call.args[0]), None]
    return none


def _forward_messages(func: Function, types: _Types) -> dict[Expr, Message | None]:
    messages: dict[Expr, Message | None] = {}

    def update(node: Expr, msg: Message | None) -> None:
        messages[node] = _intersect(messages[node], msg) if node in messages else msg

    update(func, None)
    for node in reversed(post_order(func)):
        if isinstance(node, Call):
            ins = _forward_prep(node, messages.get(node), types) if _name(node) else [None] * len(node.args)
            for arg, msg in zip(node.args, ins, strict=True):
                update(arg, msg)
            if not isinstance(node.op, Op):
                update(node.op, None)
        elif isinstance(node, Function):
            update(node.body, None)
        elif isinstance(node, (Let, If, Tuple)) or hasattr(node, "children"):
            for child in node.children():
                update(child, None)
    return messages


@dataclass
class _Scaled:
    """A value ``value`` that stands for ``original`` = value scaled by ``scale`` on ``axes``."""

    value: Expr
    axes: tuple[int, ...]
    scale: Expr
    original: Expr


def _real(x) -> Expr:
    return x.original if isinstance(x, _Scaled) else x


def _forward_rewrite(call: Call, args: list, msg: Message | None, types: _Types):
    name = _name(call)
    if name in ("nn.relu", "nn.leaky_relu"):
        x = args[0]
        if not isinstance(x, _Scaled):
            return None
        return _Scaled(Call(call.op, (x.value,), call.attrs), x.axes, x.scale,
                       Call(call.op, (x.original,), call.attrs))
    if name in ("add", "subtract"):
        sl, sr = (isinstance(a, _Scaled) for a in args)
        if sl == sr:
            return None
        tl, tr = types(call.args[0]), types(call.args[1])
        s = args[0] if sl else args[1]
        other = args[1] if sl else args[0]
        t_scaled, t_other = (tl, tr) if sl else (tr, tl)
        if not _match_broadcast(t_scaled, t_other, s.axes)[0]:
            return None
        scale = _reshape_or_expand(s.scale, tuple(t_scaled.shape), s.axes)
        if scale is None:
            return None
        other_div = _op("divide", other, scale)
        pair = (s.value, other_div) if sl else (other_div, s.value)
        original = (s.original, other) if sl else (other, s.original)
        return _Scaled(Call(call.op, pair, call.attrs), s.axes, s.scale, Call(call.op, original, call.attrs))
    if name == "multiply":
        if msg is None or any(isinstance(a, _Scaled) for a in args):
            return None
        tl, tr = types(call.args[0]), types(call.args[1])
        if tl is None or tr is None:
            return None
        lhs, rhs = args
        ok, scale = _match_broadcast(tl, tr, msg.axes, rhs)
        if ok and (not msg.require_positive or _all_positive_constant(scale)):
            return _Scaled(lhs, msg.axes, scale, Call(call.op, (lhs, rhs), call.attrs))
        ok, scale = _match_broadcast(tr, tl, msg.axes, lhs)
        if ok and (not msg.require_positive or _all_positive_constant(scale)):
            return _Scaled(rhs, msg.axes, scale, Call(call.op, (lhs, rhs), call.attrs))
        return None
    if name == "nn.conv2d":
        data, weight = args
        if not isinstance(data, _Scaled) or isinstance(weight, _Scaled):
            return None
        lay = _conv_layouts(call, out=False)
        if lay is None:
            return None
        _, kernel = lay
        wtype = types(call.args[1])
        axis = kernel.index("O") if _is_depthwise(call, kernel, wtype) else kernel.index("I")
        weight = _op("multiply", weight, _expand_to_axis(data.scale, len(kernel), axis))
        return Call(call.op, (data.value, weight), call.attrs)
    if name == "nn.dense":
        data, weight = args
        if not isinstance(data, _Scaled) or isinstance(weight, _Scaled):
            return None
        return Call(call.op, (data.value, _op("multiply", weight, data.scale)), call.attrs)
    return None


def forward_fold_scale_axis(func: Function, types) -> Function:
    """Fold scales that feed conv2d/dense into their weights (types: checked, of ``func``)."""
    types = _Types(types)
    messages = _forward_messages(func, types)
    if not any(m is not None for m in messages.values()):
        return func
    new: dict[Expr, object] = {}
    for node in post_order(func):
        if isinstance(node, Call):
            args = [new[a] for a in node.args]
            res = None
            if _name(node) in _FORWARD_OPS or _name(node) == "multiply":
                res = _forward_rewrite(node, args, messages.get(node), types)
            if res is None:
                res = node.with_children(tuple(_real(new[c]) for c in node.children()))
            new[node] = res
        else:
            new[node] = node.with_children(tuple(_real(new[c]) for c in node.children()))
    return _real(new[func])


# -- backward ---------------------------------------------------------------------------------------
def _ref_counts(func: Function) -> dict[Expr, int]:
    counts: dict[Expr, int] = {func: 1}
    for node in post_order(func):
        for child in node.children():
            counts[child] = counts.get(child, 0) + 1
    return counts


def _backward_prep(call: Call, ins: list[Message | None], types: _Types) -> Message | None:
    name = _name(call)
    if name in ("nn.relu", "nn.leaky_relu"):
        m = ins[0]
        return None if m is None or m.chain >= MAX_CHAIN else Message(m.axes, True, m.chain + 1)
    if name in ("add", "subtract"):
        tl, tr = types(call.args[0]), types(call.args[1])
        if tl is None or tr is None:
            return None
        a, b = ins
        if a is not None and _match_broadcast(tl, tr, a.axes)[0]:
            m = a
        elif b is not None and _match_broadcast(tr, tl, b.axes)[0]:
            m = b
        elif a is not None and b is not None and a.axes == b.axes and tuple(tl.shape) == tuple(tr.shape):
            m = a
        else:
            return None
        return None if m.chain >= MAX_CHAIN else Message(m.axes, m.require_positive, m.chain + 1)
    if name == "nn.conv2d":
        return _conv_message(call, types, out=True)
    if name == "nn.bias_add":
        m = ins[0]
        if m is not None and len(m.axes) == 1 and call.attrs.get("axis", 1) == m.axes[0] \
                and m.chain < MAX_CHAIN:
            return Message(m.axes, m.require_positive, m.chain + 1)
        return None
    if name == "nn.dense":
        return _dense_message(call, types, call)
    return None


class _Backward(ExprMutator):
    def __init__(self, messages: dict[Expr, Message], types: _Types) -> None:
        super().__init__()
        self.messages = messages
        self.types = types

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if _name(pre) != "multiply":
            return post
        tl, tr = self.types(pre.args[0]), self.types(pre.args[1])
        if tl is None or tr is None:
            return post
        for side in (0, 1):
            msg = self.messages.get(pre.args[side])
            if msg is None:
                continue
            scaled, other = pre.args[side], pre.args[1 - side]
            t_scaled, t_other = (tl, tr) if side == 0 else (tr, tl)
            ok, scale = _match_broadcast(t_scaled, t_other, msg.axes, other)
            if ok and (not msg.require_positive or _all_positive_constant(scale)):
                out = self.transform(scaled, msg, scale)
                if out is not None:
                    return out
            break
        return post

    def transform(self, e: Expr, msg: Message, scale: Expr) -> Expr | None:
        """``e`` scaled by ``scale`` on ``msg``'s axes, with the scale pushed into a weight."""
        name, t = _name(e), self.types
        if name in ("nn.relu", "nn.leaky_relu"):
            inner = self.transform(e.args[0], msg, scale)
            return None if inner is None else Call(e.op, (inner,), e.attrs)
        if name in ("add", "subtract"):
            ml, mr = self.messages.get(e.args[0]), self.messages.get(e.args[1])
            tl, tr = t(e.args[0]), t(e.args[1])
            if ml is not None and mr is not None:
                lhs, rhs = self.transform(e.args[0], msg, scale), self.transform(e.args[1], msg, scale)
                return None if lhs is None or rhs is None else Call(e.op, (lhs, rhs), e.attrs)
            if ml is not None:
                s = _reshape_or_expand(scale, tuple(tl.shape), msg.axes)
                lhs = self.transform(e.args[0], msg, scale)
                if s is None or lhs is None:
                    return None
                return Call(e.op, (lhs, _op("multiply", self.visit(e.args[1]), s)), e.attrs)
            if mr is not None:
                s = _reshape_or_expand(scale, tuple(tr.shape), msg.axes)
                rhs = self.transform(e.args[1], msg, scale)
                if s is None or rhs is None:
                    return None
                return Call(e.op, (_op("multiply", self.visit(e.args[0]), s), rhs), e.attrs)
            return None
        if name == "nn.conv2d":
            lay = _conv_layouts(e, out=True)
            if lay is None:
                return None
            _, kernel = lay
            data, weight = self.visit(e.args[0]), self.visit(e.args[1])
            weight = _op("multiply", weight, _expand_to_axis(scale, len(kernel), kernel.index("O")))
            return Call(e.op, (data, weight), e.attrs)
        if name == "nn.bias_add":
            lhs = self.transform(e.args[0], msg, scale)
            if lhs is None:
                return None
            return Call(e.op, (lhs, _op("multiply", self.visit(e.args[1]), scale)), e.attrs)
        if name == "nn.dense":
            data, weight = self.visit(e.args[0]), self.visit(e.args[1])
            return Call(e.op, (data, _op("multiply", weight, _expand_to_axis(scale, 2, 0))), e.attrs)
        return None


def backward_fold_scale_axis(func: Function, types) -> Function:
    """Fold scales applied to conv2d/dense results into their weights."""
    types = _Types(types)
    counts = _ref_counts(func)
    messages: dict[Expr, Message] = {}
    for node in post_order(func):
        if isinstance(node, Call) and _name(node) and counts.get(node, 0) == 1:
            m = _backward_prep(node, [messages.get(a) for a in node.args], types)
            if m is not None:
                messages[node] = m
    if not messages:
        return func
    return _Backward(messages, types).visit(func)


def fold_scale_axis(func: Function, types=None) -> Function:
    """Backward then forward scale folding of ``func`` (no constant folding; see FoldScaleAxis)."""
    from ..ty import infer_type_expr

    if types is None:
        types = infer_type_expr(func, with_types=True)[1]
    func = backward_fold_scale_axis(func, types)
    return forward_fold_scale_axis(func, infer_type_expr(func, with_types=True)[1])


def _checked(mod, name: str):
    if mod.checked_types is None:
        raise RelayError(f"{name} needs checked types: run InferType first")
    return mod.checked_types


def ForwardFoldScaleAxis():  # noqa: N802 - Relay's pass name
    """Fold a scale that feeds conv2d/dense into the weight's input axis."""
    return function_pass(
        lambda f, mod, ctx: forward_fold_scale_axis(f, _checked(mod, "ForwardFoldScaleAxis")),
        opt_level=3, name="ForwardFoldScaleAxis", required=["InferType"])


def BackwardFoldScaleAxis():  # noqa: N802 - Relay's pass name
    """Fold a scale applied to a conv2d/dense result into the weight's output axis."""
    return function_pass(
        lambda f, mod, ctx: backward_fold_scale_axis(f, _checked(mod, "BackwardFoldScaleAxis")),
        opt_level=3, name="BackwardFoldScaleAxis", required=["InferType"])


def FoldScaleAxis():  # noqa: N802 - Relay's pass name
    """BackwardFoldScaleAxis, ForwardFoldScaleAxis, then FoldConstant (TVM's sequence)."""
    return Sequential([BackwardFoldScaleAxis(), ForwardFoldScaleAxis(), FoldConstant()],
                      name="FoldScaleAxis")
