"""Matching dataflow patterns against expressions, with TVM v0.13's rules (DFPatternMatcher).

The matcher recurses on the depth of the PATTERN only (patterns are small, written by hand);
everything that walks the program (the user index, the post-dominator tree, dominator paths)
is iterative, so a 100,000-node chain is fine.
"""

from __future__ import annotations

from ...errors import RelayError
from ...ir.equal import alpha_equal
from ...ir.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var
from ...ir.traversal import post_order
from ...ir.types import TensorType
from ...ops.registry import lookup
from .patterns import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DFPattern,
    DFPatternError,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    IfPattern,
    LetPattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
)

__all__ = ["ExprGraph", "DFPatternMatcher", "match"]


class ExprGraph:
    """TVM's IndexedGraph of an expression: post-order, users, and the post-dominator tree."""

    def __init__(self, root: Expr) -> None:
        self.root = root
        self.order = post_order(root)
        index = {n: i for i, n in enumerate(self.order)}
        self.index = index
        users: list[list[int]] = [[] for _ in self.order]
        for i, n in enumerate(self.order):
            for c in n.children():
                users[index[c]].append(i)
        self.user_index = users
        # immediate post-dominator: the least common ancestor of a node's users in the tree,
        # filled from the root down (reverse post-order) as TVM's IndexedGraph does
        n = len(self.order)
        parent = [-1] * n
        depth = [0] * n
        for i in range(n - 1, -1, -1):
            us = users[i]
            if not us:
                depth[i] = 1
                continue
            p = us[0]
            for u in us[1:]:
                p = _lca(p, u, parent, depth)
                if p < 0:
                    break
            parent[i] = p
            depth[i] = depth[p] + 1 if p >= 0 else 1
        self.parent, self.depth = parent, depth
        self._dom_children: list[list[int]] | None = None

    def users(self, node) -> list:
        """The nodes that use ``node`` (with repeats for repeated uses)."""
        return [self.order[u] for u in self.user_index[self.index[node]]]

    def inputs(self, node) -> tuple:
        """The nodes ``node`` uses (its children)."""
        return node.children()

    def dominates(self, a, b) -> bool:
        """Whether ``a`` is a proper ancestor of ``b`` in the post-dominator tree."""
        ia, ib = self.index.get(a), self.index.get(b)
        if ia is None or ib is None:
            return False
        da, parent, depth = self.depth[ia], self.parent, self.depth
        ib = parent[ib]
        while ib >= 0 and depth[ib] >= da:
            if ib == ia:
                return True
            ib = parent[ib]
        return False

    def dominated(self, node) -> list:
        """The nodes in ``node``'s post-dominator subtree (without it), nearest first."""
        if self._dom_children is None:
            kids: list[list[int]] = [[] for _ in self.order]
            for i, p in enumerate(self.parent):
                if p >= 0:
                    kids[p].append(i)
            self._dom_children = kids
        out, stack = [], [self.index[node]]
        while stack:
            for k in self._dom_children[stack.pop()]:
                out.append(self.order[k])
                stack.append(k)
        return out


def _lca(a: int, b: int, parent: list, depth: list) -> int:
    while a != b:
        if a < 0 or b < 0:
            return -1
        if depth[a] < depth[b]:
            b = parent[b]
        elif depth[a] > depth[b]:
            a = parent[a]
        else:
            a, b = parent[a], parent[b]
    return a


def _is_op_call(expr: Expr, name: str) -> bool:
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == name


def _pattern_op(p: DFPattern, name: str) -> bool:
    return (isinstance(p, CallPattern) and isinstance(p.op, ExprPattern)
            and isinstance(p.op.expr, Op) and p.op.expr.name == name)


def _attr_equal(want, have) -> bool:
    if isinstance(want, (list, tuple)) and isinstance(have, (list, tuple)):
        return len(want) == len(have) and all(_attr_equal(a, b) for a, b in zip(want, have, strict=True))
    try:
        return bool(want == have)
    except (TypeError, ValueError):
        return False


class DFPatternMatcher:
    """Matches patterns against expressions of one program (whose graph it builds on demand)."""

    def __init__(self, root: Expr | None = None, mod=None, graph: ExprGraph | None = None) -> None:
        self.root, self.mod = root, mod
        self._graph = graph
        self.memo: dict[DFPattern, list] = {}
        self.matched: list[DFPattern] = []
        self.memoize = True
        self._types = None

    @property
    def graph(self) -> ExprGraph:
        if self._graph is None:
            self._graph = ExprGraph(self.root)
        return self._graph

    def match(self, pattern: DFPattern, expr: Expr) -> bool:
        """Whether ``pattern`` matches at ``expr``; afterwards ``memo`` maps patterns to matches."""
        self.memo.clear()
        self.matched.clear()
        self.memoize = True
        return self.visit(pattern, expr)

    def _clear(self, watermark: int) -> None:
        for p in self.matched[watermark:]:
            self.memo.pop(p, None)
        del self.matched[watermark:]

    def visit(self, p: DFPattern, e) -> bool:
        """Match one pattern node (memoised: a pattern node that matched matches only that node)."""
        if self.memoize and p in self.memo:
            return self.memo[p][0] is e
        watermark = len(self.matched)
        out = self._dispatch(p, e)
        if out:
            self.memo.setdefault(p, []).append(e)
            self.matched.append(p)
        else:
            self._clear(watermark)
        return out

    def _dispatch(self, p: DFPattern, e) -> bool:  # noqa: PLR0911, PLR0912 - one case per pattern kind
        if isinstance(p, WildcardPattern):
            return True
        if isinstance(p, CallPattern):
            return self._call(p, e)
        if isinstance(p, ExprPattern):
            q = p.expr
            return q is e or (type(q) is type(e) and not isinstance(e, (Op, Var, GlobalVar, Constant))
                              and alpha_equal(q, e))
        if isinstance(p, VarPattern):
            return isinstance(e, Var) and (not p.name or p.name == e.name_hint)
        if isinstance(p, ConstantPattern):
            return isinstance(e, Constant)
        if isinstance(p, AltPattern):
            return self.visit(p.left, e) or self.visit(p.right, e)
        if isinstance(p, TuplePattern):
            if not isinstance(e, Tuple):
                return False
            if p.fields is None:
                return True
            return len(p.fields) == len(e.fields) and all(
                self.visit(f, x) for f, x in zip(p.fields, e.fields, strict=True))
        if isinstance(p, TupleGetItemPattern):
            return (isinstance(e, TupleGetItem) and (p.index == -1 or p.index == e.index)
                    and self.visit(p.tuple, e.tuple_value))
        if isinstance(p, AttrPattern):
            return self.visit(p.pattern, e) and self._attrs(p, e)
        if isinstance(p, TypePattern):
            t = self._checked_type(e)
            return t is not None and (t == p.type or alpha_equal(t, p.type)) and self.visit(p.pattern, e)
        if isinstance(p, DataTypePattern):
            t = self._checked_type(e)
            return isinstance(t, TensorType) and t.dtype == p.dtype and self.visit(p.pattern, e)
        if isinstance(p, ShapePattern):
            t = self._checked_type(e)
            return (isinstance(t, TensorType) and len(t.shape) == len(p.shape)
                    and all(_attr_equal(a, b) for a, b in zip(p.shape, t.shape, strict=True))
                    and self.visit(p.pattern, e))
        if isinstance(p, DominatorPattern):
            return self._dominator(p, e)
        if isinstance(p, FunctionPattern):
            if not isinstance(e, Function):
                return False
            if p.params is not None and (len(p.params) != len(e.params) or not all(
                    self.visit(a, b) for a, b in zip(p.params, e.params, strict=True))):
                return False
            return self.visit(p.body, e.body)
        if isinstance(p, IfPattern):
            return (isinstance(e, If) and self.visit(p.cond, e.cond)
                    and self.visit(p.true_branch, e.true_branch)
                    and self.visit(p.false_branch, e.false_branch))
        if isinstance(p, LetPattern):
            return (isinstance(e, Let) and self.visit(p.var, e.var) and self.visit(p.value, e.value)
                    and self.visit(p.body, e.body))
        raise DFPatternError(f"unknown pattern node {type(p).__name__}")

    # -- calls: the standard case, commutative add/multiply, associating divide/multiply ----------
    def _args(self, pats, args, watermark: int) -> bool:
        ok = pats is None or (len(pats) == len(args) and all(
            self.visit(a, b) for a, b in zip(pats, args, strict=True)))
        if not ok:
            self._clear(watermark)
        return ok

    def _call(self, p: CallPattern, e) -> bool:
        if not isinstance(e, Call):
            return False
        watermark = len(self.matched)
        if self.visit(p.op, e.op):
            watermark2 = len(self.matched)
            if self._args(p.args, e.args, watermark2):
                return True
            if (_pattern_op(p, "add") or _pattern_op(p, "multiply")) and p.args is not None:
                return self._args(tuple(reversed(p.args)), e.args, watermark2)
            return False
        self._clear(watermark)
        if _pattern_op(p, "divide") and p.args and _pattern_op(p.args[0], "multiply") and p.args[0].args:
            inner = p.args[0]
            if _is_op_call(e, "multiply") and len(e.args) == 2 and (
                    _is_op_call(e.args[0], "divide") or _is_op_call(e.args[1], "divide")):
                for k in range(2):
                    div = CallPattern(p.op, [inner.args[k], p.args[1]])
                    if self.visit(CallPattern(inner.op, [inner.args[(k + 1) % 2], div]), e):
                        return True
                    self._clear(watermark)
                return False
        if _pattern_op(p, "multiply") and p.args:
            for k in range(2):
                inner = p.args[k]
                if (_pattern_op(inner, "divide") and inner.args and _is_op_call(e, "divide")
                        and len(e.args) == 2 and (_is_op_call(e.args[0], "multiply")
                                                  or _is_op_call(e.args[1], "multiply"))):
                    mul = CallPattern(p.op, [inner.args[0], p.args[(k + 1) % 2]])
                    return self.visit(CallPattern(inner.op, [mul, inner.args[1]]), e)
        return False

    # -- attributes and types ----------------------------------------------------------------------
    def _attrs(self, p: AttrPattern, e) -> bool:
        if isinstance(e, Op):
            opdef = lookup(e.name)
            for name, want in p.attrs.items():
                if opdef is None:
                    return False
                if name == "TOpPattern":
                    have = int(opdef.pattern)
                elif name in opdef.extra:
                    have = opdef.extra[name]
                else:
                    return False
                if not _attr_equal(want, have):
                    return False
            return True
        if isinstance(e, Call):
            have = e.attrs.as_dict()
            if isinstance(e.op, Op) and (opdef := lookup(e.op.name)) is not None:
                try:
                    have = opdef.resolve(e.attrs)
                except RelayError:
                    pass
            return all(name in have and _attr_equal(want, have[name]) for name, want in p.attrs.items())
        if isinstance(e, Function):
            return all(name in e.attrs and _attr_equal(want, e.attrs[name]) for name, want in p.attrs.items())
        return False

    def _checked_type(self, e):
        """The type of ``e``: type-checked once for the whole program where that works, else alone."""
        from ...ty.infer import infer_type_expr

        if self._types is None:
            self._types = {}
            if self.root is not None:
                try:
                    out, types = infer_type_expr(self.root, self.mod, with_types=True)
                    if out is self.root:
                        self._types = types
                except RelayError:
                    pass
        t = self._types.get(e) if isinstance(e, Expr) else None
        if t is None and isinstance(e, Expr) and not isinstance(e, Op):
            try:
                out, types = infer_type_expr(e, self.mod, with_types=True)
                t = types.get(out)
            except RelayError:
                return None
        return t

    # -- dominators ----------------------------------------------------------------------------------
    def _dominator(self, p: DominatorPattern, e) -> bool:
        if not self.visit(p.child, e):
            return False
        ok = self._matches_path(p, e)
        self.memoize = True
        return ok and self._dominates_parent(p, e)

    def _matches_path(self, p: DominatorPattern, e) -> bool:
        """Every input path from ``e`` reaches a ``parent`` match through ``path`` matches."""
        graph = self.graph
        done: set = set()
        stack = [(e, iter(graph.inputs(e)))]
        while stack:
            cur, it = stack[-1]
            node = next(it, None)
            if node is None:
                stack.pop()
                continue
            if isinstance(cur, Call) and node is cur.op:
                continue
            self.memoize = True
            if self.visit(p.parent, node):
                continue
            self.memoize = False
            if not self.visit(p.path, node):
                return False
            if node not in done:  # an input seen before was checked all the way already
                done.add(node)
                stack.append((node, iter(graph.inputs(node))))
        return True

    def _dominates_parent(self, p: DominatorPattern, e) -> bool:
        graph = self.graph
        found = self.memo.get(p.parent)
        if found:
            return graph.dominates(e, found[0])
        return any(self.visit(p.parent, n) for n in graph.dominated(e))


def match(pattern: DFPattern, expr: Expr) -> bool:
    """Whether ``pattern`` matches ``expr`` (rooted at it), with TVM's rules."""
    if not isinstance(pattern, DFPattern):
        raise DFPatternError(f"match: expected a pattern, got {type(pattern).__name__}")
    if not isinstance(expr, Expr):
        raise DFPatternError(f"match: expected a Relay expression, got {type(expr).__name__}")
    return DFPatternMatcher(expr).match(pattern, expr)
