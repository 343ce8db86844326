"""``calibrate()``: measure this machine's numpy executor once and store the ``cpu`` profile.

Everything is measured through the kernels the executor runs (the op table's kernels, called
with the attributes a Relay call carries; the executor's plan for dispatch; the fused-group
kernels for numexpr groups and fused ops), on float32 data:

- dispatch: a plan of many one-element ops, less the op's own time, per instruction;
- a time curve over the work size for each elementwise, reduction, layout and pooling op the
  profile names, and for contiguous and strided (transposing) copies;
- the dense kernel on a grid of (M, N, K) and batch-matmul on a grid of (B, M, N, K);
- conv2d on typical shapes: the ratio of its time to the structural estimate (padding, window
  copy, GEMM, result copy), per size, for 1x1 and larger kernels; grouped convolution as a curve;
- numexpr groups of one and of four ops, and each fused op's time over its parts' estimate.

The full mode takes about a minute; ``quick=True`` takes a few seconds on fewer, smaller shapes.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from ..ir.types import TensorType
from .cpu_cost import CpuCost, Profile, machine_key, profile_path, reset_default

__all__ = ["calibrate", "measure"]

F32 = np.float32


def measure(fn: Callable[[], object], repeats: int = 5, min_seconds: float = 2e-3) -> float:
    """Seconds of ``fn()``: the median of ``repeats`` samples, each looping enough calls to fill
    ``min_seconds``. The median, as programs are timed: on a machine shared with other work both
    then see the same share of it."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    loops = max(1, int(min_seconds / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples)


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


def _curve_specs() -> dict[str, Callable]:
    specs: dict[str, Callable] = {}
    for name in _UNARY:
        specs[name] = lambda rng, n: ([_rand(rng, _rows(n, 256))], {})
    for name in _BINARY:
        specs[name] = lambda rng, n: ([_rand(rng, _rows(n, 256)), _rand(rng, _rows(n, 256))], {})
    specs["clip"] = lambda rng, n: ([_rand(rng, _rows(n, 256))], {"a_min": 0.6, "a_max": 1.2})
    specs["nn.leaky_relu"] = lambda rng, n: ([_rand(rng, _rows(n, 256))], {"alpha": 0.1})

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
    specs["concatenate"] = None  # a tuple input: measured below with its own builder
    specs["nn.max_pool2d"] = lambda rng, n: (
        [_rand(rng, nchw(max(n // 2, 64)))], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)})
    specs["nn.global_avg_pool2d"] = lambda rng, n: ([_rand(rng, nchw(n))], {})
    specs["nn.avg_pool2d"] = lambda rng, n: (
        [_rand(rng, nchw(max(n // 2, 64)))], {"pool_size": (2, 2), "strides": (2, 2)})
    specs["nn.pad"] = lambda rng, n: ([_rand(rng, nchw(n)), np.zeros((), F32)],
                                      {"pad_width": ((0, 0), (0, 0), (1, 1), (1, 1))})
    del specs["concatenate"]
    return specs


def _work(name: str, arrays: list, out) -> float:
    sizes = [a.size for a in arrays] + [np.asarray(out[0] if isinstance(out, tuple) else out).size]
    if "pool" in name and "global" not in name:
        return max(max(sizes), np.asarray(out).size * 9 if "max" in name else np.asarray(out).size * 4)
    return float(max(sizes))


class _Calibration:
    def __init__(self, quick: bool, progress) -> None:
        from ..progress import phase

        self.quick = quick
        self.rng = np.random.default_rng(0)
        self.repeats = 3 if quick else 5
        self.min_seconds = 5e-4 if quick else 3e-3
        self.sizes = [1 << 10, 1 << 17] if quick else [1 << 8, 1 << 12, 1 << 15, 1 << 18, 1 << 21]
        self.max_flops = 3e7 if quick else 1.5e9
        self.data: dict = {"curves": {}, "gemm": [], "bmm": [], "conv_ratio": {}, "fused_ratio": {}}
        specs = _curve_specs()
        self.specs = specs
        total = (len(specs) + 3) * len(self.sizes) + len(self._gemm_grid()) + len(self._bmm_grid()) \
            + len(self._conv_shapes()) + len(self._depthwise_shapes()) + 16
        self.phase = phase("calibrate", f"measuring this machine's numpy executor"
                                        f"{' (quick)' if quick else ''}", total=total,
                           unit="measurement", progress=progress, every=2.0)

    def time(self, fn) -> float:
        return measure(fn, self.repeats, self.min_seconds)

    def kernel_time(self, kernel, args: list, attrs) -> float:
        return measure(lambda: kernel(args, attrs), self.repeats, self.min_seconds)

    def step(self, info: str) -> None:
        self.phase.step(info)

    def run(self) -> dict:
        started = time.perf_counter()
        self.dispatch()
        self.curves()
        self.gemm()
        self.bmm()
        self.numexpr()
        self.conv()
        self.fused()
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
        alone = 0.0
        for name, binary in chain:
            args = [value, value] if binary else [value]
            kernel, attrs = _call(name, args)
            alone += self.kernel_time(kernel, args, attrs) * 25
        whole = self.time(lambda: plan.run([value]))
        self.data["dispatch"] = max((whole - alone) / len(calls), 1e-8)
        # per program, and per input (rg.evaluate checks each input against its parameter)
        params = [var(f"p{i}", TensorType(shape, "float32")) for i in range(16)]
        one = IRModule.from_expr(Function(params[:1], make_call("negative", params[0])))
        many = IRModule.from_expr(Function(params, make_call("negative", params[0])))
        t_one = self.time(lambda: evaluate(one, value))
        t_many = self.time(lambda: evaluate(many, *([value] * 16)))
        kernel, attrs = _call("negative", [value])
        neg = self.kernel_time(kernel, [value], attrs)
        self.data["program_per_input"] = max((t_many - t_one) / 15, 0.0)
        self.data["program"] = max(t_one - self.data["dispatch"] - neg - self.data["program_per_input"], 0.0)
        self.step("dispatch")

    def curves(self) -> None:
        curves = self.data["curves"]
        for name, spec in self.specs.items():
            points = []
            for n in self.sizes:
                arrays, attrs = spec(self.rng, n)
                kernel, canon = _call(name, arrays, **attrs)
                out = kernel(arrays, canon)
                points.append([_work(name, arrays, out), self.kernel_time(kernel, arrays, canon)])
                self.step(name)
            curves[name] = _monotone(points)
        copy, strided, concat = [], [], []
        for n in self.sizes:
            a = _rand(self.rng, _rows(n, 256))
            copy.append([float(n), self.time(lambda a=a: a.copy())])
            b = _rand(self.rng, (max(1, int(math.sqrt(n))), max(1, n // max(1, int(math.sqrt(n))))))
            strided.append([float(b.size), self.time(lambda b=b: np.ascontiguousarray(b.T))])
            halves = [_rand(self.rng, _rows(n // 2 or 1, 256)) for _ in range(2)]
            concat.append([float(n), self.time(lambda h=halves: np.concatenate(h, axis=0))])
            self.step("copies")
        curves["copy"], curves["copy_strided"] = _monotone(copy), _monotone(strided)
        curves["concatenate"] = _monotone(concat)

    def _gemm_grid(self) -> list:
        ms = (1, 64, 512) if self.quick else (1, 16, 128, 512, 2048, 8192)
        nk = (32, 256) if self.quick else (16, 64, 256, 1024, 4096)
        return [(m, n, k) for m in ms for n in nk for k in nk if 2.0 * m * n * k <= self.max_flops]

    def gemm(self) -> None:
        for m, n, k in self._gemm_grid():
            x, w = _rand(self.rng, (m, k)), _rand(self.rng, (n, k))
            kernel, attrs = _call("nn.dense", [x, w])
            t = self.kernel_time(kernel, [x, w], attrs)
            self.data["gemm"].append([m, n, k, 2.0 * m * n * k, t])
            self.step(f"dense {m}x{n}x{k}")

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

        for ops in (1, 4):
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
        # (channels in, image size, channels out, kernel, stride, padding)
        shapes = [(16, 28, 16, 3, 1, 1), (64, 14, 64, 1, 1, 0), (4, 8, 8, 3, 1, 1), (8, 8, 8, 1, 1, 0)]
        if not self.quick:
            shapes += [(3, 56, 16, 7, 2, 3), (64, 28, 64, 1, 1, 0), (64, 14, 128, 3, 2, 1),
                       (128, 14, 128, 3, 1, 1), (256, 7, 64, 1, 1, 0), (64, 56, 64, 3, 1, 1),
                       (64, 56, 256, 1, 1, 0), (256, 56, 64, 1, 1, 0),
                       (3, 224, 64, 7, 2, 3), (256, 14, 256, 3, 1, 1), (512, 7, 512, 3, 1, 1),
                       (1024, 14, 256, 1, 1, 0), (2048, 7, 512, 1, 1, 0), (32, 16, 32, 3, 1, 1)]
        return shapes

    def _depthwise_shapes(self) -> list:
        shapes = [(8, 16, 1), (32, 28, 1)]
        if not self.quick:
            shapes += [(64, 14, 2), (32, 112, 1), (64, 112, 2), (128, 56, 1), (256, 28, 1), (512, 14, 1),
                       (1024, 7, 1)]
        return shapes

    def conv(self) -> None:
        # the kernel's fixed cost (padding, window view, tensordot's set-up) on a one-pixel image
        x, w = _rand(self.rng, (1, 1, 4, 4)), _rand(self.rng, (1, 1, 3, 3))
        kernel, attrs = _call("nn.conv2d", [x, w], padding=(1, 1))
        self.data["conv_call"] = self.kernel_time(kernel, [x, w], attrs)
        self.data["conv_ratio"] = {"1x1": [[1.0, 1.0]], "kxk": [[1.0, 1.0]]}
        self.data["curves"]["conv_grouped"] = [[1.0, 1e-6]]
        model = CpuCost(Profile(dict(self.data, key={})))
        from ..ops.winograd import winograd_weight
        from .cpu_cost import WINOGRAD, winograd_intensity

        ratios: dict[str, list] = {"1x1": [], "kxk": []}
        winograd: list = []
        for c, size, o, k, stride, pad in self._conv_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (o, c, k, k))
            kernel, attrs = _call("nn.conv2d", [x, w], strides=(stride, stride), padding=(pad, pad))
            out = kernel([x, w], attrs)
            t = self.kernel_time(kernel, [x, w], attrs)
            call = self.data["conv_call"]
            est = model.conv_time(x.shape, o, c, k, k, float(out.size), (pad, pad)) - call
            flops = 2.0 * out.size * c * k * k
            ratios["1x1" if k == 1 else "kxk"].append([flops, max(t - call, 0.1 * t) / est])
            self.step(f"conv2d {c}->{o} {k}x{k} on {size}x{size}")
            if k == 3 and stride == 1:  # Winograd's time over the direct kernel's, by channels,
                u = winograd_weight(w)  # as the median of alternated pairs (the load changes)
                wk, wattrs = _call(WINOGRAD, [x, u], tile_size=2, padding=(pad, pad))
                pairs = [self.kernel_time(wk, [x, u], wattrs) / self.kernel_time(kernel, [x, w], attrs)
                         for _ in range(3)]
                winograd.append([winograd_intensity(c, o), statistics.median(pairs)])
        self.data["curves"]["winograd_ratio"] = _merge(winograd)
        self.data["conv_ratio"] = {kind: _merge(points) for kind, points in ratios.items()}
        grouped = []
        for c, size, stride in self._depthwise_shapes():
            x, w = _rand(self.rng, (1, c, size, size)), _rand(self.rng, (c, 1, 3, 3))
            kernel, attrs = _call("nn.conv2d", [x, w], strides=(stride, stride), padding=(1, 1), groups=c)
            out = kernel([x, w], attrs)
            grouped.append([2.0 * out.size * 9, self.kernel_time(kernel, [x, w], attrs)])
            self.step(f"depthwise conv2d {c} on {size}x{size}")
        self.data["curves"]["conv_grouped"] = _monotone(grouped)

    def fused(self) -> None:
        from ..ops.fused_ops import FUSED_OPS

        model = CpuCost(Profile(dict(self.data, key={})))
        r = self.rng
        conv = ([_rand(r, (1, 32, 28, 28)), _rand(r, (32, 32, 3, 3))], {"padding": (1, 1)})
        dense = ([_rand(r, (128, 256)), _rand(r, (256, 256))], {})
        elem = [_rand(r, (256, 512)) for _ in range(3)]
        inputs = {
            "fused.conv2d_bias": (conv[0] + [_rand(r, (32,))], conv[1]),
            "fused.conv2d_relu": conv, "fused.conv2d_bias_relu": (conv[0] + [_rand(r, (32,))], conv[1]),
            "fused.dense_bias": (dense[0] + [_rand(r, (256,))], {}), "fused.dense_relu": dense,
            "fused.dense_bias_relu": (dense[0] + [_rand(r, (256,))], {}),
            "fused.dense_bias_gelu": (dense[0] + [_rand(r, (256,))], {}),
            "fused.add_relu": (elem[:2], {}), "fused.add_tanh": (elem[:2], {}),
            "fused.add_sigmoid": (elem[:2], {}), "fused.multiply_add": (elem, {}),
            "fused.add_layer_norm": (elem[:2] + [_rand(r, (512,)), _rand(r, (512,))], {"axis": -1}),
            "fused.multiply_softmax": ([_rand(r, (8, 64, 64)), np.asarray(0.125, F32)], {"axis": -1}),
            "fused.conv2d_add": (conv[0] + [_rand(r, (1, 32, 28, 28))], conv[1]),
            "fused.multiply_add_relu": (elem, {}),
        }
        for name in FUSED_OPS:
            if name not in inputs:
                continue  # a layout-only fused op: costed as its parts; Winograd's: as conv2d's
            arrays, attrs = inputs[name]
            kernel, canon = _call(name, arrays, **attrs)
            out = kernel(arrays, canon)
            t = self.kernel_time(kernel, arrays, canon)
            types = [TensorType(a.shape, "float32") for a in arrays]
            est = model.kernel(name, canon, types, TensorType(out.shape, "float32"))
            self.data["fused_ratio"][name] = t / est
            self.step(name)


def _monotone(points: list) -> list:
    """A measured curve sorted by work size, times made non-decreasing (noise on a loaded machine
    must not make a larger input predict less time)."""
    points = _merge(points)
    out, best = [], 0.0
    for n, t in points:
        best = max(best, t)
        out.append([n, best])
    return out


def _merge(points: list) -> list:
    """Points sorted by x, with equal x merged (geometric mean)."""
    by_x: dict[float, list] = {}
    for x, y in points:
        by_x.setdefault(float(x), []).append(max(float(y), 1e-9))
    return [[x, math.exp(sum(map(math.log, ys)) / len(ys))] for x, ys in sorted(by_x.items())]


def calibrate(quick: bool = False, path: str | None = None, progress="auto") -> Profile:
    """Measure this machine and save its ``cpu`` profile (at ``path`` or ``profile_path()``).

    The full calibration takes about a minute; ``quick`` takes a few seconds and is coarser.
    """
    data = _Calibration(quick, progress).run()
    data["key"] = machine_key()
    data["quick"] = quick
    data["created"] = time.strftime("%Y-%m-%d %H:%M:%S")
    profile = Profile(data, profile_path(path))
    profile.save()
    reset_default()
    return profile
