"""Transformer models as exported (tests/data/onnx, made by make_models.py): they compute what they
claim, import with symbolic batch and sequence dims, type-check keeping them, evaluate equal to
onnx.reference, optimize, run through FuseOps, and round-trip ONNX -> Relay -> ONNX."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import relaygraph as rg
from relaygraph import frontend
from relaygraph.cli import main

DATA = Path(__file__).resolve().parent / "data" / "onnx"
MODELS = ["bert_encoder", "gpt_block"]
FUSION_RULES = str(Path(__file__).resolve().parent.parent / "rules" / "fusion.rules")
QUICK = dict(rules=[FUSION_RULES], node_limit=2000, iter_limit=2, time_limit=10, check=False,
             extractor="greedy-dag", progress=False)
RTOL, ATOL = 1e-4, 1e-4

def _load(name: str) -> onnx.ModelProto:
    return onnx.load(str(DATA / f"{name}.onnx"))


def _feeds(name: str, batch: int, seq: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {"hidden_states": rng.standard_normal((batch, seq, 64)).astype(np.float32)}
    if name == "bert_encoder":
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq // 2:] = 0  # the last sequence is padded
        feeds["attention_mask"] = mask
    return feeds


def _reference(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    return np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])


def _make_models():
    spec = importlib.util.spec_from_file_location("make_models", DATA / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the files themselves (no importer needed) -----------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_model_files_are_small_checked_and_reproducible(name):
    path = DATA / f"{name}.onnx"
    assert path.stat().st_size < 300 * 1024
    model = _load(name)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[:2]] == ["batch", "sequence"] and dims[2].dim_value == 64
    rebuilt = getattr(_make_models(), name)()
    assert rebuilt.SerializeToString() == path.read_bytes()  # the script makes exactly these files
    ops = {n.op_type for n in model.graph.node}
    assert {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Transpose", "MatMul", "Softmax",
            "LayerNormalization", "Erf"} <= ops
    assert ("Where" in ops) == (name == "gpt_block")


def test_bert_padding_does_not_reach_the_attended_positions():
    model = _load("bert_encoder")
    feeds = _feeds("bert_encoder", 2, 6)
    base = _reference(model, feeds)
    changed = dict(feeds, hidden_states=feeds["hidden_states"].copy())
    noise = np.random.default_rng(9).standard_normal((3, 64)).astype(np.float32)
    changed["hidden_states"][1, 3:] += noise  # only padded positions of sequence 1
    out = _reference(model, changed)
    np.testing.assert_allclose(out[1, :3], base[1, :3], rtol=1e-5, atol=1e-5)
    assert np.abs(out[1, 3:] - base[1, 3:]).max() > 1e-2 and np.array_equal(out[0], base[0])


def test_gpt_block_is_causal():
    model = _load("gpt_block")
    feeds = _feeds("gpt_block", 1, 8)
    base = _reference(model, feeds)
    later = {"hidden_states": feeds["hidden_states"].copy()}
    later["hidden_states"][0, 5:] += np.random.default_rng(9).standard_normal((3, 64)).astype(np.float32)
    out = _reference(model, later)
    np.testing.assert_allclose(out[0, :5], base[0, :5], rtol=1e-5, atol=1e-5)
    assert np.abs(out[0, 5:] - base[0, 5:]).max() > 1e-2


# -- through the importer --------------------------------------------------------------------------
def _import(name: str, shape=None):
    return frontend.from_onnx(str(DATA / f"{name}.onnx"), shape=shape)


def _args(mod, params: dict, feeds: dict) -> list:
    return [feeds[p.name_hint] if p.name_hint in feeds else params[p.name_hint] for p in mod["main"].params]


def _used(mod, params: dict) -> dict:
    """The params that are still parameters of @main (frozen ones are constants already)."""
    names = {p.name_hint for p in mod["main"].params}
    return {k: v for k, v in params.items() if k in names}


def _static_shape(name: str, batch: int, seq: int) -> dict:
    shape = {"hidden_states": (batch, seq, 64)}
    if name == "bert_encoder":
        shape["attention_mask"] = (batch, seq)
    return shape


@pytest.mark.parametrize("name", MODELS)
def test_import_type_checks_with_symbolic_batch_and_sequence(name):
    mod, params = _import(name)
    typed = rg.infer_type(mod)
    ins = {p.name_hint: typed.type_of(p) for p in typed["main"].params}
    assert [str(d) for d in ins["hidden_states"].shape] == ["batch", "sequence", "64"]
    out = typed["main"].ret_type
    assert [str(d) for d in out.shape] == ["batch", "sequence", "64"] and out.dtype == "float32"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("batch,seq", [(2, 7), (1, 3)])
def test_symbolic_import_evaluates_equal_to_the_reference(name, batch, seq):
    mod, params = _import(name)
    feeds = _feeds(name, batch, seq)
    got = rg.evaluate(mod, *_args(mod, params, feeds))
    np.testing.assert_allclose(np.asarray(got), _reference(_load(name), feeds), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODELS)
def test_static_import_evaluates_equal_to_the_reference(name):
    mod, params = _import(name, shape=_static_shape(name, 2, 8))
    feeds = _feeds(name, 2, 8, seed=1)
    got = rg.evaluate(mod, *_args(mod, params, feeds))
    np.testing.assert_allclose(np.asarray(got), _reference(_load(name), feeds), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODELS)
def test_optimized_import_still_evaluates_equal(name):
    mod, params = _import(name, shape=_static_shape(name, 2, 8))
    res = rg.optimize(mod, params=_used(mod, params), **QUICK)
    feeds = _feeds(name, 2, 8, seed=2)
    got = rg.evaluate(res.module, *_args(res.module, {}, feeds))
    np.testing.assert_allclose(np.asarray(got), _reference(_load(name), feeds), rtol=RTOL, atol=ATOL)


def test_imported_bert_runs_through_fuse_ops():
    from relaygraph import transform as T

    mod, params = _import("bert_encoder", shape=_static_shape("bert_encoder", 2, 8))
    with T.PassContext(opt_level=2):
        fused = T.Sequential([T.InferType(), T.FuseOps()])(mod)
    assert "Primitive=1" in rg.astext(fused)
    feeds = _feeds("bert_encoder", 2, 8, seed=3)
    got = rg.evaluate(fused, *_args(fused, params, feeds))
    want = _reference(_load("bert_encoder"), feeds)
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("symbolic", [True, False], ids=["symbolic", "static"])
def test_onnx_relay_onnx_round_trip_evaluates_equal(name, symbolic):
    mod, params = _import(name, shape=None if symbolic else _static_shape(name, 2, 8))
    back = frontend.to_onnx(mod, _used(mod, params))
    onnx.checker.check_model(back, full_check=True)
    if symbolic:
        dims = back.graph.output[0].type.tensor_type.shape.dim
        assert [d.dim_param for d in dims[:2]] == ["batch", "sequence"]
    feeds = _feeds(name, 2, 8, seed=4)
    np.testing.assert_allclose(_reference(back, feeds), _reference(_load(name), feeds), rtol=RTOL, atol=ATOL)


def test_optimized_bert_exports_back_to_onnx(tmp_path):
    mod, params = _import("bert_encoder", shape=_static_shape("bert_encoder", 2, 8))
    res = rg.optimize(mod, params=_used(mod, params), **QUICK)
    path = tmp_path / "bert_optimized.onnx"
    model = frontend.to_onnx(res.module, path=path)
    assert onnx.load(str(path)) == model
    feeds = _feeds("bert_encoder", 2, 8, seed=5)
    np.testing.assert_allclose(_reference(model, feeds), _reference(_load("bert_encoder"), feeds),
                               rtol=RTOL, atol=ATOL)


def test_cli_optimizes_the_onnx_file_and_exports_the_result(tmp_path, capsys):
    # symbolic batch and sequence: optimize's own check needs concrete inputs, so the values are
    # checked here, on the exported result, against the original model
    relay = tmp_path / "bert.relay"
    assert main(["optimize", str(DATA / "bert_encoder.onnx"), "--rules", FUSION_RULES, "--node-limit", "2000",
                 "--iter-limit", "2", "--extractor", "greedy-dag", "--no-progress", "--no-check",
                 "-o", str(relay)]) == 0
    out = tmp_path / "bert.onnx"
    assert main(["export", str(relay), "-o", str(out)]) == 0
    assert "exported" in capsys.readouterr().out
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    feeds = _feeds("bert_encoder", 2, 8, seed=6)
    np.testing.assert_allclose(_reference(model, feeds), _reference(_load("bert_encoder"), feeds),
                               rtol=RTOL, atol=ATOL)
