"""Seeded synthetic e-graphs shaped like saturated tensor programs, for scaling tests.

Classes are laid out like a deep network: class ``i`` is computed from class ``i - 1`` and,
like a residual connection, from a class a few steps back. Each class also has alternative
nodes over nearby earlier classes (rewrites), and some alternatives point a few classes ahead,
closing cycles as saturated e-graphs do. The root is the last class. Depth grows with size, so
a 100,000-node e-graph is thousands of classes deep.
"""

from __future__ import annotations

import random

from .gym import ExtractionGraph

__all__ = ["random_egraph"]


def random_egraph(num_nodes: int, seed: int = 0, *, alternatives: int = 2, window: int = 6,
                  cycle_rate: float = 0.1, leaves: int = 4) -> ExtractionGraph:
    """An e-graph of about ``num_nodes`` nodes: ``1 + alternatives`` nodes per class."""
    if num_nodes < leaves + 1:
        raise ValueError(f"num_nodes must be at least {leaves + 1}")
    rng = random.Random(seed)
    per_class = 1 + alternatives
    n_classes = max(leaves + 1, (num_nodes - leaves) // per_class + leaves)
    ops, classes, children, costs = [], [], [], []
    class_rep: list[int] = []  # a node of each class; children name a node to stand for its class

    def add(op: str, k: int, kids: list[int], cost: float) -> int:
        ops.append(op)
        classes.append(k)
        children.append(kids)
        costs.append(cost)
        return len(ops) - 1

    forward: list[tuple[int, int]] = []  # (node, class ahead) filled in once that class exists
    for k in range(n_classes):
        if k < leaves:
            class_rep.append(add(f"input{k}", k, [], rng.uniform(0.0, 0.1)))
            continue
        skip = rng.randint(max(0, k - window), k - 1)
        class_rep.append(add("block", k, [class_rep[k - 1], class_rep[skip]], rng.uniform(0.5, 1.5)))
        for _ in range(alternatives):
            if rng.random() < cycle_rate and k + 1 < n_classes:
                node = add("alt", k, [class_rep[k - 1]], rng.uniform(0.0, 0.5))
                forward.append((node, rng.randint(k + 1, min(n_classes - 1, k + window))))
                continue
            arity = rng.randint(1, 3)
            kids = [class_rep[rng.randint(max(0, k - window), k - 1)] for _ in range(arity)]
            add("alt", k, kids, rng.uniform(0.2, 2.0))
    for node, ahead in forward:
        children[node].append(class_rep[ahead])
    ids = [f"n{i}" for i in range(len(ops))]
    return ExtractionGraph(ids, ops, classes, children, costs, [f"c{k}" for k in range(n_classes)],
                           [n_classes - 1], name=f"synthetic-{num_nodes}-seed{seed}")
