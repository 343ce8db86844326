"""Every benchmark and paper script imports (its names still exist in the library), in a child
process so that their module-level settings (BLAS threads, sys.path) stay out of this one."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("papers/*/*.py")])

CHECK = """
import importlib.util, sys
failed = []
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("script", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except Exception as exc:
        failed.append(f"{path}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_benchmark_and_paper_script_imports():
    assert len(SCRIPTS) >= 10
    proc = subprocess.run([sys.executable, "-c", CHECK, *map(str, SCRIPTS)], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bench_calibrate_refuses_fewer_than_two_runs():
    # its figure is a point's largest measurement over its smallest: one run has no spread
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_calibrate.py"), "--runs", "1"],
                          capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""},
                          timeout=120)
    assert proc.returncode == 2
    assert "--runs must be at least 2 (got 1)" in proc.stderr
    assert "Traceback" not in proc.stderr
