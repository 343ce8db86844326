"""ResNet v1 for ImageNet-sized inputs, as TVM's ``relay.testing.resnet`` builds it.

The structure and parameter names follow TVM's workload (pre-activation units: batch norm and
relu before each convolution, ``stage{i}_unit{j}_conv1_weight`` and so on). ``width`` scales
every channel count (1.0 is the real network) so tests can run the full depth cheaply.
"""

from __future__ import annotations

from ..errors import OptionValueError
from .layers import Net

__all__ = ["resnet"]

_UNITS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
          152: [3, 8, 36, 3]}


def _residual_unit(net: Net, data, num_filter: int, stride: int, dim_match: bool, name: str,
                   bottle_neck: bool):
    bn1 = net.batch_norm_infer(data, f"{name}_bn1", epsilon=2e-5)
    act1 = net.unary("nn.relu", bn1)
    if bottle_neck:
        quarter = max(1, int(num_filter * 0.25))
        conv1 = net.conv2d(act1, f"{name}_conv1", quarter, (1, 1), (stride, stride), (0, 0))
        act2 = net.unary("nn.relu", net.batch_norm_infer(conv1, f"{name}_bn2", epsilon=2e-5))
        conv2 = net.conv2d(act2, f"{name}_conv2", quarter, (3, 3), (1, 1), (1, 1))
        act3 = net.unary("nn.relu", net.batch_norm_infer(conv2, f"{name}_bn3", epsilon=2e-5))
        body = net.conv2d(act3, f"{name}_conv3", num_filter, (1, 1), (1, 1), (0, 0))
    else:
        conv1 = net.conv2d(act1, f"{name}_conv1", num_filter, (3, 3), (stride, stride), (1, 1))
        act2 = net.unary("nn.relu", net.batch_norm_infer(conv1, f"{name}_bn2", epsilon=2e-5))
        body = net.conv2d(act2, f"{name}_conv2", num_filter, (3, 3), (1, 1), (1, 1))
    if dim_match:
        shortcut = data
    else:
        shortcut = net.conv2d(act1, f"{name}_sc", num_filter, (1, 1), (stride, stride))
    return net.binary("add", body, shortcut)


def resnet(num_layers: int = 18, batch_size: int = 1, num_classes: int = 1000,
           image_shape=(3, 224, 224), dtype: str = "float32", width: float = 1.0,
           seed: int = 0, small: bool = False):
    """ResNet-``num_layers`` (18, 34, 50, 101, 152): ``(IRModule, params)``.

    ``small=True`` is the test configuration: 64x64 images, 10 classes, width 1/16.
    """
    if num_layers not in _UNITS:
        raise OptionValueError(f"resnet: num_layers must be one of {sorted(_UNITS)}, got {num_layers}")
    if small:
        image_shape, num_classes, width = (3, 64, 64), 10, 1 / 16
    bottle_neck = num_layers >= 50
    filters = [64, 256, 512, 1024, 2048] if bottle_neck else [64, 64, 128, 256, 512]
    filters = [max(4, int(f * width)) for f in filters]
    net = Net(seed, dtype)
    data = net.input("data", (batch_size, *image_shape))
    body = net.batch_norm_infer(data, "bn_data", epsilon=2e-5, scale=False)
    height = image_shape[1]
    if height <= 32:  # CIFAR-sized inputs: one 3x3 convolution, no pooling
        body = net.conv2d(body, "conv0", filters[0], (3, 3), (1, 1), (1, 1))
    else:
        body = net.conv2d(body, "conv0", filters[0], (7, 7), (2, 2), (3, 3))
        body = net.unary("nn.relu", net.batch_norm_infer(body, "bn0", epsilon=2e-5))
        body = net.max_pool2d(body, (3, 3), (2, 2), (1, 1))
    for i, units in enumerate(_UNITS[num_layers]):
        stride = 1 if i == 0 else 2
        body = _residual_unit(net, body, filters[i + 1], stride, False, f"stage{i + 1}_unit1",
                              bottle_neck)
        for j in range(units - 1):
            body = _residual_unit(net, body, filters[i + 1], 1, True, f"stage{i + 1}_unit{j + 2}",
                                  bottle_neck)
    relu1 = net.unary("nn.relu", net.batch_norm_infer(body, "bn1", epsilon=2e-5))
    flat = net.batch_flatten(net.global_avg_pool2d(relu1))
    fc1 = net.dense_add_bias(flat, "fc1", num_classes)
    return net.module(net.unary("nn.softmax", fc1))
