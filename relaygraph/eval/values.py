"""Run-time values of Relay programs and how they print.

Tensors are numpy arrays (scalars are rank-0 arrays) and tuples are Python tuples; the other
values have a class here. Printing and comparison are iterative, so a list of 100,000 ``Cons``
cells prints without touching Python's recursion limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.adt import Constructor
from ..ir.expr import Function, Op, Var

__all__ = [
    "ConstructorValue", "Closure", "RefValue", "OpValue", "format_value", "values_equal",
    "to_list", "from_list",
]


class ConstructorValue:
    """An ADT value: a constructor applied to its fields, printed ``Cons(1, Nil)``."""

    __slots__ = ("constructor", "fields")

    def __init__(self, constructor: Constructor, fields=()) -> None:
        self.constructor = constructor
        self.fields = tuple(fields)

    @property
    def name(self) -> str:
        """The constructor's name (``Cons``)."""
        return self.constructor.name_hint

    def __repr__(self) -> str:
        return format_value(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConstructorValue):
            return NotImplemented
        return values_equal(self, other)

    __hash__ = None  # type: ignore[assignment]  # fields may be arrays


class Closure:
    """A function value: the function and the environment it captured where it was made."""

    __slots__ = ("func", "env", "name")

    def __init__(self, func: Function, env: Any = None, name: str | None = None) -> None:
        self.func = func
        self.env = env
        self.name = name

    def describe(self) -> str:
        """``@f`` for a global, else ``fn(%x, %y)``."""
        if self.name is not None:
            return f"@{self.name}"
        return "fn(" + ", ".join(f"%{p.name_hint}" for p in self.func.params) + ")"

    def __repr__(self) -> str:
        captured = _captured_names(self)
        extra = f" capturing {', '.join(captured)}" if captured else ""
        return f"<closure {self.describe()}{extra}>"


class RefValue:
    """A mutable reference cell made by ``ref(v)``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return format_value(self)


class OpValue:
    """A primitive operator used as a first-class value (called with default attributes)."""

    __slots__ = ("op",)

    def __init__(self, op: Op) -> None:
        self.op = op

    def __repr__(self) -> str:
        return f"<op {self.op.name}>"


def _captured_names(closure: Closure) -> list[str]:
    env = closure.env
    names: list[str] = []
    while env is not None and len(names) < 8:
        names.extend(f"%{k.name_hint}" for k in env.vars if isinstance(k, Var))  # not memo entries
        env = env.parent
    return names[:8]


def _format_tensor(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        item = arr.item()
        return repr(item) if arr.dtype != np.bool_ else ("True" if item else "False")
    body = np.array2string(arr, separator=", ", threshold=64, edgeitems=3)
    return f"tensor({body}, {arr.dtype})"


def format_value(value: Any) -> str:
    """A readable rendering of a value: ``1.5``, ``(a, b)``, ``Cons(1, Nil)``, ``ref(0)``."""
    out: list[str] = []
    stack: list = [value]
    while stack:
        cur = stack.pop()
        if isinstance(cur, _Text):
            out.append(cur.text)
        elif isinstance(cur, np.ndarray):
            out.append(_format_tensor(cur))
        elif isinstance(cur, np.generic):
            out.append(_format_tensor(np.asarray(cur)))
        elif isinstance(cur, tuple):
            parts = _joined(cur, "(", ")", trailing_comma=len(cur) == 1)
            stack.extend(reversed(parts))
        elif isinstance(cur, ConstructorValue):
            if not cur.fields:
                out.append(cur.name)
            else:
                stack.extend(reversed(_joined(cur.fields, cur.name + "(", ")")))
        elif isinstance(cur, RefValue):
            stack.extend(reversed([_Text("ref("), cur.value, _Text(")")]))
        elif isinstance(cur, Constructor):
            out.append(f"<constructor {cur.name_hint}>")
        else:
            out.append(repr(cur))
    return "".join(out)


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _joined(items, open_: str, close: str, trailing_comma: bool = False) -> list:
    parts: list = [_Text(open_)]
    for i, item in enumerate(items):
        if i:
            parts.append(_Text(", "))
        parts.append(item)
    if trailing_comma:
        parts.append(_Text(","))
    parts.append(_Text(close))
    return parts


def values_equal(a: Any, b: Any, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """Structural equality of values (tensors equal in dtype, shape and within tolerance)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, (np.ndarray, np.generic)) or isinstance(y, (np.ndarray, np.generic)):
            if not (isinstance(x, (np.ndarray, np.generic)) and isinstance(y, (np.ndarray, np.generic))):
                return False
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype != y.dtype or x.shape != y.shape:
                return False
            if rtol == 0.0 and atol == 0.0:
                if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                    return False
            elif not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
                return False
        elif isinstance(x, tuple):
            if not isinstance(y, tuple) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, ConstructorValue):
            if not isinstance(y, ConstructorValue) or x.constructor is not y.constructor:
                return False
            stack.extend(zip(x.fields, y.fields, strict=True))
        elif isinstance(x, RefValue):
            if x is not y:  # refs are compared by identity, like the cells they are
                return False
        elif x is not y and x != y:
            return False
    return True


def to_list(value: Any) -> list:
    """The elements of a ``Cons``/``Nil`` list value, as a Python list."""
    out = []
    while isinstance(value, ConstructorValue) and value.fields:
        if len(value.fields) != 2:
            raise ValueError(f"to_list: {value.name} is not a list cell (it has {len(value.fields)} fields)")
        out.append(value.fields[0])
        value = value.fields[1]
    if not isinstance(value, ConstructorValue):
        raise ValueError(f"to_list: expected a list value, found {format_value(value)}")
    return out


def from_list(items, cons: Constructor, nil: Constructor) -> ConstructorValue:
    """A ``Cons``/``Nil`` list value holding ``items`` (numbers become rank-0 arrays)."""
    value = ConstructorValue(nil, ())
    for item in reversed(list(items)):
        if isinstance(item, (int, float, bool)):
            item = np.asarray(item, dtype=_python_dtype(item))
        value = ConstructorValue(cons, (item, value))
    return value


def _python_dtype(item) -> str:
    if isinstance(item, bool):
        return "bool"
    return "int32" if isinstance(item, int) else "float32"
