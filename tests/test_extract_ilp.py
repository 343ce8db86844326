"""The ILP's reduction to a decision core: what it removes, that it keeps the optimum, and the
TENSAT proofs it makes possible."""

import itertools
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaygraph as rg
from relaygraph.egraph.extract import ExtractionGraph, check, find_cycle, from_json, load_gym
from relaygraph.egraph.extract.check import needed_classes
from relaygraph.egraph.extract.reduce import reduce_graph

TENSAT = Path(__file__).parent / "data" / "extraction-gym" / "data" / "tensat"


def _random_egraph(seed: int) -> ExtractionGraph:
    """A tiny e-graph with free and single-node classes, back edges (cycles) and one or two roots."""
    rng = random.Random(seed)
    n_classes = rng.randint(2, 9)
    classes, children, costs = [], [], []
    for k in range(n_classes):
        for _ in range(rng.choice([1, 1, 2, 3])):
            arity = rng.choice([0, 1, 1, 2, 3]) if k else 0
            # a quarter of the children may be any class (back edges close cycles)
            kids = [rng.randrange(n_classes if rng.random() < 0.25 else k) for _ in range(arity)]
            classes.append(k)
            children.append(kids)
            costs.append(rng.choice([0.0, 0.0, 0.5, 1.0, 2.0, 3.0]))
    first = {k: classes.index(k) for k in range(n_classes)}
    roots = [n_classes - 1] + ([rng.randrange(n_classes)] if rng.random() < 0.3 else [])
    return ExtractionGraph([str(i) for i in range(len(classes))], [f"op{i}" for i in range(len(classes))],
                           classes, [[first[c] for c in kids] for kids in children], costs,
                           [f"c{k}" for k in range(n_classes)], roots)


def _brute_force(g: ExtractionGraph) -> float:
    """The DAG-optimal cost over every choice of one node per class (tiny e-graphs only)."""
    best = math.inf
    options = [[n for n in nodes if g.usable(n)] or [None] for nodes in g.class_nodes]
    for picked in itertools.product(*options):
        choice = {k: n for k, n in enumerate(picked) if n is not None}
        try:
            needed = needed_classes(g, choice)
        except rg.extract.ExtractionError:
            continue
        trimmed = {k: choice[k] for k in needed}
        if find_cycle(g, trimmed) is None:
            best = min(best, sum(g.costs[trimmed[k]] for k in needed))
    return best


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_ilp_on_the_reduced_core_finds_the_brute_force_optimum(seed):
    g = _random_egraph(seed)
    optimum = _brute_force(g)
    if optimum == math.inf:
        with pytest.raises(rg.extract.ExtractionError, match="has no acyclic term"):
            rg.extract.ilp(g)
        return
    r = rg.extract.ilp(g, time_limit=20)
    assert r.optimal and check(g, r.choice) == pytest.approx(r.dag_cost)
    assert r.dag_cost == pytest.approx(optimum, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_reduced_answers_expand_and_acyclic_answers_restrict_at_no_extra_cost(seed):
    g = _random_egraph(seed)
    try:
        reduction = reduce_graph(g)
        start = rg.extract.greedy_dag(g)
    except rg.extract.ExtractionError as exc:
        # only an e-graph whose root has no acyclic term at all may be refused
        assert "has no acyclic term" in str(exc) and _brute_force(g) == math.inf, exc
        return
    core = reduction.graph
    restricted = reduction.restrict(start.choice)
    core_cost = check(core, {k: restricted[k] for k in needed_classes(core, restricted)})
    assert core_cost <= start.dag_cost + 1e-9
    back = reduction.expand(restricted)
    assert check(g, {k: back[k] for k in needed_classes(g, back)}) == pytest.approx(core_cost, abs=1e-9)


def _doc(nodes: dict, roots=("R",)) -> ExtractionGraph:
    return from_json({"nodes": {name: {"op": name, "eclass": c, "children": list(kids), "cost": cost}
                                for name, (c, kids, cost) in nodes.items()}, "root_eclasses": list(roots)})


def test_free_single_node_classes_dissolve_into_their_users():
    # R = f(P) | g(Q); P = pair(A, B) costs nothing, so f needs A and B directly
    g = _doc({"f": ("R", ["p"], 1.0), "g": ("R", ["q"], 9.0), "p": ("P", ["a", "b"], 0.0),
              "q": ("Q", ["a"], 1.0), "a": ("A", [], 2.0), "a2": ("A", [], 3.0), "b": ("B", [], 2.0),
              "b2": ("B", [], 4.0)})
    reduction = reduce_graph(g)
    kept = {g.class_ids[int(c)] for c in reduction.graph.class_ids}
    assert "P" not in kept and "R" in kept
    assert reduction.stats["dissolved"] >= 1
    r = rg.extract.ilp(g)
    assert r.choice_ids() == {"R": "f", "P": "p", "A": "a", "B": "b"} and r.dag_cost == 5.0


def test_a_single_node_class_used_by_one_class_merges_into_its_users():
    # M is used by both nodes of R and nothing else: each takes M's cost (A is a root: it stays)
    g = _doc({"f": ("R", ["m", "a"], 1.0), "g": ("R", ["m"], 4.0), "m": ("M", [], 2.0),
              "a": ("A", [], 1.0), "a2": ("A", [], 1.5)}, roots=("R", "A"))
    reduction = reduce_graph(g)
    kept = {g.class_ids[int(c)] for c in reduction.graph.class_ids}
    assert kept == {"R", "A"} and reduction.stats["merged"] == 1
    assert sorted(reduction.graph.costs) == [1.0, 3.0, 6.0]
    assert rg.extract.ilp(g).choice_ids() == {"R": "f", "M": "m", "A": "a"}


def test_nodes_that_can_only_close_a_cycle_are_dropped():
    # every term of B contains A (B's only node needs A), so A = a(B) can never be acyclic
    g = _doc({"r": ("R", ["x", "y"], 1.0), "x": ("A", ["y"], 0.5), "x0": ("A", [], 5.0),
              "y": ("B", ["x"], 1.0)})
    reduction = reduce_graph(g)
    assert reduction.stats["infeasible"] >= 1
    assert g.node_ids.index("x") not in reduction.node_of
    r = rg.extract.ilp(g)
    assert r.choice_ids() == {"R": "r", "A": "x0", "B": "y"} and r.optimal


def test_dominated_nodes_map_a_warm_start_to_their_replacement():
    # R = f(A, B) | g(A) at the same cost: g needs less, so f goes and maps to g
    g = _doc({"f": ("R", ["a", "b"], 2.0), "g": ("R", ["a"], 2.0), "a": ("A", [], 1.0), "a2": ("A", [], 2.0),
              "b": ("B", [], 1.0), "b2": ("B", [], 2.0)})
    reduction = reduce_graph(g)
    f, gn = g.node_ids.index("f"), g.node_ids.index("g")
    assert reduction.replaced_by[f] == gn
    start = {g.class_index(k): g.node_ids.index(n) for k, n in (("R", "f"), ("A", "a"), ("B", "b"))}
    assert gn in {reduction.node_of[n] for n in reduction.restrict(start).values()}


@pytest.mark.parametrize("name, optimum", [
    ("vgg.json", 4.850757016778516), ("vgg_acyclic.json", 4.866774947848171),
    ("resnet50.json", 4.385794964760862), ("resnet50_acyclic.json", 4.41599300802045)])
def test_tensat_ilp_proves_the_optimum(name, optimum):
    g = load_gym(TENSAT / name)
    greedy = rg.extract.greedy_dag(g)
    r = rg.extract.ilp(g, time_limit=60, warm_start=greedy)
    assert r.optimal and r.gap == 0.0 and r.status == "ok"
    assert check(g, r.choice) == pytest.approx(r.dag_cost, rel=1e-12)
    assert r.dag_cost == pytest.approx(optimum, rel=1e-9) and r.dag_cost <= greedy.dag_cost + 1e-12
