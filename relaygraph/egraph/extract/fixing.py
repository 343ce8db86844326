"""Reduced-cost fixing: dropping the nodes that no answer as cheap as the incumbent can use.

The linear relaxation of the integer program (``ilp``) is solved on the decision core, with
requirement rows added (below). For any row duals ``pi`` of the right signs, the Lagrangian
function gives a lower bound valid for every 0/1 point of the program::

    cost @ v  >=  L(pi) + sum over columns j of (rc[j] * v[j] - min(rc[j] * lo[j], rc[j] * up[j]))
    L(pi)     =   sum over rows i of pi[i] * (the row's bound on the side pi[i] pushes against)
                + sum over columns j of min(rc[j] * lo[j], rc[j] * up[j]),     rc = cost - A.T @ pi

(each row term ``pi[i] * (A[i] @ v - bound)`` is non-negative when the row holds, and each
column term is non-negative). The bound is recomputed here from the solver's duals, clipped to
the right signs, so it does not rest on the solver's tolerances. A 0/1 column with ``rc[j] > 0``
can be 1 only in answers costing at least ``L + rc[j]``, and one with ``rc[j] < 0`` can be 0
only in answers costing at least ``L - rc[j]``: when that exceeds the incumbent's cost, every
answer at most as dear as the incumbent leaves node ``j`` out (it is subsumed), or takes it
(the other nodes of its class are subsumed); a class whose column must be 0 loses all its nodes.

Why the optimum survives: the incumbent is an answer of the e-graph, so the optimum ``OPT`` costs
no more than it. An optimal answer restricted to the core (``Reduction.restrict``, with
``prune``'s dominated nodes swapped for their dominators) is a 0/1 point of the program of cost
``OPT``, so it uses no dropped node and every forced one; expanded, it picks the same original
node in each core class (each core option has its own original node), and nodes of dissolved or
merged classes, which fixing never touches. So it is an answer of the smaller e-graph, whose
answers are all answers of the original: both have the optimum ``OPT``, and ``L`` bounds it.
The smaller e-graph is reduced again (fewer options make more of them dominated or cycle-only,
and more classes single-node) and the fixing repeated (``ilp._fix_by_reduced_costs``).

Requirement rows tighten the relaxation where it is weakest, inside cycles. ``req(k)``, the
classes that every acyclic term of class ``k`` contains, is the greatest fixed point of
``req(k) = {k} | meet over k's nodes n of (union of req(c) over n's child classes c)``; for each
class ``k`` and each class ``d`` in some node's ``R(n)`` (that union), at most one node of ``k``
is chosen, so ``sum(x[n] for n in k with d in R(n)) <= y[d]``. Without cycles these follow from
the child rows; with them they forbid the relaxation from deriving a class through a cycle that
no acyclic term can close. On TENSAT's bert_acyclic the relaxation is 0.585 against an optimum
of 0.708: fixing against an answer of 0.7175 leaves 1,162 of the core's 18,117 nodes, whose
relaxation is 0.600 without requirement rows and 0.70844, the optimum, with them. Against the
greedy answer (0.827) it leaves 3,763 nodes, with a relaxation of 0.602.
"""

from __future__ import annotations

import math

import numpy as np

from .gym import ExtractionGraph
from .prune import Pruned
from .reduce import requirement_sets

__all__ = ["required_classes", "requirement_rows", "lagrangian_bound", "without_nodes"]

_ROW_ENTRIES = 3_000_000  # requirement-row matrix entries above which the rows are left out
_REQ_CLASSES = 20_000  # classes above which requirement sets are not computed (bit sets per class)


def required_classes(p: Pruned, deadline: float = math.inf) -> dict[int, int] | None:
    """Per kept class, the kept classes every acyclic term of it contains, as a bit set over the
    positions in ``p.classes`` (None when ``deadline`` passes first, or with over
    ``_REQ_CLASSES`` classes: the sets would take too much memory)."""
    if len(p.classes) > _REQ_CLASSES:
        return None
    alternatives = {k: [p.kids[n] for n in p.class_nodes[k]] for k in p.classes}
    return requirement_sets(p.classes, alternatives, deadline)


def _members(bits: int, classes: list[int]):
    while bits:
        low = bits & -bits
        yield classes[low.bit_length() - 1]
        bits ^= low


def requirement_rows(p: Pruned, req: dict[int, int], node_var: dict[int, int],
                     class_var: dict[int, int]) -> list[tuple[list[int], list[float], float, float]] | None:
    """The rows ``sum(x[n] for n in k with d in R(n)) <= y[d]`` (see the module docstring) that
    child rows do not already state; None when they would exceed ``_ROW_ENTRIES`` matrix entries."""
    rows = []
    entries = 0
    for k in p.classes:
        users: dict[int, list[int]] = {}
        beyond: set[int] = set()  # classes some node of k needs without having them as a child
        for n in p.class_nodes[k]:
            union = 0
            for c in p.kids[n]:
                union |= req[c]
            for d in _members(union, p.classes):
                users.setdefault(d, []).append(node_var[n])
                if d not in p.kids[n]:
                    beyond.add(d)
        for d in beyond:
            entries += len(users[d]) + 1
            if entries > _ROW_ENTRIES:
                return None
            rows.append((users[d] + [class_var[d]], [1.0] * len(users[d]) + [-1.0], -math.inf, 0.0))
    return rows


def lagrangian_bound(cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, matrix,
                     row_lower: np.ndarray, row_upper: np.ndarray, row_dual: np.ndarray):
    """The Lagrangian lower bound for row duals clipped to valid signs, and the reduced costs
    (``matrix`` is the program's sparse matrix; every column must have finite bounds)."""
    pi = np.array(row_dual, dtype=float)
    pi[(pi > 0) & ~np.isfinite(row_lower)] = 0.0  # a row without a lower side cannot push up
    pi[(pi < 0) & ~np.isfinite(row_upper)] = 0.0
    rows = np.where(pi > 0, pi * np.where(np.isfinite(row_lower), row_lower, 0.0),
                    pi * np.where(np.isfinite(row_upper), row_upper, 0.0))
    reduced = cost - matrix.T @ pi
    columns = np.minimum(reduced * lower, reduced * upper)
    return float(rows.sum() + columns.sum()), reduced


def without_nodes(graph: ExtractionGraph, nodes) -> ExtractionGraph:
    """``graph`` with ``nodes`` subsumed as well (same node and class indices)."""
    out = ExtractionGraph(graph.node_ids, graph.ops, graph.classes, graph.children, graph.costs,
                          graph.class_ids, graph.roots, subsumed=graph.subsumed | set(nodes),
                          class_data=graph.class_data, node_data=graph.node_data, meta=graph.meta,
                          name=graph.name)
    return out
