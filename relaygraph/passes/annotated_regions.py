"""Annotated regions (TVM's AnnotatedRegionSet): the parts of a function between compiler_begin
and compiler_end annotations, found in one iterative post-order walk.

Nodes are interned here, so one ``compiler_begin(%x, compiler="A")`` node can feed several
consumers where TVM would have built one begin per consumer. A region input is therefore a *use*
of a begin: ``(consumer, child index)``; each use opens its own region, as each begin node does in
TVM, in the same order (where the begin sits in the post-order walk). Every other node belongs to
at most one region.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import RelayError
from ..ir.expr import Call, Expr, Function, Let
from ..ir.node import Node
from .annotate_target import BEGIN, END, compiler_of, is_annotation

__all__ = ["Region", "RegionSet", "Use", "region_children"]

Use = tuple  # (consumer node, index in consumer.children())


@dataclass(eq=False)
class Region:
    """One region: its id, target and inputs (begin uses); RegionSet.outputs gives its ends."""

    id: int
    target: str
    func_name: str
    ins: list = field(default_factory=list)    # [(use, begin node)]
    parent: Region | None = None                # set when merged into another region

    @property
    def name(self) -> str:
        return self.func_name


def region_children(node: Node) -> tuple[int, ...]:
    """Indices in ``node.children()`` of the operands TVM's region analysis looks at."""
    kids = node.children()
    if isinstance(node, Call):
        return tuple(range(1, len(kids)))  # the arguments, not the callee
    if isinstance(node, Function):
        return ()
    return tuple(range(len(kids)))


def walk_uses(root: Node) -> Iterator[tuple]:
    """Post-order events: ``("node", n)`` once per node that is not a begin, and
    ``("use", consumer, index, begin)`` for every occurrence of a begin as an operand."""
    seen: set = set()
    stack: list = [(root, False, None)]
    while stack:
        node, expanded, use = stack.pop()
        if expanded:
            if use is not None:
                yield ("use", use[0], use[1], node)
            else:
                yield ("node", node)
            continue
        begin_use = use is not None
        if not begin_use:
            if node in seen:
                continue
            seen.add(node)
        stack.append((node, True, use))
        kids = node.children()
        operand = set(region_children(node)) if not begin_use else ()
        for i in range(len(kids) - 1, -1, -1):
            kid = kids[i]
            if is_annotation(kid, BEGIN) and i in operand:
                stack.append((kid, False, (node, i)))
            elif kid not in seen:
                stack.append((kid, False, None))


class RegionSet:
    """The regions of one function body."""

    def __init__(self, root: Expr, func_name: str = "default") -> None:
        self.func_name = func_name
        self.regions: list[Region] = []
        self._of_node: dict[Node, Region] = {}
        self._of_use: dict[tuple, Region] = {}
        self._ends: list = []  # every end node, in post-order
        self._outs: dict | None = None
        for event in walk_uses(root):
            if event[0] == "use":
                _, consumer, index, begin = event
                region = self._make(compiler_of(begin))
                region.ins.append(((consumer, index), begin))
                self._of_use[(consumer, index)] = region
            else:
                self._add_node(event[1])

    # -- look-ups -------------------------------------------------------------------------------
    @staticmethod
    def _find(region: Region | None) -> Region | None:
        if region is None:
            return None
        root = region
        while root.parent is not None:
            root = root.parent
        while region.parent is not None and region.parent is not root:
            region.parent, region = root, region.parent
        return root

    def of_node(self, node: Node) -> Region | None:
        """The region holding ``node`` (not a begin), or None."""
        return self._find(self._of_node.get(node))

    def of_use(self, consumer: Node, index: int) -> Region | None:
        """The region of the begin used as child ``index`` of ``consumer``, or None."""
        return self._find(self._of_use.get((consumer, index)))

    def outputs(self, region: Region) -> list:
        """The end nodes closing ``region`` (after merges: all of its parts), in post-order."""
        if self._outs is None:
            self._outs = {}
            for end in self._ends:
                self._outs.setdefault(self.of_node(end), []).append(end)
        return self._outs.get(self._find(region), [])

    def live(self) -> list[Region]:
        """The regions left after merges, in creation order."""
        return [r for r in self.regions if r.parent is None]

    # -- building -------------------------------------------------------------------------------
    def _make(self, target: str) -> Region:
        region = Region(len(self.regions), target, self.func_name)
        self.regions.append(region)
        return region

    def _operand_region(self, node: Node, i: int, kid: Node) -> Region | None:
        if is_annotation(kid, BEGIN):
            return self.of_use(node, i)
        return self.of_node(kid)

    def _add_node(self, node: Node) -> None:
        if is_annotation(node, BEGIN):
            return
        kids = node.children()
        if is_annotation(node, END):
            region = self._operand_region(node, 1, kids[1])
            if region is None:
                raise RelayError(f"compiler_end(compiler={compiler_of(node)!r}) closes no region: "
                                 f"its argument is not inside a compiler_begin region")
            if region.target != compiler_of(node):
                raise RelayError(f"compiler_end(compiler={compiler_of(node)!r}) closes a region "
                                 f"of target {region.target!r}")
            self._of_node[node] = region
            self._ends.append(node)
            return
        region = None
        for i in region_children(node):
            kid = kids[i]
            if is_annotation(kid, END) or (isinstance(node, Let) and i == 0):
                continue  # a closed region, or a let's bound variable
            r = self._operand_region(node, i, kid)
            if r is None:
                continue
            if region is None:
                region = r
            elif r is not region:
                self.merge(r, region)
        if region is not None:
            self._of_node[node] = region

    def merge(self, src: Region, dest: Region) -> None:
        """Move ``src`` into ``dest`` (TVM's MergeRegions): inputs fed by ``src`` disappear.

        Outputs are not kept per region here (they are found from the end nodes when asked), so
        merging a long run of regions stays linear."""
        src, dest = self._find(src), self._find(dest)
        if src is dest:
            return
        src.parent = dest
        self._outs = None
        dest.ins.extend(src.ins)
        dest.ins = [(u, b) for u, b in dest.ins if self.of_node(b.args[0]) is not dest]
        src.ins = []
