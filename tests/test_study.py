"""Studies: the spec, the SQLite results, local and Dask execution, limits, faults and reports."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.errors import RelayError

HERE = Path(__file__).parent
GYM = HERE / "data" / "extraction-gym" / "data"
PROBE = HERE / "data" / "study" / "probe.py"
ROOT = HERE.parent


def _spec(tmp_path: Path, body: str, name: str = "s.toml", limits: str = "") -> Path:
    path = tmp_path / name
    path.write_text(f"[study]\n{limits}\n{body}")
    return path


def _calls(n: int, seconds: float = 0.0, log: str = "", extra: str = "") -> str:
    args = f"n = {list(range(n))}, seconds = {seconds}" + (f', log = "{log}"' if log else "") + extra
    return f'[[call]]\nfunction = "{PROBE}:work"\nargs = {{{args}}}\n'


def _rows(db: Path) -> dict[str, dict]:
    return {r["cell"]: r for r in rg.study.load(db, as_frame=False)}


GYM_SPEC = f"""
[[extract]]
inputs = ["{GYM / 'dummy_examples'}"]
extractors = ["tree", "greedy-dag", "ilp"]
time_limit = 10
"""


# -- running, the database, the reports ------------------------------------------------------------

def test_a_study_on_local_processes_writes_one_row_per_cell(tmp_path):
    spec = _spec(tmp_path, GYM_SPEC, limits="time_limit = 60\nmemory_limit = 4000")
    counts = rg.study.run(spec, jobs=2, progress=False)
    db = tmp_path / "s.sqlite"
    assert counts["done"] == 9 and counts["failed"] == 0 and counts["database"] == str(db)
    rows = rg.study.load(db)
    assert isinstance(rows, list) or hasattr(rows, "to_dict")  # a DataFrame when pandas is there
    rows = rg.study.load(db, as_frame=False)
    assert len(rows) == 9 and {r["extractor"] for r in rows} == {"tree", "greedy-dag", "ilp"}
    by = {(Path(r["input"]).name, r["extractor"]): r for r in rows}
    assert by["choice.json", "ilp"]["dag_cost"] == 37.0 and by["choice.json", "tree"]["dag_cost"] == 52.0
    assert by["choice.json", "ilp"]["optimal"] == 1
    row = by["choice.json", "ilp"]
    assert json.loads(row["versions"])["relaygraph"] == rg.__version__
    assert row["machine"] and row["spec_hash"] == counts["spec_hash"] and row["attempts"] == 1
    # the database is in WAL mode, so a crash loses at most the cells in flight
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_rerun_skips_done_cells_and_retry_failed_reruns_the_failed(tmp_path):
    log = tmp_path / "runs.log"
    spec = _spec(tmp_path, _calls(3, log=str(log)) + f'\n[[call]]\nfunction = "{PROBE}:work"\n'
                 f'args = {{n = 7, fail = true, log = "{log}"}}\n')
    first = rg.study.run(spec, progress=False)
    assert (first["done"], first["failed"]) == (3, 1)
    rows = _rows(tmp_path / "s.sqlite")
    failed = [r for r in rows.values() if r["status"] == "failed"]
    assert failed[0]["error"] == "ValueError: cell 7 was told to fail"
    second = rg.study.run(spec, progress=False)
    assert (second["done"], second["failed"], second["skipped"]) == (0, 0, 4)
    assert len(log.read_text().splitlines()) == 4  # nothing ran again
    third = rg.study.run(spec, progress=False, retry_failed=True)
    assert (third["failed"], third["skipped"]) == (1, 3)
    assert log.read_text().count("n=7") == 2 and log.read_text().count("n=0") == 1
    assert _rows(tmp_path / "s.sqlite")[failed[0]["cell"]]["attempts"] == 2


def test_the_command_runs_a_study_and_status_show_report_it(tmp_path, capsys):
    spec = _spec(tmp_path, GYM_SPEC)
    assert main(["study", str(spec), "--jobs", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "9 cells; ran 9 (9 done, 0 failed)" in out
    db = tmp_path / "s.sqlite"
    assert main(["study", "status", str(db)]) == 0
    out = capsys.readouterr().out
    assert "cells: 9  done: 9  failed: 0  pending: 0" in out and "extract ilp" in out
    assert main(["study", "show", str(db), "--out", str(tmp_path / "o"),
                 "--csv", str(tmp_path / "all.csv")]) == 0
    out = capsys.readouterr().out
    assert "| ilp | 3 | 0 | 3 | 3 |" in out  # 3 cells, none failed, best on all, proved on all
    for name in ("s.csv", "s.md", "s-cost-time.png", "s-profiles.png"):
        assert (tmp_path / "o" / name).stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "all.csv").open()))
    assert len(rows) == 9 and {"dag_cost", "extractor", "machine", "versions"} <= set(rows[0])


def test_status_counts_pending_cells(tmp_path, capsys):
    spec = _spec(tmp_path, _calls(3))
    rg.study.run(spec, progress=False)
    db = tmp_path / "s.sqlite"
    with sqlite3.connect(db) as conn:  # as if the driver died before the last cell's row
        conn.execute("DELETE FROM cells WHERE rowid = (SELECT max(rowid) FROM cells)")
    info = rg.study.status(db)
    assert (info["done"], info["failed"], info["pending"]) == (2, 0, 1)
    assert main(["study", "status", str(db)]) == 0
    assert "pending: 1" in capsys.readouterr().out


# -- limits and crashes in the worker ------------------------------------------------------------

def test_cells_over_their_time_or_memory_limit_or_crashing_are_failed_rows(tmp_path):
    body = (f'[[call]]\nfunction = "{PROBE}:hang"\n'
            f'[[call]]\nfunction = "{PROBE}:hog"\nargs = {{mb = 3000}}\n'
            f'[[call]]\nfunction = "{PROBE}:crash"\n' + _calls(1))
    spec = _spec(tmp_path, body, limits="time_limit = 3\nmemory_limit = 1500")
    start = time.perf_counter()
    counts = rg.study.run(spec, jobs=2, progress=False)
    assert time.perf_counter() - start < 60
    assert (counts["done"], counts["failed"]) == (1, 3)
    errors = {json.loads(r["params"]).get("function", "").rpartition(":")[2]: r["error"]
              for r in _rows(tmp_path / "s.sqlite").values()}
    assert errors["hang"] == "time limit exceeded: killed after 3 s"
    assert errors["hog"] == "memory limit exceeded (1500 MB)"
    assert errors["crash"] == "crashed: killed by signal SIGSEGV"
    assert errors["work"] is None


# -- faults: the driver killed, a Dask worker killed ---------------------------------------------

def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def test_a_killed_driver_resumes_and_no_done_cell_runs_again(tmp_path):
    log = tmp_path / "runs.log"
    spec = _spec(tmp_path, _calls(16, seconds=0.4, log=str(log)))
    db = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "relaygraph", "study", str(spec), "--jobs", "2", "--no-progress"]
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    done_before: dict[str, dict] = {}
    while time.time() < deadline and len(done_before) < 4:
        time.sleep(0.2)
        if db.exists():
            try:
                done_before = _rows(db)
            except RelayError:
                done_before = {}
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = _rows(db)
    assert 4 <= len(done_before) < 16, "the driver must die in the middle of the study"
    time.sleep(1.0)  # the killed driver's cells in flight end (their servers see their input close)
    runs_before = log.read_text().splitlines()
    assert main(["study", str(spec), "--no-progress"]) == 0
    after = _rows(db)
    assert len(after) == 16 and all(r["status"] == "done" for r in after.values())
    for key, row in done_before.items():  # untouched: same finish time, one attempt
        assert (after[key]["finished"], after[key]["attempts"]) == (row["finished"], 1)
    runs = log.read_text().splitlines()
    ran_again = runs[len(runs_before):]
    done_n = {json.loads(r["params"])["args"]["n"] for r in done_before.values()}
    assert not done_n & {int(line.split()[0][2:]) for line in ran_again}
    assert len(ran_again) == 16 - len(done_before)


def test_a_killed_dask_worker_loses_no_cell(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = _spec(tmp_path, _calls(8, seconds=1.0))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        killed = []

        def kill_one(cell, row) -> None:
            if not killed:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

        counts = rg.study.run(spec, scheduler=cluster.scheduler_address, progress=False, on_result=kill_one)
    assert killed
    rows = _rows(tmp_path / "s.sqlite")
    assert len(rows) == 8 and counts["done"] + counts["failed"] == 8
    for r in rows.values():
        assert r["status"] == "done" or r["error"].startswith("worker lost"), r["error"]
    assert {json.loads(r["result"])["square"] for r in rows.values() if r["status"] == "done"} <= {
        n * n for n in range(8)}


def test_a_small_study_on_a_local_dask_cluster(tmp_path, capsys):
    pytest.importorskip("distributed")
    spec = _spec(tmp_path, GYM_SPEC.replace('"tree", "greedy-dag", "ilp"', '"tree", "greedy-dag"'),
                 limits="time_limit = 60")
    assert main(["study", str(spec), "--cluster", "local:2", "--no-progress"]) == 0
    assert "6 cells; ran 6 (6 done, 0 failed)" in capsys.readouterr().out
    rows = rg.study.load(tmp_path / "s.sqlite", as_frame=False)
    assert {r["worker"].rpartition(":")[2] for r in rows} - {str(os.getpid())}  # ran elsewhere


def test_dask_missing_is_reported_with_the_extra_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    spec = _spec(tmp_path, _calls(1))
    with pytest.raises(rg.study.StudyError, match=r"pip install 'relaygraph\[study\]'"):
        rg.study.run(spec, cluster="local:2", progress=False)
    assert main(["study", str(spec), "--cluster", "local:2"]) == 2
    err = capsys.readouterr().err
    assert "relaygraph[study]" in err and "Traceback" not in err
    assert main(["study", str(spec), "--jobs", "1", "--no-progress"]) == 0  # the rest works without it


# -- bad input: refused before anything runs -------------------------------------------------------

BAD_SPECS = [
    ("[[extract]]\ninputs = ['{gym}']\nextractor = ['tree']\n",
     "unknown key in [[extract]] #1 'extractor'; allowed: inputs, extractors, time_limit, cost"),
    ("[[extract]]\ninputs = ['{gym}']\nextractors = ['tree', 'magic']\n",
     "unknown extractor 'magic'; allowed: tree, greedy-dag, greedy-dag+ls, ilp, egglog"),
    ("[[extract]]\ninputs = ['{gym}']\ncost = 'cheap'\n", "unknown cost model 'cheap'; allowed: given, "),
    ("[[extract]]\ninputs = ['{gym}/absent.json']\n", "absent.json: no such file or folder"),
    ("[[optimize]]\nmodels = ['bert']\ncost = ['fast']\n", "unknown cost model 'fast'; allowed: "),
    ("[[optimize]]\nmodels = ['nope']\n", "unknown model 'nope'; allowed: "),
    ("[[optimize]]\nmodels = ['bert']\nrules = ['magic']\n", "unknown rule set 'magic'; allowed: default, "),
    ("[[extract]]\ninputs = ['{gym}']\nmissing_roots = 'ignore'\n",
     "unknown missing_roots 'ignore'; allowed: error, drop"),
    ("[[sweep]]\n", "unknown top-level key 'sweep'; allowed: study, extract, optimize, call"),
    ("[study]\nthreads = 2\n[[call]]\nfunction = 'x:y'\n",
     "unknown key in [study] 'threads'; allowed: name, database, time_limit, memory_limit"),
    ("[[extract]]\ninputs = ['$NO_SUCH_VARIABLE_X/data']\n",
     "the environment variable NO_SUCH_VARIABLE_X is not set"),
    ("[[extract]\n", "not valid TOML"),
]


@pytest.mark.parametrize(("body", "message"), BAD_SPECS, ids=[m[:30] for _, m in BAD_SPECS])
def test_a_bad_spec_is_refused_before_anything_runs(tmp_path, capsys, body, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(body.format(gym=GYM / "dummy_examples"))
    with pytest.raises(RelayError) as info:
        rg.study.run(spec, progress=False)
    assert message in str(info.value)
    assert main(["study", str(spec)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "bad.sqlite").exists()  # nothing ran, nothing was written


def test_bad_run_options_are_refused(tmp_path, capsys):
    spec = _spec(tmp_path, _calls(1))
    assert main(["study", str(spec), "--jobs", "0"]) == 2
    assert "jobs must be a positive integer" in capsys.readouterr().err
    assert main(["study", str(spec), "--cluster", "remote"]) == 2
    assert "--cluster takes local:N" in capsys.readouterr().err
    assert main(["study", str(tmp_path / "absent.toml")]) == 2
    assert "no such spec file" in capsys.readouterr().err
    assert main(["study", "status"]) == 2
    assert "needs the study database" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def test_a_database_of_another_spec_is_refused_unless_new(tmp_path, capsys):
    first = _spec(tmp_path, _calls(2), name="a.toml")
    second = _spec(tmp_path, _calls(3), name="b.toml")
    db = tmp_path / "shared.sqlite"
    a = rg.study.run(first, db, progress=False)
    b_hash = rg.study.load_spec(second).hash
    with pytest.raises(rg.study.StudyError) as info:
        rg.study.run(second, db, progress=False)
    assert a["spec_hash"] in str(info.value) and b_hash in str(info.value)
    assert main(["study", str(second), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert a["spec_hash"] in err and b_hash in err and "--new" in err and "Traceback" not in err
    assert len(_rows(db)) == 2  # left as it was
    assert main(["study", str(second), "--db", str(db), "--new", "--no-progress"]) == 0
    assert rg.study.status(db)["spec_hash"] == b_hash and len(_rows(db)) == 3


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_database_is_reported_and_never_overwritten(tmp_path, capsys, damage):
    spec = _spec(tmp_path, _calls(2))
    db = tmp_path / "s.sqlite"
    if damage == "garbage":
        db.write_bytes(b"these are not the results you are looking for\n" * 100)
    else:
        rg.study.run(spec, progress=False)
        data = db.read_bytes()
        db.write_bytes(data[:100] + b"\xff" * 4000 + data[4100:])  # the header kept, the pages broken
    before = db.read_bytes()
    for argv in (["study", str(spec)], ["study", str(spec), "--new"], ["study", "status", str(db)],
                 ["study", "show", str(db)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert str(db) in err and ("corrupt" in err or "not a study database" in err), err
        assert "Traceback" not in err
    with pytest.raises(rg.study.StudyError):
        rg.study.load(db)
    assert db.read_bytes() == before


# -- models: optimize cells, speedup plots, ONNX -------------------------------------------------

PROGRAM = """#[version = "0.0.5"]
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {
  %0 = nn.dense(%x, %w);
  %1 = add(%0, 0f);
  nn.relu(%1)
}
"""


def test_optimize_cells_record_costs_times_and_speedup(tmp_path, capsys):
    (tmp_path / "small.relay").write_text(PROGRAM)
    body = ('[[optimize]]\ninputs = ["small.relay"]\nrules = ["algebraic", "default"]\n'
            'node_limit = [200]\nextractor = "greedy-dag"\ntime_limit = 20\n')
    spec = _spec(tmp_path, body, limits="time_limit = 120")
    counts = rg.study.run(spec, progress=False)
    rows = rg.study.load(tmp_path / "s.sqlite", as_frame=False)
    assert counts["done"] == 2, [r["error"] for r in rows]
    for r in rows:
        assert r["cost_after"] <= r["cost_before"] and r["speedup"] > 0 and r["check"] in (1, True)
    assert main(["study", "show", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "o")]) == 0
    assert "## Models" in capsys.readouterr().out
    assert (tmp_path / "o" / "s-speedup.png").stat().st_size > 0


def test_an_onnx_input_is_accepted_and_imported_through_the_frontend(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07")  # not a model: the importer must say so
    spec = _spec(tmp_path, '[[optimize]]\ninputs = ["m.onnx"]\nmeasure = false\n', limits="time_limit = 60")
    assert len(rg.study.load_spec(spec).cells) == 1
    rg.study.run(spec, progress=False)
    (row,) = rg.study.load(tmp_path / "s.sqlite", as_frame=False)
    assert row["status"] == "failed" and row["error"]
    try:
        from relaygraph.frontend import from_onnx  # noqa: F401
    except ImportError:
        assert "rg.frontend.from_onnx" in row["error"]
    else:
        assert "m.onnx" in row["error"] or "onnx" in row["error"].lower()
