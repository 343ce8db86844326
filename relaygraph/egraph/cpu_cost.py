"""The ``cpu`` cost model: seconds of this machine's numpy executor per node, from a calibrated profile.

``relaygraph calibrate`` (``calibrate()`` in ``relaygraph.egraph.calibrate``) measures the machine
once and stores a profile: the executor's dispatch overhead per instruction, a time curve per
operator over its work size (elementwise, reductions, layout, pooling), GEMM and batch-matmul
times on a grid of shapes, the convolution kernels measured per shape against a structural
estimate, the fused ops of the op table measured against their anchor (or parts), numexpr
groups, and per op kind how much slower a kernel runs inside a program than looped alone.
Predictions are table lookups and interpolation (nearest calibrated shapes), so costing a node
is cheap.

A profile is keyed by the machine (CPU model, cores), the numpy and BLAS build and the thread
counts. Loading one made elsewhere (or by another format of this module) raises ProfileError
naming each difference; a stale profile is never used silently. The profile lives in
``$RELAYGRAPH_PROFILE_DIR`` or else in the measured-cost cache directory (``cost.cache_dir()``), one
file per BLAS and numexpr thread count (``cpu-profile-blas1-numexpr1.json``), so profiles for one
and for two threads live side by side.
A missing profile is calibrated once (``$RELAYGRAPH_CALIBRATE=quick`` makes that the quick mode,
as the test suite does) unless calibration is turned off, when ProfileError says how to make one.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..ir.types import TensorType, TupleType, format_type
from .cost import DEFAULT_MACHINE, CostModelError, cache_dir

__all__ = ["ProfileError", "StaleProfileError", "Profile", "CpuCost", "machine_key", "profile_path",
           "profile_file", "clock_of", "timer",
           "conv_features", "dense_features", "nearest", "load_profile", "default_profile", "reset_default",
           "FORMAT", "op_kind", "tile_waste", "traffic_elements", "broadcasts", "BROADCAST", "LAST_AXIS",
           "CHANNEL", "PER_CHANNEL_FUSED", "per_channel",
           "SCALAR", "SIZE_BIN", "with_scalar", "size_factor", "size_bin", "data_bytes",
           "grid_time", "TRANSPOSE_ROWS", "layout_change"]

# the layout of the profile file and the meaning of its figures (4: per-op in-program factors,
# Winograd by shape; 5: fused depthwise ratios; 6: the 1x1 convolution's own fixed cost, in-program
# factors over the memory traffic, erf on GELU's inputs, Winograd ratios without the tile waste;
# 7: also fused.add_layer_norm's float32 kernel, fused matmul ops measured against the dense kernel,
# scale-shift fused ops on per-channel vectors, depthwise convolution channels-last; 8: 3x3
# convolutions and Winograd on images of 2-16 pixels; 9: the last-level cache's size, and convolutions'
# in-program factors weighed by how much of their data a looped run keeps in it; broadcasting binary
# ops and a bias on the last axis, and the per-program overhead of a program run after other work;
# products priced by interpolating the GEMM grid between its shapes, so the convolutions' ratios over
# their product estimate changed; erf on the spread of a transformer expansion layer's outputs;
# 10: fused dense and matmul ops timed alternated with the dense kernel they are measured against;
# 11: convolutions, their fused ops and Winograd's ratio timed with the weight read cold, and the
# in-program factors of convolutions over that cold time; 12: the in-program factors measured on
# two residual stages instead of one convolutional block; 13: a 128-channel 3x3 convolution on a
# 112-pixel image among the calibrated shapes, where Winograd's ratio was interpolated at 0.96
# and measures 0.80-0.85; 14: Winograd's products by output channel when there are fewer tiles
# than output channels, which took its ratio at 256 channels on 14x14 from 0.90-1.04 to 0.71-0.79;
# 15: VGG's 3x3 layers on 56-, 28- and 14-pixel images among the calibrated shapes, where the
# nearest rows priced Winograd 8-14% over its measured time, and a one-row product with a 256 MB
# weight in the GEMM grid, where VGG's 25088-deep dense ran 1.2x the rate of the 4096-deep one;
# and in-program factors measured only on kernels a program can slow by a fair share of their
# time, so that an arithmetic-bound one like erf no longer sets a factor from its noise; 16:
# in-program factors timed with the plan freeing values as a program does, where the timing had
# kept every value alive and so priced elementwise ops and pools 1.1-1.6x their time in programs;
# 17: erf, sigmoid and leaky_relu timed on distinct inputs in turn, as a program runs them, where
# looped on one input the branch predictor learned its values and they ran 2.2-3.2x faster; and
# the pool kernels, separable now: max pools 1.4-1.9x faster, average pools 2.7-11x; 18: ResNet's
# 128-channel 3x3 layer on 28x28 among the calibrated shapes, where Winograd's ratio was
# interpolated at 0.75-0.76 and measures 0.68-0.72, and DenseNet's 128 -> 32 layers on 14x14 and
# 7x7, where the direct kernel was priced 36% over and 25% under; and conv2d_transpose with one
# group as one matrix product and an add per tap, 3.6-4.4x faster on DCGAN's layers than the
# spread input convolved); 19: Winograd on large images in bands of tile rows, 1.2-1.5x faster
# at 64 and 128 channels on 112x112 and 224x224 (its measured ratio there 0.61-0.78 of the direct
# kernel, where it was 0.83-0.95); 20: nn.batch_norm adds its shift in place (no temporary); 21:
# kernels timed with malloc's thresholds pinned (relaygraph.eval.memory), where looped kernels
# with temporaries of a few MB could page-fault them afresh on every call and time 1.2-4x slower
# than in a program (ResNet-50's 64-channel Winograd layer 8.7 against 2.3 ms); 22: Winograd
# F(4x4, 3x3) (tile_size 4) timed over the direct kernel on the same shapes as F(2x2, 3x3), and
# SqueezeNet's expand layers on a 96x96 input among the calibrated shapes; 23: conv2d_transpose
# with an IHWO weight (channels-last adds per tap) timed on its own rows; 24: SqueezeNet-1.0's
# stem, expand layers and classifier at 224x224 among the calibrated convolution shapes; 25: a
# channels-last 1x1 convolution (pixels x C by C x O) timed over the NCHW one (O x C by C x
# pixels) by shape, where it was priced the same and measured 1.09x on MobileNet's 1024 -> 1024
# layer on 7x7; 26: channels-last depthwise convolutions of 96 channels or more sum each window in
# one pass (1.1-2.2x faster than tap by tap), so their NHWC ratios change; 27: the fused ops' and
# Winograd's ratios over their anchor measured in two passes apart in time, a third deciding where
# they disagree (one pass had priced a fused matmul 1.39x the dense kernel where it runs 0.96x);
# 28: relu (alone and in the fused kernels' epilogues) on rows of 8192 values, where rows of 4096
# could run 8-10x slower; 29: the second-level cache's size, which scales the in-program slowdown of
# kernels other than products and convolutions (``CpuCost.warm``); 30: a dense or matmul with
# its bias and/or relu adds and clamps in place with one ufunc call each, where the general fused
# kernel's checks made it slower than the three ops apart on small products (7.1 against 6.5 us
# at (1, 64); 5.3 now), so the fused ratios calibrated before priced those products too high;
# 31: the epilogue ops and pools measured at 8M values too (``calibrate.LARGE_OPS``), where the
# curves ended at 2M and priced VGG's largest activations as if they stayed in the cache; 32: a
# convolution whose windows tile the image (stride = kernel, no padding) gathers its columns in
# one transposing copy (0.54-0.96 of the time), and a patch embedding's shape is calibrated; 33:
# a depthwise convolution's relu epilogue on rows of zeros (numpy's scalar maximum took 0.3 of its
# 1.9 ms at 32x112x112), sigmoid as scipy's logistic ufunc, and an add or multiply then unary
# steps fused without the general kernel's checks (at (1, 512) the fused add and sigmoid ran
# slower than the two kernels apart): their curves and fused ratios change; 34: the fused dense
# and matmul ops' ratios over the dense kernel timed with their weights read over the whole
# last-level cache, where a 480 MB one kept the copies warm and priced the (K, N) layout as the
# (N, K) one (read from memory, 1.09-1.15x it at 128x768x768-3072); 35: the in-program factors of
# kernels other than products and convolutions by the size of their data, measured on elementwise
# chains of 16K to 1M values (``CpuCost.program_factor``), where one factor per op faded by a
# core's cache size over-priced large ones; the curves' points every doubling from 32K values to 512K
# (``calibrate.FULL_SIZES``); and a tensor times a scalar priced as one array read (``SCALAR``);
# 36: the fused scale-shift ops' ratios on NCHW activations with a network's channels at each size
# and at 32K values too, where rows of 512 priced them at 0.55-0.9x their looped time on 7x7-28x28;
# 37: products of at most 16 rows (``calibrate.DEEP_ROWS``) read their weights over the whole
# last-level cache in the GEMM grid, where 48 MB of copies stayed in a 480 MB one and priced NasRNN's
# one-row products at 0.6x their time in its program; 38: VGG's 512-channel 3x3 layer on 8x8 among
# the calibrated convolutions, where the 7-pixel row priced Winograd there 10-14% under its time;
# 39: the in-program factor of Winograd measured on F(4x4, 3x3) layers, the kernel the models get
# (the synthetic stages ran F(2x2, 3x3), whose products slow less in a program with two BLAS threads);
# 40: fused add_relu and multiply_add on per-channel operands have ratios of their own (``CHANNEL``),
# where the ratio on equal shapes priced a scale-shift on (256, 14, 14) at half its time; 41: the
# dispatch taken over the kernels as the curves price them (``calibrate._settle_dispatch``), where
# over the kernels looped alone the model priced the dispatch plan itself 1.19x its measured time;
# 42: that share taken against the kernels looped right after the curves, not in the dispatch's
# own rounds (the machine's drift between the two parts moved the dispatch by 15%); 43: 3x3
# layers on 224x224 and 147x147 among the calibrated convolutions, as Winograd is no longer kept
# to images of 112x112 at most (VGG's 64-channel layer on 224x224: direct kernel priced 53 ms
# from the smaller rows, measured 76-81); 44: DenseNet's 128 -> 32 on 56x56 and Inception-v3's
# 80 -> 192 on 73x73 among them (Winograd there priced 0.69 and 0.74 of the direct kernel from
# the rows around them, measured 0.56 and 0.94); 45: a convolution's in-program slowdown held at
# the longest convolution's the calibration measured it on (``Profile.in_program_longest``), where
# the factor over a whole 7-69 ms VGG layer priced it 4-8% over its time in the program; 46: a
# weight under NumPy's hugepage threshold read cold in small pages, as a program holds it
# (``calibrate.small_pages_below``), and one-row products priced at the rate of their weight's
# placement (``CpuCost.row_rate``); 47: one-row products at the depths between the grid's
# (``Profile.one_row``), priced by their depth and by the share of a large weight in huge pages
FORMAT = 47
# A one-row product on a weight of this many bytes or more is priced by its weight's bytes
# (``CpuCost.gemm_time``): over the grid's one-row rows from 256 KB up, 65-72 us a MB here
ONE_ROW_BYTES = 1 << 18
PROFILE_STEM = "cpu-profile"
# conv2d_transpose's kernel path (``CpuCost.conv_transpose_estimate``) -> the profile's rows for it
# (a key of the profile's data and an attribute of Profile alike)
TRANSPOSE_ROWS = {"gemm": "conv_transpose", "spread": "conv_transpose", "last": "conv_transpose_last"}


class ProfileError(CostModelError):
    """A CPU profile that is missing, unreadable, stale or made on another machine or build."""


class StaleProfileError(ProfileError):
    """A CPU profile of this machine in a format another version of this module wrote."""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _blas() -> str:
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        text = f"{blas.get('name', '?')} {blas.get('version', '?')}"
        extra = blas.get("openblas configuration") or ""
        return f"{text} {extra}".strip()
    except (TypeError, AttributeError, ValueError):  # an older numpy without mode="dicts"
        return "unknown"


def _threads() -> dict[str, Any]:
    """BLAS and numexpr threads: threadpoolctl's figures when it is installed, else the usual
    environment variables (BLAS starts one thread per core without them)."""
    blas = None
    try:
        from threadpoolctl import threadpool_info

        blas = sum(p.get("num_threads", 0) for p in threadpool_info() if p.get("user_api") == "blas") or None
    except ImportError:
        pass
    if blas is None:
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            if os.environ.get(var, "").strip().isdigit():
                blas = int(os.environ[var])
                break
    try:
        import numexpr

        ne = numexpr.get_num_threads() if hasattr(numexpr, "get_num_threads") else numexpr.nthreads
    except ImportError:
        ne = 0
    return {"blas threads": blas or os.cpu_count() or 1, "numexpr threads": int(ne)}


def machine_key() -> dict[str, Any]:
    """What a profile is valid for: this machine, build and thread setting."""
    import numpy as np

    return {"format": FORMAT, "cpu": _cpu_model(), "cores": os.cpu_count() or 1,
            "numpy": np.__version__, "blas": _blas(), **_threads()}


def clock_of(key: Mapping) -> str:
    """The clock a profile's figures (and the programs they are checked against) are timed by:
    ``cpu``, the process's CPU time, when BLAS and numexpr run on one thread, since it leaves out
    the time other work on a shared machine holds the core (and so does not change with the
    load); else ``wall``, as threads that run at once make CPU time exceed the time taken."""
    return "cpu" if key.get("blas threads") == 1 and int(key.get("numexpr threads") or 0) <= 1 else "wall"


def timer(clock: str):
    """The function reading ``clock`` (see ``clock_of``) in seconds."""
    import time

    return time.process_time if clock == "cpu" else time.perf_counter


def profile_file() -> str:
    """The profile's file name for this process's thread counts: a profile is valid for one."""
    threads = _threads()
    return f"{PROFILE_STEM}-blas{threads['blas threads']}-numexpr{threads['numexpr threads']}.json"


def profile_path(path: str | None = None) -> str:
    """Where the profile is: ``path``, else ``profile_file()`` in ``$RELAYGRAPH_PROFILE_DIR`` or
    the cache directory."""
    if path:
        return str(path)
    base = os.environ.get("RELAYGRAPH_PROFILE_DIR") or cache_dir()
    return os.path.join(base, profile_file())


def cache_bytes(level: int | None = None) -> int:
    """Bytes of one of this machine's caches as the OS reports it (sysfs, else sysconf): the
    largest (last-level) one, or the one of ``level`` (2: a core's own second level); 0 when it
    says nothing."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        entries = []
    for entry in entries:
        try:
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip().upper()
            if level is not None:
                with open(os.path.join(base, entry, "level")) as f:
                    if f.read().strip() != str(level):
                        continue
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in ("K", "M", "G") else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    names = ("SC_LEVEL4_CACHE_SIZE", "SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE")
    for name in names if level is None else (f"SC_LEVEL{level}_CACHE_SIZE",):
        try:
            sizes.append(int(os.sysconf(name)))
        except (ValueError, OSError, AttributeError):
            pass
    return max([s for s in sizes if s > 0], default=0)


def _differences(made: Mapping, here: Mapping) -> list[str]:
    out = []
    for name in sorted(set(made) | set(here), key=lambda k: (k != "format", k)):
        if made.get(name) != here.get(name):
            out.append(f"{name} {made.get(name)!r} (this machine: {here.get(name)!r})")
    return out


# -- interpolation --------------------------------------------------------------------------
def curve_at(points: Sequence[Sequence[float]], n: float) -> float:
    """Seconds at work size ``n`` on a measured curve ``[(n, seconds), ...]`` (sorted by n):
    piecewise linear in log-log between points, flat below the first (the call's floor) and
    proportional to ``n`` above the last."""
    if n <= points[0][0]:
        return points[0][1]
    if n >= points[-1][0]:
        return points[-1][1] * n / points[-1][0]
    i = bisect.bisect_left([p[0] for p in points], n)
    (n0, t0), (n1, t1) = points[i - 1], points[i]
    f = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
    return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))


def _k_nearest(scored: list, k: int) -> list:
    """The ``k`` nearest of ``[(distance, value), ...]`` (sorted), and any as near as the k-th:
    between grid points several rows are equally near, and which of them count must not depend
    on their values (sorting puts the smaller first, which biased rates low)."""
    if len(scored) <= k:
        return scored
    edge = scored[k - 1][0] + 1e-9
    return [s for s in scored if s[0] <= edge]


def nearest(rows: Sequence[Sequence[float]], features: Sequence[float], k: int = 3) -> float:
    """The value at ``features`` from measured rows ``[(*features, value), ...]``: the
    inverse-distance weighted geometric mean (distances in log2 space) of the ``k`` nearest rows'
    values (and those as near as the k-th); a row at distance zero is taken as it is."""
    want = [math.log2(max(f, 1.0)) for f in features]
    scored = sorted((math.sqrt(sum((math.log2(max(a, 1.0)) - b) ** 2
                                   for a, b in zip(row[:-1], want, strict=True))), row[-1]) for row in rows)
    near = _k_nearest(scored, k)
    if near[0][0] < 1e-9:
        return near[0][1]
    weights = [1.0 / d ** 2 for d, _ in near]
    return math.exp(sum(w * math.log(max(v, 1e-12)) for w, (_, v) in zip(weights, near, strict=True))
                    / sum(weights))


def nearest_rate(grid: Sequence[Sequence[float]], features: Sequence[float], k: int = 3) -> float:
    """FLOP/s at a shape, from a grid ``[(*features, flops, seconds), ...]``: ``nearest`` over the
    grid shapes' rates (a mean of log rates: they differ by orders of magnitude between tiny and
    large shapes)."""
    return nearest([(*row[:-2], row[-2] / row[-1]) for row in grid], features, k)


def grid_time(grid: Sequence[Sequence[float]], features: Sequence[float]) -> float:
    """Seconds of a product at a shape, from a grid ``[(*features, flops, seconds), ...]`` measured
    on a product of values per feature (flops = 2 x the features' product): the log rate
    interpolated multilinearly in the log of each feature between the grid values bracketing it
    (over the cell's corners the grid has; it leaves out the largest shapes). A dimension below
    the grid's smallest value is priced as that value: a product that small costs its call, not
    a share of the smallest measured one's time (a 1-unit product priced at the 16-unit rate cost
    a sixteenth of it). ``nearest_rate`` when the grid has no corner of the cell.

    Between grid values the nearest rows alone misled: a 32-row product has only 16-row rows
    nearest, whose rate (the cold weight's read over 16 rows' work) priced a 32x128x128 dense
    at 1.4x its time (37 us against 27 measured; now 27); log rate linear in log size is exact
    both where the weight's read sets the time (rate in proportion to rows) and where the
    arithmetic does (rate flat)."""
    rates = {tuple(float(v) for v in row[:-2]): row[-2] / row[-1] for row in grid if row[-1] > 0}
    if not rates:
        raise CostModelError("the CPU profile has no products measured")
    axes = [sorted({key[i] for key in rates}) for i in range(len(features))]
    clamped = [max(float(f), values[0]) for f, values in zip(features, axes, strict=True)]
    spans = []
    for x, values in zip(clamped, axes, strict=True):
        if x >= values[-1]:
            spans.append([(values[-1], 1.0)])
            continue
        i = bisect.bisect_right(values, x)
        lo, hi = values[i - 1], values[i]
        w = (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
        spans.append([(lo, 1.0 - w), (hi, w)] if w > 0 else [(lo, 1.0)])
    total = acc = 0.0
    for corner in _corners(spans):
        key = tuple(v for v, _ in corner)
        weight = math.prod(w for _, w in corner)
        if key in rates and weight > 0:
            total += weight
            acc += weight * math.log(rates[key])
    flops = 2.0 * math.prod(clamped)
    rate = math.exp(acc / total) if total > 0 else nearest_rate(grid, clamped)
    return flops / rate


def _corners(spans: list) -> list:
    """Every choice of one entry per span (the corners of an interpolation cell)."""
    out: list = [()]
    for span in spans:
        out = [c + (s,) for c in out for s in span]
    return out


# -- what a node is ----------------------------------------------------------------------------
def _lookup(op: str):
    from ..ops import lookup

    return lookup(op)


def _members(op: str, attrs: Mapping) -> list[tuple]:
    members = attrs.get("fused_ops") if attrs else None
    if not members:
        raise CostModelError(f"fused op {op} must list its member calls in attrs['fused_ops']")
    return [tuple(m) for m in members]


def _numel(t) -> float:
    """Elements of a tensor (or of a tuple's fields); symbolic dimensions count as the cost
    models' ``Machine.symbolic_dim``, a '?' dimension is a CostModelError."""
    if isinstance(t, TupleType):
        return sum(_numel(f) for f in t.fields)
    if not isinstance(t, TensorType):
        return 0.0
    return _elements(t)


def size_factor(points: Sequence[Sequence[float]], nbytes: float) -> float:
    """The in-program factor at data of ``nbytes`` on ``points`` [(bytes, factor)]: linear in
    the log of the size between points, the end points' beyond them."""
    if nbytes <= points[0][0]:
        return points[0][1]
    if nbytes >= points[-1][0]:
        return points[-1][1]
    i = bisect.bisect_left([p[0] for p in points], nbytes)
    (s0, f0), (s1, f1) = points[i - 1], points[i]
    return f0 + (f1 - f0) * math.log(nbytes / s0) / math.log(s1 / s0)


def _log_share(size: float, full: float, none: float) -> float:
    """1 up to ``full`` bytes, 0 from ``none`` up, log-linear between (see ``CpuCost.warm``)."""
    if size <= full:
        return 1.0
    if size >= none:
        return 0.0
    return math.log(none / size) / math.log(none / full)


def traffic_elements(arg_types: Sequence, out_type) -> float:
    """Elements of a kernel's largest input or output: the data whose moving a program slows."""
    return max([_numel(out_type)] + [_numel(t) for t in arg_types])


def _elements(t: TensorType) -> float:
    from ..ir.types import Any as AnyDim

    count = 1.0
    for d in t.shape:
        if d is AnyDim:
            raise CostModelError(f"the size of {format_type(t)} is unknown: it has a '?' dimension")
        if not isinstance(d, int):
            free = getattr(d, "free_symbols", None)
            d = d.subs({x: DEFAULT_MACHINE.symbolic_dim for x in free}) if free else d
        count *= float(d)
    return count


WINOGRAD = "nn.contrib_conv2d_winograd_without_weight_transform"
# Winograd kernels and the direct kernels they are costed against
WINOGRAD_DIRECT = {WINOGRAD: "nn.conv2d", "fused.winograd_bias": "fused.conv2d_bias",
                   "fused.winograd_relu": "fused.conv2d_relu",
                   "fused.winograd_bias_relu": "fused.conv2d_bias_relu"}


def winograd_features(c: int, o: int, out: float) -> tuple:
    """A 3x3 convolution's shape as the profile's Winograd rows key it: channels in, channels
    out (the input and output transforms cost apart: 32 -> 128 and 128 -> 32 differ) and output
    pixels (on large images the transformed tiles leave the cache)."""
    return (float(c), float(o), max(1.0, out / max(o, 1)))


def tile_waste(oh: int, ow: int, tile: int = 2) -> float:
    """Output pixels Winograd F(mxm, 3x3) computes over those wanted: whole ``tile``-square tiles,
    so with F(2x2, 3x3) an odd side computes one row or column more (7x7 computes 8x8, 1.31x; 13x13
    1.16x), and with F(4x4, 3x3) up to three (14x14 computes 16x16). The profile's Winograd ratios
    are kept per wanted pixel without it (measured: 512 channels, 0.86x the direct kernel at 8x8
    and 1.08x at 7x7)."""
    return (tile * math.ceil(oh / tile)) * (tile * math.ceil(ow / tile)) / max(oh * ow, 1)


def conv_working_set(op: str, attrs: Mapping, arg_types: Sequence, out_type) -> float:
    """Elements a convolution's kernel (direct or Winograd, alone or fused) touches per call: its
    inputs and output, and the columns a direct kernel gathers (all but an unpadded 1x1 stride-1
    kernel, a plain product) or Winograd's transformed input and output tiles (16 per 2x2 tile,
    per channel in and out; 36 per 4x4 tile with F(4x4, 3x3))."""
    anchor = _anchor(op)
    total = sum(_numel(t) for t in arg_types) + _numel(out_type)
    if anchor == WINOGRAD:
        n, o, oh, ow = _nchw(out_type, attrs.get("data_layout"))
        alpha, _, _, c = _shape(arg_types[1])  # the transformed weight: (tile + 2)-square tiles
        m = alpha - 2
        return total + (m + 2) ** 2 * n * math.ceil(oh / m) * math.ceil(ow / m) * (c + o)
    if anchor != "nn.conv2d" or int(attrs.get("groups", 1) or 1) != 1:
        return total
    w = _dims(attrs.get("kernel_layout") or "OIHW", _shape(arg_types[1]), "OIHW")
    if w["H"] * w["W"] > 1 or _any_nonzero(attrs.get("padding")) or _any_nonzero(attrs.get("strides"), 1):
        total += _numel(out_type) / max(w["O"], 1) * w["I"] * w["H"] * w["W"]
    return total


def _itemsize(t) -> int:
    import numpy as np

    try:
        return int(np.dtype(t.dtype).itemsize) if isinstance(t, TensorType) else 4
    except TypeError:
        return 4


def _shape(t) -> tuple:
    if not isinstance(t, TensorType):
        raise CostModelError(f"expected a tensor type, got {t}")
    _numel(t)  # refuses '?' dimensions
    return tuple(int(d) if isinstance(d, int) else int(_numel(TensorType((d,), "float32"))) for d in t.shape)


# What an op not calibrated costs per element of its work: its own reference op's curve where its
# family's misleads, else its family's. At inference dropout's kernel copies its input and fills
# its mask with ones, contiguous writes of its two outputs: priced as the family "other" (a
# strided copy) it came out 7x its measured time in SqueezeNet.
_REFERENCE = {"nn.dropout": "copy"}
_FAMILY_REFERENCE = {"elementwise": "add", "reduce": "sum", "pool": "nn.max_pool2d", "layout": "copy_strided"}


def op_kind(op: str) -> str:
    """The family an op is costed (and reported) in: gemm, conv, elementwise, reduce, layout,
    pool, fused, or other."""
    if op.startswith("fused."):
        return "fused"
    if op in ("nn.dense", "nn.matmul", "nn.batch_matmul"):
        return "gemm"
    if op.startswith("nn.conv") or op == WINOGRAD:
        return "conv"
    if "pool" in op:
        return "pool"
    record = _lookup(op)
    if record is None:
        return "other"
    kind = int(record.pattern)
    if kind <= 1:
        return "elementwise"
    if kind == 2:
        return "layout"
    if kind == 3 or op in ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.batch_norm",
                           "nn.group_norm", "nn.instance_norm"):
        return "reduce"
    return "other"


def _dims(layout: str, shape: tuple, default: str) -> dict:
    return dict(zip(layout if len(layout) == len(shape) else default, shape, strict=True))


def _nchw(t, layout) -> tuple:
    shape = _shape(t)
    layout = layout or "NCHW"
    if len(layout) != len(shape) or sorted(layout) != sorted("NCHW"):
        return shape
    return tuple(shape[layout.index(a)] for a in "NCHW")


def _any_nonzero(values, neutral: int = 0) -> bool:
    if values is None:
        return False
    values = values if isinstance(values, (list, tuple)) else (values,)
    return any(int(v) != neutral for v in values)


def conv_features(o: int, c: int, kh: int, kw: int, out: float) -> tuple:
    """A convolution's shape as the profile's conv rows key it: output pixels (M), output
    channels, the product's depth (channels x taps) and the taps."""
    return (max(1.0, out / max(o, 1)), float(o), float(c * kh * kw), float(kh * kw))


# the anchors a fused op's calibrated ratio is measured against directly (its epilogue runs in place)
DENSE_LIKE_ANCHORS = ("nn.conv2d", "nn.dense", "nn.matmul")


# curves of an op on another form of its inputs than its own curve's: a binary elementwise op
# on a row vector broadcast over rows (``add@bcast``), a bias on the last axis (``nn.bias_add@last``)
BROADCAST = "@bcast"
LAST_AXIS = "@last"
SCALAR = "@scalar"
# a fused elementwise op's ratio on per-channel operands ((C, 1, 1) against an NCHW activation,
# ``per_channel``), measured apart from its ratio on equal shapes, for the ops in
# PER_CHANNEL_FUSED: numpy's broadcasting loop then runs over one row of an image at a time
CHANNEL = "@chan"
PER_CHANNEL_FUSED = ("fused.add_relu", "fused.multiply_add")


def broadcasts(arg_types: Sequence) -> bool:
    """True when a binary op's two tensor inputs (neither a scalar) differ in shape: numpy runs
    its broadcasting loop."""
    if len(arg_types) != 2 or not all(isinstance(t, TensorType) and len(t.shape) > 0 for t in arg_types):
        return False
    return tuple(arg_types[0].shape) != tuple(arg_types[1].shape)


def per_channel(arg_types: Sequence, out_type) -> bool:
    """True when an input broadcasts along the output's last axis from a length of 1 (a (C, 1, 1)
    scale or bias on an NCHW activation), so numpy's broadcasting loop runs along rows of the
    output rather than over it whole; a single value does not count."""
    if not isinstance(out_type, TensorType) or len(out_type.shape) < 2:
        return False
    try:
        last = _shape(out_type)[-1]
    except CostModelError:
        return False
    for t in arg_types:
        if isinstance(t, TensorType) and len(t.shape) >= 2:
            try:
                shape = _shape(t)
            except CostModelError:
                continue
            if shape[-1] == 1 < last and math.prod(shape) > 1:
                return True
    return False


def with_scalar(arg_types: Sequence) -> bool:
    """True when a binary op's one input is a single value and the other is not: numpy reads one
    array (see ``SCALAR``)."""
    if len(arg_types) != 2 or not all(isinstance(t, TensorType) for t in arg_types):
        return False
    try:
        sizes = sorted(_numel(t) for t in arg_types)
    except CostModelError:
        return False
    return sizes[0] == 1.0 and sizes[1] > 1.0


# 4-D transposes that change layout between NCHW and NHWC: their curves (a permuting copy)
_LAYOUT_CHANGES = {(0, 2, 3, 1): "transpose_nhwc", (0, 3, 1, 2): "transpose_nchw"}


def layout_change(attrs: Mapping) -> str | None:
    """The curve of a transpose (its attrs) that changes layout between NCHW and NHWC, else None."""
    return _LAYOUT_CHANGES.get(tuple(attrs.get("axes") or ()))


def _swaps_a_matrix(attrs: Mapping, arg_types: Sequence) -> bool:
    """A transpose of a matrix (rank 2, its two axes exchanged). It is a view here: a product
    reading it runs as on the matrix untransposed, so a (K, N) weight's saving (the fused matmul
    ops' calibrated ratios, measured on a contiguous one) holds only once the transpose is made:
    folded on a constant, which extraction does not charge, or copied, which is its price. An
    LSTM's cells take their weights as arguments: ``dense-weight-kn`` there made the optimized
    LSTM measure 0.96-0.98x the original's speed where 1.04-1.07x was predicted."""
    if len(arg_types) != 1 or not isinstance(arg_types[0], TensorType) or len(arg_types[0].shape) != 2:
        return False
    axes = attrs.get("axes")
    return axes is None or [int(a) % 2 for a in axes] == [1, 0]


def depthwise_features(c: int, size: int, out: float) -> tuple:
    """What a channels-last depthwise convolution's ratio over NCHW is looked up by: channels,
    input height and output elements (which tell the stride apart)."""
    return (float(c), float(size), out)


def dense_features(arg_types: Sequence, out_type) -> tuple:
    """(M, N, K) of a dense call: rows of the data, units, the reduced axis."""
    x, w = _shape(arg_types[0]), _shape(arg_types[1])
    k = x[-1]
    n = w[0] if len(w) == 2 else w[-1]
    m = max(1, int(_numel(out_type) // max(n, 1)))
    return (m, n, k)


class Profile:
    """A calibrated profile: the figures and the key they are valid for."""

    def __init__(self, data: dict, path: str | None = None) -> None:
        self.data = data
        self.path = path
        self.key = data["key"]
        self.quick = bool(data.get("quick"))
        self.dispatch = float(data["dispatch"])
        self.program = float(data.get("program", 0.0))
        self.program_per_input = float(data.get("program_per_input", 0.0))
        self.curves: dict[str, list] = data["curves"]
        self.gemm: list = data["gemm"]
        self.bmm: list = data["bmm"]
        # measured over the structural estimate, per shape: [(m, o, k, taps, ratio)]
        self.conv: list = data["conv"]
        self.conv_transpose: list = data.get("conv_transpose", [])
        # the same with the weight laid out IHWO (the kernel's channels-last path)
        self.conv_transpose_last: list = data.get("conv_transpose_last", [])
        # Winograd's time over the direct kernel's, per shape: [(c, o, pixels, ratio)]; F(2x2, 3x3)'s
        # and F(4x4, 3x3)'s (tile_size 4)
        self.winograd: list = data.get("winograd", [])
        self.winograd4: list = data.get("winograd4", [])
        # a fused op's measured time over its anchor's (or its parts') prediction, per shape:
        # {op: [(*features, ratio)]}, features as ``fused_features`` gives them
        self.fused: dict[str, list] = data.get("fused", {})
        # the same for fused ops on a grouped (depthwise) convolution, by output size: [(size, ratio)]
        self.fused_grouped: dict[str, list] = data.get("fused_grouped", {})
        # a depthwise convolution channels-last over NCHW, per shape: [(c, size, out, ratio)]
        self.depthwise_nhwc: list = data.get("depthwise_nhwc", [])
        self.pointwise_nhwc: list = data.get("pointwise_nhwc", [])
        self.conv_call = float(data.get("conv_call", 0.0))
        # a 1x1 convolution without padding runs no gathering copy: a fixed cost of its own
        self.conv_call_1x1 = float(data.get("conv_call_1x1", self.conv_call))
        self.clock = data.get("clock", "wall")
        # a kernel's time inside a program over its time looped alone, per op kind
        self.in_program: dict[str, float] = data.get("in_program", {})
        # the same by the size of a kernel's data, for kernels other than products and convolutions:
        # {op or "kind:<kind>": [(bytes, factor)]}, from the factors keyed "<name>@<log2 of bytes>"
        self.in_program_size: dict[str, list] = _size_factors(self.in_program)
        # per kind ("kind:conv"), the longest looped time above the fixed cost the calibration's
        # programs measured its factor on: a longer kernel's slowdown is held at that one's (slowed)
        longest = data.get("in_program_longest", {})
        if not isinstance(longest, dict):
            raise ValueError(f"in_program_longest as a mapping of kinds to seconds (got {longest!r})")
        self.in_program_longest: dict[str, float] = {str(k): _positive_seconds(k, v)
                                                     for k, v in longest.items()}
        self.probe = float(data.get("probe", 0.0))  # seconds of calibrate.Probe while calibrating
        # weights under this many bytes were read in small pages, the larger in huge ones (0: all
        # alike; see calibrate.small_pages_below)
        small = data.get("small_pages_below", 0)
        if isinstance(small, bool) or not isinstance(small, int) or small < 0:
            raise ValueError(f"small_pages_below as a whole number of bytes, 0 or more (got {small!r})")
        self.small_pages_below = small
        # a transparent huge page's bytes: a weight of NumPy's threshold or more lies in huge pages
        # but for where its ends cut one (see CpuCost.huge_share)
        page = data.get("huge_page_bytes", 2 << 20)
        if isinstance(page, bool) or not isinstance(page, int) or page <= 0:
            raise ValueError(f"huge_page_bytes as a whole number of bytes above 0 (got {page!r})")
        self.huge_page_bytes = page
        # one-row products at the depths between the grid's: [(1, n, k, flops, seconds)]
        # (calibrate.ONE_ROW_DEPTHS; priced with the grid's one-row rows, see CpuCost.row_rate)
        one_row = data.get("one_row", [])

        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if not isinstance(one_row, list) or not all(
                isinstance(row, list) and len(row) == 5 and row[0] == 1 and all(map(number, row))
                for row in one_row):
            raise ValueError(f"one_row as rows [1, units, depth, flops, seconds] of numbers "
                             f"(got {one_row!r:.80})")
        self.one_row: list = one_row
        # the last-level cache (0: unknown): how much of a convolution's data a looped run keeps warm
        self.cache_bytes = int(data.get("cache_bytes", 0) or 0)
        # a core's second-level cache (0: unknown): how much of another kernel's data it keeps warm
        self.core_cache_bytes = int(data.get("core_cache_bytes", 0) or 0)

    def save(self, path: str | None = None) -> str:
        """Write the profile (atomically) and return where."""
        path = profile_path(path or self.path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
        self.path = path
        return path

    def check(self, here: Mapping | None = None) -> None:
        """ProfileError naming what differs when the profile was made for another machine or build."""
        diff = _differences(self.key, here or machine_key())
        if diff:
            raise ProfileError(f"the CPU profile {self.path or ''} was made for another machine or "
                               f"build: {'; '.join(diff)}. Run `relaygraph calibrate` to measure this one")

    def curve(self, name: str) -> list | None:
        """The measured curve of ``name`` (an op, or copy / copy_strided / numexpr_1 / ...), or None."""
        return self.curves.get(name)


SIZE_BIN = "@"  # in an in-program factor's key: "<op or kind:...>@<log2 of the data's bytes>"


def _size_factors(factors: Mapping[str, float]) -> dict[str, list]:
    """The in-program factors keyed by size (``SIZE_BIN``) as curves: {name: [(bytes, factor)]}."""
    curves: dict[str, list] = {}
    for key, factor in factors.items():
        name, sep, level = key.rpartition(SIZE_BIN)
        if sep and name and level.lstrip("-").isdigit():
            if not 0 <= int(level) <= 62:  # no kernel's data is outside 1 byte to 4 EB
                raise ValueError(f"a valid size bin in the in-program factor {key!r}")
            curves.setdefault(name, []).append((float(2 ** int(level)), float(factor)))
    return {name: sorted(points) for name, points in curves.items()}


def _positive_seconds(key, value) -> float:
    seconds = float(value)
    if not seconds > 0.0 or math.isinf(seconds):
        raise ValueError(f"a positive number of seconds in in_program_longest[{key!r}] (got {value!r})")
    return seconds


def size_bin(nbytes: float) -> int:
    """The size bin (log2 of bytes, rounded) of a kernel's data of ``nbytes``."""
    return int(round(math.log2(max(nbytes, 1.0))))


def data_bytes(arg_types: Sequence, out_type) -> float:
    """Bytes of a kernel's inputs and output together (a CostModelError when a size is unknown)."""
    return sum(_numel(t) * _itemsize(t) for t in (*arg_types, out_type))


def load_profile(path: str | None = None, check: bool = True) -> Profile:
    """The profile at ``path`` (default ``profile_path()``); ProfileError when missing, unreadable
    or (with ``check``) made for another machine or build."""
    path = profile_path(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ProfileError(f"no CPU profile at {path}; run `relaygraph calibrate` to measure this "
                           "machine (it takes under two minutes)") from None
    except (OSError, ValueError) as exc:
        raise ProfileError(f"cannot read the CPU profile {path}: {exc}; run `relaygraph calibrate` "
                           "to make a new one") from None
    if not isinstance(data, dict) or not isinstance(data.get("key"), dict):
        raise ProfileError(f"{path} is not a CPU profile; run `relaygraph calibrate` to make one")
    made = data["key"].get("format")
    if check and made != FORMAT:  # its figures mean something else: never read them
        here = machine_key()
        others = _differences({k: v for k, v in data["key"].items() if k != "format"},
                              {k: v for k, v in here.items() if k != "format"})
        error = ProfileError if others else StaleProfileError
        raise error(f"the CPU profile {path} was made for another machine or build: format {made!r} "
                    f"(this machine: {FORMAT!r}){''.join('; ' + d for d in others)}. Run `relaygraph "
                    "calibrate` to measure this one")
    try:
        profile = Profile(data, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise StaleProfileError(f"{path}: the CPU profile lacks {exc}; run `relaygraph calibrate` "
                                "again") from None
    if check:
        profile.check()
    return profile


def _anchor(op: str) -> str:
    """The op a fused op is built on (its first part; ``add`` for a group outside the op table),
    or ``op`` itself."""
    if not op.startswith("fused."):
        return op
    from ..ops.fused_ops import definition

    d = definition(op) if _lookup(op) is not None else None
    return d.parts[0].op if d is not None else "add"


_PREFIXES: dict[str, tuple | None] = {}


def _prefix_op(op: str) -> tuple | None:
    """The longest other fused op whose definition begins ``op``'s (the same parts on the same
    inputs), as (name, its number of parts, its number of arguments), or None."""
    if op in _PREFIXES:
        return _PREFIXES[op]
    from ..ops.fused_ops import FUSED_OPS, Arg, definition

    parts = definition(op).parts
    best = None
    for name in FUSED_OPS:
        d = definition(name)
        k = len(d.parts) if d is not None else len(parts)
        if name == op or k >= len(parts) or (best is not None and k <= best[1]):
            continue
        if all(a.op == b.op and _same_inputs(a.inputs, b.inputs)
               for a, b in zip(d.parts, parts[:k], strict=True)):
            n_args = 1 + max((r.index for p in d.parts for r in p.inputs if type(r) is Arg), default=-1)
            best = (name, k, n_args)
    _PREFIXES[op] = best
    return best


def _same_inputs(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if type(x) is not type(y):
            return False
        if hasattr(x, "dtype") and not (x.dtype == y.dtype and x == y):  # a numpy scalar constant
            return False
        if not hasattr(x, "dtype") and x != y:
            return False
    return True


class CpuCost:
    """The ``cpu`` cost function of one profile: ``model(op, attrs, arg_types, out_type) -> seconds``."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.__name__ = "cpu"
        # seconds per weight byte of a one-row product, by the weight's bytes and depth (row_rate)
        self._row_rate: dict[tuple, float] = {}

    def __call__(self, op: str, attrs: Mapping, arg_types: Sequence, out_type) -> float:
        record = _lookup(op)
        if record is None and not op.startswith("fused."):
            return 0.0  # variables, constants, tuples: no kernel
        cost = self.profile.dispatch + self.program_seconds(op, attrs or {}, arg_types, out_type)
        if record is not None and op.startswith("fused."):
            bound = self.fused_bound(op, attrs or {}, list(arg_types), out_type)
            if bound is not None and bound < cost:
                cost = bound
        return cost

    def fused_bound(self, op: str, attrs: Mapping, arg_types: list, out_type) -> float | None:
        """The most a fused op of the op table can cost: its kernel runs its parts in turn, the
        steps after the anchor in place, so it never costs more than its parts as separate calls,
        less the dispatches it saves, or than the fused op it extends (conv2d_bias for
        conv2d_bias_relu) and the steps after that as kernels looped alone (in place on a fresh
        result, they do not pay the in-program factor of reading memory), or as separate calls
        less their dispatch when the profile prices those lower. Without this bound,
        the separately calibrated ratios of two such ops (noisy by a few percent, as much as a
        relu's share) could make fusing the relu look slower than running it on its own, and
        extraction would leave it unfused."""
        from ..ops.fused_ops import definition

        d = definition(op)
        if d is None:
            return None
        full = _lookup(op).resolve(attrs)
        calls = [self._part_call(part, full, arg_types, out_type) for part in d.parts]
        bound = sum(self(*c) for c in calls) - (len(calls) - 1) * self.profile.dispatch
        prefix = _prefix_op(op)
        if prefix is not None:
            name, k, n_args = prefix
            head = self(name, _lookup(name).resolve(attrs), arg_types[:n_args], out_type)
            steps = sum(min(self.kernel(*c), self(*c) - self.profile.dispatch) for c in calls[k:])
            bound = min(bound, head + steps)
        if op == "fused.multiply_add_relu":
            bound = min(bound, self._batch_norm_relu(arg_types, out_type))
        return bound

    def _batch_norm_relu(self, arg_types: list, out_type) -> float:
        """A scale-shift-relu on one value per channel (rules/conv.rules: batch-norm-relu) is a
        batch norm and the relu after it with one output instead of three: it costs no more
        than they do (measured faster at each of ResNet-50's shapes, one and two threads; the
        batch norm's curve alone underprices its two fresh outputs there)."""
        x, s, t = arg_types
        if not (isinstance(x, TensorType) and isinstance(s, TensorType) and isinstance(t, TensorType)
                and len(x.shape) == 4 and len(s.shape) == 3 and len(t.shape) == 3):
            return math.inf
        try:
            if not (_shape(s) == _shape(t) and _shape(s)[1:] == (1, 1) and _shape(s)[0] == _shape(x)[1]):
                return math.inf
        except CostModelError:
            return math.inf
        vec = TensorType((_shape(x)[1],), x.dtype)
        attrs = _lookup("nn.batch_norm").resolve({"axis": 1})
        norm = self("nn.batch_norm", attrs, [x, vec, vec, vec, vec], TupleType((x, vec, vec)))
        return norm + self("nn.relu", {}, [x], out_type) - self.profile.dispatch

    @staticmethod
    def _part_call(part, attrs: Mapping, arg_types: list, out_type) -> tuple:
        """One part of a fused op's definition as a call of its own, (op, attrs, arg types, out
        type): an earlier part's result is typed as the fused op's output (it has its size)."""
        from ..ops.fused_ops import Arg, Step

        types = [arg_types[r.index] if type(r) is Arg else out_type for r in part.inputs
                 if type(r) in (Arg, Step)]
        return part.op, _lookup(part.op).resolve(part.attrs(attrs)), types, out_type

    def in_program(self, op: str, t: float, traffic: float | None = None, warm: float = 1.0,
                   factor: float | None = None) -> float:
        """Seconds of a kernel that takes ``t`` looped alone when it runs inside a program: the
        part above the op's fixed cost per call (its curve's floor) times the in-program factor.
        A program's slowdown comes from memory (inputs out of cache, outputs on fresh pages), so
        a kernel on a handful of elements runs as fast as looped, and an add on 100K elements
        twice as slow. Given ``traffic`` (the elements of its largest input or output), the part
        of a kernel other than a product or convolution that slows is at most what moving that
        data takes (``memory_time``): such a kernel whose time is arithmetic loses in a program
        what its memory loses, not a share of its arithmetic (inception's stride-1 average pools,
        14 ms each with the kernel of the time, ran as fast in the program as looped, where the
        pool factor of 1.7 measured on a max pool predicted 1.8x their time; BERT's softmax over
        (12, 128, 128) ran 1.1x, not the 2.3x measured on a one-head attention's). Products and
        convolutions keep the share: their temporaries (gathered columns) and weights grow with
        their arithmetic, as long as a looped run keeps them in the cache: ``warm`` (see
        ``CpuCost.warm``) scales the slowdown. ``factor`` is the in-program factor to apply (by
        default the op's, ``factor``; see ``program_factor``)."""
        floor = min(self.floor(op), t)
        factor = self.factor(op) if factor is None else factor
        return t + self.slowed(op, t - floor, traffic) * (factor - 1.0) * warm

    def program_seconds(self, op: str, attrs: Mapping, arg_types: Sequence, out_type) -> float:
        """Seconds of the call's kernel inside a program (no dispatch): its looped time and the
        slowdown ``program_factor`` gives it (``in_program``)."""
        factor, warm = self.program_factor(op, attrs, arg_types, out_type)
        return self.in_program(op, self.kernel(op, attrs, list(arg_types), out_type),
                               traffic_elements(arg_types, out_type), warm, factor)

    def program_factor(self, op: str, attrs: Mapping, arg_types: Sequence, out_type) -> tuple[float, float]:
        """The in-program factor of a call and the share of it that applies (``warm``). A kernel
        other than a product or convolution takes the factor measured on data of its size, its
        op's own when the calibration's programs ran the op at three sizes or more, else its
        kind's (``size_factor``), in full; without such factors, the op's one factor and
        ``warm``'s share."""
        kind = op_kind(_anchor(op))
        if kind not in ("gemm", "conv"):
            points = self.size_points(op)
            if points:
                try:
                    return size_factor(points, data_bytes(arg_types, out_type)), 1.0
                except (CostModelError, TypeError, ValueError):
                    pass
        return self.factor(op), self.warm(op, attrs, arg_types, out_type)

    def size_points(self, op: str) -> list | None:
        """The in-program factors by size that apply to ``op`` (see ``program_factor``), or None."""
        sized = self.profile.in_program_size
        if not sized:
            return None
        anchor = _anchor(op)
        own = sized.get(anchor)
        if own and len(own) >= 3:
            return own
        return sized.get(f"kind:{op_kind(anchor)}") or own

    def warm(self, op: str, attrs: Mapping, arg_types: Sequence, out_type) -> float:
        """The share of a kernel's in-program slowdown that applies at its size: a program runs
        it slower than the looped kernel because a looped run finds its data in a cache that holds
        it only while it fits.

        A convolution's data (weight, input, gathered columns or Winograd's tiles) is kept in the
        last-level cache: full up to half of it (room for what else runs), none from the whole
        cache up, log-linear between. Measured in VGG-16 (one thread): 3x3 layers whose data is
        27-65 MB ran 0.97-1.02x their looped time in the program, where the factors calibrated on
        small layers (1.1 direct, 1.22 Winograd) priced the optimized program's convolutions 20%
        over and its speedup 0.07-0.14 under; ResNet-50's layers (5-10 MB) ran 1.04-1.2x.

        Any other kernel but a product (elementwise, reduction, normalization, pool, layout)
        streams its inputs and output once: looped, they stay in a core's own cache while they
        fit twice over, and in a program they come from the last-level one, which the previous
        kernel wrote them to; larger, the looped run streams them from there too. Full up to twice
        the core's cache, none from twelve times it, log-linear between. Measured in MobileNet
        (one thread, 512 KB per core): batch norms and relus on 100K values (0.8 MB with their
        output) ran 2-3.5x their looped time in the program, on 400K values 1-2.3x, on 800K
        0.75-0.93x, where one factor per op (batch norm 3.0, relu 1.9, from the calibration's
        small programs) priced the large ones 1.3-3.2x their time, the original programs 5% over
        and MobileNet's speedup 0.08 over. (A profile that measured these kernels' factors by the
        size of their data applies those instead, in full: ``program_factor``. On a 2 MB cache
        this fade priced the same ops 0.4-0.6x their time from 2 MB of data up.)"""
        kind = op_kind(_anchor(op))
        if kind == "gemm":
            return 1.0
        if kind != "conv":
            core = self.profile.core_cache_bytes
            if core <= 0:
                return 1.0
            try:
                size = data_bytes(arg_types, out_type)
            except (CostModelError, TypeError, ValueError):
                return 1.0
            return _log_share(size, 2 * core, 12 * core)
        cache = self.profile.cache_bytes
        if cache <= 0:
            return 1.0
        try:
            size = conv_working_set(op, attrs, list(arg_types), out_type) * _itemsize(out_type)
        except (CostModelError, KeyError, IndexError, TypeError, ValueError):
            return 1.0
        return _log_share(size, cache / 2, cache)

    def slowed(self, op: str, above_floor: float, traffic: float | None) -> float:
        """The part of a kernel's time above its floor that a program slows (see ``in_program``).

        A convolution's is at most the longest the calibration's programs measured the factor on
        (``Profile.in_program_longest``): what a program adds to a convolution is data the looped
        run kept near (the input, the gathered columns, part of the weight), an amount of time, not
        a share of the arithmetic, so a layer longer than any measured adds what the longest added.
        Measured here (one thread), ResNet-50's layers (0.2-2.9 ms looped) ran 1.0-1.3x their looped
        time in its program, median 1.07; VGG-16's (7-69 ms) 0.93-1.07x, median 0.99, where the
        factor over their whole time priced its convolutions 4-8% over in both programs and, as the
        Winograd factor is the larger, its speedup 0.03 under."""
        kind = op_kind(_anchor(op))
        if kind == "conv":
            longest = self.profile.in_program_longest.get("kind:conv")
            return above_floor if longest is None else min(above_floor, longest)
        if traffic is None or kind == "gemm":
            return above_floor
        return min(above_floor, self.memory_time(traffic))

    def memory_time(self, work: float) -> float:
        """Seconds of moving data of ``work`` elements, as the in-program factors count it: an
        add's (two inputs, one output) above its fixed cost per call."""
        points = self.profile.curve("add")
        if not points:
            return math.inf
        return max(curve_at(points, max(work, 1.0)) - points[0][1], 0.0)

    def floor(self, op: str) -> float:
        """The op's fixed seconds per call: its measured curve's smallest size (a fused op's
        anchor's), or 0 when it has none."""
        points = self.profile.curve(_anchor(op))
        return points[0][1] if points else 0.0

    def factor(self, op: str) -> float:
        """The profile's in-program factor for ``op``: its own when the calibration's programs
        ran it, else its kind's; a fused op's anchor's (it reads the anchor's fresh inputs and
        writes fresh memory as the anchor does)."""
        factors = self.profile.in_program
        if not factors:
            return 1.0
        op = _anchor(op)
        found = factors.get(op)
        return found if found is not None else factors.get(f"kind:{op_kind(op)}", 1.0)

    def program_overhead(self, inputs: int) -> float:
        """Seconds ``rg.evaluate`` spends on a program besides its instructions (binding inputs)."""
        return self.profile.program + self.profile.program_per_input * inputs

    def kernel(self, op: str, attrs: Mapping, arg_types: list, out_type) -> float:
        """Seconds of the op's numpy kernel alone (no executor dispatch)."""
        if op in WINOGRAD_DIRECT:
            return self._winograd(op, attrs, arg_types, out_type)
        if op.startswith("fused."):
            return self._fused(op, attrs, arg_types, out_type)
        if op == "nn.dense":
            return self._dense(arg_types, out_type)
        if op == "nn.matmul":
            return self._matmul(attrs, arg_types, out_type)
        if op == "nn.batch_matmul":
            return self._bmm(attrs, arg_types, out_type)
        if op == "nn.conv2d":
            return self._conv2d(attrs, arg_types, out_type)
        if op == "nn.conv2d_transpose":
            return self._conv2d_transpose(attrs, arg_types, out_type)
        if op == "transpose":
            layout = layout_change(attrs)
            if layout and self.profile.curve(layout):  # its consumer pays the permuting copy
                return curve_at(self.profile.curve(layout), max(_numel(out_type), 1.0))
            if _swaps_a_matrix(attrs, arg_types) and self.profile.curve("copy_strided"):
                return curve_at(self.profile.curve("copy_strided"), max(_numel(out_type), 1.0))
        return self._curve_op(op, attrs, arg_types, out_type)

    # -- families ------------------------------------------------------------------------------
    def _work(self, op: str, attrs: Mapping, arg_types: list, out_type) -> float:
        kind = op_kind(op)
        out = _numel(out_type)
        if kind == "pool":
            window = attrs.get("pool_size") or (1, 1)
            window = window if isinstance(window, (list, tuple)) else (window, window)
            big = max([_numel(t) for t in arg_types] + [out])
            return max(out * math.prod(int(w) for w in window), big)
        return max([out] + [_numel(t) for t in arg_types])

    def _curve_op(self, op: str, attrs, arg_types, out_type) -> float:
        points = None
        if op_kind(op) == "pool" and not _any_nonzero(attrs.get("strides") or 1, 1):
            points = self.profile.curve(f"{op}@s1")  # overlapping windows: their own curve
        if op == "nn.bias_add" and arg_types and isinstance(arg_types[0], TensorType) \
                and int(attrs.get("axis", 1)) in (-1, len(arg_types[0].shape) - 1):
            points = self.profile.curve(f"{op}{LAST_AXIS}")  # as after a dense: no 4-D reshape
        points = points or self.profile.curve(op)
        work = self._work(op, attrs, arg_types, out_type)
        if points is not None and op_kind(op) == "elementwise" and with_scalar(arg_types):
            one, same = self.profile.curve(f"multiply{SCALAR}"), self.profile.curve("multiply")
            if one and same:  # one array read, not two: as measured on multiply
                n = max(work, 1.0)
                return curve_at(points, n) * curve_at(one, n) / curve_at(same, n)
        if points is not None and op != "nn.bias_add" and op_kind(op) == "elementwise" \
                and broadcasts(arg_types):
            wide, same = self.profile.curve(f"add{BROADCAST}"), self.profile.curve("add")
            if wide and same:  # the broadcasting loop's cost, as measured on add
                n = max(work, 1.0)
                return curve_at(points, n) * curve_at(wide, n) / curve_at(same, n)
        if points is None and op in _REFERENCE:
            points = self.profile.curve(_REFERENCE[op])
        if points is None:
            # an op not calibrated costs what its family's reference op costs per element
            points = self.profile.curve(_FAMILY_REFERENCE.get(op_kind(op), "copy_strided"))
        return curve_at(points, max(work, 1.0))

    def _dense(self, arg_types, out_type) -> float:
        return self.product_time(*dense_features(arg_types, out_type))

    def _matmul(self, attrs, arg_types, out_type) -> float:
        x = _shape(arg_types[0])
        k = x[-2] if attrs.get("transpose_a") else x[-1]
        n = _shape(out_type)[-1]
        return self.product_time(max(1, int(_numel(out_type) // max(n, 1))), n, k)

    def product_time(self, m: int, n: int, k: int) -> float:
        """Seconds of a dense or matmul of m rows, n units and depth k. The GEMM grid reads its
        second operand cold, as a program reads a weight; which operand is the weight the types do
        not say, so the one with more rows is taken as read cold (a weight has the units; the
        zoo's products have fewer rows of data than units). Exchanging the operands
        (``dense(b, a)``, the transpose of ``dense(a, b)``) then prices the same product: BLAS
        runs both in the same time (measured within 10%), but priced with the activation as the
        cold operand, ``transpose(dense(w, x))`` looked up to half of ``dense(x, w)``."""
        return self.gemm_time(min(m, n), max(m, n), k)

    def gemm_time(self, m: int, n: int, k: int) -> float:
        """Seconds of an (m x k) by (k x n) product as the dense kernel runs it (``grid_time``).

        A one-row product on a weight of ONE_ROW_BYTES or more is its weight's read: its bytes at
        ``row_rate``. Read off the grid, the rate moved with the interpolation between the grid's
        sizes: NasRNN's products on (512, 512) weights were priced at 68.2 us a MB and two of them
        merged, on (1024, 512), at 66.0, so extraction merged its 72 products into 36 (each then
        split), a 2% saving predicted; that program measured 0.66-0.91x the original in seven runs
        of a day, its 72 products apart 1.16-1.17x (the pipeline 1.11-1.12x)."""
        if m == 1 and 4.0 * n * k >= ONE_ROW_BYTES:
            rate = self.row_rate(4.0 * n * k, k)
            if rate > 0.0:
                return 4.0 * n * k * rate
        return grid_time(self.profile.gemm, (m, n, k))

    def row_rate(self, nbytes: float = 0.0, depth: float | None = None) -> float:
        """Seconds per byte of weight of a one-row product on a weight of ``nbytes`` whose rows are
        ``depth`` long, from the one-row products on ONE_ROW_BYTES or more the profile has (the
        grid's and ``Profile.one_row``); 0 when it has none.

        The rate follows the depth (on a 2-core AMD EPYC, 116 us a MB 256 deep, 95 at 512, 68 at
        1024): per placement, the median rate of the rows of each depth, interpolated in the log
        of the depth and held at the ends (``depth`` None: the median of the placement's rows).
        Not the number of rows: two products merged along their units are priced as the two apart
        (read off the whole grid, interpolation priced two of NasRNN's merged 3% under the two, and
        extraction merged all 72 into a program 0.66-0.91x the original's speed). A weight under
        ``Profile.small_pages_below`` bytes is read at the rate of the rows in small pages; a
        larger one at the rows' in huge pages for its share in huge pages (``huge_share``) and
        the small pages' for the rest; every row where the profile read them all alike, or has
        none of a placement."""
        key = (nbytes, depth)
        if key not in self._row_rate:
            split = self.profile.small_pages_below
            if not split:
                rate = self._depth_rate(None, depth)
            elif nbytes < split:
                rate = self._depth_rate(True, depth)
            else:
                share = self.huge_share(nbytes)
                rate = share * self._depth_rate(False, depth) + (1.0 - share) * self._depth_rate(True, depth)
            self._row_rate[key] = rate
        return self._row_rate[key]

    def huge_share(self, nbytes: float) -> float:
        """The share of a weight of ``nbytes`` (NumPy's hugepage threshold or more) in huge pages:
        the kernel makes one only for a whole aligned huge page inside the range NumPy advised,
        which starts at an address of no particular alignment, so a weight of ``s`` bytes holds
        ``(s - page) / page`` of them on average (LSTM's 4 MB gate weights, copied apart: 0.50 of
        their pages huge, read off /proc/self/pagemap)."""
        page = self.profile.huge_page_bytes
        return max(0.0, nbytes - page) / nbytes if nbytes > 0 else 0.0

    def _depth_rate(self, small: bool | None, depth: float | None) -> float:
        """Seconds per weight byte of a one-row product ``depth`` deep over the profile's one-row
        rows of one placement (``small``: under ``small_pages_below`` bytes or not; None or no such
        row: every row), see ``row_rate``."""
        rows = [(4.0 * row[1] * row[2], row[2], row[-1])
                for row in (*self.profile.gemm, *self.profile.one_row)
                if row[0] == 1 and 4.0 * row[1] * row[2] >= ONE_ROW_BYTES and row[-1] > 0]
        split = self.profile.small_pages_below
        placed = [r for r in rows if (r[0] < split) == small] if small is not None else rows
        rows = placed or rows
        if not rows:
            return 0.0
        if depth is None:
            return statistics.median(t / b for b, _, t in rows)
        by_depth: dict[float, list[float]] = {}
        for b, k, t in rows:
            by_depth.setdefault(float(k), []).append(t / b)
        points = sorted((k, statistics.median(rates)) for k, rates in by_depth.items())
        depth = float(depth)
        if depth <= points[0][0]:
            return points[0][1]
        if depth >= points[-1][0]:
            return points[-1][1]
        i = bisect.bisect_right([k for k, _ in points], depth)
        (lo, r_lo), (hi, r_hi) = points[i - 1], points[i]
        w = (math.log(depth) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return r_lo + w * (r_hi - r_lo)

    def _bmm(self, attrs, arg_types, out_type) -> float:
        x = _shape(arg_types[0])
        b, m, n = _shape(out_type)
        k = x[1] if attrs.get("transpose_a") else x[2]
        flops = 2.0 * b * m * n * k
        return flops / nearest_rate(self.profile.bmm, (b, m, n, k))

    def _conv2d(self, attrs, arg_types, out_type) -> float:
        x, w, out = _nchw(arg_types[0], attrs.get("data_layout")), _shape(arg_types[1]), _numel(out_type)
        groups = int(attrs.get("groups", 1) or 1)
        dims = _dims(attrs.get("kernel_layout") or "OIHW", w, "OIHW")
        o, cg, kh, kw = dims["O"], dims["I"], dims["H"], dims["W"]
        if groups != 1:
            flops = 2.0 * out * cg * kh * kw
            t = curve_at(self.profile.curve("conv_grouped"), max(flops, 1.0))
            rows = self.profile.depthwise_nhwc
            if rows and attrs.get("data_layout") == "NHWC" and attrs.get("kernel_layout") == "HWIO":
                # channels-last runs another kernel: its time over NCHW's, measured by shape
                t *= nearest(rows, depthwise_features(x[1], x[2], out))
            return t
        padding = attrs.get("padding") or (0, 0)
        t = self.conv_time(x, o, cg, kh, kw, out, padding, attrs.get("strides"))
        rows = self.profile.pointwise_nhwc
        if (rows and kh == kw == 1 and attrs.get("data_layout") == "NHWC"
                and attrs.get("kernel_layout") == "HWIO" and not _any_nonzero(padding)
                and not _any_nonzero(attrs.get("strides"), 1)):
            # channels-last, one (pixels x C) by (C x O) product where NCHW's is (O x C) by
            # (C x pixels): BLAS runs the two at different speeds on some shapes (measured by shape)
            t *= nearest(rows, conv_features(o, cg, 1, 1, out))
        return t

    def conv_base(self, x: tuple, o: int, c: int, kh: int, kw: int, out: float, padding,
                  strides=None) -> float:
        """The structural estimate of a convolution (groups=1) as one matrix product over
        columns gathered from the input: the product, plus the gathering copy unless the
        kernel is 1x1 with no padding or stride. The calibrated ratio corrects it per shape."""
        m = max(1, int(out // max(o, 1)))
        k = c * kh * kw
        t = self.gemm_time(m, o, k)
        if kh * kw > 1 or _any_nonzero(padding) or _any_nonzero(strides, 1):
            t += curve_at(self.profile.curve("copy_strided"), float(m * k))
        return t

    def conv_time(self, x: tuple, o: int, c: int, kh: int, kw: int, out: float, padding,
                  strides=None) -> float:
        """Seconds of the executor's conv2d (groups=1): its fixed cost plus the structural estimate
        times the ratio measured on the calibrated shapes nearest this one."""
        base = self.conv_base(x, o, c, kh, kw, out, padding, strides)
        ratio = nearest(self.profile.conv, conv_features(o, c, kh, kw, out))
        return self.conv_call(kh, kw, padding) + base * ratio

    def conv_call(self, kh: int, kw: int, padding) -> float:
        """The conv kernel's fixed seconds per call on its path: a 1x1 kernel without padding is
        one matrix product (no gathering copy, no padding): a fixed cost several times smaller
        than the gathering path's, which counted in full made small 1x1 layers' calibrated ratios
        a tenth of what they are."""
        if kh == kw == 1 and not _any_nonzero(padding):
            return self.profile.conv_call_1x1
        return self.profile.conv_call

    def _conv2d_transpose(self, attrs, arg_types, out_type) -> float:
        """The structural estimate (``conv_transpose_estimate``) times the ratio calibrated for its
        kernel path at the nearest measured shapes; infinity for the channels-last path on a
        profile without its rows, so that it is never chosen unmeasured."""
        est, features, path = self.conv_transpose_estimate(attrs, arg_types, out_type)
        rows = getattr(self.profile, TRANSPOSE_ROWS[path])
        if path == "last" and not rows:
            return math.inf
        return est * (nearest(rows, features) if rows else 1.0)

    def conv_transpose_estimate(self, attrs, arg_types, out_type) -> tuple[float, tuple, str]:
        """A conv2d_transpose before its calibrated ratio: (seconds, the shape's ``conv_features``,
        the kernel path). Where the kernel is one matrix product (one group, no negative padding,
        float data: ``transpose_by_gemm``), (output channels x taps) by input pixels, and an add
        per tap into the output: the product's estimate and those adds' copy time, path "gemm";
        with an IHWO weight the same channels-last and a copy into the output's layout, path
        "last". Otherwise it convolves the input spread by the strides: that convolution's
        estimate plus the spreading copy, path "spread"."""
        from ..ops.conv import pad4, transpose_by_gemm

        x, w, out = _nchw(arg_types[0], attrs.get("data_layout")), _shape(arg_types[1]), _numel(out_type)
        layout = attrs.get("kernel_layout") or "IOHW"
        dims = _dims(layout, w, "IOHW")
        groups = int(attrs.get("groups", 1) or 1)
        c, og, kh, kw = dims["I"], dims["O"], dims["H"], dims["W"]
        o = og * groups
        padding = attrs.get("padding") or 0
        padding = pad4(tuple(padding) if isinstance(padding, list) else padding)
        copy = self.profile.curve("copy")
        if transpose_by_gemm(groups, padding, arg_types[0].dtype, arg_types[1].dtype):
            pixels = x[0] * x[2] * x[3]
            base = self.gemm_time(max(1, pixels), o * kh * kw, c) \
                + curve_at(copy, max(float(pixels * o * kh * kw), 1.0))
            path = "gemm"
            if layout == "IHWO":
                base += curve_at(copy, max(float(out), 1.0))
                path = "last"
        else:
            strides = attrs.get("strides") or (1, 1)
            strides = strides if isinstance(strides, (list, tuple)) else (strides, strides)
            spread = x[0] * x[1] * ((x[2] - 1) * int(strides[0]) + 1) * ((x[3] - 1) * int(strides[-1]) + 1)
            base = self.conv_base(x, o, c // groups, kh, kw, out, (1,)) * groups \
                + curve_at(copy, max(float(spread), 1.0))
            path = "spread"
        return self.profile.conv_call + base, conv_features(o, c // groups, kh, kw, out), path

    def _winograd(self, op: str, attrs, arg_types, out_type) -> float:
        """Seconds of a Winograd F(2x2, 3x3) or F(4x4, 3x3) kernel: the direct 3x3 kernel's time times
        the ratio of the two kernels' times measured on the nearest calibrated shapes (channels in
        and out, output pixels; the tile size's own rows), so the choice between them follows that
        measurement. A fused one adds its
        epilogue as the kernel runs it: the bias goes into the products of one tile position (an
        add over a sixteenth of them), the relu is one pass over the output. Priced instead through
        the direct kernel's fused ratio (what a bias and a relu pass add to a direct convolution,
        a few percent of it, as noisy as the ratio), a fused Winograd layer cost more than the
        plain kernel with a separate scale-shift-relu, so extraction split 6 of ResNet-50's 13;
        measured in ResNet-34, the fused kernel took 0.0-0.2 ms over the plain one, the separate
        multiply_add_relu 0.1-0.2 ms."""
        w = _shape(arg_types[1])
        o, c = w[2], w[3]
        dtype = arg_types[1].dtype
        direct_types = [arg_types[0], TensorType((o, c, 3, 3), dtype)]
        direct_attrs = {k: attrs[k] for k in attrs if k != "tile_size"}  # a dict or a call's Attrs
        t = self.kernel("nn.conv2d", direct_attrs, direct_types, out_type)
        n, _, oh, ow = _nchw(out_type, attrs.get("data_layout"))
        m = w[0] - 2  # the output tile's side, as the kernel reads it off the transformed weight
        rows = self.profile.winograd4 if m == 4 else self.profile.winograd
        if rows:
            ratio = nearest(rows, winograd_features(c, o, _numel(out_type)))
            t *= ratio * tile_waste(oh, ow, m)
        elif m == 4:  # a profile without F(4x4, 3x3)'s rows: never chosen over the measured kernels
            return math.inf
        if op in ("fused.winograd_bias", "fused.winograd_bias_relu"):
            tiles = TensorType((n * math.ceil(oh / m) * math.ceil(ow / m), o), dtype)
            t += self.kernel("add", {}, [tiles, TensorType((o,), dtype)], tiles)
        if op in ("fused.winograd_relu", "fused.winograd_bias_relu"):
            t += self.kernel("nn.relu", {}, [out_type], out_type)
        return t

    def _fused(self, op: str, attrs, arg_types, out_type) -> float:
        record = _lookup(op)
        if record is None:  # a group outside the op table: one numexpr program, or its members in turn
            members = _members(op, attrs)
            if all(op_kind(m[0]) == "elementwise" for m in members):
                return self._numexpr(len(members), _numel(out_type))
            return sum(self.kernel(m[0], m[1] or {}, list(m[2]), m[3]) for m in members)
        from ..ops.fused_ops import definition

        d = definition(op)
        if d is None:
            return self._curve_op(op, attrs, arg_types, out_type)
        full = record.resolve(attrs)
        base, features = self.fused_base(op, full, arg_types, out_type)
        rows = self.profile.fused.get(op)
        if op in PER_CHANNEL_FUSED and per_channel(arg_types, out_type):
            rows = self.profile.fused.get(op + CHANNEL) or rows
        if int(full.get("groups", 1) or 1) != 1 and self.profile.fused_grouped.get(op):
            return base * nearest(self.profile.fused_grouped[op], (_numel(out_type),))
        return base * (nearest(rows, features) if rows else 1.0)

    def fused_base(self, op: str, attrs: Mapping, arg_types: list, out_type) -> tuple[float, tuple]:
        """What a fused op's calibrated ratio multiplies, and the features it is looked up by:
        for a convolution or dense anchor, the anchor's own prediction (the epilogue runs in
        place on its output) and the anchor's shape; otherwise the sum of its parts' predictions
        and the output size."""
        from ..ops.fused_ops import Arg, definition

        d = definition(op)
        anchor = d.parts[0]
        n_anchor = sum(1 for r in anchor.inputs if type(r) is Arg)
        anchor_attrs = _lookup(anchor.op).resolve(anchor.attrs(attrs))
        if anchor.op in DENSE_LIKE_ANCHORS:
            head = list(arg_types[:n_anchor])
            t = self.kernel(anchor.op, anchor_attrs, head, out_type)
            if anchor.op == "nn.dense":
                return t, dense_features(head, out_type)
            if anchor.op == "nn.matmul":  # weight stored (K, N): N from the output
                n = _shape(out_type)[-1]
                return t, (max(1, int(_numel(out_type) // max(n, 1))), n, _shape(head[0])[-1])
            w = _dims(anchor_attrs.get("kernel_layout") or "OIHW", _shape(head[1]), "OIHW")
            if int(anchor_attrs.get("groups", 1) or 1) != 1:
                return t, (_numel(out_type), 1.0, 1.0, 1.0)
            return t, conv_features(w["O"], w["I"], w["H"], w["W"], _numel(out_type))
        total = 0.0
        for part in d.parts:
            types = [arg_types[r.index] if type(r) is Arg else out_type for r in part.inputs
                     if type(r).__name__ in ("Arg", "Step")]
            part_attrs = _lookup(part.op).resolve(part.attrs(attrs))
            total += self.kernel(part.op, part_attrs, types, out_type)
        return total, (_numel(out_type),)

    def _numexpr(self, ops: int, elements: float) -> float:
        one, four = self.profile.curve("numexpr_1"), self.profile.curve("numexpr_4")
        t1, t4 = curve_at(one, max(elements, 1.0)), curve_at(four, max(elements, 1.0))
        return max(t1 + (t4 - t1) * (ops - 1) / 3.0, t1)

    def group(self, members: list, elementwise_program: bool, out_type) -> float:
        """Seconds of one Primitive group (one instruction): a numexpr program when the executor
        makes one, else its members' kernels in turn."""
        if elementwise_program:
            t = self._numexpr(len(members), _numel(out_type))
            points = self.size_points("add")  # reads and writes as an add does
            factor = size_factor(points, 3 * _numel(out_type) * _itemsize(out_type)) if points else None
            return self.profile.dispatch + self.in_program("add", t, _numel(out_type), 1.0, factor)
        return self.profile.dispatch + sum(self.program_seconds(op, attrs or {}, arg_types, out)
                                           for op, attrs, arg_types, out in members)


_DEFAULT: dict[str, CpuCost] = {}


def reset_default() -> None:
    """Forget the loaded default profile (after calibrating, or when the profile directory changes)."""
    _DEFAULT.clear()


def default_profile(calibrate: bool = True, progress="auto") -> CpuCost:
    """The cost function of this machine's profile: loaded from ``profile_path()``, or measured
    now when there is none, or only one another version of this module wrote for this machine,
    and ``calibrate`` (quick when ``$RELAYGRAPH_CALIBRATE=quick``). A foreign profile is refused."""
    path = profile_path()
    model = _DEFAULT.get(path)
    if model is not None:
        return model
    stale = None
    if os.path.exists(path) and calibrate:
        try:
            load_profile(path)
        except StaleProfileError as exc:  # this machine's, from another version: made anew
            stale = exc
    if (stale is not None or not os.path.exists(path)) and calibrate:
        import sys

        from .calibrate import calibrate as run_calibration

        if stale is not None and progress is not False:
            print(f"relaygraph: {stale}; calibrating again", file=sys.stderr)
        quick = os.environ.get("RELAYGRAPH_CALIBRATE", "").strip().lower() == "quick"
        run_calibration(quick=quick, path=path, progress=progress)
    elif not os.path.exists(path):
        raise ProfileError(f"no CPU profile at {path}, and calibration is off (--no-calibrate); run "
                           "`relaygraph calibrate` once to measure this machine, or choose another "
                           "--cost")
    model = _DEFAULT[path] = CpuCost(load_profile(path))
    return model
