"""Patterns: the two sides of a rule as a small tree, read from Relay text.

Nodes: ``PVar`` (``?x``, an e-class), ``PConst`` (a literal constant), ``PCall`` (an op call
with attribute specs), ``PTuple``, ``PProj`` (``.N``), ``PLet`` / ``PBinder`` (a let whose
variable is a pattern binder ``let ?x = ..``, and a use of it), ``PIf`` and ``PSubst`` (the
right-side builtin ``subst(?body, ?x, ?value)``: ``?body`` with ``?x`` replaced).

Attribute specs of a call: ``ALit`` (a written value, canonical), ``AVar`` (``axis=?ax``),
``AComputed`` (an expression over shapes, right side only). An attribute that is not written
is absent: on the left it matches any value, on the right it takes the op's default.
``PCall.spread`` names a ``**?a`` group: every attribute not written out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..errors import ParseError
from ..ir.expr import Call, Constant, Expr, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.module import IRModule, SourceMap
from ..ops.registry import REQUIRED, OpDef, lookup
from ..text import parse_expr
from .sidetext import ANON, PV_PREFIX, SideText

__all__ = [
    "PVar", "PConst", "PCall", "PTuple", "PProj", "PLet", "PBinder", "PIf", "PSubst", "ALit", "AVar",
    "AComputed", "Pattern", "side_to_pattern", "canonical_attr_value", "walk", "PatternError",
    "is_native", "contains_attr_vars", "prebuilt_parts",
]


class PatternError(Exception):
    """A problem with a pattern, at a position of the prepared side text."""

    def __init__(self, message: str, pos: int | None = None, file_offset: int | None = None) -> None:
        super().__init__(message)
        self.pos, self.file_offset = pos, file_offset


@dataclass(frozen=True)
class ALit:
    """An attribute written out: its canonical value."""

    value: object


@dataclass(frozen=True)
class AVar:
    """An attribute bound to an attribute variable (``axis=?ax``)."""

    name: str


@dataclass(frozen=True)
class AComputed:
    """A right-side attribute computed from the matched types (an index into the side's expressions)."""

    index: int  # into the side's computed expressions


@dataclass(frozen=True)
class PVar:
    """A pattern variable ``?name``: any e-class."""

    name: str


@dataclass(frozen=True)
class PBinder:
    """A use of a let-bound pattern binder (``RVar`` of its key)."""

    name: str


@dataclass(frozen=True)
class PConst:
    """A literal constant."""

    value: Constant


@dataclass(frozen=True)
class PCall:
    """A call of an op with attribute specs (an absent attribute: any value on the left, the
    default on the right)."""

    op: str
    args: tuple
    attrs: tuple  # ((name, ALit | AVar | AComputed), ...) in the op's attribute order
    spread: str | None = None
    key: int = field(default=0, compare=False)  # unique per call site within a rule
    pos: int = field(default=0, compare=False)  # offset in the prepared text

    @property
    def opdef(self) -> OpDef:
        """The op's record."""
        return lookup(self.op)

    def attr(self, name: str):
        """The spec of attribute ``name``, or None when it is not written."""
        for k, spec in self.attrs:
            if k == name:
                return spec
        return None


@dataclass(frozen=True)
class PTuple:
    """A tuple."""

    fields: tuple


@dataclass(frozen=True)
class PProj:
    """A projection ``.index``."""

    value: object
    index: int


@dataclass(frozen=True)
class PLet:
    """A let that binds the pattern binder ``binder``."""

    binder: str
    value: object
    body: object


@dataclass(frozen=True)
class PIf:
    """An if expression."""

    cond: object
    then: object
    other: object


@dataclass(frozen=True)
class PSubst:
    """The right-side builtin ``subst(body, binder, value)``."""

    body: object
    binder: str
    value: object


Pattern = PVar | PBinder | PConst | PCall | PTuple | PProj | PLet | PIf | PSubst


def children(p) -> tuple:
    """The sub-patterns of a pattern node."""
    if isinstance(p, PCall):
        return p.args
    if isinstance(p, PTuple):
        return p.fields
    if isinstance(p, PProj):
        return (p.value,)
    if isinstance(p, PLet):
        return (p.value, p.body)
    if isinstance(p, PIf):
        return (p.cond, p.then, p.other)
    if isinstance(p, PSubst):
        return (p.body, p.value)
    return ()


def walk(p):
    """Every node of a pattern, parents first."""
    stack = [p]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def canonical_attr_value(op: OpDef, name: str, value):
    """A written attribute value as the op stores it (coerced and normalised, as in calls)."""
    full = {}
    for k, default in op.attrs.items():
        if k == name:
            full[k] = value
        elif default is REQUIRED:
            full[k] = op.py_defaults.get(k, _example_value(op, k))
    return op.resolve(full)[name]


def _example_value(op: OpDef, name: str):
    for _, given in op.examples:
        if name in given:
            return given[name]
    return None


_SUBST_MOD: IRModule | None = None


def _subst_module() -> IRModule:
    # `subst(..)` is parsed as a call of a global function; this module defines it.
    global _SUBST_MOD
    if _SUBST_MOD is None:
        from ..ir.expr import Function

        params = [Var("body"), Var("binder"), Var("value")]
        mod = IRModule()
        mod.add(GlobalVar("__subst"), Function(params, params[0]))
        _SUBST_MOD = mod
    return _SUBST_MOD


_counter = itertools.count(1)


def side_to_pattern(side: SideText, source_name: str, binders: frozenset = frozenset()):
    """Parse a prepared side with the Relay parser and convert it to a pattern; ``binders``
    are the let binders of the rule, which stand for their variable where they occur free."""
    spans = SourceMap()
    try:
        expr = parse_expr(side.text, source_name=source_name, mod=_subst_module(), raw_attrs=True,
                          source_map=spans)
    except ParseError as exc:
        pos = _pos_of_span(side.text, exc.span)
        raise PatternError(_clean(exc.message), pos) from None
    return _Convert(side, source_name, binders, spans).convert(expr)


def _clean(message: str) -> str:
    return message.replace("%" + PV_PREFIX, "?").replace('"?pv:', '"?').replace("@__subst", "subst")


def _pos_of_span(text: str, span) -> int:
    if span is None:
        return 0
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:span.line - 1]) + span.column - 1


class _Convert:
    def __init__(self, side: SideText, source_name: str, outer: frozenset,
                 spans: SourceMap) -> None:
        self.side = side
        self.spans = spans
        self.source_name = source_name
        self.outer = outer
        self.binders: dict[Var, str] = {}

    def pos(self, node: Expr) -> int:
        span = self.spans.get(node)
        if span is None or span.source_name != self.source_name:
            return 0
        return _pos_of_span(self.side.text, span)

    def convert(self, e: Expr):
        if isinstance(e, Var):
            if e in self.binders:
                return PBinder(self.binders[e])
            name = e.name_hint[len(PV_PREFIX):]
            return PBinder(name) if name in self.outer else PVar(name)
        if isinstance(e, Constant):
            return PConst(e)
        if isinstance(e, Tuple):
            return PTuple(tuple(self.convert(f) for f in e.fields))
        if isinstance(e, TupleGetItem):
            return PProj(self.convert(e.tuple_value), e.index)
        if isinstance(e, If):
            return PIf(self.convert(e.cond), self.convert(e.true_branch), self.convert(e.false_branch))
        if isinstance(e, Let):
            if not e.var.name_hint.startswith(PV_PREFIX):
                raise PatternError("a let in a rule binds a pattern variable: let ?x = ...",
                                   self.pos(e))
            name = e.var.name_hint[len(PV_PREFIX):]
            value = self.convert(e.value)
            self.binders[e.var] = name
            return PLet(name, value, self.convert(e.body))
        if isinstance(e, Call):
            return self.call(e)
        raise PatternError(f"{type(e).__name__} nodes are not supported in rule patterns",
                           self.pos(e))

    def call(self, e: Call):
        if isinstance(e.op, GlobalVar) and e.op.name_hint == "__subst":
            binder = self.convert(e.args[1]) if len(e.args) == 3 else None
            if not isinstance(binder, PBinder):
                raise PatternError("subst(?body, ?x, ?value) needs a let-bound ?x as its second "
                                   "argument", self.pos(e))
            return PSubst(self.convert(e.args[0]), binder.name, self.convert(e.args[2]))
        if not isinstance(e.op, Op):
            raise PatternError("only operators can be called in rule patterns", self.pos(e))
        op = lookup(e.op.name)
        if op.num_inputs is not None and len(e.args) != op.num_inputs:
            raise PatternError(f"{op.name} takes {op.num_inputs} input(s), got {len(e.args)}",
                               self.pos(e))
        spread = None
        specs: dict[str, object] = {}
        for name, value in e.attrs.items:
            if name == "__spread__":
                spread = value[len("?sp:"):]
                continue
            if name not in op.attrs:
                known = ", ".join(op.attrs) or "none"
                raise PatternError(f"operator {op.name} has no attribute {name} (its attributes: "
                                   f"{known})", self.pos(e))
            if isinstance(value, str) and value.startswith("?pv:"):
                var = value[len("?pv:"):]
                specs[name] = AVar(f"{ANON}a{next(_counter)}" if var == ANON else var)
            elif isinstance(value, str) and value.startswith("?cv:"):
                specs[name] = AComputed(int(value[len("?cv:"):]))
            else:
                try:
                    specs[name] = ALit(canonical_attr_value(op, name, value))
                except Exception as exc:  # noqa: BLE001 - the op's own message says what is wrong
                    raise PatternError(f"bad value for {op.name} attribute {name}: {exc}",
                                       self.pos(e)) from None
        attrs = tuple((k, specs[k]) for k in op.attrs if k in specs)
        args = tuple(self.convert(a) for a in e.args)
        return PCall(op.name, args, attrs, spread, next(_counter), self.pos(e))


def is_native(p) -> bool:
    """Whether the e-graph can build this right side by itself (no computed attributes)."""
    for node in walk(p):
        if isinstance(node, PCall) and any(isinstance(s, AComputed) for _, s in node.attrs):
            return False
    return True


def contains_attr_vars(p) -> bool:
    """Whether a pattern mentions attribute variables (whose values only the e-graph knows)."""
    for node in walk(p):
        if isinstance(node, PCall) and any(isinstance(s, AVar) for _, s in node.attrs):
            return True
        if isinstance(node, (PLet, PBinder, PSubst)):
            return True  # binder keys are attribute-like values as well
    return False


def prebuilt_parts(p) -> list:
    """The maximal native sub-patterns of a right side that the e-graph must build (they use
    attribute variables), for a rule whose right side Python builds."""
    if is_native(p):
        return [p] if contains_attr_vars(p) and not isinstance(p, PVar) else []
    out = []
    for c in children(p):
        out.extend(prebuilt_parts(c))
    return out
