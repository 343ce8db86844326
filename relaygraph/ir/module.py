"""IRModule: the global functions and ADT definitions of a program."""

from __future__ import annotations

from collections.abc import Iterator

from .adt import Constructor, TypeData
from .expr import Expr, Function, GlobalVar
from .node import NodeError
from .types import GlobalTypeVar

__all__ = ["IRModule"]


class IRModule:
    """Maps GlobalVars to Functions and GlobalTypeVars to TypeData; globals may be mutually
    recursive. Nodes are immutable; a module is a small mutable table of them that passes copy."""

    __slots__ = ("functions", "type_definitions", "_by_name", "_types_by_name", "attrs",
                 "checked_types")

    def __init__(self, functions=None, type_definitions=None, attrs=None) -> None:
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
        new = IRModule(attrs=self.attrs)
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
