"""Comparing extractors on e-graph files: one row per (file, extractor), as text, CSV and a figure."""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Sequence

from .check import ExtractionResult, check
from .egglog_extract import egglog_extract
from .greedy import greedy_dag
from .gym import ExtractionError, load_gym
from .ilp import ilp
from .tree import tree

__all__ = ["EXTRACTORS", "FIELDS", "run_file", "format_table", "markdown_table", "write_csv", "plot"]

EXTRACTORS = ("tree", "greedy-dag", "ilp", "egglog")
FIELDS = ("file", "extractor", "nodes", "classes", "tree_cost", "dag_cost", "seconds", "optimal",
          "gap", "status")


def _run(name: str, graph, time_limit: float, greedy: ExtractionResult | None) -> ExtractionResult:
    if name == "tree":
        return tree(graph)
    if name == "greedy-dag":
        return greedy if greedy is not None else greedy_dag(graph)
    if name == "ilp":
        return ilp(graph, time_limit=time_limit)
    if name == "egglog":
        return egglog_extract(graph, time_limit=time_limit)
    raise ExtractionError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}")


def _row(label: str, graph, result: ExtractionResult) -> dict:
    row = {"file": label, "extractor": result.extractor, "nodes": graph.num_nodes,
           "classes": graph.num_classes, "tree_cost": result.tree_cost, "dag_cost": result.dag_cost,
           "seconds": result.seconds, "optimal": "" if result.optimal is None else result.optimal,
           "gap": "" if result.gap is None else result.gap, "status": result.status}
    if result.choice is not None:
        # The independent checker sees every answer before it is reported.
        try:
            if not math.isclose(check(graph, result.choice), result.dag_cost, rel_tol=1e-9, abs_tol=1e-12):
                row["status"] = "cost mismatch"
        except ExtractionError as exc:
            row["status"] = f"invalid: {exc}"
    return row


def run_file(path: str, extractors: Sequence[str] = EXTRACTORS, time_limit: float = 60.0,
             cost: str = "given", label: str | None = None) -> list[dict]:
    """Run each extractor on one e-graph file; a file that cannot be read gives one error row."""
    label = label or path
    try:
        graph = load_gym(path)
        if cost != "given":
            from ..cost import apply_cost

            graph = apply_cost(graph, cost)
    except Exception as exc:  # one bad file must not stop a benchmark over many
        return [{"file": label, "extractor": "-", "nodes": 0, "classes": 0, "tree_cost": math.nan,
                 "dag_cost": math.nan, "seconds": 0.0, "optimal": "", "gap": "", "status": f"error: {exc}"}]
    rows = []
    greedy = None
    for name in extractors:
        start = time.perf_counter()
        try:
            result = _run(name, graph, time_limit, greedy)
        except ExtractionError as exc:
            rows.append({"file": label, "extractor": name, "nodes": graph.num_nodes,
                         "classes": graph.num_classes, "tree_cost": math.nan, "dag_cost": math.nan,
                         "seconds": time.perf_counter() - start, "optimal": "", "gap": "",
                         "status": f"error: {exc}"})
            continue
        if name == "greedy-dag":
            greedy = result
        rows.append(_row(label, graph, result))
    return rows


def _cell(value, key: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if key == "seconds":
            return f"{value:.3f}"
        if key == "gap":
            return f"{value:.2%}"
        return f"{value:.6g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value) if value != "" else "-"


_HEAD = {"file": "file", "extractor": "extractor", "nodes": "nodes", "classes": "classes",
         "tree_cost": "tree cost", "dag_cost": "DAG cost", "seconds": "time (s)",
         "optimal": "optimal?", "gap": "gap", "status": "status"}


def format_table(rows: Sequence[dict]) -> str:
    """A fixed-width text table of the rows."""
    cells = [[_HEAD[k] for k in FIELDS]] + [[_cell(r[k], k) for k in FIELDS] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(FIELDS))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(rows: Sequence[dict]) -> str:
    """The rows as a Markdown table."""
    out = ["| " + " | ".join(_HEAD[k] for k in FIELDS) + " |",
           "|" + "|".join("---" if i < 2 else "---:" for i in range(len(FIELDS))) + "|"]
    out += ["| " + " | ".join(_cell(r[k], k) for k in FIELDS) + " |" for r in rows]
    return "\n".join(out)


def write_csv(rows: Sequence[dict], path: str) -> None:
    """The rows as CSV with full-precision numbers."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r[k] for k in FIELDS})


def plot(rows: Sequence[dict], path: str) -> None:
    """A PNG with DAG cost relative to the best per file, and time per extractor (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in rows if not math.isnan(r["dag_cost"])]
    files = list(dict.fromkeys(r["file"] for r in rows))
    names = list(dict.fromkeys(r["extractor"] for r in rows if r["extractor"] != "-"))
    best = {f: min((r["dag_cost"] for r in good if r["file"] == f), default=math.nan) for f in files}
    fig, (ax_cost, ax_time) = plt.subplots(2, 1, figsize=(max(6.0, 1.2 * len(files) + 3), 7))
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        xs, ratio, secs = [], [], []
        for i, f in enumerate(files):
            r = next((r for r in good if r["file"] == f and r["extractor"] == name), None)
            if r is None:
                continue
            xs.append(i + (j - (len(names) - 1) / 2) * width)
            ratio.append(r["dag_cost"] / best[f] if best[f] > 0 else 1.0)
            secs.append(max(r["seconds"], 1e-5))
        ax_cost.bar(xs, ratio, width, label=name)
        ax_time.bar(xs, secs, width, label=name)
    labels = [os.path.basename(f) for f in files]
    for ax in (ax_cost, ax_time):
        ax.set_xticks(range(len(files)), labels, rotation=30, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    ratios = [r["dag_cost"] / best[r["file"]] for r in good if best[r["file"]] > 0] or [1.0]
    spread = max(max(ratios) - 1.0, 1e-3)  # zoom in: the differences are often fractions of a percent
    ax_cost.set_ylim(1.0 - 0.1 * spread, max(ratios) + 0.15 * spread)
    ax_cost.set_ylabel("DAG cost / best on file")
    ax_time.set_yscale("log")
    ax_time.set_ylabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
