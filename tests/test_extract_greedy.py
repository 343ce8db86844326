"""Greedy DAG extraction with and without local search, and tree and greedy under negative costs."""

import itertools
import math
import random
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.extract import ExtractionGraph, check, find_cycle, from_json, load_gym
from relaygraph.egraph.extract import greedy as greedy_module
from relaygraph.egraph.extract.bench import run_file
from relaygraph.egraph.extract.check import needed_classes
from relaygraph.egraph.extract.greedy import improve_choice
from relaygraph.egraph.extract.synth import random_egraph
from relaygraph.egraph.extract.tree import tree_choice

GYM = Path(__file__).parent / "data" / "extraction-gym"
SMALL = sorted(
    [*(GYM / "test_data" / "crafted").glob("*.json"), *(GYM / "test_data" / "fuzz").glob("*.json"),
     *(GYM / "data" / "egg").glob("*.json"), *(GYM / "data" / "dummy_examples").glob("*.json")])


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _optimum(g: ExtractionGraph) -> float:
    """The DAG-optimal cost by trying every node of every class (a handful of classes only)."""
    options = [[n for n in g.class_nodes[k] if g.usable(n)] or [None] for k in range(g.num_classes)]
    best = math.inf
    for picked in itertools.product(*options):
        choice = {k: n for k, n in enumerate(picked) if n is not None}
        try:
            needed = needed_classes(g, choice)
        except rg.extract.InvalidChoice:
            continue
        trimmed = {k: choice[k] for k in needed}
        if find_cycle(g, trimmed) is None:
            best = min(best, math.fsum(g.costs[trimmed[k]] for k in needed))
    return best


def _graph(nodes: dict, roots=("a",)) -> ExtractionGraph:
    return from_json({"nodes": nodes, "root_eclasses": list(roots)}, name="case")


def _valid(g, result) -> float:
    assert find_cycle(g, result.choice) is None
    cost = check(g, result.choice)
    assert cost == result.dag_cost
    return cost


# -- local search (greedy-dag+ls) ----------------------------------------------------------------

@pytest.mark.parametrize("path", SMALL, ids=_name)
def test_local_search_never_costs_more_than_greedy(path):
    g = load_gym(path)
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    assert plain.extractor == "greedy-dag" and improved.extractor == "greedy-dag+ls"
    assert _valid(g, improved) <= _valid(g, plain)
    assert improved.notes["greedy_cost"] == plain.dag_cost


def test_local_search_finds_a_cheaper_answer_where_one_swap_helps():
    g = load_gym(GYM / "test_data" / "fuzz" / "29.json")
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    assert improved.dag_cost < plain.dag_cost - 10  # 146.87 -> 132.74
    assert improved.notes["swaps"] >= 1
    assert improved.dag_cost >= rg.extract.ilp(g, time_limit=20).dag_cost - 1e-9


def test_a_swap_counts_a_class_shared_with_the_rest_of_the_answer_once():
    # a: g (cost 3) or f(b, c); b and c share d. Greedy takes the leaf g for a; f costs 1 + 1 + 1 + 0.5
    # = 3.5 as a tree, but the answer already pays for b, c, d through the second root r.
    g = _graph({
        "g": {"op": "g", "eclass": "a", "cost": 3.0},
        "f": {"op": "f", "eclass": "a", "children": ["b", "c"], "cost": 1.0},
        "b": {"op": "b", "eclass": "b", "children": ["d"], "cost": 1.0},
        "c": {"op": "c", "eclass": "c", "children": ["d"], "cost": 1.0},
        "d": {"op": "d", "eclass": "d", "cost": 0.5},
        "r": {"op": "r", "eclass": "r", "children": ["b", "c"], "cost": 0.0},
    }, roots=("a", "r"))
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    assert improved.dag_cost <= plain.dag_cost
    assert improved.dag_cost == _optimum(g) == 3.5


def test_improve_choice_starts_from_any_valid_answer():
    g = load_gym(GYM / "test_data" / "fuzz" / "26.json")
    tree = rg.extract.tree(g)
    better, swaps = improve_choice(g, tree.choice)  # no alternatives: only the answer's own classes
    assert swaps >= 1 and check(g, better) < tree.dag_cost - 20  # 96.67 -> 68.41
    # greedy+ls searches from the tree answer too, so it finds this where greedy's start cannot
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    assert improved.dag_cost <= check(g, better) < plain.dag_cost
    full, _ = tree_choice(g, every_class=True)
    wider, _ = improve_choice(g, tree.choice, [full], max_passes=1)
    assert check(g, wider) <= tree.dag_cost


def test_improve_choice_refuses_an_invalid_start():
    g = load_gym(GYM / "test_data" / "crafted" / "tree_plus_cycles.json")
    with pytest.raises(rg.extract.InvalidChoice, match="has no chosen node"):
        improve_choice(g, {})


def test_local_search_refuses_swaps_that_close_a_cycle():
    # a's other node f(b) would be cheaper, but b's only node needs a: the swap must not happen.
    g = _graph({
        "x": {"op": "x", "eclass": "a", "cost": 5.0},
        "f": {"op": "f", "eclass": "a", "children": ["y"], "cost": 0.0},
        "y": {"op": "y", "eclass": "b", "children": ["x"], "cost": 0.0},
    })
    result = rg.extract.greedy_dag(g, improve=True)
    assert result.choice == {0: 0} and result.dag_cost == 5.0


def _chain(n: int) -> ExtractionGraph:
    """``n`` classes, each with a cheap node over the class below and a dear leaf."""
    ids, ops, classes, children, costs = [], [], [], [], []
    for k in range(n):
        for kind, kids, cost in (("step", [2 * (k - 1)] if k else [], 1.0), ("leaf", [], 3.0 * n)):
            ids.append(f"{kind}{k}")
            ops.append(kind)
            classes.append(k)
            children.append(kids)
            costs.append(cost)
    return ExtractionGraph(ids, ops, classes, children, costs, [f"c{k}" for k in range(n)], [n - 1])


@pytest.mark.parametrize("n", [pytest.param(50_000, marks=pytest.mark.slow), 5_000])
def test_local_search_works_on_a_long_chain(n):
    # 50,000 classes are 100,000 nodes: no recursion anywhere, and the search stays in its budget
    g = _chain(n)
    result = rg.extract.greedy_dag(g, improve=True)
    assert result.dag_cost == float(n) and len(result.choice) == n


# -- negative and zero costs ---------------------------------------------------------------------

def _signed(seed: int, size: int) -> ExtractionGraph:
    base = random_egraph(size, seed=seed)
    rng = random.Random(seed)
    return base.with_costs([rng.choice([0.0, rng.uniform(-2.0, 2.0)]) for _ in base.costs])


@pytest.mark.parametrize("seed", range(12))
def test_negative_costs_give_valid_answers_and_local_search_helps(seed):
    g = _signed(seed, 16)
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    _valid(g, rg.extract.tree(g))
    assert _valid(g, improved) <= _valid(g, plain)
    assert improved.dag_cost >= _optimum(g) - 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_negative_costs_on_larger_cyclic_graphs_end_and_stay_acyclic(seed):
    g = _signed(seed, 3000)
    for result in (rg.extract.tree(g), rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)):
        _valid(g, result)


def test_a_negative_cycle_has_no_tree_optimum_but_every_extractor_answers():
    # a = leaf (1) or f(b) (-5); b = leaf (1) or g(a) (-5): trees through the cycle get ever
    # cheaper, a DAG answer must stop: f(b) over b's leaf, -4. Reaching it takes switching a
    # and b at once, more than local search's one class at a time.
    g = _graph({
        "a0": {"op": "a0", "eclass": "a", "cost": 1.0},
        "f": {"op": "f", "eclass": "a", "children": ["b0"], "cost": -5.0},
        "b0": {"op": "b0", "eclass": "b", "cost": 1.0},
        "g": {"op": "g", "eclass": "b", "children": ["a0"], "cost": -5.0},
    })
    tree = rg.extract.tree(g)
    assert tree.notes["tree_optimal"] is False
    _valid(g, tree)
    plain, improved = rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)
    assert _optimum(g) == -4.0 <= _valid(g, improved) <= _valid(g, plain)


def test_ties_at_negative_costs_are_not_taken_as_improvements():
    # Every node costs -1 or 0, with zero-cost cycles between a and b. A tie compared as
    # ``value < best * (1 - eps)`` would count as an improvement at a negative best.
    g = _graph({
        "a0": {"op": "a0", "eclass": "a", "cost": -1.0},
        "f": {"op": "f", "eclass": "a", "children": ["b0"], "cost": 0.0},
        "b0": {"op": "b0", "eclass": "b", "cost": -1.0},
        "g": {"op": "g", "eclass": "b", "children": ["a0"], "cost": 0.0},
    }, roots=("a", "b"))
    choice, estimate = greedy_module.greedy_choice(g)
    assert choice == {0: 0, 1: 2}  # the leaves, found first, are kept
    assert rg.extract.greedy_dag(g).dag_cost == -2.0


def test_tree_is_optimal_and_says_so_without_negative_costs():
    g = load_gym(GYM / "data" / "dummy_examples" / "choice.json")
    assert min(g.costs) == 0.0  # zero costs are allowed and keep tree exact
    assert rg.extract.tree(g).notes["tree_optimal"] is True


def test_improvements_per_class_are_bounded(monkeypatch):
    monkeypatch.setattr(greedy_module, "_MAX_IMPROVEMENTS", 0)
    g = _signed(3, 3000)
    capped = rg.extract.greedy_dag(g)
    _valid(g, capped)  # a class keeps its first node: still a complete, acyclic answer


# -- the extractor name --------------------------------------------------------------------------

def test_the_extractor_name_works_in_extract_bench(tmp_path, capsys):
    path = GYM / "test_data" / "fuzz" / "29.json"
    rows = run_file(str(path), ["greedy-dag", "greedy-dag+ls"])
    assert [r["extractor"] for r in rows] == ["greedy-dag", "greedy-dag+ls"]
    assert rows[1]["dag_cost"] < rows[0]["dag_cost"] and rows[1]["status"] == "ok"
    assert main(["extract-bench", str(path), "--extractors", "greedy-dag+ls", "--out", str(tmp_path),
                 "--no-plot", "--no-progress"]) == 0
    assert "greedy-dag+ls" in capsys.readouterr().out


def test_the_extractor_name_works_in_optimize():
    mod, params = rg.zoo.get("residual-mlp", layers=1, hidden=8)
    res = rg.optimize(mod, params=params, extractor="greedy-dag+ls", cost="flops", repeats=1, timing_budget=0,
                      iter_limit=4)
    assert res.check_passed and res.extractor == "greedy-dag+ls"
    assert res.cost_after <= res.cost_before * (1 + 1e-9)
