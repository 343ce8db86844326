"""Rules that keep types by construction (``rule_compiler.keeps_type``) type the classes they make
in their own actions, and saturation then runs no typing rules: the e-graph and its types are
the same as with the typing rules."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import relaygraph as rg
import relaygraph.egraph.rule_compiler as rule_compiler
from relaygraph.egraph import RelayEGraph, saturate
from relaygraph.egraph.rule_compiler import compile_rule, keeps_type
from relaygraph.egraph.rules import prepare_rules
from relaygraph.rewrite import parse_rules

KEEPING = """
rule add-commute : add(?a, ?b) => add(?b, ?a)
rule add-assoc   : add(add(?a, ?b), ?c) <=> add(?a, add(?b, ?c))
rule mul-distrib : multiply(?a, add(?b, ?c)) <=> add(multiply(?a, ?b), multiply(?a, ?c))
rule neg-of-mul  : negative(multiply(?a, ?b)) <=> multiply(negative(?a), ?b)
rule relu-relu   : nn.relu(nn.relu(?a)) => nn.relu(?a)
"""

NOT_KEEPING = """
rule add-zero     : add(?x, 0f) => ?x
rule drop-right   : multiply(?a, ?b) => ?a
rule rank-cond    : add(?a, ?b) => add(?b, ?a) if rank(?a) == 2
rule less-swap    : less(?a, ?b) => greater(?b, ?a)
rule transpose-tt : transpose(transpose(?x, axes=[1, 0]), axes=[1, 0]) => ?x
rule mul-wild     : multiply(?a, ?_) => multiply(?a, ?a)
"""


def _by_name(text):
    return {r.name: r for r in parse_rules(text)}


def test_which_rules_keep_types():
    keeping = _by_name(KEEPING)
    assert sorted(keeping) == ["add-assoc", "add-assoc<=", "add-commute", "mul-distrib", "mul-distrib<=",
                               "neg-of-mul", "neg-of-mul<=", "relu-relu"]
    assert all(keeps_type(r) for r in keeping.values())
    # a constant, a variable on one side only, a condition, a bool result, ops that move axes, a wildcard
    assert not any(keeps_type(r) for r in _by_name(NOT_KEEPING).values())
    shipped = rg.load_rules("rules/algebraic.rules")
    kept = {r.name for r in shipped if keeps_type(r)}
    assert {"add-commute", "add-assoc", "mul-distrib", "neg-neg"} <= kept
    assert not kept & {"add-zero", "scalar-outward", "transpose-transpose"}


def test_typed_commands_type_each_inner_term_with_its_signature():
    rule = _by_name(KEEPING)["mul-distrib"]
    plain, typed = compile_rule(rule), compile_rule(rule, typed_actions=True)
    assert not plain.typed_in_actions and "Sig:" not in plain.commands[0]
    assert typed.typed_in_actions
    command = typed.commands[0]
    # the two new products are let-bound and typed; the root joins the matched class untyped
    assert command.count("(let __t") == 2 and command.count("(union (Ty __t") == 2
    assert "(Sig:r:multiply (Ty ?a) (Ty ?b))" in command and "(Sig:r:multiply (Ty ?a) (Ty ?c))" in command
    assert "(union ?root (r:add __t" in command
    # a rule that does not keep types compiles as before
    other = _by_name(NOT_KEEPING)["add-zero"]
    assert compile_rule(other, typed_actions=True).commands == compile_rule(other).commands


def test_typed_actions_are_chosen_only_when_every_rule_can_type_its_own():
    keeping = list(_by_name(KEEPING).values())
    specs, _ = prepare_rules(keeping)
    assert all(s.typed_in_actions and any("(Sig:" in c for c in s.commands) for s in specs
               if s.name != "add-commute" and s.name != "relu-relu")
    # with one rule that needs the typing rules, none types in its actions (the work would be done twice)
    mixed, _ = prepare_rules([*keeping, _by_name(NOT_KEEPING)["add-zero"]])
    assert not any(s.typed_in_actions for s in mixed)
    assert not any("(Sig:" in c for s in mixed for c in s.commands)


def _program():
    # broadcasting shapes, so the reassociated sums have types of their own (new signatures)
    a = rg.var("a", shape=(2, 3))
    b = rg.var("b", shape=(3,))
    c = rg.var("c", shape=(2, 1))
    d = rg.var("d", shape=(1, 3))
    body = rg.op.nn.relu(rg.op.multiply(rg.op.add(rg.op.add(rg.op.add(a, b), c), d), rg.op.negative(b)))
    return rg.Function([a, b, c, d], body)


def _class_types(eg):
    classes = eg.document()["class_data"].values()
    return collections.Counter((tuple(c["tensor"]["shape"]), c["tensor"]["dtype"])
                               for c in classes if "tensor" in c)


@pytest.mark.parametrize("isolate", [False, True])
def test_the_e_graph_and_its_types_match_the_typing_rules(isolate, monkeypatch):
    fn = _program()
    rules = parse_rules(KEEPING)
    typed = RelayEGraph(fn)
    report = saturate(typed, rules, iter_limit=4, isolate=isolate, time_limit=60 if isolate else None,
                      progress=False, scheduler="simple")
    assert sum(i.new_signatures for i in report.iterations) > 0  # shapes made by the rules, typed in Python
    with monkeypatch.context() as m:  # the same saturation typed by the typing rules
        m.setattr(rule_compiler, "keeps_type", lambda rule: False)
        specs, _ = prepare_rules(rules)
        assert not any(s.typed_in_actions for s in specs)
        by_rules = RelayEGraph(fn)
        baseline = saturate(by_rules, rules, iter_limit=4, isolate=False, progress=False, scheduler="simple")
    assert (report.nodes, report.classes) == (baseline.nodes, baseline.classes)
    assert _class_types(typed) == _class_types(by_rules)
    # every class is typed (the e-graph counts classes by their types)
    assert report.classes == len(typed.document()["class_data"])
    out = typed.extract("tree", lambda op, attrs, args, t: 1.0)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.type_annotation.shape).astype("float32") for p in fn.params]
    np.testing.assert_allclose(rg.evaluate(rg.IRModule.from_expr(out), *args),
                               rg.evaluate(rg.IRModule.from_expr(fn), *args), rtol=1e-5, atol=1e-5)


def test_no_typing_rules_run_after_rules_that_type_their_own(monkeypatch):
    from relaygraph.egraph.saturation import Saturator

    steps = []
    real = Saturator._schedule

    def spy(self, active, typing=True):
        text, runs = real(self, active, typing)
        steps.append(text)
        return text, runs

    monkeypatch.setattr(Saturator, "_schedule", spy)
    eg = RelayEGraph(_program())
    saturate(eg, parse_rules(KEEPING), iter_limit=2, isolate=False, progress=False, scheduler="simple")
    assert steps and not any("rg-type" in s or "rg-types" in s for s in steps)
    steps.clear()
    saturate(RelayEGraph(_program()), parse_rules(KEEPING + NOT_KEEPING.splitlines()[1] + "\n"),
             iter_limit=1, isolate=False, progress=False, scheduler="simple")
    assert any("rg-type" in s for s in steps)
