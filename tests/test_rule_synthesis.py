"""Rule synthesis, redundant rules and derivations (relaygraph.synth, ``relaygraph rules ...``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.errors import RelayError
from relaygraph.ir.expr import Function, Var
from relaygraph.ir.types import TensorType
from relaygraph.ops.builders import make_call
from relaygraph.rewrite import load_rules, parse_rules
from relaygraph.rewrite.soundness import check_rules
from relaygraph.synth import synthesize
from relaygraph.synth.derive import base_name, format_derivation, prove, redundant_rules, rule_derivation
from relaygraph.synth.terms import count_terms

RULES = Path(__file__).resolve().parent.parent / "rules"


@pytest.fixture(scope="module")
def small():
    """Rules over add, multiply and negative, terms of up to two ops, one literal (0)."""
    return synthesize(["add", "multiply", "negative"], size=2, literals=(0.0, -1.0), progress=False)


def _bodies(result) -> set[str]:
    return {r.statement.split(":", 1)[1].strip() for r in result.rules}


def test_synthesize_finds_the_basic_laws(small):
    bodies = _bodies(small)
    assert "add(?a, ?b) => add(?b, ?a)" in bodies
    assert "multiply(?a, ?b) => multiply(?b, ?a)" in bodies
    assert "negative(negative(?a)) => ?a" in bodies
    assert bodies & {"add(?a, 0f) => ?a", "add(0f, ?a) => ?a"}  # either, with commutativity
    assert bodies & {"multiply(?a, -1f) => negative(?a)", "multiply(-1f, ?a) => negative(?a)"}
    assert any(b.startswith("add(add(?a, ?b), ?c) =>") for b in bodies)  # associativity
    assert small.stats["candidates"] > len(small.rules) > 5


def test_synthesized_rules_are_sound_and_parse(small):
    rules = small.load()
    assert len(rules) == len(small.rules)
    results = check_rules(rules, trials=3)
    assert all(r.status == "sound" for r in results), [r for r in results if r.status != "sound"]


def test_synthesized_rules_keep_values():
    # the rules rewrite a program without changing its value
    result = synthesize(["add", "negative"], size=2, literals=(), progress=False)
    x = Var("x", TensorType((3, 4), "float32"))
    y = Var("y", TensorType((3, 4), "float32"))
    body = make_call("add", make_call("negative", make_call("negative", x)), y)
    fn = Function([x, y], body)
    report = rg.saturate(fn, result.load(), iter_limit=4, time_limit=None, isolate=False, progress=False)
    best = report.egraph.extract("tree", "node-count")
    assert rg.node_count(best) < rg.node_count(fn)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 4)).astype("float32") for _ in range(2)]
    np.testing.assert_allclose(rg.evaluate(best, *xs), rg.evaluate(fn, *xs), rtol=1e-6)


def test_no_kept_rule_is_derivable_from_the_others(small):
    found = redundant_rules(small.load(), iterations=3, trials=1)
    assert len(found) <= max(1, len(small.rules) // 5), [r.name for r, _ in found]


def test_output_file_has_comments_and_order(small, tmp_path):
    path = small.write(tmp_path / "s.rules")
    text = path.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("rule ")]
    assert len(lines) == len(small.rules)
    comments = [ln for ln in text.splitlines() if ln.startswith("# checked on")]
    assert len(comments) == len(lines)
    assert "?a:" in comments[0] and "float32" in comments[0]
    sizes = [r.lhs_size + r.rhs_size for r in small.rules]
    assert sizes == sorted(sizes)
    assert load_rules(path)  # a valid rule file


def test_conditions_are_inferred():
    result = synthesize(["multiply"], size=1, literals=(0.0,), progress=False)
    conds = [r.statement for r in result.rules if " if " in r.statement]
    assert any(re.search(r"multiply\((\?a, 0f|0f, \?a)\) => 0f if rank\(\?a\) == 0", c) for c in conds), \
        [r.statement for r in result.rules]


def test_transpose_with_attribute_variables():
    result = synthesize(["transpose", "nn.relu"], size=2, literals=(), variables_count=1, progress=False)
    bodies = _bodies(result)
    assert "transpose(transpose(?a, axes=?p), axes=?q) => transpose(?a, axes=compose_axes(?p, ?q))" in bodies
    assert any("nn.relu" in b and "transpose" in b for b in bodies)
    assert all(r.status == "sound" for r in check_rules(result.load()))


def test_multiply_by_one_is_found():
    # multiply(?a, 1f) shares its class with add(?a, 0f) (both typed on float32 samples only); it
    # still becomes a rule to ?a
    result = synthesize(["multiply", "add"], size=1, literals=(0.0, 1.0), variables_count=1, progress=False)
    bodies = _bodies(result)
    assert bodies & {"multiply(?a, 1f) => ?a", "multiply(1f, ?a) => ?a"}, bodies


def test_identity_axes_condition_is_inferred():
    result = synthesize(["transpose"], size=2, literals=(), variables_count=1, progress=False)
    bodies = _bodies(result)
    assert "transpose(?a, axes=?p) => ?a if identity_axes(?p)" in bodies, bodies
    goal = [r for r in load_rules(RULES / "algebraic.rules") if r.name == "transpose-identity"][0]
    assert rule_derivation(goal, result.load(), iterations=3).proved


def test_reshapes_fold_to_the_matched_shape():
    result = synthesize(["reshape"], size=2, literals=(), variables_count=1, progress=False)
    bodies = _bodies(result)
    assert ("reshape(reshape(?a, allowzero=False, newshape=?s), allowzero=False, newshape=?t) => "
            "reshape(?a, allowzero=False, newshape=shape(?root))") in bodies, bodies
    assert any(b.startswith("reshape(?a, allowzero=False, newshape=?s) => ?a if shape(?a) == shape(?root)")
               for b in bodies), bodies
    hand = {r.name: r for r in load_rules(RULES / "algebraic.rules")}
    for name in ("reshape-reshape", "reshape-identity"):
        assert rule_derivation(hand[name], result.load(), iterations=3).proved, name
    assert all(r.status == "sound" for r in check_rules(result.load()))


def test_size_three_terms_give_linearity():
    # terms of three ops: a binary op over two calls of one op (add(dense(a, c), dense(b, c)))
    result = synthesize(["add", "nn.dense"], size=3, wide=2, literals=(), progress=False)
    bodies = _bodies(result)
    assert any(re.match(r"nn\.dense\(add\(\?a, \?b\), \?c, .*\) => add\(nn\.dense\(\?a, \?c.*"
                        r"if shape\(\?a\) == shape\(\?b\)", b) for b in bodies), bodies
    hand = {r.name: r for r in load_rules(RULES / "algebraic.rules")}
    for name in ("dense-linear-data", "dense-linear-data<="):
        assert rule_derivation(hand[name], result.load(), iterations=5).proved, name


def test_attributes_all_calls_agree_on_are_generalized():
    result = synthesize(["transpose", "nn.batch_matmul"], size=2, literals=(), variables_count=2,
                        progress=False)
    general = [r.statement for r in result.rules if "**?m" in r.statement]
    assert general, [r.statement for r in result.rules]
    assert all(r.status == "sound" for r in check_rules(result.load()))
    hand = {r.name: r for r in load_rules(RULES / "algebraic.rules")}
    # the hand-written rule's instances use out_dtype and transpose_a values the terms did not
    for name in ("batch-matmul-transpose-b", "batch-matmul-transpose-b<="):
        assert rule_derivation(hand[name], result.load(), iterations=3).proved, name


def test_derivable_candidates_say_why(small):
    assert small.derivable
    assert set(small.derivable.values()) <= {
        "by rewriting with the rules kept before it", "in an e-graph of the rules kept before it",
        "by rewriting with the other rules kept", "in an e-graph of the other rules kept"}


def test_term_rewriter_joins_by_rewriting():
    from relaygraph.synth.syntactic import TermRewriter
    from relaygraph.synth.terms import AttrFun, AttrVar, call, var

    a, b = var("a"), var("b")
    rw = TermRewriter()
    assert not rw.joinable(call("add", [a, b]), call("add", [b, a]))
    rw.add(call("add", [a, b]), call("add", [b, a]))
    assert rw.joinable(call("negative", [call("add", [a, b])]), call("negative", [call("add", [b, a])]))
    assert not rw.joinable(call("add", [a, b]), call("multiply", [a, b]))
    # attribute variables bind to what the term has, and computed attributes are rebuilt
    p, q = (("axes", AttrVar("p")),), (("axes", AttrVar("q")),)
    rw.add(call("transpose", [call("transpose", [a], p)], q),
           call("transpose", [a], (("axes", AttrFun("compose_axes", ("p", "q"))),)))
    inner = call("transpose", [call("transpose", [b], q)], p)
    assert rw.joinable(inner, call("transpose", [b], (("axes", AttrFun("compose_axes", ("q", "p"))),)))
    assert not rw.joinable(inner, call("transpose", [b], (("axes", AttrFun("compose_axes", ("p", "q"))),)))


def test_relevant_rules_are_those_that_can_match():
    from relaygraph.synth.derive import relevant_rules

    rules = load_rules(RULES / "algebraic.rules")
    x = Var("x", TensorType((2, 3), "float32"))
    y = Var("y", TensorType((2, 3), "float32"))
    names = {r.name for r in relevant_rules([make_call("negative", make_call("negative", x))], rules)}
    assert "neg-neg" in names
    assert not names & {"add-commute", "conv2d-linear-data", "merge-dense", "neg-of-mul"}
    # subtract makes add (sub-as-add-neg), whose rules then can match too
    names = {r.name for r in relevant_rules([make_call("subtract", x, y)], rules)}
    assert {"sub-as-add-neg", "add-commute", "neg-neg"} <= names
    assert "conv2d-linear-data" not in names


def test_proved_pairs_of_many_candidates_in_one_egraph():
    from relaygraph.synth.derive import proved_pairs

    comm = parse_rules("rule comm : add(?a, ?b) => add(?b, ?a)", "<t>")
    t = TensorType((2, 3), "float32")
    y = Var("y", t)
    pairs = []
    for i in range(150):
        x = Var(f"x{i}", t)
        pairs.append((make_call("add", x, y), make_call("add", y, x)))
        pairs.append((make_call("add", x, y), make_call("multiply", x, y)))
    got = proved_pairs(pairs, comm, iterations=2)
    assert got == [True, False] * 150


# -- bad input ----------------------------------------------------------------------------------
def test_unknown_op_is_refused():
    with pytest.raises(RelayError, match="unknown op 'nosuch'"):
        synthesize(["add", "nosuch"], progress=False)


@pytest.mark.parametrize("missing", ["kernel", "type_relation"])
def test_op_without_kernel_or_type_relation_is_refused(monkeypatch, missing):
    import relaygraph.synth.terms as terms

    real = terms.lookup

    def fake(name):
        op = real(name)
        return dataclasses.replace(op, **{missing: None}) if name == "negative" else op

    monkeypatch.setattr(terms, "lookup", fake)
    words = "kernel" if missing == "kernel" else "type relation"
    with pytest.raises(RelayError, match=f"op negative has no {words}"):
        synthesize(["add", "negative"], progress=False)


def test_budget_stops_before_running():
    bound = count_terms(["add", "multiply", "nn.dense", "transpose"], 4, 3, (0.0, 1.0), 4)
    with pytest.raises(RelayError, match=rf"up to {bound} terms .*limit 1000.*--max-terms"):
        synthesize(["add", "multiply", "nn.dense", "transpose"], size=4, literals=(0.0, 1.0),
                   max_terms=1000, progress=False)


def test_bad_numbers_are_refused():
    with pytest.raises(RelayError, match="size must be an integer"):
        synthesize(["add"], size=0, progress=False)


# -- derivations --------------------------------------------------------------------------------
def test_prove_records_the_rules_applied():
    rules = load_rules(RULES / "algebraic.rules")
    a = Var("a", TensorType((3, 4), "float32"))
    b = Var("b", TensorType((3, 4), "float32"))
    d = prove(make_call("subtract", a, b), make_call("add", make_call("negative", b), a), rules)
    assert d.proved
    assert set(d.rules) == {"sub-as-add-neg", "add-commute"}
    assert "iteration 1" in format_derivation(d)
    not_proved = prove(make_call("nn.relu", a), make_call("negative", a), rules, iterations=2)
    assert not not_proved.proved and "not proved" in format_derivation(not_proved)


def test_redundant_rules_with_their_derivations():
    rules = parse_rules("""
rule comm : add(?a, ?b) => add(?b, ?a)
rule assoc : add(add(?a, ?b), ?c) => add(?a, add(?b, ?c))
rule swap-inner : add(?a, add(?b, ?c)) => add(?a, add(?c, ?b))
rule neg-neg : negative(negative(?a)) => ?a
""", "<t>", "t")
    found = {r.name: d for r, d in redundant_rules(rules, iterations=3)}
    assert set(found) == {"swap-inner"}
    assert found["swap-inner"].rules == ["comm"]


def test_rule_derivation_of_a_goal():
    rules = load_rules(RULES / "algebraic.rules")
    goal = parse_rules("rule g : multiply(subtract(?a, ?b), ?c) => subtract(multiply(?c, ?a), "
                       "multiply(?c, ?b))", "<g>", "g")[0]
    d = rule_derivation(goal, rules, iterations=4)
    assert d is not None and d.proved
    assert "mul-distrib-sub" in {base_name(n) for n in d.rules}


# -- command line -------------------------------------------------------------------------------
def test_cli_synthesize_writes_checked_rules(tmp_path, capsys):
    out = tmp_path / "syn.rules"
    code = main(["-q", "rules", "synthesize", "--ops", "add,negative", "--size", "2", "--literals", "0",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "rules written to" in captured.out
    assert main(["rules", "check", str(out)]) == 0  # every synthesized rule passes the checker
    assert "sound" in capsys.readouterr().out


def test_cli_synthesize_bad_input(tmp_path, capsys):
    out = tmp_path / "x.rules"
    assert main(["rules", "synthesize", "--ops", "add,nosuch", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown op 'nosuch'" in err and "Traceback" not in err
    assert main(["rules", "synthesize", "--ops", "add,multiply,nn.dense,transpose", "--size", "4",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "terms would be enumerated (limit 150000)" in err and "--max-terms" in err
    assert not out.exists()


def test_cli_check_redundant(tmp_path, capsys):
    f = tmp_path / "r.rules"
    f.write_text("rule comm : add(?a, ?b) => add(?b, ?a)\n"
                 "rule assoc : add(add(?a, ?b), ?c) <=> add(?a, add(?b, ?c))\n"
                 "rule swap-inner : add(?a, add(?b, ?c)) => add(?a, add(?c, ?b))\n")
    assert main(["-q", "rules", "check", "--redundant", str(f)]) == 0
    out = capsys.readouterr().out
    assert "swap-inner is derivable from the others" in out
    assert "iteration 1: comm" in out
    assert "1 of 4 rule directions" in out


def test_cli_check_redundant_transposes(tmp_path, capsys):
    # a hand-written layout rule follows from the algebraic transpose rules
    text = (RULES / "algebraic.rules").read_text()
    keep = [ln for ln in text.splitlines()
            if ln.startswith(("rule transpose-transpose", "rule transpose-identity"))]
    layout = [ln for ln in (RULES / "layout.rules").read_text().splitlines()
              if ln.startswith("rule nchw-nhwc")]
    f = tmp_path / "t.rules"
    f.write_text("\n".join(keep + layout) + "\n")
    assert main(["-q", "rules", "check", "--redundant", str(f)]) == 0
    out = capsys.readouterr().out
    assert "nchw-nhwc-nchw is derivable from the others" in out
    assert "transpose-transpose" in out and "transpose-identity" in out


def test_cli_check_redundant_one_shipped_file(capsys):
    # a quick case of the shipped rules: the algebraic file, two of its rules checked
    path = str(RULES / "algebraic.rules")
    assert main(["-q", "rules", "check", "--redundant", path, "--rule", "mul-distrib-sub",
                 "--rule", "add-commute"]) == 0
    out = capsys.readouterr().out
    assert "mul-distrib-sub (both directions) is derivable from the others" in out
    assert "add-commute is" not in out
    assert "1 of 3 rule directions checked" in out
    found = redundant_rules(load_rules(path), only=["mul-distrib-sub"])
    assert [r.name for r, _ in found] == ["mul-distrib-sub", "mul-distrib-sub<="]
    assert "mul-distrib" in found[0][1].rules


@pytest.mark.slow
def test_cli_check_redundant_shipped_rules(capsys):
    # ``relaygraph rules check --redundant rules/``: the hand-written rules derivable from the others
    assert main(["-q", "rules", "check", "--redundant", str(RULES)]) == 0
    out = capsys.readouterr().out
    assert "nchw-nhwc-nchw is derivable from the others" in out
    assert "mul-distrib-sub (both directions) is derivable from the others" in out


def test_cli_derive(capsys):
    path = str(RULES / "algebraic.rules")
    assert main(["rules", "derive", path, "--lhs", "subtract(?a, ?b)", "--rhs", "add(negative(?b), ?a)"]) == 0
    out = capsys.readouterr().out
    assert "proved within 5 iteration(s)" in out and "sub-as-add-neg" in out
    assert main(["rules", "derive", path, "--lhs", "nn.relu(?a)", "--rhs", "negative(?a)"]) == 1
    assert "not proved" in capsys.readouterr().out
    assert main(["rules", "derive", path, "--lhs", "add(?a,", "--rhs", "?a"]) == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err
    assert main(["rules", "derive", path, "--lhs", "add(?a, ?b)", "--rhs", "?c"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_rg_rules_namespace():
    assert rg.rules.synthesize is synthesize
    assert callable(rg.rules.redundant) and callable(rg.rules.derive)


# -- ops of convolutional models: pools, bias_add by channel, NCHW images -------------------------
@pytest.fixture(scope="module")
def pooling():
    """Rules over relu, max-pool and bias_add on NCHW images, equalities of one size both ways."""
    return synthesize(["nn.relu", "nn.max_pool2d", "nn.bias_add"], size=2, both_ways=True, progress=False)


def test_pool_attribute_domains_write_every_attribute():
    from relaygraph.synth.terms import attr_choices

    for op in ("nn.max_pool2d", "nn.avg_pool2d"):
        choices = attr_choices(op)
        assert len(choices) >= 2
        for attrs in choices:  # an omitted attribute would match every value (NHWC too)
            got = dict(attrs)
            assert got["layout"] == "NCHW" and got["ceil_mode"] is False and "pool_size" in got
            assert list(attrs) == sorted(attrs)
    assert attr_choices("nn.bias_add") == [(("axis", 1),)]


def test_image_samples_only_for_image_ops():
    from relaygraph.synth.samples import default_samples, works_on_images

    assert works_on_images("nn.max_pool2d") and not works_on_images("add")
    plain = default_samples(["a", "b"], {}, draws=1)
    images = default_samples(["a", "b"], {}, draws=1, images=True)
    assert all(len(s.types["a"].shape) < 4 for s in plain)
    assert len(images) > len(plain)
    assert any(len(s.types["a"].shape) == 4 and s.types["b"].shape == (s.types["a"].shape[1],)
               for s in images)


def test_relu_and_bias_commute_with_max_pool_both_ways(pooling):
    bodies = _bodies(pooling)
    relu = [b for b in bodies if b.startswith("nn.max_pool2d(nn.relu(?a)") or
            b.startswith("nn.relu(nn.max_pool2d(?a")]
    bias = [b for b in bodies if "nn.bias_add(nn.max_pool2d(" in b and "nn.max_pool2d(nn.bias_add(" in b]
    assert relu and all(" <=> " in b for b in relu), bodies
    assert bias and " <=> " in bias[0], bodies
    # a bias moves through every window; relu not through one that lies wholly in the padding
    # (its max is -inf): the checker refuses the general form, so the windows stay written
    assert "**?w" in bias[0]
    assert all("pool_size=" in b for b in relu)


def test_pooling_rules_are_sound(pooling):
    results = check_rules(pooling.load(), trials=3)
    assert results and all(r.status == "sound" for r in results), [r for r in results if r.status != "sound"]


def test_relu_and_bias_move_below_max_pool_keeping_values(pooling):
    # a VGG block's max_pool2d(relu(bias_add(x, b))) equals relu(bias_add(max_pool2d(x), b)), where
    # relu and the bias run on 4x fewer values: the synthesized rules prove it, and the values agree
    x = Var("x", TensorType((1, 3, 8, 8), "float32"))
    b = Var("b", TensorType((3,), "float32"))
    pool = dict(pool_size=(2, 2), strides=(2, 2), padding=(0, 0, 0, 0))
    before = make_call("nn.max_pool2d", make_call("nn.relu", make_call("nn.bias_add", x, b)), **pool)
    after = make_call("nn.relu", make_call("nn.bias_add", make_call("nn.max_pool2d", x, **pool), b))
    d = prove(before, after, pooling.load(), iterations=4)
    assert d.proved, format_derivation(d)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 3, 8, 8)).astype("float32"), rng.standard_normal(3).astype("float32")]
    np.testing.assert_allclose(rg.evaluate(Function([x, b], after), *xs),
                               rg.evaluate(Function([x, b], before), *xs), rtol=1e-6)


def test_unconditional_equalities_one_way_by_default():
    result = synthesize(["nn.relu", "nn.max_pool2d"], size=2, progress=False)
    assert result.rules and not any(" <=> " in r.statement for r in result.rules)


def test_bias_through_batch_flatten_needs_a_rank_condition():
    # bias_add(batch_flatten(?a), ?b) is add(?a, ?b) only for matrices: a 1x1 image (1, C, 1, 1)
    # flattens to (1, C) too, where add would broadcast to (1, C, 1, C)
    result = synthesize(["nn.batch_flatten", "nn.bias_add", "add"], size=2, literals=(), progress=False)
    for r in result.rules:
        lhs, _, rhs = r.statement.split(" : ", 1)[1].partition(" => ")
        if lhs.startswith("nn.bias_add(nn.batch_flatten(?a), ?b") and "batch_flatten" not in rhs:
            assert " if " in rhs, r.statement


def test_cli_synthesize_both_ways(tmp_path, capsys):
    out = tmp_path / "pool.rules"
    code = main(["-q", "rules", "synthesize", "--ops", "nn.relu,nn.max_pool2d", "--size", "2",
                 "--literals", "", "--both-ways", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert " <=> " in out.read_text()
    assert main(["rules", "check", str(out)]) == 0
    assert "unsound" not in capsys.readouterr().out
