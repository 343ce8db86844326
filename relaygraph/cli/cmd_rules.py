"""``relaygraph rules``: work with rule files (``check``: evaluate every rule on random inputs)."""

from __future__ import annotations

import argparse
import sys

from ..validate import positive

__all__ = ["register"]


def _cmd_check(args: argparse.Namespace) -> int:
    from ..rewrite import load_rules
    from ..rewrite.soundness import check_rules, format_results

    for option in ("trials", "tries"):
        positive(f"--{option}", getattr(args, option), integer=True, allow_none=False)
    rules = load_rules(args.paths)  # a bad rule file is reported by the command line (exit 2)
    if args.rule:
        wanted = set(args.rule)
        rules = [r for r in rules if r.name in wanted or r.name.removesuffix("<=") in wanted]
        if not rules:
            print(f"relaygraph: error: no rule named {', '.join(sorted(wanted))}", file=sys.stderr)
            return 2
    results = check_rules(rules, trials=args.trials, seed=args.seed, tries=args.tries)
    print(format_results(results))
    return 0 if all(r.ok or r.status == "not instantiable" for r in results) else 1


def register(sub) -> None:
    """Add ``rules`` (with its ``check`` action) to the command's subparsers."""
    p = sub.add_parser("rules", help="work with rewrite rule files")
    actions = p.add_subparsers(dest="action", required=True)
    c = actions.add_parser(
        "check", help="check that every rule is sound: both sides evaluated on random inputs agree",
        description="Instantiate every rule on random shapes and values that satisfy its condition, "
                    "evaluate both sides and compare. Exit code 1 when a rule is unsound or changes "
                    "a type, 2 for bad input.")
    c.add_argument("paths", nargs="+", help=".rules or .egg files, or directories of them")
    c.add_argument("--trials", type=int, default=3, help="instances per rule (default 3)")
    c.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    c.add_argument("--tries", type=int, default=300,
                   help="attempts to find an instance per trial (default 300)")
    c.add_argument("--rule", action="append", metavar="NAME",
                   help="check only this rule (both directions); may be repeated")
    c.set_defaults(run=_cmd_check)
