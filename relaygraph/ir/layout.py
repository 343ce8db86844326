"""A layered (Sugiyama-style) layout of a dataflow DAG, for drawing programs.

Every node sits on a layer below all its inputs (longest-path layering, with inputs pulled down
next to their first use); an edge that spans several layers passes through one dummy point per
layer it crosses, in a slot of its own, so no edge runs through a box. Layers are ordered by
barycentre sweeps that keep the ordering with the fewest crossings, and x positions come from
alternating sweeps towards the neighbours' mean under the ordering's spacing constraints (an
isotonic regression, solved exactly by pooling adjacent violators). All of it is iterative.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import networkx as nx

__all__ = ["Layout", "layered_layout"]

_DUMMY_W = 6.0
_SWEEPS = 12


@dataclass
class Layout:
    """Boxes (left, top, width, height) per node, and each drawn edge as a polyline."""

    boxes: dict[Hashable, tuple[float, float, float, float]]
    layer: dict[Hashable, int]
    # (source, target, points): one entry per argument position, so f(h, h) has two edges
    edges: list[tuple[Hashable, Hashable, list[tuple[float, float]]]] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def _layers(g: nx.DiGraph) -> dict[Hashable, int]:
    layer: dict[Hashable, int] = {}
    order = list(nx.topological_sort(g))
    for v in order:
        layer[v] = max((layer[u] + 1 for u in g.predecessors(v)), default=0)
    # an input drawn at the top with a long edge to its only use far below reads badly
    for v in order:
        if g.in_degree(v) == 0 and g.out_degree(v) > 0:
            layer[v] = min(layer[s] for s in g.successors(v)) - 1
    return layer


def _crossings(rows: list[list], down: dict, pos: dict) -> int:
    total = 0
    for row in rows[:-1]:
        ends = sorted((pos[a], pos[b]) for a in row for b in down[a])
        for i, (a1, b1) in enumerate(ends):
            total += sum(1 for a2, b2 in ends[i + 1:] if a2 > a1 and b2 < b1)
    return total


def _order(rows: list[list], up: dict, down: dict) -> list[list]:
    def positions(rs):
        return {v: i for r in rs for i, v in enumerate(r)}

    best = [list(r) for r in rows]
    pos = positions(best)
    best_cost = _crossings(best, down, pos)
    for sweep in range(_SWEEPS):
        downward = sweep % 2 == 0
        span = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
        for li in span:
            near = up if downward else down
            row = rows[li]
            key = {v: (sum(pos[n] for n in near[v]) / len(near[v]) if near[v] else pos[v])
                   for v in row}
            row.sort(key=lambda v: key[v])
            for i, v in enumerate(row):
                pos[v] = i
        cost = _crossings(rows, down, pos)
        if cost < best_cost:
            best, best_cost = [list(r) for r in rows], cost
        if best_cost == 0:
            break
    return best


def _isotonic(targets: list[float]) -> list[float]:
    """The non-decreasing sequence nearest to ``targets`` in least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight]
    for t in targets:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    out: list[float] = []
    for mean, weight in blocks:
        out += [mean] * int(weight)
    return out


def _place(row: list, want: dict, width: dict, gap: float, x: dict) -> None:
    # x_{i+1} - x_i >= (w_i + w_{i+1}) / 2 + gap; shifting by the running offsets makes the
    # constraint plain monotonicity
    offsets, acc = [], 0.0
    for i, v in enumerate(row):
        if i:
            acc += (width[row[i - 1]] + width[v]) / 2 + gap
        offsets.append(acc)
    fitted = _isotonic([want[v] - off for v, off in zip(row, offsets, strict=True)])
    for v, y, off in zip(row, fitted, offsets, strict=True):
        x[v] = y + off


def layered_layout(g: nx.DiGraph, size: Callable[[Hashable], tuple[float, float]],
                   gap_x: float = 14.0, gap_y: float = 30.0, margin: float = 8.0) -> Layout:
    """Lay out a DAG top to bottom; ``size(node)`` gives a box's (width, height).

    An edge's ``indices`` attribute (argument positions) makes one drawn edge per position.
    """
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError("layered_layout needs a directed acyclic graph")
    layer = _layers(g)
    width = {v: size(v)[0] for v in g}
    row_h = max((size(v)[1] for v in g), default=0.0)
    rows: list[list] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for v in nx.topological_sort(g):
        rows[layer[v]].append(v)
    up: dict = {v: [] for v in g}
    down: dict = {v: [] for v in g}
    chains: list[tuple[Hashable, Hashable, list]] = []
    for u, v, data in g.edges(data=True):
        for k in range(len(data.get("indices", [data.get("index", 0)]))):
            chain = [u]
            for li in range(layer[u] + 1, layer[v]):
                d = ("dummy", u, v, k, li)
                width[d], up[d], down[d] = _DUMMY_W, [], []
                rows[li].append(d)
                chain.append(d)
            chain.append(v)
            for a, b in zip(chain, chain[1:], strict=False):
                down[a].append(b)
                up[b].append(a)
            chains.append((u, v, chain))
    rows = _order(rows, up, down)
    x: dict = {}
    for row in rows:
        _place(row, {v: 0.0 for v in row}, width, gap_x, x)
    for sweep in range(2 * _SWEEPS):
        downward = sweep % 2 == 0
        near = up if downward else down
        for row in (rows if downward else rows[::-1]):
            want = {v: (sum(x[n] for n in near[v]) / len(near[v]) if near[v] else x[v]) for v in row}
            _place(row, want, width, gap_x, x)
    left = min((x[v] - width[v] / 2 for row in rows for v in row), default=0.0)
    shift = margin - left
    top = {li: margin + li * (row_h + gap_y) for li in range(len(rows))}
    boxes = {v: (x[v] - width[v] / 2 + shift, top[layer[v]], width[v], size(v)[1]) for v in g}
    out = Layout(boxes, layer)
    out.width = max((b[0] + b[2] for b in boxes.values()), default=0.0) + margin
    out.height = len(rows) * (row_h + gap_y) - gap_y + 2 * margin if rows else 0.0
    out.edges = _route(chains, boxes, x, shift, top, row_h)
    return out


def _route(chains, boxes, x, shift, top, row_h) -> list:
    # each box spreads its out-edges over its bottom and its in-edges over its top, in the order
    # of where they go, so a shared node shows one arrow per use
    def toward(chain, end):
        n = chain[1] if end == "out" else chain[-2]
        return x[n] + shift

    outs: dict = {}
    ins: dict = {}
    for i, (u, v, chain) in enumerate(chains):
        outs.setdefault(u, []).append((toward(chain, "out"), i))
        ins.setdefault(v, []).append((toward(chain, "in"), i))
    port_out, port_in = {}, {}
    for ports, table in ((outs, port_out), (ins, port_in)):
        for node, items in ports.items():
            items.sort()
            left, _, w, _ = boxes[node]
            for k, (_, i) in enumerate(items):
                table[i] = left + w * (k + 1) / (len(items) + 1)
    edges = []
    for i, (u, v, chain) in enumerate(chains):
        lu, tu, _, hu = boxes[u]
        points = [(port_out[i], tu + hu)]
        for d in chain[1:-1]:
            li = d[4]
            points += [(x[d] + shift, top[li]), (x[d] + shift, top[li] + row_h)]
        points.append((port_in[i], boxes[v][1]))
        edges.append((u, v, points))
    return edges
