"""CombineParallelConv2D, CombineParallelDense, CombineParallelBatchMatmul (TVM v0.13's).

Branches that start with the same op on the same data (``conv2d(%x, %w1)``, ``conv2d(%x, %w2)``,
...) are combined into one wider op when at least ``min_num_branches`` of them can be. A branch
is the op followed by the chain of broadcast or elementwise calls that each have exactly one
call user; the following ops are combined level by level while every branch has the same op,
attrs and compatible arguments at that level. Each branch's last combined node is replaced by
its slice of the combined result:

- conv2d: weights concatenated on the kernel's ``O`` axis, outputs sliced on the channel axis;
- dense: to one ``nn.batch_matmul`` over stacked inputs and weights (``to_batch=True``, the
  default, as TVM's), or to one dense over concatenated weights sliced on the last axis;
- batch_matmul (``transpose_b`` only, as TVM's): weights concatenated on axis 1.

All three are opt_level 4 in TVM, so its opt_level-3 build does not run them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RelayError
from ..ir.expr import Call, Expr, Op, Tuple, TupleGetItem
from ..ir.traversal import ExprMutator, iter_post_order
from ..ir.types import TensorType
from ..ops.registry import PatternKind, lookup
from .infra import PassError, function_pass

__all__ = ["CombineParallelConv2D", "CombineParallelDense", "CombineParallelBatchMatmul",
           "CombineParallelOpBatch", "combine_parallel"]


def _op(name: str, *args: Expr, **attrs) -> Call:
    return Call(Op(name), args, attrs or None)


def _is_op(e: Expr, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _pattern(call: Call) -> PatternKind:
    opdef = lookup(call.op.name) if isinstance(call.op, Op) else None
    return opdef.pattern if opdef is not None else PatternKind.OPAQUE


def _concat(fields: list[Expr], axis: int) -> Call:
    return _op("concatenate", Tuple(tuple(fields)), axis=axis)


def _stack(fields: list[Expr], axis: int) -> Call:
    return _op("stack", Tuple(tuple(fields)), axis=axis)


def _slice(data: Expr, axis: int, begin: int, size: int) -> Call:
    # TVM's: begin 0 / size -1 ("to the end") on the leading axes, ``slice_mode="size"``.
    begins = [0] * (axis + 1)
    ends = [-1] * (axis + 1)
    begins[axis], ends[axis] = begin, size
    return _op("strided_slice", data, begin=tuple(begins), end=tuple(ends), strides=(1,) * (axis + 1),
               slice_mode="size", axes=None)


@dataclass
class _Combiner:
    """One combining strategy: which op, which calls qualify, and how a group is rebuilt."""

    op_name: str
    min_num_branches: int
    types: object

    # -- types ----------------------------------------------------------------------------------
    def ttype(self, e: Expr) -> TensorType:
        t = self.types.get(e) if self.types is not None else None
        if not isinstance(t, TensorType):
            raise _Skip
        return t

    def shape(self, e: Expr) -> tuple:
        return tuple(self.ttype(e).shape)

    # -- what the subclasses say ---------------------------------------------------------------
    def supported(self, call: Call) -> bool:
        return True

    def can_combine(self, a: Call, b: Call) -> bool:
        raise NotImplementedError

    def arg_compatible(self, a: Call, b: Call, index: int) -> bool:
        raise NotImplementedError

    def combined_op(self, branches: list[list[Call]]) -> Expr:
        raise NotImplementedError

    def combined_following(self, data: Expr, branches: list[list[Call]], depth: int,
                           parent: int) -> Expr:
        raise NotImplementedError

    def outputs(self, data: Expr, branches: list[list[Call]], depth: int) -> dict[Expr, Expr]:
        raise NotImplementedError

    # -- TVM's ParallelOpCombiner ----------------------------------------------------------------
    def find_groups(self, expr: Expr) -> list[list[list[Call]]]:
        children: dict[Expr, list[Call]] = {}
        roots: dict[Expr, None] = {}
        for node in iter_post_order(expr):
            if not isinstance(node, Call):
                continue
            if _is_op(node, self.op_name) and self._supported(node):
                roots.setdefault(node.args[0])
                children.setdefault(node.args[0], []).append(node)
            else:
                for a in node.args:
                    children.setdefault(a, []).append(node)
        groups: list[list[list[Call]]] = []
        for root in roots:
            first = len(groups)
            for child in children.get(root, ()):
                if not _is_op(child, self.op_name):
                    continue
                branch = self._branch(child, children)
                for group in groups[first:]:
                    if self._can_combine(child, group[0][0]):
                        group.append(branch)
                        break
                else:
                    groups.append([branch])
        return groups

    def _supported(self, call: Call) -> bool:
        try:
            return self.supported(call)
        except _Skip:
            return False

    def _can_combine(self, a: Call, b: Call) -> bool:
        try:
            return self.can_combine(a, b)
        except _Skip:
            return False

    @staticmethod
    def _branch(op: Call, children: dict[Expr, list[Call]]) -> list[Call]:
        branch = [op]
        users = children.get(op)
        while users is not None and len(users) == 1:
            call = users[0]
            if not isinstance(call.op, Op) or _pattern(call) > PatternKind.BROADCAST:
                break
            branch.append(call)
            users = children.get(call)
        return branch

    def check_level(self, branches: list[list[Call]], depth: int, parent: int) -> bool:
        call = branches[0][depth]
        for branch in branches[1:]:
            other = branch[depth]
            if other.op != call.op or other.attrs != call.attrs or len(other.args) != len(call.args):
                return False
            if other.args[parent] is not branch[depth - 1]:
                return False
            for i in range(len(call.args)):
                if i != parent and not self.arg_compatible(call, other, i):
                    return False
        return True

    def combine(self, expr: Expr) -> Expr:
        subst: dict[Expr, Expr] = {}
        for group in self.find_groups(expr):
            if len(group) < self.min_num_branches:
                continue
            try:
                subst.update(self._combine_group(group))
            except _Skip:
                continue
        if not subst:
            return expr
        return _Substitute(subst).visit(expr)

    def _combine_group(self, branches: list[list[Call]]) -> dict[Expr, Expr]:
        combined = self.combined_op(branches)
        depth = min(len(b) for b in branches)
        i = 1
        while i < depth:
            call, below = branches[0][i], branches[0][i - 1]
            parent = next((k for k, a in enumerate(call.args) if a is below), None)
            if parent is None or not self.check_level(branches, i, parent):
                break
            combined = self.combined_following(combined, branches, i, parent)
            i += 1
        return self.outputs(combined, branches, i - 1)


class _Skip(Exception):
    """A group whose types are not all known is left alone."""


class _Substitute(ExprMutator):
    """Replace nodes by their combined slices; replacements are rewritten too (a later group's
    data may be an earlier group's output)."""

    def __init__(self, subst: dict[Expr, Expr]) -> None:
        super().__init__()
        self.subst = subst

    def pre_rewrite(self, node):
        target = self.subst.get(node)
        return None if target is None else self.visit(target)


# -- conv2d ---------------------------------------------------------------------------------------
class _Conv2D(_Combiner):
    def __init__(self, min_num_branches: int, types) -> None:
        super().__init__("nn.conv2d", min_num_branches, types)
        self.channel_pos = 1

    def supported(self, call: Call) -> bool:
        return call.attrs.get("groups", 1) == 1

    def _oihw(self, call: Call) -> tuple:
        layout = call.attrs.get("kernel_layout", "OIHW")
        shape = self.shape(call.args[1])
        return tuple(shape[layout.index(c)] for c in "OIHW")

    def can_combine(self, a: Call, b: Call) -> bool:
        keys = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_dtype",
                "out_layout")
        if any(a.attrs.get(k) != b.attrs.get(k) for k in keys):
            return False
        sa, sb = self._oihw(a), self._oihw(b)
        return sa[2] == sb[2] and sa[3] == sb[3]

    def _channels(self, conv: Call) -> int:
        c = self._oihw(conv)[0]
        if not isinstance(c, int):
            raise _Skip
        return c

    def combined_op(self, branches):
        root = branches[0][0]
        layout = root.attrs.get("kernel_layout", "OIHW")
        weights = [b[0].args[1] for b in branches]
        channels = sum(self._channels(b[0]) for b in branches)
        out_layout = root.attrs.get("out_layout") or root.attrs.get("data_layout", "NCHW")
        self.channel_pos = out_layout.index("C")
        attrs = dict(root.attrs)
        attrs["channels"] = channels
        return Call(Op("nn.conv2d"), (root.args[0], _concat(weights, layout.index("O"))), attrs)

    def arg_compatible(self, a, b, index):
        ta, tb = self.ttype(a.args[index]), self.ttype(b.args[index])
        out_a, out_b = self.ttype(a), self.ttype(b)
        if ta.dtype != tb.dtype or ta.ndim != tb.ndim:
            return False
        pos = self.channel_pos - out_a.ndim + ta.ndim
        if pos < 0 or pos > self.channel_pos:
            return False
        if ta.shape[pos] != out_a.shape[self.channel_pos] or tb.shape[pos] != out_b.shape[self.channel_pos]:
            return False
        return all(ta.shape[i] == tb.shape[i] for i in range(ta.ndim) if i != pos)

    def combined_following(self, data, branches, depth, parent):
        call = branches[0][depth]
        ndim = self.ttype(call).ndim
        args = []
        for i, arg in enumerate(call.args):
            if i == parent:
                args.append(data)
                continue
            pos = self.channel_pos - ndim + self.ttype(arg).ndim
            args.append(_concat([b[depth].args[i] for b in branches], pos))
        return Call(call.op, tuple(args), call.attrs)

    def outputs(self, data, branches, depth):
        out, index = {}, 0
        for branch in branches:
            channels = self._channels(branch[0])
            out[branch[depth]] = _slice(data, self.channel_pos, index, channels)
            index += channels
        return out


# -- dense -> dense --------------------------------------------------------------------------------
class _DenseToDense(_Combiner):
    def __init__(self, min_num_branches: int, types) -> None:
        super().__init__("nn.dense", min_num_branches, types)

    def can_combine(self, a, b):
        return (a.attrs.get("out_dtype", "") == b.attrs.get("out_dtype", "")
                and self.shape(a.args[1])[1] == self.shape(b.args[1])[1])

    def _units(self, dense: Call) -> int:
        u = self.shape(dense.args[1])[0]
        if not isinstance(u, int):
            raise _Skip
        return u

    def combined_op(self, branches):
        root = branches[0][0]
        units = sum(self._units(b[0]) for b in branches)
        return _op("nn.dense", root.args[0], _concat([b[0].args[1] for b in branches], 0), units=units,
                   out_dtype=root.attrs.get("out_dtype", ""))

    def arg_compatible(self, a, b, index):
        ta, tb = self.ttype(a.args[index]), self.ttype(b.args[index])
        out_a, out_b = self.ttype(a), self.ttype(b)
        if ta.dtype != tb.dtype or ta.ndim != tb.ndim:
            return False
        if out_a.ndim < ta.ndim or out_b.ndim < tb.ndim:
            return False
        return all(ta.shape[i] == tb.shape[i] for i in range(ta.ndim - 1))

    def combined_following(self, data, branches, depth, parent):
        call = branches[0][depth]
        args = []
        for i, arg in enumerate(call.args):
            if i == parent:
                args.append(data)
                continue
            arg_ndim = self.ttype(arg).ndim
            axis = max(arg_ndim - 1, 0)
            fields = []
            for branch in branches:
                out_dim = self.shape(branch[depth].args[parent])[-1]
                a = branch[depth].args[i]
                if not isinstance(out_dim, int):
                    raise _Skip
                repeat = arg_ndim == 0
                if repeat:
                    a = _op("expand_dims", a, axis=-1, num_newaxis=1)
                elif out_dim > 1 and self.shape(a)[-1] == 1:
                    repeat = True
                if repeat:
                    a = _op("repeat", a, repeats=out_dim, axis=axis)
                fields.append(a)
            args.append(_concat(fields, axis))
        return Call(call.op, tuple(args), call.attrs)

    def outputs(self, data, branches, depth):
        out, index = {}, 0
        for branch in branches:
            shape = self.shape(branch[depth])
            units = self._units(branch[0])
            axis = next((k for k in range(len(shape) - 1, -1, -1) if shape[k] == units), None)
            if axis is None:
                raise _Skip
            out[branch[depth]] = _slice(data, axis, index, units)
            index += units
        return out


# -- op -> batched op (dense -> batch_matmul; TVM's ParallelOpBatchCombiner) ---------------------
class _OpBatch(_Combiner):
    def __init__(self, op_name: str, batch_op_name: str, min_num_branches: int, types) -> None:
        super().__init__(op_name, min_num_branches, types)
        self.batch_op_name = batch_op_name

    def can_combine(self, a, b):
        if len(a.args) != len(b.args):
            return False
        for x, y in zip(a.args, b.args, strict=True):
            tx, ty = self.ttype(x), self.ttype(y)
            if tx.dtype != ty.dtype or tuple(tx.shape) != tuple(ty.shape):
                return False
        return True

    def combined_op(self, branches):
        args = [_stack([b[0].args[i] for b in branches], 0) for i in range(len(branches[0][0].args))]
        return Call(Op(self.batch_op_name), tuple(args), None)

    def arg_compatible(self, a, b, index):
        ta, tb = self.ttype(a.args[index]), self.ttype(b.args[index])
        return ta.dtype == tb.dtype and tuple(ta.shape) == tuple(tb.shape)

    def check_level(self, branches, depth, parent):
        # A stacked bias is rank 2 and no longer fits nn.bias_add's axis (TVM builds the same
        # ill-typed call); the combined op stops below it instead.
        if _is_op(branches[0][depth], "nn.bias_add"):
            return False
        return super().check_level(branches, depth, parent)

    def combined_following(self, data, branches, depth, parent):
        call = branches[0][depth]
        args = []
        for i in range(len(call.args)):
            if i == parent:
                args.append(data)
                continue
            fields = []
            for branch in branches:
                a = branch[depth].args[i]
                if self.ttype(a).ndim == 1:
                    a = _op("expand_dims", a, axis=0, num_newaxis=1)
                fields.append(a)
            args.append(_stack(fields, 0))
        return Call(call.op, tuple(args), call.attrs)

    def outputs(self, data, branches, depth):
        parts = _op("split", data, indices_or_sections=len(branches), axis=0)
        return {branch[depth]: _op("squeeze", TupleGetItem(parts, k), axis=(0,))
                for k, branch in enumerate(branches)}


class _DenseToBatch(_OpBatch):
    def __init__(self, min_num_branches: int, types) -> None:
        super().__init__("nn.dense", "nn.batch_matmul", min_num_branches, types)

    def can_combine(self, a, b):
        wa, wb = self.shape(a.args[1]), self.shape(b.args[1])
        return (a.attrs.get("out_dtype", "") == b.attrs.get("out_dtype", "") and wa[0] == wb[0]
                and wa[1] == wb[1])

    def combined_op(self, branches):
        args = [_stack([b[0].args[i] for b in branches], 0) for i in range(2)]
        return _op("nn.batch_matmul", *args, out_dtype=branches[0][0].attrs.get("out_dtype", ""),
                   transpose_a=False, transpose_b=True)


# -- batch_matmul ----------------------------------------------------------------------------------
class _BatchMatmul(_Combiner):
    def __init__(self, min_num_branches: int, types) -> None:
        super().__init__("nn.batch_matmul", min_num_branches, types)

    def can_combine(self, a, b):
        for c in (a, b):
            if c.attrs.get("transpose_a", False) or not c.attrs.get("transpose_b", False):
                return False
        ra, rb = self.ttype(a.args[1]), self.ttype(b.args[1])
        return (ra.dtype == rb.dtype and self.ttype(a).dtype == self.ttype(b).dtype and ra.ndim == 3
                and rb.ndim == 3 and ra.shape[0] == rb.shape[0]
                and a.attrs.get("out_dtype", "") == b.attrs.get("out_dtype", ""))

    def combined_op(self, branches):
        root = branches[0][0]
        weight = _concat([b[0].args[1] for b in branches], 1)
        return Call(Op("nn.batch_matmul"), (root.args[0], weight), root.attrs)

    def arg_compatible(self, a, b, index):
        return True

    def combined_following(self, data, branches, depth, parent):
        call = branches[0][depth]
        args = [data if i == parent else _concat([b[depth].args[i] for b in branches], -1)
                for i in range(len(call.args))]
        return Call(call.op, tuple(args), call.attrs)

    def outputs(self, data, branches, depth):
        out, index = {}, 0
        for branch in branches:
            features = self.shape(branch[0].args[1])[1]
            if not isinstance(features, int):
                raise _Skip
            out[branch[depth]] = _slice(data, 2, index, features)
            index += features
        return out


_KINDS = {"conv2d": _Conv2D, "dense": _DenseToDense, "dense-to-batch": _DenseToBatch,
          "batch_matmul": _BatchMatmul}


def combine_parallel(expr: Expr, kind: str, min_num_branches: int = 3, types=None) -> Expr:
    """Combine parallel ``kind`` branches (conv2d, dense, dense-to-batch, batch_matmul) of
    ``expr``; ``types`` are its checked types (by default, its own inference)."""
    if kind not in _KINDS:
        raise RelayError(f"combine_parallel: unknown kind {kind!r}; known: {', '.join(_KINDS)}")
    if types is None:
        from ..ty import infer_type_expr

        types = infer_type_expr(expr, with_types=True)[1]
    return _KINDS[kind](min_num_branches, types).combine(expr)


def _min_branches(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PassError(f"{name}: min_num_branches must be an int >= 1, got {value!r}")
    return value


def _checked(mod, name: str):
    if mod.checked_types is None:
        raise RelayError(f"{name} needs checked types: run InferType first")
    return mod.checked_types


def CombineParallelConv2D(min_num_branches: int = 3):  # noqa: N802 - Relay's pass name
    """Combine at least ``min_num_branches`` parallel conv2d on one input into one conv2d."""
    n = _min_branches("CombineParallelConv2D", min_num_branches)
    return function_pass(
        lambda f, mod, ctx: _Conv2D(n, _checked(mod, "CombineParallelConv2D")).combine(f),
        opt_level=4, name="CombineParallelConv2d", required=["InferType"])


def CombineParallelDense(min_num_branches: int = 3, to_batch: bool = True):  # noqa: N802
    """Combine parallel dense on one input into a batch_matmul (``to_batch``) or one dense."""
    n = _min_branches("CombineParallelDense", min_num_branches)
    kind = _DenseToBatch if to_batch else _DenseToDense
    return function_pass(
        lambda f, mod, ctx: kind(n, _checked(mod, "CombineParallelDense")).combine(f),
        opt_level=4, name="CombineParallelDense", required=["InferType"])


def CombineParallelBatchMatmul(min_num_branches: int = 3):  # noqa: N802 - Relay's pass name
    """Combine parallel batch_matmul (transpose_b) on one input into one batch_matmul."""
    n = _min_branches("CombineParallelBatchMatmul", min_num_branches)
    return function_pass(
        lambda f, mod, ctx: _BatchMatmul(n, _checked(mod, "CombineParallelBatchMatmul")).combine(f),
        opt_level=4, name="CombineParallelBatchMatmul", required=["InferType"])


def CombineParallelOpBatch(op_name: str, batch_op_name: str, min_num_branches: int = 3):  # noqa: N802
    """Combine parallel ``op_name`` calls of one shape into one ``batch_op_name`` over stacks."""
    n = _min_branches("CombineParallelOpBatch", min_num_branches)
    return function_pass(
        lambda f, mod, ctx: _OpBatch(op_name, batch_op_name, n,
                                     _checked(mod, "CombineParallelOpBatch")).combine(f),
        opt_level=4, name="CombineParallelOpBatch", required=["InferType"])
