"""Exact extraction by parts: an e-graph cut at its separating classes, each part solved alone.

A class ``X`` *separates* when every class reachable from it (through the children of its
nodes) is reachable from the roots only through ``X``: ``X`` dominates all of them in the class
graph. Nothing outside ``X``'s part then uses a class inside it, so which nodes the part below
``X`` chooses does not depend on anything above it: an answer of least DAG cost chooses, below
``X``, a least-cost answer of ``X`` alone, whenever it needs ``X`` at all. (A class on a cycle
through classes above ``X`` is reachable from the roots around ``X``: such an ``X`` does not
separate.) So the parts are solved from the bottom up, each with its own root, and a part
separated below another stands in the upper one as a single leaf node of the cost its own
answer found. With costs of at least zero, the answers put together are optimal when every
part's answer is, and otherwise the lower bound is the top part's own, less what the answers of
the parts below it may still lose (``ilp._by_parts``).

Classes with a child-free node of cost 0 take that node in any least-cost answer and add
nothing: they are set aside before the classes are cut (the constants many layers share would
otherwise keep every layer from separating) and chosen so in every part.

The e-graph of a deep network separates at its residual joins and layer outputs: BERT-base's 12
layers (10,474 nodes, 3,721 classes after the cpu rules) fall into parts of a few hundred nodes,
each closed in well under a second, where the whole program stopped at its 30 s limit with a
13% gap. Dominators come from networkx; everything else is a loop over the classes, so a chain
of 100,000 classes splits without recursion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from .gym import ExtractionError, ExtractionGraph
from .prune import derivable

__all__ = ["Part", "Split", "split"]

MIN_PART = 200  # viable nodes a part must hold to be cut off (smaller ones stay in the part above)


@dataclass
class Part:
    """One part: its classes (of the whole e-graph) and the parts that stand in it as leaves."""

    root: int | None  # the separating class (None: the top part, the e-graph's own roots)
    classes: list[int]  # classes solved here (free classes and lower parts' roots excluded)
    below: list[int]  # roots of the parts that stand in this one as leaves
    node_of: list[int] = field(default_factory=list)  # its e-graph's node -> the whole's (-1: a part)
    class_of: list[int] = field(default_factory=list)  # its e-graph's class -> the whole's


@dataclass
class Split:
    """The parts of an e-graph, lower parts first, and the node fixed for each free class."""

    parts: list[Part]
    free: dict[int, int]  # class -> its node of cost 0 without children
    viable: list[bool]  # per node: usable, and every child class has an acyclic term

    def build(self, graph: ExtractionGraph, part: Part, costs: dict[int, float]) -> ExtractionGraph:
        """``part``'s own e-graph: its classes with their viable nodes, each lower part's root as one
        child-free node of ``costs[root]``, and the free classes it uses as their fixed node."""
        order: list[int] = list(part.classes)
        index = {k: i for i, k in enumerate(order)}
        leaves: set[int] = set(part.below)
        node_ids: list[str] = []
        ops: list[str] = []
        classes: list[int] = []
        kids: list[list[int]] = []
        node_costs: list[float] = []
        node_of: list[int] = []
        pending: list[tuple[int, tuple[int, ...]]] = []  # (sub node, child classes of the e-graph)

        def extra(k: int) -> int:
            if k not in index:
                if k not in leaves and k not in self.free:
                    raise ExtractionError(f"{graph.name}: class {graph.class_ids[k]!r} lies outside the "
                                          f"part of {_name(graph, part.root)} (not a separating class)")
                index[k] = len(order)
                order.append(k)
            return index[k]

        def add(sub: int, n: int, cost: float, name: str = "", op: str = "") -> None:
            # one node of sub-class ``sub``: the e-graph's node ``n``, or (n = -1) a lower part's leaf
            node_ids.append(graph.node_ids[n] if n >= 0 else name)
            ops.append(graph.ops[n] if n >= 0 else op)
            classes.append(sub)
            kids.append([])
            node_costs.append(cost)
            node_of.append(n)

        def leaf(k: int) -> int:
            # the one node of a free class or a lower part's root, added on first use
            sub = extra(k)
            if sub not in first:
                first[sub] = len(node_ids)
                if k in self.free:
                    add(sub, self.free[k], 0.0)
                else:
                    add(sub, -1, costs[k], f"part:{graph.class_ids[k]}", f"part {graph.class_ids[k]}")
            return first[sub]

        for k in part.classes:
            for n in graph.class_nodes[k]:
                if self.viable[n]:
                    pending.append((len(node_ids), graph.child_classes[n]))
                    add(index[k], n, graph.costs[n])
        first: dict[int, int] = {}
        for i, k in enumerate(classes):
            first.setdefault(k, i)
        for i, child_classes in pending:
            kids[i].extend(leaf(c) for c in child_classes)
        roots = graph.roots if part.root is None else [part.root]
        for r in roots:
            leaf(r)  # a root with nodes here is found in ``first``; a free root gets its fixed node
        part.node_of, part.class_of = node_of, order
        return ExtractionGraph(node_ids, ops, classes, kids, node_costs, [graph.class_ids[k] for k in order],
                               [index[r] for r in roots], name=f"{graph.name} part {_name(graph, part.root)}")


def _name(graph: ExtractionGraph, root: int | None) -> str:
    return "top" if root is None else repr(graph.class_ids[root])


def split(graph: ExtractionGraph, min_part: int = MIN_PART) -> Split | None:
    """The e-graph's parts, lower ones first, each of at least ``min_part`` viable nodes (usable,
    every child class with an acyclic term; the top part may be smaller), or None when it does not
    separate into two or more or a root has no acyclic term (solved whole, that is reported).
    Costs must be at least zero (the caller checks)."""
    n_classes = graph.num_classes
    viable = derivable(graph)
    if not all(any(viable[n] for n in graph.class_nodes[r]) for r in graph.roots):
        return None
    free: dict[int, int] = {}
    for n in range(graph.num_nodes):
        k = graph.classes[n]
        if k not in free and graph.costs[n] == 0 and not graph.child_classes[n] and viable[n]:
            free[k] = n
    top = n_classes  # a root above the e-graph's roots
    dg = nx.DiGraph()
    dg.add_nodes_from(range(n_classes + 1))
    dg.add_edges_from((top, r) for r in graph.roots)
    weight = [0] * (n_classes + 1)
    for n in range(graph.num_nodes):
        c = graph.classes[n]
        if c in free or not viable[n]:
            continue
        weight[c] += 1
        dg.add_edges_from((c, k) for k in set(graph.child_classes[n]) if k not in free)
    idom = dict(nx.immediate_dominators(dg, top))
    idom[top] = top  # (networkx 3.5 leaves the start out)
    tree: dict[int, list[int]] = {v: [] for v in idom}
    for v, d in idom.items():
        if v != d:
            tree[d].append(v)
    # Euler intervals of the dominator tree, and its post-order (iteratively: no recursion)
    tin: dict[int, int] = {}
    tout: dict[int, int] = {}
    post: list[int] = []
    clock = 0
    stack: list[tuple[int, bool]] = [(top, False)]
    while stack:
        v, done = stack.pop()
        if done:
            tout[v] = clock - 1
            post.append(v)
            continue
        tin[v] = clock
        clock += 1
        stack.append((v, True))
        stack.extend((c, False) for c in tree[v])
    # a class separates when no edge leaves its dominator subtree
    low = {v: min((tin[k] for k in dg.successors(v)), default=tin[v]) for v in idom}
    high = {v: max((tin[k] for k in dg.successors(v)), default=tin[v]) for v in idom}
    roots = set(graph.roots)
    cut: set[int] = set()
    size = dict.fromkeys(idom, 0)
    for v in post:  # children before parents
        for c in tree[v]:
            low[v] = min(low[v], low[c])
            high[v] = max(high[v], high[c])
            size[v] += 1 if c in cut else size[c]
        size[v] += weight[v]
        if (v != top and v not in roots and dg.out_degree(v) and size[v] >= min_part
                and low[v] >= tin[v] and high[v] <= tout[v]):
            cut.add(v)
    if not cut:
        return None
    owner: dict[int, int] = {top: top}
    order = [top]
    while order:
        v = order.pop()
        for c in tree[v]:
            owner[c] = c if c in cut else owner[v]
            order.append(c)
    members: dict[int, list[int]] = {p: [] for p in (*cut, top)}
    below: dict[int, list[int]] = {p: [] for p in (*cut, top)}
    for v in idom:
        if v == top or v in free:
            continue
        if v in cut:
            below[owner[idom[v]]].append(v)
        members[owner[v]].append(v)
    parts = [Part(None if p == top else p, sorted(members[p]), sorted(below[p]))
             for p in post if p in cut or p == top]
    return Split(parts, free, viable)
