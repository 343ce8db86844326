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
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RelayError
from ..eval.inputs import random_inputs
from ..ir.dag_export import program_stats
from ..ir.expr import Constant, Expr, Function, Var
from ..ir.module import IRModule
from ..ir.traversal import substitute
from ..ops.fused_ops import definition as fused_definition
from ..ops.layouts import changes_text, count_changes, layout_changes, layout_stats
from ..validate import optimize_options

__all__ = ["optimize", "OptimizeResult", "default_rule_files", "bind_params", "random_inputs",
           "compare_times", "median_times", "standard_relay"]

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
DEFAULT_RULES = ("algebraic.rules", "fusion.rules", "cpu.rules", "conv.rules", "synthesized.rules")


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
    # calls of ops that take layouts, by op and layouts ("nn.conv2d NHWC/HWIO", see layout_stats):
    # a layout rewrite changes these while the op counts stay the same
    layouts_before: dict[str, int] = field(default_factory=dict)
    layouts_after: dict[str, int] = field(default_factory=dict)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    seconds_before: float | None = None
    seconds_after: float | None = None
    # the median of the two programs' time ratios round by round (program_profile.paired_ratio)
    paired_speedup: float | None = None
    check_passed: bool | None = None
    total_seconds: float = 0.0
    functions: dict[str, str] = field(default_factory=dict)  # name -> "rewritten" or why it was kept
    saturations: dict[str, Any] = field(default_factory=dict)  # name -> its saturation report
    keep_fused_ops: bool = False
    fused_calls: int = 0  # calls of fused ops the extraction picked (Primitive groups unless kept)
    nonfinite_before: dict[str, int] = field(default_factory=dict)  # NaN / inf in the original's output
    values_compared: int | None = None  # output values compared (where the original is finite)
    differing_outputs: list[str] = field(default_factory=list)  # which outputs differ, and how
    suspect_rules: list[dict] = field(default_factory=list)  # rules that may have made the difference
    check_inputs: str = "random"  # "random", or "0/1 integers" when the first draw left nothing finite
    # with explain=True: per function, (e-graph, extraction graph, choice, the expression read back
    # per chosen class, rules, saturation report)
    explain_data: dict[str, tuple] = field(default_factory=dict, repr=False)

    @property
    def speedup(self) -> float | None:
        """Measured numpy time of the original over the optimized program: the median of their
        ratios round by round in the alternated runs (``paired_ratio``), or else the ratio of
        the two medians."""
        if self.paired_speedup is not None:
            return self.paired_speedup
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
                                     f"{sat.stop_detail} ({sat.seconds:.2f} s)" for k, sat in sats.items())),
            (f"cost ({self.cost_model})", f"{self.cost_before:.6g} -> {self.cost_after:.6g} "
                                          f"({_ratio(self.cost_before, self.cost_after)})"),
            ("extractor", f"{self.extractor}, {self.extraction_seconds:.2f} s"
                          + ("" if self.optimal is None else
                             f", {'proven optimal' if self.optimal else 'not proven optimal'}")),
        ]
        if self.values_compared is not None:
            rows.append(("check", self.check_text()))
        if self.speedup is not None:
            rows.append(("numpy time", f"{self.seconds_before * 1e3:.2f} ms -> "
                                       f"{self.seconds_after * 1e3:.2f} ms (speedup "
                                       f"{self.speedup:.2f}x, median of the runs' ratios)"))
        rows.append(("ops changed", changes_text(count_changes(self.ops_before, self.ops_after))))
        if self.layouts_before or self.layouts_after:
            moved = layout_changes(self.layouts_before, self.layouts_after)
            rows.append(("layouts changed", changes_text(moved)))
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
            "layouts_before": self.layouts_before, "layouts_after": self.layouts_after,
            "saturation": _saturation_json(self.saturation),
            "extraction_seconds": self.extraction_seconds, "optimal": self.optimal,
            "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
            "seconds_before": self.seconds_before, "seconds_after": self.seconds_after,
            "speedup": self.speedup, "check_passed": self.check_passed, "check_inputs": self.check_inputs,
            "total_seconds": self.total_seconds,
            "functions": dict(self.functions),
            "saturations": {name: _saturation_json(rep) for name, rep in self.saturations.items()},
            "keep_fused_ops": self.keep_fused_ops, "fused_calls": self.fused_calls,
            "nonfinite_before": dict(self.nonfinite_before), "values_compared": self.values_compared,
            "differing_outputs": list(self.differing_outputs),
            "suspect_rules": [dict(r) for r in self.suspect_rules],
        }

    def save_report(self, path: str | Path) -> None:
        """Write ``to_json()`` to a file as strict JSON (a NaN or infinite number becomes null)."""
        Path(path).write_text(json.dumps(strict_json(self.to_json()), indent=2, allow_nan=False) + "\n")

    def check_text(self) -> str:
        """The check's verdict in one line: errors, and what was not compared and why."""
        if self.values_compared is None:
            return "not run"
        errors = "no value compared" if self.max_abs_error is None else \
            f"max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g}"
        verdict = {True: "ok", False: "OUTPUTS DIFFER", None: "inconclusive"}[self.check_passed]
        text = f"{errors} ({verdict})"
        if self.check_inputs != "random":
            text += (f"; compared on inputs with {self.check_inputs}: on other random integers the "
                     "original's output had no finite value")
        bad = {k: v for k, v in self.nonfinite_before.items() if v}
        if bad:
            total = self.values_compared + sum(bad.values())
            what = " and ".join(f"{n} {k}" for k, n in bad.items())
            text += (f"; the original program's output has {what} value(s) of {total}: the check "
                     "compares where the original is finite")
        return text

    def failure_message(self) -> str:
        """Why the check failed: the outputs that differ and the rules that may have done it."""
        lines = [f"the optimized program's outputs differ from the original's: "
                 f"{'; '.join(self.differing_outputs) or self.check_text()}"]
        if self.check_passed is None:
            lines = [f"the check is inconclusive: {self.check_text()}"]
        elif self.suspect_rules:
            lines.append("rules that matched and rewrite the ops that changed (the differing ops "
                         "come from their matches):")
            lines += [f"  {r['rule']}" + (f" ({r['source']})" if r["source"] else "")
                      + f": {r['matches']} match(es), ops {', '.join(r['ops']) or '?'}"
                      for r in self.suspect_rules]
        else:
            lines.append("no rule that matched mentions an op that changed; run "
                         "`relaygraph rules check` on the rule files")
        return "\n".join(lines)


def strict_json(value):
    """``value`` with every NaN or infinite float replaced by None (JSON has no such numbers)."""
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _saturation_json(sat) -> dict:
    return {"stop_reason": sat.stop_reason, "stop_detail": sat.stop_detail, "seconds": sat.seconds,
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


def _op_histogram(funcs: list[Function], stats=lambda func: program_stats(func)["ops"]) -> dict[str, int]:
    """Counts over ``funcs`` summed: their ops by default, or another ``stats`` (``layout_stats``)."""
    total: Counter = Counter()
    for func in funcs:
        total.update(stats(func))
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


def program_cost(mod: IRModule, name: str, cost: str) -> float:
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
                  max_runs: int = 500, entry: str = "main", progress=False,
                  samples: list | None = None) -> tuple[float, float, Any, Any]:
    """Median seconds of two programs on the same inputs, and their values. The runs alternate,
    so that load on the machine hits both alike: at least ``runs`` of each, and more (up to
    ``max_runs``) until ``budget`` seconds have passed, so that small programs get a steady median.
    ``samples``, if a list, receives each program's seconds round by round."""
    (time_a, time_b), (value_a, value_b) = median_times([a, b], inputs, runs, budget, max_runs, entry,
                                                        progress, samples)
    return time_a, time_b, value_a, value_b


def median_times(mods: list[IRModule], inputs: list, runs: int, budget: float = 0.0,
                 max_runs: int = 500, entry: str = "main", progress=False,
                 samples: list | None = None) -> tuple[list[float], list]:
    """Median seconds of several programs on the same inputs (runs alternated, their order rotated
    each round: ``program_profile.time_programs``), and their values; ``progress`` shows the check
    and timing phases; ``samples``, if a list, receives each program's seconds round by round."""
    from ..eval import evaluate
    from ..progress import phase
    from .program_profile import time_programs

    checking = phase("check", f"running the {len(mods)} programs on seeded random inputs", progress=progress)
    values = [evaluate(m, *inputs, entry=entry) for m in mods]
    checking.done()
    timing = phase("time", f"at least {runs} alternated runs of each program, more for up to {budget:g} s",
                   unit="run", progress=progress, every=2.0)
    _, walls, _ = time_programs(mods, inputs, runs, budget, clock="wall", entry=entry, max_runs=max_runs,
                                on_round=timing.step, warm_up=False,  # the check above ran each once
                                wall_samples=samples)
    timing.done(f"{timing.count} runs of each")
    return walls, values


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


def _leaves(value, path: str = "output") -> list[tuple[str, Any]]:
    """The arrays of an output (a tuple's fields named by their index), in order."""
    out, stack = [], [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed([(f"{where}.{i}", x) for i, x in enumerate(v)]))
        else:
            out.append((where, v))
    return out


def _check_outputs(res: OptimizeResult, want, got, rtol: float, atol: float) -> None:
    """Compare the outputs where the original's values are finite; fill the check's fields."""
    a_leaves, b_leaves = _leaves(want), _leaves(got)
    if len(a_leaves) != len(b_leaves):
        res.differing_outputs = [f"the original has {len(a_leaves)} output array(s), the optimized "
                                 f"program {len(b_leaves)}"]
        res.values_compared, res.check_passed = 0, False
        return
    nan = inf = compared = 0
    abs_err = rel_err = None
    ok = True
    for (where, a), (_, b) in zip(a_leaves, b_leaves, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            res.differing_outputs.append(f"{where}: shape {a.shape} became {b.shape}")
            ok = False
            continue
        if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
            same = a == b
            compared += a.size
            if not same.all():
                res.differing_outputs.append(f"{where}: {int((~same).sum())} of {a.size} values differ")
                ok = False
            continue
        a, b = a.astype("float64"), b.astype("float64")
        fa, fb = np.isfinite(a), np.isfinite(b)
        nan, inf = nan + int(np.isnan(a).sum()), inf + int(np.isinf(a).sum())
        lost = fa & ~fb  # finite in the original, NaN or inf in the optimized program
        both = fa & fb
        compared += int(fa.sum())
        if both.any():
            diff = np.abs(a[both] - b[both])
            leaf_abs = float(diff.max())
            leaf_rel = float((diff / np.maximum(np.abs(a[both]), 1e-6)).max())
            abs_err, rel_err = max(abs_err or 0.0, leaf_abs), max(rel_err or 0.0, leaf_rel)
            far = int((diff > atol + rtol * np.abs(b[both])).sum())
            if far:
                ok = False
                res.differing_outputs.append(f"{where}: {far} of {a.size} values differ (max abs error "
                                             f"{leaf_abs:.3g})")
        if lost.any():
            ok = False
            res.differing_outputs.append(f"{where}: {int(lost.sum())} value(s) finite in the original "
                                         f"are NaN or inf in the optimized program")
    res.max_abs_error, res.max_rel_error = abs_err, rel_err
    res.nonfinite_before = {"NaN": nan, "inf": inf}
    res.values_compared = compared
    res.check_passed = ok if (compared or not (nan or inf) or not ok) else None


def _recheck_with_flags(res: OptimizeResult, mod, optimized, seed: int, entry: str, rtol: float,
                        atol: float) -> None:
    """Compare once more on inputs whose unconstrained integers are 0 or 1, when the first draw
    left the original with no finite output value (an attention mask times float32's lowest value
    overflows to -inf for any other integer). Kept only if it compares something."""
    from ..eval import evaluate
    from ..eval.inputs import random_inputs

    inputs = random_inputs(mod, seed, entry=entry, flags=True)
    with np.errstate(all="ignore"):
        want, got = evaluate(mod, *inputs, entry=entry), evaluate(optimized, *inputs, entry=entry)
    again = OptimizeResult(module=res.module, original=res.original, cost_model=res.cost_model,
                           extractor=res.extractor, cost_before=res.cost_before, cost_after=res.cost_after,
                           saturation=res.saturation, extraction_seconds=res.extraction_seconds,
                           optimal=res.optimal, nodes_before=res.nodes_before, nodes_after=res.nodes_after)
    _check_outputs(again, want, got, rtol, atol)
    if again.values_compared:
        res.max_abs_error, res.max_rel_error = again.max_abs_error, again.max_rel_error
        res.nonfinite_before, res.values_compared = again.nonfinite_before, again.values_compared
        res.differing_outputs, res.check_passed = again.differing_outputs, again.check_passed
        res.check_inputs = "0/1 integers"


def rule_ops(rule) -> list[str]:
    """The ops a rule's two sides name (none for a rule written in egglog)."""
    from ..rewrite.pattern import PCall, walk

    found: dict[str, None] = {}
    for side in (getattr(rule, "lhs", None) or (), getattr(rule, "rhs", None) or ()):
        for pattern in side:
            for node in walk(pattern):
                if isinstance(node, PCall):
                    found[node.op] = None
    return list(found)


def suspect_rules(rules, reports: dict, ops_before: dict, ops_after: dict) -> list[dict]:
    """The rules that matched during saturation and name an op whose count changed: the
    differing ops of the optimized program come from their matches. Most matches first."""
    changed = count_changes(ops_before, ops_after)
    matches: Counter = Counter()
    for rep in reports.values():
        matches.update({k: v for k, v in rep.matches.items() if v})
    out = []
    for rule in rules:
        n = matches.get(rule.name, 0)
        ops = rule_ops(rule)
        named = sorted(changed.keys() & set(ops))
        if n and (named or not ops):
            span = getattr(rule, "span", None)
            out.append({"rule": rule.name, "matches": n,
                        "source": f"{span.source_name}:{span.line}" if span else "",
                        "ops": named, "changed": {op: list(changed[op]) for op in named}})
    return sorted(out, key=lambda r: -r["matches"])


def optimize(mod: IRModule | Function, rules=None, cost: str = "cpu",
             extractor: str = "ilp", node_limit: int | None = 50_000,
             iter_limit: int | None = 30, time_limit: float | None = 60.0, check: bool = True,
             params: dict[str, np.ndarray] | None = None, seed: int = 0, repeats: int = 5,
             rtol: float = 1e-3, atol: float = 1e-4, ilp_time_limit: float = 30.0,
             progress: bool = False, timing_budget: float = 1.0, functions=None,
             entry: str = "main", keep_fused_ops: bool = False, explain: bool = False) -> OptimizeResult:
    """Rewrite ``mod`` with equality saturation and return the best program under ``cost``.

    Each function (or each one named in ``functions``) is saturated and extracted on its own, under
    the node, iteration and time limits; the rest of the module is kept, and so is a function whose
    extracted program costs no less than it does (``functions`` in the result says so). ``params``
    bind weights of ``entry``. With ``check``, both modules run ``entry`` on seeded random inputs:
    their outputs are compared and their numpy times are the medians of at least ``repeats``
    alternated runs each, more for small programs until ``timing_budget`` seconds have passed.
    ``progress`` (False, True, ``"auto"``, ``"bar"``, ``"lines"``) reports each phase: load,
    saturate, extract, check, time.
    ``explain`` keeps each function's e-graph and extraction so that ``rg.rules.explain(result)``
    can say which rules made each changed op.
    """
    from ..passes import FoldConstant, InferType
    from ..progress import phase, resolve
    from ..ty import infer_type
    from . import extract as ex
    from .program_profile import paired_ratio
    from .saturation import saturate

    progress = resolve(progress)
    optimize_options(cost=cost, extractor=extractor, node_limit=node_limit, iter_limit=iter_limit,
                     time_limit=time_limit, ilp_time_limit=ilp_time_limit)
    if cost == "cpu":  # a missing profile is measured now, before any other work, with its own progress
        from .cpu_cost import default_profile

        default_profile(progress="auto")
    loading = phase("load", "reading the rules, type-checking the program", progress=progress)
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
    loading.done(f"{len(rule_objects)} rules")
    extractors = {"tree": ex.tree, "greedy-dag": ex.greedy_dag,
                  "greedy-dag+ls": lambda g: ex.greedy_dag(g, improve=True),
                  "ilp": lambda g: ex.ilp(g, time_limit=ilp_time_limit)}
    names = _function_names(mod, functions)

    status: dict[str, str] = {}
    rewritten: dict[str, Function] = {}
    reports: dict[str, Any] = {}
    extraction_seconds, optimal = 0.0, True
    explain_data: dict[str, tuple] = {}
    for name in names:
        egraph = _load(mod, name, asked=functions is not None, status=status)
        if egraph is None:
            continue
        reports[name] = saturate(egraph, rule_objects, node_limit=node_limit, iter_limit=iter_limit,
                                 time_limit=time_limit, progress=progress)
        extracting = phase("extract", f"@{name} with {extractor}, {_cost_label(cost)} cost",
                           progress=progress)
        graph = egraph.extraction_graph(cost)
        _constant_discount(graph)
        t0 = time.perf_counter()
        result = extractors[extractor](graph)
        extraction_seconds += time.perf_counter() - t0
        proven = getattr(result, "optimal", None)
        optimal = None if proven is None or optimal is None else optimal and proven
        built: dict | None = {} if explain else None  # each chosen class's expression, for explain
        rewritten[name] = egraph.read_back(graph, result.choice, built=built)
        if explain:
            explain_data[name] = (egraph, graph, result.choice, built, rule_objects, reports[name])
        extracting.done(f"DAG cost {result.dag_cost:.6g}")
        status[name] = "rewritten"
    if not rewritten:
        raise RelayError("no function of the module can go through the e-graph: "
                         + "; ".join(f"@{k} {v}" for k, v in status.items()))

    rebuilding = phase("rebuild", "folding constants, type-checking, writing standard Relay, costing",
                       progress=progress)
    out = mod.copy()
    for name, func in rewritten.items():
        out.update_func(name, func)
    out = FoldConstant()(InferType()(out))
    for gv, func in mod:  # the functions not rewritten stay exactly as they were
        if gv.name_hint not in rewritten:
            out.update_func(gv.name_hint, func)
    compact = InferType()(out)
    costs = {name: (program_cost(mod, name, cost), program_cost(compact, name, cost)) for name in rewritten}
    # A function for which extraction found nothing cheaper stays as it was written: an
    # extraction of the same cost differs from it only in choices the cost model cannot tell
    # apart (which operand of an add comes first), and on diamond-chain such a reordering alone
    # measured 0.97-1.09x from one tie-break to the next.
    unchanged = [name for name, (was, now) in costs.items() if not now < was * (1 - 1e-9)]
    if unchanged:
        for name in unchanged:
            compact.update_func(name, mod[name])
            status[name] = (f"kept unchanged (the e-graph found nothing cheaper: {costs[name][1]:.6g} "
                            f"against {costs[name][0]:.6g})")
            costs[name] = (costs[name][0], costs[name][0])
        compact = InferType()(compact)
    optimized = compact if keep_fused_ops else standard_relay(
        compact, {k: v for k, v in rewritten.items() if k not in unchanged})

    before = [mod[name] for name in rewritten]
    after = [compact[name] for name in rewritten]
    ops_after = _op_histogram(after)
    res = OptimizeResult(
        module=optimized, original=mod, cost_model=cost if isinstance(cost, str) else "custom",
        extractor=extractor, cost_before=sum(was for was, _ in costs.values()),
        cost_after=sum(now for _, now in costs.values()),
        saturation=reports.get(entry) or next(iter(reports.values())),
        extraction_seconds=extraction_seconds, optimal=optimal,
        nodes_before=sum(program_stats(f)["nodes"] for f in before),
        nodes_after=sum(program_stats(f)["nodes"] for f in after),
        ops_before=_op_histogram(before), ops_after=ops_after,
        layouts_before=_op_histogram(before, layout_stats), layouts_after=_op_histogram(after, layout_stats),
        functions={gv.name_hint: status.get(gv.name_hint, "not asked for") for gv, _ in mod},
        saturations=reports, keep_fused_ops=keep_fused_ops,
        fused_calls=sum(n for op, n in ops_after.items() if fused_definition(op) is not None),
        explain_data=explain_data)
    rebuilding.done()
    if check:
        inputs = random_inputs(mod, seed, entry=entry)
        with np.errstate(all="ignore"):  # NaN / inf in the outputs are counted and reported
            rounds: list = []
            res.seconds_before, res.seconds_after, want, got = compare_times(
                mod, optimized, inputs, repeats, budget=timing_budget, entry=entry, progress=progress,
                samples=rounds)
            res.paired_speedup = paired_ratio(*rounds)
        _check_outputs(res, want, got, rtol, atol)
        if res.check_passed is None:
            _recheck_with_flags(res, mod, optimized, seed, entry, rtol, atol)
        if res.check_passed is False:
            res.suspect_rules = suspect_rules(rule_objects, reports, res.ops_before, ops_after)
    res.total_seconds = time.perf_counter() - started
    return res


def _cost_label(cost) -> str:
    return cost if isinstance(cost, str) else "custom"


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
