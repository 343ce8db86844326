"""The ``relaygraph`` command line.

Each subcommand lives in its own module ``relaygraph/cli/cmd_<name>.py`` that defines
``register(subparsers)``; the module adds its parser and sets ``run`` to a function
``(args) -> exit code``. Exit codes: 0 done, 1 a check that failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from ..errors import RelayError

__all__ = ["main", "build_parser", "UsageError"]


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``relaygraph`` command, with every subcommand module."""
    parser = argparse.ArgumentParser(prog="relaygraph",
                                     description="Relay programs rewritten with e-graphs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, RelayError, FileNotFoundError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"relaygraph: error: {message}", file=sys.stderr)
        return 2
