"""Progress: a bar on a terminal, whole lines in a log (no ``\\r``), nothing with ``--quiet``; every
phase of optimize reported; extract-bench streaming its rows with short, relative file names."""

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph.extract import bench
from relaygraph.progress import Phase, quiet, resolve

ROOT = Path(__file__).resolve().parent.parent
GYM = ROOT / "tests" / "data" / "extraction-gym"
CHOICE = GYM / "data" / "dummy_examples" / "choice.json"
MULTI = GYM / "test_data" / "crafted" / "multi_root.json"
PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32], %b: Tensor[(3), float32]) {
  nn.relu(nn.bias_add(nn.dense(%x, %w), %b))
}
"""
PHASES = ("load", "saturate", "extract", "rebuild", "check", "time")
SATURATE_LINE = re.compile(r"^saturate: iteration \d+/3, \d+ e-nodes, \d+ e-classes, \d+\.\d s$")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), RELAYGRAPH_DEBUG="")


def _program(tmp_path) -> str:
    path = tmp_path / "model.relay"
    path.write_text(PROGRAM)
    return str(path)


def _phases(err: str) -> list[str]:
    return list(dict.fromkeys(line.split(":")[0] for line in err.splitlines()))


def test_redirected_cli_output_has_whole_lines_for_every_phase(tmp_path):
    argv = [sys.executable, "-m", "relaygraph", "optimize", _program(tmp_path), "--iter-limit", "3"]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\r" not in done.stdout
    assert _phases(done.stderr) == list(PHASES)
    saturate = [line for line in done.stderr.splitlines() if line.startswith("saturate: iteration")]
    assert saturate and all(SATURATE_LINE.match(line) for line in saturate), saturate
    assert re.search(r"^check: done, \d+\.\d s$", done.stderr, re.M)
    assert re.search(r"^time: done, \d+ runs of each, \d+\.\d s$", done.stderr, re.M)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_prints_no_progress(tmp_path, capsys, where):
    argv = ["optimize", _program(tmp_path), "--iter-limit", "2", "--no-check"]
    argv = ["--quiet", *argv] if where == "before" else [*argv, "-q"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "cost (cpu)" in captured.out  # the results still print
    # without it, the same command reports its phases (stderr is captured: not a terminal)
    assert main(argv[1:] if where == "before" else argv[:-1]) == 0
    assert _phases(capsys.readouterr().err) == ["load", "saturate", "extract", "rebuild"]


def test_the_api_takes_progress_false_true_auto_lines(capsys):
    mod = rg.parse(PROGRAM)
    rg.optimize(mod, iter_limit=2, repeats=1, timing_budget=0, progress=False)
    assert capsys.readouterr().err == ""
    for progress in (True, "auto", "lines"):
        res = rg.optimize(mod, iter_limit=2, repeats=1, timing_budget=0, progress=progress)
        err = capsys.readouterr().err
        assert res.check_passed and "\r" not in err
        assert _phases(err) == list(PHASES)
    with quiet():
        rg.optimize(mod, iter_limit=2, repeats=1, timing_budget=0, progress=True)
    assert capsys.readouterr().err == ""


def test_a_bad_progress_value_is_refused_before_any_work():
    started = time.perf_counter()
    with pytest.raises(rg.RelayError, match="progress must be True, False or one of"):
        rg.optimize(rg.parse(PROGRAM), progress="loud")
    assert time.perf_counter() - started < 1.0
    with pytest.raises(rg.RelayError, match="progress must be"):
        rg.saturate(rg.parse(PROGRAM)["main"], [], progress=2)


@pytest.mark.parametrize("isolate", [False, True])
def test_saturate_reports_one_line_per_iteration(capsys, isolate):
    rules = rg.load_rules(ROOT / "rules" / "algebraic.rules")
    report = rg.saturate(rg.parse(PROGRAM)["main"], rules, iter_limit=3, isolate=isolate,
                         time_limit=60 if isolate else None, progress="lines")
    lines = capsys.readouterr().err.splitlines()
    steps = [line for line in lines if line.startswith("saturate: iteration")]
    assert len(steps) == len(report.iterations) and all(SATURATE_LINE.match(s) for s in steps)
    assert lines[-1].startswith(f"saturate: done, {len(report.iterations)} iterations, stopped: "
                                f"{report.stop_reason}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert resolve("auto") == resolve(True) == "lines"
    assert resolve(False) == resolve(None) == resolve("off") == "off"
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert resolve("auto") == "bar"
    with quiet():
        assert resolve("auto") == "off" and resolve("lines") == "lines"  # only asked-for-auto is quiet
    bar = Phase("saturate", total=3, unit="iteration", progress="auto")
    bar.step("10 e-nodes")
    bar.done()
    assert "\r" in terminal.getvalue() and "saturate" in terminal.getvalue()


def test_lines_are_throttled_when_asked_but_the_last_step_is_kept(capsys):
    timing = Phase("time", "runs", unit="run", progress="lines", every=3600)
    for _ in range(50):
        timing.step()
    timing.done("50 runs")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "time: runs" and lines[1].startswith("time: run 50, ")
    assert lines[2].startswith("time: done, 50 runs, ") and len(lines) == 3


# -- extract-bench ----------------------------------------------------------------------------------

def test_extract_bench_prints_a_files_rows_before_the_next_file_runs(tmp_path, capsys, monkeypatch):
    seen: list[str] = []
    real = bench.run_file

    def watched(path, *args, **kwargs):
        seen.append(capsys.readouterr().out)  # what was printed before this file started
        return real(path, *args, **kwargs)

    monkeypatch.setattr(bench, "run_file", watched)
    assert main(["extract-bench", str(CHOICE), str(MULTI), "--extractors", "tree,greedy-dag",
                 "--out", str(tmp_path), "--no-plot"]) == 0
    # one run per (file, extractor): choice.json's two, then multi_root.json's
    assert "choice.json" not in "".join(seen[:2])
    assert re.search(r"choice\.json +tree ", seen[2])  # printed while multi_root.json waits
    assert "multi_root.json" not in seen[2]


SLOW_RUN = """
import sys, time
from relaygraph.egraph.extract import bench
real = bench.run_file
def slow(path, *args, **kwargs):
    if path.endswith("slow.json"):
        time.sleep(4)
    return real(path, *args, **kwargs)
bench.run_file = slow
from relaygraph.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_extract_bench_streams_rows_as_worker_processes_finish(tmp_path):
    shutil.copy(MULTI, tmp_path / "slow.json")
    (tmp_path / "quick").mkdir()
    shutil.copy(CHOICE, tmp_path / "quick" / "choice.json")
    argv = [sys.executable, "-c", SLOW_RUN, "extract-bench", str(tmp_path / "slow.json"),
            str(tmp_path / "quick" / "choice.json"), "--extractors", "tree", "--jobs", "2",
            "--out", str(tmp_path / "out"), "--no-plot"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    stamped = [(time.perf_counter(), line.rstrip("\n")) for line in proc.stdout]
    ended = time.perf_counter()
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 0, err
    rows = [(t, line) for t, line in stamped if line.endswith(" ok")]
    assert [line.split()[0] for _, line in rows] == ["quick/choice.json", "slow.json"]  # as finished
    assert ended - rows[0][0] > 2.0  # the quick file's row came out while the slow one still ran
    assert str(tmp_path) not in "\n".join(line for _, line in stamped[:-1])  # relative, not absolute
    assert "\r" not in err and "extract-bench: file 1/2, quick/choice.json, " in err
    # the CSV keeps the order given, with the same relative names
    rows_csv = list(csv.DictReader((tmp_path / "out" / "extract-bench.csv").open()))
    assert [r["file"] for r in rows_csv] == ["slow.json", "quick/choice.json"]


def test_extract_bench_table_fits_in_about_110_columns(tmp_path, capsys):
    deep = tmp_path / ("a_folder_with_a_rather_long_name_" * 2) / "and_another_level_below_it"
    deep.mkdir(parents=True)
    long_name = deep / ("an_extraction_gym_file_whose_name_goes_on_and_on_" * 2 + "choice.json")
    shutil.copy(CHOICE, long_name)
    shutil.copy(MULTI, tmp_path / "multi_root.json")
    assert main(["extract-bench", str(long_name), str(tmp_path / "multi_root.json"), "--out",
                 str(tmp_path / "out"), "--no-plot", "--extractors", "tree,greedy-dag,ilp,egglog",
                 "--time-limit", "20", "--quiet"]) == 0
    captured = capsys.readouterr()
    table = [line for line in captured.out.splitlines() if not line.startswith("wrote ")]
    assert len(table) == 2 + 8 and max(map(len, table)) <= 110
    assert table[0].split()[:2] == ["file", "extractor"] and "optimal?" in table[0]
    assert any(line.startswith("multi_root.json ") for line in table)
    long_rows = [line for line in table if line.startswith("an_extr")]
    assert len(long_rows) == 4 and all(re.match(r"an_extr\S*\.\.\.\S*\.json ", r) for r in long_rows)
    assert str(tmp_path) not in captured.out.replace(str(tmp_path / "out"), "") and captured.err == ""


def test_a_long_status_is_elided_in_the_table_and_kept_whole_in_the_csv(tmp_path):
    row = {"file": "x.json", "extractor": "ilp", "nodes": 3, "classes": 2, "tree_cost": 1.0,
           "dag_cost": 12345678.123, "seconds": 0.5, "optimal": False, "gap": 0.0125,
           "status": "error: " + "something went wrong " * 10}
    text = bench.format_table([row])
    assert max(map(len, text.splitlines())) <= 110
    line = text.splitlines()[2]
    assert "no 1.2%" in line and "1.235e+07" in line and line.endswith("...") and len(line) >= 105
    bench.write_csv([row], str(tmp_path / "rows.csv"))
    assert next(csv.DictReader((tmp_path / "rows.csv").open()))["status"] == row["status"]


def test_relative_labels_are_relative_to_the_common_folder():
    labels = bench.relative_labels(["/a/b/c/one.json", "/a/b/two.json", "/a/b/d/e/three.json"])
    assert labels == {"/a/b/c/one.json": "c/one.json", "/a/b/two.json": "two.json",
                      "/a/b/d/e/three.json": "d/e/three.json"}
    assert bench.relative_labels(["/x/y/only.json"]) == {"/x/y/only.json": "only.json"}
