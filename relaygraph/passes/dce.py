"""DeadCodeElimination: drop unused pure let bindings; optionally inline single-use ones."""

from __future__ import annotations

from ..ir.expr import Expr, Function, Let, Var
from ..ir.module import IRModule
from ..ir.purity import Purity
from ..ir.traversal import iter_post_order
from ._walk import rebuild
from .infra import PassContext, module_pass

__all__ = ["dead_code_elimination", "DeadCodeElimination"]


def dead_code_elimination(expr: Expr, inline_once: bool = False, purity: Purity | None = None) -> Expr:
    """Remove let bindings whose variable is never used (when the value is pure)."""
    purity = purity or Purity().learn(expr)
    lets = {n.var: n for n in iter_post_order(expr) if isinstance(n, Let)}
    if not lets:
        return expr
    keep_value = {v: not purity.is_pure(let.value) for v, let in lets.items()}

    def live_kids(node):
        if isinstance(node, Let):
            return (node.value, node.body) if keep_value[node.var] else (node.body,)
        if isinstance(node, Var) and node in lets:
            return (lets[node].value,)  # a used variable makes its value live
        return node.children()

    # Phase 1: what is live, by reachability from the result.
    seen, stack = {expr}, [expr]
    while stack:
        for child in live_kids(stack.pop()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    kept = {v for v in lets if keep_value[v] or v in seen}

    # Phase 2: use edges of each kept variable, from live nodes of the kept program.
    uses: dict[Var, int] = dict.fromkeys(kept, 0)
    for node in seen:
        if isinstance(node, Let):
            edges = (node.value, node.body) if node.var in kept else (node.body,)
        elif isinstance(node, Var):
            continue
        else:
            edges = node.children()
        for child in edges:
            if child in uses:
                uses[child] += 1

    def inlined(v: Var) -> bool:
        if not inline_once or keep_value[v] or uses.get(v) != 1:
            return False
        return not (isinstance(lets[v].value, Function) and _self_recursive(lets[v]))

    def dropped(v: Var) -> bool:
        return v not in kept or inlined(v)

    def kids(node):
        if isinstance(node, Let):
            return (node.body,) if dropped(node.var) else (node.var, node.value, node.body)
        if isinstance(node, Var) and node in lets and inlined(node):
            return (lets[node].value,)
        return node.children()

    def make(node, res):
        if isinstance(node, Let):
            return res[0] if dropped(node.var) else Let(*res)
        if isinstance(node, Var):
            return res[0] if res else node
        return node.with_children(res)

    return rebuild(expr, kids, make)


def _self_recursive(let: Let) -> bool:
    return any(n is let.var for n in iter_post_order(let.value))


def DeadCodeElimination(inline_once: bool = False):  # noqa: N802 - Relay's pass name
    """Remove unused pure let bindings (and, with inline_once, inline single-use ones)."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        purity = Purity(mod)
        for gv, func in list(mod.functions.items()):
            mod.functions[gv] = dead_code_elimination(func, inline_once, purity)
        return mod

    return module_pass(run, opt_level=1, name="DeadCodeElimination")
