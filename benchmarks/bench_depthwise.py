"""Channels-last depthwise convolution: the windowed kernel (each output's 3x3 window summed in one
pass, ``relaygraph.ops.conv._depthwise_nhwc_windows``) against the tap-by-tap kernel (one
(pixels x C) multiply and add per tap over phase planes, ``_depthwise_nhwc_taps``), on MobileNet's
depthwise layers at 224x224 and a few narrower ones, each with its bias and relu epilogue as the
fused op runs it. Both kernels run alternated in this process on the same inputs
(``calibrate.measure_alternated``, as the calibration times kernels), BLAS and numexpr on one
thread; medians, and the ratio tap-by-tap over windowed (above 1: the windowed kernel is faster).
``_WINDOWS_MIN_CHANNELS`` sends a layer to the windowed kernel from that many channels on; the
last column says which kernel a layer gets.

    python benchmarks/bench_depthwise.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from relaygraph.egraph.calibrate import measure_alternated  # noqa: E402
from relaygraph.eval.memory import pin_allocator  # noqa: E402
from relaygraph.ops import conv  # noqa: E402

# (channels, image size, stride): MobileNet's depthwise layers (224x224 input), then narrower ones
SHAPES = [(32, 112, 1), (64, 112, 2), (128, 56, 1), (128, 56, 2), (256, 28, 1), (256, 28, 2), (512, 14, 1),
          (512, 14, 2), (1024, 7, 1), (32, 56, 1), (64, 56, 1), (64, 28, 1), (96, 56, 1), (96, 28, 1),
          (96, 14, 1)]


def _layer(c: int, size: int, stride: int, rng):
    x = rng.standard_normal((1, size, size, c)).astype(np.float32)
    w = rng.standard_normal((3, 3, 1, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    zero = np.float32(0)

    def epilogue(block):
        block += bias
        np.maximum(block, zero, out=block)

    def run(kernel):
        return lambda: kernel(x, w, (stride, stride), (1, 1, 1, 1), (1, 1), epilogue)

    return run(conv._depthwise_nhwc_taps), run(conv._depthwise_nhwc_windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternated rounds of each kernel")
    args = parser.parse_args()
    pin_allocator()  # as the executor runs kernels (relaygraph.eval.memory)
    rng = np.random.default_rng(0)
    print(f"channels-last depthwise 3x3 with bias and relu, one thread, medians of {args.rounds} alternated "
          f"rounds; windowed from {conv._WINDOWS_MIN_CHANNELS} channels")
    print(f"{'layer':<22} {'tap by tap':>11} {'windowed':>11} {'ratio':>7}  kernel used")
    for c, size, stride in SHAPES:
        taps, windows = _layer(c, size, stride, rng)
        np.testing.assert_allclose(taps(), windows(), rtol=1e-4, atol=1e-4)
        t, w = measure_alternated([taps, windows], args.rounds)
        used = "windowed" if c >= conv._WINDOWS_MIN_CHANNELS else "tap by tap"
        label = f"{c} on {size}x{size}" + (f" /{stride}" if stride > 1 else "")
        print(f"{label:<22} {t * 1e3:8.3f} ms {w * 1e3:8.3f} ms {t / w:6.2f}x  {used}")
    print(f"load average (1 min): {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
