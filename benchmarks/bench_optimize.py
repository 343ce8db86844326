"""Measured numpy speedup of rg.optimize, and of TVM's pass pipeline, over the original program at
full size: BERT-base (12 layers, hidden 768, 128 tokens), ResNet-50 (224x224) and MobileNet
(224x224); with ``--zoo``, every zoo model at its default size.

Targets (issue 15): BERT-base >= 1.10x, ResNet-50 >= 1.15x, MobileNet >= 1.20x, with one BLAS
thread and with two; and the e-graph at least as fast as the pipeline on every zoo model. For each
model the program is optimized once (weights bound as constants, default rule sets, ``--cost``)
and the pipeline (``--pipeline``, default tvm-o3: TVM's opt_level-3 build sequence) runs on the
same bound program; then the original, the pipeline's and the optimized program run on the same
inputs, alternated (more rounds for small programs, ``--budget``). The table shows each program's
median time, and each speedup is the median of the two programs' ratios round by round
(``paired_ratio``: this machine's speed changes state within seconds, and a state lasts across
one round far more often than across the whole measurement), by CPU time with one BLAS thread (the
load of a shared machine moves it far less than the wall clock; the cpu profile is timed alike),
else by the wall clock. Both rewritten programs are
checked against the original. The predicted speedup is the cost model's (cost before / cost
after). Each row shows the 1-minute load average after it was measured: the machine may be shared.

Processes: each model is measured in its own process per thread count, with OPENBLAS/OMP/
MKL_NUM_THREADS set before numpy loads and the cpu profile of that count (the profile file is
named by the thread counts and calibrated on first use: a profile is valid for one thread count).
A model's times then do not depend on the models measured before it: in one process, NasRNN's
e-graph program measured 6.1-6.4 ms run first and 7.3-7.9 ms after other models (its original
7.0-7.2 ms and 8.2 ms). numexpr gets the same thread count, so the fused kernels use no more
threads than the original's.

    python benchmarks/bench_optimize.py [--cost latency] [--models bert,resnet-50] [--threads 1,2]
                                        [--runs 9] [--quick] [--zoo] [--pipeline tvm-o3]

``--quick`` uses each model's small configuration (a smoke run, not the figures).

The control (``--control``, on with ``--zoo``): the original program is timed a second time in the
same alternation, as a fourth program. Every program reads its own copies of its weights
(``time_programs``: otherwise the original, the pipeline's program and the control, which share
most weight arrays, each ran with the one before's weights in the cache, and the e-graph's
program, with rewritten weights of its own, did not). The control's ratio to the original, round
by round, differs from 1 only by the measurement's own resolution on that model (the load, the
program's place in the rounds, where its copies of the weights lie in memory), and that
difference is printed (``A/A``). An e-graph program
slower than the pipeline's (round by round) by no more than it is reported as a tie within the
resolution, not as slower; the tables count both. So is one that is
slower by more, but which was slower than the pipeline's in too few of the rounds for a one-sided
sign test at 5% (the programs alternate, so each round compares the two under the same load): one
A/A difference is a single sample of the resolution, and two timings of one program have differed
by more. Where the e-graph kept the
original program (the same text), its row says so and compares the pipeline with the original's
times: two timings of one program differ only by the measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks._child import json_from_child  # noqa: E402

FULL = {"bert": dict(num_layers=12, hidden=768, heads=12, seq_len=128),
        "resnet-50": {}, "mobilenet": {}}
LABELS = {"bert": "BERT-base 12x768x128", "resnet-50": "ResNet-50 224", "mobilenet": "MobileNet 224"}
TARGETS = {"bert": 1.10, "resnet-50": 1.15, "mobilenet": 1.20}
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def default_cost() -> str:
    """``cpu`` when that cost model is registered, else ``latency``."""
    from relaygraph.egraph.cost import COST_MODELS

    return "cpu" if "cpu" in COST_MODELS else "latency"


def _set_numexpr_threads(n: int) -> None:
    import numexpr

    numexpr.set_num_threads(n)


def _options(name: str, quick: bool) -> dict:
    """The model's configuration: small with --quick, full for the issue's three, else the default."""
    return dict(small=True) if quick else FULL.get(name, {})


def _label(name: str, quick: bool) -> str:
    return f"{name} (small)" if quick else LABELS.get(name, name)


def _agree(a, b) -> bool:
    """Values of two programs agree (float tolerance; tuples element by element)."""
    import numpy as np

    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_agree(x, y) for x, y in zip(a, b, strict=True)))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True))


def run(models: list[str], threads: list[int], cost: str, runs: int, quick: bool,
        pipeline: str = "tvm-o3", budget: float = 0.0, control: bool = False) -> list[dict]:
    """Optimize each model once, run the pipeline on it, and time the three programs under each
    thread count (in this process: BLAS reads its thread count when numpy loads, so ``threads``
    holds the one it was given), with ``control`` the original a second time; one row per model
    and thread count."""
    import relaygraph as rg
    from relaygraph.egraph.compare import _ops
    from relaygraph.egraph.cpu_cost import clock_of, default_profile, machine_key
    from relaygraph.egraph.optimize import random_inputs
    from relaygraph.egraph.program_profile import paired_ratio, time_programs
    from relaygraph.errors import RelayError
    from relaygraph.ops.layouts import changes_text, count_changes, layout_changes, layout_stats

    if cost == "cpu":  # a missing or stale profile is calibrated here, not inside the opt time
        default_profile()
    rows = []
    for name in models:
        try:
            mod, params = rg.zoo.get(name, **_options(name, quick))
            start = time.perf_counter()
            res = rg.optimize(mod, params=params, cost=cost, check=True, repeats=1, timing_budget=0.0)
            seconds = time.perf_counter() - start
            piped = rg.transform.named_pipeline(pipeline)(rg.infer_type(res.original))
            inputs = random_inputs(res.original["main"], seed=1)
        except (RelayError, NotImplementedError) as exc:
            rows.append({"name": name, "label": _label(name, quick), "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {name}: {type(exc).__name__}: {exc}", flush=True)
            continue
        predicted = res.cost_before / res.cost_after if res.cost_after else float("nan")
        for n in threads:
            _set_numexpr_threads(n)
            mods = [res.original, piped, res.module]
            values = [rg.evaluate(m, *inputs) for m in mods]
            # by the cpu profile's clock: CPU time with one BLAS thread (a shared machine's load
            # moves it far less than the wall clock), else the wall clock
            samples: list = []
            times, walls, _ = time_programs(mods + [res.original] * control, inputs, runs, budget,
                                            warm_up=False,  # each ran just above, for its values
                                            samples=samples)
            unchanged = rg.astext(res.module) == rg.astext(res.original)
            # round by round, is the e-graph's program (the original, where it kept it) slower
            # than the pipeline's? (the programs alternate: one sample of each per round)
            compared = samples[0] if unchanged else samples[2]
            rows.append({"name": name, "label": _label(name, quick), "threads": n, "seconds": seconds,
                         "times": times[:3], "walls": walls[:3], "control": times[3] if control else None,
                         # the speedups over the original, round by round (paired_ratio)
                         "ratios": [paired_ratio(samples[0], s) for s in samples[1:]],
                         "predicted": predicted, "check": res.check_passed,
                         "pipeline_check": _agree(values[0], values[1]),
                         "egraph_changed": changes_text(count_changes(res.ops_before, res.ops_after)),
                         "egraph_layouts": changes_text(layout_changes(res.layouts_before,
                                                                       res.layouts_after)),
                         # the e-graph kept the original program, text for text
                         "unchanged": unchanged,
                         # the e-graph's time over the pipeline's, round by round (> 1: slower)
                         "behind": paired_ratio(compared, samples[1]),
                         "rounds": len(compared),
                         "rounds_slower": sum(c > p for c, p in zip(compared, samples[1], strict=True)),
                         "pipeline_changed": changes_text(count_changes(_ops(res.original), _ops(piped))),
                         "pipeline_layouts": changes_text(layout_changes(_ops(res.original, layout_stats),
                                                                         _ops(piped, layout_stats))),
                         "load": os.getloadavg()[0], "clock": clock_of(machine_key())})
            print(f"  {name}, {n} thread(s): measured (load {rows[-1]['load']:.1f})", flush=True)
    return rows


def sign_test(slower: int, rounds: int) -> float:
    """One-sided sign test: the chance that a program no slower than another is slower in at least
    ``slower`` of ``rounds`` alternated rounds (each round a fair coin)."""
    return sum(math.comb(rounds, k) for k in range(slower, rounds + 1)) / 2 ** rounds


def report(rows: list[dict], cost: str, pipeline: str = "tvm-o3") -> None:
    """Print the table, then the ops (and the layouts of the ops that take them) each optimization
    changed."""
    clocks = sorted({"CPU time" if r["clock"] == "cpu" else "wall clock" for r in rows if "clock" in r})
    print(f"cost model: {cost}; pipeline: {pipeline}; medians of alternated runs by {' and '.join(clocks)} "
          "(CPU time with one BLAS thread), speedups the medians of the rounds' ratios; load = 1-minute "
          "load average after the row (the machine may be shared)")
    control = any(r.get("control") for r in rows)
    print(f"{'model':<22}{'threads':>8}{'opt time':>10}{'original':>11}{'pipeline':>11}{'e-graph':>11}"
          f"{'pipe x':>8}{'e-graph x':>10}{'predicted':>10}{'target':>8}{'load':>6}"
          f"{format('A/A', '>7') if control else ''}  verdict")
    counts = {"ahead": 0, "tie": 0, "slower": 0}
    for row in rows:
        if "error" in row:
            print(f"{row['label']:<22}  not measured: {row['error']}")
            continue
        before, piped, after = row["times"]
        pipe_speedup, speedup = row["ratios"][:2]
        target = TARGETS.get(row["name"])
        verdicts = []
        if target is not None:
            verdicts.append("ok" if speedup >= target else "BELOW TARGET")
        spread = abs(row["ratios"][2] - 1) if row.get("control") else 0.0
        slower_in = row.get("rounds_slower"), row.get("rounds")
        # a program kept unchanged is the original: any difference between its times and the
        # original's is the timing's own, so it is compared with the pipeline as the original
        # ("behind" is the original's over the pipeline's then)
        behind = row["behind"]
        if row.get("unchanged"):
            verdicts.append("e-graph kept the original program")
        if behind <= 1:
            verdicts.append(">= pipeline")
            counts["ahead"] += 1
        elif behind - 1 <= spread:
            verdicts.append(f"tie with pipeline (slower by {behind - 1:.1%}, within A/A)")
            counts["tie"] += 1
        elif slower_in[1] and sign_test(*slower_in) >= 0.05:
            verdicts.append(f"tie with pipeline (slower by {behind - 1:.1%}, but in only "
                            f"{slower_in[0]} of {slower_in[1]} rounds)")
            counts["tie"] += 1
        else:
            verdicts.append("SLOWER THAN PIPELINE")
            counts["slower"] += 1
        if row["check"] is not True:
            verdicts.append(f"CHECK {'FAILED' if row['check'] is False else 'INCONCLUSIVE'}")
        if not row["pipeline_check"]:
            verdicts.append("PIPELINE VALUES DIFFER")
        shown = f"{target:.2f}x" if target is not None else "-"
        print(f"{row['label']:<22}{row['threads']:>8}{row['seconds']:>9.1f}s{before * 1e3:>9.1f}ms"
              f"{piped * 1e3:>9.1f}ms{after * 1e3:>9.1f}ms{pipe_speedup:>7.2f}x{speedup:>9.2f}x"
              f"{row['predicted']:>9.2f}x{shown:>8}{row['load']:>6.1f}"
              f"{f'{spread:>6.1%}' if control else ''}  {', '.join(verdicts)}")
    print(f"e-graph against the pipeline: at least as fast on {counts['ahead']}, a tie within the A/A "
          f"resolution on {counts['tie']}, slower on {counts['slower']}")
    seen = set()
    for row in rows:
        if "error" in row or row["name"] in seen:
            continue
        seen.add(row["name"])
        print(f"  {row['name']} e-graph changed: {row['egraph_changed']}")
        print(f"  {row['name']} e-graph changed layouts: {row.get('egraph_layouts', 'none')}")
        print(f"  {row['name']} {pipeline} changed: {row['pipeline_changed']}")
        print(f"  {row['name']} {pipeline} changed layouts: {row.get('pipeline_layouts', 'none')}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cost", default=None, help="cost model for extraction (default: cpu if "
                                                "registered, else latency)")
    p.add_argument("--models", default="bert,resnet-50,mobilenet")
    p.add_argument("--zoo", action="store_true", help="every zoo model at its default size "
                                                      "(the issue's three at full size)")
    p.add_argument("--pipeline", default="tvm-o3", help="the named pass pipeline compared (default tvm-o3)")
    p.add_argument("--threads", default="1,2", help="BLAS (and numexpr) thread counts")
    p.add_argument("--runs", type=int, default=9, help="alternated runs of each program")
    p.add_argument("--quick", action="store_true", help="small configurations (a smoke run)")
    p.add_argument("--budget", type=float, default=3.0, help="seconds of extra alternated runs for "
                                                             "small programs (up to 200 runs)")
    p.add_argument("--control", action=argparse.BooleanOptionalAction, default=None,
                   help="time the original a second time, as the resolution of the comparison (default: "
                        "on with --zoo)")
    p.add_argument("--rows-out", help=argparse.SUPPRESS)  # a model's process: its rows as JSON here
    args = p.parse_args(argv)
    import relaygraph as rg

    known = rg.zoo.names()
    models = known if args.zoo else [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in known]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        rg.transform.named_pipeline(args.pipeline)
    except rg.RelayError as exc:
        p.error(str(exc))
    threads = [int(t) for t in args.threads.split(",")]
    cost = args.cost or default_cost()
    if args.control is None:
        args.control = args.zoo
    if args.rows_out:  # a model's process, its BLAS threads set by the parent
        rows = run(models, threads, cost, args.runs, args.quick, args.pipeline, args.budget, args.control)
        with open(args.rows_out, "w") as f:
            json.dump(rows, f, default=float)
        return 0
    return _in_subprocesses(models, threads, cost, args)


def _in_subprocesses(models: list[str], threads: list[int], cost: str, args) -> int:
    """Each model under each thread count in its own process, whose BLAS reads the count from
    the environment when numpy loads; the rows printed per thread count."""
    from relaygraph.egraph.cpu_cost import profile_path

    # A cpu profile is made for one thread count; each count has its own file (calibrated once).
    profiles = os.path.dirname(profile_path())
    options = ["--cost", cost, "--pipeline", args.pipeline, "--runs", str(args.runs),
               "--budget", str(args.budget)] + (["--quick"] if args.quick else []) \
        + ["--control" if args.control else "--no-control"]
    status = 0
    for n in threads:
        env = dict(os.environ, **{v: str(n) for v in _THREAD_VARS}, NUMEXPR_NUM_THREADS=str(n))
        print(f"== {n} BLAS thread(s), each model in its own process (cpu profile "
              f"{os.path.join(profiles, f'cpu-profile-blas{n}-numexpr{n}.json')})", flush=True)
        rows = []
        for name in models:
            got, code = json_from_child(__file__, [*options, "--models", name, "--threads", str(n)],
                                        "--rows-out", env)
            if got is not None:
                rows += got
            else:
                status |= 1
                rows.append({"name": name, "label": _label(name, args.quick),
                             "error": f"its process exited with code {code}"})
        report(rows, cost, args.pipeline)
    return status


if __name__ == "__main__":
    sys.exit(main())
