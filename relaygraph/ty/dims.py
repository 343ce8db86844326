"""Symbolic dimensions: named sympy symbols and simplification (the only sympy entry point
for dimensions; the IR stores whatever these return)."""

from __future__ import annotations

import functools

import sympy

from ..ir.types import Any

__all__ = ["sym", "simplify_dim", "is_symbolic"]


@functools.cache
def sym(name: str) -> sympy.Symbol:
    """The dimension symbol ``name`` (non-negative integer), shared by every use of the name."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def simplify_dim(d):
    """An int for a constant, ``Any`` for ``?``, or a simplified sympy expression."""
    if d is Any or isinstance(d, int):
        return d
    d = sympy.simplify(d)
    if d.is_Integer:
        return int(d)
    return d


def is_symbolic(d) -> bool:
    """True for a dimension that is a sympy expression (not an int, not ``?``)."""
    return isinstance(d, sympy.Basic)
