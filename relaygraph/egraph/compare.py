"""The original program, TVM's pass pipeline and the e-graph's result, side by side.

``compare_pipeline(result)`` takes what ``rg.optimize`` returned, runs a named pass pipeline
(``tvm-o3``: TVM's opt_level-3 build sequence, see ``relaygraph.passes.pipeline``) on the same
original program, and reports for each of the three programs the time the cost model predicts,
the time measured on the numpy executor (runs alternated, medians; a measured speedup is the
median of the runs' ratios to the original round by round), and the ops that changed
(and the layouts of the ops that take them: a layout rewrite keeps the op counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.dag_export import program_stats
from ..ir.module import IRModule
from ..ops.layouts import count_changes, layout_changes, layout_stats

__all__ = ["PipelineComparison", "compare_pipeline"]


@dataclass
class PipelineComparison:
    """Predicted and measured times of the original, the pipeline's and the e-graph's programs."""

    pipeline: str
    cost_model: str
    # label, predicted, measured, ops, changed (ops), layouts, layouts_changed (see layout_stats and
    # layout_changes)
    rows: list[dict] = field(default_factory=list)

    def row(self, label: str) -> dict:
        return next(r for r in self.rows if r["label"] == label)

    def table(self) -> str:
        """The table the command line prints."""
        base = self.rows[0]
        model = f"({self.cost_model})"
        lines = [f"{'program':<22} {'predicted':>12} {'measured':>12} {'speedup':>9} {'predicted':>10}",
                 f"{'':<22} {model:>12} {'(numpy)':>12} {'measured':>9} {'speedup':>10}"]
        for r in self.rows:
            # the median of the runs' ratios to the original (rows from older JSON: of the medians)
            measured = r.get("speedup") or (base["measured"] / r["measured"] if r["measured"]
                                            else float("nan"))
            predicted = base["predicted"] / r["predicted"] if r["predicted"] else float("nan")
            lines.append(f"{r['label']:<22} {_fmt(r['predicted']):>12} {r['measured'] * 1e3:>9.2f} ms "
                         f"{measured:>8.2f}x {predicted:>9.2f}x")
        for r in self.rows[1:]:
            lines.append(f"ops changed by {r['label']}: {_changes(r['changed']) or 'none'}")
            if r["layouts"] or base["layouts"]:
                lines.append(f"layouts changed by {r['label']}: {_changes(r['layouts_changed']) or 'none'}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"pipeline": self.pipeline, "cost_model": self.cost_model, "rows": self.rows}


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _changes(changed: dict[str, int]) -> str:
    return ", ".join(f"{op} {d:+d}" for op, d in sorted(changed.items(), key=lambda kv: (-abs(kv[1]), kv[0])))


def _ops(mod: IRModule, stats=lambda func: program_stats(func)["ops"]) -> dict[str, int]:
    total: dict[str, int] = {}
    for _, func in mod:
        for op, n in stats(func).items():
            total[op] = total.get(op, 0) + n
    return total


def _deltas(changes: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Signed changes from ``count_changes`` or ``layout_changes`` pairs."""
    return {k: b - a for k, (a, b) in changes.items()}


def compare_pipeline(result, pipeline: str = "tvm-o3", runs: int = 5, budget: float = 2.0,
                     seed: int = 0, progress=False) -> PipelineComparison:
    """Original vs ``pipeline`` vs the e-graph's program of an ``rg.optimize`` result."""
    from ..eval.inputs import random_inputs
    from ..passes import named_pipeline
    from ..ty import infer_type
    from .optimize import median_times, program_cost
    from .program_profile import paired_ratio

    original = infer_type(result.original)
    piped = named_pipeline(pipeline)(original)
    optimized = infer_type(result.module)
    programs = [("original", original), (f"{pipeline} pipeline", piped), ("e-graph", optimized)]
    inputs = random_inputs(original, seed=seed)
    rounds: list = []
    times, _ = median_times([m for _, m in programs], inputs, runs, budget, progress=progress, samples=rounds)
    base_ops, base_layouts = _ops(original), _ops(original, layout_stats)
    out = PipelineComparison(pipeline, result.cost_model)
    for (label, mod), seconds, samples in zip(programs, times, rounds, strict=True):
        ops, layouts = _ops(mod), _ops(mod, layout_stats)
        out.rows.append({"label": label, "predicted": program_cost(mod, "main", result.cost_model),
                         "measured": seconds, "speedup": paired_ratio(rounds[0], samples),
                         "ops": ops, "changed": _deltas(count_changes(base_ops, ops)),
                         "layouts": layouts,
                         "layouts_changed": _deltas(layout_changes(base_layouts, layouts))})
    return out
