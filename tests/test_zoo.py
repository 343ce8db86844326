"""The zoo: every model builds with TVM's names, evaluates identically on both engines,
type-checks, prints and re-parses."""

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.eval import compile_function, values_equal
from relaygraph.ir import Call, Op, TensorType, iter_post_order
from relaygraph.passes import FuseOps
from relaygraph.text import astext, parse
from relaygraph.ty import infer_type, known_type

MODELS = sorted(rg.zoo.MODELS)


def small(name):
    mod, params = rg.zoo.get(name, small=True)
    return mod, params, rg.zoo.example_inputs(mod, params)


def op_counts(mod):
    counts = {}
    for node in iter_post_order(mod["main"]):
        if isinstance(node, Call) and isinstance(node.op, Op):
            counts[node.op.name] = counts.get(node.op.name, 0) + 1
    return counts


def test_every_model_is_registered():
    expected = {"resnet-18", "resnet-34", "resnet-50", "mobilenet", "vgg-11", "vgg-16", "vgg-19",
                "squeezenet-1.0", "squeezenet-1.1", "inception-v3", "densenet-121", "dcgan", "lstm",
                "bert", "nasrnn", "residual-mlp", "diamond-chain", "vit-sima"}
    assert expected <= set(rg.zoo.names())


@pytest.mark.parametrize("name", MODELS)
def test_small_model_parameters_are_typed_inputs_with_seeded_values(name):
    mod, params, inputs = small(name)
    main = mod["main"]
    names = [p.name_hint for p in main.params]
    assert len(set(names)) == len(names)
    assert set(params) | set(inputs) == set(names)
    for p in main.params:
        ty = p.type_annotation
        assert isinstance(ty, TensorType) and ty.is_concrete
        if p.name_hint in params:
            value = params[p.name_hint]
            assert value.shape == ty.shape and value.dtype == np.dtype(ty.dtype)
    again, params2 = rg.zoo.get(name, small=True)
    assert all(np.array_equal(params[k], params2[k]) for k in params)
    _, other = rg.zoo.get(name, small=True, seed=1)
    assert any(not np.array_equal(params[k], other[k]) for k in params)


@pytest.mark.parametrize("name", MODELS)
def test_small_model_runs_identically_on_interpreter_and_executor(name):
    mod, params, inputs = small(name)
    assert compile_function(mod["main"]) is not None  # every zoo model is dataflow-only
    fast = rg.evaluate(mod, **inputs, **params)
    slow = rg.evaluate(mod, **inputs, **params, executor=False)
    assert values_equal(fast, slow)
    assert np.all(np.isfinite(fast))


def test_resnet_structure_and_names_follow_tvm():
    for layers, convs in [(18, 21), (34, 37), (50, 53)]:
        mod, params = rg.zoo.get(f"resnet-{layers}", small=True)
        counts = op_counts(mod)
        assert counts["nn.conv2d"] == convs and counts["nn.dense"] == 1
        assert counts["nn.batch_norm"] == counts["nn.relu"] + 1  # bn_data has no relu
    mod, params = rg.zoo.get("resnet-50", small=True)
    for key in ["bn_data_gamma", "conv0_weight", "bn0_moving_var", "stage1_unit1_sc_weight",
                "stage4_unit3_conv3_weight", "bn1_beta", "fc1_weight", "fc1_bias"]:
        assert key in params
    assert mod["main"].params[0].name_hint == "data"
    full, _ = rg.zoo.get("resnet-50")
    assert full["main"].params[0].type_annotation.shape == (1, 3, 224, 224)
    assert full["main"].ret_type is None and mod["main"].body.op.name == "nn.softmax"


def test_other_vision_models_follow_tvm_names_and_structure():
    cases = {
        "vgg-16": (["conv5_3_weight", "conv5_3_bias", "fc6_weight", "fc8_bias"], {"nn.conv2d": 13}),
        "vgg-19": (["conv4_4_weight"], {"nn.conv2d": 16, "nn.dropout": 2}),
        "mobilenet": (["conv_block_1_conv_weight", "separable_conv_block_13_weight",
                       "separable_conv_block_13_bn2_moving_mean", "fc_weight"], {"nn.conv2d": 27}),
        "squeezenet-1.0": (["fire8_right_conv_weight", "conv_final_bias"], {"concatenate": 8}),
        "squeezenet-1.1": (["fire1_input_conv_weight"], {"nn.max_pool2d": 3}),
        "inception-v3": (["mixed_10_tower_1_mixed_conv_1_conv1_weight", "mixed_4_tower_1_conv_4_bn_gamma",
                          "fc1_weight", "fc2_bias"], {"concatenate": 11, "nn.conv2d": 94}),
        "densenet-121": (["batch_1_3_15_gamma", "conv2d_2_0_5_weight", "conv_t_2_weight", "dense_bias"],
                         {"nn.conv2d": 120, "nn.dense": 1}),
        "dcgan": (["dense_weight", "g2_deconv_weight", "g4_batch_norm_moving_var", "g5_deconv_weight"],
                  {"nn.conv2d_transpose": 4}),
        "lstm": (["i2h_0_weight", "h2h_2_bias"], {"split": 3, "zeros": 1}),
    }
    for name, (keys, counts) in cases.items():
        mod, params = rg.zoo.get(name, small=True)
        missing = [k for k in keys if k not in params]
        assert not missing, (name, missing)
        got = op_counts(mod)
        assert {k: got.get(k, 0) for k in counts} == counts, name


def test_densenet_tvm_compat_reproduces_tvms_chained_layers():
    mod, params = rg.zoo.get("densenet-121", small=True, tvm_compat=True)
    counts = op_counts(mod)
    assert counts.get("concatenate", 0) == 0 and counts["nn.conv2d"] == 120
    assert params["conv2d_2_0_0_weight"].shape[0] == 1  # TVM's growth rate is the batch size


def test_bert_matches_a_numpy_reference():
    from scipy.special import erf

    mod, p, inputs = small("bert")
    x = inputs["data"]
    batch, seq, hidden = x.shape
    heads, head_dim = 4, hidden // 4

    def dense(t, n):
        return t @ p[n + "_weight"].T + p[n + "_bias"]

    def norm(t, n):
        mean, var = t.mean(-1, keepdims=True), t.var(-1, keepdims=True)
        return (t - mean) / np.sqrt(var + 1e-12) * p[n + "_gamma"] + p[n + "_beta"]

    def split(t):
        return t.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)

    h = x.reshape(batch * seq, hidden).astype("float64")
    for i in range(2):
        q, k, v = (split(dense(h, f"layer{i}_attention_{n}")) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        a = np.exp(s - s.max(-1, keepdims=True))
        a = (a / a.sum(-1, keepdims=True)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
        h = norm(dense(a, f"layer{i}_attention_output") + h, f"layer{i}_attention_layernorm")
        f = dense(h, f"layer{i}_intermediate")
        f = 0.5 * f * (1 + erf(f / np.sqrt(2)))
        h = norm(dense(f, f"layer{i}_output") + h, f"layer{i}_output_layernorm")
    out = rg.evaluate(mod, **inputs, **p)
    np.testing.assert_allclose(out, h.reshape(batch, seq, hidden), rtol=1e-4, atol=1e-4)


def test_vit_sima_matches_a_numpy_reference_computed_in_the_other_order():
    """SimA's attention written (Q̂ K̂ᵀ) V in the model, computed Q̂ (K̂ᵀ V) here, as the published
    code does when there are more tokens than channels per head."""
    from scipy.special import erf

    mod, p, inputs = small("vit-sima")
    x = inputs["data"].astype("float64")
    batch, width, heads, patch = x.shape[0], 32, 2, 8
    side = x.shape[2] // patch
    tokens, head_dim = side * side, width // heads

    def dense(t, n):
        return t @ p[n + "_weight"].T + p[n + "_bias"]

    def norm(t, n):
        mean, var = t.mean(-1, keepdims=True), t.var(-1, keepdims=True)
        return (t - mean) / np.sqrt(var + 1e-6) * p[n + "_gamma"] + p[n + "_beta"]

    def split(t, l1):  # (batch * tokens, width) -> (batch, heads, tokens, head_dim)
        t = t.reshape(batch, tokens, width)
        if l1:  # torch.nn.functional.normalize(p=1) over the tokens
            t = t / np.maximum(np.abs(t).sum(1, keepdims=True), 1e-12)
        return t.reshape(batch, tokens, heads, head_dim).transpose(0, 2, 1, 3)

    patches = x.reshape(batch, 3, side, patch, side, patch).transpose(0, 2, 4, 1, 3, 5)
    h = patches.reshape(batch, tokens, -1) @ p["patch_embed_weight"].reshape(width, -1).T
    h = (h + p["patch_embed_bias"] + p["pos_embed"]).reshape(batch * tokens, width)
    for i in range(2):
        y = norm(h, f"block{i}_norm1")
        q, k, v = (split(dense(y, f"block{i}_attention_{n}"), n != "value")
                   for n in ("query", "key", "value"))
        a = q @ (k.transpose(0, 1, 3, 2) @ v)
        h = h + dense(a.transpose(0, 2, 1, 3).reshape(batch * tokens, width), f"block{i}_attention_output")
        f = dense(norm(h, f"block{i}_norm2"), f"block{i}_mlp_fc1")
        h = h + dense(0.5 * f * (1 + erf(f / np.sqrt(2))), f"block{i}_mlp_fc2")
    logits = dense(norm(h, "norm").reshape(batch, tokens, width).mean(1), "head")
    want = np.exp(logits - logits.max(-1, keepdims=True))
    out = rg.evaluate(mod, **inputs, **p)
    np.testing.assert_allclose(out, want / want.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)


def test_lstm_matches_a_numpy_reference():
    mod, p, inputs = small("lstm")

    def sigmoid(t):
        return 1 / (1 + np.exp(-t))

    h = c = np.zeros((1, 16))
    for i in range(3):
        gates = (inputs[f"inputs_{i}"] @ p[f"i2h_{i}_weight"].T + p[f"i2h_{i}_bias"]
                 + h @ p[f"h2h_{i}_weight"].T + p[f"h2h_{i}_bias"])
        g_in, g_forget, g_transform, g_out = np.split(gates, 4, axis=1)
        c = sigmoid(g_forget) * c + sigmoid(g_in) * np.tanh(g_transform)
        h = sigmoid(g_out) * np.tanh(c)
    np.testing.assert_allclose(rg.evaluate(mod, **inputs, **p), h, rtol=1e-5, atol=1e-6)


def test_model_options_are_checked():
    from relaygraph.zoo.resnet import resnet

    with pytest.raises(ValueError, match="num_layers must be one of"):
        resnet(num_layers=20)
    with pytest.raises(TypeError, match="model 'vgg-11' fixes num_layers=11"):
        rg.zoo.get("vgg-11", num_layers=16)
    with pytest.raises(TypeError, match="model 'bert' takes no option layers; it takes: .*num_layers"):
        rg.zoo.get("bert", layers=3)
    with pytest.raises(ValueError, match="multiple of heads"):
        rg.zoo.get("bert", hidden=30, heads=4)
    mod, _ = rg.zoo.get("bert", num_layers=1, hidden=16, heads=2, seq_len=4)
    assert mod["main"].params[0].type_annotation.shape == (1, 4, 16)


@pytest.mark.parametrize("name, options, message", [
    ("bert", ["hidden=30", "heads=4"], "bert: hidden (30) must be a multiple of heads (4)"),
    ("vit-sima", ["width=30", "heads=4"], "sima: width (30) must be a multiple of heads (4)"),
    ("vit-sima", ["image_size=50"], "sima: image_size (50) must be a multiple of patch_size (16)"),
])
def test_a_refused_option_value_is_the_users_error_not_an_internal_one(name, options, message, capsys):
    from relaygraph.cli import main
    from relaygraph.errors import OptionValueError

    with pytest.raises(OptionValueError) as caught:
        rg.zoo.get(name, **{k: int(v) for k, v in (o.split("=") for o in options)})
    assert isinstance(caught.value, ValueError) and str(caught.value) == message
    args = ["profile", "--model", name, "-q"] + [x for o in options for x in ("-O", o)]
    assert main(args) != 0
    err = capsys.readouterr().err
    assert f"relaygraph: error: {message}" in err and "internal error" not in err


@pytest.mark.parametrize("name", MODELS)
def test_small_model_type_checks_prints_and_reparses(name):
    mod, params, inputs = small(name)
    typed = infer_type(mod)
    out = rg.evaluate(mod, **inputs, **params)
    ret = known_type(typed["main"].body)
    assert isinstance(ret, TensorType) and ret.shape == out.shape and ret.dtype == str(out.dtype)
    again = parse(astext(typed))
    assert rg.alpha_equal(again["main"], typed["main"])
    assert values_equal(rg.evaluate(again, **inputs, **params), out)
    assert values_equal(rg.evaluate(again, **inputs, **params, executor=False), out)


@pytest.mark.parametrize("name", MODELS)
def test_small_model_fused_by_fuseops_gives_the_same_output(name):
    mod, params, inputs = small(name)
    fused = FuseOps()(infer_type(mod))
    assert any(getattr(n, "attrs", None) is not None and n.attrs.get("Primitive", 0)
               for n in iter_post_order(fused["main"]) if isinstance(n, rg.Function))
    assert compile_function(fused["main"]) is not None
    out = rg.evaluate(mod, **inputs, **params)
    np.testing.assert_allclose(rg.evaluate(fused, **inputs, **params), out, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(rg.evaluate(fused, **inputs, **params, executor=False), out,
                               rtol=2e-5, atol=2e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_full_size_model_runs_identically_on_interpreter_and_executor(name):
    mod, params = rg.zoo.get(name)
    inputs = rg.zoo.example_inputs(mod, params)
    fast = rg.evaluate(mod, **inputs, **params)
    slow = rg.evaluate(mod, **inputs, **params, executor=False)
    assert values_equal(fast, slow) and np.all(np.isfinite(fast))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_full_size_model_type_checks_prints_and_reparses(name):
    mod, _ = rg.zoo.get(name)
    typed = infer_type(mod)
    assert rg.alpha_equal(parse(astext(typed))["main"], typed["main"])


@pytest.mark.parametrize("name", rg.zoo.names())
def test_every_model_takes_the_common_options(name):
    mod, params = rg.zoo.get(name, small=True, batch_size=2, dtype="float64", seed=3)
    data = mod["main"].params[0].type_annotation
    assert data.shape[0] == 2 and data.dtype == "float64"
    inputs = rg.zoo.example_inputs(mod, params)
    out = rg.evaluate(mod, **inputs, **params)
    assert np.all(np.isfinite(np.asarray(out[0] if isinstance(out, tuple) else out)))
    one, _ = rg.zoo.get(name, small=True)
    unbatched = name == "diamond-chain"  # its input has no batch axis unless batch_size is given
    assert one["main"].params[0].type_annotation.shape[0] == (4 if unbatched else 1)


@pytest.mark.parametrize("name", rg.zoo.names())
def test_an_unknown_option_is_refused_with_the_list_accepted_before_building(name, monkeypatch):
    from relaygraph import zoo

    built = []
    monkeypatch.setitem(zoo._BUILDERS, name, _spy(zoo._BUILDERS[name], built))
    with pytest.raises(rg.RelayError, match=rf"model '{name}' takes no option no_such; it takes: "
                                            r".*batch_size, .*dtype, .*seed, .*small") as info:
        rg.zoo.get(name, no_such=1)
    assert isinstance(info.value, TypeError) and built == []


def _spy(builder, calls):
    import functools

    @functools.wraps(builder)
    def build(**options):
        calls.append(options)
        return builder(**options)

    build.fixed = getattr(builder, "fixed", {})
    return build


@pytest.mark.parametrize("options,message", [
    ({"batch_size": 0}, "option batch_size must be a positive integer, got 0"),
    ({"batch_size": -2}, "option batch_size must be a positive integer, got -2"),
    ({"small": "yes"}, "option small takes true or false"),
    ({"num_classes": 2.5}, "option num_classes takes an integer"),
    ({"depth": 3}, "takes no option depth"),
])
def test_model_option_values_are_checked(options, message):
    with pytest.raises(rg.RelayError, match=message):
        rg.zoo.get("resnet-18", **options)


def test_the_example_models_take_small_and_batch_size():
    chain, _ = rg.zoo.get("diamond-chain", small=True)
    assert sum(1 for n in iter_post_order(chain["main"]) if isinstance(n, Call)) == 40  # 10 diamonds
    assert chain["main"].params[0].type_annotation.shape == (4,)
    batched, _ = rg.zoo.get("diamond-chain", depth=3, batch_size=5)
    assert batched["main"].params[0].type_annotation.shape == (5, 4)
    mlp, params = rg.zoo.get("residual-mlp", small=True, batch_size=3)
    assert mlp["main"].params[0].type_annotation.shape == (3, 16)
    assert sorted(params) == ["dense0_bias", "dense0_weight", "dense1_bias", "dense1_weight"]
