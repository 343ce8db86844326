"""MobileNet v1 with a width multiplier, as TVM's ``relay.testing.mobilenet`` builds it."""

from __future__ import annotations

from .layers import Net

__all__ = ["mobilenet"]

# (depthwise channels, pointwise channels, downsample) per separable block, before ``alpha``.
_BLOCKS = [(32, 64, False), (64, 128, True), (128, 128, False), (128, 256, True),
           (256, 256, False), (256, 512, True)] + [(512, 512, False)] * 5 + \
          [(512, 1024, True), (1024, 1024, False)]
_SHALLOW = _BLOCKS[:6] + [(512, 1024, True), (1024, 1024, True)]


def _conv_block(net: Net, data, name: str, channels: int, strides, epsilon: float = 1e-5):
    conv = net.conv2d(data, f"{name}_conv", channels, (3, 3), strides, (1, 1))
    return net.unary("nn.relu", net.batch_norm_infer(conv, f"{name}_bn", epsilon=epsilon))


def _separable_block(net: Net, data, name: str, depthwise: int, pointwise: int, downsample: bool,
                     epsilon: float = 1e-5):
    strides = (2, 2) if downsample else (1, 1)
    weight = net.param(f"{name}_weight", (depthwise, 1, 3, 3))
    conv1 = net.conv2d(data, f"{name}_depthwise_conv1", depthwise, (3, 3), strides, (1, 1),
                       groups=depthwise, weight=weight)
    act1 = net.unary("nn.relu", net.batch_norm_infer(conv1, f"{name}_bn1", epsilon=epsilon))
    conv2 = net.conv2d(act1, f"{name}_conv2", pointwise, (1, 1), (1, 1), (0, 0))
    return net.unary("nn.relu", net.batch_norm_infer(conv2, f"{name}_bn2", epsilon=epsilon))


def mobilenet(batch_size: int = 1, num_classes: int = 1000, image_shape=(3, 224, 224),
              dtype: str = "float32", alpha: float = 1.0, is_shallow: bool = False,
              seed: int = 0, small: bool = False):
    """MobileNet v1 (``alpha`` is the width multiplier): ``(IRModule, params)``.

    ``small=True`` is the test configuration: 32x32 images, 10 classes, alpha 0.125.
    """
    if small:
        image_shape, num_classes, alpha = (3, 32, 32), 10, 0.125
    net = Net(seed, dtype)
    data = net.input("data", (batch_size, *image_shape))
    body = _conv_block(net, data, "conv_block_1", max(1, int(32 * alpha)), (2, 2))
    for i, (dw, pw, down) in enumerate(_SHALLOW if is_shallow else _BLOCKS):
        body = _separable_block(net, body, f"separable_conv_block_{i + 1}", max(1, int(dw * alpha)),
                                max(1, int(pw * alpha)), down)
    flatten = net.batch_flatten(net.global_avg_pool2d(body))
    weight = net.param("fc_weight", (num_classes, net.shape(flatten)[1]))
    bias = net.param("fc_bias", (num_classes,), "bias")
    fc = net.bias_add(net.dense(flatten, weight, num_classes), bias)
    return net.module(net.unary("nn.softmax", fc))
