"""Attributes as text: ``padding=[1, 1], epsilon=1e-05f, layout="NCHW", units=None``.

Calls of an op print the attributes that differ from the op's defaults, in the op's field order
(TVM prints non-default fields only); functions and other calls print all of theirs, by name.
"""

from __future__ import annotations

import math

from ..ir.expr import Call, Op
from ..ir.node import Node
from .literals import format_float

__all__ = ["format_attrs", "format_attr_value", "same_value"]

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def same_value(a, b) -> bool:
    """Equal attribute values of the same types (``1``, ``1.0`` and ``True`` differ)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def format_attr_value(value) -> str:
    """One attribute value in Relay's syntax."""
    if value is None:
        return "None"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nanf"
        if math.isinf(value):
            return "-inff" if value < 0 else "inff"
        return format_float(value) + "f"
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c, c) for c in value) + '"'
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    if isinstance(value, Node):
        raise NotImplementedError(f"printing attribute values that are IR nodes "
                                  f"({type(value).__name__}); the text format has no syntax for them")
    raise NotImplementedError(f"printing attribute values of type {type(value).__name__}")


def format_attrs(node, cache: dict) -> list[str]:
    """The ``name=value`` items to print for a call's or a function's attributes."""
    attrs = node.attrs
    op_name = node.op.name if type(node) is Call and type(node.op) is Op else None
    key = (op_name, attrs)
    hit = cache.get(key)
    if hit is not None:
        return hit
    items = list(attrs.items)
    if op_name is not None:
        items = _op_items(op_name, attrs)
    out = cache[key] = [f"{name}={format_attr_value(value)}" for name, value in items]
    return out


def _op_items(op_name: str, attrs) -> list[tuple]:
    from ..ops import REQUIRED, lookup

    opdef = lookup(op_name)
    if opdef is None:
        return list(attrs.items)
    schema = opdef.attrs
    out = []
    for name, default in schema.items():
        if name in attrs:
            value = attrs[name]
            if default is REQUIRED or not same_value(value, default):
                out.append((name, value))
    out.extend((name, value) for name, value in attrs.items if name not in schema)
    return out
