"""Which layouts a program's ops run in: calls of ops that take layouts, counted by op and
layouts, and what a rewrite changed in them (a layout rewrite leaves the op counts unchanged);
and the changes between two counts of any kind (an op histogram too), as pairs and as text."""

from __future__ import annotations

from ..ir.expr import Call, Op
from ..ir.node import Node
from ..ir.traversal import iter_post_order
from .fused_ops import definition
from .registry import lookup

__all__ = ["layout_stats", "layout_changes", "count_changes", "changes_text"]


def layout_stats(root: Node) -> dict[str, int]:
    """Calls of ops that take layouts, counted by op and layouts: ``"nn.conv2d NHWC/HWIO": 14``
    (its ``data_layout``, ``kernel_layout``, ``out_layout`` or ``layout`` attributes in the op's
    order, defaults filled in, empty ones left out). A fused op counts as its anchor (the first
    of its parts, which takes its attributes): ``fused.conv2d_bias_relu`` as ``nn.conv2d``, so
    fusing leaves these counts alone. A layout rewrite changes them while the op counts stay."""
    keys: dict[str, dict[str, object]] = {}  # op -> its layout attributes and their defaults
    out: dict[str, int] = {}
    for node in iter_post_order(root):
        if not (isinstance(node, Call) and isinstance(node.op, Op)):
            continue
        name = node.op.name
        fused = definition(name)
        if fused is not None:
            name = fused.parts[0].op
        names = keys.get(name)
        if names is None:
            opdef = lookup(name)
            names = keys[name] = {a: d for a, d in (opdef.attrs.items() if opdef is not None else ())
                                  if a.endswith("layout")}
        if not names:
            continue
        values = [node.attrs.get(a, default) for a, default in names.items()]
        shown = "/".join(str(v) for v in values if v)
        key = f"{name} {shown}" if shown else name
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def layout_changes(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """What a rewrite changed in layouts, from two ``layout_stats``: for each op with calls in
    both whose layouts differ, every layout of it with its count before and after
    (``{"nn.conv2d NCHW/OIHW": (27, 6), "nn.conv2d NHWC/HWIO": (0, 21)}``). An op that appears
    or goes, or whose calls change in number in the same layouts (convolutions that became
    Winograd ones), is a change of ops, which the op counts show."""
    def by_op(stats: dict[str, int]) -> dict[str, set]:
        out: dict[str, set] = {}
        for key in stats:
            out.setdefault(key.split(" ", 1)[0], set()).add(key)
        return out

    ops_before, ops_after = by_op(before), by_op(after)
    changed: dict[str, tuple[int, int]] = {}
    for op in sorted(set(ops_before) & set(ops_after)):
        if ops_before[op] != ops_after[op]:
            for key in sorted(ops_before[op] | ops_after[op]):
                changed[key] = (before.get(key, 0), after.get(key, 0))
    return changed


def count_changes(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """The keys of two counts (an op histogram, ``layout_stats``) whose counts differ, each with
    its count before and after, in key order."""
    return {k: (before.get(k, 0), after.get(k, 0)) for k in sorted(set(before) | set(after))
            if before.get(k, 0) != after.get(k, 0)}


def changes_text(changes: dict[str, tuple[int, int]]) -> str:
    """``"nn.batch_norm 53->0, reshape 98->2"`` from ``count_changes`` or ``layout_changes``, or
    ``"none"``."""
    return ", ".join(f"{k} {a}->{b}" for k, (a, b) in changes.items()) or "none"
