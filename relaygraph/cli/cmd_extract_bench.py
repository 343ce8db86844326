"""``relaygraph extract-bench``: every extractor on every e-graph file, as a table, CSV and PNG."""

from __future__ import annotations

import argparse
import glob
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

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
    return list(dict.fromkeys(out))


def _extractors(text: str) -> list[str]:
    from ..egraph.extract.bench import EXTRACTORS

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXTRACTORS]
    if unknown or not names:
        raise UsageError(f"unknown extractor {', '.join(unknown) or '(none)'}; choose from "
                         f"{','.join(EXTRACTORS)}")
    return names


def _finished(files: list[str], names: list[str], labels: dict[str, str], args: argparse.Namespace):
    """(file, its rows) for each file as it finishes: in the order given with one job, else as
    the worker processes finish them."""
    from ..egraph.extract.bench import run_file

    todo = {f: (f, names, args.time_limit, args.cost, labels[f]) for f in files}
    if args.jobs <= 1:
        for f, job in todo.items():
            yield f, run_file(*job)
        return
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_file, *job): f for f, job in todo.items()}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _run_all(files: list[str], names: list[str], args: argparse.Namespace) -> list[dict]:
    """Run every file, printing its rows as soon as it is done; all rows, in the order given."""
    from ..egraph.extract.bench import Table, relative_labels
    from ..progress import phase

    labels = relative_labels(files)
    table = Table([labels[f] for f in files], names)
    bar = phase("extract-bench", total=len(files), unit="file", progress="auto" if args.progress else False)
    bar.print(table.header())
    results: dict[str, list[dict]] = {}
    try:
        for f, rows in _finished(files, names, labels, args):
            results[f] = rows
            bar.print("\n".join(table.row(r) for r in rows))
            bar.step(labels[f])
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
    p.add_argument("--out", default="extract-bench-out", metavar="DIR",
                   help="where the CSV, Markdown table and PNG go (default extract-bench-out)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress output (as --quiet)")
    p.set_defaults(run=_cmd)
