"""MergeComposite: each match of a named pattern becomes a ``Composite="<name>"`` function (BYOC).

``pattern_table`` is a list of ``(name, pattern)`` or ``(name, pattern, check)`` in priority
order; each pattern partitions the function in turn with the dataflow pattern language's
``partition`` (so a composite also carries ``PartitionedFromPattern``, and a later pattern does
not look inside an earlier one's composites). ``check(expr)`` vetoes a match. Name composites
``<target>.<name>`` for AnnotateTarget to offload them to ``<target>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RelayError
from ..ir.expr import Function
from ..ir.module import IRModule
from ..rewrite.dataflow_pattern import DFPattern, partition
from .infer import InferType
from .infra import PassContext, Sequential, function_pass

__all__ = ["MergeComposite", "merge_composite"]


def _table(pattern_table) -> list[tuple]:
    if isinstance(pattern_table, (str, bytes)) or not isinstance(pattern_table, Sequence):
        raise RelayError(f"MergeComposite: pattern_table must be a list of (name, pattern[, check]) "
                         f"tuples, got {type(pattern_table).__name__}")
    out = []
    for i, entry in enumerate(pattern_table):
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
            raise RelayError(f"MergeComposite: pattern_table[{i}] must be (name, pattern) or "
                             f"(name, pattern, check), got {entry!r}")
        name, pattern, *rest = entry
        check = rest[0] if rest else None
        if not isinstance(name, str) or not name:
            raise RelayError(f"MergeComposite: pattern_table[{i}]: the name must be a non-empty "
                             f"string, got {name!r}")
        if not isinstance(pattern, DFPattern):
            raise RelayError(f"MergeComposite: pattern {name!r} is a {type(pattern).__name__}, "
                             f"not a dataflow pattern")
        if check is not None and not callable(check):
            raise RelayError(f"MergeComposite: the check of pattern {name!r} is not callable")
        out.append((name, pattern, check))
    return out


def merge_composite(func: Function, pattern_table) -> Function:
    """``func`` with every match of the table's patterns made a composite function call."""
    for name, pattern, check in _table(pattern_table):
        func = partition(pattern, func, {"Composite": name}, check)
    return func


def MergeComposite(pattern_table):  # noqa: N802 - Relay's pass name
    """Merge the matches of each named pattern into ``Composite`` functions (then InferType)."""
    table = _table(pattern_table)

    def run(func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return merge_composite(func, table)

    merged = function_pass(run, opt_level=0, name="MergeComposite")
    return Sequential([merged, InferType()], name="MergeComposite")
