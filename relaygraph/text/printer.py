"""IR -> Relay text, with TVM's printing rules.

Atoms (variables, globals, ops, constants, constructors) print inline. Any other node prints
inline only where TVM inlines it, a scope's result or a let's value used exactly once;
everywhere else (a call's arguments, a tuple's fields, ...) and whenever it is used more than
once it is bound once as ``%N = ...;`` in the innermost scope that holds all its uses (scopes
are function bodies, if branches and match arms). Lets print flat. Binding sites show type
annotations; calls show only attributes that differ from the op's defaults; tensor constants
go to the ``#[metadata]`` section. Interning makes equal reads of a reference cell one node, so
nodes that touch references are the exception to sharing: each use prints its own binding.

Printing is one pass over the DAG to place nodes, then a walk in TVM's order (see
``g_visit``): a call's callee is visited before its arguments, but its arguments are bound
before its callee, so the callee's binding is nearest the call; free variables are declared
where they are first printed. Nested scopes are printed through an explicit stack of generators, so
neither long chains nor deep nesting recurse in Python.
"""

from __future__ import annotations

import re

from ..ir.adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar, TypeData
from ..ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..ir.module import IRModule
from ..ir.node import paused_gc
from ..ir.types import Type, format_type
from .attrtext import format_attrs
from .layout import SCOPED, Layout, Scope, is_atom, operands, walk_dag
from .literals import scalar_literal
from .metadata import write_metadata
from .source import VERSION

__all__ = ["astext"]

HEADER = f'#[version = "{VERSION}"]'
_VISITED_ATOMS = (Constant, Var)
_DATAFLOW = (Call, Tuple, TupleGetItem)  # the nodes TVM's printer visits depth first
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_/]|/(?=[/*])")


def astext(node, show_types: bool = False) -> str:
    """Relay text for an IRModule, an expression or a type, as TVM's ``astext()`` prints it.

    ``show_types`` adds ``/* ty=... */`` after bindings whose type is known: for a typed module,
    the types it owns; for an expression, those of the live results that checked it.
    """
    if isinstance(node, Type) and not isinstance(node, TypeData):
        return format_type(node)
    printer = _Printer(show_types, node.checked_types if isinstance(node, IRModule) else None)
    with paused_gc():
        if isinstance(node, IRModule):
            body = printer.module(node)
        elif isinstance(node, Expr):
            body = printer.expression(node)
        elif isinstance(node, TypeData):
            body = printer.type_data(node) + "\n"
        else:
            raise TypeError(f"astext: expected an IRModule, an Expr or a Type, got "
                            f"{type(node).__name__}")
    if printer.meta:
        sep = "\n" if body.endswith("\n") else "\n\n"
        return f"{HEADER}\n{body}{sep}#[metadata]\n{write_metadata(printer.meta)}\n"
    return f"{HEADER}\n{body}"


def clean_name(name: str, prefix: str) -> str:
    """A name the tokenizer reads back: TVM's letter prefix, odd characters replaced."""
    if not name or not ("A" <= name[0] <= "Z" or "a" <= name[0] <= "z"):
        name = prefix + name
    return _BAD_NAME_CHARS.sub("_", name)


# Multi-line text is a list of pieces: a str is one line, a _Block holds lines one level deeper.
# Nesting a piece in another never copies the lines inside it, and indentation is applied once,
# when the whole text is rendered, so deeply nested programs print in linear time.
class _Block(list):
    """Lines printed one indentation level deeper than the lines around them."""

    __slots__ = ()


def _wrap(prefix: str, text, suffix: str):
    """``text`` (a line or a list of pieces) with ``prefix`` before it and ``suffix`` after."""
    if type(text) is str:
        return prefix + text + suffix
    out = list(text)
    out[0] = prefix + out[0]
    out[-1] = out[-1] + suffix
    return out


def _render(pieces) -> str:
    """The text of a list of pieces, indented two spaces per block level."""
    if type(pieces) is str:
        return pieces
    out: list[str] = []
    stack = [(iter(pieces), "")]
    while stack:
        items, indent = stack[-1]
        for item in items:
            if type(item) is _Block:
                stack.append((iter(item), indent + "  "))
                break
            if type(item) is str:
                out.append(indent + item)
            else:  # a multi-line statement inside a scope
                stack.append((iter(item), indent))
                break
        else:
            stack.pop()
    return "\n".join(out)


class _Printer:
    """One printing: names, temporaries and metadata are shared by all items of a module."""

    def __init__(self, show_types: bool, types=None) -> None:
        self.show_types = show_types
        self.known_type = _type_oracle(types) if show_types else None
        self.used: dict[str, int] = {}
        self.var_names: dict[Var, str] = {}
        self.counter = 0
        self.meta: list[Constant] = []
        self.meta_index: dict[Constant, int] = {}
        self.free_text: dict[Var, str] = {}  # free variable -> its declaration
        self.attr_cache: dict = {}

    # -- entry points ---------------------------------------------------------------------------
    def module(self, mod: IRModule) -> str:
        """A module: ADT definitions, then functions, each sorted by name."""
        items = [self.type_data(mod.type_definitions[gtv])
                 for gtv in sorted(mod.type_definitions, key=lambda t: t.name_hint)]
        functions = list(mod)
        walks = [walk_dag(fn) for _, fn in functions]
        # When any function touches a reference cell, a call of a global or a closure may too,
        # so such calls print once per use (see Layout).
        refs = any(walk[3] for walk in walks)
        for (gv, fn), walk in zip(functions, walks, strict=True):
            items.append(self.root(fn, "def @" + clean_name(gv.name_hint, "v"), walk, refs))
        return "\n\n".join(items) + "\n" if items else ""

    def expression(self, expr: Expr) -> str:
        return self.root(expr, None)

    def root(self, expr: Expr, def_prefix: str | None, walk: tuple | None = None,
             effectful_calls: bool | None = None) -> str:
        """One top-level item (a ``def`` when ``def_prefix`` is given, else an expression)."""
        scope = Scope(None)
        self.layout = Layout(expr, scope, walk, effectful_calls)
        self.names: dict = {}  # bound node -> %N, for this root
        self.texts: dict = {}  # node -> its text, made but not yet bound
        self.free = set(self.layout.free)
        self.declared: set = set()
        self.fresh_seen: set = set()  # nodes printed at each use, already visited
        self.clauses_done: set = set()  # clauses printed once already (shared by matches)
        if def_prefix is not None:
            # TVM declares a def's free variables inside its body, where it first meets them.
            self.top = self.layout.scopes[expr] if type(expr) is Function else scope
            return _render(self.run(self.g_function(expr, def_prefix)))
        self.top = scope
        return _render(self.run(self.g_scope(scope, expr)))

    @staticmethod
    def run(gen):
        """Drive a generator that yields sub-generators and receives their results."""
        stack = [gen]
        value = None
        while True:
            try:
                request = stack[-1].send(value)
            except StopIteration as stop:
                stack.pop()
                if not stack:
                    return stop.value
                value = stop.value
                continue
            stack.append(request)
            value = None

    # -- names -------------------------------------------------------------------------------------
    def unique(self, base: str) -> str:
        """``base``, or ``base1``, ``base2``, ... when taken (TVM's GetUniqueName)."""
        used = self.used
        if base not in used:
            used[base] = 0
            return base
        k = used[base]
        while True:
            k += 1
            candidate = f"{base}{k}"
            if candidate not in used:
                break
        used[base] = k
        used[candidate] = 0
        return candidate

    def binder(self, var: Var) -> str:
        """Allocate the name of a variable at its binding site; returns ``%x: T``."""
        name = self.var_names[var] = self.names[var] = self.unique("%" + clean_name(var.name_hint, "v"))
        text = name if var.type_annotation is None else f"{name}: {format_type(var.type_annotation)}"
        return text + self.type_comment(var)

    def free_binder(self, var: Var) -> str:
        """Name a free variable where TVM first visits it; its declaration prints later."""
        text = self.free_text[var] = self.binder(var)
        return text

    def type_comment(self, node) -> str:
        if self.known_type is None:
            return ""
        t = self.known_type(node)
        return "" if t is None else f" /* ty={format_type(t)} */"

    # -- references and flat nodes ---------------------------------------------------------------
    def ref(self, node) -> str:
        """The text of a node used as an operand: an atom or the name it is bound to."""
        name = self.names.get(node)  # bound nodes and variables
        if name is not None:
            return name
        cls = type(node)
        if cls is Var:
            name = self.var_names.get(node)
            if name is None:  # used outside its binder's scope (ill-formed); still printable
                name = self.var_names[node] = self.unique("%" + clean_name(node.name_hint, "v"))
            return name
        if cls is GlobalVar:
            return "@" + clean_name(node.name_hint, "v")
        if cls is Op:
            return node.name
        if cls is Constant:
            return self.constant(node)
        if cls is Constructor:
            return clean_name(node.name_hint, "C")
        if cls is Call and not node.args and type(node.op) is Constructor and not node.op.inputs:
            return clean_name(node.op.name_hint, "C")
        raise KeyError(f"internal: {cls.__name__} printed before it was bound")

    def constant(self, const: Constant) -> str:
        """A scalar literal, or a reference into the metadata section."""
        if const.is_scalar:
            text = scalar_literal(const.data)
            if text is not None:
                return text
        k = self.meta_index.get(const)
        if k is None:
            k = self.meta_index[const] = len(self.meta)
            self.meta.append(const)
        return f"meta[relay.Constant][{k}]"

    def flat(self, node, ops: list) -> str:
        """The text of a node without nested scopes, given its operands' texts."""
        cls = type(node)
        if cls is Call:
            parts = ops[1:]
            if node.attrs:
                parts.extend(format_attrs(node, self.attr_cache))
            return f"{ops[0]}({', '.join(parts)})"
        if cls is TupleGetItem:
            return f"{ops[0]}.{node.index}"
        if cls is Tuple:
            return f"({ops[0]},)" if len(ops) == 1 else f"({', '.join(ops)})"
        if cls is RefCreate:
            return f"ref({ops[0]})"
        if cls is RefRead:
            return f"ref_read({ops[0]})"
        if cls is RefWrite:
            return f"ref_write({ops[0]}, {ops[1]})"
        raise NotImplementedError(f"printing {cls.__name__} nodes")

    # -- TVM's printing order --------------------------------------------------------------------
    # TVM makes the text of a call, tuple or projection in two steps. It first visits the nodes
    # below it depth first, a call's callee before its arguments, making each node's text once
    # its operands' texts are made (constants get their metadata index, free variables their name,
    # in this order). Making a node's text prints its operands in turn, a call's arguments before
    # its callee, and the first print of a non-atomic operand binds it as ``%N = ...;``. So the
    # bindings of one node's operands come together, just before its own text is made, and
    # temporaries are numbered in that order. Other nodes (if, match, references, functions,
    # lets) print each operand in turn: its subgraph is visited, then it is bound.
    def g_visit(self, node):
        """Make the text of ``node`` and of every node below it not made yet, in TVM's order."""
        texts, names, fresh, seen = self.texts, self.names, self.layout.fresh, self.fresh_seen
        stack = [node]
        expanded: set = set()
        while stack:
            n = stack[-1]
            cls = type(n)
            if cls is Constant or cls is Var:  # atoms TVM visits: metadata index, free name
                stack.pop()
                if cls is Constant:
                    self.constant(n)
                elif n in self.free and n not in self.var_names:
                    self.free_binder(n)
                continue
            if n in texts or n in names or (n in fresh and n in seen and n not in expanded):
                stack.pop()
                continue
            if n not in expanded:
                expanded.add(n)
                if n in fresh:
                    seen.add(n)
                    if cls not in _DATAFLOW:
                        stack.pop()  # printed anew at each use, operands in turn
                        continue
                if cls is Call:
                    kids = (n.op, *n.args)
                elif cls is Tuple:
                    kids = n.fields
                elif cls is TupleGetItem:
                    kids = (n.tuple_value,)
                else:
                    continue  # visited as a whole when its text is made
                for i in range(len(kids) - 1, -1, -1):
                    c = kids[i]
                    if c not in texts and c not in names and (
                            type(c) in _VISITED_ATOMS or not is_atom(c)):
                        stack.append(c)
                continue
            stack.pop()
            if n in fresh:  # its text is made at each use; its shared operands bind now
                ops = operands(n)
                for k in range(1, len(ops) + 1) if cls is Call else range(len(ops)):
                    if ops[k % len(ops)] not in fresh:
                        yield from self.g_use(ops[k % len(ops)])
                continue
            if cls in SCOPED:
                texts[n] = yield self.g_text(n)
            else:
                texts[n] = self.flat(n, (yield self.g_operands(n, self.layout.home[n])))

    def g_use(self, node):
        """Print ``node`` as an operand for the first time: bind it (visiting it first if need be)."""
        if is_atom(node):
            if type(node) is Var and node in self.free and node not in self.declared:
                self.declared.add(node)
                decl = self.free_text.get(node) or self.free_binder(node)
                self.top.lines.append(f"free_var {decl};")
            return
        if node in self.names:
            return
        if node not in self.texts:
            yield from self.g_visit(node)
        text = self.texts.pop(node)
        name = self.temp()
        self.names[node] = name
        self.layout.home[node].lines.append(_wrap(f"{name} = ", text, self.type_comment(node) + ";"))

    def g_operand(self, node, scope: Scope):
        """The text of an operand, printed (and bound, on first use) in ``scope``."""
        if node in self.layout.fresh:
            return (yield self.g_fresh(node, scope))
        yield from self.g_use(node)
        return self.ref(node)

    def g_operands(self, node, scope: Scope):
        """The texts of a flat node's operands (in ``operands`` order), printed in TVM's order."""
        ops = operands(node)
        texts = [None] * len(ops)
        # A call prints its arguments before its callee.
        order = range(1, len(ops) + 1) if type(node) is Call else range(len(ops))
        for k in order:
            i = k % len(ops)
            texts[i] = yield from self.g_operand(ops[i], scope)
        return texts

    def temp(self) -> str:
        name = f"%{self.counter}"
        self.counter += 1
        return name

    def g_fresh(self, node, scope: Scope):
        """Bind one use of an effectful node in ``scope``: interning made equal reads of a
        cell one node, but every occurrence reads anew, so each use gets its own binding."""
        if node not in self.fresh_seen:
            yield from self.g_visit(node)
        text = self.flat(node, (yield self.g_operands(node, scope)))
        name = self.temp()
        scope.lines.append(f"{name} = {text}{self.type_comment(node)};")
        return name

    def g_value(self, node, scope: Scope):
        """The text of a node in an inline position (a scope's result or a let's value)."""
        if is_atom(node):
            yield from self.g_use(node)
            return self.ref(node)
        if node in self.layout.bound:
            yield from self.g_use(node)
            return self.names[node]
        if node in self.layout.fresh:  # printed anew at each use
            if node not in self.fresh_seen:
                yield from self.g_visit(node)
            text = self.flat(node, (yield self.g_operands(node, scope)))
        else:
            yield from self.g_visit(node)
            text = self.texts.pop(node)
        return _wrap("", text, self.type_comment(node)) if self.known_type else text

    def g_text(self, node):
        """The text of a node that holds scopes (function, if, match, parenthesized let)."""
        cls = type(node)
        if cls is Function:
            return (yield from self.g_function(node, "fn "))
        if cls is If:
            cond = yield from self.g_operand(node.cond, self.layout.home[node])
            t, f = self.layout.scopes[node]
            then = yield self.g_scope(t, node.true_branch)
            other = yield self.g_scope(f, node.false_branch)
            return [f"if ({cond}) {{", _Block(then), "} else {", _Block(other), "}"]
        if cls is Match:
            data = yield from self.g_operand(node.data, self.layout.home[node])
            return (yield from self.g_match(node, data))
        inner = yield self.g_scope(self.layout.scopes[node], node)  # a let, in parentheses
        return ["(", _Block(inner), ")"]

    def g_function(self, fn: Function, prefix: str):
        params = [self.binder(p) for p in fn.params]
        if fn.attrs:
            params.extend(format_attrs(fn, self.attr_cache))
        tparams = f"[{', '.join(format_type(t) for t in fn.type_params)}]" if fn.type_params else ""
        ret = f"-> {format_type(fn.ret_type)} " if fn.ret_type is not None else ""
        body = yield self.g_scope(self.layout.scopes[fn], fn.body)
        return [f"{prefix}{tparams}({', '.join(params)}) {ret}{{", _Block(body), "}"]

    def g_match(self, match: Match, data: str):
        arms = _Block()
        for clause in match.clauses:
            if clause in self.clauses_done:
                self.forget(clause)
            self.clauses_done.add(clause)
            lhs = self.pattern(clause.lhs)
            rhs = yield self.g_scope(self.layout.scopes[clause], clause.rhs)
            arms.extend((f"{lhs} => {{", _Block(rhs), "},"))
        keyword = "match" if match.complete else "match?"
        text = [f"{keyword} ({data}) {{", arms, "}"]
        # TVM reads `match` only where a statement may start: elsewhere it needs parentheses.
        return _wrap("(", text, ")") if match in self.layout.wrapped else text

    def forget(self, clause) -> None:
        """Let a clause print again: interning makes equal clauses of several matches one node,
        but each printing is its own copy, with its own lines and its own bindings (they may use
        the pattern's variables); nodes placed outside the clause stay bound once."""
        scopes, nodes = self.layout.within(self.layout.scopes[clause])
        for scope in scopes:
            scope.lines = []  # the earlier copy keeps the list it printed
        names, texts, seen = self.names, self.texts, self.fresh_seen
        for node in nodes:
            names.pop(node, None)
            texts.pop(node, None)
            seen.discard(node)

    def pattern(self, pat) -> str:
        """A pattern's text; allocates the names of the variables it binds."""
        cls = type(pat)
        if cls is PatternVar:
            return self.binder(pat.var)
        if cls is PatternConstructor:
            name = clean_name(pat.constructor.name_hint, "C")
            if not pat.patterns:
                return name
            return f"{name}({', '.join(self.pattern(p) for p in pat.patterns)})"
        if cls is PatternTuple:
            return f"({', '.join(self.pattern(p) for p in pat.patterns)})"
        return "_"

    def g_scope(self, scope: Scope, expr):
        """Print a scope whose result is ``expr``: its bindings, its lets, then the result."""
        layout = self.layout
        cur = expr
        # The lets of a chain print flat; a parenthesized let is the chain of its own scope.
        while type(cur) is Let and (layout.scopes.get(cur) is scope or (
                cur not in layout.bound and cur not in layout.paren)):
            name = self.binder(cur.var)
            value = yield from self.g_value(cur.value, scope)
            scope.lines.append(_wrap(f"let {name} = ", value, ";"))
            cur = cur.body
        result = yield from self.g_value(cur, scope)
        scope.lines.append(result)
        return scope.lines

    # -- ADT definitions -----------------------------------------------------------------------------
    def type_data(self, data: TypeData) -> str:
        head = format_type(data.header)
        if data.type_vars:
            head += f"[{', '.join(format_type(t) for t in data.type_vars)}]"
        ctors = []
        for c in data.constructors:
            fields = f"({', '.join(format_type(t) for t in c.inputs)})" if c.inputs else ""
            ctors.append(f"  {clean_name(c.name_hint, 'C')}{fields},")
        return f"type {head} {{\n" + "\n".join(ctors) + ("\n}" if ctors else "}")


def _type_oracle(types):
    """The type to print after a node: its one checked type (none when it has several)."""
    try:
        from ..ty import types_of
    except ImportError:
        return lambda node: None

    def one(node):
        found = types_of(node, types)
        return found[0] if len(found) == 1 else None

    return one
