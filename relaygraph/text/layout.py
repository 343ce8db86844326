"""Where each node goes when a program is printed: inline or bound, and in which scope.

One iterative walk over the DAG finds each node's users (in a post-order that is a topological
order), the free variables and the nodes that touch references. The layout then decides, users
first, whether a node prints inline (an atom, or a scope's result or a let's value used once) or
is bound as ``%N = ...;``, and places each bound node in the innermost scope holding all its
uses: the lowest common ancestor of the use sites in the tree of scopes (function bodies, if
branches, match arms and parenthesized lets).
"""

from __future__ import annotations

from ..ir.adt import Clause, Constructor, Match, pattern_vars
from ..ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..ir.purity import Purity  # the one purity analysis

__all__ = ["Layout", "Scope", "is_atom", "operands", "walk_dag", "SCOPED"]

_ATOMS = (Var, GlobalVar, Op, Constant, Constructor)


class Scope:
    """A block of lines: a function body, an if branch, a match arm, a parenthesized let."""

    __slots__ = ("parent", "depth", "lines")

    def __init__(self, parent: Scope | None) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.lines: list[str] = []


def _common(a: Scope, b: Scope) -> Scope:
    while a.depth > b.depth:
        a = a.parent
    while b.depth > a.depth:
        b = b.parent
    while a is not b:
        a, b = a.parent, b.parent
    return a


def is_atom(node) -> bool:
    """Whether a node always prints inline (variables, globals, ops, constants, constructors)."""
    cls = type(node)
    if cls in _ATOMS:
        return True
    # A zero-arity constructor applied to nothing prints as its bare name.
    return cls is Call and not node.args and type(node.op) is Constructor and not node.op.inputs


class Layout:
    """Where each node of one printed root goes: inline or bound, and in which scope."""

    def __init__(self, root: Expr, root_scope: Scope, walk: tuple | None = None,
                 effectful_calls: bool | None = None) -> None:
        order, parent, self.free, refs = walk if walk is not None else walk_dag(root)
        if effectful_calls is None:
            effectful_calls = refs
        self.bound: set = set()
        # Interning makes equal calls one node, but each use of a call with effects calls
        # anew, so such flat nodes print once per use rather than once per node.
        effects = _effects(order, effectful_calls)
        self.fresh: set = effects
        self.home: dict = {root: root_scope}
        self.scopes: dict = {}  # node -> the scope(s) it opens
        self.paren: set = set()  # lets printed in parentheses
        self.wrapped: set = set()  # matches that need parentheses to read back in TVM
        self._index: tuple | None = None  # scope -> its child scopes, and the nodes placed in it
        home = self.home
        for node in reversed(order):  # every user of a node comes before it
            cls = type(node)
            here = home[node]
            up = parent.get(node)  # the only user, or _MANY
            if cls is Call or cls is TupleGetItem or cls is Tuple:  # the common, flat case
                if node is not root and (up is _MANY or not _inline_slot(up, node)) and (
                        node not in self.fresh):
                    self.bound.add(node)
                for child in node.children():
                    if child in parent:
                        h = home.get(child)
                        if h is None:
                            home[child] = here
                        elif h is not here:
                            home[child] = _common(h, here)
                continue
            as_value = type(up) is Let and up.value is node
            inline = node is root or cls is Clause or node in self.fresh or (
                up is not _MANY and _inline_slot(up, node))
            if not inline:
                self.bound.add(node)
            if cls is Function:
                inner = self.scopes[node] = Scope(here)
                self._use(node.body, inner)
            elif cls is If:
                t, f = Scope(here), Scope(here)
                self.scopes[node] = (t, f)
                self._use(node.cond, here)
                self._use(node.true_branch, t)
                self._use(node.false_branch, f)
            elif cls is Clause:
                inner = self.scopes[node] = Scope(here)
                self._use(node.rhs, inner)
            elif cls is Let:
                # A let that is bound, or is another let's value, prints in parentheses with
                # a scope of its own; elsewhere lets print flat in the enclosing scope.
                if not inline or as_value:
                    self.paren.add(node)
                    here = self.scopes[node] = Scope(here)
                self._use(node.value, here)
                self._use(node.body, here)
            else:
                if cls is Match and (not inline or as_value):
                    self.wrapped.add(node)
                for child in node.children():
                    self._use(child, here)

    def within(self, scope: Scope) -> tuple[list, list]:
        """The scopes nested in ``scope`` (itself included) and the nodes placed in them."""
        if self._index is None:
            kids: dict = {}
            placed: dict = {}
            for node, where in self.home.items():
                placed.setdefault(where, []).append(node)
            for opened in self.scopes.values():
                for s in opened if type(opened) is tuple else (opened,):
                    kids.setdefault(s.parent, []).append(s)
            self._index = kids, placed
        kids, placed = self._index
        scopes, nodes = [], []
        stack = [scope]
        while stack:
            s = stack.pop()
            scopes.append(s)
            nodes.extend(placed.get(s, ()))
            stack.extend(kids.get(s, ()))
        return scopes, nodes

    def _use(self, child, scope: Scope) -> None:
        if is_atom(child) or not isinstance(child, (Expr, Clause)):
            return
        home = self.home.get(child)
        self.home[child] = scope if home is None else _common(home, scope)


def walk_dag(root: Expr) -> tuple:
    """Post-order of the non-atomic nodes, each one's only user (or _MANY), the free variables
    and whether any node reads, writes or makes a reference cell."""
    order: list = []
    parent: dict = {}
    bound_vars: set = set()
    used_vars: dict = {}
    refs = False
    expanded: set = set()
    stack: list = [root]
    push, pop = stack.append, stack.pop
    done = _DONE
    while stack:
        node = pop()
        if node is done:
            order.append(pop())
            continue
        # Marked when expanded, not when pushed: a node pushed by one parent and reached again
        # through another must still come after both of them in the post-order.
        if node in expanded:
            continue
        expanded.add(node)
        push(node)
        push(done)
        cls = type(node)
        if cls is Function:
            bound_vars.update(node.params)
            kids = (node.body,)
        elif cls is Let:
            bound_vars.add(node.var)
            kids = (node.value, node.body)
        elif cls is Clause:
            bound_vars.update(pattern_vars(node.lhs))
            kids = (node.rhs,)
        else:
            refs = refs or cls in _REFS
            kids = node.children()
        for i in range(len(kids) - 1, -1, -1):
            child = kids[i]
            if type(child) in _ATOMS or is_atom(child):
                if type(child) is Var:
                    used_vars[child] = None
                continue
            # One dict, rather than counts and parents, keeps the walk's memory small.
            parent[child] = _MANY if child in parent else node
            if child not in expanded:
                push(child)
    free = [v for v in reversed(used_vars) if v not in bound_vars]
    return order, parent, free, refs


def _effects(order: list, calls: bool) -> set:
    """With ``calls``, the nodes that call something that may have effects: interning made
    equal calls one node, so each use is its own call. Ref nodes are nominal: a shared one is
    one cell (one read, one write) and prints once, even when its operand calls something."""
    if not calls:
        return set()
    purity = Purity()
    return {node for node in order
            if type(node) in _FLAT and type(node) not in _REFS and purity.per_use(node)}


def _inline_slot(parent, child) -> bool:
    """Whether ``child`` sits where TVM may inline it (a scope's result or a let's value)."""
    cls = type(parent)
    if cls is Let:
        return True
    if cls is Function:
        return parent.body is child
    if cls is If:
        return parent.cond is not child
    return cls is Clause


SCOPED = (Function, If, Match, Let)
_DONE = object()  # marks, on the walk's stack, a node whose children are done
_MANY = object()  # the user of a node used more than once
_FLAT = (Call, Tuple, TupleGetItem, RefCreate, RefRead, RefWrite)
_REFS = (RefCreate, RefRead, RefWrite)


def operands(node) -> tuple:
    """The children of a node that print in its own scope (not inside a scope it opens)."""
    cls = type(node)
    if cls is Call:
        return (node.op, *node.args)
    if cls is If:
        return (node.cond,)
    if cls is Match:
        return (node.data,)
    if cls in (Function, Let):
        return ()
    return node.children()
