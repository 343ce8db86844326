"""Relay text -> interned IR nodes, built by the grammar's actions as the LALR parser reduces.

There is no parse tree: each reduction builds its node right away, and names are resolved in
the same pass. Scopes are opened by the grammar's ``*_head`` rules, which the parser reduces
just before the scoped text is read (a function's parameters at the ``{`` of its body, a let's
variable at its ``=``, a clause's pattern variables at ``=>``), and closed when the enclosing
rule is reduced. Every node gets the span of the text it came from.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ParseError
from ..ir.adt import (
    Clause,
    Constructor,
    Match,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    TypeData,
    pattern_vars,
)
from ..ir.attrs import Attrs, canonical_attr
from ..ir.expr import Constant, Expr, Function, GlobalVar, Let, Var
from ..ir.module import IRModule, SourceMap
from ..ir.node import NodeError, paused_gc
from ..ir.types import (
    DTYPES,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    TypeCall,
    TypeVar,
)
from ..validate import read_text
from . import lalr
from .exprs import CallAttr, ExprActions
from .metadata import MetadataError, read_metadata
from .source import Source

__all__ = ["parse", "parse_expr", "parse_file"]


def parse(text: str, source_name: str = "<string>") -> IRModule:
    """Parse a Relay module (``#[version = "0.0.5"]`` header required) into an IRModule.

    The module's ``source_map`` says where each node was read (its first occurrence).
    """
    source = Source(source_name, text)
    if source.version is None:
        start = len(source.code) - len(source.code.lstrip())
        raise source.error('expected the version header #[version = "0.0.5"] at the start of '
                           'a Relay module', start)
    if source.code[:source.version_pos].strip():
        raise source.error("the version header must come first", source.version_pos)
    with paused_gc():
        return lalr.run(source, "module", _Parser(source).handlers())


def parse_expr(text: str, source_name: str = "<string>", mod: IRModule | None = None, *,
               raw_attrs: bool = False, source_map: SourceMap | None = None) -> Expr:
    """Parse one Relay expression (the version header is optional).

    ``mod`` supplies the globals, ADTs and constructors the expression may refer to. With
    ``raw_attrs``, op calls keep their attributes exactly as written (no defaults, no check
    against the op's schema): rewrite-rule patterns need to know what was written. A
    ``source_map`` given receives where each node was read (its first occurrence).
    """
    source = Source(source_name, text)
    parser = _Parser(source, mod)
    parser.raw_attrs = raw_attrs
    with paused_gc():
        expr = lalr.run(source, "expression", parser.handlers())
    if source_map is not None:
        source_map.absorb(parser.spans)
    return expr


def parse_file(path: str | Path) -> IRModule:
    """Parse a ``.relay`` file into an IRModule; diagnostics name the file (a missing, empty,
    binary or unreadable file, or a directory, is a ParseError too)."""
    path = Path(path)
    return parse(read_text(path, ParseError, "Relay file"), source_name=str(path))


class _Parser(ExprActions):
    """The grammar's actions for one parse: scopes, global tables and definitions."""

    def __init__(self, source: Source, mod: IRModule | None = None) -> None:
        super().__init__(source)
        self.mod = mod
        self.locals: dict[str, list[Var]] = {}  # name -> binders in scope, innermost last
        self.frames: list[list[str]] = []  # names bound by each open scope
        self.free: dict[str, Var] = {}
        self.type_vars: dict[str, list[TypeVar]] = {}
        self.type_frames: list[list[str]] = []
        self.globals: dict[str, GlobalVar] = {}
        self.global_uses: dict[str, int] = {}  # first use of each not-yet-defined global
        self.functions: dict[GlobalVar, Function] = {}
        self.type_names: dict[str, GlobalTypeVar] = {}
        self.type_uses: dict[str, int] = {}
        self.type_defs: dict[GlobalTypeVar, TypeData] = {}
        self.ctors: dict[str, Constructor] = {}
        self.adt: GlobalTypeVar | None = None
        self.metadata: dict[str, list] | None = None
        if mod is not None:
            self.globals.update((gv.name_hint, gv) for gv in mod.functions)
            for gtv, data in mod.type_definitions.items():
                self.type_names[gtv.name_hint] = gtv
                self.type_defs[gtv] = data
                self.ctors.update((c.name_hint, c) for c in data.constructors)

    def handlers(self) -> dict:
        """Rule name -> action, for the LALR driver."""
        return {name[2:]: getattr(self, name) for name in dir(self) if name.startswith("r_")}

    # -- scopes ---------------------------------------------------------------------------------
    def bind(self, var: Var) -> None:
        self.locals.setdefault(var.name_hint, []).append(var)
        self.frames[-1].append(var.name_hint)

    def open_frame(self, variables=()) -> None:
        self.frames.append([])
        for v in variables:
            self.bind(v)

    def close_frame(self) -> None:
        for name in self.frames.pop():
            stack = self.locals[name]
            stack.pop()
            if not stack:
                del self.locals[name]

    def lookup_local(self, token: str, pos: int) -> Var:
        """The innermost binding of ``%name``, else a free variable, else an error."""
        name = token[1:]
        stack = self.locals.get(name)
        if stack:
            return stack[-1]
        var = self.free.get(name)
        if var is None:
            raise self.fail(f"unbound variable {token}", pos)
        return var

    def open_type_frame(self, names: list[str]) -> tuple:
        tvars = []
        for name in names:
            tv = TypeVar(name)
            self.type_vars.setdefault(name, []).append(tv)
            tvars.append(tv)
        self.type_frames.append(names)
        return tuple(tvars)

    def close_type_frame(self) -> None:
        for name in self.type_frames.pop():
            stack = self.type_vars[name]
            stack.pop()
            if not stack:
                del self.type_vars[name]

    # -- module ----------------------------------------------------------------------------------
    def r_module(self, k, p):
        self.check_references()
        mod = IRModule(source_map=self.spans)
        for data in self.type_defs.values():
            mod.add_type(data)
        for gv, fn in self.functions.items():
            mod.add(gv, fn)
        return mod

    def r_expression(self, k, p):
        self.check_references()
        return k[0]

    def check_references(self) -> None:
        """Every global and ADT used must be defined by the end of the text."""
        for name, pos in self.global_uses.items():
            gv = self.globals[name]
            if gv not in self.functions:
                raise self.fail(f"undefined global @{name}", pos)
        for name, pos in self.type_uses.items():
            if self.type_names[name] not in self.type_defs:
                raise self.fail(f"undefined type {name}", pos)

    def r_items_empty(self, k, p):
        return None

    def r_items_more(self, k, p):
        return None

    def global_ref(self, name: str, pos: int) -> GlobalVar:
        gv = self.globals.get(name)
        if gv is None:
            gv = self.globals[name] = GlobalVar(name)
        if name not in self.global_uses and gv not in self.functions and (
                self.mod is None or gv not in self.mod.functions):
            self.global_uses[name] = pos
        return gv

    def def_head(self, token: str, pos: int, tparams: list[str]):
        name = token[1:]
        gv = self.globals.get(name)
        if gv is None:
            gv = self.globals[name] = GlobalVar(name)
        if gv in self.functions or (self.mod is not None and gv in self.mod.functions):
            raise self.fail(f"duplicate definition of global {token}", pos)
        self.at(gv, pos)
        return gv, self.open_type_frame(tparams)

    def r_def_head(self, k, p):
        return self.def_head(k[1], p[1], [])

    def r_def_head_generic(self, k, p):
        return self.def_head(k[1], p[1], k[3])

    def r_def_function(self, k, p):
        (gv, tparams), (params, attrs, ret) = k[0], k[1]
        fn = self.at(Function(params, k[3], ret, tparams, attrs), p[0])
        self.close_frame()
        self.close_type_frame()
        self.functions[gv] = fn
        self.global_uses.pop(gv.name_hint, None)
        return None

    # -- ADT definitions -------------------------------------------------------------------------
    def type_head(self, name: str, pos: int, tparams: list[str]):
        gtv = self.type_names.get(name)
        if gtv is None:
            gtv = self.type_names[name] = GlobalTypeVar(name)
        elif gtv in self.type_defs:
            raise self.fail(f"duplicate definition of type {name}", pos)
        self.type_uses.pop(name, None)
        self.adt = self.at(gtv, pos)
        return gtv, self.open_type_frame(tparams)

    def r_type_head(self, k, p):
        return self.type_head(k[1], p[1], [])

    def r_type_head_generic(self, k, p):
        return self.type_head(k[1], p[1], k[3])

    def type_def(self, head, ctors) -> None:
        gtv, tvars = head
        self.type_defs[gtv] = TypeData(gtv, tvars, ctors)
        self.close_type_frame()
        self.adt = None

    def r_type_def(self, k, p):
        return self.type_def(k[0], k[1])

    def r_type_def_bare(self, k, p):
        return self.type_def(k[0], [])

    def r_extern_type(self, k, p):
        return self.type_def(k[1], [])

    def r_ctors_empty(self, k, p):
        return []

    def r_ctors_list(self, k, p):
        return k[1]

    def ctor(self, name: str, pos: int, inputs) -> Constructor:
        if name in self.ctors:
            raise self.fail(f"duplicate definition of constructor {name}", pos)
        ctor = self.ctors[name] = self.at(Constructor(name, inputs, self.adt), pos)
        return ctor

    def r_ctor(self, k, p):
        return self.ctor(k[0], p[0], ())

    def r_ctor_fields(self, k, p):
        return self.ctor(k[0], p[0], k[2])

    # -- functions -------------------------------------------------------------------------------
    def signature(self, items, ret):
        params, attrs = [], {}
        for item in items:
            if type(item) is CallAttr:
                if item.name in attrs:
                    raise self.fail(f"attribute {item.name} is given twice", item.pos)
                try:
                    attrs[item.name] = canonical_attr(item.value, item.name)
                except NodeError as exc:
                    raise self.fail(str(exc), item.pos) from None
            elif attrs:
                raise ParseError("parameters must come before attributes", self.spans.get(item),
                                 self.source.text)
            else:
                params.append(item)
        self.open_frame(params)
        return params, (Attrs(attrs) if attrs else None), ret

    def r_fn_sig(self, k, p):
        return self.signature([], None)

    def r_fn_sig_params(self, k, p):
        return self.signature(k[1], None)

    def r_fn_sig_ret(self, k, p):
        return self.signature([], k[3])

    def r_fn_sig_params_ret(self, k, p):
        return self.signature(k[1], k[-1])

    def r_param(self, k, p):
        return self.at(Var(k[0][1:]), p[0])

    def r_param_typed(self, k, p):
        return self.at(Var(k[0][1:], k[2]), p[0])

    def r_fn_head(self, k, p):
        return self.open_type_frame([])

    def r_fn_head_generic(self, k, p):
        return self.open_type_frame(k[2])

    def r_function(self, k, p):
        tparams, (params, attrs, ret) = k[0], k[1]
        fn = self.at(Function(params, k[3], ret, tparams, attrs), p[0])
        self.close_frame()
        self.close_type_frame()
        return fn

    # -- sequences: `%0 = e;`, `let %x = e;`, `e;`, `free_var %x;`, then the result ----------
    def r_stmts_empty(self, k, p):
        self.open_frame()
        return []

    def r_stmts_more(self, k, p):
        if k[1] is not None:
            k[0].append(k[1])
        return k[0]

    def r_seq(self, k, p):
        body = k[1]
        for var, value, pos in reversed(k[0]):
            body = self.at(Let(var, value, body), pos)
        self.close_frame()
        return body

    def r_graph_binding(self, k, p):
        self.graph[int(k[0][1:])] = k[2]
        return None

    def r_let_binding(self, k, p):
        return k[0], k[2], p[0]

    def r_expr_stmt(self, k, p):
        # `a; b` is `let %_ = a; b` with an unnamed variable, as in TVM.
        return Var(""), k[0], p[0]

    def r_free_var(self, k, p):
        self.free[k[1][1:]] = self.at(Var(k[1][1:]), p[1])
        return None

    def r_free_var_typed(self, k, p):
        self.free[k[1][1:]] = self.at(Var(k[1][1:], k[3]), p[1])
        return None

    def r_let_head(self, k, p):
        var = self.at(Var(k[1][1:]), p[1])
        self.bind(var)
        return var

    def r_let_head_typed(self, k, p):
        var = self.at(Var(k[1][1:], k[3]), p[1])
        self.bind(var)
        return var

    # -- match -----------------------------------------------------------------------------------
    def r_clause_head(self, k, p):
        self.open_frame(pattern_vars(k[0]))
        return k[0]

    def r_clause(self, k, p):
        self.close_frame()
        return Clause(k[0], k[1])

    def r_match(self, k, p):
        return self.at(Match(k[1], k[3], True), p[0])

    def r_match_partial(self, k, p):
        return self.at(Match(k[2], k[4], False), p[0])

    def pattern_ctor(self, name: str, pos: int, patterns) -> PatternConstructor:
        ctor = self.ctors.get(name)
        if ctor is None:
            raise self.fail(f"unknown constructor {name} in a pattern (a variable pattern is "
                            f"written %{name})", pos)
        if len(patterns) != len(ctor.inputs):
            raise self.fail(f"constructor {name} has {len(ctor.inputs)} field(s), the pattern "
                            f"gives {len(patterns)}", pos)
        return PatternConstructor(ctor, patterns)

    def r_pattern_name(self, k, p):
        if k[0] == "_":
            return PatternWildcard()
        return self.pattern_ctor(k[0], p[0], ())

    def r_pattern_ctor(self, k, p):
        return self.pattern_ctor(k[0], p[0], k[2] if len(k) == 4 else ())

    def r_pattern_var(self, k, p):
        return PatternVar(self.at(Var(k[0][1:]), p[0]))

    def r_pattern_var_typed(self, k, p):
        return PatternVar(self.at(Var(k[0][1:], k[2]), p[0]))

    def r_pattern_tuple(self, k, p):
        return PatternTuple(k[1] if len(k) > 2 else ())

    # -- metadata --------------------------------------------------------------------------------
    def meta(self, text: str, pos: int) -> Constant:
        """The constant ``meta[relay.Constant][i]`` refers to."""
        kind, index = text[5:-1].split("][")
        if self.metadata is None:
            if self.source.metadata is None:
                raise self.fail(f"{text} refers to a #[metadata] section, but there is none", pos)
            try:
                self.metadata = read_metadata(self.source.metadata)
            except MetadataError as exc:
                raise self.fail(str(exc), self.source.metadata_pos) from None
        entries = self.metadata.get(kind)
        if entries is None:
            raise self.fail(f"the metadata section has no {kind} entries", pos)
        i = int(index)
        if i >= len(entries):
            raise self.fail(f"{text} is out of range: the metadata section has {len(entries)} "
                            f"{kind} entries", pos)
        if entries[i] is None:
            raise self.fail(f"metadata entries of type {kind} are not supported", pos)
        return entries[i]

    # -- types -----------------------------------------------------------------------------------
    def r_tuple_type_empty(self, k, p):
        return TupleType(())

    def r_tuple_type(self, k, p):
        return TupleType(k[1])

    def r_fntype_head(self, k, p):
        return self.open_type_frame([])

    def r_fntype_head_generic(self, k, p):
        return self.open_type_frame(k[2])

    def r_func_type_empty(self, k, p):
        self.close_type_frame()
        return FuncType((), k[4], k[0])

    def r_func_type(self, k, p):
        self.close_type_frame()
        return FuncType(k[2], k[5], k[0])

    def r_tensor_type(self, k, p):
        if k[4] not in DTYPES:
            raise self.fail(f"unknown dtype {k[4]}", p[4])
        try:
            return TensorType(k[2], k[4])
        except NodeError as exc:
            raise self.fail(str(exc), p[2]) from None

    def adt_name(self, name: str, pos: int) -> GlobalTypeVar:
        gtv = self.type_names.get(name)
        if gtv is None:
            gtv = self.type_names[name] = GlobalTypeVar(name)
        if gtv not in self.type_defs and name not in self.type_uses:
            self.type_uses[name] = pos
        return gtv

    def r_named_type(self, k, p):
        name = k[0]
        scoped = self.type_vars.get(name)
        if scoped:
            return scoped[-1]
        if name in DTYPES:
            return TensorType((), name)
        if name == "_":
            return IncompleteType()
        # An ADT without arguments is applied to none, as TVM reads it: `Nat` is `Nat[]`.
        return TypeCall(self.adt_name(name, p[0]), ())

    def type_call(self, name: str, pos: int, args) -> TypeCall:
        scoped = self.type_vars.get(name)
        return TypeCall(scoped[-1] if scoped else self.adt_name(name, pos), args)

    def r_type_call_empty(self, k, p):
        return self.type_call(k[0], p[0], ())

    def r_type_call(self, k, p):
        return self.type_call(k[0], p[0], k[2])

    def r_ref_type(self, k, p):
        return RefType(k[2])

    # -- lists -----------------------------------------------------------------------------------
    def r_list_first(self, k, p):
        return [k[0]]

    def r_list_more(self, k, p):
        k[0].append(k[2])
        return k[0]
