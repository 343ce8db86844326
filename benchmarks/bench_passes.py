"""Every pass on generated programs of 10,000 and 100,000 nodes: time per node and the ratio of
the per-node cost at the two sizes (target <= 1.3: linear), and no RecursionError.

The programs are chains of small residual blocks over a (1, 16) tensor, with a reshape pair,
an identity multiply and a foldable constant in each block, so every pass has work to do.
Passes that work on let-bound programs (GNF, DCE, CSE) get the ANF of the program as input.
"""

from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import relaygraph as rg  # noqa: E402
from relaygraph import transform as T  # noqa: E402

NODES_PER_BLOCK = 10  # calls and constants added by one block (see block())


def op(name, *args, **attrs):
    return rg.Call(rg.Op(name), tuple(args), attrs or None)


def program(nodes: int) -> rg.IRModule:
    x = rg.var("x", rg.TensorType((1, 16), "float32"))
    h = x
    for i in range(nodes // NODES_PER_BLOCK):
        two = op("add", rg.const(np.float32(1.0)), rg.const(np.float32(float(i % 7))))
        r = op("reshape", op("reshape", h, newshape=(16,)), newshape=(1, 16))
        a = op("tanh", op("multiply", r, rg.const(np.float32(1.0))))
        h = op("add", h, op("multiply", a, two))
    return rg.IRModule.from_expr(rg.Function([x], h))


def timed(pipeline, mod) -> float:
    gc.collect()
    start = time.perf_counter()
    with T.PassContext(opt_level=3):
        pipeline(mod)
    return time.perf_counter() - start


CASES = {
    "InferType": ([], T.InferType()),
    "ToANormalForm": ([], T.ToANormalForm()),
    "ToGraphNormalForm": ([T.ToANormalForm()], T.ToGraphNormalForm()),
    "ToBasicBlockNormalForm": ([], T.ToBasicBlockNormalForm()),
    "DeadCodeElimination": ([T.ToANormalForm()], T.DeadCodeElimination()),
    "EliminateCommonSubexpr": ([T.ToANormalForm()], T.EliminateCommonSubexpr()),
    "FoldConstant": ([], T.FoldConstant()),
    "SimplifyExpr": ([T.InferType()], T.SimplifyExpr()),
    "SimplifyInference": ([T.InferType()], T.SimplifyInference()),
    "FuseOps": ([T.InferType()], T.FuseOps()),
    "DefuseOps": ([T.InferType(), T.FuseOps()], T.DefuseOps()),
    "Inline": ([], T.Inline()),
    "LambdaLift": ([], T.LambdaLift()),
}


def main() -> None:
    small, large = 10_000, 100_000
    mods = {n: program(n) for n in (small, large)}
    print(f"{'pass':<24}{'us/node @10k':>14}{'us/node @100k':>15}{'ratio':>8}")
    worst = 0.0
    for name, (prep, p) in CASES.items():
        inputs, counts = [], []
        for n in (small, large):
            mod = mods[n]
            with T.PassContext(opt_level=3):
                for q in prep:
                    mod = q(mod)
            inputs.append(mod)
            counts.append(rg.node_count(mod["main"]))
        # Interleave the sizes and keep the best of three, so background load hits both alike.
        best = [float("inf"), float("inf")]
        for _ in range(3):
            for i in (0, 1):
                best[i] = min(best[i], timed(p, inputs[i]))
        per_node = [best[i] / counts[i] * 1e6 for i in (0, 1)]
        ratio = per_node[1] / per_node[0]
        worst = max(worst, ratio)
        print(f"{name:<24}{per_node[0]:>14.2f}{per_node[1]:>15.2f}{ratio:>8.2f}")
    print(f"worst per-node cost ratio 100k/10k: {worst:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
