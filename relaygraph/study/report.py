"""Reading a study database: its status, its rows (a DataFrame or a list), CSV, tables and plots."""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

from .store import COLUMNS, open_existing

__all__ = ["load", "status", "format_status", "export_csv", "show", "summary_rows",
           "plot_cost_time", "plot_profiles", "plot_speedup"]


def _rows(db) -> tuple[list[dict], dict]:
    conn, meta = open_existing(db)
    try:
        cur = conn.execute("SELECT * FROM cells WHERE spec_hash = ? ORDER BY rowid", (meta["spec_hash"],))
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        conn.close()
    for row in rows:
        extra = json.loads(row["result"] or "{}")
        for key, value in extra.items():
            if key not in row and key not in ("error", "reason"):
                row[key] = value
        row["reason"] = extra.get("reason")
    return rows, meta


def load(db, as_frame: bool | None = None):
    """Every cell's row of a study database: a pandas DataFrame when pandas is installed (or
    ``as_frame=True``), else a list of dicts; each result's fields are columns of their own."""
    rows, _ = _rows(db)
    if as_frame is False:
        return rows
    try:
        import pandas
    except ImportError:
        if as_frame:
            from .spec import StudyError

            raise StudyError("as_frame=True needs pandas (pip install pandas)") from None
        return rows
    return pandas.DataFrame(rows)


def status(db) -> dict:
    """Counts of done, failed and pending cells, the failures' reasons, and per-task counts."""
    rows, meta = _rows(db)
    cells = json.loads(meta.get("cells", "[]"))
    by_key = {r["cell"]: r for r in rows}
    pending = [k for k in cells if k not in by_key]
    reasons = Counter(_reason(r["error"]) for r in rows if r["status"] == "failed")
    groups: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        groups[_group(r)][r["status"]] += 1
    return {"database": str(db), "spec_hash": meta["spec_hash"], "spec": meta.get("spec_path", ""),
            "cells": len(cells) or len(rows), "done": sum(r["status"] == "done" for r in rows),
            "failed": sum(r["status"] == "failed" for r in rows), "pending": len(pending),
            "reasons": dict(reasons.most_common()), "groups": {k: dict(v) for k, v in groups.items()},
            "pending_cells": pending}


def _group(row: dict) -> str:
    if row["kind"] == "extract":
        return f"extract {row['extractor']}"
    if row["kind"] == "optimize":
        return f"optimize {row['model'] or 'file'}"
    return row["kind"]


def _reason(error: str | None) -> str:
    """An error's kind, without the file names and numbers that make each one different."""
    text = (error or "").split("\n")[0]
    text = re.sub(r"^.*\.(json|relay|onnx)\b:?\s*", "", text)  # names may hold spaces
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:100]


def format_status(info: dict) -> str:
    """The status as the command prints it."""
    spec = f" (spec {info['spec']})" if info["spec"] else ""
    lines = [f"study {info['spec_hash']} in {info['database']}{spec}",
             f"cells: {info['cells']}  done: {info['done']}  failed: {info['failed']}  "
             f"pending: {info['pending']}"]
    if info["groups"]:
        lines.append("by task:")
        for name, c in sorted(info["groups"].items()):
            lines.append(f"  {name:<28} done {c.get('done', 0):>5}  failed {c.get('failed', 0):>5}")
    if info["reasons"]:
        lines.append("failures by reason:")
        for reason, n in info["reasons"].items():
            lines.append(f"  {n:>5}  {reason}")
    return "\n".join(lines)


BRIEF = ("input", "model", "extractor", "cost", "rules", "node_limit", "time_limit", "status", "nodes",
         "classes", "tree_cost", "dag_cost", "seconds", "optimal", "gap", "cost_before", "cost_after",
         "speedup", "error", "attempts")


def export_csv(db, path, full: bool = True) -> int:
    """Write every row to a CSV file (the typed columns, then each result's own fields; only the
    main columns, without versions, parameters and raw results, unless ``full``); returns the
    number of rows."""
    rows, _ = _rows(db)
    if full:
        fields = [c for c in COLUMNS if c not in ("result",)]
        fields += sorted({k for r in rows for k in r} - set(fields) - {"result"})
    else:
        used = {k for r in rows for k, v in r.items() if v not in (None, "")}
        fields = [c for c in BRIEF if c in used or c in ("status", "error")]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: _csv_value(r.get(k)) for k in fields})
    return len(rows)


def _csv_value(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return "" if value is None else value


def _instances(rows: list[dict]) -> dict[tuple, dict[str, dict]]:
    """Extract rows by instance (input, cost model, time limit): extractor -> row."""
    out: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        if r["kind"] == "extract":
            out[r["input"], r["cost"], r["time_limit"]][r["extractor"]] = r
    return out


def _ratios(rows: list[dict]) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """Per extractor, DAG cost over the best on each instance (inf where it failed) and its time
    over the fastest; instances whose best cost is not positive are left out (counted)."""
    cost: dict[str, list[float]] = defaultdict(list)
    secs: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    for by in _instances(rows).values():
        ok = {e: r for e, r in by.items() if r["status"] == "done" and r["dag_cost"] is not None}
        best = min((r["dag_cost"] for r in ok.values()), default=None)
        if best is None or best <= 0:
            skipped += 1
            continue
        fastest = min(max(r["seconds"] or 0.0, 1e-6) for r in ok.values())
        for e in by:
            good = e in ok
            cost[e].append(ok[e]["dag_cost"] / best if good else math.inf)
            secs[e].append(max(ok[e]["seconds"] or 0.0, 1e-6) / fastest if good else math.inf)
    return cost, secs, skipped


def summary_rows(rows: list[dict], by_folder: bool = False) -> list[dict]:
    """One row per extractor (per folder of inputs too, when ``by_folder``): instances, failed,
    best found, proved optimal, geometric mean of the cost ratio to the best, median and total time."""
    if by_folder:
        folders = list(dict.fromkeys(Path(r["input"]).parent.name for r in rows if r["kind"] == "extract"))
        return [dict(folder=f, **s) for f in folders
                for s in summary_rows([r for r in rows if r["kind"] == "extract"
                                       and Path(r["input"]).parent.name == f])]
    cost, _, _ = _ratios(rows)
    out = []
    names = list(dict.fromkeys(r["extractor"] for r in rows if r["kind"] == "extract"))
    for e in names:
        mine = [r for r in rows if r["kind"] == "extract" and r["extractor"] == e]
        done = [r for r in mine if r["status"] == "done"]
        finite = [q for q in cost.get(e, []) if math.isfinite(q)]
        times = sorted(r["seconds"] or 0.0 for r in done)
        out.append({"extractor": e, "cells": len(mine), "failed": len(mine) - len(done),
                    "best": sum(q <= 1 + 1e-9 for q in finite),
                    "proved": sum(1 for r in done if r.get("optimal") in (1, True)),
                    "geomean_ratio": math.exp(sum(map(math.log, finite)) / len(finite)) if finite else None,
                    "median_seconds": times[len(times) // 2] if times else None,
                    "total_seconds": sum(times)})
    return out


def _markdown(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v).replace("|", "/")
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def show(db, out: str | os.PathLike | None = None, plots: bool = True) -> dict:
    """The study's tables as Markdown text, and (in ``out``) a CSV of every row, the tables, and
    the plots: cost vs time per extractor, performance profiles, speedup per model."""
    rows, meta = _rows(db)
    info = status(db)
    parts = [format_status(info)]
    extract = summary_rows(rows)
    if extract:
        columns = ["extractor", "cells", "failed", "best", "proved", "geomean_ratio", "median_seconds",
                   "total_seconds"]
        parts += ["", "## Extractors", "", _markdown(extract, columns)]
        folders = summary_rows(rows, by_folder=True)
        if len({f["folder"] for f in folders}) > 1:
            parts += ["", "## Extractors by folder of inputs", "", _markdown(folders, ["folder", *columns])]
        parts += ["", "best: answers with the lowest DAG cost found on their instance; proved: optimality "
                  "proved; geomean_ratio: geometric mean of DAG cost / best over the instances it "
                  "answered; times in seconds (the extractor's own time)."]
    machines = sorted({r["machine"] for r in rows if r["machine"]})
    versions = sorted({r["versions"] for r in rows if r["versions"]})
    if machines:
        parts += ["", "Ran on: " + "; ".join(machines)]
    if versions:
        parts += ["Versions: " + "; ".join(versions)]
    models = [r for r in rows if r["kind"] == "optimize"]
    if models:
        parts += ["", "## Models", "", _markdown(models, ["model", "input", "rules", "cost", "extractor",
                                                          "node_limit", "status", "cost_before",
                                                          "cost_after", "reduction", "speedup",
                                                          "seconds", "error"])]
    text = "\n".join(parts) + "\n"
    written: list[str] = []
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        stem = Path(db).stem
        export_csv(db, out / f"{stem}.csv", full=False)
        (out / f"{stem}.md").write_text(text)
        written += [f"{stem}.csv", f"{stem}.md"]
        if plots and extract:
            plot_cost_time(rows, out / f"{stem}-cost-time.png")
            plot_profiles(rows, out / f"{stem}-profiles.png")
            written += [f"{stem}-cost-time.png", f"{stem}-profiles.png"]
        if plots and models:
            plot_speedup(rows, out / f"{stem}-speedup.png")
            written.append(f"{stem}-speedup.png")
    return {"text": text, "written": [str(Path(out) / w) for w in written] if out is not None else []}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_cost_time(rows: list[dict], path):
    """Each answer's DAG cost over the best on its instance against its time, per extractor."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.5), layout="constrained")
    best = {}
    for key, by in _instances(rows).items():
        costs = [r["dag_cost"] for r in by.values() if r["status"] == "done" and r["dag_cost"] is not None]
        best[key] = min(costs) if costs else None
    names = list(dict.fromkeys(r["extractor"] for r in rows if r["kind"] == "extract"))
    top = 1.1
    for j, e in enumerate(names):
        xs, ys = [], []
        for r in rows:
            key = (r["input"], r["cost"], r["time_limit"])
            if r["kind"] != "extract" or r["extractor"] != e or r["status"] != "done" or not best.get(key):
                continue
            if best[key] <= 0 or r["dag_cost"] is None:
                continue
            xs.append(max(r["seconds"] or 0.0, 1e-5))
            ys.append(r["dag_cost"] / best[key])
        top = max([top, *ys])
        ax.scatter(xs, ys, s=12, alpha=0.6, color=f"C{j}", label=f"{e} ({len(xs)} answers)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(0.99, top * 1.1)
    ax.set_xlabel("extractor wall time (s, log scale; under 10 µs shown at 10 µs)")
    ax.set_ylabel("DAG cost / best DAG cost on the instance (log scale)")
    ax.set_title("cost against time, one point per answer")
    ax.legend(fontsize=8, title="extractor", title_fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig


def _profile(ax, ratios: dict[str, list[float]], xlabel: str, title: str) -> None:
    top = 2.0
    for qs in ratios.values():
        top = max([top, *(q for q in qs if math.isfinite(q))])
    for j, (e, qs) in enumerate(ratios.items()):
        finite = sorted(q for q in qs if math.isfinite(q))
        n = len(qs)
        xs = [1.0, *finite, top * 1.5]
        ys = [sum(q <= 1 + 1e-9 for q in finite) / n, *[(i + 1) / n for i in range(len(finite))],
              len(finite) / n]
        ax.step(xs, ys, where="post", color=f"C{j}", label=f"{e} ({n} instances)")
    ax.set_xscale("log")
    ax.set_xlim(1.0, top * 1.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of instances within x of the best")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")


def plot_profiles(rows: list[dict], path):
    """Performance profiles: for each x, the fraction of instances on which an extractor's DAG
    cost (left) or time (right) is within a factor x of the best; a failed cell never is."""
    plt = _pyplot()
    cost, secs, skipped = _ratios(rows)
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    _profile(a, cost, "x: DAG cost / best DAG cost (log scale)", "cost profile")
    _profile(b, secs, "x: time / fastest time (log scale)", "time profile")
    note = (f"\n({skipped} instances left out: no extractor answered them with a positive cost)"
            if skipped else "")
    fig.suptitle("performance profiles" + note, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig


def plot_speedup(rows: list[dict], path):
    """Per model: the predicted cost ratio (before / after) and the measured numpy speedup."""
    plt = _pyplot()
    models = [r for r in rows if r["kind"] == "optimize" and r["status"] == "done"]
    labels = [" ".join(str(x) for x in (r["model"] or Path(r["input"] or "?").name, r["rules"],
                                        r["cost"], r["node_limit"]) if x is not None) for r in models]
    predicted = [(r["cost_before"] / r["cost_after"]) if r.get("cost_after") else math.nan for r in models]
    measured = [r["speedup"] if r.get("speedup") else math.nan for r in models]
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(models) + 3), 5.5), layout="constrained")
    xs = range(len(models))
    for k, (vals, name) in enumerate(((predicted, "predicted: cost before / after"),
                                      (measured, "measured: numpy time before / after"))):
        pos = [x + (k - 0.5) * 0.38 for x in xs]
        ax.bar(pos, [v - 1 if math.isfinite(v) else 0 for v in vals], 0.38, bottom=1.0, label=name,
               color=f"C{k}")
        for x, v in zip(pos, vals, strict=True):
            ax.text(x, v if math.isfinite(v) else 1.0, f"{v:.2f}x" if math.isfinite(v) else "n/a",
                    ha="center", va="bottom", rotation=90, fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("speedup (x, 1 = unchanged)")
    ax.set_title("speedup per model: predicted by the cost model and measured")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig
