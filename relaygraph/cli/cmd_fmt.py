"""``relaygraph fmt``: print a Relay text file in canonical form."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ParseError
from ..validate import read_text
from . import UsageError
from .cmd_import import is_onnx, read_program

__all__ = ["register"]


def _cmd_fmt(args: argparse.Namespace) -> int:
    from ..text import astext, parse

    path = Path(args.file)
    if is_onnx(path):
        if args.in_place or args.check:
            raise UsageError(f"{path}: --in-place and --check apply to Relay text, not to an ONNX model")
        text, mod = "", read_program(str(path))
    else:
        text = read_text(path, ParseError, "Relay file")
        mod = parse(text, source_name=str(path))  # a parse error is reported by the command line (exit 2)
    if args.types:
        from ..ty import infer_type

        mod = infer_type(mod)  # a type error is reported by the command line (exit 2)
    out = astext(mod, show_types=args.types)
    if args.in_place:
        if out != text:
            path.write_text(out)
        return 0
    if args.check:
        if out != text:
            print(f"{path}: not in canonical form", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(out)
    return 0


def register(sub) -> None:
    """Add ``fmt`` to the command's subparsers."""
    p = sub.add_parser("fmt", help="print a .relay file in canonical form (TVM's printing rules)")
    p.add_argument("file", help="a Relay module (text format version 0.0.5)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("-i", "--in-place", action="store_true", help="rewrite the file")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if the file is not in canonical form")
    p.add_argument("--types", action="store_true",
                   help="type-check and add /* ty=... */ comments, as TVM's astext does")
    p.set_defaults(run=_cmd_fmt)
