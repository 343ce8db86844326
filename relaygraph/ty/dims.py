"""Symbolic dimensions: named sympy symbols, simplification and shape arithmetic.

This is the only sympy entry point for dimensions; the IR stores whatever these return. A
dimension is a plain ``int`` (the fast path: concrete models never touch sympy), the ``Any``
marker (``?``, propagates through arithmetic) or a simplified sympy expression over symbols
made by :func:`sym`.
"""

from __future__ import annotations

import functools
import math
import re

import sympy

from ..ir.types import Any

__all__ = [
    "sym", "simplify_dim", "is_symbolic", "is_known", "dim_add", "dim_sub", "dim_mul",
    "dim_floordiv", "dim_ceildiv", "dim_max", "dim_min", "dim_round", "dim_prod", "dims_equal",
    "dim_str", "substitute_dim", "parse_dim",
]


@functools.cache
def sym(name: str) -> sympy.Symbol:
    """The dimension symbol ``name`` (non-negative integer), shared by every use of the name."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def simplify_dim(d):
    """An int for a constant, ``Any`` for ``?``, or a simplified sympy expression."""
    if d is Any or type(d) is int:
        return d
    if isinstance(d, bool):
        raise TypeError(f"a dimension cannot be a bool ({d!r})")
    if isinstance(d, int):  # numpy ints and int subclasses
        return int(d)
    d = sympy.sympify(d)
    if d.is_Integer:
        return int(d)
    d = _simplified(d)
    return int(d) if d.is_Integer else d


@functools.lru_cache(maxsize=4096)
def _simplified(expr: sympy.Basic) -> sympy.Basic:
    # sympy.simplify is thorough but slow; models repeat the same expressions layer after layer
    return sympy.simplify(expr)


def _canon(d):
    """The result of dimension arithmetic: sympy's automatic canonical form (cheap), as an int
    when it is a constant."""
    if d.is_Integer:
        return int(d)
    return d


def is_symbolic(d) -> bool:
    """True for a dimension that is a sympy expression (not an int, not ``?``)."""
    return isinstance(d, sympy.Basic)


def is_known(d) -> bool:
    """True for a concrete int dimension."""
    return type(d) is int


def _binary(a, b, int_op, sym_op):
    if type(a) is int and type(b) is int:
        return int_op(a, b)
    if a is Any or b is Any:
        return Any
    return _canon(sym_op(sympy.sympify(a), sympy.sympify(b)))


def dim_add(a, b):
    """``a + b`` on dimensions."""
    return _binary(a, b, int.__add__, lambda x, y: x + y)


def dim_sub(a, b):
    """``a - b`` on dimensions."""
    return _binary(a, b, int.__sub__, lambda x, y: x - y)


def dim_mul(a, b):
    """``a * b`` on dimensions."""
    return _binary(a, b, int.__mul__, lambda x, y: x * y)


def dim_floordiv(a, b):
    """``floor(a / b)`` on dimensions (sympy's floor when symbolic)."""
    return _binary(a, b, int.__floordiv__, lambda x, y: sympy.floor(x / y))


def dim_ceildiv(a, b):
    """``ceil(a / b)`` on dimensions."""
    return _binary(a, b, lambda x, y: -((-x) // y), lambda x, y: sympy.ceiling(x / y))


def dim_max(a, b):
    """``max(a, b)`` on dimensions."""
    return _binary(a, b, max, sympy.Max)


def dim_min(a, b):
    """``min(a, b)`` on dimensions."""
    return _binary(a, b, min, sympy.Min)


def dim_round(d, scale: float):
    """``round(d * scale)`` (half away from zero, as TVM's ``round``) for a float scale."""
    if type(d) is int:
        return int(math.floor(d * scale + 0.5))
    if d is Any:
        return Any
    if float(scale).is_integer():
        return _canon(d * int(scale))
    return _canon(sympy.floor(d * sympy.nsimplify(scale) + sympy.Rational(1, 2)))


def dim_prod(dims) -> object:
    """The product of dimensions (1 for none)."""
    out = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def dims_equal(a, b) -> bool | None:
    """True if provably equal, False if provably different, None when it cannot be decided."""
    if a is b:
        return True
    if type(a) is int and type(b) is int:
        return a == b
    if a is Any or b is Any:
        return None
    a, b = sympy.sympify(a), sympy.sympify(b)
    if a == b:
        return True
    diff = a - b
    if not diff.free_symbols:
        return diff == 0
    diff = _simplified(diff)
    if diff == 0:
        return True
    if diff.is_Integer or diff.is_nonzero:
        return False
    return None


def substitute_dim(d, mapping: dict):
    """``d`` with symbols replaced by ``mapping`` (symbol -> dimension), simplified."""
    if not mapping or not is_symbolic(d):
        return d
    if not (d.free_symbols & mapping.keys()):
        return d
    if any(v is Any for k, v in mapping.items() if k in d.free_symbols):
        return Any
    return _canon(d.subs({k: v for k, v in mapping.items() if k in d.free_symbols}))


def dim_str(d) -> str:
    """A dimension as text: ``3``, ``?`` or the sympy expression."""
    return "?" if d is Any else str(d)


def parse_dim(text: str):
    """A dimension from text (``3``, ``?``, ``n``, ``floor((h - 1)/2) + 1``)."""
    text = text.strip()
    if text == "?":
        return Any
    if text.lstrip("-").isdigit():
        return int(text)
    # Every name not called as a function is a dimension symbol (integer, non-negative), shared
    # with every other use of the name: without this, names sympy knows ("sequence", "N", "E",
    # "beta") would parse as sympy's functions and constants. The result keeps sympy's automatic
    # form, the form shape arithmetic produces and the printer shows, so printing and parsing a
    # dimension gives back the same expression.
    names = dict(_DIM_FUNCTIONS)
    names.update((n, sym(n)) for n in _NAME.findall(text))
    try:
        expr = sympy.sympify(text, locals=names)
    except (sympy.SympifyError, SyntaxError, TypeError) as exc:
        raise ValueError(f"not a dimension expression: {text!r} ({exc})") from None
    if not isinstance(expr, sympy.Expr):
        raise ValueError(f"not a dimension expression: {text!r}")
    return _canon(expr)


_DIM_FUNCTIONS = {"ceil": sympy.ceiling, "ceiling": sympy.ceiling, "floor": sympy.floor,
                  "Max": sympy.Max, "Min": sympy.Min, "Mod": sympy.Mod}
# an identifier not followed by "(" (a name, not a function call)
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b(?!\s*\()")
