"""Saturation: limits, the back-off scheduler, the report, rules refused for changing types."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.egraph import RelayEGraph, SaturationReport, saturate

COMMUTE = """
(ruleset t)
(rewrite (r:add a b) (r:add b a) :ruleset t :name "add-commute")
(rewrite (r:multiply a (r:add b c)) (r:add (r:multiply a b) (r:multiply a c)) :ruleset t :name "distrib")
(rewrite (r:multiply a b) (r:multiply b a) :ruleset t :name "mul-commute")
"""
ASSOC = """
(ruleset t)
(rewrite (r:add a b) (r:add b a) :ruleset t :name "add-commute")
(rewrite (r:add a (r:add b c)) (r:add (r:add a b) c) :ruleset t :name "add-assoc")
"""


def _vars(n, shape=(2, 3)):
    return [rg.var(f"x{i}", shape=shape) for i in range(n)]


def _sum_chain(n):
    xs = _vars(n)
    acc = xs[0]
    for v in xs[1:]:
        acc = rg.op.add(acc, v)
    return rg.Function(xs, acc)


def _same_values(a: rg.Function, b: rg.Function, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.type_annotation.shape).astype("float32") for p in a.params]
    np.testing.assert_allclose(rg.evaluate(rg.IRModule.from_expr(b), *args),
                               rg.evaluate(rg.IRModule.from_expr(a), *args), rtol=1e-5, atol=1e-5)


def test_saturates_and_reports():
    x, y, z = _vars(3)
    fn = rg.Function([x, y, z], rg.op.multiply(rg.op.add(x, y), z))
    eg = RelayEGraph(fn)
    report = saturate(eg, COMMUTE, isolate=False, progress=False)
    assert isinstance(report, SaturationReport) and report.stop_reason == "saturated"
    assert report.mode == "in-process" and report.egraph is eg
    assert set(report.matches) == {"add-commute", "distrib", "mul-commute"}
    assert all(c > 0 for c in report.matches.values())
    sizes = [(it.nodes, it.classes) for it in report.iterations]
    assert sizes[-1] == sizes[-2] and sizes[0][0] > report.initial_nodes
    assert (report.nodes, report.classes) == eg.sizes()
    text = str(report)
    assert "saturated" in text and "distrib" in text and "e-classes" in text
    # the distributed form is in the root's class
    doc = eg.document()
    root_ops = {n["op"] for n in doc["nodes"].values() if n["eclass"] == doc["root_eclasses"][0]}
    assert root_ops == {"add", "multiply"}
    _same_values(fn, eg.extract())


def test_node_limit_stops_after_the_iteration_that_crosses_it():
    eg = RelayEGraph(_sum_chain(12))
    report = saturate(eg, ASSOC, node_limit=300, iter_limit=50, isolate=False, progress=False,
                      scheduler="simple")
    assert report.stop_reason == "node-limit"
    assert report.nodes >= 300 and report.iterations[-2].nodes < 300
    _same_values(eg.function, eg.extract())


def test_iteration_and_soft_time_limits():
    report = saturate(_sum_chain(8), ASSOC, iter_limit=2, node_limit=None, isolate=False, progress=False)
    assert report.stop_reason == "iter-limit" and len(report.iterations) == 2
    report = saturate(_sum_chain(8), ASSOC, time_limit=1e-9, isolate=False, progress=False)
    assert report.stop_reason == "time-limit" and report.iterations == []


def test_back_off_holds_explosive_rules_back():
    chain = _sum_chain(30)
    fn = rg.Function(chain.params, rg.op.multiply(chain.body, chain.params[0]))
    rules = ASSOC + '(rewrite (r:multiply a b) (r:multiply b a) :ruleset t :name "mul-commute")'
    report = saturate(fn, rules, match_limit=20, ban_length=2, iter_limit=12, node_limit=None,
                      isolate=False, progress=False)
    first, second = report.iterations[:2]
    assert first.banned == ["add-commute"] and "add-commute" not in first.matches  # 29 matches > 20
    assert first.matches["mul-commute"] == 1
    assert "add-commute" not in second.matches  # it sits out its ban
    assert any("add-commute" in it.matches for it in report.iterations[2:])  # then runs, limit doubled
    simple = saturate(_sum_chain(30), ASSOC, scheduler="simple", iter_limit=4, node_limit=None,
                      isolate=False, progress=False)
    assert all(not it.banned for it in simple.iterations)
    assert simple.iterations[3].nodes > report.iterations[3].nodes  # back-off grew it slower


def test_type_changing_rule_is_refused_by_name():
    x, y = _vars(2)
    fn = rg.Function([x, y], rg.op.add(x, y))
    rules = COMMUTE + '(rewrite (r:add a b) (r:transpose a "None") :ruleset t :name "add-to-transpose")'
    with pytest.raises(rg.RuleError, match="rule add-to-transpose unions terms of different types"):
        saturate(RelayEGraph(fn), rules, isolate=False, progress=False)


def test_union_of_classes_of_different_types_is_refused_by_name():
    x, y = rg.var("x", shape=(2, 3)), rg.var("y", shape=(3, 2))
    fn = rg.Function([x, y], rg.Tuple([rg.op.add(x, x), y]))
    rules = ('(ruleset t) (rule ((= e (r:add a b)) (= v (RVar k)) (= (rank v) 2)) ((union e v)) '
             ':ruleset t :name "add-is-any-var") (rewrite (r:add a b) (r:add b a) :ruleset t :name "comm")')
    with pytest.raises(rg.RuleError, match="rule add-is-any-var unions terms of different types"):
        saturate(RelayEGraph(fn), rules, isolate=False, progress=False)


def test_ill_typed_term_is_refused_by_name():
    x, y = _vars(2)
    fn = rg.Function([x, y], rg.op.add(x, y))
    rules = '(ruleset t) (rewrite (r:add a b) (r:add a (r:transpose b "None")) :ruleset t :name "bad-add")'
    with pytest.raises(rg.RuleError, match="rule bad-add") as info:
        saturate(RelayEGraph(fn), rules, isolate=False, progress=False)
    assert "broadcast" in str(info.value)


def test_malformed_rule_is_reported_with_its_name():
    with pytest.raises(rg.RuleError, match="rule short-dense: egglog refused it"):
        saturate(_sum_chain(2), '(ruleset t) (rewrite (r:add a b) (r:nn.dense a b) :ruleset t '
                                ':name "short-dense")', isolate=False, progress=False)


class _Double:
    """A Python rewrite: add(a, a) -> multiply(a, 2)."""

    relation = "rw-double"
    variables = ["root", "a"]

    def __init__(self):
        self.calls = 0

    def apply(self, bindings, graph):
        self.calls += 1
        a = rg.var("a")
        assert graph.type_of(bindings["a"]) == rg.TensorType((2, 3), "float32")
        return [(bindings["root"], rg.op.multiply(a, rg.const(np.float32(2.0))))]


class _DoubleRule:
    name = "double"
    ruleset = "test"

    def __init__(self):
        self.python_rewrite = _Double()

    def declarations(self):
        return ["(ruleset test)", "(relation rw-double (RExpr RExpr))"]

    def commands(self):
        return ['(rule ((= root (r:add a a))) ((rw-double root a)) :ruleset test :name "double")']


def test_python_rewrites_get_their_matches_once():
    (x,) = _vars(1)
    fn = rg.Function([x], rg.op.nn.relu(rg.op.add(x, x)))
    rule = _DoubleRule()
    eg = RelayEGraph(fn)
    report = saturate(eg, [rule], isolate=False, progress=False)
    assert report.stop_reason == "saturated" and rule.python_rewrite.calls == 1
    out = eg.extract("tree", lambda op, attrs, args, out: 5.0 if op == "add" else 1.0)
    assert "multiply" in rg.astext(out)
    _same_values(fn, out)


def test_rules_from_files_on_bert():
    mod, params = rg.zoo.get("bert", small=True)
    rules = rg.load_rules(["rules/algebraic.rules", "rules/fusion.rules"])
    eg = RelayEGraph(mod)
    report = saturate(eg, rules, node_limit=50_000, isolate=False, progress=False)
    assert report.stop_reason in ("saturated", "node-limit", "iter-limit")
    assert report.matches.get("fuse-dense-bias", 0) > 0
    out = eg.extract("greedy-dag", "latency")
    inputs = rg.zoo.example_inputs(mod, params)
    args = [params.get(p.name_hint, inputs.get(p.name_hint)) for p in mod["main"].params]
    np.testing.assert_allclose(rg.evaluate(rg.IRModule.from_expr(out), *args), rg.evaluate(mod, *args),
                               rtol=1e-4, atol=1e-4)
    assert "fused." in rg.astext(out)


def test_new_terms_are_typed_through_the_relations_with_symbolic_dims():
    from relaygraph.ty import sym

    x = rg.var("x", shape=(sym("n"), 3))
    w = rg.var("w", shape=(4, 3))
    fn = rg.Function([x, w], rg.op.nn.relu(rg.op.nn.dense(x, w)))
    rules = ('(ruleset t) (rewrite (r:nn.relu (r:nn.dense x w u d)) '
             '(r:transpose (r:transpose (r:nn.relu (r:nn.dense x w u d)) "None") "None") '
             ':ruleset t :name "double-transpose")')
    eg = RelayEGraph(fn)
    report = saturate(eg, rules, iter_limit=1, isolate=False, progress=False)
    assert report.iterations[0].new_signatures == 2  # transpose of (n, 4), then of (4, n)
    doc = eg.document()
    shapes = {tuple(c["tensor"]["shape"]) for c in doc["class_data"].values() if "tensor" in c}
    assert ("n", 4) in shapes and (4, "n") in shapes
    n = eg.state.types.dim_id(sym("n"))
    eg.backend.run_text(f"(check (= (dim (r:transpose (nid {eg.root}) \"None\") 1) {n}))")


def test_new_classes_are_typed_by_one_egglog_action_and_facts_catch_up():
    # Unconditional rules keep no per-class facts; a later saturation whose rules read them
    # sets the facts of the classes made meanwhile before its first iteration.
    x, y = rg.var("x", shape=(2, 3)), rg.var("y", shape=(3,))
    fn = rg.Function([x, y], rg.op.add(x, y))
    eg = RelayEGraph(fn)
    saturate(eg, COMMUTE, iter_limit=1, isolate=False, progress=False)
    commuted = "(r:add (RVar k2) (RVar k1))"
    eg.backend.run_text(f'(check (= (tytext (Ty {commuted})) "Tensor[(2, 3), float32]"))')
    reads_rank = ('(ruleset u) (rule ((= e (r:add (RVar a) (RVar b))) (= (rank e) 2) (= (rank (RVar a)) 1)) '
                  '((union e (r:add (RVar b) (RVar a)))) :ruleset u :name "needs-rank")')
    report = saturate(eg, reads_rank, iter_limit=1, isolate=False, progress=False)
    assert report.iterations[0].matches.get("needs-rank") == 1  # it matched the commuted node at once


def test_saturating_again_after_a_worker_reuses_the_typing_rules():
    fn = _sum_chain(4)
    eg = RelayEGraph(fn)
    first = saturate(eg, ASSOC, iter_limit=2, time_limit=60, isolate=True, progress=False)
    again = saturate(eg, ASSOC, iter_limit=2, isolate=False, progress=False)
    assert again.nodes >= first.nodes
    _same_values(fn, eg.extract())


def test_rules_run_again_keep_their_ruleset_and_other_rules_get_their_own():
    eg = RelayEGraph(_sum_chain(5))
    first = saturate(eg, ASSOC, iter_limit=1, isolate=False, progress=False)
    assert first.stop_reason == "iter-limit"  # more to do for the add rules
    only_mul = '(ruleset t) (rewrite (r:multiply a b) (r:multiply b a) :ruleset t :name "mul-commute")'
    report = saturate(eg, only_mul, iter_limit=3, isolate=False, progress=False)
    assert report.stop_reason == "saturated" and report.nodes == first.nodes  # the add rules stayed off
    renamed = '(ruleset t) (rewrite (r:add a b) (r:add a b) :ruleset t :name "add-commute")'
    with pytest.raises(rg.RuleError, match="a different rule of that name"):
        saturate(eg, renamed, iter_limit=1, isolate=False, progress=False)


def test_an_iteration_counts_the_e_graph_in_its_own_egglog_call(monkeypatch):
    # The rules, their typing and the print-size that sizes the iteration go to egglog together:
    # an iteration that finds no new signature makes one egglog call, and its sizes are exact.
    from relaygraph.egraph.backend import Backend

    eg = RelayEGraph(_sum_chain(6))
    eg.materialize()
    calls: list[list[str]] = []
    run = Backend.run

    def counted(self, *commands, **kwargs):
        calls.append([type(c).__name__ for c in commands])
        return run(self, *commands, **kwargs)

    monkeypatch.setattr(Backend, "run", counted)
    report = saturate(eg, ASSOC, iter_limit=4, isolate=False, scheduler="simple", progress=False)
    quiet = [it for it in report.iterations if not it.new_signatures]
    assert len(quiet) >= 2
    iteration_calls = [i for i, c in enumerate(calls) if len(c) > 1 and c[-1] == "PrintSize"]
    assert ["PrintSize"] not in calls[iteration_calls[0]:], calls  # after the initial count, none alone
    assert len(iteration_calls) == len(report.iterations)
    monkeypatch.setattr(Backend, "run", run)
    eg.backend.run_text("(run-schedule (run rg-clean))")  # forgets the sizes: printed again, equal
    assert (report.nodes, report.classes) == eg.sizes()


LEAF_RULES = """
rule neg-as-mul : negative(?x) => multiply(?x, -1f) if dtype(?x) == "float32"
rule reassoc-leaves : multiply(multiply(?a, ?b), ?c) => multiply(?a, multiply(?b, ?c))
                      if leaf(?a) and leaf(?b) and leaf(?c)
rule commute-leaf : add(?a, ?c) => add(?c, ?a) if leaf(?c)
"""


@pytest.mark.parametrize("isolate", [False, True])
def test_leaf_conditions_and_the_constants_rules_make(isolate):
    from relaygraph.egraph.encoding import LEAF
    from relaygraph.egraph.rule_compiler import program
    from relaygraph.rewrite import parse_rules

    rules = parse_rules(LEAF_RULES)
    commands = [c for c in program(rules) if c.startswith("(rule ")]
    # three leaves read the leaf-class table (one command, not eight); one leaf, a command per kind
    assert [c.count(f"({LEAF} ") for c in commands] == [0, 3, 0, 0]
    assert sum("commute-leaf" in c for c in commands) == 2
    x, w = _vars(2)
    e = rg.op.exp(x)
    fn = rg.Function([x, w], rg.op.add(rg.op.multiply(rg.op.negative(x), w),
                                       rg.op.multiply(rg.op.multiply(e, w), x)))
    eg = RelayEGraph(fn)
    # neg-as-mul writes -1f, a constant the program does not have: known to the e-graph, typed,
    # and a leaf to the rules that read the table
    report = saturate(eg, rules, isolate=isolate, progress=False, scheduler="simple")
    assert report.stop_reason == "saturated"
    # (x * -1f) * w is reassociated; (exp(x) * w) * x is not: exp(x) is computed
    assert report.matches["reassoc-leaves"] == 1 and report.matches["neg-as-mul"] == 1
    nodes = eg.document()["nodes"]
    assert any(n["op"] == "multiply" and nodes[n["children"][0]]["op"] == "Constant" for n in nodes.values())
    out = eg.extract("tree", lambda op, attrs, args, out: 5.0 if op == "negative" else 1.0)
    assert "negative" not in rg.astext(out) and "-1f" in rg.astext(out)
    _same_values(fn, out)
