"""rg.frontend.to_onnx: exported models evaluate, in ONNX's own reference evaluator, as rg.evaluate
does on the Relay program (every covered op's examples, zoo models, optimized programs), and the
CLI ``relaygraph export`` with its bad-input paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.frontend.onnx_export import covered_ops, save, to_onnx
from relaygraph.ir import Function, IRModule, TupleType, Var
from relaygraph.ops import all_ops, get, random_inputs

RTOL, ATOL = 1e-4, 1e-5
FUSION_RULES = str(Path(__file__).resolve().parent.parent / "rules" / "fusion.rules")
# a short optimize: the fusion rules alone, small limits, no check (the tests compare themselves)
# the latency model: under the cpu model, whether fusion pays on these small models depends on the
# machine's profile, and the tests below need fused groups to export
QUICK = dict(rules=[FUSION_RULES], node_limit=1500, iter_limit=2, time_limit=5, check=False,
             extractor="greedy-dag", progress=False, cost="latency")


def _run_onnx(model: onnx.ModelProto, feeds: dict) -> list:
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def _outputs(value) -> list:
    if isinstance(value, tuple | list):
        return [np.asarray(v) for v in value]
    return [np.asarray(value)]


def _assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=RTOL, atol=ATOL)


def _check_module(mod: IRModule, params: dict | None = None, seed: int = 0, **kwargs) -> onnx.ModelProto:
    """Export, check, and compare the ONNX reference evaluator with rg.evaluate on random inputs."""
    params = params or {}
    model = to_onnx(mod, params, **kwargs)
    onnx.checker.check_model(model, full_check=True)
    inputs = rg.zoo.example_inputs(mod, params, seed=seed)
    args = [inputs[p.name_hint] if p.name_hint in inputs else params[p.name_hint]
            for p in mod["main"].params]
    _assert_same(_run_onnx(model, inputs), _outputs(rg.evaluate(mod, *args)))
    return model


# -- every covered op, from the op table's own examples --------------------------------------------
# Examples the exporter refuses with a clear error, and why.
REFUSED = {
    ("nn.upsampling", 2): "layout=",  # ONNX's Resize is written for NCHW only
    ("nn.conv2d", 6): "take floating point",  # ONNX's Conv has no integer form (ConvInteger differs)
    ("nn.avg_pool2d", 4): "needs opset 19",  # a dilated AveragePool: checked at opset 19 below
}
# Examples onnx.reference computes wrongly (its grouped ConvTranspose mis-reshapes the weight):
# compared with onnxruntime instead, the runtime users run.
ORT_ONLY = {("nn.conv2d_transpose", 2)}
CASES = [(op.name, i) for op in all_ops() if op.name in covered_ops() for i in range(len(op.examples))]


def _example_program(name: str, index: int) -> tuple[Function, list]:
    op = get(name)
    arg_types, given = op.examples[index]
    params, args = [], []
    for i, t in enumerate(arg_types):
        if isinstance(t, TupleType):  # concatenate and stack take a tuple: one input per field
            fields = [Var(f"a{i}_{j}", f) for j, f in enumerate(t.fields)]
            params += fields
            args.append(rg.Tuple(fields))
        else:
            params.append(Var(f"a{i}", t))
            args.append(params[-1])
    call = rg.op.make_call(name, *args, **given)
    values = random_inputs(op, arg_types, call.attrs, rng=index)
    if name == "nn.dropout":
        call = rg.TupleGetItem(call, 0)  # ONNX has no counterpart of the (all ones) mask
    flat = []
    for v in values:
        flat += list(v) if isinstance(v, tuple | list) else [v]
    return Function(params, call), flat


@pytest.mark.parametrize("name,index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_every_covered_op_example_matches_the_reference_evaluator(name, index):
    fn, values = _example_program(name, index)
    mod = IRModule.from_expr(fn)
    opset = None
    if (name, index) in REFUSED:
        with pytest.raises(rg.RelayError, match=f"cannot export {name} to ONNX: .*{REFUSED[name, index]}"):
            to_onnx(mod)
        if name != "nn.avg_pool2d":
            return
        opset = 19
    model = to_onnx(mod, opset=opset)
    feeds = {p.name_hint: v for p, v in zip(fn.params, values, strict=True)}
    want = _outputs(rg.evaluate(mod, *values))
    if (name, index) in ORT_ONLY:
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        _assert_same([np.asarray(v) for v in session.run(None, feeds)], want)
        return
    _assert_same(_run_onnx(model, feeds), want)


def test_every_registered_op_is_covered_or_named_in_the_error():
    uncovered = [op.name for op in all_ops()
                 if op.name not in covered_ops() and not op.name.startswith("fused.")]
    assert uncovered == ["annotation.compiler_begin", "annotation.compiler_end",
                         "nn.contrib_conv2d_winograd_without_weight_transform"]


# -- zoo models ------------------------------------------------------------------------------------
ZOO = ["resnet-18", "mobilenet", "bert", "squeezenet-1.1", "vgg-11", "inception-v3", "densenet-121",
       "dcgan", "nasrnn", "residual-mlp", "diamond-chain", "vit-sima"]


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_exports_and_evaluates_equal(name):
    options = {} if name in ("residual-mlp", "diamond-chain") else {"small": True}
    mod, params = rg.zoo.get(name, **options)
    model = _check_module(mod, params)
    names = {i.name for i in model.graph.initializer}
    # weights are initializers, not graph inputs; only unread ones are left out (the gamma of a
    # batch_norm with scale=False)
    unread = {c.args[1].name_hint for c in rg.post_order(mod["main"])
              if isinstance(c, rg.Call) and c.op == rg.Op("nn.batch_norm")
              and not get("nn.batch_norm").resolve(c.attrs)["scale"]}
    assert set(params) - names == unread & set(params)
    assert not set(params) & {i.name for i in model.graph.input}


def test_optimized_program_with_primitive_groups_exports():
    mod, params = rg.zoo.get("bert", small=True)
    res = rg.optimize(mod, params=params, **QUICK)
    assert "Primitive=1" in rg.astext(res.module)
    model = _check_module(res.module, {}, seed=1)
    assert not any(n.op_type.startswith("fused") for n in model.graph.node)
    want = rg.evaluate(mod, *[rg.zoo.example_inputs(mod, params, seed=1)["data"]
                              if p.name_hint == "data" else params[p.name_hint]
                              for p in mod["main"].params])
    feeds = rg.zoo.example_inputs(mod, params, seed=1)
    _assert_same(_run_onnx(model, feeds), [np.asarray(want)])


def test_fused_ops_kept_by_optimize_are_expanded():
    mod, params = rg.zoo.get("resnet-18", small=True)
    res = rg.optimize(mod, params=params, keep_fused_ops=True, **QUICK)
    assert "fused." in rg.astext(res.module)
    _check_module(res.module, {})


# -- hand-written programs -------------------------------------------------------------------------
def _parse(body: str, params: str) -> IRModule:
    return rg.parse(f'#[version = "0.0.5"]\ndef @main({params}) {{ {body} }}\n')


def test_let_bound_program_with_tuple_result_and_shared_nodes():
    mod = _parse("let %a = nn.relu(%x); let %b = add(%a, %a); (%b, %a, %x, %b)",
                 "%x: Tensor[(2, 3), float32]")
    model = _check_module(mod)
    assert len(model.graph.output) == 4
    assert len({o.name for o in model.graph.output}) == 4  # repeated values get their own outputs


def test_symbolic_dims_become_dim_params():
    mod = _parse("%0 = nn.dense(%x, %w, units=4); %1 = reshape(%0, newshape=[-1, 2, 2]); "
                 "nn.softmax(transpose(%1, axes=[0, 2, 1]))",
                 "%x: Tensor[(n, 8), float32], %w: Tensor[(4, 8), float32]")
    model = to_onnx(mod)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "n" and dims[1].dim_value == 8
    out = model.graph.output[0].type.tensor_type.shape.dim
    assert out[0].dim_param == "n" and [d.dim_value for d in out[1:]] == [2, 2]
    rng = np.random.default_rng(0)
    for n in (1, 5):  # one model, any batch
        x, w = rng.standard_normal((n, 8), "float32"), rng.standard_normal((4, 8), "float32")
        concrete = _parse("%0 = nn.dense(%x, %w, units=4); %1 = reshape(%0, newshape=[-1, 2, 2]); "
                          "nn.softmax(transpose(%1, axes=[0, 2, 1]))",
                          f"%x: Tensor[({n}, 8), float32], %w: Tensor[(4, 8), float32]")
        _assert_same(_run_onnx(model, {"x": x, "w": w}), [rg.evaluate(concrete, x, w)])


def test_any_dim_is_an_unnamed_onnx_dim():
    model = to_onnx(_parse("nn.relu(%x)", "%x: Tensor[(?, 3), float32]"))
    d = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert not d.HasField("dim_value") and not d.HasField("dim_param")


@pytest.mark.parametrize("opset", [13, 17, 18])
def test_layer_norm_and_reductions_at_several_opsets(opset):
    mod = _parse("%0 = nn.layer_norm(%x, %g, %b, epsilon=1e-3f); (mean(%0, axis=[1], keepdims=True), "
                 "max(%0, axis=[0, 2]), sum(%0), nn.layer_norm(%x, %g2, %b2, axis=1))",
                 "%x: Tensor[(2, 3, 4), float32], %g: Tensor[(4), float32], %b: Tensor[(4), float32], "
                 "%g2: Tensor[(3), float32], %b2: Tensor[(3), float32]")
    model = _check_module(mod, opset=opset)
    assert model.opset_import[0].version == opset
    ops = {n.op_type for n in model.graph.node}
    assert ("LayerNormalization" in ops) == (opset >= 17)


@pytest.mark.parametrize("n", [pytest.param(100_000, marks=pytest.mark.slow), 10_001])
def test_a_deep_chain_exports(n):
    x = rg.var("x", rg.TensorType((2,), "float32"))
    e = rg.op.nn.relu(x)
    for _ in range(n - 1):
        e = rg.op.negative(e)  # an even number of negations of relu(x)
    model = to_onnx(Function([x], e))
    assert len(model.graph.node) == n
    v = np.array([1.0, -2.0], "float32")
    assert np.array_equal(_run_onnx(model, {"x": v})[0], np.maximum(v, 0) * (-1) ** (n - 1))


def test_save_and_path_write_a_loadable_model(tmp_path):
    mod, params = rg.zoo.get("residual-mlp")
    model = to_onnx(mod, params, path=tmp_path / "a.onnx", name="mlp")
    assert model.graph.name == "mlp"
    assert onnx.load(str(tmp_path / "a.onnx")) == model
    save(model, tmp_path / "b.onnx")
    assert (tmp_path / "b.onnx").read_bytes() == (tmp_path / "a.onnx").read_bytes()
    assert rg.frontend.to_onnx is to_onnx


# -- bad input -------------------------------------------------------------------------------------
def test_an_uncovered_op_is_named_with_the_covered_alternatives():
    mod = _parse('annotation.compiler_begin(%x, compiler="dnnl")', "%x: Tensor[(2,), float32]")
    with pytest.raises(rg.RelayError) as info:
        to_onnx(mod)
    msg = str(info.value)
    assert "annotation.compiler_begin is not in the covered set" in msg
    assert "nn.conv2d" in msg and "nn.layer_norm" in msg


@pytest.mark.parametrize("body,params,match", [
    ("nn.upsampling(%x, scale_h=2f, scale_w=2f, align_corners=True)",
     "%x: Tensor[(1, 1, 2, 2), float32]", "rounds ties"),
    ("take(%x, %i, axis=2, batch_dims=1)",
     "%x: Tensor[(2, 3, 4), float32], %i: Tensor[(2, 2), int32]", "GatherND needs them equal"),
    ("nn.conv2d(%x, %w, channels=2, kernel_size=[1, 1])",
     "%x: Tensor[(1, 2, 3, 3), int32], %w: Tensor[(2, 2, 1, 1), int32]", "take floating point"),
    ("nn.dropout(%x).1", "%x: Tensor[(2,), float32]", "mask of nn.dropout"),
])
def test_unexportable_attributes_give_a_clear_error(body, params, match):
    with pytest.raises(rg.RelayError, match=match):
        to_onnx(_parse(body, params))


def test_control_flow_and_local_functions_are_refused_clearly():
    mod, params = rg.zoo.get("lstm", small=True)
    with pytest.raises(rg.RelayError, match="only dataflow programs"):
        to_onnx(mod, params)
    cond = _parse("if (%c) { %x } else { negative(%x) }", "%c: bool, %x: Tensor[(2,), float32]")
    with pytest.raises(rg.RelayError, match="If in the entry function"):
        to_onnx(cond)


@pytest.mark.parametrize("kwargs,match", [
    ({"opset": 12}, "opset must be an int from 13"), ({"opset": 10_000}, "opset must be"),
    ({"params": {"nope": np.zeros(2, "float32")}}, "params nope are not parameters"),
])
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(rg.RelayError, match=match):
        to_onnx(_parse("nn.relu(%x)", "%x: Tensor[(2,), float32]"), **kwargs)


def test_not_a_module_is_refused():
    with pytest.raises(rg.RelayError, match="takes an IRModule or a Function"):
        to_onnx("def @main() {}")
    with pytest.raises(rg.RelayError, match="no @main"):
        to_onnx(IRModule())


# -- the command line ------------------------------------------------------------------------------
def test_cli_exports_a_zoo_model(tmp_path, capsys):
    out = tmp_path / "r.onnx"
    assert main(["export", "--model", "resnet-18", "--small", "-o", str(out)]) == 0
    assert f"exported resnet-18 to {out}: opset 17" in capsys.readouterr().out
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    mod, params = rg.zoo.get("resnet-18", small=True)
    assert {i.name for i in model.graph.input} == {"data"}


def test_cli_exports_a_relay_file_at_an_opset(tmp_path, capsys):
    src = tmp_path / "p.relay"
    src.write_text(rg.astext(_parse("mean(nn.relu(%x), axis=[1])", "%x: Tensor[(2, 3), float32]")))
    out = tmp_path / "p.onnx"
    assert main(["export", str(src), "-o", str(out), "--opset", "18"]) == 0
    model = onnx.load(str(out))
    assert model.opset_import[0].version == 18
    x = np.arange(6, dtype="float32").reshape(2, 3) - 2
    assert np.allclose(_run_onnx(model, {"x": x})[0], np.maximum(x, 0).mean(axis=1))


@pytest.mark.parametrize("setup,match", [
    (lambda p: p.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) '
                            '{ annotation.compiler_begin(%x, compiler="dnnl") }\n'),
     "annotation.compiler_begin is not in the covered set"),
    (lambda p: None, "no such file"),
    (lambda p: p.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) { %x + }\n'),
     "error:"),
])
def test_cli_bad_input_exits_2_with_one_message(tmp_path, capsys, setup, match):
    src = tmp_path / "p.relay"
    setup(src)
    assert main(["export", str(src), "-o", str(tmp_path / "p.onnx")]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and "internal error" not in err
    assert not (tmp_path / "p.onnx").exists()


def test_cli_bad_opset_and_missing_program_exit_2(tmp_path, capsys):
    assert main(["export", "--model", "residual-mlp", "-o", str(tmp_path / "m.onnx"), "--opset", "5"]) == 2
    assert "opset must be an int from 13" in capsys.readouterr().err
    assert main(["export", "-o", str(tmp_path / "m.onnx")]) == 2
    assert "give a Relay file or --model" in capsys.readouterr().err


# -- the benchmark (benchmarks/bench_onnx.py) -------------------------------------------------------
def _bench_module():
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_onnx.py"
    spec = importlib.util.spec_from_file_location("bench_onnx", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_without_onnxruntime_says_how_to_install_it(monkeypatch, capsys):
    import sys

    bench = _bench_module()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    monkeypatch.setattr(sys, "argv", ["bench_onnx.py", "--models", "bert"])
    assert bench.main() == 0
    assert "pip install -e '.[bench]'" in capsys.readouterr().out


def test_bench_prints_the_ratio_on_an_exported_zoo_model(monkeypatch, capsys):
    pytest.importorskip("onnxruntime")
    bench = _bench_module()
    monkeypatch.setattr("sys.argv", ["bench_onnx.py", "--models", "bert", "--repeat", "1"])
    assert bench.main() == 0
    out = capsys.readouterr().out
    assert "bert (zoo, exported with to_onnx)" in out and "ratio" in out and "outputs agree" in out


def test_a_tuple_parameter_is_refused_clearly():
    mod = _parse("%t.0", "%t: (Tensor[(2,), float32], Tensor[(2,), float32])")
    with pytest.raises(rg.RelayError, match="the parameter %t has type .*ONNX graph inputs and outputs are"):
        to_onnx(mod)


def test_cli_unwritable_output_exits_2(tmp_path, capsys):
    out = tmp_path / "no-such-dir" / "m.onnx"
    assert main(["export", "--model", "residual-mlp", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "relaygraph: error:" in err and "Traceback" not in err


def test_reshape_moving_symbolic_dims_reads_them_at_run_time():
    # attention's head split as an importer may write it: (b, 4, s, 16) -> (4*b, s, 16) and back
    mod = _parse("%0 = reshape(%x, newshape=[-3, -2]); %1 = nn.relu(%0); "
                 "reshape(%1, newshape=[-4, -1, 4, -2])", "%x: Tensor[(b, 4, s, 16), float32]")
    typed = rg.infer_type(mod)
    assert [str(d) for d in typed.type_of(mod["main"].body.args[0]).shape] == ["4*b", "s", "16"]
    model = to_onnx(mod)
    assert any(n.op_type == "Gather" for n in model.graph.node)
    x = np.random.default_rng(0).standard_normal((3, 4, 5, 16)).astype("float32")
    _assert_same(_run_onnx(model, {"x": x}), [np.maximum(x, 0)])


def test_cli_in_a_subprocess_reports_an_uncovered_op_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "p.relay").write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) '
                                      '{ annotation.compiler_end(%x, compiler="dnnl") }\n')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-m", "relaygraph", "export", "p.relay", "-o", "p.onnx"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("relaygraph: error: cannot export to ONNX: the operator "
                                  "annotation.compiler_end is not in the covered set; covered "
                                  "operators: abs, ")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_repeat_with_symbolic_dims_exports_as_tile_of_a_new_axis(axis):
    mod = _parse(f"repeat(%x, repeats=3, axis={axis})", "%x: Tensor[(n, s, 2), float32]")
    model = to_onnx(mod)
    assert {"Unsqueeze", "Expand", "Reshape"} <= {n.op_type for n in model.graph.node}
    for shape in ((2, 4, 2), (1, 1, 2)):
        x = np.random.default_rng(0).standard_normal(shape).astype("float32")
        _assert_same(_run_onnx(model, {"x": x}), [np.repeat(x, 3, axis=axis)])


def test_slice_like_to_a_symbolic_size_reads_it_at_run_time():
    mod = _parse("slice_like(%table, %x, axes=[0])", "%table: Tensor[(10, 3), float32], "
                 "%x: Tensor[(s, 3), float32]")
    model = to_onnx(mod)
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "s"
    table = np.arange(30, dtype="float32").reshape(10, 3)
    for s in (1, 7, 10):
        x = np.zeros((s, 3), "float32")
        _assert_same(_run_onnx(model, {"table": table, "x": x}), [table[:s]])
