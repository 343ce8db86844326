"""Measured numpy speedup of rg.optimize over the original program at full size: BERT-base
(12 layers, hidden 768, 128 tokens), ResNet-50 (224x224) and MobileNet (224x224).

Targets (issue 15): BERT-base >= 1.10x, ResNet-50 >= 1.15x, MobileNet >= 1.20x, with one BLAS
thread and with two. For each model the program is optimized once (weights bound as constants,
default rule sets, ``--cost``), then the original and the optimized program run on the same
inputs, alternated, and the medians are compared; the optimized program is checked against the
original. The predicted speedup is the cost model's (cost before / cost after).

Thread counts: with threadpoolctl installed, BLAS threads are limited in this process; otherwise
each count runs in a subprocess with OPENBLAS/OMP/MKL_NUM_THREADS set before numpy loads. numexpr
gets the same count, so the fused kernels use no more threads than the original's.

    python benchmarks/bench_optimize.py [--cost latency] [--models bert,resnet-50] [--threads 1,2]
                                        [--runs 9] [--quick]

``--quick`` uses each model's small configuration (a smoke run, not the figures).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

FULL = {"bert": dict(num_layers=12, hidden=768, heads=12, seq_len=128),
        "resnet-50": {}, "mobilenet": {}}
LABELS = {"bert": "BERT-base 12x768x128", "resnet-50": "ResNet-50 224", "mobilenet": "MobileNet 224"}
TARGETS = {"bert": 1.10, "resnet-50": 1.15, "mobilenet": 1.20}
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def default_cost() -> str:
    """``cpu`` when that cost model is registered, else ``latency``."""
    from relaygraph.egraph.cost import COST_MODELS

    return "cpu" if "cpu" in COST_MODELS else "latency"


def _limiter():
    """A context manager factory limiting BLAS threads in process (threadpoolctl), or None."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return lambda n: threadpool_limits(limits=n)


def _set_numexpr_threads(n: int) -> None:
    import numexpr

    numexpr.set_num_threads(n)


def run(models: list[str], threads: list[int], cost: str, runs: int, quick: bool) -> list[tuple]:
    """Optimize each model once and time it under each thread count; rows of results."""
    import contextlib

    import relaygraph as rg
    from relaygraph.egraph.optimize import median_times, random_inputs

    limit = _limiter()
    rows = []
    for name in models:
        options = dict(small=True) if quick else FULL[name]
        mod, params = rg.zoo.get(name, **options)
        start = time.perf_counter()
        res = rg.optimize(mod, params=params, cost=cost, check=True, repeats=1, timing_budget=0.0)
        seconds = time.perf_counter() - start
        inputs = random_inputs(res.original["main"], seed=1)
        predicted = res.cost_before / res.cost_after if res.cost_after else float("nan")
        for n in threads:
            _set_numexpr_threads(n)
            with (limit(n) if limit is not None else contextlib.nullcontext()):
                (before, after), _ = median_times([res.original, res.module], inputs, runs)
            label = f"{name} (small)" if quick else LABELS[name]
            rows.append((name, label, n, seconds, before, after, predicted, res.check_passed, res))
    return rows


def report(rows: list[tuple], cost: str) -> None:
    """Print the table, then the ops each optimization changed."""
    print(f"cost model: {cost}; medians of alternated runs; the machine may be loaded by other work")
    print(f"{'model':<22}{'threads':>8}{'opt time':>10}{'original':>11}{'e-graph':>11}{'measured':>10}"
          f"{'predicted':>10}{'target':>8}  verdict")
    for name, label, n, seconds, before, after, predicted, check, _ in rows:
        speedup = before / after
        target = TARGETS[name]
        verdict = "ok" if speedup >= target else "BELOW TARGET"
        verdict += "" if check else f", CHECK {'FAILED' if check is False else 'INCONCLUSIVE'}"
        print(f"{label:<22}{n:>8}{seconds:>9.1f}s{before * 1e3:>9.1f}ms{after * 1e3:>9.1f}ms"
              f"{speedup:>9.2f}x{predicted:>9.2f}x{target:>7.2f}x  {verdict}")
    seen = set()
    for name, *_, res in rows:
        if name in seen:
            continue
        seen.add(name)
        changed = [f"{k} {res.ops_before.get(k, 0)}->{res.ops_after.get(k, 0)}"
                   for k in sorted(set(res.ops_before) | set(res.ops_after))
                   if res.ops_before.get(k, 0) != res.ops_after.get(k, 0)]
        print(f"  {name} ops changed: {', '.join(changed) or 'none'}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cost", default=None, help="cost model for extraction (default: cpu if "
                                                "registered, else latency)")
    p.add_argument("--models", default="bert,resnet-50,mobilenet")
    p.add_argument("--threads", default="1,2", help="BLAS (and numexpr) thread counts")
    p.add_argument("--runs", type=int, default=9, help="alternated runs of each program")
    p.add_argument("--quick", action="store_true", help="small configurations (a smoke run)")
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in FULL]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(FULL)})")
    threads = [int(t) for t in args.threads.split(",")]
    cost = args.cost or default_cost()
    if _limiter() is not None or len(threads) == 1:
        if _limiter() is None and os.environ.get("OPENBLAS_NUM_THREADS") != str(threads[0]):
            return _in_subprocess(argv, threads)
        report(run(models, threads, cost, args.runs, args.quick), cost)
        return 0
    return _in_subprocess(argv, threads)


def _in_subprocess(argv, threads: list[int]) -> int:
    """Run this benchmark once per thread count, each in a process whose BLAS reads the count
    from the environment when numpy loads (no threadpoolctl here)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    base = [a for i, a in enumerate(argv) if not a.startswith("--threads")
            and not (i > 0 and argv[i - 1] == "--threads")]
    status = 0
    for n in threads:
        env = dict(os.environ, **{v: str(n) for v in _THREAD_VARS}, NUMEXPR_NUM_THREADS=str(n))
        print(f"== {n} BLAS thread(s), in a subprocess", flush=True)
        status |= subprocess.call([sys.executable, __file__, *base, "--threads", str(n)], env=env)
    return status


if __name__ == "__main__":
    sys.exit(main())
