"""Extraction speed: greedy DAG and tree on the largest e-graphs at hand, scaling, and ILP proofs.

1. greedy_dag and tree on the largest extraction-gym files (TENSAT ResNet-50 and VGG) and on
   BERT-base saturated with rules/algebraic.rules and
   rules/fusion.rules (latency costs); baseline: tree extraction on the same e-graph in this
   process (greedy/tree ratio).
2. Scaling: time per node of greedy_dag and tree on seeded synthetic e-graphs of 10,000 and
   100,000 nodes (deep, residual-shaped, with cycles); ratio large/small per node, target <= 1.5.
3. ILP: time to a proven optimum on VGG and ResNet-50 (plain and acyclic), limit 60 s each, with
   the size of the reduced core the program is written for; baseline: greedy_dag on the same
   file (ILP/greedy ratio, and the DAG cost gained).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph.egraph.extract as ex  # noqa: E402
from relaygraph.egraph.extract.synth import random_egraph  # noqa: E402

TENSAT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "extraction-gym", "data", "tensat")


def best_of(fn, graph, runs: int = 3) -> tuple[float, object]:
    """The shortest of ``runs`` wall times, and the last result."""
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn(graph)
        best = min(best, time.perf_counter() - start)
    return best, result


def heuristics(graph, label: str) -> None:
    graph.parents  # noqa: B018 - built once, outside the timings
    t_tree, r_tree = best_of(ex.tree, graph)
    t_greedy, r_greedy = best_of(ex.greedy_dag, graph)
    print(f"  {label:<28} {graph.num_nodes:>7,} nodes  tree {t_tree * 1e3:8.1f} ms  "
          f"greedy_dag {t_greedy * 1e3:8.1f} ms  ratio {t_greedy / t_tree:5.1f}  "
          f"DAG cost tree {r_tree.dag_cost:.4g} greedy {r_greedy.dag_cost:.4g}")


def bert_egraph():
    """BERT-base saturated with the algebraic and fusion rules, costed by the latency model."""
    from relaygraph import zoo
    from relaygraph.egraph import saturate
    from relaygraph.rewrite import load_rules

    root = os.path.join(os.path.dirname(__file__), "..", "rules")
    rules = load_rules([os.path.join(root, "algebraic.rules"), os.path.join(root, "fusion.rules")])
    mod, _ = zoo.get("bert")
    start = time.perf_counter()
    report = saturate(mod, rules, node_limit=100_000, iter_limit=20, time_limit=300, progress=False)
    graph = report.egraph.extraction_graph("latency")
    print(f"  BERT-base {str(report).splitlines()[0]} (in {time.perf_counter() - start:.0f} s)")
    return graph


def scaling() -> None:
    per_node = {}
    for n in (10_000, 100_000):
        graph = random_egraph(n, seed=7)
        graph.parents  # noqa: B018
        t_tree, r_tree = best_of(ex.tree, graph)
        t_greedy, r = best_of(ex.greedy_dag, graph, runs=2 if n > 50_000 else 3)
        per_node[n] = (t_tree / graph.num_nodes, t_greedy / graph.num_nodes)
        print(f"  synthetic {n:>7,} nodes, {graph.num_classes:,} classes: tree {t_tree:6.3f} s "
              f"({per_node[n][0] * 1e6:5.2f} us/node, term of {len(r_tree.choice):,} classes)  "
              f"greedy_dag {t_greedy:6.3f} s ({per_node[n][1] * 1e6:5.2f} us/node, "
              f"term of {len(r.choice):,} classes)")
    small, large = per_node[10_000], per_node[100_000]
    print(f"  per-node cost ratio 100k/10k: tree {large[0] / small[0]:.2f}, "
          f"greedy_dag {large[1] / small[1]:.2f}  (target <= 1.5: near-linear)")
    print("  (at 100k the tree costs of this residual-shaped e-graph overflow to inf and tie, so tree "
          "extraction returns a larger term, which its checked result pays for)")


def ilp_proofs() -> None:
    for name in ("vgg", "vgg_acyclic", "resnet50", "resnet50_acyclic"):
        graph = ex.load_gym(os.path.join(TENSAT, f"{name}.json"))
        t_greedy, greedy = best_of(ex.greedy_dag, graph, runs=1)
        start = time.perf_counter()
        r = ex.ilp(graph, time_limit=60.0)
        t_ilp = time.perf_counter() - start
        verdict = "proven optimal" if r.optimal else f"not proven in 60 s (gap {r.gap:.2%})"
        core = (f"core {r.notes['kept_nodes']:,}/{graph.num_nodes:,} nodes" if "kept_nodes" in r.notes
                else "no core needed")
        print(f"  {name:<18} ILP {t_ilp:6.2f} s  {verdict:<32} DAG cost {r.dag_cost:.5f} "
              f"(greedy {greedy.dag_cost:.5f}, {1 - r.dag_cost / greedy.dag_cost:.2%} better)  "
              f"ratio to greedy time {t_ilp / t_greedy:,.0f}x  [{r.notes['solver']}; {core}]")


def main() -> None:
    print("1. largest e-graphs at hand (best of 3; baseline: tree on the same e-graph)")
    for name in ("resnet50", "vgg"):
        heuristics(ex.load_gym(os.path.join(TENSAT, f"{name}.json")), f"tensat {name}")
    heuristics(bert_egraph(), "saturated BERT")
    print("2. scaling on seeded synthetic e-graphs")
    scaling()
    print("3. ILP to a proven optimum (limit 60 s each; baseline: greedy_dag on the same file)")
    ilp_proofs()


if __name__ == "__main__":
    main()
