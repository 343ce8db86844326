"""``relaygraph convert`` and ``relaygraph passes``: run passes on a Relay file and print it."""

from __future__ import annotations

import argparse

from . import UsageError

__all__ = ["register"]

_FORMS = {"anf": "ToANormalForm", "gnf": "ToGraphNormalForm", "bbnf": "ToBasicBlockNormalForm"}


def _run(path: str, pipeline_text: str, opt_level: int, timing: bool) -> int:
    from .. import passes as T
    from ..text import astext
    from .cmd_import import read_program

    mod = read_program(path)
    named = pipeline_text.strip() in T.pipeline.NAMED_PIPELINES
    pipeline = T.named_pipeline(pipeline_text.strip()) if named else T.parse_pipeline(pipeline_text)
    instruments = [T.PassTimingInstrument()] if timing else []
    with T.PassContext(opt_level=opt_level, instruments=instruments):
        out = pipeline(mod)
    print(astext(out), end="")
    if timing:
        print("\n// pass timing\n" + "\n".join(f"// {line}" for line in
                                               instruments[0].render().splitlines()))
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    return _run(args.file, _FORMS[args.to], 3, False)


def _cmd_passes(args: argparse.Namespace) -> int:
    from ..passes import PassError

    try:
        return _run(args.file, args.passes, args.opt_level, args.timing)
    except PassError as exc:
        raise UsageError(str(exc)) from None


def register(sub) -> None:
    """Add ``convert`` and ``passes``."""
    p = sub.add_parser("convert", help="convert a program to ANF, graph form or basic-block form")
    p.add_argument("--to", required=True, choices=sorted(_FORMS))
    p.add_argument("file", help="a Relay text file or an ONNX model")
    p.set_defaults(run=_cmd_convert)
    p = sub.add_parser("passes", help="run a pass pipeline and print the result")
    p.add_argument("file", help="a Relay text file or an ONNX model")
    p.add_argument("-p", "--passes", required=True,
                   help='comma-separated passes, e.g. "InferType,FuseOps(fuse-opt-level=2)", or a named '
                        'pipeline: tvm-o3 (TVM\'s opt_level-3 build), tvm-o4')
    p.add_argument("--opt-level", type=int, default=2, help="PassContext opt_level (default 2)")
    p.add_argument("--timing", action="store_true", help="print the time of each pass")
    p.set_defaults(run=_cmd_passes)
