"""IRModule: the global functions and ADT definitions of a program."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from .adt import Constructor, TypeData
from .expr import Expr, Function, GlobalVar
from .node import NodeError
from .types import GlobalTypeVar

__all__ = ["IRModule", "SourceMap"]


class SourceMap:
    """Where the nodes of one parse came from: node -> span of its first occurrence."""

    # Nodes are interned, so one node may occur in many programs and many files: its source
    # position belongs to the parse that read it, kept here and carried by the parsed module
    # (and its copies), never on the node. Keys are held strongly: a node id could be reused
    # by an unrelated node once the first one dies. A parse records character offsets into its
    # own text (cheap); they become line and column only when a diagnostic asks.
    __slots__ = ("_spans", "_texts", "_name", "_starts")

    def __init__(self, name: str | None = None, text: str | None = None) -> None:
        self._spans: dict = {}  # node -> offset into the own text (int) or a Span
        self._texts: dict[str, str] = {}
        self._name = name
        self._starts: list[int] | None = None
        if name is not None and text is not None:
            self._texts[name] = text

    def offsets(self) -> dict:
        """The raw table a parser of the map's own text fills (node -> character offset)."""
        return self._spans

    def add(self, node, span) -> None:
        """Record where ``node`` came from, unless an earlier occurrence is known."""
        self._spans.setdefault(node, span)

    def carry(self, old, new) -> None:
        """Give ``new`` (a node rebuilt from ``old``) the span of ``old`` if it has none."""
        if old in self._spans and new not in self._spans:
            self._spans[new] = self._spans[old]

    def get(self, node):
        """The span of ``node`` in this parse, or None."""
        span = self._spans.get(node)
        return self._span_at(span) if type(span) is int else span

    def locate(self, node) -> tuple:
        """``(span, source text)`` of ``node`` for a diagnostic (either may be None)."""
        span = self.get(node)
        return span, (self._texts.get(span.source_name) if span is not None else None)

    def add_text(self, name: str, text: str) -> None:
        """Keep a source text so diagnostics show its lines."""
        self._texts[name] = text

    def absorb(self, other: SourceMap) -> None:
        """Add the other map's spans (and texts) for the nodes this one lacks."""
        if not self._spans and self._name is None:
            self._name, self._starts = other._name, other._starts
            self._spans.update(other._spans)
        else:
            for node in other._spans:
                if node not in self._spans:
                    self._spans[node] = other.get(node)
        self._texts.update({k: v for k, v in other._texts.items() if k not in self._texts})

    def merged(self, other: SourceMap) -> SourceMap:
        """A new map with this map's spans and, for nodes it lacks, the other's."""
        if not other._spans:
            return self
        if not self._spans:
            return other
        out = SourceMap(self._name)
        out._starts = self._starts
        out._texts = dict(self._texts)
        out._spans = dict(self._spans)
        out.absorb(other)
        return out

    def __contains__(self, node) -> bool:
        return node in self._spans

    def __len__(self) -> int:
        return len(self._spans)

    def __repr__(self) -> str:
        return f"<SourceMap {self._name or ''} {len(self._spans)} nodes>"

    def _span_at(self, pos: int):
        from ..errors import Span

        starts = self._starts
        if starts is None:
            text = self._texts.get(self._name, "")
            starts = [0]
            i = text.find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = text.find("\n", i + 1)
            self._starts = starts
        line = bisect.bisect_right(starts, pos)
        return Span(self._name, line, pos - starts[line - 1] + 1, text=self._texts.get(self._name))


class IRModule:
    """Maps GlobalVars to Functions and GlobalTypeVars to TypeData; globals may be mutually
    recursive. Nodes are immutable; a module is a small mutable table of them that passes copy."""

    __slots__ = ("functions", "type_definitions", "_by_name", "_types_by_name", "attrs",
                 "checked_types", "source_map")

    def __init__(self, functions=None, type_definitions=None, attrs=None,
                 source_map: SourceMap | None = None) -> None:
        # where the module's nodes were parsed (shared by copies, like the nodes themselves)
        self.source_map = source_map if source_map is not None else SourceMap()
        self.functions: dict[GlobalVar, Function] = {}
        self.type_definitions: dict[GlobalTypeVar, TypeData] = {}
        self._by_name: dict[str, GlobalVar] = {}
        self._types_by_name: dict[str, GlobalTypeVar] = {}
        self.attrs: dict = dict(attrs or {})
        self.checked_types = None  # the TypeMap of InferType's result (see ty/checked.py)
        for gtv, data in (type_definitions or {}).items():
            self.add_type(data, gtv)
        for gv, fn in (functions or {}).items():
            self.add(gv, fn)

    # -- functions ------------------------------------------------------------------------
    def add(self, gv: GlobalVar | str, func: Function, update: bool = False) -> GlobalVar:
        """Add a global function; a second add under one name needs ``update=True``."""
        if isinstance(gv, str):
            gv = self._by_name.get(gv) or GlobalVar(gv)
        if not isinstance(gv, GlobalVar):
            raise NodeError(f"IRModule.add: expected a GlobalVar or name, got {gv!r}")
        if not isinstance(func, Function):
            raise NodeError(f"IRModule.add(@{gv.name_hint}): expected a Function, got "
                            f"{type(func).__name__}")
        known = self._by_name.get(gv.name_hint)
        if known is not None and known is not gv:
            raise NodeError(f"IRModule.add: another GlobalVar is already named @{gv.name_hint}")
        if known is not None and not update:
            raise NodeError(f"IRModule.add: @{gv.name_hint} is already defined (use update)")
        self._by_name[gv.name_hint] = gv
        self.functions[gv] = func
        return gv

    def update_func(self, gv: GlobalVar | str, func: Function) -> GlobalVar:
        """Replace (or add) a global function."""
        return self.add(gv, func, update=True)

    def update(self, other: IRModule) -> None:
        """Merge another module's definitions into this one (its globals win)."""
        for gtv, data in other.type_definitions.items():
            self.add_type(data, gtv, update=True)
        for gv, fn in other.functions.items():
            self.add(self._by_name.get(gv.name_hint, gv), fn, update=True)
        self.source_map = self.source_map.merged(other.source_map)

    def remove(self, gv: GlobalVar | str) -> None:
        """Drop a global function."""
        gv = self.get_global_var(gv) if isinstance(gv, str) else gv
        del self.functions[gv]
        del self._by_name[gv.name_hint]

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar named ``name`` (without the ``@``)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no global @{name} in the module (has: "
                           f"{', '.join('@' + n for n in sorted(self._by_name)) or 'none'})") from None

    def get_global_vars(self) -> list[GlobalVar]:
        """All global function names, sorted by name."""
        return [self._by_name[n] for n in sorted(self._by_name)]

    def __getitem__(self, key: GlobalVar | str) -> Function:
        if isinstance(key, str):
            key = self.get_global_var(key)
        return self.functions[key]

    def __setitem__(self, key: GlobalVar | str, func: Function) -> None:
        self.add(key, func, update=True)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._by_name
        return key in self.functions

    def __iter__(self) -> Iterator[tuple[GlobalVar, Function]]:
        return iter(sorted(self.functions.items(), key=lambda kv: kv[0].name_hint))

    def __len__(self) -> int:
        return len(self.functions)

    # -- types ----------------------------------------------------------------------------
    def add_type(self, data: TypeData, gtv: GlobalTypeVar | None = None,
                 update: bool = False) -> GlobalTypeVar:
        """Add an ADT definition."""
        if not isinstance(data, TypeData):
            raise NodeError(f"IRModule.add_type: expected TypeData, got {type(data).__name__}")
        gtv = gtv or data.header
        known = self._types_by_name.get(gtv.name_hint)
        if known is not None and not update:
            raise NodeError(f"IRModule.add_type: type {gtv.name_hint} is already defined")
        if known is not None and known is not gtv:
            del self.type_definitions[known]
        self._types_by_name[gtv.name_hint] = gtv
        self.type_definitions[gtv] = data
        return gtv

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        """The ADT named ``name``."""
        try:
            return self._types_by_name[name]
        except KeyError:
            raise KeyError(f"no type {name} in the module") from None

    def get_type(self, name: str) -> TypeData:
        """The definition of the ADT named ``name``."""
        return self.type_definitions[self.get_global_type_var(name)]

    def get_constructor(self, name: str) -> Constructor:
        """The constructor named ``name`` in any ADT of the module."""
        for data in self.type_definitions.values():
            for c in data.constructors:
                if c.name_hint == name:
                    return c
        raise KeyError(f"no constructor {name} in the module")

    # -- whole-module helpers ---------------------------------------------------------------
    @classmethod
    def from_expr(cls, expr: Expr, functions=None, type_defs=None) -> IRModule:
        """A module whose ``@main`` is ``expr`` (wrapped in a Function over its free vars)."""
        from .traversal import free_vars

        if not isinstance(expr, Expr):
            raise NodeError(f"IRModule.from_expr: expected an Expr, got {type(expr).__name__}")
        mod = cls(functions, type_defs)
        func = expr if isinstance(expr, Function) else Function(free_vars(expr), expr)
        mod.add("main", func, update=True)
        return mod

    def copy(self) -> IRModule:
        """A shallow copy: a new table over the same immutable nodes."""
        new = IRModule(attrs=self.attrs, source_map=self.source_map)
        new.functions = dict(self.functions)
        new.type_definitions = dict(self.type_definitions)
        new._by_name = dict(self._by_name)
        new._types_by_name = dict(self._types_by_name)
        new.checked_types = self.checked_types  # what a pass keeps is still typed as it was
        return new

    def type_of(self, expr: Expr):
        """The checked type of ``expr`` in this module (one InferType has typed)."""
        if self.checked_types is None:
            from ..errors import RelayError  # errors imports ir: not at the top

            raise RelayError("this module has not been type-checked; use the module rg.infer_type "
                             "returns")
        return self.checked_types.type_of(expr)

    def __str__(self) -> str:
        from ..text import astext

        return astext(self)

    def __repr__(self) -> str:
        names = ", ".join("@" + gv.name_hint for gv, _ in self)
        return f"<IRModule {names}>"

    def _repr_html_(self) -> str:
        from .display import repr_html

        parts = [repr_html(fn, f"@{gv.name_hint}") for gv, fn in self]
        from ..text import astext

        text = astext(self)
        import html

        return "".join(parts) + f"<details><summary>Relay text</summary><pre>{html.escape(text)}" \
            "</pre></details>"
