"""Persistent weighted sets of small integer keys, with cheap unions of sets that share history.

Greedy DAG extraction keeps, for every class, the set of classes its current term needs and
their costs; a node's set is the union of its children's sets. Copying those sets makes deep
e-graphs quadratic. Here a set is an immutable 16-way trie of fixed depth whose inner nodes
carry the sum of their values. Sets built from one another share subtries, and a union walks
only where its operands differ (``a is b`` ends a branch at once), so the union of a set with
a slightly grown copy of itself costs a few trie nodes, not the size of the set.

A trie node is a tuple ``(total, slot0, ..., slot15)``; at the bottom level a slot holds a value
(float) or None, above it a child trie node or None. The empty set is None.
"""

from __future__ import annotations

__all__ = ["levels_for", "singleton", "union", "contains", "total"]

_BITS = 4
_WIDTH = 1 << _BITS
_MASK = _WIDTH - 1
_EMPTY = (None,) * _WIDTH


def levels_for(num_keys: int) -> int:
    """The trie depth that holds keys ``0 .. num_keys - 1``."""
    levels = 1
    while _WIDTH ** levels < num_keys:
        levels += 1
    return levels


def singleton(key: int, value: float, levels: int) -> tuple:
    """The set holding one key with its value."""
    slot = key & _MASK
    node = (value,) + _EMPTY[:slot] + (value,) + _EMPTY[slot + 1:]
    for level in range(1, levels):
        slot = (key >> (_BITS * level)) & _MASK
        node = (value,) + _EMPTY[:slot] + (node,) + _EMPTY[slot + 1:]
    return node


def total(s: tuple | None) -> float:
    """The sum of the values in a set."""
    return 0.0 if s is None else s[0]


def contains(s: tuple | None, key: int, levels: int) -> bool:
    """Whether ``key`` is in the set."""
    level = levels - 1
    while s is not None and level > 0:
        s = s[1 + ((key >> (_BITS * level)) & _MASK)]
        level -= 1
    return s is not None and s[1 + (key & _MASK)] is not None


def union(a: tuple | None, b: tuple | None, levels: int) -> tuple | None:
    """The union of two sets; a key in both keeps ``a``'s value. Returns ``a`` or ``b`` itself
    when the union equals one of them, so shared history stays shared."""
    if a is b or b is None:
        return a
    if a is None:
        return b
    return _union(a, b, levels - 1)


def _union(a: tuple, b: tuple, level: int) -> tuple:
    # Recursion is bounded by the trie depth (a handful of levels), not by the e-graph.
    slots = list(a)
    grew = False  # the result differs from a
    is_b = True  # the result equals b
    if level == 0:
        for i in range(1, _WIDTH + 1):
            x, y = a[i], b[i]
            if x is None:
                if y is not None:
                    slots[i] = y
                    grew = True
            elif y is None or (x is not y and x != y):
                is_b = False
        if not grew:
            return a
        if is_b:
            return b
        slots[0] = sum(v for v in slots[1:] if v is not None)
        return tuple(slots)
    for i in range(1, _WIDTH + 1):
        x, y = a[i], b[i]
        if x is y:
            continue
        if y is None:
            is_b = False
        elif x is None:
            slots[i] = y
            grew = True
        else:
            z = _union(x, y, level - 1)
            if z is not x:
                slots[i] = z
                grew = True
            if z is not y:
                is_b = False
    if not grew:
        return a
    if is_b:
        return b
    slots[0] = sum(c[0] for c in slots[1:] if c is not None)
    return tuple(slots)
