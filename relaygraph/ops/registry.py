"""The operator table: one record per Relay operator, holding everything about it.

This module fixes the record's shape and the look-up functions; the op modules in this package
fill the table. Other layers rely on these names:

- ``lookup(name) -> OpDef | None`` and ``get(name) -> OpDef`` (KeyError naming close matches)
- ``OpDef.name`` (Relay's name, e.g. ``nn.conv2d``), ``OpDef.attrs`` (an ordered mapping of
  attribute name to default value, in Relay's field order; ``REQUIRED`` marks attributes
  without a default), ``OpDef.num_inputs`` (None for variadic)
- ``OpDef.type_relation(arg_types, attrs) -> Type`` raising ``RelayTypeError`` on a mismatch
- ``OpDef.kernel(args: list[np.ndarray], attrs: Attrs) -> np.ndarray | tuple[np.ndarray, ...]``
- ``OpDef.pattern`` (a ``PatternKind``, TVM's fusion pattern kinds and values)
- ``OpDef.flops(arg_types, out_type, attrs) -> float`` and ``OpDef.bytes(...) -> float``
- ``OpDef.domain``: how to draw valid random inputs (e.g. ``"positive"`` for ``log``)
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpDef", "PatternKind", "REQUIRED", "register", "lookup", "get", "all_ops"]


class PatternKind(enum.IntEnum):
    """Fusion pattern kinds, with TVM's values (lower fuses more readily)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def _no_flops(arg_types, out_type, attrs) -> float:
    return 0.0


@dataclass(eq=False)
class OpDef:
    """Everything about one operator."""

    name: str
    num_inputs: int | None
    attrs: Mapping[str, Any]
    type_relation: Callable[..., Any]
    kernel: Callable[..., Any]
    pattern: PatternKind = PatternKind.OPAQUE
    flops: Callable[..., float] = _no_flops
    bytes: Callable[..., float] | None = None
    domain: str = "any"
    input_names: tuple[str, ...] = ()
    doc: str = ""
    extra: dict = field(default_factory=dict)

    def attr_defaults(self) -> dict[str, Any]:
        """The attributes that have defaults, with them."""
        return {k: v for k, v in self.attrs.items() if v is not REQUIRED}


_TABLE: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add an operator record (one per name)."""
    if opdef.name in _TABLE:
        raise ValueError(f"operator {opdef.name} is registered twice")
    _TABLE[opdef.name] = opdef
    return opdef


def lookup(name: str) -> OpDef | None:
    """The record of ``name``, or None."""
    _ensure_loaded()
    return _TABLE.get(name)


def get(name: str) -> OpDef:
    """The record of ``name``; a KeyError suggesting close names when there is none."""
    op = lookup(name)
    if op is None:
        close = difflib.get_close_matches(name, list(_TABLE), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown operator {name!r}{hint}")
    return op


def all_ops() -> list[OpDef]:
    """Every registered operator, sorted by name."""
    _ensure_loaded()
    return [_TABLE[k] for k in sorted(_TABLE)]


_loaded = False


def _ensure_loaded() -> None:
    # The op definition modules register themselves when relaygraph.ops is imported.
    global _loaded
    if not _loaded:
        _loaded = True
        import relaygraph.ops  # noqa: F401
