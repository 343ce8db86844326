"""The dataflow executor: a pure function compiled once into a flat instruction list.

Compilation walks the function's DAG once (iteratively) and emits one instruction per
computed node in topological order: ``(run, input slots, output slot, extra, slots to free)``.
A slot is cleared right after its last use, so intermediates die as early as the data
dependencies allow. Calls of ``Primitive=1`` functions (fused groups) are one instruction each
(a group that is one fused op of the op table runs that op's kernel); see ``fused_kernels.py``. Calls
of other function literals are inlined, since dataflow functions are pure.

A function is dataflow-only when its body uses only variables, constants, operator calls,
tuples, projections, lets of values and calls of function literals; anything else (if, match,
refs, constructors, globals, first-class functions) returns None from ``compile_function`` and
is left to the interpreter.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ..errors import EvalError, RelayError
from ..ir.expr import Call, Constant, Function, Let, Op, Tuple, TupleGetItem, Var
from .kernels import describe, kernel_failure, kernel_of, normalize
from .memory import pin_allocator

__all__ = ["Plan", "PlanCompiler", "compile_function", "is_dataflow", "NotDataflow", "FOLDED_AT_COMPILE",
           "folded_at_compile", "fold_value"]


# Ops on constant inputs computed once when the plan is compiled, as contiguous arrays: a
# transpose of a weight (rules/cpu.rules lays a dense's weight out as (K, N) for its product) ran
# as a view each call, and the product then read the weight as the dense did, so the layout's gain
# (a (1, 512) x (512, 2048) product with its bias: 232 against 316 us) never came
FOLDED_AT_COMPILE = frozenset({"transpose"})


def folded_at_compile(node) -> bool:
    """True when the plan computes ``node`` (a call of an op on constants) once, at compile time."""
    return (type(node) is Call and type(node.op) is Op and node.op.name in FOLDED_AT_COMPILE
            and bool(node.args) and all(type(a) is Constant for a in node.args))


def fold_value(op: Op, values: list, attrs):
    """The value a plan holds for ``op`` on constant ``values``: computed once, contiguous."""
    value = normalize(kernel_of(op)(values, attrs))
    return np.ascontiguousarray(value) if isinstance(value, np.ndarray) else value


class NotDataflow(Exception):
    """Raised inside compilation when a node needs the interpreter."""


class Plan:
    """A compiled dataflow function: run it with ``plan.run(inputs)``."""

    __slots__ = ("num_slots", "param_slots", "constants", "instrs", "labels", "output", "__weakref__")

    def __init__(self, num_slots, param_slots, constants, instrs, labels, output) -> None:
        self.num_slots = num_slots
        self.param_slots = param_slots
        self.constants = constants  # [(slot, array)]
        self.instrs = instrs  # [(run, inputs, output, extra, frees)]
        self.labels = labels  # a readable name per instruction, for errors and listings
        self.output = output

    def run(self, inputs: list) -> Any:
        """Execute on input values (one per parameter, in order)."""
        if len(inputs) != len(self.param_slots):
            raise EvalError(f"the function takes {len(self.param_slots)} inputs, given {len(inputs)}")
        env: list = [None] * self.num_slots
        for slot, value in self.constants:
            env[slot] = value
        for slot, value in zip(self.param_slots, inputs, strict=True):
            env[slot] = value
        i = -1
        try:
            for i, (run, ins, out, extra, frees) in enumerate(self.instrs):  # noqa: B007 - i names a failure
                env[out] = run([env[s] for s in ins], extra)
                for s in frees:
                    env[s] = None
        except RelayError:
            raise
        except Exception as exc:
            args = [env[s] for s in self.instrs[i][1]] if i >= 0 else []
            attrs = self.instrs[i][3] if i >= 0 else None
            raise kernel_failure(self.labels[i] if i >= 0 else "executor", args, exc, attrs) from exc
        return env[self.output]

    def instrumented(self, how) -> Plan:
        """This plan with each instruction's ``run`` replaced by ``how(run, index)`` (a wrapper
        that times or inspects it in place: same order, same frees)."""
        return Plan(self.num_slots, self.param_slots, self.constants,
                    [(how(run, i), ins, out, extra, frees)
                     for i, (run, ins, out, extra, frees) in enumerate(self.instrs)],
                    self.labels, self.output)

    def with_own_constants(self) -> Plan:
        """This plan reading its own copies of its constant arrays (each copied apart, as a
        program's weights are separate arrays). Hash-consing shares a constant between every
        program that holds the same values, so two programs timed one after the other read the
        same weights, the second with them still in the cache: for timing programs side by side
        (``program_profile.time_programs``), where no program should run on another's data."""
        return Plan(self.num_slots, self.param_slots,
                    [(slot, np.array(value, copy=True) if type(value) is np.ndarray else value)
                     for slot, value in self.constants],
                    self.instrs, self.labels, self.output)

    def timed(self, samples: list[list[float]], clock) -> Plan:
        """This plan with each instruction timed by ``clock`` in place, every run appending
        instruction ``i``'s seconds to ``samples[i]``."""
        def timing(run, i):
            out = samples[i]

            def go(args, extra):
                start = clock()
                value = run(args, extra)
                out.append(clock() - start)
                return value
            return go
        return self.instrumented(timing)

    def listing(self) -> str:
        """The instruction list, one line per step (for inspection and tests)."""
        lines = []
        for (_, ins, out, _, frees), label in zip(self.instrs, self.labels, strict=True):
            free = f"  free {list(frees)}" if frees else ""
            lines.append(f"s{out} = {label}({', '.join(f's{s}' for s in ins)}){free}")
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.instrs)


# -- instruction bodies: run(args, extra) -----------------------------------------------------
def _run_op(kernel):
    def run(args, attrs):
        result = kernel(args, attrs)
        return result if type(result) is np.ndarray else normalize(result)
    return run


def _make_tuple(args, _):
    return tuple(args)


def _project(args, index):
    value = args[0]
    if not isinstance(value, tuple):
        raise EvalError(f"projection .{index} of a non-tuple value ({describe(value)})")
    if index >= len(value):
        raise EvalError(f"projection .{index} out of range for a tuple of {len(value)} fields")
    return value[index]


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_function(func: Function, fused: str = "numexpr") -> Plan | None:
    """The plan for ``func``, or None when it is not dataflow-only. Cached per function.

    ``fused``: how ``Primitive`` groups run, ``"numexpr"`` (elementwise groups as one numexpr
    program) or ``"sequence"`` (always op by op).
    """
    if fused not in ("numexpr", "sequence"):
        raise ValueError(f"unknown fused-group mode {fused!r} (use 'numexpr' or 'sequence')")
    cache = _PLANS.get(func)
    if cache is not None and fused in cache:
        return cache[fused]
    pin_allocator()  # kernel times independent of the process's history (see eval.memory)
    try:
        plan = PlanCompiler(fused).compile(func)
    except NotDataflow:
        plan = None
    _PLANS.setdefault(func, {})[fused] = plan
    return plan


def is_dataflow(func: Function) -> bool:
    """True when the executor can run ``func``."""
    return compile_function(func) is not None


class PlanCompiler:
    """Turns a dataflow function into a Plan (``fused`` says how fused groups run)."""

    def __init__(self, fused: str) -> None:
        self.fused = fused
        self.num_slots = 0
        self.constants: list = []
        self.constant_slots: dict[int, Any] = {}
        self.instrs: list = []
        self.labels: list = []

    def new_slot(self) -> int:
        self.num_slots += 1
        return self.num_slots - 1

    def compile(self, func: Function) -> Plan:
        params = [self.new_slot() for _ in func.params]
        scope = dict(zip(func.params, params, strict=True))
        out = self.body(func.body, scope, {})
        return Plan(self.num_slots, params, self.constants, self._with_frees(out),
                    self.labels, out)

    def body(self, root, scope: dict, static_fns: dict) -> int:
        """Emit the instructions computing ``root``; its slot. ``scope`` maps Vars to slots."""
        slot_of: dict = {}
        stack: list = [(root, 0)]
        while stack:
            node, phase = stack.pop()
            if phase == 1:
                slot_of[node] = self.emit(node, slot_of, scope, static_fns)
                continue
            if phase == 2:  # a let's value is ready: bind its variable before the body
                self.bind_let(node, slot_of, scope, static_fns)
                continue
            if phase == 3:
                slot_of[node] = slot_of[node.body]
                continue
            if node in slot_of:
                continue
            t = type(node)
            if t is Var:
                if node not in scope:
                    raise NotDataflow(f"free variable %{node.name_hint}")
                slot_of[node] = scope[node]
            elif t is Constant:
                slot_of[node] = self.constant(node.data)
            elif t is Let:
                stack.extend([(node, 3), (node.body, 0), (node, 2)])
                if type(node.value) is not Function:
                    stack.append((node.value, 0))
            elif t is Call:
                callee = node.op
                if type(callee) is Var and callee in static_fns:
                    callee = static_fns[callee]
                if type(callee) not in (Op, Function):
                    raise NotDataflow(f"call of a {type(callee).__name__}")
                stack.append((node, 1))
                stack.extend((a, 0) for a in reversed(node.args))
            elif t is Tuple:
                stack.append((node, 1))
                stack.extend((f, 0) for f in reversed(node.fields))
            elif t is TupleGetItem:
                stack.append((node, 1))
                stack.append((node.tuple_value, 0))
            else:
                raise NotDataflow(f"{t.__name__} node")
        return slot_of[root]

    def bind_let(self, node: Let, slot_of: dict, scope: dict, static_fns: dict) -> None:
        if type(node.value) is Function:
            # A let-bound function literal may only be called (it is inlined at each call).
            if _used_other_than_callee(node.var, node.body):
                raise NotDataflow("a function used as a value")
            static_fns[node.var] = node.value
        else:
            scope[node.var] = slot_of[node.value]

    def emit(self, node, slot_of: dict, scope: dict, static_fns: dict) -> int:
        t = type(node)
        if t is TupleGetItem:
            source = node.tuple_value
            if type(source) is Tuple:  # a projection of a tuple literal is just that field
                if node.index >= len(source.fields):
                    raise EvalError(f"projection .{node.index} out of range for a tuple of "
                                    f"{len(source.fields)} fields")
                return slot_of[source.fields[node.index]]
            return self.add(_project, [slot_of[source]], node.index, f".{node.index}")
        if t is Tuple:
            return self.add(_make_tuple, [slot_of[f] for f in node.fields], None, "tuple")
        callee = node.op
        if type(callee) is Var:
            callee = static_fns[callee]
        ins = [slot_of[a] for a in node.args]
        if type(callee) is Op:
            if callee.name in FOLDED_AT_COMPILE and ins and all(i in self.constant_slots for i in ins):
                folded = self.fold(callee, ins, node.attrs)
                if folded is not None:
                    return folded
            return self.add(_run_op(kernel_of(callee)), ins, node.attrs, callee.name)
        if len(callee.params) != len(ins):
            names = ", ".join(f"%{p.name_hint}" for p in callee.params)
            raise EvalError(f"wrong number of arguments: fn({names}) takes {len(callee.params)}, "
                            f"given {len(ins)}")
        if callee.attrs.get("Primitive", 0):
            from .fused_kernels import fused_kernel

            kernel = fused_kernel(callee, self.fused)
            return self.add(kernel, ins, None, kernel.label)
        # Inline a non-primitive function literal: its parameters name the argument slots.
        inner = dict(scope)
        inner.update(zip(callee.params, ins, strict=True))
        return self.body(callee.body, inner, dict(static_fns))

    def constant(self, value) -> int:
        slot = self.new_slot()
        self.constants.append((slot, value))
        self.constant_slots[slot] = value
        return slot

    def fold(self, op: Op, ins: list, attrs) -> int | None:
        """The slot of ``op`` on constant inputs, computed now as a contiguous array, or None
        (it then runs with the program, where an error names it as usual)."""
        try:
            value = fold_value(op, [self.constant_slots[i] for i in ins], attrs)
        except Exception:  # noqa: BLE001 - reported when the instruction runs
            return None
        if type(value) is not np.ndarray:
            return None
        return self.constant(value)

    def add(self, run, ins: list, extra, label: str) -> int:
        out = self.new_slot()
        self.instrs.append((run, tuple(ins), out, extra))
        self.labels.append(label)
        return out

    def _with_frees(self, output: int) -> list:
        """Attach to each instruction the slots whose last use it is."""
        last: dict[int, int] = {}
        for i, (_, ins, _, _) in enumerate(self.instrs):
            for s in ins:
                last[s] = i
        frees: list[list[int]] = [[] for _ in self.instrs]
        for s, i in last.items():
            if s != output:
                frees[i].append(s)
        return [(run, ins, out, extra, tuple(sorted(set(f))))
                for (run, ins, out, extra), f in zip(self.instrs, frees, strict=True)]


def _used_other_than_callee(var: Var, root) -> bool:
    from ..ir.traversal import iter_post_order

    for node in iter_post_order(root):
        if type(node) is Call:
            if var in node.args:
                return True
        elif type(node) in (Tuple,) and var in node.fields:
            return True
        elif type(node) is TupleGetItem and node.tuple_value is var:
            return True
        elif type(node) is Let and node.value is var:
            return True
        elif type(node) is Let and node.body is var:
            return True
    return root is var
