"""The Relay IR: interned expression and type nodes, modules, and iterative traversals."""

from .adt import (
    Clause,
    Constructor,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    TypeData,
    pattern_vars,
)
from .attrs import EMPTY_ATTRS, Attrs
from .dag_export import node_label, program_stats, to_networkx
from .equal import alpha_equal, structural_hash
from .expr import (
    Call,
    Constant,
    Expr,
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
    as_expr,
    const,
    is_atomic,
    var,
)
from .module import IRModule
from .node import Node, NodeError, live_interned_count
from .traversal import (
    ExprMutator,
    ExprVisitor,
    all_vars,
    bound_vars,
    free_type_vars,
    free_vars,
    iter_post_order,
    node_count,
    post_order,
    substitute,
)
from .types import (
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
    scalar_type,
)

__all__ = [
    "Any", "AnyDim", "Attrs", "Call", "Clause", "Constant", "Constructor", "EMPTY_ATTRS", "Expr",
    "ExprMutator", "ExprVisitor", "FuncType", "Function", "GlobalTypeVar", "GlobalVar", "IRModule",
    "If", "IncompleteType", "Kind", "Let", "Match", "Node", "NodeError", "Op", "Pattern",
    "PatternConstructor", "PatternTuple", "PatternVar", "PatternWildcard", "RefCreate", "RefRead",
    "RefType", "RefWrite", "TensorType", "Tuple", "TupleGetItem", "TupleType", "Type", "TypeCall",
    "TypeData", "TypeRelation", "TypeVar", "Var", "all_vars", "alpha_equal", "as_expr",
    "bound_vars", "const", "free_type_vars", "free_vars", "is_atomic", "iter_post_order",
    "live_interned_count", "node_count", "node_label", "program_stats", "pattern_vars",
    "post_order", "scalar_type", "structural_hash", "substitute", "to_networkx", "var",
]
