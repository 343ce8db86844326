"""``relaygraph extract-bench``: every extractor on every e-graph file, as a table, CSV and PNG."""

from __future__ import annotations

import argparse
import glob
import os
import sys

from ..validate import positive
from . import UsageError

__all__ = ["register"]

_COSTS = ("given", "node-count", "flops", "bytes", "latency", "measured")


def _files(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(p, "**", "*.json"), recursive=True))
            if not found:
                raise UsageError(f"{p}: no .json e-graph files in this directory")
            out.extend(found)
        elif os.path.exists(p):
            out.append(p)
        else:
            raise UsageError(f"{p}: no such file or directory")
    return [os.path.abspath(f) for f in dict.fromkeys(out)]


def _extractors(text: str) -> list[str]:
    from ..egraph.extract.bench import EXTRACTORS

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXTRACTORS]
    if unknown or not names:
        raise UsageError(f"unknown extractor {', '.join(unknown) or '(none)'}; choose from "
                         f"{','.join(EXTRACTORS)}")
    return names


def _bench_row(label: str, extractor: str, row: dict) -> dict:
    """The row extract-bench prints for one cell of the study: the extractor's row as it ran, or
    an error row when the cell failed before giving one (a crash, a limit)."""
    import json
    import math

    from ..egraph.extract.bench import FIELDS

    result = json.loads(row["result"] or "{}")
    if "status" not in result:
        return {"file": label, "extractor": extractor, "nodes": 0, "classes": 0, "tree_cost": math.nan,
                "dag_cost": math.nan, "seconds": 0.0, "optimal": "", "gap": "",
                "status": f"error: {row['error']}"}
    out = {k: result.get(k) for k in FIELDS}
    out["file"] = label
    for key in ("tree_cost", "dag_cost", "gap"):
        if out[key] is None:
            out[key] = math.nan if key != "gap" else ""
    out["optimal"] = "" if out["optimal"] is None else bool(out["optimal"])
    return out


def _file_rows(label: str, names: list[str], cells: dict[str, dict]) -> list[dict]:
    """A file's rows in the extractors' order; a file that could not be read is one row."""
    rows = [_bench_row(label, n, cells[n]) for n in names]
    unread = [r for r in rows if r["extractor"] == "-"]
    return unread[:1] if unread else rows


def _run_all(files: list[str], names: list[str], args: argparse.Namespace) -> list[dict]:
    """Run every (file, extractor) cell as a study, printing a file's rows as soon as all its
    cells are done; all rows, in the order given."""
    import tempfile

    from ..egraph.extract.bench import Table, relative_labels
    from ..progress import phase
    from ..study import run

    labels = relative_labels(files)
    table = Table([labels[f] for f in files], names)
    bar = phase("extract-bench", total=len(files), unit="file", progress="auto" if args.progress else False)
    bar.print(table.header())
    cells: dict[str, dict[str, dict]] = {f: {} for f in files}
    results: dict[str, list[dict]] = {}

    def arrived(cell, row) -> None:
        f = os.path.abspath(cell.params["input"])
        cells[f][cell.params["extractor"]] = row
        if len(cells[f]) == len(names):
            results[f] = _file_rows(labels[f], names, cells[f])
            bar.print("\n".join(table.row(r) for r in results[f]))
            bar.step(labels[f])

    spec = {"extract": {"inputs": files, "extractors": names, "time_limit": args.time_limit,
                        "cost": args.cost, "missing_roots": args.missing_roots}}
    try:
        with tempfile.TemporaryDirectory(prefix="extract-bench-") as tmp:
            run(spec, os.path.join(tmp, "extract-bench.sqlite"), jobs=args.jobs, progress=False,
                isolate=args.jobs > 1, on_result=arrived)
        bar.done()
    finally:
        bar.close()
    return [row for f in files for row in results[f]]  # in the order given, whatever finished first


def _cmd(args: argparse.Namespace) -> int:
    from ..egraph.extract import bench

    positive("--time-limit", args.time_limit, allow_none=False)
    positive("--jobs", args.jobs, integer=True, allow_none=False)
    names = _extractors(args.extractors)
    files = _files(args.paths)
    rows = _run_all(files, names, args)
    os.makedirs(args.out, exist_ok=True)
    bench.write_csv(rows, os.path.join(args.out, "extract-bench.csv"))
    with open(os.path.join(args.out, "extract-bench.md"), "w") as f:
        f.write(bench.markdown_table(rows) + "\n")
    written = ["extract-bench.csv", "extract-bench.md"]
    if not args.no_plot:
        bench.plot(rows, os.path.join(args.out, "extract-bench.png"), cost=args.cost)
        written.append("extract-bench.png")
    print(f"wrote {', '.join(os.path.join(args.out, w) for w in written)}")
    bad = [r for r in rows if r["status"].startswith(("error", "invalid", "cost mismatch"))]
    for r in bad:
        print(f"relaygraph: error: {r['file']} ({r['extractor']}): {r['status']}", file=sys.stderr)
    if any(r["status"].startswith(("invalid", "cost mismatch")) for r in bad):
        return 1
    return 2 if bad else 0


def register(sub) -> None:
    """Add ``extract-bench`` to the command's subparsers."""
    p = sub.add_parser("extract-bench", help="compare extractors on extraction-gym e-graph files")
    p.add_argument("paths", nargs="+", metavar="PATH", help="e-graph JSON files or directories of them")
    p.add_argument("--extractors", default="tree,greedy-dag,ilp,egglog",
                   help="comma-separated: tree, greedy-dag, ilp, egglog (default: all)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                   help="seconds for each ILP and egglog run (default 60)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="files run in N worker processes")
    p.add_argument("--cost", choices=_COSTS, default="given",
                   help="node costs: as given in the file (default) or a cost model")
    p.add_argument("--missing-roots", choices=("error", "drop"), default="error",
                   help="a root id with no nodes: refuse the file (default) or drop that root with a warning")
    p.add_argument("--out", default="extract-bench-out", metavar="DIR",
                   help="where the CSV, Markdown table and PNG go (default extract-bench-out)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress output (as --quiet)")
    p.set_defaults(run=_cmd)
