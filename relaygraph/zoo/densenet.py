"""DenseNet 121/161/169/201 with TVM's parameter names (``batch_1_{block}_{layer}_gamma``, ...).

By default this is the real DenseNet: each layer's output is concatenated to its input. TVM's
``relay.testing.densenet`` port differs: its layers are chained without concatenation, and an
argument mix-up makes the growth rate equal to the batch size. ``tvm_compat=True`` builds
exactly that graph, for comparisons with results reported on TVM's workload.
"""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["densenet"]

_SPECS = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
          169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


def _dense_layer(net: Net, data, growth: int, bn_size: int, index: str, concat: bool):
    relu1 = net.unary("nn.relu", net.batch_norm_infer(data, f"batch_1_{index}"))
    conv1 = net.conv2d(relu1, f"conv2d_1_{index}", bn_size * growth, (1, 1))
    relu2 = net.unary("nn.relu", net.batch_norm_infer(conv1, f"batch_2_{index}"))
    conv2 = net.conv2d(relu2, f"conv2d_2_{index}", growth, (3, 3), (1, 1), (1, 1))
    return net.concatenate([data, conv2], axis=1) if concat else conv2


def _transition(net: Net, data, channels: int, index: int):
    relu = net.unary("nn.relu", net.batch_norm_infer(data, f"batch_t_{index}"))
    conv = net.conv2d(relu, f"conv_t_{index}", channels, (1, 1))
    return net.avg_pool2d(conv, (2, 2), (2, 2))


def densenet(densenet_size: int = 121, batch_size: int = 1, classes: int = 1000,
             image_shape=(3, 224, 224), dtype: str = "float32", bn_size: int = 4,
             width: float = 1.0, tvm_compat: bool = False, seed: int = 0, small: bool = False):
    """DenseNet-``densenet_size``: ``(IRModule, params)``; ``width`` scales the growth rate and
    the initial features.

    ``small=True`` is the test configuration: 32x32 images, 10 classes, width 1/8.
    """
    if densenet_size not in _SPECS:
        raise OptionValueError(f"densenet: densenet_size must be one of {sorted(_SPECS)}, "
                               f"got {densenet_size}")
    if small:
        image_shape, classes, width = (3, 32, 32), 10, 1 / 8
    init_features, growth, blocks = _SPECS[densenet_size]
    init_features, growth = max(1, int(init_features * width)), max(1, int(growth * width))
    if tvm_compat:
        # TVM passes the batch size as bn_size and swaps the two in its block helper.
        layer_growth, layer_bn = batch_size, growth
    else:
        layer_growth, layer_bn = growth, bn_size
    net = Net(seed, dtype)
    data = net.input("data", (batch_size, *image_shape))
    conv1 = net.conv2d(data, "conv1", init_features, (7, 7), (2, 2), (3, 3))
    relu1 = net.unary("nn.relu", net.batch_norm_infer(conv1, "batch1"))
    body = net.max_pool2d(relu1, (3, 3), (2, 2), (1, 1))
    features = init_features
    for i, layers in enumerate(blocks):
        for j in range(layers):
            body = _dense_layer(net, body, layer_growth, layer_bn, f"{i}_{j}", not tvm_compat)
        features += layers * growth
        if i != len(blocks) - 1:
            channels = features // 2 if tvm_compat else net.shape(body)[1] // 2
            body = _transition(net, body, channels, i)
            features //= 2
    relu2 = net.unary("nn.relu", net.batch_norm_infer(body, "batch2"))
    side = (7, 7) if tvm_compat else net.shape(relu2)[2:]
    flat = net.batch_flatten(net.avg_pool2d(relu2, side))
    return net.module(net.dense_add_bias(flat, "dense", classes))
