"""An iterative bottom-up rebuild over a pass-chosen child relation (shared nodes once)."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.node import Node

__all__ = ["rebuild", "let_rebuild"]


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


def let_rebuild(root: Node, make: Callable[[Node, dict], Node],
                after_value: Callable[[Node, Node], None] | None = None) -> Node:
    """Bottom-up rebuild that visits a let's value, then calls ``after_value(let, new_value)``,
    then visits its body: passes can decide about a binding before its scope is rebuilt.

    ``make(node, memo)`` builds the result of ``node`` from ``memo`` (results of its children).
    A let's bound variable is not visited as a child; ``make`` sees ``memo`` without it.
    """
    from ..ir.expr import Let

    memo: dict = {}
    stack: list = [[root, 0]]
    while stack:
        frame = stack[-1]
        node, i = frame
        kids = node.children()
        if i < len(kids):
            frame[1] += 1
            if isinstance(node, Let):
                if i == 0:
                    continue
                if i == 2 and after_value is not None:
                    after_value(node, memo[node.value])
            if kids[i] not in memo:
                stack.append([kids[i], 0])
            continue
        stack.pop()
        memo[node] = make(node, memo)
    return memo[root]
