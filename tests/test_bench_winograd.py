"""benchmarks/bench_winograd.py's stage timed in place: a small case of it, and its bad input."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_winograd.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_winograd", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_small_stage_runs_each_kernel_and_times_its_3x3_layers():
    # the stage checks each program's output against the direct one's before timing
    t = _module().stage(16, 8, 6, 2, runs=3)
    assert list(t) == ["direct", "F(2x2)", "F(4x4)"]
    for total, layers in t.values():
        assert 0 < layers < total


def test_a_bad_stage_is_refused_with_its_form():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--stage", "1024,256,14"], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=120)
    assert proc.returncode == 2
    assert "--stage takes CHANNELS,MIDDLE,SIDE,BLOCKS, four positive integers" in proc.stderr
    assert "Traceback" not in proc.stderr
