"""How much the calibration's curves move from one measurement to the next: every curve point
measured together, samples alternated over the whole part (``_Calibration.curves``, as the
calibration does), against each point measured on its own, one after the other (its samples
within a few milliseconds), in this process, the two ways alternated run by run.

For each way, ``--runs`` measurements of every curve (each op's time at each work size, the full
calibration's sizes); per point, the largest of its measurements over the smallest; printed: the
median and the 90th percentile of that over the points, and a few points in full (microseconds).
"relative" does the same after dividing each run's times by how much faster or slower that run
was as a whole (the median over the points of its time over the first run's): what is left is
how the prices of ops against each other moved, which is what a predicted speedup reads.
A machine whose speed flips between states faster than a part of the calibration takes each point
measured on its own in whichever state held then; measured together, each point's samples are
spread over the part. BLAS and numexpr on one thread, the profile's clock.

    python benchmarks/bench_calibrate.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from relaygraph.egraph import calibrate as cal  # noqa: E402
from relaygraph.eval.memory import pin_allocator  # noqa: E402

SHOWN = ("nn.batch_norm", "nn.relu", "add", "nn.max_pool2d", "erf")


def one_by_one(run) -> dict:
    """Every curve with each point (the calibration's own, ``curve_points``) measured on its own,
    one after the other."""
    points = run.curve_points()
    return cal.curves_of(points, [run.time(call) for _, _, call in points])


def together(run) -> dict:
    run.curves()
    return run.data["curves"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measurements of the curves each way")
    args = parser.parse_args()
    if args.runs < 2:  # the figure is a point's largest measurement over its smallest
        parser.error(f"--runs must be at least 2 (got {args.runs}): the spread needs two measurements")
    pin_allocator()
    ways = {"one by one": one_by_one, "together": together}
    made: dict[str, list[dict]] = {w: [] for w in ways}
    seconds: dict[str, list[float]] = {w: [] for w in ways}
    names = list(ways)
    for r in range(args.runs):
        for way in names[r % 2:] + names[:r % 2]:  # the order alternates run by run
            run = cal._Calibration(quick=False, progress=False)
            start = time.perf_counter()
            made[way].append(ways[way](run))
            seconds[way].append(time.perf_counter() - start)
            print(f"  run {r + 1}, {way}: {seconds[way][-1]:.1f} s", flush=True)
    print(f"per curve point, its largest measurement over its smallest, over {args.runs} runs each way")
    print(f"{'way':<11} {'median':>7} {'p90':>6} | {'relative':>8} {'p90':>6} | {'seconds':>8}   "
          + "  ".join(f"{n} (us)" for n in SHOWN))
    for way, curves in made.items():
        points = [(name, i) for name in curves[0] if name not in ("copy", "copy_strided", "concatenate")
                  for i in range(len(curves[0][name]))]
        table = np.array([[c[name][i][1] for name, i in points] for c in curves])  # runs x points
        scale = np.median(table / table[0], axis=1, keepdims=True)  # each run's speed as a whole
        spread, relative = (np.max(t, axis=0) / np.min(t, axis=0) for t in (table, table / scale))
        shown = "  ".join("/".join(f"{c[n][-2][1] * 1e6:.0f}" for c in curves) for n in SHOWN)
        print(f"{way:<11} {np.median(spread):>7.3f} {np.percentile(spread, 90):>6.3f} | "
              f"{np.median(relative):>8.3f} {np.percentile(relative, 90):>6.3f} | "
              f"{statistics.median(seconds[way]):>8.1f}   {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
