"""Greedy DAG extraction: each class takes the node whose whole sub-DAG is cheapest.

The cost of a node is its own cost plus the cost of the union of the classes its children
need, so a class shared by two children is paid once. Every class keeps the set of classes
(with costs) of its current best node; sets are persistent tries (see ``pset``) so deep
e-graphs stay near-linear. Candidates are taken cheapest first from a priority queue, and the
parents of a class are re-evaluated whenever its cost improves, until nothing improves. A node
whose children already need its own class would close a cycle and is skipped. Unions are the
expensive step, so while no cost is negative a node enters the queue under a cheap lower bound
(its cost plus its dearest child's) and its union is taken only when that bound comes first;
a node whose bound cannot beat its class's best is never unioned at all.

Because a class may improve after a parent used its old set, the assembled choice can still
contain a cycle (published greedy extractors have failed this way). When it does, the choice is
rebuilt bottom-up so that it is acyclic: classes settle children-first, each taking its greedy
node as soon as that node's children are settled, and a class stuck on a cycle takes the
cheapest of its nodes whose children are settled.

``greedy_dag(graph, improve=True)`` (extractor name ``greedy-dag+ls``) then improves the answer
by local search: a needed class switches to another of its nodes whenever that lowers the DAG
cost of the whole answer, counted exactly with reference counts, and keeps the answer acyclic.

Negative costs: every answer is still complete and acyclic and every run ends: a class
re-chooses a bounded number of times (``_MAX_IMPROVEMENTS_NEGATIVE``), so the work stays within
a constant factor of the e-graph's size. The lower bound is not used then, and a greedy choice is
a heuristic as always (it may miss that a shared negative node is paid once). Local search
counts any finite costs exactly; it switches one class at a time, so an answer that needs two
classes switched at once (a cycle of negative nodes, say) can stay out of its reach.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Sequence

from ...ir.node import paused_gc
from . import pset
from .check import ExtractionResult, check, find_cycle, make_result, needed_classes
from .gym import ExtractionGraph
from .tree import require_roots, tree_choice

__all__ = ["greedy_dag", "greedy_choice", "realize_acyclic", "improve_choice"]

_REL_EPS = 1e-12  # an improvement smaller than this is float noise, not a better term
# A class re-chooses at most this many times. With non-negative costs the cheapest-first order
# makes re-choices rare (the corpus never comes near the bound); with negative ones a class's
# improvement can start a cascade through its ancestors, and local search does better work.
_MAX_IMPROVEMENTS = 64
_MAX_IMPROVEMENTS_NEGATIVE = 2


def _beats(value: float, best: float) -> bool:
    # abs(): with a negative best, ``best * (1 - eps)`` lies above best and would accept ties.
    return value < best - _REL_EPS * abs(best)


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
    improvements = [0] * n_classes
    choice: dict[int, int] = {}
    pending = [len(k) for k in kids]
    version = [0] * graph.num_nodes
    union, contains, total, singleton = pset.union, pset.contains, pset.total, pset.singleton
    # With no negative cost a union weighs at least as much as its heaviest operand, which
    # makes "cost + dearest child" a lower bound on a node's value.
    bounded = all(c >= 0 for c in costs)
    cap = _MAX_IMPROVEMENTS if bounded else _MAX_IMPROVEMENTS_NEGATIVE
    # Candidates are taken cheapest first (as in Dijkstra's algorithm), so a class usually gets
    # its final node at once instead of improving many times. An entry is stale once its node
    # was re-evaluated (``version``). Entries are (key, node, version, exact, set): ``exact``
    # False means the key is the lower bound and the set is still to be taken.
    heap: list = []

    def children_set(node: int):
        s = None
        for c in kids[node]:
            s = union(s, best_set[c], levels)
        return s

    def evaluate(node: int) -> None:
        k = classes[node]
        settled = key_of[k] >= 0
        if settled and improvements[k] >= cap:
            return
        if bounded and len(kids[node]) > 1:
            bound = costs[node] + max(best_total[c] for c in kids[node])
            if settled and not _beats(bound, best_total[k]):
                return
            version[node] += 1
            heapq.heappush(heap, (bound, node, version[node], False, None))
            return
        s = children_set(node)
        if settled and contains(s, key_of[k], levels):
            return  # this node's children already need its class: a cycle
        value = total(s) + costs[node]
        if not settled or _beats(value, best_total[k]):
            version[node] += 1
            heapq.heappush(heap, (value, node, version[node], True, s))

    for i in range(graph.num_nodes):
        if not kids[i] and usable[i]:
            evaluate(i)
    while heap:
        value, node, ver, exact, s = heapq.heappop(heap)
        if ver != version[node]:
            continue
        k = classes[node]
        first = key_of[k] < 0
        if not first and not _beats(value, best_total[k]):
            continue
        if not exact:
            s = children_set(node)
            if not first and contains(s, key_of[k], levels):
                continue
            value = total(s) + costs[node]
            if not first and not _beats(value, best_total[k]):
                continue
            if heap and heap[0][0] < value:  # something cheaper comes first after all
                heapq.heappush(heap, (value, node, ver, True, s))
                continue
        if first:
            key_of[k] = next_key
            next_key += 1
        else:
            improvements[k] += 1
        best_set[k] = union(s, singleton(key_of[k], costs[node], levels), levels)
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


def _post_order(graph: ExtractionGraph, choice: dict[int, int], kids: list[tuple]) -> list[float]:
    """A position for every needed class, lower than each of its parents' (children first)."""
    pos = [0.0] * graph.num_classes
    state = bytearray(graph.num_classes)
    counter = 0
    for root in graph.roots:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            k, i = stack[-1]
            ks = kids[choice[k]]
            if i == len(ks):
                stack.pop()
                counter += 1
                pos[k] = float(counter)
                continue
            stack[-1] = (k, i + 1)
            c = ks[i]
            if not state[c]:
                state[c] = 1
                stack.append((c, 0))
    return pos


def improve_choice(graph: ExtractionGraph, choice: dict[int, int],
                   alternatives: Sequence[dict[int, int]] = (), *, max_passes: int = 8,
                   work_factor: int = 8) -> tuple[dict[int, int], int]:
    """Local search from a valid ``choice``: (a choice at most as costly, the number of switches).

    A needed class switches to another of its usable nodes whenever that lowers the exact DAG
    cost. Classes the new node needs and the answer lacks take their last node in the answer,
    else their node in the first of ``alternatives`` that gives a valid switch (a class with
    none rules the switch out). A switch that would close a cycle is never taken. Passes repeat
    until one changes nothing, at most ``max_passes``, and the classes visited stay under
    ``work_factor`` times the e-graph's size: near-linear. An invalid ``choice`` raises
    InvalidChoice.
    """
    check(graph, choice)
    costs, class_nodes, roots = graph.costs, graph.class_nodes, graph.roots
    kids = [tuple(dict.fromkeys(ccs)) for ccs in graph.child_classes]
    usable = [graph.usable(i) for i in range(graph.num_nodes)]
    maps = [dict(m) for m in alternatives]
    cur = dict(maps[0]) if maps else {}
    cur.update(choice)
    needed = needed_classes(graph, choice)
    refs = [0] * graph.num_classes  # needed classes whose chosen node has this child; roots +1
    for r in roots:
        refs[r] += 1
    for k in needed:
        for c in kids[cur[k]]:
            refs[c] += 1
    # Positions of a topological order of the answer (children lower): a class placed below the
    # switched one cannot need it, so most switches are checked without a search.
    pos = _post_order(graph, cur, kids)
    scale = max(1.0, math.fsum(abs(costs[cur[k]]) for k in needed))
    tol = _REL_EPS * scale
    size = graph.num_nodes + sum(len(k) for k in kids) + 1
    budget = work_factor * size
    work = 0

    def needs(c: int, k: int) -> bool:
        """Whether the answer's class ``c`` needs ``k`` (searching only above ``k`` in the order)."""
        nonlocal work
        limit = pos[k]
        seen = {c}
        stack = [c]
        while stack:
            x = stack.pop()
            work += 1
            if x == k:
                return True
            for y in kids[cur[x]]:
                if y not in seen and pos[y] >= limit:
                    seen.add(y)
                    stack.append(y)
        return False

    def attempt(k: int, old: int, new: int, alt: dict[int, int] | None) -> tuple[bool, bool]:
        """Switch ``k`` from ``old`` to ``new`` if that is acyclic and cheaper, else undo.

        Returns (switched, whether classes outside the answer were involved)."""
        nonlocal work, pos
        limit = pos[k]
        inc: list[int] = []
        dec: list[int] = []
        added: list[tuple[int, int]] = []  # newly needed classes and their nodes, children first
        active: set[int] = set()
        finished: set[int] = set()
        reorder = False
        low = -math.inf  # the highest position among the answer's classes the switch reaches
        gain = costs[old] - costs[new]
        ok = True
        frames = [(-1, -1, kids[new], 0)]
        while frames and ok:
            x, xn, ks, i = frames[-1]
            if i == len(ks):
                frames.pop()
                if x >= 0:
                    active.discard(x)
                    finished.add(x)
                    added.append((x, xn))
                continue
            frames[-1] = (x, xn, ks, i + 1)
            c = ks[i]
            refs[c] += 1
            inc.append(c)
            work += 1
            if refs[c] == 1:  # not in the answer: it comes with a node of its own
                node = cur.get(c) if alt is None else alt.get(c, cur.get(c))
                if node is None or not usable[node]:
                    ok = False
                    break
                gain -= costs[node]
                active.add(c)
                frames.append((c, node, kids[node], 0))
            elif c in active:
                ok = False  # the new classes' nodes form a cycle
            elif c not in finished:
                if pos[c] >= limit:
                    if needs(c, k):
                        ok = False
                    reorder = True
                low = max(low, pos[c])
        if ok:
            stack = list(kids[old])
            while stack:
                c = stack.pop()
                refs[c] -= 1
                dec.append(c)
                work += 1
                if refs[c] == 0:
                    gain += costs[cur[c]]
                    stack.extend(kids[cur[c]])
        if not ok or not gain > tol:
            for c in inc:
                refs[c] -= 1
            for c in dec:
                refs[c] += 1
            return False, bool(added) or not ok
        cur[k] = new
        for c, node in added:
            cur[c] = node
        if added and not reorder:
            # New classes fit between what they reach and ``k``, in the order they finished.
            base = low if low > -math.inf else limit - 1.0
            step = (limit - base) / (len(added) + 1)
            values = [base + step * (j + 1) for j in range(len(added))]
            reorder = not all(base < a < b < limit
                              for a, b in zip(values, values[1:] + [limit], strict=True))
            if not reorder:
                for (c, _), v in zip(added, values, strict=True):
                    pos[c] = v
        if reorder:  # the order no longer fits the answer (or ran out of float room): renumber
            pos = _post_order(graph, cur, kids)
            work += size
        return True, bool(added)

    # With no negative cost, a switch frees at most the tree cost below the old node, so a new
    # node that alone costs the old node's whole tree cannot pay: it is skipped without a walk.
    # Tree costs are taken once a pass, so after a switch they are estimates.
    signed = any(c < 0 for c in costs)
    swaps = 0
    for _ in range(max_passes):
        changed = False
        order = sorted((k for k in range(graph.num_classes) if refs[k] > 0), key=pos.__getitem__)
        below = [math.inf] * graph.num_classes
        if not signed:
            for k in order:  # children first
                below[k] = costs[cur[k]] + sum(below[c] for c in kids[cur[k]])
        for k in reversed(order):
            if refs[k] == 0:
                continue  # an earlier switch in this pass dropped it
            for n in class_nodes[k]:
                if work > budget:
                    break
                old = cur[k]
                if n == old or not usable[n] or costs[n] >= below[k]:
                    continue
                for alt in (None, *maps[1:]):
                    switched, involved = attempt(k, old, n, alt)
                    if switched:
                        swaps += 1
                        changed = True
                    if switched or not involved:
                        break
        if not changed or work > budget:
            break
    return {k: cur[k] for k in needed_classes(graph, cur)}, swaps


def greedy_dag(graph: ExtractionGraph, *, improve: bool = False) -> ExtractionResult:
    """Extract with the greedy DAG heuristic (``improve``: then local search, ``greedy-dag+ls``).

    The answer is always acyclic and complete; with ``improve`` it never costs more.
    """
    start = time.perf_counter()
    with paused_gc():  # the tries are acyclic tuples: cycle collection over them is pure overhead
        full, estimate = greedy_choice(graph)
    require_roots(graph, full)
    repaired = False
    choice = {k: full[k] for k in needed_classes(graph, full)}
    if find_cycle(graph, choice) is not None:
        choice = realize_acyclic(graph, full, estimate)
        require_roots(graph, choice)
        repaired = True
    notes: dict = {"cycle_repaired": repaired}
    if not improve:
        return make_result("greedy-dag", graph, choice, time.perf_counter() - start, notes=notes)
    first = make_result("greedy-dag", graph, choice, 0.0)
    # Search from greedy's answer and from the tree-optimal one (they often end in different
    # places); new classes take the greedy nodes first, the tree ones (acyclic among themselves)
    # when those fail.
    trees, _ = tree_choice(graph, every_class=True)
    result, swaps, start_name = first, 0, "greedy"
    tree_answer = {k: trees[k] for k in needed_classes(graph, trees)}
    for name, origin in (("greedy", first.choice), ("tree", tree_answer)):
        better, n = improve_choice(graph, origin, [full, trees])
        found = make_result("greedy-dag+ls", graph, better, 0.0)
        if found.dag_cost < result.dag_cost:  # never above greedy's, whatever float sums said
            result, swaps, start_name = found, n, name
    result.extractor = "greedy-dag+ls"
    notes.update(greedy_cost=first.dag_cost, swaps=swaps, start=start_name)
    result.notes, result.seconds = notes, time.perf_counter() - start
    return result
