"""Measured numpy speedup of rg.optimize on the demo's BERT configuration, on larger BERT
encoders, and on ResNet-50.

The original and two forms of the optimized program run in this process on the same inputs,
alternated, and the median times are compared (target: BERT demo >= 1.2x): the standard Relay that
rg.optimize writes by default (each fused op a ``Primitive=1`` function of its parts, which the
executor recognises) and the compact form with ``fused.*`` ops (``keep_fused_ops=True``). The
optimized program is also checked against the original.

The BERT sizes show where the speedup comes from: numpy runs one kernel per op, so on small
encoders the time is mostly per-kernel dispatch, which fusion removes (the demo's configuration is
the zoo's ``small=True`` one); as the encoder grows the matmuls take over, and they do the same
work before and after, so the speedup falls towards 1x.

BLAS runs on one thread here (set before numpy loads): a two-thread matmul that waits for a core
the rest of the machine is using made the larger cases swing by 2x from run to run.
"""

from __future__ import annotations

import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph as rg  # noqa: E402
from relaygraph.egraph.optimize import median_times, random_inputs, standard_relay  # noqa: E402
from relaygraph.eval import values_equal  # noqa: E402

DEMO_BERT = dict(small=True)  # what `make demo` runs: 2 layers, hidden 32, 4 heads, 8 tokens
CASES = [("bert (demo)", "bert", DEMO_BERT),
         ("bert 64/16", "bert", dict(num_layers=2, hidden=64, heads=4, seq_len=16)),
         ("bert 128/32", "bert", dict(num_layers=2, hidden=128, heads=4, seq_len=32)),
         ("bert 256/64", "bert", dict(num_layers=2, hidden=256, heads=4, seq_len=64)),
         ("resnet-50", "resnet-50", {})]
RUNS = 31


def main() -> None:
    print("bert h/s: 2 layers, hidden h, 4 heads, s tokens; speedups over the original: standard "
          "Relay output (default) | fused.* ops kept")
    print(f"{'model':<14}{'opt time':>10}{'original':>12}{'standard':>12}{'fused ops':>12}"
          f"{'speedup':>9}{'kept':>8}  check")
    for label, name, options in CASES:
        mod, params = rg.zoo.get(name, **options)
        start = time.perf_counter()
        res = rg.optimize(mod, params=params, check=True, repeats=1, keep_fused_ops=True)
        seconds = time.perf_counter() - start
        standard = standard_relay(res.module)  # what rg.optimize returns by default
        inputs = random_inputs(res.original["main"], seed=1)
        runs = RUNS if name == "bert" else 9
        (before, after_std, after_kept), values = median_times([res.original, standard, res.module],
                                                               inputs, runs)
        same = values_equal(values[1], values[2])
        verdict = {True: "ok", False: "DIFFERS", None: "INCONCLUSIVE"}[res.check_passed]
        verdict += "" if same else ", FORMS DIFFER"
        err = "n/a" if res.max_abs_error is None else f"{res.max_abs_error:.2g}"
        print(f"{label:<14}{seconds:>9.1f}s{before * 1e3:>10.2f}ms{after_std * 1e3:>10.2f}ms"
              f"{after_kept * 1e3:>10.2f}ms{before / after_std:>8.2f}x{before / after_kept:>7.2f}x"
              f"  {verdict} (max abs err {err})")
        changed = {k: (res.ops_before.get(k, 0), res.ops_after.get(k, 0))
                   for k in set(res.ops_before) | set(res.ops_after)
                   if res.ops_before.get(k, 0) != res.ops_after.get(k, 0)}
        print("   ops:", ", ".join(f"{k} {a}->{b}" for k, (a, b) in sorted(changed.items())))
    print("target: BERT demo speedup >= 1.2x")


if __name__ == "__main__":
    main()
