"""The grammar's actions for expressions, attribute values, types and shapes.

These build nodes from already-reduced parts; they need no scopes beyond the name look-ups the
parser class provides (``lookup_local``, ``ctors``, ``graph``, ``globals``, ``meta``).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParseError
from ..ir.adt import Constructor
from ..ir.attrs import Attrs, canonical_attr
from ..ir.expr import Call, Constant, Expr, If, Op, RefCreate, RefRead, RefWrite, Tuple, TupleGetItem
from ..ir.module import SourceMap
from ..ir.node import Node, NodeError
from ..ir.types import Any
from ..ops import lookup as lookup_op
from ..ty.dims import parse_dim
from .literals import LiteralError, parse_attr_number, parse_number
from .source import Source

__all__ = ["ExprActions", "CallAttr"]

# Relay's binary operators: (precedence, operator); all are left-associative.
_BINOPS = {
    "*": (12, "multiply"), "/": (12, "divide"), "+": (10, "add"), "-": (10, "subtract"),
    "<": (8, "less"), "<=": (8, "less_equal"), ">": (8, "greater"), ">=": (8, "greater_equal"),
    "==": (7, "equal"), "!=": (7, "not_equal"),
}
# Functions allowed in symbolic dimensions (what sympy prints for shape arithmetic).
_DIM_FUNCS = {"floor", "ceiling", "ceil", "Max", "Min", "Mod", "Abs"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class CallAttr:
    """A ``name=value`` item in a call's argument list or a function's parameter list."""

    __slots__ = ("name", "value", "pos")

    def __init__(self, name: str, value, pos: int) -> None:
        self.name, self.value, self.pos = name, value, pos


class _Chain:
    """Operands and operators of ``a + b * c`` before precedence is applied."""

    __slots__ = ("operands", "ops", "positions")

    def __init__(self, operands: list, ops: list, positions: list) -> None:
        self.operands, self.ops, self.positions = operands, ops, positions


class ExprActions:
    """Actions that build expressions, attribute values, types and dimensions."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.ops: dict[str, tuple] = {}  # name -> (Op, OpDef)
        self.literals: dict[str, Constant] = {}
        self.attr_cache: dict = {}
        self.graph: dict[int, Expr] = {}
        self.raw_attrs = False  # keep op attributes as written (see parse_expr)
        # this parse's spans: node -> offset of its first occurrence (lines computed on demand)
        self.spans = SourceMap(source.name, source.text)
        self._mark = self.spans.offsets().setdefault

    def at(self, node: Node, pos: int) -> Node:
        """``node``, noting offset ``pos`` as its span in this parse unless it occurred before."""
        self._mark(node, pos)
        return node

    def fail(self, message: str, pos: int) -> ParseError:
        """A ParseError at offset ``pos``."""
        return self.source.error(message, pos)

    # -- atoms --------------------------------------------------------------------------------
    def r_local(self, k, p):
        return self.lookup_local(k[0], p[0])

    def r_graph_ref(self, k, p):
        node = self.graph.get(int(k[0][1:]))
        if node is None:
            raise self.fail(f"graph variable {k[0]} is used before `{k[0]} = ...;` binds it", p[0])
        return node

    def r_global_ref(self, k, p):
        return self.global_ref(k[0][1:], p[0])

    def r_literal(self, k, p):
        const = self.literals.get(k[0])
        if const is None:
            try:
                value, dtype = parse_number(k[0])
            except LiteralError as exc:
                raise self.fail(str(exc), p[0]) from None
            const = self.literals[k[0]] = Constant(np.array(value, dtype=dtype))
        return self.at(const, p[0])

    def r_boolean(self, k, p):
        return self.at(Constant(np.array(k[0] == "True")), p[0])

    def r_meta_ref(self, k, p):
        return self.at(self.meta(k[0], p[0]), p[0])

    def r_op_or_ctor(self, k, p):
        name = k[0]
        ctor = self.ctors.get(name)
        if ctor is not None:
            # A zero-arity constructor used bare is applied: `Nil` is `Nil()`.
            return self.at(Call(ctor, ()), p[0]) if not ctor.inputs else ctor
        entry = self.ops.get(name)
        if entry is None:
            opdef = lookup_op(name)
            if opdef is None:
                raise self.fail(_unknown_name(name), p[0])
            entry = self.ops[name] = (Op(name), opdef)
        return entry[0]

    def r_unit(self, k, p):
        return self.at(Tuple(()), p[0])

    def r_paren(self, k, p):
        return k[1]

    def r_block(self, k, p):
        return k[1]

    def r_tuple1(self, k, p):
        return self.at(Tuple((k[1],)), p[0])

    def r_tuple_n(self, k, p):
        return self.at(Tuple((k[1], *k[3])), p[0])

    def r_if_else(self, k, p):
        return self.at(If(k[2], k[5], k[9]), p[0])

    def r_ref_create(self, k, p):
        return self.at(RefCreate(k[2]), p[0])

    def r_ref_read(self, k, p):
        return self.at(RefRead(k[2]), p[0])

    def r_ref_write(self, k, p):
        return self.at(RefWrite(k[2], k[4]), p[0])

    def r_project(self, k, p):
        node = k[0]
        index = k[2]
        parts = index.split(".") if index.count(".") == 1 else [index]
        for part in parts:  # `%t.0.1` reaches here as `%t` `.` `0.1`
            if not part.isdigit():
                raise self.fail(f"a tuple index is a plain integer, not `{index}`", p[2])
            node = self.at(TupleGetItem(node, int(part)), p[0])
        return node

    # -- calls ----------------------------------------------------------------------------------
    def r_call(self, k, p):
        return self.call(k[0], [], p[0])

    def r_call_args(self, k, p):
        return self.call(k[0], k[2], p[0])

    def call(self, callee: Expr, items: list, pos: int) -> Call:
        """A call from its callee and its arguments and ``name=value`` attributes."""
        args, attrs = [], {}
        for item in items:
            if type(item) is CallAttr:
                if item.name in attrs:
                    raise self.fail(f"attribute {item.name} is given twice", item.pos)
                attrs[item.name] = item
            elif attrs:
                raise self.fail("arguments must come before attributes", pos)
            else:
                args.append(item)
        if type(callee) is Call and not callee.args and type(callee.op) is Constructor:
            callee = callee.op  # `Nil()`: the bare constructor was already applied
        if type(callee) is Op and not self.raw_attrs:
            canonical = self.op_attrs(callee.name, attrs, pos)
        elif attrs:
            canonical = self.plain_attrs(attrs)
        else:
            canonical = None
        return self.at(Call(callee, tuple(args), canonical), pos)

    def op_attrs(self, name: str, attrs: dict, pos: int) -> Attrs | None:
        """An op call's attributes in canonical form (only values that differ from defaults)."""
        # Programs repeat the same attributes over and over: canonicalise each set once.
        key = (name, repr([(a.name, a.value) for a in attrs.values()])) if attrs else name
        hit = self.attr_cache.get(key)
        if hit is None:
            hit = self.attr_cache[key] = self._op_attrs(name, attrs, pos)
        return hit

    def _op_attrs(self, name: str, attrs: dict, pos: int) -> Attrs | None:
        opdef = self.ops[name][1]
        for item in attrs.values():
            if item.name not in opdef.attrs:
                known = ", ".join(opdef.attrs) or "none"
                raise self.fail(f"operator {name} has no attribute {item.name} (its attributes: "
                                f"{known})", item.pos)
        try:
            return opdef.canonical_attrs({a.name: a.value for a in attrs.values()})
        except (NodeError, ValueError, TypeError) as exc:
            raise self.fail(f"bad attributes for {name}: {exc}", pos) from None

    def plain_attrs(self, attrs: dict) -> Attrs:
        """Attributes of a call of something other than an op, as given."""
        values = {}
        for item in attrs.values():
            try:
                values[item.name] = canonical_attr(item.value, item.name)
            except NodeError as exc:
                raise self.fail(str(exc), item.pos) from None
        return Attrs(values)

    # -- binary operators -------------------------------------------------------------------------
    def r_chain_start(self, k, p):
        return _Chain([k[0], k[2]], [k[1]], [p[0], p[2]])

    def r_chain_more(self, k, p):
        chain = k[0]
        chain.operands.append(k[2])
        chain.ops.append(k[1])
        chain.positions.append(p[2])
        return chain

    def r_chain_end(self, k, p):
        chain = k[0]
        values = [chain.operands[0]]
        starts = [chain.positions[0]]
        pending: list[str] = []

        def reduce() -> None:
            op = Op(_BINOPS[pending.pop()][1])
            rhs = values.pop()
            starts.pop()
            values[-1] = self.at(Call(op, (values[-1], rhs)), starts[-1])

        for op, operand, pos in zip(chain.ops, chain.operands[1:], chain.positions[1:], strict=True):
            level = _BINOPS[op][0]
            while pending and _BINOPS[pending[-1]][0] >= level:
                reduce()
            pending.append(op)
            values.append(operand)
            starts.append(pos)
        while pending:
            reduce()
        return values[0]

    # -- attribute values ---------------------------------------------------------------------------
    def r_attr(self, k, p):
        return CallAttr(k[0], k[2], p[0])

    def r_attr_number(self, k, p):
        try:
            return parse_attr_number(k[0])
        except LiteralError as exc:
            raise self.fail(str(exc), p[0]) from None

    def r_attr_negative(self, k, p):
        return -self.r_attr_number(k[1:], p[1:])

    def r_attr_string(self, k, p):
        return _unescape(k[0][1:-1])

    def r_attr_true(self, k, p):
        return True

    def r_attr_false(self, k, p):
        return False

    def r_attr_name(self, k, p):
        if k[0] in ("None", "nullptr"):
            return None
        raise self.fail(f"unknown attribute value `{k[0]}` (strings are written in double "
                        "quotes)", p[0])

    def r_attr_meta(self, k, p):
        raise self.fail(f"attribute values from the metadata section ({k[0]}) are not supported",
                        p[0])

    def r_attr_empty_list(self, k, p):
        return ()

    def r_attr_list(self, k, p):
        return tuple(k[1])

    def r_attr_paren(self, k, p):
        return k[1]

    # -- symbolic dimensions -------------------------------------------------------------------------
    # A dimension is an int, Any, or the text of a sympy expression (converted by ty.dims).
    def r_dim_number(self, k, p):
        try:
            value, dtype = parse_number(k[0])
        except LiteralError as exc:
            raise self.fail(str(exc), p[0]) from None
        if not dtype.startswith("int"):
            raise self.fail(f"a dimension is an integer, not `{k[0]}`", p[0])
        return value

    def r_dim_any(self, k, p):
        return Any

    def r_dim_name(self, k, p):
        return k[0]

    def r_dim_func(self, k, p):
        if k[0] not in _DIM_FUNCS:
            raise self.fail(f"unknown function {k[0]} in a dimension (known: "
                            f"{', '.join(sorted(_DIM_FUNCS))})", p[0])
        args = [self.dim_text(d, p[2]) for d in k[2]]
        return f"{k[0]}({', '.join(args)})"

    def dim_text(self, d, pos: int) -> str:
        """A dimension as a term of a larger symbolic expression."""
        if d is Any:
            raise self.fail("`?` stands for a whole dimension, not part of one", pos)
        return str(d)

    def _dim_binary(self, k, p, symbol: str) -> str:
        return f"({self.dim_text(k[0], p[0])}) {symbol} ({self.dim_text(k[2], p[2])})"

    def r_dim_add(self, k, p):
        return self._dim_binary(k, p, "+")

    def r_dim_sub(self, k, p):
        return self._dim_binary(k, p, "-")

    def r_dim_mul(self, k, p):
        return self._dim_binary(k, p, "*")

    def r_dim_div(self, k, p):
        return self._dim_binary(k, p, "/")

    def r_dim_pow(self, k, p):
        return self._dim_binary(k, p, "**")

    def r_dim_paren(self, k, p):
        return k[1]

    def r_dim_neg(self, k, p):
        return f"-({self.dim_text(k[1], p[1])})"

    def r_shape_empty(self, k, p):
        return ()

    def r_shape(self, k, p):
        dims = []
        for d in k[1]:
            if type(d) is str:
                try:
                    d = parse_dim(d)
                except ValueError as exc:
                    raise self.fail(str(exc), p[1]) from None
            dims.append(d)
        return tuple(dims)


def _unknown_name(name: str) -> str:
    import difflib

    from ..ops import all_ops

    close = difflib.get_close_matches(name, [op.name for op in all_ops()], n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown operator or constructor `{name}`{hint}"


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i:i + 2]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)

