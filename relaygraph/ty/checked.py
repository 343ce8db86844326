"""Where checked types live: a ``TypeMap`` (node -> type) owned by the result of one inference.

Nodes are immutable and interned, so a type cannot be a field that a pass sets later (TVM's
``checked_type_``), and it cannot live in one process-wide table either: a node shared by two
programs (``Nil`` in a module over ``List[int32]`` and in one over ``List[float32]``) has a type
per program. So each run of InferType builds its own ``TypeMap`` and hands it out with its result:

- ``rg.infer_type(mod)`` returns a typed IRModule that owns its map (``typed.checked_types``;
  ``typed.type_of(e)`` and ``rg.type_of(e, mod=typed)`` read it). Passes copy a module together
  with its map, so a pass that needs types reads the ones of the module it was given; nodes a
  pass builds are not in it (run InferType again).
- ``rg.infer_type(expr)`` returns an expression, which cannot own anything: its map lives as long
  as the returned expression does (see *anchors* below).

Within one inference a closed polymorphic node can be used at several types (``Nil`` as
``List[int32]`` and as ``List[float32]`` in one module). The map records every type such a node
was used at; a lookup returns the type when it is unique and otherwise raises a RelayError that
lists them (``types_of`` returns them all): the node alone does not say which use is meant, the
expression around it does.

``rg.type_of(e)`` without a module answers from the live results that checked ``e``: the type
when they agree, a RelayError listing the types when they do not (pass ``mod=``). A result is
live while its typed module, or one of the roots it typed (the functions of the module, the
returned expression), is. The map holds its roots weakly and the roots keep it alive through a
weak-keyed registry, so there is no reference cycle; a newer result of the same question (the
same roots in the same module) replaces an older one there instead of piling up.
"""

from __future__ import annotations

import threading
import weakref

from ..errors import RelayError
from ..ir.node import Node
from ..ir.types import Type, format_type

__all__ = ["TypeMap", "known_type", "type_of", "types_of", "module_types"]

_LIVE: weakref.WeakSet = weakref.WeakSet()  # every TypeMap still reachable, for lookups without a module
_ANCHORED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # root -> [TypeMap] it keeps alive
_LOCK = threading.Lock()


class TypeMap:
    """The checked types of one inference: node -> type for every node it checked."""

    __slots__ = ("_types", "_several", "_anchors", "_key", "__weakref__")

    def __init__(self, types: dict, several: dict | None = None) -> None:
        self._types = types  # node -> its one type
        self._several = several or {}  # node -> the distinct types of its uses (more than one)
        self._anchors: dict = {}  # id(root) -> (weak ref to root, type): roots are held weakly
        self._key = None

    def get(self, node) -> Type | None:
        """The node's type; None when this inference did not check it; a RelayError when it was
        used at several types."""
        t = self._types.get(node)
        if t is not None:
            return t
        return self._rare(node)

    def _rare(self, node) -> Type | None:
        several = self._several.get(node)
        if several is not None:
            raise _ambiguous(node, several, "in this program")
        entry = self._anchors.get(id(node))
        if entry is not None and entry[0]() is node:
            return entry[1]
        return None

    def types_of(self, node) -> tuple[Type, ...]:
        """Every type this inference gave ``node`` (one for most nodes, none if unchecked)."""
        several = self._several.get(node)
        if several is not None:
            return several
        t = self.get(node)
        return () if t is None else (t,)

    def type_of(self, node) -> Type:
        """The node's type; a RelayError when it was not checked here or has several."""
        t = self.get(node)
        if t is None:
            raise RelayError(f"this {type(node).__name__} was not type-checked in this program; "
                             "run rg.infer_type on the module that contains it")
        return t

    def __contains__(self, node) -> bool:
        return node in self._types or node in self._several or self._rare(node) is not None

    def __len__(self) -> int:
        return len(self._types) + len(self._several) + len(self._anchors)

    def __repr__(self) -> str:
        return f"<TypeMap of {len(self)} nodes>"


def _ambiguous(node, types, where: str) -> RelayError:
    listed = ", ".join(sorted(format_type(t) for t in types))
    return RelayError(f"this {type(node).__name__} has several types {where} ({listed}): one shared "
                      "node is used in several contexts; ask for the type of the expression around "
                      "the use you mean, or pass mod= to rg.type_of")


def publish(tm: TypeMap, roots, key: tuple) -> TypeMap:
    """Make ``tm`` live: visible to lookups without a module, and kept alive by its roots.

    ``key`` names the question answered (the roots and their context): a newer map with the same
    key replaces an older one among those the roots keep alive."""
    types, anchors = tm._types, tm._anchors
    for r in roots:
        t = types.pop(r, None)  # held weakly from now on, or the map would keep its root alive
        if t is not None:
            anchors[id(r)] = (weakref.ref(r), t)
    tm._key = key
    with _LOCK:
        _LIVE.add(tm)
        for ref, _ in anchors.values():
            r = ref()
            kept = [m for m in _ANCHORED.get(r, ()) if m._key != key]
            kept.append(tm)
            _ANCHORED[r] = kept
    return tm


def module_types(mod) -> TypeMap | None:
    """The checked types a typed module owns (None when it was not type-checked)."""
    return getattr(mod, "checked_types", None)


def _map_of(mod) -> TypeMap:
    if isinstance(mod, TypeMap):
        return mod
    tm = module_types(mod)
    if tm is None:
        raise RelayError("this module has not been type-checked; use the module rg.infer_type "
                         "returns")
    return tm


def types_of(expr: Node, mod=None) -> tuple[Type, ...]:
    """Every distinct type ``expr`` was checked at: in ``mod`` (a typed module or a TypeMap), or
    in all live results of type inference."""
    if mod is not None:
        return _map_of(mod).types_of(expr)
    if not isinstance(expr, Node):
        return ()
    with _LOCK:  # a snapshot: another thread may publish meanwhile
        live = list(_LIVE)
    found: list[Type] = []
    for tm in live:
        for t in tm.types_of(expr):
            if t not in found:
                found.append(t)
    return tuple(found)


def known_type(expr: Node, mod=None) -> Type | None:
    """The checked type of ``expr`` (in ``mod`` when given), None if it has not been checked; a
    RelayError when it has several."""
    if mod is not None:
        return _map_of(mod).get(expr)
    found = types_of(expr)
    if len(found) > 1:
        raise _ambiguous(expr, found, "in the programs type-checked so far")
    return found[0] if found else None


def type_of(expr: Node, mod=None) -> Type:
    """The checked type of ``expr``, in ``mod`` (a typed module) when given, else from the live
    results of rg.infer_type; a RelayError if it is unchecked or has several types."""
    t = known_type(expr, mod)
    if t is None:
        what = type(expr).__name__
        where = "in this module" if mod is not None else "yet"
        raise RelayError(f"this {what} has not been type-checked {where}; run rg.infer_type on the "
                         f"module or expression that contains it first")
    return t
