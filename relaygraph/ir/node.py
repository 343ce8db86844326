"""Immutable, hash-consed IR nodes.

Every node class lists its fields in ``__slots__``. Structural nodes are interned through a
weak table per class keyed by the field values: building a node equal to a live one returns
the live one, so ``==`` and ``hash`` are identity (Python's defaults) and cost O(1). Nominal
nodes (variables) skip the table and are always new. A node carries nothing outside its key
that could differ between two programs sharing it: source spans belong to the parse that read
them (``SourceMap``), checked types to the result of inference.

Interning is thread-safe: a node is complete before it is published in the table, and two
threads building equal nodes at once get the same one (see ``_compile_make``).
"""

from __future__ import annotations

import weakref
from _weakref import _remove_dead_weakref as remove_dead
from typing import Any, ClassVar

__all__ = ["Node", "NodeError", "live_interned_count", "paused_gc"]


class NodeError(TypeError):
    """A node was built with a field of the wrong kind."""


class _KeyedRef(weakref.ref):
    """A weak reference that remembers its table key, so the callback can drop the entry."""

    __slots__ = ("key",)


# One weak table per node class (so keys need not hold the class): key -> weak reference.
# Threads share them without a lock: every update is one atomic dict operation (under the GIL),
# ``setdefault`` to publish a node and ``_remove_dead_weakref`` (the C helper WeakValueDictionary
# uses) to drop an entry only while it is dead, so a live node published meanwhile stays.
_TABLES: list[dict] = []


def _dropper(table: dict):
    def drop(ref: _KeyedRef) -> None:
        remove_dead(table, ref.key)

    return drop


def _publisher(table: dict):
    setdefault = table.setdefault

    def publish(key: tuple, ref: _KeyedRef, node):
        """Slow path: the slot held a dead reference not dropped yet; drop it and try again."""
        while True:
            remove_dead(table, key)
            old = setdefault(key, ref)
            if old is ref:
                return node
            live = old()
            if live is not None:
                return live

    return publish


def live_interned_count() -> int:
    """Number of interned nodes currently alive (for tests and memory reports)."""
    return sum(len(t) for t in _TABLES)


class Node:
    """Base of every IR node: frozen, slotted, interned unless nominal."""

    __slots__ = ("__weakref__",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _nominal: ClassVar[bool] = False
    _setters: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        if isinstance(own, str):
            own = (own,)
        if "_fields" not in cls.__dict__:
            cls._fields = tuple(f for f in own if not f.startswith("_"))
        # Slot descriptors' __set__ are C functions: the fastest way to fill a frozen node.
        cls._setters = tuple(_slot_setter(cls, f) for f in cls._fields)
        cls._make = staticmethod(_compile_make(cls))

    # -- construction ---------------------------------------------------------------------
    # ``cls._make(*field_values)`` returns the live node with these values or builds and interns
    # a new one; it is generated per class by _compile_make.

    @classmethod
    def _make_nominal(cls, *values: Any):
        """Build a node with its own identity (never interned)."""
        node = object.__new__(cls)
        for setter, value in zip(cls._setters, values, strict=True):
            setter(node, value)
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to delete {name!r})")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} nodes are not picklable; print them as text")

    # -- fields ---------------------------------------------------------------------------
    def field_values(self) -> tuple:
        """The field values, in declaration order."""
        return tuple(getattr(self, f) for f in self._fields)

    def replace(self, **changes: Any):
        """A node like this one with some fields changed; ``self`` when nothing changes."""
        if not changes:
            return self
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise NodeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        if self._nominal:
            raise NodeError(f"{type(self).__name__} is nominal; build a new one instead of replace()")
        values = {f: getattr(self, f) for f in self._fields}
        values.update(changes)
        return type(self)(**values)

    def children(self) -> tuple:
        """Sub-nodes a generic walk descends into (expressions, clauses, patterns, sub-types)."""
        return ()

    def with_children(self, children: tuple):
        """This node rebuilt over new children; leaves return themselves."""
        return self


def _compile_make(cls: type):
    """An interning constructor specialised to the class's field count (hot path: every node).

    ``_make(*fields, init=None)``: ``init(node)`` fills slots outside the key (a Constant's
    data) before the node is published, so no thread ever sees a half-built node. The new node
    is published with ``setdefault``: of two threads racing to build equal nodes, the one that
    loses gets the winner's node and drops its own.
    """
    args = ", ".join(f"v{i}" for i in range(len(cls._fields)))
    sets = "".join(f"    s{i}(node, v{i})\n" for i in range(len(cls._fields)))
    src = (
        f"def _make({args}{', ' if args else ''}init=None):\n"
        f"    key = ({args}{',' if len(cls._fields) == 1 else ''})\n"
        "    ref = get(key)\n"
        "    if ref is not None:\n"
        "        node = ref()\n"
        "        if node is not None:\n"
        "            return node\n"
        "    node = new(cls)\n"
        f"{sets}"
        "    if init is not None:\n"
        "        init(node)\n"
        "    ref = Ref(node, drop)\n"
        "    ref.key = key\n"
        "    old = setdefault(key, ref)\n"
        "    if old is ref:\n"
        "        return node\n"
        "    live = old()\n"
        "    if live is not None:\n"
        "        return live\n"
        "    return publish(key, ref, node)\n"
    )
    table: dict = {}
    _TABLES.append(table)
    env = {"cls": cls, "get": table.get, "setdefault": table.setdefault, "new": object.__new__,
           "Ref": _KeyedRef, "drop": _dropper(table), "publish": _publisher(table)}
    env.update({f"s{i}": setter for i, setter in enumerate(cls._setters)})
    exec(compile(src, f"<{cls.__name__}._make>", "exec"), env)  # noqa: S102 - generated above
    return env["_make"]


def _slot_setter(cls: type, name: str):
    for klass in cls.__mro__:
        desc = klass.__dict__.get(name)
        if desc is not None and hasattr(desc, "__set__"):
            return desc.__set__
    raise NodeError(f"{cls.__name__}.{name} is listed as a field but has no slot")


class paused_gc:  # noqa: N801 - used like a function: ``with paused_gc(): ...``
    """Pause Python's cyclic garbage collector for a bulk operation on the IR.

    IR nodes form no reference cycles (children are strong, the intern table is weak), so
    refcounting frees everything a pass drops; the cyclic collector would only rescan the live
    program again and again, which makes big passes super-linear. Reentrant; restores the
    previous state.
    """

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> paused_gc:
        import gc

        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: Any) -> None:
        import gc

        if self._was_enabled:
            gc.enable()
