"""FuseOps: TVM's operator fusion (post-dominator tree, three phases, Primitive functions).

1. A forward dataflow graph in post-DFS order; every node gets its op's pattern kind and every
   edge a pattern (a broadcast whose argument already has the result's shape is elementwise).
   Parameters, non-dataflow constructs (let, if, match, refs) and the result are external.
2. The immediate post-dominator of each node (the LCA of its consumers in the tree), with the
   strongest edge pattern on the way.
3. Groups in a union-find, grown in three phases: conv2d/dense-like ops absorb elementwise
   consumers; elementwise/broadcast ops fuse into injective or reduction dominators; injective
   ops and tuples fuse last, also into intermediate tuples. ``relay.FuseOps.max_depth`` bounds a
   group's size.
4. Each group becomes a ``Primitive=1`` function called in place, its parameters ``%p0, %p1, ...``
   in the order TVM allocates them.

Needs checked types (run InferType first; the pass requires it). TVM's per-target argument limit
(``max_function_args``) is not modelled: relaygraph has no targets.
"""

from __future__ import annotations

from ..errors import RelayError
from ..ir.adt import Match
from ..ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
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
from ..ir.traversal import ExprMutator
from ..ir.types import TensorType, TupleType
from ..ops.registry import PatternKind, lookup
from .infra import PassContext, function_pass

__all__ = ["fuse_ops", "FuseOps"]

ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE, TUPLE, OPAQUE = (
    PatternKind.ELEMWISE, PatternKind.BROADCAST, PatternKind.INJECTIVE, PatternKind.COMM_REDUCE,
    PatternKind.OUT_ELEMWISE_FUSABLE, PatternKind.TUPLE, PatternKind.OPAQUE)
_SIMPLE_CONST = {"int32", "int64", "float32", "float64", "bool"}


def _type(types, expr: Expr):
    t = types.get(expr)
    if t is None:
        raise RelayError("FuseOps needs checked types: run InferType first "
                         f"(no type for a {type(expr).__name__})")
    return t


def _checked(mod):
    if mod.checked_types is None:
        raise RelayError("FuseOps needs checked types: run InferType first")
    return mod.checked_types


class _GNode:
    __slots__ = ("ref", "index", "extern_ref", "pattern", "outputs")

    def __init__(self) -> None:
        self.ref = None
        self.index = -1
        self.extern_ref = False
        self.pattern = OPAQUE
        self.outputs: list[tuple[_GNode, PatternKind]] = []


class _Graph:
    """The indexed forward graph of a function body."""

    def __init__(self, func: Function, types) -> None:
        self.types = types
        self.map: dict[Expr, _GNode] = {}
        self.order: list[_GNode] = []
        self.update(func, None, OPAQUE)
        stack: list = [(func, False)]
        visited: set = set()
        while stack:
            node, done = stack.pop()
            if done:
                self.finish(node)
                continue
            if node in visited:
                continue
            visited.add(node)
            kids = self.start(node)
            stack.append((node, True))
            for child in reversed(kids):
                if child not in visited:
                    stack.append((child, False))

    def update(self, expr: Expr, parent: _GNode | None, pattern: PatternKind) -> None:
        if per_use_constant(expr):
            return
        node = self.map.get(expr)
        if node is None:
            node = self.map[expr] = _GNode()
        if parent is not None:
            node.outputs.append((parent, pattern))
        else:
            node.extern_ref = True

    def _node(self, expr: Expr) -> _GNode:
        node = self.map.get(expr)
        if node is None:
            node = self.map[expr] = _GNode()
        return node

    def start(self, e: Expr) -> tuple:
        """Record the edges out of ``e``'s inputs; return the children to visit."""
        if isinstance(e, Function):
            if e.attrs.get("Primitive") or e.attrs.get("Compiler"):
                return ()
            for p in e.params:
                self.update(p, None, OPAQUE)
            self.update(e.body, None, OPAQUE)
            return e.children()
        if isinstance(e, Call):
            node = self._node(e)
            if isinstance(e.op, Op):
                opdef = lookup(e.op.name)
                pattern = PatternKind(opdef.pattern) if opdef is not None else OPAQUE
            else:
                pattern = OPAQUE
                self.update(e.op, node, OPAQUE)
            node.pattern = pattern
            self.update(e.op, None, OPAQUE)
            rtype = _type(self.types, e)
            for arg in e.args:
                edge = pattern
                if edge == BROADCAST and isinstance(rtype, TensorType):
                    atype = _type(self.types, arg)
                    if isinstance(atype, TensorType) and atype.shape == rtype.shape:
                        edge = ELEMWISE
                self.update(arg, node, edge)
            return e.children()
        if isinstance(e, Tuple):
            node = self._node(e)
            node.pattern = TUPLE
            for field in e.fields:
                if isinstance(_type(self.types, field), TensorType):
                    self.update(field, node, INJECTIVE)
                else:
                    self.update(field, None, OPAQUE)
            return e.children()
        if isinstance(e, TupleGetItem):
            ttype = _type(self.types, e.tuple_value)
            if isinstance(ttype, TupleType) and all(isinstance(t, TensorType) for t in ttype.fields):
                node = self._node(e)
                node.pattern = INJECTIVE
                self.update(e.tuple_value, node, INJECTIVE)
            else:
                self.update(e.tuple_value, None, OPAQUE)
            return e.children()
        if isinstance(e, (Let, If, RefCreate, RefRead, RefWrite)):
            for child in e.children():
                self.update(child, None, OPAQUE)
            return e.children()
        if isinstance(e, Match):
            self.update(e.data, None, OPAQUE)
            for clause in e.clauses:
                self.update(clause.rhs, None, OPAQUE)
            return (e.data, *(c.rhs for c in e.clauses))
        return ()

    def finish(self, e: Expr) -> None:
        """Give ``e`` its place in post-DFS order (functions and ops have none, as in TVM)."""
        if per_use_constant(e):
            return  # handled per use by the mutator, like TVM's one constant node per use
        if isinstance(e, (Function, Op)) or not isinstance(e, (Var, Constant, Call, Tuple,
                                                               TupleGetItem, Let, If, Match,
                                                               RefCreate, RefRead, RefWrite)):
            return
        node = self._node(e)
        node.ref = e
        node.index = len(self.order)
        self.order.append(node)
        # Non-scalar constants are opaque: never fused, passed to groups as parameters.


def per_use_constant(e: Expr) -> bool:
    """Scalar constants of simple dtypes: TVM has one node per use and fuses each into its
    consumer; interning shares them, so they are kept out of the graph and decided per use."""
    return isinstance(e, Constant) and e.shape == () and e.dtype in _SIMPLE_CONST


def constant_fuses_into(op_name: str) -> bool:
    """Whether a per-use scalar constant read by ``op_name`` goes inside its fused group."""
    # TVM fuses an elementwise node into its only consumer when the edge pattern is at most
    # injective or a reduction (a conv2d/dense argument or an opaque op keeps it a parameter).
    opdef = lookup(op_name)
    pattern = PatternKind(opdef.pattern) if opdef is not None else OPAQUE
    return pattern <= INJECTIVE or pattern == COMM_REDUCE


class _DomNode:
    __slots__ = ("gnode", "parent", "depth", "pattern")


def _post_dominators(graph: _Graph) -> list[_DomNode]:
    tree: list[_DomNode | None] = [None] * len(graph.order)
    for index in range(len(graph.order) - 1, -1, -1):
        gnode = graph.order[index]
        dom = _DomNode()
        dom.gnode = gnode
        if gnode.extern_ref or not gnode.outputs:
            dom.parent, dom.depth, dom.pattern = None, 1, OPAQUE
        else:
            pattern = ELEMWISE
            parent = None
            for i, (out, edge) in enumerate(gnode.outputs):
                onode = tree[out.index]
                if i == 0:
                    parent = onode
                else:
                    parent, pattern = _lca(parent, onode, pattern)
                pattern = _combine(pattern, edge)
            dom.parent = parent
            dom.depth = parent.depth + 1 if parent is not None else 1
            dom.pattern = pattern
        tree[index] = dom
    return tree


def _combine(a: PatternKind, b: PatternKind) -> PatternKind:
    return a if a > b else b


def _lca(a: _DomNode | None, b: _DomNode | None, pattern: PatternKind):
    while a is not b:
        if a is None or b is None:
            return None, pattern
        if a.depth < b.depth:
            pattern = _combine(pattern, b.pattern)
            b = b.parent
        elif b.depth < a.depth:
            pattern = _combine(pattern, a.pattern)
            a = a.parent
        else:
            pattern = _combine(_combine(pattern, a.pattern), b.pattern)
            a, b = a.parent, b.parent
    return a, pattern


class _Group:
    __slots__ = ("parent", "pattern", "root_ref", "anchor_ref", "num_nodes")

    def __init__(self, gnode: _GNode) -> None:
        self.parent: _Group | None = None
        self.pattern = gnode.pattern
        self.root_ref = gnode.ref
        self.anchor_ref = gnode.ref if gnode.pattern == OUT_EWISE else None
        self.num_nodes = 1

    def root(self) -> _Group:
        r = self
        while r.parent is not None:
            r = r.parent
        node = self
        while node is not r:  # path compression
            node.parent, node = r, node.parent
        return r


class _Partitioner:
    def __init__(self, graph: _Graph, opt_level: int, max_depth: int) -> None:
        self.graph, self.max_depth = graph, max_depth
        self.groups = [_Group(g) for g in graph.order]
        if opt_level == 0:
            return
        dom = _post_dominators(graph)
        for phase in range(3):
            self.run_phase(dom, phase)

    def _paths(self, src: _GNode, sink: _GNode):
        """Nodes strictly after ``src`` up to and including ``sink`` (iterative)."""
        seen: set[int] = set()
        stack = [out for out, _ in src.outputs]
        while stack:
            node = stack.pop()
            if node.index in seen:
                continue
            seen.add(node.index)
            yield node
            if node is not sink:
                stack.extend(out for out, _ in node.outputs)

    def check_path(self, src: _GNode, sink: _GNode, fcond) -> bool:
        return all(fcond(self.groups[n.index].root().pattern, n is sink)
                   for n in self._paths(src, sink))

    def commit(self, src: _GNode, sink: _GNode) -> None:
        target = self.groups[sink.index]
        for node in [src, *(n for n in self._paths(src, sink) if n is not sink)]:
            self._merge(self.groups[node.index], target)

    @staticmethod
    def _merge(child: _Group, parent: _Group) -> None:
        child, parent = child.root(), parent.root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor_ref is not None:
            parent.anchor_ref = child.anchor_ref
            parent.pattern = _combine(child.pattern, parent.pattern)

    def count_with(self, src: _GNode, sink: _GNode) -> int:
        total = self.groups[sink.index].root().num_nodes
        counted = {sink.index}
        for node in [src, *self._paths(src, sink)]:
            if node.index not in counted:
                counted.add(node.index)
                total += self.groups[node.index].num_nodes
        return total

    def run_phase(self, dom: list[_DomNode], phase: int) -> None:
        for nid, gnode in enumerate(self.graph.order):
            group, dnode = self.groups[nid], dom[nid]
            if group.pattern == OPAQUE or dnode.parent is None:
                continue
            sink = dnode.parent.gnode
            if self.count_with(gnode, sink) > self.max_depth:
                continue
            sink_group = self.groups[sink.index]
            if phase == 2:
                if group.pattern > INJECTIVE:
                    continue
                sink_root = sink_group.root()
                if sink_root.pattern == TUPLE:
                    continue
                if sink_group.pattern == TUPLE and sink_root.pattern <= INJECTIVE:
                    if self.check_path(gnode, sink, lambda k, last: k <= INJECTIVE):
                        self.commit(gnode, sink)
                continue
            if group.root() is sink_group.root():
                continue
            if sink_group.pattern == TUPLE:
                continue
            if group.pattern == OUT_EWISE:
                if phase == 0 and dnode.pattern == ELEMWISE and self.check_path(
                        gnode, sink, lambda k, last: k <= BROADCAST):
                    self.commit(gnode, sink)
            elif group.pattern <= BROADCAST:
                if dnode.pattern <= INJECTIVE or dnode.pattern == COMM_REDUCE:
                    if self.check_path(gnode, sink, _broadcast_path):
                        self.commit(gnode, sink)
            elif group.pattern in (INJECTIVE, TUPLE):
                if phase == 1 and self.check_path(gnode, sink, lambda k, last: k <= INJECTIVE):
                    self.commit(gnode, sink)


def _broadcast_path(kind: PatternKind, is_sink: bool) -> bool:
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= BROADCAST or kind in (COMM_REDUCE, INJECTIVE, OUT_EWISE)


class _FuseMutator(ExprMutator):
    """Turns each group into a Primitive function called at the group's root."""

    def __init__(self, gmap: dict[Expr, _Group], types) -> None:
        super().__init__()
        self.gmap, self.types = gmap, types
        self.params: dict[_Group, list[tuple[Expr, Var]]] = {}

    def pre_rewrite(self, node):
        if isinstance(node, Function) and (node.attrs.get("Primitive") or node.attrs.get("Compiler")):
            return node
        return None

    def _group(self, expr: Expr) -> _Group | None:
        g = self.gmap.get(expr)
        return g.root() if g is not None else None

    def _args(self, originals, news, group: _Group, consumer: Expr | None = None) -> tuple:
        out = []
        for orig, new in zip(originals, news, strict=True):
            if self._group(orig) is group or (
                    isinstance(consumer, Call) and per_use_constant(orig)
                    and constant_fuses_into(consumer.op.name)):
                out.append(new)
                continue
            slots = self.params.setdefault(group, [])
            for arg, param in slots:
                if arg is new:
                    out.append(param)
                    break
            else:
                param = Var(f"p{len(slots)}", _type(self.types, orig))
                slots.append((new, param))
                out.append(param)
        return tuple(out)

    def _function(self, group: _Group, ret_type, body: Expr) -> Call:
        slots = self.params.get(group, [])
        calls = _calls_in(body)
        attrs = {"Primitive": 1 if calls else 0}
        if calls and all(c.op.name in ("reshape", "squeeze", "expand_dims", "reverse_reshape",
                                       "contrib_reverse_reshape") for c in calls):
            attrs["relay.reshape_only"] = 1
        func = Function([p for _, p in slots], body, ret_type, (), attrs)
        return Call(func, tuple(a for a, _ in slots))

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if not isinstance(pre.op, Op):
            return post
        group = self._group(pre)
        if group is None:
            return post
        new = Call(post.op, self._args(pre.args, post.args, group, pre), post.attrs,
                   post.type_args)
        if group.root_ref is pre:
            return self._function(group, _type(self.types, pre), new)
        return new

    def rewrite_tuple(self, pre: Tuple, post: Tuple) -> Expr:
        group = self._group(pre)
        if group is None or group.root_ref is pre:
            return post
        return Tuple(self._args(pre.fields, post.fields, group))

    def rewrite_tuple_get_item(self, pre: TupleGetItem, post: TupleGetItem) -> Expr:
        group = self._group(pre)
        if group is None:
            return post
        (new_tuple,) = self._args((pre.tuple_value,), (post.tuple_value,), group)
        new = TupleGetItem(new_tuple, pre.index)
        if group.root_ref is pre:
            if self._group(pre.tuple_value) is not group:
                return post  # isolated projection of an opaque op's tuple
            return self._function(group, _type(self.types, pre), new)
        return new


def _calls_in(body: Expr):
    from ..ir.traversal import iter_post_order

    return [n for n in iter_post_order(body) if isinstance(n, Call) and isinstance(n.op, Op)]


def _refuse_shared_calls_with_effects(func: Function, purity: Purity) -> None:
    """A call with effects used twice in graph form is two calls, but a fused group would
    take it as one input and call it once: refuse, naming it, rather than change the value."""
    from ..ir.traversal import iter_post_order

    uses: dict = {}
    for node in iter_post_order(func):
        if isinstance(node, Let):  # a let-bound call is one call per let: fine
            continue
        for child in node.children():
            if isinstance(child, Call) and purity.per_use(child):
                uses[child] = uses.get(child, 0) + 1
                if uses[child] > 1:
                    from ..text import astext

                    text = " ".join(astext(child).split())
                    raise RelayError(f"FuseOps: `{text[:80]}` calls a function with effects and "
                                     "is used more than once in graph form; run ToANormalForm "
                                     "first so that each use is its own binding")


def fuse_ops(func: Function, opt_level: int = 2, max_depth: int = 256, types=None,
             purity: Purity | None = None) -> Function:
    """Fuse the operators of one function into Primitive functions; ``types`` are its checked
    types (the TypeMap of the typed module it belongs to; by default, its own inference)."""
    _refuse_shared_calls_with_effects(func, purity or Purity().learn(func))
    if types is None:
        from ..ty import infer_type_expr

        types = infer_type_expr(func, with_types=True)[1]
    graph = _Graph(func, types)
    groups = _Partitioner(graph, opt_level, max_depth).groups
    gmap = {g.ref: groups[i] for i, g in enumerate(graph.order)}
    return _FuseMutator(gmap, types).visit(func)


def FuseOps(fuse_opt_level: int = -1):  # noqa: N802 - Relay's pass name
    """Group operators into Primitive functions (opt_level from the context when -1)."""

    def run(func: Function, mod, ctx: PassContext) -> Function:
        level = ctx.opt_level if fuse_opt_level == -1 else fuse_opt_level
        return fuse_ops(func, level, ctx.get_config("relay.FuseOps.max_depth"), _checked(mod),
                        Purity(mod))

    return function_pass(run, opt_level=0, name="FuseOps", required=["InferType"])
