"""Small programs under the ``cpu`` model: broadcasting binary ops and a bias on the last axis
priced by their own calibrated curves, the per-program overhead of a program run after other
work, and fused kernels whose bookkeeping costs no more than the steps they fuse (in place only
where the result fits and no input is written)."""

import json

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph import calibrate, cpu_cost
from relaygraph.egraph.cpu_cost import BROADCAST, LAST_AXIS, curve_at, default_profile
from relaygraph.ops import fused_ops, lookup

T = rg.TensorType


@pytest.fixture(scope="module")
def model():
    return default_profile(progress=False)


def _with_curves(model, **curves):
    data = dict(model.profile.data, curves=dict(model.profile.data["curves"], **curves))
    return cpu_cost.CpuCost(cpu_cost.Profile(data))


def test_the_calibration_measures_broadcast_and_last_axis_curves(model):
    curves = model.profile.data["curves"]
    for name in (f"add{BROADCAST}", f"nn.bias_add{LAST_AXIS}"):
        assert name in curves and len(curves[name]) >= 2
        assert all(t > 0 for _, t in curves[name])
    specs = calibrate._curve_specs()
    (x, b), attrs = specs[f"nn.bias_add{LAST_AXIS}"](np.random.default_rng(0), 4096)
    assert x.ndim == 2 and b.shape == (x.shape[1],) and attrs == {"axis": -1}
    (x, v), _ = specs[f"add{BROADCAST}"](np.random.default_rng(0), 4096)
    assert v.shape == (x.shape[1],) and x.size == 4096


def test_calibrate_cli_writes_the_new_curves(tmp_path, capsys):
    path = tmp_path / "p.json"
    assert main(["calibrate", "--quick", "--profile", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["key"]["format"] == cpu_cost.FORMAT == 47
    assert f"add{BROADCAST}" in data["curves"] and f"nn.bias_add{LAST_AXIS}" in data["curves"]
    assert data["program"] >= 0


def test_a_broadcasting_binary_op_is_priced_by_the_broadcast_curve(model):
    same = [[16.0, 1e-6], [1e6, 1e-3]]
    m = _with_curves(model, add=same, multiply=[[16.0, 2e-6], [1e6, 2e-3]],
                     **{f"add{BROADCAST}": [[16.0, 1.5e-6], [1e6, 1.5e-3]]})
    x, row = T((64, 256), "float32"), T((256,), "float32")
    n = 64 * 256
    assert m.kernel("add", {}, [x, row], x) == pytest.approx(curve_at([[16.0, 1.5e-6], [1e6, 1.5e-3]], n))
    # another binary op pays the same broadcasting share over its own curve
    assert m.kernel("multiply", {}, [x, row], x) == pytest.approx(1.5 * m.kernel("multiply", {}, [x, x], x))
    # equal shapes take the op's own curve (a scalar operand its own share: SCALAR)
    assert m.kernel("add", {}, [x, x], x) == pytest.approx(curve_at(same, n))
    # a fused add on a bias is priced from its broadcasting parts
    both = m.kernel("fused.add_relu", {}, [x, row], x)
    alone = m.kernel("fused.add_relu", {}, [x, x], x)
    assert both > alone
    assert cpu_cost.broadcasts([x, row]) and not cpu_cost.broadcasts([x, x])
    assert not cpu_cost.broadcasts([x, T((), "float32")]) and not cpu_cost.broadcasts([x])


def test_a_bias_on_the_last_axis_is_priced_by_its_own_curve(model):
    nchw, last = [[16.0, 3e-6], [1e6, 3e-3]], [[16.0, 2e-6], [1e6, 2e-3]]
    m = _with_curves(model, **{"nn.bias_add": nchw, f"nn.bias_add{LAST_AXIS}": last})
    dense_out = T((8, 64), "float32")
    for axis in (-1, 1):  # the last axis of a 2-D output, however it is spelled
        t = m.kernel("nn.bias_add", {"axis": axis}, [dense_out, T((64,), "float32")], dense_out)
        assert t == pytest.approx(curve_at(last, 8 * 64))
    image = T((1, 64, 4, 4), "float32")
    t = m.kernel("nn.bias_add", {"axis": 1}, [image, T((64,), "float32")], image)
    assert t == pytest.approx(curve_at(nchw, 64 * 16))
    # a profile without the curve falls back to the op's own
    data = dict(m.profile.data, curves={k: v for k, v in m.profile.data["curves"].items()
                                        if k != f"nn.bias_add{LAST_AXIS}"})
    old = cpu_cost.CpuCost(cpu_cost.Profile(data))
    t = old.kernel("nn.bias_add", {"axis": -1}, [dense_out, T((64,), "float32")], dense_out)
    assert t == pytest.approx(curve_at(nchw, 8 * 64))


class _FakeClock:
    """A clock that advances one unit per reading, and ``work`` units per call of ``spend``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now

    def spend(self, work: float) -> None:
        self.now += work


def test_single_shots_time_one_call_after_the_other_less_the_clocks_reading():
    cal = calibrate._Calibration(quick=True, progress=False)
    clock = _FakeClock()
    cal.timer = clock
    others = []
    t = cal.single_shots(lambda: clock.spend(5.0), lambda: others.append(clock.spend(100.0)), rounds=7)
    assert t == pytest.approx(5.0)  # the other call's 100 units and the clock's own unit left out
    assert len(others) == 3 * 7


def test_the_program_overhead_is_timed_as_programs_are(monkeypatch):
    # a program runs after other work: its overhead is taken from single calls alternated with
    # another plan, not from a loop of the same call (which finds everything in cache)
    monkeypatch.setattr(calibrate._Calibration, "single_shots", lambda self, fn, other, rounds=0: 0.5)
    cal = calibrate._Calibration(quick=True, progress=False)
    cal.dispatch()
    assert cal.data["program"] == pytest.approx(0.5, rel=0.01)
    monkeypatch.setattr(calibrate._Calibration, "single_shots", lambda self, fn, other, rounds=0: 0.0)
    cal = calibrate._Calibration(quick=True, progress=False)
    cal.dispatch()
    assert cal.data["program"] < 0.01  # the looped time, when single calls are no slower


@pytest.mark.parametrize("shape, other", [
    ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (1, 3, 4)), ((2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), ()), ((2, 3, 4), (3,)), ((2, 1, 4), (3, 4)), ((4,), (2, 4)), ((1,), (5,)),
    ((5,), (1,)), ((2, 3, 4), (2, 1, 1)), ((2, 3, 4), (5, 2, 3, 4)),
])
def test_fits_agrees_with_numpy_broadcasting(shape, other):
    try:
        expected = np.broadcast_shapes(shape, other) == shape
    except ValueError:
        expected = False
    assert fused_ops._fits(shape, other) is expected


def test_is_input_sees_an_input_that_is_the_result_or_a_view_of_it():
    fresh = np.ones((4, 8), np.float32)
    other = np.ones((4, 8), np.float32)
    assert not fused_ops._is_input(fresh, [other, np.ones(8, np.float32)])
    assert fused_ops._is_input(fresh, [other, fresh])
    assert fused_ops._is_input(fresh, [other, fresh[1:]])
    assert fused_ops._is_input(fresh, [fresh.reshape(-1)])
    view = other[:2]  # a result that is a view of an input is never written
    assert fused_ops._is_input(view, [other])
    assert not fused_ops._is_input(view, [fresh])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_fused_add_relu_on_a_bias_leaves_its_inputs_and_matches_the_parts(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 8)) * 4).astype(dtype)
    b = (rng.standard_normal(8) * 4).astype(dtype)
    x0, b0 = x.copy(), b.copy()
    out = lookup("fused.add_relu").kernel([x, b], {})
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.maximum(x0 + b0, 0))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(b, b0)


def test_fused_dense_bias_relu_and_an_in_place_residual_add_match_their_parts():
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 16), (8, 16), (8,)))
    out = lookup("fused.dense_bias_relu").kernel([x, w, b], {})
    np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-6)
    # the residual add broadcasts into the convolution's output in place, or falls back when
    # the addend would widen it
    data, weight = rng.standard_normal((1, 4, 5, 5)).astype(np.float32), rng.standard_normal(
        (6, 4, 3, 3)).astype(np.float32)
    conv = lookup("nn.conv2d").kernel([data, weight], {"padding": (1, 1)})
    for addend in (rng.standard_normal((1, 6, 1, 1)), rng.standard_normal((2, 6, 5, 5))):
        addend = addend.astype(np.float32)
        got = lookup("fused.conv2d_add").kernel([data, weight, addend], {"padding": (1, 1)})
        np.testing.assert_allclose(got, conv + addend, rtol=1e-5, atol=1e-5)


def test_an_optimized_small_mlp_evaluates_as_the_original(model):
    mod, params = rg.zoo.get("residual-mlp")
    res = rg.optimize(mod, params=params, cost="cpu", time_limit=20, progress=False)
    x = np.random.default_rng(2).standard_normal((1, 64)).astype(np.float32)
    from relaygraph.egraph.optimize import bind_params

    bound = bind_params(mod, params, "main")
    np.testing.assert_allclose(rg.evaluate(res.module, x), rg.evaluate(bound, x), rtol=1e-5, atol=1e-6)


def _kn_program(weight_const: bool):
    from relaygraph.ir.expr import Function, const, var
    from relaygraph.ops.builders import make_call

    rng = np.random.default_rng(3)
    w_data = rng.standard_normal((12, 8)).astype(np.float32)
    x = var("x", T((2, 8), "float32"))
    params = [x]
    if weight_const:
        w = const(w_data)
    else:
        w = var("w", T((12, 8), "float32"))
        params.append(w)
    body = make_call("nn.matmul", x, make_call("transpose", w, axes=[1, 0]))
    return rg.IRModule.from_expr(Function(params, body)), w_data


def test_a_transpose_of_a_constant_is_computed_once_contiguous_when_the_plan_is_made():
    from relaygraph.eval.executor import FOLDED_AT_COMPILE, compile_function, folded_at_compile

    assert "transpose" in FOLDED_AT_COMPILE
    mod, w = _kn_program(weight_const=True)
    func = rg.infer_type(mod)["main"]
    plan = compile_function(func)
    assert plan.labels == ["nn.matmul"]  # no transpose left to run
    folded = [v for _, v in plan.constants if v.shape == (8, 12)]
    assert len(folded) == 1 and folded[0].flags.c_contiguous
    np.testing.assert_array_equal(folded[0], w.T)
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(rg.evaluate(mod, x), x @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rg.evaluate(mod, x, executor=False), x @ w.T, rtol=1e-5, atol=1e-6)
    assert folded_at_compile(func.body.args[1])
    # a transpose of an input runs with the program
    mod, w = _kn_program(weight_const=False)
    func = rg.infer_type(mod)["main"]
    assert compile_function(func).labels == ["transpose", "nn.matmul"]
    assert not folded_at_compile(func.body.args[1])
    np.testing.assert_allclose(rg.evaluate(mod, x, w), x @ w.T, rtol=1e-5, atol=1e-6)


def test_profile_and_predict_leave_out_what_the_plan_computes_when_made(model):
    mod, _ = _kn_program(weight_const=True)
    p = rg.profile(mod, runs=2, progress=False)
    assert [n.op for n in p.nodes] == ["nn.matmul"]
    from relaygraph.egraph.program_profile import predict

    assert predict(mod) == pytest.approx(p.predicted_program)
    live, _ = _kn_program(weight_const=False)
    assert [n.op for n in rg.profile(live, runs=2, progress=False).nodes] == ["transpose", "nn.matmul"]


def test_per_channel_operands_are_told_apart_from_rows_and_single_values():
    act, vec = T((1, 256, 14, 14), "float32"), T((256, 1, 1), "float32")
    assert cpu_cost.per_channel([act, vec, vec], act)
    assert cpu_cost.per_channel([vec, act], act)  # either side
    rows, bias = T((128, 768), "float32"), T((768,), "float32")
    assert not cpu_cost.per_channel([rows, bias], rows)  # a bias along the last axis: a row at a time
    assert not cpu_cost.per_channel([act, T((), "float32")], act)  # a single value
    assert not cpu_cost.per_channel([act, T((1, 1, 1), "float32")], act)
    assert not cpu_cost.per_channel([act, act], act)
    column = T((1, 256, 14, 1), "float32")
    assert not cpu_cost.per_channel([column, T((256, 1, 1), "float32")], column)  # rows of one value


def test_the_calibration_measures_fused_ops_on_per_channel_operands(model):
    fused = model.profile.data["fused"]
    for name in cpu_cost.PER_CHANNEL_FUSED:
        assert fused.get(name) and fused.get(name + cpu_cost.CHANNEL)
        assert all(ratio > 0 for *_, ratio in fused[name + cpu_cost.CHANNEL])
    cal = calibrate._Calibration(quick=True, progress=False)
    makers = cal._fused_makers()
    assert {n + cpu_cost.CHANNEL for n in cpu_cost.PER_CHANNEL_FUSED} <= set(cal._fused_other_ops())
    for name in cpu_cost.PER_CHANNEL_FUSED:
        make, _ = makers[name + cpu_cost.CHANNEL]
        x, *vectors = make(50176)
        assert x.shape == (1, 256, 14, 14) and len(vectors) == lookup(name).num_inputs - 1
        assert all(v.shape == (256, 1, 1) for v in vectors)
        assert cpu_cost.per_channel([rg.TensorType(a.shape, "float32") for a in (x, *vectors)],
                                    rg.TensorType(x.shape, "float32"))


def test_a_fused_op_on_per_channel_operands_takes_its_per_channel_ratio(model):
    n = 256 * 14 * 14
    fused = dict(model.profile.data["fused"], **{"fused.multiply_add": [[16, 1.0], [1 << 21, 1.0]],
                                                 "fused.multiply_add@chan": [[16, 2.5], [1 << 21, 2.5]]})
    m = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data, fused=fused)))
    act, vec = T((1, 256, 14, 14), "float32"), T((256, 1, 1), "float32")
    base, features = m.fused_base("fused.multiply_add", {}, [act, vec, vec], act)
    assert features == (n,)
    assert m.kernel("fused.multiply_add", {}, [act, vec, vec], act) == pytest.approx(2.5 * base)
    equal, _ = m.fused_base("fused.multiply_add", {}, [act, act, act], act)
    assert m.kernel("fused.multiply_add", {}, [act, act, act], act) == pytest.approx(equal)
    # a profile without the per-channel rows prices both forms by the one ratio
    del fused["fused.multiply_add@chan"]
    m = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data, fused=fused)))
    assert m.kernel("fused.multiply_add", {}, [act, vec, vec], act) == pytest.approx(base)


def test_the_dispatch_is_settled_over_the_kernels_as_the_curves_price_them():
    # the curves time tiny kernels cycled with the others, slower than looped alone: a dispatch
    # taken over the looped kernels counted that share twice (diamond-chain priced 1.2x its time)
    cal = calibrate._Calibration(quick=True, progress=False)
    x = np.ones((8, 32), np.float32)
    calls = []
    for name, args in (("add", [x, x]), ("tanh", [x])):
        kernel, attrs = calibrate._call(name, args)
        calls.append((name, kernel, args, attrs))
    cal._dispatch_plan = {"extra": 2e-6, "calls": calls}
    cal.data["dispatch"], cal.data["program"] = 2e-6, 9e-6
    cal.data["curves"]["add"] = [[16.0, 0.6e-6], [256.0, 0.7e-6], [1e6, 1e-3]]
    cal._settle_dispatch()
    assert cal.data["dispatch"] == 2e-6  # no tanh curve: the looped kernels stay the reference
    cal.data["curves"]["tanh"] = [[16.0, 0.8e-6], [256.0, 0.9e-6], [1e6, 2e-3]]
    cal._settle_dispatch()
    model = cpu_cost.CpuCost(cpu_cost.Profile(dict(cal.data, key={})))
    t = T((8, 32), "float32")
    priced = (model.kernel("add", {}, [t, t], t) + model.kernel("tanh", {}, [t], t)) / 2
    assert priced == pytest.approx(0.8e-6)
    share = cal.data["dispatch_share"]
    assert share < priced  # the curves' price less the kernels looped alone, now
    assert cal.data["dispatch"] == pytest.approx(2e-6 - share)
    assert cal.data["program"] == 9e-6  # the per-program cost keeps the dispatch part's figures


def test_a_calibration_settles_its_dispatch_after_the_curves(model):
    data = model.profile.data
    assert data["dispatch"] > 0 and data["dispatch_share"] < 1e-5
