"""Shrinking an e-graph to its decision core before exact extraction, keeping one optimal answer.

The reduced e-graph has the same roots and optimum; ``Reduction.expand`` maps its answers back.
Repeated to a fixed point:

- Infeasible options go: a node whose class every acyclic term of one of its children needs
  (``required`` sets, a greatest fixed point over bit sets) can only be part of a cycle, and
  nodes whose children have no acyclic term are dropped bottom-up.
- Dominated options go: a node is dropped when another node of its class costs no more and
  needs only classes that every term of the first one's children contains anyway. Swapping it
  in keeps an acyclic answer acyclic (those classes lie below it) and needs no new class.
- A non-root class left with one node of cost 0 disappears: its parents take its children.
- A non-root class left with one node that the nodes of one other class alone use is merged
  into those users (an answer picks one of them at most): each takes its cost and children.

Dominance assumes costs are non-negative (dropping classes from an answer never makes it
dearer); with a negative cost anywhere it is skipped and the other steps, which keep every
answer's cost, still apply.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from .gym import ExtractionError, ExtractionGraph
from .prune import components

__all__ = ["Reduction", "reduce_graph"]

_REQUIRED_LIMIT = 5000  # classes of a cyclic component up to which required sets are computed


@dataclass
class _Option:
    node: int  # the node of the original e-graph this option chooses
    cost: float
    kids: frozenset[int]  # classes of the original e-graph still in the reduced one
    absorbed: tuple[int, ...] = ()  # nodes of merged or dissolved classes it also chooses


@dataclass
class Reduction:
    """A reduced e-graph and how to turn its answers into answers of the original."""

    original: ExtractionGraph
    graph: ExtractionGraph
    node_of: list[int]  # reduced node -> original node
    absorbed: list[tuple[int, ...]]  # reduced node -> original nodes chosen with it
    fixed: dict[int, int] = field(default_factory=dict)  # dissolved class -> its original node
    replaced_by: dict[int, int] = field(default_factory=dict)  # dropped node -> a better one
    stats: dict = field(default_factory=dict)

    def expand(self, choice: dict[int, int]) -> dict[int, int]:
        """An original choice for a reduced one (unneeded classes included)."""
        g = self.original
        out = dict(self.fixed)
        for n in choice.values():
            for m in (self.node_of[n], *self.absorbed[n]):
                out[g.classes[m]] = m
        return out

    def restrict(self, choice: dict[int, int]) -> dict[int, int]:
        """A reduced choice for an acyclic original one, no costlier once expanded."""
        reduced_node = {m: i for i, m in enumerate(self.node_of)}
        out: dict[int, int] = {}
        for k, class_id in enumerate(self.graph.class_ids):
            m = choice.get(int(class_id))
            while m is not None and m not in reduced_node:
                m = self.replaced_by.get(m)
            if m is not None:
                out[k] = reduced_node[m]
        return out


def _required(members: list[int], options: dict[int, list[_Option]], index: dict[int, int]) -> dict[int, int]:
    """Per class of one strongly connected component, the classes of that component that every
    acyclic term of it contains, as bit sets over ``index`` (children outside the component
    contribute nothing)."""
    alternatives = {k: [[c for c in o.kids if c in index] for o in options[k]] for k in members}
    return requirement_sets(members, alternatives)


def requirement_sets(members: list[int], alternatives: dict[int, list], deadline: float = math.inf
                     ) -> dict[int, int] | None:
    """Per class of ``members``, the members every acyclic term of it contains, as a bit set over
    the positions in ``members``; ``alternatives[k]`` lists, per option of ``k``, its children
    among ``members``. None when ``deadline`` (``time.perf_counter()``) passes first.

    The greatest fixed point of ``req(d) = {d} | meet over options of (union of req(child))``,
    computed downward from "everything" with a work list. Any fixed point is sound: by induction
    on a term's height, a term of ``d`` holds ``d`` and the terms of its children.
    """
    index = {k: i for i, k in enumerate(members)}
    full = (1 << len(members)) - 1
    req = dict.fromkeys(members, full)
    users: dict[int, set[int]] = {k: set() for k in members}
    for k in members:
        for kids in alternatives[k]:
            for c in kids:
                users[c].add(k)
    queue = deque(members)
    queued = set(members)
    steps = 0
    while queue:
        steps += 1
        if steps % 1024 == 0 and time.perf_counter() > deadline:
            return None
        k = queue.popleft()
        queued.discard(k)
        meet = full
        for kids in alternatives[k]:
            union = 0
            for c in kids:
                union |= req[c]
            meet &= union
        value = meet | (1 << index[k])
        if value != req[k]:
            req[k] = value
            for u in users[k]:
                if u not in queued:
                    queued.add(u)
                    queue.append(u)
    return req


def _derivable(classes: list[int], options: dict[int, list[_Option]]) -> set[int]:
    """Classes with an acyclic term, bottom-up from the leaves."""
    users: dict[int, list[tuple[int, int]]] = {k: [] for k in classes}
    pending: dict[tuple[int, int], int] = {}
    queue = deque()
    for k in classes:
        for i, o in enumerate(options[k]):
            pending[k, i] = len(o.kids)
            if not o.kids:
                queue.append(k)
            for c in o.kids:
                users[c].append((k, i))
    done: set[int] = set()
    while queue:
        k = queue.popleft()
        if k in done:
            continue
        done.add(k)
        for key in users[k]:
            pending[key] -= 1
            if pending[key] == 0:
                queue.append(key[0])
    return done


class _Reducer:
    def __init__(self, graph: ExtractionGraph) -> None:
        self.graph = graph
        self.roots = set(graph.roots)
        self.options: dict[int, list[_Option]] = {}
        for k, nodes in enumerate(graph.class_nodes):
            self.options[k] = [_Option(n, graph.costs[n], frozenset(graph.child_classes[n]))
                               for n in nodes if n not in graph.subsumed]
        self.fixed: dict[int, int] = {}
        self.replaced_by: dict[int, int] = {}
        self.stats = {"infeasible": 0, "dominated": 0, "dissolved": 0, "merged": 0}
        self.dominance = min(graph.costs, default=0.0) >= 0

    def run(self) -> None:
        while True:
            self._trim()
            changed = self._drop_by_requirements()
            if not changed:
                changed = self._dissolve_and_merge()
            if not changed:
                return

    def _trim(self) -> None:
        """Drop options with underivable children, then classes the roots cannot reach."""
        while True:
            classes = list(self.options)
            alive = _derivable(classes, self.options)
            dropped = False
            for k in classes:
                if k not in alive:
                    del self.options[k]
                    dropped = True
            if not dropped:
                break
            for k, opts in self.options.items():
                keep = [o for o in opts if o.kids <= alive]
                self.stats["infeasible"] += len(opts) - len(keep)
                self.options[k] = keep
        seen = set(r for r in self.roots if r in self.options)
        stack = list(seen)
        while stack:
            k = stack.pop()
            for o in self.options[k]:
                for c in o.kids:
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
        self.options = {k: v for k, v in self.options.items() if k in seen}

    def _drop_by_requirements(self) -> bool:
        kids_of_class = {k: {c for o in opts for c in o.kids} for k, opts in self.options.items()}
        comp = components(sorted(self.options), kids_of_class)
        members: dict[int, list[int]] = {}
        for k, c in comp.items():
            members.setdefault(c, []).append(k)
        changed = False
        for group in members.values():
            index = {k: i for i, k in enumerate(group)}
            if len(group) > 1 and len(group) <= _REQUIRED_LIMIT:
                req = _required(group, self.options, index)
            else:  # a lone class, or a component too large for the analysis: a class needs itself
                req = {k: 1 << i for k, i in index.items()}
            for k in group:
                changed |= self._drop_options(k, index, req)
        return changed

    def _drop_options(self, k: int, index: dict[int, int], req: dict[int, int]) -> bool:
        """Drop the options of ``k`` that close a cycle or that another option dominates."""
        bit = 1 << index[k]
        feasible: list[tuple[_Option, int, int, frozenset[int]]] = []
        for o in self.options[k]:
            closure = 0
            for c in o.kids:
                if c in index:
                    closure |= req[c]
            if closure & bit:
                self.stats["infeasible"] += 1
                continue
            outside = frozenset(c for c in o.kids if c not in index)
            feasible.append((o, closure, _bits(o.kids, index), outside))
        feasible.sort(key=lambda item: (item[0].cost, len(item[0].kids), item[0].node))
        kept: list[tuple[_Option, int, int, frozenset[int]]] = []
        for item in feasible:
            o, closure, _, outside = item
            # p may stand in for o when it needs only classes below o anyway (see the docstring)
            better = None
            if self.dominance:
                better = next((p for p, _, inside, out in kept if inside & ~closure == 0 and out <= outside),
                              None)
            if better is None:
                kept.append(item)
            else:
                self.replaced_by[o.node] = better.node
                self.stats["dominated"] += 1
        changed = len(kept) != len(self.options[k])
        self.options[k] = [item[0] for item in kept]
        return changed

    def _dissolve_and_merge(self) -> bool:
        users: dict[int, set[tuple[int, int]]] = {k: set() for k in self.options}
        for k, opts in self.options.items():
            for i, o in enumerate(opts):
                for c in o.kids:
                    users[c].add((k, i))
        changed = False
        for k in list(self.options):
            opts = self.options[k]
            if k in self.roots or len(opts) != 1 or k in opts[0].kids:
                continue
            only = opts[0]
            if only.cost == 0:
                self.fixed[k] = only.node
                for m in only.absorbed:
                    self.fixed[self.graph.classes[m]] = m
                self.stats["dissolved"] += 1
            elif len({p for p, _ in users[k]}) == 1:  # one class uses it, by one option at a time
                self.stats["merged"] += 1
            else:
                continue
            for p, i in users[k]:
                host = self.options[p][i]
                extra = (only.node, *only.absorbed) if only.cost else ()
                self.options[p][i] = _Option(host.node, host.cost + only.cost, (host.kids - {k}) | only.kids,
                                             host.absorbed + extra)
                for c in only.kids:
                    users[c].add((p, i))
            for c in only.kids:
                users[c].discard((k, 0))
            del self.options[k]
            del users[k]
            changed = True
        return changed


def _bits(classes, index: dict[int, int]) -> int:
    out = 0
    for c in classes:
        if c in index:
            out |= 1 << index[c]
    return out


def reduce_graph(graph: ExtractionGraph) -> Reduction:
    """The decision core of ``graph`` (see the module docstring) as an e-graph of its own."""
    r = _Reducer(graph)
    r.run()
    missing = [k for k in graph.roots if k not in r.options]
    if missing:
        raise ExtractionError(f"{graph.name}: root e-class {graph.class_ids[missing[0]]!r} has no "
                              f"acyclic term")
    classes = sorted(r.options)
    new_class = {k: i for i, k in enumerate(classes)}
    node_of: list[int] = []
    absorbed: list[tuple[int, ...]] = []
    kids: list[list[int]] = []
    costs: list[float] = []
    for k in classes:
        for o in r.options[k]:
            node_of.append(o.node)
            absorbed.append(o.absorbed)
            kids.append(sorted(new_class[c] for c in o.kids))
            costs.append(o.cost)
    first = {}
    for i, n in enumerate(node_of):
        first.setdefault(new_class[graph.classes[n]], i)
    reduced = ExtractionGraph([str(i) for i in range(len(node_of))], [graph.ops[n] for n in node_of],
                              [new_class[graph.classes[n]] for n in node_of],
                              [[first[c] for c in ks] for ks in kids], [0.0] * len(costs),
                              [str(k) for k in classes], [new_class[k] for k in graph.roots], name=graph.name)
    reduced.costs = costs  # set afterwards: the original's costs were accepted already, negative ones too
    return Reduction(graph, reduced, node_of, absorbed, r.fixed, r.replaced_by, dict(r.stats))
