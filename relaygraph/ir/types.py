"""The syntax of Relay types: what annotations, signatures and ADT definitions are built from.

Shape arithmetic, relations and inference live in ``relaygraph.ty``; this module only holds the
interned type nodes so that expressions can carry annotations. A dimension is an ``int``, the
``Any`` marker (printed ``?``) or a symbolic expression (a sympy expression built by
``relaygraph.ty``; this module accepts any hashable object with ``free_symbols``).
"""

from __future__ import annotations

import enum
import itertools
from typing import Any as _Any

from .node import Node, NodeError

__all__ = [
    "Type", "Kind", "AnyDim", "Any", "TensorType", "TupleType", "FuncType", "TypeVar",
    "GlobalTypeVar", "TypeCall", "RefType", "IncompleteType", "TypeConstraint", "TypeRelation",
    "DTYPES", "check_dtype", "scalar_type", "format_type", "format_dim",
]

DTYPES = frozenset({
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16",
})


def check_dtype(dtype: object, where: str = "dtype") -> str:
    """Return ``dtype`` if it names a Relay scalar type, else raise a NodeError."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise NodeError(f"{where}: unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return dtype


class Kind(enum.Enum):
    """Kinds of type variables, as in Relay."""

    Type = 0
    ShapeVar = 1
    BaseType = 2
    Constraint = 4
    AdtHandle = 5
    TypeData = 6


class Type(Node):
    """Base class of every type node."""

    __slots__ = ()

    def __str__(self) -> str:
        return format_type(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {format_type(self)}>"


class AnyDim(Node):
    """The unknown dimension ``?`` (a singleton)."""

    __slots__ = ()

    def __new__(cls) -> AnyDim:
        return cls._make()

    def __repr__(self) -> str:
        return "?"

    __str__ = __repr__


Any = AnyDim()


def _canonical_dim(d: _Any, where: str):
    if d is Any or (isinstance(d, int) and not isinstance(d, bool)):
        if isinstance(d, int) and d < 0:
            raise NodeError(f"{where}: dimensions must be >= 0, got {d}")
        return d
    if d is None or d == "?":
        return Any
    if getattr(d, "is_Integer", False):  # a sympy Integer is a plain int
        return _canonical_dim(int(d), where)
    if hasattr(d, "free_symbols") and hasattr(d, "__hash__"):
        return d
    tolist = getattr(d, "tolist", None)  # numpy integer
    if tolist is not None and isinstance(tolist(), int):
        return _canonical_dim(tolist(), where)
    raise NodeError(f"{where}: a dimension is an int, Any ('?') or a symbolic expression; got "
                    f"{type(d).__name__} {d!r}")


class TensorType(Type):
    """A tensor of a fixed rank: ``Tensor[(1, 3, ?, w), float32]``; rank 0 is a scalar."""

    __slots__ = ("shape", "dtype")

    def __new__(cls, shape=(), dtype: str = "float32") -> TensorType:
        if isinstance(shape, (int, Node)) or hasattr(shape, "free_symbols"):
            shape = (shape,)
        try:
            dims = tuple(_canonical_dim(d, f"TensorType.shape[{i}]") for i, d in enumerate(shape))
        except TypeError as exc:
            if isinstance(exc, NodeError):
                raise
            raise NodeError(f"TensorType.shape: expected a sequence of dims, got {shape!r}") from None
        return cls._make(dims, check_dtype(dtype, "TensorType.dtype"))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_concrete(self) -> bool:
        """True when every dimension is a plain int."""
        return all(isinstance(d, int) for d in self.shape)


def scalar_type(dtype: str) -> TensorType:
    """The rank-0 tensor type of ``dtype``."""
    return TensorType((), dtype)


def _types(values, where: str) -> tuple:
    values = tuple(values)
    for i, t in enumerate(values):
        if not isinstance(t, Type):
            raise NodeError(f"{where}[{i}]: expected a Type, got {type(t).__name__} {t!r}")
    return values


class TupleType(Type):
    """The type of a tuple: ``(T1, T2)``."""

    __slots__ = ("fields",)

    def children(self) -> tuple:
        return self.fields

    def __new__(cls, fields=()) -> TupleType:
        return cls._make(_types(fields, "TupleType.fields"))


_ids = itertools.count(1)


class TypeVar(Type):
    """A type parameter (nominal: each one is its own variable; the name is a hint)."""

    __slots__ = ("name_hint", "kind", "uid")
    _nominal = True

    def __new__(cls, name_hint: str = "t", kind: Kind = Kind.Type) -> TypeVar:
        if not isinstance(name_hint, str):
            raise NodeError(f"TypeVar.name_hint: expected str, got {name_hint!r}")
        if not isinstance(kind, Kind):
            raise NodeError(f"TypeVar.kind: expected a Kind, got {kind!r}")
        return cls._make_nominal(name_hint, kind, next(_ids))


class GlobalTypeVar(Type):
    """The name of an ADT (``List``), nominal like a GlobalVar."""

    __slots__ = ("name_hint", "kind", "uid")
    _nominal = True

    def __new__(cls, name_hint: str, kind: Kind = Kind.AdtHandle) -> GlobalTypeVar:
        if not isinstance(name_hint, str) or not name_hint:
            raise NodeError(f"GlobalTypeVar.name_hint: expected a non-empty str, got {name_hint!r}")
        return cls._make_nominal(name_hint, kind, next(_ids))


class TypeConstraint(Type):
    """Base of constraints that may appear in a FuncType."""

    __slots__ = ()


class TypeRelation(TypeConstraint):
    """A named relation between types (``Broadcast(t1, t2, t3)``), solved by InferType."""

    __slots__ = ("name", "args", "num_inputs", "attrs")

    def __new__(cls, name: str, args, num_inputs: int, attrs=None) -> TypeRelation:
        from .attrs import EMPTY_ATTRS, Attrs

        if not isinstance(name, str):
            raise NodeError(f"TypeRelation.name: expected str, got {name!r}")
        if attrs is None:
            attrs = EMPTY_ATTRS
        elif not isinstance(attrs, Attrs):
            attrs = Attrs(attrs)
        return cls._make(name, _types(args, "TypeRelation.args"), int(num_inputs), attrs)

    def children(self) -> tuple:
        return self.args


class FuncType(Type):
    """``fn[T](A, B) -> R`` with optional type constraints."""

    __slots__ = ("arg_types", "ret_type", "type_params", "type_constraints")

    def __new__(cls, arg_types, ret_type: Type, type_params=(), type_constraints=()) -> FuncType:
        if not isinstance(ret_type, Type):
            raise NodeError(f"FuncType.ret_type: expected a Type, got {ret_type!r}")
        params = tuple(type_params)
        for i, p in enumerate(params):
            if not isinstance(p, TypeVar):
                raise NodeError(f"FuncType.type_params[{i}]: expected a TypeVar, got {p!r}")
        return cls._make(_types(arg_types, "FuncType.arg_types"), ret_type, params,
                         _types(type_constraints, "FuncType.type_constraints"))

    def children(self) -> tuple:
        # type_params are binders, not sub-types
        return (*self.arg_types, self.ret_type, *self.type_constraints)


class TypeCall(Type):
    """An ADT applied to type arguments: ``List[int32]``."""

    __slots__ = ("func", "args")

    def __new__(cls, func: Type, args=()) -> TypeCall:
        if not isinstance(func, Type):
            raise NodeError(f"TypeCall.func: expected a Type, got {func!r}")
        return cls._make(func, _types(args, "TypeCall.args"))

    def children(self) -> tuple:
        return (self.func, *self.args)


class RefType(Type):
    """The type of a mutable reference cell."""

    __slots__ = ("value",)

    def __new__(cls, value: Type) -> RefType:
        if not isinstance(value, Type):
            raise NodeError(f"RefType.value: expected a Type, got {value!r}")
        return cls._make(value)

    def children(self) -> tuple:
        return (self.value,)


class IncompleteType(Type):
    """A placeholder type to be solved by inference (nominal: each hole is distinct)."""

    __slots__ = ("kind", "uid")
    _nominal = True

    def __new__(cls, kind: Kind = Kind.Type) -> IncompleteType:
        return cls._make_nominal(kind, next(_ids))


def format_dim(d) -> str:
    """A dimension as Relay text: ``3``, ``?`` or the symbolic expression."""
    return "?" if d is Any else str(d)


def format_type(t: Type) -> str:
    """A type in Relay's text syntax (``Tensor[(1, 3), float32]``, ``(A, B)``, ``fn (A) -> B``)."""
    # Types nest shallowly in practice, but keep this iterative like every other walk.
    out: list[str] = []
    stack: list = [t]
    while stack:
        cur = stack.pop()
        if isinstance(cur, str):
            out.append(cur)
        elif isinstance(cur, TensorType):
            if not cur.shape:
                out.append(cur.dtype)
            else:
                # TVM prints a rank-1 shape without a trailing comma: Tensor[(3), float32]
                dims = ", ".join(format_dim(d) for d in cur.shape)
                out.append(f"Tensor[({dims}), {cur.dtype}]")
        elif isinstance(cur, (TypeVar, GlobalTypeVar)):
            # As the text printer names them: a letter first (TVM's `t` prefix), then only
            # letters, digits and underscores, so the name reads back as one token.
            name = cur.name_hint
            if not (name[:1].isascii() and name[:1].isalpha()):
                name = "t" + name
            out.append("".join(c if c.isascii() and (c.isalnum() or c == "_") else "_"
                               for c in name))
        elif isinstance(cur, IncompleteType):
            out.append("_")
        else:
            stack.extend(reversed(_type_parts(cur)))
    return "".join(out)


def _type_parts(t: Type) -> list:
    def joined(items, sep=", "):
        parts: list = []
        for i, item in enumerate(items):
            if i:
                parts.append(sep)
            parts.append(item)
        return parts

    if isinstance(t, TupleType):
        trailing = [","] if len(t.fields) == 1 else []
        return ["(", *joined(t.fields), *trailing, ")"]
    if isinstance(t, FuncType):
        tps = ["[", *joined(t.type_params), "]"] if t.type_params else []
        return ["fn ", *tps, "(", *joined(t.arg_types), ") -> ", t.ret_type]
    if isinstance(t, TypeCall):
        return [t.func, "[", *joined(t.args), "]"] if t.args else [t.func]
    if isinstance(t, RefType):
        return ["ref(", t.value, ")"]
    if isinstance(t, TypeRelation):
        return [f"{t.name}(", *joined(t.args), ")"]
    header = getattr(t, "header", None)  # TypeData
    if header is not None:
        return [header]
    return [type(t).__name__]
