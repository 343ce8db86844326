"""Golden tests: tests/golden/passes/NAME.relay holds a program and a ``// pipeline:`` line; the
printed result must equal NAME.expected.relay byte for byte. Regenerate (then review the diff)
with ``RELAYGRAPH_REGEN_GOLDEN=1 pytest tests/test_passes_golden.py``."""

import os
from pathlib import Path

import numpy as np
import pytest

import relaygraph as rg
from relaygraph import transform as T

GOLDEN = Path(__file__).parent / "golden" / "passes"
CASES = sorted(p for p in GOLDEN.glob("*.relay") if not p.name.endswith(".expected.relay"))


def run_case(path: Path) -> rg.IRModule:
    text = path.read_text()
    header = next(line for line in text.splitlines() if line.startswith("// pipeline:"))
    pipeline = T.parse_pipeline(header.split(":", 1)[1])
    mod = rg.text.parse_file(path)
    with T.PassContext(opt_level=3):
        out = pipeline(mod)
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden_pass_output(path):
    expected_path = path.with_suffix(".expected.relay")
    out = run_case(path)
    got = rg.astext(out)
    if os.environ.get("RELAYGRAPH_REGEN_GOLDEN"):
        expected_path.write_text(got)
    assert expected_path.exists(), f"no golden output for {path.name}; regenerate and review it"
    assert got == expected_path.read_text()
    # The printed result is itself valid Relay that parses back to the same program.
    assert rg.alpha_equal(rg.parse(got), out)


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flatten(v)]
    return [np.asarray(value)]


@pytest.mark.parametrize("name", ["fold_constant", "fold_constant_tvm_rules"])
def test_folding_preserves_the_value(name):
    mod = rg.text.parse_file(GOLDEN / f"{name}.relay")
    folded = rg.parse((GOLDEN / f"{name}.expected.relay").read_text())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in p.type_annotation.shape]).astype(
        p.type_annotation.dtype) for p in mod["main"].params]
    before = _flatten(rg.evaluate(mod, *args, executor=False))
    after = _flatten(rg.evaluate(folded, *args, executor=False))
    assert len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)
