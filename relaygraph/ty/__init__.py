"""Types with symbolic shapes, type relations and InferType."""

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
from .dims import is_symbolic, simplify_dim, sym

__all__ = [
    "Any", "AnyDim", "FuncType", "GlobalTypeVar", "IncompleteType", "Kind", "RefType", "TensorType",
    "TupleType", "Type", "TypeCall", "TypeRelation", "TypeVar", "format_type", "is_symbolic",
    "scalar_type", "simplify_dim", "sym",
]
