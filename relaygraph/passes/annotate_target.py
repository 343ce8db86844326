"""AnnotateTarget: mark the ops each external compiler supports with region annotations (BYOC).

Every supported call gets ``annotation.compiler_begin(arg, compiler=T)`` on its arguments and
``annotation.compiler_end(..., compiler=T)`` where its value leaves for another target, as TVM's
pass does. Which ops a target supports is a registry of predicates per target name (TVM keeps
them as the op attribute ``target.<name>``): ``register_target_op("dnnl", "nn.conv2d")``, or with
a predicate over the call. A call of a composite function ``Composite="<target>.<name>"`` is
supported by ``<target>``. Unsupported nodes go to the ``default`` target. Running the pass again
on an annotated program keeps the existing non-default annotations.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from ..errors import RelayError
from ..ir.expr import (
    Call,
    Expr,
    Function,
    If,
    Let,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order
from ..ops.registry import get as get_op
from .infer import InferType
from .infra import PassContext, Sequential, function_pass

__all__ = [
    "AnnotateTarget", "annotate_target", "register_target_op", "unregister_target_op",
    "target_ops", "DEFAULT_TARGET", "compiler_begin", "compiler_end", "is_annotation",
]

DEFAULT_TARGET = "default"
BEGIN = Op("annotation.compiler_begin")
END = Op("annotation.compiler_end")

Predicate = Callable[[Call], bool]
_TARGET_OPS: dict[str, dict[str, Predicate]] = {}
_WANTS_TYPES: dict[Predicate, bool] = {}


def _always(call: Call) -> bool:
    return True


def register_target_op(target: str, op_name: str, predicate: Predicate | None = None,
                       override: bool = False) -> None:
    """Declare that ``target`` supports ``op_name`` (for calls where ``predicate(call)`` is true).

    A predicate with two parameters is called as ``predicate(call, type_of)``, where
    ``type_of(expr)`` is the checked type of an expression of the program being annotated (TVM's
    predicates read ``checked_type``).
    """
    if not isinstance(target, str) or not target or target == DEFAULT_TARGET:
        raise RelayError(f"register_target_op: bad target name {target!r} (a non-empty name, "
                         f"not {DEFAULT_TARGET!r})")
    get_op(op_name)  # an unknown op name is an UnknownNameError with close names
    if predicate is not None and not callable(predicate):
        raise RelayError(f"register_target_op({target!r}, {op_name!r}): the predicate must be "
                         f"callable, got {type(predicate).__name__}")
    ops = _TARGET_OPS.setdefault(target, {})
    if op_name in ops and not override:
        raise RelayError(f"target {target!r} already has a predicate for {op_name}; "
                         f"pass override=True to replace it")
    ops[op_name] = predicate or _always
    _WANTS_TYPES[ops[op_name]] = _arity(ops[op_name]) >= 2


def _arity(fn) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds)


def unregister_target_op(target: str, op_name: str | None = None) -> None:
    """Forget one op of ``target`` (or all of them when ``op_name`` is None)."""
    if op_name is None:
        _TARGET_OPS.pop(target, None)
    else:
        _TARGET_OPS.get(target, {}).pop(op_name, None)


def target_ops(target: str) -> dict[str, Predicate]:
    """The ops registered for ``target`` with their predicates (a copy)."""
    return dict(_TARGET_OPS.get(target, {}))


_ANN_ATTRS: dict[str, object] = {}


def _annotation(op: Op, expr: Expr, target: str) -> Call:
    attrs = _ANN_ATTRS.get(target)
    if attrs is None:
        attrs = _ANN_ATTRS[target] = get_op(op.name).canonical_attrs({"compiler": target})
    return Call(op, (expr,), attrs)


def compiler_begin(expr: Expr, target: str) -> Call:
    """``annotation.compiler_begin(expr, compiler=target)``."""
    return _annotation(BEGIN, expr, target)


def compiler_end(expr: Expr, target: str) -> Call:
    """``annotation.compiler_end(expr, compiler=target)``."""
    return _annotation(END, expr, target)


def is_annotation(expr: Expr, op: Op | None = None) -> bool:
    """Whether ``expr`` is a compiler_begin/compiler_end call (of ``op`` when given)."""
    if not (isinstance(expr, Call) and isinstance(expr.op, Op)):
        return False
    return expr.op is op if op is not None else expr.op in (BEGIN, END)


def compiler_of(call: Call) -> str:
    """The ``compiler`` attribute of an annotation call."""
    return call.attrs["compiler"]


class _Annotator:
    """TVM's AnnotateTargetRewriter (and CallOpsTargetRewriter when not include_non_call_ops)."""

    def __init__(self, targets: tuple[str, ...], include_non_call_ops: bool, type_of) -> None:
        self.targets = targets
        self.non_call = include_non_call_ops
        self.target_of: dict[Expr, str] = {}
        self.type_of = type_of

    def supports(self, pred: Predicate, call: Call) -> bool:
        try:
            ok = pred(call, self.type_of) if _WANTS_TYPES.get(pred) else pred(call)
        except RelayError:
            raise
        except Exception as exc:
            raise RelayError(f"AnnotateTarget: the predicate for {call.op.name} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        return bool(ok)

    # -- helpers ------------------------------------------------------------------------------
    def annotate_args(self, args, target: str = "") -> tuple[str, tuple]:
        ref_target = ""
        begins: list[Expr] = []
        ends: list[Expr] = []
        for arg in args:
            arg_target = DEFAULT_TARGET
            if is_annotation(arg, BEGIN):
                # annotated by an earlier run: keep a non-default begin, re-annotate a default one
                if compiler_of(arg) != DEFAULT_TARGET:
                    begins.append(arg)
                else:
                    ends.append(arg.args[0])
                inner = arg.args[0]
                if is_annotation(inner, END):
                    arg_target = compiler_of(inner)
            elif arg in self.target_of:
                arg_target = self.target_of[arg]
                if isinstance(arg, Call) and not arg.args:
                    ends.append(arg)  # zeros(), ones(): inputs, nothing flows into them
                else:
                    ends.append(compiler_end(arg, arg_target))
            else:
                ends.append(arg)
            if ref_target == "":
                ref_target = arg_target
            elif ref_target != arg_target:
                ref_target = DEFAULT_TARGET
        op_target = ref_target if target == "" else target
        if ref_target == "":
            return op_target, tuple(args)
        begins.extend(compiler_begin(e, op_target) for e in ends)
        return op_target, tuple(begins)

    def end_and_propagate(self, expr: Expr) -> Expr:
        if expr in self.target_of:
            has_inputs = isinstance(expr, (RefWrite, RefCreate, RefRead, TupleGetItem)) or (
                isinstance(expr, Call) and expr.args) or (isinstance(expr, Tuple) and expr.fields)
            if has_inputs:
                target = self.target_of[expr]
                expr = compiler_end(expr, target)
                self.target_of[expr] = target
        elif is_annotation(expr, END) and compiler_of(expr) == DEFAULT_TARGET:
            inner = expr.args[0]
            target = self.target_of.get(inner, DEFAULT_TARGET)
            expr = compiler_end(inner, target)
            self.target_of[expr] = target
        return expr

    # -- per node -----------------------------------------------------------------------------
    def call(self, pre: Call, post: Call) -> Expr:
        if is_annotation(pre, BEGIN):
            return post
        if is_annotation(pre, END):
            self.target_of.setdefault(post.args[0], compiler_of(post))
            return post
        if pre.args and is_annotation(pre.args[0], BEGIN) \
                and compiler_of(pre.args[0]) != DEFAULT_TARGET:
            return post  # annotated already
        target = DEFAULT_TARGET
        if isinstance(pre.op, Op):
            for t in self.targets:
                pred = _TARGET_OPS.get(t, {}).get(pre.op.name)
                if pred is not None and self.supports(pred, pre):
                    target = t
                    break
        elif isinstance(pre.op, Function):
            comp = pre.op.attrs.get("Composite")
            if isinstance(comp, str) and "." in comp and comp.split(".", 1)[0] in self.targets:
                target = comp.split(".", 1)[0]
        if isinstance(pre.op, Var) and not self.non_call:
            return Call(post.op, tuple(self.end_and_propagate(a) for a in post.args), post.attrs,
                        post.type_args)
        _, args = self.annotate_args(post.args, target)
        new = Call(post.op, args, post.attrs, post.type_args)
        self.target_of[new] = target
        return new

    def tuple_(self, post: Tuple) -> Expr:
        if not self.non_call:
            return Tuple(tuple(self.end_and_propagate(f) for f in post.fields))
        target, fields = self.annotate_args(post.fields)
        new = Tuple(fields)
        self.target_of[new] = target
        return new

    def unary(self, post: Expr, field: str, make: Callable[[Expr], Expr]) -> Expr:
        value = getattr(post, field)
        if not self.non_call:
            return make(self.end_and_propagate(value))
        target, (arg,) = self.annotate_args((value,))
        new = make(arg)
        self.target_of[new] = target
        return new

    def ref_write(self, post: RefWrite) -> Expr:
        if not self.non_call:
            return RefWrite(self.end_and_propagate(post.ref), self.end_and_propagate(post.value))
        target, (ref, value) = self.annotate_args((post.ref, post.value))
        new = RefWrite(ref, value)
        self.target_of[new] = target
        return new

    def rewrite(self, pre: Expr, post: Expr) -> Expr:
        if isinstance(post, Call):
            return self.call(pre, post)
        if isinstance(post, Tuple):
            return self.tuple_(post)
        if isinstance(post, TupleGetItem):
            return self.unary(post, "tuple_value", lambda t: TupleGetItem(t, post.index))
        if isinstance(post, Function):
            return post.replace(body=self.end_and_propagate(post.body))
        if isinstance(post, Let):
            body = self.end_and_propagate(post.body)
            if isinstance(post.value, Function):
                return Let(post.var, post.value, body)
            _, (value,) = self.annotate_args((post.value,))
            return Let(post.var, value, body)
        if isinstance(post, If):
            return If(*(self.end_and_propagate(e) for e in (post.cond, post.true_branch,
                                                              post.false_branch)))
        if isinstance(post, RefCreate):
            return self.unary(post, "value", RefCreate)
        if isinstance(post, RefRead):
            return self.unary(post, "ref", RefRead)
        if isinstance(post, RefWrite):
            return self.ref_write(post)
        return post


def _composite(node) -> bool:
    return isinstance(node, Function) and "Composite" in node.attrs


def annotate_target(expr: Expr, targets: Sequence[str], include_non_call_ops: bool = True,
                    type_of: Callable[[Expr], object] | None = None) -> Expr:
    """``expr`` with compiler_begin/compiler_end annotations for ``targets`` (in priority order).

    ``type_of`` gives checked types to predicates that ask for them (by default ``expr`` is
    type-checked on the first such request)."""
    if type_of is None:
        type_of = _lazy_types(expr)
    ann = _Annotator(tuple(targets), include_non_call_ops, type_of)
    memo: dict = {}
    for node in iter_post_order(expr, skip=_composite):
        if _composite(node):  # composite bodies are the pattern, not the program: kept as they are
            memo[node] = node
            continue
        kids = node.children()
        post = node.with_children(tuple(memo[k] for k in kids)) if kids else node
        memo[node] = ann.rewrite(node, post)
    return memo[expr]


def _lazy_types(expr: Expr):
    typed: list = []

    def type_of(e: Expr):
        if not typed:
            from ..ty import infer_type

            typed.append(infer_type(IRModule.from_expr(expr)))
        return typed[0].type_of(e)

    return type_of


def _check_targets(targets) -> tuple[str, ...]:
    if isinstance(targets, str):
        targets = (targets,)
    try:
        targets = tuple(targets)
    except TypeError:
        raise RelayError(f"AnnotateTarget: targets must be a name or a list of names, "
                         f"got {type(targets).__name__}") from None
    for t in targets:
        if not isinstance(t, str) or not t:
            raise RelayError(f"AnnotateTarget: a target must be a non-empty name, got {t!r}")
    return targets


def AnnotateTarget(targets, include_non_call_ops: bool = True):  # noqa: N802 - Relay's pass name
    """Annotate the regions each of ``targets`` supports (TVM's AnnotateTarget, then InferType)."""
    names = _check_targets(targets)

    def run(func: Function, mod: IRModule, ctx: PassContext) -> Function:
        typed: list = []

        def type_of(e: Expr):
            if not typed:
                from ..ty import infer_type

                typed.append(infer_type(mod))
            return typed[0].type_of(e)

        return annotate_target(func, names, include_non_call_ops, type_of)

    func_pass = function_pass(run, opt_level=0, name="AnnotateTargetFunc")
    return Sequential([func_pass, InferType()], name="AnnotateTarget")
