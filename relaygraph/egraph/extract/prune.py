"""Shrinking an e-graph before exact (ILP) extraction, keeping every DAG-optimal answer.

- Nodes that can never be in an acyclic term go: subsumed nodes, self-loops, and nodes with a
  child class that has no acyclic term (a bottom-up closure from the leaves).
- Only classes reachable from the roots through the remaining nodes stay.
- A node is dropped when another node of its class costs no more and needs a subset of its
  child classes: swapping it in keeps any solution valid and acyclic and costs no more
  (when no cost is negative: otherwise the classes it stops needing might have paid back).
- Classes that must be in every answer and have one node left fix that node (``forced``).
- Order variables are needed only inside strongly connected components of the class graph:
  an edge between components can never be on a cycle.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from .gym import ExtractionGraph

__all__ = ["Pruned", "prune", "path_bounds", "components", "derivable"]

_DOMINANCE_PAIRS = 4_000_000  # above this many comparisons in a class, skip its dominance check


@dataclass
class Pruned:
    """What survives pruning, and how dropped nodes map to the nodes that replace them."""

    nodes: list[int]  # kept node indices
    classes: list[int]  # kept class indices
    class_nodes: dict[int, list[int]]  # kept class -> its kept nodes
    kids: dict[int, tuple[int, ...]]  # kept node -> its distinct child classes
    forced: set[int] = field(default_factory=set)  # nodes that every answer contains
    replaced_by: dict[int, int] = field(default_factory=dict)  # dominated node -> its dominator
    scc: dict[int, int] = field(default_factory=dict)  # class on a cycle -> its component id
    scc_size: dict[int, int] = field(default_factory=dict)  # component id -> number of classes
    roots: list[int] | None = None  # classes that must be chosen (None: the e-graph's roots)


def derivable(graph: ExtractionGraph) -> list[bool]:
    """Nodes whose child classes all have acyclic terms (a least fixed point from the leaves)."""
    ok_node = [False] * graph.num_nodes
    ok_class = [False] * graph.num_classes
    kids = [set(c) for c in graph.child_classes]
    pending = [len(k) for k in kids]
    queue = deque(i for i in range(graph.num_nodes) if not kids[i] and graph.usable(i))
    while queue:
        node = queue.popleft()
        ok_node[node] = True
        k = graph.classes[node]
        if ok_class[k]:
            continue
        ok_class[k] = True
        for p in graph.parents[k]:
            pending[p] -= 1
            if pending[p] == 0 and graph.usable(p):
                queue.append(p)
    return ok_node


def _reachable(graph: ExtractionGraph, keep: list[bool]) -> set[int]:
    seen = set(graph.roots)
    stack = list(graph.roots)
    while stack:
        k = stack.pop()
        for node in graph.class_nodes[k]:
            if keep[node]:
                for c in graph.child_classes[node]:
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
    return seen


def _dominated(graph: ExtractionGraph, nodes: list[int]) -> dict[int, int]:
    """Nodes of one class made redundant by a no-costlier node with a subset of child classes."""
    if len(nodes) < 2 or len(nodes) ** 2 > _DOMINANCE_PAIRS:
        return {}
    costs = graph.costs
    order = sorted(nodes, key=lambda i: (costs[i], len(set(graph.child_classes[i])), i))
    kept: list[tuple[int, frozenset]] = []
    out: dict[int, int] = {}
    for node in order:
        mine = frozenset(graph.child_classes[node])
        for other, theirs in kept:
            if theirs <= mine:  # cheaper-or-equal by the sort, and needs no more
                out[node] = other
                break
        else:
            kept.append((node, mine))
    return out


def components(classes: list[int], kids_of_class: dict[int, set[int]]) -> dict[int, int]:
    """Tarjan's strongly connected components, iteratively; returns class -> component id."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    comp: dict[int, int] = {}
    counter = 0
    for start in classes:
        if start in index:
            continue
        work = [(start, iter(kids_of_class.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(kids_of_class.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp[w] = v
                    if w == v:
                        break
    return comp


def prune(graph: ExtractionGraph) -> Pruned:
    """Shrink ``graph`` for exact extraction (see the module docstring)."""
    keep = derivable(graph)
    replaced: dict[int, int] = {}
    dominance = min(graph.costs, default=0.0) >= 0
    for k in _reachable(graph, keep) if dominance else ():
        alive = [n for n in graph.class_nodes[k] if keep[n]]
        for node, other in _dominated(graph, alive).items():
            keep[node] = False
            replaced[node] = other
    classes = sorted(_reachable(graph, keep))
    class_nodes = {k: [n for n in graph.class_nodes[k] if keep[n]] for k in classes}
    kids = {n: tuple(sorted(set(graph.child_classes[n]))) for ns in class_nodes.values() for n in ns}
    nodes = sorted(kids)
    pruned = Pruned(nodes, classes, class_nodes, kids, replaced_by=replaced)
    # Classes every answer needs: the roots, and the children of nodes they are forced to use.
    required = deque(r for r in graph.roots if r in class_nodes)
    seen = set(required)
    while required:
        k = required.popleft()
        if len(class_nodes[k]) != 1:
            continue
        node = class_nodes[k][0]
        pruned.forced.add(node)
        for c in kids[node]:
            if c not in seen:
                seen.add(c)
                required.append(c)
    kids_of_class = {k: {c for n in class_nodes[k] for c in kids[n]} for k in classes}
    comp = components(classes, kids_of_class)
    sizes: dict[int, int] = {}
    for c in comp.values():
        sizes[c] = sizes.get(c, 0) + 1
    pruned.scc = {k: c for k, c in comp.items() if sizes[c] > 1}
    pruned.scc_size = {c: s for c, s in sizes.items() if s > 1}
    return pruned


def path_bounds(graph: ExtractionGraph) -> tuple[list[float], list[float]]:
    """Lower bounds on the DAG cost of any acyclic term, per class and per node.

    A term's DAG holds the sub-DAG of each child, so its cost is at least the node's cost plus
    the largest child bound; the cheapest such bound per class is found bottom-up (Knuth's
    algorithm with ``max`` in place of ``+``). Cycles cannot make a class cheaper here, which
    is what the cover rows of the integer program miss.
    """
    costs, child_classes, classes = graph.costs, graph.child_classes, graph.classes
    by_class = [math.inf] * graph.num_classes
    by_node = [math.inf] * graph.num_nodes
    pending = [len(set(ccs)) for ccs in child_classes]
    heap = [(costs[i], i) for i in range(graph.num_nodes) if not child_classes[i] and graph.usable(i)]
    heapq.heapify(heap)
    while heap:
        value, node = heapq.heappop(heap)
        by_node[node] = value
        k = classes[node]
        if by_class[k] < math.inf:
            continue
        by_class[k] = value
        for p in graph.parents[k]:
            pending[p] -= 1
            if pending[p] == 0 and graph.usable(p):
                heapq.heappush(heap, (costs[p] + max(by_class[c] for c in child_classes[p]), p))
    return by_class, by_node
