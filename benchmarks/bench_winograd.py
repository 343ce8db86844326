"""Winograd F(4x4, 3x3) against F(2x2, 3x3) and the direct kernel, per 3x3 layer shape.

Each kernel runs a stride-1 3x3 convolution with its channel bias and relu (as the fused ops
``fused.conv2d_bias_relu`` and ``fused.winograd_bias_relu`` run it) on one image, the three
alternated, with malloc's thresholds pinned as the executor pins them; the table gives the
medians and F(2x2)'s time over F(4x4)'s (above 1: the larger tile pays). The shapes are ResNet's
and VGG's 3x3 layers at 224x224 input. BLAS uses the threads its environment gives it
(``OPENBLAS_NUM_THREADS``); the header says how many.

With ``--models``, whole programs too: each zoo model optimized twice in this process (weights
bound, the ``cpu`` cost model, the default rule sets with and without ``conv2d-winograd-4x4``),
then the original and the two optimized programs timed alternated (``time_programs``), with how
many layers took each tile.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_winograd.py [--runs 15] [--shapes 64x56,128x28]
                                                               [--models resnet-50,vgg-19]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

# (channels, image side): channels in = channels out, padding 1
SHAPES = [(64, 56), (128, 28), (256, 14), (512, 7), (128, 56), (256, 28), (512, 14), (64, 112), (128, 112),
          (64, 224)]


def _parse(shapes: str) -> list[tuple[int, int]]:
    out = []
    for item in shapes.split(","):
        c, _, side = item.strip().partition("x")
        out.append((int(c), int(side)))
    return out


def measure(c: int, side: int, runs: int) -> dict[str, float]:
    """Median milliseconds of the direct kernel, F(2x2, 3x3) and F(4x4, 3x3) on one shape; their
    outputs checked against each other first."""
    import numpy as np

    from relaygraph.egraph.calibrate import measure_alternated
    from relaygraph.ops import registry
    from relaygraph.ops.winograd import winograd_conv2d, winograd_weight

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, side, side)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    direct_op = registry.lookup("fused.conv2d_bias_relu")
    attrs = direct_op.resolve({"padding": (1, 1)})
    u2, u4 = winograd_weight(w, 2), winograd_weight(w, 4)
    kernels = {"direct": lambda: direct_op.kernel([x, w, b], attrs),
               "F(2x2)": lambda: winograd_conv2d(x, u2, (1, 1, 1, 1), b, True),
               "F(4x4)": lambda: winograd_conv2d(x, u4, (1, 1, 1, 1), b, True)}
    want = kernels["direct"]()
    for name in ("F(2x2)", "F(4x4)"):
        got = kernels[name]()
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max())):
            raise AssertionError(f"{name} differs from the direct kernel at {c} channels on {side}x{side}")
    # one call per sample, the kernels in turn (each called twice first, untimed)
    seconds = measure_alternated(list(kernels.values()), repeats=runs, min_seconds=0.0)
    return {name: s * 1e3 for name, s in zip(kernels, seconds, strict=True)}


def programs(name: str, runs: int) -> dict:
    """One zoo model optimized with the default rules and without ``conv2d-winograd-4x4``; the
    three programs' median seconds (alternated) and the Winograd layers of each tile size."""
    import relaygraph as rg
    from relaygraph.egraph.optimize import default_rule_files, random_inputs
    from relaygraph.egraph.program_profile import time_programs
    from relaygraph.rewrite import load_rules

    mod, params = rg.zoo.get(name)
    rules = [r for f in default_rule_files() for r in load_rules(f)]
    without = [r for r in rules if r.name != "conv2d-winograd-4x4"]
    if len(without) == len(rules):
        raise RuntimeError("the default rule sets have no rule conv2d-winograd-4x4")
    both = rg.optimize(mod, params=params, rules=rules, check=False)
    small = rg.optimize(mod, params=params, rules=without, check=False)

    def tiles(m) -> dict[int, int]:
        return dict(sorted(Counter(_winograd_tiles(m["main"])).items()))

    inputs = random_inputs(both.original["main"], seed=1)
    times, _, _ = time_programs([both.original, small.module, both.module], inputs, runs, 3.0)
    return {"times": times, "tiles": (tiles(small.module), tiles(both.module))}


def _winograd_tiles(func):
    """The tile size of each Winograd convolution ``func`` runs: a call of the op, or of a Primitive
    function holding it (each call counted, though equal functions are one shared node)."""
    from relaygraph.egraph.cpu_cost import WINOGRAD
    from relaygraph.ir.expr import Call, Function, Op
    from relaygraph.ir.traversal import post_order

    for node in post_order(func.body, skip=lambda n: isinstance(n, Function)):
        if isinstance(node, Call) and isinstance(node.op, Function):
            yield from _winograd_tiles(node.op)  # a Primitive group: one level down
        elif isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == WINOGRAD:
            yield int(node.attrs["tile_size"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15, help="alternated runs of each kernel")
    p.add_argument("--shapes", default=None, help="channels x side, comma-separated (default: ResNet's "
                                                  "and VGG's 3x3 layers)")
    p.add_argument("--models", default="", help="zoo models whose programs are timed with and without "
                                                "F(4x4, 3x3), comma-separated")
    args = p.parse_args(argv)
    import relaygraph as rg
    from relaygraph.eval.memory import pin_allocator

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in rg.zoo.names()]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(rg.zoo.names())})")

    pin_allocator()
    try:
        shapes = _parse(args.shapes) if args.shapes else SHAPES
    except ValueError:
        p.error(f"--shapes takes CHANNELSxSIDE, comma-separated (64x56,128x28), got {args.shapes!r}")
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "all cores")
    print(f"3x3 convolution with bias and relu, one image; BLAS threads: {threads}; medians of "
          f"{args.runs} alternated runs (ms); load average {os.getloadavg()[0]:.1f}")
    print(f"{'channels':>9}{'image':>8}{'direct':>9}{'F(2x2)':>9}{'F(4x4)':>9}{'F(2x2)/F(4x4)':>15}")
    for c, side in shapes:
        t = measure(c, side, args.runs)
        print(f"{c:>9}{f'{side}x{side}':>8}{t['direct']:>9.3f}{t['F(2x2)']:>9.3f}{t['F(4x4)']:>9.3f}"
              f"{t['F(2x2)'] / t['F(4x4)']:>14.2f}x", flush=True)
    if models:
        print(f"\nwhole programs, optimized twice in this process (default rules, with and without "
              f"conv2d-winograd-4x4), medians of at least {args.runs} alternated runs (ms)")
        print(f"{'model':<16}{'original':>10}{'F(2x2) only':>13}{'both tiles':>12}{'speedup':>18}"
              f"{'F(4x4) gain':>13}  Winograd layers by tile")
        for name in models:
            r = programs(name, args.runs)
            before, small, both = (t * 1e3 for t in r["times"])
            print(f"{name:<16}{before:>10.1f}{small:>13.1f}{both:>12.1f}"
                  f"{f'{before / small:.3f} -> {before / both:.3f}x':>18}{small / both:>12.3f}x  "
                  f"{r['tiles'][0]} -> {r['tiles'][1]}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
