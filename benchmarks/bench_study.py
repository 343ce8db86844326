"""A slice of the extraction-gym corpus as a study on 1 and on 2 local Dask workers: the time ratio.

Both clusters are started first and warmed by one run each (worker start-up and the cell servers'
imports are not the study's work); then the two are timed alternately, each run into a new
database, and the medians compared. The target is a ratio of at least 1.7 on an idle 2-core
machine; on a machine shared with other jobs the second worker has less than a core to itself.

    python benchmarks/bench_study.py [--gym DIR] [--sets rover,tensat] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_GYM = ROOT.parent / "shared" / "data" / "extraction-gym" / "data"
if not DEFAULT_GYM.exists():  # a worktree one level deeper
    DEFAULT_GYM = ROOT.parents[1] / "shared" / "data" / "extraction-gym" / "data"


def timed_run(spec: dict, address: str, tmp: str, tag: str) -> float:
    import relaygraph as rg

    db = os.path.join(tmp, f"{tag}-{time.time_ns()}.sqlite")
    start = time.perf_counter()
    counts = rg.study.run(spec, db, scheduler=address, progress=False)
    seconds = time.perf_counter() - start
    assert counts["done"] + counts["failed"] == counts["cells"], counts
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gym", default=str(DEFAULT_GYM), help="the corpus's data folder")
    parser.add_argument("--sets", default="rover,tensat", help="comma-separated folders of the corpus")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import distributed

    import relaygraph as rg

    inputs = [str(Path(args.gym) / s) for s in args.sets.split(",")]
    spec = {"study": {"time_limit": 120, "memory_limit": 4000},
            "extract": {"inputs": inputs, "extractors": ["tree", "greedy-dag", "ilp"], "time_limit": 10}}
    cells = len(rg.study.parse_spec(spec).cells)
    print(f"slice: {args.sets} ({cells} cells: files x tree, greedy-dag, ilp with 10 s); "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    clusters = {n: distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                                            dashboard_address=":0", silence_logs=logging.ERROR)
                for n in (1, 2)}
    times: dict[int, list[float]] = {1: [], 2: []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, cluster in clusters.items():
                warm = timed_run(spec, cluster.scheduler_address, tmp, "warm")
                print(f"warm-up on {n} worker(s): {warm:.1f} s", flush=True)
            for _ in range(args.repeats):
                for n, cluster in clusters.items():  # alternated, so load changes hit both alike
                    times[n].append(timed_run(spec, cluster.scheduler_address, tmp, str(n)))
                    print(f"{n} worker(s): {times[n][-1]:.1f} s", flush=True)
    finally:
        for cluster in clusters.values():
            cluster.close()
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"median: 1 worker {one:.1f} s, 2 workers {two:.1f} s; ratio {one / two:.2f}x "
          f"(target >= 1.7x on an idle machine; load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
