"""The rule language: reading .rules and .egg files, what a rule compiles to, and the errors."""

from __future__ import annotations

import pytest

import relaygraph as rg
from relaygraph.egraph.rule_compiler import compile_rule, program
from relaygraph.errors import RuleError
from relaygraph.rewrite import AnalysisRule, EggRule, load_rules, parse_rules
from relaygraph.rewrite.pattern import AComputed, ALit, AVar, PCall, PTuple

RULES = "rules"


def _one(text: str, name: str | None = None):
    rules = parse_rules(text, "t.rules", "alg")
    return rules if name is None else next(r for r in rules if r.name == name)


def _error(text: str) -> str:
    with pytest.raises(RuleError) as info:
        parse_rules(text, "t.rules", "alg")
    return str(info.value)


def test_text_parser_can_keep_attributes_as_written():
    e = rg.parse_expr("free_var %a; nn.dense(%a, %a)", raw_attrs=True)
    assert dict(e.attrs.items) == {}
    e = rg.parse_expr("free_var %a; nn.dense(%a, %a)")
    assert dict(e.attrs.items) == {"units": None}
    e = rg.parse_expr('free_var %a; reshape(%a, newshape="?pv:s")', raw_attrs=True)
    assert e.attrs["newshape"] == "?pv:s"


def test_rule_objects_have_the_bridge_interface():
    r = _one("rule add-commute : add(?a, ?b) => add(?b, ?a)")[0]
    assert (r.name, r.ruleset, r.python_rewrite) == ("add-commute", "alg", None)
    assert compile_rule(r).declarations == ["(ruleset alg)"]
    assert compile_rule(r).commands == ['(rule ((= ?root (r:add ?a ?b))) ((union ?root (r:add ?b ?a))) '
                            ':ruleset alg :name "add-commute")']


def test_both_ways_gives_two_rules_unless_symmetric():
    assert [r.name for r in _one("rule c : add(?a, ?b) <=> add(?b, ?a)")] == ["c"]
    names = [r.name for r in _one("rule d : multiply(?a, add(?b, ?c)) <=> "
                                  "add(multiply(?a, ?b), multiply(?a, ?c))")]
    assert names == ["d", "d<="]


def test_statements_comments_continuations_and_rulesets():
    rules = parse_rules("# a comment\nrule a : negative(negative(?x))   // another\n"
                        "   => ?x\nruleset other\nrule b : exp(?x) => exp(?x)  # same\n",
                        "t.rules", "first")
    assert [(r.name, r.ruleset) for r in rules] == [("a", "first"), ("b", "other")]
    assert rules[0].text == "rule a : negative(negative(?x)) => ?x"


def test_attributes_omitted_written_bound_and_defaulted():
    r = _one("rule r : concatenate((nn.dense(?x, ?w1, out_dtype=?o), nn.dense(?x, ?w2)), axis=-1)"
             " => nn.dense(?x, concatenate((?w1, ?w2)), out_dtype=?o)")[0]
    cmd = compile_rule(r).commands[0]
    # omitted on the left: any value; written: exactly; bound: a variable
    assert '(r:nn.dense ?x ?w1 _ ?o)' in cmd and '(r:nn.dense ?x ?w2 _ _)' in cmd
    assert '"-1")))' in cmd
    # omitted on the right: the op's default (Python's default for a required attribute)
    assert '(r:concatenate (RTuple (RCons ?w1 (RCons ?w2 (RNil)))) "0") "None" ?o)' in cmd


def test_written_attributes_are_normalised_like_calls():
    r = _one("rule r : nn.conv2d(?x, ?w, padding=[1, 1]) => nn.conv2d(?x, ?w, padding=[1, 1])")[0]
    assert '"(1, 1, 1, 1)"' in compile_rule(r).commands[0]


def test_spread_binds_every_other_attribute():
    r = _one("rule r : nn.relu(nn.conv2d(?x, ?w, groups=1, **?a)) => "
             "fused.conv2d_relu(?x, ?w, groups=1, **?a)")[0]
    call = r.lhs[0].args[0]
    assert isinstance(call, PCall) and call.attr("groups") == ALit(1)
    assert call.attr("strides") == AVar("a.strides") and call.attr("out_dtype") == AVar("a.out_dtype")
    assert r.rhs[0].attr("kernel_layout") == AVar("a.kernel_layout")


def test_conditions_compile_to_egglog_facts():
    r = _one("rule r : negative(?x) => ?x if rank(?x) == 4 and shape(?x)[-1] == shape(?x)[1]"
             ' and dtype(?x) == "float32"')[0]
    cmd = compile_rule(r).commands[0]
    assert "(= (rank ?x) 4)" in cmd and '(= (dtype ?x) "float32")' in cmd
    assert "(dim ?x (+ (rank ?x) -1))" in cmd and "(dim ?x 1)" in cmd
    assert "(!= ?__t1 -1)" in cmd  # a `?` dimension never equals anything
    assert r.python_rewrite is None


def test_conditions_egglog_cannot_test_run_in_python():
    r = _one("rule r : reshape(?x) => ?x if shape(?x) == shape(?root)")[0]
    pr = r.python_rewrite
    assert pr is not None and pr.variables == ["root", "x"]
    assert compile_rule(r).declarations[-1] == f"(relation {pr.relation} (RExpr RExpr))"
    cmd = compile_rule(r).commands[0]
    assert f"({pr.relation} ?root ?x)" in cmd and "(tytext (Ty ?x))" in cmd


def test_multi_pattern_with_computed_attributes():
    r = _one("rule m : (nn.dense(?x, ?w1, out_dtype=?o), nn.dense(?x, ?w2, out_dtype=?o)) => "
             "(split(nn.dense(?x, concatenate((?w1, ?w2)), out_dtype=?o), "
             "indices_or_sections=[shape(?w1)[0]], axis=-1).0, "
             "split(nn.dense(?x, concatenate((?w1, ?w2)), out_dtype=?o), "
             "indices_or_sections=[shape(?w1)[0]], axis=-1).1)")[0]
    assert r.multi and r.roots == ["root0", "root1"]
    assert "(!= ?root0 ?root1)" in compile_rule(r).commands[0]
    pr = r.python_rewrite
    # the merged dense uses ?o, whose value only egglog knows: egglog builds it, once
    assert pr.variables == ["root0", "root1", "w1", "__b1"]  # (?x, ?w2 only inside __b1)
    assert "(let __b1 (r:nn.dense ?x (r:concatenate" in compile_rule(r).commands[0]
    split = r.rhs[0].value
    assert isinstance(split.attr("indices_or_sections"), AComputed)


class _Graph:
    def __init__(self, types):
        self.types = types

    def type_of(self, h):
        return self.types[h]


def test_python_rewrite_apply_builds_the_right_side():
    r = _one("rule r : reshape(reshape(?x)) => reshape(?x, newshape=shape(?root))")[0]
    pr = r.python_rewrite
    t = rg.TensorType((4, 6))
    graph = _Graph({1: t, 2: rg.TensorType((2, 3, 4))})
    [(root, expr)] = pr.apply({"root": 1, "x": 2}, graph)
    assert root == 1 and expr.attrs["newshape"] == (4, 6)
    assert pr.leaves({"root": 1, "x": 2})[pr.leaf_vars["x"]] == 2
    assert expr.args[0] is pr.leaf_vars["x"]
    symbolic = _Graph({1: rg.TensorType((rg.ty.sym("n"), 6)), 2: rg.TensorType((2, 3, 4))})
    assert pr.apply({"root": 1, "x": 2}, symbolic) == []  # unknown computed value: no rewrite


def test_python_rewrite_refuses_a_type_change():
    r = _one("rule r : reshape(?x) => reshape(?x, newshape=[shape(?x)[0], -1])")[0]
    graph = _Graph({1: rg.TensorType((3, 4)), 2: rg.TensorType((3, 2, 2))})
    assert r.python_rewrite.apply({"root": 1, "x": 2}, graph)
    graph = _Graph({1: rg.TensorType((12,)), 2: rg.TensorType((3, 2, 2))})
    assert r.python_rewrite.apply({"root": 1, "x": 2}, graph) == []


def test_multi_pattern_matches_each_set_of_roots_once():
    r = _one("rule m : (negative(?a), negative(?b)) => (negative(?a), negative(?b)) "
             "if shape(?a) == shape(?b)")[0]
    graph = _Graph({1: rg.TensorType((2,)), 2: rg.TensorType((2,)), 3: rg.TensorType((2,)),
                    4: rg.TensorType((2,))})
    assert r.python_rewrite.apply({"root0": 1, "root1": 2, "a": 3, "b": 4}, graph)
    assert r.python_rewrite.apply({"root0": 2, "root1": 1, "a": 4, "b": 3}, graph) == []


def test_let_binders_and_builtins():
    analysis, r = _one("rule r : let ?x = ?v; ?b => subst(?b, ?x, ?v) if once(?x, ?b)")
    cmd = compile_rule(r).commands[0]
    assert "(= ?root (RLet ?x ?v ?b))" in cmd and "(once ?x ?b)" in cmd
    assert "(union ?root (Subst ?b ?x ?v))" in cmd
    assert any("(constructor Subst" in d for d in compile_rule(r).declarations)
    # the analysis it reads is a rule object of its own, before it, generated from the op table
    assert isinstance(analysis, AnalysisRule) and analysis.name == "alg-scoping"
    assert any('"scope:subst/r:nn.conv2d@alg"' in c for c in compile_rule(analysis).commands)
    assert all(":ruleset alg" in c for c in compile_rule(analysis).commands)


def test_program_runs_each_declaration_once():
    rules = load_rules(f"{RULES}/algebraic.rules")
    cmds = program(rules)
    assert len(cmds) == len(set(cmds))
    assert cmds.count("(ruleset algebraic)") == 1
    assert cmds.index("(ruleset algebraic)") < cmds.index(compile_rule(rules[0]).commands[0])


def test_load_a_directory_and_every_shipped_rule_is_named():
    rules = load_rules(RULES)
    names = [r.name for r in rules]
    assert len(names) == len(set(names)) and "merge-dense-split" in names
    assert {r.ruleset for r in rules} == {"algebraic", "fusion", "layout", "anf", "cpu", "conv",
                                          "synthesized"}
    assert rg.load_rules(f"{RULES}/fusion.rules")[0].name == "fuse-conv2d-bias"


@pytest.mark.parametrize("text,where,message", [
    ("rule a : add(?a, ?b => ?a", "t.rules:1:", "rule a"),
    ("rule a : add(?a, ?b) => ?c", "t.rules:1:25", "?c appears on the right side but is not bound"),
    ("rule a : ad(?a, ?b) => ?a", "t.rules:1:10", "unknown operator or constructor `ad`"),
    ("rule a : add(?a) => ?a", "t.rules:1:10", "add takes 2 input(s), got 1"),
    ("rule Bad_Name : add(?a, ?b) => ?a", "t.rules:1:6", "kebab-case"),
    ("rule a : add(?a, ?b)", "t.rules:1:", "expected `=>` or `<=>`"),
    ("rule a : add(%a, ?b) => ?b", "t.rules:1:14", "write pattern variables as ?name"),
    ("rule a : sum(?x, axis=?ax) => sum(?x, axis=?ax) if ?ax >", "t.rules:1:", "syntax error"),
    ("rule a : sum(?x, bogus=1) => ?x", "t.rules:1:10", "sum has no attribute bogus"),
    ("rule a : reshape(?x) => reshape(?x)", "t.rules:1:25", "needs attribute newshape"),
    ("rule a : reshape(?x, newshape=shape(?x)) => ?x", "t.rules:1:31", "cannot be matched"),
    ("rule a : negative(?x) => ?x if rank(?y) == 1", "t.rules:1:37", "?y is not an expression variable"),
    ("rule a : negative(?x) => ?x if ?x == 1", "t.rules:1:32", "?x is an expression"),
    ("rule a : add(?a, ?b) => ?a\n  if rank(?a) = 1", "t.rules:2:", "syntax error"),
    ("rule a : add(?a, ?b) => ?a\nrule a : add(?a, ?b) => ?b", "t.rules:2:", "defined twice"),
    ("   rule a : add(?a, ?b) => ?a", "t.rules:1:4", "no statement started"),
    ("rule a : exp(?x) => ?x\nrules b : exp(?x) => ?x", "t.rules:2:1", "expected `rule NAME"),
])
def test_errors_name_file_line_column_and_rule(text, where, message):
    error = _error(text)
    assert error.startswith(where), error
    assert message in error, error
    assert "\n" in error and "^" in error  # the source line and a caret


def test_error_on_a_continuation_line_points_there():
    error = _error("rule merge : concatenate((nn.dense(?x, ?w1), nn.dense(?x, ?w2)), axis=-1)\n"
                   "              => nn.dense(?x, concatenat((?w1, ?w2)))")
    assert error.startswith("t.rules:2:31: error: rule merge: unknown operator"), error
    assert "concatenat((?w1" in error.splitlines()[1]


def test_computed_attributes_may_not_read_attribute_values():
    error = _error("rule a : sum(?x, axis=?ax) => sum(?x, axis=?ax + 1)")
    assert "rule a" in error and "attribute values are only known to egglog" in error


def test_egg_files(tmp_path):
    good = tmp_path / "good.egg"
    good.write_text('(ruleset mine)\n(relation seen (RExpr))\n'
                    '(rule ((= e (r:exp x))) ((seen e)) :ruleset mine :name "see-exp")\n')
    [rule] = load_rules(good)
    assert isinstance(rule, EggRule) and rule.name == "see-exp"
    assert compile_rule(rule).declarations == ["(ruleset mine)", "(relation seen (RExpr))"]
    bad = tmp_path / "bad.egg"
    bad.write_text('(ruleset mine)\n\n  (rewrite (r:exp x) x :ruleset mine)\n')
    with pytest.raises(RuleError, match=r"bad.egg:3:3: error: a rewrite command in a rule file "
                                        r"needs :name"):
        load_rules(bad)
    bad.write_text("(ruleset mine)\n(run 3)\n")
    with pytest.raises(RuleError, match=r"bad.egg:2:1: .*does not belong in a rule file"):
        load_rules(bad)
    bad.write_text("(ruleset mine\n")
    with pytest.raises(RuleError, match=r"bad.egg:1:1: error: `\(` is never closed"):
        load_rules(bad)


def test_missing_rule_file():
    with pytest.raises(FileNotFoundError, match="no such rule file"):
        load_rules("rules/nothing.rules")


def test_tuple_left_side_with_one_root_is_a_tuple_pattern():
    r = _one("rule t : (?a, ?b).0 => ?a")[0]
    assert not r.multi
    assert "(RProj (RTuple (RCons ?a (RCons ?b (RNil)))) 0)" in compile_rule(r).commands[0]
    r = _one("rule u : (negative(?a), negative(?b)) => (negative(?b), negative(?a))")[0]
    assert r.multi and isinstance(r.lhs, tuple) and not isinstance(r.lhs[0], PTuple)


def test_condition_nesting_is_bounded_with_a_clear_error():
    from relaygraph.rewrite.condast import MAX_DEPTH

    fine = "not " * 10 + "rank(?x) == 4"
    assert _one(f"rule a : negative(?x) => ?x if {fine}")[0].cond is not None
    nested = "not " * (MAX_DEPTH + 5) + "rank(?x) == 4"
    message = _error(f"rule a : negative(?x) => ?x if {nested}")
    assert "t.rules:1:" in message and "nested" in message


def test_condition_tree_is_parsed_once_and_read_by_three_visitors():
    from relaygraph.rewrite.cond import EvalEnv
    from relaygraph.rewrite.condast import BoolOp, Call, Compare, Index, Lit, Neg, Var, conjuncts
    from relaygraph.rewrite.condeval import evaluate

    r = _one("rule r : negative(?x) => ?x if rank(?x) == 4 and shape(?x)[-1] == 3")[0]
    tree = r.cond.tree
    assert isinstance(tree, BoolOp) and tree.op == "and"
    first, second = conjuncts(tree)
    assert first == Compare(("==",), (Call("rank", (Var("x"),)), Lit(4)))
    assert second == Compare(("==",), (Index(Call("shape", (Var("x"),)), Neg(Lit(1))), Lit(3)))
    env = EvalEnv(lambda v: rg.TensorType((1, 2, 5, 3), "float32"), lambda v: None)
    assert evaluate(tree, env) is True
    env = EvalEnv(lambda v: rg.TensorType((1, 2, 5, rg.ty.sym("n")), "float32"), lambda v: None)
    assert evaluate(tree, env) is None  # a symbolic dimension leaves the truth unknown
    from relaygraph.rewrite.native import CmpFact, DimTerm, IntTerm, RankTerm

    native, rest = r.cond.split()
    assert native == [CmpFact("==", RankTerm("x"), IntTerm(4)),
                      CmpFact("==", DimTerm("x", -1, "eq"), IntTerm(3))] and rest == []
