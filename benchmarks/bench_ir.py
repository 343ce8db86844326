"""Interning cost: ns per node for a 1,000,000-node DAG, relaygraph vs a minimal baseline.

The baseline is the least an interned IR can do: a slotted class interned through a plain dict
keyed by a tuple (no validation, no weak references, never collected). Both build the same DAG
in this process: node i = op(node[i-1], node[i // 2]), alternating two ops. Target ratio <= 2.5.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc

sys.path.insert(0, __import__("os").path.dirname(__file__) + "/..")

import relaygraph as rg  # noqa: E402

N = 1_000_000


class BaselineNode:
    __slots__ = ("op", "args")


def baseline_build(n: int):
    table: dict = {}

    def make(op, args):
        key = (op, args)
        node = table.get(key)
        if node is None:
            node = BaselineNode()
            node.op, node.args = op, args
            table[key] = node
        return node

    leaf = make("x", ())
    nodes = [leaf]
    ops = ("add", "multiply")
    for i in range(1, n):
        nodes.append(make(ops[i & 1], (nodes[i - 1], nodes[i // 2])))
    return nodes


def relaygraph_build(n: int):
    leaf = rg.var("x")
    nodes = [leaf]
    ops = (rg.Op("add"), rg.Op("multiply"))
    call = rg.Call
    for i in range(1, n):
        nodes.append(call(ops[i & 1], (nodes[i - 1], nodes[i // 2])))
    return nodes


def timed(build, n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        nodes = build(n)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    assert len(nodes) == n
    del nodes
    return elapsed


def bytes_per_node(build, n: int) -> float:
    gc.collect()
    tracemalloc.start()
    nodes = build(n)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del nodes
    return current / n


def main() -> None:
    # Interleave runs and keep the best of each, so machine noise hits both alike.
    base = min(timed(baseline_build, N) for _ in range(3))
    ours = min(timed(relaygraph_build, N) for _ in range(3))
    ratio = ours / base
    print(f"nodes: {N:,}")
    print(f"baseline (slotted class + dict interning): {base / N * 1e9:8.0f} ns/node")
    print(f"relaygraph Call (validated, weak table):   {ours / N * 1e9:8.0f} ns/node")
    print(f"ratio: {ratio:.2f}  (target <= 2.5)")
    small = 200_000
    print(f"bytes/node (tracemalloc, {small:,} nodes): baseline "
          f"{bytes_per_node(baseline_build, small):.0f}, relaygraph "
          f"{bytes_per_node(relaygraph_build, small):.0f}")


if __name__ == "__main__":
    main()
