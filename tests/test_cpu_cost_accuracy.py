"""What the cpu model's calibration measures, where programs showed it wrong: weights read cold
(copies that overflow the last-level cache by their bytes), small inputs, split's fixed cost, and
interpolation that does not depend on the order of equally near grid points."""

from __future__ import annotations

import math

import numpy as np

from relaygraph.egraph import calibrate, cpu_cost


def test_cold_weights_rotate_over_more_bytes_than_the_cache():
    # sixteen copies of a 1 MB weight (the old count) stay in a 32 MB cache: the copies' bytes count
    cal = calibrate._Calibration(quick=True, progress=False)
    seen: set = set()

    def kernel(args, attrs):
        seen.add(id(args[1]))

    weight = np.zeros((512, 512), np.float32)  # 1 MB
    cal.cold_time(kernel, [np.zeros((1, 512), np.float32), weight], {})
    assert len(seen) * weight.nbytes >= calibrate.COLD_BYTES
    tiny: set = set()
    cal.cold_time(lambda args, attrs: tiny.add(id(args[1])), [np.zeros((1, 4), np.float32),
                                                               np.zeros((4, 4), np.float32)], {})
    assert 1 < len(tiny) <= calibrate.MAX_COPIES


def test_deep_cold_reads_cover_the_cache_and_alternated_kernels_read_apart(monkeypatch):
    # a layout ratio's weights rotate over the reported cache (views of one pool, no copies),
    # and two kernels alternated over the pool never read the same view in turn
    assert calibrate._available_bytes() > 0  # the OS says how much memory is free
    monkeypatch.setattr(calibrate, "cache_bytes", lambda level=None: 96 << 20)
    monkeypatch.setattr(calibrate, "_available_bytes", lambda: 8 << 30)
    cal = calibrate._Calibration(quick=False, progress=False)
    assert cal.cold_bytes == 96 << 20
    assert calibrate.cold_bytes() == 96 << 20
    # bounded by a quarter of the free memory (never under COLD_BYTES), and by COLD_BYTES_MAX
    monkeypatch.setattr(calibrate, "_available_bytes", lambda: 256 << 20)
    assert calibrate.cold_bytes() == 64 << 20
    monkeypatch.setattr(calibrate, "_available_bytes", lambda: 64 << 20)
    assert calibrate.cold_bytes() == calibrate.COLD_BYTES
    monkeypatch.setattr(calibrate, "_available_bytes", lambda: 0)  # unknown: the cache's bytes
    assert calibrate.cold_bytes() == 96 << 20
    monkeypatch.setattr(calibrate, "cache_bytes", lambda level=None: 64 << 30)
    assert calibrate.cold_bytes() == calibrate.COLD_BYTES_MAX
    monkeypatch.setattr(calibrate, "cache_bytes", lambda level=None: 96 << 20)
    weight = np.ones((512, 512), np.float32)  # 1 MB
    reads: list = [[], []]

    def reader(i):
        def kernel(args, attrs):
            w = args[1]
            assert w.shape == weight.shape and w.dtype == weight.dtype
            reads[i].append(w.__array_interface__["data"][0])
        return kernel

    fns = [cal._rotating(reader(i), [np.zeros((1, 512), np.float32), weight], {}, 1, deep=True, share=i / 2)
           for i in range(2)]
    for _ in range(200):
        fns[0]()
        fns[1]()
    assert cal._pool is not None and cal._pool.nbytes >= cal.cold_bytes
    first = sorted(set(reads[0]))
    assert len(first) * weight.nbytes >= cal.cold_bytes  # every view read, the cache's bytes in all
    assert all(b - a >= weight.nbytes for a, b in zip(first, first[1:], strict=False))  # apart
    pool = cal._pool.__array_interface__["data"][0]
    assert all(pool <= a < pool + cal._pool.nbytes for a in first)  # views, not copies
    assert all(a != b for a, b in zip(reads[0], reads[1], strict=True))
    far = [abs(a - b) for a, b in zip(reads[0], reads[1], strict=True)]
    assert min(far) >= cal.cold_bytes // 4  # half the way round, give or take the turn
    # the quick calibration and a float64 weight keep copies over COLD_BYTES
    quick = calibrate._Calibration(quick=True, progress=False)
    seen: set = set()
    call = quick._rotating(lambda a, k: seen.add(id(a[1])), [np.zeros((1, 512), np.float32), weight], {}, 1,
                           deep=True)
    for _ in range(2 * calibrate.COLD_BYTES // weight.nbytes):
        call()
    assert quick._pool is None
    assert len(seen) * weight.nbytes == calibrate.COLD_BYTES  # copies of the weight, COLD_BYTES of them
    doubles: set = set()
    call = calibrate._rotating(lambda a, k: doubles.add(id(a[1])), [np.zeros((1, 512)), np.ones((512, 512))],
                               {}, 1, cal._pool, cal.cold_bytes)
    for _ in range(3):
        call()
    assert len(doubles) == 3


def test_full_calibration_measures_small_inputs_and_split():
    cal = calibrate._Calibration(quick=False, progress=False)
    assert min(cal.sizes) <= 16  # a four-element chain's kernels cost less than a 256-element one's
    arrays, attrs = cal.specs["split"](np.random.default_rng(0), 16)
    kernel, canon = calibrate._call("split", arrays, **attrs)
    out = kernel(arrays, canon)
    assert isinstance(out, tuple) and len(out) == 4


def test_quick_profile_has_a_split_curve():
    points = cpu_cost.default_profile(progress=False).profile.curve("split")
    assert points and all(t > 0 for _, t in points)


def test_nearest_counts_every_row_as_near_as_the_kth():
    # four rows equally near (2, 2): all four count, in whatever order they come
    rows = [[1, 1, 1.0], [1, 4, 2.0], [4, 1, 4.0], [4, 4, 8.0]]
    want = math.exp(sum(math.log(r[-1]) for r in rows) / 4)
    assert math.isclose(cpu_cost.nearest(rows, (2, 2), k=3), want)
    assert math.isclose(cpu_cost.nearest(rows[::-1], (2, 2), k=3), want)
    # nearer rows still win: with k=1 only the exact one
    assert cpu_cost.nearest(rows, (4, 4), k=1) == 8.0


def test_nearest_rate_counts_ties_alike():
    # (m, n, k, flops, seconds): rates 1, 2, 4 and 8, all sqrt(3) from (2, 2, 2) in log2 space
    grid = [[1, 1, 4, 8.0, 8.0], [1, 4, 1, 8.0, 4.0], [4, 1, 1, 8.0, 2.0], [4, 4, 4, 8.0, 1.0]]
    assert math.isclose(cpu_cost.nearest_rate(grid, (2, 2, 2), k=2), math.sqrt(8.0))
    assert math.isclose(cpu_cost.nearest_rate(grid[::-1], (2, 2, 2), k=1), math.sqrt(8.0))
    # a nearer row is taken as it is
    assert math.isclose(cpu_cost.nearest_rate(grid + [[2, 2, 2, 8.0, 0.5]], (2, 2, 2), k=3), 16.0)


def test_predict_costs_a_winograd_convolution_called_with_its_attrs():
    # rg.profile and predict pass a call's Attrs (not a dict) to the model: a plain Winograd
    # convolution, as optimize leaves it on densenet, was a TypeError there
    import relaygraph as rg
    from relaygraph.egraph.program_profile import predict

    text = """#[version = "0.0.5"]
    def @main(%x: Tensor[(1, 4, 8, 8), float32], %w: Tensor[(6, 4, 3, 3), float32]) {
      %0 = nn.contrib_conv2d_winograd_weight_transform(%w, tile_size=2);
      nn.contrib_conv2d_winograd_without_weight_transform(%x, %0, tile_size=2, padding=[1, 1, 1, 1])
    }
    """
    seconds = predict(rg.parse(text))
    assert math.isfinite(seconds) and seconds > 0


def test_an_op_takes_its_own_in_program_factor_before_its_kinds():
    from relaygraph.ir.types import TensorType

    data = dict(cpu_cost.default_profile(progress=False).profile.data)
    data["in_program"] = {"kind:elementwise": 1.0, "kind:gemm": 1.2, "add": 2.0}
    model = cpu_cost.CpuCost(cpu_cost.Profile(data))
    assert model.factor("add") == 2.0 and model.factor("multiply") == 1.0
    assert model.factor("fused.add_relu") == 2.0  # a fused op: its anchor's
    assert model.factor("fused.multiply_add") == 1.0 and model.factor("fused.dense_bias") == 1.2
    # the factor applies above the op's fixed cost per call (its curve's floor)
    t = TensorType((64, 256), "float32")
    kernel, floor = model.kernel("add", {}, [t, t], t), model.floor("add")
    assert 0 < floor < kernel
    assert math.isclose(model("add", {}, [t, t], t), model.profile.dispatch + floor + 2.0 * (kernel - floor))
    tiny = TensorType((4,), "float32")
    assert math.isclose(model("add", {}, [tiny, tiny], tiny), model.profile.dispatch + floor)


def test_in_program_factors_are_kept_per_op_of_the_calibration_programs():
    cal = calibrate._Calibration(quick=False, progress=False)
    cal.in_program()
    factors = cal.data["in_program"]
    assert {"kind:gemm", "kind:elementwise"} <= set(factors)
    assert {"nn.dense", "add"} & set(factors)  # the attention block's products and residual adds
    assert all(0.5 <= f <= 3.0 for f in factors.values())


def test_winograd_is_priced_by_channels_in_and_out_and_image_size():
    # 32 -> 128 and 128 -> 32 have the same c*o/(c+o), yet their transforms cost apart, and large
    # images leave the cache: the ratio is read off the nearest calibrated shape of all three
    from relaygraph.ir.types import TensorType

    data = dict(cpu_cost.default_profile(progress=False).profile.data)
    data["winograd"] = [[32.0, 128.0, 3136.0, 3.0], [128.0, 32.0, 784.0, 0.7]]
    model = cpu_cost.CpuCost(cpu_cost.Profile(data))
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}

    def ratio(c, o, size):
        x, out = TensorType((1, c, size, size), "float32"), TensorType((1, o, size, size), "float32")
        direct = model.kernel("nn.conv2d", attrs, [x, TensorType((o, c, 3, 3), "float32")], out)
        wino = model.kernel(cpu_cost.WINOGRAD, dict(attrs, tile_size=2),
                            [x, TensorType((4, 4, o, c), "float32")], out)
        return wino / direct

    assert math.isclose(ratio(32, 128, 56), 3.0) and math.isclose(ratio(128, 32, 28), 0.7)
    assert ratio(32, 128, 28) > ratio(128, 32, 56)  # each nearer its own channels' row


def test_a_small_fused_op_is_not_inflated_by_its_anchors_factor():
    from relaygraph.ir.types import TensorType

    data = dict(cpu_cost.default_profile(progress=False).profile.data)
    data["in_program"] = {"kind:elementwise": 1.0, "add": 3.0}
    model = cpu_cost.CpuCost(cpu_cost.Profile(data))
    assert model.floor("fused.add_relu") == model.floor("add") > 0
    t = TensorType((4,), "float32")
    kernel = model.kernel("fused.add_relu", {}, [t, t], t)
    got = model("fused.add_relu", {}, [t, t], t) - model.profile.dispatch
    floor = min(model.floor("add"), kernel)
    slowed = min(kernel - floor, model.memory_time(4.0))  # at most its data's traffic
    # (never above its parts run separately: CpuCost.fused_bound)
    bound = model.fused_bound("fused.add_relu", {}, [t, t], t) - model.profile.dispatch
    assert math.isclose(got, min(kernel + 2.0 * slowed, bound)) and got < 3.0 * kernel
