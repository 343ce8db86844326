"""ONNX -> Relay: ``from_onnx(model_or_path, shape=None, dtype="float32", freeze_params=True)``.

The onnx package parses, checks (``onnx.checker``) and infers shapes (``onnx.shape_inference``);
the converters in ``onnx_ops`` map each node to Relay calls. Every call's type is computed as it
is built (from the op table's type relation), so converters can read shapes, and calls whose
inputs are all constants are folded at once: shape subgraphs (Shape -> Gather -> Concat ->
Reshape) become static shapes when the input shapes are known. When they are not, ONNX
``dim_param``s become symbolic dims, and small integer tensors computed from shapes carry their
(symbolic) values so a Reshape can still be given a static ``newshape``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import RelayError
from ..eval.kernels import call_kernel
from ..ir import Any, Constant, Function, IRModule, TensorType, Tuple, TupleGetItem, TupleType, Var
from ..ir.expr import Expr
from ..ir.types import DTYPES
from ..ops.builders import builder
from ..ops.registry import get as get_op
from ..ty import sym

__all__ = ["from_onnx", "OnnxImportError", "load_model", "Importer"]

# constants larger than this are not folded at import (weights transformed by a node stay calls)
FOLD_LIMIT = 1 << 20


class OnnxImportError(RelayError):
    """An ONNX model relaygraph cannot import: malformed, failing the checker, or out of scope."""


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def load_model(model_or_path) -> onnx.ModelProto:
    """A checked ModelProto from a path, bytes or a ModelProto (external data loaded)."""
    if isinstance(model_or_path, onnx.ModelProto):
        model, base = model_or_path, None
    elif isinstance(model_or_path, (bytes, bytearray)):
        model, base = _parse(bytes(model_or_path), "the given bytes"), None
    elif isinstance(model_or_path, (str, os.PathLike)):
        path = Path(model_or_path)
        if not path.is_file():
            raise OnnxImportError(f"{path}: no such file")
        model, base = _parse(path.read_bytes(), str(path)), path.parent
    else:
        raise OnnxImportError(f"from_onnx takes an onnx.ModelProto, bytes or a path, "
                              f"not {type(model_or_path).__name__}")
    if base is not None:
        _load_external(model, base)
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise OnnxImportError(f"the model fails onnx.checker: {_message(exc)}") from None
    return model


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise OnnxImportError(f"{where}: empty file, not an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise OnnxImportError(f"{where}: not a valid ONNX model (malformed or truncated protobuf: "
                              f"{_message(exc)})") from None
    if not model.graph.node and not model.graph.output:
        raise OnnxImportError(f"{where}: not a valid ONNX model (no graph)")
    return model


def _load_external(model: onnx.ModelProto, base: Path) -> None:
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    for tensor in model.graph.initializer:
        if uses_external_data(tensor):
            info = {e.key: e.value for e in tensor.external_data}
            file = base / info.get("location", "")
            if not file.is_file():
                raise OnnxImportError(f"missing external-data file {file} (for initializer "
                                      f"{tensor.name!r})")
    try:
        load_external_data_for_model(model, str(base))
    except Exception as exc:  # noqa: BLE001 - onnx reports bad offsets/lengths variously
        raise OnnxImportError(f"cannot read the model's external data: {_message(exc)}") from None


def onnx_dtype(elem_type: int) -> str:
    """The Relay dtype of an ONNX tensor element type."""
    try:
        np_dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        np_dtype = None
    name = np.dtype(np_dtype).name if np_dtype is not None else None
    if name not in DTYPES:
        label = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "undefined"
        raise OnnxImportError(f"ONNX element type {label} has no Relay dtype")
    return name


def _opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


class Importer:
    """The state of one import: ONNX value names -> Relay expressions, and each one's type."""

    def __init__(self, opset: int, dtype: str) -> None:
        self.opset = opset
        self.dtype = dtype
        self.values: dict[str, Expr] = {}
        self.types: dict[Expr, object] = {}
        self.known: dict[Expr, np.ndarray] = {}  # values of unfrozen initializers (for static use)
        self.symvals: dict[Expr, np.ndarray] = {}  # int tensors computed from symbolic shapes
        self.dim_sources: dict = {}  # symbolic dim -> [(expr, axis)] of values that have it
        self.node: onnx.NodeProto | None = None
        self.n_outputs = 1
        self._builders: dict = {}
        self.given: dict = {}  # the input shapes the caller gave (for error messages)

    # -- building -------------------------------------------------------------------------------
    def const(self, value, dtype: str | None = None) -> Constant:
        """A Relay constant of ``value`` (typed)."""
        arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        c = Constant(arr)
        self.types[c] = TensorType(arr.shape, arr.dtype.name)
        return c

    def call(self, name: str, *args: Expr, **attrs) -> Expr:
        """``name(*args, **attrs)`` with its type computed; folded when every input is constant."""
        built = self._builders.get(name)
        if built is None:
            opdef = get_op(name)
            built = self._builders[name] = (builder(opdef), opdef)
        build, opdef = built
        expr = build(*args, **attrs)
        try:
            ty = opdef.type_relation([self.type(a) for a in args], expr.attrs)
        except Exception as exc:  # noqa: BLE001 - the relation's ShapeError / RelayTypeError
            hint = ""
            if self.given:
                shown = ", ".join(f"{k}={v}" for k, v in self.given.items())
                hint = f" (the input shapes given, {shown}, contradict the model here)"
            raise self.error(f"{name} does not type-check: {_message(exc)}{hint}") from None
        if all(_is_const(a) for a in args) and _small(ty):
            try:
                value = call_kernel(expr.op, [_const_value(a) for a in args], expr.attrs)
            except RelayError as exc:
                raise self.error(f"folding the constant {name}: {_message(exc)}") from None
            if isinstance(value, tuple):
                return Tuple([self.const(v) for v in value])
            return self.const(np.asarray(value, dtype=ty.dtype))
        self.types[expr] = ty
        return expr

    def item(self, tup: Expr, i: int) -> Expr:
        """Field ``i`` of a tuple-valued expression."""
        if isinstance(tup, Tuple):
            return tup.fields[i]
        out = TupleGetItem(tup, i)
        self.types[out] = self.types[tup].fields[i]
        return out

    def type(self, expr: Expr):
        """The type of an expression this import built."""
        try:
            return self.types[expr]
        except KeyError:
            if isinstance(expr, Tuple):
                t = self.types[expr] = TupleType([self.type(f) for f in expr.fields])
                return t
            raise

    def shape(self, expr: Expr) -> tuple:
        """Its shape (dims are ints, symbols or ``Any``)."""
        return tuple(self.type(expr).shape)

    def dtype_of(self, expr: Expr) -> str:
        """Its dtype."""
        return self.type(expr).dtype

    def rank(self, expr: Expr) -> int:
        """Its rank."""
        return len(self.type(expr).shape)

    def value(self, expr: Expr | None) -> np.ndarray | None:
        """The value of ``expr`` if it is known at import (a constant or an initializer)."""
        if expr is None:
            return None
        if isinstance(expr, Constant):
            return expr.data
        return self.known.get(expr)

    def static(self, expr: Expr, what: str) -> np.ndarray:
        """The value of an input that must be known at import (an axes or shape input)."""
        v = self.value(expr)
        if v is None:
            raise self.error(f"its {what} input must be a constant or an initializer (it is computed "
                             "at run time; dynamic shapes are not supported)")
        return v

    def dims_value(self, expr: Expr) -> np.ndarray | None:
        """An int tensor's value as an object array of dims (ints or symbols), if known."""
        v = self.value(expr)
        if v is not None:
            return np.asarray(v).astype(object)
        return self.symvals.get(expr)

    def note_dims(self, expr: Expr) -> None:
        """Remember which axes of ``expr`` have symbolic dims (a slice to such a size uses it)."""
        for axis, d in enumerate(self.shape(expr)):
            if not isinstance(d, int) and d is not Any:
                seen = self.dim_sources.setdefault(d, [])
                if (expr, axis) not in seen:
                    seen.append((expr, axis))

    def error(self, message: str) -> OnnxImportError:
        """An import error naming the node being converted, its op type and the opset."""
        node = self.node
        if node is None:
            return OnnxImportError(message)
        name = f" {node.name!r}" if node.name else ""
        return OnnxImportError(f"node{name} ({node.op_type}, opset {self.opset}): {message}")


def _is_const(e) -> bool:
    if isinstance(e, Tuple):
        return all(isinstance(f, Constant) for f in e.fields)
    return isinstance(e, Constant)


def _const_value(e):
    return e.data if isinstance(e, Constant) else tuple(f.data for f in e.fields)


def _small(ty) -> bool:
    if not isinstance(ty, TensorType):
        return isinstance(ty, TupleType) and all(_small(f) for f in ty.fields)
    size = 1
    for d in ty.shape:
        if not isinstance(d, int):
            return False
        size *= d
    return size <= FOLD_LIMIT


def _input_type(vi: onnx.ValueInfoProto, override, dtype: str) -> TensorType:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise OnnxImportError(f"input {vi.name!r} is not a tensor (sequences, maps and optionals "
                              "are not supported)")
    dt = onnx_dtype(t.elem_type) if t.elem_type else dtype
    declared = None
    if t.HasField("shape"):
        declared = []
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                declared.append(int(d.dim_value))
            elif d.dim_param:
                declared.append(sym(_dim_name(d.dim_param)))
            else:
                declared.append(Any)
    if override is None:
        if declared is None:
            raise OnnxImportError(f"input {vi.name!r} has no shape in the model; give one with "
                                  f"shape={{{vi.name!r}: (...)}} (--shape {vi.name}=...)")
        return TensorType(tuple(declared), dt)
    given = tuple(int(d) for d in override)
    if declared is not None:
        fixed = [(i, d) for i, d in enumerate(declared) if isinstance(d, int)]
        if len(given) != len(declared) or any(given[i] != d for i, d in fixed):
            shown = ", ".join(str(d) if d is not Any else "?" for d in declared)
            raise OnnxImportError(f"the shape given for input {vi.name!r} {given} contradicts the "
                                  f"model, which declares ({shown})")
    return TensorType(given, dt)


def _dim_name(param: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in param)
    return out if out and not out[0].isdigit() else "d_" + out


def _infers(model: onnx.ModelProto) -> str | None:
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as exc:
        return _message(exc)
    return None


def _check_shapes(model: onnx.ModelProto, types: Mapping[str, TensorType], given) -> None:
    """Run onnx's shape inference on the model with the input shapes given: a contradiction is
    an error here rather than a failure deep in a converter."""
    if not given:
        return
    fixed = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in fixed.graph.input:
        t = types.get(vi.name)
        if vi.name not in given or not all(isinstance(d, int) for d in t.shape):
            continue
        shape = vi.type.tensor_type.shape
        del shape.dim[:]
        for d in t.shape:
            shape.dim.add().dim_value = d
    problem = _infers(fixed)
    # a model that onnx's strict inference rejects on its own is not contradicted by the shapes
    if problem is not None and _infers(model) is None:
        raise OnnxImportError(f"the input shapes given contradict the model: {problem}")


def from_onnx(model_or_path, shape: Mapping[str, tuple] | None = None, dtype: str = "float32",
              freeze_params: bool = True) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Import an ONNX model as (IRModule with @main, params), like TVM's relay.frontend.from_onnx."""
    from .onnx_ops import convert_node

    model = load_model(model_or_path)
    opset = _opset(model)
    graph = model.graph
    shape = dict(shape or {})
    inits = {t.name: t for t in graph.initializer}
    real_inputs = [vi for vi in graph.input if vi.name not in inits]
    unknown = sorted(set(shape) - {vi.name for vi in real_inputs})
    if unknown:
        names = ", ".join(vi.name for vi in real_inputs) or "none"
        raise OnnxImportError(f"shape given for {', '.join(map(repr, unknown))}, which the model "
                              f"has no input of (its inputs: {names})")
    imp = Importer(opset, dtype)
    imp.given = {k: tuple(v) for k, v in shape.items()}
    params: dict[str, np.ndarray] = {}
    inputs: list[Var] = []
    input_types = {}
    for vi in real_inputs:
        t = input_types[vi.name] = _input_type(vi, shape.get(vi.name), dtype)
        v = Var(vi.name, t)
        imp.types[v] = t
        imp.values[vi.name] = v
        imp.note_dims(v)
        inputs.append(v)
    _check_shapes(model, input_types, shape)
    init_vars: dict[Var, str] = {}
    for name, tensor in inits.items():
        arr = numpy_helper.to_array(tensor)
        if arr.dtype.name not in DTYPES:
            raise OnnxImportError(f"initializer {name!r} has element type {arr.dtype}, which has no "
                                  "Relay dtype")
        params[name] = arr
        if freeze_params:
            imp.values[name] = imp.const(arr)
        else:
            v = Var(name, TensorType(arr.shape, arr.dtype.name))
            imp.types[v] = v.type_annotation
            imp.known[v] = arr
            imp.values[name] = v
            init_vars[v] = name
    for node in graph.node:
        imp.node = node
        convert_node(imp, node)
    imp.node = None
    outs = []
    for vi in graph.output:
        if vi.name not in imp.values:
            raise OnnxImportError(f"graph output {vi.name!r} is produced by no node")
        outs.append(imp.values[vi.name])
    body = outs[0] if len(outs) == 1 else Tuple(outs)
    if not freeze_params:
        from ..ir import free_vars

        used = set(free_vars(body))
        inputs += [v for v in init_vars if v in used]
    return IRModule.from_expr(Function(inputs, body)), params


def close_names(name: str, names) -> list[str]:
    """Up to five of ``names`` that look like ``name`` (for 'did you mean')."""
    return difflib.get_close_matches(name, sorted(names), n=5, cutoff=0.5)


__all__ += ["close_names", "onnx_dtype"]
