"""TVM's dataflow pattern language: match, rewrite and partition Relay programs from Python.

    from relaygraph.dataflow_pattern import is_op, wildcard
    pat = is_op("nn.relu")(is_op("nn.conv2d")(wildcard(), wildcard()))
    pat.match(expr); pat.partition(expr, {"Composite": "conv_relu"}); rewrite(callback, expr)

Semantics follow TVM v0.13 (memoised matching, commutative add/multiply, dominator patterns,
non-overlapping groups, ``PartitionedFromPattern`` names, ``FunctionVar_<group>_<index>``).
"""

from .matcher import DFPatternMatcher, ExprGraph, match
from .patterns import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DFPattern,
    DFPatternError,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    IfPattern,
    LetPattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
    dominates,
    has_attr,
    has_dtype,
    has_shape,
    has_type,
    is_constant,
    is_expr,
    is_if,
    is_let,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    wildcard,
)
from .rewriter import DFPatternCallback, PatternGrouper, partition, rewrite

__all__ = [
    "AltPattern", "AttrPattern", "CallPattern", "ConstantPattern", "DataTypePattern", "DFPattern",
    "DFPatternCallback", "DFPatternError", "DFPatternMatcher", "DominatorPattern", "ExprGraph",
    "ExprPattern", "FunctionPattern", "IfPattern", "LetPattern", "PatternGrouper", "ShapePattern",
    "TupleGetItemPattern", "TuplePattern", "TypePattern", "VarPattern", "WildcardPattern",
    "dominates", "has_attr", "has_dtype", "has_shape", "has_type", "is_constant", "is_expr", "is_if",
    "is_let", "is_op", "is_tuple", "is_tuple_get_item", "is_var", "match", "partition", "rewrite",
    "wildcard",
]
