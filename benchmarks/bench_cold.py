"""What a kernel costs in a program that the looped kernel does not show: its call right after a
kernel that swept the caches, and a product's weight read from memory.

The ``cpu`` model prices a kernel from its time looped on the same inputs (its curve or grid),
times an in-program factor measured on the calibration's small programs. Two effects of a real
program escape that, and this benchmark measures each against its looped baseline in the same
process, the two alternated sample by sample, medians of ``--runs``:

1. **A call after a sweep.** An op right after a kernel whose data passed several megabytes
   through the caches (a convolution's columns and weight, a layer's weight) finds neither its
   own data nor the interpreter's and numpy's code and tables there. Per op and size: the call
   looped (warm: right after the same call), the same call right after a write over a buffer of
   each ``--sweeps`` size (untimed), and right after the convolution that makes its input in a
   ResNet layer (3x3, as many channels out as in). "extra" is the call after the convolution
   less the warm one, in microseconds. Even a relu on 2 KB takes ten times its looped time after
   a 4 MB sweep: the part of the extra that does not grow with the data is a cost per call,
   which the model's in-program factor (applied to the time above the op's fixed cost,
   ``CpuCost.in_program``) does not price.
2. **A weight read from memory.** A one-row dense on a K x K weight: one weight looped (it stays
   in the cache), a ring of copies of it allocated apart that fills ``--ring-mb``, each call timed
   on its own (each call reads its weight cold, as a recurrent network's layers do: NasRNN's 80
   products have a 1 MB weight each), and the calibration's own cold read
   (``_Calibration.cold_time``: the same rotation over ``calibrate.COLD_BYTES``, timed in loops),
   which the profile's product grid holds.
3. **A generator's first layer.** DCGAN's conv2d_transpose 1024 -> 512 on 4x4 (a 32 MB weight),
   with the weight laid out IOHW and IHWO (the kernel's channels-last path): each looped on one
   weight, each with its weight rotated over two copies alone, and the two alternated as the
   calibration measures their ratio (``_Calibration.cold_times``). The ratio IHWO / IOHW is what
   the model's choice between the layouts rests on.

Prints the medians and ratios; one BLAS thread, the executor's allocator settings.

    python benchmarks/bench_cold.py [--runs 201] [--sweeps 1,4,16]
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

# (channels, image size): 2 KB to 800 KB of float32 data, ResNet's last three stages among them
SIZES = [(8, 8), (512, 7), (256, 14), (128, 28), (64, 56)]
OPS = ("nn.relu", "add", "fused.multiply_add_relu")
DENSE_SIZES = (256, 512, 1024)


def alternated(fns: list, runs: int) -> list[float]:
    """Median seconds of each of ``fns`` (each returns the seconds of its timed part), their
    samples alternated in an order that rotates every run."""
    samples: list[list[float]] = [[] for _ in fns]
    for r in range(runs):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            samples[i].append(fns[i]())
    return [statistics.median(s) for s in samples]


def _executor_call(op: str, arrays: list, **attrs):
    """The call the executor makes of ``op`` on ``arrays`` (``calibrate._call``: its kernel and
    canonical attrs), as a function of nothing."""
    from relaygraph.egraph.calibrate import _call

    kernel, canon = _call(op, arrays, **attrs)
    return lambda: kernel(arrays, canon)


def _timed(call, before=None):
    def run() -> float:
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        return time.perf_counter() - start
    return run


def after_sweeps(runs: int, sweeps_mb: list[int]) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    buffers = {mb: np.zeros((mb << 20) // 4, np.float32) for mb in sweeps_mb}
    heads = "".join(f"  {mb:>3} MB sweep" for mb in sweeps_mb)
    print(f"== 1. a call after a sweep (medians of {runs}, us; extra = cold - warm)")
    print(f"{'op':<26} {'data':>13} {'KB':>5} {'warm':>7}{heads}  after conv   extra after conv")
    for c, s in SIZES:
        x = rng.standard_normal((1, c, s, s)).astype(np.float32)
        scale = rng.standard_normal((c, 1, 1)).astype(np.float32)
        shift = rng.standard_normal((c, 1, 1)).astype(np.float32)
        w = (rng.standard_normal((c, c, 3, 3)) / 10).astype(np.float32)
        conv = _executor_call("nn.conv2d", [x, w], padding=(1, 1))
        inputs = {"nn.relu": [x], "add": [x, x], "fused.multiply_add_relu": [x, scale, shift]}
        for op in OPS:
            call = _executor_call(op, inputs[op])
            fns = [_timed(call, call)]  # warm: right after the same call, as a looped kernel runs
            fns += [_timed(call, lambda b=b: np.multiply(b, 1.0, out=b)) for b in buffers.values()]
            fns.append(_timed(call, conv))
            med = alternated(fns, runs)
            warm, conv_cold = med[0], med[-1]
            cells = "".join(f"  {t * 1e6:11.1f}" for t in med[1:-1])
            print(f"{op:<26} {f'{c}x{s}x{s}':>13} {x.nbytes >> 10:>5} {warm * 1e6:7.1f}{cells}"
                  f"  {conv_cold * 1e6:10.1f}   {(conv_cold - warm) * 1e6:+8.1f} ({conv_cold / warm:.2f}x)")


def weights_cold(runs: int, ring_mb: int) -> None:
    import numpy as np

    from relaygraph.egraph import calibrate as cal

    rng = np.random.default_rng(1)
    calibration = cal._Calibration(False, False)
    print(f"== 2. a one-row dense's weight read from memory (us; ring: copies of the weight, "
          f"{ring_mb} MB)")
    print(f"{'dense':<14} {'weight MB':>9} {'hot':>8} {'ring':>8} {'calibrate':>10}  ring/hot  "
          "ring/calibrate")
    for k in DENSE_SIZES:
        x = rng.standard_normal((1, k)).astype(np.float32)
        w = rng.standard_normal((k, k)).astype(np.float32)
        kernel, attrs = cal._call("nn.dense", [x, w])
        # the calibration's own rotation over copies of the weight, here over --ring-mb, each call
        # timed on its own
        ring = cal._rotating(kernel, [x, w], attrs, 1, total=ring_mb << 20)
        hot, in_ring = alternated([_timed(lambda x=x, w=w, kernel=kernel, attrs=attrs: kernel([x, w], attrs)),
                                   _timed(ring)], runs)
        calibrated = calibration.cold_time(kernel, [x, w], attrs)
        print(f"{f'1x{k}x{k}':<14} {w.nbytes / 2**20:9.2f} {hot * 1e6:8.1f} {in_ring * 1e6:8.1f} "
              f"{calibrated * 1e6:10.1f}  {in_ring / hot:8.2f}  {in_ring / calibrated:14.2f}")
        del ring


def generator_layer(runs: int) -> None:
    import numpy as np

    from relaygraph.egraph import calibrate as cal

    rng = np.random.default_rng(2)
    calibration = cal._Calibration(False, False)
    x, w = cal._rand(rng, (1, 1024, 4, 4)), cal._rand(rng, (1024, 512, 4, 4))
    calls = []
    for layout, weight in (("IOHW", w), ("IHWO", np.ascontiguousarray(w.transpose(0, 2, 3, 1)))):
        kernel, attrs = cal._call("nn.conv2d_transpose", [x, weight], strides=(2, 2), padding=(1, 1),
                                  kernel_layout=layout)
        calls.append((kernel, [x, weight], attrs))
    repeats = max(5, runs // 20)
    hot = [cal.measure(lambda c=c: c[0](c[1], c[2]), repeats, 3e-3) for c in calls]
    alone = [calibration.cold_time(*c) for c in calls]
    together = calibration.cold_times(calls, repeats=repeats)
    print(f"== 3. DCGAN's first conv2d_transpose, 1024 -> 512 on 4x4 (ms, medians of {repeats})")
    print(f"{'reading':<34} {'IOHW':>8} {'IHWO':>8}  IHWO / IOHW")
    for label, (a, b) in (("looped on one weight", hot), ("two copies rotated, alone", alone),
                          ("two copies each, alternated", together)):
        print(f"{label:<34} {a * 1e3:8.2f} {b * 1e3:8.2f}  {b / a:11.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=201, help="samples of each timing, alternated")
    p.add_argument("--sweeps", default="1,4,16", help="comma-separated sweep sizes in MB")
    p.add_argument("--ring-mb", type=int, default=96,
                   help="the ring of the weight's copies, in MB")
    args = p.parse_args()
    if args.runs < 1:
        p.error(f"--runs must be at least 1 (got {args.runs})")
    try:
        sweeps = [int(v) for v in args.sweeps.split(",") if v.strip()]
    except ValueError:
        p.error(f"--sweeps takes sizes in MB separated by commas (got {args.sweeps!r})")
    if not sweeps or min(sweeps) < 1:
        p.error(f"--sweeps needs at least one size of 1 MB or more (got {args.sweeps!r})")
    if args.ring_mb < 1:
        p.error(f"--ring-mb must be at least 1 (got {args.ring_mb})")
    from relaygraph.eval.memory import pin_allocator

    pin_allocator()  # as the executor does
    started = time.perf_counter()
    after_sweeps(args.runs, sweeps)
    weights_cold(args.runs, args.ring_mb)
    generator_layer(args.runs)
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
