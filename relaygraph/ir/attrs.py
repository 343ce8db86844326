"""Canonical, interned attribute dictionaries for calls and functions."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping
from typing import Any

from .node import Node, NodeError

__all__ = ["Attrs", "canonical_attr", "EMPTY_ATTRS"]

_ATOMS = (bool, int, float, str, type(None))


def canonical_attr(value: Any, where: str = "attr") -> Any:
    """Turn an attribute value into its canonical form: nested tuples of bool/int/float/str/None.

    Lists become tuples, numpy scalars and arrays become Python values, and nodes (types, for
    ``cast``-like ops that take a dtype) are kept as they are because nodes are already canonical.
    """
    if isinstance(value, _ATOMS) or isinstance(value, Node):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(canonical_attr(v, where) for v in value)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if tolist is not None:
        return canonical_attr(tolist(), where)
    raise NodeError(f"{where}: attribute values must be bool, int, float, str, None, nodes or "
                    f"sequences of them; got {type(value).__name__} {value!r}")


def _key_of(value: Any) -> Any:
    # Floats are keyed by their bits (so 0.0 and -0.0 differ and NaN equals itself) and every
    # atom is tagged by type (so 1, 1.0 and True stay distinct).
    if isinstance(value, float):
        return ("f", struct.pack("<d", value))
    if isinstance(value, tuple):
        return ("t", tuple(_key_of(v) for v in value))
    return (type(value).__name__, value)


class Attrs(Node):
    """An immutable mapping from attribute name to canonical value, interned."""

    __slots__ = ("items", "_dict", "_key")
    _fields = ("_key",)  # the interning key is the type-tagged form of the items

    def __new__(cls, mapping: Mapping[str, Any] | None = None, **kwargs: Any) -> Attrs:
        merged = dict(mapping or {}, **kwargs)
        if not merged:
            return EMPTY_ATTRS if "EMPTY_ATTRS" in globals() else cls._build(())
        items = []
        for name in sorted(merged):
            if not isinstance(name, str) or not name:
                raise NodeError(f"Attrs: attribute names must be non-empty strings, got {name!r}")
            items.append((name, canonical_attr(merged[name], f"Attrs[{name!r}]")))
        return cls._build(tuple(items))

    @classmethod
    def _build(cls, items: tuple) -> Attrs:
        key = tuple((k, _key_of(v)) for k, v in items)

        def fill(node: Attrs) -> None:
            # runs only for a new node, before it is published: other threads see it complete
            Attrs.items.__set__(node, items)
            Attrs._dict.__set__(node, dict(items))

        return cls._make(key, init=fill)

    def field_values(self) -> tuple:
        return (self.items,)

    def replace(self, **changes: Any) -> Attrs:  # type: ignore[override]
        """Attrs with some entries changed (``None`` values are kept: they are real values)."""
        if not changes:
            return self
        merged = dict(self._dict)
        merged.update(changes)
        return Attrs(merged)

    def __getitem__(self, name: str) -> Any:
        return self._dict[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._dict.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._dict

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def keys(self):
        return self._dict.keys()

    def values(self):
        return self._dict.values()

    def as_dict(self) -> dict[str, Any]:
        """A fresh mutable copy of the entries."""
        return dict(self._dict)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_repr_value(v)}" for k, v in self.items)
        return f"Attrs({inner})"


def _repr_value(v: Any) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return repr(v)


EMPTY_ATTRS = Attrs._build(())
