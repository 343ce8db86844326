"""SqueezeNet 1.0 and 1.1, as TVM's ``relay.testing.squeezenet`` builds them."""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["squeezenet"]


def _fire_conv(net: Net, data, channels: int, kernel: int, padding: int, prefix: str):
    conv = net.conv2d(data, f"{prefix}_conv", channels, (kernel, kernel), (1, 1), (padding, padding))
    conv = net.bias_add(conv, net.param(f"{prefix}_conv_bias", (channels,), "bias"))
    return net.unary("nn.relu", conv)


def _fire(net: Net, data, squeeze: int, expand1x1: int, expand3x3: int, prefix: str):
    data = _fire_conv(net, data, squeeze, 1, 0, f"{prefix}_input")
    left = _fire_conv(net, data, expand1x1, 1, 0, f"{prefix}_left")
    right = _fire_conv(net, data, expand3x3, 3, 1, f"{prefix}_right")
    return net.concatenate([left, right], axis=1)


# The fire modules (squeeze, expand 1x1, expand 3x3) and where max pools go between them.
_V10 = [(16, 64, 64), (16, 64, 64), (32, 128, 128), "pool", (32, 128, 128), (48, 192, 192),
        (48, 192, 192), (64, 256, 256), "pool", (64, 256, 256)]
_V11 = [(16, 64, 64), (16, 64, 64), "pool", (32, 128, 128), (32, 128, 128), "pool",
        (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]


def squeezenet(version: str = "1.0", batch_size: int = 1, num_classes: int = 1000,
               image_shape=(3, 224, 224), dtype: str = "float32", width: float = 1.0,
               seed: int = 0, small: bool = False):
    """SqueezeNet ``version`` ("1.0" or "1.1"): ``(IRModule, params)``.

    ``small=True`` is the test configuration: 64x64 images, 10 classes, width 1/8.
    """
    if version not in ("1.0", "1.1"):
        raise OptionValueError(f"squeezenet: version must be '1.0' or '1.1', got {version!r}")
    if small:
        image_shape, num_classes, width = (3, 64, 64), 10, 1 / 8

    def w(c: int) -> int:
        return max(1, int(c * width))

    net = Net(seed, dtype)
    body = net.input("data", (batch_size, *image_shape))
    if version == "1.0":
        body = net.conv2d(body, "conv1", w(96), (7, 7), (2, 2), (3, 3))
        body = net.bias_add(body, net.param("conv1_bias", (w(96),), "bias"))
    else:
        body = net.conv2d(body, "conv1", w(64), (3, 3), (2, 2), (1, 1))
        body = net.bias_add(body, net.param("conv1_bias", (w(64),), "bias"))
    body = net.max_pool2d(net.unary("nn.relu", body), (3, 3), (2, 2))
    fire = 0
    for step in _V10 if version == "1.0" else _V11:
        if step == "pool":
            body = net.max_pool2d(body, (3, 3), (2, 2))
            continue
        fire += 1
        body = _fire(net, body, *(w(c) for c in step), f"fire{fire}")
    body = net.dropout(body, 0.5)
    body = net.conv2d(body, "conv_final", num_classes, (1, 1))
    body = net.unary("nn.relu", net.bias_add(body, net.param("conv_final_bias", (num_classes,), "bias")))
    body = net.batch_flatten(net.global_avg_pool2d(body))
    return net.module(net.unary("nn.softmax", body))
