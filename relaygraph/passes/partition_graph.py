"""PartitionGraph: each annotated region becomes a global function for its compiler (BYOC).

TVM's steps: a compiler_end of a tuple becomes a tuple of ends, ``default`` annotations go, and
each region becomes ``def @tvmgen_<mod_name>_<target>_<func>_<id>(%<target>_<id>_i<k>, ...)`` with
attrs ``Compiler``, ``global_symbol``, ``Primitive=1`` and ``Inline=1``, called where the region
was (a tuple of outputs and projections when it has several). Constant inputs are bound into the
function (``bind_constants``). relaygraph has no external codegen: the interpreter and executor
run these functions as ordinary Relay.
"""

from __future__ import annotations

import re

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import substitute
from ._walk import rebuild
from .annotate_target import BEGIN, DEFAULT_TARGET, END, compiler_end, compiler_of, is_annotation
from .annotated_regions import Region, RegionSet, region_children
from .infer import InferType
from .infra import PassContext, Sequential, module_pass

__all__ = ["PartitionGraph", "partition_graph"]


def _kids(node):
    return node.children()


def _map_functions(mod: IRModule, make) -> IRModule:
    for gv, func in list(mod.functions.items()):
        memo: dict = {}
        body = rebuild(func.body, _kids, make, memo)
        mod.functions[gv] = func.replace(body=body)
    return mod


def flatten_tuple_outputs(mod: IRModule) -> IRModule:
    """``compiler_end((a, b))`` becomes ``(compiler_end(a), compiler_end(b))``."""
    def make(node, results):
        new = node.with_children(results) if results else node
        if is_annotation(new, END) and isinstance(new.args[0], Tuple):
            target = compiler_of(new)
            return Tuple(tuple(compiler_end(f, target) for f in new.args[0].fields))
        return new

    return _map_functions(mod, make)


def remove_default_annotations(mod: IRModule) -> IRModule:
    """Drop the annotations of the ``default`` target (what no external compiler takes)."""
    def make(node, results):
        new = node.with_children(results) if results else node
        if is_annotation(new) and compiler_of(new) == DEFAULT_TARGET:
            return new.args[0]
        return new

    return _map_functions(mod, make)


def _strip(expr: Expr) -> Expr:
    while is_annotation(expr):
        expr = expr.args[0]
    return expr


def _is_constant(expr: Expr) -> bool:
    return isinstance(expr, Constant) or (
        isinstance(expr, Tuple) and all(isinstance(f, Constant) for f in expr.fields))


class _Partitioner:
    """Rewrites one function; regions become global functions added to ``mod``."""

    def __init__(self, mod: IRModule, typed: IRModule, func_name: str, mod_name: str,
                 bind_constants: bool) -> None:
        self.mod, self.typed = mod, typed
        self.func_name, self.mod_name, self.bind = func_name, mod_name, bind_constants
        self.inputs: dict[Region, dict[Expr, Var]] = {}
        self.args: dict[Region, list[tuple[Var, Expr]]] = {}
        self.outputs: dict[Region, dict[Expr, Expr]] = {}

    def run(self, func: Function) -> Function:
        self.regions = RegionSet(func.body, self.func_name)
        self.memo: dict = {}

        out_args: dict[Region, tuple] = {}

        def kids(node):
            if is_annotation(node, END):  # every output of a region is ready before its call
                region = self.regions.of_node(node)
                if region not in out_args:
                    outs = dict.fromkeys(o.args[0] for o in self.regions.outputs(region))
                    out_args[region] = tuple(outs)
                return (node.args[0], *out_args[region])
            return node.children()

        try:
            body = rebuild(func.body, kids, self.make, self.memo)
        except KeyError:
            raise RelayError(f"PartitionGraph: regions of @{self.func_name} depend on each other "
                             f"in a cycle (run MergeCompilerRegions on annotations AnnotateTarget "
                             f"made)") from None
        return func.replace(body=body)

    def make(self, node, results):
        if is_annotation(node, END):
            return self.output(node)
        kids = node.children()
        if not kids:
            return node
        new = list(results)
        for i in region_children(node):
            if is_annotation(kids[i], BEGIN):
                new[i] = self.input(node, i, kids[i])
        return node.with_children(tuple(new))

    def input(self, consumer, index: int, begin: Call) -> Var:
        region = self.regions.of_use(consumer, index)
        parent = _strip(begin.args[0])
        seen = self.inputs.setdefault(region, {})
        if parent in seen:
            return seen[parent]
        k = next(j for j, (use, _) in enumerate(region.ins) if use == (consumer, index))
        var = Var(f"{region.target}_{region.id}_i{k}", self.typed.type_of(begin.args[0]))
        seen[parent] = var
        self.args.setdefault(region, []).append((var, self.memo[begin.args[0]]))
        return var

    def output(self, end: Call) -> Expr:
        region = self.regions.of_node(end)
        if region not in self.outputs:
            self.create(region, end)
        return self.outputs[region][end.args[0]]

    def create(self, region: Region, end: Call) -> None:
        fields: list[Expr] = []
        order: dict[Expr, int] = {}
        for out in self.regions.outputs(region):
            if out.args[0] not in order:
                order[out.args[0]] = len(fields)
                fields.append(self.memo[out.args[0]])
        params, call_args, bound = [], [], {}
        for var, arg in self.args.get(region, []):
            params.append(var)
            if self.bind and _is_constant(arg):
                bound[var] = arg
            else:
                call_args.append(arg)
        body = fields[0] if len(fields) == 1 else Tuple(tuple(fields))
        if bound:
            body = substitute(body, bound)
            params = [p for p in params if p not in bound]
        name = f"{region.target}_{region.name}_{region.id}"
        symbol = re.sub(r"[^0-9A-Za-z_]", "_", f"tvmgen_{self.mod_name}_{name}")  # TVM's SanitizeName
        if symbol in self.mod:
            raise RelayError(f"PartitionGraph: the module already has a function @{symbol}")
        func = Function(params, body, attrs={
            "Compiler": region.target, "Inline": 1, "Primitive": 1, "global_symbol": symbol})
        gv = self.mod.add(GlobalVar(symbol), func)
        call = Call(gv, tuple(call_args))
        if len(fields) == 1:
            self.outputs[region] = {next(iter(order)): call}
        else:
            self.outputs[region] = {e: TupleGetItem(call, i) for e, i in order.items()}


def partition_graph(mod: IRModule, mod_name: str = "default", bind_constants: bool = True) -> IRModule:
    """The module with each compiler region moved into its own global function."""
    from ..ty import infer_type

    mod = remove_default_annotations(flatten_tuple_outputs(mod.copy()))
    typed = infer_type(mod)
    for gv, func in list(mod.functions.items()):
        if func.attrs.get("Compiler"):
            continue
        part = _Partitioner(mod, typed, gv.name_hint, mod_name, bind_constants)
        mod.functions[gv] = part.run(func)
    return mod


def PartitionGraph(mod_name: str = "default", bind_constants: bool = True):  # noqa: N802
    """Move each annotated region into a global function for its compiler (then InferType)."""
    if not isinstance(mod_name, str) or not mod_name:
        raise RelayError(f"PartitionGraph: mod_name must be a non-empty name, got {mod_name!r}")

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        return partition_graph(mod, mod_name, bind_constants)

    part = module_pass(run, opt_level=0, name="PartitionGraph")
    return Sequential([part, InferType()], name="PartitionGraph")
