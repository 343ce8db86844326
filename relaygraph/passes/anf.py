"""ToANormalForm and ToBasicBlockNormalForm (TVM's algorithm, without recursion).

Scopes: a function body, each if branch, each match clause and each let open a sub-scope. An
expression belongs to the lowest common ancestor of the scopes of all its uses, so a shared
expression is bound once where every use can see it, and nothing is bound in a branch that does
not use it. ANF let-binds every non-atomic expression (constants included, as TVM does) in its
scope; basic-block form binds only the expressions used from more than one scope.
"""

from __future__ import annotations

from ..errors import RelayError
from ..ir.adt import Clause, Constructor, Match
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
from ..ir.purity import Purity
from .infra import PassContext, module_pass

__all__ = ["to_a_normal_form", "to_basic_block_normal_form", "ToANormalForm",
           "ToBasicBlockNormalForm"]

_ATOMS = (Var, GlobalVar, Op, Constructor)
SCOPED = (Let, If, Match)


class _Scope:
    __slots__ = ("parent", "depth", "bindings")

    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.bindings: list[tuple[Var, Expr]] = []

    def push(self, var: Var, value: Expr) -> Var:
        self.bindings.append((var, value))
        return var

    def wrap(self, body: Expr) -> Expr:
        """``let v1 = e1; ...; body`` over this scope's bindings."""
        for var, value in reversed(self.bindings):
            body = Let(var, value, body)
        return body


def _lca(a: _Scope, b: _Scope) -> _Scope:
    while a is not b:
        if a.depth > b.depth:
            a = a.parent
        elif b.depth > a.depth:
            b = b.parent
        else:
            a, b = a.parent, b.parent
    return a


def _is_primitive(f: Function) -> bool:
    return bool(f.attrs.get("Primitive"))


def _edges(node: Expr, purity: Purity) -> list[tuple[Expr, int | None]]:
    """Children in TVM's visiting order, each with its sub-scope key (None: the node's own scope).

    A callee with effects comes before the arguments, in the order evaluation runs them.
    """
    if isinstance(node, Call):
        if not purity.is_pure(node.op):
            return [(node.op, None)] + [(a, None) for a in node.args]
        return [(a, None) for a in node.args] + [(node.op, None)]
    if isinstance(node, Let):
        return [(node.var, 0), (node.value, 0), (node.body, 0)]
    if isinstance(node, If):
        return [(node.cond, None), (node.true_branch, 1), (node.false_branch, 2)]
    if isinstance(node, Function):
        return [] if _is_primitive(node) else [(node.body, 0)]
    if isinstance(node, Match):
        return [(node.data, None)] + [(c.rhs, i + 1) for i, c in enumerate(node.clauses)]
    return [(c, None) for c in node.children()]


def _post_order(root: Expr, purity: Purity) -> list[Expr]:
    # A node is marked when it is expanded, not when it is pushed: a node pushed by one parent
    # may be reached first through a sibling, and must then finish before that sibling.
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for child, _ in reversed(_edges(node, purity)):
            if child not in seen:
                stack.append((child, False))
    return order


def _scopes(root: Expr, purity: Purity):
    """Scope of every node, sub-scopes of scope-opening nodes, and the nodes used across scopes.

    A node that calls something with effects is evaluated at each use, so its children are
    used from the scope of every one of its uses, not only from the common one.
    """
    scope: dict[Expr, _Scope] = {root: _Scope(None)}
    uses: dict[Expr, set] = {}  # per-use nodes: the scopes they are used from
    sub: dict[tuple[Expr, int], _Scope] = {}
    lifted: set[Expr] = set()
    first_edge: dict[Expr, _Scope] = {}
    for node in reversed(_post_order(root, purity)):  # parents before children
        owns = uses.get(node) or (scope[node],)
        for child, key in _edges(node, purity):
            for own in owns:
                if key is None:
                    edge = own
                else:
                    edge = sub.get((node, key))
                    if edge is None:
                        edge = sub[(node, key)] = _Scope(own)
                if purity.per_use(child):
                    uses.setdefault(child, set()).add(edge)
                seen = first_edge.get(child)
                if seen is None:
                    first_edge[child] = edge
                    scope[child] = edge
                else:
                    if edge is not seen and not isinstance(child, Op):
                        lifted.add(child)
                    scope[child] = _lca(scope[child], edge)
    return scope, sub, lifted


def _where(node: Expr) -> str:
    from ..text import astext

    lines = [ln for ln in astext(node).splitlines() if not ln.startswith(("#[", "free_var"))]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= 80 else text[:77] + "..."


class _Results:
    """The rebuilt children of one node: a per-use child gives each of its uses its own."""

    __slots__ = ("memo", "mine")

    def __init__(self, fill, node: Expr) -> None:
        self.memo = fill.memo
        self.mine: dict = {}
        counts: dict = {}
        for child, _ in _edges(node, fill.purity)[1 if isinstance(node, Let) else 0:]:
            if child in fill.uses:
                counts[child] = counts.get(child, 0) + 1
        for child, k in counts.items():
            built = fill.uses[child]
            self.mine[child] = built[len(built) - k:]
            del built[len(built) - k:]

    def __getitem__(self, child: Expr) -> Expr:
        mine = self.mine.get(child)
        return mine.pop(0) if mine else self.memo[child]


class _Fill:
    """Rebuilds an expression with its bindings placed in their scopes."""

    def __init__(self, root: Expr, include: set | None, purity: Purity | None, name: str) -> None:
        self.purity = purity = purity or Purity().learn(root)
        self.scope, self.sub, lifted = _scopes(root, purity)
        for node in lifted:  # used from several scopes: it cannot be bound once for all of them
            if not purity.is_pure(node) and not purity.per_use(node):
                raise RelayError(f"{name}: the effect `{_where(node)}` is shared by several "
                                 "scopes (branches or functions); binding it once would change "
                                 "when it runs. Bind it with a let where it should run.")
        self.include = lifted if include is not None else None
        self.memo: dict[Expr, Expr] = {}
        self.root = root
        self.name = name
        self.uses: dict[Expr, list] = {}  # per-use nodes: results of uses not yet taken


    def compound(self, orig: Expr, now: Expr, var: Var | None, scope: _Scope) -> Expr:
        if var is None and self.include is not None and orig not in self.include:
            return now
        target = var if var is not None else Var("x")
        while isinstance(now, Let):  # flatten "let v = (let x = ...; body)" into the scope
            scope.push(now.var, now.value)
            now = now.body
        return scope.push(target, now)

    def build(self, node: Expr, var: Var | None, at: _Scope) -> Expr:
        m, sub = _Results(self, node), self.sub
        if isinstance(node, Constant):
            return self.compound(node, node, var, at)
        if isinstance(node, Call):
            return self.compound(node, Call(m[node.op], tuple(m[a] for a in node.args), node.attrs,
                                            node.type_args), var, at)
        if isinstance(node, Let):
            return self.compound(node, sub[(node, 0)].wrap(m[node.body]), var, at)
        if isinstance(node, If):
            new = If(m[node.cond], sub[(node, 1)].wrap(m[node.true_branch]),
                     sub[(node, 2)].wrap(m[node.false_branch]))
            return self.compound(node, new, var, at)
        if isinstance(node, Function):
            new = node if _is_primitive(node) else Function(
                node.params, sub[(node, 0)].wrap(m[node.body]), node.ret_type, node.type_params,
                node.attrs)
            return new if node is self.root else self.compound(node, new, var, at)
        if isinstance(node, Match):
            clauses = [Clause(c.lhs, sub[(node, i + 1)].wrap(m[c.rhs]))
                       for i, c in enumerate(node.clauses)]
            return self.compound(node, Match(m[node.data], clauses, node.complete), var, at)
        if isinstance(node, Tuple):
            return self.compound(node, Tuple(tuple(m[f] for f in node.fields)), var, at)
        if isinstance(node, TupleGetItem):
            return self.compound(node, TupleGetItem(m[node.tuple_value], node.index), var, at)
        if isinstance(node, (RefCreate, RefRead, RefWrite)):
            return self.compound(node, node.with_children(tuple(m[c] for c in node.children())),
                                 var, at)
        raise NotImplementedError(f"ANF of {type(node).__name__}")

    def run(self) -> Expr:
        memo, scope, per_use = self.memo, self.scope, self.purity.per_use
        stack: list = [(self.root, None, False, scope[self.root])]
        while stack:
            node, var, done, at = stack.pop()
            if done:
                memo[node] = built = self.build(node, var, at)
                if per_use(node):  # each use has its own result, taken by its user
                    self.uses.setdefault(node, []).append(built)
                continue
            if node in memo:
                if not per_use(node):
                    if var is not None:  # a second name for an expression already bound
                        scope[node].push(var, memo[node])
                    continue
                if isinstance(node, SCOPED):  # its sub-scopes exist once, for one use
                    raise RelayError(f"{self.name}: `{_where(node)}` calls a function with "
                                     "effects and is used more than once; bind each use with "
                                     "a let")
            if isinstance(node, _ATOMS):
                memo[node] = scope[node].push(var, node) if var is not None else node
                continue
            if not per_use(node):
                at = scope[node]  # bound once, where all its uses see it
            stack.append((node, var, True, at))
            edges = _edges(node, self.purity)
            for i in range(len(edges) - 1, -1, -1):
                child, key = edges[i]
                if isinstance(node, Let) and i == 0:
                    continue  # the bound variable itself is not an expression to visit
                target = node.var if isinstance(node, Let) and i == 1 else None
                edge = at if key is None else self.sub[(node, key)]
                stack.append((child, target, False, edge))
        return scope[self.root].wrap(memo[self.root])


def to_a_normal_form(expr: Expr, purity: Purity | None = None) -> Expr:
    """ANF of an expression (a global function keeps its own binding)."""
    return _Fill(expr, None, purity, "ToANormalForm").run()


def to_basic_block_normal_form(expr: Expr, purity: Purity | None = None) -> Expr:
    """Basic-block normal form: bind only expressions shared by more than one scope."""
    return _Fill(expr, set(), purity, "ToBasicBlockNormalForm").run()


def _per_function(convert):
    def run(mod, ctx: PassContext):
        purity = Purity(mod)
        for gv, func in list(mod.functions.items()):
            if func.attrs.get("Compiler"):
                continue
            mod.functions[gv] = convert(func, purity)
        return mod

    return run


def ToANormalForm():  # noqa: N802 - Relay's pass name
    """Let-bind every non-atomic expression in the innermost scope covering its uses."""
    return module_pass(_per_function(to_a_normal_form), opt_level=1, name="ToANormalForm")


def ToBasicBlockNormalForm():  # noqa: N802 - Relay's pass name
    """Let-bind the expressions shared across scopes (if branches, clauses, functions)."""
    return module_pass(_per_function(to_basic_block_normal_form), opt_level=1,
                       name="ToBasicBlockNormalForm")
