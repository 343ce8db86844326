"""Samples on which terms are fingerprinted: types for the pattern variables (shapes of several
ranks, broadcasting, a symbolic dimension, float32/float64/int32), values for the attribute
variables, and random inputs drawn from the ops' input domains.

A term's value on a sample is computed bottom-up through the real evaluator: each call is one
small Relay function of the op (typed by the op's type relation, run by
``relaygraph.eval.evaluate``) applied to its arguments' values, cached by op, attributes and
argument types. Inputs are rounded to halves so that sums and products of the ops enumerated
here are exact, and a fingerprint (one hash per sample) compares exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..eval import evaluate
from ..ir.expr import Function, Var
from ..ir.types import TensorType, format_type
from ..ops.builders import make_call
from ..ops.domains import draw
from ..ops.registry import lookup
from ..rewrite.attr_functions import compose_axes
from ..ty import infer_type_expr
from ..ty.dims import is_symbolic, sym
from .terms import AttrFun, AttrVar

__all__ = ["Sample", "Samples", "default_samples", "works_on_images", "attr_values", "input_domains",
           "VAR_NAMES"]

VAR_NAMES = ("a", "b", "c", "d")
_N = sym("n")
_SYMBOLIC_SIZE = 3  # what the symbolic dimension is when inputs are drawn

# (label, shapes of a, b, c, d, dtype, p, q, s, t): p and q are permutations for transpose's axes,
# s and t shapes for reshape's newshape. p and q are the identity on two samples each, and s is
# ?a's own shape on two (so that conditions such as identity_axes(?p) are seen to hold and to
# fail); q is not its own inverse on "batch"; "cube" types every op on every input
# (batch_matmul both ways, every axes literal).
_TABLE = [
    ("rank 2", [(3, 4)] * 4, "float32", (1, 0), (1, 0), (2, 6), (4, 3)),
    ("rank 3", [(2, 3, 4)] * 4, "float32", (1, 2, 0), (0, 2, 1), (6, 4), (24,)),
    ("broadcast", [(3, 4), (4,), (1, 4), (3, 1)], "float32", (1, 0), (1, 0), (12,), (2, 6)),
    ("scalars", [(), (3, 4), (), (3, 4)], "float32", (1, 0), (1, 0), (1,), (1, 1)),
    ("scalars 2", [(3, 4), (), (3, 4), ()], "float32", (1, 0), (1, 0), (3, 4), (12,)),
    ("scalars 3", [(), (), (3, 4), (3, 4)], "float32", (1, 0), (1, 0), (1,), (1, 1)),
    ("scalars 4", [(3, 4), (3, 4), (), ()], "float32", (1, 0), (1, 0), (12,), (6, 2)),
    ("scalars 5", [(2, 3, 4), (), (3, 4), ()], "float32", (0, 2, 1), (1, 0, 2), (24,), (4, 6)),
    ("broadcast 2", [(4,), (3, 4), (3, 1), (1, 4)], "float32", (1, 0), (1, 0), (4,), (2, 2)),
    ("symbolic", [(_N, 4)] * 4, "float32", (1, 0), (1, 0), (-1,), (-1, 2)),
    ("float64", [(3, 4)] * 4, "float64", (0, 1), (1, 0), (4, 3), (12,)),
    ("int32", [(2, 3, 4)] * 4, "int32", (2, 0, 1), (1, 0, 2), (2, 3, 4), (4, 6)),
    ("batch", [(2, 3, 4), (2, 5, 4), (2, 3, 4), (2, 5, 4)], "float32", (0, 2, 1), (2, 0, 1), (24,), (6, 4)),
    ("dense", [(3, 4), (5, 4), (3, 4), (5, 4)], "float32", (1, 0), (0, 1), (2, 6), (6, 2)),
    ("dense 3d", [(2, 3, 4), (5, 4), (5, 4), (2, 3, 4)], "float32", (2, 1, 0), (1, 2, 0), (6, 4), (4, 6)),
    ("dense 3d 2", [(2, 3, 4), (2, 3, 4), (5, 4), (5, 4)], "float32", (1, 0, 2), (2, 1, 0), (4, 6), (24,)),
    ("square", [(2, 2)] * 4, "float32", (0, 1), (0, 1), (4,), (2, 2)),
    ("cube", [(2, 2, 2)] * 4, "float32", (0, 2, 1), (1, 0, 2), (4, 2), (2, 4)),
]

# NCHW images for the ops of convolutional models (pools, bias_add by channel), added when the
# ops include one that works on images: a bias per channel, a scale per channel ((C, 1, 1)), a
# scalar, odd spatial sizes (a pool's last window is partial), a symbolic batch, int32 data,
# 1x1 images.
_IMAGE_TABLE = [
    ("image", [(1, 2, 4, 4), (2,), (1, 2, 4, 4), (2,)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 32), (2, 16)),
    ("image 2", [(2, 3, 6, 6), (3,), (3, 1, 1), (2, 3, 6, 6)], "float32", (0, 2, 3, 1), (0, 2, 3, 1),
     (2, 108), (6, 36)),
    ("image 3", [(1, 2, 5, 5), (1, 2, 5, 5), (2,), ()], "float32",
     (0, 3, 1, 2), (0, 2, 3, 1), (1, 50), (2, 25)),
    ("image 4", [(1, 3, 5, 5), (3, 1, 1), (), (3,)], "float32", (0, 2, 3, 1), (0, 3, 1, 2), (1, 75), (3, 25)),
    ("image symbolic", [(_N, 2, 4, 4), (2,), (_N, 2, 4, 4), (2,)], "float32", (0, 2, 3, 1), (0, 3, 1, 2),
     (-1, 32), (-1, 16)),
    ("image int32", [(1, 2, 4, 4), (2,), (1, 2, 4, 4), (2,)], "int32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 32), (2, 16)),
    # 1x1 images (a global pool's output): batch_flatten keeps the channels, a bias still fits
    ("image 1x1", [(1, 2, 1, 1), (2,), (1, 2, 1, 1), (2,)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 2), (2, 1)),
]

# Convolutions (added when the ops include nn.conv2d): ?a an image, ?b an OIHW weight for it, ?c
# a bias per output channel, ?d an image of the output's shape where one exists. 1x1 kernels
# (a convolution that mixes channels per position commutes with what acts per channel alike),
# and kernels that are not 1x1, 3x3 and 1x3 (where that fails: the condition says which), int32
# data (an average then rounds), odd sizes, a symbolic batch.
_CONV_TABLE = [
    ("conv 1x1", [(1, 3, 4, 4), (2, 3, 1, 1), (2,), (1, 2, 4, 4)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 48), (3, 16)),
    ("conv 1x1 2", [(2, 4, 6, 6), (3, 4, 1, 1), (3,), (2, 3, 6, 6)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (2, 144), (8, 36)),
    ("conv 1x1 odd", [(1, 2, 5, 5), (3, 2, 1, 1), (3,), (1, 3, 5, 5)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 50), (2, 25)),
    ("conv 1x1 symbolic", [(_N, 2, 4, 4), (3, 2, 1, 1), (3,), (_N, 3, 4, 4)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (-1, 32), (-1, 16)),
    ("conv 3x3", [(1, 2, 6, 6), (3, 2, 3, 3), (3,), (1, 3, 4, 4)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 72), (2, 36)),
    ("conv 1x3", [(1, 2, 6, 6), (2, 2, 1, 3), (2,), (1, 2, 6, 4)], "float32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 72), (2, 36)),
    ("conv 1x1 int32", [(1, 3, 4, 4), (2, 3, 1, 1), (2,), (1, 2, 4, 4)], "int32",
     (0, 2, 3, 1), (0, 3, 1, 2), (1, 48), (3, 16)),
]


def works_on_images(op: str) -> bool:
    """Whether an op takes NCHW images: it has a ``layout`` or ``data_layout`` attribute (pools,
    convolutions), or it is batch_flatten (which flattens a 1x1 image to the shape of its channels)."""
    opdef = lookup(op)
    return opdef is not None and ("layout" in opdef.attrs or "data_layout" in opdef.attrs
                                  or op == "nn.batch_flatten")


@dataclass
class Sample:
    """One typing of the variables, attribute values, and inputs drawn under it."""

    label: str
    types: dict[str, TensorType]
    attrs: dict[str, tuple]
    inputs: list[dict[str, np.ndarray]] = field(default_factory=list)

    def describe(self, names) -> str:
        """The types of ``names``, as a rule's comment gives them."""
        parts = [f"?{n}: {_short(self.types[n])}" for n in names]
        return ", ".join(parts)

    @property
    def symbolic(self) -> bool:
        """Whether a dimension is symbolic."""
        return any(is_symbolic(d) for t in self.types.values() for d in t.shape)


def _short(t: TensorType) -> str:
    return format_type(t).removeprefix("Tensor[").removesuffix("]")


def _concrete(t: TensorType) -> TensorType:
    return TensorType(tuple(_SYMBOLIC_SIZE if is_symbolic(d) else d for d in t.shape), t.dtype)


def default_samples(names, domains: dict[str, str], draws: int = 2, seed: int = 0,
                    images: bool = False, convs: bool = False) -> list[Sample]:
    """The samples: every entry of the table (and of the image table with ``images``, of the
    convolution table with ``convs``), ``draws`` random inputs each."""
    rng = np.random.default_rng(seed)
    out = []
    for label, shapes, dtype, p, q, s, t in _TABLE + (_IMAGE_TABLE if images else []) + (
            _CONV_TABLE if convs else []):
        types = {n: TensorType(shapes[i % len(shapes)], dtype) for i, n in enumerate(names)}
        sample = Sample(label, types, {"p": p, "q": q, "s": s, "t": t})
        for _ in range(draws):
            values = {}
            for n, t in types.items():
                x = np.asarray(draw(_concrete(t), domains.get(n, "any"), rng))
                if x.dtype.kind == "f":
                    x = (np.round(x * 2) / 2).astype(x.dtype)
                    if domains.get(n, "any") in ("positive", "nonzero"):
                        x = np.where(x == 0, np.asarray(0.5, x.dtype), x)
                values[n] = x
            sample.inputs.append(values)
        out.append(sample)
    return out


class Samples:
    """Values of terms on every sample: ``column(term)`` is a hash per sample (None where the
    term does not type-check or cannot run)."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples
        self._values: dict[tuple, list] = {}  # term -> per sample (type, [value per draw]) or None
        self._ops: dict[tuple, tuple] = {}  # (op, attrs, arg types) -> (Function, type) or None
        self.evaluations = 0

    def values(self, term: tuple) -> list:
        """Per sample: (type, values per draw) or None."""
        got = self._values.get(term)
        if got is None:
            got = self._values[term] = self._compute(term)
        return got

    def column(self, term: tuple) -> tuple:
        """The fingerprint: per sample, a hash of the type and the values, or None."""
        out = []
        for entry in self.values(term):
            if entry is None:
                out.append(None)
                continue
            t, vals = entry
            h = hashlib.blake2b(format_type(t).encode(), digest_size=12)
            for v in vals:
                a = np.asarray(v)
                if a.dtype.kind == "f":
                    a = np.round(a.astype("float64"), 6) + 0.0  # -0.0 is 0.0
                h.update(np.ascontiguousarray(a).tobytes())
            out.append(h.hexdigest())
        return tuple(out)

    def typed(self, term: tuple) -> frozenset[int]:
        """The samples on which the term type-checks and runs."""
        return frozenset(i for i, e in enumerate(self.values(term)) if e is not None)

    def type_on(self, term: tuple, i: int):
        """The term's type on sample ``i`` (None if it has none)."""
        e = self.values(term)[i]
        return None if e is None else e[0]

    def _compute(self, term: tuple) -> list:
        kind = term[0]
        if kind == "v":
            return [(s.types[term[1]], [d[term[1]] for d in s.inputs]) for s in self.samples]
        if kind == "l":
            t = TensorType((), "float32")
            value = np.asarray(term[1], dtype="float32")
            return [(t, [value] * len(s.inputs)) for s in self.samples]
        _, op, attrs, args = term
        kids = [self.values(a) for a in args]
        out = []
        for i, s in enumerate(self.samples):
            entries = [k[i] for k in kids]
            if any(e is None for e in entries):
                out.append(None)
                continue
            concrete = attr_values(attrs, s.attrs)
            if concrete is None:
                out.append(None)
                continue
            made = self._op_function(op, concrete, [e[0] for e in entries])
            if made is None:
                out.append(None)
                continue
            fn, t = made
            try:
                with np.errstate(all="ignore"):
                    vals = [np.asarray(evaluate(fn, *[e[1][d] for e in entries]))
                            for d in range(len(s.inputs))]
                self.evaluations += len(vals)
            except Exception:  # noqa: BLE001 - a call the kernel refuses has no value here
                out.append(None)
                continue
            out.append((t, vals))
        return out

    def _op_function(self, op: str, attrs: tuple, arg_types: list):
        key = (op, attrs, tuple(format_type(t) for t in arg_types))
        if key in self._ops:
            return self._ops[key]
        params = [Var(f"x{i}", t) for i, t in enumerate(arg_types)]
        try:
            body = make_call(op, *params, **dict(attrs))
            typed, checked = infer_type_expr(body, with_types=True)
            t = checked.type_of(typed)
            made = (Function(params, body), t) if isinstance(t, TensorType) else None
        except Exception:  # noqa: BLE001 - the type relation refuses these argument types
            made = None
        self._ops[key] = made
        return made


def attr_values(attrs: tuple, values: dict, root_shape: tuple | None = None) -> tuple | None:
    """A term's attributes with variables and computed values replaced by a sample's values
    (None when a computed value does not exist there); ``shape(?root)`` is ``root_shape``."""
    out = []
    for k, v in attrs:
        if isinstance(v, AttrVar):
            v = values[v.name]
        elif isinstance(v, AttrFun) and v.name == "shape":
            if root_shape is None:
                return None  # known only once the matched term is typed
            v = root_shape
        elif isinstance(v, AttrFun):
            v = compose_axes(*[values[a] for a in v.args])
            if v is None:
                return None
        out.append((k, v))
    return tuple(out)


def input_domains(ops, names) -> dict[str, str]:
    """The domain inputs are drawn from: the strictest any of the ops asks of an input (so
    every term can take them), by the op table."""
    order = ("any", "nonzero", "positive", "small", "unit")
    strictest = "any"
    for op in ops:
        opdef = lookup(op)
        for i in range(opdef.num_inputs or 0):
            d = opdef.input_domain(i)
            if d in order and order.index(d) > order.index(strictest):
                strictest = d
    return dict.fromkeys(names, strictest)
