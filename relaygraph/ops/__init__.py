"""Operators: the table of op records (see registry.py) and the ``rg.op`` builders."""

from .registry import REQUIRED, OpDef, PatternKind, all_ops, get, lookup, register

__all__ = ["OpDef", "PatternKind", "REQUIRED", "all_ops", "get", "lookup", "register"]
