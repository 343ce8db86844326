"""``relaygraph study``: run a study spec, or report on a study database.

    relaygraph study SPEC.toml [--db DB] [--jobs N | --cluster local:N | --scheduler tcp://HOST:PORT]
                               [--retry-failed] [--new]
    relaygraph study status DB
    relaygraph study show DB [--out DIR] [--csv FILE] [--no-plot]

A run ends with 0 when every cell it ran has a row (failed cells are rows too: see ``status``).
"""

from __future__ import annotations

import argparse
import os

from . import UsageError

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from .. import study

    if args.target in ("status", "show"):
        if args.db_arg is None:
            raise UsageError(f"study {args.target} needs the study database: relaygraph study "
                             f"{args.target} DB")
        if args.target == "status":
            print(study.format_status(study.status(args.db_arg)))
            return 0
        shown = study.show(args.db_arg, out=args.out, plots=not args.no_plot)
        print(shown["text"], end="")
        if args.csv:
            n = study.export_csv(args.db_arg, args.csv)
            shown["written"].append(f"{args.csv} ({n} rows)")
        if shown["written"]:
            print(f"wrote {', '.join(shown['written'])}")
        return 0
    if args.db_arg is not None:
        raise UsageError(f"unexpected argument {args.db_arg!r}: a run takes one spec file "
                         "(give its database with --db)")
    if not os.path.exists(args.target):
        raise UsageError(f"{args.target}: no such spec file (or give status DB / show DB)")
    counts = study.run(args.target, args.db, jobs=args.jobs, cluster=args.cluster,
                       scheduler=args.scheduler, retry_failed=args.retry_failed, new=args.new,
                       progress="auto" if args.progress else False)
    print(f"study {counts['spec_hash']}: {counts['cells']} cells; ran {counts['done'] + counts['failed']} "
          f"({counts['done']} done, {counts['failed']} failed) in {counts['seconds']:.1f} s; "
          f"{counts['skipped']} already in {counts['database']}")
    if counts["failed"]:
        print(f"see: relaygraph study status {counts['database']}")
    return 0


def register(sub) -> None:
    """Add ``study`` to the command's subparsers."""
    p = sub.add_parser("study", help="run a grid of extraction/optimization tasks with resumable results",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="SPEC.toml|status|show",
                   help="a study spec to run, or 'status DB' / 'show DB'")
    p.add_argument("db_arg", nargs="?", metavar="DB", help="the study database (status, show)")
    p.add_argument("--db", default=None, metavar="DB",
                   help="the database to run into (default: the spec's [study] database, else "
                        "SPEC.sqlite next to the spec)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="cells run in N local processes")
    p.add_argument("--cluster", default=None, metavar="local:N",
                   help="run on a Dask LocalCluster of N worker processes (the 'study' extra)")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run on a running Dask cluster, e.g. tcp://HOST:8786 (the 'study' extra)")
    p.add_argument("--retry-failed", action="store_true", help="run the failed cells again too")
    p.add_argument("--new", action="store_true",
                   help="start the database afresh (needed when it holds another spec's study)")
    p.add_argument("--out", default=None, metavar="DIR", help="show: write the CSV, tables and plots here")
    p.add_argument("--csv", default=None, metavar="FILE", help="show: also export every row to FILE")
    p.add_argument("--no-plot", action="store_true", help="show: no plots")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress output (as --quiet)")
    p.set_defaults(run=_cmd)
