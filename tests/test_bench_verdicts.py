"""bench_optimize's verdict of the e-graph against the pipeline: ahead, a tie within the timing's
resolution (the A/A spread, or too few rounds slower for a sign test), or slower."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_optimize", ROOT / "benchmarks" / "bench_optimize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(egraph_ms: float, slower: int, rounds: int = 10, unchanged: bool = False) -> dict:
    # the rounds' ratios as if every round had measured the medians
    original, piped, egraph, control = 5.5e-3, 5.4e-3, egraph_ms * 1e-3, 5.52e-3
    return {"name": "diamond-chain", "label": "diamond-chain", "threads": 1, "seconds": 1.0,
            "times": [original, piped, egraph], "walls": [0.0] * 3, "control": control,
            "ratios": [original / piped, original / egraph, original / control],
            "behind": (original if unchanged else egraph) / piped,
            "predicted": 1.0, "check": True, "pipeline_check": True, "egraph_changed": "none",
            "egraph_layouts": "none", "unchanged": unchanged, "rounds": rounds, "rounds_slower": slower,
            "pipeline_changed": "none", "pipeline_layouts": "none", "load": 1.0, "clock": "cpu"}


def test_sign_test_is_the_binomial_tail(bench):
    assert bench.sign_test(0, 10) == 1.0
    assert bench.sign_test(10, 10) == pytest.approx(1 / 1024)
    assert bench.sign_test(8, 10) == pytest.approx(56 / 1024)  # 45 + 10 + 1 of 1024


@pytest.mark.parametrize("egraph_ms, slower, unchanged, verdict", [
    (5.3, 2, False, ">= pipeline"),
    (5.41, 6, False, "tie with pipeline (slower by 0.2%, within A/A)"),  # A/A spread 0.36%
    (5.5, 6, False, "tie with pipeline (slower by 1.9%, but in only 6 of 10 rounds)"),
    (5.5, 10, False, "SLOWER THAN PIPELINE"),
    (5.7, 5, True, "e-graph kept the original program, tie with pipeline (slower by 1.9%, but in only "
                   "5 of 10 rounds)"),  # compared as the original's 5.5 ms
])
def test_verdict(bench, capsys, egraph_ms, slower, unchanged, verdict):
    bench.report([_row(egraph_ms, slower, unchanged=unchanged)], "cpu")
    out = capsys.readouterr().out
    line = next(li for li in out.splitlines() if li.startswith("diamond-chain "))
    assert line.endswith(verdict), line
