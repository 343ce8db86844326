"""Kernels and whole programs with glibc malloc's thresholds left to move against pinned
(``relaygraph.eval.memory``).

Pinning cannot be undone in a process, so each setting runs in processes of its own, alternated
(default, pinned, default, pinned, ... for ``--rounds``), and the medians of each setting are
compared. In every process, one BLAS thread:

- kernels: ``winograd_conv2d`` with its bias and relu, looped on one input, on ResNet-50's 3x3
  shapes (64 channels on 56x56 to 512 on 7x7) and on a few-in, many-out shape (16 -> 64 on
  56x56), the same kernel's parts timed apart beside it where it runs by tile (both settings'
  processes: the parts' temporaries are made once, outside the loops);
- programs (``--models``): the original and the e-graph's program (``rg.optimize``, cpu model),
  alternated in the process; the speedup of each process.

Prints per kernel the median time under each setting and default / pinned; per model the
speedups under each setting. The figures quoted in relaygraph.eval.memory come from here.

    python benchmarks/bench_allocator.py [--rounds 3] [--models resnet-50,mobilenet]
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

from benchmarks._child import json_from_child  # noqa: E402

# (in channels, out channels, image size)
SHAPES = [(64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7), (16, 64, 56)]
SETTINGS = ("default", "pinned")


def _median_ms(fn, runs: int = 21) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _kernel(c: int, o: int, hw: int, rng) -> dict:
    """The whole kernel looped, and (on its path by tile) its parts (input transform, GEMMs,
    output transform) looped apart, in ms, for ``c`` -> ``o`` channels on ``hw`` x ``hw``."""
    import numpy as np

    from relaygraph.ops import winograd as W

    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    u = W.winograd_weight((rng.standard_normal((o, c, 3, 3)) / 10).astype(np.float32))
    b = rng.standard_normal(o).astype(np.float32)
    whole = _median_ms(lambda: W.winograd_conv2d(x, u, (1, 1, 1, 1), b, True))
    t = (hw + 1) // 2
    if t * t < o:  # the path by output channel: its parts are not the ones timed below
        return {"whole": whole, "parts": None}
    v = W._input_transform(x, (1, 1, 1, 1), t, t)
    weights = u.transpose(0, 1, 3, 2).reshape(16, c, o)
    m = np.matmul(v.reshape(16, t * t, c), weights).reshape(4, 4, t, t, 1, o)
    parts = (_median_ms(lambda: W._input_transform(x, (1, 1, 1, 1), t, t))
             + _median_ms(lambda: np.matmul(v.reshape(16, t * t, c), weights))
             + _median_ms(lambda: W._output_transform(m, hw, hw, True)))
    return {"whole": whole, "parts": parts}


def kernels() -> dict:
    """Per shape of ``SHAPES``: ``_kernel``'s figures."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {f"{c}->{o} on {hw}x{hw}": _kernel(c, o, hw, rng) for c, o, hw in SHAPES}


def programs(models: list[str]) -> dict:
    """Per model: the original's and the e-graph program's median seconds, alternated."""
    import relaygraph as rg
    from relaygraph.egraph.optimize import random_inputs
    from relaygraph.egraph.program_profile import time_programs

    out = {}
    for name in models:
        mod, params = rg.zoo.get(name)
        res = rg.optimize(mod, params=params, cost="cpu", check=False, repeats=1, timing_budget=0.0)
        inputs = random_inputs(res.original["main"], seed=1)
        times, _, _ = time_programs([res.original, res.module], inputs, 9, 3.0)
        out[name] = {"original": times[0], "e-graph": times[1]}
    return out


def child(models: list[str], path: str) -> int:
    import json

    from relaygraph.eval.memory import allocator_pinned, pin_allocator

    pin_allocator()  # as the executor does: RELAYGRAPH_MALLOC (set by the parent) decides
    result = {"pinned": allocator_pinned(), "kernels": kernels(), "programs": programs(models)}
    with open(path, "w") as f:
        json.dump(result, f)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="processes of each setting, alternated")
    p.add_argument("--models", default="", help="comma-separated zoo models whose programs to time too")
    p.add_argument("--out", help=argparse.SUPPRESS)  # a child process: its figures as JSON here
    args = p.parse_args()
    models = [m for m in args.models.split(",") if m]
    if args.out:
        return child(models, args.out)
    results: dict[str, list] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting in SETTINGS:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
            env["RELAYGRAPH_MALLOC"] = setting
            got, code = json_from_child(__file__, ["--models", args.models], "--out", env)
            if got is None:
                print(f"the {setting} process exited with code {code}")
                return 1
            if got["pinned"] != (setting == "pinned"):
                print(f"the {setting} process did not get that setting (not glibc?)")
                return 1
            results[setting].append(got)
            print(f"  round {r + 1}, {setting}: measured", flush=True)
    med = statistics.median
    print(f"winograd_conv2d with bias and relu, one BLAS thread, looped; medians over {args.rounds} "
          "process(es) of each setting, alternated")
    print(f"{'shape':<20}{'default ms':>11}{'pinned ms':>11}{'default/pinned':>16}{'parts ms':>10}"
          f"   {'default, each process':<24}pinned, each process")
    for shape in results["pinned"][0]["kernels"]:
        each = {s: [g["kernels"][shape]["whole"] for g in results[s]] for s in SETTINGS}
        d, pn = med(each["default"]), med(each["pinned"])
        parts = [g["kernels"][shape]["parts"] for s in SETTINGS for g in results[s]]
        shown = f"{med(parts):>10.2f}" if None not in parts else f"{'-':>10}"
        spread = {s: " ".join(f"{t:.2f}" for t in each[s]) for s in SETTINGS}
        print(f"{shape:<20}{d:>11.2f}{pn:>11.2f}{d / pn:>15.2f}x{shown}   {spread['default']:<24}"
              f"{spread['pinned']}")
    if models:
        print("whole programs (original / e-graph, alternated in each process): speedup per process")
        for name in models:
            row = {s: [g["programs"][name]["original"] / g["programs"][name]["e-graph"] for g in results[s]]
                   for s in SETTINGS}
            orig = {s: med(g["programs"][name]["original"] for g in results[s]) * 1e3 for s in SETTINGS}
            shown = {s: ", ".join(f"{x:.3f}x" for x in row[s]) for s in SETTINGS}
            print(f"{name:<16} default {shown['default']} (original {orig['default']:.1f} ms); "
                  f"pinned {shown['pinned']} (original {orig['pinned']:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
