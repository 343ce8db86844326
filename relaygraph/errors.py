"""The errors relaygraph raises to its users."""

from __future__ import annotations

from .ir.node import NodeError

__all__ = ["RelayError", "NodeError"]


class RelayError(Exception):
    """Base of relaygraph's user-facing errors (parse, type, rule and evaluation errors)."""
