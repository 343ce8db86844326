"""Writes bert_encoder.onnx and gpt_block.onnx: small transformer models as torch.onnx.export makes them.

torch cannot be installed here, so the graphs are built with ``onnx.helper``, node for node as
``torch.onnx.export(..., opset_version=17, dynamic_axes=...)`` (TorchScript exporter, constant
folding on) writes these modules:

- ``bert_encoder.onnx``: a BERT encoder (Hugging Face ``BertEncoder`` layout), 2 layers, hidden 64,
  4 heads, intermediate 128. Inputs ``hidden_states`` [batch, sequence, 64] float32 and
  ``attention_mask`` [batch, sequence] int64 (1 = attend); output ``last_hidden_state``.
  The mask is BERT's extended additive mask: Unsqueeze, Cast, ``(1 - m) * finfo(float32).min``,
  Add to the scores.
- ``gpt_block.onnx``: one GPT-2-style decoder block (pre-LayerNorm), hidden 64, 4 heads, MLP 256,
  input ``hidden_states`` [batch, sequence, 64]. The causal mask is GPT-2's registered ``bias``
  buffer (a constant lower-triangular bool [1, 1, 32, 32], so sequence <= 32) sliced to
  [key_length - query_length : key_length, :key_length] and applied with Where.

What the exporter emits and these graphs reproduce: ``nn.Linear`` on a 3-D input as MatMul by the
transposed weight (an initializer) then Add of the bias; head splitting as
Shape -> Gather -> Unsqueeze -> Concat -> Reshape, then Transpose (the key's two transposes folded
into one, perm [0, 2, 3, 1]); the scores as MatMul then Div by sqrt(head size); Softmax(axis=-1);
merging heads as Transpose then Reshape by a Concat of gathered dims; LayerNormalization (opset 17);
GELU as its Erf decomposition ``(x * (1 + erf(x / sqrt 2))) * 0.5``. Weights are seeded random
values (normal, std 0.02 as the models initialise them; LayerNorm gains 1 +- 0.1), so the files are
reproducible: ``python tests/data/onnx/make_models.py`` rewrites them byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent
OPSET = 17
HIDDEN, HEADS = 64, 4
HEAD = HIDDEN // HEADS
MAX_POSITIONS = 32
F32_MIN = float(np.finfo(np.float32).min)


class Graph:
    """Nodes and initializers with torch-like value names (``/layer.0/attention/MatMul_output_0``)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.counts: dict = {}
        self.scope = ""

    def op(self, op_type: str, inputs: list, n_out: int = 1, **attrs):
        key = f"{self.scope}/{op_type}"
        i = self.counts.get(key, 0)
        self.counts[key] = i + 1
        name = f"{self.scope}/{op_type}" + (f"_{i}" if i else "")
        outs = [f"{name}_output_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def const(self, value, dtype) -> str:
        """A Constant node (torch writes small literals so)."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name: str, shape: tuple, std: float = 0.02) -> str:
        return self.init(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    # -- the pieces torch exports ------------------------------------------------------------
    def linear(self, x: str, prefix: str, n_in: int, n_out: int) -> str:
        """nn.Linear on [batch, sequence, n_in]: MatMul by the transposed weight, Add of the bias."""
        w = self.weight(f"onnx::MatMul_{prefix}.weight", (n_in, n_out))
        b = self.weight(f"{prefix}.bias", (n_out,))
        return self.op("Add", [b, self.op("MatMul", [x, w])])

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        gamma = self.init(f"{prefix}.weight",
                          (1 + 0.1 * self.rng.standard_normal(HIDDEN)).astype(np.float32))
        beta = self.weight(f"{prefix}.bias", (HIDDEN,), std=0.1)
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    def gelu(self, x: str) -> str:
        erf = self.op("Erf", [self.op("Div", [x, self.const(1.4142135381698608, np.float32)])])
        plus = self.op("Add", [erf, self.const(1.0, np.float32)])
        return self.op("Mul", [self.op("Mul", [x, plus]), self.const(0.5, np.float32)])

    def dim(self, x: str, index: int) -> str:
        """Shape(x)[index] as a 1-element int64 tensor: Shape -> Gather -> Unsqueeze."""
        picked = self.op("Gather", [self.op("Shape", [x]), self.const(index, np.int64)], axis=0)
        return self.op("Unsqueeze", [picked, self.const([0], np.int64)])

    def split_heads(self, x: str, perm: list[int]) -> str:
        """[b, s, hidden] -> [b, heads, s, head] (or the key's [b, heads, head, s])."""
        shape = self.op("Concat", [self.dim(x, 0), self.dim(x, 1), self.const([HEADS], np.int64),
                                   self.const([HEAD], np.int64)], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)

    def merge_heads(self, ctx: str) -> str:
        """[b, heads, s, head] -> [b, s, hidden]."""
        t = self.op("Transpose", [ctx], perm=[0, 2, 1, 3])
        shape = self.op("Concat", [self.dim(t, 0), self.dim(t, 1), self.const([HIDDEN], np.int64)], axis=0)
        return self.op("Reshape", [t, shape])

    def attention(self, q: str, k: str, v: str, mask) -> str:
        qh = self.split_heads(q, [0, 2, 1, 3])
        kh = self.split_heads(k, [0, 2, 3, 1])
        vh = self.split_heads(v, [0, 2, 1, 3])
        scores = self.op("Div", [self.op("MatMul", [qh, kh]), self.const(float(np.sqrt(HEAD)), np.float32)])
        probs = self.op("Softmax", [mask(scores)], axis=-1)
        return self.merge_heads(self.op("MatMul", [probs, vh]))

    def model(self, name: str, inputs: list, output: str, out_name: str) -> onnx.ModelProto:
        last = self.nodes[-1]  # the exporter names the graph output after the module's output
        assert last.output[0] == output
        last.output[0] = out_name
        out = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["batch", "sequence", HIDDEN])
        graph = helper.make_graph(self.nodes, name, inputs, [out], initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="pytorch", producer_version="2.1.0")
        model.ir_version = 8  # what torch 2.1 writes at opset 17
        onnx.checker.check_model(model, full_check=True)
        return model


def bert_encoder(seed: int = 0, layers: int = 2, intermediate: int = 128) -> onnx.ModelProto:
    """A BERT encoder with an additive attention mask."""
    g = Graph(seed)
    x = "hidden_states"
    g.scope = "/encoder"
    ext = g.op("Unsqueeze", [g.op("Unsqueeze", ["attention_mask", g.const([1], np.int64)]),
                             g.const([2], np.int64)])
    ext = g.op("Cast", [ext], to=TensorProto.FLOAT)
    ext = g.op("Mul", [g.op("Sub", [g.const(1.0, np.float32), ext]), g.const(F32_MIN, np.float32)])
    for i in range(layers):
        p = f"encoder.layer.{i}"
        g.scope = f"/encoder/layer.{i}/attention/self"
        q = g.linear(x, f"{p}.attention.self.query", HIDDEN, HIDDEN)
        k = g.linear(x, f"{p}.attention.self.key", HIDDEN, HIDDEN)
        v = g.linear(x, f"{p}.attention.self.value", HIDDEN, HIDDEN)
        ctx = g.attention(q, k, v, lambda s: g.op("Add", [s, ext]))  # noqa: B023 - used at once
        g.scope = f"/encoder/layer.{i}/attention/output"
        h = g.op("Add", [g.linear(ctx, f"{p}.attention.output.dense", HIDDEN, HIDDEN), x])
        h = g.layer_norm(h, f"{p}.attention.output.LayerNorm", 1e-12)
        g.scope = f"/encoder/layer.{i}/intermediate"
        inner = g.gelu(g.linear(h, f"{p}.intermediate.dense", HIDDEN, intermediate))
        g.scope = f"/encoder/layer.{i}/output"
        out = g.op("Add", [g.linear(inner, f"{p}.output.dense", intermediate, HIDDEN), h])
        x = g.layer_norm(out, f"{p}.output.LayerNorm", 1e-12)
    inputs = [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                            ["batch", "sequence", HIDDEN]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])]
    return g.model("bert_encoder", inputs, x, "last_hidden_state")


def gpt_block(seed: int = 1, mlp: int = 256) -> onnx.ModelProto:
    """A GPT-2-style decoder block with GPT-2's sliced causal-mask buffer."""
    g = Graph(seed)
    x = "hidden_states"
    bias = g.init("h.0.attn.bias", np.tril(np.ones((MAX_POSITIONS, MAX_POSITIONS), bool))[None, None])
    g.scope = "/h.0/ln_1"
    a = g.layer_norm(x, "h.0.ln_1", 1e-5)
    g.scope = "/h.0/attn"
    qkv = g.linear(a, "h.0.attn.c_attn", HIDDEN, 3 * HIDDEN)
    q, k, v = g.op("Split", [qkv, g.const([HIDDEN] * 3, np.int64)], n_out=3, axis=2)

    def causal(scores: str) -> str:
        # bias[:, :, key_length - query_length : key_length, :key_length]
        q_len = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [scores]), g.const(2, np.int64)], axis=0),
                                   g.const([0], np.int64)])
        k_len = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [scores]), g.const(3, np.int64)], axis=0),
                                   g.const([0], np.int64)])
        rows = g.op("Slice", [bias, g.op("Sub", [k_len, q_len]), k_len, g.const([2], np.int64),
                              g.const([1], np.int64)])
        mask = g.op("Slice", [rows, g.const([0], np.int64), k_len, g.const([3], np.int64),
                              g.const([1], np.int64)])
        return g.op("Where", [mask, scores, g.const(F32_MIN, np.float32)])

    ctx = g.attention(q, k, v, causal)
    x = g.op("Add", [g.linear(ctx, "h.0.attn.c_proj", HIDDEN, HIDDEN), x])
    g.scope = "/h.0/ln_2"
    m = g.layer_norm(x, "h.0.ln_2", 1e-5)
    g.scope = "/h.0/mlp"
    m = g.linear(g.gelu(g.linear(m, "h.0.mlp.c_fc", HIDDEN, mlp)), "h.0.mlp.c_proj", mlp, HIDDEN)
    x = g.op("Add", [x, m])
    inputs = [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                            ["batch", "sequence", HIDDEN])]
    return g.model("gpt_block", inputs, x, "output")


def main() -> None:
    for name, build in (("bert_encoder", bert_encoder), ("gpt_block", gpt_block)):
        path = HERE / f"{name}.onnx"
        onnx.save_model(build(), str(path))
        print(f"wrote {path} ({path.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
