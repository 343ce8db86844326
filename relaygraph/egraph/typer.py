"""Types of e-classes: what a node's type is, given its children's, and how types travel.

Every e-class has one type. Loaded classes take theirs from InferType; a class that a rule
creates is typed here from its children through the op table's relations (``node_type``), so
symbolic dimensions stay symbolic. Types cross process boundaries as plain data
(``type_to_data``), because IR nodes cannot be pickled.
"""

from __future__ import annotations

from ..errors import RelayTypeError
from ..ir.types import Any as AnyDim
from ..ir.types import FuncType, TensorType, TupleType, Type, format_type
from ..ty.dims import dim_str, parse_dim
from .encoding import OP_PREFIX, op_from_constructor, parse_attr_key

__all__ = ["NodeTypeError", "type_to_data", "type_from_data", "tensor_json", "node_type", "TypeTable"]


class NodeTypeError(Exception):
    """A node whose children's types do not fit it (the message says why)."""


def type_to_data(t: Type):
    """A type as nested tuples of str (picklable, and readable back with ``type_from_data``)."""
    out: list = []
    stack: list = [(t, out)]
    while stack:
        cur, dest = stack.pop()
        if isinstance(cur, TensorType):
            dest.append(("T", tuple(dim_str(d) for d in cur.shape), cur.dtype))
        elif isinstance(cur, TupleType):
            fields: list = []
            dest.append(("U", fields))
            stack.extend((f, fields) for f in reversed(cur.fields))
        elif isinstance(cur, FuncType) and not cur.type_params and not cur.type_constraints:
            parts: list = []
            dest.append(("F", parts))
            stack.extend((f, parts) for f in reversed((*cur.arg_types, cur.ret_type)))
        else:
            raise NotImplementedError(f"the e-graph bridge does not encode the type {format_type(cur)} "
                                      f"(polymorphic functions, ADTs and references are not supported)")
    return _freeze(out[0])


def _freeze(data):
    # Lists were filled in place above; tuples all the way down make the data hashable.
    if data[0] == "T":
        return data
    return (data[0], tuple(_freeze(d) for d in data[1]))


def type_from_data(data) -> Type:
    """The type back from ``type_to_data``."""
    kind = data[0]
    if kind == "T":
        return TensorType(tuple(parse_dim(d) for d in data[1]), data[2])
    parts = [type_from_data(d) for d in data[1]]
    if kind == "U":
        return TupleType(parts)
    return FuncType(parts[:-1], parts[-1])


def tensor_json(t: Type):
    """Cost models' ``class_data`` entry: ``{"shape": [...], "dtype": ...}`` or ``{"tuple": [...]}``."""
    if isinstance(t, TensorType):
        return {"shape": [d if isinstance(d, int) else dim_str(d) for d in t.shape], "dtype": t.dtype}
    if isinstance(t, TupleType):
        return {"tuple": [tensor_json(f) for f in t.fields]}
    return None


class TypeTable:
    """Types by their Relay text, and the facts rules read from them (rank, dtype, dims).

    A symbolic dimension is a negative id, the same for the same expression; ``?`` is -1.
    """

    def __init__(self) -> None:
        self.by_text: dict[str, Type] = {}
        self.text_of: dict[Type, str] = {}
        self.dim_ids: dict[str, int] = {"?": -1}
        self.register("()", TupleType(()))  # the type of the empty argument list, set by a rule

    def text(self, t: Type) -> str:
        """The Relay text of ``t`` (cached: types are interned)."""
        text = self.text_of.get(t)
        if text is None:
            text = format_type(t)
            self.text_of[t] = text
        return text

    def register(self, text: str, t: Type) -> bool:
        """Remember a type; True when its text is new."""
        if text in self.by_text:
            return False
        self.by_text[text] = t
        self.text_of.setdefault(t, text)
        return True

    def dim_id(self, d) -> int:
        """The integer a dimension is stored as in ``(dim e i)``."""
        if isinstance(d, int):
            return d
        key = "?" if d is AnyDim else dim_str(d)
        ident = self.dim_ids.get(key)
        if ident is None:
            ident = self.dim_ids[key] = -len(self.dim_ids) - 1
        return ident

    def facts(self, t: Type):
        """``(rank, dtype, [dim ids])`` of a tensor type, None for other types."""
        if not isinstance(t, TensorType):
            return None
        return len(t.shape), t.dtype, [self.dim_id(d) for d in t.shape]


def _fn_type(t: Type, what: str) -> FuncType:
    if not isinstance(t, FuncType):
        raise NodeTypeError(f"{what} is not a function: it has type {format_type(t)}")
    if t.type_params:
        raise NotImplementedError("calls of polymorphic functions are not encoded in the e-graph")
    return t


def node_type(ctor: str, child_types: list[Type], literals: tuple, leaf_type=None) -> Type:
    """The type of a node ``ctor`` over children of ``child_types``.

    ``literals`` are the node's String/i64 fields (attribute Strings for ops, the index of a
    projection, the key of a variable); ``leaf_type`` is the known type of a leaf (RVar, RConst,
    RGlobal) or the function type of an RFn's template.
    """
    if ctor.startswith(OP_PREFIX):
        op = op_from_constructor(ctor)
        if op is None:
            raise NodeTypeError(f"unknown operator constructor {ctor}")
        attrs = dict(zip(op.attrs, map(parse_attr_key, literals), strict=True))
        try:
            return op.type_relation(child_types, attrs)
        except RelayTypeError as exc:
            raise NodeTypeError(str(exc)) from None
    if ctor in ("RVar", "RConst", "RGlobal"):
        if leaf_type is None:
            raise NodeTypeError(f"({ctor} {literals[0]!r}) is not a leaf the e-graph knows")
        return leaf_type
    if ctor == "RTuple":
        return TupleType(child_types)
    if ctor == "RProj":
        (t,), index = child_types, literals[0]
        if not isinstance(t, TupleType) or not 0 <= index < len(t.fields):
            raise NodeTypeError(f"projection .{index} of a value of type {format_type(t)}")
        return t.fields[index]
    if ctor == "RLet":
        value, body = child_types
        if leaf_type is not None and leaf_type != value:
            raise NodeTypeError(f"let binds %{literals[0]} of type {format_type(leaf_type)} to a value "
                                f"of type {format_type(value)}")
        return body
    if ctor == "RIf":
        cond, then, other = child_types
        if then != other:
            raise NodeTypeError(f"if branches differ: {format_type(then)} vs {format_type(other)}")
        if not (isinstance(cond, TensorType) and cond.dtype == "bool" and not cond.shape):
            raise NodeTypeError(f"if condition must be a bool scalar, got {format_type(cond)}")
        return then
    if ctor == "RCall":
        fn = _fn_type(child_types[0], "the callee")
        args = child_types[1:]
        if list(fn.arg_types) != list(args):
            shown = ", ".join(map(format_type, args))
            raise NodeTypeError(f"a function of type {format_type(fn)} is called with ({shown})")
        return fn.ret_type
    if ctor == "RFn":
        template = _fn_type(leaf_type, "the function template") if leaf_type is not None else None
        if template is None:
            raise NodeTypeError(f"(RFn {literals[0]!r}) is not a function the e-graph knows")
        (body,) = child_types
        if body != template.ret_type:
            raise NodeTypeError(f"function body has type {format_type(body)}, the function returns "
                                f"{format_type(template.ret_type)}")
        return template
    raise NodeTypeError(f"unknown constructor {ctor}")
