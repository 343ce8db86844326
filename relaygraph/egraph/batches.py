"""Relay expressions as rows for the e-graph: the plain-data half of the bridge (no egglog here).

Every e-class the bridge knows has an integer *handle*. A ``Batch`` lists what to add: one row
per new node (its handle, its children's handles and its literal fields, in the constructor's
order), unions of handles, and the type of every new handle. Batches are plain data, so a
worker process can rebuild an e-graph from the batches that built it, and the parent can
follow what a worker added.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var
from ..ir.traversal import iter_post_order
from ..ir.types import FuncType, TensorType, TupleType, Type, format_type
from ..ops.registry import PatternKind, all_ops, lookup
from .encoding import EXPR, LIST, constructor_fields, op_attr_keys, op_constructor, var_key
from .encoding import const_key as _const_key
from .typer import NodeTypeError, TypeTable, node_type, type_from_data, type_to_data

__all__ = ["Batch", "GraphState", "BatchBuilder", "RelayTables", "UnionTypeError", "LEAF_CTORS"]

LEAF_CTORS = ("RVar", "RConst", "RGlobal", "RFn")

@functools.cache
def _swappable() -> frozenset[str]:
    """Binary broadcasting ops without attributes (see ``BatchBuilder._related``)."""
    return frozenset(op_constructor(op) for op in all_ops()
                     if op.pattern == PatternKind.BROADCAST and op.num_inputs == 2 and not op.attrs)


class UnionTypeError(Exception):
    """A union of two classes whose types differ."""


def _all_positive(node: Constant) -> bool:
    """Whether every value of a numeric constant is above zero (an empty one is not)."""
    data = node.data
    if data.size == 0 or data.dtype.kind not in "iuf":
        return False
    return bool(np.all(data > 0))  # NaN compares false


@dataclass
class Batch:
    """Nodes, unions and types to add to an e-graph together (plain data: picklable)."""

    rows: dict[str, list[tuple]] = field(default_factory=dict)  # constructor or "union" -> rows
    types: list[tuple[int, str]] = field(default_factory=list)  # handle, type text
    new_types: list[tuple[str, object]] = field(default_factory=list)  # text, type data
    leaves: list[tuple[str, str, str]] = field(default_factory=list)  # ctor, key, type text
    sigs: dict[str, list[tuple]] = field(default_factory=dict)  # constructor -> signature + type text
    positive: list[str] = field(default_factory=list)  # keys of constants whose values are all > 0
    next_handle: int = 0

    def __bool__(self) -> bool:
        return bool(self.rows or self.types or self.sigs or self.new_types or self.leaves or self.positive)


class GraphState:
    """What Python knows about an e-graph's classes: each handle's type, leaf types, type facts."""

    def __init__(self) -> None:
        self.types = TypeTable()
        self.handle_type: dict[int, Type] = {}
        self.leaf_type: dict[tuple[str, str], Type] = {}
        self.signatures: dict[tuple, str] = {}  # (ctor, signature) -> type text (a Sig's T)
        self.signature_count: dict[str, int] = {}  # ctor -> how many of its signatures are typed
        self.next_handle = 0

    def add_signature(self, ctor: str, sig: tuple, text: str) -> bool:
        """Remember the type of a signature; True when it is new."""
        key = (ctor, sig)
        if key in self.signatures:
            return False
        self.signatures[key] = text
        self.signature_count[ctor] = self.signature_count.get(ctor, 0) + 1
        return True

    def apply(self, batch: Batch) -> None:
        """Follow a batch made elsewhere (by a worker, or before a replay)."""
        by_text = self.types.by_text
        for text, data in batch.new_types:
            if text not in by_text:
                self.types.register(text, type_from_data(data))
        for ctor, key, text in batch.leaves:
            self.leaf_type[(ctor, key)] = by_text[text]
        for h, text in batch.types:
            self.handle_type[h] = by_text[text]
        for ctor, rows in batch.sigs.items():
            for row in rows:
                self.add_signature(ctor, row[:-1], row[-1])
        self.next_handle = max(self.next_handle, batch.next_handle)


class RelayTables:
    """The Relay objects behind leaf keys, for reading terms back (kept in the parent process)."""

    def __init__(self) -> None:
        self.vars: dict[str, Var] = {}
        self.consts: dict[str, Constant] = {}
        self.globals: dict[str, GlobalVar] = {}
        self.fns: dict[str, Function] = {}
        self.fn_keys: dict[Function, str] = {}


class BatchBuilder:
    """Collects new nodes, unions and types into a Batch, keeping ``state`` up to date."""

    def __init__(self, state: GraphState, tables: RelayTables | None = None) -> None:
        self.state = state
        self.tables = tables
        self.batch = Batch(next_handle=state.next_handle)
        self._type_cache: dict = {}
        self.checked = None  # the TypeMap of the loaded program (InferType's), read by add_expr
        self._list_type: dict[int, TupleType] = {}  # list handles of this builder -> their types

    # -- basics -------------------------------------------------------------------------------
    def type_of(self, handle: int) -> Type:
        """The type of the class with this handle."""
        try:
            return self.state.handle_type[handle]
        except KeyError:
            raise KeyError(f"no e-class has handle {handle}") from None

    def _new_handle(self) -> int:
        h = self.state.next_handle
        self.state.next_handle = self.batch.next_handle = h + 1
        return h

    def _text(self, t: Type) -> str:
        types = self.state.types
        text = types.text(t)
        if types.register(text, t):
            self.batch.new_types.append((text, type_to_data(t)))
        return text

    def node(self, ctor: str, args: tuple, t: Type) -> int:
        """A new handle for the node ``(ctor *args)`` (children as handles) of type ``t``."""
        h = self._new_handle()
        rows = self.batch.rows.get(ctor)
        if rows is None:
            rows = self.batch.rows[ctor] = []
        rows.append((h, *args))
        self.state.handle_type[h] = t
        text = self._text(t)
        self.batch.types.append((h, text))
        if ctor != "RTuple":  # a tuple's type is its list's, set by a rule
            self._note_signature(ctor, args, text)
        return h

    def _note_signature(self, ctor: str, args: tuple, text: str) -> None:
        """Tell egglog's typing rules the type of this node's signature, if it is new (so the
        typer never recomputes what is known; see relaygraph.egraph.signatures)."""
        sig = []
        handle_type, list_type, text_of = self.state.handle_type, self._list_type, self._text
        for sort, arg in zip(constructor_fields(ctor), args, strict=True):
            if sort == EXPR:
                sig.append(text_of(handle_type[arg]))
            elif sort == LIST:
                sig.append(text_of(list_type[arg]))
            else:
                sig.append(arg)
        self.signature(ctor, tuple(sig), text, known=True)

    def signature(self, ctor: str, sig: tuple, t: Type | str, known: bool = False) -> str:
        """Record the type of every node of ``ctor`` with signature ``sig``; returns its text."""
        text = t if known else self._text(t)
        if self.state.add_signature(ctor, sig, text):
            self.batch.sigs.setdefault(ctor, []).append((*sig, text))
            if ctor in _swappable() and sig[0] != sig[1]:
                for other in ((sig[1], sig[0]), (sig[0], sig[0]), (sig[1], sig[1])):
                    self._related(ctor, other)
        return text

    def _related(self, ctor: str, sig: tuple) -> None:
        """Type a signature related to a new one of a binary broadcasting op (operands swapped,
        or either operand twice): commuting and reassociating rules make such nodes, and a
        signature known in advance saves a round trip to Python. The type comes from the
        relation, so a signature that is ill-typed is just left out."""
        if (ctor, sig) in self.state.signatures:
            return
        by_text = self.state.types.by_text
        try:
            t = self.typed_node(ctor, [by_text[sig[0]], by_text[sig[1]]], (), None)
        except NodeTypeError:
            return
        text = self._text(t)
        self.state.add_signature(ctor, sig, text)
        self.batch.sigs.setdefault(ctor, []).append((*sig, text))

    def list_of(self, handles) -> int:
        """A list handle (valid within this batch) for the cons list of ``handles``."""
        rows = self.batch.rows
        tail = self._new_handle()
        rows.setdefault("RNil", []).append((tail,))
        cons = rows.setdefault("RCons", [])
        types: list[Type] = []
        tail_text = self._text(TupleType(()))
        for h in reversed(tuple(handles)):
            cell = self._new_handle()
            cons.append((cell, h, tail))
            head = self.state.handle_type[h]
            types.insert(0, head)
            t = TupleType(types)
            text = self._text(t)
            self.signature("RCons", (self._text(head), tail_text), text, known=True)
            self._list_type[cell] = t
            tail, tail_text = cell, text
        self._list_type[tail] = TupleType(types)
        return tail

    def leaf(self, ctor: str, key: str, t: Type) -> None:
        """Record the type of a leaf key (a variable, constant, global or function template)."""
        if (ctor, key) not in self.state.leaf_type:
            self.state.leaf_type[(ctor, key)] = t
            self.batch.leaves.append((ctor, key, self._text(t)))

    def constant(self, node: Constant) -> str:
        """Make a constant known (its type, its value for reading terms back, whether it is
        positive), as a node of it would; returns its key."""
        key = _const_key(node)
        if self.tables is not None:
            self.tables.consts[key] = node
        if ("RConst", key) not in self.state.leaf_type and _all_positive(node):
            self.batch.positive.append(key)  # for positive(?x) conditions
        self.leaf("RConst", key, TensorType(node.shape, node.dtype))
        return key

    def union(self, a: int, b: int) -> None:
        """Union two classes; a UnionTypeError when their types differ."""
        ta, tb = self.type_of(a), self.type_of(b)
        if ta is not tb and ta != tb:
            raise UnionTypeError(f"cannot union a class of type {format_type(ta)} with one of type "
                                 f"{format_type(tb)}")
        self.batch.rows.setdefault("union", []).append((a, b))

    def take(self) -> Batch:
        """The batch so far; the builder starts a new one."""
        batch, self.batch = self.batch, Batch(next_handle=self.state.next_handle)
        return batch

    def typed_node(self, ctor: str, kid_types: list[Type], literals: tuple, leaf_key: str | None):
        """The type of a node from its children's (relation results cached by signature)."""
        key = (ctor, tuple(kid_types), literals)
        hit = self._type_cache.get(key)
        if hit is None:
            leaf = None if leaf_key is None else self._leaf_type_for(ctor, leaf_key)
            try:
                hit = node_type(ctor, kid_types, literals, leaf)
            except NodeTypeError as exc:
                hit = exc
            self._type_cache[key] = hit
        if isinstance(hit, NodeTypeError):
            raise hit
        return hit

    def _leaf_type_for(self, ctor: str, key: str):
        if ctor == "RLet":
            return self.state.leaf_type.get(("RVar", key))
        return self.state.leaf_type.get((ctor, key))

    # -- Relay expressions ----------------------------------------------------------------------
    def add_expr(self, expr: Expr, leaves: dict | None = None, *, checked: bool = False,
                 record: dict | None = None) -> int:
        """Add ``expr``; ``leaves`` maps Vars standing for existing classes to their handles.

        With ``checked``, types come from the loaded program's TypeMap (``self.checked``) where
        InferType gave them; otherwise every new node is typed from its children through the op
        relations.
        """
        memo: dict[Expr, int] = dict(leaves or {})
        if expr in memo:
            return memo[expr]
        for node in iter_post_order(expr, skip=lambda n: n in memo or isinstance(n, Op)):
            if node not in memo and not isinstance(node, Op):
                memo[node] = self._add_node(node, memo, checked)
        if record is not None:  # the handle of every node added (the program's, for explanations)
            record.update(memo)
        return memo[expr]

    def _add_node(self, node: Expr, memo: dict, checked: bool) -> int:
        ctor, args, lits, leaf_key, kids = self._encode(node, memo)
        t = self.checked.get(node) if checked and self.checked is not None else None
        if t is None:
            if ctor in ("RVar", "RConst", "RGlobal"):
                t = self.state.leaf_type[(ctor, leaf_key)]
            else:
                try:
                    t = self.typed_node(ctor, [self.type_of(k) for k in kids], lits, leaf_key)
                except NodeTypeError as exc:
                    raise NodeTypeError(f"{type(node).__name__} node: {exc}") from None
        return self.node(ctor, args, t)

    def _encode(self, node: Expr, memo: dict):
        """(ctor, row args, literal fields, leaf key, expression children) of one node."""
        if isinstance(node, Call):
            if isinstance(node.op, Op):
                op = lookup(node.op.name)
                if op is None:
                    raise NotImplementedError(f"operator {node.op.name} has no record in the op table")
                if node.type_args:
                    raise NotImplementedError(f"{node.op.name}: calls with type arguments are not encoded")
                kids = tuple(memo[a] for a in node.args)
                lits = op_attr_keys(op, node.attrs)
                return op_constructor(op), kids + lits, lits, None, kids
            kids = (memo[node.op], *(memo[a] for a in node.args))
            return "RCall", (kids[0], self.list_of(kids[1:])), (), None, kids
        if isinstance(node, Var):
            key = var_key(node)
            self._var_leaf(node, key)
            return "RVar", (key,), (key,), key, ()
        if isinstance(node, Constant):
            key = self.constant(node)
            return "RConst", (key,), (key,), key, ()
        if isinstance(node, Tuple):
            kids = tuple(memo[f] for f in node.fields)
            return "RTuple", (self.list_of(kids),), (), None, kids
        if isinstance(node, TupleGetItem):
            kid = memo[node.tuple_value]
            return "RProj", (kid, node.index), (node.index,), None, (kid,)
        if isinstance(node, Let):
            key = var_key(node.var)
            self._var_leaf(node.var, key)
            kids = (memo[node.value], memo[node.body])
            return "RLet", (key, *kids), (key,), key, kids
        if isinstance(node, If):
            kids = (memo[node.cond], memo[node.true_branch], memo[node.false_branch])
            return "RIf", kids, (), None, kids
        if isinstance(node, GlobalVar):
            return self._global(node)
        if isinstance(node, Function):
            return self._function(node, memo)
        raise NotImplementedError(f"the e-graph bridge does not encode {type(node).__name__} nodes")

    def _var_leaf(self, var: Var, key: str) -> None:
        if self.tables is not None:
            self.tables.vars[key] = var
        if ("RVar", key) not in self.state.leaf_type:
            t = var.type_annotation or self._checked_type(var)
            if t is None:
                raise RelayError(f"variable %{var.name_hint} has no type: annotate it, or load a module "
                                 "rg.infer_type has checked")
            self.leaf("RVar", key, t)

    def _checked_type(self, node: Expr) -> Type | None:
        return None if self.checked is None else self.checked.get(node)

    def _global(self, gv: GlobalVar):
        key = gv.name_hint
        if self.tables is not None:
            self.tables.globals[key] = gv
        if ("RGlobal", key) not in self.state.leaf_type:
            t = self._checked_type(gv)
            if t is None:
                raise RelayError(f"global @{key} has no checked type: load the module rg.infer_type "
                                 "returns")
            self.leaf("RGlobal", key, t)
        return "RGlobal", (key,), (key,), key, ()

    def _function(self, fn: Function, memo: dict):
        if fn.type_params:
            raise NotImplementedError("polymorphic functions are not encoded in the e-graph")
        tables = self.tables
        key = tables.fn_keys.get(fn) if tables is not None else None
        if key is None:
            key = f"fn#{self.state.next_handle}"
            if tables is not None:
                tables.fn_keys[fn] = key
                tables.fns[key] = fn
        for p in fn.params:
            self._var_leaf(p, var_key(p))
        body = memo[fn.body]
        t = self._checked_type(fn)
        if not isinstance(t, FuncType):
            params = [self.state.leaf_type[("RVar", var_key(p))] for p in fn.params]
            t = FuncType(params, fn.ret_type or self.type_of(body))
        self.leaf("RFn", key, t)
        return "RFn", (key, body), (key,), key, (body,)

