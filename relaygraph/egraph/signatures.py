"""Typing the classes rules create, and reading a frozen e-graph.

Typing happens mostly inside egglog. Every node's class type ``(Ty e)`` is unioned with its
*signature* ``(Sig:<ctor> <children's types> <literal fields>)`` by a rule that runs after the
rewrite rules (``relaygraph.egraph.backend``). A program has few distinct signatures, so Python
does work per signature, not per node: once Python has typed a signature through the op
relations, it unions the ``Sig`` with its ``T``, and egglog's congruence types every node with
that signature, now and later. ``resolve_signatures`` types the new ones egglog recorded (as
type texts, in ``sig:<ctor>``), until no new signature appears. A node whose type differs from
its class's makes egglog refuse the merge of ``tytext`` (the rule that made it is then found and
named); a signature the relations reject is an ill-typed term.

``Snapshot`` is the e-graph frozen at one moment (``eg.freeze()``): rows with canonical class
ids, class handles and types, for serialization and for the matches of Python rewrites.
``HandleMaker`` gives handles to classes that have none (rules' classes), for Python rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import TupleType
from ..ops.registry import all_ops
from .backend import Backend, constructor_fields
from .batches import LEAF_CTORS, BatchBuilder
from .encoding import BUILTIN_CONSTRUCTORS, EXPR, LIST, op_constructor
from .typer import NodeTypeError

__all__ = ["Snapshot", "resolve_signatures", "HandleMaker", "TypingProblem", "expr_constructors"]

_KEYED = frozenset((*LEAF_CTORS, "RLet"))


def expr_constructors() -> list[str]:
    """Every constructor of sort RExpr (the built-ins, then one per op)."""
    return [*BUILTIN_CONSTRUCTORS, *(op_constructor(op) for op in all_ops())]


@dataclass
class TypingProblem:
    """A signature the relations refuse (an ill-typed term)."""

    ctor: str
    message: str

    def __str__(self) -> str:
        return f"{self.ctor}: {self.message}"


def resolve_signatures(sigs: dict[str, list[tuple]], builder: BatchBuilder) -> tuple[int, list]:
    """Type the signatures not known before (the known ones are in ``builder.state``) into
    ``builder``; (how many, problems)."""
    count = 0
    problems: list[TypingProblem] = []
    known = builder.state.signatures
    for ctor, rows in sigs.items():
        fields = constructor_fields(ctor)
        for row in rows:
            if (ctor, row) in known:
                continue
            try:
                t = _signature_type(ctor, fields, row, builder)
            except NodeTypeError as exc:
                problems.append(TypingProblem(ctor, str(exc)))
                continue
            builder.signature(ctor, row, t)
            count += 1
    return count, problems


def _signature_type(ctor: str, fields: tuple, row: tuple, builder: BatchBuilder):
    by_text = builder.state.types.by_text
    if ctor == "RCons":
        head, tail = by_text[row[0]], by_text[row[1]]
        return TupleType((head, *tail.fields))
    kids: list = []
    literals: list = []
    for sort, value in zip(fields, row, strict=True):
        if sort == EXPR:
            kids.append(by_text[value])
        elif sort == LIST:
            kids.extend(by_text[value].fields)
        else:
            literals.append(value)
    literals = tuple(literals)
    leaf_key = literals[0] if ctor in _KEYED else None
    return builder.typed_node(ctor, kids, literals, leaf_key)


class Snapshot:
    """The e-graph frozen at one moment: constructor rows, class handles and types, lists."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.frozen = backend.eg.freeze()
        funcs = self.frozen.functions
        self.rows = {c: funcs[c].rows for c in expr_constructors() if c in funcs and funcs[c].rows}
        i64 = backend.i64
        handle: dict = {}
        class_of: dict = {}
        for row in funcs["nid"].rows:
            h, c = i64(row.inputs[0]), row.output
            class_of[h] = c
            old = handle.get(c)
            if old is None or h < old:
                handle[c] = h
        self.handle = handle  # class -> its smallest handle, for classes that have one
        self.class_of = class_of  # every handle -> its class
        text_of = {row.inputs[0]: row.output for row in funcs["tytext"].rows}
        self.class_ty = {row.inputs[0]: text_of[row.output]  # class -> type String
                         for row in funcs["Ty"].rows if row.output in text_of}
        cons_rows, nil_rows = funcs["RCons"].rows, funcs["RNil"].rows
        self.cons = {row.output: (row.inputs[0], row.inputs[1]) for row in cons_rows}
        self.nil = frozenset(row.output for row in nil_rows)
        self.num_list_nodes = len(cons_rows) + len(nil_rows)

    def relation_rows(self, name: str) -> list:
        """The rows of a relation (or any table), as lists of values."""
        table = self.frozen.functions.get(name)
        return [] if table is None else [row.inputs for row in table.rows]

    def type_text(self, cls) -> str | None:
        """The type text of a class (None if it has no type)."""
        value = self.class_ty.get(cls)
        return None if value is None else self.backend.string(value)

    def elements(self, lst) -> list | None:
        """The element classes of a list class, or None if it is not a complete list."""
        out = []
        seen = set()
        while lst not in self.nil:
            cell = self.cons.get(lst)
            if cell is None or lst in seen:
                return None
            seen.add(lst)
            out.append(cell[0])
            lst = cell[1]
        return out

    def parse(self, ctor: str, inputs, fields: tuple[str, ...] | None = None) -> tuple[list, tuple] | None:
        """(child classes, decoded literal fields) of a row; None for a broken list. ``fields``:
        the constructor's field sorts, when the caller reads many rows of one constructor."""
        kids: list = []
        literals: list = []
        backend = self.backend
        for sort, value in zip(constructor_fields(ctor) if fields is None else fields, inputs, strict=True):
            if sort == EXPR:
                kids.append(value)
            elif sort == LIST:
                elems = self.elements(value)
                if elems is None:
                    return None
                kids.extend(elems)
            elif sort == "String":
                literals.append(backend.string(value))
            else:
                literals.append(backend.i64(value))
        return kids, tuple(literals)

    @property
    def num_nodes(self) -> int:
        """E-nodes of the term language (expressions and list cells)."""
        return sum(len(r) for r in self.rows.values()) + self.num_list_nodes

    @property
    def num_classes(self) -> int:
        """Expression e-classes (each has one type)."""
        return len(self.class_ty)


class HandleMaker:
    """Gives handles to classes that have none, children first, from one of their nodes."""

    def ensure(self, snap: Snapshot, targets, builder: BatchBuilder) -> dict:
        """Handles for ``targets`` (class values), adding what is missing to ``builder``."""
        handles = snap.handle
        missing = {c for c in targets if c not in handles}
        if not missing:
            return handles
        by_text = builder.state.types.by_text
        waiting: dict = {}
        queue = [(ctor, tuple(row.inputs), row.output) for ctor, rows in snap.rows.items()
                 for row in rows if row.output not in handles]
        while queue and missing:
            ctor, inputs, out = item = queue.pop()
            if out in handles:
                continue
            parsed = snap.parse(ctor, inputs)
            if parsed is None:
                continue
            absent = next((c for c in parsed[0] if c not in handles), None)
            if absent is not None:
                waiting.setdefault(absent, []).append(item)
                continue
            handles[out] = builder.node(ctor, self._args(snap, ctor, inputs, handles, builder),
                                        by_text[snap.type_text(out)])
            missing.discard(out)
            queue.extend(waiting.pop(out, ()))
        return handles

    @staticmethod
    def _args(snap: Snapshot, ctor: str, inputs, handles: dict, builder: BatchBuilder) -> tuple:
        args = []
        backend = snap.backend
        for sort, value in zip(constructor_fields(ctor), inputs, strict=True):
            if sort == EXPR:
                args.append(handles[value])
            elif sort == LIST:
                args.append(builder.list_of(handles[c] for c in snap.elements(value)))
            elif sort == "String":
                args.append(backend.string(value))
            else:
                args.append(backend.i64(value))
        return tuple(args)
