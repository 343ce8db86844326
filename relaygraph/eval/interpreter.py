"""The interpreter for the whole Relay language: a CEK-style machine on numpy.

The machine keeps its control and value stacks as Python lists, so neither a deep program nor a
deep recursion in the evaluated program (a recursive sum to 10,000) touches Python's recursion
limit. Evaluation is strict and left to right: a callee, then its arguments in order.

Environments are frames, one per function activation, chained to the frame the closure was made
in. A ``let`` binds into the current frame, which is also how a let-bound function sees itself
(recursion through lets). A node shared in a graph-form program is evaluated once per frame, as
Relay's dataflow semantics ask: ref nodes are nominal, so a shared one is one cell, one read or
one write; only a call of something with effects (interned) is evaluated anew at each use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EvalError, format_diagnostic
from ..ir.adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from ..ir.attrs import EMPTY_ATTRS
from ..ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
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
from ..ir.purity import EFFECT_NODES, Purity
from .kernels import call_kernel, describe
from .values import Closure, ConstructorValue, OpValue, RefValue, format_value

__all__ = ["Interpreter", "Frame"]


class Frame:
    """One activation's bindings (variables, and values of shared nodes), chained to its parent."""

    __slots__ = ("vars", "parent")

    def __init__(self, parent: Frame | None = None) -> None:
        self.vars: dict = {}
        self.parent = parent


_MISSING = object()

# Continuation tags (small ints: the machine's loop compares them often).
_EVAL, _CALL, _OPCALL, _CTOR, _TUPLE, _PROJ, _LET, _IF, _MATCH, _REF_NEW, _REF_READ, _REF_WRITE, \
    _MEMO = range(13)

_SHAREABLE = (Call, Tuple, TupleGetItem, RefCreate, RefRead, RefWrite)


class Interpreter:
    """Evaluates expressions of one module (its globals may be mutually recursive)."""

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod if mod is not None else IRModule()
        self.spans = self.mod.source_map  # where the module's nodes were parsed, for errors
        self._globals: dict[GlobalVar, Closure] = {}
        self._shared: set = set()  # nodes with several parents evaluated once per frame
        self._analysed: set = set()
        self._purity = None

    # -- entry points -------------------------------------------------------------------------
    def eval(self, expr, frame: Frame | None = None) -> Any:
        """The value of ``expr`` in ``frame`` (an empty one by default)."""
        self._analyse(expr)
        return self._run([(_EVAL, expr, frame or Frame())])

    def call(self, fn: Any, args: list) -> Any:
        """Apply a function value (closure, constructor or op) to argument values."""
        vals: list = []
        ctrl: list = []
        self._apply(fn, list(args), None, ctrl, vals)
        return self._run(ctrl, vals)

    def global_closure(self, gv: GlobalVar) -> Closure:
        """The closure of a global function (globals capture nothing)."""
        closure = self._globals.get(gv)
        if closure is None:
            func = self.mod.functions.get(gv)
            if func is None:
                raise EvalError(f"unknown global @{gv.name_hint}: the module does not define it")
            self._analyse(func)
            closure = self._globals[gv] = Closure(func, None, gv.name_hint)
        return closure

    # -- graph sharing --------------------------------------------------------------------------
    def _analyse(self, root) -> None:
        """Find the nodes reachable from ``root`` that have more than one parent and are
        evaluated once per frame: all but those that call something with effects.

        A ref node is nominal, so a shared one is one cell (one read, one write) and is
        evaluated once. A call of a closure with effects is interned, so one node may stand
        for several calls: each use calls anew. The purity analysis says which is which.
        """
        if root in self._analysed:
            return
        self._analysed.add(root)
        from ..ir.traversal import iter_post_order

        if self._purity is None:
            self._purity = Purity(self.mod)
        purity = self._purity
        parents: dict = {}
        for node in iter_post_order(root):
            if isinstance(node, EFFECT_NODES):  # even under a node evaluated at each use
                self._shared.add(node)
            for kid in node.children():
                parents[kid] = parents.get(kid, 0) + 1
        for node, count in parents.items():
            if count > 1 and isinstance(node, _SHAREABLE) and not purity.per_use(node):
                self._shared.add(node)

    # -- the machine ----------------------------------------------------------------------------
    def _run(self, ctrl: list, vals: list | None = None) -> Any:
        vals = [] if vals is None else vals
        push, pop = ctrl.append, ctrl.pop
        shared = self._shared
        while ctrl:
            tag, node, env = pop()
            if tag == _EVAL:
                if node in shared:
                    found = _lookup(env, node)
                    if found is not _MISSING:
                        vals.append(found)
                        continue
                    push((_MEMO, node, env))
                self._step(node, env, ctrl, vals)
            elif tag == _OPCALL:
                n = len(node.args)
                args = vals[len(vals) - n:] if n else []
                if n:
                    del vals[len(vals) - n:]
                vals.append(call_kernel(node.op, args, node.attrs))
            elif tag == _CALL:
                n = len(node.args)
                args = vals[len(vals) - n:] if n else []
                if n:
                    del vals[len(vals) - n:]
                self._apply(vals.pop(), args, node, ctrl, vals)
            elif tag == _LET:
                env.vars[node.var] = vals.pop()
                push((_EVAL, node.body, env))
            elif tag == _MEMO:
                env.vars[node] = vals[-1]
            else:
                self._finish(tag, node, env, ctrl, vals)
        if len(vals) != 1:
            raise EvalError(f"internal error: the machine ended with {len(vals)} values")
        return vals[0]

    def _step(self, node, env: Frame, ctrl: list, vals: list) -> None:
        """Start evaluating ``node``: push its value or the work that computes it."""
        push = ctrl.append
        t = type(node)
        if t is Var:
            value = _lookup(env, node)
            if value is _MISSING:
                raise EvalError(_at(self.spans, node, f"unbound variable %{node.name_hint}"))
            vals.append(value)
        elif t is Call:
            callee = node.op
            if type(callee) is Op:
                push((_OPCALL, node, env))
            elif type(callee) is Constructor:
                push((_CTOR, node, env))
            else:
                push((_CALL, node, env))
            args = node.args
            for i in range(len(args) - 1, -1, -1):
                push((_EVAL, args[i], env))
            if type(callee) is not Op and type(callee) is not Constructor:
                push((_EVAL, callee, env))
        elif t is Constant:
            vals.append(node.data)
        elif t is Let:
            if type(node.value) is Function:
                # A let-bound function sees its own name: the closure captures this frame.
                env.vars[node.var] = Closure(node.value, env)
                push((_EVAL, node.body, env))
            else:
                push((_LET, node, env))
                push((_EVAL, node.value, env))
        elif t is TupleGetItem:
            push((_PROJ, node, env))
            push((_EVAL, node.tuple_value, env))
        elif t is Tuple:
            push((_TUPLE, node, env))
            fields = node.fields
            for i in range(len(fields) - 1, -1, -1):
                push((_EVAL, fields[i], env))
        elif t is If:
            push((_IF, node, env))
            push((_EVAL, node.cond, env))
        elif t is Match:
            push((_MATCH, node, env))
            push((_EVAL, node.data, env))
        elif t is Function:
            vals.append(Closure(node, env))
        elif t is GlobalVar:
            vals.append(self.global_closure(node))
        elif t is Op:
            vals.append(OpValue(node))
        elif t is Constructor:
            vals.append(ConstructorValue(node, ()) if not node.inputs else node)
        elif t is RefCreate:
            push((_REF_NEW, node, env))
            push((_EVAL, node.value, env))
        elif t is RefRead:
            push((_REF_READ, node, env))
            push((_EVAL, node.ref, env))
        elif t is RefWrite:
            push((_REF_WRITE, node, env))
            push((_EVAL, node.value, env))
            push((_EVAL, node.ref, env))
        else:
            raise EvalError(f"cannot evaluate a {t.__name__} node")

    def _finish(self, tag: int, node, env: Frame, ctrl: list, vals: list) -> None:
        """Complete a node whose sub-expressions are on the value stack."""
        if tag == _PROJ:
            value = vals.pop()
            if not isinstance(value, tuple):
                raise EvalError(_at(self.spans, node, f"projection .{node.index} of a non-tuple value "
                                          f"{_short(value)}"))
            if node.index >= len(value):
                raise EvalError(_at(self.spans, node, f"projection .{node.index} out of range for a tuple of "
                                          f"{len(value)} fields"))
            vals.append(value[node.index])
        elif tag == _TUPLE:
            n = len(node.fields)
            if n:
                fields = tuple(vals[len(vals) - n:])
                del vals[len(vals) - n:]
            else:
                fields = ()
            vals.append(fields)
        elif tag == _CTOR:
            n = len(node.args)
            fields = vals[len(vals) - n:] if n else []
            if n:
                del vals[len(vals) - n:]
            vals.append(_construct(node.op, fields, node, self.spans))
        elif tag == _IF:
            cond = vals.pop()
            branch = node.true_branch if _truth(cond, node, self.spans) else node.false_branch
            ctrl.append((_EVAL, branch, env))
        elif tag == _MATCH:
            self._match(node, vals.pop(), env, ctrl)
        elif tag == _REF_NEW:
            vals.append(RefValue(vals.pop()))
        elif tag == _REF_READ:
            ref = vals.pop()
            if not isinstance(ref, RefValue):
                raise EvalError(_at(self.spans, node, f"ref_read of a non-reference value {_short(ref)}"))
            vals.append(ref.value)
        elif tag == _REF_WRITE:
            value = vals.pop()
            ref = vals.pop()
            if not isinstance(ref, RefValue):
                raise EvalError(_at(self.spans, node, f"ref_write to a non-reference value {_short(ref)}"))
            ref.value = value
            vals.append(())
        else:
            raise EvalError(f"internal error: unknown continuation {tag}")

    def _apply(self, fn: Any, args: list, node, ctrl: list, vals: list) -> None:
        if type(fn) is Closure:
            params = fn.func.params
            if len(params) != len(args):
                raise EvalError(_at(self.spans, node, f"wrong number of arguments: {fn.describe()} takes "
                                          f"{len(params)}, given {len(args)}"))
            frame = Frame(fn.env)
            frame.vars.update(zip(params, args, strict=True))
            ctrl.append((_EVAL, fn.func.body, frame))
        elif type(fn) is Constructor:
            vals.append(_construct(fn, args, node, self.spans))
        elif type(fn) is OpValue:
            vals.append(call_kernel(fn.op, args, EMPTY_ATTRS))
        else:
            raise EvalError(_at(self.spans, node,
                                f"cannot call a value that is not a function: {_short(fn)}"))

    def _match(self, node: Match, value: Any, env: Frame, ctrl: list) -> None:
        for clause in node.clauses:
            binds = _match_pattern(clause.lhs, value)
            if binds is not None:
                env.vars.update(binds)
                ctrl.append((_EVAL, clause.rhs, env))
                return
        kind = value.name if isinstance(value, ConstructorValue) else describe(value)
        raise EvalError(_at(self.spans, node, f"match failed: no clause matches a value built by {kind}: "
                                  f"{_short(value)}"))


def _lookup(frame: Frame | None, key) -> Any:
    while frame is not None:
        value = frame.vars.get(key, _MISSING)
        if value is not _MISSING:
            return value
        frame = frame.parent
    return _MISSING


def _construct(ctor: Constructor, fields: list, node, spans) -> ConstructorValue:
    if len(fields) != len(ctor.inputs):
        raise EvalError(_at(spans, node, f"wrong number of arguments: constructor {ctor.name_hint} takes "
                                  f"{len(ctor.inputs)}, given {len(fields)}"))
    return ConstructorValue(ctor, fields)


def _truth(cond: Any, node, spans) -> bool:
    if isinstance(cond, (np.ndarray, np.bool_)) and cond.dtype == np.bool_ and np.size(cond) == 1:
        return bool(cond)
    raise EvalError(_at(spans, node, f"the condition of an if must be a bool scalar, got {describe(cond)}"))


def _match_pattern(pattern, value: Any) -> list | None:
    """The bindings if ``value`` matches ``pattern``, else None (iterative for nested patterns)."""
    binds: list = []
    stack = [(pattern, value)]
    while stack:
        p, v = stack.pop()
        t = type(p)
        if t is PatternWildcard:
            continue
        if t is PatternVar:
            binds.append((p.var, v))
        elif t is PatternConstructor:
            if type(v) is not ConstructorValue or v.constructor is not p.constructor:
                return None
            stack.extend(zip(p.patterns, v.fields, strict=True))
        elif t is PatternTuple:
            if not isinstance(v, tuple) or len(v) != len(p.patterns):
                return None
            stack.extend(zip(p.patterns, v, strict=True))
        else:
            raise EvalError(f"unknown pattern kind {t.__name__}")
    return binds


def _at(spans, node, message: str) -> str:
    """The message, prefixed with the node's source position when it was parsed."""
    span, text = spans.locate(node) if node is not None else (None, None)
    if span is None:
        return message
    return format_diagnostic(message, text, span)


def _short(value: Any, limit: int = 80) -> str:
    text = format_value(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
