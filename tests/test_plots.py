"""Figures a reviewer can trust: titles, labelled axes, honest scales; the node limit's overshoot said."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

import relaygraph as rg  # noqa: E402
from relaygraph.cli import main  # noqa: E402
from relaygraph.egraph import RelayEGraph, saturate  # noqa: E402
from relaygraph.egraph.extract import bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GYM = ROOT / "tests" / "data" / "extraction-gym" / "data"


def _row(file, extractor, dag, seconds=0.01):
    return {"file": file, "extractor": extractor, "nodes": 10, "classes": 5, "tree_cost": dag,
            "dag_cost": dag, "seconds": seconds, "optimal": "", "gap": "", "status": "ok"}


def _labelled(ax) -> None:
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()


def test_extract_bench_plot_is_titled_labelled_and_starts_ratios_at_one(tmp_path):
    base = "/home/someone/data/tensat"
    rows = [_row(f"{base}/a/resnet.json", "tree", 4.3968), _row(f"{base}/a/resnet.json", "ilp", 4.3857),
            _row(f"{base}/b/vgg.json", "tree", 4.85), _row(f"{base}/b/vgg.json", "ilp", 4.85),
            _row(f"{base}/b/bad.json", "-", math.nan)]
    out = tmp_path / "bench.png"
    fig = bench.plot(rows, str(out), cost="latency", machine="a test machine, 2 cores")
    assert out.stat().st_size > 0
    title = fig._suptitle.get_text()
    assert "latency" in title and "a test machine" in title
    ax_cost, ax_time = fig.axes[:2]
    for ax in (ax_cost, ax_time):
        _labelled(ax)
        assert ax.get_yscale() == "log"
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == ["a/resnet.json", "b/vgg.json", "b/bad.json"]  # relative, not absolute
        assert base in ax.get_xlabel()
    low, high = ax_cost.get_ylim()
    assert low == 1.0 and high >= 1.1  # a 0.25% difference is drawn as one, not blown up
    texts = [t.get_text() for t in ax_cost.texts]
    assert "+0.25%" in texts and texts.count("best") == 3
    assert fig.legends and fig.legends[0].get_texts()[0].get_text() == "tree"


def test_extract_bench_command_titles_its_figure_with_the_cost_model(tmp_path, monkeypatch, capsys):
    seen = {}
    real = bench.plot

    def spy(rows, path, **kw):
        seen["fig"] = real(rows, path, **kw)
        return seen["fig"]

    monkeypatch.setattr(bench, "plot", spy)
    code = main(["extract-bench", str(GYM / "dummy_examples"), "--extractors", "tree,greedy-dag",
                 "--cost", "node-count", "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    assert (tmp_path / "extract-bench.png").stat().st_size > 0
    assert "node-count" in seen["fig"]._suptitle.get_text()
    assert "Traceback" not in capsys.readouterr().err


def _tensat_run():
    spec = importlib.util.spec_from_file_location("tensat_run", ROOT / "papers" / "tensat" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tensat_figure_labels_every_panel_and_names_its_extractors(tmp_path):
    run = _tensat_run()
    saved = json.loads((ROOT / "papers" / "tensat" / "results.json").read_text())
    fig = run.plot(saved["rows"], saved["node_limits"], tmp_path / "r.png", machine="test box")
    assert (tmp_path / "r.png").stat().st_size > 0
    assert "cpu cost model" in fig._suptitle.get_text() and "test box" in fig._suptitle.get_text()
    reduction, speedup, sweep = fig.axes[:3]
    for ax in (reduction, speedup, sweep):
        _labelled(ax)
    assert reduction.get_ylim()[0] == 0 and speedup.get_yscale() == "log"
    legend = [t.get_text() for t in reduction.get_legend().get_texts()]
    assert any("greedy" in t for t in legend) and any("ILP" in t for t in legend)
    assert "ILP" in sweep.get_ylabel()  # the sweep's quantity is the ILP panel's quantity
    # the speedup panel sets the e-graph beside TVM's pipeline, predicted and measured
    series = [t.get_text() for t in speedup.get_legend().get_texts()]
    assert any("e-graph" in t and "measured" in t for t in series)
    assert any(run.PIPELINE in t and "predicted" in t for t in series)
    # the legend covers no bar
    canvas = FigureCanvasAgg(fig)  # the figure was closed after saving
    canvas.draw()
    renderer = canvas.get_renderer()
    box = reduction.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in reduction.patches]
    assert bars and not any(box.overlaps(b) for b in bars)
    # the table says the same as the figure, and speaks of the overshoot
    run.write_markdown(saved["rows"], saved["node_limits"], tmp_path / "r.md")
    table = (tmp_path / "r.md").read_text()
    assert "checks the node limit between iterations" in table
    bert = next(r for r in saved["rows"] if r["model"] == "bert")
    ilp = 1 - bert["ilp"]["cost_after"] / bert["ilp"]["cost_before"]
    assert f"{ilp:.1%}" in table and f"{ilp:.1%}" in [t.get_text() for t in reduction.texts]


def _sum_chain(n):
    xs = [rg.var(f"x{i}", rg.TensorType((2, 3), "float32")) for i in range(n)]
    acc = xs[0]
    for v in xs[1:]:
        acc = rg.op.add(acc, v)
    return rg.Function(xs, acc)


ASSOC = """
(ruleset t)
(rewrite (r:add a b) (r:add b a) :ruleset t :name "add-commute")
(rewrite (r:add a (r:add b c)) (r:add (r:add a b) c) :ruleset t :name "add-assoc")
"""


def test_saturation_report_says_when_the_node_limit_was_overshot():
    report = saturate(RelayEGraph(_sum_chain(8)), ASSOC, node_limit=40, iter_limit=50, isolate=False,
                      progress=False, scheduler="simple")
    assert report.stop_reason == "node-limit" and report.nodes > 40
    assert report.stop_detail == (f"node limit 40 reached ({report.nodes} e-nodes after the "
                                  "iteration that crossed it)")
    assert "checked between iterations" in str(report)
    done = saturate(RelayEGraph(_sum_chain(3)), ASSOC, node_limit=None, isolate=False, progress=False)
    assert done.stop_detail == done.stop_reason == "saturated"


def test_optimize_command_reports_the_overshoot(tmp_path, capsys):
    path = tmp_path / "sum.relay"
    path.write_text(rg.astext(rg.IRModule.from_expr(_sum_chain(6))))
    report = tmp_path / "report.json"
    code = main(["optimize", str(path), "--node-limit", "20", "--no-check", "--no-progress",
                 "--extractor", "greedy-dag", "--report", str(report)])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err
    assert "stopped: node limit 20 reached (" in out.out
    assert "e-nodes after the iteration that crossed it" in out.out
    saved = json.loads(report.read_text())["saturation"]
    assert saved["stop_reason"] == "node-limit" and saved["stop_detail"].startswith("node limit 20")
