"""relaygraph: Relay programs in pure Python, rewritten with e-graphs.

The IR is imported eagerly; the heavier layers (text, types, ops, eval, passes, e-graph) are
imported on first use of one of their names, so ``import relaygraph`` stays fast.
"""

from __future__ import annotations

import importlib

from . import ir
from .errors import EvalError, NodeError, ParseError, RelayError, RelayTypeError, RuleError
from .ir import (
    Any,
    Attrs,
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    ExprMutator,
    ExprVisitor,
    Function,
    FuncType,
    GlobalTypeVar,
    GlobalVar,
    If,
    IRModule,
    Let,
    Match,
    Op,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefType,
    RefWrite,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    TypeCall,
    TypeData,
    TypeVar,
    Var,
    alpha_equal,
    bound_vars,
    const,
    free_type_vars,
    free_vars,
    node_count,
    post_order,
    structural_hash,
    substitute,
    to_networkx,
    var,
)

__version__ = "0.1.0"

TypeError = RelayTypeError  # noqa: A001 - Relay's name for a type-checking failure: rg.TypeError

# name -> (module, attribute or None for the module itself), imported lazily.
_LAZY = {
    "parse": ("relaygraph.text", "parse"),
    "parse_expr": ("relaygraph.text", "parse_expr"),
    "SourceMap": ("relaygraph.ir.module", "SourceMap"),
    "astext": ("relaygraph.text", "astext"),
    "infer_type": ("relaygraph.ty", "infer_type"),
    "type_of": ("relaygraph.ty", "type_of"),
    "op": ("relaygraph.ops", None),
    "ops": ("relaygraph.ops", None),
    "evaluate": ("relaygraph.eval", "evaluate"),
    "transform": ("relaygraph.passes", None),
    "load_rules": ("relaygraph.rewrite", "load_rules"),
    "rules": ("relaygraph.synth", None),
    "dataflow_pattern": ("relaygraph.dataflow_pattern", None),
    "saturate": ("relaygraph.egraph", "saturate"),
    "optimize": ("relaygraph.egraph.optimize", "optimize"),
    "profile": ("relaygraph.egraph.program_profile", "profile"),
    "calibrate": ("relaygraph.egraph.calibrate", "calibrate"),
    "extract": ("relaygraph.egraph.extract", None),
    "zoo": ("relaygraph.zoo", None),
    "text": ("relaygraph.text", None),
    "ty": ("relaygraph.ty", None),
    "eval": ("relaygraph.eval", None),
    "passes": ("relaygraph.passes", None),
    "egraph": ("relaygraph.egraph", None),
    "frontend": ("relaygraph.frontend", None),
    "study": ("relaygraph.study", None),
}


def __getattr__(name: str):
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'relaygraph' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Any", "Attrs", "Call", "Clause", "Constant", "Constructor", "EvalError", "Expr",
    "ExprMutator", "ExprVisitor", "FuncType", "Function", "GlobalTypeVar", "GlobalVar",
    "IRModule", "If", "Let", "Match", "NodeError", "Op", "ParseError", "PatternConstructor",
    "PatternTuple", "PatternVar", "PatternWildcard", "RefCreate", "RefRead", "RefType",
    "RefWrite", "RelayError", "RelayTypeError", "RuleError", "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "TypeCall", "TypeData", "TypeError", "TypeVar", "Var",
    "alpha_equal", "bound_vars", "const", "free_type_vars", "free_vars", "ir", "node_count",
    "post_order", "structural_hash", "substitute", "to_networkx", "var", *_LAZY,
]
