"""Greedy DAG extraction: each class takes the node whose whole sub-DAG is cheapest.

The cost of a node is its own cost plus the cost of the union of the classes its children
need, so a class shared by two children is paid once. Every class keeps the set of classes
(with costs) of its current best node; sets are persistent tries (see ``pset``) so deep
e-graphs stay near-linear. Candidates are taken cheapest first from a priority queue, and the
parents of a class are re-evaluated whenever its cost improves, until nothing improves. A node
whose children already need its own class would close a cycle and is skipped.

Because a class may improve after a parent used its old set, the assembled choice can still
contain a cycle (published greedy extractors have failed this way). When it does, the choice is
rebuilt bottom-up so that it is acyclic: classes settle children-first, each taking its greedy
node as soon as that node's children are settled, and a class stuck on a cycle takes the
cheapest of its nodes whose children are settled.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time

from ...ir.node import paused_gc
from . import pset
from .check import ExtractionResult, find_cycle, make_result, needed_classes
from .gym import ExtractionGraph
from .tree import require_roots

__all__ = ["greedy_dag", "greedy_choice", "realize_acyclic"]

_REL_EPS = 1e-12  # an improvement smaller than this is float noise, not a better term


def greedy_choice(graph: ExtractionGraph) -> tuple[dict[int, int], list[float]]:
    """The greedy node of every class that has an acyclic term, and its estimated sub-DAG cost."""
    n_classes = graph.num_classes
    levels = pset.levels_for(n_classes)
    costs, classes, parents = graph.costs, graph.classes, graph.parents
    kids = [tuple(set(ccs)) for ccs in graph.child_classes]
    usable = [graph.usable(i) for i in range(graph.num_nodes)]
    key_of = [-1] * n_classes  # keys in the order classes first get a term: recent ones cluster
    next_key = 0
    best_set: list = [None] * n_classes
    best_total = [math.inf] * n_classes
    choice: dict[int, int] = {}
    pending = [len(k) for k in kids]
    version = [0] * graph.num_nodes
    union, contains = pset.union, pset.contains
    # Candidates are taken cheapest first (as in Dijkstra's algorithm), so a class usually gets
    # its final node at once instead of improving many times. An entry is stale once its node
    # was re-evaluated (``version``).
    heap: list = []

    def evaluate(node: int) -> None:
        s = None
        for c in kids[node]:
            s = union(s, best_set[c], levels)
        k = classes[node]
        if key_of[k] >= 0 and contains(s, key_of[k], levels):
            return  # this node's children already need its class: a cycle
        value = pset.total(s) + costs[node]
        if value < best_total[k] - _REL_EPS * best_total[k] or key_of[k] < 0:
            version[node] += 1
            heapq.heappush(heap, (value, node, version[node], s))

    for i in range(graph.num_nodes):
        if not kids[i] and usable[i]:
            evaluate(i)
    while heap:
        value, node, ver, s = heapq.heappop(heap)
        k = classes[node]
        if ver != version[node]:
            continue
        first = key_of[k] < 0
        if not first and not value < best_total[k] - _REL_EPS * best_total[k]:
            continue
        if first:
            key_of[k] = next_key
            next_key += 1
        best_set[k] = union(s, pset.singleton(key_of[k], costs[node], levels), levels)
        best_total[k] = value
        choice[k] = node
        for p in parents[k]:
            if first:
                pending[p] -= 1
            if pending[p] == 0 and usable[p]:
                evaluate(p)
    return choice, best_total


def realize_acyclic(graph: ExtractionGraph, preferred: dict[int, int],
                    estimate: list[float]) -> dict[int, int]:
    """An acyclic choice that keeps ``preferred`` wherever it can.

    Classes settle children-first. A preferred node is taken as soon as its children are
    settled; when none is ready, the ready node with the lowest ``cost + sum(estimate[child])``
    settles its class, which breaks the cycle the preferred nodes formed.
    """
    costs, classes, parents = graph.costs, graph.classes, graph.parents
    child_classes = graph.child_classes
    pending = [len(set(ccs)) for ccs in child_classes]
    order = itertools.count()
    heap: list = []

    def push(node: int) -> None:
        if preferred.get(classes[node]) == node:
            heapq.heappush(heap, (0, 0.0, next(order), node))
        else:
            guess = costs[node] + sum(estimate[c] for c in child_classes[node])
            heapq.heappush(heap, (1, guess, next(order), node))

    for i in range(graph.num_nodes):
        if not child_classes[i] and graph.usable(i):
            push(i)
    choice: dict[int, int] = {}
    roots_left = set(graph.roots)
    while heap and roots_left:
        node = heapq.heappop(heap)[3]
        k = classes[node]
        if k in choice:
            continue
        choice[k] = node
        roots_left.discard(k)
        for p in parents[k]:
            pending[p] -= 1
            if pending[p] == 0 and classes[p] not in choice and graph.usable(p):
                push(p)
    return choice


def greedy_dag(graph: ExtractionGraph) -> ExtractionResult:
    """Extract with the greedy DAG heuristic; the answer is always acyclic and complete."""
    start = time.perf_counter()
    with paused_gc():  # the tries are acyclic tuples: cycle collection over them is pure overhead
        choice, estimate = greedy_choice(graph)
    require_roots(graph, choice)
    repaired = False
    needed = {k: choice[k] for k in needed_classes(graph, choice)}
    if find_cycle(graph, needed) is not None:
        choice = realize_acyclic(graph, choice, estimate)
        require_roots(graph, choice)
        repaired = True
    return make_result("greedy-dag", graph, choice, time.perf_counter() - start,
                       notes={"cycle_repaired": repaired})
