"""``rg.evaluate``: bind inputs to a module's entry function and run it.

Dataflow-only entry functions run on the executor (a compiled instruction list that frees
intermediates early); anything else runs on the interpreter. Both give identical results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EvalError
from ..ir.expr import Expr, Function, Var
from ..ir.module import IRModule
from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType, Type, format_type
from .executor import compile_function
from .interpreter import Interpreter
from .values import Closure

__all__ = ["evaluate", "bind_inputs"]


def evaluate(mod_or_expr: IRModule | Expr, *args: Any, entry: str = "main",
             executor: str | bool = "auto", **kwargs: Any) -> Any:
    """Run ``entry`` of a module (or an expression) on inputs given positionally or by name.

    ``executor``: ``"auto"`` uses the dataflow executor when the entry function is
    dataflow-only, ``False`` forces the interpreter, ``True`` requires the executor.
    """
    if isinstance(mod_or_expr, IRModule):
        mod = mod_or_expr
        if entry not in mod:
            known = ", ".join("@" + gv.name_hint for gv, _ in mod) or "none"
            raise EvalError(f"the module has no function @{entry} (it has: {known})")
        func = mod[entry]
        name = entry
    elif isinstance(mod_or_expr, Expr):
        if isinstance(mod_or_expr, Function) and not args and not kwargs:
            return Interpreter().eval(mod_or_expr)  # a function value, like Relay's evaluate(fn)
        mod = IRModule.from_expr(mod_or_expr)
        func = mod["main"]
        name = "main"
    else:
        raise EvalError(f"evaluate: expected an IRModule or an Expr, got {type(mod_or_expr).__name__}")

    inputs = bind_inputs(func, args, kwargs, name)
    if executor is not False:
        plan = compile_function(func)
        if plan is not None:
            return plan.run(inputs)
        if executor is True:
            raise EvalError(f"@{name} is not dataflow-only (it uses control flow, closures, ADTs, "
                            "refs or globals), so the executor cannot run it")
    interp = Interpreter(mod)
    closure = interp.global_closure(mod.get_global_var(name)) if name in mod else Closure(func, None, name)
    return interp.call(closure, inputs)


def bind_inputs(func: Function, args: tuple, kwargs: dict, name: str = "main") -> list:
    """The argument values in parameter order: positional first, then by parameter name."""
    params = func.params
    if len(args) > len(params):
        raise EvalError(f"@{name} takes {len(params)} inputs, given {len(args)} positional arguments")
    values: list = list(args) + [_UNSET] * (len(params) - len(args))
    if kwargs:
        by_name: dict[str, list[int]] = {}
        for i, p in enumerate(params):
            by_name.setdefault(p.name_hint, []).append(i)
        for key, value in kwargs.items():
            slots = by_name.get(key)
            if slots is None:
                known = ", ".join(p.name_hint for p in params)
                raise EvalError(f"@{name} has no parameter named {key!r} (parameters: {known})")
            if len(slots) > 1:
                raise EvalError(f"@{name} has {len(slots)} parameters named {key!r}; pass them "
                                "positionally")
            if values[slots[0]] is not _UNSET:
                raise EvalError(f"parameter {key!r} of @{name} is given twice")
            values[slots[0]] = value
    for i, p in enumerate(params):
        if values[i] is _UNSET:
            want = format_type(p.type_annotation) if p.type_annotation is not None else "a value"
            raise EvalError(f"missing input %{p.name_hint} of @{name} (expected {want})")
        values[i] = _check_input(p, values[i], p.type_annotation)
    return values


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def _check_input(param: Var, value: Any, ty: Type | None, path: str = "") -> Any:
    """Convert a Python number or list to an array and check it against the annotation."""
    where = f"%{param.name_hint}{path}"
    if isinstance(ty, TupleType):
        if not isinstance(value, (tuple, list)) or len(value) != len(ty.fields):
            raise EvalError(f"input {where}: expected a tuple of {len(ty.fields)} values "
                            f"({format_type(ty)}), given {_kind(value)}")
        return tuple(_check_input(param, v, t, f"{path}.{i}")
                     for i, (v, t) in enumerate(zip(value, ty.fields, strict=True)))
    if not isinstance(ty, TensorType):
        if isinstance(value, (bool, int, float, list)) or isinstance(value, np.generic):
            return np.asarray(value)
        return value
    if isinstance(value, (bool, int, float, list, np.generic)):
        value = np.asarray(value, dtype=ty.dtype)
    if not isinstance(value, np.ndarray):
        raise EvalError(f"input {where}: expected a tensor {format_type(ty)}, given {_kind(value)}")
    if value.dtype != np.dtype(ty.dtype):
        raise EvalError(f"input {where}: expected dtype {ty.dtype} ({format_type(ty)}), given "
                        f"{value.dtype} with shape {value.shape}")
    if not _shape_fits(value.shape, ty.shape):
        raise EvalError(f"input {where}: expected shape {_dims(ty.shape)} ({format_type(ty)}), "
                        f"given shape {value.shape}")
    return value


def _shape_fits(shape: tuple, dims: tuple) -> bool:
    if len(shape) != len(dims):
        return False
    return all(not isinstance(d, int) or d is AnyDim or d == s for s, d in zip(shape, dims, strict=True))


def _dims(dims: tuple) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}"
