"""Cost models for extraction: plain functions ``cost(op, attrs, arg_types, out_type) -> float``.

``op`` is an operator name from the op table (``nn.conv2d``, or a fused op such as
``fused.dense_bias``, whose record gives its FLOPs and external traffic), a fused group outside
the table (a name starting ``fused.``, see below) or anything else an e-graph holds (variables,
constants, tuples, literals), which is free for every model but ``node_count``. ``attrs`` is a
mapping (a Call's ``Attrs`` or a dict), ``arg_types`` the argument types and ``out_type`` the
result type (``relaygraph.ir`` types).

- ``node_count``: 1 per node.
- ``flops``: the op record's FLOPs.
- ``bytes``: bytes read and written (the op record's figure, else inputs + output).
- ``latency``: per kernel ``max(flops / peak, bytes / bandwidth) + launch`` on a ``Machine``.
  A fused group pays one launch and only its external traffic (its inputs and output).
- ``measured``: numpy time of the op's kernel on random inputs of that signature, measured once
  and cached on disk (``$XDG_CACHE_HOME/relaygraph`` or ``~/.cache/relaygraph``).
- ``cpu``: seconds of this machine's numpy executor (dispatch plus the kernel), from a profile
  calibrated once (``relaygraph calibrate``; see ``cpu_cost.py``).

A fused group ``fused.<name>`` that is not in the op table lists its member calls in
``attrs["fused_ops"]`` as ``(op, attrs, arg_types, out_type)`` tuples, innermost first; its own
``arg_types`` and ``out_type`` are the group's external inputs and output. Symbolic dimensions
count as ``Machine.symbolic_dim``; a ``?`` dimension has no cost and raises CostModelError.

To cost an extraction e-graph, ``apply_cost(graph, model, describe)`` calls
``describe(graph, node) -> NodeInfo`` for every node. Two describers are built in:
``describe_from_encoding`` reads an e-graph serialized from egglog in relaygraph's Relay
encoding (``relaygraph.egraph.encoding``: ``r:<op>`` constructors with attribute Strings, a
class's type as ``(Ty e)`` in a class with ``(T text)``), and ``describe_from_json`` reads plain
fields of the document (see its docstring). ``apply_cost`` picks the first when the e-graph has ``r:`` nodes.
"""

from __future__ import annotations

import builtins
import functools
import json
import math
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import RelayError
from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType, Type, format_type

__all__ = [
    "CostModelError", "Machine", "DEFAULT_MACHINE", "NodeInfo", "node_count", "flops", "bytes",
    "latency", "make_latency", "measured", "MeasuredCost", "apply_cost", "describe_from_json",
    "COST_MODELS", "cache_dir", "describe_from_encoding", "cpu",
]

CostFn = Callable[[str, Mapping, Sequence[Type], Any], float]
_DTYPE_BYTES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
                "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8,
                "float64": 8}


class CostModelError(RelayError):
    """A cost that cannot be computed: unknown dims, missing fused members, missing types."""


@dataclass(frozen=True)
class Machine:
    """The figures of the latency model (defaults: a modest GPU-like device)."""

    peak_flops: float = 10e12  # FLOP/s
    bandwidth: float = 500e9  # bytes/s
    launch: float = 5e-6  # seconds per kernel launch
    symbolic_dim: int = 1  # the size a symbolic dimension counts as


DEFAULT_MACHINE = Machine()


def _is_fused(op: str) -> bool:
    return op.startswith("fused.")


def _lookup(op: str):
    from ..ops import lookup

    return lookup(op)


def _number(value, op: str, what: str, machine: Machine) -> float:
    free = getattr(value, "free_symbols", None)
    if free:
        value = value.subs({s: machine.symbolic_dim for s in free})
    out = float(value)
    if math.isnan(out):
        raise CostModelError(f"{what} of {op} is unknown: its types have a '?' dimension")
    return out


def _type_bytes(t, machine: Machine) -> float:
    if isinstance(t, TupleType):
        return math.fsum(_type_bytes(f, machine) for f in t.fields)
    if not isinstance(t, TensorType):
        return 0.0
    count = 1
    for d in t.shape:
        if d is AnyDim:
            raise CostModelError(f"bytes of {format_type(t)} are unknown: it has a '?' dimension")
        count *= d if isinstance(d, int) else _number(d, format_type(t), "size", machine)
    return float(count) * _DTYPE_BYTES.get(t.dtype, 4)


def _members(op: str, attrs: Mapping) -> list[tuple]:
    members = attrs.get("fused_ops") if attrs else None
    if not members:
        raise CostModelError(f"fused op {op} must list its member calls in attrs['fused_ops']")
    return [tuple(m) for m in members]


def node_count(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
    """Every node costs 1."""
    return 1.0


def _flops(op, attrs, arg_types, out_type, machine: Machine) -> float:
    opdef = _lookup(op)
    if opdef is not None:  # fused ops in the table know their own FLOPs
        return _number(opdef.flops(list(arg_types), out_type, attrs or {}), op, "FLOPs", machine)
    if _is_fused(op):
        return math.fsum(_flops(*m, machine) for m in _members(op, attrs))
    return 0.0


def _bytes(op, attrs, arg_types, out_type, machine: Machine) -> float:
    opdef = _lookup(op)
    if opdef is None and not _is_fused(op):
        return 0.0
    if opdef is not None and opdef.bytes is not None:
        return _number(opdef.bytes(list(arg_types), out_type, attrs or {}), op, "bytes", machine)
    # A fused group moves only its external inputs and output; the rest stays on chip.
    return math.fsum(_type_bytes(t, machine) for t in arg_types) + _type_bytes(out_type, machine)


def flops(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
    """Floating-point operations of one call (a fused group: the sum of its members)."""
    return _flops(op, attrs, arg_types, out_type, DEFAULT_MACHINE)


def bytes(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:  # noqa: A001
    """Bytes read and written by one call (a fused group: its external traffic only)."""
    return _bytes(op, attrs, arg_types, out_type, DEFAULT_MACHINE)


def make_latency(machine: Machine = DEFAULT_MACHINE) -> CostFn:
    """The latency model for ``machine``: a roofline time per kernel plus a launch overhead."""

    def latency_on(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
        if _lookup(op) is None and not _is_fused(op):
            return 0.0  # not a kernel: variables, constants, tuples
        work = _flops(op, attrs, arg_types, out_type, machine) / machine.peak_flops
        traffic = _bytes(op, attrs, arg_types, out_type, machine) / machine.bandwidth
        return max(work, traffic) + machine.launch

    latency_on.__doc__ = f"Latency in seconds on {machine}."
    return latency_on


latency = make_latency()
latency.__name__ = "latency"


def cache_dir() -> str:
    """Where measured costs are cached: ``$XDG_CACHE_HOME/relaygraph`` or ``~/.cache/relaygraph``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "relaygraph")


def _attr_key(value) -> Any:
    if isinstance(value, (builtins.bytes, str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_attr_key(v) for v in value]
    return str(value)


class MeasuredCost:
    """Seconds of numpy time per op signature, measured once and cached as JSON on disk."""

    def __init__(self, path: str | None = None, repeats: int = 5, min_seconds: float = 2e-3,
                 seed: int = 0) -> None:
        self.path = path or os.path.join(cache_dir(), "measured_costs.json")
        self.repeats = repeats
        self.min_seconds = min_seconds
        self.seed = seed
        self._table: dict[str, float] | None = None

    def key(self, op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> str:
        """The cache key: op, argument and result types, and attributes."""
        items = sorted((k, _attr_key(v)) for k, v in dict(attrs or {}).items())
        return json.dumps([op, [format_type(t) for t in arg_types],
                           format_type(out_type) if out_type is not None else None, items])

    def _load(self) -> dict[str, float]:
        if self._table is None:
            try:
                with open(self.path) as f:
                    self._table = {k: float(v) for k, v in json.load(f).items()}
            except (OSError, ValueError, AttributeError):
                self._table = {}  # no cache yet, or an unreadable one: measure again
        return self._table

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self._table, f, indent=0, sort_keys=True)
        os.replace(tmp, self.path)  # atomic: concurrent writers never leave half a file

    def __call__(self, op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
        opdef = _lookup(op)
        if opdef is None:
            if _is_fused(op):  # a group outside the table: numpy runs its members one by one
                return math.fsum(self(*m) for m in _members(op, attrs))
            return 0.0
        table = self._load()
        key = self.key(op, attrs, arg_types, out_type)
        if key not in table:
            table[key] = self._measure(opdef, attrs, arg_types)
            self._save()
        return table[key]

    def _measure(self, opdef, attrs, arg_types) -> float:
        from ..ops.domains import random_inputs

        try:
            args = random_inputs(opdef, list(arg_types), attrs or {}, rng=self.seed)
        except RelayError as exc:
            raise CostModelError(f"cannot measure {opdef.name}: {exc}") from None
        kernel = opdef.kernel
        kernel(args, attrs or {})  # warm-up, and find how many runs fill min_seconds
        start = time.perf_counter()
        kernel(args, attrs or {})
        once = max(time.perf_counter() - start, 1e-7)
        loops = max(1, int(self.min_seconds / once))
        best = math.inf
        for _ in range(self.repeats):
            start = time.perf_counter()
            for _ in range(loops):
                kernel(args, attrs or {})
            best = min(best, (time.perf_counter() - start) / loops)
        return best


_MEASURED = MeasuredCost()


def measured(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
    """Seconds of numpy time for one call, from the on-disk cache or measured now."""
    return _MEASURED(op, attrs, arg_types, out_type)


def cpu(op: str, attrs: Mapping, arg_types: Sequence[Type], out_type) -> float:
    """Seconds of this machine's numpy executor for one call, from its calibrated profile
    (``relaygraph.egraph.cpu_cost``; calibrated on first use when there is none)."""
    from .cpu_cost import default_profile

    return default_profile()(op, attrs, arg_types, out_type)


COST_MODELS: dict[str, CostFn] = {"node-count": node_count, "flops": flops, "bytes": bytes,
                                  "latency": latency, "measured": measured, "cpu": cpu}


@dataclass(frozen=True)
class NodeInfo:
    """What a cost model needs to know about one e-node."""

    op: str
    attrs: Mapping
    arg_types: tuple
    out_type: Any


def _type_from_json(data: Any, where: str) -> Type | None:
    if data is None:
        return None
    if isinstance(data, dict) and "tuple" in data:
        return TupleType([_type_from_json(f, where) for f in data["tuple"]])
    if not isinstance(data, dict) or "shape" not in data:
        raise CostModelError(f"{where}: a tensor type is {{'shape': [...], 'dtype': ...}}, got {data!r}")
    dims = []
    for d in data["shape"]:
        if d == "?":
            dims.append(AnyDim)
        elif isinstance(d, str):
            from ..ty.dims import parse_dim

            dims.append(parse_dim(d))
        else:
            dims.append(int(d))
    return TensorType(tuple(dims), data.get("dtype", "float32"))


def describe_from_json(graph, node: int) -> NodeInfo:
    """A node as a Relay bridge writes it into the extraction-gym document.

    The node's ``op`` is the operator name; an optional node field ``"attrs"`` holds its
    attributes (a JSON object; a fused group's ``fused_ops`` members as
    ``[op, attrs, [arg types], out type]`` lists); ``class_data[class]["tensor"]`` is the class's
    type as ``{"shape": [1, 3, "n", "?"], "dtype": "float32"}`` or ``{"tuple": [...]}``.
    Argument types are the types of the node's child classes.
    """
    types = _JSON_TYPES.get(graph)
    if types is None:
        types = _JSON_TYPES[graph] = {}

    def class_type(k: int):
        if k not in types:
            entry = graph.class_data.get(graph.class_ids[k]) or {}
            types[k] = _type_from_json(entry.get("tensor"), f"{graph.name}: e-class {graph.class_ids[k]}")
        return types[k]

    attrs = dict((graph.node_data.get(node) or {}).get("attrs") or {})
    if "fused_ops" in attrs:
        attrs["fused_ops"] = [(m[0], m[1], tuple(_type_from_json(t, graph.name) for t in m[2]),
                               _type_from_json(m[3], graph.name)) for m in attrs["fused_ops"]]
    arg_types = tuple(class_type(k) for k in graph.child_classes[node])
    return NodeInfo(graph.ops[node], attrs, arg_types, class_type(graph.classes[node]))


_JSON_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=4096)
def _parse_type(text: str) -> Type:
    from ..text import parse_expr

    try:
        return parse_expr(f"fn (%x: {text}) {{ %x }}").params[0].type_annotation
    except RelayError as exc:
        raise CostModelError(f"cannot read the type {text!r}: {exc}") from None


def _literal(graph, k: int) -> str | None:
    """The text of the String literal in class ``k`` (egglog writes it JSON-quoted)."""
    for n in graph.class_nodes[k]:
        op = graph.ops[n]
        if not graph.child_classes[n] and op.startswith('"'):
            return json.loads(op)
    return None


_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _encoded_types(graph) -> dict[int, str]:
    """Class -> type text in an encoded e-graph: ``(Ty e)`` in a class with ``(T text)``, or a
    ``ty`` function row (a plain egglog program that keeps types as a String function)."""
    types = _TYPES.get(graph)
    if types is None:
        types = {}
        texts = {}  # RType class -> its T's text
        for n, op in enumerate(graph.ops):
            if op == "T" and len(graph.child_classes[n]) == 1:
                text = _literal(graph, graph.child_classes[n][0])
                if text is not None:
                    texts[graph.classes[n]] = text
        for n, op in enumerate(graph.ops):
            if len(graph.child_classes[n]) != 1:
                continue
            if op == "Ty":
                text = texts.get(graph.classes[n])
            elif op == "ty":
                text = _literal(graph, graph.classes[n])
            else:
                continue
            if text is not None:
                types[graph.child_classes[n][0]] = text
        _TYPES[graph] = types
    return types


def describe_from_encoding(graph, node: int) -> NodeInfo:
    """A node of an e-graph serialized from egglog in relaygraph's Relay encoding.

    ``r:<op>`` nodes take their expression children as inputs and their String children as the
    op's attributes in table order; every expression class's type is the text of the ``T`` in
    its ``Ty``'s class. Other nodes (variables, constants, lists, literals, types) cost nothing.
    """
    from ..ops import lookup
    from .encoding import OP_PREFIX, parse_attr_key

    types = _encoded_types(graph)
    op = graph.ops[node]

    def type_of(k: int):
        text = types.get(k)
        return None if text is None else _parse_type(text)

    out_type = type_of(graph.classes[node])
    if not op.startswith(OP_PREFIX):
        return NodeInfo(op, {}, (), out_type)
    name = op[len(OP_PREFIX):]
    opdef = lookup(name)
    if opdef is None:
        raise CostModelError(f"{graph.name}: node {graph.node_ids[node]!r}: unknown operator {name}")
    kids = graph.child_classes[node]
    is_text = [k not in types and _literal(graph, k) is not None for k in kids]
    inputs = [k for k, t in zip(kids, is_text, strict=True) if not t]
    texts = [_literal(graph, k) for k, t in zip(kids, is_text, strict=True) if t]
    if len(texts) != len(opdef.attrs):
        raise CostModelError(f"{graph.name}: node {graph.node_ids[node]!r}: {name} has {len(opdef.attrs)} "
                             f"attribute(s), the node gives {len(texts)}")
    attrs = {a: parse_attr_key(t) for a, t in zip(opdef.attrs, texts, strict=True)}
    return NodeInfo(name, attrs, tuple(type_of(k) for k in inputs), out_type)


def apply_cost(graph, model: CostFn | str, describe: Callable[[Any, int], NodeInfo] | None = None):
    """The e-graph with each node's cost replaced by ``model`` (a function or a COST_MODELS name).

    ``describe`` defaults to ``describe_from_encoding`` for e-graphs with ``r:`` nodes and to
    ``describe_from_json`` otherwise.
    """
    if isinstance(model, str):
        try:
            model = COST_MODELS[model]
        except KeyError:
            raise CostModelError(f"unknown cost model {model!r}; known: {', '.join(COST_MODELS)}") from None
    if describe is None:
        encoded = any(op.startswith("r:") for op in graph.ops)
        describe = describe_from_encoding if encoded else describe_from_json
    costs = []
    seen: dict = {}  # a saturated e-graph repeats signatures: cost each one once
    for node in range(graph.num_nodes):
        info = describe(graph, node)
        key = (info.op, json.dumps(info.attrs, sort_keys=True, default=str), info.arg_types, info.out_type)
        value = seen.get(key)
        if value is None:
            needs_types = _is_fused(info.op) or _lookup(info.op) is not None
            if needs_types and model is not node_count and info.out_type is None:
                raise CostModelError(f"{graph.name}: node {graph.node_ids[node]!r} ({info.op}) has no "
                                     f"type; cost models other than node-count need the types of its classes")
            value = seen[key] = model(info.op, info.attrs, info.arg_types, info.out_type)
        costs.append(value)
    return graph.with_costs(costs)
