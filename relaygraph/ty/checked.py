"""Where checked types live: a side table from node to type, filled by InferType.

Nodes are immutable and interned, so a type cannot be a field that a pass sets later (TVM's
``checked_type_``). InferType records the type of every node it checks here, in a
``WeakKeyDictionary``: the entry lives exactly as long as the node. Because structurally equal
nodes are one node, an expression has one checked type wherever it appears; Vars are nominal,
so each binding has its own. Checking the same node again (in another module) overwrites its
entry with the newer result.
"""

from __future__ import annotations

import weakref

from ..errors import RelayError
from ..ir.node import Node
from ..ir.types import Type

__all__ = ["known_type", "type_of", "record_type", "record_types"]

_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record_type(node: Node, t: Type) -> None:
    """Remember the checked type of ``node``."""
    _CHECKED[node] = t


def record_types(pairs) -> None:
    """Remember many (node, type) pairs at once."""
    _CHECKED.update(pairs)


def known_type(expr: Node) -> Type | None:
    """The checked type of ``expr`` if InferType has checked it, else None."""
    try:
        return _CHECKED.get(expr)
    except TypeError:  # not weak-referenceable: not a node
        return None


def type_of(expr: Node) -> Type:
    """The checked type of ``expr``; a RelayError if it has not been type-checked."""
    t = known_type(expr)
    if t is None:
        what = type(expr).__name__
        raise RelayError(f"this {what} has not been type-checked; run rg.infer_type on the module "
                         f"or expression that contains it first")
    return t
