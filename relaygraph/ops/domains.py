"""Random valid inputs for operators, drawn from each op's input domains.

Domains: ``any`` (standard normal; small ints), ``positive`` (``log``, ``sqrt``), ``nonzero``
(divisors), ``small`` (``exp``, exponents), ``unit`` (inside (-1, 1)), ``bool``. Ops whose
inputs depend on each other (``take`` indices within the data's axis) have a sampler.
"""

from __future__ import annotations

import numpy as np

from ..errors import RelayError
from ..ir.attrs import Attrs
from ..ir.types import TensorType, TupleType, Type, format_type
from .registry import OpDef, get

__all__ = ["draw", "random_inputs", "DOMAINS"]

DOMAINS = ("any", "positive", "nonzero", "small", "unit", "bool", "index")


def _concrete_shape(t: TensorType) -> tuple[int, ...]:
    if not t.is_concrete:
        raise RelayError(f"random inputs need concrete shapes, got {format_type(t)}")
    return tuple(t.shape)


def draw(t: Type, domain: str = "any", rng: np.random.Generator | None = None):
    """A random value of type ``t`` (a tuple of arrays for a tuple type) from ``domain``."""
    rng = rng if rng is not None else np.random.default_rng(0)
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
