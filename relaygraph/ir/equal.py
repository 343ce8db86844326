"""Alpha-equality and a structural hash consistent with it; both iterative and DAG-aware."""

from __future__ import annotations

import zlib
from typing import Any

from .adt import Clause, Constructor, Match, PatternConstructor, PatternTuple, PatternVar, TypeData
from .attrs import Attrs
from .expr import Call, Constant, Function, GlobalVar, Let, RefCreate, RefRead, RefWrite, Var
from .module import IRModule
from .node import Node
from .traversal import iter_post_order, type_children
from .types import FuncType, GlobalTypeVar, IncompleteType, TensorType, Type, TypeVar

__all__ = ["alpha_equal", "structural_hash"]

_NOMINAL_BY_NAME = (GlobalVar, GlobalTypeVar)
# Nominal effects compare by structure, and one-to-one: a shared cell matches a shared cell.
_EFFECTS = (RefCreate, RefRead, RefWrite)


class _Equal:
    """One comparison: a worklist of node pairs and bijections between bound variables."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.lmap: dict[Node, Node] = {}
        self.rmap: dict[Node, Node] = {}
        self.done: set[tuple[int, int]] = set()
        self.work: list[tuple[Any, Any]] = []
        self.keep: list = []  # keeps compared pairs alive so their ids stay unique
        self.renamed = False  # True once some variable is matched with a different one

    def bind(self, a: Node, b: Node) -> bool:
        if a in self.lmap or b in self.rmap:
            return self.lmap.get(a) is b and self.rmap.get(b) is a
        self.lmap[a] = b
        self.rmap[b] = a
        self.renamed = self.renamed or a is not b
        if isinstance(a, Var):
            return self.push_opt(a.type_annotation, b.type_annotation)
        return True

    def push(self, a: Any, b: Any) -> bool:
        self.work.append((a, b))
        return True

    def push_opt(self, a: Any, b: Any) -> bool:
        if a is None or b is None:
            return a is b
        return self.push(a, b)

    def push_all(self, xs, ys) -> bool:
        if len(xs) != len(ys):
            return False
        self.work.extend(zip(reversed(xs), reversed(ys), strict=True))
        return True

    def run(self, a: Any, b: Any) -> bool:
        self.work.append((a, b))
        while self.work:
            x, y = self.work.pop()
            # An identical subtree is equal unless a variable in it was matched to another one.
            if x is y and not self.renamed and not isinstance(x, (Var, TypeVar, IncompleteType,
                                                                  *_EFFECTS)):
                continue
            key = (id(x), id(y))
            if key in self.done:
                continue
            self.done.add(key)
            self.keep.append((x, y))
            if not self.step(x, y):
                return False
        return True

    def step(self, x: Any, y: Any) -> bool:
        if type(x) is not type(y):
            return False
        if isinstance(x, (Var, TypeVar, IncompleteType)):
            if x in self.lmap or y in self.rmap:
                return self.lmap.get(x) is y
            if x is y:
                return True
            return self.map_free_vars and self.bind(x, y)
        if isinstance(x, _NOMINAL_BY_NAME):
            return x.name_hint == y.name_hint
        if isinstance(x, _EFFECTS):
            if x in self.lmap or y in self.rmap:
                return self.lmap.get(x) is y and self.rmap.get(y) is x
            self.lmap[x], self.rmap[y] = y, x
            return self.push_all(x.children(), y.children())
        if isinstance(x, Constructor):
            return (x.name_hint == y.name_hint and x.belong_to.name_hint == y.belong_to.name_hint
                    and len(x.inputs) == len(y.inputs))
        if isinstance(x, (Constant, Attrs, TensorType)):
            return x is y  # interned by value
        if isinstance(x, Function):
            return (x.attrs is y.attrs and self.bind_all(x.type_params, y.type_params)
                    and self.bind_all(x.params, y.params)
                    and self.push_opt(x.ret_type, y.ret_type) and self.push(x.body, y.body))
        if isinstance(x, Let):
            return self.bind(x.var, y.var) and self.push_all((x.value, x.body), (y.value, y.body))
        if isinstance(x, Clause):
            return self.bind_pattern(x.lhs, y.lhs) and self.push(x.rhs, y.rhs)
        if isinstance(x, Call):
            return (x.attrs is y.attrs and self.push_all(x.type_args, y.type_args)
                    and self.push_all(x.children(), y.children()))
        if isinstance(x, Match) and x.complete != y.complete:
            return False
        if isinstance(x, FuncType):
            return (self.bind_all(x.type_params, y.type_params)
                    and self.push_all(type_children(x), type_children(y)))
        if isinstance(x, TypeData):
            return (self.push(x.header, y.header) and self.bind_all(x.type_vars, y.type_vars)
                    and self.push_all(x.constructors, y.constructors)
                    and all(self.push_all(c.inputs, d.inputs)
                            for c, d in zip(x.constructors, y.constructors, strict=True)))
        if isinstance(x, Node):
            return self._same_scalars(x, y) and self.push_all(x.children(), y.children())
        return x == y

    @staticmethod
    def _same_scalars(x: Node, y: Node) -> bool:
        # Fields that are not nodes (an index, a flag, a relation name) must match exactly.
        for a, b in zip(x.field_values(), y.field_values(), strict=True):
            if isinstance(a, (int, str, bool, float)) and a != b:
                return False
            if isinstance(a, Attrs) and a is not b:
                return False
        return True

    def bind_all(self, xs, ys) -> bool:
        return len(xs) == len(ys) and all(self.bind(a, b) for a, b in zip(xs, ys, strict=True))

    def bind_pattern(self, p: Node, q: Node) -> bool:
        stack = [(p, q)]
        while stack:
            a, b = stack.pop()
            if type(a) is not type(b):
                return False
            if isinstance(a, PatternVar):
                if not self.bind(a.var, b.var):
                    return False
            elif isinstance(a, PatternConstructor):
                if not self.step(a.constructor, b.constructor) or len(a.patterns) != len(b.patterns):
                    return False
                stack.extend(zip(a.patterns, b.patterns, strict=True))
            elif isinstance(a, PatternTuple):
                if len(a.patterns) != len(b.patterns):
                    return False
                stack.extend(zip(a.patterns, b.patterns, strict=True))
        return True

    def modules(self, a: IRModule, b: IRModule) -> bool:
        if sorted(a._by_name) != sorted(b._by_name):
            return False
        if sorted(a._types_by_name) != sorted(b._types_by_name):
            return False
        for name, gtv in a._types_by_name.items():
            if not self.run(a.type_definitions[gtv], b.get_type(name)):
                return False
        return all(self.run(fn, b[gv.name_hint]) for gv, fn in a.functions.items())


def alpha_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Structural equality up to renaming of bound variables.

    Works on expressions, types, patterns and IRModules. Globals, ADT names and constructors
    compare by name. Free variables must be the same objects unless ``map_free_vars`` is True,
    in which case they may be matched one to one (as when comparing a program with its reparse).
    """
    if isinstance(a, IRModule) or isinstance(b, IRModule):
        if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
            return False
        return _Equal(map_free_vars).modules(a, b)
    return _Equal(map_free_vars).run(a, b)


# ------------------------------------------------------------------------------------------
# Structural hash: equal under alpha_equal (with or without map_free_vars) => equal hash.
# Variables hash by the order in which they first appear, never by identity, and everything
# else by stable integers (no per-process string hash randomisation).

_STR_CACHE: dict[str, int] = {}


def _stable_str(s: str) -> int:
    h = _STR_CACHE.get(s)
    if h is None:
        h = _STR_CACHE[s] = zlib.crc32(s.encode()) | (len(s) << 32)
    return h


def _stable_value(v: Any, hash_node) -> int:
    if isinstance(v, str):
        return _stable_str(v)
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(bytes(v[:16]).ljust(16, b"\0"), "little")
    if isinstance(v, tuple):
        return hash(tuple(_stable_value(x, hash_node) for x in v))
    if isinstance(v, Node):
        return hash_node(v)
    if v is None:
        return 0x5EED
    if hasattr(v, "free_symbols"):  # a symbolic dimension
        return _stable_str(str(v))
    if hasattr(v, "value") and hasattr(v, "name"):  # an enum such as Kind
        return _stable_str(v.name)
    return hash(v)  # bool, int, float hash deterministically


def structural_hash(root: Any) -> int:
    """A hash of ``root`` that agrees with ``alpha_equal`` and is stable across processes."""
    if isinstance(root, IRModule):
        parts = [structural_hash(fn) ^ _stable_str(gv.name_hint) for gv, fn in root]
        return hash(tuple(parts))
    var_index: dict[Node, int] = {}
    memo: dict[Node, int] = {}

    def hash_node(n: Node) -> int:
        if n in memo:
            return memo[n]
        for m in iter_post_order(n, skip=lambda _: False):
            if m not in memo:
                memo[m] = _hash_one(m, memo, var_index, hash_node)
        return memo[n]

    return hash_node(root)


def _hash_one(n: Node, memo: dict, var_index: dict, hash_node) -> int:
    tag = _stable_str(type(n).__name__)
    if isinstance(n, (Var, TypeVar, IncompleteType)):
        idx = var_index.setdefault(n, len(var_index))
        ann = getattr(n, "type_annotation", None)
        return hash((tag, idx, hash_node(ann) if ann is not None else 0))
    if isinstance(n, _NOMINAL_BY_NAME):
        return hash((tag, _stable_str(n.name_hint)))
    if isinstance(n, Constructor):
        return hash((tag, _stable_str(n.name_hint), _stable_str(n.belong_to.name_hint)))
    if isinstance(n, Type) and type_children(n):
        parts = [hash_node(c) for c in type_children(n)]
        if isinstance(n, FuncType):
            parts.extend(hash_node(p) for p in n.type_params)
        return hash((tag, *parts))
    parts = []
    for field in n.field_values():
        parts.append(_stable_value(field, hash_node))
    return hash((tag, *parts))
