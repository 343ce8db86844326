"""An iterative bottom-up rebuild over a pass-chosen child relation (shared nodes once)."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.node import Node

__all__ = ["rebuild"]


def rebuild(root: Node, kids: Callable[[Node], tuple], make: Callable[[Node, tuple], Node],
            memo: dict | None = None) -> Node:
    """``make(node, results of kids(node))`` for every node reachable through ``kids``,
    children first, without recursion; returns the result for ``root``."""
    memo = {} if memo is None else memo
    stack: list = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            memo[node] = make(node, tuple(memo[c] for c in kids(node)))
            continue
        if node in memo:
            continue
        stack.append((node, True))
        children = kids(node)
        for i in range(len(children) - 1, -1, -1):
            if children[i] not in memo:
                stack.append((children[i], False))
    return memo[root]
