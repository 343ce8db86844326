"""Exact extraction by parts: where an e-graph separates, and that solving it part by part keeps
the optimum (against the whole program solved at once)."""

import random
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaygraph as rg
from relaygraph.egraph.extract import ExtractionGraph, check, load_gym
from relaygraph.egraph.extract.decompose import split

TENSAT = Path(__file__).parent / "data" / "extraction-gym" / "data" / "tensat"


def _graph(spec: list[list[tuple[float, list[int]]]], roots: list[int]) -> ExtractionGraph:
    """An e-graph from, per class, its nodes as (cost, child classes)."""
    classes, kids, costs = [], [], []
    for k, nodes in enumerate(spec):
        for cost, children in nodes:
            classes.append(k)
            kids.append(children)
            costs.append(cost)
    first: dict[int, int] = {}
    for i, k in enumerate(classes):
        first.setdefault(k, i)
    return ExtractionGraph([f"n{i}" for i in range(len(classes))], [f"op{i}" for i in range(len(classes))],
                           classes, [[first[c] for c in ch] for ch in kids], costs,
                           [f"c{k}" for k in range(len(spec))], roots)


def _blocks(seed: int, n_blocks: int = 4, size: int = 6, cross: bool = False) -> ExtractionGraph:
    """Blocks of ``size`` classes stacked like a network's layers: each block's classes read the
    classes below them in the block, a shared constant (a class with a free leaf), and the block
    below's output (its last class); a few back edges inside a block close cycles. With
    ``cross``, some nodes also read a class inside the block two below (no separation there)."""
    rng = random.Random(seed)
    spec: list[list[tuple[float, list[int]]]] = [[(0.0, []), (1.0, [])]]  # 0: the shared constant
    spec.append([(0.5, []), (0.2, [0])])  # 1: the input
    out = 1
    for b in range(n_blocks):
        base = len(spec)
        for j in range(size):
            k = base + j
            nodes = []
            for _ in range(rng.choice([1, 2, 2, 3])):
                below = [out, 0] + list(range(base, k))
                arity = rng.choice([1, 1, 2, 3])
                children = [rng.choice(below) for _ in range(arity)]
                if j < size - 1 and rng.random() < 0.15:  # a back edge: a cycle inside the block
                    children.append(rng.randrange(k + 1, base + size))
                if cross and b >= 2 and rng.random() < 0.2:
                    children.append(base - size - 1 - rng.randrange(size))
                nodes.append((rng.choice([0.0, 0.3, 1.0, 2.0, 5.0]), children))
            nodes.append((rng.choice([3.0, 8.0]), [out]))  # every class has an acyclic term
            spec.append(nodes)
        out = len(spec) - 1
    return _graph(spec, [out])


def _no_parts(g):
    return rg.extract.ilp(g, time_limit=60, parts=False)


def test_a_stack_of_blocks_splits_at_the_block_outputs_despite_the_shared_constant():
    g = _blocks(1, n_blocks=5, size=6)
    pieces = split(g, min_part=4)
    assert pieces is not None and len(pieces.parts) >= 3
    outputs = {2 + 6 * b + 5 for b in range(5)}  # each block's last class
    roots = {p.root for p in pieces.parts if p.root is not None}
    assert roots and roots <= outputs | set(range(2, 32))
    assert pieces.free == {0: 0}  # the shared constant's free leaf, set aside
    assert pieces.parts[-1].root is None  # the top part, last
    # every class the root reaches is solved in exactly one part (free ones in none)
    reached, stack = {g.roots[0]}, [g.roots[0]]
    while stack:
        for n in g.class_nodes[stack.pop()]:
            for k in g.child_classes[n]:
                if k not in reached:
                    reached.add(k)
                    stack.append(k)
    solved = [k for p in pieces.parts for k in p.classes]
    assert len(solved) == len(set(solved)) and set(solved) == reached - {0}


def test_a_class_whose_descendants_are_reached_around_it_does_not_separate():
    # 4 <- 3 <- 2 <- 1 <- 0, and the root 4 also reads 1 directly: 2 and 3 do not separate (1 is
    # reached around them); a cycle through 3 and 2 (2 reads 3) keeps 2 from separating too. Only
    # 1 separates (0 is reached through it alone).
    spec = [[(1.0, [])], [(1.0, [0]), (2.0, [])], [(1.0, [1]), (1.0, [3])], [(1.0, [2]), (4.0, [1])],
            [(1.0, [3, 1])]]
    g = _graph(spec, [4])
    pieces = split(g, min_part=1)
    assert [p.root for p in pieces.parts] == [1, None]
    assert pieces.parts[1].classes == [2, 3, 4] and pieces.parts[1].below == [1]
    # without the direct read of 1 and the cycle, 3 separates
    spec2 = [[(1.0, [])], [(1.0, [0]), (2.0, [])], [(1.0, [1])], [(1.0, [2]), (4.0, [1])], [(1.0, [3])]]
    pieces = split(_graph(spec2, [4]), min_part=1)
    assert pieces is not None and 3 in {p.root for p in pieces.parts}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.booleans())
def test_parts_keep_the_optimum(seed, cross):
    g = _blocks(seed, n_blocks=4, size=5, cross=cross)
    whole = _no_parts(g)
    by_parts = rg.extract.ilp(g, time_limit=60, min_part=3)
    assert whole.optimal and by_parts.optimal
    assert by_parts.dag_cost == pytest.approx(whole.dag_cost)
    assert check(g, by_parts.choice) == pytest.approx(by_parts.dag_cost)


def test_parts_are_counted_in_the_notes_and_a_warm_start_is_used():
    g = _blocks(7, n_blocks=6, size=6)
    start = rg.extract.greedy_dag(g)
    r = rg.extract.ilp(g, time_limit=60, min_part=4, warm_start=start)
    assert r.notes["parts"] >= 3 and r.notes["parts_optimal"] == r.notes["parts"]
    assert r.notes["solver"].startswith(f"by parts ({r.notes['parts']}):")
    assert r.optimal and r.dag_cost <= start.dag_cost and r.notes["lower_bound"] == r.dag_cost
    assert r.dag_cost == pytest.approx(_no_parts(g).dag_cost)


def test_a_part_out_of_time_gives_a_valid_bound_and_gap():
    g = _blocks(3, n_blocks=8, size=8)
    r = rg.extract.ilp(g, time_limit=1e-3, min_part=4)
    best = _no_parts(g).dag_cost
    assert check(g, r.choice) == pytest.approx(r.dag_cost)
    assert r.notes["lower_bound"] <= best + 1e-9  # a bound of the optimum, proved or not
    if not r.optimal:
        assert r.status == "time-limit" and r.gap >= 0.0


def test_negative_costs_are_solved_whole():
    g = _blocks(5, n_blocks=4, size=5)
    g = g.with_costs([c - 0.1 if i % 7 == 0 else c for i, c in enumerate(g.costs)])
    r = rg.extract.ilp(g, time_limit=60, min_part=3)
    assert "parts" not in r.notes


def test_tensat_resnet50_splits_and_keeps_its_optimum():
    g = load_gym(TENSAT / "resnet50.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = rg.extract.ilp(g, time_limit=60)
        whole = rg.extract.ilp(g, time_limit=60, parts=False)
    assert r.notes["parts"] >= 2 and r.optimal and whole.optimal
    assert r.dag_cost == pytest.approx(whole.dag_cost)


def test_a_chain_of_100000_classes_splits_without_recursion():
    n = 100_000
    spec = [[(1.0, [])]] + [[(1.0, [k - 1]), (2.0, [k - 1])] for k in range(1, n)]
    g = _graph(spec, [n - 1])
    start = time.perf_counter()
    pieces = split(g)
    assert pieces is not None and len(pieces.parts) > 100
    assert time.perf_counter() - start < 60
    assert sum(len(p.classes) for p in pieces.parts) == n


def test_nodes_without_an_acyclic_term_do_not_break_the_parts():
    # the root class also holds a node reading a class whose only node is a self-loop (never
    # usable), and a second root has no acyclic term at all: the first is dropped, the second is
    # reported as solving the e-graph whole reports it
    g = _blocks(1, n_blocks=5, size=6)
    n, k, root = g.num_nodes, g.num_classes, g.roots[0]

    def with_dead(roots):
        return ExtractionGraph(g.node_ids + ["dead", "reads-dead"], g.ops + ["dead", "reads-dead"],
                               g.classes + [k, root], list(g.children) + [[n], [n]], g.costs + [1.0, 0.1],
                               g.class_ids + ["dead"], roots)

    h = with_dead([root])
    assert split(h, min_part=4) is not None
    r = rg.extract.ilp(h, time_limit=20, min_part=4)
    assert r.optimal and r.dag_cost == pytest.approx(_no_parts(h).dag_cost)
    bad = with_dead([root, k])
    assert split(bad, min_part=4) is None
    with pytest.raises(rg.extract.ExtractionError) as whole:
        rg.extract.ilp(bad, time_limit=20, parts=False)
    with pytest.raises(rg.extract.ExtractionError) as by_parts:
        rg.extract.ilp(bad, time_limit=20, min_part=4)
    assert str(by_parts.value) == str(whole.value)
