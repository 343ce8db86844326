"""Types with symbolic shapes, type relations and InferType.

``infer_type(mod_or_expr)`` type-checks a program; ``type_of(expr, mod=typed)`` /
``known_type(expr, mod=typed)`` read the checked types its result owns (a ``TypeMap``; without
``mod``, the live results that checked ``expr``: see ``checked.py``).

The type core (types, dims, solver) sits below the op table, which imports it; InferType sits
above the op table, so this package loads it (``infer.py``) on first use, not on import.
"""

from ..ir.types import (
    Any,
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    Kind,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeRelation,
    TypeVar,
    format_type,
    scalar_type,
)
from .checked import TypeMap, known_type, type_of, types_of
from .dims import is_symbolic, parse_dim, simplify_dim, sym

__all__ = [
    "Any", "AnyDim", "FuncType", "GlobalTypeVar", "IncompleteType", "Kind", "RefType", "TensorType",
    "TupleType", "Type", "TypeCall", "TypeMap", "TypeRelation", "TypeVar", "format_type", "infer_type",
    "infer_type_expr", "is_symbolic", "known_type", "parse_dim", "scalar_type", "simplify_dim",
    "sym", "type_of", "types_of",
]


def __getattr__(name: str):
    if name in ("infer_type", "infer_type_expr"):
        from . import infer

        return getattr(infer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
