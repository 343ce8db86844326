"""The program drawing: layered, arrows into every use, no edge through a box, sharing visible."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import ArrowStyle, FancyArrowPatch  # noqa: E402

import relaygraph as rg  # noqa: E402
from relaygraph.ir.display import draw, program_layout, to_svg  # noqa: E402
from relaygraph.ir.layout import layered_layout  # noqa: E402


def _tour():
    x = rg.var("x", rg.TensorType((1, 8), "float32"))
    w = rg.var("w", rg.TensorType((8, 8), "float32"))
    h = rg.op.nn.dense(x, w)
    return rg.Function([x, w], rg.op.nn.relu(h) + h), h


def _diamonds():
    x = rg.var("x", rg.TensorType((4,), "float32"))
    h = x
    for _ in range(4):  # each level uses the one before in three places, one of them far below
        a, b = rg.op.exp(h), rg.op.tanh(h)
        h = rg.op.add(rg.op.multiply(a, b), rg.op.sigmoid(rg.op.nn.relu(h)))
    return rg.Function([x], rg.op.add(h, x))


def _resnet():
    mod, _ = rg.zoo.get("resnet-18", small=True)
    return mod["main"]


PROGRAMS = {"tour": lambda: _tour()[0], "diamonds": _diamonds, "resnet-18-small": _resnet}


def _segment_hits_box(p, q, box, eps=0.5) -> bool:
    """Whether segment p-q enters the box's interior (shrunk by eps): Liang-Barsky clipping."""
    x, y, w, h = box
    lo_x, hi_x, lo_y, hi_y = x + eps, x + w - eps, y + eps, y + h - eps
    (x0, y0), (x1, y1) = p, q
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for pk, qk in ((-dx, x0 - lo_x), (dx, hi_x - x0), (-dy, y0 - lo_y), (dy, hi_y - y0)):
        if pk == 0:
            if qk < 0:
                return False
            continue
        t = qk / pk
        if pk < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def test_segment_check_itself_sees_a_crossing():
    assert _segment_hits_box((0, 0), (10, 10), (4, 4, 2, 2))
    assert not _segment_hits_box((0, 0), (10, 0), (4, 4, 2, 2))
    assert not _segment_hits_box((5, 0), (5, 4), (4, 4, 2, 2))  # ends on the box's top edge


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_node_is_on_a_layer_below_all_its_inputs(name):
    g, lay = program_layout(PROGRAMS[name]())
    assert set(lay.boxes) == set(g.nodes)
    for u, v in g.edges():
        assert lay.layer[u] < lay.layer[v]
        assert lay.boxes[u][1] + lay.boxes[u][3] < lay.boxes[v][1]  # drawn above, too


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_no_edge_passes_through_a_box_other_than_its_ends(name):
    g, lay = program_layout(PROGRAMS[name]())
    assert lay.edges
    for u, v, points in lay.edges:
        others = [b for n, b in lay.boxes.items() if n not in (u, v)]
        for p, q in zip(points, points[1:], strict=False):
            hit = [b for b in others if _segment_hits_box(p, q, b)]
            assert not hit, f"edge {u}->{v} segment {p}->{q} crosses {hit}"
        # and it starts on its source's bottom edge and ends on its target's top edge
        ux, uy, uw, uh = lay.boxes[u]
        vx, vy, vw, _ = lay.boxes[v]
        assert ux <= points[0][0] <= ux + uw and points[0][1] == pytest.approx(uy + uh)
        assert vx <= points[-1][0] <= vx + vw and points[-1][1] == pytest.approx(vy)


def test_boxes_do_not_overlap():
    _, lay = program_layout(_resnet())
    boxes = list(lay.boxes.values())
    for i, (x0, y0, w0, h0) in enumerate(boxes):
        for x1, y1, w1, h1 in boxes[i + 1:]:
            assert x0 + w0 <= x1 or x1 + w1 <= x0 or y0 + h0 <= y1 or y1 + h1 <= y0


def test_drawn_edges_carry_arrowheads_one_per_use():
    f, _ = _tour()
    fig = draw(f)
    try:
        arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
        _, lay = program_layout(f)
        assert len(arrows) == len(lay.edges) == 6  # x, w -> dense; dense -> relu, add; relu, add
        assert all(isinstance(a.get_arrowstyle(), ArrowStyle.CurveFilledB) for a in arrows)
    finally:
        plt.close(fig)
    svg = to_svg(f)
    paths = re.findall(r"<path d=\"M[^\"]*\" fill=\"none\"[^>]*>", svg)
    assert len(paths) == 6 and all("marker-end=" in p for p in paths)
    assert "<marker" in svg


def test_a_shared_node_shows_one_arrow_per_use():
    f, h = _tour()
    g, lay = program_layout(f)
    (hid,) = [n for n, d in g.nodes(data=True) if d["op"] == "nn.dense"]
    starts = [points[0] for u, _, points in lay.edges if u == hid]
    assert len(starts) == 2 and len(set(starts)) == 2  # two arrows, from two distinct points
    twice = rg.Function([h.args[0], h.args[1]], rg.op.add(h, h))
    g2, lay2 = program_layout(twice)
    (hid2,) = [n for n, d in g2.nodes(data=True) if d["op"] == "nn.dense"]
    assert g2.edges[hid2, next(iter(g2.successors(hid2)))]["indices"] == [1, 2]
    assert len([1 for u, _, _ in lay2.edges if u == hid2]) == 2  # add(h, h): two arrows


def test_layout_of_a_random_dag_and_refusal_of_a_cycle():
    g = nx.gn_graph(60, seed=3).reverse()  # a random DAG: every edge from older to newer
    lay = layered_layout(g, lambda v: (30.0, 20.0))
    for u, v in g.edges():
        assert lay.layer[u] < lay.layer[v]
    for u, v, points in lay.edges:
        for p, q in zip(points, points[1:], strict=False):
            assert not any(_segment_hits_box(p, q, b) for n, b in lay.boxes.items() if n not in (u, v))
    with pytest.raises(ValueError, match="acyclic"):
        layered_layout(nx.DiGraph([(0, 1), (1, 0)]), lambda v: (10.0, 10.0))


def test_a_long_chain_lays_out_without_recursion():
    x = rg.var("x", rg.TensorType((2,), "float32"))
    h = x
    for _ in range(3000):
        h = rg.op.tanh(h)
    _, lay = program_layout(rg.Function([x], h))
    assert len(lay.boxes) == 3002 and max(lay.layer.values()) == 3001


def test_notebook_display_uses_the_layered_drawing():
    f, _ = _tour()
    page = f._repr_html_()
    assert "<svg" in page and "marker-end=" in page and "nn.dense" in page
