"""Random instantiations of a rule's left side: types for its variables and values for its
attributes under which the left side type-checks and the condition holds.

The search is guided by the op table: a variable's rank and dtype are drawn from the example
input types of the ops that consume it, attribute values from the examples and defaults. All
dimensions start equal (so the shape constraints of conv2d, dense, concatenate... hold), then
each dimension is moved to another size, or to 1, where the rule still applies: the result has
dimensions as varied as the rule allows, and broadcasting where it may occur.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.expr import Call, Expr, Op, Tuple, Var
from ..ir.types import TensorType, TupleType, Type
from ..ops.registry import REQUIRED, lookup
from ..ty import infer_type_expr, type_of
from .build import MISSING, BuildEnv, build
from .cond import EvalEnv
from .pattern import AVar, PCall, PLet, PTuple, PVar, children, walk
from .rule import Rule

__all__ = ["Instance", "instantiate", "leaf_roles", "condition_env"]

_DIMS = (1, 2, 3, 4, 5)
_EXTRA_ATTRS = {"out_dtype": ("", "float64"), "axis": (0, 1, -1)}


@dataclass
class Instance:
    """Types, attribute values and expressions that make a rule's left side apply."""

    types: dict[str, TensorType]  # leaf variable -> type
    attrs: dict[str, object]  # attribute variable -> value
    wild: dict[tuple[int, str], object]  # (call key, attribute) -> value of an omitted attribute
    leaves: dict[str, Expr]  # leaf variable -> expression (a Var, or one that uses a binder)
    params: list[Var]  # the function parameters (one per leaf)
    binders: dict[str, Var] = field(default_factory=dict)
    lhs: list[Expr] = field(default_factory=list)  # the left side's roots, typed
    root_types: list[Type] = field(default_factory=list)

    def env(self) -> BuildEnv:
        """How to build patterns with this instance's leaves, binders and attribute values."""
        return BuildEnv(leaf=self.leaves.__getitem__, binders=self.binders,
                        attr=self.attrs.__getitem__)


def leaf_roles(patterns) -> dict[str, list[tuple[str, int, bool]]]:
    """For each variable: the (op, input index, inside a tuple) places that consume it."""
    roles: dict[str, list] = {}

    def visit(p, parent: tuple | None) -> None:
        if isinstance(p, PVar):
            roles.setdefault(p.name, [])
            if parent is not None:
                roles[p.name].append(parent)
            return
        if isinstance(p, PCall):
            for i, a in enumerate(p.args):
                if isinstance(a, PTuple):
                    for f in a.fields:
                        visit(f, (p.op, i, True))
                else:
                    visit(a, (p.op, i, False))
            return
        for c in children(p):
            visit(c, None)

    for p in patterns:
        visit(p, None)
    return roles


def _role_types(role) -> list[tuple[int, str]]:
    op, i, in_tuple = role
    out = []
    for arg_types, _ in lookup(op).examples:
        if i >= len(arg_types):
            continue
        t = arg_types[i]
        fields = t.fields if (in_tuple and isinstance(t, TupleType)) else [t]
        for f in fields:
            if isinstance(f, TensorType):
                out.append((len(f.shape), f.dtype))
    return out


def _attr_candidates(op_name: str, attr: str) -> list:
    op = lookup(op_name)
    values = []
    default = op.attrs[attr]
    if default is not REQUIRED:
        values.append(default)
    elif attr in op.py_defaults:
        values.append(op.py_defaults[attr])
    for _, given in op.examples:
        if attr in given and given[attr] not in values:
            values.append(given[attr])
    for extra in _EXTRA_ATTRS.get(attr, ()):
        if extra not in values and (default is REQUIRED or type(extra) is type(default)):
            values.append(extra)
    return values or [None]


class _Search:
    def __init__(self, rule: Rule, rng: np.random.Generator) -> None:
        self.rule, self.rng = rule, rng
        self.roles = leaf_roles(rule.lhs)
        self.sites: dict[str, tuple[str, str]] = {}
        self.calls: list[PCall] = []
        for p in rule.lhs:
            for n in walk(p):
                if isinstance(n, PCall):
                    self.calls.append(n)
                    for attr, spec in n.attrs:
                        if isinstance(spec, AVar):
                            self.sites.setdefault(spec.name, (n.op, attr))
        self.scoped = self._scoped_leaves()

    def _scoped_leaves(self) -> list[tuple[str, str]]:
        """(leaf, binder) pairs: leaves inside the body of a let that binds a pattern binder."""
        out = []
        for p in self.rule.lhs:
            for n in walk(p):
                if isinstance(n, PLet):
                    out += [(m.name, n.binder) for m in walk(n.body) if isinstance(m, PVar)]
        return out

    def pick(self, values: list):
        return values[int(self.rng.integers(len(values)))]

    def draw_shapes(self) -> dict[str, tuple[int, str]]:
        out = {}
        ints = self.rng.random() < 0.2
        for v, roles in self.roles.items():
            options = [o for r in roles for o in _role_types(r)]
            if not options or self.rng.random() < 0.15:
                options = [(r, "float32") for r in range(0, 5)]
            preferred = [o for o in options if o[1] == ("int32" if ints else "float32")]
            out[v] = self.pick(preferred or options)
        return out

    def draw_attrs(self) -> tuple[dict, dict]:
        attrs = {}
        for name, (op, attr) in self.sites.items():
            attrs[name] = self.pick(_attr_candidates(op, attr))
        wild = {}
        for call in self.calls:
            written = {k for k, _ in call.attrs}
            for attr in lookup(call.op).attrs:
                if attr not in written:
                    wild[(call.key, attr)] = self.pick(_attr_candidates(call.op, attr))
        return attrs, wild

    def make(self, shapes: dict, attrs: dict, wild: dict, scoped: dict | None = None):
        """The instance for these choices, or None when the left side does not apply."""
        types = {v: TensorType(tuple(dims), dtype) for v, (dims, dtype) in shapes.items()}
        params = [Var(v, t) for v, t in types.items()]
        leaves: dict[str, Expr] = dict(zip(types, params))
        inst = Instance(types, attrs, wild, leaves, params)
        for v, b in (scoped or {}).items():
            inst.leaves[v] = Call(Op("add"), (leaves[v], inst.binders.setdefault(b, Var(b))))
        env = inst.env()
        env.wildcard = lambda key, attr: wild.get((key, attr), MISSING)
        try:
            roots = [build(p, env) for p in self.rule.lhs]
            infer_type_expr(Tuple(roots))
            inst.lhs, inst.root_types = roots, [type_of(r) for r in roots]
        except Exception:  # noqa: BLE001 - any failure to build or type-check: try other choices
            return None
        if self.rule.cond is not None and not self.rule.cond.holds(condition_env(self.rule, inst)):
            return None
        return inst

    def search(self, tries: int) -> Instance | None:
        for _ in range(tries):
            ranks = self.draw_shapes()
            attrs, wild = self.draw_attrs()
            base = int(self.rng.integers(2, 5))
            shapes = {v: ([base] * r, dtype) for v, (r, dtype) in ranks.items()}
            inst = self.make(shapes, attrs, wild)
            if inst is not None:
                return self.vary(inst, shapes, attrs, wild)
        return None

    def vary(self, inst: Instance, shapes: dict, attrs: dict, wild: dict) -> Instance:
        positions = [(v, i) for v, (dims, _) in shapes.items() for i in range(len(dims))]
        self.rng.shuffle(positions)
        for v, i in positions:
            dims = shapes[v][0]
            for size in self.rng.permutation([d for d in _DIMS if d != dims[i]])[:2]:
                old = dims[i]
                dims[i] = int(size)
                moved = self.make(shapes, attrs, wild)
                if moved is not None:
                    inst = moved
                    break
                dims[i] = old
        scoped = {}
        for v, b in self.scoped:
            if self.rng.random() < 0.7:
                trial = self.make(shapes, attrs, wild, {**scoped, v: b})
                if trial is not None:
                    scoped[v] = b
                    inst = trial
        return inst


def condition_env(rule: Rule, inst: Instance) -> EvalEnv:
    """How a condition reads an instance: leaf and root types, attribute values, binders."""
    roots = dict(zip(rule.roots, inst.root_types))

    def type_of_name(name: str):
        if name in roots:
            return roots[name]
        e = inst.leaves.get(name)
        if isinstance(e, Var):
            return inst.types[name]
        return None if e is None else type_of(e)

    def occurrences(binder: str, name: str):
        var = inst.binders.get(binder)
        e = inst.leaves.get(name)
        if var is None or e is None:
            return 0
        return sum(1 for v in _all_var_uses(e) if v is var)

    return EvalEnv(type_of_name, inst.attrs.__getitem__, occurrences)


def _all_var_uses(e: Expr) -> list[Var]:
    out = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.append(n)
        elif isinstance(n, Expr):
            stack.extend(c for c in n.children() if isinstance(c, Expr))
    return out


def instantiate(rule: Rule, rng: np.random.Generator, tries: int = 300) -> Instance | None:
    """A random instance under which the rule's left side applies, or None after ``tries``."""
    return _Search(rule, rng).search(tries)

