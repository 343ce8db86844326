"""Relay expressions: interned, immutable nodes with Python operator sugar.

Every expression class lists its fields in ``__slots__`` and knows its expression children
(``children()``) and how to rebuild itself from new ones (``with_children()``); traversals in
``relaygraph.ir.traversal`` are written once against those two methods.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import numpy as np

from .attrs import EMPTY_ATTRS, Attrs
from .node import Node, NodeError
from .types import DTYPES, Type, TypeVar

__all__ = [
    "Expr", "Var", "GlobalVar", "Constant", "Tuple", "TupleGetItem", "Let", "Function", "Call",
    "If", "Op", "RefCreate", "RefRead", "RefWrite", "const", "var", "as_expr", "is_atomic",
]

_uids = itertools.count(1)


def expect_expr(value: Any, where: str) -> Expr:
    """``value`` if it is an Expr, else a NodeError naming ``where``."""
    if isinstance(value, Expr):
        return value
    raise NodeError(f"{where}: expected an Expr, got {type(value).__name__} {_short(value)}")


def _exprs(values: Any, where: str) -> tuple:
    if type(values) is tuple:  # fast path: the common case, checked without building anything
        for v in values:
            if not isinstance(v, Expr):
                break
        else:
            return values
    if isinstance(values, (str, bytes, Node)) or not hasattr(values, "__iter__"):
        raise NodeError(f"{where}: expected a sequence of Exprs, got {type(values).__name__} "
                        f"{_short(values)}")
    values = tuple(values)
    for i, v in enumerate(values):
        if not isinstance(v, Expr):
            raise NodeError(f"{where}[{i}]: expected an Expr, got {type(v).__name__} {_short(v)}")
    return values


def _opt_type(value: Any, where: str) -> Type | None:
    if value is None or isinstance(value, Type):
        return value
    raise NodeError(f"{where}: expected a Type or None, got {type(value).__name__} {_short(value)}")


def _attrs(value: Any, where: str) -> Attrs:
    if value is None:
        return EMPTY_ATTRS
    if isinstance(value, Attrs):
        return value
    if isinstance(value, dict):
        return Attrs(value)
    raise NodeError(f"{where}: expected a dict or Attrs, got {type(value).__name__} {_short(value)}")


def short_repr(value: Any) -> str:
    """A repr cut to 60 characters, for error messages."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_expr, _short = expect_expr, short_repr  # the short names this module uses


class Expr(Node):
    """Base class of every Relay expression."""

    __slots__ = ()

    def children(self) -> tuple:
        """The expression-level children (sub-expressions, clauses, patterns), in order."""
        return ()

    def with_children(self, children: tuple) -> Expr:
        """This node rebuilt over new children (same order as ``children()``)."""
        return self

    # -- printing ---------------------------------------------------------------------------
    def __str__(self) -> str:
        try:
            from ..text import astext
        except ImportError:
            return repr(self)
        return astext(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} #{id(self) & 0xFFFFFF:06x}>"

    def _repr_html_(self) -> str:
        from .display import repr_html

        return repr_html(self, type(self).__name__, str(self))

    # -- sugar: Python operators build Relay calls; == stays identity ---------------------------
    def __add__(self, other):
        return _binary("add", self, other)

    def __radd__(self, other):
        return _binary("add", other, self)

    def __sub__(self, other):
        return _binary("subtract", self, other)

    def __rsub__(self, other):
        return _binary("subtract", other, self)

    def __mul__(self, other):
        return _binary("multiply", self, other)

    def __rmul__(self, other):
        return _binary("multiply", other, self)

    def __truediv__(self, other):
        return _binary("divide", self, other)

    def __rtruediv__(self, other):
        return _binary("divide", other, self)

    def __lt__(self, other):
        return _binary("less", self, other)

    def __le__(self, other):
        return _binary("less_equal", self, other)

    def __gt__(self, other):
        return _binary("greater", self, other)

    def __ge__(self, other):
        return _binary("greater_equal", self, other)

    def __neg__(self):
        return Call(Op("negative"), (self,))

    def __getitem__(self, index: int) -> TupleGetItem:
        return TupleGetItem(self, index)

    def __call__(self, *args, **attrs) -> Call:
        return Call(self, tuple(as_expr(a) for a in args), attrs or None)

    __hash__ = Node.__hash__  # identity, kept although comparison operators are overloaded


def as_expr(value: Any) -> Expr:
    """An Expr as is; a Python or numpy number or array as a Constant (float -> float32)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, np.ndarray, np.generic)):
        return const(value)
    raise NodeError(f"cannot use {type(value).__name__} {_short(value)} as a Relay expression")


def _binary(op: str, a: Any, b: Any) -> Call:
    return Call(Op(op), (as_expr(a), as_expr(b)))


class Var(Expr):
    """A local variable ``%x``. Nominal: each Var is distinct; the name is only a hint."""

    __slots__ = ("name_hint", "type_annotation", "uid")
    _nominal = True

    def __new__(cls, name_hint: str, type_annotation: Type | None = None) -> Var:
        if not isinstance(name_hint, str):
            raise NodeError(f"Var.name_hint: expected str, got {type(name_hint).__name__} "
                            f"{_short(name_hint)}")
        return cls._make_nominal(name_hint, _opt_type(type_annotation, "Var.type_annotation"),
                                 next(_uids))

    def __repr__(self) -> str:
        return f"<Var %{self.name_hint}#{self.uid}>"


def var(name_hint: str, type_annotation: Type | None = None, *, shape=None, dtype=None) -> Var:
    """A new Var; ``shape``/``dtype`` are shorthand for a TensorType annotation."""
    if shape is not None or dtype is not None:
        from .types import TensorType

        if type_annotation is not None:
            raise NodeError("var: give either type_annotation or shape/dtype, not both")
        type_annotation = TensorType(shape if shape is not None else (), dtype or "float32")
    return Var(name_hint, type_annotation)


class GlobalVar(Expr):
    """A module-level function name ``@f`` (nominal, like Var)."""

    __slots__ = ("name_hint", "uid")
    _nominal = True

    def __new__(cls, name_hint: str) -> GlobalVar:
        if not isinstance(name_hint, str) or not name_hint:
            raise NodeError(f"GlobalVar.name_hint: expected a non-empty str, got {_short(name_hint)}")
        return cls._make_nominal(name_hint, next(_uids))

    def __repr__(self) -> str:
        return f"<GlobalVar @{self.name_hint}>"


class Op(Expr):
    """A primitive operator, named as in Relay (``add``, ``nn.conv2d``); interned by name."""

    __slots__ = ("name",)

    def __new__(cls, name: str) -> Op:
        if not isinstance(name, str) or not name or not all(
            part.isidentifier() for part in name.split(".")
        ):
            raise NodeError(f"Op.name: expected a dotted identifier like 'nn.conv2d', got "
                            f"{_short(name)}")
        return cls._make(name)

    def __repr__(self) -> str:
        return f"<Op {self.name}>"


class Constant(Expr):
    """A tensor literal. Keyed by dtype, shape and a digest of its bytes; scalars are rank 0."""

    __slots__ = ("dtype", "shape", "digest", "_data")
    _fields = ("dtype", "shape", "digest")

    def __new__(cls, data: Any) -> Constant:
        if isinstance(data, Node):
            raise NodeError(f"Constant.data: expected an array or number, got {type(data).__name__}")
        try:
            arr = np.asarray(data)
        except Exception as exc:  # numpy's own message names what it could not convert
            raise NodeError(f"Constant.data: cannot convert to an array: {exc}") from None
        dtype = str(arr.dtype)
        if dtype not in DTYPES:
            raise NodeError(f"Constant.data: dtype {dtype} is not a Relay dtype "
                            f"({', '.join(sorted(DTYPES))})")
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make rank 0 into rank 1)
            arr = arr.copy(order="C")
        digest = hashlib.blake2b(arr.tobytes(), digest_size=16).digest()

        def fill(node: Constant) -> None:
            # runs only for a new node, before it is published: other threads see it complete
            frozen = arr.copy()
            frozen.flags.writeable = False
            _set_data(node, frozen)

        return cls._make(dtype, tuple(arr.shape), digest, init=fill)

    @property
    def data(self) -> np.ndarray:
        """The value, as a read-only numpy array."""
        return self._data

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    def __repr__(self) -> str:
        if self.is_scalar:
            return f"<Constant {self._data.item()!r}:{self.dtype}>"
        return f"<Constant {self.dtype}{list(self.shape)}>"


_set_data = Constant._data.__set__


def const(value: Any, dtype: str | None = None) -> Constant:
    """A Constant from a number or array; Python floats default to float32, ints to int32."""
    if isinstance(value, Constant):
        return value
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
    if dtype is not None and dtype not in DTYPES:
        raise NodeError(f"const: unknown dtype {dtype!r}")
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise NodeError(f"const: cannot make a {dtype or 'tensor'} constant from "
                        f"{_short(value)}: {exc}") from None
    if arr.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
        arr = arr.astype(np.float32)  # nested Python floats, like relay.const
    return Constant(arr)


class Tuple(Expr):
    """A tuple ``(a, b)``; ``()`` is the unit value."""

    __slots__ = ("fields",)

    def __new__(cls, fields=()) -> Tuple:
        return cls._make(_exprs(fields, "Tuple.fields"))

    def children(self) -> tuple:
        return self.fields

    def with_children(self, children: tuple) -> Tuple:
        children = tuple(children)
        return self if children == self.fields else Tuple(children)


class TupleGetItem(Expr):
    """Projection ``t.N`` out of a tuple."""

    __slots__ = ("tuple_value", "index")

    def __new__(cls, tuple_value: Expr, index: int) -> TupleGetItem:
        _expr(tuple_value, "TupleGetItem.tuple_value")
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise NodeError(f"TupleGetItem.index: expected an int, got {_short(index)}")
        if index < 0:
            raise NodeError(f"TupleGetItem.index: must be >= 0, got {index}")
        return cls._make(tuple_value, int(index))

    def children(self) -> tuple:
        return (self.tuple_value,)

    def with_children(self, children: tuple) -> TupleGetItem:
        (t,) = children
        return self if t is self.tuple_value else TupleGetItem(t, self.index)


class Call(Expr):
    """A call of an Op, Function, GlobalVar, Constructor or any expression, with attributes."""

    __slots__ = ("op", "args", "attrs", "type_args")

    def __new__(cls, op: Expr, args=(), attrs=None, type_args=()) -> Call:
        if not isinstance(op, Expr):
            raise NodeError(f"Call.op: expected an Expr (Op, Function, GlobalVar, Constructor, ...), "
                            f"got {type(op).__name__} {_short(op)}")
        if type(args) is tuple:  # inlined fast path of _exprs: Call is the hottest constructor
            for a in args:
                if not isinstance(a, Expr):
                    args = _exprs(args, "Call.args")
                    break
        else:
            args = _exprs(args, "Call.args")
        if attrs is None:
            attrs = EMPTY_ATTRS
        elif type(attrs) is not Attrs:
            attrs = _attrs(attrs, "Call.attrs")
        if type_args:
            type_args = tuple(type_args)
            for i, t in enumerate(type_args):
                if not isinstance(t, Type):
                    raise NodeError(f"Call.type_args[{i}]: expected a Type, got {_short(t)}")
        else:
            type_args = ()
        return cls._make(op, args, attrs, type_args)

    def children(self) -> tuple:
        return (self.op, *self.args)

    def with_children(self, children: tuple) -> Call:
        op, *args = children
        if op is self.op and len(args) == len(self.args) and all(
                a is b for a, b in zip(args, self.args, strict=True)):
            return self
        return Call(op, tuple(args), self.attrs, self.type_args)


class Let(Expr):
    """``let %x = value; body``."""

    __slots__ = ("var", "value", "body")

    def __new__(cls, var: Var, value: Expr, body: Expr) -> Let:
        if not isinstance(var, Var):
            raise NodeError(f"Let.var: expected a Var, got {type(var).__name__} {_short(var)}")
        return cls._make(var, _expr(value, "Let.value"), _expr(body, "Let.body"))

    def children(self) -> tuple:
        return (self.var, self.value, self.body)

    def with_children(self, children: tuple) -> Let:
        v, value, body = children
        if v is self.var and value is self.value and body is self.body:
            return self
        return Let(v, value, body)


class Function(Expr):
    """``fn[T](%x: T, ...) -> R { body }`` with attributes (``Primitive=1``, ...)."""

    __slots__ = ("params", "body", "ret_type", "type_params", "attrs")

    def __new__(cls, params, body: Expr, ret_type: Type | None = None, type_params=(),
                attrs=None) -> Function:
        if isinstance(params, Node) or not hasattr(params, "__iter__"):
            raise NodeError(f"Function.params: expected a sequence of Vars, got {_short(params)}")
        params = tuple(params)
        for i, p in enumerate(params):
            if not isinstance(p, Var):
                raise NodeError(f"Function.params[{i}]: expected a Var, got {type(p).__name__} "
                                f"{_short(p)}")
        if len(set(params)) != len(params):
            raise NodeError("Function.params: the same Var appears twice")
        type_params = tuple(type_params)
        for i, t in enumerate(type_params):
            if not isinstance(t, TypeVar):
                raise NodeError(f"Function.type_params[{i}]: expected a TypeVar, got {_short(t)}")
        return cls._make(params, _expr(body, "Function.body"),
                         _opt_type(ret_type, "Function.ret_type"), type_params,
                         _attrs(attrs, "Function.attrs"))

    def children(self) -> tuple:
        return (*self.params, self.body)

    def with_children(self, children: tuple) -> Function:
        *params, body = children
        if body is self.body and len(params) == len(self.params) and all(
                a is b for a, b in zip(params, self.params, strict=True)):
            return self
        return Function(params, body, self.ret_type, self.type_params, self.attrs)

    def with_attr(self, name: str, value: Any) -> Function:
        """This function with one attribute set."""
        return self.replace(attrs=self.attrs.replace(**{name: value}))


class If(Expr):
    """``if (cond) { a } else { b }``."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __new__(cls, cond: Expr, true_branch: Expr, false_branch: Expr) -> If:
        return cls._make(_expr(cond, "If.cond"), _expr(true_branch, "If.true_branch"),
                         _expr(false_branch, "If.false_branch"))

    def children(self) -> tuple:
        return (self.cond, self.true_branch, self.false_branch)

    def with_children(self, children: tuple) -> If:
        c, t, f = children
        if c is self.cond and t is self.true_branch and f is self.false_branch:
            return self
        return If(c, t, f)


class _Effect(Expr):
    """Base of the ref nodes: nominal, so two occurrences are two nodes (two cells, two reads)."""

    __slots__ = ()
    _nominal = True

    def replace(self, **changes: Any):
        """A new node of this kind with some fields changed; ``self`` when nothing changes."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise NodeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        values = {f: getattr(self, f) for f in self._fields}
        values.update(changes)
        return type(self)(**values)


class RefCreate(_Effect):
    """``ref(value)``: a new mutable cell."""

    __slots__ = ("value",)

    def __new__(cls, value: Expr) -> RefCreate:
        return cls._make_nominal(_expr(value, "RefCreate.value"))

    def children(self) -> tuple:
        return (self.value,)

    def with_children(self, children: tuple) -> RefCreate:
        (v,) = children
        return self if v is self.value else RefCreate(v)


class RefRead(_Effect):
    """``ref_read(r)``."""

    __slots__ = ("ref",)

    def __new__(cls, ref: Expr) -> RefRead:
        return cls._make_nominal(_expr(ref, "RefRead.ref"))

    def children(self) -> tuple:
        return (self.ref,)

    def with_children(self, children: tuple) -> RefRead:
        (r,) = children
        return self if r is self.ref else RefRead(r)


class RefWrite(_Effect):
    """``ref_write(r, value)``; evaluates to ``()``."""

    __slots__ = ("ref", "value")

    def __new__(cls, ref: Expr, value: Expr) -> RefWrite:
        return cls._make_nominal(_expr(ref, "RefWrite.ref"), _expr(value, "RefWrite.value"))

    def children(self) -> tuple:
        return (self.ref, self.value)

    def with_children(self, children: tuple) -> RefWrite:
        r, v = children
        return self if r is self.ref and v is self.value else RefWrite(r, v)


def is_atomic(expr: Expr) -> bool:
    """Atoms need no binding in ANF: variables, globals, ops, constants, constructors."""
    from .adt import Constructor

    return isinstance(expr, (Var, GlobalVar, Op, Constant, Constructor))
