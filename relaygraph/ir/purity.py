"""The project's one purity analysis: which expressions may have effects.

Two questions, answered for every node in one memoised post-order walk:

- ``is_pure(e)``: evaluating ``e`` cannot touch state (no ref operation, no call of anything
  that might). DCE, CSE, GNF and the other passes keep, never merge and never move what is not.
- ``per_use(e)``: ``e`` calls something that may have effects. Such a node is interned like any
  call, so one node may stand for several calls: each use is evaluated anew. Ref nodes are
  nominal (one node is one cell, one read, one write), so a node whose only effects are ref
  nodes is evaluated once per activation like a pure one.

Function literals are values (pure); their bodies matter where they are called. Calls of ops
and constructors are pure; calls of globals are pure when the global's body is (solved as a
greatest fixed point over the module); calls of a let-bound function (see ``learn``) are pure
when its body is and it is not recursive; calling any other variable (an unknown closure) is
impure.
It lives in ``relaygraph.ir`` so the passes, the interpreter and the printer all use it.
"""

from __future__ import annotations

from .adt import Constructor
from .expr import Call, Expr, Function, GlobalVar, Let, Op, RefCreate, RefRead, RefWrite, Var
from .module import IRModule
from .traversal import iter_post_order

__all__ = ["Purity", "EFFECT_NODES"]

EFFECT_NODES = (RefCreate, RefRead, RefWrite)

# Per-node flags: bit 0 = may have effects, bit 1 = calls something that may have effects.
_EFFECT, _CALL = 1, 2


class Purity:
    """Answers ``is_pure(expr)`` and ``per_use(expr)`` for the expressions of one module."""

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod
        self.memo: dict[Expr, int] = {}
        self.globals: dict[str, bool] = {}
        self.local_fns: dict[Var, Function] = {}  # let-bound functions: judged by their bodies
        self._active: set = set()  # expressions being judged (a call back into one: recursion)
        if mod is not None:
            for fn in mod.functions.values():
                self.learn(fn)
            self._solve_globals(mod)

    def learn(self, expr: Expr) -> Purity:
        """Note the let-bound functions in ``expr``, so calls of them are judged by their body."""
        found = False
        for node in iter_post_order(expr):
            if isinstance(node, Let) and isinstance(node.value, Function):
                if node.var not in self.local_fns:
                    self.local_fns[node.var] = node.value
                    found = True
        if found:
            self.memo.clear()
        return self

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
        return not self._flags(expr) & _EFFECT

    def per_use(self, expr: Expr) -> bool:
        """True when ``expr`` calls something that may have effects (each use is a new call)."""
        return bool(self._flags(expr) & _CALL)

    def pure_callee(self, callee: Expr) -> bool:
        """True when calling ``callee`` cannot have effects (its arguments aside)."""
        if isinstance(callee, (Op, Constructor)):
            return True
        if isinstance(callee, GlobalVar):
            return self.globals.get(callee.name_hint, False)
        if isinstance(callee, Function):
            return self.is_pure(callee.body)
        fn = self.local_fns.get(callee) if isinstance(callee, Var) else None
        if fn is None or fn.body in self._active:  # unknown, or recursive: assume effects
            return False
        return self.is_pure(fn.body)

    def _flags(self, expr: Expr) -> int:
        memo = self.memo
        found = memo.get(expr)
        if found is not None:
            return found
        self._active.add(expr)
        try:
            self._walk(expr)
        finally:
            self._active.discard(expr)
        return memo[expr]

    def _walk(self, expr: Expr) -> None:
        memo = self.memo
        for node in iter_post_order(expr, memo.__contains__):
            if node in memo:
                continue
            if isinstance(node, Function):
                memo[node] = 0
                continue
            flags = 0
            for child in node.children():
                flags |= memo.get(child, 0)
            if isinstance(node, EFFECT_NODES):
                flags |= _EFFECT
            elif isinstance(node, Call) and not self.pure_callee(node.op):
                flags |= _EFFECT | _CALL
            memo[node] = flags
