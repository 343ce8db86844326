"""Does the cpu cost model predict the machine? For every zoo model at its default size: predicted
vs measured program time under ``cpu`` (target within +-15%), and predicted vs measured speedup of
the program ``rg.optimize(cost="cpu")`` writes (target within +-0.05), with the latency model's
figures beside them for contrast (its "time" is its cost in seconds on its GPU-like machine).

Measured times are medians of alternated runs of the original and the optimized program in this
process (``compare_times``, as ``rg.optimize`` checks). BLAS runs on one thread unless the
environment says otherwise (set before numpy loads), and the profile used is this thread
setting's own (``$RELAYGRAPH_PROFILE_DIR``, default ``<cache>/bench-blas-<threads>``), calibrated
on first use: a two-thread matmul waiting for a core the rest of a shared machine holds swings by
whole scheduler slices.

    python benchmarks/bench_cost.py                    # every zoo model, default sizes
    python benchmarks/bench_cost.py --models bert,resnet-18 --small
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph as rg  # noqa: E402
from relaygraph.egraph.cost import cache_dir  # noqa: E402
from relaygraph.egraph.cpu_cost import default_profile  # noqa: E402
from relaygraph.egraph.optimize import bind_params, compare_times, program_cost, random_inputs  # noqa: E402
from relaygraph.egraph.program_profile import predict  # noqa: E402

TIME_TARGET = 0.15
SPEEDUP_TARGET = 0.05


def _row(name: str, options: dict, args) -> dict:
    mod, params = rg.zoo.get(name, **options)
    bound = rg.infer_type(bind_params(mod, params, "main"))
    res = rg.optimize(bound, cost="cpu", time_limit=args.time_limit, check=False)
    optimized = res.module
    inputs = random_inputs(bound, 0)
    before, after, _, _ = compare_times(bound, optimized, inputs, args.runs, budget=args.budget)
    pred_before, pred_after = predict(bound), predict(optimized)
    try:
        lat_before = program_cost(bound, "main", "latency")
        lat_after = program_cost(rg.infer_type(res.module), "main", "latency")
    except (rg.RelayError, NotImplementedError) as exc:  # the latency figure is only for contrast
        print(f"  ({name}: no latency figure: {exc})")
        lat_before = lat_after = float("nan")
    return {"model": name, "measured": before, "predicted": pred_before,
            "speedup": before / after, "pred_speedup": pred_before / pred_after,
            "lat_time": lat_before, "lat_speedup": lat_before / lat_after if lat_after else float("nan")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", help="comma-separated zoo models (default: all)")
    parser.add_argument("--small", action="store_true", help="the models' small configurations")
    parser.add_argument("--runs", type=int, default=11, help="alternated timed runs of each program")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of extra runs for small programs")
    parser.add_argument("--time-limit", type=float, default=60.0, help="saturation seconds per model")
    args = parser.parse_args()
    threads = os.environ["OPENBLAS_NUM_THREADS"]
    os.environ.setdefault("RELAYGRAPH_PROFILE_DIR", os.path.join(cache_dir(), f"bench-blas-{threads}"))
    model = default_profile()
    names = args.models.split(",") if args.models else list(rg.zoo.MODELS)
    print(f"cpu profile: {model.profile.path} ({'quick' if model.profile.quick else 'full'}), "
          f"BLAS threads {threads}, load average {os.getloadavg()[0]:.1f} (the machine is shared: "
          "other work running at the same time moves measured times)")
    head = (f"{'model':<16} {'measured ms':>11} {'cpu pred ms':>11} {'error':>7} | {'speedup':>7} "
            f"{'cpu pred':>8} {'diff':>6} | {'latency ms':>10} {'lat. speedup':>12}")
    print(head)
    print("-" * len(head))
    rows, started = [], time.perf_counter()
    for name in names:
        try:
            row = _row(name, {"small": True} if args.small else {}, args)
        except rg.RelayError as exc:  # e.g. a program the per-node walk cannot run: said, not hidden
            print(f"{name:<16} not measured: {exc}", flush=True)
            continue
        rows.append(row)
        err = row["predicted"] / row["measured"] - 1
        diff = row["pred_speedup"] - row["speedup"]
        print(f"{name:<16} {row['measured'] * 1e3:>11.2f} {row['predicted'] * 1e3:>11.2f} {err:>+7.0%}"
              f"{'' if abs(err) <= TIME_TARGET else '!'} | {row['speedup']:>6.2f}x "
              f"{row['pred_speedup']:>7.2f}x "
              f"{diff:>+6.2f}{'' if abs(diff) <= SPEEDUP_TARGET else '!'} | {row['lat_time'] * 1e3:>10.3f} "
              f"{row['lat_speedup']:>11.2f}x", flush=True)
    within = sum(abs(r["predicted"] / r["measured"] - 1) <= TIME_TARGET for r in rows)
    close = sum(abs(r["pred_speedup"] - r["speedup"]) <= SPEEDUP_TARGET for r in rows)
    print(f"\nprogram time within +-{TIME_TARGET:.0%}: {within}/{len(rows)}; speedup within "
          f"+-{SPEEDUP_TARGET}: {close}/{len(rows)} ('!' marks a miss); "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
