"""How Relay lives in egglog: the one encoding the bridge, the rule compiler and the readers share.

Sorts: ``RExpr`` (expressions) and ``RList`` (argument and tuple lists, a cons list so rules can
match a fixed number of fields without egglog vector literals).

Constructors (all returning ``RExpr`` unless said):

- ``(RVar key)``: a variable; ``key`` is ``name#uid`` (unique per Var object)
- ``(RConst key)``: a constant; ``key`` is ``dtype:shape:digest-hex`` (the interning key)
- ``(RGlobal name)``: a global function
- ``(RNil)``, ``(RCons e rest)`` -> ``RList``; ``(RTuple list)``; ``(RProj e i)`` (``i: i64``)
- ``(RLet key value body)``: ``let`` binding the variable ``(RVar key)`` in ``body``
- ``(RIf c t f)``; ``(RCall callee args)`` for calls of anything that is not an op
- ``(RFn key body)``: a function value (a closure in the body, e.g. an LSTM cell); ``key`` names
  its parameters, annotations and attributes in the bridge's table, so rules rewrite its body
- one constructor per operator, ``r:`` and Relay's op name (``r:add``, ``r:nn.conv2d``; the
  prefix keeps clear of egglog's own primitives such as ``abs`` and ``max``), taking its
  inputs (``RExpr``) then one ``String`` per attribute in the op table's order. An attribute
  value is stored as ``attr_key(value)``: ``repr`` of its canonical Python value (``(1, 1)``,
  ``'NCHW'``, ``None``, ``1e-05``), so ``1``, ``1.0`` and ``True`` stay distinct.

Types live in a sort of their own, ``RType``, so that a rule's new terms are typed by one
egglog action per node and a union of classes of different types is refused by egglog itself:

- ``(T text)``: the type whose Relay text (``format_type``) is ``text``; ``(tytext t)`` gives the
  text back. ``tytext`` has no merge function: a union that would put two different types in
  one class (two ``T`` of different texts) makes egglog refuse with "Illegal merge attempted
  for function tytext".
- ``(Ty e)``, ``(LTy l)``: the type of an expression class, of a list class (a tuple type).
- ``(Sig:<ctor> ...)``: the type of a node of ``ctor`` from its signature, its children's types
  (``RType``) and its literal fields. The typing rule of a constructor unions ``(Ty e)`` with
  the node's ``Sig``; Python unions each signature it has typed with its ``T`` (see
  ``relaygraph.egraph.signatures``). A class is typed once its ``Ty`` is in a class with a ``T``.
- ``(rank e)``, ``(dtype e)``, ``(dim e i)``: facts of a class's tensor type, for rule side
  conditions. A symbolic dimension is a negative id (the same symbolic expression always gets
  the same id), ``?`` is ``-1``. They are kept per class (a condition then reads one table),
  set from the type's facts by the rules of ``rg-class-facts``, which run when rules read them.
- ``(positive-const key)``: the constant ``(RConst key)`` has every value above zero (and no
  NaN); the bridge records it as it loads the constant, and ``positive(?x)`` conditions read it.
- ``(leaf-class e)``: the class holds a variable or a constant (``RVar``, ``RConst``); set by the
  rules of ``rg-leaves``, which run as nodes are loaded and after each iteration whose rules read
  it: a rule with three or more ``leaf(?x)`` conditions reads it once per leaf, where matching each
  kind of leaf apart takes a command per combination (see ``rule_compiler._LEAF_TABLE_FROM``).
- ``(nid k)``: handle ``k`` of an e-class (how Python names classes in later commands).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable

from ..errors import RelayError
from ..ir.attrs import Attrs
from ..ir.expr import Constant, Var
from ..ir.pyparse import AST_LOCK
from ..ops.registry import OpDef, all_ops

__all__ = [
    "EXPR", "LIST", "TYPE", "POSITIVE", "LEAF", "OP_PREFIX", "BUILTIN_CONSTRUCTORS", "op_constructor",
    "attr_key", "parse_attr_key",
    "var_key", "const_key", "schema_program", "op_from_constructor", "op_attr_keys", "attrs_from_keys",
    "constructor_fields",
]

EXPR, LIST, TYPE = "RExpr", "RList", "RType"
POSITIVE = "positive-const"
LEAF = "leaf-class"

BUILTIN_CONSTRUCTORS = {
    "RVar": ("String",),
    "RConst": ("String",),
    "RGlobal": ("String",),
    "RTuple": (LIST,),
    "RProj": (EXPR, "i64"),
    "RLet": ("String", EXPR, EXPR),
    "RIf": (EXPR, EXPR, EXPR),
    "RCall": (EXPR, LIST),
    "RFn": ("String", EXPR),
}


OP_PREFIX = "r:"


def op_constructor(op: OpDef | str) -> str:
    """The egglog constructor of an op: ``r:`` and its Relay name."""
    return OP_PREFIX + (op if isinstance(op, str) else op.name)


def op_from_constructor(name: str) -> OpDef | None:
    """The op a constructor name stands for (None for the built-in constructors)."""
    if not name.startswith(OP_PREFIX):
        return None
    from ..ops.registry import lookup

    return lookup(name[len(OP_PREFIX):])




def attr_key(value) -> str:
    """The egglog String of an attribute value (canonical: see relaygraph.ir.attrs)."""
    return repr(value)


def parse_attr_key(text: str):
    """The attribute value back from ``attr_key``."""
    with AST_LOCK:  # (ast.parse is not thread-safe in CPython 3.11.7: see AST_LOCK)
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            # repr() writes nan and inf as bare names, which literal_eval refuses: read just those.
            tree = _SpecialFloats().visit(ast.parse(text, mode="eval"))
            return ast.literal_eval(tree.body)


def op_attr_keys(op: OpDef, attrs) -> tuple[str, ...]:
    """The attribute Strings of a call of ``op``: every attribute (defaults filled in), in order."""
    full = op.resolve(attrs)
    return tuple(attr_key(full[name]) for name in op.attrs)


_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf}


class _SpecialFloats(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 - the visitor protocol's name
        if node.id not in _SPECIAL_FLOATS:
            raise ValueError(f"not an attribute value: {node.id}")
        return ast.copy_location(ast.Constant(_SPECIAL_FLOATS[node.id]), node)


def attrs_from_keys(op: OpDef, keys) -> Attrs:
    """A call's canonical ``Attrs`` back from its attribute Strings (see ``op_attr_keys``)."""
    keys = tuple(keys)
    if len(keys) != len(op.attrs):
        raise ValueError(f"{op.name} has {len(op.attrs)} attributes, got {len(keys)} values")
    return op.canonical_attrs(dict(zip(op.attrs, map(parse_attr_key, keys), strict=True)))


def var_key(var: Var) -> str:
    """The key of a variable: unique per Var object, readable."""
    return f"{var.name_hint}#{var.uid}"


def const_key(c: Constant) -> str:
    """The key of a constant: its interning key, as text."""
    return f"{c.dtype}:{'x'.join(map(str, c.shape))}:{c.digest.hex()}"


def constructor_fields(ctor: str) -> tuple[str, ...]:
    """The egglog sorts of a constructor's fields (RExpr, RList, String, i64)."""
    if ctor in BUILTIN_CONSTRUCTORS:
        return BUILTIN_CONSTRUCTORS[ctor]
    if ctor == "RCons":
        return (EXPR, LIST)
    if ctor == "RNil":
        return ()
    op = op_from_constructor(ctor)
    if op is None:
        raise RelayError(f"unknown e-graph constructor {ctor!r}")
    return (EXPR,) * (op.num_inputs or 0) + ("String",) * len(op.attrs)

def _op_decl(op: OpDef) -> str:
    inputs = [EXPR] * (op.num_inputs or 0) + ["String"] * len(op.attrs)
    return f"(constructor {op_constructor(op)} ({' '.join(inputs)}) {EXPR})"


def schema_program(ops: Iterable[OpDef] | None = None) -> str:
    """The egglog declarations of the encoding, one command per line."""
    lines = [f"(sort {EXPR})", f"(sort {LIST})", f"(constructor RNil () {LIST})",
             f"(constructor RCons ({EXPR} {LIST}) {LIST})"]
    for name, args in BUILTIN_CONSTRUCTORS.items():
        lines.append(f"(constructor {name} ({' '.join(args)}) {EXPR})")
    lines.extend(_op_decl(op) for op in (all_ops() if ops is None else ops))
    lines += [
        f"(sort {TYPE})",
        f"(constructor T (String) {TYPE})",
        f"(constructor Ty ({EXPR}) {TYPE} :unextractable)",
        f"(constructor LTy ({LIST}) {TYPE} :unextractable)",
        f"(function tytext ({TYPE}) String :no-merge)",
        f"(function rank ({EXPR}) i64 :no-merge)",
        f"(function dtype ({EXPR}) String :no-merge)",
        f"(function dim ({EXPR} i64) i64 :no-merge)",
        f"(function nid (i64) {EXPR} :merge new)",
        f"(relation {POSITIVE} (String))",
        f"(relation {LEAF} ({EXPR}))",
    ]
    return "\n".join(lines)
