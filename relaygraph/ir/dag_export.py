"""Export an expression DAG to networkx for analysis and drawing."""

from __future__ import annotations

import networkx as nx

from .adt import Constructor
from .expr import Call, Constant, Expr, GlobalVar, Op, TupleGetItem, Var
from .node import Node
from .traversal import iter_post_order

__all__ = ["to_networkx", "node_label", "program_stats", "layout_stats", "layout_changes"]


def node_label(node: Node) -> str:
    """A short human label: the op name, ``%x``, ``@f``, a constant's shape, or the node kind."""
    if isinstance(node, Call):
        callee = node.op
        if isinstance(callee, Op):
            return callee.name
        if isinstance(callee, (GlobalVar, Constructor)):
            return ("@" if isinstance(callee, GlobalVar) else "") + callee.name_hint
        return "call"
    if isinstance(node, Var):
        return f"%{node.name_hint}"
    if isinstance(node, GlobalVar):
        return f"@{node.name_hint}"
    if isinstance(node, Op):
        return node.name
    if isinstance(node, Constructor):
        return node.name_hint
    if isinstance(node, Constant):
        return f"const{list(node.shape)}:{node.dtype}"
    if isinstance(node, TupleGetItem):
        return f".{node.index}"
    return type(node).__name__


def to_networkx(root: Node, include_ops: bool = False) -> nx.DiGraph:
    """A DiGraph with one vertex per distinct node and an edge child -> parent.

    Vertex attributes: ``kind`` (class name), ``op`` (op name for calls of ops, else None),
    ``label``. Edge attribute ``index`` is the first argument position, ``indices`` all of them
    (``f(h, h)`` is one edge). Op nodes are left out unless ``include_ops`` (their name is already
    on the call).
    """
    g = nx.DiGraph()
    ids: dict[Node, int] = {}
    for node in iter_post_order(root):
        if isinstance(node, Op) and not include_ops:
            continue
        nid = ids[node] = len(ids)
        op = node.op.name if isinstance(node, Call) and isinstance(node.op, Op) else None
        g.add_node(nid, kind=type(node).__name__, op=op, label=node_label(node),
                   is_expr=isinstance(node, Expr))
        for i, child in enumerate(node.children()):
            if child not in ids:
                continue
            if g.has_edge(ids[child], nid):  # f(h, h): one edge, every position kept
                g.edges[ids[child], nid]["indices"].append(i)
            else:
                g.add_edge(ids[child], nid, index=i, indices=[i])
    return g


def program_stats(root: Node) -> dict:
    """Size facts about a program: distinct nodes, size as a tree, depth, op histogram, sharing."""
    tree_size: dict[Node, int] = {}
    depth: dict[Node, int] = {}
    uses: dict[Node, int] = {}
    ops: dict[str, int] = {}
    nodes = 0
    for node in iter_post_order(root):
        if isinstance(node, Op):
            continue
        kids = [c for c in node.children() if not isinstance(c, Op)]
        for c in kids:
            uses[c] = uses.get(c, 0) + 1
        tree_size[node] = 1 + sum(tree_size[c] for c in kids)
        depth[node] = 1 + max((depth[c] for c in kids), default=0)
        if isinstance(node, Expr):
            nodes += 1
        if isinstance(node, Call) and isinstance(node.op, Op):
            ops[node.op.name] = ops.get(node.op.name, 0) + 1
    return {
        "nodes": nodes,
        "tree_size": tree_size.get(root, 0),
        "depth": depth.get(root, 0),
        "ops": dict(sorted(ops.items())),
        "calls": sum(ops.values()),
        "shared": sum(1 for n, k in uses.items() if k > 1 and not isinstance(n, (Var, Constant))),
    }


def layout_stats(root: Node) -> dict[str, int]:
    """Calls of ops that take layouts, counted by op and layouts: ``"nn.conv2d NHWC/HWIO": 14``
    (its ``data_layout``, ``kernel_layout``, ``out_layout`` or ``layout`` attributes in the op's
    order, defaults filled in, empty ones left out). A fused op counts as its anchor (the first
    of its parts, which takes its attributes): ``fused.conv2d_bias_relu`` as ``nn.conv2d``, so
    fusing leaves these counts alone. A layout rewrite changes them while the op counts stay."""
    from ..ops.fused_ops import definition
    from ..ops.registry import lookup

    keys: dict[str, dict[str, object]] = {}  # op -> its layout attributes and their defaults
    out: dict[str, int] = {}
    for node in iter_post_order(root):
        if not (isinstance(node, Call) and isinstance(node.op, Op)):
            continue
        name = node.op.name
        fused = definition(name)
        if fused is not None:
            name = fused.parts[0].op
        names = keys.get(name)
        if names is None:
            opdef = lookup(name)
            names = keys[name] = {a: d for a, d in (opdef.attrs.items() if opdef is not None else ())
                                  if a.endswith("layout")}
        if not names:
            continue
        values = [node.attrs.get(a, default) for a, default in names.items()]
        shown = "/".join(str(v) for v in values if v)
        key = f"{name} {shown}" if shown else name
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def layout_changes(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """What a rewrite changed in layouts, from two ``layout_stats``: for each op with calls in
    both whose layouts differ, every layout of it with its count before and after
    (``{"nn.conv2d NCHW/OIHW": (27, 6), "nn.conv2d NHWC/HWIO": (0, 21)}``). An op that appears
    or goes, or whose calls change in number in the same layouts (convolutions that became
    Winograd ones), is a change of ops, which the op counts show."""
    def by_op(stats: dict[str, int]) -> dict[str, set]:
        out: dict[str, set] = {}
        for key in stats:
            out.setdefault(key.split(" ", 1)[0], set()).add(key)
        return out

    ops_before, ops_after = by_op(before), by_op(after)
    changed: dict[str, tuple[int, int]] = {}
    for op in sorted(set(ops_before) & set(ops_after)):
        if ops_before[op] != ops_after[op]:
            for key in sorted(ops_before[op] | ops_after[op]):
                changed[key] = (before.get(key, 0), after.get(key, 0))
    return changed
