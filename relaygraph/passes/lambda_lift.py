"""LambdaLift: move nested functions to globals, closing over their free variables."""

from __future__ import annotations

from ..ir.expr import Call, Expr, Function, GlobalVar, Let, Var
from ..ir.module import IRModule
from ..ir.traversal import ExprMutator, free_vars, substitute
from .infra import PassContext, module_pass

__all__ = ["LambdaLift"]


class _Lifter(ExprMutator):
    """Bottom-up: inner functions are lifted first, so an outer one sees globals, not lambdas."""

    def __init__(self, mod: IRModule, owner: str, root: Function) -> None:
        super().__init__()
        self.mod, self.owner, self.root, self.count = mod, owner, root, 0
        self.rec_names: dict[Function, Var] = {}

    def pre_rewrite(self, node):
        if isinstance(node, Function) and node.attrs.get("Primitive"):
            return node  # fused groups stay where they are
        if isinstance(node, Let) and isinstance(node.value, Function):
            self.rec_names.setdefault(node.value, node.var)
        return None

    def _fresh(self) -> GlobalVar:
        while True:
            self.count += 1
            name = f"lifted_{self.owner}_{self.count}"
            if name not in self.mod:
                return GlobalVar(name)

    def rewrite_function(self, pre: Function, post: Function) -> Expr:
        if pre is self.root or post.attrs.get("Primitive"):
            return post
        gv = self._fresh()
        self_var = self.rec_names.get(pre)
        captured = [v for v in free_vars(post) if v is not self_var]
        if captured:
            # The global takes the captured values and returns the closure.
            outer = [Var(v.name_hint, v.type_annotation) for v in captured]
            ref: Expr = Call(gv, tuple(outer))
            inner = substitute(post, dict(zip(captured, outer, strict=True)))
            if self_var is not None:
                inner = substitute(inner, {self_var: ref})
            self.mod.add(gv, Function(outer, inner.with_attr("Closure", 1)))
            replacement: Expr = Call(gv, tuple(captured))
        else:
            inner = substitute(post, {self_var: gv}) if self_var is not None else post
            self.mod.add(gv, inner)
            replacement = gv
        return replacement


def LambdaLift():  # noqa: N802 - Relay's pass name
    """Turn every nested (non-primitive) function into a global."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        for gv, fn in list(mod.functions.items()):
            mod.functions[gv] = _Lifter(mod, gv.name_hint, fn).visit(fn)
        return mod

    return module_pass(run, opt_level=0, name="LambdaLift")
