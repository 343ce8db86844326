"""egglog's own extractor, on gym files (in a child process) and on live egglog e-graphs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.egraph.extract import check, find_cycle, load_gym
from relaygraph.egraph.extract.egglog_extract import gym_program

GYM = Path(__file__).parent / "data" / "extraction-gym"
CASES = ["data/dummy_examples/choice.json", "test_data/crafted/multi_root.json",
         "data/dummy_examples/loop.json", "test_data/fuzz/27.json", "test_data/fuzz/37.json",
         "data/tensat/vgg_acyclic.json"]


@pytest.mark.parametrize("case", CASES)
def test_egglog_extraction_is_valid_and_tree_optimal(case):
    g = load_gym(GYM / case)
    r = rg.extract.egglog_extract(g, time_limit=60)
    assert r.status == "ok" and find_cycle(g, r.choice) is None
    assert check(g, r.choice) == pytest.approx(r.dag_cost)
    # egglog extracts by tree cost: on these files it ties the tree extractor
    assert r.tree_cost == pytest.approx(rg.extract.tree(g).tree_cost, rel=1e-6)
    assert r.notes["egglog_cost"] > 0


def test_egglog_program_scales_costs_to_integers():
    g = load_gym(GYM / "test_data" / "crafted" / "multi_root.json")
    program = gym_program(g)
    assert program[:2] == ["(sort T)", "(constructor C (i64) T :unextractable)"]
    costs = [int(line.rsplit(" ", 1)[1][:-1]) for line in program if line.startswith("(set ")]
    assert sorted(costs) == [0, 500_000_000, 1_000_000_000]  # 0, 5 and 10 with 10 -> 10**9


def test_egglog_past_its_time_limit_reports_timeout():
    g = load_gym(GYM / "data" / "tensat" / "resnet50.json")
    r = rg.extract.egglog_extract(g, time_limit=0.05)
    assert r.status == "timeout" and r.choice is None


def test_live_egglog_egraph_is_serialized_and_extracted_by_egglog():
    from egglog import EGraph, Expr, StringLike, i64Like, rewrite, vars_

    class Num(Expr):
        def __init__(self, v: i64Like) -> None: ...

        @classmethod
        def var(cls, name: StringLike) -> Num: ...

        def __add__(self, other: Num) -> Num: ...

        def __mul__(self, other: Num) -> Num: ...

    egraph = EGraph()
    x = egraph.let("x", Num.var("x"))
    expr = egraph.let("expr", (x + Num(0)) * Num(2))
    (a,) = vars_("a", Num)
    egraph.register(rewrite(a + Num(0)).to(a), rewrite(a * Num(2)).to(a + a))
    egraph.run(5)
    g = rg.extract.from_egglog(egraph, [expr], name="live")
    assert g.source_egraph is not None and g.num_classes >= 4
    live = rg.extract.egglog_extract(g)
    assert re.fullmatch(r'\(\w+Num___add__ \(\w+Num_var "x"\) \(\w+Num_var "x"\)\)', live.term())
    assert live.dag_cost == 3.0  # x + x shares x: add, var, "x"
    assert rg.extract.tree(g).tree_cost == live.tree_cost == 5.0  # x * 2 ties x + x as a tree
    for extract in (rg.extract.greedy_dag, rg.extract.ilp):
        assert extract(g).dag_cost == 3.0


def test_from_egglog_needs_roots():
    from egglog import EGraph

    with pytest.raises(rg.extract.ExtractionError, match="needs the root expressions"):
        rg.extract.from_egglog(EGraph(), [])
