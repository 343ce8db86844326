"""InferType as a pass: the module with every node's checked type recorded."""

from __future__ import annotations

from ..ir.module import IRModule
from .infra import PassContext, module_pass

__all__ = ["InferType"]


def InferType():  # noqa: N802 - Relay's pass name
    """Type-check every function (Relay's unification and relation solving)."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        from ..ty import infer_type

        return infer_type(mod)

    return module_pass(run, opt_level=0, name="InferType")
