"""Greedy DAG extraction: today's greedy against the new one and the new one with local search.

Over the extraction-gym corpus (``--all``: every file; default: every tensat, rover, egg and
dummy file and every 10th file of babble, lean-egg and eggcc-bril), each file is extracted by

  old      the greedy DAG extractor as it was before the lower-bound queue (kept below as
           ``_reference_choice``, the baseline, run in this process),
  new      ``greedy_dag(graph)``,
  new+ls   ``greedy_dag(graph, improve=True)`` (extractor ``greedy-dag+ls``),

in turns (old, new, new+ls, then rotated) ``--repeats`` times, and the median time of each is
kept. It prints per data set the median time ratio against old and how many files each is
better / equal / worse on, checks every answer with the independent checker, and asserts that
neither new extractor is worse than old on any file. Files whose roots are all stale ids are
refused by the loader (named), and counted.

    PYTHONPATH=. python benchmarks/bench_greedy.py [--all] [--repeats N] [DATA_DIR]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph.egraph.extract as ex  # noqa: E402
from relaygraph.egraph.extract import pset  # noqa: E402
from relaygraph.egraph.extract.check import needed_classes  # noqa: E402
from relaygraph.egraph.extract.greedy import realize_acyclic  # noqa: E402
from relaygraph.ir.node import paused_gc  # noqa: E402

# the data folder beside the repository (../shared), as on the machines that run these
_SHARED_GYM = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction-gym" / "data")
DATA = _SHARED_GYM
SETS = ("tensat", "rover", "egg", "dummy_examples", "babble", "lean-egg", "eggcc-bril")
SAMPLED = {"babble", "lean-egg", "eggcc-bril"}  # every 10th file unless --all


def _reference_choice(graph):
    """The greedy choice as computed before this change: every candidate's union taken at once."""
    eps = 1e-12
    levels = pset.levels_for(graph.num_classes)
    costs, classes, parents = graph.costs, graph.classes, graph.parents
    kids = [tuple(set(ccs)) for ccs in graph.child_classes]
    usable = [graph.usable(i) for i in range(graph.num_nodes)]
    key_of = [-1] * graph.num_classes
    next_key = 0
    best_set: list = [None] * graph.num_classes
    best_total = [math.inf] * graph.num_classes
    choice: dict[int, int] = {}
    pending = [len(k) for k in kids]
    version = [0] * graph.num_nodes
    heap: list = []

    def evaluate(node: int) -> None:
        s = None
        for c in kids[node]:
            s = pset.union(s, best_set[c], levels)
        k = classes[node]
        if key_of[k] >= 0 and pset.contains(s, key_of[k], levels):
            return
        value = pset.total(s) + costs[node]
        if value < best_total[k] - eps * best_total[k] or key_of[k] < 0:
            version[node] += 1
            heapq.heappush(heap, (value, node, version[node], s))

    for i in range(graph.num_nodes):
        if not kids[i] and usable[i]:
            evaluate(i)
    while heap:
        value, node, ver, s = heapq.heappop(heap)
        k = classes[node]
        if ver != version[node]:
            continue
        first = key_of[k] < 0
        if not first and not value < best_total[k] - eps * best_total[k]:
            continue
        if first:
            key_of[k] = next_key
            next_key += 1
        best_set[k] = pset.union(s, pset.singleton(key_of[k], costs[node], levels), levels)
        best_total[k] = value
        choice[k] = node
        for p in parents[k]:
            if first:
                pending[p] -= 1
            if pending[p] == 0 and usable[p]:
                evaluate(p)
    return choice, best_total


def reference_greedy(graph) -> dict[int, int]:
    """Today's greedy DAG answer (needed classes only), repaired as greedy_dag repairs it."""
    with paused_gc():
        choice, estimate = _reference_choice(graph)
    needed = {k: choice[k] for k in needed_classes(graph, choice)}
    if ex.find_cycle(graph, needed) is not None:
        choice = realize_acyclic(graph, choice, estimate)
        needed = {k: choice[k] for k in needed_classes(graph, choice)}
    return needed


VARIANTS = {
    "old": reference_greedy,
    "new": lambda g: ex.greedy_dag(g).choice,
    "new+ls": lambda g: ex.greedy_dag(g, improve=True).choice,
}


def files_of(data: str, everything: bool) -> list[tuple[str, str]]:
    """(data set, path) for the files to run."""
    out = []
    for name in SETS:
        folder = os.path.join(data, name)
        if not os.path.isdir(folder):
            continue
        paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".json"))
        if name in SAMPLED and not everything:
            paths = paths[::10]
        out += [(name, p) for p in paths]
    return out


def run_file(graph, repeats: int) -> dict[str, tuple[float, float]]:
    """Each variant's (median seconds, checked DAG cost), the variants taking turns."""
    names = list(VARIANTS)
    times: dict[str, list[float]] = {n: [] for n in names}
    costs: dict[str, float] = {}
    graph.parents  # noqa: B018 - built once, outside the timings
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            choice = VARIANTS[name](graph)
            times[name].append(time.perf_counter() - start)
            cost = ex.check(graph, choice)  # the independent checker sees every answer
            if name in costs and cost != costs[name]:
                raise AssertionError(f"{graph.name}: {name} is not deterministic")
            costs[name] = cost
    return {n: (statistics.median(times[n]), costs[n]) for n in names}


def compare(a: float, b: float) -> int:
    """-1, 0 or 1 as cost ``a`` is below, equal to (within float noise) or above ``b``."""
    tol = 1e-9 * max(1.0, abs(b))
    return -1 if a < b - tol else (1 if a > b + tol else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=DATA, help=f"extraction-gym data folder (default {DATA})")
    parser.add_argument("--all", action="store_true", help="every file of babble, lean-egg and eggcc-bril")
    parser.add_argument("--repeats", type=int, default=3, help="turns per file (default 3)")
    args = parser.parse_args()
    files = files_of(args.data, args.all)
    if not files:
        raise SystemExit(f"no extraction-gym files under {args.data}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    print(f"{len(files)} files from {args.data}; {args.repeats} alternated turns each; "
          f"load average at start {load:.1f} on {os.cpu_count()} cores")
    per_set: dict[str, list] = {}
    refused: list[str] = []
    dropped = 0
    negative = zero = 0
    for name, path in files:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                graph = ex.load_gym(path, missing_roots="drop")
            except ex.ExtractionError as exc:
                refused.append(str(exc))
                continue
        dropped += bool(caught)
        negative += any(c < 0 for c in graph.costs)
        zero += any(c == 0 for c in graph.costs)
        row = run_file(graph, args.repeats)
        per_set.setdefault(name, []).append((os.path.basename(path), row))
    print(f"loaded {sum(map(len, per_set.values()))}: {dropped} after dropping a root id with no "
          f"nodes, {negative} with negative costs, {zero} with zero costs; refused {len(refused)}")
    for line in refused[:3]:
        print(f"  refused: {line}")
    print()
    head = f"{'data set':<15}{'files':>6}  {'old s':>8}  {'new/old':>8}  {'ls/old':>8}  " \
           f"{'new better/equal/worse':>22}  {'ls better/equal/worse':>22}"
    print(head)
    print("-" * len(head))
    worse: list[str] = []
    everything = []
    for name, rows in per_set.items():
        everything += rows
        print(_line(name, rows, worse))
    print("-" * len(head))
    print(_line("all", everything, worse))
    gains = [(r["old"][1] - r["new+ls"][1]) / abs(r["old"][1]) for _, r in everything
             if compare(r["new+ls"][1], r["old"][1]) < 0 and r["old"][1]]
    if gains:
        print(f"\nnew+ls lowers the DAG cost on {len(gains)} files, by {statistics.median(gains):.2%} "
              f"(median) and up to {max(gains):.2%}")
    big = sorted(everything, key=lambda fr: -fr[1]["old"][0])[:8]
    print("\nslowest files for old (s):  old  new  new+ls   DAG cost old / new / new+ls")
    for f, r in big:
        print(f"  {f[:44]:<44} {r['old'][0]:6.3f} {r['new'][0]:6.3f} {r['new+ls'][0]:6.3f}   "
              f"{r['old'][1]:.6g} / {r['new'][1]:.6g} / {r['new+ls'][1]:.6g}")
    assert not worse, f"worse than today's greedy on: {worse}"
    print("\nno file is worse than today's greedy; every answer passed the checker")


def _line(name: str, rows: list, worse: list[str]) -> str:
    ratio_new = statistics.median(r["new"][0] / r["old"][0] for _, r in rows)
    ratio_ls = statistics.median(r["new+ls"][0] / r["old"][0] for _, r in rows)
    total_old = sum(r["old"][0] for _, r in rows)
    counts = {}
    for variant in ("new", "new+ls"):
        c = [0, 0, 0]
        for f, r in rows:
            verdict = compare(r[variant][1], r["old"][1])
            c[verdict + 1] += 1
            if verdict > 0 and name != "all":
                worse.append(f"{name}/{f} ({variant})")
        counts[variant] = "/".join(map(str, c))
    return (f"{name:<15}{len(rows):>6}  {total_old:8.2f}  {ratio_new:8.2f}  {ratio_ls:8.2f}  "
            f"{counts['new']:>22}  {counts['new+ls']:>22}")


if __name__ == "__main__":
    main()
