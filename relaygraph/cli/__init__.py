"""The ``relaygraph`` command line.

Each subcommand lives in its own module ``relaygraph/cli/cmd_<name>.py`` that defines
``register(subparsers)``; the module adds its parser and sets ``run`` to a function
``(args) -> exit code``. Exit codes: 0 done, 1 a check that failed, 2 bad input, 3 an
internal error (a bug in relaygraph: its traceback is printed with ``--debug`` or
``RELAYGRAPH_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import traceback
import warnings

from ..errors import RelayError, RelayWarning
from ..progress import quiet

__all__ = ["main", "build_parser", "error_message", "UsageError", "EXIT_USAGE", "EXIT_INTERNAL"]

EXIT_USAGE = 2
EXIT_INTERNAL = 3


QUIET_HELP = ("no progress output (otherwise a bar on a terminal, plain lines on stderr when it goes to "
              "a file or pipe)")


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``relaygraph`` command, with every subcommand module."""
    parser = argparse.ArgumentParser(prog="relaygraph",
                                     description="Relay programs rewritten with e-graphs.")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an internal error (or set RELAYGRAPH_DEBUG=1)")
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__name__}.{info.name}").register(sub)
    for command in sub.choices.values():  # also after the command; SUPPRESS keeps one given before it
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with quiet(args.quiet), _user_warnings():
            return args.run(args)
    except (UsageError, RelayError, OSError) as exc:
        print(error_message(exc), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - anything else is a bug, reported as one
        return _internal_error(exc, args.debug or bool(os.environ.get("RELAYGRAPH_DEBUG")))


@contextlib.contextmanager
def _user_warnings():
    """Warnings for the user (``RelayWarning``: a calibration during which the machine's speed
    changed, ...) printed as ``relaygraph: warning: ...``, each time, whatever command raised
    them; other warnings as Python shows them."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", RelayWarning)
        show = warnings.showwarning

        def show_user(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, RelayWarning):
                print(f"relaygraph: warning: {message}", file=sys.stderr)
            else:
                show(message, category, filename, lineno, file, line)
        warnings.showwarning = show_user
        yield


def error_message(exc: Exception) -> str:
    """The one-line report of bad input: ``file:line:col: error: ...`` (with the source line and
    a caret) when the error points into a file, else ``relaygraph: error: ...``; "error:" once."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"relaygraph: error: {where}{exc.strerror[:1].lower()}{exc.strerror[1:]}"
    if getattr(exc, "span", None) is not None:
        return str(exc)  # format_diagnostic: it already says where and "error:"
    return f"relaygraph: error: {getattr(exc, 'message', None) or exc}"


def _internal_error(exc: Exception, debug: bool) -> int:
    """Report an unexpected exception as relaygraph's own fault, not the user's."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    hint = "" if debug else " (run with --debug or RELAYGRAPH_DEBUG=1 for the traceback)"
    print(f"relaygraph: internal error: {type(exc).__name__}: {exc}\n"
          f"this is a bug in relaygraph, please report it{hint}", file=sys.stderr)
    return EXIT_INTERNAL
