"""``relaygraph profile``: where a program's time goes, per op and per op kind, measured and predicted."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .cmd_optimize import add_program_arguments, load_program

__all__ = ["register"]


def _cmd_profile(args: argparse.Namespace) -> int:
    from ..egraph.cpu_cost import default_profile
    from ..egraph.program_profile import profile
    from ..validate import positive

    positive("--runs", args.runs, integer=True, allow_none=False)
    positive("--top", args.top, integer=True, allow_none=False)
    default_profile(calibrate=not args.no_calibrate)  # before any work: a missing profile is reported first
    mod, params, label = load_program(args, what="profile")
    if "main" not in mod:
        from . import UsageError

        raise UsageError(f"{label}: no @main function to profile")
    print(f"profiling {label}")
    result = profile(mod, params, runs=args.runs, seed=args.seed, calibrate=not args.no_calibrate)
    print(result.table(args.top))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1))
        print(f"profile written to {args.json}")
    return 0


def register(sub) -> None:
    """Add ``profile``."""
    p = sub.add_parser("profile", help="time a program per op and per op kind, beside the cpu model")
    add_program_arguments(p)
    p.add_argument("--runs", type=int, default=5, help="runs of each node and of the program (median)")
    p.add_argument("--top", type=int, default=15, help="ops listed (the costliest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--no-calibrate", action="store_true",
                   help="fail instead of calibrating when this machine has no CPU profile")
    p.add_argument("--json", metavar="FILE", help="write the per-node figures here as JSON")
    p.set_defaults(run=_cmd_profile)
