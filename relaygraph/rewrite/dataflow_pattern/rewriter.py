"""Grouping matches, and the two programs built from groups: ``rewrite`` and ``partition``.

Follows TVM v0.13's PatternGrouper, PatternRewriter and PatternPartitioner. Every walk over the
program is an iterative post-order; the input is never mutated (nodes are immutable), and the
result is returned only when a round finished, so an error leaves no half-rewritten program.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ...ir.adt import Match
from ...ir.equal import alpha_equal
from ...ir.expr import Call, Constant, Expr, Function, If, Let, Op, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.traversal import post_order
from .matcher import DFPatternMatcher, ExprGraph
from .patterns import (
    AltPattern,
    CallPattern,
    ConstantPattern,
    DFPattern,
    DFPatternError,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    TuplePattern,
    children,
    describe,
    pattern_post_order,
)

__all__ = ["DFPatternCallback", "rewrite", "partition", "PatternGrouper", "Group", "MAX_ROUNDS"]

PARTITIONED = "PartitionedFromPattern"
MAX_ROUNDS = 100


class Group:
    """One accepted match: its root, what each pattern node matched, the extracted function."""

    __slots__ = ("gid", "root", "matched", "args", "function", "name")

    def __init__(self, root, matched, args, function, name) -> None:
        self.gid, self.root, self.matched = 0, root, matched
        self.args, self.function, self.name = args, function, name


class PatternGrouper:
    """Finds non-overlapping matches of a pattern, outermost first (TVM's PatternGrouper)."""

    def __init__(self, pattern: DFPattern, expr: Expr, mod: IRModule | None = None) -> None:
        self.pattern = pattern
        self.pattern_nodes = pattern_post_order(pattern)
        self.graph = ExprGraph(expr)
        self.matcher = DFPatternMatcher(expr, mod, self.graph)
        self.groups: dict[int, Group] = {}
        self.gid_of: dict = {}
        self._graph_number = 0
        pre_partitioned: set = set()
        for node in reversed(self.graph.order):
            if not isinstance(node, Expr) or node in self.gid_of:
                continue
            if isinstance(node, Function) and PARTITIONED in node.attrs:
                pre_partitioned.add(node)
                pre_partitioned.update(post_order(node.body))
            if node not in pre_partitioned and self.matcher.match(pattern, node):
                self._create_group(node)

    def root_group(self, node) -> Group | None:
        """The group whose root is ``node``, if any."""
        gid = self.gid_of.get(node)
        if gid is None:
            return None
        group = self.groups[gid]
        return group if group.root is node else None

    def _embed_const(self, e, p: DFPattern) -> bool:
        if not isinstance(e, Constant):
            return False
        if isinstance(p, ConstantPattern):
            return True
        if isinstance(p, ExprPattern):
            return isinstance(p.expr, Constant)
        if isinstance(p, AltPattern):
            side = p.left if DFPatternMatcher(e, graph=None).match(p.left, e) else p.right
            return self._embed_const(e, side)
        return False

    def _create_group(self, expr: Expr) -> None:
        node_map = {p: list(es) for p, es in self.matcher.memo.items()}
        fuzzy: set = set()
        for p in self.pattern_nodes:
            if isinstance(p, DominatorPattern):
                for q in (p.parent, p.path):
                    fuzzy.update(node_map.get(q, ()))
            if isinstance(p, FunctionPattern):
                for fn in node_map.get(p, ()):
                    fuzzy.update(post_order(fn.body))
        inputs: dict = {}
        args: list = []
        number = self._graph_number

        def make_input(e, p: DFPattern) -> None:
            if e in fuzzy or isinstance(e, (Op, Function)) or e in inputs or self._embed_const(e, p):
                return
            inputs[e] = Var(f"FunctionVar_{number}_{len(args)}")
            args.append(e)

        for p in self.pattern_nodes:
            if isinstance(p, TuplePattern) and p.fields is None:
                for m in node_map.get(p, ()):
                    for f in m.fields:
                        make_input(f, p)
            elif isinstance(p, CallPattern) and p.args is None:
                for m in node_map.get(p, ()):
                    for a in m.args:
                        make_input(a, p)
            elif not children(p):
                for m in node_map.get(p, ()):
                    make_input(m, p)
        self._graph_number += 1
        body, interior, name = _extract(expr, inputs)
        for e, post in interior.items():
            if not isinstance(e, Expr) or isinstance(e, (Op, Function, Constant)):
                continue
            if e in self.gid_of:
                return  # overlaps a group already taken
            if post is not body:
                for user in self.graph.users(e):
                    if user not in interior and not self.graph.dominates(expr, user):
                        return  # an interior value is used outside the match
        group = Group(expr, node_map, args, Function([inputs[a] for a in args], body), name)
        group.gid = len(self.groups) + 1
        self.groups[group.gid] = group
        for e in interior:
            self.gid_of[e] = group.gid


def _extract(root: Expr, inputs: dict) -> tuple[Expr, dict, str]:
    """``root`` with ``inputs`` replaced by their Vars, the nodes rebuilt (old -> new), and the
    group's name: the kinds of the rebuilt nodes in post-order (``nn.conv2d_nn.relu_``)."""
    memo: dict = {}
    name: list[str] = []
    if root in inputs:
        return inputs[root], memo, ""
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            kids = tuple(inputs[c] if c in inputs else memo[c] for c in node.children())
            memo[node] = node.with_children(kids)
            name.append(_name_part(node))
            continue
        if node in memo:
            continue
        stack.append((node, True))
        for c in reversed(node.children()):
            if c not in inputs and c not in memo:
                stack.append((c, False))
    return memo[root], memo, "".join(name)


def _name_part(node) -> str:
    if isinstance(node, Call):
        return f"{node.op.name}_" if isinstance(node.op, Op) else "Call_"
    if isinstance(node, Tuple):
        return "Tuple_"
    if isinstance(node, Function):
        return "Function"
    if isinstance(node, Let):
        return "Let_"
    if isinstance(node, If):
        return "If_"
    if isinstance(node, TupleGetItem):
        return f"TupleGetItem{node.index}_"
    if isinstance(node, Match):
        return "Match_"
    return ""


def _rebuild(expr: Expr, at_root: Callable) -> Expr:
    """Rebuild ``expr`` bottom-up; ``at_root(pre, post, memo)`` may replace a node."""
    memo: dict = {}
    for node in post_order(expr):
        post = node.with_children(tuple(memo[c] for c in node.children()))
        if isinstance(node, Expr):
            post = at_root(node, post, memo)
        memo[node] = post
    return memo[expr]


def _check_expr(expr, where: str) -> None:
    if not isinstance(expr, Expr):
        raise DFPatternError(f"{where}: expected a Relay expression, got {type(expr).__name__}")


# -- partition --------------------------------------------------------------------------------------
def partition(pattern: DFPattern, expr: Expr, attrs: dict | None = None,
              check: Callable | None = None) -> Expr:
    """``expr`` with each match of ``pattern`` made a call of a function carrying
    ``PartitionedFromPattern`` and ``attrs`` (TVM's ``partition``)."""
    if not isinstance(pattern, DFPattern):
        raise DFPatternError(f"partition: expected a pattern, got {type(pattern).__name__}")
    _check_expr(expr, f"partition({describe(pattern)})")
    if attrs is not None and not isinstance(attrs, dict):
        raise DFPatternError(f"partition({describe(pattern)}): attrs must be a dict, got {attrs!r}")
    if isinstance(pattern, FunctionPattern):
        warnings.warn("partitioning a function that is not called does not make sense; skipping",
                      stacklevel=2)
        return expr
    grouper = PatternGrouper(pattern, expr)
    extra = dict(attrs or {})

    def at_root(pre, post, memo):
        group = grouper.root_group(pre)
        if group is None or (check is not None and not check(pre)):
            return post
        fn = group.function
        fn = fn.replace(attrs=fn.attrs.replace(**{PARTITIONED: group.name}, **extra))
        return Call(fn, tuple(memo[a] for a in group.args))

    return _rebuild(expr, at_root)


# -- rewrite ----------------------------------------------------------------------------------------
class DFPatternCallback:
    """A pattern and what to do with each match: subclass, set ``self.pattern``, define ``callback``."""

    def __init__(self, require_type: bool = False, rewrite_once: bool = False) -> None:
        self.pattern: DFPattern | None = None
        self.require_type = require_type
        self.rewrite_once = rewrite_once

    def rewrite(self, expr: Expr) -> Expr:
        """``expr`` rewritten with this callback to a fixed point."""
        return rewrite(self, expr)

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Expr:
        """The replacement of a match (``node_map[pattern]``: the rewritten matched expressions)."""
        raise DFPatternError(f"{type(self).__name__} does not define callback(pre, post, node_map)")


def _equal(a: Expr, b: Expr) -> bool:
    return a is b or alpha_equal(a, b, map_free_vars=True)


def _round(cb: DFPatternCallback, expr: Expr, mod: IRModule) -> Expr:
    if cb.require_type:
        from ...ty.infer import infer_type_expr

        expr = infer_type_expr(expr, mod)
    grouper = PatternGrouper(cb.pattern, expr, mod)
    if not grouper.groups:
        return expr

    def at_root(pre, post, memo):
        group = grouper.root_group(pre)
        if group is None:
            return post
        memo[pre] = post  # the root's own entry: what the pattern's root matched, rewritten
        node_map = {p: [memo[e] for e in es] for p, es in group.matched.items()}
        out = cb.callback(pre, post, node_map)
        if not isinstance(out, Expr):
            raise DFPatternError(f"{type(cb).__name__}.callback for pattern {describe(cb.pattern)} "
                                 f"returned {type(out).__name__} {out!r:.60}, not a Relay expression")
        return out

    return _rebuild(expr, at_root)


def rewrite(callbacks, expr: Expr, mod: IRModule | None = None) -> Expr:
    """``expr`` rewritten by the callbacks, round after round, to a fixed point (TVM's rewrite)."""
    if isinstance(callbacks, DFPatternCallback):
        callbacks = [callbacks]
    callbacks = list(callbacks)
    for cb in callbacks:
        if not isinstance(cb, DFPatternCallback):
            raise DFPatternError(f"rewrite: expected DFPatternCallback objects, got {type(cb).__name__}")
        if not isinstance(cb.pattern, DFPattern):
            raise DFPatternError(f"rewrite: {type(cb).__name__}.pattern is {cb.pattern!r}, not a pattern")
    _check_expr(expr, "rewrite")
    mod = mod if mod is not None else IRModule()
    post, count, done = expr, 0, set()
    while True:
        last = post
        for cb in callbacks:
            if cb in done:
                continue
            before = post
            post = _round(cb, post, mod)
            count += 1
            if cb.rewrite_once and not _equal(before, post):
                done.add(cb)
        if _equal(last, post) or count >= MAX_ROUNDS:
            break
    if count >= MAX_ROUNDS:
        names = ", ".join(f"{type(cb).__name__} ({describe(cb.pattern)})" for cb in callbacks)
        raise DFPatternError(f"rewrite: observed {MAX_ROUNDS} rewrite passes without reaching a fixed "
                             f"point; conflicting callbacks? {names}")
    return post
