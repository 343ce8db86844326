"""Export an expression DAG to networkx for analysis and drawing."""

from __future__ import annotations

import networkx as nx

from .adt import Constructor
from .expr import Call, Constant, Expr, GlobalVar, Op, TupleGetItem, Var
from .node import Node
from .traversal import iter_post_order

__all__ = ["to_networkx", "node_label", "program_stats"]


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
