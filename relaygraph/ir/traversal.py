"""Iterative, DAG-aware traversals: nothing here recurses on the depth of a program.

Every walk visits a shared node once. Nodes expose ``children()`` and ``with_children()``, so
the walks are written once for every node kind (expressions, match clauses and patterns).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

from .adt import Clause, PatternVar, pattern_vars
from .expr import Expr, Function, Let, Op, Var
from .node import Node
from .types import FuncType, Type, TypeVar

__all__ = [
    "post_order", "iter_post_order", "ExprVisitor", "ExprMutator", "free_vars", "bound_vars",
    "all_vars", "free_type_vars", "substitute", "node_count", "type_children", "iter_types",
]


def iter_post_order(root: Node, skip: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """Yield every node reachable from ``root`` once, children before parents.

    ``skip(node)`` true means the node is yielded but its children are not entered.
    """
    seen: set = set()
    stack: list = [(root, False)]
    push, pop = stack.append, stack.pop
    while stack:
        node, expanded = pop()
        if expanded:
            yield node
            continue
        if node in seen:
            continue
        seen.add(node)
        push((node, True))
        if skip is not None and skip(node):
            continue
        kids = node.children()
        for i in range(len(kids) - 1, -1, -1):
            child = kids[i]
            if child not in seen:
                push((child, False))


def post_order(root: Node, skip: Callable[[Node], bool] | None = None) -> list[Node]:
    """The nodes reachable from ``root`` as a list, children before parents."""
    return list(iter_post_order(root, skip))


def node_count(root: Node) -> int:
    """Number of distinct expression nodes, shared ones once (Op handles are not counted)."""
    return sum(1 for n in iter_post_order(root) if isinstance(n, Expr) and not isinstance(n, Op))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_METHOD_NAMES: dict[tuple[str, type], str] = {}


def _method_name(prefix: str, cls: type) -> str:
    key = (prefix, cls)
    name = _METHOD_NAMES.get(key)
    if name is None:
        name = _METHOD_NAMES[key] = f"{prefix}_{_snake(cls.__name__)}"
    return name


class ExprVisitor:
    """Visits each node once in post-order, dispatching to ``visit_<kind>(node)`` if defined
    (``visit_call``, ``visit_var``, ``visit_function``, ``visit_clause``, ...)."""

    def visit(self, root: Node) -> None:
        """Walk everything reachable from ``root``."""
        cache: dict[type, Callable | None] = {}
        for node in iter_post_order(root, self.skip):
            cls = type(node)
            try:
                method = cache[cls]
            except KeyError:
                method = cache[cls] = getattr(self, _method_name("visit", cls), None)
            if method is not None:
                method(node)

    def skip(self, node: Node) -> bool:
        """Return True to leave a node's children unvisited (e.g. Primitive functions)."""
        return False


class ExprMutator:
    """Rebuilds a program bottom-up, each shared node once.

    For every node, children are mutated first; ``rewrite_<kind>(pre, post)`` then receives the
    original node and the node rebuilt over mutated children and returns the replacement
    (default: ``post``). ``pre_rewrite(node)`` may return a replacement before the children are
    visited, which stops the descent there. The memo is kept across ``visit`` calls, so
    visiting several roots shares work.
    """

    def __init__(self) -> None:
        self.memo: dict[Node, Node] = {}

    def visit(self, root: Node) -> Node:
        """The mutated version of ``root``."""
        memo = self.memo
        if root in memo:
            return memo[root]
        cache: dict[type, Callable | None] = {}
        stack: list = [(root, False)]
        push, pop = stack.append, stack.pop
        while stack:
            node, expanded = pop()
            if expanded:
                post = node.with_children(tuple(memo[c] for c in node.children()))
                cls = type(node)
                try:
                    method = cache[cls]
                except KeyError:
                    method = cache[cls] = getattr(self, _method_name("rewrite", cls), None)
                memo[node] = method(node, post) if method is not None else self.rewrite(node, post)
                continue
            if node in memo:
                continue
            early = self.pre_rewrite(node)
            if early is not None:
                memo[node] = early
                continue
            push((node, True))
            kids = node.children()
            for i in range(len(kids) - 1, -1, -1):
                if kids[i] not in memo:
                    push((kids[i], False))
        return memo[root]

    def pre_rewrite(self, node: Node) -> Node | None:
        """A replacement decided before visiting children, or None to descend."""
        return None

    def rewrite(self, pre: Node, post: Node) -> Node:
        """Fallback when no ``rewrite_<kind>`` exists: keep the rebuilt node."""
        return post


def _binders(node: Node) -> tuple:
    """Variables bound by ``node`` (for its whole subtree)."""
    if isinstance(node, Function):
        return node.params
    if isinstance(node, Let):
        return (node.var,)
    if isinstance(node, Clause):
        return tuple(pattern_vars(node.lhs))
    return ()


def bound_vars(root: Node) -> list[Var]:
    """Variables bound in ``root`` (function params, lets, pattern vars), in order of appearance."""
    out: list[Var] = []
    seen: set = set()
    for node in iter_post_order(root):
        if isinstance(node, (Function, Let)):
            vs = _binders(node)
        elif isinstance(node, PatternVar):
            vs = (node.var,)
        else:
            continue
        for v in vs:
            if v not in seen:
                seen.add(v)
                out.append(v)
    return _in_appearance_order(root, out)


def all_vars(root: Node) -> list[Var]:
    """Every variable in ``root``, bound or free, in order of appearance."""
    return [n for n in iter_post_order(root) if isinstance(n, Var)]


def free_vars(root: Node) -> list[Var]:
    """Variables used in ``root`` and not bound inside it, in order of appearance."""
    bound = set(bound_vars(root))
    return [v for v in all_vars(root) if v not in bound]


def _in_appearance_order(root: Node, vs: list[Var]) -> list[Var]:
    wanted = set(vs)
    return [n for n in iter_post_order(root) if n in wanted]


def type_children(t: Type) -> tuple:
    """The sub-types of a type (binders of FuncType excluded)."""
    return t.children()


def iter_types(root: Node) -> Iterator[tuple[Node, Type]]:
    """Every type annotation in an expression: (owner node, type)."""
    for node in iter_post_order(root):
        if isinstance(node, Var) and node.type_annotation is not None:
            yield node, node.type_annotation
        elif isinstance(node, Function):
            if node.ret_type is not None:
                yield node, node.ret_type
        elif hasattr(node, "type_args"):
            for t in node.type_args:
                yield node, t


def _free_type_vars_of_type(t: Type, out: list, seen: set) -> None:
    stack: list = [(t, frozenset())]
    while stack:
        cur, bound = stack.pop()
        if isinstance(cur, TypeVar):
            if cur not in bound and cur not in seen:
                seen.add(cur)
                out.append(cur)
            continue
        if isinstance(cur, FuncType) and cur.type_params:
            bound = bound | set(cur.type_params)
        for child in reversed(type_children(cur)):
            stack.append((child, bound))


def free_type_vars(root: Node | Type) -> list[TypeVar]:
    """Type variables used in annotations and not bound by an enclosing type parameter list."""
    out: list[TypeVar] = []
    seen: set = set()
    if isinstance(root, Type):
        _free_type_vars_of_type(root, out, seen)
        return out
    bound: set = set()
    for node in iter_post_order(root):
        if isinstance(node, Function):
            bound.update(node.type_params)
    for _, t in iter_types(root):
        _free_type_vars_of_type(t, out, seen)
    return [v for v in out if v not in bound]


def substitute(root: Node, mapping: Mapping[Var, Expr]) -> Node:
    """Replace free occurrences of variables, respecting scope.

    An occurrence under a binder of the same variable is left alone, and a binder that would
    capture a free variable of a substituted value is renamed to a fresh Var.
    """
    if not mapping:
        return root
    value_fvs: set | None = None
    # One memo per context; contexts change only at binders that touch the mapping.
    memos: dict[int, dict] = {}
    contexts: dict[int, dict] = {}
    base = dict(mapping)
    contexts[id(base)] = base
    stack: list = [(root, base, False, base)]
    while stack:
        node, ctx, expanded, child_ctx = stack.pop()
        memo = memos.setdefault(id(ctx), {})
        if expanded:
            child_memo = memos[id(child_ctx)]
            memo[node] = node.with_children(tuple(child_memo[c] for c in node.children()))
            continue
        if node in memo:
            continue
        if isinstance(node, Var):
            memo[node] = ctx.get(node, node)
            continue
        binders = _binders(node)
        child_ctx = ctx
        if binders:
            if value_fvs is None:
                value_fvs = set()
                for v in mapping.values():
                    value_fvs.update(free_vars(v))
            shadowed = [b for b in binders if b in ctx]
            captured = [b for b in binders if b in value_fvs]
            if shadowed or captured:
                child_ctx = {k: v for k, v in ctx.items() if k not in shadowed}
                for b in captured:
                    child_ctx[b] = Var(b.name_hint, b.type_annotation)
                contexts[id(child_ctx)] = child_ctx
        child_memo = memos.setdefault(id(child_ctx), {})
        stack.append((node, ctx, True, child_ctx))
        for c in reversed(node.children()):
            if c not in child_memo:
                stack.append((c, child_ctx, False, child_ctx))
    return memos[id(base)][root]
