"""The independent checker, and what every extractor returns.

A *choice* maps class indices to node indices. It is valid when every class needed from the
roots (a root, or a child class of a chosen node of a needed class) has a chosen node, that
node belongs to the class and is usable, and the chosen nodes form no cycle. Its DAG cost is
the sum of the costs of the chosen nodes of the needed classes, each class counted once; its
tree cost counts a class once per path from a root.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .gym import ExtractionError, ExtractionGraph

__all__ = ["InvalidChoice", "ExtractionResult", "check", "dag_cost", "tree_cost", "needed_classes",
           "find_cycle", "make_result"]


class InvalidChoice(ExtractionError):
    """A choice that misses a needed class, picks a foreign or unusable node, or has a cycle."""


@dataclass
class ExtractionResult:
    """One extractor's answer on one e-graph, with its checked costs and how it was found."""

    extractor: str
    graph: ExtractionGraph = field(repr=False)
    choice: dict[int, int] | None  # class index -> node index, the needed classes only
    dag_cost: float = math.nan
    tree_cost: float = math.nan
    seconds: float = 0.0
    optimal: bool | None = None  # proven DAG-optimal (ILP), None when the extractor cannot say
    gap: float | None = None  # the solver's relative gap (ILP)
    status: str = "ok"  # "ok", "time-limit" (best found returned) or "timeout" (no answer)
    notes: dict = field(default_factory=dict)

    def choice_ids(self) -> dict[str, str]:
        """The choice with the file's class and node ids."""
        g = self.graph
        return {g.class_ids[k]: g.node_ids[n] for k, n in (self.choice or {}).items()}

    def term(self, root: int | None = None) -> str:
        """The extracted term of a root class as an s-expression (shared classes repeated)."""
        g, choice = self.graph, self.choice or {}
        start = g.roots[0] if root is None else root
        out: list[str] = []
        stack: list = [start]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            node = choice[item]
            kids = g.child_classes[node]
            if not kids:
                out.append(g.ops[node])
                continue
            out.append(f"({g.ops[node]}")
            stack.append(")")
            for k in reversed(kids):
                stack.append(k)
                stack.append(" ")
        return "".join(out)


def _sum(values) -> float:
    """An exact float sum that gives inf instead of raising when it overflows."""
    values = list(values)
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def needed_classes(graph: ExtractionGraph, choice: dict[int, int]) -> list[int]:
    """The classes reachable from the roots through chosen nodes, children after parents.

    Raises InvalidChoice for a needed class without a (valid) chosen node.
    """
    seen = bytearray(graph.num_classes)
    order: list[int] = []
    stack = list(reversed(graph.roots))
    while stack:
        k = stack.pop()
        if seen[k]:
            continue
        seen[k] = 1
        order.append(k)
        node = choice.get(k)
        if node is None:
            raise InvalidChoice(f"{graph.name}: needed e-class {graph.class_ids[k]!r} has no chosen node")
        if not 0 <= node < graph.num_nodes or graph.classes[node] != k:
            raise InvalidChoice(f"{graph.name}: the node chosen for e-class {graph.class_ids[k]!r} "
                                f"is not in that class")
        if node in graph.subsumed:
            raise InvalidChoice(f"{graph.name}: chosen node {graph.node_ids[node]!r} is subsumed")
        stack.extend(graph.child_classes[node])
    return order


def find_cycle(graph: ExtractionGraph, choice: dict[int, int]) -> list[int] | None:
    """A cycle of needed classes through chosen nodes (as class indices), or None.

    ``choice`` must hold every needed class (``needed_classes`` says which are missing).
    """
    state = bytearray(graph.num_classes)  # 1 on the current path, 2 finished
    for root in graph.roots:
        if state[root]:
            continue
        path: list[int] = []
        stack: list[tuple[int, int]] = [(root, 0)]
        state[root] = 1
        path.append(root)
        while stack:
            k, i = stack[-1]
            kids = graph.child_classes[choice[k]]
            if i == len(kids):
                stack.pop()
                path.pop()
                state[k] = 2
                continue
            stack[-1] = (k, i + 1)
            child = kids[i]
            mark = state[child]
            if mark == 1:
                return path[path.index(child):] + [child]
            if mark == 0:
                state[child] = 1
                path.append(child)
                stack.append((child, 0))
    return None


def check(graph: ExtractionGraph, choice: dict[int, int], _order: list[int] | None = None) -> float:
    """Verify that ``choice`` is complete and acyclic and return its DAG cost."""
    order = needed_classes(graph, choice) if _order is None else _order
    cycle = find_cycle(graph, choice)
    if cycle is not None:
        names = " -> ".join(graph.class_ids[k] for k in cycle[:12])
        raise InvalidChoice(f"{graph.name}: the choice has a cycle through e-classes {names}")
    return _sum(graph.costs[choice[k]] for k in order)


def dag_cost(graph: ExtractionGraph, choice: dict[int, int]) -> float:
    """The DAG cost of a valid choice: each needed class's chosen node counted once."""
    return check(graph, choice)


def tree_cost(graph: ExtractionGraph, choice: dict[int, int]) -> float:
    """The tree cost of a valid choice: a class counted once per path from a root.

    Float arithmetic: on very deep shared DAGs the tree cost can reach ``inf``.
    """
    check(graph, choice)  # a cycle would make the tree infinite
    value = _tree_values(graph, choice, needed_classes(graph, choice))
    return _sum(value[r] for r in graph.roots)


def _tree_values(graph: ExtractionGraph, choice: dict[int, int], order: list[int]) -> list:
    """Tree cost per needed class (None elsewhere), children before parents, iteratively."""
    value: list = [None] * graph.num_classes
    costs, child_classes = graph.costs, graph.child_classes
    for start in order:
        if value[start] is not None:
            continue
        stack = [(start, False)]
        while stack:
            k, expanded = stack.pop()
            if value[k] is not None:
                continue
            kids = child_classes[choice[k]]
            if expanded:
                total = costs[choice[k]]
                for c in kids:
                    total += value[c]  # a plain float sum: overflows to inf rather than raising
                value[k] = total
                continue
            stack.append((k, True))
            stack.extend((c, False) for c in kids if value[c] is None)
    return value


def make_result(extractor: str, graph: ExtractionGraph, choice: dict[int, int], seconds: float,
                **extra) -> ExtractionResult:
    """An ExtractionResult for ``choice`` restricted to its needed classes, costs checked."""
    needed = needed_classes(graph, choice)
    trimmed = {k: choice[k] for k in needed}
    cost = check(graph, trimmed, needed)
    values = _tree_values(graph, trimmed, needed)
    tree = _sum(values[r] for r in graph.roots)
    return ExtractionResult(extractor, graph, trimmed, dag_cost=cost, tree_cost=tree,
                            seconds=seconds, **extra)
