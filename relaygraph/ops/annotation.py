"""Region annotations for external compilers (BYOC): ``annotation.compiler_begin`` and
``annotation.compiler_end`` mark where a region offloaded to ``compiler`` starts and ends.

Both are the identity on any type (tensors and tuples alike); AnnotateTarget inserts them,
MergeCompilerRegions merges the regions and PartitionGraph removes them.
"""

from __future__ import annotations

from ..ir.types import TensorType
from ._base import REQUIRED, PatternKind, defop


def _identity_any(args, a):
    return args[0]


def _identity_kernel(args, a):
    return args[0]


for _name in ("annotation.compiler_begin", "annotation.compiler_end"):
    defop(_name, 1, {"compiler": REQUIRED}, _identity_any, _identity_kernel, PatternKind.OPAQUE,
          input_names=("data",),
          examples=(([TensorType((2, 3))], {"compiler": "ccompiler"}),
                    ([TensorType((4,), "int32")], {"compiler": "default"})))
