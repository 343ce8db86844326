"""Functions of attribute values that egglog evaluates through tables.

Attribute values live in the e-graph as Strings that egglog cannot take apart, so a function
of them (composing two transposes' axes) is given to egglog as a table over a finite domain
(written by ``relaygraph.egraph.rule_compiler``). In rule text they are called like other functions:

- ``compose_axes(?p, ?q)``: the axes of ``transpose(transpose(x, axes=?p), axes=?q)`` as one
  transpose (``c[j] = p[q[j]]``); defined for explicit permutations of rank 1 to 4.
- ``identity_axes(?p)``: a condition, true when ``?p`` is the identity permutation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AttrFunction", "ATTR_FUNCTIONS", "MAX_RANK", "compose_axes", "identity_axes"]

MAX_RANK = 4  # the tables cover permutations of rank 1 to MAX_RANK


def _is_perm(p) -> bool:
    return isinstance(p, tuple) and all(type(i) is int for i in p) and sorted(p) == list(range(len(p)))


def compose_axes(p, q):
    """The axes of a transpose by ``p`` followed by a transpose by ``q``, or None."""
    if not (_is_perm(p) and _is_perm(q)) or len(p) != len(q) or len(p) > MAX_RANK:
        return None
    return tuple(p[j] for j in q)


def identity_axes(p):
    """Whether ``p`` is an identity permutation (None when it is not a permutation)."""
    if not _is_perm(p) or len(p) > MAX_RANK:
        return None
    return p == tuple(range(len(p)))


@dataclass(frozen=True)
class AttrFunction:
    """A function of attribute values (the e-graph's rule compiler gives egglog a table of it)."""

    name: str
    arity: int
    python: Callable
    condition: bool  # a relation (used as a condition) rather than a function (a value)
    samples: Callable[[], list]  # some arguments from the domain (for the soundness checker)


def _samples() -> list:
    return [tuple(range(r)) for r in range(1, MAX_RANK + 1)] + [
        (1, 0), (0, 2, 1), (2, 0, 1), (1, 2, 0), (0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2), (3, 2, 1, 0)]


ATTR_FUNCTIONS = {
    "compose_axes": AttrFunction("compose_axes", 2, compose_axes, False, _samples),
    "identity_axes": AttrFunction("identity_axes", 1, identity_axes, True, _samples),
}
