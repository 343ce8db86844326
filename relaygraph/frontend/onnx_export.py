"""Write a Relay program as an ONNX model: ``to_onnx(mod, params) -> onnx.ModelProto``.

The entry function is prepared first: fused (``Primitive=1``) functions are inlined and fused
ops (``fused.*``) expanded into their parts, lets are turned back into graph form, and the
program is type-checked, so every call is a covered Relay operator with known types. Then each
call becomes ONNX nodes (``onnx_export_ops``), parameters named in ``params`` become
initializers, other parameters graph inputs, symbolic dims ``dim_param``s, and the model is
checked with ``onnx.checker.check_model(full_check=True)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Function, Let, Op, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import ExprMutator, iter_post_order
from ..ir.types import Any as AnyDim
from ..ir.types import TensorType, TupleType
from ..ops import fused_ops
from ..ty.dims import dim_str, is_known
from .onnx_export_ops import CONVERTERS, Site, covered_ops

__all__ = ["to_onnx", "save", "DEFAULT_OPSET", "MIN_OPSET", "covered_ops"]

DEFAULT_OPSET = 17  # what torch.onnx.export writes by default; the first with LayerNormalization
MIN_OPSET = 13  # axes and split sizes as inputs (Squeeze, Unsqueeze, Split, ReduceSum)


class Emitter:
    """The ONNX graph under construction: nodes, initializers and fresh names."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.taken: set[str] = set()
        self._consts: dict = {}
        self._count = 0

    def fresh(self, hint: str) -> str:
        """A name not used yet in the graph, from ``hint``."""
        name = hint or "v"
        while name in self.taken:
            self._count += 1
            name = f"{hint or 'v'}_{self._count}"
        self.taken.add(name)
        return name

    def add(self, op_type: str, inputs: list, outputs: int = 1, **attrs):
        """Add a node; the name of its output (a list of names when ``outputs`` > 1)."""
        if any(i is None for i in inputs):
            raise RelayError(f"cannot export to ONNX: a {op_type} node reads a value ONNX has no "
                             "counterpart for (the mask of nn.dropout)")
        outs = [self.fresh(f"{op_type.lower()}_out") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.fresh(op_type.lower()), **attrs))
        return outs if outputs > 1 else outs[0]

    def initializer(self, array: np.ndarray, name: str) -> str:
        """An initializer holding ``array`` under ``name`` (made unique)."""
        name = self.fresh(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"), name))
        return name

    def const(self, array: np.ndarray, key=None) -> str:
        """An initializer for a constant value, shared by every use of the same value."""
        array = np.asarray(array)
        key = key if key is not None else (array.dtype.str, array.shape, array.tobytes())
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.initializer(array, "const")
        return name

    def ints(self, values) -> str:
        """A 1-D int64 initializer (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def tensor(self, array: np.ndarray):
        """A TensorProto for an attribute (ConstantOfShape's value)."""
        return numpy_helper.from_array(np.asarray(array))

    def dtype(self, dtype: str) -> int:
        """The ONNX element type of a Relay dtype."""
        return onnx_dtype(dtype)

    def reduce(self, op_type: str, x: str, axes, keepdims: int) -> str:
        """A Reduce* node over ``axes`` (None: every axis), in the form the opset wants."""
        if axes is None:
            return self.add(op_type, [x], keepdims=keepdims)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.add(op_type, [x, self.ints(axes)], keepdims=keepdims)
        return self.add(op_type, [x], axes=list(axes), keepdims=keepdims)


def onnx_dtype(dtype: str) -> int:
    """The ONNX element type of a Relay dtype (a RelayError for one ONNX lacks)."""
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (TypeError, KeyError, ValueError):
        raise RelayError(f"cannot export to ONNX: the dtype {dtype!r} has no ONNX element type") from None


def _value_info(name: str, ty, what: str):
    if not isinstance(ty, TensorType):
        raise RelayError(f"cannot export to ONNX: {what} has type {ty}; ONNX graph inputs and "
                         "outputs are tensors")
    dims = [int(d) if is_known(d) else None if d is AnyDim else dim_str(d) for d in ty.shape]
    return helper.make_tensor_value_info(name, onnx_dtype(ty.dtype), dims)


class _ExpandFused(ExprMutator):
    def rewrite_call(self, pre: Call, post: Call) -> Expr:
        if type(post.op) is Op and post.op.name.startswith("fused."):
            return fused_ops.expand(post.op.name, post.args, post.attrs)
        return post


def _prepare(mod, entry: str) -> tuple[IRModule, Function]:
    """The typed module whose entry function holds only calls of covered ops."""
    from ..passes import DefuseOps, ToGraphNormalForm
    from ..ty import infer_type

    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise RelayError(f"to_onnx takes an IRModule or a Function, got {type(mod).__name__}")
    if entry not in mod:
        raise RelayError(f"to_onnx: the module has no @{entry} function to export")
    kinds = _kinds(mod[entry])
    if "primitive" in kinds:
        mod = DefuseOps()(mod)
    if "let" in kinds:
        mod = ToGraphNormalForm()(mod)
    if "fused" in kinds:
        mod = mod.copy()
        mod[entry] = _ExpandFused().visit(mod[entry])
    typed = infer_type(mod)
    return typed, typed[entry]


def _kinds(fn: Function) -> set[str]:
    """Which preparing steps ``fn`` needs (each pass is skipped when there is nothing to do)."""
    out: set[str] = set()
    for node in iter_post_order(fn.body):
        if isinstance(node, Function) and node.attrs.get("Primitive"):
            out.add("primitive")
        elif isinstance(node, Let):
            out.add("let")
        elif isinstance(node, Op) and node.name.startswith("fused."):
            out.add("fused")
    return out


def _unsupported(node) -> RelayError:
    what = type(node).__name__
    if isinstance(node, Call) and type(node.op) is Op:
        return RelayError(
            f"cannot export to ONNX: the operator {node.op.name} is not in the covered set; covered "
            f"operators: {', '.join(covered_ops())} (and fused.* ops, which are expanded into them)")
    if isinstance(node, Call):
        what = f"a call of {type(node.op).__name__}"
    return RelayError(f"cannot export to ONNX: {what} in the entry function; only dataflow programs "
                      "(calls of operators, tuples, constants) export. Inline global functions "
                      "(rg.transform.Inline) and remove control flow first")


def _flatten(value) -> list[str]:
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif v is None:
            raise RelayError("cannot export to ONNX: the result includes the mask of nn.dropout")
        else:
            out.append(v)
    return out


def to_onnx(mod, params: dict | None = None, *, opset: int | None = None, name: str | None = None,
            path: str | Path | None = None, entry: str = "main") -> onnx.ModelProto:
    """An ONNX model computing ``mod``'s entry function; ``params`` become initializers."""
    opset = DEFAULT_OPSET if opset is None else opset
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise RelayError(f"opset must be an int from {MIN_OPSET} to {newest} (the installed onnx's "
                         f"newest), got {opset!r}")
    params = dict(params or {})
    typed, fn = _prepare(mod, entry)
    g = Emitter(opset)
    values: dict = {}
    inputs = []
    for p in fn.params:
        if p.name_hint in params:
            values[p] = g.initializer(np.asarray(params[p.name_hint]), p.name_hint)
        else:
            values[p] = g.fresh(p.name_hint)
            inputs.append(_value_info(values[p], typed.type_of(p), f"the parameter %{p.name_hint}"))
    unknown = sorted(set(params) - {p.name_hint for p in fn.params})
    if unknown:
        raise RelayError(f"to_onnx: params {', '.join(unknown)} are not parameters of @{entry}")
    for node in iter_post_order(fn.body, skip=lambda n: isinstance(n, Function)):
        if node in values or isinstance(node, Op):
            continue
        values[node] = _convert(g, typed, node, values)
    outs = _flatten(values[fn.body])
    out_types = _flatten_types(typed.type_of(fn.body))
    graph_outputs = []
    seen = {i.name for i in inputs} | {t.name for t in g.initializers}
    for i, (o, ty) in enumerate(zip(outs, out_types, strict=True)):
        if o in seen:  # an output that is an input, a weight or another output: ONNX needs a node
            o = g.add("Identity", [o])
        seen.add(o)
        graph_outputs.append(_value_info(o, ty, f"output {i}"))
    read = {i for n in g.nodes for i in n.input} | {o.name for o in graph_outputs}
    weights = [t for t in g.initializers if t.name in read]  # e.g. the gamma of scale=False
    graph = helper.make_graph(g.nodes, name or entry, inputs, graph_outputs, initializer=weights)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="relaygraph")
    model.ir_version = helper.find_min_ir_version_for(opsets)
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise RelayError(f"the exported ONNX model fails onnx.checker (a bug in the exporter): "
                         f"{str(exc).splitlines()[0]}") from exc
    if path is not None:
        save(model, path)
    return model


def _flatten_types(ty) -> list:
    out, stack = [], [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        else:
            out.append(t)
    return out


def _convert(g: Emitter, typed: IRModule, node, values: dict):
    if isinstance(node, Constant):
        return g.const(node.data, key=node)
    if isinstance(node, Tuple):
        return [values[f] for f in node.fields]
    if isinstance(node, TupleGetItem):
        return values[node.tuple_value][node.index]
    if isinstance(node, Var):
        raise RelayError(f"cannot export to ONNX: the free variable %{node.name_hint}")
    if not (isinstance(node, Call) and type(node.op) is Op) or node.op.name not in CONVERTERS:
        raise _unsupported(node)
    from ..ops.registry import get

    site = Site(node.op.name, [values[a] for a in node.args], [typed.type_of(a) for a in node.args],
                typed.type_of(node), get(node.op.name).resolve(node.attrs))
    return CONVERTERS[node.op.name](g, site)


def save(model: onnx.ModelProto, path: str | Path) -> Path:
    """Write an ONNX model to ``path``."""
    path = Path(path)
    onnx.save_model(model, str(path))
    return path
