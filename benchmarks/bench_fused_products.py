"""A dense with its bias and relu as one fused kernel, against the three ops run apart.

Fusing pays only if the fused kernel costs less than its parts. On small products a kernel's
own Python costs as much as its arithmetic: the general fused path (which checks where the
anchor's result came from and looks each step up) ran 7.1 us at (1, 64) x (64, 64) where the
three op kernels apart took 6.5, so a fused residual MLP ran no faster than the original
(bench_cost measured it 1.00-1.02x). The product anchors now take their bias and relu in place
with one ufunc call each. One run here (one BLAS thread, load about 1.0, its own processes):
fused over apart 0.62 at 1 x 64 x 64, 0.71 at 1 x 256 x 256, 0.79 at 8 x 128 x 128, 0.84 at
16 x 256 x 256 and 0.95 at 128 x 768 x 768; the residual MLP 1.20x (87.3 against 72.9 us).

For each shape: the fused kernel (``fused.dense_bias_relu``, as the executor calls it) and the
three op kernels called one after the other (``nn.dense``, ``nn.bias_add``, ``nn.relu``, each
making its own result, as an unfused program runs them), alternated, medians of samples of
looped calls by the process's CPU time; the ratio is fused over apart (below 1: fusing pays), and
then the whole residual MLP of the zoo, original against the program ``rg.optimize`` writes
(paired rounds, ``time_programs``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fused_products.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import relaygraph as rg  # noqa: E402
from relaygraph.egraph.calibrate import measure_alternated  # noqa: E402

# (rows, units, depth): the residual MLP's layer, BERT-like and LSTM-like small products
SHAPES = [(1, 64, 64), (1, 256, 256), (8, 128, 128), (16, 256, 256), (128, 768, 768)]


def kernels_apart(x, w, b):
    dense, bias, relu = (rg.ops.get(n).kernel for n in ("nn.dense", "nn.bias_add", "nn.relu"))
    axis = {"axis": -1}

    def run():
        return relu([bias([dense([x, w]), b], axis)])
    return run


def bench_kernels(rounds: int) -> None:
    print(f"== fused.dense_bias_relu against nn.dense, nn.bias_add, nn.relu apart "
          f"(BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, medians of {rounds}, alternated)")
    print(f"{'rows x units x depth':>22} {'fused us':>9} {'apart us':>9} {'fused / apart':>13}")
    rng = np.random.default_rng(0)
    fused = rg.ops.get("fused.dense_bias_relu").kernel
    for m, n, k in SHAPES:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_allclose(fused([x, w, b]), kernels_apart(x, w, b)(), rtol=1e-4, atol=1e-4)
        one = lambda x=x, w=w, b=b: fused([x, w, b])  # noqa: E731
        t_fused, t_apart = measure_alternated([one, kernels_apart(x, w, b)], rounds, 5e-3, time.process_time)
        shape = f"{m} x {n} x {k}"
        print(f"{shape:>22} {t_fused * 1e6:>9.2f} {t_apart * 1e6:>9.2f} {t_fused / t_apart:>13.2f}")


def bench_program(rounds: int) -> None:
    from relaygraph.egraph.optimize import bind_params, random_inputs
    from relaygraph.egraph.program_profile import paired_ratio, time_programs

    mod, params = rg.zoo.get("residual-mlp")
    bound = rg.infer_type(bind_params(mod, params, "main"))
    res = rg.optimize(bound, cost="cpu", check=False, progress=False)
    optimized = rg.infer_type(res.module)
    fused = sum(1 for line in rg.astext(optimized).splitlines() if "Primitive=1" in line)
    samples: list = []
    (before, after), _, _ = time_programs([bound, optimized], random_inputs(bound, 0), rounds, 3.0, "cpu",
                                          samples=samples, wall_samples=[])
    print(f"== residual-mlp, original against optimized ({fused} fused groups): {before * 1e6:.1f} us "
          f"against {after * 1e6:.1f} us, speedup {paired_ratio(*samples):.2f}x (median of the rounds' "
          f"ratios)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    bench_kernels(args.rounds)
    bench_program(args.rounds)


if __name__ == "__main__":
    main()
