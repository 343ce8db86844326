"""The end-to-end check of ``optimize``: inputs from the domains their uses want, NaN in the
original reported as such, strict JSON reports, ``-o`` only when the check passes, the rules that
made a difference named, ``--check-rules``."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.optimize import strict_json
from relaygraph.eval.inputs import input_domains, random_inputs
from relaygraph.ops.domains import Domain, draw, named_domain

ROOT = Path(__file__).resolve().parent.parent
UNSOUND = "# an unsound rule\nrule exp-drop : exp(?x) => ?x\n"
EXP_PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %v: Tensor[(3), float32]) {
  %0 = exp(%x);
  (add(%0, %v), sqrt(%v))
}
"""
# sqrt of a difference: NaN where x < y, in the original as in any rewrite of it
NAN_PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(4, 5), float32], %y: Tensor[(4, 5), float32]) {
  %0 = subtract(%x, %y);
  (sqrt(%0), add(%x, %y))
}
"""
ALL_NAN_PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(3, 2), float32]) {
  sqrt(negative(exp(%x)))
}
"""
# an attention mask: (1 - mask) * float32's lowest value overflows to +-inf for integers other than 0, 1
MASK_PROGRAM = """#[version = "0.0.5"]
def @main(%s: Tensor[(2, 4), float32], %mask: Tensor[(2, 4), int64]) {
  %0 = cast(%mask, dtype="float32");
  %1 = multiply(subtract(1f, %0), -3.4028235e+38f);
  max(add(multiply(%s, 1f), %1))
}
"""


def _strict_load(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _files(tmp_path, **texts) -> dict[str, Path]:
    out = {}
    for name, text in texts.items():
        out[name] = tmp_path / name.replace("_", ".")
        out[name].write_text(text)
    return out


# -- the domains of program inputs ---------------------------------------------------------------
def test_input_domains_follow_each_parameters_uses():
    mod = rg.parse("""#[version = "0.0.5"]
def @norm(%a: Tensor[(1, 3, 2, 2), float32], %var: Tensor[(3), float32]) {
  %0 = nn.batch_norm(%a, %var, %var, %var, %var);
  %0.0
}
def @main(%x: Tensor[(5, 3), float32], %i: Tensor[(4), int32], %v: Tensor[(6), float32],
          %w: Tensor[(2, 3), float32], %m: Tensor[(1, 3, 2, 2), float32], %s: Tensor[(3), float32],
          %j: Tensor[(2), int64]) {
  %1 = take(%x, %i, axis=0);
  %2 = log(reshape(%v, newshape=[2, 3]));
  %3 = (exp(%w), sqrt(%w));
  let %t = transpose(%s);
  %4 = @norm(%m, %t);
  %5 = take(%x, %j);
  (%1, %2, %3, %4, %5)
}
""")
    doms = input_domains(mod)
    assert doms["x"] == Domain() and doms["m"] == Domain()
    assert doms["i"] == Domain(index=True, bound=5)  # within axis 0 of %x
    assert doms["j"] == Domain(index=True, bound=15)  # no axis: within all of %x
    assert doms["v"] == named_domain("positive")  # log, through reshape
    assert doms["w"] == Domain(0.0, 2.0, nonzero=True)  # exp's small meets sqrt's positive
    # batch_norm's moving_var wants positive; through a let, a transpose and a call of @norm
    assert doms["s"] == named_domain("positive")
    values = dict(zip([p.name_hint for p in mod["main"].params], random_inputs(mod, seed=3), strict=True))
    assert values["i"].dtype == np.int32 and 0 <= values["i"].min() and values["i"].max() < 5
    assert values["j"].dtype == np.int64 and values["j"].max() < 15
    assert values["v"].min() > 0 and (values["s"] > 0).all()
    assert 0 < values["w"].min() and values["w"].max() <= 2
    with np.errstate(all="raise"):  # no invalid value anywhere
        rg.evaluate(mod, *random_inputs(mod, seed=3))


def test_random_inputs_are_seeded_and_default_to_standard_normal():
    func = rg.parse(EXP_PROGRAM)["main"]
    a, b = random_inputs(func, seed=1), random_inputs(func, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    # %x feeds exp (small); %v feeds add and sqrt: positive
    assert np.abs(a[0]).max() <= 2 and a[1].min() > 0
    plain = rg.parse("""#[version = "0.0.5"]
def @main(%x: Tensor[(3), float32]) { add(%x, %x) }""")
    assert np.array_equal(random_inputs(plain, seed=4)[0],
                          np.random.default_rng(4).standard_normal((3,)).astype("float32"))


def test_random_inputs_walk_a_long_chain_without_recursion():
    x = rg.var("x", shape=(4,))
    body = x
    for _ in range(100_000):
        body = rg.op.copy(body)
    func = rg.Function([x], rg.op.log(body))
    assert input_domains(func)["x"] == named_domain("positive")
    assert random_inputs(func)[0].min() > 0


def test_domains_meet_and_draw_inside_their_interval():
    rng = np.random.default_rng(0)
    t = rg.TensorType((200,), "float32")
    pos_unit = named_domain("positive").meet(named_domain("unit"))
    assert pos_unit == Domain(0.0, 0.9, nonzero=True) and pos_unit.name is None
    values = draw(t, pos_unit, rng)
    assert values.min() > 0 and values.max() <= 0.9
    ints = draw(rg.TensorType((200,), "int32"), Domain(-3.0, 3.0, nonzero=True), rng)
    assert (ints != 0).all() and ints.min() >= -3 and ints.max() <= 3
    assert Domain(lo=1.0, hi=-1.0).empty
    with pytest.raises(rg.RelayError, match="no value satisfies"):
        draw(t, Domain(lo=1.0, hi=-1.0), rng)


# -- the check: NaN in the original, strict JSON ------------------------------------------------------
def test_nan_in_the_original_output_is_reported_not_called_a_difference(tmp_path):
    res = rg.optimize(rg.parse(NAN_PROGRAM), repeats=1, timing_budget=0)
    assert res.check_passed is True
    assert res.nonfinite_before["NaN"] > 0 and res.values_compared == 40 - res.nonfinite_before["NaN"]
    assert "the original program's output has" in res.check_text()
    assert "compares where the original is finite" in res.summary()
    res.save_report(tmp_path / "r.json")
    assert _strict_load((tmp_path / "r.json").read_text())["nonfinite_before"]["NaN"] > 0


def test_an_original_with_no_finite_output_is_inconclusive_and_the_report_strict(tmp_path):
    res = rg.optimize(rg.parse(ALL_NAN_PROGRAM), repeats=1, timing_budget=0)
    assert res.check_passed is None and res.values_compared == 0 and res.max_abs_error is None
    assert "inconclusive" in res.check_text() and "inconclusive" in res.failure_message()
    res.max_rel_error = float("nan")  # whatever gets in, the report stays strict JSON
    res.save_report(tmp_path / "r.json")
    data = _strict_load((tmp_path / "r.json").read_text())
    assert data["max_rel_error"] is None and data["check_passed"] is None
    assert strict_json({"a": [float("inf"), np.float32(1.5)], "b": np.int64(2)}) == {"a": [None, 1.5], "b": 2}


def test_a_mask_input_is_checked_again_with_0_1_integers(tmp_path):
    mod = rg.parse(MASK_PROGRAM)
    first = rg.evaluate(mod, *random_inputs(mod))
    assert not np.isfinite(first).any()  # the first draw leaves nothing to compare
    s, mask = random_inputs(mod, flags=True)
    assert set(np.unique(mask)) <= {0, 1} and s.dtype == np.float32 and not set(np.unique(s)) <= {0, 1}
    res = rg.optimize(mod, repeats=1, timing_budget=0, cost="latency")
    assert res.ops_after.get("multiply", 0) < res.ops_before["multiply"]  # mul-one fired
    assert res.check_passed is True and res.values_compared == 1 and res.check_inputs == "0/1 integers"
    assert "0/1 integers" in res.check_text() and "0/1 integers" in res.summary()
    res.save_report(tmp_path / "r.json")
    assert _strict_load((tmp_path / "r.json").read_text())["check_inputs"] == "0/1 integers"


def test_the_0_1_recheck_finds_a_difference_the_first_draw_hides():
    mod = rg.parse(MASK_PROGRAM)
    wrong = rg.parse(MASK_PROGRAM.replace("multiply(%s, 1f)", "multiply(%s, 2f)"))
    res = rg.optimize(mod, repeats=1, timing_budget=0, cost="latency", check=False)
    from relaygraph.egraph.optimize import _check_outputs, _recheck_with_flags

    inputs = random_inputs(mod)
    with np.errstate(all="ignore"):
        _check_outputs(res, rg.evaluate(mod, *inputs), rg.evaluate(wrong, *inputs), 1e-5, 1e-5)
    assert res.check_passed is None
    _recheck_with_flags(res, mod, wrong, 0, "main", 1e-5, 1e-5)
    assert res.check_passed is False and res.differing_outputs and res.check_inputs == "0/1 integers"


def test_flags_leave_constrained_integers_alone():
    x = rg.Var("x", rg.TensorType((3, 4), "float32"))
    i = rg.Var("i", rg.TensorType((50,), "int32"))
    func = rg.Function([x, i], rg.op.take(x, i, axis=1))
    idx = random_inputs(func, flags=True)[1]
    assert idx.min() >= 0 and idx.max() <= 3 and len(set(idx.tolist())) > 2


def test_cli_all_nan_original_exits_1_and_does_not_write(tmp_path, capsys):
    f = _files(tmp_path, p_relay=ALL_NAN_PROGRAM)
    out = tmp_path / "o.relay"
    assert main(["optimize", str(f["p_relay"]), "-o", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "inconclusive" in err and "was not written" in err and not out.exists()


# -- a failed check: -o, --force, the rules named ------------------------------------------------
def test_api_failed_check_names_the_rule_that_made_the_difference(tmp_path):
    f = _files(tmp_path, bad_rules=UNSOUND)
    res = rg.optimize(rg.parse(EXP_PROGRAM), rules=[f["bad_rules"]], repeats=1, timing_budget=0)
    assert res.check_passed is False
    assert [r["rule"] for r in res.suspect_rules] == ["exp-drop"]
    suspect = res.suspect_rules[0]
    assert suspect["ops"] == ["exp"] and suspect["changed"] == {"exp": [1, 0]}
    assert suspect["source"].endswith("bad.rules:2") and suspect["matches"] >= 1
    assert res.differing_outputs and res.differing_outputs[0].startswith("output.0")
    message = res.failure_message()
    assert "exp-drop" in message and "bad.rules:2" in message and "output.0" in message


def test_api_sound_rules_name_no_suspect():
    res = rg.optimize(rg.parse(EXP_PROGRAM), repeats=1, timing_budget=0)
    assert res.check_passed is True and res.suspect_rules == [] and res.differing_outputs == []


def test_cli_failed_check_does_not_write_o_and_names_the_rule(tmp_path, capsys):
    f = _files(tmp_path, p_relay=EXP_PROGRAM, bad_rules=UNSOUND)
    out, report = tmp_path / "o.relay", tmp_path / "r.json"
    code = main(["optimize", str(f["p_relay"]), "--rules", str(f["bad_rules"]), "--no-check-rules",
                 "-o", str(out), "--report", str(report), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and not out.exists()
    assert "OUTPUTS DIFFER" in captured.out and "written to" not in captured.out.replace("report written", "")
    assert "exp-drop (" in captured.err and "bad.rules:2" in captured.err
    assert f"{out} was not written because the check did not pass (--force" in captured.err
    assert _strict_load(report.read_text())["suspect_rules"][0]["rule"] == "exp-drop"
    # --force writes it, and says so
    code = main(["optimize", str(f["p_relay"]), "--rules", str(f["bad_rules"]), "--no-check-rules",
                 "-o", str(out), "--force", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and out.exists() and "written anyway (--force)" in captured.err


def test_cli_check_rules_stops_on_an_unsound_rule(tmp_path, capsys):
    f = _files(tmp_path, p_relay=EXP_PROGRAM, bad_rules=UNSOUND)
    out = tmp_path / "o.relay"
    for flags in ([], ["--check-rules"]):  # on by default for files given with --rules
        code = main(["optimize", str(f["p_relay"]), "--rules", str(f["bad_rules"]), *flags,
                     "-o", str(out), "--no-progress"])
        captured = capsys.readouterr()
        assert code == 2 and not out.exists()
        line = captured.err.strip()
        assert "\n" not in line and "Traceback" not in line
        assert line.startswith("relaygraph: error: rule exp-drop (") and "is unsound" in line
        assert "saturation" not in captured.out  # stopped before any work


def test_cli_check_rules_passes_sound_rules(tmp_path, capsys):
    f = _files(tmp_path, p_relay=EXP_PROGRAM,
               ok_rules="rule add-commute : add(?a, ?b) => add(?b, ?a)\n")
    out = tmp_path / "o.relay"
    assert main(["optimize", str(f["p_relay"]), "--rules", str(f["ok_rules"]), "--check-rules",
                 "-o", str(out), "--no-progress"]) == 0
    assert out.exists() and "(ok)" in capsys.readouterr().out


# -- the README's example ------------------------------------------------------------------------
def _bare_env() -> dict:
    """A user's bare environment, but with the suite's cpu profile (tests/conftest.py): no test
    reads or writes the user's own profile."""
    keep = ("RELAYGRAPH_PROFILE_DIR", "RELAYGRAPH_CALIBRATE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS")
    return {"PYTHONPATH": str(ROOT), "PATH": "", **{k: os.environ[k] for k in keep if k in os.environ}}


def test_readme_example_on_resnet18_exits_0_with_the_check_ok(tmp_path):
    shutil.copy(ROOT / "tests/data/tvm-text/resnet18.relay", tmp_path / "model.relay")
    proc = subprocess.run(
        [sys.executable, "-m", "relaygraph", "optimize", "model.relay", "-o", "optimized.relay",
         "--report", "report.json", "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, env=_bare_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr
    check = next(line for line in proc.stdout.splitlines() if line.startswith("check"))
    assert check.endswith("(ok)") and "nan" not in check
    data = _strict_load((tmp_path / "report.json").read_text())
    assert data["check_passed"] is True and data["nonfinite_before"] == {"NaN": 0, "inf": 0}
    assert (tmp_path / "optimized.relay").exists()
