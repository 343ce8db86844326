"""Running Relay programs on numpy: the interpreter (whole language) and the dataflow executor."""

from .evaluate import bind_inputs, evaluate
from .executor import Plan, compile_function, is_dataflow
from .fused_kernels import FusedKernel, fused_kernel
from .interpreter import Frame, Interpreter
from .values import (
    Closure,
    ConstructorValue,
    OpValue,
    RefValue,
    format_value,
    from_list,
    to_list,
    values_equal,
)

__all__ = [
    "Closure", "ConstructorValue", "Frame", "FusedKernel", "Interpreter", "OpValue", "Plan",
    "RefValue", "bind_inputs", "compile_function", "evaluate", "format_value", "from_list",
    "fused_kernel", "is_dataflow", "to_list", "values_equal",
]
