"""Winograd F(4x4, 3x3) against F(2x2, 3x3) and the direct kernel, per 3x3 layer shape.

Each kernel runs a stride-1 3x3 convolution with its channel bias and relu (as the fused ops
``fused.conv2d_bias_relu`` and ``fused.winograd_bias_relu`` run it) on one image, the three
alternated, with malloc's thresholds pinned as the executor pins them; the table gives the
medians and F(2x2)'s time over F(4x4)'s (above 1: the larger tile pays). The shapes are ResNet's
and VGG's 3x3 layers at 224x224 input. BLAS uses the threads its environment gives it
(``OPENBLAS_NUM_THREADS``); the header says how many.

With ``--stage C,M,SIDE,BLOCKS`` (and no ``--shapes``: the stage alone), a bottleneck stage timed
in place: BLOCKS blocks of a 1x1 convolution C -> M with bias and relu, a 3x3 M -> M with bias and
relu (the direct kernel, F(2x2, 3x3) or F(4x4, 3x3)), and a 1x1 M -> C added to the block's input,
each block with its own weights, as the e-graph's fused ops run them in ResNet-50 (``1024,256,14,6``
is its third stage). The three programs run alternated through the executor with each instruction
timed in place; the table gives the whole stage and its 3x3 layers, and their ratio to the direct
kernel's. A kernel's ratio there is the one a program sees; the calibration's, timed on the kernels
alone, moves between calibrations on a shared machine (see the README).

With ``--models``, whole programs too: each zoo model optimized twice in this process (weights
bound, the ``cpu`` cost model, the default rule sets with and without ``conv2d-winograd-4x4``),
then the original and the two optimized programs timed alternated (``time_programs``), with how
many layers took each tile.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_winograd.py [--runs 15] [--shapes 64x56,128x28]
                                                               [--models resnet-50,vgg-19]
                                                               [--stage 1024,256,14,6]
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


def stage(channels: int, mid: int, side: int, blocks: int, runs: int) -> dict[str, tuple[float, float]]:
    """A bottleneck stage (see the module's documentation) with each 3x3 kernel: milliseconds of
    the whole stage and of its 3x3 layers, medians of ``runs`` alternated runs in an order rotated
    each round, every instruction timed in place; the outputs checked against the direct one's."""
    import statistics
    import time

    import numpy as np

    from relaygraph.eval.executor import compile_function
    from relaygraph.ir.expr import Function, const, var
    from relaygraph.ir.types import TensorType
    from relaygraph.ops.builders import make_call
    from relaygraph.ops.winograd import winograd_weight

    rng = np.random.default_rng(0)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    weights = [(weight(mid, channels, 1, 1), weight(mid), weight(mid, mid, 3, 3), weight(mid),
                weight(channels, mid, 1, 1)) for _ in range(blocks)]

    def program(tile: int):
        x = var("x", TensorType((1, channels, side, side), "float32"))
        h = x
        for w1, b1, w2, b2, w3 in weights:
            a = make_call("fused.conv2d_bias_relu", h, const(w1), const(b1))
            if tile:
                a = make_call("fused.winograd_bias_relu", a, const(winograd_weight(w2, tile)), const(b2),
                              tile_size=tile, padding=(1, 1))
            else:
                a = make_call("fused.conv2d_bias_relu", a, const(w2), const(b2), padding=(1, 1))
            h = make_call("fused.conv2d_add", a, const(w3), h)
        return compile_function(Function([x], h))

    kinds = {"direct": 0, "F(2x2)": 2, "F(4x4)": 4}
    plans = {name: program(tile) for name, tile in kinds.items()}
    data = rng.standard_normal((1, channels, side, side)).astype(np.float32)
    want = plans["direct"].run([data])
    for name, plan in plans.items():
        got = plan.run([data])
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max())):
            raise AssertionError(f"the stage with {name} differs from the direct kernel's")
        # each block is three instructions, its 3x3 layer the second (read by position below)
        if not all(label.startswith(("fused.winograd_bias_relu", "fused.conv2d_bias_relu"))
                   for i, label in enumerate(plan.labels) if i % 3 == 1):
            raise AssertionError(f"the stage's plan is not three instructions a block: {plan.labels}")
    samples = {name: [[] for _ in range(len(plan))] for name, plan in plans.items()}
    timed = {name: plan.timed(samples[name], time.perf_counter) for name, plan in plans.items()}
    totals: dict[str, list[float]] = {name: [] for name in plans}
    order = list(plans)
    for r in range(runs):
        for name in order[r % len(order):] + order[:r % len(order)]:
            start = time.perf_counter()
            timed[name].run([data])
            totals[name].append(time.perf_counter() - start)
    out = {}
    for name in plans:
        layers = [statistics.median(s) for i, s in enumerate(samples[name]) if i % 3 == 1]
        out[name] = (statistics.median(totals[name]) * 1e3, sum(layers) * 1e3)
    return out


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
    p.add_argument("--stage", default="", help="a bottleneck stage timed in place: channels, middle "
                                               "channels, image side, blocks (1024,256,14,6: ResNet-50's "
                                               "third stage)")
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
    try:  # with --stage alone, the stage alone
        shapes = _parse(args.shapes) if args.shapes else [] if args.stage else SHAPES
    except ValueError:
        p.error(f"--shapes takes CHANNELSxSIDE, comma-separated (64x56,128x28), got {args.shapes!r}")
    stage_shape = None
    if args.stage:
        try:
            stage_shape = tuple(int(v) for v in args.stage.split(","))
        except ValueError:
            stage_shape = ()
        if len(stage_shape) != 4 or min(stage_shape) < 1:
            p.error(f"--stage takes CHANNELS,MIDDLE,SIDE,BLOCKS, four positive integers "
                    f"(1024,256,14,6), got {args.stage!r}")
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "all cores")
    print(f"3x3 convolution with bias and relu, one image; BLAS threads: {threads}; medians of "
          f"{args.runs} alternated runs (ms); load average {os.getloadavg()[0]:.1f}")
    print(f"{'channels':>9}{'image':>8}{'direct':>9}{'F(2x2)':>9}{'F(4x4)':>9}{'F(2x2)/F(4x4)':>15}")
    for c, side in shapes:
        t = measure(c, side, args.runs)
        print(f"{c:>9}{f'{side}x{side}':>8}{t['direct']:>9.3f}{t['F(2x2)']:>9.3f}{t['F(4x4)']:>9.3f}"
              f"{t['F(2x2)'] / t['F(4x4)']:>14.2f}x", flush=True)
    if stage_shape:
        c, m, side, blocks = stage_shape
        t = stage(c, m, side, blocks, args.runs)
        print(f"\na stage of {blocks} bottleneck blocks, {c} -> {m} -> {c} channels on {side}x{side}, "
              f"timed in place (ms, medians of {args.runs} alternated runs)")
        print(f"{'3x3 kernel':<12}{'stage':>9}{'3x3 layers':>12}{'stage/direct':>14}{'3x3/direct':>12}")
        for name, (total, layers) in t.items():
            print(f"{name:<12}{total:>9.2f}{layers:>12.2f}{total / t['direct'][0]:>14.3f}"
                  f"{layers / t['direct'][1]:>12.3f}", flush=True)
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
