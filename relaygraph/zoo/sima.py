"""A vision transformer with SimA attention (Koohpayegani and Pirsiavash, "SimA: Simple
Softmax-free Attention for Vision Transformers", arXiv:2206.08898).

SimA drops the softmax: each channel of the queries and of the keys is divided by its l1 norm
over the tokens, and the attention is ``Q̂ K̂ᵀ V``. Without a softmax between the two products the
order is free: ``(Q̂ K̂ᵀ) V`` costs ``2 N² d`` per head, ``Q̂ (K̂ᵀ V)`` costs ``2 N d²``. The
published code chooses by hand from ``N / d``; here the attention is written in the first order,
as the paper's equation reads, and choosing the order is left to the optimizer.

The backbone is DeiT's: a 16x16 patch embedding (a strided convolution), a learned position
embedding, pre-norm blocks (layer norm, attention, residual; layer norm, a GELU MLP four times
wider, residual), a final layer norm, the mean over the tokens and a linear classifier. The
default size is SimA-Tiny's (192 wide, 12 blocks, 4 heads, 224x224 images: 196 tokens of 48
channels per head). SimA's local patch interaction and class-attention blocks are left out.
Activations stay 2-D, ``(batch * tokens, width)``, between attentions, as in ``bert``.
"""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["sima"]


def _l1_normalized_heads(net: Net, t, batch: int, tokens: int, heads: int, head_dim: int,
                         normalize: bool):
    """(batch * tokens, width) -> (batch * heads, tokens, head_dim), each channel divided by its
    l1 norm over the tokens (``torch.nn.functional.normalize(p=1, dim=-2)``) when ``normalize``."""
    if normalize:
        width = heads * head_dim
        t = net.reshape(t, (batch, tokens, width))
        norm = net.call("sum", (net.unary("abs", t),), (batch, 1, width), axis=(1,), keepdims=True)
        t = net.binary("divide", t, net.binary("maximum", norm, net.const(1e-12)))
    return net.split_heads(t, batch, tokens, heads, head_dim)


def _block(net: Net, x, i: int, batch: int, tokens: int, width: int, heads: int, inner: int):
    head_dim = width // heads
    prefix = f"block{i}"
    y = net.layer_norm(x, f"{prefix}_norm1", epsilon=1e-6)
    q, k, v = (_l1_normalized_heads(net, net.dense_add_bias(y, f"{prefix}_attention_{name}", width),
                                    batch, tokens, heads, head_dim, normalize=name != "value")
               for name in ("query", "key", "value"))
    # (Q̂ K̂ᵀ) V: nn.batch_matmul(a, b) is a @ bᵀ
    scores = net.batch_matmul(q, k)
    context = net.batch_matmul(scores, net.transpose(v, (0, 2, 1)))
    context = net.merge_heads(context, batch, tokens, heads, head_dim)
    x = net.binary("add", x, net.dense_add_bias(context, f"{prefix}_attention_output", width))
    y = net.layer_norm(x, f"{prefix}_norm2", epsilon=1e-6)
    h = net.dense_add_bias(y, f"{prefix}_mlp_fc1", inner)
    return net.binary("add", x, net.dense_add_bias(net.gelu(h), f"{prefix}_mlp_fc2", width))


def sima(num_layers: int = 12, width: int = 192, heads: int = 4, image_size: int = 224,
         patch_size: int = 16, num_classes: int = 1000, batch_size: int = 1,
         dtype: str = "float32", seed: int = 0, small: bool = False):
    """A SimA vision transformer (SimA-Tiny's size by default): ``(IRModule, params)``; input
    ``data`` is ``(batch, 3, image_size, image_size)``.

    ``small=True`` is the test configuration: 2 blocks, 32 wide, 2 heads, 32x32 images in 8x8
    patches (16 tokens of 16 channels per head), 10 classes.
    """
    if small:
        num_layers, width, heads, image_size, patch_size = 2, 32, 2, 32, 8
        num_classes = min(num_classes, 10)
    if width % heads:
        raise OptionValueError(f"sima: width ({width}) must be a multiple of heads ({heads})")
    if image_size % patch_size:
        raise OptionValueError(f"sima: image_size ({image_size}) must be a multiple of "
                               f"patch_size ({patch_size})")
    side = image_size // patch_size
    tokens = side * side
    net = Net(seed, dtype)
    data = net.input("data", (batch_size, 3, image_size, image_size))
    x = net.conv2d(data, "patch_embed", width, kernel_size=(patch_size, patch_size),
                   strides=(patch_size, patch_size))
    x = net.bias_add(x, net.param("patch_embed_bias", (width,), "bias"))
    x = net.transpose(net.reshape(x, (batch_size, width, tokens)), (0, 2, 1))
    x = net.binary("add", x, net.param("pos_embed", (1, tokens, width), "bias"))
    x = net.reshape(x, (batch_size * tokens, width))
    for i in range(num_layers):
        x = _block(net, x, i, batch_size, tokens, width, heads, 4 * width)
    x = net.reshape(net.layer_norm(x, "norm", epsilon=1e-6), (batch_size, tokens, width))
    x = net.call("mean", (x,), (batch_size, width), axis=(1,))
    x = net.dense_add_bias(x, "head", num_classes)
    return net.module(net.unary("nn.softmax", x, axis=-1))
