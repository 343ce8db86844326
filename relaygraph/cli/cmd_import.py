"""``relaygraph import``: an ONNX model as Relay text; and the reader every command uses for a
program file, which takes ``.onnx`` (by extension or content) as well as Relay text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import UsageError

__all__ = ["register", "is_onnx", "read_program", "parse_shapes"]

SHAPE_HELP = "an input's shape for an ONNX model, e.g. --shape data=1,3,224,224 (repeatable)"


def is_onnx(path: str | Path) -> bool:
    """Whether ``path`` names an ONNX model: a ``.onnx`` file, or a file starting as one does."""
    path = Path(path)
    if path.suffix.lower() == ".onnx":
        return True
    try:
        with path.open("rb") as f:
            head = f.read(2)
    except OSError:
        return False
    # a ModelProto starts with field 1 (ir_version, a small varint); Relay text never has byte 8
    return len(head) == 2 and head[0] == 0x08 and head[1] < 0x80


def parse_shapes(pairs: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224"]`` as ``{"x": (1, 3, 224, 224)}``."""
    out: dict[str, tuple[int, ...]] = {}
    for pair in pairs or []:
        name, sep, dims = pair.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = None
        if not sep or not name or not shape or any(d < 0 for d in shape):
            raise UsageError(f"--shape {pair!r} must look like NAME=D1,D2,... with non-negative "
                             "integers")
        out[name] = shape
    return out


def read_program(path: str, shapes: list[str] | None = None):
    """The IRModule in a Relay text file or an ONNX model (weights bound as constants)."""
    if is_onnx(path):
        from ..frontend.onnx_import import from_onnx

        mod, _ = from_onnx(path, shape=parse_shapes(shapes) or None)
        return mod
    if shapes:
        raise UsageError("--shape applies to ONNX models, not to Relay text")
    from ..text import parse_file

    return parse_file(path)


def _cmd_import(args: argparse.Namespace) -> int:
    from ..text import astext

    if not is_onnx(args.file) and Path(args.file).is_file():
        raise UsageError(f"{args.file}: not an ONNX model (expected a .onnx file)")
    mod = read_program(args.file, args.shape)
    text = astext(mod)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    Path(args.output).write_text(text)
    n = len(mod["main"].params)
    print(f"wrote {args.output}: @main with {n} input{'s' if n != 1 else ''}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add ``import``."""
    p = sub.add_parser("import", help="import an ONNX model as Relay text")
    p.add_argument("file", help="an ONNX model (.onnx)")
    p.add_argument("-o", "--output", help="the Relay file to write (default: standard output)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS", help=SHAPE_HELP)
    p.set_defaults(run=_cmd_import)
