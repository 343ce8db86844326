"""ONNX's own conformance suite through ``rg.frontend.from_onnx`` + ``rg.evaluate``.

The onnx package generates its backend node test cases in Python; every case whose ops are
covered must match its expected outputs at ONNX's tolerances, and every other case is listed in
``relaygraph.frontend.onnx_coverage`` with a reason and must still fail (a listed case that
starts passing is reported, so the list only shrinks). The light real models the package ships
(with expected outputs) run too: a fast one here, the heavy ones marked slow.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest

import relaygraph as rg
from relaygraph.frontend import onnx_coverage as cov
from relaygraph.frontend.onnx_ops import covered_ops

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module")
def node_cases():
    return cov.collect_node_cases()


@pytest.fixture(scope="module")
def outcomes(node_cases):
    """Case name -> None when it passes, else a one-line reason (each case run once)."""
    return {c.name: cov.case_outcome(c) for c in node_cases}


def test_every_covered_node_case_passes(node_cases, outcomes):
    must = [c.name for c in node_cases if cov.out_of_scope(c) is None]
    assert len(must) > 800
    failures = {n: outcomes[n] for n in must if outcomes[n] is not None}
    assert not failures, "\n".join(f"{k}: {v}" for k, v in sorted(failures.items()))


def test_listed_node_cases_still_fail(node_cases, outcomes):
    listed = [c.name for c in node_cases if cov.out_of_scope(c) is not None]
    passing = [n for n in listed if outcomes[n] is None]
    assert not passing, f"listed as out of scope but now passing (drop them from the list): {passing}"


def test_every_case_is_run_or_listed_with_a_reason(node_cases):
    names = {c.name for c in node_cases}
    stale = sorted(set(cov.OUT_OF_SCOPE_CASES) - names)
    assert not stale, f"out-of-scope entries naming no collected case: {stale}"
    both = sorted(set(cov.OUT_OF_SCOPE_OPS) & set(covered_ops()))
    assert not both, f"ops both covered and listed out of scope: {both}"
    for c in node_cases:
        uncovered = cov.case_ops(c) - set(covered_ops())
        if uncovered:  # an op the importer does not convert: listed, with its reason
            assert all(op in cov.OUT_OF_SCOPE_OPS for op in uncovered), (c.name, uncovered)
            assert cov.out_of_scope(c), c.name


def test_pass_rate_counts_every_case(node_cases, outcomes):
    rate = cov.pass_rate(node_cases, outcomes)
    assert rate["total"] == len(node_cases)
    assert rate["covered"] + sum(rate["reasons"].values()) == rate["total"]
    assert all(rate["reasons"].values())


def test_readme_states_the_pass_rate(node_cases, outcomes):
    rate = cov.pass_rate(node_cases, outcomes)
    text = README.read_text()
    m = re.search(r"## ONNX models.*?(\d+) of (\d+) node tests", text, re.S)
    assert m, "README has no '## ONNX models' section stating 'N of M node tests'"
    assert (int(m.group(1)), int(m.group(2))) == (rate["covered"], rate["total"])


# -- light real models -------------------------------------------------------------------------
LIGHT = {name: (path, rtol, atol) for name, path, rtol, atol in cov.light_models()}
FAST = ["shufflenet"]
HEAVY = sorted(set(LIGHT) - set(FAST))


def _run_light(name, float64=False):
    path, rtol, atol = LIGHT[name]
    model = onnx.load(path)
    if float64:
        model = cov.as_float64(model)
    mod, params = rg.frontend.from_onnx(model)
    assert params  # the initializers
    inputs = cov.light_inputs(model)
    got = rg.evaluate(mod, *inputs)
    expected = cov.light_expected(path)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float32), expected[0], rtol=rtol, atol=atol)
    return mod, inputs, got


def test_light_models_are_all_found():
    assert set(LIGHT) == {"bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                          "shufflenet", "squeezenet", "vgg19", "zfnet512"}


@pytest.mark.parametrize("name", FAST)
def test_light_model_matches_expected_output(name):
    _run_light(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", HEAVY)
def test_heavy_light_model_matches_expected_output(name):
    # squeezenet's logits reach 1e10 with every class computed from identical weights: its expected
    # softmax is uniform only because the reference rounds every channel identically; in float32 a
    # BLAS convolution breaks those ties, so it is checked in float64 (same graph, same weights)
    _run_light(name, float64=name == "squeezenet")


def test_imported_model_fuses_and_optimizes_to_the_same_value():
    mod, inputs, expected = _run_light("shufflenet")
    fused = rg.transform.FuseOps()(rg.infer_type(mod))
    assert "Primitive" in rg.astext(fused)
    np.testing.assert_allclose(rg.evaluate(fused, *inputs), expected, rtol=1e-5, atol=1e-6)
    res = rg.optimize(mod, node_limit=3000, iter_limit=2, time_limit=20, extractor="greedy-dag", check=False)
    np.testing.assert_allclose(rg.evaluate(res.module, *inputs), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_imported_resnet50_fuses_and_optimizes_to_the_same_value():
    mod, inputs, expected = _run_light("resnet50")
    fused = rg.transform.FuseOps()(rg.infer_type(mod))
    np.testing.assert_allclose(rg.evaluate(fused, *inputs), expected, rtol=1e-5, atol=1e-6)
    res = rg.optimize(mod, node_limit=20000, iter_limit=2, time_limit=60, extractor="greedy-dag", check=False)
    np.testing.assert_allclose(rg.evaluate(res.module, *inputs), expected, rtol=1e-5, atol=1e-6)
