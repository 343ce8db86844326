"""What the ONNX importer covers, and ONNX's backend node tests it leaves out, each with a reason.

``out_of_scope(case)`` gives the reason a node test is not expected to pass (None when it must
pass); ``run_case(case)`` imports and evaluates one test case and compares with its expected
outputs at the tolerances ONNX's backend uses. The conformance test and
``benchmarks/onnx_conformance.py`` both use these, so the README's rate is what the test checks.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ..ir.types import DTYPES

__all__ = ["OUT_OF_SCOPE_OPS", "OUT_OF_SCOPE_CASES", "STATIC_INPUTS", "out_of_scope", "run_case",
           "collect_node_cases", "case_ops", "case_outcome", "pass_rate", "light_models", "light_inputs",
           "light_expected", "as_float64"]

_NO_OP = "no counterpart in relaygraph's op table (not needed by the target models)"
_TRAIN = "training-only op"
_SEQ = "sequences, optionals, maps or strings (relaygraph has tensors only)"
_CTRL = "control flow with subgraphs (If/Loop/Scan) is not imported"
_QUANT = "quantized and integer-accumulating ops are out of scope"
_ML = "ai.onnx.ml / preview domain op"
_RAND = "random-number op (not deterministic)"

# op types the importer does not convert, grouped by reason
_GROUPS = {
    _NO_OP: """Acos Asin Atan AffineGrid Attention BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor
        BitCast BlackmanWindow CausalConvWithState CenterCropPad Col2Im Compress CumProd CumSum DFT
        DeformConv Det Einsum FlexAttention GatherElements GatherND GridSample GRU HammingWindow
        HannWindow LinearAttention LpPool LSTM MaxUnpool MelWeightMatrix NonMaxSuppression NonZero
        ReverseSequence RNN RoiAlign RotaryEmbedding Scatter ScatterElements ScatterND STFT SwiGLU
        TensorScatter TopK Unique ImageDecoder""",
    _TRAIN: "Adagrad Adam Momentum NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss",
    _SEQ: """OptionalGetElement OptionalHasElement Optional SequenceAt SequenceConstruct SequenceEmpty
        SequenceErase SequenceInsert SequenceLength SequenceMap SplitToSequence ConcatFromSequence
        RegexFullMatch StringConcat StringNormalizer StringSplit""",
    _CTRL: "If Loop Scan",
    _QUANT: """ConvInteger DequantizeLinear DynamicQuantizeLinear MatMulInteger QLinearConv QLinearMatMul
        QuantizeLinear""",
    _ML: "ArrayFeatureExtractor Binarizer LabelEncoder TfIdfVectorizer TreeEnsemble",
    _RAND: "Bernoulli RandomNormal RandomNormalLike RandomUniform RandomUniformLike Multinomial",
}
OUT_OF_SCOPE_OPS: dict[str, str] = {op: reason for reason, ops in _GROUPS.items() for op in ops.split()}

_3D = "3-D convolution/pooling (relaygraph has 2-D ops; 1-D is mapped onto them)"
_DIL_AVG = "dilated average pooling (nn.avg_pool2d has no dilation in Relay)"
_ARGMAX = "MaxPool's Indices output"
_TRAINING = "training_mode=True (inference only)"
_DYNAMIC = ("a function body whose pads, split sizes or shapes come from a tensor's run-time values "
            "(relaygraph's shapes are static)")
_BF16 = "bfloat16 results (relaygraph's numpy kernels compute and store bfloat16 as float32)"
_EMPTY = "max/min over an empty axis (Relay's reductions have no identity for them)"
# covered ops whose particular cases use a feature outside the scope
OUT_OF_SCOPE_CASES: dict[str, str] = {
    **{n: _3D for n in """test_averagepool_3d_default test_averagepool_3d_dilations_small
        test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True
        test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False
        test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True
        test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False
        test_convtranspose_3d test_maxpool_3d_default test_maxpool_3d_dilations
        test_maxpool_3d_dilations_use_ref_impl test_maxpool_3d_dilations_use_ref_impl_large""".split()},
    "test_averagepool_2d_dilations": _DIL_AVG,
    "test_maxpool_with_argmax_2d_precomputed_pads": _ARGMAX,
    "test_maxpool_with_argmax_2d_precomputed_strides": _ARGMAX,
    "test_batchnorm_example_training_mode": _TRAINING,
    "test_batchnorm_epsilon_training_mode": _TRAINING,
    **{n: _TRAINING for n in """test_training_dropout_default test_training_dropout_default_mask
        test_training_dropout test_training_dropout_mask test_training_dropout_zero_ratio
        test_training_dropout_zero_ratio_mask""".split()},
    **{n: _DYNAMIC for n in """test_center_crop_pad_crop_expanded test_center_crop_pad_pad_expanded
        test_center_crop_pad_crop_and_pad_expanded test_center_crop_pad_crop_axes_hwc_expanded
        test_center_crop_pad_crop_negative_axes_hwc_expanded test_center_crop_pad_crop_axes_chw_expanded
        test_blackmanwindow_expanded test_blackmanwindow_symmetric_expanded test_hammingwindow_expanded
        test_hammingwindow_symmetric_expanded test_hannwindow_expanded
        test_hannwindow_symmetric_expanded""".split()},
    **{n: _BF16 for n in """test_attention_4d_causal_bf16_expanded test_attention_4d_padded_kv_bf16_expanded
        test_attention_4d_causal_padded_kv_bf16_expanded test_attention_4d_attn_mask_causal_bf16_expanded
        test_attention_3d_causal_bf16_expanded""".split()},
    "test_wrap_pad": "pad mode 'wrap' (Relay's nn.pad has constant, edge and reflect)",
    **{n: _EMPTY for n in "test_reduce_max_empty_set test_reduce_max_empty_set_bool "
                          "test_reduce_min_empty_set".split()},
    **{n: _BF16 for n in """test_cast_FLOAT_to_BFLOAT16 test_castlike_FLOAT_to_BFLOAT16
        test_castlike_FLOAT_to_BFLOAT16_expanded test_celu_bfloat16 test_celu_bfloat16_expanded""".split()},
    "test_identity_sequence": _SEQ,
    "test_identity_opt": _SEQ,
}

# (op type, input index) whose value fixes a shape: relaygraph's shapes are static, so a test
# that feeds such an input at run time has it bound at import (as an initializer) instead
STATIC_INPUTS = {
    **{(op, 1): "axes" for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                   "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                                   "ReduceLogSumExp", "Squeeze", "Unsqueeze")},
    ("Split", 1): "split", ("Pad", 1): "pads", ("Pad", 2): "constant_value", ("Pad", 3): "axes",
    ("Reshape", 1): "shape", ("Expand", 1): "shape", ("ConstantOfShape", 0): "shape",
    ("Slice", 1): "starts", ("Slice", 2): "ends", ("Slice", 3): "axes", ("Slice", 4): "steps",
    ("Resize", 1): "roi", ("Resize", 2): "scales", ("Resize", 3): "sizes", ("Upsample", 1): "scales",
    ("Tile", 1): "repeats", ("Trilu", 1): "k", ("OneHot", 1): "depth", ("Range", 0): "start",
    ("Range", 1): "limit", ("Range", 2): "delta",
    ("Dropout", 1): "ratio", ("Dropout", 2): "training_mode", ("Clip", 1): "min", ("Clip", 2): "max",
}


def collect_node_cases() -> list:
    """ONNX's backend node test cases (generated in Python by the onnx package)."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return collect_testcases(None)


def case_ops(case) -> set[str]:
    """The op types a test case's graph uses."""
    return {n.op_type for n in case.model.graph.node}


def _dtype_reason(case) -> str | None:
    graph = case.model.graph
    elem_types = [vi.type.tensor_type.elem_type for vi in [*graph.input, *graph.output]
                  if vi.type.HasField("tensor_type")]
    elem_types += [a.i for n in graph.node for a in n.attribute if n.op_type in ("Cast", "CastLike")
                   and a.name == "to"]
    for t in elem_types:
        try:
            name = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)).name
        except (KeyError, ValueError, TypeError):
            name = None
        if name not in DTYPES:
            label = onnx.TensorProto.DataType.Name(t)
            return (f"element type {label} (relaygraph's dtypes are numpy's: no float8, 4-bit or "
                    "string)")
    return None


def out_of_scope(case) -> str | None:
    """Why ``case`` is not expected to pass, or None when it must."""
    if case.name in OUT_OF_SCOPE_CASES:
        return OUT_OF_SCOPE_CASES[case.name]
    for op in sorted(case_ops(case)):
        if op in OUT_OF_SCOPE_OPS:
            return f"{op}: {OUT_OF_SCOPE_OPS[op]}"
    return _dtype_reason(case)


def _bind_static_inputs(model, inputs):
    """The model with its shape-fixing inputs bound to the test's values, and the other inputs."""
    graph = model.graph
    static = {name for n in graph.node for i, name in enumerate(n.input) if (n.op_type, i) in STATIC_INPUTS}
    if not static & {vi.name for vi in graph.input}:
        return model, inputs
    model = onnx.ModelProto.FromString(model.SerializeToString())
    kept, rest = [], []
    for vi, value in zip(list(model.graph.input), inputs, strict=True):
        if vi.name in static:
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), vi.name))
        else:
            kept.append(vi)
            rest.append(value)
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return model, rest


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def run_case(case) -> None:
    """Import and evaluate ``case``; AssertionError (or an import error) when it does not match."""
    from ..eval import evaluate
    from .onnx_import import from_onnx

    for inputs, expected in case.data_sets:
        model, inputs = _bind_static_inputs(case.model, [_array(x) for x in inputs])
        mod, _ = from_onnx(model)
        with np.errstate(all="ignore"):
            got = evaluate(mod, *inputs)
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            g, e = np.asarray(g), _array(e)
            assert g.shape == e.shape, f"output {i}: shape {g.shape}, expected {e.shape}"
            assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype}, expected {e.dtype}"
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=f"output {i}")


def light_models() -> list[tuple[str, str, float, float]]:
    """(name, path, rtol, atol) of the light real models the onnx package ships with outputs."""
    from pathlib import Path

    from onnx.backend.test.case.model import collect_testcases

    root = Path(onnx.__file__).resolve().parent.parent
    return [(c.model_name, str(root / c.url), c.rtol, c.atol) for c in collect_testcases()
            if c.kind == "real" and c.url and c.url.startswith("onnx/backend/test/data/light/")]


def light_inputs(model) -> list[np.ndarray]:
    """The inputs ONNX's backend runner feeds a light model: ``arange(n) / n`` in each input's
    shape (unknown dims as 1), float32 (then in the input's own dtype)."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        out.append((np.arange(n).reshape(shape) / n).astype(np.float32).astype(dtype))
    return out


def light_expected(path: str) -> list[np.ndarray]:
    """The expected outputs stored beside a light model (``*_output_N.pb``)."""
    from pathlib import Path

    stem = Path(path).with_suffix("")
    out = []
    while (f := Path(f"{stem}_output_{len(out)}.pb")).is_file():
        out.append(numpy_helper.to_array(onnx.TensorProto.FromString(f.read_bytes())))
    return out


def case_outcome(case) -> str | None:
    """None when ``case`` passes, else a one-line reason (the error or the mismatch)."""
    try:
        run_case(case)
    except Exception as exc:  # noqa: BLE001 - any failure means the case does not pass
        text = " ".join(str(exc).strip().splitlines()[:3])
        return f"{type(exc).__name__}: {text[:300]}"
    return None


def pass_rate(cases, outcomes: dict | None = None) -> dict:
    """{"covered": passing covered cases, "total": all node cases, "failing": covered cases that
    fail, "reasons": {reason: number of cases out of scope for it}}."""
    from collections import Counter

    reasons: Counter = Counter()
    covered = failing = 0
    for c in cases:
        reason = out_of_scope(c)
        if reason is not None:
            # the per-op reasons group by their text, not by op
            reasons[reason.split(": ", 1)[1] if reason.split(": ", 1)[0] in OUT_OF_SCOPE_OPS
                    else reason] += 1
            continue
        outcome = outcomes[c.name] if outcomes is not None else case_outcome(c)
        if outcome is None:
            covered += 1
        else:
            failing += 1
    return {"covered": covered, "total": len(cases), "failing": failing, "reasons": dict(reasons)}


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model computing in float64: float32 inputs, outputs, initializers and constants."""
    from onnx import TensorProto

    out = onnx.ModelProto.FromString(model.SerializeToString())
    graph = out.graph
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, t in enumerate(graph.initializer):
        if t.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float64), t.name))
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float64),
                                                        attr.t.name))
    return out
