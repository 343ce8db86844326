"""Rich display in notebooks: an SVG of the dataflow DAG for small programs, a summary for big ones.

The drawing uses a layered layout (relaygraph/ir/layout.py): inputs on top, every node below its
inputs, arrows into each use, and long edges routed between the boxes, never through them. The
same layout draws as plain SVG (nothing beyond networkx needed) or on a matplotlib figure.
"""

from __future__ import annotations

import html
import itertools

from .dag_export import program_stats, to_networkx
from .layout import layered_layout
from .node import Node

__all__ = ["to_svg", "draw", "program_layout", "html_summary", "repr_html", "SVG_NODE_LIMIT"]

SVG_NODE_LIMIT = 120  # beyond this, a drawing is unreadable: show a summary instead
_BOX_H, _LABEL_MAX, _CHAR_W = 24, 18, 7.0
_COLORS = {"Call": "#dbeafe", "Var": "#dcfce7", "Constant": "#fef9c3", "Function": "#f3e8ff"}
_EDGE = "#475569"
_svg_ids = itertools.count()


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_MAX else label[:_LABEL_MAX - 1] + "…"


def program_layout(root: Node):
    """The program's DAG as drawn (networkx, edge child -> consumer) and its layered layout."""
    g = to_networkx(root)
    # a function's parameters are already drawn as its inputs: an arrow from each into the
    # function box says nothing and crosses the whole drawing, so only the body's arrow stays
    for v, data in list(g.nodes(data=True)):
        if data["kind"] == "Function":
            body = max((i for _, _, ix in g.in_edges(v, data="indices") for i in ix), default=None)
            g.remove_edges_from([(u, v) for u, _, ix in list(g.in_edges(v, data="indices"))
                                 if body not in ix])
    layout = layered_layout(g, lambda v: (max(44.0, _CHAR_W * len(_short(g.nodes[v]["label"])) + 14),
                                          float(_BOX_H)))
    return g, layout


def _path(points) -> str:
    return " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(points))


def to_svg(root: Node) -> str:
    """An SVG drawing of the expression DAG (one box per distinct node, an arrow into each use)."""
    g, lay = program_layout(root)
    arrow = f"rg-arrow-{next(_svg_ids)}"  # one page may hold several drawings
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay.width:.0f}" '
             f'height="{lay.height:.0f}" font-family="monospace" font-size="11">',
             f'<defs><marker id="{arrow}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
             f'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{_EDGE}"/>'
             f'</marker></defs>']
    for _, _, points in lay.edges:
        parts.append(f'<path d="{_path(points)}" fill="none" stroke="{_EDGE}" stroke-width="1.1" '
                     f'marker-end="url(#{arrow})"/>')
    for nid, data in g.nodes(data=True):
        x, y, w, h = lay.boxes[nid]
        fill = _COLORS.get(data["kind"], "#f1f5f9")
        parts.append(f'<g><title>{html.escape(data["label"])}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
                     f'fill="{fill}" stroke="#64748b"/>'
                     f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle">'
                     f'{html.escape(_short(data["label"]))}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def draw(root: Node, ax=None, title: str | None = None):
    """Draw the expression DAG on a matplotlib Axes (a new figure if none); returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    g, lay = program_layout(root)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(2.0, lay.width / 80), max(1.5, lay.height / 80)))
    for _, _, points in lay.edges:
        codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
        ax.add_patch(FancyArrowPatch(path=Path(points, codes), arrowstyle="-|>", mutation_scale=9,
                                     color=_EDGE, linewidth=1.0, shrinkA=0, shrinkB=0, zorder=1))
    for nid, data in g.nodes(data=True):
        x, y, w, h = lay.boxes[nid]
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=3",
                                    facecolor=_COLORS.get(data["kind"], "#f1f5f9"),
                                    edgecolor="#64748b", zorder=2))
        ax.text(x + w / 2, y + h / 2, _short(data["label"]), ha="center", va="center",
                family="monospace", fontsize=7.5, zorder=3)
    ax.set_xlim(0, lay.width)
    ax.set_ylim(lay.height, 0)  # inputs on top
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax.figure


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
