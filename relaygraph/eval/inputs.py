"""Random inputs for a program, each from the domain its uses want (the one sampler).

A parameter's domain comes from how it is used: an input of an op gets the op table's domain for
that input (``nn.batch_norm``'s ``moving_var`` positive, ``take``'s indices within the data's
axis, ``log`` positive, ...). Domains flow back through what only moves values (reshape,
transpose, slices, concatenation, cast, tuples, lets, calls of functions), and meet where one
value has several uses. A parameter with no such use is standard normal (small ints, booleans).
The walk is a work list over the program's nodes: no recursion on the program's depth.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Function, GlobalVar, Let, Op, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order
from ..ir.types import TensorType, TupleType, format_type
from ..ops.domains import Domain, call_domains, carries_values, draw
from ..ops.registry import lookup

__all__ = ["input_domains", "random_inputs"]


def _module(target, entry: str) -> tuple[IRModule | None, Function]:
    if isinstance(target, IRModule):
        if entry not in target:
            raise RelayError(f"the module has no @{entry} to draw inputs for")
        return target, target[entry]
    if isinstance(target, Function):
        return None, target
    raise RelayError(f"random inputs are drawn for a function or a module, not a {type(target).__name__}")


def _typed(mod: IRModule | None, func: Function) -> IRModule | None:
    """A typed module holding ``func`` (for the shapes that bound indices), or None."""
    from ..ty import infer_type

    try:
        if mod is None:
            mod = IRModule.from_expr(func)
        return mod if mod.checked_types is not None else infer_type(mod)
    except RelayError:
        return None


def input_domains(target, entry: str = "main") -> dict[str, Domain]:
    """The domain each parameter of ``target`` (a function, or a module's ``entry``) wants, by name."""
    mod, func = _module(target, entry)
    typed = _typed(mod, func)
    functions = [func] + ([f for gv, f in mod if f is not func] if mod is not None else [])

    # one pass over every node: who feeds whom
    let_value: dict = {}
    call_sites: dict = defaultdict(list)  # a Function -> the argument lists it is called with
    global_funcs = {gv.name_hint: f for gv, f in mod} if mod is not None else {}
    wants: dict = {}
    work: list = []

    def want(node, dom: Domain) -> None:
        old = wants.get(node)
        new = dom if old is None else old.meet(dom)
        if new != old:
            wants[node] = new
            work.append(node)

    def type_of(node):
        from ..ty.checked import known_type

        t = known_type(node, typed) if typed is not None else None
        return t if t is not None else getattr(node, "type_annotation", None)

    def callee_of(call: Call):
        """The function a call runs, when it is known (a literal, a let-bound one, a global)."""
        callee = call.op
        if isinstance(callee, Var):
            callee = let_value.get(callee)
        elif isinstance(callee, GlobalVar):
            callee = global_funcs.get(callee.name_hint)
        return callee if isinstance(callee, Function) else None

    calls = []
    for root in functions:
        for node in iter_post_order(root):
            if isinstance(node, Let):
                let_value[node.var] = node.value
            elif isinstance(node, Call):
                calls.append(node)
    for node in calls:
        callee = callee_of(node)
        if callee is not None:
            call_sites[callee].append(node.args)
    for node in calls:
        opdef = lookup(node.op.name) if isinstance(node.op, Op) else None
        if opdef is None:
            continue
        arg_types = [type_of(a) for a in node.args]
        if any(t is None for t in arg_types):
            arg_types = [t if t is not None else TupleType([]) for t in arg_types]
        for arg, dom in zip(node.args, call_domains(opdef, arg_types, node.attrs), strict=True):
            if dom != Domain():
                want(arg, dom)

    param_of = {p: (f, i) for f in call_sites for i, p in enumerate(f.params)}
    while work:
        node = work.pop()
        dom = wants[node]
        if isinstance(node, Var):
            if node in let_value:
                want(let_value[node], dom)
            elif node in param_of:
                f, i = param_of[node]
                for args in call_sites[f]:
                    if i < len(args):
                        want(args[i], dom)
        elif isinstance(node, Call) and isinstance(node.op, Op):
            opdef = lookup(node.op.name)
            if opdef is not None:
                for i, arg in enumerate(node.args):
                    if carries_values(opdef, i):
                        want(arg, dom)
        elif isinstance(node, Call) and callee_of(node) is not None:
            want(callee_of(node).body, dom)
        elif isinstance(node, Tuple):
            for f in node.fields:
                want(f, dom)
        elif isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Tuple):
            want(node.tuple_value.fields[node.index], dom)
        elif isinstance(node, TupleGetItem):
            want(node.tuple_value, dom)  # a split's part: its data
        elif isinstance(node, Let):
            want(node.body, dom)
    return {p.name_hint: wants.get(p, Domain()) for p in func.params}


def random_inputs(target, seed: int = 0, entry: str = "main", skip=(), flags: bool = False) -> list:
    """Seeded random values for the parameters of ``target`` (a function, or a module's
    ``entry``), each from the domain its uses want; parameters named in ``skip`` are left out.

    ``flags``: an integer parameter no use constrains gets 0 or 1 (masks and flags, as in
    ``(1 - mask) * -3.4e38``, which other integers overflow to infinities)."""
    mod, func = _module(target, entry)
    domains = input_domains(mod if mod is not None else func, entry)
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        if p.name_hint in skip:
            continue
        t = p.type_annotation
        if not _concrete(t):
            raise RelayError(f"cannot draw inputs for %{p.name_hint}: its type is "
                             f"{format_type(t) if t is not None else 'not annotated'} "
                             f"(a tensor type with a known shape is needed)")
        dom = domains[p.name_hint]
        if dom.empty:
            raise RelayError(f"no value of %{p.name_hint} satisfies all its uses (they want "
                             f"{dom.describe()})")
        if flags and dom == Domain() and isinstance(t, TensorType) and t.dtype.startswith(("int", "uint")):
            out.append(rng.integers(0, 2, size=tuple(int(d) for d in t.shape)).astype(t.dtype))
        else:
            out.append(draw(t, dom, rng))
    return out


def _concrete(t) -> bool:
    if isinstance(t, TupleType):
        return all(_concrete(f) for f in t.fields)
    return isinstance(t, TensorType) and t.is_concrete
