"""Random valid inputs for operators, drawn from each op's input domains.

Domains: ``any`` (standard normal; small ints), ``positive`` (``log``, ``sqrt``), ``nonzero``
(divisors), ``small`` (``exp``, exponents), ``unit`` (inside (-1, 1)), ``bool``. Ops whose
inputs depend on each other (``take`` indices within the data's axis) have a sampler.

A ``Domain`` is the set of valid values as an interval (maybe without zero, maybe integer
indices below a bound); domains meet (intersect) when one value feeds several inputs, and
``draw`` samples a ``Domain`` as it samples a named one. ``call_domains`` gives the domains of
one call's inputs, with ``index`` bounded by the size of input 0 along ``axis`` (``take``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import RelayError
from ..ir.attrs import Attrs
from ..ir.types import TensorType, TupleType, Type, format_type
from .registry import OpDef, get

__all__ = ["draw", "random_inputs", "DOMAINS", "Domain", "named_domain", "call_domains", "carries_values"]

DOMAINS = ("any", "positive", "nonzero", "small", "unit", "bool", "index")
INF = math.inf


@dataclass(frozen=True)
class Domain:
    """Valid values: ``[lo, hi]``, without zero if ``nonzero``; ``index``: integers in
    ``[0, bound)`` (3 when unknown); ``boolean``: true/false."""

    lo: float = -INF
    hi: float = INF
    nonzero: bool = False
    index: bool = False
    bound: int | None = None
    boolean: bool = False

    def meet(self, other: Domain) -> Domain:
        """The values valid in both."""
        bounds = [b for b in (self.bound, other.bound) if b is not None]
        return Domain(max(self.lo, other.lo), min(self.hi, other.hi), self.nonzero or other.nonzero,
                      self.index or other.index, min(bounds) if bounds else None,
                      self.boolean or other.boolean)

    @property
    def name(self) -> str | None:
        """The named domain this is, if any."""
        for key, dom in _NAMED.items():
            if dom == self:
                return key
        return None

    def describe(self) -> str:
        """A short description: the name, or the interval."""
        if self.name is not None and self.name != "index":
            return self.name
        if self.boolean:
            return "bool"
        if self.index:
            return f"indices in [0, {self.bound if self.bound is not None else 3})"
        text = f"[{self.lo:g}, {self.hi:g}]"
        return text + " without 0" if self.nonzero else text

    @property
    def empty(self) -> bool:
        """No value satisfies it (e.g. positive and below -1)."""
        if self.index:
            return self.hi < 0 or self.lo >= (self.bound if self.bound is not None else 3)
        return self.lo > self.hi or (self.nonzero and self.lo == self.hi == 0)


_NAMED = {
    "any": Domain(), "positive": Domain(lo=0.0, nonzero=True), "nonzero": Domain(nonzero=True),
    "small": Domain(-2.0, 2.0), "unit": Domain(-0.9, 0.9), "bool": Domain(boolean=True),
    "index": Domain(index=True),
}


def named_domain(name: str) -> Domain:
    """The ``Domain`` of a named domain (``positive``, ``index``, ...)."""
    if name not in _NAMED:
        raise RelayError(f"unknown input domain {name!r}; known: {', '.join(DOMAINS)}")
    return _NAMED[name]


def call_domains(op: OpDef, arg_types, attrs) -> list[Domain]:
    """The domain of each input of a call of ``op``: the table's, with ``index`` bounded by the
    size of input 0 along the ``axis`` attribute (all of input 0 when it is None)."""
    out = []
    for i, _ in enumerate(arg_types):
        dom = named_domain(op.input_domain(i))
        if dom.index and arg_types and isinstance(arg_types[0], TensorType) and arg_types[0].is_concrete:
            full = op.resolve(attrs)
            shape = [int(d) for d in arg_types[0].shape]
            axis = full.get("axis")
            if axis is None:
                n = int(np.prod(shape)) if shape else 1
            elif -len(shape) <= axis < len(shape):
                n = shape[axis]
            else:
                n = None
            if n:
                dom = Domain(index=True, bound=n)
        out.append(dom)
    return out


def carries_values(op: OpDef, i: int) -> bool:
    """Whether input ``i``'s values reach the output unchanged (reshape, transpose, slices,
    concatenation, cast, copy): then a domain wanted of the output is wanted of the input."""
    from .registry import PatternKind

    if op.input_domain(i) != "any":
        return False
    return op.pattern == PatternKind.INJECTIVE or op.name in ("copy", "cast")


def _concrete_shape(t: TensorType) -> tuple[int, ...]:
    if not t.is_concrete:
        raise RelayError(f"random inputs need concrete shapes, got {format_type(t)}")
    return tuple(t.shape)


def draw(t: Type, domain: str | Domain = "any", rng: np.random.Generator | None = None):
    """A random value of type ``t`` (a tuple of arrays for a tuple type) from ``domain``."""
    rng = rng if rng is not None else np.random.default_rng(0)
    if isinstance(domain, Domain):
        if domain.name is not None:
            domain = domain.name
        elif isinstance(t, TupleType):
            return tuple(draw(f, domain, rng) for f in t.fields)
        else:
            return _draw_domain(t, domain, rng)
    if isinstance(t, TupleType):
        return tuple(draw(f, domain, rng) for f in t.fields)
    if not isinstance(t, TensorType):
        raise RelayError(f"cannot draw a random value of type {format_type(t)}")
    shape, dtype = _concrete_shape(t), t.dtype
    if domain not in DOMAINS:
        raise RelayError(f"unknown input domain {domain!r}; known: {', '.join(DOMAINS)}")
    if dtype == "bool" or domain == "bool":
        return (rng.random(shape) < 0.5).astype(dtype)
    if dtype.startswith(("int", "uint")):
        lo, hi = {"any": (-5, 6), "positive": (1, 6), "nonzero": (1, 6), "small": (0, 4),
                  "unit": (0, 1), "index": (0, 3)}[domain]
        if dtype.startswith("uint"):
            lo = max(lo, 0)
        out = rng.integers(lo, hi, size=shape)
        if domain == "nonzero":
            out = out * rng.choice([-1, 1], size=shape) if not dtype.startswith("uint") else out
        return np.asarray(out).astype(dtype)
    np_dtype = "float32" if dtype == "bfloat16" else dtype
    if domain == "positive":
        out = rng.uniform(0.5, 2.0, size=shape)
    elif domain == "nonzero":
        out = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    elif domain == "small":
        out = rng.uniform(-2.0, 2.0, size=shape)
    elif domain == "unit":
        out = rng.uniform(-0.9, 0.9, size=shape)
    else:
        out = rng.standard_normal(size=shape)
    return np.asarray(out).astype(np_dtype)


def _draw_domain(t: Type, dom: Domain, rng: np.random.Generator):
    """A value of tensor type ``t`` inside ``dom`` (a domain that is not a named one)."""
    if not isinstance(t, TensorType):
        raise RelayError(f"cannot draw a random value of type {format_type(t)}")
    shape, dtype = _concrete_shape(t), t.dtype
    if dom.empty:
        raise RelayError(f"no value satisfies the domain {dom.describe()} of a {format_type(t)} input")
    if dtype == "bool" or dom.boolean:
        return (rng.random(shape) < 0.5).astype(dtype)
    np_dtype = "float32" if dtype == "bfloat16" else dtype
    integral = dtype.startswith(("int", "uint"))
    if dom.index:
        bound = dom.bound if dom.bound is not None else 3
        lo = max(0, math.ceil(dom.lo)) if dom.lo > -INF else 0
        hi = min(bound - 1, math.floor(dom.hi)) if dom.hi < INF else bound - 1
        return rng.integers(lo, hi + 1, size=shape).astype(np_dtype)
    lo, hi = dom.lo, dom.hi
    if lo == -INF and hi == INF:  # only nonzero is left: the named domains cover the rest
        return draw(t, "nonzero", rng)
    if hi == INF:
        lo, hi = lo + (0.5 if dom.nonzero or integral else 0.0), lo + 2.0
    elif lo == -INF:
        lo, hi = hi - 2.0, hi - (0.5 if dom.nonzero or integral else 0.0)
    if integral:
        ilo, ihi = math.ceil(lo), math.floor(hi)
        values = rng.integers(ilo, ihi + 1, size=shape)
        if dom.nonzero:
            values = np.where(values == 0, ihi if ihi != 0 else ilo, values)
        return values.astype(dtype)
    gap = (hi - lo) / 4  # nonzero: keep a quarter of the interval away from zero
    if dom.nonzero and lo >= 0:
        lo = max(lo, gap)
    elif dom.nonzero and hi <= 0:
        hi = min(hi, -gap)
    out = rng.uniform(lo, hi, size=shape)
    if dom.nonzero and lo < 0 < hi:  # values near zero move out to the gap
        near = np.abs(out) < gap
        out = np.where(near, np.where(out >= 0, gap if hi >= gap else -gap, -gap if lo <= -gap else gap),
                       out)
    return np.asarray(out).astype(np_dtype)


def random_inputs(op: OpDef | str, arg_types, attrs: Attrs | dict | None = None,
                  rng: np.random.Generator | int | None = None) -> list:
    """Random valid inputs for a call of ``op`` with these argument types and attrs."""
    if isinstance(op, str):
        op = get(op)
    if rng is None or isinstance(rng, int):
        rng = np.random.default_rng(rng or 0)
    arg_types = list(arg_types)
    if op.sampler is not None:
        full = op.resolve(attrs)
        return op.sampler(arg_types, full, rng, lambda t, d: draw(t, d, rng))
    return [draw(t, op.input_domain(i), rng) for i, t in enumerate(arg_types)]
