"""Tree-optimal extraction, bottom-up with a priority queue (Knuth's generalisation of Dijkstra).

A node becomes a candidate once each of its child classes has its best node; candidates are
taken cheapest first, and the first candidate taken for a class is that class's best (costs are
non-negative and a node's tree cost is its cost plus its children's, so no later candidate can
be cheaper). Classes are settled in an order where children come first, so the choice is
acyclic by construction, and a class that is never settled has no acyclic term at all.

Negative costs: the answer is still complete and acyclic, each class is settled once and the run
ends after one pass, but it is tree-optimal only when no node costs less than zero (then a
parent can be cheaper than its child, and with a cycle through a negative node the tree cost
has no minimum at all). ``notes["tree_optimal"]`` says which case a result is in.
"""

from __future__ import annotations

import heapq
import math
import time

from .check import ExtractionResult, make_result
from .gym import ExtractionError, ExtractionGraph

__all__ = ["tree", "tree_choice", "require_roots"]


def tree_choice(graph: ExtractionGraph, *, every_class: bool = False) -> tuple[dict[int, int], list[float]]:
    """The tree-optimal node of the classes that have an acyclic term, and their tree costs.

    It stops once the roots are settled unless ``every_class``. Both are exact when no cost is
    negative; otherwise the choice is a valid acyclic one.
    """
    costs, child_classes, classes = graph.costs, graph.child_classes, graph.classes
    parents = graph.parents
    best = [math.inf] * graph.num_classes
    choice: dict[int, int] = {}
    pending = [len(set(ccs)) for ccs in child_classes]
    heap = [(costs[i], i) for i in range(graph.num_nodes) if not child_classes[i] and graph.usable(i)]
    heapq.heapify(heap)
    roots_left = set(graph.roots)
    while heap and (roots_left or every_class):
        value, node = heapq.heappop(heap)
        k = classes[node]
        if k in choice:
            continue
        choice[k] = node
        best[k] = value
        roots_left.discard(k)
        for p in parents[k]:
            pending[p] -= 1
            if pending[p] == 0 and classes[p] not in choice and graph.usable(p):
                heapq.heappush(heap, (costs[p] + sum(best[c] for c in child_classes[p]), p))
    return choice, best


def require_roots(graph: ExtractionGraph, choice: dict[int, int]) -> None:
    """Raise a clear error when a root class has no acyclic term."""
    for r in graph.roots:
        if r not in choice:
            raise ExtractionError(f"{graph.name}: root e-class {graph.class_ids[r]!r} has no acyclic "
                                  f"term: every node in it depends on a cycle")


def tree(graph: ExtractionGraph) -> ExtractionResult:
    """Extract the tree-cost-optimal term of every root (optimal when no cost is negative)."""
    start = time.perf_counter()
    choice, _ = tree_choice(graph)
    require_roots(graph, choice)
    optimal = all(c >= 0 for c in graph.costs)
    return make_result("tree", graph, choice, time.perf_counter() - start,
                       notes={"tree_optimal": optimal})
