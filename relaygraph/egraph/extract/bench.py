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

__all__ = ["EXTRACTORS", "FIELDS", "run_file", "relative_labels", "Table", "format_table", "markdown_table",
           "write_csv", "plot", "machine_description", "TABLE_WIDTH"]

EXTRACTORS = ("tree", "greedy-dag", "greedy-dag+ls", "ilp", "egglog")
FIELDS = ("file", "extractor", "nodes", "classes", "tree_cost", "dag_cost", "seconds", "optimal",
          "gap", "status")


def _run(name: str, graph, time_limit: float, greedy: ExtractionResult | None) -> ExtractionResult:
    if name == "tree":
        return tree(graph)
    if name == "greedy-dag":
        return greedy if greedy is not None else greedy_dag(graph)
    if name == "greedy-dag+ls":
        return greedy_dag(graph, improve=True)
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
             cost: str = "given", label: str | None = None, missing_roots: str = "error") -> list[dict]:
    """Run each extractor on one e-graph file; a file that cannot be read gives one error row.
    ``missing_roots="drop"`` reads a file whose root list names ids with no nodes (see load_gym)."""
    label = label or path
    try:
        graph = load_gym(path, missing_roots=missing_roots)
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


TABLE_WIDTH = 110
# The text table's columns: the gap goes in the "optimal?" cell. Widths are fixed before any row
# is known, so that rows print as their files finish; the file column takes what is left.
_COLUMNS = ("file", "extractor", "nodes", "classes", "tree_cost", "dag_cost", "seconds", "optimal", "status")
_WIDTH = {"nodes": 6, "classes": 7, "tree_cost": 9, "dag_cost": 9, "seconds": 8, "optimal": 8,
          "status": 13}


def relative_labels(paths: Sequence[str]) -> dict[str, str]:
    """Each path relative to the deepest folder holding all of them (a lone file: its name)."""
    if not paths:
        return {}
    absolute = {p: os.path.abspath(p) for p in paths}
    root = os.path.commonpath([os.path.dirname(a) for a in absolute.values()])
    return {p: os.path.relpath(a, root) for p, a in absolute.items()}


def _elide(text: str, width: int) -> str:
    """``text`` in ``width`` characters: its start dropped first (the file's name and nearest
    folders say the most), then the middle of the name."""
    if len(text) <= width:
        return text
    name = os.path.basename(text)
    if len(name) + 3 <= width:
        return "..." + text[len(text) - (width - 3):]
    keep = width - 3
    return name[: (keep + 1) // 2] + "..." + name[len(name) - keep // 2:] if keep > 0 else name[:width]


def _number(value: float, width: int) -> str:
    """A cost in ``width`` characters where it fits, with as many digits as it allows."""
    for digits in (6, 5, 4, 3, 2):
        text = f"{value:.{digits}g}"
        if len(text) <= width:
            return text
    return text


def _table_cell(row: dict, key: str) -> str:
    if key == "optimal":
        if row["optimal"] == "":
            return "-"
        gap = row["gap"]
        if row["optimal"] or not isinstance(gap, float) or math.isnan(gap):
            return _cell(row["optimal"], "optimal")
        return f"no {gap:.1%}" if gap < 0.1 else f"no {gap:.0%}"
    value = row[key]
    if key in ("tree_cost", "dag_cost") and isinstance(value, float) and not math.isnan(value):
        return _number(value, _WIDTH[key])
    return _cell(value, key)


class Table:
    """A fixed-width text table printed a row at a time, no wider than ``width`` (about)."""

    def __init__(self, labels: Sequence[str], extractors: Sequence[str], width: int = TABLE_WIDTH) -> None:
        head = _HEAD
        widths = dict(_WIDTH, extractor=max([len(head["extractor"]), *map(len, extractors)]))
        fixed = sum(widths.values()) + 2 * (len(_COLUMNS) - 1)
        longest = max([len(head["file"]), *map(len, labels)])
        widths["file"] = max(min(longest, width - fixed), 16)
        widths["status"] += max(0, width - fixed - widths["file"])  # short names leave room for it
        self.head, self.widths = head, widths

    def _line(self, cells: dict) -> str:
        parts = []
        for key in _COLUMNS:
            w = self.widths[key]
            text = cells[key]
            if key == "file":
                text = _elide(text, w)
            elif key == "status" and len(text) > w:
                text = text[: w - 3] + "..."  # the whole of it is in the CSV and on stderr
            parts.append(text.ljust(w) if key in ("file", "extractor", "status") else text.rjust(w))
        return "  ".join(parts).rstrip()

    def header(self) -> str:
        """The column names and the rule under them (two lines)."""
        names = self._line({k: self.head[k] for k in _COLUMNS})
        return names + "\n" + "  ".join("-" * self.widths[k] for k in _COLUMNS)

    def row(self, row: dict) -> str:
        """One row (a dict with FIELDS) as a line; long names and statuses are elided."""
        return self._line({k: _table_cell(row, k) for k in _COLUMNS})


def format_table(rows: Sequence[dict], width: int = TABLE_WIDTH) -> str:
    """A fixed-width text table of the rows (about ``width`` characters wide at most)."""
    table = Table([str(r["file"]) for r in rows], [r["extractor"] for r in rows], width)
    return "\n".join([table.header(), *(table.row(r) for r in rows)])


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


def machine_description() -> str:
    """The machine a benchmark ran on, for figure titles: CPU model, architecture, core count."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                       cpu)
    except OSError:
        pass
    return f"{cpu} ({platform.machine()}), {os.cpu_count()} cores"


def _short_labels(files: Sequence[str]) -> tuple[str, list[str]]:
    # paths relative to the folder all files share: distinct and short
    dirs = [os.path.dirname(f) for f in files]
    try:
        common = os.path.commonpath(dirs) if dirs and all(dirs) else ""
    except ValueError:  # absolute and relative paths mixed
        common = ""
    return common, [os.path.relpath(f, common) if common else f for f in files]


def plot(rows: Sequence[dict], path: str, cost: str = "given", machine: str | None = None):
    """A PNG of each answer's DAG cost over the best on its file and of each extractor's time.

    Both axes are honest: the ratio on a log scale starting at 1 (each bar labelled with its
    excess in percent), the time in seconds on a log scale. Returns the matplotlib Figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    good = [r for r in rows if not math.isnan(r["dag_cost"])]
    files = list(dict.fromkeys(r["file"] for r in rows))
    names = list(dict.fromkeys(r["extractor"] for r in rows if r["extractor"] != "-"))
    best = {f: min((r["dag_cost"] for r in good if r["file"] == f), default=math.nan) for f in files}
    fig, (ax_cost, ax_time) = plt.subplots(2, 1, figsize=(max(7.0, 1.5 * len(files) + 3), 8.5),
                                           layout="constrained")
    width = 0.8 / max(1, len(names))
    ratios = [1.0]
    for j, name in enumerate(names):
        xs, ratio, secs = [], [], []
        for i, f in enumerate(files):
            r = next((r for r in good if r["file"] == f and r["extractor"] == name), None)
            if r is None:
                continue
            xs.append(i + (j - (len(names) - 1) / 2) * width)
            ratio.append(r["dag_cost"] / best[f] if best[f] > 0 else 1.0)
            secs.append(max(r["seconds"], 1e-5))
        color = f"C{j}"
        # bars start at 1: a ratio of 1 (the best answer) has no height, only its label
        ax_cost.bar(xs, [q - 1.0 for q in ratio], width, bottom=1.0, label=name, color=color)
        for x, q in zip(xs, ratio, strict=True):
            ax_cost.text(x, q, "best" if q <= 1 + 5e-7 else f"+{q - 1:.2%}", ha="center",
                         va="bottom", rotation=90, fontsize=7)
        ax_time.bar(xs, secs, width, label=name, color=color)
        ratios += ratio
    common, labels = _short_labels(files)
    for ax in (ax_cost, ax_time):
        ax.set_xticks(range(len(files)), labels, rotation=20, ha="right", fontsize=8)
        ax.set_xlabel(f"e-graph file (in {common}/)" if common else "e-graph file")
        ax.set_xlim(-0.6, len(files) - 0.4)
    ax_cost.set_yscale("log")
    # at least 1 to 1.1, so a fraction of a percent looks like one; room above for the labels
    top = max(1.1, max(ratios) ** 1.3)
    ax_cost.set_ylim(1.0, top)
    ticks = [1.0 + k * (top - 1.0) / 5 for k in range(6)] if top < 2 else None
    if ticks:  # within one decade a log axis has no labelled ticks of its own
        ax_cost.set_yticks(ticks)
        ax_cost.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
        ax_cost.yaxis.set_minor_formatter(NullFormatter())
    ax_cost.set_ylabel("DAG cost / best DAG cost on the file\n(log scale from 1)")
    ax_cost.set_title("DAG cost of each answer relative to the best answer on its file", fontsize=10)
    ax_time.set_yscale("log")
    ax_time.set_ylabel("extractor wall time (s, log scale)")
    ax_time.set_title("time per extractor (times under 10 µs shown as 10 µs)", fontsize=10)
    handles, names_shown = ax_cost.get_legend_handles_labels()
    fig.legend(handles, names_shown, loc="outside upper right", ncol=len(names), fontsize=8,
               title="extractor", title_fontsize=8)
    model = "node costs as given in each file" if cost == "given" else f"cost model {cost!r}"
    fig.suptitle(f"Extractors compared ({model})\non {machine or machine_description()}",
                 fontsize=11, x=0.02, ha="left")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig
