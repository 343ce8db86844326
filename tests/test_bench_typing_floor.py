"""bench_egraph's study of typing's floor: its i64 typings type every class the rules create (so
the figures it prints are those of a real typing, not of lookups that never match)."""

import importlib.util
import sys
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.egraph.encoding import schema_program
from relaygraph.egraph.rule_compiler import program
from relaygraph.egraph.rules import mentioned_constructors

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_egraph", ROOT / "benchmarks" / "bench_egraph.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def _sum(terms: int, shapes) -> rg.Function:
    xs = [rg.var(f"x{i}", shape=shapes[i % len(shapes)]) for i in range(terms)]
    total = xs[0]
    for v in xs[1:]:
        total = rg.op.add(total, v)
    return rg.Function(xs, total)


def _rules():
    names = ("add-commute", "add-assoc", "add-assoc<=")
    return [r for r in rg.load_rules(str(ROOT / "rules" / "algebraic.rules")) if r.name in names]


def _run(bench, fn, rules, mode: str, iterations: int, typing_runs_after: str, signatures=None) -> dict:
    """Sizes after ``iterations`` of the rules and ``mode``'s typing in plain egglog, beside
    rg.saturate's (``signatures``: the typed signature table, rg's own by default)."""
    first = bench.ours(fn, rules, iterations, False)
    table = first.egraph.state.signatures if signatures is None else signatures
    commands, typing = bench.i64_typing_program(fn, table, mentioned_constructors(program(rules)), mode)
    eg = bench.plain_egraph([schema_program(), *program(rules), *commands])
    for _ in range(iterations):
        eg.run_program(*eg.parse_program(f"(run-schedule (run {rules[0].ruleset}) {typing})"))
    if typing_runs_after:
        eg.run_program(*eg.parse_program(f"(run-schedule {typing_runs_after})"))
    sizes = dict(eg.run_program(*eg.parse_program("(print-size)"))[0].sizes)
    nodes, classes = first.egraph.sizes()
    return {"typed": sizes.get("TyI", 0), "classes": classes, "nodes": sizes.get("r:add", 0),
            "rg_nodes": nodes}


@pytest.mark.parametrize("mode", ["lagged", "fixed"])
def test_i64_typing_types_every_class_of_the_saturated_sum(bench, mode):
    # broadcasting shapes: the sums of different subsets have different types
    fn = _sum(7, [(2, 1), (1, 3), (2, 3)])
    got = _run(bench, fn, _rules(), mode, 3, "(saturate (run typing))")
    assert got["typed"] == got["classes"] > 7
    assert got["nodes"] + 7 == got["rg_nodes"]  # the same e-graph as rg.saturate's (7 variables)


def test_fixed_point_typing_leaves_no_class_untyped_after_each_iteration(bench):
    fn = _sum(7, [(2, 1), (1, 3), (2, 3)])
    fixed = _run(bench, fn, _rules(), "fixed", 3, "")
    assert fixed["typed"] == fixed["classes"]


def test_a_missing_signature_leaves_its_class_untyped(bench):
    # the lookups are in the query: a class whose signature the table lacks is not typed (so a
    # figure of a typing that never matched would show as untyped classes here)
    got = _run(bench, _sum(4, [(2, 2)]), _rules(), "fixed", 2, "", signatures={})
    assert got["typed"] < got["classes"]


@pytest.mark.parametrize("mode", ["write", "encoding"])
def test_sum_rules_typing_in_their_actions_build_rg_saturates_egraph_and_type_it(bench, mode):
    fn = _sum(7, [(2, 1), (1, 3), (2, 3)])
    rules = _rules()
    first = bench.ours(fn, rules, 3, False)
    typing = bench.typing_program(first.egraph.state.signatures, first.egraph.state.types,
                                  mentioned_constructors(program(rules)))
    eg = bench.plain_egraph(bench.sum_action_typing_commands(fn, typing, mode))
    if mode == "encoding":
        eg.run_program(*eg.parse_program("(run-schedule (run typing))"))
    for _ in range(3):
        eg.run_program(*eg.parse_program("(run-schedule (run algebraic))"))
    if mode == "encoding":  # a class is typed when its Ty is a T's class, which has a text
        for cmd in ("(relation typed (RExpr))", "(ruleset check-typed)",
                    "(rule ((= s (tytext (Ty e)))) ((typed e)) :ruleset check-typed)",
                    "(run-schedule (saturate (run check-typed)))"):
            eg.run_program(*eg.parse_program(cmd))
    sizes = dict(eg.run_program(*eg.parse_program("(print-size)"))[0].sizes)
    nodes, classes = first.egraph.sizes()
    assert sizes["r:add"] + 7 == nodes  # the same e-graph as rg.saturate's (7 variables)
    if mode == "encoding":
        assert sizes["typed"] == classes
        # by the types rg found (and "()"): no other type appeared
        types = set(first.egraph.state.signatures.values()) | {"()"}
        assert sizes["Ty"] == classes and sizes["T"] == len(types) == 4
