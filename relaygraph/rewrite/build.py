"""Patterns -> Relay expressions, for the soundness checker and for right sides built in Python."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import RelayError
from ..ir.expr import Call, Expr, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.traversal import substitute
from ..ops.registry import lookup
from .pattern import AComputed, ALit, AVar, PBinder, PCall, PConst, PIf, PLet, PProj, PSubst, PTuple, PVar

__all__ = ["BuildEnv", "build", "BuildError"]


class BuildError(RelayError):
    """A pattern that cannot be built with these bindings (a computed value was unknown)."""


_MISSING = object()


@dataclass
class BuildEnv:
    """What building a pattern reads."""

    leaf: Callable[[str], Expr]  # class variable -> expression
    binders: dict[str, Var] = field(default_factory=dict)  # let binder -> its Var
    attr: Callable[[str], object] | None = None  # attribute variable -> value
    computed: Callable[[int], object] | None = None  # computed attribute -> value
    wildcard: Callable[[int, str], object] | None = None  # (call key, attr) -> value or _MISSING
    prebuilt: dict[int, Expr] = field(default_factory=dict)  # id(pattern node) -> expression

    def binder(self, name: str) -> Var:
        """The Var of a let binder (one per name, shared by both sides)."""
        var = self.binders.get(name)
        if var is None:
            var = self.binders[name] = Var(name)
        return var


def build(p, env: BuildEnv) -> Expr:
    """The Relay expression of a pattern under ``env``."""
    hit = env.prebuilt.get(id(p))
    if hit is not None:
        return hit
    if isinstance(p, PVar):
        return env.leaf(p.name)
    if isinstance(p, PBinder):
        return env.binder(p.name)
    if isinstance(p, PConst):
        return p.value
    if isinstance(p, PTuple):
        return Tuple([build(f, env) for f in p.fields])
    if isinstance(p, PProj):
        return TupleGetItem(build(p.value, env), p.index)
    if isinstance(p, PIf):
        return If(build(p.cond, env), build(p.then, env), build(p.other, env))
    if isinstance(p, PLet):
        var = env.binder(p.binder)
        return Let(var, build(p.value, env), build(p.body, env))
    if isinstance(p, PSubst):
        return substitute(build(p.body, env), {env.binder(p.binder): build(p.value, env)})
    if isinstance(p, PCall):
        return _call(p, env)
    raise AssertionError(f"not a pattern: {p!r}")


def _call(p: PCall, env: BuildEnv) -> Call:
    op = lookup(p.op)
    values = {}
    for name in op.attrs:
        spec = p.attr(name)
        if spec is None:
            value = env.wildcard(p.key, name) if env.wildcard is not None else _MISSING
            if value is not _MISSING:
                values[name] = value
        elif isinstance(spec, ALit):
            values[name] = spec.value
        elif isinstance(spec, AVar):
            if env.attr is None:
                raise BuildError(f"the value of attribute variable ?{spec.name} is not known here")
            values[name] = env.attr(spec.name)
        elif isinstance(spec, AComputed):
            if env.computed is None:
                raise BuildError("computed attributes need the matched types")
            values[name] = env.computed(spec.index)
    try:
        attrs = op.canonical_attrs(values)
    except Exception as exc:  # noqa: BLE001 - the op says which value it refuses
        raise BuildError(f"{op.name}: {exc}") from None
    return Call(Op(op.name), tuple(build(a, env) for a in p.args), attrs)


MISSING = _MISSING
