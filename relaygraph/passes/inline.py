"""Inline, RemoveUnusedFunctions and DefuseOps: passes that move function bodies around."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RelayError
from ..ir.expr import Call, Expr, Function, GlobalVar, Let, Var
from ..ir.module import IRModule
from ..ir.purity import Purity
from ..ir.traversal import ExprMutator, iter_post_order, substitute
from .infra import PassContext, module_pass

__all__ = ["Inline", "RemoveUnusedFunctions", "DefuseOps", "defuse_ops", "called_globals"]


def called_globals(expr: Expr) -> set[str]:
    """Names of the globals an expression refers to."""
    return {n.name_hint for n in iter_post_order(expr) if isinstance(n, GlobalVar)}


def _beta(func: Function, args: tuple, purity: Purity) -> Expr:
    """The body with the arguments for the parameters; an argument with effects is let-bound
    (in order, before the body) so it still runs once, where the call ran it."""
    mapping: dict = {}
    binds: list = []
    for param, arg in zip(func.params, args, strict=True):
        if purity.is_pure(arg):
            mapping[param] = arg
        else:
            mapping[param] = fresh = Var(param.name_hint, param.type_annotation)
            binds.append((fresh, arg))
    body = substitute(func.body, mapping)
    for fresh, arg in reversed(binds):
        body = Let(fresh, arg, body)
    return body


class _InlineCalls(ExprMutator):
    def __init__(self, targets: dict[str, Function], purity: Purity) -> None:
        super().__init__()
        self.targets = targets
        self.purity = purity

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        callee = post.op
        if isinstance(callee, GlobalVar) and callee.name_hint in self.targets:
            func = self.targets[callee.name_hint]
            if len(func.params) == len(post.args):
                return _beta(func, post.args, self.purity)
        return post


def Inline():  # noqa: N802 - Relay's pass name
    """Inline calls of globals marked ``Inline=1`` (non-recursive ones), then drop them if unused.

    A global whose body has effects is not inlined: its ref cells are made anew by each call,
    and one inlined copy of the body would share them between calls.
    """

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        purity = Purity(mod)
        marked = {gv.name_hint: fn for gv, fn in mod.functions.items()
                  if fn.attrs.get("Inline") and purity.globals.get(gv.name_hint)}
        targets = {n: fn for n, fn in marked.items() if n not in _reachable(mod, [n], through=fn)}
        if not targets:
            return mod
        # Inline inside the inlined functions first, so their bodies are final.
        for _ in range(len(targets)):
            changed = False
            for name, fn in list(targets.items()):
                new = _InlineCalls(targets, purity).visit(fn)
                if new is not fn:
                    targets[name], changed = new, True
            if not changed:
                break
        for gv, fn in list(mod.functions.items()):
            mod.functions[gv] = _InlineCalls(targets, purity).visit(fn)
        for name in targets:
            if name != "main" and not any(name in called_globals(f) for f in mod.functions.values()):
                mod.remove(name)
        return mod

    return module_pass(run, opt_level=1, name="Inline")


def _reachable(mod: IRModule, roots: Sequence[str], through: Function | None = None) -> set[str]:
    """Globals reachable from ``roots`` (from ``through``'s body instead, when given)."""
    seen: set[str] = set()
    work = list(called_globals(through)) if through is not None else list(roots)
    while work:
        name = work.pop()
        if name in seen or name not in mod:
            continue
        seen.add(name)
        work.extend(called_globals(mod[name]))
    return seen


def RemoveUnusedFunctions(entry_functions: Sequence[str] = ("main",)):  # noqa: N802
    """Drop globals not reachable from the entry functions."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        keep = _reachable(mod, [e for e in entry_functions if e in mod])
        for gv in list(mod.functions):
            if gv.name_hint not in keep:
                mod.remove(gv)
        return mod

    return module_pass(run, opt_level=1, name="RemoveUnusedFunctions")


class _Defuse(ExprMutator):
    def __init__(self, purity: Purity) -> None:
        super().__init__()
        self.purity = purity

    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        callee = post.op
        if isinstance(callee, Function) and callee.attrs.get("Primitive"):
            if len(callee.params) != len(post.args):
                names = ", ".join(f"%{p.name_hint}" for p in callee.params)
                raise RelayError(f"DefuseOps: the fused function fn({names}) takes {len(callee.params)} "
                                 f"argument(s) but is called with {len(post.args)}")
            return _beta(callee, post.args, self.purity)
        return post


def defuse_ops(expr: Expr, purity: Purity | None = None) -> Expr:
    """Replace calls of ``Primitive`` functions by their bodies."""
    return _Defuse(purity or Purity().learn(expr)).visit(expr)


def DefuseOps():  # noqa: N802 - Relay's pass name
    """Undo FuseOps: inline every fused (Primitive) function at its call."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        purity = Purity(mod)
        for gv, fn in list(mod.functions.items()):
            mod.functions[gv] = defuse_ops(fn, purity)
        return mod

    return module_pass(run, opt_level=0, name="DefuseOps")
