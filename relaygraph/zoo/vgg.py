"""VGG 11/13/16/19, as TVM's ``relay.testing.vgg`` builds it (optionally with batch norm)."""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["vgg"]

_SPEC = {11: [1, 1, 2, 2, 2], 13: [2, 2, 2, 2, 2], 16: [2, 2, 3, 3, 3], 19: [2, 2, 4, 4, 4]}
_FILTERS = [64, 128, 256, 512, 512]


def vgg(num_layers: int = 11, batch_size: int = 1, num_classes: int = 1000,
        image_shape=(3, 224, 224), dtype: str = "float32", batch_norm: bool = False,
        width: float = 1.0, seed: int = 0, small: bool = False):
    """VGG-``num_layers``: ``(IRModule, params)``. ``width`` scales channels and fc units.

    ``small=True`` is the test configuration: 32x32 images, 10 classes, width 1/16.
    """
    if num_layers not in _SPEC:
        raise OptionValueError(f"vgg: num_layers must be one of {sorted(_SPEC)}, got {num_layers}")
    if small:
        image_shape, num_classes, width = (3, 32, 32), 10, 1 / 16
    net = Net(seed, dtype)
    body = net.input("data", (batch_size, *image_shape))
    for i, count in enumerate(_SPEC[num_layers]):
        channels = max(1, int(_FILTERS[i] * width))
        for j in range(count):
            name = f"conv{i + 1}_{j + 1}"
            body = net.conv2d(body, name, channels, (3, 3), (1, 1), (1, 1))
            body = net.bias_add(body, net.param(f"{name}_bias", (channels,), "bias"))
            if batch_norm:
                body = net.batch_norm_infer(body, f"bn{i + 1}_{j + 1}")
            body = net.unary("nn.relu", body)
        body = net.max_pool2d(body, (2, 2), (2, 2))
    units = max(1, int(4096 * width))
    flat = net.batch_flatten(body)
    fc6 = net.dropout(net.unary("nn.relu", net.dense_add_bias(flat, "fc6", units)))
    fc7 = net.dropout(net.unary("nn.relu", net.dense_add_bias(fc6, "fc7", units)))
    fc8 = net.dense_add_bias(fc7, "fc8", num_classes)
    return net.module(net.unary("nn.softmax", fc8))
