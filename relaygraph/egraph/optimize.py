"""``rg.optimize``: saturate a program with rule sets, extract the best program under a cost model,
and check it against the original.

Weights given in ``params`` are bound into the program as constants (as a compiler does), so a
rewrite that only reshuffles weights — concatenating the Q/K/V weights of a BERT layer into one
dense — costs nothing at run time: subcomputations whose inputs are all constants are given
zero cost during extraction and folded by FoldConstant afterwards.

Every function of a module goes through its own e-graph (or only the ones named in
``functions``); the other globals, type definitions and module attributes are kept. A function
the e-graph bridge cannot encode (a ``match``, refs, ...) is kept unchanged with a note, unless it
was asked for by name. By default each fused op the extraction picked is written as a call of a
``Primitive=1`` function holding the op's parts (standard Relay, as TVM's FuseOps makes it);
``keep_fused_ops=True`` keeps the compact ``fused.*`` calls.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RelayError
from ..ir.dag_export import program_stats
from ..ir.expr import Constant, Expr, Function, Var
from ..ir.module import IRModule
from ..ir.traversal import substitute
from ..ir.types import TensorType
from ..ops.fused_ops import definition as fused_definition
from ..validate import optimize_options

__all__ = ["optimize", "OptimizeResult", "default_rule_files", "bind_params", "random_inputs",
           "compare_times", "median_times", "standard_relay"]

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
DEFAULT_RULES = ("algebraic.rules", "fusion.rules")


def default_rule_files() -> list[Path]:
    """The rule files ``optimize`` uses when none are given."""
    return [RULES_DIR / name for name in DEFAULT_RULES]


@dataclass
class OptimizeResult:
    """What optimize did: the program, its cost before and after, saturation and checking."""

    module: IRModule
    original: IRModule
    cost_model: str
    extractor: str
    cost_before: float
    cost_after: float
    saturation: Any
    extraction_seconds: float
    optimal: bool | None
    nodes_before: int
    nodes_after: int
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    seconds_before: float | None = None
    seconds_after: float | None = None
    check_passed: bool | None = None
    total_seconds: float = 0.0
    functions: dict[str, str] = field(default_factory=dict)  # name -> "rewritten" or why it was kept
    saturations: dict[str, Any] = field(default_factory=dict)  # name -> its saturation report
    keep_fused_ops: bool = False
    fused_calls: int = 0  # calls of fused ops the extraction picked (Primitive groups unless kept)

    @property
    def speedup(self) -> float | None:
        """Measured numpy time of the original over the optimized program."""
        if not self.seconds_before or not self.seconds_after:
            return None
        return self.seconds_before / self.seconds_after

    def summary(self) -> str:
        """The short table the command line prints."""
        sats = self.saturations or {"main": self.saturation}
        prefix = (lambda name: f"@{name}: ") if len(sats) > 1 else (lambda name: "")
        rows = []
        if len(self.functions) > 1 or any(v != "rewritten" for v in self.functions.values()):
            rows.append(("functions", "; ".join(f"@{k} {v}" for k, v in self.functions.items())))
        rows += [
            ("program nodes", f"{self.nodes_before} -> {self.nodes_after}"),
            ("e-graph", "; ".join(f"{prefix(k)}{sat.nodes} e-nodes, {sat.classes} e-classes"
                                  for k, sat in sats.items())),
            ("saturation", "; ".join(f"{prefix(k)}{len(sat.iterations)} iterations, stopped: "
                                     f"{sat.stop_reason} ({sat.seconds:.2f} s)" for k, sat in sats.items())),
            (f"cost ({self.cost_model})", f"{self.cost_before:.6g} -> {self.cost_after:.6g} "
                                          f"({_ratio(self.cost_before, self.cost_after)})"),
            ("extractor", f"{self.extractor}, {self.extraction_seconds:.2f} s"
                          + ("" if self.optimal is None else
                             f", {'proven optimal' if self.optimal else 'not proven optimal'}")),
        ]
        if self.max_abs_error is not None:
            verdict = "ok" if self.check_passed else "OUTPUTS DIFFER"
            rows.append(("check", f"max abs error {self.max_abs_error:.3g}, max rel error "
                                  f"{self.max_rel_error:.3g} ({verdict})"))
        if self.speedup is not None:
            rows.append(("numpy time", f"{self.seconds_before * 1e3:.2f} ms -> "
                                       f"{self.seconds_after * 1e3:.2f} ms (speedup "
                                       f"{self.speedup:.2f}x, median)"))
        changed = sorted(set(self.ops_before) | set(self.ops_after))
        diff = [f"{op} {self.ops_before.get(op, 0)}->{self.ops_after.get(op, 0)}" for op in changed
                if self.ops_before.get(op, 0) != self.ops_after.get(op, 0)]
        rows.append(("ops changed", ", ".join(diff) or "none"))
        if self.fused_calls:
            rows.append(("written as", f"fused.* ops kept ({self.fused_calls} calls)" if self.keep_fused_ops
                         else f"standard Relay: {self.fused_calls} fused op(s) as Primitive=1 functions"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def to_json(self) -> dict:
        """A JSON-ready report."""
        return {
            "cost_model": self.cost_model, "extractor": self.extractor,
            "cost_before": self.cost_before, "cost_after": self.cost_after,
            "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
            "ops_before": self.ops_before, "ops_after": self.ops_after,
            "saturation": _saturation_json(self.saturation),
            "extraction_seconds": self.extraction_seconds, "optimal": self.optimal,
            "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
            "seconds_before": self.seconds_before, "seconds_after": self.seconds_after,
            "speedup": self.speedup, "check_passed": self.check_passed,
            "total_seconds": self.total_seconds,
            "functions": dict(self.functions),
            "saturations": {name: _saturation_json(rep) for name, rep in self.saturations.items()},
            "keep_fused_ops": self.keep_fused_ops, "fused_calls": self.fused_calls,
        }

    def save_report(self, path: str | Path) -> None:
        """Write ``to_json()`` to a file."""
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _saturation_json(sat) -> dict:
    return {"stop_reason": sat.stop_reason, "seconds": sat.seconds,
            "iterations": [{"nodes": it.nodes, "classes": it.classes, "seconds": it.seconds}
                           for it in sat.iterations],
            "matches": dict(sat.matches)}


def _ratio(before: float, after: float) -> str:
    if before <= 0:
        return "n/a"
    return f"{(1 - after / before) * 100:+.1f}% saved" if after <= before else \
        f"{(after / before - 1) * 100:.1f}% more"


def bind_params(mod: IRModule, params: dict[str, np.ndarray], entry: str = "main") -> IRModule:
    """``mod`` with the named parameters of ``entry`` replaced by constants."""
    func = mod[entry]
    unknown = set(params) - {p.name_hint for p in func.params}
    if unknown:
        raise RelayError(f"bind_params: @{entry} has no parameter(s) {sorted(unknown)}")
    mapping: dict[Var, Expr] = {}
    keep = []
    for p in func.params:
        if p.name_hint in params:
            mapping[p] = Constant(np.asarray(params[p.name_hint]))
        else:
            keep.append(p)
    out = mod.copy()
    out.update_func(entry, Function(keep, substitute(func.body, mapping), func.ret_type,
                                    func.type_params, func.attrs))
    return out


def random_inputs(func: Function, seed: int = 0) -> list[np.ndarray]:
    """Seeded random values for a function's parameters (standard normal floats, small ints)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        t = p.type_annotation
        if not isinstance(t, TensorType) or not t.is_concrete:
            raise RelayError(f"cannot draw inputs for %{p.name_hint}: its type is {t} "
                             f"(a concrete tensor type is needed)")
        if t.dtype.startswith("float"):
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
        elif t.dtype == "bool":
            out.append(rng.random(t.shape) < 0.5)
        else:
            out.append(rng.integers(0, 4, size=t.shape).astype(t.dtype))
    return out


def _op_histogram(funcs: list[Function]) -> dict[str, int]:
    total: Counter = Counter()
    for func in funcs:
        total.update(program_stats(func)["ops"])
    return dict(total)


def _constant_discount(graph) -> None:
    """Zero the cost of every op node whose inputs are all constant classes: FoldConstant
    computes them at compile time. (Nodes are named as the Relay e-graph document names them:
    ``Constant``, ``Tuple``, ``TupleGetItem`` and op names.)"""
    from ..ops.registry import lookup

    def foldable(op: str) -> bool:
        if op in ("Tuple", "TupleGetItem"):
            return True
        opdef = lookup(op)
        return opdef is not None and not opdef.extra.get("stateful")

    const = [False] * graph.num_classes
    changed = True
    while changed:
        changed = False
        for i, op in enumerate(graph.ops):
            k = graph.classes[i]
            if const[k] or not graph.usable(i):
                continue
            kids = graph.child_classes[i]
            if op == "Constant" or (kids and foldable(op) and all(const[c] for c in kids)):
                const[k] = changed = True
    for i, op in enumerate(graph.ops):
        kids = graph.child_classes[i]
        if kids and foldable(op) and all(const[c] for c in kids):
            graph.costs[i] = 0.0


def _program_cost(mod: IRModule, name: str, cost: str) -> float:
    """The DAG cost of one function of a module under a cost model (the same costing as
    extraction; the module gives the types of the globals it calls)."""
    from .bridge import RelayEGraph
    from .extract import check, tree

    eg = RelayEGraph(mod, entry=name)
    graph = eg.extraction_graph(cost)
    _constant_discount(graph)
    return check(graph, tree(graph).choice)


def _load_rules(rules) -> list:
    from ..rewrite import load_rules

    if rules is None:
        rules = default_rule_files()
    if isinstance(rules, (str, Path)):
        rules = [rules]
    out: list = []
    for item in rules:
        if isinstance(item, (str, Path)):
            path = Path(item)
            if not path.exists():
                raise RelayError(f"no such rule file: {path}")
            out.extend(load_rules(path))
        else:
            out.append(item)
    return out


def compare_times(a: IRModule, b: IRModule, inputs: list, runs: int, budget: float = 0.0,
                  max_runs: int = 500, entry: str = "main") -> tuple[float, float, Any, Any]:
    """Median seconds of two programs on the same inputs, and their values. The runs alternate,
    so that load on the machine hits both alike: at least ``runs`` of each, and more (up to
    ``max_runs``) until ``budget`` seconds have passed, so that small programs get a steady median."""
    (time_a, time_b), (value_a, value_b) = median_times([a, b], inputs, runs, budget, max_runs, entry)
    return time_a, time_b, value_a, value_b


def median_times(mods: list[IRModule], inputs: list, runs: int, budget: float = 0.0,
                 max_runs: int = 500, entry: str = "main") -> tuple[list[float], list]:
    """Median seconds of several programs on the same inputs (runs alternated, as
    ``compare_times``), and their values."""
    from ..eval import evaluate

    values = [evaluate(m, *inputs, entry=entry) for m in mods]
    times: list[list[float]] = [[] for _ in mods]
    start_all = time.perf_counter()
    while len(times[0]) < runs or (len(times[0]) < max_runs and time.perf_counter() - start_all < budget):
        for mod, out in zip(mods, times, strict=True):
            start = time.perf_counter()
            evaluate(mod, *inputs, entry=entry)
            out.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times], values


def standard_relay(mod: IRModule, functions=None) -> IRModule:
    """``mod`` (typed) with every call of a fused op in ``functions`` (default: all) written as a
    call of a ``Primitive=1`` function holding the op's parts, then type-checked."""
    from ..passes import InferType
    from ..ty import infer_type
    from .readback import primitive_functions

    typed = mod if mod.checked_types is not None else infer_type(mod)
    out = typed.copy()
    for gv, func in typed:
        if functions is None or gv.name_hint in functions:
            out.update_func(gv.name_hint, primitive_functions(func, typed.checked_types))
    return InferType()(out)


def _max_errors(a, b) -> tuple[float, float]:
    if isinstance(a, tuple):
        pairs = [_max_errors(x, y) for x, y in zip(a, b, strict=True)]
        return max(p[0] for p in pairs), max(p[1] for p in pairs)
    a, b = np.asarray(a, dtype="float64"), np.asarray(b, dtype="float64")
    if a.shape != b.shape:
        return float("inf"), float("inf")
    diff = np.abs(a - b)
    abs_err = float(diff.max()) if diff.size else 0.0
    rel_err = float((diff / np.maximum(np.abs(a), 1e-6)).max()) if diff.size else 0.0
    return abs_err, rel_err


def optimize(mod: IRModule | Function, rules=None, cost: str = "latency",
             extractor: str = "ilp", node_limit: int | None = 50_000,
             iter_limit: int | None = 30, time_limit: float | None = 60.0, check: bool = True,
             params: dict[str, np.ndarray] | None = None, seed: int = 0, repeats: int = 5,
             rtol: float = 1e-3, atol: float = 1e-4, ilp_time_limit: float = 30.0,
             progress: bool = False, timing_budget: float = 1.0, functions=None,
             entry: str = "main", keep_fused_ops: bool = False) -> OptimizeResult:
    """Rewrite ``mod`` with equality saturation and return the best program under ``cost``.

    Each function (or each one named in ``functions``) is saturated and extracted on its own, under
    the node, iteration and time limits; the rest of the module is kept. ``params`` bind weights of
    ``entry``. With ``check``, both modules run ``entry`` on seeded random inputs: their outputs
    are compared and their numpy times are the medians of at least ``repeats`` alternated runs
    each, more for small programs until ``timing_budget`` seconds have passed.
    """
    from ..passes import FoldConstant, InferType
    from ..ty import infer_type
    from . import extract as ex
    from .saturation import saturate

    optimize_options(cost=cost, extractor=extractor, node_limit=node_limit, iter_limit=iter_limit,
                     time_limit=time_limit, ilp_time_limit=ilp_time_limit)
    rule_objects = _load_rules(rules)  # a bad rule file is reported before any work
    started = time.perf_counter()
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if (params or check) and entry not in mod:
        raise RelayError(f"the module has no @{entry} to check or bind weights in; name its entry "
                         f"function with entry=... (functions: "
                         f"{', '.join('@' + gv.name_hint for gv, _ in mod)})")
    if params:
        mod = bind_params(mod, params, entry)
    mod = infer_type(mod)
    extractors = {"tree": ex.tree, "greedy-dag": ex.greedy_dag,
                  "ilp": lambda g: ex.ilp(g, time_limit=ilp_time_limit)}
    names = _function_names(mod, functions)

    status: dict[str, str] = {}
    rewritten: dict[str, Function] = {}
    reports: dict[str, Any] = {}
    extraction_seconds, optimal = 0.0, True
    for name in names:
        egraph = _load(mod, name, asked=functions is not None, status=status)
        if egraph is None:
            continue
        reports[name] = saturate(egraph, rule_objects, node_limit=node_limit, iter_limit=iter_limit,
                                 time_limit=time_limit, progress=progress)
        graph = egraph.extraction_graph(cost)
        _constant_discount(graph)
        t0 = time.perf_counter()
        result = extractors[extractor](graph)
        extraction_seconds += time.perf_counter() - t0
        proven = getattr(result, "optimal", None)
        optimal = None if proven is None or optimal is None else optimal and proven
        rewritten[name] = egraph.read_back(graph, result.choice)
        status[name] = "rewritten"
    if not rewritten:
        raise RelayError("no function of the module can go through the e-graph: "
                         + "; ".join(f"@{k} {v}" for k, v in status.items()))

    out = mod.copy()
    for name, func in rewritten.items():
        out.update_func(name, func)
    out = FoldConstant()(InferType()(out))
    for gv, func in mod:  # the functions not rewritten stay exactly as they were
        if gv.name_hint not in rewritten:
            out.update_func(gv.name_hint, func)
    compact = InferType()(out)
    optimized = compact if keep_fused_ops else standard_relay(compact, rewritten)

    before = [mod[name] for name in rewritten]
    after = [compact[name] for name in rewritten]
    ops_after = _op_histogram(after)
    res = OptimizeResult(
        module=optimized, original=mod, cost_model=cost if isinstance(cost, str) else "custom",
        extractor=extractor, cost_before=sum(_program_cost(mod, name, cost) for name in rewritten),
        cost_after=sum(_program_cost(compact, name, cost) for name in rewritten),
        saturation=reports.get(entry) or next(iter(reports.values())),
        extraction_seconds=extraction_seconds, optimal=optimal,
        nodes_before=sum(program_stats(f)["nodes"] for f in before),
        nodes_after=sum(program_stats(f)["nodes"] for f in after),
        ops_before=_op_histogram(before), ops_after=ops_after,
        functions={gv.name_hint: status.get(gv.name_hint, "not asked for") for gv, _ in mod},
        saturations=reports, keep_fused_ops=keep_fused_ops,
        fused_calls=sum(n for op, n in ops_after.items() if fused_definition(op) is not None))
    if check:
        inputs = random_inputs(mod[entry], seed)
        res.seconds_before, res.seconds_after, want, got = compare_times(
            mod, optimized, inputs, repeats, budget=timing_budget, entry=entry)
        res.max_abs_error, res.max_rel_error = _max_errors(want, got)
        res.check_passed = _close(want, got, rtol, atol)
    res.total_seconds = time.perf_counter() - started
    return res


def _function_names(mod: IRModule, functions) -> list[str]:
    """The functions to rewrite: all of the module's, or the named ones (which must exist)."""
    if functions is None:
        return [gv.name_hint for gv, _ in mod]
    if isinstance(functions, str):
        functions = [functions]
    names = [f[1:] if f.startswith("@") else f for f in functions]
    missing = [n for n in names if n not in mod]
    if missing:
        raise RelayError(f"optimize: the module has no function(s) {', '.join('@' + n for n in missing)} "
                         f"(functions: {', '.join('@' + gv.name_hint for gv, _ in mod)})")
    if not names:
        raise RelayError("optimize: functions=[] names no function to rewrite")
    return list(dict.fromkeys(names))


def _load(mod: IRModule, name: str, asked: bool, status: dict):
    """The e-graph of one function, or None (with the reason in ``status``) when the bridge cannot
    encode it and it was not asked for by name."""
    from .bridge import RelayEGraph

    try:
        return RelayEGraph(mod, entry=name)
    except NotImplementedError as exc:
        if asked:
            raise RelayError(f"@{name} cannot go through the e-graph: {exc}") from None
        status[name] = f"kept unchanged ({exc})"
        return None


def _close(a, b, rtol: float, atol: float) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_close(x, y, rtol, atol)
                                                                 for x, y in zip(a, b, strict=True))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol))
