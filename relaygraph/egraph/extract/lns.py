"""Improving an acyclic answer by local search: swap one class's node while the DAG cost drops.

The search keeps a choice for every class that has an acyclic term (the needed ones and the
rest) and, per class, how many chosen nodes of needed classes use it (plus one for a root). A
move gives class ``k`` another node: the new node's child classes gain a user (a class reaching
one user becomes needed and passes the gain to its own children), then the old node's lose one
(a class reaching none drops out, likewise). The DAG cost changes by the cost of the classes
that became needed minus those that dropped, so a move costs the size of what it changes, not
the size of the answer. A move that lowers the cost is kept when the new node's sub-DAG does
not reach ``k`` (no cycle); every other move is undone from a journal of the counts it touched.

Costs may be any finite numbers: the counts make the answer exactly the classes the roots need.

The large-neighbourhood search (``neighbourhood_search``) and the ILP's relaxation-guided search
re-solve programs over a few free classes with every other class pinned (``restricted``): what
the pinned part of the answer needs whatever the free classes choose is left out of them, so
their size follows the neighbourhood, not the e-graph (on BERT a neighbourhood's program was
the whole e-graph's size before, and took seconds to build and presolve).
"""

from __future__ import annotations

import math
import random
import time

from .check import check, needed_classes
from .greedy import greedy_choice
from .gym import ExtractionError, ExtractionGraph

__all__ = ["local_search", "neighbourhood_search", "restricted", "combined"]

_REL_EPS = 1e-9  # an improvement below this (relative) is float noise


class _State:
    def __init__(self, graph: ExtractionGraph, choice: dict[int, int]) -> None:
        self.graph = graph
        self.kids = [tuple(set(ccs)) for ccs in graph.child_classes]
        self.costs = graph.costs
        self.full = dict(choice)
        self.ref = [0] * graph.num_classes
        self.journal: dict[int, int] | None = None
        self.delta = 0.0
        for r in graph.roots:
            self.ref[r] += 1
        for k in needed_classes(graph, choice):
            for c in self.kids[choice[k]]:
                self.ref[c] += 1

    def _touch(self, c: int) -> None:
        if self.journal is not None and c not in self.journal:
            self.journal[c] = self.ref[c]

    def _inc(self, start: int) -> None:
        stack = [start]
        while stack:
            c = stack.pop()
            self._touch(c)
            self.ref[c] += 1
            if self.ref[c] == 1:
                node = self.full[c]
                self.delta += self.costs[node]
                stack.extend(self.kids[node])

    def _dec(self, start: int) -> None:
        stack = [start]
        while stack:
            c = stack.pop()
            self._touch(c)
            self.ref[c] -= 1
            if self.ref[c] == 0:
                node = self.full[c]
                self.delta -= self.costs[node]
                stack.extend(self.kids[node])

    def try_move(self, k: int, new: int, threshold: float) -> float | None:
        """Give ``k`` the node ``new`` if that lowers the DAG cost by more than ``threshold``
        without a cycle; the change in cost, or None (state unchanged)."""
        old = self.full[k]
        self.journal = {}
        self.delta = self.costs[new] - self.costs[old]
        self.full[k] = new
        for c in self.kids[new]:
            self._inc(c)
        for c in self.kids[old]:
            self._dec(c)
        delta, journal = self.delta, self.journal
        self.journal = None
        if delta < -threshold and not self._reaches(new, k):
            return delta
        for c, value in journal.items():
            self.ref[c] = value
        self.full[k] = old
        return None

    def _reaches(self, node: int, target: int) -> bool:
        """Whether the chosen sub-DAG below ``node`` (a node of class ``target``) has a cycle.

        Before the move the needed classes were acyclic, so a cycle now lies below ``node``:
        through ``target`` itself, or among classes the move made needed (their old choices).
        """
        state = {target: 1}  # 1: on the current path, 2: finished
        stack: list[tuple[int, int]] = [(c, 0) for c in self.kids[node]]
        while stack:
            c, phase = stack.pop()
            if phase:
                state[c] = 2
                continue
            seen = state.get(c)
            if seen == 1:
                return True
            if seen == 2:
                continue
            state[c] = 1
            stack.append((c, 1))
            stack.extend((d, 0) for d in self.kids[self.full[c]])
        return False


def local_search(graph: ExtractionGraph, choice: dict[int, int], *, deadline: float | None = None,
                 seed: int = 0, on_improve=None) -> dict[int, int]:
    """A no-costlier acyclic choice reached from ``choice`` by improving single-class swaps.

    ``choice`` must be acyclic and complete; classes it leaves out take their greedy node when a
    move needs them. Stops at a local optimum or at ``deadline`` (``time.perf_counter()``);
    ``on_improve(cost)`` is called after each improvement.
    """
    full, _ = greedy_choice(graph)
    full.update(choice)
    state = _State(graph, full)
    cost = check(graph, {k: full[k] for k in needed_classes(graph, full)})
    rng = random.Random(seed)
    candidates = {k: [n for n in nodes if graph.usable(n) and all(c in full for c in graph.child_classes[n])]
                  for k, nodes in enumerate(graph.class_nodes) if k in full}
    candidates = {k: ns for k, ns in candidates.items() if len(ns) > 1}
    improved = True
    while improved:
        improved = False
        order = [k for k in candidates if state.ref[k] > 0]
        rng.shuffle(order)
        for k in order:
            if deadline is not None and time.perf_counter() > deadline:
                return _trimmed(graph, state.full)
            if state.ref[k] == 0:
                continue
            for n in candidates[k]:
                if n == state.full[k]:
                    continue
                delta = state.try_move(k, n, _REL_EPS * max(1.0, abs(cost)))
                if delta is not None:
                    cost += delta
                    improved = True
                    if on_improve is not None:
                        on_improve(cost)
    return _trimmed(graph, state.full)


def _trimmed(graph: ExtractionGraph, full: dict[int, int]) -> dict[int, int]:
    return {k: full[k] for k in needed_classes(graph, full)}


def neighbourhood_search(graph: ExtractionGraph, pruned, choice: dict[int, int], *, deadline: float,
                         solve_sub, patience: float = math.inf, seed: int = 0,
                         on_improve=None) -> tuple[dict[int, int], bool]:
    """Large-neighbourhood search: re-solve small integer programs around the best answer.

    Each step frees the classes near one class of the answer (breadth-first over the class
    graph, both directions) and pins every other class to one node: its node in the answer, or
    its greedy node. The program over what is free is small, includes the answer (so it never
    gets worse) and is solved to optimality or a short limit; the neighbourhood grows when
    steps are solved without gain and shrinks when they time out. When a neighbourhood grows to
    every class and is solved, the answer is optimal: the search stops and says so (the second
    value returned); it also stops after ``patience`` seconds without a gain. ``pruned`` is
    ``prune(graph)``; ``solve_sub(sub, choice, limit)`` solves the integer program restricted to
    the ``Pruned`` ``sub`` (see ``restricted``), started at ``choice``, within ``limit`` seconds,
    and returns the node it picks per class of ``sub`` (or None) and whether it proved them optimal.
    """
    full, _ = greedy_choice(graph)
    best = {k: choice[k] for k in needed_classes(graph, choice)}
    best_cost = check(graph, best)
    rng = random.Random(seed)
    neighbours: dict[int, set[int]] = {k: set() for k in pruned.classes}
    for k in pruned.classes:
        for n in pruned.class_nodes[k]:
            for c in pruned.kids[n]:
                if c in neighbours:
                    neighbours[k].add(c)
                    neighbours[c].add(k)
    size, min_size, max_size = 40, 8, max(8, len(pruned.classes))
    last_gain = time.perf_counter()
    while time.perf_counter() < min(deadline - 0.05, last_gain + patience):
        free_start = [k for k in best if len(pruned.class_nodes.get(k, ())) > 1]
        if not free_start:
            return best, False
        seen = {rng.choice(free_start)}
        frontier = list(seen)
        while frontier and len(seen) < size:
            nxt = []
            for k in frontier:
                for c in neighbours[k]:
                    if c not in seen and len(seen) < size:
                        seen.add(c)
                        nxt.append(c)
            rng.shuffle(nxt)
            frontier = nxt
        sub, pin = restricted(graph, pruned, best, seen, full)
        limit = min(max(1.0, 0.1 * (deadline - time.perf_counter())), deadline - time.perf_counter())
        if limit <= 0.05:
            break
        whole = len(seen) == len(pruned.classes)
        picks, solved = solve_sub(sub, best, limit)
        found = None if picks is None else combined(graph, pin, picks)
        cost = math.inf if found is None else check(graph, found)
        if cost < best_cost - _REL_EPS * max(1.0, abs(best_cost)):
            best, best_cost = found, cost
            last_gain = time.perf_counter()
            if on_improve is not None:
                on_improve(cost)
        if solved and whole:
            return best, True
        if solved:
            size = min(max_size, int(size * 1.5) + 1)
        elif cost >= best_cost:
            size = max(min_size, int(size / 1.5))
    return best, False


def restricted(graph: ExtractionGraph, pruned, choice: dict[int, int], free: set[int],
               fallback: dict[int, int]):
    """The program over the classes ``free``, every other class pinned to one node.

    A pinned class takes its node in ``choice`` (an acyclic answer), else in ``fallback``.
    Classes the pinned part of the answer needs whatever the free classes choose ("always on")
    are left out, their cost being the same in every answer of the program, unless one of them
    lies above a free class (then it stays, required, so that a cycle through it shows). What
    stays: the free classes, the pinned classes below them, those always-on ones, and as
    required classes the roots and the free classes the always-on part uses. Returns a
    ``Pruned`` (with ``roots`` set) and the pinned choice of every class.
    """
    from .prune import Pruned, components

    pin = {k: pruned.replaced_by.get(n, n) for k, n in fallback.items() if k in pruned.class_nodes}
    pin.update((k, pruned.replaced_by.get(n, n)) for k, n in choice.items())
    free = set(free) | {k for k in pruned.classes if k not in pin}  # nothing to pin them to
    kids = pruned.kids
    on = {r for r in graph.roots if r not in free}
    required = {r for r in graph.roots if r in free}
    stack = list(on)
    users: dict[int, list[int]] = {}  # always-on class -> always-on classes whose node uses it
    while stack:
        k = stack.pop()
        for c in kids[pin[k]]:
            if c in free:
                required.add(c)
                continue
            users.setdefault(c, []).append(k)
            if c not in on:
                on.add(c)
                stack.append(c)
    above = set()  # always-on classes whose pinned sub-DAG reaches a free class
    stack = [k for k in on if any(c in free for c in kids[pin[k]])]
    above.update(stack)
    while stack:
        k = stack.pop()
        for u in users.get(k, ()):
            if u not in above:
                above.add(u)
                stack.append(u)
    keep = set(free) | above
    stack = list(keep)
    while stack:  # pinned classes below what is kept, other than the always-on ones left out
        k = stack.pop()
        for n in (pruned.class_nodes[k] if k in free else [pin[k]]):
            for c in kids[n]:
                if c not in keep and c not in on:
                    keep.add(c)
                    stack.append(c)
    class_nodes = {k: (list(pruned.class_nodes[k]) if k in free else [pin[k]]) for k in keep}
    sub_kids = {n: tuple(c for c in kids[n] if c in keep) for ns in class_nodes.values() for n in ns}
    classes = sorted(keep)
    comp = components(classes, {k: {c for n in class_nodes[k] for c in sub_kids[n]} for k in classes})
    sizes: dict[int, int] = {}
    for c in comp.values():
        sizes[c] = sizes.get(c, 0) + 1
    sub = Pruned(sorted(sub_kids), classes, class_nodes, sub_kids, replaced_by=pruned.replaced_by,
                 scc={k: c for k, c in comp.items() if sizes[c] > 1},
                 scc_size={c: s for c, s in sizes.items() if s > 1}, roots=sorted(required | above))
    return sub, pin


def combined(graph: ExtractionGraph, pin: dict[int, int], picks: dict[int, int]) -> dict[int, int] | None:
    """The answer made of a sub-program's picks and the pinned nodes elsewhere (None if invalid)."""
    full = dict(pin)
    full.update(picks)
    try:
        out = {k: full[k] for k in needed_classes(graph, full)}
        check(graph, out)
    except ExtractionError:
        return None
    return out
