"""The ONNX importer through the API and the command line: symbolic and folded shapes, params,
``relaygraph import`` and .onnx input to the other commands, and every kind of bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import relaygraph as rg
from relaygraph.cli import main
from relaygraph.ty import sym

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 8)).astype(np.float32)
B = RNG.standard_normal(8).astype(np.float32)


def attention_like(batch="batch", seq="seq", opset=17) -> onnx.ModelProto:
    """x[batch, seq, 8] @ W + b, heads split by a Shape -> Gather -> Concat -> Reshape subgraph."""
    c = numpy_helper.from_array
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["h"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Unsqueeze", ["t", "ax0"], ["t1"]),
        helper.make_node("Concat", ["n1", "t1", "heads"], ["newshape"], axis=0),
        helper.make_node("Reshape", ["h", "newshape"], ["r"], name="split_heads"),
        helper.make_node("Transpose", ["r"], ["p"], perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["p"], ["y"], axis=-1),
    ]
    inits = [c(W, "W"), c(B, "B"), c(np.array(0, np.int64), "i0"), c(np.array(1, np.int64), "i1"),
             c(np.array([0], np.int64), "ax0"), c(np.array([2, 4], np.int64), "heads")]
    graph = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                            [batch, seq, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2, seq, 4])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def reference(model, x):
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


X = RNG.standard_normal((2, 5, 8)).astype(np.float32)


# -- API -------------------------------------------------------------------------------------------
def test_symbolic_dims_stay_symbolic_through_type_inference():
    mod, params = rg.frontend.from_onnx(attention_like())
    typed = rg.infer_type(mod)
    n, s = sym("batch"), sym("seq")
    assert typed["main"].params[0].type_annotation.shape == (n, s, 8)
    assert typed["main"].ret_type.shape == (n, 2, s, 4)
    np.testing.assert_allclose(rg.evaluate(mod, X), reference(attention_like(), X), rtol=1e-5, atol=1e-6)
    assert set(params) >= {"W", "B"}


def test_shape_subgraph_folds_to_a_static_reshape_when_shapes_are_known():
    mod, _ = rg.frontend.from_onnx(attention_like(), shape={"x": (2, 5, 8)})
    text = rg.astext(mod)
    assert "shape_of" not in text and "take" not in text
    assert "newshape=[2, 5, 2, 4]" in text
    assert rg.infer_type(mod)["main"].ret_type.shape == (2, 2, 5, 4)
    np.testing.assert_allclose(rg.evaluate(mod, X), reference(attention_like(), X), rtol=1e-5, atol=1e-6)


def test_static_model_folds_without_a_shape_argument():
    mod, _ = rg.frontend.from_onnx(attention_like(2, 5))
    assert "shape_of" not in rg.astext(mod)


def test_freeze_params_binds_initializers_as_constants_or_keeps_them_as_inputs():
    frozen, params = rg.frontend.from_onnx(attention_like(2, 5))
    assert [p.name_hint for p in frozen["main"].params] == ["x"]
    np.testing.assert_array_equal(params["W"], W)
    free, params2 = rg.frontend.from_onnx(attention_like(2, 5), freeze_params=False)
    names = [p.name_hint for p in free["main"].params]
    assert names[0] == "x" and {"W", "B"} <= set(names)
    # the shape-only initializers (gather indices, axes) are read at import, not made inputs
    assert "heads" not in names
    args = [X] + [params2[n] for n in names[1:]]
    np.testing.assert_allclose(rg.evaluate(free, *args), rg.evaluate(frozen, X), rtol=1e-6)


def test_from_onnx_takes_a_path_bytes_or_a_model(tmp_path):
    model = attention_like(2, 5)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    texts = {rg.astext(rg.frontend.from_onnx(src)[0]) for src in (model, str(path), path,
                                                                   model.SerializeToString())}
    assert len(texts) == 1


def test_opset_9_model_imports():
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
             helper.make_node("Softmax", ["u"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    mod, _ = rg.frontend.from_onnx(model)
    # Softmax before opset 13 flattens from the axis on (onnx.reference uses the newer meaning)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(rg.evaluate(mod, x), (e / e.sum())[None], rtol=1e-5)


# -- bad input through the API -------------------------------------------------------------------------
def unsupported_model(op="Acos") -> onnx.ModelProto:
    if op == "Acos":
        node = helper.make_node("Acos", ["x"], ["v"], name="angle")
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                                  [helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="pick_top")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [3, 2]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [3, 2])],
                              [numpy_helper.from_array(np.array([2], np.int64), "k")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def failing_checker_model() -> onnx.ModelProto:
    node = helper.make_node("Relu", ["nowhere"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def external_data_model(tmp_path):
    path = tmp_path / "ext.onnx"
    onnx.save_model(attention_like(2, 5), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.weights", size_threshold=0)
    (tmp_path / "ext.weights").unlink()
    return path


def bad_inputs(tmp_path):
    good = attention_like(2, 5).SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good[: len(good) // 2])
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xfe this is not a protobuf \x00\x01" * 10)
    checker = tmp_path / "checker.onnx"
    checker.write_bytes(failing_checker_model().SerializeToString())
    unsupported = tmp_path / "unsupported.onnx"
    unsupported.write_bytes(unsupported_model().SerializeToString())
    return {
        "truncated": (truncated, None, "not a valid ONNX model"),
        "garbage": (garbage, None, "not a valid ONNX model"),
        "checker": (checker, None, "fails onnx.checker"),
        "external": (external_data_model(tmp_path), None, "missing external-data file"),
        "missing": (tmp_path / "absent.onnx", None, "no such file"),
        "rank": (tmp_path / "ok.onnx", ["x=2,5"], "contradicts the model"),
        "dim": (tmp_path / "ok.onnx", ["x=2,5,9"], "contradicts the model"),
        "name": (tmp_path / "ok.onnx", ["y=2,5,8"], "has no input of"),
        "unsupported": (unsupported, None, "unsupported operator 'Acos'"),
    }


BAD = ["truncated", "garbage", "checker", "external", "missing", "rank", "dim", "name", "unsupported"]


@pytest.fixture
def bad(tmp_path):
    onnx.save(attention_like(2, 5), tmp_path / "ok.onnx")
    return bad_inputs(tmp_path)


@pytest.mark.parametrize("kind", BAD)
def test_bad_input_raises_one_clear_error(bad, kind):
    path, shape, words = bad[kind]
    shapes = None
    if shape:
        name, dims = shape[0].split("=")
        shapes = {name: tuple(int(d) for d in dims.split(","))}
    with pytest.raises(rg.RelayError, match=words):
        rg.frontend.from_onnx(path, shape=shapes)


def test_unsupported_op_names_node_opset_and_covered_alternatives():
    with pytest.raises(rg.RelayError) as info:
        rg.frontend.from_onnx(unsupported_model())
    msg = str(info.value)
    assert "'angle'" in msg and "'Acos'" in msg and "opset 17" in msg
    assert "close covered ops: Acosh, Cos" in msg
    with pytest.raises(rg.RelayError, match="'pick_top'.*'TopK'.*no covered op has a similar name"):
        rg.frontend.from_onnx(unsupported_model("TopK"))


def test_contradicting_shape_deep_in_the_model_is_reported():
    # a dynamic input given a shape the model's fixed Reshape cannot take
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                              [numpy_helper.from_array(np.array([2, 4], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert rg.frontend.from_onnx(model, shape={"x": (2, 4)})[0] is not None
    with pytest.raises(rg.RelayError, match="contradict"):
        rg.frontend.from_onnx(model, shape={"x": (3, 4)})


# -- command line ----------------------------------------------------------------------------------
def test_cli_import_writes_relay_text_that_reads_back(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(attention_like(), src)
    out = tmp_path / "m.relay"
    assert main(["import", str(src), "-o", str(out), "--shape", "x=2,5,8"]) == 0
    mod = rg.parse(out.read_text())
    np.testing.assert_allclose(rg.evaluate(mod, X), reference(attention_like(), X), rtol=1e-5, atol=1e-6)
    assert main(["import", str(src)]) == 0  # symbolic dims, to standard output
    header = capsys.readouterr().out.splitlines()[1]
    assert header.startswith("def @main(%x: Tensor[(batch, seq, 8), float32])"), header


def test_cli_commands_take_onnx_files(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(attention_like(2, 5), src)
    disguised = tmp_path / "model.bin"  # found by its content, not its name
    disguised.write_bytes(src.read_bytes())
    for argv in (["inspect", str(src)], ["fmt", str(disguised)], ["convert", "--to", "anf", str(src)],
                 ["passes", "-p", "InferType,FuseOps", str(src)]):
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "nn.dense" in out and "Primitive" in out
    assert main(["optimize", str(src), "--node-limit", "500", "--iter-limit", "2", "--extractor",
                 "greedy-dag", "--no-progress"]) == 0


@pytest.mark.parametrize("kind", BAD)
def test_cli_bad_input_exits_2_with_one_message(bad, kind, capsys):
    path, shape, words = bad[kind]
    argv = ["import", str(path)] + [f"--shape={s}" for s in shape or []]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert err.startswith("relaygraph: error:") and len(err.strip().splitlines()) == 1


def test_cli_bad_shape_syntax_and_relay_file(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(attention_like(2, 5), src)
    assert main(["import", str(src), "--shape", "x=a,b"]) == 2
    relay = tmp_path / "m.relay"
    relay.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) { %x }\n')
    assert main(["import", str(relay)]) == 2
    assert main(["optimize", str(relay), "--shape", "x=2"]) == 2
    err = capsys.readouterr().err
    assert "NAME=D1,D2" in err and "not an ONNX model" in err and "--shape applies to ONNX" in err


def test_symbolic_attention_matmuls_keep_batch_and_sequence_symbolic():
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "k"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("q", TensorProto.FLOAT, ["n", 2, "s", 4]),
                                           vi("k", TensorProto.FLOAT, ["n", 2, "s", 4])],
                              [vi("y", TensorProto.FLOAT, ["n", 2, "s", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, _ = rg.frontend.from_onnx(model)
    assert rg.infer_type(mod)["main"].ret_type.shape == (sym("n"), 2, sym("s"), 4)
    q, k = RNG.random((3, 2, 5, 4), np.float32), RNG.random((3, 2, 5, 4), np.float32)
    want = ReferenceEvaluator(model).run(None, {"q": q, "k": k})[0]
    np.testing.assert_allclose(rg.evaluate(mod, q, k), want, rtol=1e-5, atol=1e-6)


def test_the_installed_command_reports_a_truncated_model_in_one_line(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    good = attention_like(2, 5).SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(good[:100])
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-m", "relaygraph", "optimize", "cut.onnx"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("relaygraph: error: cut.onnx: not a valid ONNX model")
    assert len(proc.stderr.splitlines()) == 1


def test_slice_to_a_symbolic_length_taken_from_the_shape_stays_symbolic():
    c = numpy_helper.from_array
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["t"], axis=0),
             helper.make_node("Unsqueeze", ["t", "ax0"], ["e"]),
             helper.make_node("Slice", ["x", "zero", "e", "one1"], ["y"], name="up_to_seq")]
    inits = [c(np.array(1, np.int64), "one"), c(np.array([0], np.int64), "ax0"),
             c(np.array([0], np.int64), "zero"), c(np.array([1], np.int64), "one1")]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["n", "s", 3])],
                              [vi("y", TensorProto.FLOAT, ["n", "s", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, _ = rg.frontend.from_onnx(model)
    assert rg.infer_type(mod)["main"].ret_type.shape == (sym("n"), sym("s"), 3)
    x = RNG.random((2, 4, 3), np.float32)
    np.testing.assert_array_equal(rg.evaluate(mod, x), x)
    # a symbolic end that is not the whole dimension has no static size: a clear error
    nodes[3] = helper.make_node("Slice", ["x", "zero", "e", "zero"], ["y"], name="up_to_seq")
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["n", "s", 3])],
                              [vi("y", TensorProto.FLOAT, ["m", "s", 3])], inits)
    bad = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(rg.RelayError, match="'up_to_seq'.*symbolic end s"):
        rg.frontend.from_onnx(bad)


def buffer_slices(start_from="x") -> onnx.ModelProto:
    """Buffers sliced to shape-derived bounds, as torch exports GPT-2's causal mask: table[1, 10, 5]
    sliced on axis 1 from len(start_from) - len(x) to len(x), row[10, 5] on axis 0 to len(x)."""
    c = numpy_helper.from_array
    vi = helper.make_tensor_value_info

    def length(of, out):
        return [helper.make_node("Shape", [of], [out + "_s"]),
                helper.make_node("Gather", [out + "_s", "one"], [out + "_g"], axis=0),
                helper.make_node("Unsqueeze", [out + "_g", "zero"], [out])]

    nodes = length("x", "q") + length(start_from, "k") + [
        helper.make_node("Sub", ["k", "q"], ["begin"]),
        helper.make_node("Slice", ["table", "begin", "k", "one1"], ["rows"], name="rows"),
        helper.make_node("Slice", ["row", "zero", "q", "zero"], ["cut"], name="cut"),
        helper.make_node("Add", ["x", "rows"], ["y0"]),
        helper.make_node("Add", ["y0", "cut"], ["y"]),
    ]
    inits = [c(np.array(1, np.int64), "one"), c(np.array([0], np.int64), "zero"),
             c(np.array([1], np.int64), "one1"),
             c(RNG.standard_normal((1, 10, 5)).astype(np.float32), "table"),
             c(RNG.standard_normal((10, 5)).astype(np.float32), "row")]
    inputs = [vi("x", TensorProto.FLOAT, ["n", "s", 5])]
    if start_from != "x":
        inputs.append(vi(start_from, TensorProto.FLOAT, ["n", "t", 5]))
    graph = helper.make_graph(nodes, "g", inputs, [vi("y", TensorProto.FLOAT, ["n", "s", 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_buffer_sliced_to_shape_derived_bounds_keeps_the_sequence_symbolic():
    model = buffer_slices()
    mod, _ = rg.frontend.from_onnx(model)
    typed = rg.infer_type(mod)
    assert typed["main"].ret_type.shape == (sym("n"), sym("s"), 5)
    text = rg.astext(typed)
    assert text.count("slice_like(") == 2  # s - s is 0: both slices start at the beginning
    back = rg.frontend.to_onnx(mod)
    for n, s in ((2, 4), (1, 10), (3, 1)):
        x = RNG.standard_normal((n, s, 5)).astype(np.float32)
        want = reference(model, x)
        np.testing.assert_allclose(rg.evaluate(mod, x), want, rtol=1e-6)
        np.testing.assert_allclose(reference(back, x), want, rtol=1e-6)
    # longer than the buffer: the size is not s any more, so evaluation refuses it clearly
    with pytest.raises(rg.RelayError, match="slice_like"):
        rg.evaluate(mod, RNG.standard_normal((1, 11, 5)).astype(np.float32))


def test_a_slice_bound_that_stays_symbolic_is_a_clear_error(tmp_path, capsys):
    model = buffer_slices(start_from="past")  # begins at t - s: its size is known only at run time
    with pytest.raises(rg.RelayError, match=r"node 'rows' \(Slice, opset 17\).*from -s \+ t to t"):
        rg.frontend.from_onnx(model)
    path = tmp_path / "past.onnx"
    onnx.save_model(model, str(path))
    assert main(["import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("relaygraph: error:") and "from -s + t to t" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
