"""MergeCompilerRegions: merge neighbouring regions of the same target (TVM's pass, BYOC).

Regions are visited at their compiler_end annotations in post-order. A region absorbs each parent
region (one feeding its inputs) of the same target unless that would create a cycle: a region
remembers, as restrictions, the regions of other targets upstream of it, and a parent that another
input reaches through such a region is not merged. Where a merged region's output feeds its own
input, the ``compiler_begin(compiler_end(x))`` pair disappears.
"""

from __future__ import annotations

from ..ir.expr import Expr, Function
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order
from ._walk import rebuild
from .annotate_target import BEGIN, END, is_annotation
from .annotated_regions import RegionSet, region_children
from .infer import InferType
from .infra import PassContext, Sequential, function_pass

__all__ = ["MergeCompilerRegions", "merge_compiler_regions"]


def _merge_regions(regions: RegionSet, root: Expr) -> None:
    merged: set[int] = set()
    restrictions: dict[int, set[int]] = {}
    restricted_by: dict[int, set[int]] = {}  # region id -> the regions restricted by it

    def restrict(region_id: int, ids) -> None:
        restrictions.setdefault(region_id, set()).update(ids)
        for i in ids:
            restricted_by.setdefault(i, set()).add(region_id)

    for node in iter_post_order(root):
        if not is_annotation(node, END):
            continue
        region = regions.of_node(node)
        if region.id in merged:
            continue
        parents = []
        for _, begin in region.ins:
            parent = regions.of_node(begin.args[0])
            if parent is not None and parent not in parents:
                parents.append(parent)
        for parent in parents:
            restrict(region.id, restrictions.get(parent.id, ()))
        mine = restrictions.setdefault(region.id, set())
        for parent in parents:
            if parent.target != region.target:
                restrict(region.id, (parent.id,))
                continue
            if parent.id in mine:
                continue
            regions.merge(parent, region)
            # whoever was restricted by the parent is now restricted by the merged region
            for other in restricted_by.pop(parent.id, ()):
                restrictions[other].discard(parent.id)
                restrict(other, (region.id,))
        merged.add(region.id)


def merge_compiler_regions(func: Expr) -> Expr:
    """``func`` with same-target regions merged and the annotations between them removed."""
    regions = RegionSet(func)
    _merge_regions(regions, func)

    def make(node, results):
        kids = node.children()
        if not kids:
            return node
        new = list(results)
        for i in region_children(node):
            kid = kids[i]
            if not (is_annotation(kid, BEGIN) and is_annotation(kid.args[0], END)):
                continue
            end = kid.args[0]
            if regions.of_use(node, i) is regions.of_node(end):
                new[i] = memo[end.args[0]]
        return node.with_children(tuple(new))

    memo: dict = {}
    return rebuild(func, lambda n: n.children(), make, memo)


def MergeCompilerRegions():  # noqa: N802 - Relay's pass name
    """Merge compiler regions of the same target where no cycle results (then InferType)."""

    def run(func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return merge_compiler_regions(func)

    merged = function_pass(run, opt_level=0, name="MergeCompilerRegions")
    return Sequential([merged, InferType()], name="MergeCompilerRegions")
