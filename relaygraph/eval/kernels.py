"""Calling operator kernels from the op table, with errors that name the operator and inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EvalError, RelayError
from ..ir.attrs import Attrs
from ..ir.expr import Op
from ..ops import registry

__all__ = ["kernel_of", "call_kernel", "normalize", "describe", "kernel_failure", "value_type"]

_KERNELS: dict[str, Any] = {}


def kernel_of(op: Op):
    """The numpy kernel of ``op`` (an EvalError when the op table has none)."""
    kernel = _KERNELS.get(op.name)
    if kernel is None:
        record = registry.lookup(op.name)
        if record is None:
            try:
                registry.get(op.name)
            except KeyError as exc:
                raise EvalError(f"cannot evaluate {op.name}: {exc.args[0]}") from None
        kernel = getattr(record, "kernel", None)
        if kernel is None:
            raise EvalError(f"cannot evaluate {op.name}: the operator has no numpy kernel")
        _KERNELS[op.name] = kernel
    return kernel


def normalize(result: Any) -> Any:
    """Kernels may return numpy scalars or lists; values are arrays and tuples."""
    if type(result) is np.ndarray:
        return result
    if isinstance(result, (tuple, list)):
        return tuple(normalize(r) for r in result)
    return np.asarray(result)


def call_kernel(op: Op, args: list, attrs: Attrs) -> Any:
    """Run ``op`` on argument values; a failure becomes an EvalError naming op and inputs."""
    kernel = kernel_of(op)
    try:
        result = kernel(args, attrs)
    except RelayError:
        raise
    except Exception as exc:
        raise kernel_failure(op.name, args, exc, attrs) from exc
    return result if type(result) is np.ndarray else normalize(result)


def kernel_failure(name: str, args: list, exc: BaseException, attrs=None) -> EvalError:
    """The error for a kernel that raised: operator, input shapes/dtypes, and the cause. When
    the inputs do not fit the operator (a program evaluated without type checking), the cause
    is what its type relation says of them, not the numpy error the kernel met."""
    inputs = ", ".join(describe(a) for a in args)
    why = _misfit(name, args, attrs)
    if why is not None:
        return EvalError(f"{name} failed on inputs ({inputs}): {why}")
    return EvalError(f"{name} failed on inputs ({inputs}): {type(exc).__name__}: {exc}")


def value_type(value):
    """The type of a runtime value that is a tensor or a tuple (or list) of them; a TypeError
    for any other value (a closure, an ADT value)."""
    from ..ir.types import TensorType, TupleType

    if isinstance(value, (tuple, list)):
        return TupleType([value_type(v) for v in value])
    if isinstance(value, (np.ndarray, np.generic)):
        return TensorType(tuple(np.shape(value)), str(value.dtype))
    raise TypeError(f"a {type(value).__name__} value has no tensor type")


def _misfit(name: str, args: list, attrs) -> str | None:
    """What the op's type relation says against the types of ``args`` (None when it accepts
    them, or cannot tell: an unknown op, a value that is not a tensor or a tuple of them)."""
    record = registry.lookup(name)
    if record is None:
        return None
    try:
        types = [value_type(a) for a in args]
    except TypeError:
        return None
    try:
        record.type_relation(types, attrs)
    except RelayError as exc:
        return getattr(exc, "message", None) or str(exc)  # a diagnostic's text, without "error:"
    except Exception:  # noqa: BLE001 - a relation that cannot read these attrs: say nothing more
        return None
    return None


def describe(value: Any) -> str:
    """A short description of a value's kind and shape: ``float32(1, 3, 224, 224)``."""
    if isinstance(value, (np.ndarray, np.generic)):
        return f"{value.dtype}{tuple(np.shape(value))}"
    if isinstance(value, tuple):
        return "(" + ", ".join(describe(v) for v in value[:6]) + (", ..." if len(value) > 6 else "") + ")"
    return type(value).__name__
