"""The operator table: one record per Relay operator, holding everything about it.

This module fixes the record's shape and the look-up functions; the op modules in this package
fill the table. Other layers rely on these names:

- ``lookup(name) -> OpDef | None`` and ``get(name) -> OpDef`` (UnknownNameError naming close matches)
- ``OpDef.name`` (Relay's name, e.g. ``nn.conv2d``), ``OpDef.attrs`` (an ordered mapping of
  attribute name to default value, in Relay's field order; ``REQUIRED`` marks attributes
  without a default), ``OpDef.num_inputs`` (None for variadic)
- ``OpDef.type_relation(arg_types, attrs) -> Type`` raising ``RelayTypeError`` on a mismatch
- ``OpDef.kernel(args: list[np.ndarray], attrs: Attrs) -> np.ndarray | tuple[np.ndarray, ...]``
- ``OpDef.pattern`` (a ``PatternKind``, TVM's fusion pattern kinds and values)
- ``OpDef.flops(arg_types, out_type, attrs) -> float`` and ``OpDef.bytes(...) -> float``
- ``OpDef.domain``: how to draw valid random inputs (e.g. ``"positive"`` for ``log``); a str
  for every input or a tuple with one entry per input (see ``relaygraph.ops.domains``)
- ``OpDef.infer_inputs(arg_types, attrs)``: optional; input types implied by the others and the
  attrs (a conv2d weight from ``channels``/``kernel_size``), used by InferType for unannotated
  inputs; ``OpDef.sampler``: optional, for ops whose valid inputs depend on each other (take);
  ``OpDef.examples``: (input types, attrs) pairs that the whole-table tests run

``type_relation``, ``kernel``, ``flops`` and ``bytes`` accept a Call's ``Attrs`` (canonical, see
below) or a plain dict; absent attributes take their defaults.

Attributes. ``OpDef.attrs`` holds TVM's C++ defaults (``include/tvm/relay/attrs/*.h``), which
are what TVM's text printer compares against: it prints only attributes that differ from them.
``OpDef.py_defaults`` holds what TVM's Python API passes when the caller gives nothing (e.g.
``units=None`` for ``nn.dense``, ``transpose_b=True`` for ``nn.batch_matmul``); the ``rg.op``
builders use them (``OpDef.builder_attrs``). A Call's attrs are in canonical form when they hold
exactly the attributes that differ from ``OpDef.attrs`` (``REQUIRED`` ones always):
``OpDef.canonical_attrs(mapping)`` makes that form from attributes as written in text (validating
names, coercing ints to floats where TVM has a double, applying the Python API's normalisation
such as 2-value padding to 4 values; an absent attribute means TVM's default), and
``OpDef.resolve(attrs)`` gives the full dict of values with defaults filled in, which relations
and kernels read.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import RelayTypeError, UnknownNameError
from ..ir.attrs import EMPTY_ATTRS, Attrs, canonical_attr
from ..ir.node import NodeError

__all__ = ["OpDef", "PatternKind", "REQUIRED", "register", "lookup", "get", "all_ops"]


class PatternKind(enum.IntEnum):
    """Fusion pattern kinds, with TVM's values (lower fuses more readily)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def _no_flops(arg_types, out_type, attrs) -> float:
    return 0.0


@dataclass(eq=False)
class OpDef:
    """Everything about one operator."""

    name: str
    num_inputs: int | None
    attrs: Mapping[str, Any]
    type_relation: Callable[..., Any]
    kernel: Callable[..., Any]
    pattern: PatternKind = PatternKind.OPAQUE
    flops: Callable[..., float] = _no_flops
    bytes: Callable[..., float] | None = None
    domain: str | tuple = "any"
    input_names: tuple[str, ...] = ()
    doc: str = ""
    extra: dict = field(default_factory=dict)
    py_defaults: Mapping[str, Any] = field(default_factory=dict)
    normalize: Callable[[dict], dict] | None = None
    infer_inputs: Callable[..., Any] | None = None
    sampler: Callable[..., Any] | None = None
    examples: tuple = ()

    def __post_init__(self) -> None:
        self._resolved: dict = {}

    def attr_defaults(self) -> dict[str, Any]:
        """The attributes that have defaults, with them."""
        return {k: v for k, v in self.attrs.items() if v is not REQUIRED}

    def input_domain(self, i: int) -> str:
        """The random-input domain of input ``i``."""
        if isinstance(self.domain, str):
            return self.domain
        return self.domain[i] if i < len(self.domain) else "any"

    # -- attributes -------------------------------------------------------------------------
    def canonical_attrs(self, given: Mapping[str, Any] | None = None, **kwargs: Any) -> Attrs:
        """Validated attrs in canonical form: only values that differ from TVM's defaults."""
        merged = dict(given or {}, **kwargs)
        unknown = [k for k in merged if k not in self.attrs]
        if unknown:
            raise NodeError(f"{self.name} has no attribute(s) {', '.join(map(repr, unknown))}; "
                            f"valid attributes: {', '.join(self.attrs) or 'none'}")
        values: dict[str, Any] = {}
        for name, default in self.attrs.items():
            if name in merged:
                values[name] = _coerce(canonical_attr(merged[name], f"{self.name}.{name}"), default)
            elif default is REQUIRED:
                if name not in self.py_defaults:
                    raise NodeError(f"{self.name}: attribute {name!r} is required")
                values[name] = canonical_attr(self.py_defaults[name])
        if self.normalize is not None:
            values = {k: canonical_attr(v) for k, v in self.normalize(dict(values)).items()}
        out = {k: v for k, v in values.items()
               if self.attrs[k] is REQUIRED or not _same(v, self.attrs[k])}
        return Attrs(out) if out else EMPTY_ATTRS

    def builder_attrs(self, given: Mapping[str, Any] | None = None, **kwargs: Any) -> Attrs:
        """Canonical attrs for a call built from Python: TVM's Python API defaults apply too."""
        merged = dict(given or {}, **kwargs)
        for name, value in self.py_defaults.items():
            merged.setdefault(name, value)
        return self.canonical_attrs(merged)

    def resolve(self, attrs: Attrs | Mapping[str, Any] | None) -> dict[str, Any]:
        """Every attribute's value (given, else TVM's default, else the Python API's default)."""
        if attrs is None:
            attrs = EMPTY_ATTRS
        cache = self._resolved
        if isinstance(attrs, Attrs):
            hit = cache.get(attrs)
            if hit is not None:
                return hit
        full = self._resolve(attrs)
        if isinstance(attrs, Attrs):
            if len(cache) > 4096:  # attrs of long-gone programs; the hot set refills quickly
                cache.clear()
            cache[attrs] = full
        return full

    def _resolve(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        unknown = [k for k in attrs if k not in self.attrs]
        if unknown:
            raise RelayTypeError(f"{self.name} has no attribute(s) {', '.join(map(repr, unknown))}; "
                                 f"valid attributes: {', '.join(self.attrs) or 'none'}")
        full: dict[str, Any] = {}
        for name, default in self.attrs.items():
            if name in attrs:
                full[name] = _coerce(canonical_attr(attrs[name]), default)
            elif default is not REQUIRED:
                full[name] = default
            elif name in self.py_defaults:
                full[name] = canonical_attr(self.py_defaults[name])
            else:
                raise RelayTypeError(f"{self.name}: attribute {name!r} is required")
        if self.normalize is not None:
            full = {k: canonical_attr(v) for k, v in self.normalize(dict(full)).items()}
        return full


def _coerce(value: Any, default: Any) -> Any:
    """Give a value the Python type of the default where TVM's field type is unambiguous."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, bool) and isinstance(value, int) and not isinstance(value, bool) \
            and value in (0, 1):
        return bool(value)
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types (so ``1``, ``1.0`` and ``True`` differ)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


_TABLE: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add an operator record (one per name)."""
    if opdef.name in _TABLE:
        raise ValueError(f"operator {opdef.name} is registered twice")
    _TABLE[opdef.name] = opdef
    return opdef


def lookup(name: str) -> OpDef | None:
    """The record of ``name``, or None."""
    _ensure_loaded()
    return _TABLE.get(name)


def get(name: str) -> OpDef:
    """The record of ``name``; an UnknownNameError suggesting close names when there is none."""
    op = lookup(name)
    if op is None:
        close = difflib.get_close_matches(name, list(_TABLE), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(f"unknown operator {name!r}{hint}")
    return op


def all_ops() -> list[OpDef]:
    """Every registered operator, sorted by name."""
    _ensure_loaded()
    return [_TABLE[k] for k in sorted(_TABLE)]


_loaded = False


def _ensure_loaded() -> None:
    # The op definition modules register themselves when relaygraph.ops is imported.
    global _loaded
    if not _loaded:
        _loaded = True
        import relaygraph.ops  # noqa: F401
