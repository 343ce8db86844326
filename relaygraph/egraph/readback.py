"""From the e-graph to extraction and back to Relay.

``gym_document`` writes a frozen e-graph as an extraction-gym document in the form the cost
models read (``relaygraph.egraph.cost.describe_from_json``): each node's ``op`` is the Relay
operator name (or ``Var``, ``Constant``, ``GlobalVar``, ``Tuple``, ``TupleGetItem``, ``Let``,
``If``, ``Call``, ``Function``), its children are its expression operands only (argument lists
are flattened, attribute Strings become an ``attrs`` object), and ``class_data`` holds each
class's type. Leaves and binders carry their ``key``, projections their ``index``. Class ids
are ``c<handle>``.

``read_back`` rebuilds the Relay expression an extractor chose (one node per class), children
first and without recursion, with the program's own Var, Constant, GlobalVar and Function
objects.

``primitive_functions`` writes the fused ops an extraction picked as standard Relay: each call of
``fused.<name>`` becomes a call of a ``Primitive=1`` function holding the op's parts, as TVM's
FuseOps makes them, so any Relay reader can load the program.
"""

from __future__ import annotations

from ..errors import RelayError
from ..ir.expr import Call, Expr, Function, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.traversal import ExprMutator
from ..ops import fused_ops
from ..ops.registry import lookup
from ..passes.fuse_ops import constant_fuses_into, per_use_constant
from .batches import GraphState, RelayTables
from .encoding import EXPR, OP_PREFIX, constructor_fields, parse_attr_key
from .signatures import Snapshot
from .typer import tensor_json

__all__ = ["gym_document", "read_back", "rebuild_node", "primitive_functions", "NODE_OPS"]

NODE_OPS = {"RVar": "Var", "RConst": "Constant", "RGlobal": "GlobalVar", "RTuple": "Tuple",
            "RProj": "TupleGetItem", "RLet": "Let", "RIf": "If", "RCall": "Call", "RFn": "Function"}
_KEY_FIELD = {"RVar", "RConst", "RGlobal", "RLet", "RFn"}


def gym_document(snap: Snapshot, state: GraphState, roots: list[int]) -> dict:
    """The extraction-gym document of the e-graph, rooted at the classes of handles ``roots``.

    A class is named ``c<handle>`` when it has a handle, else ``k<n>``.
    """
    names: dict = {c: f"c{h}" for c, h in snap.handle.items()}
    entries = []
    first_node: dict = {}
    shared_attrs: dict = {}
    class_ty = snap.class_ty
    for ctor, rows in snap.rows.items():
        op = NODE_OPS.get(ctor) or ctor[len(OP_PREFIX):]
        opdef = None if ctor in NODE_OPS else lookup(op)
        fields = constructor_fields(ctor)
        n_kids = fields.count(EXPR)
        # An op's row is its operands then its attribute Strings: read those without decoding,
        # and decode each distinct attribute tuple once.
        flat = opdef is not None and fields == (EXPR,) * n_kids + ("String",) * (len(fields) - n_kids)
        for row in rows:
            out = row.output
            if out not in class_ty:
                continue  # an untyped class: not part of any program
            if flat:
                inputs = row.inputs
                kids = inputs[:n_kids]
                key = (ctor, *inputs[n_kids:])
                attrs = shared_attrs.get(key)
                if attrs is None:
                    literals = tuple(snap.backend.string(v) for v in key[1:])
                    attrs = shared_attrs[key] = dict(zip(opdef.attrs, map(parse_attr_key, literals),
                                                         strict=True))
                node = {"op": op, "eclass": None, "cost": 1.0, "attrs": attrs}
            else:
                parsed = snap.parse(ctor, row.inputs, fields)
                if parsed is None:
                    continue  # a broken list: not part of any program
                kids, literals = parsed
                node = {"op": op, "eclass": None, "cost": 1.0}
                if opdef is not None:
                    attrs = shared_attrs.get((op, literals))
                    if attrs is None:
                        attrs = dict(zip(opdef.attrs, map(parse_attr_key, literals), strict=True))
                        shared_attrs[(op, literals)] = attrs
                    node["attrs"] = attrs
                elif ctor in _KEY_FIELD:
                    node["key"] = literals[0]
                elif ctor == "RProj":
                    node["index"] = literals[0]
            name = names.get(out)
            if name is None:
                name = names[out] = f"k{len(names)}"
            node["eclass"] = name
            if row.subsumed:
                node["subsumed"] = True
            nid = f"n{len(entries)}"
            first_node.setdefault(out, nid)
            entries.append((nid, node, kids))
    nodes = {}
    for nid, node, kids in entries:
        try:
            node["children"] = [first_node[k] for k in kids]
        except KeyError:
            continue  # a child class with no usable node: this node can never be extracted
        nodes[nid] = node
    class_data = {}
    entry_of: dict = {}  # one class_data entry per type text, shared
    by_text = state.types.by_text
    for c in first_node:
        text = snap.type_text(c)
        entry = entry_of.get(text)
        if entry is None:
            entry = entry_of[text] = {"type": text}
            tensor = tensor_json(by_text[text])
            if tensor is not None:
                entry["tensor"] = tensor
        class_data[names[c]] = entry
    root_ids = [names[snap.class_of[r]] for r in roots]
    return {"nodes": nodes, "root_eclasses": root_ids, "class_data": class_data}


def read_back(graph, choice: dict[int, int], tables: RelayTables, root: int | None = None,
              built: dict | None = None) -> Expr:
    """The Relay expression chosen for a root class (index in ``graph``; default the first root);
    ``built`` receives the expression of every class read."""
    start = graph.roots[0] if root is None else root
    built = {} if built is None else built
    attrs_cache: dict = {}
    stack: list = [(start, False)]
    while stack:
        k, expanded = stack.pop()
        if k in built:
            continue
        node = choice.get(k)
        if node is None:
            raise RelayError(f"{graph.name}: the choice has no node for e-class {graph.class_ids[k]}")
        kids = graph.child_classes[node]
        if not expanded:
            stack.append((k, True))
            stack.extend((c, False) for c in reversed(kids) if c not in built)
            continue
        built[k] = rebuild_node(graph, node, [built[c] for c in kids], tables, attrs_cache)
    return built[start]


def rebuild_node(graph, node: int, kids: list[Expr], tables: RelayTables, attrs_cache: dict) -> Expr:
    """The Relay node of one e-node of ``graph`` over the expressions of its child classes."""
    op = graph.ops[node]
    data = graph.node_data.get(node, {})
    try:
        if op == "Var":
            return tables.vars[data["key"]]
        if op == "Constant":
            return tables.consts[data["key"]]
        if op == "GlobalVar":
            return tables.globals[data["key"]]
    except KeyError:
        raise RelayError(f"{graph.name}: the e-graph holds a {op} {data.get('key')!r} that this program "
                         f"does not know; a rule made a leaf without registering it") from None
    if op == "Tuple":
        return Tuple(tuple(kids))
    if op == "TupleGetItem":
        return TupleGetItem(kids[0], data["index"])
    if op == "Let":
        return Let(tables.vars[data["key"]], kids[0], kids[1])
    if op == "If":
        return If(*kids)
    if op == "Call":
        return Call(kids[0], tuple(kids[1:]))
    if op == "Function":
        fn = tables.fns[data["key"]]
        return Function(fn.params, kids[0], fn.ret_type, fn.type_params, fn.attrs)
    opdef = lookup(op)
    if opdef is None:
        raise RelayError(f"{graph.name}: node {graph.node_ids[node]!r} has unknown op {op!r}")
    raw = data.get("attrs") or {}
    hit = attrs_cache.get(id(raw))  # gym_document shares one attrs object per distinct value
    if hit is None or hit[0] is not raw:
        hit = attrs_cache[id(raw)] = (raw, opdef.canonical_attrs(raw))
    return Call(Op(op), tuple(kids), hit[1])


def primitive_functions(func: Function, types) -> Function:
    """``func`` with each call of a fused op written as a call of a ``Primitive=1`` function over
    ``%p0, %p1, ...`` holding the op's parts (its definition in the op table). ``types``: the
    TypeMap of the typed module ``func`` comes from."""
    return _Expand(types).visit(func)


class _Expand(ExprMutator):
    def __init__(self, types) -> None:
        super().__init__()
        self.types = types

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        op = post.op
        if type(op) is not Op or fused_ops.definition(op.name) is None:
            return post
        name = op.name
        params: list[Var] = []
        outer: list[Expr] = []
        inner: list = [None] * len(post.args)
        for i in fused_ops.argument_order(name):
            arg = post.args[i]
            if _inlined(name, i, arg):
                inner[i] = arg  # TVM fuses a scalar constant into the group that reads it
                continue
            for j, seen in enumerate(outer):
                if seen is arg:  # one parameter per distinct input, as FuseOps makes them
                    inner[i] = params[j]
                    break
            else:
                params.append(Var(f"p{len(params)}", _checked(pre.args[i], self.types)))
                outer.append(arg)
                inner[i] = params[-1]
        body = fused_ops.expand(name, inner, post.attrs)
        group = Function(params, body, _checked(pre, self.types), (), {"Primitive": 1})
        return Call(group, tuple(outer))


def _inlined(name: str, index: int, arg: Expr) -> bool:
    """A scalar constant that FuseOps would put inside the group (by its rule for each reader of
    the constant among the group's parts), not among its parameters."""
    if not per_use_constant(arg):
        return False
    readers = [p.op for p in fused_ops.definition(name).parts
               if any(type(r) is fused_ops.Arg and r.index == index for r in p.inputs)]
    return all(constant_fuses_into(op) for op in readers)


def _checked(expr: Expr, types):
    t = types.get(expr) if types is not None else None
    if t is None:
        raise RelayError(f"writing fused ops as Primitive functions needs checked types (no type for "
                         f"a {type(expr).__name__}); run InferType first")
    return t
