"""What the cpu model's calibration measures, where programs showed it wrong: weights read cold
(copies that overflow the last-level cache by their bytes), small inputs, split's fixed cost, and
interpolation that does not depend on the order of equally near grid points."""

from __future__ import annotations

import math
from pathlib import Path

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
    cal.small_pages_below = 0  # one pool for every weight (the placement has a test of its own)
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


def _huge_page_kb(arr) -> int | None:
    """Kilobytes of transparent huge pages in the mapping holding the middle of ``arr`` (None
    where the OS does not say)."""
    middle = arr.__array_interface__["data"][0] + arr.nbytes // 2
    try:
        lines = Path("/proc/self/smaps").read_text().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0] if line.split() else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= middle < hi
        elif inside and head == "AnonHugePages:":
            return int(line.split()[1])
    return None


def test_a_small_weight_is_read_cold_in_small_pages_as_a_program_holds_it(monkeypatch, tmp_path):
    # NumPy asks for huge pages from 4 MB up; where the kernel gives them only when asked, a
    # program's 1 MB weights sit in 4 KB pages, and read from memory so they ran 1.25x their time
    # in the pool's huge pages
    setting = tmp_path / "enabled"
    monkeypatch.setattr(calibrate, "THP_SETTING", str(setting))
    for text, below in (("always [madvise] never", calibrate.NUMPY_HUGE_BYTES),
                        ("[always] madvise never", 0), ("always madvise [never]", 0)):
        setting.write_text(text + "\n")
        assert calibrate.small_pages_below() == below
    setting.unlink()
    assert calibrate.small_pages_below() == 0  # no such setting: every weight alike
    assert calibrate._Calibration(quick=True, progress=False).small_pages_below == 0

    monkeypatch.setattr(calibrate, "cache_bytes", lambda level=None: 64 << 20)
    monkeypatch.setattr(calibrate, "_available_bytes", lambda: 8 << 30)
    cal = calibrate._Calibration(quick=False, progress=False)
    cal.small_pages_below = calibrate.NUMPY_HUGE_BYTES
    assert cal.data["small_pages_below"] == 0  # made with no setting to read (unlinked above)
    seen: list = []

    def kernel(args, attrs):
        seen.append(args[1].__array_interface__["data"][0])

    x = np.zeros((1, 512), np.float32)
    cal._rotating(kernel, [x, np.ones((512, 512), np.float32)], {}, 1, deep=True)()
    assert cal._small_pool is not None and cal._pool is None
    start = cal._small_pool.__array_interface__["data"][0]
    assert start <= seen[-1] < start + cal._small_pool.nbytes
    large = np.ones((2048, 1024), np.float32)  # 8 MB
    cal._rotating(kernel, [np.zeros((1, 1024), np.float32), large], {}, 1, deep=True)()
    assert cal._pool is not None  # in the huge pages NumPy asks for
    start = cal._pool.__array_interface__["data"][0]
    assert start <= seen[-1] < start + cal._pool.nbytes
    # the two pools hold the same values; the small one never has a huge page
    assert np.array_equal(calibrate._cold_pool(np.random.default_rng(1), 8 << 20, True),
                          calibrate._cold_pool(np.random.default_rng(1), 8 << 20))
    huge = _huge_page_kb(cal._small_pool)
    assert huge in (0, None)


def test_one_row_products_are_measured_between_the_grids_depths(monkeypatch, tmp_path):
    # the grid's one-row rows are 16-4096 deep in powers of four, and a one-row product's rate
    # follows its depth (NasRNN's and LSTM's 512-deep products were priced at the grid's median,
    # 0.64x their time): a full calibration reads one-row products at the depths between, deep,
    # at one size in small pages and one in huge ones
    cal = calibrate._Calibration(quick=False, progress=False)
    assert calibrate._Calibration(quick=True, progress=False)._one_row_grid() == []
    shapes = cal._one_row_grid()
    assert {k for _, _, k in shapes} == set(calibrate.ONE_ROW_DEPTHS)
    assert {4 * n * k for _, n, k in shapes} == set(calibrate.ONE_ROW_SIZES)
    assert min(calibrate.ONE_ROW_SIZES) < calibrate.NUMPY_HUGE_BYTES <= max(calibrate.ONE_ROW_SIZES)
    read: list = []
    monkeypatch.setattr(cal, "_gemm_grid", lambda: [])
    monkeypatch.setattr(cal, "cold_time", lambda kernel, args, attrs, deep=False: read.append(
        (args[0].shape, args[1].shape, deep)) or 1e-3)
    cal.gemm()
    assert [(x, w) for x, w, _ in read] == [((1, k), (n, k)) for _, n, k in shapes]
    assert all(deep for *_, deep in read)
    assert cal.data["one_row"] == [[1, n, k, 2.0 * n * k, 1e-3] for _, n, k in shapes]
    assert cpu_cost.Profile(dict(cpu_cost.default_profile(progress=False).profile.data,
                                 one_row=cal.data["one_row"])).one_row == cal.data["one_row"]
    # the huge page's size as the kernel says it, 2 MB where it does not
    size = tmp_path / "hpage_pmd_size"
    monkeypatch.setattr(calibrate, "THP_SIZE", str(size))
    size.write_text("524288\n")
    assert calibrate.huge_page_bytes() == 524288
    size.write_text("nothing\n")
    assert calibrate.huge_page_bytes() == 2 << 20
    size.unlink()
    assert calibrate.huge_page_bytes() == 2 << 20


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


def test_an_elementwise_kernel_takes_the_in_program_factor_measured_at_its_size():
    # one factor per op, faded from twice a core's cache to twelve times it (fitted on 512 KB),
    # priced MobileNet's batch norms and relus on a 2 MB cache at 0.4-0.6x their time in the
    # program from 2 MB of data up: factors measured by size replace the fade
    from relaygraph.ir.types import TensorType

    data = dict(cpu_cost.default_profile(progress=False).profile.data, core_cache_bytes=1 << 19)
    data["in_program"] = {"kind:elementwise": 2.0, "nn.relu": 2.5, "kind:gemm": 1.3,
                          "kind:elementwise@20": 2.0, "kind:elementwise@24": 1.0,
                          "add@18": 3.0, "add@20": 2.0, "add@22": 1.5}
    model = cpu_cost.CpuCost(cpu_cost.Profile(data))
    assert model.profile.in_program_size["kind:elementwise"] == [(2.0 ** 20, 2.0), (2.0 ** 24, 1.0)]
    assert model.factor("nn.relu") == 2.5  # by op name, as before

    def relu(values):  # input and output: 8 bytes a value
        t = TensorType((1, values), "float32")
        return [t], t

    # the kind's factors by size (relu has none of its own): the end points' beyond them, linear in
    # the log of the size between
    assert model.program_factor("nn.relu", {}, *relu(1 << 14)) == (2.0, 1.0)
    assert model.program_factor("nn.relu", {}, *relu(1 << 17)) == (2.0, 1.0)
    assert model.program_factor("nn.relu", {}, *relu(1 << 19)) == (1.5, 1.0)
    assert model.program_factor("nn.relu", {}, *relu(1 << 23)) == (1.0, 1.0)
    # an op measured at three sizes or more takes its own (a fused op its anchor's)
    x = TensorType((1, 1 << 17), "float32")  # three of them: 1.5 MB
    assert model.program_factor("add", {}, [x, x], x) == (
        cpu_cost.size_factor([(2.0 ** 18, 3.0), (2.0 ** 20, 2.0), (2.0 ** 22, 1.5)], 3 * 2 ** 19), 1.0)
    assert model.program_factor("fused.add_relu", {}, [x, x], x) == model.program_factor("add", {}, [x, x], x)
    assert 1.5 < model.program_factor("add", {}, [x, x], x)[0] < 2.0
    # products keep their one factor
    a = TensorType((128, 768), "float32")
    assert model.program_factor("nn.dense", {}, [a, TensorType((768, 768), "float32")], a) == (1.3, 1.0)
    # applied in full above the kernel's floor: large data pays nothing more than its looped time
    big = relu(1 << 23)
    kernel, floor = model.kernel("nn.relu", {}, *big), model.floor("nn.relu")
    assert math.isclose(model("nn.relu", {}, *big), model.profile.dispatch + kernel)
    small = relu(1 << 14)
    kernel = model.kernel("nn.relu", {}, *small)
    slowed = min(kernel - floor, model.memory_time(1 << 14))
    assert math.isclose(model("nn.relu", {}, *small), model.profile.dispatch + kernel + slowed)
    # without factors by size, the op's one factor and the fade (warm), as before
    data["in_program"] = {"kind:elementwise": 2.0, "nn.relu": 2.5}
    plain = cpu_cost.CpuCost(cpu_cost.Profile(data))
    assert plain.profile.in_program_size == {}
    assert plain.program_factor("nn.relu", {}, *relu(1 << 14)) == (2.5, 1.0)
    assert plain.program_factor("nn.relu", {}, *relu(1 << 23)) == (2.5, 0.0)


def test_a_profile_with_a_broken_size_bin_is_refused_with_a_clear_error(tmp_path):
    import json

    import pytest

    data = dict(cpu_cost.default_profile(progress=False).profile.data)
    for bad in ({"nn.relu@99999": 1.5}, {"nn.relu@-3": 1.5}, {"nn.relu@20": "x"}):
        path = tmp_path / "p.json"
        path.write_text(json.dumps(dict(data, in_program=dict(data["in_program"], **bad))))
        with pytest.raises(cpu_cost.ProfileError, match="relaygraph calibrate"):
            cpu_cost.load_profile(str(path))
    # a key without a number after the marker is not a size bin: read as an op's factor, as before
    path.write_text(json.dumps(dict(data, in_program=dict(data["in_program"], **{"nn.relu@x": 1.5}))))
    assert cpu_cost.load_profile(str(path)).in_program_size == cpu_cost.Profile(data).in_program_size


def test_the_calibration_measures_in_program_factors_by_size_on_chains_of_several_sizes(monkeypatch):
    from relaygraph.ir.expr import Call
    from relaygraph.ir.traversal import iter_post_order

    full = calibrate._Calibration(quick=False, progress=False)._synthetic_programs()
    sizes = set()
    for func, values in full:
        for node in iter_post_order(func.body):
            if isinstance(node, Call) and getattr(node.op, "name", None) == "nn.batch_norm":
                sizes.add(values[0].size if node.args[0] is func.params[0] else None)
    sizes.discard(None)
    # from 16K values (a core's cache holds them) to 1M (4 MB, 8 MB with the output)
    assert min(sizes) <= 1 << 14 and max(sizes) >= 1 << 20 and len(sizes) >= 6
    # a quick calibration's rounds key factors by the size of the data too
    monkeypatch.setattr(calibrate, "_MIN_LOOPED_SECONDS", 1e-6)
    run = calibrate._Calibration(quick=True, progress=False)
    run.curves()
    run.in_program()
    factors = run.data["in_program"]
    by_size = cpu_cost._size_factors(factors)
    assert len(by_size.get("kind:elementwise", [])) >= 2
    assert all(key.rpartition(cpu_cost.SIZE_BIN)[0] not in ("kind:gemm", "kind:conv", "nn.dense", "nn.conv2d")
               for key in factors if cpu_cost.SIZE_BIN in key)
    assert all(0.5 <= f <= 3.0 for f in factors.values())
    assert cpu_cost.size_bin(1 << 20) == 20 and cpu_cost.size_bin(3 << 19) == 21


def test_a_tensor_times_a_scalar_is_priced_as_one_array_read():
    # numpy reads one array, not two: on 150K values 14.5 against 36 us with a second array
    from relaygraph.ir.types import TensorType

    data = dict(cpu_cost.default_profile(progress=False).profile.data)
    two, one = [[16.0, 2e-6], [1e6, 2e-3]], [[16.0, 1e-6], [1e6, 1e-3]]
    data["curves"] = dict(data["curves"], multiply=two, add=two, **{f"multiply{cpu_cost.SCALAR}": one})
    model = cpu_cost.CpuCost(cpu_cost.Profile(data))
    x, s, one = TensorType((64, 256), "float32"), TensorType((), "float32"), TensorType((1,), "float32")
    same = model.kernel("add", {}, [x, x], x)
    assert math.isclose(model.kernel("add", {}, [x, s], x), same / 2)
    assert math.isclose(model.kernel("multiply", {}, [s, x], x), same / 2)  # either side
    assert math.isclose(model.kernel("add", {}, [x, one], x), same / 2)
    assert cpu_cost.with_scalar([x, s]) and not cpu_cost.with_scalar([x, x])
    assert not cpu_cost.with_scalar([s, s]) and not cpu_cost.with_scalar([x])
    # the curve is measured on a tensor and a scalar
    (a, b), _ = calibrate._curve_specs()[f"multiply{cpu_cost.SCALAR}"](np.random.default_rng(0), 4096)
    assert a.size == 4096 and b.ndim == 0


def test_the_curves_have_a_point_every_doubling_where_data_outgrow_a_cores_cache():
    sizes = calibrate.FULL_SIZES
    assert calibrate._Calibration(quick=False, progress=False).sizes == sizes
    middle = [n for n in sizes if 1 << 15 <= n <= 1 << 19]
    assert middle == [1 << k for k in range(15, 20)] and max(sizes) >= 1 << 21
    # the fused elementwise ops' ratios: at a late layer's size (512 x 7 x 7 is 25K values) too
    fused = calibrate._Calibration(quick=False, progress=False).fused_sizes
    assert min(fused) < 1 << 10 and any(1 << 14 <= n <= 1 << 16 for n in fused) and max(fused) >= 1 << 21


def test_few_row_products_read_their_weights_over_the_whole_cache():
    # a one-row product's time is its weight read: over COLD_BYTES a 1 MB weight stayed in a 480 MB
    # cache (54-72 us), where a program of 80 such products read it from memory (95 us)
    cal = calibrate._Calibration(quick=False, progress=False)
    reads: list = []

    def cold_time(kernel, args, attrs, weight=1, deep=False):
        reads.append((args[0].shape[0], deep))
        return 1e-6 * args[0].shape[0]

    cal.cold_time, cal.step = cold_time, lambda info, n=1: None
    cal._gemm_grid = lambda: [(1, 16, 16), (16, 16, 16), (128, 16, 16)]
    cal._one_row_grid = lambda: []  # (measured deep too: test_one_row_products_are_measured_...)
    cal.gemm()
    assert reads == [(1, True), (16, True), (128, False)]
    assert calibrate.DEEP_ROWS == 16
    assert [row[:3] for row in cal.data["gemm"]] == [[1, 16, 16], [16, 16, 16], [128, 16, 16]]
    assert cal._pool is None  # dropped until the fused ratios read deep again


def test_the_calibrations_progress_counts_each_measurement_once(monkeypatch, tmp_path):
    # its total was an estimate: a full calibration ended at "measurement 786/784"
    seen = []
    real_run = calibrate._Calibration.run

    def run(self):
        data = real_run(self)
        seen.append((self.phase.count, self.phase.total))
        return data

    monkeypatch.setattr(calibrate._Calibration, "run", run)
    calibrate.calibrate(quick=True, path=str(tmp_path / "p.json"), progress=False, attempts=1)
    assert seen and all(count == total for count, total in seen)
    cal = calibrate._Calibration(quick=False, progress=False)
    made = cal._fused_other_ops()
    assert made and set(made) <= set(cal._fused_makers())
