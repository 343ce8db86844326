"""Cost over time per extractor on one e-graph (default TENSAT's BERT), drawn as a step plot.

tree and greedy-dag are one point each (their answer when they finish). ``ilp (solver only)`` is
the integer program alone, warm-started with greedy (no local or neighbourhood search, no
reduced-cost fixing); ``ilp`` is the full exact extractor. For both ILP runs the proven lower
bound is drawn dashed. Every answer is checked by ``rg.extract.check``.

    python benchmarks/plot_extract_trace.py [file] [--time-limit 60] [--out PNG]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph.egraph.extract as ex  # noqa: E402

HERE = os.path.dirname(__file__)
# the data folder beside the repository (../shared), as on the machines that run these
_SHARED_GYM = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction-gym" / "data")
DEFAULT_FILE = os.path.join(os.environ.get("RELAYGRAPH_GYM_DATA", _SHARED_GYM),
                            "tensat", "bert.json")
DEFAULT_OUT = os.path.join(HERE, "..", "papers", "extraction", "cost-over-time.png")


def run(graph, time_limit: float) -> dict[str, tuple[list, list, list]]:
    """Per extractor: times, best costs and lower bounds (NaN where there is none)."""
    out: dict[str, tuple[list, list, list]] = {}
    for name, fn in (("tree", ex.tree), ("greedy-dag", ex.greedy_dag)):
        start = time.perf_counter()
        r = fn(graph)
        seconds = time.perf_counter() - start
        assert math.isclose(ex.check(graph, r.choice), r.dag_cost, rel_tol=1e-9)
        out[name] = ([seconds], [r.dag_cost], [math.nan])
    solver_only = {"local": False, "search": False, "fixing": False}
    for name, kwargs in (("ilp (solver only)", solver_only), ("ilp", {})):
        r = ex.ilp(graph, time_limit=time_limit, **kwargs)
        assert math.isclose(ex.check(graph, r.choice), r.dag_cost, rel_tol=1e-9)
        trace = r.notes["trace"] + [(r.seconds, r.dag_cost, r.notes.get("lower_bound", -math.inf))]
        times = [t for t, _, _ in trace]
        costs = [c for _, c, _ in trace]
        bounds = [b if math.isfinite(b) else math.nan for _, _, b in trace]
        out[name] = (times, costs, bounds)
        print(f"  {name:<18} {r.dag_cost:.5g} in {r.seconds:.1f} s, "
              f"{'proven' if r.optimal else f'gap {r.gap:.2%}'}", flush=True)
    return out


def plot(series: dict, title: str, path: str, published: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = dict(zip(series, ("tab:gray", "tab:orange", "tab:blue", "tab:green"), strict=False))
    end = max(max(t) for t, _, _ in series.values())
    for name, (times, costs, bounds) in series.items():
        c = colours[name]
        if len(times) == 1:
            ax.plot(times, costs, "o", color=c, label=f"{name} ({costs[0]:.4g})")
            continue
        ax.step(times + [end], costs + [costs[-1]], where="post", color=c, label=f"{name} ({costs[-1]:.4g})")
        ax.step(times + [end], bounds + [bounds[-1]], where="post", color=c, linestyle="--", alpha=0.7,
                label=f"{name}: lower bound")
    if published is not None:
        ax.axhline(published, color="black", linewidth=0.8, linestyle=":",
                   label=f"best published ({published:g})")
    costs_all = [c for _, cs, _ in series.values() for c in cs if math.isfinite(c)]
    bounds_all = [b for _, _, bs in series.values() for b in bs if math.isfinite(b)]
    low = min(costs_all + bounds_all + ([published] if published else []))
    high = sorted(costs_all)[len(costs_all) // 2] * 1.1 if costs_all else 1.0
    ax.set_ylim(low * 0.97, max(high, min(costs_all) * 1.05))
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(0, end * 1.05)
    ax.set_xlabel("seconds (symlog)")
    ax.set_ylabel("DAG cost")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="center left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=DEFAULT_FILE)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--published", type=float, default=None,
                        help="best published cost to draw (default: 0.705 for bert.json)")
    args = parser.parse_args()
    graph = ex.load_gym(args.file)
    published = args.published
    if published is None and os.path.basename(args.file) == "bert.json":
        published = 0.705
    series = run(graph, args.time_limit)
    plot(series, f"{graph.name}: cost over time ({os.cpu_count()} cores, shared with other jobs)",
         args.out, published)


if __name__ == "__main__":
    main()
