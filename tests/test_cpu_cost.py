"""The calibrated cpu cost model: profile keying and refusal, calibration, per-node costs, and
``relaygraph calibrate`` / ``relaygraph profile`` / ``rg.profile``.

The suite's profile is the quick calibration conftest.py points ``$RELAYGRAPH_PROFILE_DIR`` at;
tests that need a missing or foreign profile point it elsewhere."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.egraph import cpu_cost
from relaygraph.egraph.cost import COST_MODELS
from relaygraph.egraph.cpu_cost import ProfileError, curve_at, default_profile, load_profile, machine_key

T = rg.TensorType

GROUPS = """#[version = "0.0.5"]
def @main(%x: Tensor[(16, 32), float32], %w: Tensor[(24, 32), float32], %b: Tensor[(24), float32]) {
  %0 = fn (%p0: Tensor[(16, 32), float32], %p1: Tensor[(24, 32), float32], %p2: Tensor[(24), float32],
           Primitive=1) {
    %1 = nn.dense(%p0, %p1, units=None);
    nn.bias_add(%1, %p2, axis=-1)
  };
  %2 = %0(%x, %w, %b);
  %3 = fn (%q0: Tensor[(16, 24), float32], Primitive=1) {
    %4 = multiply(%q0, %q0);
    %5 = add(%4, %q0);
    tanh(%5)
  };
  %3(%2)
}
"""


@pytest.fixture(scope="module")
def model():
    return default_profile(progress=False)


def _foreign(tmp_path, **changes):
    data = json.loads(Path(cpu_cost.profile_path()).read_text())
    data["key"].update(changes)
    path = tmp_path / cpu_cost.profile_file()
    path.write_text(json.dumps(data))
    return path


def test_profile_is_keyed_by_machine_build_and_threads(model):
    key = machine_key()
    assert {"format", "cpu", "cores", "numpy", "blas", "blas threads", "numexpr threads"} <= set(key)
    assert key["numpy"] == np.__version__ and key["cores"] >= 1
    assert model.profile.key == key and model.profile.quick  # the suite's quick profile


def test_foreign_profile_is_refused_naming_what_differs(tmp_path, model):
    path = _foreign(tmp_path, cpu="Some Other CPU", numpy="1.0.0", **{"blas threads": 64})
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert "Some Other CPU" in message and "numpy '1.0.0'" in message and "blas threads 64" in message
    assert f"this machine: {np.__version__!r}" in message and "relaygraph calibrate" in message
    assert "cores" not in message  # only what differs is named


def test_stale_format_is_refused(tmp_path, model):
    with pytest.raises(ProfileError, match="format 1"):
        load_profile(str(_foreign(tmp_path, format=1)))


def test_foreign_profile_refused_by_the_cli(tmp_path, monkeypatch, capsys, model):
    _foreign(tmp_path, blas="Some BLAS 0.1")
    assert main(["calibrate", "--check", "--profile", str(tmp_path / cpu_cost.profile_file())]) == 2
    err = capsys.readouterr().err
    assert "blas 'Some BLAS 0.1'" in err and "Traceback" not in err
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    assert main(["optimize", "--model", "residual-mlp", "--no-progress", "--no-check"]) == 2
    err = capsys.readouterr().err
    assert "another machine or build" in err and "Some BLAS 0.1" in err and "Traceback" not in err


def test_unreadable_profile_is_a_clear_error(tmp_path):
    bad = tmp_path / cpu_cost.profile_file()
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="cannot read the CPU profile"):
        load_profile(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(ProfileError, match="not a CPU profile"):
        load_profile(str(bad))


def test_no_calibrate_with_a_missing_profile_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    for argv in (["optimize", "--model", "residual-mlp", "--no-calibrate", "--no-progress"],
                 ["profile", "--model", "residual-mlp", "--no-calibrate"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "no CPU profile at" in err and "--no-calibrate" in err and "relaygraph calibrate" in err
        assert "Traceback" not in err
    with pytest.raises(ProfileError, match="calibration is off"):
        default_profile(calibrate=False)
    with pytest.raises(ProfileError, match="no CPU profile"):
        rg.profile(rg.zoo.get("residual-mlp")[0], calibrate=False)
    assert not (tmp_path / cpu_cost.profile_file()).exists()
    # another cost model needs no profile
    assert main(["optimize", "--model", "residual-mlp", "--cost", "latency", "--no-calibrate",
                 "--no-progress", "--no-check", "--iter-limit", "1"]) == 0


def test_missing_profile_calibrates_once_with_progress(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYGRAPH_CALIBRATE", "quick")
    assert main(["profile", "--model", "residual-mlp", "--runs", "2"]) == 0
    first = capsys.readouterr()
    assert "calibrate: measuring this machine's numpy executor (quick)" in first.err
    assert "calibrate: done" in first.err and (tmp_path / cpu_cost.profile_file()).exists()
    assert "op kind" in first.out
    assert main(["profile", "--model", "residual-mlp", "--runs", "2"]) == 0
    assert "calibrate:" not in capsys.readouterr().err  # measured once, then read


def test_calibrate_cli_writes_a_quick_profile(tmp_path, capsys):
    path = tmp_path / "p.json"
    assert main(["calibrate", "--quick", "--profile", str(path)]) == 0
    out = capsys.readouterr().out
    assert "calibrated in" in out and "valid for" in out and "GFLOP/s" in out
    data = json.loads(path.read_text())
    assert data["quick"] is True and data["key"] == machine_key()
    assert main(["calibrate", "--check", "--profile", str(path)]) == 0
    assert "matches this machine" in capsys.readouterr().out


def test_quick_calibration_figures_are_sane(model):
    p = model.profile
    assert 0 < p.dispatch < 1e-3
    for name in ("add", "erf", "nn.layer_norm", "nn.softmax", "transpose", "copy", "copy_strided",
                 "numexpr_1", "numexpr_4", "conv_grouped"):
        times = [t for _, t in p.curve(name)]
        assert times == sorted(times) and times[0] > 0, name  # more work never predicts less time
    assert len(p.gemm) >= 8 and len(p.bmm) >= 8
    assert {"fused.dense_bias", "fused.conv2d_bias", "fused.add_relu"} <= set(p.fused)
    assert all(row[-1] > 0 for rows in p.fused.values() for row in rows)
    assert p.conv and p.conv_transpose and all(row[-1] > 0 for row in p.conv + p.conv_transpose)
    # a larger matmul takes longer; the curve grows with work beyond its last point
    assert model.gemm_time(256, 256, 256) > model.gemm_time(16, 16, 16)
    big = p.curve("add")[-1]
    assert curve_at(p.curve("add"), big[0] * 4) == pytest.approx(big[1] * 4)


def test_cpu_cost_is_registered_per_node_and_optimize_default(model):
    from relaygraph.egraph import optimize as optimize_module  # the submodule, not the lazy name

    assert "cpu" in COST_MODELS and "cpu" in optimize_module.optimize.__defaults__
    cost = COST_MODELS["cpu"]
    x, w = T((64, 256), "float32"), T((256, 256), "float32")
    dense = cost("nn.dense", {}, [x, w], T((64, 256), "float32"))
    add = cost("add", {}, [x, x], x)
    assert dense > add > model.profile.dispatch
    assert cost("Var", {}, [], x) == 0.0 and cost("Tuple", {}, [x, x], None) == 0.0
    fused = cost("fused.dense_bias", {}, [x, w, T((256,), "float32")], T((64, 256), "float32"))
    assert fused > model.profile.dispatch
    with pytest.raises(rg.RelayError, match=r"'\?' dimension"):
        cost("add", {}, [T((rg.Any, 4), "float32")] * 2, T((rg.Any, 4), "float32"))


def test_optimize_uses_cpu_by_default(model):
    mod, params = rg.zoo.get("residual-mlp")
    res = rg.optimize(mod, params=params, check=False, iter_limit=2)
    assert res.cost_model == "cpu" and 0 < res.cost_after <= res.cost_before * 1.0001


def test_profile_output_shape(model):
    mod, params = rg.zoo.get("residual-mlp")
    prof = rg.profile(mod, params, runs=3, progress=False)
    ops = {n.op for n in prof.nodes}
    assert "nn.dense" in ops and prof.by_op["nn.dense"]["calls"] == 3
    assert set(prof.by_kind) <= {"gemm", "elementwise", "reduce", "layout", "tuple", "fused", "other"}
    assert sum(g["calls"] for g in prof.by_kind.values()) == len(prof.nodes)
    assert all(n.measured > 0 and n.predicted > 0 for n in prof.nodes)
    assert prof.measured_program > 0 and prof.predicted_program > 0
    table = prof.table()
    assert table.startswith("program: measured") and "op kind" in table and "nn.dense" in table
    assert "pred/meas" in table and "quick calibration" in table
    assert json.loads(json.dumps(prof.to_json()))["runs"] == 3


def test_profile_of_primitive_groups(model):
    prof = rg.profile(rg.parse(GROUPS), runs=2, progress=False)
    labels = [n.label for n in prof.nodes]
    assert labels == ["fused.dense_bias", "fused(multiply, add, tanh)"]
    assert {n.kind for n in prof.nodes} == {"fused"}
    x = np.random.default_rng(0).standard_normal
    values = [x((16, 32)).astype("float32"), x((24, 32)).astype("float32"), x(24).astype("float32")]
    assert rg.profile(rg.parse(GROUPS), inputs=values, runs=1, progress=False).nodes[0].measured > 0


def test_profile_cli_prints_and_writes_json(tmp_path, capsys, model):
    out_json = tmp_path / "p.json"
    assert main(["profile", "--model", "residual-mlp", "--runs", "2", "--top", "2",
                 "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "profiling residual-mlp" in out and "op kind" in out and "more ops" in out
    assert json.loads(out_json.read_text())["nodes"]


@pytest.mark.parametrize("argv, message", [
    (["profile", "--model", "residual-mlp", "--runs", "0"], "--runs must be a positive integer"),
    (["profile"], "give a Relay file or --model"),
    (["profile", "--model", "nope"], "unknown model 'nope'"),
])
def test_profile_bad_input(argv, message, capsys, model):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_profile_of_control_flow_is_refused(tmp_path, capsys, model):
    path = tmp_path / "if.relay"
    path.write_text('#[version = "0.0.5"]\ndef @main(%c: bool, %x: Tensor[(2), float32]) {\n'
                    '  if (%c) { add(%x, %x) } else { %x }\n}\n')
    assert main(["profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "profile runs dataflow programs" in err and "If" in err and "Traceback" not in err


def test_clock_is_cpu_time_only_on_one_thread():
    assert cpu_cost.clock_of({"blas threads": 1, "numexpr threads": 1}) == "cpu"
    assert cpu_cost.clock_of({"blas threads": 1, "numexpr threads": 0}) == "cpu"
    assert cpu_cost.clock_of({"blas threads": 2, "numexpr threads": 1}) == "wall"
    assert cpu_cost.clock_of({"blas threads": 1, "numexpr threads": 4}) == "wall"
    import time

    assert cpu_cost.timer("cpu") is time.process_time and cpu_cost.timer("wall") is time.perf_counter


def test_nearest_takes_an_exact_row_and_stays_between_neighbours():
    rows = [[1, 1, 2.0], [4, 4, 8.0], [16, 16, 1.0]]
    assert cpu_cost.nearest(rows, (4, 4)) == 8.0
    between = cpu_cost.nearest(rows, (2, 2), k=2)
    assert 2.0 < between < 8.0
    assert cpu_cost.nearest(rows, (1e6, 1e6), k=1) == 1.0  # far away: the nearest row's value


def test_profile_has_in_program_factors_per_kind(model):
    factors = model.profile.in_program
    assert {"kind:conv", "kind:gemm", "kind:elementwise"} <= set(factors)
    assert all(0.5 <= f <= 3.0 for f in factors.values())
    x, w = T((16, 64), "float32"), T((64, 64), "float32")
    assert model("nn.dense", {}, [x, w], x) == pytest.approx(
        model.profile.dispatch + model.kernel("nn.dense", {}, [x, w], x) * model.factor("nn.dense"))
    assert model.factor("nn.dense") == factors.get("nn.dense", factors["kind:gemm"])
    # an op the calibration's programs did not run takes its kind's factor; a fused op its anchor's
    y = T((1, 4, 8, 8), "float32")
    assert model.factor("nn.conv2d_transpose") == factors["kind:conv"]
    assert model.factor("fused.dense_bias") == factors.get("nn.dense", factors["kind:gemm"])
    assert model.factor("sigmoid") == factors["kind:elementwise"]
    assert model("negative", {}, [y], y) > model.profile.dispatch


def test_fused_convolution_costs_its_convolution_times_the_measured_epilogue(model):
    attrs = {"padding": (1, 1)}
    x, w, b = T((1, 16, 28, 28), "float32"), T((16, 16, 3, 3), "float32"), T((16,), "float32")
    out = T((1, 16, 28, 28), "float32")
    conv = model.kernel("nn.conv2d", attrs, [x, w], out)
    full = rg.ops.lookup("fused.conv2d_bias").resolve(attrs)
    fused = model.kernel("fused.conv2d_bias", full, [x, w, b], out)
    features = cpu_cost.conv_features(16, 16, 3, 3, 16 * 784)
    ratio = cpu_cost.nearest(model.profile.fused["fused.conv2d_bias"], features)
    assert fused == pytest.approx(conv * ratio)
    # the fused op is priced by what its kernel measured, not by its parts' sum
    parts = conv + model.kernel("nn.bias_add", {"axis": 1}, [out, b], out)
    assert fused != pytest.approx(parts)


def test_conv2d_transpose_has_its_own_calibration(model):
    attrs = rg.ops.lookup("nn.conv2d_transpose").resolve({"strides": (2, 2), "padding": (1, 1)})
    x, w = T((1, 16, 4, 4), "float32"), T((16, 8, 4, 4), "float32")
    out = T((1, 8, 8, 8), "float32")
    t = model.kernel("nn.conv2d_transpose", attrs, [x, w], out)
    # the calibrated shape is this one: the prediction is its measured time over the estimate
    assert t > model.profile.conv_call
    assert model.profile.conv_transpose[0][:4] == list(cpu_cost.conv_features(8, 16, 4, 4, 8 * 64))
    bigger = model.kernel("nn.conv2d_transpose", attrs, [T((1, 64, 16, 16), "float32"), T((64, 32, 4, 4),
                                                                                           "float32")],
                          T((1, 32, 32, 32), "float32"))
    assert bigger > t


def test_conv2d_transpose_rows_are_each_over_the_estimate_without_a_ratio(monkeypatch, model):
    # each calibrated shape's prediction is the time measured there, for each weight layout: the
    # ratio is over the bare estimate, never over one that already holds earlier rows' ratios
    from relaygraph.egraph import calibrate

    shapes = [(16, 4, 8, 4, 2, 1), (32, 8, 16, 4, 2, 1), (8, 8, 8, 3, 1, 1)]
    times = {"IOHW": [2e-3, 5e-3, 1e-3], "IHWO": [1e-3, 4e-3, 3e-3]}
    monkeypatch.setattr(calibrate._Calibration, "_transpose_shapes", lambda self: shapes)
    seen = iter(range(len(shapes)))
    def cold_times(self, calls, repeats=None):
        i = next(seen)
        return [times[a.get("kernel_layout") or "IOHW"][i] for _, _, a in calls]

    monkeypatch.setattr(calibrate._Calibration, "cold_times", cold_times)
    cal = calibrate._Calibration(quick=True, progress=False)
    data = json.loads(Path(cpu_cost.profile_path()).read_text())
    cal.data = dict(data, conv_transpose=[], conv_transpose_last=[])
    cal.conv_transpose()
    profiled = cpu_cost.CpuCost(cpu_cost.Profile(dict(cal.data, key={})))
    for k, (c, size, o, kernel, stride, pad) in enumerate(shapes):
        for layout, w in (("IOHW", (c, o, kernel, kernel)), ("IHWO", (c, kernel, kernel, o))):
            attrs = rg.ops.lookup("nn.conv2d_transpose").resolve(
                {"strides": (stride, stride), "padding": (pad, pad), "kernel_layout": layout})
            side = (size - 1) * stride + kernel - 2 * pad
            got = profiled.kernel("nn.conv2d_transpose", attrs, [T((1, c, size, size), "float32"),
                                                                 T(w, "float32")],
                                  T((1, o, side, side), "float32"))
            assert got == pytest.approx(times[layout][k]), (layout, k)


def test_an_ihwo_transposed_convolution_is_priced_from_its_own_rows(model):
    attrs = {layout: rg.ops.lookup("nn.conv2d_transpose").resolve(
        {"strides": (2, 2), "padding": (1, 1), "kernel_layout": layout}) for layout in ("IOHW", "IHWO")}
    x, out = T((1, 16, 4, 4), "float32"), T((1, 8, 8, 8), "float32")
    iohw = model.kernel("nn.conv2d_transpose", attrs["IOHW"], [x, T((16, 8, 4, 4), "float32")], out)
    ihwo = model.kernel("nn.conv2d_transpose", attrs["IHWO"], [x, T((16, 4, 4, 8), "float32")], out)
    assert model.profile.conv_transpose_last and 0 < ihwo < math.inf and ihwo != pytest.approx(iohw)
    # a profile without the rows never prices the layout below what it cannot know
    bare = cpu_cost.CpuCost(cpu_cost.Profile(dict(json.loads(Path(cpu_cost.profile_path()).read_text()),
                                                  key={}, conv_transpose_last=[])))
    w_ihwo = T((16, 4, 4, 8), "float32")
    assert bare.kernel("nn.conv2d_transpose", attrs["IHWO"], [x, w_ihwo], out) == math.inf
    # a kernel path that convolves the spread input (negative padding) takes the IOHW rows
    negative = rg.ops.lookup("nn.conv2d_transpose").resolve(
        {"strides": (2, 2), "padding": (1, -1, 1, 1), "kernel_layout": "IHWO"})
    assert bare.kernel("nn.conv2d_transpose", negative, [x, T((16, 4, 4, 8), "float32")],
                       T((1, 8, 8, 10), "float32")) < math.inf


@pytest.mark.parametrize("case", ["negative padding", "float16"])
def test_conv2d_transpose_priced_as_the_path_its_kernel_takes(model, case):
    # one group but a case the kernel convolves the spread input for: priced as that path (the
    # stride-2 spread convolution does 4x the multiplications of the product), not as the product
    from relaygraph.ops.conv import pad4, transpose_by_gemm

    dtype = "float16" if case == "float16" else "float32"
    padding = (1, -1, 1, 1) if case == "negative padding" else (1, 1)
    x, w = T((1, 64, 16, 16), dtype), T((64, 32, 4, 4), dtype)
    spread = rg.ops.lookup("nn.conv2d_transpose").resolve({"strides": (2, 2), "padding": padding})
    gemm = rg.ops.lookup("nn.conv2d_transpose").resolve({"strides": (2, 2), "padding": (1, 1)})
    out = T((1, 32, 32, 34 if case == "negative padding" else 32), dtype)
    assert not transpose_by_gemm(1, pad4(padding), dtype, dtype)
    assert transpose_by_gemm(1, pad4((1, 1)), "float32", "float32")
    by_spread = model.kernel("nn.conv2d_transpose", spread, [x, w], out)
    f32 = [T(x.shape, "float32"), T(w.shape, "float32")]
    by_gemm = model.kernel("nn.conv2d_transpose", gemm, f32, T((1, 32, 32, 32), "float32"))
    assert by_spread > 1.5 * by_gemm


def test_profile_runs_function_literals_and_lets(model):
    """The zoo LSTM calls let-bound function literals, which the executor inlines: so does profile."""
    mod, params = rg.zoo.get("lstm", small=True)
    prof = rg.profile(mod, params, runs=2, progress=False)
    assert prof.by_op["nn.dense"]["calls"] == 2 * 3 and prof.measured_program > 0
    assert prof.clock == model.profile.clock
    assert rg.egraph.program_profile.predict(mod, params) == pytest.approx(prof.predicted_program)
    flat = rg.egraph.program_profile.dataflow_form(rg.infer_type(mod))
    assert not any(isinstance(n, (rg.ir.expr.Let, rg.ir.expr.Function))
                   for n in rg.ir.traversal.iter_post_order(flat["main"].body))
    inputs = rg.zoo.example_inputs(mod, params)
    before = rg.evaluate(mod, *[params.get(p.name_hint, inputs.get(p.name_hint)) for p in mod["main"].params])
    after = rg.evaluate(flat, *[params.get(p.name_hint, inputs.get(p.name_hint)) for p in mod["main"].params])
    np.testing.assert_allclose(np.asarray(after), np.asarray(before), rtol=1e-6)


def test_profile_cli_of_the_lstm(capsys, model):
    assert main(["profile", "--model", "lstm", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "nn.dense" in out and "sigmoid" in out


def test_time_programs_alternates_and_takes_the_probe(model):
    from relaygraph.egraph.calibrate import Probe
    from relaygraph.egraph.optimize import bind_params
    from relaygraph.egraph.program_profile import time_programs

    mod, params = rg.zoo.get("residual-mlp")
    bound = rg.infer_type(bind_params(mod, params, "main"))
    inputs = rg.eval.inputs.random_inputs(bound, 0)
    probe = Probe(model.profile.clock)
    by_clock, by_wall, probed = time_programs([bound, bound], inputs, runs=3, probe=probe)
    assert len(by_clock) == len(by_wall) == 2 and all(t > 0 for t in by_clock + by_wall)
    assert probed > 0 and model.profile.probe > 0  # the calibration took the probe too
    assert time_programs([bound], inputs, runs=1)[2] is None
    with pytest.raises(rg.RelayError, match="runs must be a positive integer"):
        time_programs([bound], inputs, runs=0)
    with pytest.raises(rg.RelayError, match="at least one program"):
        time_programs([], inputs)


def test_time_programs_rotates_the_order_and_stops_at_a_whole_rotation(monkeypatch):
    import relaygraph.eval as rg_eval
    from relaygraph.egraph.program_profile import time_programs

    calls = []
    monkeypatch.setattr(rg_eval, "evaluate", lambda m, *a, entry="main": calls.append(m))
    by_clock, _, _ = time_programs(["a", "b", "c"], [], runs=2, clock="wall")
    assert calls[:3] == ["a", "b", "c"]  # the warm-up
    rounds = [calls[i:i + 3] for i in range(3, len(calls), 3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert len(by_clock) == 3
    calls.clear()
    time_programs(["a", "b"], [], runs=3, clock="wall")
    assert calls[2:] == ["a", "b", "b", "a", "a", "b", "b", "a"]
    calls.clear()
    time_programs(["a", "b"], [], runs=2, clock="wall", warm_up=False)  # the caller ran them
    assert calls == ["a", "b", "b", "a"]


def test_time_programs_runs_each_program_on_its_own_copies_of_the_constants(monkeypatch):
    """Hash-consing gives two programs holding the same weight values one array; timed side by
    side, each program (and each place of a program timed twice) reads its own copy, unless
    ``own_constants`` is off. The copies hold the same values and the programs the same results."""
    from relaygraph.egraph.program_profile import time_programs
    from relaygraph.eval.executor import Plan, compile_function

    w = np.random.default_rng(0).standard_normal((64, 32)).astype("float32")
    x = rg.var("x", shape=(4, 32))
    first = rg.IRModule.from_expr(rg.Function([x], rg.op.nn.relu(rg.op.nn.dense(x, rg.const(w)))))
    x2 = rg.var("x", shape=(4, 32))
    second = rg.IRModule.from_expr(rg.Function([x2], rg.op.nn.dense(x2, rg.const(w.copy()))))
    shared = [a for _, a in compile_function(first["main"]).constants]
    assert any(a is b for a in shared for _, b in compile_function(second["main"]).constants)

    own = compile_function(first["main"]).with_own_constants()
    copies = [a for _, a in own.constants]
    assert [a.tobytes() for a in copies] == [a.tobytes() for a in shared]
    assert not any(np.shares_memory(a, b) for a in copies for b in shared)
    data = np.random.default_rng(1).standard_normal((4, 32)).astype("float32")
    np.testing.assert_array_equal(own.run([data]), rg.evaluate(first, data))

    read: list = []
    made = Plan.with_own_constants

    def recording(plan):
        copy = made(plan)
        read.extend(a for _, a in copy.constants)
        return copy

    monkeypatch.setattr(Plan, "with_own_constants", recording)
    time_programs([first, second, first], [data], runs=1, clock="wall")
    assert len(read) == 3  # one weight per place, the twice-timed program's two apart
    assert not any(np.shares_memory(a, b) for i, a in enumerate(read) for b in read[i + 1:] + shared)
    read.clear()
    time_programs([first, second], [data], runs=1, clock="wall", own_constants=False)
    assert read == []


def test_time_programs_gives_each_programs_samples_round_by_round(monkeypatch):
    """``samples`` receives every program's samples by the clock, in the programs' order, one per
    round (a fake clock: each program advances it by its own cost)."""
    import relaygraph.eval as rg_eval
    from relaygraph.egraph import cpu_cost
    from relaygraph.egraph.program_profile import time_programs

    now = [0.0]
    cost = {"a": 1.0, "b": 3.0, "c": 2.0}

    def run(m, *args, entry="main"):
        now[0] += cost[m]
        cost[m] += 0.25  # each run of a program a little slower: sample k is round k's

    monkeypatch.setattr(rg_eval, "evaluate", run)
    monkeypatch.setattr(cpu_cost, "timer", lambda clock: lambda: now[0])
    samples: list = []
    walls: list = []
    by_clock, _, _ = time_programs(["a", "b", "c"], [], runs=3, clock="cpu", warm_up=False, samples=samples,
                                   wall_samples=walls)
    assert samples == [[1.0, 1.25, 1.5], [3.0, 3.25, 3.5], [2.0, 2.25, 2.5]]
    assert by_clock == [1.25, 3.25, 2.25]
    assert [len(w) for w in walls] == [3, 3, 3] and all(t >= 0 for w in walls for t in w)


def test_a_profile_of_another_version_is_made_anew_when_calibration_is_on(tmp_path, monkeypatch, capsys):
    """This machine's profile in another format (an older relaygraph wrote it) is never read: it
    is calibrated again, or refused with --no-calibrate; a foreign machine's is refused either way."""
    data = json.loads(Path(cpu_cost.profile_path()).read_text())
    old = {"key": dict(data["key"], format=cpu_cost.FORMAT - 2), "dispatch": 1e-6, "curves": {}}
    (tmp_path / cpu_cost.profile_file()).write_text(json.dumps(old))
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYGRAPH_CALIBRATE", "quick")
    with pytest.raises(cpu_cost.StaleProfileError, match=f"format {cpu_cost.FORMAT - 2}"):
        load_profile(str(tmp_path / cpu_cost.profile_file()))
    assert main(["optimize", "--model", "residual-mlp", "--no-calibrate", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"format {cpu_cost.FORMAT - 2}" in err and "relaygraph calibrate" in err and "Traceback" not in err
    cpu_cost.reset_default()
    try:
        fresh = default_profile(progress=False)
        assert fresh.profile.key == machine_key() and fresh.profile.conv
        stored = tmp_path / cpu_cost.profile_file()
        assert json.loads(stored.read_text())["key"]["format"] == cpu_cost.FORMAT
        # another machine's profile in an old format is still refused, naming what differs
        stored.write_text(json.dumps({**old, "key": dict(old["key"], cpu="Other")}))
        cpu_cost.reset_default()
        with pytest.raises(ProfileError, match="'Other'"):
            default_profile(progress=False)
    finally:
        cpu_cost.reset_default()


def test_each_thread_count_has_its_own_profile_file(tmp_path, monkeypatch):
    """A profile is valid for one BLAS/numexpr thread count, so each count has its own file and a
    one-thread run does not refuse (or overwrite) the two-thread profile beside it."""
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    paths = {}
    for blas, ne in ((1, 1), (2, 2), (2, 1)):
        counts = {"blas threads": blas, "numexpr threads": ne}
        monkeypatch.setattr(cpu_cost, "_threads", lambda c=counts: c)
        paths[blas, ne] = cpu_cost.profile_path()
    assert len(set(paths.values())) == 3
    assert all(os.path.dirname(p) == str(tmp_path) for p in paths.values())
    assert os.path.basename(paths[1, 1]) == "cpu-profile-blas1-numexpr1.json"
    assert cpu_cost.profile_path(str(tmp_path / "mine.json")) == str(tmp_path / "mine.json")


def test_fused_depthwise_convolution_costs_its_own_measured_epilogue(model):
    """A fused op on a depthwise convolution is priced by the ratio calibrated on depthwise
    shapes (its epilogue runs per block in cache), looked up by output size."""
    rows = model.profile.fused_grouped.get("fused.conv2d_bias_relu")
    assert rows and all(r[1] > 0 for r in rows)
    attrs = {"padding": (1, 1), "groups": 32, "channels": 32, "kernel_size": (3, 3)}
    x, w, b = T((1, 32, 28, 28), "float32"), T((32, 1, 3, 3), "float32"), T((32,), "float32")
    out = T((1, 32, 28, 28), "float32")
    conv = model.kernel("nn.conv2d", attrs, [x, w], out)
    full = rg.ops.lookup("fused.conv2d_bias_relu").resolve(attrs)
    fused = model.kernel("fused.conv2d_bias_relu", full, [x, w, b], out)
    assert fused == pytest.approx(conv * cpu_cost.nearest(rows, (32 * 784,)))


def test_a_1x1_convolution_without_padding_pays_its_own_fixed_cost(model):
    # the 1x1 path is one matrix product: the gathering path's fixed cost, counted in full, made
    # small 1x1 layers' calibrated ratios a tenth of what they are
    assert 0 < model.profile.conv_call_1x1
    data = dict(model.profile.data, conv_call=1e-3, conv_call_1x1=1e-7, conv=[[1, 1, 1, 1, 1.0]])
    m = cpu_cost.CpuCost(cpu_cost.Profile(data))
    attrs = {"padding": (0, 0, 0, 0), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    x, out = T((1, 8, 4, 4), "float32"), T((1, 8, 4, 4), "float32")
    one = m.kernel("nn.conv2d", attrs, [x, T((8, 8, 1, 1), "float32")], out)
    padded = m.kernel("nn.conv2d", dict(attrs, padding=(1, 1, 1, 1)),
                      [x, T((8, 8, 3, 3), "float32")], out)
    assert one < 1e-3 <= padded
    assert m.conv_call(1, 1, (0, 0)) == 1e-7
    assert m.conv_call(1, 1, (1, 1)) == m.conv_call(3, 3, (1, 1)) == 1e-3


def test_in_program_slowdown_of_an_arithmetic_kernel_is_at_most_its_datas_traffic(model):
    # a stride-1 average pool is arithmetic: a program slows moving its data, not its arithmetic
    data = dict(model.profile.data, in_program={"kind:pool": 2.0, "kind:gemm": 2.0})
    m = cpu_cost.CpuCost(cpu_cost.Profile(data))
    x = T((1, 64, 35, 35), "float32")
    attrs = {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1), "layout": "NCHW"}
    t = m.kernel("nn.avg_pool2d", attrs, [x], x)
    extra = m("nn.avg_pool2d", attrs, [x], x) - m.profile.dispatch - t
    memory = m.memory_time(64 * 35 * 35)
    assert 0 < memory < t - m.floor("nn.avg_pool2d")  # the cap binds here
    assert extra == pytest.approx(memory)
    # products and convolutions slow in proportion to their time (their temporaries grow with it)
    a, w = T((256, 512), "float32"), T((512, 512), "float32")
    dense = m.kernel("nn.dense", {}, [a, w], a)
    assert m("nn.dense", {}, [a, w], a) - m.profile.dispatch == pytest.approx(2.0 * dense)
    assert m.memory_time(2e6) > m.memory_time(2e4) > 0


def test_erf_is_calibrated_on_the_values_gelu_gives_it():
    # scipy's erf takes a slower branch for |x| >= 1: its curve is measured on the output of a
    # transformer's expansion layer over sqrt(2), as GELU calls it, where the other unary ops
    # take an activation of unit spread
    from relaygraph.egraph import calibrate

    specs = calibrate._curve_specs()
    rng = np.random.default_rng(0)
    (erf_in,), _ = specs["erf"](rng, 1 << 16)
    (tanh_in,), _ = specs["tanh"](rng, 1 << 16)
    assert erf_in.dtype == np.float32
    assert float(np.std(erf_in)) == pytest.approx(calibrate.GELU_SPREAD * 0.7071, rel=0.03)
    assert 0.5 < calibrate.GELU_SPREAD < 1.0  # a dense layer's outputs, 4x wider than its input
    assert float(np.std(tanh_in)) == pytest.approx(1.0, rel=0.03)


def test_winograd_on_an_odd_image_pays_for_the_whole_tiles(model):
    # F(2x2, 3x3) computes whole 2x2 tiles: 7x7 computes 8x8; the profile's ratios are per pixel wanted
    assert cpu_cost.tile_waste(8, 8) == 1.0
    assert cpu_cost.tile_waste(7, 7) == pytest.approx(64 / 49)
    assert cpu_cost.tile_waste(13, 14) == pytest.approx(14 / 13)
    data = dict(model.profile.data, winograd=[[64.0, 64.0, 100.0, 0.9]])
    m = cpu_cost.CpuCost(cpu_cost.Profile(data))
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    for side in (7, 8):
        x = T((1, 64, side, side), "float32")
        direct = m.kernel("nn.conv2d", attrs, [x, T((64, 64, 3, 3), "float32")], x)
        wino = m.kernel(cpu_cost.WINOGRAD, dict(attrs, tile_size=2), [x, T((4, 4, 64, 64), "float32")], x)
        assert wino == pytest.approx(direct * 0.9 * cpu_cost.tile_waste(side, side))


def test_the_profile_keeps_this_machines_last_level_cache(tmp_path, model):
    # how much of a convolution's data a looped run keeps warm depends on the cache: measured once
    size = cpu_cost.cache_bytes()
    assert isinstance(size, int) and size >= 0
    assert model.profile.data["cache_bytes"] == size == model.profile.cache_bytes
    path = tmp_path / "p.json"
    assert main(["calibrate", "--quick", "--profile", str(path)]) == 0
    assert json.loads(path.read_text())["cache_bytes"] == size
    # a profile without it (or on a machine that reports none) applies the factors in full
    assert cpu_cost.Profile(dict(model.profile.data, cache_bytes=0)).cache_bytes == 0
    core = cpu_cost.cache_bytes(level=2)  # a core's own: what other kernels' looped runs keep warm
    assert isinstance(core, int) and 0 <= core <= max(size, core)
    assert model.profile.data["core_cache_bytes"] == core == model.profile.core_cache_bytes
    assert json.loads(path.read_text())["core_cache_bytes"] == core


def test_an_elementwise_kernels_in_program_slowdown_fades_as_its_data_outgrows_a_cores_cache(model):
    # MobileNet's batch norms and relus ran 2-3.5x their looped time in the program on 100K values,
    # 1-2.3x on 400K and 0.75-0.93x on 800K (512 KB per core)
    core = 1 << 19
    factors = {"nn.relu": 2.0, "nn.batch_norm": 3.0, "nn.conv2d": 1.5}

    def model_with(size):
        data = dict(model.profile.data, in_program=factors, core_cache_bytes=size)
        return cpu_cost.CpuCost(cpu_cost.Profile(data))

    sized, unknown = model_with(core), model_with(0)

    def relu(n):
        t = T((1, n), "float32")
        return [t], t

    # input and output: 8 bytes a value
    assert sized.warm("nn.relu", {}, *relu(core // 8)) == 1.0  # one core's cache: all of it
    assert sized.warm("nn.relu", {}, *relu(core // 4)) == 1.0  # twice: all of it still
    assert sized.warm("nn.relu", {}, *relu(12 * core // 8)) == 0.0  # twelve times: none
    assert sized.warm("nn.relu", {}, *relu(6 * core // 8)) == pytest.approx(math.log(2) / math.log(6))
    assert unknown.warm("nn.relu", {}, *relu(12 * core // 8)) == 1.0  # no size known: in full

    def extra(m, n):
        args, out = relu(n)
        return m("nn.relu", {}, args, out) - m.profile.dispatch - m.kernel("nn.relu", {}, args, out)

    assert extra(unknown, core // 8) > 0
    assert extra(sized, core // 8) == pytest.approx(extra(unknown, core // 8))
    assert extra(sized, 16 * core) == pytest.approx(0.0, abs=1e-12)
    assert extra(unknown, 16 * core) > 0
    # a batch norm counts its parameters too; products keep their factor in full
    x, v = T((1, 64, 112, 112), "float32"), T((64,), "float32")
    bn = rg.ops.lookup("nn.batch_norm").resolve({})
    assert sized.warm("nn.batch_norm", bn, [x, v, v, v, v], cpu_cost.TupleType([x, v, v])) == 0.0
    a, w = T((4096, 4096), "float32"), T((4096, 4096), "float32")
    assert sized.warm("nn.dense", {}, [a, w], a) == 1.0


def test_a_convolutions_working_set_counts_its_gathered_columns_or_winograds_tiles():
    f32 = "float32"
    x, out = T((1, 64, 28, 28), f32), T((1, 128, 28, 28), f32)
    io = 64 * 784 + 128 * 784
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    w3 = T((128, 64, 3, 3), f32)
    assert cpu_cost.conv_working_set("nn.conv2d", attrs, [x, w3], out) == io + 128 * 576 + 784 * 576
    w1 = T((128, 64, 1, 1), f32)  # an unpadded 1x1 is one product: no columns
    plain = dict(attrs, padding=(0, 0, 0, 0))
    assert cpu_cost.conv_working_set("nn.conv2d", plain, [x, w1], out) == io + 128 * 64
    u, b = T((4, 4, 128, 64), f32), T((128,), f32)
    tiles = 16 * 14 * 14 * (64 + 128)
    wino = cpu_cost.conv_working_set(cpu_cost.WINOGRAD, dict(attrs, tile_size=2), [x, u], out)
    assert wino == io + 16 * 128 * 64 + tiles
    fused = cpu_cost.conv_working_set("fused.winograd_bias_relu", dict(attrs, tile_size=2), [x, u, b], out)
    assert fused == wino + 128
    odd = T((1, 64, 7, 7), f32)  # whole 2x2 tiles: 7x7 makes 4x4 of them
    seven = cpu_cost.conv_working_set(cpu_cost.WINOGRAD, dict(attrs, tile_size=2), [odd, u],
                                      T((1, 128, 7, 7), f32))
    assert seven == 64 * 49 + 128 * 49 + 16 * 128 * 64 + 16 * 16 * 192


def test_a_convolution_whose_data_outgrows_the_cache_slows_in_a_program_no_more_than_looped(model):
    # VGG-16's 27-65 MB 3x3 layers ran 0.97-1.02x their looped time in the program, ResNet-50's
    # 5-10 MB ones 1.04-1.2x: a looped run keeps a layer's data warm only while it fits
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    wattrs = dict(attrs, tile_size=2)
    factors = {"nn.conv2d": 1.5, cpu_cost.WINOGRAD: 1.5, "nn.dense": 1.5}

    def extra(m, op, at, types, out):
        return m(op, at, types, out) - m.profile.dispatch - m.kernel(op, at, types, out)

    def layer(c, side):
        x = T((1, c, side, side), "float32")
        return x, T((c, c, 3, 3), "float32"), T((4, 4, c, c), "float32"), T((c,), "float32")

    small, big = layer(64, 28), layer(512, 28)
    ws_small = cpu_cost.conv_working_set("nn.conv2d", attrs, list(small[:2]), small[0]) * 4
    ws_big = cpu_cost.conv_working_set("nn.conv2d", attrs, list(big[:2]), big[0]) * 4
    cache = int(ws_big)  # the big layer's data fills the cache; the small one's is under half of it
    assert ws_small < cache / 2

    def with_cache(size):
        data = dict(model.profile.data, in_program=factors, cache_bytes=size)
        return cpu_cost.CpuCost(cpu_cost.Profile(data))

    full, sized = with_cache(0), with_cache(cache)
    for x, w, u, b in (small, big):
        for op, at, types in (("nn.conv2d", attrs, [x, w]), (cpu_cost.WINOGRAD, wattrs, [x, u])):
            resolved = rg.ops.lookup(op).resolve(at)
            assert extra(full, op, resolved, types, x) > 0  # without a cache size: the factor in full
            if x is small[0]:
                want = extra(full, op, resolved, types, x)
                assert extra(sized, op, resolved, types, x) == pytest.approx(want)
            else:
                assert extra(sized, op, resolved, types, x) == pytest.approx(0.0, abs=1e-12)
        # a fused op on a convolution takes its share by its own data
        fused = rg.ops.lookup("fused.winograd_bias_relu").resolve(wattrs)
        assert sized.warm("fused.winograd_bias_relu", fused, [x, u, b], x) == (1.0 if x is small[0] else 0.0)
        assert full.warm("fused.winograd_bias_relu", fused, [x, u, b], x) == 1.0
    # between half the cache and all of it, part of the slowdown
    x, w = big[0], big[1]
    half = with_cache(int(ws_big * 1.5))
    resolved = rg.ops.lookup("nn.conv2d").resolve(attrs)
    assert half.warm("nn.conv2d", resolved, [x, w], x) == pytest.approx(math.log2(1.5))
    assert 0 < extra(half, "nn.conv2d", resolved, [x, w], x) < extra(full, "nn.conv2d", resolved, [x, w], x)
    # other ops keep their factor whatever the cache (products are measured with cold weights)
    a, dw = T((256, 4096), "float32"), T((4096, 4096), "float32")
    assert sized.warm("nn.dense", {}, [a, dw], a) == 1.0
    assert extra(sized, "nn.dense", {}, [a, dw], a) == pytest.approx(extra(full, "nn.dense", {}, [a, dw], a))


def test_a_one_row_product_is_priced_by_its_weights_bytes(model):
    # off the grid, two of NasRNN's products merged were priced 3% under the two apart, and a
    # program of merged products (each then split) measured 0.66-0.91x the original
    import statistics

    bound = cpu_cost.ONE_ROW_BYTES
    rows = [r for r in model.profile.gemm if r[0] == 1 and 4.0 * r[1] * r[2] >= bound]
    median = statistics.median(r[-1] / (4.0 * r[1] * r[2]) for r in rows)
    assert rows and model.row_rate() == pytest.approx(median)
    assert model.gemm_time(1, 1024, 512) == pytest.approx(2 * model.gemm_time(1, 512, 512))
    x, w = T((1, 512), "float32"), T((512, 512), "float32")
    priced = 4.0 * 512 * 512 * model.row_rate(4.0 * 512 * 512, 512)
    assert model.kernel("nn.dense", {}, [x, w], x) == pytest.approx(priced)
    # small weights and products of more rows: the grid
    for m, n, k in ((1, 64, 64), (2, 512, 512), (16, 1024, 512)):
        assert model.gemm_time(m, n, k) == cpu_cost.grid_time(model.profile.gemm, (m, n, k))
    # a grid with no one-row product that large: the grid
    small = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data, gemm=[
        r for r in model.profile.gemm if not (r[0] == 1 and 4.0 * r[1] * r[2] >= bound)])))
    assert small.row_rate() == 0.0
    assert small.gemm_time(1, 512, 512) == cpu_cost.grid_time(small.profile.gemm, (1, 512, 512))


def test_a_one_row_products_rate_follows_its_weights_placement(model):
    # with small weights read in small pages (calibrate.small_pages_below), a one-row product is
    # priced at the rate of the rows placed as its weight: NasRNN's 1 MB products by the small
    # ones; a weight of NumPy's threshold or more lies in huge pages but for the ends
    import statistics

    split = 4 << 20
    rows = [r for r in model.profile.gemm if r[0] == 1 and 4.0 * r[1] * r[2] >= cpu_cost.ONE_ROW_BYTES]
    grid = [[1, 256, 512, 0.0, 1e-4], [1, 512, 512, 0.0, 1.2e-4], [1, 2048, 512, 0.0, 4e-4],
            [1, 4096, 512, 0.0, 9e-4], [1, 8192, 512, 0.0, 1.9e-3]]
    data = dict(model.profile.data, gemm=[r for r in model.profile.gemm if r not in rows] + grid, one_row=[])
    placed = cpu_cost.CpuCost(cpu_cost.Profile(dict(data, small_pages_below=split)))
    small = statistics.median(t / (4.0 * n * k) for _, n, k, _, t in grid[:2])
    large = statistics.median(t / (4.0 * n * k) for _, n, k, _, t in grid[2:])
    assert placed.row_rate(1 << 20, 512) == pytest.approx(small)
    assert placed.huge_share(8 << 20) == pytest.approx(0.75)  # one 2 MB page of four cut
    assert placed.huge_share(4 << 20) == pytest.approx(0.5)  # LSTM's gate weights: 0.50 read off pagemap
    assert placed.row_rate(8 << 20, 512) == pytest.approx(0.75 * large + 0.25 * small)
    assert placed.gemm_time(1, 512, 512) == pytest.approx(4.0 * 512 * 512 * small)
    assert placed.gemm_time(1, 4096, 512) == pytest.approx(4.0 * 4096 * 512 * (0.75 * large + 0.25 * small))
    alike = cpu_cost.CpuCost(cpu_cost.Profile(data))  # read alike: one rate
    every = statistics.median(t / (4.0 * n * k) for _, n, k, _, t in grid)
    assert alike.row_rate(1 << 20, 512) == alike.row_rate(8 << 20, 512) == pytest.approx(every)
    # a placement with no row of its own takes every row's
    only_large = cpu_cost.CpuCost(cpu_cost.Profile(dict(data, small_pages_below=split,
                                                        gemm=[r for r in data["gemm"] if r not in grid[:2]])))
    assert only_large.row_rate(1 << 20, 512) == pytest.approx(large)
    for bad in (-1, 1.5, "4M", True):
        with pytest.raises(ValueError, match="small_pages_below"):
            cpu_cost.Profile(dict(data, small_pages_below=bad))
    for bad in (0, -1, 2.0, "2M", True):
        with pytest.raises(ValueError, match="huge_page_bytes"):
            cpu_cost.Profile(dict(data, huge_page_bytes=bad))
    assert cpu_cost.Profile(dict(data, huge_page_bytes=1 << 21)).huge_page_bytes == 1 << 21


def test_a_one_row_products_rate_follows_its_weights_depth(model):
    # a one-row product reads a short row's weight slower: here 116 us a MB 256 deep, 95 at 512,
    # 68 at 1024; priced at the grid's median, NasRNN's 512-deep products came out at 0.64x their
    # time. The rate is interpolated in the log of the depth between the rows' depths, held at
    # the ends, and the number of units does not move it (products merged along their units are
    # priced as the two apart)
    rows = [r for r in model.profile.gemm if r[0] == 1 and 4.0 * r[1] * r[2] >= cpu_cost.ONE_ROW_BYTES]
    mb = float(1 << 20)

    def row(n, k, us_per_mb):
        return [1, n, k, 2.0 * n * k, 4.0 * n * k / mb * us_per_mb * 1e-6]

    grid = [row(1024, 256, 116.0), row(4096, 256, 120.0), row(256, 1024, 68.0), row(64, 4096, 58.0)]
    data = dict(model.profile.data, gemm=[r for r in model.profile.gemm if r not in rows] + grid,
                one_row=[], small_pages_below=0)
    deep = cpu_cost.CpuCost(cpu_cost.Profile(data))
    rate = {k: deep.row_rate(1 << 20, k) * mb * 1e6 for k in (64, 256, 512, 1024, 2048, 4096, 16384)}
    assert rate[256] == pytest.approx(118.0)  # the median of its depth's rows
    assert rate[512] == pytest.approx((118.0 + 68.0) / 2)  # halfway in the log of the depth
    assert rate[2048] == pytest.approx((68.0 + 58.0) / 2)
    assert rate[64] == rate[256] and rate[16384] == rate[4096] == pytest.approx(58.0)  # held at the ends
    assert deep.gemm_time(1, 1024, 512) == pytest.approx(2 * deep.gemm_time(1, 512, 512))
    assert deep.gemm_time(1, 512, 1024) < deep.gemm_time(1, 1024, 512)  # same bytes, deeper rows
    # the calibration's rows between the grid's depths take part
    between = cpu_cost.CpuCost(cpu_cost.Profile(dict(data, one_row=[row(512, 512, 95.0)])))
    assert between.row_rate(1 << 20, 512) * mb * 1e6 == pytest.approx(95.0)
    assert between.row_rate(1 << 20, 256) * mb * 1e6 == pytest.approx(118.0)
    for bad in ([[1, 512, "512", 0.0, 1e-4]], [[2, 512, 512, 0.0, 1e-4]], [[1, 512, 512]], {"512": 1e-4},
                [[1, 512, 512, 0.0, True]]):
        with pytest.raises(ValueError, match="one_row"):
            cpu_cost.Profile(dict(data, one_row=bad))
    # no depth: the median of every row, as before depths were priced
    assert deep.row_rate(1 << 20) * mb * 1e6 == pytest.approx(92.0)


def test_a_convolution_longer_than_the_calibrations_slows_by_what_the_longest_did(model, tmp_path):
    # ResNet-50's layers (0.2-2.9 ms looped) ran 1.0-1.3x their looped time in its program,
    # VGG-16's (7-69 ms) 0.93-1.07x: the slowdown is an amount of time, held at the longest
    # convolution the factor was measured on
    attrs = {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1), "groups": 1}
    factors = {"kind:conv": 1.2, "nn.conv2d": 1.2, cpu_cost.WINOGRAD: 1.5}

    def extra(m, op, at, types, out):
        return m(op, at, types, out) - m.profile.dispatch - m.kernel(op, at, types, out)

    def layer(c, side):
        x = T((1, c, side, side), "float32")
        return x, T((c, c, 3, 3), "float32"), T((6, 6, c, c), "float32")

    small, big = layer(16, 8), layer(256, 56)
    uncapped = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data, in_program=factors, cache_bytes=0,
                                                      in_program_longest={})))
    conv = rg.ops.lookup("nn.conv2d").resolve(attrs)
    wino = rg.ops.lookup(cpu_cost.WINOGRAD).resolve(dict(attrs, tile_size=4))
    above = {}
    for name, (x, w, _) in (("small", small), ("big", big)):
        above[name] = uncapped.kernel("nn.conv2d", conv, [x, w], x) - uncapped.floor("nn.conv2d")
    longest = (above["small"] + above["big"]) / 2
    assert above["small"] < longest < above["big"]
    capped = cpu_cost.CpuCost(cpu_cost.Profile(dict(uncapped.profile.data,
                                                    in_program_longest={"kind:conv": longest})))
    for op, at, index, factor in (("nn.conv2d", conv, 1, 1.2), (cpu_cost.WINOGRAD, wino, 2, 1.5)):
        for x, *weights in (small, big):
            types = [x, weights[index - 1]]
            t = uncapped.kernel(op, at, types, x) - uncapped.floor(op)
            assert extra(uncapped, op, at, types, x) == pytest.approx(t * (factor - 1))
            assert extra(capped, op, at, types, x) == pytest.approx(min(t, longest) * (factor - 1))
    x, w, _ = big
    assert extra(capped, "nn.conv2d", conv, [x, w], x) < extra(uncapped, "nn.conv2d", conv, [x, w], x)
    # products and other kernels keep theirs
    a, d = T((512, 1024), "float32"), T((1024, 1024), "float32")
    assert capped("nn.dense", {}, [a, d], a) == uncapped("nn.dense", {}, [a, d], a)
    # a profile whose figure is not a positive number of seconds is refused, naming it
    data = dict(json.loads(Path(cpu_cost.profile_path()).read_text()), in_program_longest={"kind:conv": -1.0})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=r"in_program_longest\['kind:conv'\] \(got -1\.0\)"):
        load_profile(str(bad))
    bad.write_text(json.dumps(dict(data, in_program_longest=[0.01])))
    with pytest.raises(ProfileError, match=r"in_program_longest as a mapping of kinds to seconds"):
        load_profile(str(bad))


def test_a_calibration_records_the_longest_convolution_its_programs_measured(model):
    from relaygraph.egraph import calibrate

    run = calibrate._Calibration(quick=True, progress=False)
    run.in_program()
    longest = run.data["in_program_longest"]["kind:conv"]
    assert longest == run._longest_conv and 0.0 < longest < 1.0
    # a model with it holds a longer convolution's slowed part there, and leaves a shorter one's
    recorded = run.data["in_program_longest"]
    held = cpu_cost.CpuCost(cpu_cost.Profile(dict(model.profile.data, in_program_longest=recorded)))
    assert held.slowed("nn.conv2d", 1.0, None) == held.slowed(cpu_cost.WINOGRAD, 1.0, None) == longest
    assert held.slowed("nn.conv2d", longest / 2, None) == longest / 2
    assert held.slowed("nn.dense", 1.0, None) == 1.0


def test_a_conv_rows_direct_time_is_the_median_of_its_own_and_its_ratios_passes(monkeypatch, model):
    """One timing of a large layer was once 22% over the same kernel's time in Winograd's passes
    minutes later, and the Winograd layers priced off it 39% over: a spell in the row's own timing
    is outvoted by the direct kernel's times in the passes of Winograd's and the fused ops' ratios."""
    from relaygraph.egraph.calibrate import _Calibration

    shapes = [(16, 28, 16, (3, 3), 1, (1, 1)), (32, 14, 64, (1, 1), 1, (0, 0))]
    monkeypatch.setattr(_Calibration, "_conv_shapes", lambda self: shapes)

    def rows(own: float, passes: float) -> list:
        cal = _Calibration(quick=False, progress=False)
        cal.data = dict(model.profile.data, conv=[[1, 1, 1, 1, 1.0]], fused={}, winograd=[], winograd4=[])
        cal.kernel_time = lambda kernel, args, attrs: 1e-5
        cal.cold_time = lambda kernel, args, attrs, weight=1: own
        # the Winograd triples (F(2x2), F(4x4), direct), else a fused op against the direct kernel
        cal.cold_times = lambda calls, weight=1, repeats=None: (
            [passes / 2, passes / 3, passes] if len(calls) == 3 else [passes, passes])
        cal.step = lambda info, n=1: None
        cal.conv()
        return [row[-1] for row in cal.data["conv"][-2:]]

    steady, slow = rows(2e-3, 2e-3), rows(4e-3, 4e-3)
    assert all(a > b for a, b in zip(slow, steady, strict=True))
    assert rows(4e-3, 2e-3) == pytest.approx(steady)  # its own 4 ms against the passes' 2 ms
    assert rows(2e-3, 4e-3) == pytest.approx(slow)


def test_calibration_weighs_a_convolutions_in_program_slowdown_by_what_the_cache_holds():
    # the in-program factor is what a layer slows over the share CpuCost.warm applies: a cache that
    # holds none of the calibration's convolutions leaves nothing for their factor to explain
    from relaygraph.egraph import calibrate

    run = calibrate._Calibration(quick=True, progress=False)
    assert run.data["cache_bytes"] == cpu_cost.cache_bytes()
    run.data["cache_bytes"] = 1
    run.in_program()
    factors = run.data["in_program"]
    assert {"nn.conv2d", cpu_cost.WINOGRAD, "kind:conv", "nn.dense"} <= set(factors)
    assert factors["nn.conv2d"] == factors[cpu_cost.WINOGRAD] == factors["kind:conv"] == 1.0


def test_calibrations_programs_run_the_winograd_kernel_models_get():
    # the in-program factor of Winograd is measured on F(4x4, 3x3) layers, the kernel the models
    # get: with two BLAS threads they slow in a program where F(2x2, 3x3)'s did not
    from relaygraph.egraph import calibrate
    from relaygraph.ir import iter_post_order

    run = calibrate._Calibration(quick=True, progress=False)
    tiles = [node.attrs["tile_size"] for func, _ in run._synthetic_programs_once()
             for node in iter_post_order(func.body)
             if isinstance(node, rg.Call) and getattr(node.op, "name", None) == cpu_cost.WINOGRAD]
    assert tiles and set(tiles) == {calibrate.WINOGRAD_TILE} == {4}


def test_grid_time_interpolates_log_rate_between_the_grid_shapes():
    # rate 1 at m=16, 8 at m=128 (the weight's read sets the time: rate in proportion to rows)
    grid = [[m, n, k, 2.0 * m * n * k, 2.0 * m * n * k / rate]
            for m, rate in ((16, 1.0), (128, 8.0)) for n in (64, 256) for k in (64, 256)]
    at = cpu_cost.grid_time
    assert at(grid, (16, 64, 64)) == pytest.approx(2.0 * 16 * 64 * 64)  # a grid shape as measured
    # 32 rows: a third of the way in log2 from 16 to 128, so rate 2 and the 16-row time
    assert at(grid, (32, 64, 64)) == pytest.approx(2.0 * 32 * 64 * 64 / 2.0)
    # between n (and k) grid values too, and a rate flat in n keeps time in proportion to n
    assert at(grid, (16, 128, 64)) == pytest.approx(2.0 * 16 * 128 * 64)
    # beyond the largest values: the edge's rate; below the smallest: the edge's time
    assert at(grid, (1024, 64, 64)) == pytest.approx(2.0 * 1024 * 64 * 64 / 8.0)
    assert at(grid, (16, 1, 64)) == at(grid, (16, 64, 64))
    # a corner the grid leaves out (too many flops to calibrate) is interpolated over the others
    partial = [row for row in grid if row[:3] != [128, 256, 256]]
    # (weights: 2/3 of the way to 128 rows, halfway in n and k; the missing corner's 1/6 left out)
    assert at(grid, (64, 128, 128)) == pytest.approx(2.0 * 64 * 128 * 128 / 8.0 ** (2 / 3))
    assert at(partial, (64, 128, 128)) == pytest.approx(2.0 * 64 * 128 * 128 / 8.0 ** 0.6)
    # no corner at all: the nearest measured rates
    assert at(partial, (128, 256, 256)) == pytest.approx(2.0 * 128 * 256 * 256 / 8.0)


# (rows, units, depth) of the products issue 18's dense(a, b) => transpose(dense(b, a)) was
# priced lower on: BERT with 1 layer, hidden 128, 32 tokens; nasrnn, vgg-11 and dcgan small
SWAPPED_SHAPES = [(32, 128, 128), (32, 512, 128), (32, 128, 512), (1, 16, 16), (1, 10, 256),
                  (1, 256, 32), (1, 256, 256), (1, 1024, 16), (128, 768, 768)]


@pytest.mark.parametrize("m,n,k", SWAPPED_SHAPES)
def test_exchanging_a_dense_operands_is_never_priced_lower(model, m, n, k):
    # dense(b, a) computes the same product, transposed: BLAS takes the same time for both
    x, w, out, swapped = (T(s, "float32") for s in ((m, k), (n, k), (m, n), (n, m)))
    dense = rg.ops.lookup("nn.dense").resolve({})
    transpose = rg.ops.lookup("transpose").resolve({"axes": [1, 0]})
    direct = model("nn.dense", dense, [x, w], out)
    exchanged = model("nn.dense", dense, [w, x], swapped) + model("transpose", transpose, [swapped], out)
    assert model("nn.dense", dense, [w, x], swapped) == pytest.approx(direct)
    assert direct < exchanged
    # the orientation the profile's grid and the fused dense ops' ratios were measured in (fewer
    # rows than units, the weight read cold) keeps its price, and a (K, N) weight prices the same
    # product (its fused ops' ratios carry what that layout saves)
    assert model.kernel("nn.dense", dense, [x, w], out) == pytest.approx(model.gemm_time(m, n, k))
    matmul = rg.ops.lookup("nn.matmul").resolve({})
    assert model.kernel("nn.matmul", matmul, [x, T((k, n), "float32")], out) == pytest.approx(
        model.kernel("nn.dense", dense, [x, w], out))


def test_a_matrix_transpose_costs_the_copy_a_product_would_need(model):
    # a view here: a product reading it runs as on the untransposed matrix, so the (K, N) layout
    # saves only once it is made contiguous (folded on a constant, or copied)
    strided = model.profile.curve("copy_strided")
    for axes in ([1, 0], [-1, 0], None):
        w = T((1024, 256), "float32")
        attrs = rg.ops.lookup("transpose").resolve({"axes": axes})
        assert model.kernel("transpose", attrs, [w], T((256, 1024), "float32")) == pytest.approx(
            curve_at(strided, 1024 * 256))
    # a transpose that keeps a 3-D tensor's rows (a head split's) stays a view's price
    x = T((16, 8, 64), "float32")
    attrs = rg.ops.lookup("transpose").resolve({"axes": [1, 0, 2]})
    assert model.kernel("transpose", attrs, [x], T((8, 16, 64), "float32")) == pytest.approx(
        curve_at(model.profile.curve("transpose"), 16 * 8 * 64))


def test_dropout_costs_the_contiguous_writes_of_its_two_outputs(model):
    # its kernel copies the input and fills a mask; the family "other" priced it as a strided
    # copy, 7x its measured time in SqueezeNet
    x = T((1, 512, 13, 13), "float32")
    attrs = rg.ops.lookup("nn.dropout").resolve({})
    cost = model.kernel("nn.dropout", attrs, [x], rg.TupleType([x, x]))
    assert cost == pytest.approx(curve_at(model.profile.curve("copy"), 2 * 512 * 13 * 13))
    # with the two copies' curves apart by construction (a quick calibration on a loaded machine
    # can measure them either way round at one size), the contiguous one is taken
    data = dict(model.profile.data)
    data["curves"] = dict(data["curves"], copy=[[1.0, 1e-9], [1e7, 1e-3]],
                          copy_strided=[[1.0, 1e-8], [1e7, 1e-2]])
    apart = cpu_cost.CpuCost(cpu_cost.Profile(data))
    assert apart.kernel("nn.dropout", attrs, [x], rg.TupleType([x, x])) == pytest.approx(
        curve_at(data["curves"]["copy"], 2 * 512 * 13 * 13))


def test_a_weight_passed_as_an_argument_keeps_the_dense_layout(model):
    # an LSTM's cells take their weights as arguments: transpose(w) is not folded, and a matmul
    # on its view ran slower than the dense it replaced. A profile where the (K, N) layout saves
    # 20% of the product: a constant weight takes it (its transpose is folded), an argument does
    # not (the session's quick ratios and in-program factors are noisy: fixed here)
    data = dict(model.profile.data, in_program={})
    data["fused"] = dict(data["fused"], **{"fused.dense_bias": [[1, 1, 1, 1.0]],
                                           "fused.matmul_bias": [[1, 1, 1, 0.8]]})
    cost = cpu_cost.CpuCost(cpu_cost.Profile(data))
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype("float32") for s in ((1, 256), (1024, 256), (1024,))]
    x, w, b = (rg.var(n, T(s, "float32")) for n, s in (("x", (1, 256)), ("w", (1024, 256)), ("b", (1024,))))
    for weight, params in ((w, [x, w, b]), (rg.const(values[1]), [x, b])):
        body = rg.op.nn.bias_add(rg.op.nn.dense(x, weight), b, axis=-1)
        mod = rg.IRModule.from_expr(rg.Function(params, body))
        res = rg.optimize(mod, cost=cost, extractor="greedy-dag", check=False, progress=False)
        ops = res.ops_after
        if weight is w:
            assert not any("matmul" in op or op == "transpose" for op in ops)
            assert any("dense" in op for op in ops)
        else:
            assert ops.get("fused.matmul_bias") == 1 and not any("dense" in op for op in ops)
        args = values if weight is w else [values[0], values[2]]
        np.testing.assert_allclose(rg.evaluate(res.module, *args), rg.evaluate(mod, *args),
                                   rtol=1e-5, atol=1e-5)


def test_a_product_grid_time_is_capped_by_the_larger_shapes():
    from relaygraph.egraph.calibrate import _capped_by_larger

    grid = [[1, 32, 32, 2048.0, 1e-6], [64, 32, 256, 1.05e6, 1.6e-2], [64, 256, 256, 8.4e6, 1e-4],
            [512, 32, 256, 8.4e6, 2e-4], [512, 256, 32, 8.4e6, 5e-5]]
    capped = _capped_by_larger(grid)
    assert capped[1] == [64, 32, 256, 1.05e6, 1e-4]  # held up: capped by the larger 64x256x256
    assert [row for i, row in enumerate(capped) if i != 1] == [row for i, row in enumerate(grid) if i != 1]
    # the calibrated grid keeps that order between every pair of its shapes
    rows = cpu_cost.default_profile(progress=False).profile.gemm
    assert all(a[-1] <= b[-1] for a in rows for b in rows
               if all(x <= y for x, y in zip(a[:3], b[:3], strict=True)))


def test_measure_alternated_takes_each_sample_in_turn():
    """Kernels compared by a ratio are sampled in turn: a slowdown partway (other work starting)
    moves both alike, so their ratio stays what it is; timed one after the other it would not."""
    from relaygraph.egraph.calibrate import measure, measure_alternated

    now, calls, order = [0.0], [0], []

    def kernel(name, cost):
        def run():
            calls[0] += 1
            order.append(name)
            now[0] += cost * (4.0 if calls[0] > 6 else 1.0)  # the machine slows 4x partway
        return run

    fast, slow = kernel("fast", 1.0), kernel("slow", 2.0)
    a, b = measure_alternated([fast, slow], repeats=5, min_seconds=0.5, clock=lambda: now[0])
    assert order[4:] == ["fast", "slow"] * 5  # after each one's two warm-up calls, in turn
    assert b / a == pytest.approx(2.0)
    now[0], calls[0] = 0.0, 0  # one after the other, the slowdown falls on the second only
    ratio = measure(slow, 5, 0.5, lambda: now[0]) / measure(fast, 5, 0.5, lambda: now[0])
    assert ratio == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one"):
        measure_alternated([])
    # warm: an untimed call before each sample (the first call after the others is not timed)
    order.clear()
    now[0], calls[0] = 0.0, 0
    rounds: list[int] = []
    measure_alternated([fast, slow], repeats=2, min_seconds=0.5, clock=lambda: now[0], warm=True,
                       on_round=rounds.append)
    assert order[4:] == ["fast", "fast", "slow", "slow"] * 2 and rounds == [1, 2]


def test_a_full_calibration_measures_each_ratio_twice_and_a_third_time_where_they_disagree():
    """A ratio between kernels is measured again at ``confirm`` (seconds later): two passes that
    agree give their geometric mean; an outlier in one pass is outvoted by a third."""
    from relaygraph.egraph.calibrate import AGREE, _Calibration

    cal = _Calibration(quick=False, progress=False)
    passes = {"steady": iter([[1.0, 2.0], [1.04, 2.0]]), "spell": iter([[1.39], [0.96], [0.98]]),
              "spell late": iter([[1.0], [1.5], [1.02]])}
    calls = {name: 0 for name in passes}

    def job(name):
        calls[name] += 1
        return next(passes[name])
    a, b, c, d = [], [], [], []
    cal.ratios(lambda: job("steady"), [a, b], (1, 2))
    cal.ratios(lambda: job("spell"), [c], (3,))
    cal.ratios(lambda: job("spell late"), [d], (4,))
    assert calls == {"steady": 1, "spell": 1, "spell late": 1} and not (a or b or c or d)
    cal.confirm("test")
    assert calls == {"steady": 2, "spell": 3, "spell late": 3}
    assert a == [[1, 2, pytest.approx(math.sqrt(1.04))]] and b == [[1, 2, pytest.approx(2.0)]]
    assert c == [[3, 0.98]] and d == [[4, 1.02]]
    assert cal.data["ratios_confirmed"] == 3 and cal.data["ratios_third_pass"] == 2
    assert 1.04 < AGREE < 1.39 / 0.96
    cal.confirm("nothing left")  # each ratio is confirmed once
    assert calls == {"steady": 2, "spell": 3, "spell late": 3}
    quick = _Calibration(quick=True, progress=False)
    e = []
    quick.ratios(lambda: [1.39], [e], (5,))  # a quick calibration keeps its one pass
    assert e == [[5, 1.39]]


def test_a_full_calibration_measures_the_large_activation_ops_past_the_cache():
    """The epilogue ops and pools are measured at ``LARGE_SIZE`` values too (VGG's first
    activations are 3.2M values, past the curves' other sizes), the other ops only at the
    calibration's sizes; a quick calibration adds no such point."""
    from relaygraph.egraph.calibrate import LARGE_OPS, LARGE_SIZE, _Calibration

    assert {"nn.relu", "nn.bias_add", "nn.max_pool2d"} <= set(LARGE_OPS)
    cal = _Calibration(quick=False, progress=False)
    cal.specs = {name: cal.specs[name] for name in ("nn.relu", "nn.max_pool2d", "exp")}
    cal.sizes = [1 << 10]
    works = {}
    for name, work, _ in cal.curve_points():
        works.setdefault(name, []).append(work)
    assert works["nn.relu"] == [1 << 10, LARGE_SIZE]
    assert works["exp"] == [1 << 10]
    # a 3x3 stride-2 pool over half as many values: its work is its windows' elements
    assert works["nn.max_pool2d"][-1] >= LARGE_SIZE
    quick = _Calibration(quick=True, progress=False)
    quick.specs = {"nn.relu": quick.specs["nn.relu"]}
    assert [w for name, w, _ in quick.curve_points() if name == "nn.relu"] == [float(n) for n in quick.sizes]


def test_fused_dense_ratios_are_timed_alternated_with_the_dense_kernel():
    """Every fused dense/matmul op's ratio comes from one alternated cold measurement with the
    dense kernel on the same (M, N, K): the dense kernel and its (N, K) weight first, then the
    fused op (a matmul-anchored one on the (K, N) weight)."""
    from relaygraph.egraph.calibrate import _Calibration, _call

    class Stop(Exception):
        pass

    cal = _Calibration(quick=True, progress=False)
    seen = []

    def cold_times(calls, weight=1, repeats=None, deep=False):
        assert deep  # read over the whole cache (a layout ratio: see calibrate.COLD_BYTES)
        seen.append([(kernel, args[weight].shape) for kernel, args, _ in calls])
        return [2.0, 1.0]

    def after_dense(*_):
        raise Stop
    cal.data["dispatch"] = 1e-6  # what the fused ops' model reads before the dense ones are timed
    cal.cold_times, cal.kernel_time = cold_times, after_dense
    with pytest.raises(Stop):
        cal.fused()
    shapes = cal._dense_fused_shapes()
    dense_kernel = _call("nn.dense", [np.zeros((1, 4), "float32"), np.zeros((3, 4), "float32")])[0]
    rows = cal.data["fused"]
    for name in ("fused.dense_bias", "fused.matmul_bias"):
        assert [r[:3] for r in rows[name]] == [list(s) for s in shapes]
        assert all(r[3] == 0.5 for r in rows[name])  # fused over dense, from the same measurement
    assert seen and all(len(c) == 2 and c[0][0] is dense_kernel for c in seen)
    for (_, dense_w), (_, fused_w) in seen:
        assert fused_w in (dense_w, dense_w[::-1])
    assert any(fused_w == dense_w[::-1] != dense_w for (_, dense_w), (_, fused_w) in seen)


def test_profile_without_the_plan_reads_folded_transposes_contiguous(model):
    """When the plan's instructions are not the profile's steps one for one, the steps run in turn:
    a transpose of a constant (which the plan computes once, contiguous) must reach its consumer
    contiguous too, or the product reads a strided view and is timed far slower than it runs."""
    from relaygraph.egraph import program_profile as pp
    from relaygraph.ir.expr import Constant, Function, var
    from relaygraph.ops.builders import make_call

    w = np.arange(12, dtype="float32").reshape(3, 4)
    x = var("x", rg.TensorType((2, 4), "float32"))
    func = Function([x], make_call("nn.matmul", x, make_call("transpose", Constant(w), axes=[1, 0])))
    typed = rg.infer_type(rg.IRModule.from_expr(func))
    steps = pp._steps(typed["main"], typed, cpu_cost.default_profile())
    assert [s.info[0] for s in steps] == ["nn.matmul"]  # the transpose is no instruction
    seen = []
    run = steps[0].run
    steps[0].run = lambda args, attrs: (seen.append(args[1].flags.c_contiguous), run(args, attrs))[1]
    samples = [[]]
    pp._run_steps(typed["main"], steps, [np.ones((2, 4), "float32")], cpu_cost.timer("wall"), samples)
    assert seen == [True] and len(samples[0]) == 1


def _fake_calibrations(monkeypatch, model, spreads):
    """Calibrations whose probes spread as ``spreads`` says, one after another (the figures are
    the stored profile's: only the probes differ); returns the list of runs made."""
    from relaygraph.egraph import calibrate

    made = []

    def run(self):
        spread = spreads[len(made)]
        data = json.loads(json.dumps(model.profile.data))
        data["probes"] = [1e-3, 1e-3 * spread, 1e-3]
        data["attempt"] = len(made) + 1
        made.append(data)
        return data

    monkeypatch.setattr(calibrate._Calibration, "run", run)
    return made


def test_calibration_is_repeated_when_the_machines_speed_changed_meanwhile(tmp_path, monkeypatch, model):
    import warnings

    from relaygraph.egraph import calibrate

    made = _fake_calibrations(monkeypatch, model, [1.8, 1.05])
    with warnings.catch_warnings():
        warnings.simplefilter("error", calibrate.CalibrationWarning)
        profile = calibrate.calibrate(quick=True, path=str(tmp_path / "p.json"), progress=False)
    assert len(made) == 2 and profile.data["attempt"] == 2
    assert calibrate.probe_spread(profile.data) == pytest.approx(1.05)
    # a steady first calibration is kept as it is
    made = _fake_calibrations(monkeypatch, model, [1.1, 1.05])
    profile = calibrate.calibrate(quick=True, path=str(tmp_path / "q.json"), progress=False)
    assert len(made) == 1 and profile.data["attempt"] == 1


def test_an_unsteady_calibration_keeps_the_steadiest_and_warns(tmp_path, monkeypatch, model, capsys):
    from relaygraph.egraph import calibrate

    made = _fake_calibrations(monkeypatch, model, [1.6, 1.4])
    with pytest.warns(calibrate.CalibrationWarning, match=r"changed 1\.40x during each of 2 calibrations"):
        profile = calibrate.calibrate(quick=True, path=str(tmp_path / "p.json"), progress=False)
    assert len(made) == 2 and profile.data["attempt"] == 2
    assert json.loads((tmp_path / "p.json").read_text())["attempt"] == 2  # the one saved
    # the command line says it as a warning, not a traceback, and still shows the profile
    _fake_calibrations(monkeypatch, model, [1.6, 1.5])
    assert main(["calibrate", "--quick", "--profile", str(tmp_path / "c.json")]) == 0
    out, err = capsys.readouterr()
    assert "relaygraph: warning: the machine's speed changed 1.50x" in err
    assert "measuring again" in err and "steadiness" in out and "within 1.50x" in out
    # one attempt: no second run, the warning says so; no attempt is refused by name
    made = _fake_calibrations(monkeypatch, model, [1.7])
    with pytest.warns(calibrate.CalibrationWarning, match=r"changed 1\.70x during the calibration "):
        calibrate.calibrate(quick=True, path=str(tmp_path / "o.json"), progress=False, attempts=1)
    assert len(made) == 1
    with pytest.raises(rg.RelayError, match="attempts must be a positive integer"):
        calibrate.calibrate(quick=True, path=str(tmp_path / "z.json"), progress=False, attempts=0)


def test_a_calibration_records_a_probe_after_each_of_its_parts(monkeypatch):
    from relaygraph.egraph import calibrate

    parts = ["dispatch", "curves", "gemm", "bmm", "numexpr", "conv", "conv_transpose", "fused", "in_program"]
    for name in parts:
        monkeypatch.setattr(calibrate._Calibration, name, lambda self: None)
    passes = iter([1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    monkeypatch.setattr(calibrate.Probe, "__call__", lambda self, repeats=5: next(passes))
    data = calibrate._Calibration(quick=True, progress=False).run()
    assert data["probes"] == [1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0]
    assert data["probe"] == 1.0 and calibrate.probe_spread(data) == 3.0


def test_in_program_factors_are_the_median_of_rounds(monkeypatch):
    from relaygraph.egraph import calibrate

    five = [{"nn.max_pool2d": 3.0, "add": 2.0}, {"nn.max_pool2d": 1.2, "add": 2.1},
            {"nn.max_pool2d": 1.4, "add": 1.9, "tanh": 1.1}, {"nn.max_pool2d": 1.3, "add": 2.0},
            {"nn.max_pool2d": 2.9, "add": 2.2}]
    rounds = iter(five * 3)
    monkeypatch.setattr(calibrate._Calibration, "_in_program_round",
                        lambda self, programs, model: next(rounds))
    monkeypatch.setattr(calibrate._Calibration, "_synthetic_programs", lambda self: [])
    cal = calibrate._Calibration(quick=False, progress=False)
    cal.in_program()
    assert cal.data["in_program"] == {"add": 2.0, "nn.max_pool2d": 1.4, "tanh": 1.1}
    assert cal.data["in_program_rounds"] == calibrate.IN_PROGRAM_ROUNDS == 15
    # rounds measured between the parts count toward the total: the end runs what is left
    rounds = iter([{"add": 9.0}] * 13 + [{"add": 1.0}] * 2)
    cal = calibrate._Calibration(quick=False, progress=False)
    cal.data["curves"]["add"] = [[1.0, 1e-6]]
    for _ in range(6):
        cal._spread_rounds()
    cal.in_program()
    assert cal.data["in_program"] == {"add": 9.0} and cal.data["in_program_rounds"] == 15
    with pytest.raises(StopIteration):
        next(rounds)


def test_in_program_rounds_run_between_the_parts_of_a_full_calibration(monkeypatch):
    """Two rounds after every part from the curves on, none before an add's curve is measured nor
    in a quick calibration, the rest at the end."""
    from relaygraph.egraph import calibrate

    log = []
    parts = ["dispatch", "curves", "gemm", "bmm", "numexpr", "conv", "conv_transpose", "fused"]
    for name in parts:
        def part(self, name=name):
            log.append(name)
            if name == "curves":
                self.data["curves"]["add"] = [[1.0, 1e-6]]
        monkeypatch.setattr(calibrate._Calibration, name, part)
    monkeypatch.setattr(calibrate._Calibration, "_synthetic_programs", lambda self: [])
    monkeypatch.setattr(calibrate._Calibration, "_in_program_round",
                        lambda self, programs, model: log.append("round") or {"add": 1.5})
    monkeypatch.setattr(calibrate.Probe, "__call__", lambda self, repeats=5: 1.0)
    data = calibrate._Calibration(quick=False, progress=False).run()
    assert log == ["dispatch", "curves", "round", "round", "gemm", "round", "round", "bmm", "round", "round",
                   "numexpr", "round", "round", "conv", "round", "round", "conv_transpose", "round", "round",
                   "fused", "round", "round", "round"]
    assert data["in_program"] == {"add": 1.5} and data["in_program_rounds"] == 15
    log.clear()
    calibrate._Calibration(quick=True, progress=False).run()
    assert log.count("round") == 1


def test_every_command_reports_an_unsteady_calibration_in_its_own_words(tmp_path, monkeypatch, model,
                                                                       capsys):
    """A command that calibrates a missing profile on its way (``optimize``, as ``make demo`` does)
    says the machine's speed changed as ``relaygraph calibrate`` does: ``relaygraph: warning:
    ...``, not Python's warning line with a file path and a source line."""
    _fake_calibrations(monkeypatch, model, [1.6, 1.5])
    monkeypatch.setenv("RELAYGRAPH_PROFILE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYGRAPH_CALIBRATE", "quick")
    cpu_cost.reset_default()
    try:
        assert main(["optimize", "--model", "residual-mlp", "--small", "--no-progress"]) == 0
    finally:
        cpu_cost.reset_default()
    err = capsys.readouterr().err
    assert "relaygraph: warning: the machine's speed changed 1.50x during each of 2 calibrations" in err
    assert "CalibrationWarning" not in err and ".py:" not in err


def test_convolutions_are_calibrated_with_the_weight_read_cold(model):
    """A program reads each convolution's weight once a run, from memory: looped on one weight, a
    512-channel layer on a 2x2 image kept its 9 MB in the cache and ran 0.6x its time in the
    program. So every convolution, fused convolution and Winograd measurement of the calibration is
    taken with the weight cold (rotating copies); only the fixed cost per call (a one-channel
    weight) and the depthwise kernels' layout and epilogue ratios (kilobytes of weight) are timed
    warm."""
    from relaygraph.egraph.calibrate import _Calibration

    cal = _Calibration(quick=True, progress=False)
    cal.data = dict(model.profile.data, conv=[[1, 1, 1, 1, 1.0]], fused={}, winograd=[])
    warm, cold = [], []

    def kernel_time(kernel, args, attrs):
        warm.append([a.shape for a in args])
        return 1e-3

    def cold_time(kernel, args, attrs, weight=1):
        cold.append([args[weight].shape])
        return 1e-3

    def cold_times(calls, weight=1, repeats=None):
        cold.append([args[weight].shape for _, args, _ in calls])
        return [1e-3 * (i + 1) for i in range(len(calls))]

    cal.kernel_time, cal.cold_time, cal.cold_times = kernel_time, cold_time, cold_times
    cal.step = lambda info, n=1: None
    cal.conv()
    # warm: only weights of one input channel per filter (the fixed costs, depthwise kernels:
    # kilobytes of weight) and layout copies; every weight with I > 1 was read cold
    assert warm and all(len(a) < 2 or (len(a[1]) == 4 and 1 in (a[1][1], a[1][2])) for a in warm)
    shapes = cal._conv_shapes()
    singles = [c[0] for c in cold if len(c) == 1]  # each shape's direct kernel, in turn
    assert singles[:len(shapes)] == [(o, c, *k) for c, _, o, k, _, _ in shapes]
    # F(2x2, 3x3) and F(4x4, 3x3) against the direct kernel in one alternated measurement: their
    # (4, 4, O, I) and (6, 6, O, I) weights first, then the direct kernel's
    triples = [c for c in cold if len(c) == 3 and [w[:2] for w in c] == [(4, 4), (6, 6), c[2][:2]]]
    assert len(triples) == sum(1 for _, _, _, k, s, _ in shapes if k == (3, 3) and s == 1) > 0
    assert len(cal.data["winograd"]) == len(cal.data["winograd4"]) == len(triples)
    assert all(row[-1] > 0 for row in cal.data["winograd"] + cal.data["winograd4"])
    # the same shape keys; the ratios per wanted pixel (F(4x4)'s tiles waste more: 1 ms / 3 ms
    # over its own waste)
    assert [r[:3] for r in cal.data["winograd"]] == [r[:3] for r in cal.data["winograd4"]]
    size = next(s for _, s, _, k, st, _ in shapes if k == (3, 3) and st == 1)
    assert cal.data["winograd4"][0][-1] == pytest.approx(2 / 3 / cpu_cost.tile_waste(size, size, 4))
    assert cal.data["fused"] and all(len(rows) > 0 for rows in cal.data["fused"].values())


@pytest.mark.parametrize("quick", [True, False])
def test_in_program_factors_come_from_residual_stages_at_two_sizes(quick):
    """A convolution's in-program slowdown depends on its size and on what ran before it: the
    factors come from direct and Winograd convolutions at two image sizes, each reading the fresh
    output of a residual add (one block with one of each priced ResNet-34's layers 7-15% over)."""
    from relaygraph.egraph.calibrate import _Calibration
    from relaygraph.ir import iter_post_order
    from relaygraph.ir.expr import Call

    func = _Calibration(quick=quick, progress=False)._synthetic_programs()[0][0]
    typed = rg.infer_type(rg.IRModule.from_expr(func))
    sizes: dict[str, set] = {"nn.conv2d": set(), cpu_cost.WINOGRAD: set()}
    after_add = 0
    for node in iter_post_order(typed["main"].body):
        if isinstance(node, Call) and getattr(node.op, "name", None) in sizes:
            shape = typed.type_of(node.args[0]).shape
            if node.op.name == cpu_cost.WINOGRAD or typed.type_of(node.args[1]).shape[2:] == (3, 3):
                sizes[node.op.name].add(shape[2])
            data = node.args[0]
            after_add += isinstance(data, Call) and data.op.name == "nn.relu" and \
                isinstance(data.args[0], Call) and data.args[0].op.name == "add"
    assert len(sizes["nn.conv2d"]) >= 2 and len(sizes[cpu_cost.WINOGRAD]) >= 2
    assert after_add >= 3


def test_a_fused_winograd_kernel_costs_the_plain_one_and_its_epilogue(model):
    """The fused Winograd kernels run their epilogue inside: the bias is added to one tile
    position's products (a sixteenth of them), the relu is one pass over the output. Priced through
    the direct kernel's fused ratio instead, a fused layer cost more than the plain kernel and a
    separate scale-shift-relu on this machine's profile, and extraction split the fused layers."""
    x, u, b = T((1, 64, 28, 28), "float32"), T((4, 4, 64, 64), "float32"), T((64,), "float32")
    attrs = rg.ops.lookup(cpu_cost.WINOGRAD).resolve({"tile_size": 2, "padding": (1, 1), "channels": 64})
    plain = model.kernel(cpu_cost.WINOGRAD, attrs, [x, u], x)
    relu = model.kernel("nn.relu", {}, [x], x)
    tiles = T((14 * 14, 64), "float32")
    bias = model.kernel("add", {}, [tiles, b], tiles)
    assert bias > 0 and relu > 0
    assert model.kernel("fused.winograd_relu", attrs, [x, u], x) == pytest.approx(plain + relu)
    assert model.kernel("fused.winograd_bias", attrs, [x, u, b], x) == pytest.approx(plain + bias)
    fused = model.kernel("fused.winograd_bias_relu", attrs, [x, u, b], x)
    assert fused == pytest.approx(plain + bias + relu)


def test_in_program_factors_leave_out_arithmetic_bound_kernels(monkeypatch):
    # erf over a transformer's expansion takes ~3 ms looped, of which moving its data is ~26 us:
    # its time in a program less its looped time is noise of the arithmetic, which over those
    # 26 us gave factors from 0.5 to 2.6. It is left out (and takes its kind's factor); the adds,
    # which are all data movement, set theirs
    from relaygraph.egraph import calibrate

    # the block's one (128, 768) add took 19-21 us looped on a fast machine, about the least time
    # an op needs to set a factor at all: that rule is not what this test is about
    monkeypatch.setattr(calibrate, "_MIN_LOOPED_SECONDS", 5e-6)

    run = calibrate._Calibration(quick=True, progress=False)
    run.curves()
    model = cpu_cost.CpuCost(cpu_cost.Profile({"dispatch": 0.0, "gemm": [], "bmm": [], "conv": [],
                                               **run.data, "key": {}}))
    attention = calibrate._Calibration(quick=False, progress=False)._synthetic_programs()[2]
    rounds = [run._in_program_round([attention], model) for _ in range(3)]
    assert all("add" in factors for factors in rounds)
    assert all("kind:elementwise" in factors for factors in rounds)
    assert not any("erf" in factors for factors in rounds)
    assert model.profile.curve("erf")  # (priced: the erf curve is there, only its factor is the kind's)


def test_in_program_timing_frees_values_as_the_program_does():
    # The in-program factors compare an instruction's time in its plan with its time looped. In
    # the plan, a value is freed after its last use and its memory (still in the cache) goes to a
    # later output; timed while every value was kept alive, each output landed in memory the cache
    # no longer held, and SqueezeNet's relus ran 1.6x their time in the program. Here the first
    # value is dead by the third instruction in every timed run, and the kept run has every
    # instruction's inputs and output for the loops.
    import time
    import weakref

    from relaygraph.egraph import calibrate
    from relaygraph.eval.executor import compile_function
    from relaygraph.ir.expr import Function, var

    x = var("x", shape=(64, 64))
    chain = Function([x], rg.op.tanh(rg.op.exp(rg.op.negative(x))))
    func = rg.infer_type(rg.IRModule.from_expr(chain))["main"]
    plan = compile_function(func)
    assert len(plan.instrs) == 3
    first: list = []
    alive_at_third: list[bool] = []

    def spy(run, i):
        def go(args, extra):
            if i == 2:
                alive_at_third.append(first[-1]() is not None)
            out = run(args, extra)
            if i == 0:
                first.append(weakref.ref(out))
            return out
        return go

    spied = plan.instrumented(spy)
    value = np.random.default_rng(0).standard_normal((64, 64)).astype("float32")
    times = calibrate.time_in_place(spied, [value], 4, time.perf_counter)
    assert [len(t) for t in times] == [4, 4, 4]
    assert alive_at_third == [False] * 4
    seen = calibrate.kept_values(plan, [value])
    assert [s[3].shape for s in seen] == [(64, 64)] * 3
    np.testing.assert_allclose(seen[2][3], np.tanh(np.exp(-value)), rtol=1e-6)
    np.testing.assert_array_equal(seen[1][1][0], seen[0][3])  # each instruction's inputs are kept


def test_value_dependent_kernels_are_timed_on_distinct_inputs(monkeypatch):
    # erf, sigmoid and leaky_relu branch on their values: looped on one input the processor's
    # branch predictor learns it, and at 32K elements they ran 2.2-3.2x faster than on new values
    # each call. Their curves take distinct inputs in turn, never the same one twice running;
    # the other kernels keep the looped measurement.
    from relaygraph.egraph import calibrate

    run = calibrate._Calibration(quick=True, progress=False)
    spec = calibrate._curve_specs()["erf"]
    first, attrs = spec(run.rng, 4096)
    calls: list[int] = []

    def kernel(args, _attrs):
        calls.append(id(args[0]))
        return args[0]

    # as many calls as cycle twice through the inputs, whatever the clock says (timed, a slow first
    # call made few enough loops that some inputs were never reached)
    cycle = calibrate.DISTINCT_ELEMENTS // first[0].size
    call = run.distinct_inputs_call(kernel, spec, 4096, first, attrs)
    for _ in range(2 * cycle):
        call()
    assert len(set(calls)) == calibrate.DISTINCT_ELEMENTS // first[0].size and calls[0] == id(first[0])
    assert all(a != b for a, b in zip(calls, calls[1:], strict=False))
    # which curves are measured that way
    current, distinct = [None], []
    real_call = calibrate._call

    def call(name, arrays, **kw):
        current[0] = name
        return real_call(name, arrays, **kw)

    monkeypatch.setattr(calibrate, "_call", call)
    monkeypatch.setattr(calibrate._Calibration, "distinct_inputs_call",
                        lambda self, *a: distinct.append(current[0]) or (lambda: None))
    batches: list[tuple[int, bool]] = []
    monkeypatch.setattr(calibrate, "measure_alternated",
                        lambda fns, *a, **kw: batches.append((len(fns), kw.get("warm"))) or [1e-6] * len(fns))
    run.specs = {name: spec for name, spec in calibrate._curve_specs().items()
                 if name in ("erf", "sigmoid", "nn.leaky_relu", "tanh", "add")}
    run.curves()
    assert sorted(set(distinct)) == ["erf", "nn.leaky_relu", "sigmoid"]
    assert len(distinct) == 3 * len(run.sizes) and run.data["curves"]["tanh"]
    # every point of every curve (and the copies) in one alternated measurement, each sample warm
    assert batches == [((len(run.specs) + 3) * len(run.sizes), True)]


def test_paired_ratio_is_the_median_of_the_rounds_ratios():
    from relaygraph.egraph.program_profile import paired_ratio

    # the machine slowed down for the last two rounds: the medians' ratio is 3/2, each round says 2
    base, other = [2.0, 2.0, 2.0, 6.0, 6.0], [1.0, 1.0, 1.0, 3.0, 3.0]
    assert paired_ratio(base, other) == 2.0
    assert paired_ratio([4.0, 1.0, 3.0], [2.0, 2.0, 1.0]) == 2.0  # ratios 2, 0.5, 3
    with pytest.raises(rg.RelayError, match="same number of rounds"):
        paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(rg.RelayError, match="at least one"):
        paired_ratio([], [])


def test_profile_shows_a_layout_change_copy_on_the_instruction_that_makes_it(model):
    """A transpose between NCHW and NHWC is a view in the executor; its reader makes the copy the
    model prices on the transpose, so rg.profile predicts the copy on the reader's row."""
    from relaygraph.egraph import program_profile as pp

    x = rg.var("x", shape=(1, 8, 16, 16))
    t = rg.op.transpose(x, axes=[0, 2, 3, 1])

    def steps_and_own(body):
        typed = rg.infer_type(rg.IRModule.from_expr(rg.Function([x], body)))
        types = typed.checked_types
        steps = pp._steps(typed["main"], typed, model)
        own = [model(s.node.op.name, s.node.attrs, [types.type_of(a) for a in s.node.args],
                     types.type_of(s.node)) for s in steps]
        return steps, own

    steps, own = steps_and_own(rg.op.nn.relu(t))
    assert [s.info[1] for s in steps] == ["transpose", "nn.relu"]
    assert own[0] > model.profile.dispatch  # the model prices the copy on the transpose
    assert steps[0].info[4] == pytest.approx(model.profile.dispatch)
    assert steps[1].info[4] == pytest.approx(own[1] + own[0] - model.profile.dispatch)
    assert sum(s.info[4] for s in steps) == pytest.approx(sum(own))  # the program's prediction
    # read by two instructions (each reads the view): the transpose keeps its price
    steps, own = steps_and_own(rg.op.add(rg.op.nn.relu(t), t))
    assert [s.info[4] for s in steps] == pytest.approx(own)
    # a transpose that changes no layout (a matrix's) keeps its price too
    m = rg.var("m", shape=(6, 4))
    body = rg.op.nn.relu(rg.op.transpose(m, axes=[1, 0]))
    typed = rg.infer_type(rg.IRModule.from_expr(rg.Function([m], body)))
    steps = pp._steps(typed["main"], typed, model)
    types = typed.checked_types
    assert steps[0].info[4] == pytest.approx(model("transpose", steps[0].node.attrs, [types.type_of(m)],
                                                   types.type_of(steps[0].node)))
