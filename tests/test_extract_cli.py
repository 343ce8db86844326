"""``relaygraph extract-bench``: the table, the CSV and PNG, parallel files, and bad input."""

import csv
import shutil
from pathlib import Path

from relaygraph.cli import main

GYM = Path(__file__).parent / "data" / "extraction-gym"
CHOICE = str(GYM / "data" / "dummy_examples" / "choice.json")
MULTI = str(GYM / "test_data" / "crafted" / "multi_root.json")


def test_extract_bench_prints_the_table_and_writes_csv_md_png(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["extract-bench", CHOICE, MULTI, "--extractors", "tree,greedy-dag,ilp",
                 "--time-limit", "20", "--jobs", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    text = capsys.readouterr().out
    assert "tree cost" in text and "DAG cost" in text and "optimal?" in text
    rows = list(csv.DictReader((out / "extract-bench.csv").open()))
    assert [(Path(r["file"]).name, r["extractor"]) for r in rows] == [
        ("choice.json", "tree"), ("choice.json", "greedy-dag"), ("choice.json", "ilp"),
        ("multi_root.json", "tree"), ("multi_root.json", "greedy-dag"), ("multi_root.json", "ilp")]
    by = {(Path(r["file"]).name, r["extractor"]): r for r in rows}
    assert float(by["choice.json", "ilp"]["dag_cost"]) == 37.0
    assert float(by["choice.json", "tree"]["dag_cost"]) == 52.0
    assert by["choice.json", "ilp"]["optimal"] == "True" and by["choice.json", "tree"]["optimal"] == ""
    assert all(r["status"] == "ok" for r in rows)
    assert (out / "extract-bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "extract-bench.md").read_text().splitlines()
    assert md[0].startswith("| file | extractor |") and len(md) == 2 + len(rows)


def test_extract_bench_takes_directories_and_egglog(tmp_path, capsys):
    folder = tmp_path / "graphs"
    folder.mkdir()
    shutil.copy(MULTI, folder / "multi_root.json")
    code = main(["extract-bench", str(folder), "--extractors", "egglog,tree", "--out", str(tmp_path / "o"),
                 "--no-plot", "--no-progress"])
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "o" / "extract-bench.csv").open()))
    assert [r["extractor"] for r in rows] == ["egglog", "tree"]
    assert rows[0]["dag_cost"] == rows[1]["dag_cost"] == "15.0"
    assert not (tmp_path / "o" / "extract-bench.png").exists()


def test_extract_bench_bad_input_is_a_usage_error(tmp_path, capsys):
    assert main(["extract-bench", str(tmp_path / "absent.json"), "--out", str(tmp_path)]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["extract-bench", MULTI, "--extractors", "tree,magic", "--out", str(tmp_path)]) == 2
    assert "unknown extractor magic" in capsys.readouterr().err
    assert main(["extract-bench", MULTI, "--time-limit", "0", "--out", str(tmp_path)]) == 2


def test_a_malformed_file_is_reported_and_the_others_still_run(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": {"a": {"op": "x"}}, "root_eclasses": ["a"]}')
    code = main(["extract-bench", str(broken), MULTI, "--extractors", "tree", "--out", str(tmp_path / "o"),
                 "--no-plot", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert "broken.json" in captured.err and "needs an 'eclass'" in captured.err
    assert "Traceback" not in captured.err
    rows = list(csv.DictReader((tmp_path / "o" / "extract-bench.csv").open()))
    assert rows[0]["status"].startswith("error") and rows[1]["status"] == "ok"
