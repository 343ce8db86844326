"""Unification over types: union-find on type holes, dimension unification with symbol
binding, and a worklist of constraints woken by the holes they wait on.

Holes are ``IncompleteType`` nodes; ``parent`` maps a bound hole to what it was unified with.
``Any`` (``?``) unifies with any dimension; a bare dimension symbol unifies with a concrete (or
other) dimension by binding it (``dim_subst``), which every resolved type then reflects.
Constraints (operator relations, tuple projections) that find a hole among their inputs register
on it and are re-run only when that hole is bound, so solving costs time linear in the number of
constraints rather than one full pass per round.
"""

from __future__ import annotations

from collections import deque

import sympy

from ..ir.types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
    format_type,
)
from .dims import dims_equal, simplify_dim, substitute_dim

__all__ = ["Solver", "Mismatch", "subst_type", "has_holes"]


class Mismatch(Exception):
    """Two types (or dimensions) that cannot be unified; the message says where they differ."""


def subst_type(t: Type, mapping: dict, holes: bool = False) -> Type:
    """``t`` with type variables (or, with ``holes=True``, holes) replaced by ``mapping``."""
    if not mapping or isinstance(t, TensorType):
        return t
    if isinstance(t, TypeVar) or (holes and isinstance(t, IncompleteType)):
        return mapping.get(t, t)
    if isinstance(t, TupleType):
        return TupleType([subst_type(f, mapping, holes) for f in t.fields])
    if isinstance(t, FuncType):
        inner = {k: v for k, v in mapping.items() if k not in t.type_params}
        return FuncType([subst_type(a, inner, holes) for a in t.arg_types],
                        subst_type(t.ret_type, inner, holes), t.type_params, t.type_constraints)
    if isinstance(t, TypeCall):
        return TypeCall(subst_type(t.func, mapping, holes),
                        [subst_type(a, mapping, holes) for a in t.args])
    if isinstance(t, RefType):
        return RefType(subst_type(t.value, mapping, holes))
    return t


def has_holes(t: Type) -> bool:
    """True if ``t`` mentions an IncompleteType anywhere."""
    stack = [t]
    while stack:
        cur = stack.pop()
        if isinstance(cur, IncompleteType):
            return True
        if not isinstance(cur, TensorType):
            stack.extend(cur.children())
    return False


def _adt_call(t: Type) -> Type:
    # an ADT without type parameters may be written as its bare name
    return TypeCall(t, ()) if isinstance(t, GlobalTypeVar) else t


class Solver:
    """Holes, their bindings, symbol bindings and the constraint worklist of one inference."""

    def __init__(self) -> None:
        self.parent: dict[IncompleteType, Type] = {}
        self.waiters: dict[IncompleteType, list] = {}
        self.queue: deque = deque()
        self.dim_subst: dict = {}

    # -- holes ------------------------------------------------------------------------------
    @staticmethod
    def fresh() -> IncompleteType:
        """A new hole."""
        return IncompleteType()

    def find(self, t: Type) -> Type:
        """The representative of ``t`` (follows bound holes, compressing the path)."""
        if type(t) is not IncompleteType:
            return t
        parent = self.parent
        root = t
        while type(root) is IncompleteType and root in parent:
            root = parent[root]
        while type(t) is IncompleteType and t in parent and parent[t] is not root:
            parent[t], t = root, parent[t]
        return root

    def resolve(self, t: Type) -> Type:
        """``t`` with every bound hole replaced and every bound symbol substituted."""
        t = self.find(t)
        if type(t) is TensorType:
            if self.dim_subst and any(isinstance(d, sympy.Basic) for d in t.shape):
                return TensorType([substitute_dim(d, self.dim_subst) for d in t.shape], t.dtype)
            return t
        if isinstance(t, (IncompleteType, TypeVar, GlobalTypeVar)):
            return t
        if isinstance(t, TupleType):
            fields = [self.resolve(f) for f in t.fields]
            return t if all(a is b for a, b in zip(fields, t.fields, strict=True)) else TupleType(fields)
        if isinstance(t, FuncType):
            args = [self.resolve(a) for a in t.arg_types]
            ret = self.resolve(t.ret_type)
            if ret is t.ret_type and all(a is b for a, b in zip(args, t.arg_types, strict=True)):
                return t
            return FuncType(args, ret, t.type_params, t.type_constraints)
        if isinstance(t, TypeCall):
            return TypeCall(self.resolve(t.func), [self.resolve(a) for a in t.args])
        if isinstance(t, RefType):
            return RefType(self.resolve(t.value))
        return t

    def holes(self, t: Type) -> list[IncompleteType]:
        """The unbound holes ``t`` still mentions."""
        out, stack = [], [t]
        while stack:
            cur = self.find(stack.pop())
            if type(cur) is IncompleteType:
                out.append(cur)
            elif type(cur) is not TensorType:
                stack.extend(cur.children())
        return out

    def wait(self, constraint, holes) -> None:
        """Re-run ``constraint`` when any of ``holes`` is bound."""
        for h in holes:
            self.waiters.setdefault(h, []).append(constraint)

    def _bind(self, hole: IncompleteType, t: Type) -> None:
        if self._occurs(hole, t):
            raise Mismatch(f"a type cannot contain itself: {format_type(self.resolve(t))}")
        self.parent[hole] = t
        woken = self.waiters.pop(hole, None)
        if woken:
            self.queue.extend(woken)

    def _occurs(self, hole: IncompleteType, t: Type) -> bool:
        if type(t) is TensorType:
            return False
        return hole in self.holes(t)

    # -- unification ------------------------------------------------------------------------
    def unify(self, a: Type, b: Type) -> Type:
        """The unified type of ``a`` and ``b``; raises Mismatch naming what differs."""
        a, b = self.find(a), self.find(b)
        if a is b:
            return a
        if type(a) is IncompleteType:
            self._bind(a, b)
            return b
        if type(b) is IncompleteType:
            self._bind(b, a)
            return a
        if type(a) is TensorType and type(b) is TensorType:
            return self._unify_tensor(a, b)
        a, b = _adt_call(a), _adt_call(b)
        if type(a) is not type(b):
            raise Mismatch(f"{format_type(self.resolve(a))} is not {format_type(self.resolve(b))}")
        if isinstance(a, TupleType):
            if len(a.fields) != len(b.fields):
                raise Mismatch(f"tuples of {len(a.fields)} and {len(b.fields)} fields")
            return TupleType([self._sub(x, y, f"field {i}")
                              for i, (x, y) in enumerate(zip(a.fields, b.fields, strict=True))])
        if isinstance(a, FuncType):
            return self._unify_func(a, b)
        if isinstance(a, TypeCall):
            if a.func is not b.func or len(a.args) != len(b.args):
                raise Mismatch(f"{format_type(self.resolve(a))} is not {format_type(self.resolve(b))}")
            return TypeCall(a.func, [self._sub(x, y, f"type argument {i}")
                                     for i, (x, y) in enumerate(zip(a.args, b.args, strict=True))])
        if isinstance(a, RefType):
            return RefType(self._sub(a.value, b.value, "reference"))
        if a is b:
            return a
        raise Mismatch(f"{format_type(self.resolve(a))} is not {format_type(self.resolve(b))}")

    def _sub(self, a: Type, b: Type, where: str) -> Type:
        try:
            return self.unify(a, b)
        except Mismatch as exc:
            raise Mismatch(f"{where}: {exc}") from None

    def _unify_func(self, a: FuncType, b: FuncType) -> FuncType:
        if len(a.arg_types) != len(b.arg_types):
            raise Mismatch(f"functions of {len(a.arg_types)} and {len(b.arg_types)} parameters")
        if len(a.type_params) != len(b.type_params):
            raise Mismatch("functions with different numbers of type parameters")
        rename = {q: p for p, q in zip(a.type_params, b.type_params, strict=True) if p is not q}
        args = [self._sub(x, subst_type(y, rename), f"parameter {i}")
                for i, (x, y) in enumerate(zip(a.arg_types, b.arg_types, strict=True))]
        ret = self._sub(a.ret_type, subst_type(b.ret_type, rename), "return type")
        return FuncType(args, ret, a.type_params, a.type_constraints)

    def _unify_tensor(self, a: TensorType, b: TensorType) -> TensorType:
        if a.dtype != b.dtype:
            raise Mismatch(f"dtype {a.dtype} vs {b.dtype}")
        if len(a.shape) != len(b.shape):
            raise Mismatch(f"rank {len(a.shape)} vs {len(b.shape)}")
        dims = []
        changed = False
        for i, (x, y) in enumerate(zip(a.shape, b.shape, strict=True)):
            if x is y or (type(x) is int and x == y):
                dims.append(x)
                continue
            try:
                d = self.unify_dim(x, y)
            except Mismatch as exc:
                raise Mismatch(f"dimension {i}: {exc}") from None
            changed = changed or d is not x
            dims.append(d)
        return TensorType(dims, a.dtype) if changed else a

    def unify_dim(self, x, y):
        """The unified dimension; binds a bare symbol to the other side when needed."""
        if x is Any:
            return y
        if y is Any:
            return x
        if type(x) is int and type(y) is int:
            if x != y:
                raise Mismatch(f"{x} vs {y}")
            return x
        x, y = substitute_dim(x, self.dim_subst), substitute_dim(y, self.dim_subst)
        same = dims_equal(x, y)
        if same:
            return x
        for s, other in ((x, y), (y, x)):
            if isinstance(s, sympy.Symbol) and not (isinstance(other, sympy.Basic)
                                                    and s in other.free_symbols):
                self._bind_symbol(s, other)
                return other
        if same is None:
            solved = self._solve_dim(x, y)
            if solved is not None:
                return solved
        raise Mismatch(f"{x} vs {y}")

    def _bind_symbol(self, s, value) -> None:
        self.dim_subst = {k: substitute_dim(v, {s: value}) for k, v in self.dim_subst.items()}
        self.dim_subst[s] = value

    def _solve_dim(self, x, y):
        """Bind the one free symbol of ``x == y`` when it has a single integer solution."""
        free = set()
        for d in (x, y):
            if isinstance(d, sympy.Basic):
                free |= d.free_symbols
        if len(free) != 1:
            return None
        (s,) = free
        try:
            sols = sympy.solve(sympy.Eq(sympy.sympify(x), sympy.sympify(y)), s)
        except (NotImplementedError, TypeError, ValueError):
            return None
        if len(sols) != 1 or not getattr(sols[0], "is_Integer", False) or sols[0] < 0:
            return None
        self._bind_symbol(s, int(sols[0]))
        return simplify_dim(substitute_dim(x, self.dim_subst))
