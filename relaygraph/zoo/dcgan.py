"""The DCGAN generator, as TVM's ``relay.testing.dcgan`` builds it (64x64 images)."""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["dcgan"]


def _deconv(net: Net, data, oshape, kshape, name: str, stride=(2, 2)):
    """A transposed convolution that doubles the feature map to ``oshape``'s height and width."""
    pad_y, pad_x = (kshape[0] - 1) // 2, (kshape[1] - 1) // 2
    adj_y = (oshape[-2] + 2 * pad_y - kshape[0]) % stride[0]
    adj_x = (oshape[-1] + 2 * pad_x - kshape[1]) % stride[1]
    return net.conv2d_transpose(data, name, oshape[0], kshape, stride, (pad_y, pad_x), (adj_y, adj_x))


def _deconv_bn_relu(net: Net, data, prefix: str, oshape, kshape):
    out = _deconv(net, data, oshape, kshape, f"{prefix}_deconv")
    out = net.batch_norm_infer(out, f"{prefix}_batch_norm", epsilon=1e-5 + 1e-12, scale=False)
    return net.unary("nn.relu", out)


def dcgan(batch_size: int = 1, random_len: int = 100, oshape=(3, 64, 64), ngf: int = 128,
          dtype: str = "float32", seed: int = 0, small: bool = False):
    """The DCGAN generator: ``(IRModule, params)``; ``ngf`` is the last feature-map count.

    ``small=True`` is the test configuration: ngf 8, a code of length 16.
    """
    if tuple(oshape[-2:]) != (64, 64):
        raise OptionValueError(f"dcgan: only 64x64 images are supported, got oshape={tuple(oshape)}")
    if small:
        ngf, random_len = 8, 16
    net = Net(seed, dtype)
    code = net.input("data", (batch_size, random_len))
    weight = net.param("dense_weight", (4 * 4 * ngf * 8, random_len))
    relu = net.unary("nn.relu", net.dense(code, weight, 4 * 4 * ngf * 8))
    body = net.reshape(relu, (-1, ngf * 8, 4, 4))
    body = _deconv_bn_relu(net, body, "g2", (ngf * 4, 8, 8), (4, 4))
    body = _deconv_bn_relu(net, body, "g3", (ngf * 2, 16, 16), (4, 4))
    body = _deconv_bn_relu(net, body, "g4", (ngf, 32, 32), (4, 4))
    body = _deconv(net, body, tuple(oshape), (4, 4), "g5_deconv")
    return net.module(net.unary("tanh", body))
