"""``calibrate()``: measure this machine's numpy executor once and store the ``cpu`` profile.

Everything is measured through the kernels the executor runs (the op table's kernels, called
with the attributes a Relay call carries; the executor's plan for dispatch; the fused-group
kernels for numexpr groups and fused ops), on float32 data, by the profile's clock (CPU time
when BLAS and numexpr run on one thread, else the wall clock; see ``cpu_cost.clock_of``):

- dispatch: a plan of many small ops, less the ops' own time, per instruction; per program, one
  call of a small program run right after another plan (as programs are timed and used);
- a time curve over the work size for each elementwise, reduction, layout and pooling op the
  profile names (pooling with and without overlapping windows), and for contiguous and strided
  copies; elementwise data has both signs where the op allows, as activations do; an add on a
  row vector broadcast over rows and a bias on the last axis (a dense's) have curves of their own;
- the dense kernel on a grid of (M, N, K), each call reading a cold weight (as a program reads
  each weight once a run), and batch-matmul on a grid of (B, M, N, K);
- conv2d on the kinds of layer image models have: its time over a structural estimate (one
  matrix product over gathered columns), per shape, looked up by the nearest calibrated shapes;
  conv2d_transpose likewise; grouped convolution as a curve;
- every fused op of the op table anchored on a convolution or a dense: its kernel's time over
  the anchor's on the same inputs, per shape (so a new or faster fused kernel is covered by
  calibrating again; a matmul-anchored one over the dense kernel's, which prices nn.matmul, so
  what its (K, N) weight saves shows); the other fused ops and numexpr groups over their parts'
  prediction (the scale-shift ops on one value per channel, as batch norms give them); the
  ratios over an anchor, and Winograd's over the direct kernel, in two passes apart in time (a
  third where they disagree by more than 8%), so that a spell of other work in one pass does not
  decide a choice an exact extraction makes many times over;
- in-program factors per op kind and per op: synthetic programs (two residual stages with direct
  and Winograd convolutions, a fire module and a transformer-like block) run through the executor
  with each instruction timed in place, against the same kernel looped on the same inputs, above
  the op's fixed cost per call; the median of five rounds;
- a probe (``Probe``), a few fixed kernels timed after each part of the calibration (a
  calibration during which they slowed is made again) and later beside a measurement, to compare
  the machine's speed at another time (under another load) with the profile's.

The full mode takes 90-110 seconds on a quiet machine; ``quick=True`` a few seconds.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import RelayWarning
from ..eval.memory import pin_allocator
from ..ir.expr import Call, Tuple, TupleGetItem
from ..ir.module import IRModule
from ..ir.traversal import iter_post_order
from ..ir.types import TensorType
from .cpu_cost import (
    BROADCAST,
    CHANNEL,
    DENSE_LIKE_ANCHORS,
    LAST_AXIS,
    PER_CHANNEL_FUSED,
    SCALAR,
    SIZE_BIN,
    TRANSPOSE_ROWS,
    CpuCost,
    Profile,
    cache_bytes,
    clock_of,
    conv_features,
    data_bytes,
    machine_key,
    profile_path,
    reset_default,
    size_bin,
    timer,
    traffic_elements,
)

__all__ = ["calibrate", "measure", "measure_alternated", "Probe", "CalibrationWarning", "probe_spread"]

F32 = np.float32
# A weight read cold rotates over copies of it that together overflow the last-level cache:
# COLD_BYTES of them for the profile's rows. That much can stay in a larger cache: on a machine
# reporting 480 MB, a 1x4096 by 4096x4096 product ran 2.45 ms on one 64 MB weight, 3.6 ms over two
# copies and 4.1-4.2 ms over 256 MB or more, as in VGG-19's program. Ratios between two layouts
# of a weight are measured over the cache's whole size (``cold_bytes``, up to COLD_BYTES_MAX), as
# a large program reads its weights; views of one pool stand for the copies (``_cold_pool``).
COLD_BYTES = 48 << 20
COLD_BYTES_MAX = 1 << 30
# Products of at most this many rows are priced by their weight read (a row does two flops per
# weight value, less than the memory delivers per flop), so the grid reads their weights over the
# whole cache as well: over COLD_BYTES, a one-row product on a 1 MB weight took 54-72 us in the
# grid and on 4 MB 217-226 us, where NasRNN's 80 products on 1 MB weights (80 MB in all) took 95
# us each in its program, and over 192 or 480 MB of copies the same kernel took 81-88 and 324-342
# us (LSTM's 512 -> 2048 gates; ResNet-50's 2048 -> 1000 classifier 557-584, against 355 over 48 MB)
DEEP_ROWS = 16
# A weight read cold over a pool is placed as a program's weight of its size is: NumPy asks for
# transparent huge pages (madvise) on arrays of 4 MB or more (its hugepage threshold), and where
# the kernel gives them only when asked, smaller weights sit in 4 KB pages. Read from memory so,
# a 1 MB weight's one-row product took 106-110 us a MB here, in huge pages 83-88 (72 of them
# swept cold, alternated): the one-row rows, read in the pool's huge pages, priced NasRNN's and
# LSTM's products at 0.8x their time in the programs (``small_pages_below``).
NUMPY_HUGE_BYTES = 4 << 20
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_SIZE = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"
# A one-row product's rate of weight read follows the weight's depth (its rows' length): on a
# 2-core AMD EPYC, over 128 MB of copies, 116 us a MB 256 deep, 95 at 512, 68 at 1024 and 58 at
# 4096, alike at 1 MB and 4 MB; the grid's one-row rows are 16-4096 deep in powers of four, and
# their median (60 us a MB) priced NasRNN's and LSTM's products (512 deep) at 0.64x their time.
# One-row products at the depths between the grid's, on a weight of each of these sizes (one in
# small pages, one in huge ones where they differ; see ``small_pages_below``):
ONE_ROW_DEPTHS = (128, 512, 2048)
ONE_ROW_SIZES = (1 << 20, 8 << 20)
MAX_COPIES = 4096  # small weights: enough copies to leave the private caches, few enough to make fast
# An in-program instruction whose slowed part (see CpuCost.slowed) is less than this share of its
# time above the fixed cost says little about the in-program factor (see _in_program_round)
_MEMORY_SHARE = 0.2
# A kind or op whose instructions in a round's programs took less than this in all, looped, sets no
# in-program factor of its own (see _in_program_round)
_MIN_LOOPED_SECONDS = 2e-5
# Two passes' measurements of a ratio between kernels further apart than this get a third (see
# _Calibration.confirm); the same kernels' ratio at 128x768x768 ranged 0.97-1.18 over six
# alternated measurements on a quiet machine
AGREE = 1.08


def measure(fn: Callable[[], object], repeats: int = 5, min_seconds: float = 2e-3,
            clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of ``fn()`` by ``clock``: the median of ``repeats`` samples, each looping enough
    calls to fill ``min_seconds``. The median, as programs are timed."""
    return measure_alternated([fn], repeats, min_seconds, clock)[0]


def measure_alternated(fns: Sequence[Callable[[], object]], repeats: int = 5, min_seconds: float = 2e-3,
                       clock: Callable[[], float] = time.perf_counter, warm: bool = False,
                       on_round: Callable[[int], object] | None = None) -> list[float]:
    """Seconds of each of ``fns``: the median of ``repeats`` samples, each looping enough calls to
    fill ``min_seconds``, the samples alternated (one of each in turn, ``repeats`` rounds): a
    change of the machine's speed (other work starting or stopping) then moves them all alike,
    and ratios between them stay true. Measured one after the other, a one-row product's fused
    (K, N) kernel read 0.47 and 0.62 of the dense kernel in two calibrations, against 0.64-0.69
    alternated. ``warm``: each sample starts after one untimed call, so that a function looped
    alone (its data in the cache) is timed so when many others run between its samples.
    ``on_round(k)`` is called after the k-th round (1 to ``repeats``)."""
    if not fns:
        raise ValueError("measure_alternated needs at least one function")
    loops = []
    for fn in fns:
        fn()
        start = clock()
        fn()
        loops.append(max(1, int(min_seconds / max(clock() - start, 1e-7))))
    samples: list[list[float]] = [[] for _ in fns]
    for k in range(1, repeats + 1):
        for fn, n, out in zip(fns, loops, samples, strict=True):
            if warm:
                fn()
            start = clock()
            for _ in range(n):
                fn()
            out.append((clock() - start) / n)
        if on_round is not None:
            on_round(k)
    return [statistics.median(s) for s in samples]


class Probe:
    """A fixed handful of kernels (a convolution, a dense, an add, a batch norm) timed once per
    call: taken during calibration and again beside a measurement, the ratio says how much slower
    the machine runs now than when its profile was made (other work sharing its cores and caches)."""

    def __init__(self, clock: str = "wall") -> None:
        from .cpu_cost import timer

        rng = np.random.default_rng(1)
        self.clock = timer(clock)
        x, w = _rand(rng, (1, 64, 28, 28)), _rand(rng, (64, 64, 3, 3))
        d, dw = _rand(rng, (128, 512)), _rand(rng, (512, 512))
        a = _rand(rng, (256, 1024))
        bn = [_rand(rng, (1, 64, 56, 56))] + [_rand(rng, (64,)) for _ in range(4)]
        self.calls = []
        for name, args, attrs in (("nn.conv2d", [x, w], {"padding": (1, 1)}), ("nn.dense", [d, dw], {}),
                                  ("add", [a, a], {}), ("nn.batch_norm", bn, {})):
            kernel, canon = _call(name, args, **attrs)
            self.calls.append((kernel, args, canon))
        self.once()

    def once(self) -> float:
        """Seconds of one pass over the kernels."""
        start = self.clock()
        for kernel, args, attrs in self.calls:
            kernel(args, attrs)
        return self.clock() - start

    def __call__(self, repeats: int = 5) -> float:
        """The median of ``repeats`` passes."""
        return statistics.median(self.once() for _ in range(repeats))


def _rand(rng, shape, low=0.5, high=1.5) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(F32)


def _call(name: str, arrays: list, **attrs):
    """The kernel call ``name`` makes in the executor: (kernel, attrs as the call carries them)."""
    from ..eval.kernels import kernel_of
    from ..ir.expr import var
    from ..ops.builders import make_call

    params = [var(f"a{i}", TensorType(a.shape, str(a.dtype))) for i, a in enumerate(arrays)]
    call = make_call(name, *params, **attrs)
    return kernel_of(call.op), call.attrs


def _rows(n: int, width: int) -> tuple:
    return (max(1, n // width), min(n, width))


# op -> (inputs of work size n, attrs); work size as CpuCost._work counts it
_UNARY = ("negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "nn.relu",
          "copy", "cos", "sin")
_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")


def _signed(rng, shape) -> np.ndarray:
    """Values of both signs, as activations have: some kernels (sigmoid, erf) take a branch or
    a mask by sign or size, and run slower on mixed data than on one-signed data."""
    return rng.standard_normal(size=shape).astype(F32)


_POSITIVE = ("log", "sqrt", "rsqrt", "divide", "power")  # defined (or finite) on positive data


# GELU is the activation of a transformer's feed-forward expansion, a dense layer four times wider
# than its layer-normalised input (unit spread). With weights initialised to keep the variance
# through the layer (Xavier with averaged fans, TVM's default: variance 2 / (fan_in + fan_out)),
# its outputs have spread sqrt(2 / 5) = 0.63 (BERT's own N(0, 0.02) weights at width 768: 0.55).
GELU_SPREAD = math.sqrt(2.0 / 5.0)


def _gelu_input(rng, shape) -> np.ndarray:
    """What erf sees in a network: GELU's activation (``GELU_SPREAD``) over sqrt(2). scipy's erf
    takes a slower branch for |x| >= 1 and branches on the sign, so its time depends on the
    values: on (128, 3072), 4.0 ms at spread 0.1, 4.3 ms at 0.45, 5.4 ms at 0.71, 6.9 ms at 1 and
    10 ms at 30 (and 2.1 ms on non-negative values of spread 0.45). Calibrated on activations of
    unit spread (0.71 here) it overpredicted BERT's erf 1.4x, and BERT's speedup by 0.05."""
    return (_signed(rng, shape) * F32(GELU_SPREAD * 0.70710677)).astype(F32)


# Kernels whose time depends on their values through branches the processor predicts: looped on
# one input of 32K elements, erf and sigmoid ran 2.2x and leaky_relu 3.2x faster than on a new
# input each call (the predictor learns the repeated data), and no faster from 150K elements up.
# A program never repeats its data: their curves are measured on distinct inputs in turn (at
# least DISTINCT_ELEMENTS in all). Measured on one input, erf's curve priced ViT-SiMA's erf over
# 150K elements (interpolated from the points at 32K and 262K) at 1.16 ms; it takes 1.37 ms.
UNPREDICTABLE = ("erf", "sigmoid", "nn.leaky_relu")
DISTINCT_ELEMENTS = 1 << 21

# The ops a network runs on activations past the curves' largest size (VGG's 64x224x224, 3.2M
# values: its first convolutions' bias and relu, and the max pool after them), measured at one more
# size. Beyond the last point a curve is proportional to the work, but from about a million values
# on the data leave the last-level cache and a value costs more: looped, a relu took 0.39 ns a
# value at 0.8M and 0.53-0.57 at 2.5-6.5M, a 3x3 stride-2 max pool 2.1 and 3.0-3.3 ns a value of
# its input. Extrapolated from 2M, VGG-11's five max pools, bias_adds and relus were priced 6.6 ms
# under their time in both the original and the optimized program, the optimized one 5% low and
# its speedup 0.03-0.14 high.
LARGE_SIZE = 1 << 23

# The curves' sizes in a full calibration: a point every doubling from 32K values to 512K, where
# the data (two or three arrays of them) outgrow a core's second-level cache and a value's cost turns
# (on a 2 MB cache a multiply took 0.24 ns a value at 150K and 0.49 at 262K). With a point every
# eightfold there (32K, 262K), interpolated in log-log across that turn, the curves priced
# ViT-SiMA's multiplies on 150K values at 1.45x their looped time and its relus on 393K at 0.85x.
FULL_SIZES = [1 << 4, 1 << 8, 1 << 12, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 21]
LARGE_OPS = ("add", "multiply", "nn.relu", "nn.bias_add", "nn.batch_norm", "nn.max_pool2d", "nn.avg_pool2d")


def _curve_specs() -> dict[str, Callable]:
    specs: dict[str, Callable] = {}

    def unary(make):
        return lambda rng, n: ([make(rng, _rows(n, 256))], {})

    def binary(make):
        return lambda rng, n: ([make(rng, _rows(n, 256)), make(rng, _rows(n, 256))], {})

    for name in _UNARY:
        specs[name] = unary(_rand if name in _POSITIVE else _gelu_input if name == "erf" else _signed)
    for name in _BINARY:
        specs[name] = binary(_rand if name in _POSITIVE else _signed)
    specs["clip"] = lambda rng, n: ([_signed(rng, _rows(n, 256))], {"a_min": -0.5, "a_max": 0.5})
    specs["nn.leaky_relu"] = lambda rng, n: ([_signed(rng, _rows(n, 256))], {"alpha": 0.1})

    def nchw(n):
        c = 64 if n >= 64 * 16 else 1
        hw = max(16, n // c)
        h = max(4, int(math.sqrt(hw)))
        return (1, c, h, max(4, hw // h))

    specs["nn.bias_add"] = lambda rng, n: ([_rand(rng, nchw(n)), _rand(rng, (nchw(n)[1],))], {"axis": 1})
    specs["nn.batch_norm"] = lambda rng, n: (
        [_rand(rng, nchw(n))] + [_rand(rng, (nchw(n)[1],)) for _ in range(4)], {})
    specs["nn.layer_norm"] = lambda rng, n: (
        [_rand(rng, _rows(n, 768)), _rand(rng, (_rows(n, 768)[1],)), _rand(rng, (_rows(n, 768)[1],))], {})
    specs["nn.softmax"] = lambda rng, n: ([_rand(rng, _rows(n, 128))], {"axis": -1})
    for name in ("sum", "mean", "max"):
        specs[name] = lambda rng, n: ([_rand(rng, _rows(n, 256))], {"axis": [-1]})
    specs["transpose"] = lambda rng, n: ([_rand(rng, (max(1, n // 1024), 16, 64))], {"axes": [1, 0, 2]})
    specs["reshape"] = lambda rng, n: ([_rand(rng, _rows(n, 256))], {"newshape": [-1]})
    # views, but several times a reshape's fixed cost (an LSTM splits its gates every step)
    specs["split"] = lambda rng, n: ([_rand(rng, _rows(max(n, 16), 256))],
                                     {"indices_or_sections": 4, "axis": -1})
    specs["concatenate"] = None  # a tuple input: measured below with its own builder
    specs["nn.max_pool2d"] = lambda rng, n: (
        [_rand(rng, nchw(max(n // 2, 64)))], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)})
    specs["nn.global_avg_pool2d"] = lambda rng, n: ([_rand(rng, nchw(n))], {})
    specs["nn.avg_pool2d"] = lambda rng, n: (
        [_rand(rng, nchw(max(n // 2, 64)))], {"pool_size": (2, 2), "strides": (2, 2)})
    # stride 1 (as inception's branches pool): views that overlap, a different cost per window element
    for name in ("nn.max_pool2d", "nn.avg_pool2d"):
        specs[f"{name}@s1"] = lambda rng, n: (
            [_rand(rng, nchw(max(n // 9, 64)))], {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1)})
    specs["nn.pad"] = lambda rng, n: ([_rand(rng, nchw(n)), np.zeros((), F32)],
                                      {"pad_width": ((0, 0), (0, 0), (1, 1), (1, 1))})
    # a row vector broadcast over rows (a bias after a dense): numpy's broadcasting loop costs
    # more per call and per element on small and mid-size data than equal shapes (on (1, 64):
    # 1.8 against 1.2 us; on (128, 256): 9.3 against 6.5 us), so a fused add on a bias was priced
    # below its parts run separately
    specs[f"add{BROADCAST}"] = lambda rng, n: (
        [_signed(rng, _rows(n, 256)), _signed(rng, (_rows(n, 256)[1],))], {})
    # a tensor times a scalar (a GELU's halves, an attention's scale): numpy reads one array, not
    # two, and costs what a unary op does (on 150K values 14.5 against 36 us with a second array)
    specs[f"multiply{SCALAR}"] = lambda rng, n: ([_signed(rng, _rows(n, 256)), np.asarray(0.5, F32)], {})
    # a bias on the last axis of a dense's (rows, units) output: no 4-D reshape (1.9 against 2.6 us)
    specs[f"nn.bias_add{LAST_AXIS}"] = lambda rng, n: (
        [_signed(rng, _rows(n, 256)), _signed(rng, (_rows(n, 256)[1],))], {"axis": -1})
    del specs["concatenate"]
    return specs


def _work(name: str, arrays: list, out, attrs) -> float:
    sizes = [a.size for a in arrays] + [np.asarray(out[0] if isinstance(out, tuple) else out).size]
    if "pool" in name and "global" not in name:
        return max(max(sizes), np.asarray(out).size * math.prod(attrs["pool_size"]))
    return float(max(sizes))


def _cycling(kernel, sets: list, attrs, start: int = 0):
    """A call of ``kernel`` on the next of ``sets`` (argument lists) each time, in turn, from
    ``start``."""
    turn = [start % len(sets) - 1]

    def call():
        turn[0] = (turn[0] + 1) % len(sets)
        return kernel(sets[turn[0]], attrs)
    return call


def _available_bytes() -> int:
    """Bytes of memory free now as the OS reports it (0 when it says nothing)."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def cold_bytes() -> int:
    """Bytes of the copies a cold read rotates over on this machine (see ``COLD_BYTES``): the
    reported cache, at most COLD_BYTES_MAX and a quarter of the memory free now."""
    room = _available_bytes() // 4 or COLD_BYTES_MAX
    return max(COLD_BYTES, min(cache_bytes(), COLD_BYTES_MAX, room))


def _cold_pool(rng, nbytes: int, small_pages: bool = False) -> np.ndarray:
    """``nbytes`` of float32 values (a random block repeated) for weights read cold: views of
    it stand for copies of a weight, so a cold read of a large cache costs no copying per
    measurement (timing does not depend on a weight's values). NumPy asks for transparent huge
    pages on an array this large; ``small_pages``: the pool is mapped with them refused, as a
    program's small weights are (see ``small_pages_below``)."""
    block = _rand(rng, 1 << 18)
    if not small_pages:
        return np.resize(block, nbytes // 4)
    import mmap

    mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mapped.madvise(mmap.MADV_NOHUGEPAGE)  # before the first touch: no huge page is ever made
    pool = np.frombuffer(mapped, dtype=F32)
    for start in range(0, pool.size, block.size):
        chunk = pool[start:start + block.size]
        chunk[:] = block[:chunk.size]
    return pool


def huge_page_bytes() -> int:
    """Bytes of a transparent huge page on this machine (2 MB where the kernel does not say)."""
    try:
        with open(THP_SIZE) as f:
            size = int(f.read().strip())
    except (OSError, ValueError):
        return 2 << 20
    return size if size > 0 else 2 << 20


def small_pages_below() -> int:
    """Bytes under which a program's weight sits in small pages on this machine: NumPy asks for
    transparent huge pages on arrays of NUMPY_HUGE_BYTES or more, and where the kernel gives them
    only when asked (``madvise``), smaller arrays get 4 KB pages. 0 where every array is placed
    alike (huge pages always or never, or no such setting)."""
    import mmap
    import re

    if not hasattr(mmap, "MADV_NOHUGEPAGE"):
        return 0
    try:
        with open(THP_SETTING) as f:
            chosen = re.search(r"\[(\w+)\]", f.read())
    except OSError:
        return 0
    return NUMPY_HUGE_BYTES if chosen and chosen.group(1) == "madvise" else 0


def _rotating(kernel, args: list, attrs, weight: int, pool: np.ndarray | None = None,
              total: int = COLD_BYTES, share: float = 0.0):
    """A call of ``kernel`` that rotates over copies of ``args[weight]`` whose bytes together
    (``total``) overflow the cache, so each call reads the weight cold. A float32 weight's
    copies are distinct views of ``pool`` (64-byte aligned) when it holds them all; ``share`` of
    the way round is where its rotation starts, so that kernels alternated over one pool never
    read the views another has just read."""
    w = args[weight]
    copies = max(1, min(MAX_COPIES, math.ceil(total / max(w.nbytes, 1))))
    step = -(-w.size // 16) * 16  # each view on its own cache lines
    if pool is not None and w.dtype == F32 and copies * step <= pool.size:
        weights = [pool[i * step:i * step + w.size].reshape(w.shape) for i in range(copies)]
    else:
        weights = [w.copy() for _ in range(copies)]
    sets = [args[:weight] + [c] + args[weight + 1:] for c in weights]
    return _cycling(kernel, sets, attrs, int(share * len(sets)))


def time_in_place(plan, values: list, runs: int, clock) -> list[list[float]]:
    """Seconds of each instruction of ``plan`` in each of ``runs`` runs on ``values``, timed in
    place: in the plan's order, with its freeing of each value after its last use, and nothing
    else kept, so that the allocator hands a freed value's memory, still in the cache, to a
    later output as when the program runs. (Timed while every instruction's inputs and output
    were kept, no value was freed during a run and each output landed in memory the cache no
    longer held: SqueezeNet 1.0's relus, bias_adds and max pools took 2.1-2.2, 1.6 and 3.9-4.0
    ms in all timed that way in its plan; 1.3-1.4, 1.1 and 3.4-3.6 ms with its frees.)"""
    times: list[list[float]] = [[] for _ in plan.instrs]
    timed_plan = plan.timed(times, clock)
    for _ in range(runs):
        timed_plan.run(values)
    return times


def kept_values(plan, values: list) -> list:
    """One untimed run of ``plan`` on ``values``: per instruction, ``(run, inputs, extra, output)``."""
    seen: list = [None] * len(plan.instrs)

    def kept(run, i):
        def go(args, extra):
            out = run(args, extra)
            seen[i] = (run, args, extra, out)
            return out
        return go

    plan.instrumented(kept).run(values)
    return seen


class CalibrationWarning(RelayWarning):
    """The machine's speed changed while it was calibrated: its profile may mislead."""


class _Calibration:
    def __init__(self, quick: bool, progress) -> None:
        from ..progress import phase

        self.quick = quick
        self.rng = np.random.default_rng(0)
        self.repeats = 3 if quick else 5
        self.min_seconds = 5e-4 if quick else 3e-3
        self.sizes = [1 << 10, 1 << 17] if quick else list(FULL_SIZES)
        self.max_flops = 3e7 if quick else 1.5e9
        self.clock = clock_of(machine_key())
        self.timer = timer(self.clock)
        self.data: dict = {"curves": {}, "gemm": [], "bmm": [], "conv": [[1, 1, 1, 1, 1.0]],
                           "conv_transpose": [], "conv_transpose_last": [], "fused": {}, "clock": self.clock,
                           "cache_bytes": cache_bytes(), "core_cache_bytes": cache_bytes(level=2)}
        self._rounds: list[dict] = []  # in-program rounds measured between the parts (see in_program)
        self._unconfirmed: list = []  # ratios measured once, awaiting their second pass (see confirm)
        self._dispatch_plan: dict | None = None  # the dispatch plan's raw figures (_settle_dispatch)
        # samples per alternated ratio in each pass: a full calibration measures each twice
        self.ratio_repeats = self.repeats if quick else 3
        self._programs: list | None = None
        self._longest_conv = 0.0  # the longest convolution the in-program rounds counted (above its floor)
        self.cold_bytes = cold_bytes()
        self._pool: np.ndarray | None = None  # weights' copies for deep cold reads (see _rotating)
        self._small_pool: np.ndarray | None = None  # the same in small pages (small_pages_below)
        self.small_pages_below = 0 if quick else small_pages_below()
        self.data["small_pages_below"] = self.small_pages_below
        self.data["huge_page_bytes"] = huge_page_bytes()
        self.data["one_row"] = []  # one-row products at the depths between the grid's (ONE_ROW_DEPTHS)
        specs = _curve_specs()
        self.specs = specs
        self.large = [] if quick else [LARGE_SIZE]  # the sizes LARGE_OPS add to their curves
        # the sizes the fused elementwise ops' ratios are measured at: the smallest, and where the
        # later layers' activations are (a 7x7 or 14x14 image), the cache's turn and the largest
        self.fused_sizes = self.sizes[:1] + self.sizes[-1:] if quick else [1 << 4, 1 << 15, 1 << 18, 1 << 21]
        total = (len(specs) + 3) * len(self.sizes) + len(self.large) * len(LARGE_OPS) \
            + len(self._gemm_grid()) + len(self._one_row_grid()) + len(self._bmm_grid()) \
            + len(self._conv_shapes()) * 2 + len(self._depthwise_shapes()) + len(self._transpose_shapes()) \
            + len(self._pointwise_shapes()) \
            + len(self._dense_fused_shapes()) + len(self._fused_other_ops()) \
            + len(NUMEXPR_GROUPS) * len(self.sizes) + 2  # the numexpr groups; dispatch, in-program
        self.phase = phase("calibrate", f"measuring this machine's numpy executor"
                                        f"{' (quick)' if quick else ''}", total=total,
                           unit="measurement", progress=progress, every=2.0)

    def time(self, fn) -> float:
        return measure(fn, self.repeats, self.min_seconds, self.timer)

    def kernel_time(self, kernel, args: list, attrs) -> float:
        return measure(lambda: kernel(args, attrs), self.repeats, self.min_seconds, self.timer)

    def distinct_inputs_call(self, kernel, spec, n: int, first: list, attrs):
        """A call of ``kernel`` on distinct inputs from ``spec`` in turn (``first``, then new ones:
        at least ``DISTINCT_ELEMENTS`` elements in all), as a program calls it: never twice on the
        same values (see ``UNPREDICTABLE``)."""
        count = max(8, min(MAX_COPIES, math.ceil(DISTINCT_ELEMENTS / max(1, first[0].size))))
        inputs = [first] + [spec(self.rng, n)[0] for _ in range(count - 1)]
        return _cycling(kernel, inputs, attrs)

    def cold_time(self, kernel, args: list, attrs, weight: int = 1, deep: bool = False) -> float:
        """Seconds of ``kernel`` with ``args[weight]`` read cold, as a program reads each weight
        once a run: the calls rotate over copies of the weight that together overflow the cache.
        The copies' bytes, not their number, must exceed the cache: sixteen copies of a 1 MB weight
        stay in a 32 MB last-level cache and ran twice as fast as the same weight read cold.
        ``deep``: over the whole last-level cache (see ``_rotating``)."""
        return measure(self._rotating(kernel, args, attrs, weight, deep), self.repeats, self.min_seconds,
                       self.timer)

    def _rotating(self, kernel, args: list, attrs, weight: int, deep: bool = False, share: float = 0.0):
        """``_rotating`` over COLD_BYTES; with ``deep`` (a full calibration's layout ratios), over
        the whole last-level cache (``cold_bytes``), the copies views of one pool, in small pages
        for a weight under ``small_pages_below`` bytes (as a program holds it)."""
        if not deep or self.quick:
            return _rotating(kernel, args, attrs, weight)
        if args[weight].nbytes < self.small_pages_below:  # placed as a program's small weight
            if self._small_pool is None:
                self._small_pool = _cold_pool(np.random.default_rng(1), self.cold_bytes + (64 << 20), True)
            return _rotating(kernel, args, attrs, weight, self._small_pool, self.cold_bytes, share)
        if self._pool is None:  # made on the first deep read, dropped after them (see fused)
            self._pool = _cold_pool(np.random.default_rng(1), self.cold_bytes + (64 << 20))
        return _rotating(kernel, args, attrs, weight, self._pool, self.cold_bytes, share)

    def cold_times(self, calls: list, weight: int = 1, repeats: int | None = None,
                   deep: bool = False) -> list[float]:
        """Seconds of each ``(kernel, args, attrs)`` in ``calls`` with ``args[weight]`` read cold
        (as ``cold_time``; ``deep``, over the whole cache, see ``_rotating``), their samples
        alternated (``measure_alternated``): for ratios between kernels on the same inputs;
        ``repeats`` samples of each (default: the calibration's)."""
        fns = [self._rotating(kernel, args, attrs, weight, deep, i / len(calls))
               for i, (kernel, args, attrs) in enumerate(calls)]
        return measure_alternated(fns, repeats or self.repeats, self.min_seconds, self.timer)

    def step(self, info: str, n: int = 1) -> None:
        self.phase.step(info, n)

    # -- ratios measured twice, apart in time ---------------------------------------------------
    def ratios(self, job: Callable[[], list[float]], tables: list[list], features: Sequence) -> None:
        """Measure ``job`` (ratios of kernels timed alternated) now, and again when ``confirm``
        runs; the ratios the passes agree on go to ``tables`` (the i-th to the i-th table) as rows
        ``[*features, ratio]``. A quick calibration keeps the first pass's."""
        first = job()
        if self.quick:
            self._keep(first, tables, features)
        else:
            self._unconfirmed.append((job, first, tables, features))

    @staticmethod
    def _keep(ratios: list[float], tables: list[list], features: Sequence) -> None:
        for table, value in zip(tables, ratios, strict=True):
            table.append([*features, value])

    def confirm(self, what: str) -> None:
        """The second pass over the ratios measured since the last ``confirm``: where the two passes
        agree within ``AGREE``, their geometric mean; where not, a third pass decides (the median
        of three). Alternated samples cancel a slow change of the machine's speed but not a short
        spell of other work on its cores: one pass once priced a fused matmul-and-bias product 1.39x
        the dense kernel at 128x768x768 (its neighbours 0.93-1.05; measured again, 0.96), and an
        exact extraction then wrote BERT-base's 31 such products as dense-and-bias instead, for a
        program 4% slower than the original. Passes seconds apart rarely meet the same spell."""
        pending, self._unconfirmed = self._unconfirmed, []
        second = []
        for i, (job, *_) in enumerate(pending, 1):
            second.append(job())
            self.step(f"{what}, second pass {i}/{len(pending)}", 0)
        for (job, first, tables, features), again in zip(pending, second, strict=True):
            if all(max(a, b) <= AGREE * min(a, b) for a, b in zip(first, again, strict=True)):
                agreed = [math.sqrt(a * b) for a, b in zip(first, again, strict=True)]
            else:
                agreed = [statistics.median(v) for v in zip(first, again, job(), strict=True)]
                self.data["ratios_third_pass"] = self.data.get("ratios_third_pass", 0) + 1
            self.data["ratios_confirmed"] = self.data.get("ratios_confirmed", 0) + 1
            self._keep(agreed, tables, features)

    def run(self) -> dict:
        started = time.perf_counter()
        probe = Probe(self.clock)
        probes = [probe()]
        for measure_part in (self.dispatch, self.curves, self.gemm, self.bmm, self.numexpr, self.conv,
                             self.conv_transpose, self.fused, self.in_program):
            measure_part()
            probes.append(probe())  # after each part: a part measured while the machine ran slower shows
            if measure_part not in (self.dispatch, self.in_program):
                self._spread_rounds()
        self.data["probe"] = statistics.median(probes)
        self.data["probes"] = probes
        self.phase.done()
        self.data["seconds"] = time.perf_counter() - started
        return self.data

    # -- measurements --------------------------------------------------------------------------
    def dispatch(self) -> None:
        """Per instruction: a plan of varied small ops, less their kernels timed alone. Varied,
        because a kernel called in a loop on the same data runs faster than in a program."""
        from ..eval import evaluate
        from ..eval.executor import compile_function
        from ..ir.expr import Function, var
        from ..ir.module import IRModule
        from ..ops.builders import make_call

        shape = (8, 32)
        x = var("x", TensorType(shape, "float32"))
        chain = [("add", True), ("tanh", False), ("multiply", True), ("nn.relu", False),
                 ("subtract", True), ("exp", False), ("divide", True), ("sqrt", False)]
        body, calls = x, []
        for _ in range(25):
            for name, binary in chain:
                body = make_call(name, body, x) if binary else make_call(name, body)
                calls.append((name, binary))
        plan = compile_function(Function([x], body))
        value = _rand(self.rng, shape)
        calls_alone = []  # (op, kernel, args, attrs)
        for name, binary in chain:
            args = [value, value] if binary else [value]
            kernel, attrs = _call(name, args)
            calls_alone.append((name, kernel, args, attrs))
        extra = []
        # the plan and its kernels alone timed side by side, round after round: on a shared
        # machine its speed drifts by tens of percent within seconds, and the difference of two
        # figures taken apart drifted with it (0.25 to 1.2 us per instruction)
        for _ in range(3 * self.repeats):
            alone = self._looped_alone(calls_alone) * 25
            extra.append(measure(lambda: plan.run([value]), 1, self.min_seconds, self.timer) - alone)
        per_instruction = statistics.median(extra) / len(calls)
        self.data["dispatch"] = max(per_instruction, 1e-8)
        # per program, and per input (rg.evaluate checks each input against its parameter)
        params = [var(f"p{i}", TensorType(shape, "float32")) for i in range(16)]
        one = IRModule.from_expr(Function(params[:1], make_call("negative", params[0])))
        many = IRModule.from_expr(Function(params, make_call("negative", params[0])))
        t_one = self.time(lambda: evaluate(one, value))
        t_many = self.time(lambda: evaluate(many, *([value] * 16)))
        kernel, attrs = _call("negative", [value])
        neg = self.kernel_time(kernel, [value], attrs)
        self.data["program_per_input"] = max((t_many - t_one) / 15, 0.0)
        # A program is run after other work (the benchmarks alternate programs; a caller does its
        # own work between calls): its first steps find the executor's and numpy's state out of
        # the caches, which a loop of the same call hides. Timed as programs are, one call at a
        # time alternated with another plan, less the clock's own reading
        shots = self.single_shots(lambda: evaluate(one, value), lambda: plan.run([value]))
        self.data["program"] = max(max(t_one, shots) - self.data["dispatch"] - neg
                                   - self.data["program_per_input"], 0.0)
        # the dispatch is settled against the curves once they are measured (``_settle_dispatch``);
        # the per-program cost keeps this part's figures
        self._dispatch_plan = {"extra": per_instruction, "calls": calls_alone}
        self.step("dispatch")

    def _looped_alone(self, calls: list) -> float:
        """Seconds of one pass over ``calls`` ((op, kernel, args, attrs)), each kernel looped alone."""
        return sum(measure(lambda k=k, a=a, c=c: k(a, c), 1, self.min_seconds / 4, self.timer)
                   for _, k, a, c in calls)

    def _settle_dispatch(self) -> None:
        """The dispatch again, against the kernels as the curves price them rather than looped
        alone: the curves time each point cycled with the others (see ``curves``), which a tiny
        kernel's time shows (an add on (8, 32) 0.70 us on its curve, 0.47 looped alone), so with
        the dispatch taken over the looped kernels the model counted that share twice and priced
        the dispatch plan itself 1.19x its time (diamond-chain's 4000 instructions on (4,)
        1.2-1.3x theirs). The share is the plan's kernels as the curves price them less the same
        kernels looped alone now, right after the curves: taken against the looped times of the
        dispatch's own rounds instead, the machine's drift between the two parts came into it
        (0.61 and 0.73 us in two calibrations). The share was 0.27 us in the calibration that
        showed it and 0.005 us in one made later with this measurement."""
        plan = self._dispatch_plan
        if plan is None:
            return
        calls = plan["calls"]
        if not all(self.data["curves"].get(name) for name, *_ in calls):
            return  # a curve is missing: the looped kernels stay the reference
        model = self._round_model()
        priced = statistics.fmean(
            model.kernel(name, {}, [TensorType(a.shape, "float32") for a in args],
                         TensorType(args[0].shape, "float32")) for name, _, args, _ in calls)
        looped = statistics.median(self._looped_alone(calls) for _ in range(3 * self.repeats)) / len(calls)
        self.data["dispatch_share"] = priced - looped  # per instruction
        self.data["dispatch"] = max(plan["extra"] - self.data["dispatch_share"], 1e-8)

    def single_shots(self, fn, other, rounds: int = 0) -> float:
        """Seconds of one call of ``fn`` run right after ``other`` (by the profile's clock, less
        the cost of reading it), as a benchmark times alternated programs: the least of three
        medians, as a burst of other work on a shared machine can inflate one of them."""
        rounds = rounds or (30 if self.quick else 100)
        reads = []
        for _ in range(rounds):
            start = self.timer()
            reads.append(self.timer() - start)
        medians = []
        for _ in range(3):
            shots = []
            for _ in range(rounds):
                other()
                start = self.timer()
                fn()
                shots.append(self.timer() - start)
            medians.append(statistics.median(shots))
        return max(min(medians) - statistics.median(reads), 0.0)

    def curves(self) -> None:
        """Every curve point (each op at each size, and the copies) measured together, their
        samples alternated over the whole part (``measure_alternated``), each after an untimed
        call (the kernel looped alone, as before). On a virtual machine whose speed flipped
        between two states 1.6x apart a few times a second, each point measured on its own came
        from whichever state held during its few milliseconds: one profile's curves put in place of
        another's moved MobileNet's predicted speedup from optimizing from 1.75 to 1.48. Measured
        together, the points of one calibration share the states they meet, so the ops' prices
        against each other (what a predicted speedup reads) move less between calibrations: over
        five measurements, a point's largest over its smallest, once each run is scaled by its
        speed as a whole, was 1.40 and 1.38 (median over the points) against 1.62 and 1.55 one by
        one, in two runs of ``benchmarks/bench_calibrate.py``; unscaled, the two ways moved alike
        (1.60-1.70). Three calibrations then predicted MobileNet's speedup at 1.42-1.46, where six
        made point by point gave 1.41-1.85."""
        points = self.curve_points()
        done = [0]  # the part's steps (one per point) shown as its rounds end

        def advance(k: int) -> None:
            now = len(points) * k // self.repeats
            self.phase.step(f"curves, round {k} of {self.repeats}", now - done[0])
            done[0] = now

        times = measure_alternated([call for _, _, call in points], self.repeats, self.min_seconds,
                                   self.timer, warm=True, on_round=advance)
        self.data["curves"].update(curves_of(points, times))
        self._settle_dispatch()  # the dispatch over the kernels as these curves price them

    def curve_points(self) -> list[tuple[str, float, Callable]]:
        """The curves' points, each (curve, work size, a call of its kernel on its inputs): every
        op of ``specs`` at every size, then the copies."""
        points: list[tuple[str, float, Callable]] = []  # (curve, work, call)
        for name, spec in self.specs.items():
            for n in self.sizes + (self.large if name in LARGE_OPS else []):
                arrays, attrs = spec(self.rng, n)
                op = name.split("@")[0]
                kernel, canon = _call(op, arrays, **attrs)
                out = kernel(arrays, canon)
                if op in UNPREDICTABLE:
                    call = self.distinct_inputs_call(kernel, spec, n, arrays, canon)
                else:
                    call = functools.partial(kernel, arrays, canon)
                points.append((name, _work(name, arrays, out, attrs), call))
        for n in self.sizes:
            a = _rand(self.rng, _rows(n, 256))
            points.append(("copy", float(n), lambda a=a: a.copy()))
            b = _rand(self.rng, (max(1, int(math.sqrt(n))), max(1, n // max(1, int(math.sqrt(n))))))
            points.append(("copy_strided", float(b.size), lambda b=b: np.ascontiguousarray(b.T)))
            halves = [_rand(self.rng, _rows(n // 2 or 1, 256)) for _ in range(2)]
            points.append(("concatenate", float(n), lambda h=halves: np.concatenate(h, axis=0)))
        return points

    def _gemm_grid(self) -> list:
        ms = (1, 64, 512) if self.quick else (1, 16, 128, 512, 2048, 8192)
        nk = (32, 256) if self.quick else (16, 64, 256, 1024, 4096)
        grid = [(m, n, k) for m in ms for n in nk for k in nk if 2.0 * m * n * k <= self.max_flops]
        # a one-row product on a weight far larger than the cache (a classifier on VGG's 25088
        # features): its rate falls from 22.7 GB/s of weight at 4096 deep to 18.5 at 16384, so the
        # 4096-deep rate held flat priced VGG's 4096x25088 dense at 0.8x its time
        return grid if self.quick else grid + [(1, 4096, 16384)]

    def _one_row_grid(self) -> list:
        """One-row products at the depths between the grid's (ONE_ROW_DEPTHS), one weight of each
        of ONE_ROW_SIZES; none in a quick calibration."""
        if self.quick:
            return []
        return [(1, size // (4 * k), k) for size in ONE_ROW_SIZES for k in ONE_ROW_DEPTHS]

    def gemm(self) -> None:
        """The dense kernel over the grid, its weight read cold; over the whole last-level cache for
        products of at most DEEP_ROWS rows, whose time is that read. Then the one-row products at
        the depths between the grid's (``one_row``), read so."""
        for table, shapes in (("gemm", self._gemm_grid()), ("one_row", self._one_row_grid())):
            for m, n, k in shapes:
                x, w = _rand(self.rng, (m, k)), _rand(self.rng, (n, k))
                kernel, attrs = _call("nn.dense", [x, w])
                t = self.cold_time(kernel, [x, w], attrs, deep=m <= DEEP_ROWS)
                self.data[table].append([m, n, k, 2.0 * m * n * k, t])
                self.step(f"dense {m}x{n}x{k}")
        self._pool = self._small_pool = None  # made again for the fused ratios' deep reads
        self.data["gemm"] = _capped_by_larger(self.data["gemm"])

    def _bmm_grid(self) -> list:
        bs = (1, 8) if self.quick else (1, 8, 32)
        dims = (8, 64) if self.quick else (8, 64, 256)
        return [(b, m, n, k) for b in bs for m in dims for n in dims for k in dims
                if 2.0 * b * m * n * k <= self.max_flops]

    def bmm(self) -> None:
        for b, m, n, k in self._bmm_grid():
            x, y = _rand(self.rng, (b, m, k)), _rand(self.rng, (b, n, k))
            kernel, attrs = _call("nn.batch_matmul", [x, y])
            t = self.kernel_time(kernel, [x, y], attrs)
            self.data["bmm"].append([b, m, n, k, 2.0 * b * m * n * k, t])
            self.step(f"batch_matmul {b}x{m}x{n}x{k}")

    def numexpr(self) -> None:
        from ..eval.fused_kernels import fused_kernel
        from ..ir.expr import Function, var
        from ..ops.builders import make_call

        for ops in NUMEXPR_GROUPS:
            points = []
            for n in self.sizes:
                shape = _rows(n, 256)
                a, b = (var(s, TensorType(shape, "float32")) for s in ("a", "b"))
                body = make_call("add", a, b)
                for step in ("multiply", "subtract", "maximum")[:ops - 1]:
                    body = make_call(step, body, b)
                kernel = fused_kernel(Function([a, b], body, None, (), {"Primitive": 1}))
                args = [_rand(self.rng, shape), _rand(self.rng, shape)]
                points.append([float(n), self.time(lambda k=kernel, x=args: k(x))])
                self.step(f"numexpr group of {ops}")
            self.data["curves"][f"numexpr_{ops}"] = _monotone(points)

    def _conv_shapes(self) -> list:
        # (channels in, image size, channels out, kernel (h, w), stride, padding (h, w)): the kinds
        # of layer image models have, from a 7x7 stem on RGB to deep 1x1 and 1x7 layers
        shapes = [(16, 28, 16, (3, 3), 1, (1, 1)), (64, 14, 64, (1, 1), 1, (0, 0)),
                  (4, 8, 8, (3, 3), 1, (1, 1)), (8, 8, 8, (1, 1), 1, (0, 0)), (3, 32, 16, (3, 3), 2, (1, 1))]
        if not self.quick:
            shapes += [(3, 56, 16, (7, 7), 2, (3, 3)), (64, 28, 64, (1, 1), 1, (0, 0)),
                       (64, 14, 128, (3, 3), 2, (1, 1)), (128, 14, 128, (3, 3), 1, (1, 1)),
                       (256, 7, 64, (1, 1), 1, (0, 0)), (64, 56, 64, (3, 3), 1, (1, 1)),
                       (64, 56, 256, (1, 1), 1, (0, 0)), (256, 56, 64, (1, 1), 1, (0, 0)),
                       (3, 224, 64, (7, 7), 2, (3, 3)), (3, 224, 64, (3, 3), 1, (1, 1)),
                       (256, 14, 256, (3, 3), 1, (1, 1)), (512, 7, 512, (3, 3), 1, (1, 1)),
                       (1024, 14, 256, (1, 1), 1, (0, 0)), (2048, 7, 512, (1, 1), 1, (0, 0)),
                       (32, 16, 32, (3, 3), 1, (1, 1)), (128, 56, 128, (3, 3), 1, (1, 1)),
                       (256, 28, 256, (3, 3), 1, (1, 1)), (128, 28, 32, (3, 3), 1, (1, 1)),
                       (16, 55, 64, (1, 1), 1, (0, 0)), (16, 55, 64, (3, 3), 1, (1, 1)),
                       (256, 14, 512, (1, 1), 2, (0, 0)), (128, 17, 128, (1, 7), 1, (0, 3)),
                       (160, 17, 192, (7, 1), 1, (3, 0)), (512, 28, 512, (3, 3), 1, (1, 1)),
                       # few channels in, many out, on large images: Winograd's output transform
                       # dominates there, and it ran 1.2-3.6x the direct kernel's time
                       (32, 56, 128, (3, 3), 1, (1, 1)), (64, 28, 256, (3, 3), 1, (1, 1)),
                       (64, 14, 256, (3, 3), 1, (1, 1)),
                       # many in, few out, 1x1 on mid-size images (squeeze and bottleneck layers): the
                       # nearest shapes above put SqueezeNet's 256->32 .. 384->64 at 0.6-0.8 of their time
                       (256, 28, 32, (1, 1), 1, (0, 0)), (512, 28, 128, (1, 1), 1, (0, 0)),
                       (768, 14, 128, (1, 1), 1, (0, 0)),
                       # 3x3 on the small images of a network run on small inputs (ResNet-50 on 64x64
                       # reaches 2x2): the larger shapes above put Winograd there at 0.67 of its time
                       (64, 16, 64, (3, 3), 1, (1, 1)), (128, 8, 128, (3, 3), 1, (1, 1)),
                       (256, 4, 256, (3, 3), 1, (1, 1)), (512, 2, 512, (3, 3), 1, (1, 1)),
                       # 3x3 on a 112-pixel image (a 224 input after its first pool), more channels out
                       # than in: Winograd's tiles leave the cache there, and the 56-pixel shapes put it
                       # at 0.7 of its time (measured 1.2-1.4x the direct kernel's)
                       (64, 112, 128, (3, 3), 1, (1, 1)),
                       # and as many channels out as in (VGG's second block): there Winograd takes
                       # 0.80-0.85 of the direct kernel's time in one piece (0.61 in bands), which
                       # the rows around it put at 0.96. These two rows price VGG's 64-channel layer
                       # on 224x224 too: 0.70 from them, 0.70 measured (in bands)
                       (128, 112, 128, (3, 3), 1, (1, 1)),
                       # VGG's deeper 3x3 layers: the rows around them put Winograd 8-14% over its
                       # measured time there (256 channels on 56x56: 0.60 of the direct kernel, where
                       # its nearest rows give 0.69)
                       (128, 56, 256, (3, 3), 1, (1, 1)), (256, 56, 256, (3, 3), 1, (1, 1)),
                       (256, 28, 512, (3, 3), 1, (1, 1)), (512, 14, 512, (3, 3), 1, (1, 1)),
                       # ResNet's second stage (128 channels on 28x28, every ResNet's most common
                       # 3x3 layer): between the 14- and 56-pixel rows, Winograd was priced at 0.75-0.76
                       # of the direct kernel, where it measures 0.68-0.72 (in ResNet-34: 1.73-1.83
                       # ms against the direct 2.55-2.65 ms)
                       (128, 28, 128, (3, 3), 1, (1, 1)),
                       # DenseNet's growth layers on 14- and 7-pixel images (40 of its 58 3x3 layers):
                       # the rows around them priced the direct kernel 36% over at 14 pixels and
                       # 25% under at 7, and Winograd 7-10% under at both
                       (128, 14, 32, (3, 3), 1, (1, 1)), (128, 7, 32, (3, 3), 1, (1, 1)),
                       # SqueezeNet's expand layers on a small input (96x96: 16 -> 64 channels on
                       # 23x23, 32 -> 128 on 11x11): few channels in on a small image, where the
                       # rows around them priced F(4x4, 3x3) 1.4% under F(2x2, 3x3) and it ran 6% over
                       (16, 23, 64, (3, 3), 1, (1, 1)), (32, 11, 128, (3, 3), 1, (1, 1)),
                       # VGG's 512-channel layers on an 8x8 image (a 64x64 input): the 7-pixel row's
                       # Winograd ratio, taken per tile of 2x2 outputs, priced it there as the direct
                       # kernel (3.66 ms) where it ran 4.06-4.26 ms against the direct 3.48-3.80 ms:
                       # its 16 MB transformed weight sets its time on so few tiles
                       (512, 8, 512, (3, 3), 1, (1, 1)),
                       # SqueezeNet-1.0 at 224x224: its 96-channel 7x7 stem (the 64-channel stem's
                       # rows priced it 17% under), its expand layers on 27x27 and 13x13 (the rows
                       # around them priced the direct kernel 20-30% over) and its 1000-class 1x1
                       # (16% under); the errors cancelled in the original and not once the
                       # expand layers became Winograd, so its speedup was predicted 0.06-0.08 high
                       (3, 224, 96, (7, 7), 2, (3, 3)), (48, 27, 192, (3, 3), 1, (1, 1)),
                       (64, 27, 256, (3, 3), 1, (1, 1)), (64, 13, 256, (3, 3), 1, (1, 1)),
                       (512, 13, 1000, (1, 1), 1, (0, 0)),
                       # a vision transformer's patch embedding (ViT-SiMA's 16x16 patches, stride 16):
                       # 256 taps, where the rows above have at most 49, priced it at 0.37 of its time
                       (3, 224, 192, (16, 16), 16, (0, 0)),
                       # 3x3 layers on large images, which Winograd now takes too: VGG's 64-channel
                       # layer on 224x224 (its 116 MB of gathered columns leave the caches; the rows
                       # above priced the direct kernel at 53 ms where it ran 76-81) and
                       # Inception-v3's 32 -> 64 on 147x147
                       (64, 224, 64, (3, 3), 1, (1, 1)), (32, 147, 64, (3, 3), 1, (1, 1)),
                       # few channels out on a 56-pixel image (DenseNet's first growth layers,
                       # 128 -> 32): the rows around it put F(4x4, 3x3) at 0.69 of the direct
                       # kernel and F(2x2) at 0.84, where they ran 0.56 and 0.68; and many out on a
                       # 73-pixel one, unpadded (Inception-v3's 80 -> 192): there 0.74 and 0.92,
                       # where they ran 0.94 and 1.18
                       (128, 56, 32, (3, 3), 1, (1, 1)), (80, 73, 192, (3, 3), 1, (0, 0))]
        return shapes

    def _depthwise_shapes(self) -> list:
        shapes = [(8, 16, 1), (32, 28, 1)]
        if not self.quick:
            shapes += [(64, 14, 2), (32, 112, 1), (64, 112, 2), (128, 56, 1), (256, 28, 1), (512, 14, 1),
                       (1024, 7, 1), (128, 56, 2), (256, 28, 2), (512, 14, 2)]
        return shapes

    def _pointwise_shapes(self) -> list:
        # (channels in, image size, channels out): MobileNet's 1x1 layers, which conv.rules makes
        # channels-last on images up to 56x56
        shapes = [(16, 8, 32)]
        if not self.quick:
            shapes += [(64, 56, 128), (128, 56, 128), (128, 28, 256), (256, 28, 256), (256, 14, 512),
                       (512, 14, 512), (512, 7, 1024), (1024, 7, 1024)]
        return shapes

    def _transpose_shapes(self) -> list:
        # (channels in, image size, channels out, kernel, stride, padding), as generators upsample
        shapes = [(16, 4, 8, 4, 2, 1)]
        if not self.quick:
            shapes += [(1024, 4, 512, 4, 2, 1), (512, 8, 256, 4, 2, 1), (256, 16, 128, 4, 2, 1),
                       (128, 32, 3, 4, 2, 1), (64, 16, 64, 3, 1, 1)]
        return shapes

    def _conv_fused_ops(self) -> list:
        return [name for name, anchor in self._fused_anchors().items() if anchor == "nn.conv2d"]

    def _fused_makers(self) -> dict:
        """Per fused elementwise op ``fused`` measures at a few sizes: (inputs of ``n`` values, attrs)."""
        from ..ops import lookup

        r = self.rng

        def elementwise(rows):
            return lambda n: [_rand(r, _rows(n, 512)) for _ in range(rows)]

        def per_channel(vectors):
            # a batch norm as scale and shift, one value per channel of an NCHW activation, with
            # as many channels as a network has at that size (512 on 7x7 in ResNet, 64 on 56x56):
            # on rows of 512 values, ResNet-18's scale-shift-relus on (512, 7, 7) were priced at
            # 19 us and took 71-93 us (numpy's broadcasting loop runs 49 values at a time)
            def make(n):
                c = 512 if n <= 1 << 15 else 256 if n <= 1 << 16 else 64
                h = max(1, int(math.sqrt(max(n // c, 1))))
                shape = (1, c, h, max(1, n // c // h))
                return [_rand(r, shape)] + [_rand(r, (c, 1, 1)) for _ in range(vectors)]
            return make

        made = {
            "fused.add_relu": (elementwise(2), {}), "fused.add_tanh": (elementwise(2), {}),
            "fused.add_sigmoid": (elementwise(2), {}), "fused.multiply_add": (elementwise(3), {}),
            "fused.multiply_add_relu": (per_channel(2), {}), "fused.multiply_maximum": (per_channel(2), {}),
            "fused.add_layer_norm": (lambda n: [_rand(r, _rows(n, 512)), _rand(r, _rows(n, 512)),
                                                _rand(r, (min(n, 512),)), _rand(r, (min(n, 512),))],
                                     {"axis": -1}),
            "fused.multiply_softmax": (lambda n: [_rand(r, (max(1, n // 4096), 64, 64)),
                                                  np.asarray(0.125, F32)], {"axis": -1}),
        }
        # the same ops on per-channel operands (``cpu_cost.CHANNEL``), as a network's scale-shift
        # or bias in NCHW gives them: their ratio on equal shapes did not carry over (a
        # multiply_add on (1, 256, 14, 14) and two (256, 1, 1) took 41 us looped and was priced
        # at 19, so a scale-shift-relu after a convolution was priced below folding it in)
        for name in PER_CHANNEL_FUSED:
            made[name + CHANNEL] = (per_channel(lookup(name).num_inputs - 1), {})
        return made

    def _fused_other_ops(self) -> list:
        """The fused ops of the op table ``fused`` measures over their parts' prediction, at a few
        sizes: those with inputs it makes (``_fused_makers``) and no anchor measured per shape (the dense
        and matmul ones, above in ``fused``, and conv2d_add, in ``conv``); a layout-only fused op is
        costed as its parts, Winograd's as conv2d's."""
        from ..ops.fused_ops import FUSED_OPS

        anchored = {n for n, a in self._fused_anchors().items() if a in DENSE_LIKE_ANCHORS}
        made = self._fused_makers()
        ops = [n for n in FUSED_OPS if n in made and n not in anchored | {"fused.conv2d_add"}]
        return ops + [n + CHANNEL for n in ops if n + CHANNEL in made]

    def _fused_anchors(self) -> dict:
        """Fused ops of the op table whose parts the calibration can build inputs for: the
        anchor's inputs, then a bias the size of the output channels (or units), or a per-channel
        floor (C, 1, 1) (see ``_epilogue_inputs``)."""
        from ..ops import lookup
        from ..ops.fused_ops import FUSED_OPS, Arg, definition

        out = {}
        for name in FUSED_OPS:
            d = definition(name)
            record = lookup(name)
            if d is None or record is None:
                continue
            anchor = d.parts[0]
            n_anchor = sum(1 for r in anchor.inputs if type(r) is Arg)
            if all(n in ("bias", "floor") for n in record.input_names[n_anchor:]):
                out[name] = anchor.op
        return out

    def _epilogue_inputs(self, name: str, channels: int) -> list:
        """The extra inputs of a fused convolution: its bias, or its floor (C, 1, 1), or none."""
        from ..ops import lookup

        shapes = {"bias": (channels,), "floor": (channels, 1, 1)}
        return [_rand(self.rng, shapes[n]) for n in lookup(name).input_names[2:] if n in shapes]

    def conv(self) -> None:
        """The conv kernel on each shape, over the structural estimate; each fused op anchored on
        a convolution on the same inputs, over the convolution (its epilogue's share); Winograd
        over the direct kernel. All with the weight read cold, as a program reads it."""
        # the kernel's fixed cost (padding, window view, set-up) on a one-pixel image
        x, w = _rand(self.rng, (1, 1, 4, 4)), _rand(self.rng, (1, 1, 3, 3))
        kernel, attrs = _call("nn.conv2d", [x, w], padding=(1, 1))
        self.data["conv_call"] = self.kernel_time(kernel, [x, w], attrs)
        w1 = _rand(self.rng, (1, 1, 1, 1))  # the 1x1 path's (one matrix product, no gathering)
        kernel, attrs = _call("nn.conv2d", [x, w1])
        self.data["conv_call_1x1"] = self.kernel_time(kernel, [x, w1], attrs)
        self.data["curves"]["conv_grouped"] = [[1.0, 1e-6]]
        model = CpuCost(Profile(dict(self.data, key={})))
        from ..ops.winograd import winograd_weight
        from .cpu_cost import WINOGRAD, depthwise_features, tile_waste, winograd_features

        rows = []
        winograd: list = []
        winograd4: list = []
        fused_ops = self._conv_fused_ops()
        from ..ops.fused_ops import FUSED_OPS

        residual_ops = [n for n in ("fused.conv2d_add",) if n in FUSED_OPS]  # a residual the output's shape
        fused_rows: dict[str, list] = {}  # per fused op, once both passes agree (see confirm)
        # a row's direct kernel is timed again in each pass of Winograd's ratios and its fused
        # ops': the row takes the median of those times and its own (row index, the times, fixed
        # cost, estimate)
        retimed: list = []
        for c, size, o, (kh, kw), stride, (ph, pw) in self._conv_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (o, c, kh, kw))
            conv_attrs = {"strides": (stride, stride), "padding": (ph, pw)}
            kernel, attrs = _call("nn.conv2d", [x, w], **conv_attrs)
            out = kernel([x, w], attrs)
            # the weight read cold, as a program reads it (and as the GEMM grid under the estimate
            # is measured): looped on one weight, a 512-channel layer on a 2x2 image found its
            # 9 MB in the cache and ran 0.6x its time in the program
            t = self.cold_time(kernel, [x, w], attrs)
            call = model.conv_call(kh, kw, (ph, pw))
            est = model.conv_base(x.shape, o, c, kh, kw, float(out.size), (ph, pw), (stride, stride))
            features = conv_features(o, c, kh, kw, float(out.size))
            rows.append([*features, max(t - call, 0.1 * t) / est])
            times = [t]
            retimed.append((len(rows) - 1, times, call, est))
            self.step(f"conv2d {c}->{o} {kh}x{kw} on {size}x{size}")
            if (kh, kw) == (3, 3) and stride == 1:  # Winograd's time over the direct kernel's, by
                u, u4 = winograd_weight(w), winograd_weight(w, 4)  # channels: alternated samples
                wk, wattrs = _call(WINOGRAD, [x, u], tile_size=2, padding=(ph, pw))  # (the load
                wk4, wattrs4 = _call(WINOGRAD, [x, u4], tile_size=4, padding=(ph, pw))  # changes),
                # each weight cold: Winograd's transformed weight is 16/9 (F(4x4, 3x3): 4) times the
                # direct one's, which a looped run keeps in the cache (there 512 channels on 7x7
                # measured 0.84x the direct kernel; cold, as in a program, 1.03-1.06x)
                calls = [(wk, [x, u], wattrs), (wk4, [x, u4], wattrs4), (kernel, [x, w], attrs)]
                wastes = (tile_waste(*out.shape[2:]), tile_waste(*out.shape[2:], 4))

                def wino_job(calls=calls, wastes=wastes, times=times):
                    wino_t, wino4_t, direct_t = self.cold_times(calls, repeats=self.ratio_repeats)
                    times.append(direct_t)
                    return [wino_t / direct_t / wastes[0], wino4_t / direct_t / wastes[1]]
                self.ratios(wino_job, [winograd, winograd4], winograd_features(c, o, float(out.size)))
            if 2.0 * out.size * c * kh * kw > 4e8:  # the epilogues' share of the largest is read off
                # the nearest smaller ones
                self.step(f"fused conv2d {c}->{o} {kh}x{kw} on {size}x{size} (as smaller ones)")
                continue
            for name in fused_ops + residual_ops:
                extra = ([_rand(self.rng, out.shape)] if name in residual_ops
                         else self._epilogue_inputs(name, o))
                arrays = [x, w, *extra]
                fk, fattrs = _call(name, arrays, **conv_attrs)  # against the direct kernel, both cold
                pair = [(kernel, [x, w], attrs), (fk, arrays, fattrs)]

                def fused_job(pair=pair, times=times):
                    direct_t, fused_t = self.cold_times(pair, repeats=self.ratio_repeats)
                    times.append(direct_t)
                    return [fused_t / direct_t]
                self.ratios(fused_job, [fused_rows.setdefault(name, [])], features)
            self.step(f"fused conv2d {c}->{o} {kh}x{kw} on {size}x{size}")
        self.confirm("Winograd and fused conv2d")
        # one timing of a large layer, five calls, was once 22% over the same kernel's time in the
        # passes minutes later (VGG's 256 channels on 56x56: 29.8 ms against 24.4-26.4), and its
        # Winograd layers, priced off it, 39% over their time in VGG-16's program: the median of
        # the row's own time and the passes' (apart in time) discounts one such spell
        for index, times, call, est in retimed:
            t = statistics.median(times)
            rows[index][-1] = max(t - call, 0.1 * t) / est
        for name, measured in fused_rows.items():
            self.data["fused"].setdefault(name, []).extend(measured)
        self.data["conv"] = rows
        self.data["winograd"] = winograd
        self.data["winograd4"] = winograd4
        grouped, nhwc = [], []
        self.data["fused_grouped"] = {}
        for c, size, stride in self._depthwise_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (c, 1, 3, 3))
            conv_attrs = {"strides": (stride, stride), "padding": (1, 1), "groups": c}
            kernel, attrs = _call("nn.conv2d", [x, w], **conv_attrs)
            out = kernel([x, w], attrs)
            t = self.cold_time(kernel, [x, w], attrs)  # as the other convolutions (a few KB of weight)
            grouped.append([2.0 * out.size * 9, t])
            if size <= 56:  # channels-last (NHWC data, HWIO weight) as conv.rules makes it on small
                # images: its time over this one's, as the median of alternated pairs
                xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                wl = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
                lk, lattrs = _call("nn.conv2d", [xl, wl], data_layout="NHWC", kernel_layout="HWIO",
                                   **conv_attrs)
                pairs = [self.kernel_time(lk, [xl, wl], lattrs) / self.kernel_time(kernel, [x, w], attrs)
                         for _ in range(3)]
                nhwc.append([*depthwise_features(c, size, float(out.size)), statistics.median(pairs)])
            # a depthwise anchor runs its bias and relu per block in cache: its own ratios, by size,
            # as the median of alternated pairs (the epilogue is a few percent: the load would decide)
            for name in fused_ops:
                arrays = [x, w, *self._epilogue_inputs(name, c)]
                fk, fattrs = _call(name, arrays, **conv_attrs)
                pairs = [self.kernel_time(fk, arrays, fattrs) / self.kernel_time(kernel, [x, w], attrs)
                         for _ in range(3)]
                self.data["fused_grouped"].setdefault(name, []).append(
                    [float(out.size), statistics.median(pairs)])
            self.step(f"depthwise conv2d {c} on {size}x{size}")
        self.data["curves"]["conv_grouped"] = _monotone(grouped)
        self.data["depthwise_nhwc"] = nhwc
        # a channels-last 1x1 convolution is one (pixels x C) by (C x O) product, NCHW's (O x C)
        # by (C x pixels): its time over NCHW's by shape, both weights cold, samples alternated
        # (on 7x7, 1024 -> 1024 measured 1.09x, the other MobileNet layers 0.96-0.99x)
        pointwise = []
        for c, size, o in self._pointwise_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (o, c, 1, 1))
            kernel, attrs = _call("nn.conv2d", [x, w])
            xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            wl = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
            lk, lattrs = _call("nn.conv2d", [xl, wl], data_layout="NHWC", kernel_layout="HWIO")
            first, last = self.cold_times([(kernel, [x, w], attrs), (lk, [xl, wl], lattrs)])
            pointwise.append([*conv_features(o, c, 1, 1, float(o * size * size)), last / first])
            self.step(f"1x1 conv2d {c}->{o} on {size}x{size}, NHWC over NCHW")
        self.data["pointwise_nhwc"] = pointwise
        # A transpose between NCHW and NHWC is a view here: whoever reads it next pays for the
        # permuting copy (the NHWC kernels' input, or a copy before a product). Its own curves, as
        # that copy, so a change of layout costs what it does (and is made where tensors are small).
        shapes = [(1, 32, 16, 16), (1, 128, 28, 28)]
        if not self.quick:
            shapes += [(1, 128, 56, 56), (1, 64, 112, 112)]
        for name, axes in (("transpose_nhwc", (0, 2, 3, 1)), ("transpose_nchw", (0, 3, 1, 2))):
            points = []
            for n, c, h, w in shapes:
                x = _rand(self.rng, (n, c, h, w) if name == "transpose_nhwc" else (n, h, w, c))
                tk, tattrs = _call("transpose", [x], axes=axes)
                copied = lambda a, t, k=tk: np.ascontiguousarray(k(a, t))  # noqa: E731
                points.append([float(x.size), self.kernel_time(copied, [x], tattrs)])
            self.data["curves"][name] = _monotone(points)

    def conv_transpose(self) -> None:
        """conv2d_transpose over its structural estimate (``CpuCost.conv_transpose_estimate``),
        with the weight laid out IOHW and IHWO (the kernel's channels-last path) on the same
        shapes, alternated, each weight read cold as a program reads it."""
        model = CpuCost(Profile(dict(self.data, key={})))
        for c, size, o, k, stride, pad in self._transpose_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (c, o, k, k))
            calls, estimates = [], []
            for layout, weight in (("IOHW", w), ("IHWO", np.ascontiguousarray(w.transpose(0, 2, 3, 1)))):
                kernel, attrs = _call("nn.conv2d_transpose", [x, weight], strides=(stride, stride),
                                      padding=(pad, pad), kernel_layout=layout)
                out = kernel([x, weight], attrs)
                types = [TensorType(x.shape, "float32"), TensorType(weight.shape, "float32")]
                out_type = TensorType(out.shape, "float32")
                estimates.append(model.conv_transpose_estimate(attrs, types, out_type))
                calls.append((kernel, [x, weight], attrs))
            # more samples than elsewhere: a generator's first layer reads a 32 MB weight from
            # memory, and with five samples its two layouts' ratio moved 0.75-0.93 between
            # calibrations, and DCGAN's predicted speedup 1.09-1.21x (measured 1.05-1.11x)
            times = self.cold_times(calls, repeats=max(self.repeats, 15))
            for (est, features, path), t in zip(estimates, times, strict=True):
                self.data[TRANSPOSE_ROWS[path]].append([*features, t / est])
            self.step(f"conv2d_transpose {c}->{o} on {size}x{size} (IOHW, IHWO)")

    def _dense_fused_shapes(self) -> list:
        # tiny shapes too: there the fused kernel's fixed cost (its steps in Python) shows
        return [(1, 64, 64), (16, 256, 256), (128, 512, 128)] if self.quick else \
            [(1, 64, 64), (1, 256, 256), (8, 128, 128), (1, 1024, 1024), (16, 256, 256), (128, 512, 128),
             (128, 768, 768), (128, 3072, 768), (512, 1024, 256), (64, 64, 64), (1, 4096, 4096),
             # one row into four gates (a recurrent cell's products): the (K, N) weight's gain is
             # larger there than on the square shapes (232 against 316 us at 512 -> 2048)
             (1, 2048, 512), (1, 1024, 256)]

    def fused(self) -> None:
        """Fused dense ops over the dense kernel on the same inputs, per shape; the other fused
        ops over their parts' prediction, at a few sizes."""
        model = CpuCost(Profile(dict(self.data, key={})))
        r = self.rng
        anchors = self._fused_anchors()
        dense_ops = [n for n, anchor in anchors.items() if anchor == "nn.dense"]
        matmul_ops = [n for n, anchor in anchors.items() if anchor == "nn.matmul"]
        rows = {name: [] for name in dense_ops + matmul_ops}
        inputs: dict = {}  # per shape: (x, w, w as (K, N), bias), made once for every pass

        def ratio(name, m, n, k):
            # the model prices nn.matmul by the dense GEMM grid: its fused ops are measured
            # against the dense kernel, so the ratio carries what the (K, N) layout saves; each
            # fused op is timed alternated with the dense kernel, so load moves both alike
            if (m, n, k) not in inputs:
                w = _rand(r, (n, k))
                inputs[m, n, k] = (_rand(r, (m, k)), w, np.ascontiguousarray(w.T), _rand(r, (n,)))
            x, w, w_kn, bias = inputs[m, n, k]
            weight = w_kn if name in matmul_ops else w
            arrays = [x, weight, bias] if "bias" in name else [x, weight]
            fk, fattrs = _call(name, arrays)
            dk, dattrs = _call("nn.dense", [x, w])
            # read from memory, not a large cache: at 128x768x768-3072 the (K, N) layout ran
            # 1.09-1.15x the (N, K) one so, where 48 MB of copies stayed in a 480 MB cache and
            # priced the two alike (BERT-base's products were extracted as matmuls and measured
            # 1.13-1.18x their prediction in the program, the dense ones 1.05-1.10x)
            t, fused_t = self.cold_times([(dk, [x, w], dattrs), (fk, arrays, fattrs)],
                                         repeats=self.ratio_repeats, deep=True)
            return [fused_t / t]

        for m, n, k in self._dense_fused_shapes():
            for name in dense_ops + matmul_ops:
                self.ratios(functools.partial(ratio, name, m, n, k), [rows[name]], (m, n, k))
            self.step(f"fused dense {m}x{n}x{k}")
        self.confirm("fused dense")
        self._pool = self._small_pool = None  # the deep reads are done
        for name, measured in rows.items():
            self.data["fused"].setdefault(name, []).extend(measured)

        makers = self._fused_makers()
        for name in self._fused_other_ops():
            make, attrs = makers[name]
            op = name.removesuffix(CHANNEL)  # the per-channel form's rows are kept apart
            for n in self.fused_sizes:  # small too: there the fixed cost shows
                arrays = make(n)
                kernel, canon = _call(op, arrays, **attrs)
                out = kernel(arrays, canon)
                t = self.kernel_time(kernel, arrays, canon)
                types = [TensorType(a.shape, "float32") for a in arrays]
                est, features = model.fused_base(op, canon, types, TensorType(out.shape, "float32"))
                self.data["fused"].setdefault(name, []).append([*features, t / est])
            self.step(name)


    def in_program(self) -> None:
        """Kernels inside a program run slower than the same kernel looped on one set of inputs:
        inputs come from memory rather than cache, outputs land in fresh pages. A synthetic
        program of each family (two residual stages, a fire module, a transformer-like block) runs
        through the executor with every instruction timed in place (the plan's own order and frees), then
        each instruction is looped on the inputs it had; one plus the extra time in the program
        over the part of the looped time a program slows (``CpuCost.slowed``: above the fixed
        cost, and but for products and convolutions at most the data's traffic), per op kind
        ("kind:conv", ...) and per op the programs run, is the profile's in-program factor for
        that kind or op (``CpuCost.factor`` prefers the op's own)."""
        # a round's factor for an op with one instance in the programs moved by up to 1.0 from one
        # round to the next (a max pool's, a batch norm's, 1.6-3.0 in eight rounds on a quiet
        # machine): the median of many rounds, most of them measured between the other parts
        # (``_spread_rounds``), so that a short spell of load on the machine sways few of them
        # (three calibrations of five rounds in a row gave a batch norm 2.35, 2.43 and 2.73, a
        # multiply 1.78, 1.71 and 2.47)
        rounds = list(self._rounds)
        at_end = 1 if self.quick else max(IN_PROGRAM_ROUNDS - len(rounds), 1)
        model, programs = self._round_model(), self._synthetic_programs_once()
        rounds += [self._in_program_round(programs, model) for _ in range(at_end)]
        self.data["in_program"] = {k: statistics.median(r[k] for r in rounds if k in r)
                                   for k in sorted({k for r in rounds for k in r})}
        self.data["in_program_rounds"] = len(rounds)
        if self._longest_conv > 0.0:  # how far the convolutions' factor was measured (CpuCost.slowed)
            self.data["in_program_longest"] = {"kind:conv": self._longest_conv}
        self.step("in-program factors")

    def _round_model(self) -> CpuCost:
        # the curves measured so far (without an add's curve, a kernel's whole time can slow)
        return CpuCost(Profile({"dispatch": 0.0, "curves": {}, "gemm": [], "bmm": [], "conv": [],
                                **self.data, "key": {}}))

    def _synthetic_programs_once(self) -> list:
        if self._programs is None:
            self._programs = self._synthetic_programs()
        return self._programs

    def _spread_rounds(self) -> None:
        """In-program rounds between two parts of a full calibration, once the curves the rounds
        read (an add's) are measured (see ``in_program``)."""
        if self.quick or not self.data["curves"].get("add"):
            return
        model, programs = self._round_model(), self._synthetic_programs_once()
        self._rounds += [self._in_program_round(programs, model) for _ in range(ROUNDS_BETWEEN_PARTS)]

    def _in_program_round(self, programs: list, model: CpuCost) -> dict:
        """One measurement of the in-program factors (see ``in_program``) on ``programs``."""
        from ..eval.executor import compile_function
        from ..eval.kernels import value_type
        from ..ty import infer_type
        from .cpu_cost import op_kind

        measured: dict[str, float] = {}  # time in the program over the looped time
        alone: dict[str, float] = {}  # the looped time a program can slow (see CpuCost.in_program)
        total: dict[str, float] = {}  # looped time with the fixed cost: what decides a ratio means something
        for func, values in programs:
            typed = infer_type(IRModule.from_expr(func))
            func = typed["main"]
            plan = compile_function(func)
            # the nodes the plan makes an instruction of, in its order
            nodes = [n for n in iter_post_order(func.body) if isinstance(n, (Call, Tuple)) or
                     (isinstance(n, TupleGetItem) and not isinstance(n.tuple_value, Tuple))]
            if plan is None or len(plan.instrs) != len(nodes):
                continue
            # per op, one instance can be all there is: more runs
            times = time_in_place(plan, values, 2 + self.repeats * 4, self.timer)
            seen = kept_values(plan, values)  # then one run, untimed, keeps what the loops below need
            for call, samples, (run, args, attrs, out) in zip(nodes, times, seen, strict=True):
                if not isinstance(call, Call):
                    continue
                arg_types = [value_type(v) for v in args]
                traffic = traffic_elements(arg_types, value_type(out))
                # the same kernel looped on the same inputs, right after (so under the same load);
                # a convolution's weight read cold, as its profile rows are measured (the factor
                # is what a program adds to that)
                if op_kind(call.op.name) == "conv" and len(args) > 1:
                    looped = self.cold_time(run, list(args), attrs)
                else:
                    looped = self.kernel_time(run, args, attrs)
                # per kind and per op, summed over its instructions, so the larger kernels weigh
                # most: a microsecond kernel's ratio says as much about the clock as about the
                # kernel. Per op too, as a kind's sum is its largest kernels' ratio: erf's 1.0 hid
                # that an add or bias_add after a product ran 1.5-2x its looped time (it reads the
                # product's fresh output and writes to fresh memory)
                # above the op's fixed cost per call, as CpuCost.in_program applies the factor
                floor = min(self.data["curves"].get(call.op.name, [[0.0, 0.0]])[0][1], looped)
                # the time a program can slow: above the fixed cost, at most the data's traffic
                # (CpuCost.in_program applies the factor to the same part)
                # a convolution whose data outgrows the cache slows less (CpuCost.warm): weighed as applied
                kind = op_kind(call.op.name)
                raw = model.slowed(call.op.name, looped - floor, traffic)
                slowed = raw * model.warm(call.op.name, attrs or {}, arg_types, value_type(out))
                if 0.0 < (slowed if kind == "conv" else raw) < _MEMORY_SHARE * (looped - floor):
                    # mostly arithmetic (erf over a transformer's expansion: 3.3 ms looped, 26 us
                    # of it moving data): its time in the program less its looped time is mostly
                    # the noise of that arithmetic, which over the small part a program slows
                    # gave erf factors from the floor 0.5 to 2.6 between calibrations. Left out,
                    # the op takes its kind's factor (on the same small part). (A convolution whose
                    # data outgrows the cache, with no part a program slows, is counted as before.)
                    continue
                if kind == "conv":
                    self._longest_conv = max(self._longest_conv, looped - floor)
                keys = [(f"kind:{kind}", slowed), (call.op.name, slowed)]
                if kind not in ("gemm", "conv"):
                    # and by the size of its data, in full (CpuCost.program_factor)
                    level = size_bin(data_bytes(arg_types, value_type(out)))
                    keys += [(f"{name}{SIZE_BIN}{level}", raw) for name in (f"kind:{kind}", call.op.name)]
                for key, part in keys:
                    measured[key] = measured.get(key, 0.0) + statistics.median(samples[2:]) - looped
                    alone[key] = alone.get(key, 0.0) + part
                    total[key] = total.get(key, 0.0) + looped
        # a kind (or op) whose kernels took microseconds in all says more about the clock than them
        return {k: min(max(1.0 + measured[k] / alone[k], 0.5), 3.0) if alone[k] > 0 else 1.0
                for k in measured if total[k] > _MIN_LOOPED_SECONDS}

    def _synthetic_programs(self) -> list:
        """Two residual stages, a fire module, a transformer-like block and elementwise chains at
        several sizes, built here (no zoo model), at the sizes of the quick or the full calibration."""
        from ..ir.expr import Function, const, var
        from ..ops.builders import make_call as op

        r = self.rng
        c, size = (16, 16) if self.quick else (64, 56)

        def weight(*shape):
            return const(_rand(r, shape, -0.1, 0.1))

        # two residual stages (ResNet's): convolutions, direct and Winograd, at two sizes, each
        # reading the fresh output of a batch norm, relu and residual add, as in the models. A
        # single block (one direct and one Winograd convolution, a 1x1 after a max pool) gave
        # factors of 1.13 and 1.23-1.28; ResNet-34's layers ran 1.01-1.07x and 1.08-1.13x their
        # looped time in the program, and these stages measure 1.04-1.06 and 1.09-1.13
        from ..ops.winograd import winograd_weight
        from .cpu_cost import WINOGRAD

        def bn_relu(data, channels):
            out = op("nn.batch_norm", data, *(const(_rand(r, (channels,))) for _ in range(4)))
            return op("nn.relu", _first(out))

        # Winograd as the models get it on these images, F(4x4, 3x3), whose 36 products per layer
        # slow in a program differently from F(2x2, 3x3)'s 16: with two BLAS threads, in two
        # spells of seven rounds, F(4x4) ran 1.17x and 0.97-1.03x its looped time in these stages,
        # F(2x2) 0.93x (the direct kernel 0.97-1.02x); with one thread both 1.05x. Measured on
        # F(2x2) alone, the factor priced ResNet-50's F(4x4) layers at two threads 0.84-0.87 of the
        # direct kernel; its e-graph program was predicted 1.20x and measured 1.15-1.18x, and
        # 1.14-1.17x with no Winograd layer at all
        def winograd(data, channels):
            u = const(winograd_weight(_rand(r, (channels, channels, 3, 3), -0.1, 0.1), WINOGRAD_TILE))
            return op(WINOGRAD, data, u, tile_size=WINOGRAD_TILE, padding=(1, 1))

        def residual(data, channels, conv):
            return op("nn.relu", op("add", bn_relu(conv, channels), data))

        x = var("x", TensorType((1, c, 2 * size, 2 * size), "float32"))
        y = op("nn.max_pool2d", op("nn.relu", x), pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
        y = bn_relu(op("nn.conv2d", y, weight(c, c, 3, 3), padding=(1, 1)), c)
        y = residual(y, c, op("nn.conv2d", y, weight(c, c, 3, 3), padding=(1, 1)))
        y = residual(y, c, winograd(y, c))
        y = bn_relu(op("nn.conv2d", y, weight(2 * c, c, 3, 3), padding=(1, 1), strides=(2, 2)), 2 * c)
        y = residual(y, 2 * c, winograd(y, 2 * c))
        y = residual(y, 2 * c, op("nn.conv2d", y, weight(2 * c, 2 * c, 3, 3), padding=(1, 1)))
        y = op("nn.conv2d", y, weight(4 * c, 2 * c, 1, 1))
        y = op("nn.bias_add", y, const(_rand(r, (4 * c,))), axis=1)
        y = op("nn.global_avg_pool2d", y)
        y = op("nn.dense", op("nn.batch_flatten", y), weight(100, 4 * c))
        conv = (Function([x], op("nn.softmax", y)), [_rand(r, (1, c, 2 * size, 2 * size))])
        # a fire module (SqueezeNet's; Inception's and DenseNet's blocks are alike): narrow 1x1
        # convolutions whose bias and relu are as long as the product, and a concatenate, which
        # copies its inputs from memory
        f = var("f", TensorType((1, c, size, size), "float32"))

        def conv_bias_relu(data, cin, cout, k):
            out = op("nn.conv2d", data, weight(cout, cin, k, k), padding=(k // 2, k // 2))
            return op("nn.relu", op("nn.bias_add", out, const(_rand(r, (cout,))), axis=1))

        squeeze = conv_bias_relu(f, c, c // 4, 1)
        expand = [conv_bias_relu(squeeze, c // 4, c, k) for k in (1, 3)]
        g = op("concatenate", Tuple(expand), axis=1)
        g = op("nn.max_pool2d", g, pool_size=(3, 3), strides=(2, 2))
        fire = (Function([f], op("nn.global_avg_pool2d", g)), [_rand(r, (1, c, size, size))])
        # quick: products of a few microseconds each, so that their kind's factor is measured on
        # a fast machine too (at 16x64 they took under the 20 us a kind needs in all)
        tokens, hidden = (32, 128) if self.quick else (128, 768)
        h = var("h", TensorType((tokens, hidden), "float32"))
        q = op("nn.bias_add", op("nn.dense", h, weight(hidden, hidden)), const(_rand(r, (hidden,))))
        s = op("nn.softmax", op("multiply", op("nn.dense", q, h), const(np.asarray(0.125, F32))))
        a = op("nn.dense", s, op("transpose", h))
        a = op("nn.layer_norm", op("add", a, h), const(_rand(r, (hidden,))), const(_rand(r, (hidden,))))
        f = op("nn.dense", a, weight(hidden * 2, hidden))
        f = op("multiply", f, op("erf", op("multiply", f, const(np.asarray(0.7, F32)))))
        f = op("nn.dense", f, weight(hidden, hidden * 2))
        attention = (Function([h], op("tanh", op("add", f, a))), [_rand(r, (tokens, hidden))])
        # chains of elementwise ops, a batch norm and a pool on 16K values up to 1M (in a full
        # calibration), each reading the fresh output of the one before: their factors by the size
        # of the data (CpuCost.program_factor). One factor per op, faded from twice a core's cache
        # to twelve times it (fitted on a 512 KB cache), priced the batch norms, relus and adds of
        # MobileNet and ResNet on a 2 MB one at 0.4-0.6x their time in the program from 2 MB of
        # data up, and 1.3-2.5x below 400 KB
        ladder = []
        channels = 16 if self.quick else 64
        for side in ((16, 45) if self.quick else (16, 32, 45, 64, 90, 128)):
            e = var("e", TensorType((1, channels, side, side), "float32"))
            y = op("add", bn_relu(e, channels), e)
            y = op("multiply", y, const(_rand(r, (channels, 1, 1))))
            y = op("nn.relu", op("nn.bias_add", y, const(_rand(r, (channels,))), axis=1))
            y = op("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2))
            ladder.append((Function([e], y), [_rand(r, (1, channels, side, side))]))
        return [conv, fire, attention, *ladder]


def _first(tuple_value):
    return TupleGetItem(tuple_value, 0)


def _monotone(points: list) -> list:
    """A measured curve sorted by work size, times made non-decreasing (noise on a loaded machine
    must not make a larger input predict less time)."""
    points = _merge(points)
    out, best = [], 0.0
    for n, t in points:
        best = max(best, t)
        out.append([n, best])
    return out


def curves_of(points: Sequence[tuple[str, float, object]], times: Sequence[float]) -> dict[str, list]:
    """The curves (``_monotone``) of ``curve_points``' points timed at ``times``, by name."""
    by_curve: dict[str, list] = {}
    for (name, work, _), t in zip(points, times, strict=True):
        by_curve.setdefault(name, []).append([work, t])
    return {name: _monotone(measured) for name, measured in by_curve.items()}


def _capped_by_larger(grid: list) -> list:
    """A product grid ``[(*dims, flops, seconds), ...]`` with each time capped by the times of the
    shapes at least as large in every dimension: a larger product never takes less time, and a
    sample another job held up must not set a shape's price (products are priced between grid
    shapes, where one such sample once priced a 64x32x256 product at 16 ms)."""
    out = []
    for row in grid:
        t = min([row[-1]] + [other[-1] for other in grid
                             if all(o >= d for o, d in zip(other[:-2], row[:-2], strict=True))])
        out.append([*row[:-1], t])
    return out


def _merge(points: list) -> list:
    """Points sorted by x, with equal x merged (geometric mean)."""
    by_x: dict[float, list] = {}
    for x, y in points:
        by_x.setdefault(float(x), []).append(max(float(y), 1e-9))
    return [[x, math.exp(sum(map(math.log, ys)) / len(ys))] for x, ys in sorted(by_x.items())]


# In-program rounds of a full calibration: two after each part from the curves on (every part but
# the first and the last: 14 rounds), and the rest, at least one, at the end (about 1.6 s a round).
IN_PROGRAM_ROUNDS = 15
ROUNDS_BETWEEN_PARTS = 2
NUMEXPR_GROUPS = (1, 4)  # ops per numexpr program the calibration times, at each of its sizes
WINOGRAD_TILE = 4  # the Winograd kernel the synthetic programs' stages run (see _synthetic_programs)

# The probe's slowest pass over its fastest, during one calibration, above which the machine's speed
# is taken to have changed while it was measured (its parts would disagree with each other).
# Quiet, it stayed within 1.13x (one BLAS thread, CPU time) and 1.17x (two, wall clock, quick);
# once every GEMM of the grid was measured 1.8x slow (the machine slowed for part of the
# calibration) while the probe's median, then taken only at the start, middle and end, moved 1.2x.
STEADY = 1.3


def probe_spread(data: dict) -> float:
    """The probe's slowest pass over its fastest during the calibration that made ``data``."""
    probes = data.get("probes") or [data.get("probe", 1.0)]
    return max(probes) / min(probes)


def calibrate(quick: bool = False, path: str | None = None, progress="auto", attempts: int = 2) -> Profile:
    """Measure this machine and save its ``cpu`` profile (at ``path`` or ``profile_path()``).

    The full calibration takes 90-110 seconds; ``quick`` takes a few seconds and is coarser. A
    probe timed after each part of it says whether the machine's speed changed meanwhile (other
    work on its cores): then it is measured again, up to ``attempts`` times in all, and the
    steadiest calibration is kept; if none was steady, a ``CalibrationWarning`` says so.
    """
    from ..progress import resolve
    from ..validate import positive

    positive("attempts", attempts, integer=True, allow_none=False)
    pin_allocator()  # looped kernels under the allocator programs run under (see eval.memory)
    best = None  # (probe spread, data) of the steadiest calibration so far
    for attempt in range(1, attempts + 1):
        run = _Calibration(quick, progress).run()
        spread = probe_spread(run)
        if best is None or spread < best[0]:
            best = (spread, run)
        if spread <= STEADY:
            break
        if attempt < attempts and resolve(progress) != "off":
            print(f"calibrate: the machine's speed changed {spread:.2f}x while it was "
                  "measured (other work on its cores?); measuring again", file=sys.stderr)
    spread, data = best
    if spread > STEADY:
        made = f"each of {attempts} calibrations" if attempts > 1 else "the calibration"
        warnings.warn(f"the machine's speed changed {spread:.2f}x during {made} (other work on its "
                      "cores?): the profile is saved, but its times may be off by as much; calibrate "
                      "again when the machine is quiet",
                      CalibrationWarning, stacklevel=2)
    data["key"] = machine_key()
    data["quick"] = quick
    data["created"] = time.strftime("%Y-%m-%d %H:%M:%S")
    profile = Profile(data, profile_path(path))
    profile.save()
    reset_default()
    return profile
