"""The extraction e-graph: reading and writing the extraction-gym format, and bad input."""

import json
import pickle
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.egraph.extract import ExtractionError, from_json, load_gym

GYM = Path(__file__).parent / "data" / "extraction-gym"


def _doc(nodes, roots=("a",), **extra):
    return {"nodes": nodes, "root_eclasses": list(roots), **extra}


def test_load_gym_reads_nodes_classes_costs_and_roots():
    g = rg.extract.load_gym(GYM / "test_data" / "crafted" / "multi_root.json")
    assert (g.num_nodes, g.num_classes) == (3, 2)
    assert [g.class_ids[r] for r in g.roots] == ["0", "1"]
    n0 = g.node_ids.index("0__0")
    assert g.ops[n0] == "node_0" and g.costs[n0] == 0.0
    # children are written as node ids but stand for their class, with multiplicity
    assert g.child_classes[n0] == (g.class_index("1"), g.class_index("1"))
    assert sorted(g.node_ids[n] for n in g.parents[g.class_index("1")]) == ["0__0"]


def test_round_trip_through_json_keeps_everything(tmp_path):
    g = load_gym(GYM / "data" / "dummy_examples" / "choice.json")
    path = tmp_path / "copy.json"
    g.save(path)
    h = load_gym(path)
    assert h.node_ids == g.node_ids and h.ops == g.ops and h.costs == g.costs
    assert h.child_classes == g.child_classes and h.roots == g.roots
    assert h.class_data == g.class_data
    assert json.loads(path.read_text())["root_eclasses"] == ["51"]


def test_missing_cost_defaults_to_one_and_extra_fields_survive():
    g = from_json(_doc({"x": {"op": "x", "eclass": "a", "attrs": {"axis": 1}}}))
    assert g.costs == [1.0]
    assert g.to_json()["nodes"]["x"]["attrs"] == {"axis": 1}


def test_subsumed_nodes_are_kept_but_never_usable():
    g = from_json(_doc({"x": {"op": "x", "eclass": "a", "subsumed": True},
                        "y": {"op": "y", "eclass": "a", "cost": 5}}))
    assert not g.usable(0) and g.usable(1)
    assert rg.extract.tree(g).choice == {0: 1}
    assert g.to_json()["nodes"]["x"]["subsumed"] is True


def test_duplicate_roots_are_needed_once():
    g = load_gym(GYM / "test_data" / "fuzz" / "19.json")
    assert len(g.roots) == 1


@pytest.mark.parametrize("doc, message", [
    ({"nodes": []}, "'nodes' object"),
    (_doc({"x": {"op": "x"}}), "needs an 'eclass'"),
    (_doc({"x": {"op": "x", "eclass": "a", "children": ["nope"]}}), "child 'nope', which is not a node"),
    (_doc({"x": {"op": "x", "eclass": "a", "cost": float("nan")}}), "node .x. has cost nan"),
    (_doc({"x": {"op": "x", "eclass": "a", "cost": "cheap"}}), "non-numeric cost"),
    (_doc({"x": {"op": "x", "eclass": "a"}}, roots=("b",)), "root e-class 'b' has no nodes"),
    (_doc({"x": {"op": "x", "eclass": "a"}}, roots=()), "non-empty list"),
])
def test_malformed_documents_give_clear_errors(doc, message):
    with pytest.raises(ExtractionError, match=message):
        from_json(doc, name="bad.json")


def test_unreadable_files_give_clear_errors(tmp_path):
    with pytest.raises(ExtractionError, match="no such file"):
        load_gym(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": {')
    with pytest.raises(ExtractionError, match="not valid JSON"):
        load_gym(broken)
    with pytest.raises(ExtractionError, match="is a directory"):
        load_gym(tmp_path)


def test_with_costs_replaces_costs_only():
    g = load_gym(GYM / "test_data" / "crafted" / "tree.json")
    h = g.with_costs([2.0] * g.num_nodes)
    assert h.costs == [2.0] * g.num_nodes and h.child_classes == g.child_classes
    with pytest.raises(ExtractionError, match="costs for"):
        g.with_costs([1.0])


def test_graph_pickles_without_its_live_egraph():
    g = load_gym(GYM / "test_data" / "crafted" / "tree.json")
    g.source_egraph = (object(), ())
    h = pickle.loads(pickle.dumps(g))
    assert h.source_egraph is None and h.node_ids == g.node_ids
