"""Rich display in notebooks: an SVG of the dataflow DAG for small programs, a summary for big ones.

The layout is layered by topological generation (inputs on top), drawn as plain SVG so nothing
beyond networkx is needed.
"""

from __future__ import annotations

import html

import networkx as nx

from .dag_export import program_stats, to_networkx
from .node import Node

__all__ = ["to_svg", "html_summary", "repr_html", "SVG_NODE_LIMIT"]

SVG_NODE_LIMIT = 120  # beyond this, a drawing is unreadable: show a summary instead
_BOX_W, _BOX_H, _GAP_X, _GAP_Y = 110, 26, 16, 34
_COLORS = {"Call": "#dbeafe", "Var": "#dcfce7", "Constant": "#fef9c3", "Function": "#f3e8ff"}


def to_svg(root: Node) -> str:
    """An SVG drawing of the expression DAG (one box per distinct node, edges to consumers)."""
    g = to_networkx(root)
    layers = list(nx.topological_generations(g))
    width = max((len(layer) for layer in layers), default=1) * (_BOX_W + _GAP_X) + _GAP_X
    height = len(layers) * (_BOX_H + _GAP_Y) + _GAP_Y
    pos: dict[int, tuple[float, float]] = {}
    for row, layer in enumerate(layers):
        offset = (width - len(layer) * (_BOX_W + _GAP_X) + _GAP_X) / 2
        for col, nid in enumerate(sorted(layer)):
            pos[nid] = (offset + col * (_BOX_W + _GAP_X), _GAP_Y / 2 + row * (_BOX_H + _GAP_Y))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="monospace" font-size="11">']
    for u, v in g.edges():
        (x1, y1), (x2, y2) = pos[u], pos[v]
        parts.append(f'<line x1="{x1 + _BOX_W / 2:.0f}" y1="{y1 + _BOX_H:.0f}" '
                     f'x2="{x2 + _BOX_W / 2:.0f}" y2="{y2:.0f}" stroke="#94a3b8"/>')
    for nid, data in g.nodes(data=True):
        x, y = pos[nid]
        label = data["label"] if len(data["label"]) <= 16 else data["label"][:15] + "…"
        fill = _COLORS.get(data["kind"], "#f1f5f9")
        parts.append(f'<g><title>{html.escape(data["label"])}</title>'
                     f'<rect x="{x:.0f}" y="{y:.0f}" width="{_BOX_W}" height="{_BOX_H}" rx="4" '
                     f'fill="{fill}" stroke="#64748b"/>'
                     f'<text x="{x + _BOX_W / 2:.0f}" y="{y + 17:.0f}" text-anchor="middle">'
                     f'{html.escape(label)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def html_summary(root: Node, title: str = "") -> str:
    """A small HTML table of a program's size facts and op histogram."""
    stats = program_stats(root)
    ops = ", ".join(f"{html.escape(k)}&nbsp;×{v}" for k, v in stats["ops"].items()) or "none"
    rows = [("distinct nodes", stats["nodes"]), ("as a tree", stats["tree_size"]),
            ("depth", stats["depth"]), ("shared nodes", stats["shared"]),
            ("op calls", stats["calls"]), ("ops", ops)]
    body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}"
                   f"</td></tr>" for k, v in rows)
    head = f"<b>{html.escape(title)}</b>" if title else ""
    return f"{head}<table>{body}</table>"


def repr_html(root: Node, title: str = "", text: str | None = None) -> str:
    """What a notebook shows for a program: summary, drawing (small graphs) and text."""
    parts = [html_summary(root, title)]
    if program_stats(root)["nodes"] <= SVG_NODE_LIMIT:
        parts.append(to_svg(root))
    if text is not None:
        shown = text if len(text) <= 20_000 else text[:20_000] + "\n… (truncated)"
        parts.append(f"<details><summary>Relay text</summary><pre>{html.escape(shown)}</pre>"
                     f"</details>")
    return "".join(parts)
