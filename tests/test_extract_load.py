"""Loading e-graph files: negative and zero costs load, bad input is refused with the node or class named."""

import json
import re
import warnings
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.extract import ExtractionError, ExtractionGraph, check, from_json, load_gym

GYM = Path(__file__).parent / "data" / "extraction-gym"
LEAN = GYM / "data" / "lean-egg"


def _doc(nodes, roots=("a",)):
    return {"nodes": nodes, "root_eclasses": list(roots)}


SIGNED = _doc({
    "x": {"op": "x", "eclass": "b", "cost": -2.5},
    "y": {"op": "y", "eclass": "b", "cost": 0},
    "f": {"op": "f", "eclass": "a", "children": ["x", "x"], "cost": 0.0},
    "g": {"op": "g", "eclass": "a", "children": [], "cost": 3},
})


def _write(tmp_path, doc, name="bad.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _bench(tmp_path, path, extractors="tree,greedy-dag,greedy-dag+ls"):
    return main(["extract-bench", str(path), "--extractors", extractors, "--out", str(tmp_path / "out"),
                 "--no-plot", "--no-progress"])


# -- negative and zero costs ---------------------------------------------------------------------

def test_negative_and_zero_costs_load_and_extract_through_the_api():
    g = from_json(SIGNED, name="signed.json")
    assert g.costs == [-2.5, 0.0, 0.0, 3.0]
    for result in (rg.extract.tree(g), rg.extract.greedy_dag(g), rg.extract.greedy_dag(g, improve=True)):
        assert check(g, result.choice) == result.dag_cost
    # f over the shared class b (x at -2.5, counted once) beats the leaf g at 3
    assert rg.extract.greedy_dag(g, improve=True).dag_cost == -2.5
    assert rg.extract.tree(g).notes["tree_optimal"] is False


def test_negative_costs_survive_a_round_trip(tmp_path):
    path = _write(tmp_path, SIGNED, "signed.json")
    g = load_gym(path)
    g.save(tmp_path / "copy.json")
    assert load_gym(tmp_path / "copy.json").costs == g.costs


def test_negative_and_zero_costs_through_the_cli(tmp_path, capsys):
    path = _write(tmp_path, SIGNED, "signed.json")
    assert _bench(tmp_path, path) == 0
    out = capsys.readouterr().out
    assert "greedy-dag+ls" in out and "-2.5" in out
    rows = (tmp_path / "out" / "extract-bench.csv").read_text().splitlines()
    assert len(rows) == 4 and all(",ok" in r for r in rows[1:])


# -- bad input -----------------------------------------------------------------------------------

X = '{"nodes": {"x": {"op": "x", "eclass": "a"%s}}%s}'
ROOT_A = ', "root_eclasses": ["a"]'
BAD_TEXT = [
    (X % (', "cost": NaN', ROOT_A), "node 'x' has cost nan"),
    (X % (', "cost": Infinity', ROOT_A), "node 'x' has cost inf"),
    (X % (', "cost": -Infinity', ROOT_A), "node 'x' has cost -inf"),
    (X % (', "cost": 1e999', ROOT_A), "node 'x' has cost inf"),
    (X % (', "cost": 1' + "0" * 400, ROOT_A), "node 'x' has cost inf"),
    (X % (', "children": ["gone"]', ROOT_A), "node 'x' has child 'gone', which is not a node"),
    (X % ("", ', "root_eclasses": ["a", "empty"]'), "root e-class 'empty' has no nodes"),
    (X % ("", ', "root_eclasses": []'), "'root_eclasses' must be a non-empty list"),
    (X % ("", ""), "'root_eclasses' must be a non-empty list"),
    (X % ("", ', "root_eclasses": [["a"]]'), "root e-class \\['a'\\] is not a class id"),
]


@pytest.mark.parametrize("text,message", BAD_TEXT, ids=range(len(BAD_TEXT)))
def test_bad_files_are_refused_naming_the_node_or_class(tmp_path, text, message):
    with pytest.raises(ExtractionError, match=f"bad.json: {message}"):
        load_gym(_write(tmp_path, text))


@pytest.mark.parametrize("text,message", BAD_TEXT, ids=range(len(BAD_TEXT)))
def test_bad_files_exit_2_through_the_cli(tmp_path, capsys, text, message):
    assert _bench(tmp_path, _write(tmp_path, text)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("relaygraph: error: ") and len(re.findall(message, err)) == 1


@pytest.mark.parametrize("kwargs,message", [
    ({"costs": [float("nan")]}, "node 'x' has cost nan"),
    ({"costs": [float("-inf")]}, "node 'x' has cost -inf"),
    ({"children": [[5]]}, "node 'x' has an unknown child"),
    ({"roots": [1]}, "root e-class 'empty' has no nodes"),
    ({"roots": []}, "no root e-classes"),
    ({"roots": [7]}, "unknown root class index 7"),
    ({"subsumed": [3]}, "subsumed node index 3 is not a node"),
])
def test_the_constructor_refuses_the_same_bad_input(kwargs, message):
    args = {"node_ids": ["x"], "ops": ["x"], "classes": [0], "children": [[]], "costs": [1.0],
            "class_ids": ["a", "empty"], "roots": [0]}
    subsumed = kwargs.pop("subsumed", ())
    args.update(kwargs)
    with pytest.raises(ExtractionError, match=message):
        ExtractionGraph(**args, subsumed=subsumed, name="api")


def test_with_costs_refuses_non_finite_costs_but_takes_negative_ones():
    g = from_json(SIGNED)
    assert g.with_costs([-1.0, -2.0, 0.0, 1.0]).costs == [-1.0, -2.0, 0.0, 1.0]
    with pytest.raises(ExtractionError, match="has cost nan"):
        g.with_costs([float("nan"), 0.0, 0.0, 0.0])


# -- roots that a merge made non-canonical (the gym's lean-egg set) ------------------------------

def test_a_root_id_without_nodes_is_refused_by_default():
    with pytest.raises(ExtractionError, match="Explosion #2.json: root e-class '3' has no nodes"):
        load_gym(LEAN / "Explosion #2.json")


def test_missing_roots_drop_keeps_the_other_root_with_a_warning():
    with pytest.warns(UserWarning, match="dropped root e-class '3' with no nodes"):
        g = load_gym(LEAN / "Explosion #2.json", missing_roots="drop")
    assert [g.class_ids[r] for r in g.roots] == ["1"]
    for result in (rg.extract.tree(g), rg.extract.greedy_dag(g, improve=True)):
        assert check(g, result.choice) == result.dag_cost


def test_missing_roots_drop_still_refuses_a_file_with_no_root_left():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped quietly before the refusal
        with pytest.raises(ExtractionError, match="root e-class '7' has no nodes .and no other root"):
            load_gym(LEAN / "Activations #3.json", missing_roots="drop")


def test_missing_roots_takes_only_known_policies():
    with pytest.raises(ExtractionError, match="missing_roots must be one of error, drop"):
        load_gym(LEAN / "Explosion #2.json", missing_roots="guess")


def test_a_file_with_a_stale_root_exits_2_through_the_cli(tmp_path, capsys):
    assert _bench(tmp_path, LEAN / "Explosion #2.json", "greedy-dag") == 2
    err = capsys.readouterr().err
    assert "root e-class '3' has no nodes" in err and "Traceback" not in err


def test_extract_bench_and_a_study_read_stale_roots_when_asked(tmp_path, capsys):
    from relaygraph.cli import main

    path = str(LEAN / "Explosion #2.json")
    assert main(["extract-bench", path, "--extractors", "greedy-dag", "--out", str(tmp_path / "a"),
                 "--no-plot", "--no-progress"]) == 2
    assert "root e-class '3' has no nodes" in capsys.readouterr().err
    assert main(["extract-bench", path, "--extractors", "greedy-dag", "--out", str(tmp_path / "b"),
                 "--no-plot", "--no-progress", "--missing-roots", "drop"]) == 0
    out = capsys.readouterr().out
    assert "has no nodes" not in out and " ok" in out
