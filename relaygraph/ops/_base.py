"""Shared pieces of the op definitions: making a record, checking argument types, axes, costs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import RelayTypeError
from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType, Type, format_type
from ..ty.dims import dim_prod, is_symbolic
from .registry import REQUIRED, OpDef, PatternKind, register

__all__ = [
    "ShapeError", "defop", "tensor_arg", "tuple_arg", "norm_axis", "fmt", "numel", "nbytes",
    "io_bytes", "flops_per_output", "flops_per_input", "REQUIRED", "PatternKind", "DTYPE_BYTES",
    "same_dtype", "np_dtype",
]

DTYPE_BYTES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8,
}


class ShapeError(Exception):
    """A relation's complaint about its argument types; reported as a RelayTypeError for the op."""


def fmt(t: Type) -> str:
    """A type as Relay text (for error messages)."""
    return format_type(t)


def np_dtype(dtype: str):
    """The numpy dtype for a Relay dtype (bfloat16 is computed in float32)."""
    return np.dtype("float32" if dtype == "bfloat16" else dtype)


def tensor_arg(t: Type, i: int, name: str = "argument") -> TensorType:
    """Argument ``i`` as a TensorType, or a ShapeError saying what it was instead."""
    if isinstance(t, TensorType):
        return t
    raise ShapeError(f"{name} {i} must be a tensor, got {fmt(t)}")


def tuple_arg(t: Type, i: int = 0) -> list[TensorType]:
    """Argument ``i`` as a non-empty tuple of tensors."""
    if not isinstance(t, TupleType):
        raise ShapeError(f"argument {i} must be a tuple of tensors, got {fmt(t)}")
    if not t.fields:
        raise ShapeError("the tuple of tensors is empty")
    return [tensor_arg(f, j, "tuple field") for j, f in enumerate(t.fields)]


def same_dtype(types: list[TensorType], what: str = "arguments") -> str:
    """The common dtype of tensor types, or a ShapeError naming both."""
    dtype = types[0].dtype
    for t in types[1:]:
        if t.dtype != dtype:
            raise ShapeError(f"{what} must have the same dtype: {fmt(types[0])} vs {fmt(t)}")
    return dtype


def norm_axis(axis: int, ndim: int, what: str = "axis", extra: int = 0) -> int:
    """A possibly negative axis as an index in ``[0, ndim + extra)``."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ShapeError(f"{what} must be an int, got {axis!r}")
    n = ndim + extra
    if not -n <= axis < n:
        raise ShapeError(f"{what}={axis} is out of range for rank {ndim}")
    return axis + n if axis < 0 else axis


# -- costs ---------------------------------------------------------------------------------
def numel(t: Type):
    """Element count of a tensor (sum over a tuple): int, sympy expression, or nan for ``?``."""
    if isinstance(t, TupleType):
        total = 0
        for f in t.fields:
            total = total + numel(f)
        return total
    if not isinstance(t, TensorType):
        return 0
    if any(d is AnyDim for d in t.shape):
        return math.nan
    return dim_prod(t.shape)


def nbytes(t: Type):
    """Bytes of a tensor (sum over a tuple)."""
    if isinstance(t, TupleType):
        total = 0
        for f in t.fields:
            total = total + nbytes(f)
        return total
    if not isinstance(t, TensorType):
        return 0
    return numel(t) * DTYPE_BYTES[t.dtype]


def _as_number(x):
    if is_symbolic(x) and x.free_symbols:
        return x  # symbolic shapes give symbolic costs (sympy expressions)
    return float(x)


def io_bytes(arg_types, out_type, attrs) -> float:
    """Default bytes moved: every input read once, every output written once."""
    total = nbytes(out_type)
    for t in arg_types:
        total = total + nbytes(t)
    return _as_number(total)


def flops_per_output(k: float = 1.0):
    """A FLOPs function: ``k`` per output element."""
    def flops(arg_types, out_type, attrs) -> float:
        return _as_number(k * numel(out_type))
    return flops


def flops_per_input(k: float = 1.0):
    """A FLOPs function: ``k`` per element of the first input."""
    def flops(arg_types, out_type, attrs) -> float:
        return _as_number(k * numel(arg_types[0])) if arg_types else 0.0
    return flops


# -- records -------------------------------------------------------------------------------
def defop(name: str, num_inputs: int | None, attrs: Mapping[str, Any] | None,
          rel: Callable[[list, dict], Type], kernel: Callable[[list, dict], Any],
          pattern: PatternKind, *, flops: Callable | None = None, bytes: Callable | None = None,
          domain: str | tuple = "any", input_names: tuple = (), py_defaults: Mapping | None = None,
          normalize: Callable | None = None, infer_inputs: Callable | None = None,
          sampler: Callable | None = None, examples: tuple = (), doc: str = "") -> OpDef:
    """Register an op whose relation and kernel read resolved attrs (a dict with defaults)."""
    raw_flops, raw_bytes = flops or flops_per_output(0.0), bytes or io_bytes
    record = OpDef(
        name=name, num_inputs=num_inputs, attrs=dict(attrs or {}), type_relation=rel,
        kernel=kernel, pattern=pattern, flops=raw_flops, bytes=raw_bytes, domain=domain,
        input_names=tuple(input_names), doc=doc,
        py_defaults=dict(py_defaults or {}), normalize=normalize, sampler=sampler,
        examples=tuple(examples),
    )

    def type_relation(arg_types, attrs=None) -> Type:
        arg_types = list(arg_types)
        if num_inputs is not None and len(arg_types) != num_inputs:
            raise RelayTypeError(f"{name} takes {num_inputs} argument(s), got {len(arg_types)}")
        full = record.resolve(attrs)
        try:
            return rel(arg_types, full)
        except ShapeError as exc:
            args = ", ".join(fmt(t) for t in arg_types)
            raise RelayTypeError(f"{name}: {exc} (argument types: {args})") from None

    def run_kernel(args, attrs=None):
        out = kernel(list(args), record.resolve(attrs))
        if isinstance(out, tuple):
            return tuple(np.asarray(o) for o in out)
        return np.asarray(out)

    def infer(arg_types, attrs=None):
        return infer_inputs(list(arg_types), record.resolve(attrs))

    def op_flops(arg_types, out_type, attrs=None) -> float:
        return _as_number(raw_flops(list(arg_types), out_type, record.resolve(attrs)))

    def op_bytes(arg_types, out_type, attrs=None) -> float:
        return _as_number(raw_bytes(list(arg_types), out_type, record.resolve(attrs)))

    record.type_relation = type_relation
    record.kernel = run_kernel
    record.extra["resolved_kernel"] = kernel  # takes attrs already resolved (fused ops call it)
    # the type is the numpy broadcast of the operands' types, in their (one) dtype: a tree of such
    # ops has the broadcast of its leaves' types (relaygraph.egraph.rule_compiler.keeps_type)
    record.extra["broadcast_of_operands"] = bool(getattr(rel, "broadcast_of_operands", False))
    record.flops = op_flops
    record.bytes = op_bytes
    record.infer_inputs = infer if infer_inputs is not None else None
    run_kernel.__doc__ = f"numpy kernel of {name}"
    type_relation.__doc__ = f"type relation of {name}"
    return register(record)
