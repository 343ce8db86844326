"""FoldConstant: evaluate what only depends on constants, with TVM v0.13's rules.

A call of an op whose arguments are all constants (or tuples of constants) becomes a constant
(or a tuple of constants), computed by the op's own numpy kernel. TVM's exceptions are kept:

- calls with no arguments are left alone (folding ``ones(shape=...)`` only bloats the program);
- calls inside a ``Primitive=1`` function are left alone (the function is one fused kernel);
- only calls of ops are evaluated, not of functions, globals or constructors;
- stateful ops (TVM's ``TOpIsStateful``: ``nn.dropout``, ``memory.kill``, ``vm.invoke_tvm_op``,
  and any op marked ``OpDef.extra["stateful"]``) and non-computational ones (``on_device``,
  ``call_lowered``, the ``memory.*``/``vm.*`` ops, ``OpDef.extra["non_computational"]``) are
  never evaluated, nor are ``device_copy``, ``shape_of``, ``vm.shape_of``, ``ndarray_size``;
- but ``shape_of(e)`` becomes a constant whenever ``e`` has a static tensor shape, constant or
  not (TVM reads it from the type; relaygraph from a constant's data, a variable's annotation or
  the checked type); a rank-0 input is left alone (TVM v0.13 folds it to a 0-d tensor of
  unspecified value, not the empty shape).

Also: a projection of a literal tuple becomes the field; an ``if`` on a constant condition
becomes the chosen branch; a let bound to a constant tensor (not a tuple) is inlined.
"""

from __future__ import annotations

import numpy as np

from ..ir.attrs import Attrs
from ..ir.expr import Call, Constant, Expr, Function, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.purity import Purity
from ..ir.types import TensorType
from ..ops.registry import lookup
from ._walk import let_rebuild
from .infra import function_pass

__all__ = ["fold_constant", "FoldConstant"]

# Ops TVM v0.13's FoldConstant never evaluates (fold_constant.cc and the ops' registrations).
STATEFUL = frozenset({"nn.dropout", "memory.kill", "vm.invoke_tvm_op"})
NON_COMPUTATIONAL = frozenset({"on_device", "call_lowered", "memory.alloc_storage",
                               "memory.alloc_tensor", "memory.kill", "vm.shape_of",
                               "vm.invoke_tvm_op", "vm.reshape_tensor"})
NOT_EVALUATED = frozenset({"device_copy", "shape_of", "vm.shape_of", "ndarray_size"})
_SHAPE_OF = ("shape_of", "vm.shape_of")


def _is_constant(e: Expr) -> bool:
    if isinstance(e, Constant):
        return True
    return isinstance(e, Tuple) and all(_is_constant(f) for f in e.fields)


def _value(e: Expr):
    return e.data if isinstance(e, Constant) else tuple(_value(f) for f in e.fields)


def _to_expr(value) -> Expr:
    if isinstance(value, (tuple, list)):
        return Tuple(tuple(_to_expr(v) for v in value))
    return Constant(np.asarray(value))


def _static_shape(e: Expr, types) -> tuple | None:
    """The shape of ``e`` if it is a tensor whose every dimension is known, else None (``types``:
    the TypeMap of the module being folded, if it was type-checked)."""
    if isinstance(e, Constant):
        return e.data.shape
    t = e.type_annotation if isinstance(e, Var) else None
    if t is None and types is not None:
        t = types.get(e)
    if isinstance(t, TensorType) and t.is_concrete:
        return tuple(t.shape)
    return None


def _fold_shape_of(pre: Call, types) -> Expr | None:
    shape = _static_shape(pre.args[0], types) if len(pre.args) == 1 else None
    if not shape:  # unknown, or rank 0 (see the module's docstring)
        return None
    attrs = lookup(pre.op.name).resolve(pre.attrs) if lookup(pre.op.name) else {}
    return Constant(np.asarray(shape, dtype=attrs.get("dtype") or "int32"))


def _fold_call(pre: Call, post: Call, types) -> Expr:
    if not isinstance(post.op, Op) or not post.args:
        return post
    name = post.op.name
    opdef = lookup(name)
    if name in STATEFUL or (opdef is not None and opdef.extra.get("stateful")):
        return post
    if name in _SHAPE_OF:
        folded = _fold_shape_of(pre, types)
        return post if folded is None else folded
    if opdef is None or name in NON_COMPUTATIONAL or name in NOT_EVALUATED or (
            opdef.extra.get("non_computational")):
        return post
    if not all(_is_constant(a) for a in post.args):
        return post
    attrs = post.attrs if isinstance(post.attrs, Attrs) else Attrs(post.attrs)
    return _to_expr(opdef.kernel([_value(a) for a in post.args], attrs))


def _fold(pre: Expr, post: Expr, types, purity: Purity) -> Expr:
    """One node, its children already folded (``pre`` is the node before folding)."""
    if isinstance(post, Call):
        return _fold_call(pre, post, types)
    if isinstance(post, TupleGetItem) and isinstance(post.tuple_value, Tuple):
        fields = post.tuple_value.fields
        # The other fields go away with the tuple: only when they have no effects.
        if all(purity.is_pure(f) for i, f in enumerate(fields) if i != post.index):
            return fields[post.index]
    if isinstance(post, If) and isinstance(post.cond, Constant) and post.cond.shape == ():
        return post.true_branch if bool(post.cond.data) else post.false_branch
    return post


def _is_primitive(node) -> bool:
    return isinstance(node, Function) and bool(node.attrs.get("Primitive"))


def fold_constant(expr: Expr, types=None, purity: Purity | None = None) -> Expr:
    """The expression with every constant subcomputation evaluated, as TVM's FoldConstant does
    (``types``: the checked types of the module it comes from, for ``shape_of``)."""
    purity = purity or Purity().learn(expr)
    constants: dict[Var, Expr] = {}

    def after_value(let: Let, value: Expr) -> None:
        if isinstance(value, Constant):  # TVM inlines constant tensors only, not tuples
            constants[let.var] = value

    def make(node, memo):
        if isinstance(node, Var):
            return constants.get(node, node)
        if isinstance(node, Let):
            if node.var in constants:
                return memo[node.body]
            return Let(node.var, memo[node.value], memo[node.body])
        if _is_primitive(node):
            return node  # a fused kernel: nothing inside it is folded
        return _fold(node, node.with_children(tuple(memo[c] for c in node.children())), types, purity)

    return let_rebuild(expr, make, after_value)


def FoldConstant():  # noqa: N802 - Relay's pass name
    """Evaluate constant subexpressions with the op kernels."""
    return function_pass(lambda f, mod, ctx: fold_constant(f, mod.checked_types, Purity(mod)),
                         opt_level=2, name="FoldConstant")
