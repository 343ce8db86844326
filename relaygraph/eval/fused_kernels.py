"""Kernels for fused groups: calls of ``Primitive=1`` functions made by FuseOps.

When every operator of a group is elementwise or broadcast and numexpr can express it, the
group becomes one numexpr program (compiled once per input dtype, cached): a fused chain then
allocates only its result, no temporaries. Otherwise the group's operators run in sequence
inside the one instruction, through the group's own compiled plan.

A group whose body is exactly a fused op's definition from the op table (``relaygraph.ops.fused``:
how ``rg.optimize`` writes the fused ops it picked) runs as that op's kernel, one call.

Float constants (in the group or in attributes such as ``clip``'s bounds) are passed to
numexpr as rank-0 inputs of the group's dtype, because numexpr reads a float literal as
float64 and would silently widen a float32 chain.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..ir.expr import Call, Constant, Function, Op, TupleGetItem
from ..ir.traversal import iter_post_order
from ..ops import fused_ops, registry
from .kernels import normalize

__all__ = ["FusedKernel", "FusedOpKernel", "fused_kernel", "NUMEXPR_TEMPLATES"]

# Relay op name -> numexpr template over the argument expressions {0}, {1}, ... and named
# attribute constants {k:attr}. Only float inputs take this path (see FusedKernel.__call__).
NUMEXPR_TEMPLATES: dict[str, str] = {
    "add": "({0} + {1})",
    "subtract": "({0} - {1})",
    "multiply": "({0} * {1})",
    "divide": "({0} / {1})",
    "power": "({0} ** {1})",
    "negative": "(-{0})",
    "abs": "abs({0})",
    "exp": "exp({0})",
    "log": "log({0})",
    "sqrt": "sqrt({0})",
    "rsqrt": "(1 / sqrt({0}))",
    "sin": "sin({0})",
    "cos": "cos({0})",
    "tanh": "tanh({0})",
    "sigmoid": "(1 / (1 + exp(-{0})))",
    "nn.relu": "where({0} > 0, {0}, 0)",
    "nn.leaky_relu": "where({0} > 0, {0}, {0} * {k:alpha})",
    "clip": "where({0} < {k:a_min}, {k:a_min}, where({0} > {k:a_max}, {k:a_max}, {0}))",
    "maximum": "where({0} > {1}, {0}, {1})",
    "minimum": "where({0} < {1}, {0}, {1})",
    "copy": "({0})",
    "where": "where({0}, {1}, {2})",
    "greater": "({0} > {1})",
    "less": "({0} < {1})",
    "greater_equal": "({0} >= {1})",
    "less_equal": "({0} <= {1})",
    "equal": "({0} == {1})",
    "not_equal": "({0} != {1})",
}

_ATTR_DEFAULTS = {"alpha": 0.01}
_MAX_EXPR_CHARS = 4000  # numexpr has no let: a shared input is spelled out at each use
_ELEMENTWISE = (registry.PatternKind.ELEMWISE, registry.PatternKind.BROADCAST)


class FusedKernel:
    """The instruction body for calls of one Primitive function: ``kernel(args, extra)``."""

    def __init__(self, func: Function, mode: str = "numexpr") -> None:
        from .executor import PlanCompiler

        ops = [n.op.name for n in iter_post_order(func.body) if isinstance(n, Call) and isinstance(n.op, Op)]
        self.label = "fused(" + ", ".join(dict.fromkeys(ops)) + ")"
        self.plan = PlanCompiler("sequence").compile(func)
        self.expression = None
        # numexpr inputs: leaves (a parameter, or a projection path out of a tuple parameter),
        # then constants of the group, then attribute constants.
        self.leaves: list[tuple[int, tuple]] = []
        self.constants: list[np.ndarray] = []
        self.attr_constants: list[float] = []
        self._programs: dict = {}
        if mode == "numexpr":
            self._translate(func)
        elif mode != "sequence":
            raise ValueError(f"unknown fused-group mode {mode!r} (use 'numexpr' or 'sequence')")

    @property
    def uses_numexpr(self) -> bool:
        """True when the group is one numexpr program (for float inputs)."""
        return self.expression is not None

    def _translate(self, func: Function) -> None:
        paths: dict = {p: (i, ()) for i, p in enumerate(func.params)}
        text: dict = {}
        for node in iter_post_order(func.body):
            if node in text or isinstance(node, Op):
                continue
            if node in paths or isinstance(node, TupleGetItem):
                if node not in paths:
                    if node.tuple_value not in paths:
                        return
                    index, path = paths[node.tuple_value]
                    paths[node] = (index, (*path, node.index))
                continue
            if isinstance(node, Constant):
                if node.dtype not in ("float32", "float64"):
                    return
                text[node] = f"c{len(self.constants)}"
                self.constants.append(node.data)
                continue
            if not isinstance(node, Call) or not isinstance(node.op, Op):
                return
            template = self._template(node)
            if template is None:
                return
            args = [text.get(a) or self._leaf(paths, text, a) for a in node.args]
            if None in args:
                return
            text[node] = template.format(*args)
            if len(text[node]) > _MAX_EXPR_CHARS:
                return
        root = func.body
        self.expression = text.get(root) or (self._leaf(paths, text, root) if root in paths else None)

    def _leaf(self, paths: dict, text: dict, node) -> str | None:
        """The numexpr name of a parameter (or a projection of one), made on first use."""
        if node not in paths:
            return None
        text[node] = f"a{len(self.leaves)}"
        self.leaves.append(paths[node])
        return text[node]

    def _template(self, call: Call) -> str | None:
        name = call.op.name
        template = NUMEXPR_TEMPLATES.get(name)
        if name == "nn.bias_add" and call.attrs.get("axis", 1) == -1:
            template = "({0} + {1})"  # a bias on the last axis is a plain broadcast
        if template is None:
            return None
        record = registry.lookup(name)
        if record is not None and record.pattern not in _ELEMENTWISE and name != "nn.bias_add":
            return None
        while "{k:" in template:
            start = template.index("{k:")
            end = template.index("}", start)
            attr = template[start + 3:end]
            value = call.attrs.get(attr, _ATTR_DEFAULTS.get(attr))
            if not isinstance(value, (int, float)):
                return None
            index = len(self.attr_constants)
            self.attr_constants.append(float(value))
            template = template.replace(template[start:end + 1], f"k{index}")
        return template

    def __call__(self, args: list, _extra=None):
        if self.expression is not None:
            inputs = [_follow(args[i], path) if path else args[i] for i, path in self.leaves]
            dtype = _common_float_dtype(inputs)
            if dtype is not None and all(c.dtype == dtype for c in self.constants):
                return self._program(dtype)(*inputs, *self.constants, *self._attr_arrays(dtype))
        return self.plan.run(args)

    def _program(self, dtype: np.dtype):
        program = self._programs.get(dtype)
        if program is None:
            import numexpr

            kind = float if dtype == np.float32 else np.float64  # numexpr's names for the kinds
            names = ([f"a{i}" for i in range(len(self.leaves))]
                     + [f"c{i}" for i in range(len(self.constants))]
                     + [f"k{i}" for i in range(len(self.attr_constants))])
            used = [n for n in names if _mentions(self.expression, n)]
            program = numexpr.NumExpr(self.expression, signature=[(n, kind) for n in used])
            if len(used) != len(names):
                program = _Select(program, [names.index(n) for n in used])
            self._programs[dtype] = program
        return program

    def _attr_arrays(self, dtype) -> list:
        return [np.asarray(v, dtype=dtype) for v in self.attr_constants]


def _follow(value, path: tuple):
    for index in path:
        if not isinstance(value, tuple) or index >= len(value):
            return None  # not the tuple the group expects: the sequence path reports it
        value = value[index]
    return value


class _Select:
    """A numexpr program that ignores the inputs its expression does not mention."""

    __slots__ = ("program", "positions")

    def __init__(self, program, positions: list[int]) -> None:
        self.program = program
        self.positions = positions

    def __call__(self, *args):
        return self.program(*[args[i] for i in self.positions])


def _mentions(expression: str, name: str) -> bool:
    import re

    return re.search(rf"\b{name}\b", expression) is not None


def _common_float_dtype(args: list):
    dtype = None
    for a in args:
        if type(a) is not np.ndarray:
            return None
        if dtype is None:
            dtype = a.dtype
            if dtype != np.float32 and dtype != np.float64:
                return None
        elif a.dtype != dtype:
            return None
    return dtype


class FusedOpKernel:
    """The instruction body for calls of a Primitive function that is one fused op of the op
    table: the op's own kernel on the group's inputs (and the constants it holds)."""

    uses_numexpr = False

    def __init__(self, func: Function, name: str, attrs, args: tuple) -> None:
        record = registry.lookup(name)
        self.fused_op = name
        self.label = name
        self._kernel = record.extra["resolved_kernel"]
        self._attrs = record.resolve(attrs)
        position = {p: i for i, p in enumerate(func.params)}
        # Each of the op's inputs: a parameter's position, or a constant the group holds.
        self._inputs = [(position[a], None) if a in position else (None, a.data) for a in args]
        self._direct = [i for i, _ in self._inputs] == list(range(len(func.params)))

    def __call__(self, args: list, _extra=None):
        if not self._direct:
            args = [args[i] if i is not None else value for i, value in self._inputs]
        result = self._kernel(args, self._attrs)
        return result if type(result) is np.ndarray else normalize(result)


def _as_fused_op(func: Function) -> FusedOpKernel | None:
    hit = fused_ops.recognise(func.body)
    if hit is None:
        return None
    name, attrs, args = hit
    params = set(func.params)
    if not all(a in params or isinstance(a, Constant) for a in args):
        return None  # an input computed inside the group: not the op alone
    return FusedOpKernel(func, name, attrs, args)


_KERNELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fused_kernel(func: Function, mode: str = "numexpr") -> FusedKernel | FusedOpKernel:
    """The kernel for ``func`` (a Primitive function), shared by every call of it. In the default
    mode a group that is one fused op of the op table runs as that op's kernel; ``"sequence"``
    always runs the group's ops one by one."""
    per_mode = _KERNELS.get(func)
    if per_mode is None:
        per_mode = _KERNELS[func] = {}
    kernel = per_mode.get(mode)
    if kernel is None:
        kernel = (_as_fused_op(func) if mode == "numexpr" else None) or FusedKernel(func, mode)
        per_mode[mode] = kernel
    return kernel
