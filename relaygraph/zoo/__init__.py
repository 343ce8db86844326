"""Built-in workloads: ``get(name, **options) -> (IRModule, params)`` and ``names()``."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.module import IRModule
from . import examples

__all__ = ["get", "names", "register"]

_BUILDERS: dict[str, Callable[..., tuple[IRModule, dict]]] = {}


def register(name: str, builder: Callable[..., tuple[IRModule, dict]]) -> None:
    """Make a workload available under ``name`` (kebab-case)."""
    _BUILDERS[name] = builder


def names() -> list[str]:
    """The names of the built-in workloads."""
    return sorted(_BUILDERS)


def get(name: str, **options) -> tuple[IRModule, dict]:
    """Build a workload: the module and a dict of seeded random parameter values."""
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(names())}") from None
    return builder(**options)


register("residual-mlp", examples.residual_mlp)
register("diamond-chain", examples.diamond_chain)
