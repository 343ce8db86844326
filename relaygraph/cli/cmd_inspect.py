"""``relaygraph inspect``: a program's structure and size."""

from __future__ import annotations

import argparse

from ..ir.dag_export import program_stats
from ..ir.expr import Call, Constant, Expr, Function, GlobalVar, Op, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order
from ..ir.types import format_type
from ..validate import positive
from .cmd_optimize import add_program_arguments, load_program

__all__ = ["register"]


def _atom(node: Expr, names: dict) -> str:
    if node in names:
        return names[node]
    if isinstance(node, Var):
        return f"%{node.name_hint}"
    if isinstance(node, GlobalVar):
        return f"@{node.name_hint}"
    if isinstance(node, Constant):
        return repr(node)
    return f"<{type(node).__name__}>"


def _dataflow_listing(func: Function, limit: int) -> list[str]:
    """One line per call in topological order: ``%3 = add(%data, %2)``."""
    names: dict = {}
    lines: list[str] = []
    for node in iter_post_order(func.body):
        if isinstance(node, Call) and isinstance(node.op, Op):
            text = f"{node.op.name}({', '.join(_atom(a, names) for a in node.args)})"
        elif isinstance(node, Tuple):
            text = f"({', '.join(_atom(a, names) for a in node.fields)})"
        elif isinstance(node, TupleGetItem):
            text = f"{_atom(node.tuple_value, names)}.{node.index}"
        else:
            continue
        names[node] = f"%{len(names)}"
        if len(lines) < limit:
            lines.append(f"  {names[node]} = {text}")
    if len(names) > limit:
        lines.append(f"  ... {len(names) - limit} more")
    return lines


def _describe(mod: IRModule, title: str, limit: int) -> str:
    out = [title]
    for gv, func in mod:
        stats = program_stats(func)
        params = ", ".join(
            f"%{p.name_hint}: {format_type(p.type_annotation)}" if p.type_annotation else f"%{p.name_hint}"
            for p in func.params
        )
        saved = 1 - stats["nodes"] / stats["tree_size"] if stats["tree_size"] else 0.0
        out.append(f"@{gv.name_hint}({params})")
        out.extend(_dataflow_listing(func, limit))
        out.append(f"  distinct nodes: {stats['nodes']}   as a tree: {stats['tree_size']}   "
                   f"sharing saves {saved:.0%}   depth: {stats['depth']}   "
                   f"shared nodes: {stats['shared']}")
        ops = ", ".join(f"{k} x{v}" for k, v in stats["ops"].items())
        out.append(f"  op calls: {stats['calls']} ({ops})")
    return "\n".join(out)


def _cmd_inspect(args: argparse.Namespace) -> int:
    positive("--limit", args.limit, integer=True, allow_none=False)
    mod, params, label = load_program(args, what="inspect")
    title = f"file {label}" if params is None else f"model {label}: {len(params)} weight tensors"
    print(_describe(mod, title, args.limit))
    return 0


def register(sub) -> None:
    """Add ``inspect`` to the command's subparsers."""
    p = sub.add_parser("inspect", help="show a program's structure and size (a Relay file or a model)")
    add_program_arguments(p)
    p.add_argument("--limit", type=int, default=40, help="calls to list before eliding")
    p.set_defaults(run=_cmd_inspect)
