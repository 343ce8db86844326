"""The ``rg.op`` builders: one Python function per operator, generated from the op table.

``rg.op.add(a, b)``, ``rg.op.nn.conv2d(x, w, padding=(1, 1))``, ``rg.op.reshape(x, newshape=(2,
-1))``: inputs first (Python numbers and numpy arrays become constants), then attributes by
keyword, or positionally in TVM's field order. Attributes are checked against the op's schema and
stored in canonical form (see ``OpDef.builder_attrs``).
"""

from __future__ import annotations

import sys
import types

from ..ir.expr import Call, Expr, Op, Tuple, as_expr
from ..ir.node import NodeError
from .registry import OpDef, all_ops

__all__ = ["make_call", "builder", "install"]


def make_call(name: str, *args, **attrs) -> Call:
    """A call of the operator ``name`` (e.g. ``make_call("nn.dense", x, w, units=10)``)."""
    from .registry import get

    return builder(get(name))(*args, **attrs)


def _inputs_text(op: OpDef) -> str:
    if op.input_names:
        return ", ".join(op.input_names)
    return "no inputs" if op.num_inputs == 0 else f"{op.num_inputs} inputs"


def builder(op: OpDef):
    """The builder function of one operator."""
    attr_names = list(op.attrs)

    def build(*args, **attrs) -> Call:
        n = op.num_inputs if op.num_inputs is not None else len(args)
        inputs, positional = args[:n], args[n:]
        if len(positional) > len(attr_names):
            raise NodeError(f"{op.name} takes {n} input(s) ({_inputs_text(op)}) and at most "
                            f"{len(attr_names)} attribute(s); got {len(args)} positional arguments")
        for name, value in zip(attr_names, positional, strict=False):  # attrs not given keep defaults
            if name in attrs:
                raise NodeError(f"{op.name}: attribute {name!r} given twice")
            attrs[name] = value
        if op.extra.get("tuple_input") and len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = (Tuple(tuple(as_expr(x) for x in inputs[0])),)
        if len(inputs) != n:
            raise NodeError(f"{op.name} takes {n} input(s) ({_inputs_text(op)}), got {len(inputs)}")
        exprs = tuple(x if isinstance(x, Expr) else as_expr(x) for x in inputs)
        return Call(Op(op.name), exprs, op.builder_attrs(attrs))

    short = op.name.rsplit(".", 1)[-1]
    build.__name__ = short
    build.__qualname__ = op.name
    attrs_doc = ", ".join(f"{k}={v!r}" for k, v in op.attrs.items())
    build.__doc__ = f"Build a call of {op.name}({_inputs_text(op)}; {attrs_doc})."
    return build


def install(package: types.ModuleType) -> None:
    """Put one builder per op on ``package``; dotted names get sub-namespace modules."""
    for op in all_ops():
        *path, short = op.name.split(".")
        target = package
        for part in path:
            sub = getattr(target, part, None)
            if not isinstance(sub, types.ModuleType):
                sub = types.ModuleType(f"{target.__name__}.{part}",
                                       f"Builders of the {part}.* operators.")
                setattr(target, part, sub)
                sys.modules[sub.__name__] = sub
            target = sub
        setattr(target, short, builder(op))
