"""Patterns -> egglog text in relaygraph's Relay encoding (``relaygraph.egraph.encoding``).

A left side becomes query facts ``(= ?root <term>)``: a pattern variable is the egglog
variable ``?name`` (an e-class; attribute variables are ``String`` variables), an attribute
written out is its ``attr_key`` String, an omitted one is ``_``. A right side becomes a term
built in the rule's actions, omitted attributes taking the op's default.
"""

from __future__ import annotations

from ..egraph.encoding import attr_key, const_key, op_constructor
from ..ops.registry import REQUIRED, lookup
from .cond import egg_str
from .pattern import (
    AComputed,
    ALit,
    AVar,
    PBinder,
    PCall,
    PConst,
    PIf,
    PLet,
    PProj,
    PSubst,
    PTuple,
    PVar,
    children,
    walk,
)

__all__ = ["lhs_term", "rhs_term", "is_native", "rhs_default_attrs", "egg_list", "contains_attr_vars"]


def egg_list(items: list[str]) -> str:
    """A cons list of egglog terms."""
    out = "(RNil)"
    for item in reversed(items):
        out = f"(RCons {item} {out})"
    return out


def _var(name: str) -> str:
    return "_" if name.startswith("_") else "?" + name


def lhs_term(p) -> str:
    """The egglog query term of a left-side pattern."""
    if isinstance(p, PVar):
        return _var(p.name)
    if isinstance(p, PBinder):
        return f"(RVar ?{p.name})"
    if isinstance(p, PConst):
        return f"(RConst {egg_str(const_key(p.value))})"
    if isinstance(p, PTuple):
        return f"(RTuple {egg_list([lhs_term(f) for f in p.fields])})"
    if isinstance(p, PProj):
        return f"(RProj {lhs_term(p.value)} {p.index})"
    if isinstance(p, PLet):
        return f"(RLet ?{p.binder} {lhs_term(p.value)} {lhs_term(p.body)})"
    if isinstance(p, PIf):
        return f"(RIf {lhs_term(p.cond)} {lhs_term(p.then)} {lhs_term(p.other)})"
    if isinstance(p, PCall):
        op = lookup(p.op)
        parts = [lhs_term(a) for a in p.args]
        for name in op.attrs:
            spec = p.attr(name)
            if spec is None:
                parts.append("_")
            elif isinstance(spec, ALit):
                parts.append(egg_str(attr_key(spec.value)))
            elif isinstance(spec, AVar):
                parts.append(_var(spec.name))
            else:
                raise AssertionError("computed attributes are refused on the left side")
        return f"({op_constructor(op)}{''.join(' ' + x for x in parts)})"
    raise AssertionError(f"not a left-side pattern: {p!r}")


def rhs_default_attrs(op) -> dict:
    """The values an omitted right-side attribute takes (REQUIRED ones: the Python default)."""
    full = {}
    for name, default in op.attrs.items():
        if default is REQUIRED:
            if name in op.py_defaults:
                full[name] = op.py_defaults[name]
        else:
            full[name] = default
    return full


def _default_key(op, name: str) -> str:
    from .pattern import canonical_attr_value

    return attr_key(canonical_attr_value(op, name, rhs_default_attrs(op)[name]))


def rhs_term(p, prebuilt: dict | None = None, computed: dict | None = None) -> str:
    """The egglog term that builds a right-side pattern. ``prebuilt`` maps id(sub-pattern) to a
    name already bound in the actions; ``computed`` maps a computed attribute's index to the
    query variable holding its value."""
    return _Rhs(prebuilt or {}, computed or {}).term(p)


class _Rhs:
    def __init__(self, prebuilt: dict, computed: dict) -> None:
        self.prebuilt, self.computed = prebuilt, computed

    def term(self, p) -> str:
        t = self.term
        if id(p) in self.prebuilt:
            return self.prebuilt[id(p)]
        if isinstance(p, PVar):
            return "?" + p.name
        if isinstance(p, PBinder):
            return f"(RVar ?{p.name})"
        if isinstance(p, PConst):
            return f"(RConst {egg_str(const_key(p.value))})"
        if isinstance(p, PTuple):
            return f"(RTuple {egg_list([t(f) for f in p.fields])})"
        if isinstance(p, PProj):
            return f"(RProj {t(p.value)} {p.index})"
        if isinstance(p, PLet):
            return f"(RLet ?{p.binder} {t(p.value)} {t(p.body)})"
        if isinstance(p, PIf):
            return f"(RIf {t(p.cond)} {t(p.then)} {t(p.other)})"
        if isinstance(p, PSubst):
            return f"(Subst {t(p.body)} ?{p.binder} {t(p.value)})"
        if isinstance(p, PCall):
            return self.call(p)
        raise AssertionError(f"not a right-side pattern: {p!r}")

    def call(self, p: PCall) -> str:
        op = lookup(p.op)
        parts = [self.term(a) for a in p.args]
        for name in op.attrs:
            spec = p.attr(name)
            if spec is None:
                parts.append(egg_str(_default_key(op, name)))
            elif isinstance(spec, ALit):
                parts.append(egg_str(attr_key(spec.value)))
            elif isinstance(spec, AVar):
                parts.append("?" + spec.name)
            elif spec.index in self.computed:
                parts.append(self.computed[spec.index])
            else:
                raise AssertionError("a computed attribute has no egglog term")
        return f"({op_constructor(op)}{''.join(' ' + x for x in parts)})"


def is_native(p) -> bool:
    """Whether egglog can build this right side by itself (no computed attributes)."""
    for node in walk(p):
        if isinstance(node, PCall) and any(isinstance(s, AComputed) for _, s in node.attrs):
            return False
    return True


def contains_attr_vars(p) -> bool:
    """Whether a pattern mentions attribute variables (whose values only egglog knows)."""
    for node in walk(p):
        if isinstance(node, PCall) and any(isinstance(s, AVar) for _, s in node.attrs):
            return True
        if isinstance(node, (PLet, PBinder, PSubst)):
            return True  # binder keys are Strings as well
    return False


def prebuilt_parts(p) -> list:
    """The maximal native sub-patterns of a right side that egglog must build (they use
    attribute variables), for a rule whose right side Python builds."""
    if is_native(p):
        return [p] if contains_attr_vars(p) and not isinstance(p, PVar) else []
    out = []
    for c in children(p):
        out.extend(prebuilt_parts(c))
    return out
