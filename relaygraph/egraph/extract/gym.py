"""The e-graph that extractors work on, read from and written to the extraction-gym JSON format.

The format (egglog serializes to it too)::

    {"nodes": {"<node id>": {"op": str, "children": [<node id>, ...], "eclass": "<class id>",
               "cost": float (default 1.0), "subsumed": bool (optional)}},
     "root_eclasses": ["<class id>", ...],
     "class_data": {"<class id>": {"type": str, ...}}}        (optional)

A child is written as a node id but stands for that node's whole e-class. Internally nodes and
classes are numbered densely (node ``i``, class ``k``) so the extractors work on lists.
Costs are floats: tree costs of deep residual networks stay finite far beyond what 64-bit
integers hold. Any finite cost is accepted, negative and zero ones too (some published data sets
use them); NaN and infinite costs, dangling children and roots without nodes are refused with
the node or class named. What each extractor guarantees under negative costs is in its docstring.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from ...errors import RelayError

__all__ = ["ExtractionError", "ExtractionGraph", "load_gym", "from_json", "from_egglog"]

_NODE_KEYS = ("op", "children", "eclass", "cost", "subsumed")


class ExtractionError(RelayError):
    """A malformed e-graph, a missing file, or an e-graph with no acyclic term for a root."""


class ExtractionGraph:
    """An e-graph for extraction: nodes with an op, child classes, a float cost, and roots."""

    def __init__(self, node_ids: Sequence[str], ops: Sequence[str], classes: Sequence[int],
                 children: Sequence[Sequence[int]], costs: Sequence[float], class_ids: Sequence[str],
                 roots: Iterable[int], *, subsumed: Iterable[int] = (),
                 class_data: dict[str, dict] | None = None, node_data: dict[int, dict] | None = None,
                 meta: dict[str, Any] | None = None, name: str = "<e-graph>") -> None:
        n = len(node_ids)
        if not (len(ops) == len(classes) == len(children) == len(costs) == n):
            raise ExtractionError(f"{name}: node columns have different lengths")
        self.name = name
        self.node_ids = list(node_ids)
        self.ops = list(ops)
        self.classes = list(classes)
        # children[i] are child *node* indices as written; child_classes[i] are their classes.
        self.children = [tuple(c) for c in children]
        self.costs = [float(c) for c in costs]
        self.class_ids = list(class_ids)
        self.roots = list(dict.fromkeys(roots))  # a root listed twice is needed once
        self.subsumed = frozenset(subsumed)
        self.class_data = dict(class_data or {})
        self.node_data = dict(node_data or {})
        self.meta = dict(meta or {})
        self.source_egraph = None  # a live egglog e-graph this came from (see from_egglog)
        self._validate()
        cls = self.classes
        self.child_classes = [tuple(cls[c] for c in ch) for ch in self.children]
        self.class_nodes: list[list[int]] = [[] for _ in self.class_ids]
        for i, k in enumerate(cls):
            self.class_nodes[k].append(i)
        self._parents: list[list[int]] | None = None

    def _validate(self) -> None:
        n, c = len(self.node_ids), len(self.class_ids)
        for i, cost in enumerate(self.costs):
            if not math.isfinite(cost):
                raise ExtractionError(f"{self.name}: node {self.node_ids[i]!r} has cost {cost!r}; "
                                      f"costs must be finite numbers")
        for i, (k, ch) in enumerate(zip(self.classes, self.children, strict=True)):
            if not 0 <= k < c:
                raise ExtractionError(f"{self.name}: node {self.node_ids[i]!r} has no valid class")
            for j in ch:
                if not 0 <= j < n:
                    raise ExtractionError(f"{self.name}: node {self.node_ids[i]!r} has an unknown child")
        if not self.roots:
            raise ExtractionError(f"{self.name}: no root e-classes")
        for r in self.roots:
            if not isinstance(r, int) or not 0 <= r < c:
                raise ExtractionError(f"{self.name}: unknown root class index {r!r}")
        filled = set(self.classes)
        for r in self.roots:
            if r not in filled:
                raise ExtractionError(f"{self.name}: root e-class {self.class_ids[r]!r} has no nodes")
        for i in self.subsumed:
            if not isinstance(i, int) or not 0 <= i < n:
                raise ExtractionError(f"{self.name}: subsumed node index {i!r} is not a node")

    # -- sizes and indexes ------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """The number of e-nodes."""
        return len(self.node_ids)

    @property
    def num_classes(self) -> int:
        """The number of e-classes."""
        return len(self.class_ids)

    @property
    def parents(self) -> list[list[int]]:
        """For each class, the nodes that have it as a child (each node once per class)."""
        if self._parents is None:
            parents: list[list[int]] = [[] for _ in self.class_ids]
            for i, ccs in enumerate(self.child_classes):
                for k in set(ccs):
                    parents[k].append(i)
            self._parents = parents
        return self._parents

    def usable(self, node: int) -> bool:
        """Whether extraction may choose ``node`` (subsumed nodes and self-loops are never usable)."""
        return node not in self.subsumed and self.classes[node] not in self.child_classes[node]

    def class_index(self, class_id: str) -> int:
        """The index of the class named ``class_id``."""
        try:
            return self._class_index[class_id]
        except AttributeError:
            self._class_index = {c: k for k, c in enumerate(self.class_ids)}
            return self.class_index(class_id)
        except KeyError:
            raise ExtractionError(f"{self.name}: unknown e-class {class_id!r}") from None

    def with_costs(self, costs: Sequence[float]) -> ExtractionGraph:
        """The same e-graph with other node costs."""
        if len(costs) != self.num_nodes:
            raise ExtractionError(f"{self.name}: {len(costs)} costs for {self.num_nodes} nodes")
        out = ExtractionGraph(self.node_ids, self.ops, self.classes, self.children, costs,
                              self.class_ids, self.roots, subsumed=self.subsumed,
                              class_data=self.class_data, node_data=self.node_data, meta=self.meta,
                              name=self.name)
        out.source_egraph = self.source_egraph
        return out

    def __getstate__(self) -> dict:
        # A live egglog e-graph cannot cross processes; everything else can.
        state = dict(self.__dict__)
        state["source_egraph"] = None
        return state

    def __repr__(self) -> str:
        return (f"<ExtractionGraph {self.name}: {self.num_nodes} nodes, {self.num_classes} classes, "
                f"{len(self.roots)} roots>")

    # -- the gym format -----------------------------------------------------------------------
    def to_json(self) -> dict:
        """The e-graph as an extraction-gym JSON document (a dict)."""
        nodes = {}
        for i, nid in enumerate(self.node_ids):
            entry = {"op": self.ops[i], "children": [self.node_ids[c] for c in self.children[i]],
                     "eclass": self.class_ids[self.classes[i]], "cost": self.costs[i]}
            if i in self.subsumed:
                entry["subsumed"] = True
            entry.update(self.node_data.get(i, {}))
            nodes[nid] = entry
        doc = dict(self.meta)
        doc.update({"nodes": nodes, "root_eclasses": [self.class_ids[r] for r in self.roots]})
        if self.class_data:
            doc["class_data"] = self.class_data
        return doc

    def save(self, path: str | os.PathLike) -> None:
        """Write the e-graph as an extraction-gym JSON file."""
        with open(path, "w") as f:
            json.dump(self.to_json(), f)


_MISSING_ROOTS = ("error", "drop")


def from_json(doc: Any, name: str = "<json>", *, missing_roots: str = "error") -> ExtractionGraph:
    """An ExtractionGraph from a parsed extraction-gym JSON document.

    A root e-class with no nodes is refused, naming it (``missing_roots="error"``). Some
    published files list a root id that a merge made non-canonical, next to the root it merged
    into; ``missing_roots="drop"`` drops such roots with a warning and refuses the file only when
    no root is left.
    """
    if missing_roots not in _MISSING_ROOTS:
        raise ExtractionError(f"missing_roots must be one of {', '.join(_MISSING_ROOTS)}, "
                              f"got {missing_roots!r}")
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise ExtractionError(f"{name}: expected an object with a 'nodes' object")
    raw_nodes = doc["nodes"]
    node_index = {nid: i for i, nid in enumerate(raw_nodes)}
    class_index: dict[str, int] = {}
    ops, classes, children, costs, subsumed, node_data = [], [], [], [], [], {}
    for i, (nid, entry) in enumerate(raw_nodes.items()):
        if not isinstance(entry, dict) or "eclass" not in entry:
            raise ExtractionError(f"{name}: node {nid!r} needs an 'eclass'")
        kids = entry.get("children", [])
        if not isinstance(kids, list):
            raise ExtractionError(f"{name}: node {nid!r}: 'children' must be a list")
        try:
            children.append([node_index[c] for c in kids])
        except (KeyError, TypeError):
            bad = next(c for c in kids if not isinstance(c, str) or c not in node_index)
            raise ExtractionError(f"{name}: node {nid!r} has child {bad!r}, which is not a node") from None
        cost = entry.get("cost", 1.0)
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            raise ExtractionError(f"{name}: node {nid!r} has a non-numeric cost {cost!r}")
        try:
            cost = float(cost)
        except OverflowError:  # an integer too large for a float
            cost = math.inf
        if not math.isfinite(cost):
            raise ExtractionError(f"{name}: node {nid!r} has cost {cost!r}; costs must be finite numbers")
        ops.append(str(entry.get("op", "")))
        classes.append(class_index.setdefault(str(entry["eclass"]), len(class_index)))
        costs.append(cost)
        if entry.get("subsumed"):
            subsumed.append(i)
        extra = {k: v for k, v in entry.items() if k not in _NODE_KEYS}
        if extra:
            node_data[i] = extra
    roots = doc.get("root_eclasses")
    if not isinstance(roots, list) or not roots:
        raise ExtractionError(f"{name}: 'root_eclasses' must be a non-empty list")
    bad_root = next((r for r in roots if not isinstance(r, (str, int)) or isinstance(r, bool)), None)
    if bad_root is not None:
        raise ExtractionError(f"{name}: root e-class {bad_root!r} is not a class id")
    missing = [r for r in roots if str(r) not in class_index]
    if missing and (missing_roots == "error" or len(missing) == len(roots)):
        kept = "" if missing_roots == "error" else " (and no other root has nodes)"
        raise ExtractionError(f"{name}: root e-class {missing[0]!r} has no nodes{kept}")
    if missing:
        warnings.warn(f"{name}: dropped root e-class{'es' if len(missing) > 1 else ''} "
                      f"{', '.join(repr(str(r)) for r in missing)} with no nodes", stacklevel=3)
        roots = [r for r in roots if str(r) in class_index]
    class_data = doc.get("class_data") or {}
    if not isinstance(class_data, dict):
        raise ExtractionError(f"{name}: 'class_data' must be an object")
    meta = {k: v for k, v in doc.items() if k not in ("nodes", "root_eclasses", "class_data")}
    return ExtractionGraph(list(raw_nodes), ops, classes, children, costs, list(class_index),
                           [class_index[str(r)] for r in roots], subsumed=subsumed,
                           class_data=class_data, node_data=node_data, meta=meta, name=name)


def load_gym(path: str | os.PathLike, *, missing_roots: str = "error") -> ExtractionGraph:
    """Read an extraction-gym JSON file (the format egglog serializes to); see ``from_json``."""
    name = os.fspath(path)
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ExtractionError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ExtractionError(f"{name}: is a directory, not an e-graph file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ExtractionError(f"{name}: not valid JSON: {exc}") from None
    return from_json(doc, name=os.path.basename(name), missing_roots=missing_roots)


def from_egglog(egraph, roots: Sequence[Any] = (), *, name: str = "<egglog>") -> ExtractionGraph:
    """Serialize a live egglog e-graph (``egglog.EGraph`` or ``egglog.bindings.EGraph``).

    ``roots`` are expressions of the e-graph (Python-declared ``egglog.Expr`` values or
    bindings expressions); without them the serialized roots are used. The result remembers the
    e-graph in ``source_egraph`` so that ``egglog_extract`` can call egglog's own extractor on it.
    """
    from .egglog_extract import serialize_egglog

    doc = serialize_egglog(egraph, roots)
    graph = from_json(doc, name=name)
    graph.source_egraph = (egraph, tuple(roots))
    return graph
