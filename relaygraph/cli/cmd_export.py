"""``relaygraph export``: write a Relay program (a file or a zoo model) as an ONNX model."""

from __future__ import annotations

import argparse

from .cmd_optimize import add_program_arguments, load_program

__all__ = ["register"]


def _cmd_export(args: argparse.Namespace) -> int:
    from ..frontend.onnx_export import save, to_onnx

    mod, params, label = load_program(args, what="export")
    model = to_onnx(mod, params, opset=args.opset)  # an uncovered op: a RelayError, exit 2
    save(model, args.output)
    graph = model.graph
    print(f"exported {label} to {args.output}: opset {model.opset_import[0].version}, "
          f"{len(graph.node)} nodes, {len(graph.input)} inputs, {len(graph.initializer)} initializers")
    return 0


def register(sub) -> None:
    """Add ``export``."""
    p = sub.add_parser("export", help="write a Relay program as an ONNX model (fused groups expanded)")
    add_program_arguments(p)
    p.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    p.add_argument("--opset", type=int, default=None,
                   help="the ONNX opset to write (13 to the installed onnx's newest; default 17, "
                        "as torch.onnx.export)")
    p.set_defaults(run=_cmd_export)
