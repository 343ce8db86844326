"""Immutable, hash-consed IR nodes.

Every node class lists its fields in ``__slots__``. Structural nodes are interned through a
weak table per class keyed by the field values: building a node equal to a live one returns
the live one, so ``==`` and ``hash`` are identity (Python's defaults) and cost O(1). Nominal
nodes (variables) skip the table and are always new. Debug info such as source spans lives in
a slot outside the key.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

__all__ = ["Node", "NodeError", "live_interned_count", "paused_gc"]


class NodeError(TypeError):
    """A node was built with a field of the wrong kind."""


class _KeyedRef(weakref.ref):
    """A weak reference that remembers its table key, so the callback can drop the entry."""

    __slots__ = ("key",)


# One weak table per node class (so keys need not hold the class): key -> weak reference.
_TABLES: list[dict] = []


def _dropper(table: dict):
    def drop(ref: _KeyedRef) -> None:
        # Only remove the entry if it still points at this (now dead) reference.
        if table.get(ref.key) is ref:
            del table[ref.key]

    return drop


def live_interned_count() -> int:
    """Number of interned nodes currently alive (for tests and memory reports)."""
    return sum(len(t) for t in _TABLES)


class Node:
    """Base of every IR node: frozen, slotted, interned unless nominal."""

    __slots__ = ("__weakref__", "_span")
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

    @property
    def span(self):
        """Source span (file, line, column, ...) where the node was first parsed, or None."""
        try:
            return self._span
        except AttributeError:
            return None

    def with_span(self, span) -> Node:
        """Attach a span if the node has none yet (spans are not part of the key)."""
        if not hasattr(self, "_span"):
            Node._span.__set__(self, span)
        return self


def _compile_make(cls: type):
    """An interning constructor specialised to the class's field count (hot path: every node)."""
    args = ", ".join(f"v{i}" for i in range(len(cls._fields)))
    sets = "".join(f"    s{i}(node, v{i})\n" for i in range(len(cls._fields)))
    src = (
        f"def _make({args}):\n"
        f"    key = ({args}{',' if len(cls._fields) == 1 else ''})\n"
        "    ref = get(key)\n"
        "    if ref is not None:\n"
        "        node = ref()\n"
        "        if node is not None:\n"
        "            return node\n"
        "    node = new(cls)\n"
        f"{sets}"
        "    ref = Ref(node, drop)\n"
        "    ref.key = key\n"
        "    table[key] = ref\n"
        "    return node\n"
    )
    table: dict = {}
    _TABLES.append(table)
    env = {"cls": cls, "get": table.get, "table": table, "new": object.__new__, "Ref": _KeyedRef,
           "drop": _dropper(table)}
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
