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
from ..ops.registry import REQUIRED, PatternKind, lookup
from ..ty import TypeMap, infer_type_expr
from .build import MISSING, BuildEnv, build
from .cond import EvalEnv
from .pattern import ALit, AVar, PCall, PIf, PLet, PTuple, PVar, children, walk
from .rule import Rule

__all__ = ["Instance", "instantiate", "leaf_roles", "condition_env"]

_DIMS = (1, 2, 3, 4, 5)
_EXTRA_ATTRS = {"out_dtype": ("", "float64"), "axis": (0, 1, -1)}
# Edge values an edge trial tries for a pool's free window attributes: a 1x1 window with padding
# on every side puts whole windows in the padding (a max pool's -inf there does not commute with
# relu), which the examples' windows reach only by chance.
_EDGE_ATTRS = {"pool_size": (1, 1), "padding": (1, 1, 1, 1)}


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
    checked: TypeMap | None = None  # the left side's checked types
    computed: list = field(default_factory=list)  # the values of the computed attributes

    def env(self) -> BuildEnv:
        """How to build patterns with this instance's leaves, binders and attribute values."""
        return BuildEnv(leaf=self.leaves.__getitem__, binders=self.binders,
                        attr=self.attrs.__getitem__, computed=self.computed.__getitem__)


def leaf_roles(patterns) -> dict[str, list[list[tuple[str, int, bool]]]]:
    """For each occurrence of each variable: the (op, input index, inside a tuple) places that
    consume it, the direct one first, then (through elementwise ops) where their results go."""
    roles: dict[str, list] = {}

    def visit(p, places: list) -> None:
        if isinstance(p, PVar):
            roles.setdefault(p.name, [])
            if places:
                roles[p.name].append(places)
            return
        if isinstance(p, PCall):
            # elementwise ops and transposes keep the rank their result needs
            through = lookup(p.op).pattern <= PatternKind.BROADCAST or p.op == "transpose"
            for i, a in enumerate(p.args):
                inherited = places if through else []
                here = (p.op, i, isinstance(a, PTuple))
                axes = p.attr("axes") if p.op == "transpose" else None
                if isinstance(axes, ALit) and isinstance(axes.value, tuple):
                    here = ("transpose", len(axes.value), False)
                elif isinstance(axes, AVar):
                    here = ("transpose", axes.name, False)  # the rank follows the drawn axes
                for f in (a.fields if isinstance(a, PTuple) else (a,)):
                    visit(f, [here, *inherited])
            return
        if isinstance(p, PIf):
            visit(p.cond, [("if", 0, False)])
            visit(p.then, places)
            visit(p.other, places)
            return
        for c in children(p):
            visit(c, [])

    for p in patterns:
        visit(p, [])
    return roles


def _role_types(role) -> list[tuple[int, str]]:
    op, i, in_tuple = role
    if op == "if":
        return [(0, "bool")]  # the condition of an if is a boolean scalar
    if op == "transpose" and type(i) is int:
        return [(i, "float32"), (i, "int32")]  # a transpose with literal axes: their rank
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
    def __init__(self, rule: Rule, rng: np.random.Generator, edges: bool = False) -> None:
        self.rule, self.rng, self.edges = rule, rng, edges
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
        self.fixed_ranks = rule.cond.fixed_ranks() if rule.cond is not None else {}
        # dimensions the condition fixes (`shape(?s)[1] == 1`): start from them, never move them
        self.fixed_dims = rule.cond.fixed_dims() if rule.cond is not None else {}
        # attribute variables passed to attribute functions also try values from their domain
        self.function_args: dict[str, list] = {}
        for e in [*rule.computed, *([rule.cond] if rule.cond is not None else [])]:
            for name, f in e.function_args():
                self.function_args.setdefault(name, []).extend(f.samples())

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

    def draw_shapes(self, attrs: dict) -> dict[str, tuple[int, str]]:
        out = {}
        ints = self.rng.random() < 0.2
        for v, roles in self.roles.items():
            # one of the places that consume the variable, then one of its example types
            place = self.pick(self.pick(roles)) if roles else None
            if place is not None and place[0] == "transpose" and isinstance(place[1], str):
                axes = attrs.get(place[1])
                place = ("transpose", len(axes), False) if isinstance(axes, tuple) else None
            options = _role_types(place) if place is not None else []
            if not options or self.rng.random() < 0.15:
                options = [(r, "float32") for r in range(0, 5)]
            preferred = [o for o in options if o[1] == ("int32" if ints else "float32")]
            out[v] = self.pick(preferred or options)
            if v in self.fixed_ranks:  # the condition says `rank(?v) == N`
                out[v] = (self.fixed_ranks[v], out[v][1])
        return out

    def draw_attrs(self, edge: bool = False) -> tuple[dict, dict]:
        attrs = {}
        for name, (op, attr) in self.sites.items():
            candidates = _attr_candidates(op, attr) + self.function_args.get(name, [])
            attrs[name] = self._edge(op, attr) if edge and self._edge(op, attr) else self.pick(candidates)
        wild = {}
        for call in self.calls:
            written = {k for k, _ in call.attrs}
            for attr in lookup(call.op).attrs:
                if attr not in written:
                    value = self._edge(call.op, attr) if edge else None
                    wild[(call.key, attr)] = value or self.pick(_attr_candidates(call.op, attr))
        return attrs, wild

    @staticmethod
    def _edge(op: str, attr: str):
        """The edge value of a pool's window attribute (None for other attributes)."""
        attrs = lookup(op).attrs
        return _EDGE_ATTRS.get(attr) if "pool_size" in attrs and "padding" in attrs else None

    def make(self, shapes: dict, attrs: dict, wild: dict, scoped: dict | None = None):
        """The instance for these choices, or None when the left side does not apply."""
        types = {v: TensorType(tuple(dims), dtype) for v, (dims, dtype) in shapes.items()}
        params = [Var(v, t) for v, t in types.items()]
        leaves: dict[str, Expr] = dict(zip(types, params, strict=True))
        inst = Instance(types, attrs, wild, leaves, params)
        for v, b in (scoped or {}).items():
            inst.leaves[v] = Call(Op("add"), (leaves[v], inst.binders.setdefault(b, Var(b))))
        env = inst.env()
        env.wildcard = lambda key, attr: wild.get((key, attr), MISSING)
        try:
            roots = [build(p, env) for p in self.rule.lhs]
            checked = infer_type_expr(Tuple(roots), with_types=True)[1]
            inst.lhs, inst.root_types = roots, [checked.type_of(r) for r in roots]
            inst.checked = checked
        except Exception:  # noqa: BLE001 - any failure to build or type-check: try other choices
            return None
        cenv = condition_env(self.rule, inst)
        if self.rule.cond is not None and not self.rule.cond.holds(cenv):
            return None
        # a computed attribute that is unknown here (a table without this entry, a symbolic
        # shape) means the rule does not apply
        inst.computed = [e.evaluate(cenv) for e in self.rule.computed]
        if not all(_concrete(v) for v in inst.computed):
            return None
        return inst

    def search(self, tries: int) -> Instance | None:
        extra = tries // 2 if self.edges else 0
        for k in range(tries + extra):
            # an edge search tries edge cases first, in tries of its own (both in the first
            # half of them, each half the time in the second): pool windows that lie wholly in
            # the padding, and 1x1 images (rank-4 leaves whose last two dimensions are 1: a
            # global pool's output, which batch_flatten turns into its channels)
            edge = k < extra
            both = k < extra // 2
            attrs, wild = self.draw_attrs(both or (edge and self.rng.random() < 0.5))
            ranks = self.draw_shapes(attrs)
            base = int(self.rng.integers(2, 5))
            shapes = {v: ([base] * r, dtype) for v, (r, dtype) in ranks.items()}
            self.kept = set()  # the 1x1 images' dimensions: not varied away
            if both or (edge and self.rng.random() < 0.5):
                for v, (dims, _) in shapes.items():
                    if len(dims) == 4:
                        dims[2:] = [1, 1]
                        self.kept |= {(v, 2), (v, 3)}
            for v, i in self._fixed_positions(shapes):
                shapes[v][0][i] = self.fixed_dims[v][i if i in self.fixed_dims[v] else i - len(shapes[v][0])]
            # a leaf inside a let's body may use the let's variable (as `leaf + x`)
            scoped = {v: b for v, b in self.scoped if self.rng.random() < 0.6}
            inst = self.make(shapes, attrs, wild, scoped)
            if inst is not None:
                return self.vary(inst, shapes, attrs, wild, scoped)
        return None

    def _fixed_positions(self, shapes: dict) -> list[tuple[str, int]]:
        """(variable, dimension index) of each dimension the condition fixes, within the rank drawn."""
        out = []
        for v, fixed in self.fixed_dims.items():
            if v in shapes:
                rank = len(shapes[v][0])
                out += [(v, i % rank) for i in fixed if -rank <= i < rank]
        return out

    def vary(self, inst: Instance, shapes: dict, attrs: dict, wild: dict, scoped: dict) -> Instance:
        fixed = set(self._fixed_positions(shapes)) | self.kept
        positions = [(v, i) for v, (dims, _) in shapes.items() for i in range(len(dims))
                     if (v, i) not in fixed]
        self.rng.shuffle(positions)
        for v, i in positions:
            dims = shapes[v][0]
            for size in self.rng.permutation([d for d in _DIMS if d != dims[i]])[:2]:
                old = dims[i]
                dims[i] = int(size)
                moved = self.make(shapes, attrs, wild, scoped)
                if moved is not None:
                    inst = moved
                    break
                dims[i] = old
        return inst


def condition_env(rule: Rule, inst: Instance) -> EvalEnv:
    """How a condition reads an instance: leaf and root types, attribute values, binders."""
    roots = dict(zip(rule.roots, inst.root_types, strict=True))

    def type_of_name(name: str):
        if name in roots:
            return roots[name]
        e = inst.leaves.get(name)
        if isinstance(e, Var):
            return inst.types[name]
        return None if e is None else inst.checked.type_of(e)

    def occurrences(binder: str, name: str):
        var = inst.binders.get(binder)
        e = inst.leaves.get(name)
        if var is None or e is None:
            return 0
        return sum(1 for v in _all_var_uses(e) if v is var)

    # a leaf is a parameter here; positive(?x) holds for one drawn above zero (soundness._domains)
    def is_param(name: str) -> bool:
        return isinstance(inst.leaves.get(name), Var)

    return EvalEnv(type_of_name, inst.attrs.__getitem__, occurrences, is_param, is_param)


def _concrete(v) -> bool:
    if isinstance(v, tuple):
        return all(_concrete(x) for x in v)
    return isinstance(v, (int, float, str, bool)) or v is None


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


def instantiate(rule: Rule, rng: np.random.Generator, tries: int = 300,
                edges: bool = False) -> Instance | None:
    """A random instance under which the rule's left side applies, or None after ``tries``;
    ``edges``: edge cases first (pool windows wholly in padding, 1x1 images)."""
    return _Search(rule, rng, edges).search(tries)

