"""The independent checker, DAG and tree costs, and the persistent sets greedy DAG relies on."""

import math

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from relaygraph.egraph.extract import InvalidChoice, check, dag_cost, from_json, pset, tree, tree_cost


def _graph():
    # root r = f(a, a) or g; a = leaf (cost 10) or h(r) (which closes a cycle)
    return from_json({"nodes": {
        "f": {"op": "f", "eclass": "r", "cost": 0.0, "children": ["leaf", "leaf"]},
        "g": {"op": "g", "eclass": "r", "cost": 15.0},
        "leaf": {"op": "leaf", "eclass": "a", "cost": 10.0},
        "h": {"op": "h", "eclass": "a", "cost": 1.0, "children": ["f"]},
        "other": {"op": "o", "eclass": "b", "cost": 3.0},
    }, "root_eclasses": ["r"]}, name="small")


def _ix(g, node_id):
    return g.node_ids.index(node_id)


def test_dag_cost_counts_a_shared_class_once_and_tree_cost_per_use():
    g = _graph()
    choice = {g.class_index("r"): _ix(g, "f"), g.class_index("a"): _ix(g, "leaf")}
    assert check(g, choice) == dag_cost(g, choice) == 10.0
    assert tree_cost(g, choice) == 20.0


def test_unneeded_classes_in_a_choice_are_ignored():
    g = _graph()
    choice = {g.class_index("r"): _ix(g, "g"), g.class_index("b"): _ix(g, "other")}
    assert check(g, choice) == 15.0


def test_checker_rejects_a_missing_needed_class():
    g = _graph()
    with pytest.raises(InvalidChoice, match="needed e-class 'a' has no chosen node"):
        check(g, {g.class_index("r"): _ix(g, "f")})


def test_checker_rejects_a_node_from_another_class():
    g = _graph()
    with pytest.raises(InvalidChoice, match="not in that class"):
        check(g, {g.class_index("r"): _ix(g, "leaf")})


def test_checker_rejects_a_cycle_and_names_it():
    g = _graph()
    choice = {g.class_index("r"): _ix(g, "f"), g.class_index("a"): _ix(g, "h")}
    with pytest.raises(InvalidChoice, match="cycle through e-classes r -> a -> r"):
        check(g, choice)
    with pytest.raises(InvalidChoice, match="cycle through e-classes r -> a -> r"):
        tree_cost(g, choice)


def test_checker_rejects_a_subsumed_node():
    doc = {"nodes": {"x": {"op": "x", "eclass": "a", "subsumed": True}}, "root_eclasses": ["a"]}
    g = from_json(doc)
    with pytest.raises(InvalidChoice, match="subsumed"):
        check(g, {0: 0})


def test_tree_cost_of_a_deep_shared_dag_becomes_inf_not_an_error():
    # 1100 levels of x_i = add(x_{i-1}, x_{i-1}): the tree doubles per level, past float range
    nodes = {"n0": {"op": "x", "eclass": "c0", "cost": 1.0}}
    for i in range(1, 1100):
        nodes[f"n{i}"] = {"op": "add", "eclass": f"c{i}", "cost": 1.0, "children": [f"n{i-1}"] * 2}
    g = from_json({"nodes": nodes, "root_eclasses": ["c1099"]})
    r = tree(g)
    assert r.dag_cost == 1100.0 and math.isinf(r.tree_cost)


def test_result_term_prints_the_extracted_expression():
    g = _graph()
    r = tree(g)
    assert r.term() == "g"
    choice = {g.class_index("r"): _ix(g, "f"), g.class_index("a"): _ix(g, "leaf")}
    r.choice = choice
    assert r.term() == "(f leaf leaf)"
    assert r.choice_ids() == {"r": "f", "a": "leaf"}


# -- persistent sets --------------------------------------------------------------------------
_items = st.dictionaries(st.integers(0, 4000), st.floats(0, 100, allow_nan=False), max_size=40)


def _build(items, levels):
    s = None
    for k, v in items.items():
        s = pset.union(s, pset.singleton(k, v, levels), levels)
    return s


@settings(max_examples=60, deadline=None)
@given(_items, _items)
def test_union_is_set_union_with_left_values_and_exact_totals(a, b):
    levels = pset.levels_for(4001)
    sa, sb = _build(a, levels), _build(b, levels)
    su = pset.union(sa, sb, levels)
    merged = {**b, **a}
    for k in range(0, 4001, 37):
        assert pset.contains(su, k, levels) == (k in merged)
    for k in merged:
        assert pset.contains(su, k, levels)
    assert math.isclose(pset.total(su), math.fsum(merged.values()), rel_tol=1e-9, abs_tol=1e-9)


def test_union_shares_history_instead_of_copying():
    levels = pset.levels_for(100_000)
    base = _build({k: 1.0 for k in range(0, 5000, 3)}, levels)
    grown = pset.union(base, pset.singleton(99_999, 2.0, levels), levels)
    assert pset.union(grown, base, levels) is grown  # base adds nothing: grown itself comes back
    assert pset.union(base, grown, levels) is grown
    assert pset.total(grown) == pset.total(base) + 2.0
    assert pset.levels_for(16) == 1 and pset.levels_for(17) == 2
