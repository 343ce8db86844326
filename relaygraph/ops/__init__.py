"""Operators: the table of op records (see registry.py) and the ``rg.op`` builders.

Every operator is a function here, named as in Relay: ``relaygraph.ops.add(a, b)``,
``relaygraph.ops.nn.conv2d(x, w, padding=(1, 1))`` (dotted names are namespaces).
"""

import sys as _sys

from . import annotation, conv, creation, elemwise, fused_ops, join, linear, norm, pool, reduce, transform  # noqa: F401
from .builders import install as _install
from .builders import make_call
from .domains import draw, random_inputs
from .layouts import layout_changes, layout_stats
from .registry import REQUIRED, OpDef, PatternKind, all_ops, get, lookup, register

__all__ = [
    "OpDef", "PatternKind", "REQUIRED", "all_ops", "get", "lookup", "register", "make_call",
    "draw", "random_inputs", "layout_stats", "layout_changes",
]

_install(_sys.modules[__name__])
