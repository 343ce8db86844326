"""A BERT encoder without embeddings: layers of multi-head self-attention and feed-forward.

Each layer: separate query/key/value ``nn.dense`` projections, scaled dot-product attention per
head through ``nn.batch_matmul``, an output projection, a residual add and ``nn.layer_norm``;
then a feed-forward block with GELU written with ``erf`` (as BERT defines it), another residual
add and layer norm. Activations stay 2-D, ``(batch * seq, hidden)``, between attentions.
"""

from __future__ import annotations

import math

from ..errors import OptionValueError
from .layers import Net

__all__ = ["bert"]


def _layer(net: Net, x, i: int, batch: int, seq: int, hidden: int, heads: int, inner: int):
    head_dim = hidden // heads
    prefix = f"layer{i}"
    q, k, v = (net.split_heads(net.dense_add_bias(x, f"{prefix}_attention_{name}", hidden), batch, seq,
                               heads, head_dim) for name in ("query", "key", "value"))
    scores = net.binary("multiply", net.batch_matmul(q, k), net.const(1.0 / math.sqrt(head_dim)))
    probs = net.unary("nn.softmax", scores, axis=-1)
    context = net.batch_matmul(probs, net.transpose(v, (0, 2, 1)))
    context = net.merge_heads(context, batch, seq, heads, head_dim)
    attended = net.dense_add_bias(context, f"{prefix}_attention_output", hidden)
    x = net.layer_norm(net.binary("add", attended, x), f"{prefix}_attention_layernorm", epsilon=1e-12)
    h = net.dense_add_bias(x, f"{prefix}_intermediate", inner)
    out = net.dense_add_bias(net.gelu(h), f"{prefix}_output", hidden)
    return net.layer_norm(net.binary("add", out, x), f"{prefix}_output_layernorm", epsilon=1e-12)


def bert(num_layers: int = 12, hidden: int = 768, heads: int = 12, seq_len: int = 128,
         batch_size: int = 1, intermediate: int | None = None, dtype: str = "float32",
         seed: int = 0, small: bool = False):
    """A BERT encoder (BERT-base by default): ``(IRModule, params)``; input ``data`` is
    ``(batch, seq_len, hidden)``.

    ``small=True`` is the test configuration: 2 layers, hidden 32, 4 heads, 8 tokens.
    """
    if small:
        num_layers, hidden, heads, seq_len = 2, 32, 4, 8
    if hidden % heads:
        raise OptionValueError(f"bert: hidden ({hidden}) must be a multiple of heads ({heads})")
    inner = intermediate if intermediate is not None else 4 * hidden
    net = Net(seed, dtype)
    data = net.input("data", (batch_size, seq_len, hidden))
    x = net.reshape(data, (batch_size * seq_len, hidden))
    for i in range(num_layers):
        x = _layer(net, x, i, batch_size, seq_len, hidden, heads, inner)
    return net.module(net.reshape(x, (batch_size, seq_len, hidden)))
