"""Which expressions may have effects (ref cells, unknown calls): what DCE and CSE must keep."""

from __future__ import annotations

from ..ir.adt import Constructor
from ..ir.expr import Call, Expr, Function, GlobalVar, Op, RefCreate, RefRead, RefWrite
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order

__all__ = ["Purity"]

_EFFECTS = (RefCreate, RefRead, RefWrite)


class Purity:
    """Answers ``is_pure(expr)``: evaluating it cannot touch state.

    Calls of ops, constructors, function literals and globals whose bodies are pure are pure;
    calling a variable (an unknown closure) is assumed impure. Function literals themselves are
    values (pure); their bodies matter only where they are called.
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod
        self.memo: dict[Expr, bool] = {}
        self.globals: dict[str, bool] = {}
        if mod is not None:
            self._solve_globals(mod)

    def _solve_globals(self, mod: IRModule) -> None:
        # Greatest fixed point: assume every global pure, then mark impure until stable.
        for gv in mod.functions:
            self.globals[gv.name_hint] = True
        changed = True
        while changed:
            changed = False
            self.memo.clear()
            for gv, fn in mod.functions.items():
                if self.globals[gv.name_hint] and not self.is_pure(fn.body):
                    self.globals[gv.name_hint] = False
                    changed = True
        self.memo.clear()

    def is_pure(self, expr: Expr) -> bool:
        """True when evaluating ``expr`` has no effects."""
        if expr in self.memo:
            return self.memo[expr]
        pure = True
        skip = lambda n: isinstance(n, Function) and n is not expr  # noqa: E731 - bodies are values
        for node in iter_post_order(expr, skip):
            if isinstance(node, _EFFECTS):
                pure = False
                break
            if isinstance(node, Call) and not self._pure_callee(node.op):
                pure = False
                break
        self.memo[expr] = pure
        return pure

    def _pure_callee(self, callee: Expr) -> bool:
        if isinstance(callee, (Op, Constructor)):
            return True
        if isinstance(callee, GlobalVar):
            return self.globals.get(callee.name_hint, False)
        if isinstance(callee, Function):
            return self.is_pure(callee.body)
        return False
