"""Inception v3, as TVM's ``relay.testing.inception_v3`` builds it.

Parameter names follow TVM's (``mixed_3_tower_conv_1_conv1_weight``, ...). The final average
pool covers the whole last feature map: 8x8 for the usual 299x299 input, as in TVM, and still
valid for the smaller test images.
"""

from __future__ import annotations

from .layers import Net

__all__ = ["inception_v3"]


class _Inception:
    def __init__(self, net: Net, width: float) -> None:
        self.net = net
        self.width = width

    def conv(self, data, filters, kernel=(1, 1), stride=(1, 1), pad=(0, 0), name="", suffix=""):
        net = self.net
        channels = max(1, int(filters * self.width))
        conv = net.conv2d(data, f"{name}{suffix}_conv1", channels, kernel, stride, pad)
        return net.unary("nn.relu", net.batch_norm_infer(conv, f"{name}{suffix}_bn", epsilon=2e-5))

    def pool(self, data, kernel, stride, pad, kind):
        if kind == "max":
            return self.net.max_pool2d(data, kernel, stride, pad)
        return self.net.avg_pool2d(data, kernel, stride, pad, count_include_pad=True)

    def block_a(self, data, n1x1, n3x3_red, n3x3_1, n3x3_2, n5x5_red, n5x5, pool, proj, name):
        c = self.conv
        t1 = c(data, n1x1, name=f"{name}_conv")
        t5 = c(data, n5x5_red, name=f"{name}_tower", suffix="_conv")
        t5 = c(t5, n5x5, (5, 5), pad=(2, 2), name=f"{name}_tower", suffix="_conv_1")
        t3 = c(data, n3x3_red, name=f"{name}_tower_1", suffix="_conv")
        t3 = c(t3, n3x3_1, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_1")
        t3 = c(t3, n3x3_2, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_2")
        pooled = self.pool(data, (3, 3), (1, 1), (1, 1), pool)
        cproj = c(pooled, proj, name=f"{name}_tower_2", suffix="_conv")
        return self.net.concatenate([t1, t5, t3, cproj], axis=1)

    def block_b(self, data, n3x3, nd3x3_red, nd3x3_1, nd3x3_2, pool, name):
        c = self.conv
        t3 = c(data, n3x3, (3, 3), (2, 2), (0, 0), name=f"{name}_conv")
        td = c(data, nd3x3_red, name=f"{name}_tower", suffix="_conv")
        td = c(td, nd3x3_1, (3, 3), (1, 1), (1, 1), name=f"{name}_tower", suffix="_conv_1")
        td = c(td, nd3x3_2, (3, 3), (2, 2), (0, 0), name=f"{name}_tower", suffix="_conv_2")
        pooled = self.pool(data, (3, 3), (2, 2), (0, 0), "max")
        return self.net.concatenate([t3, td, pooled], axis=1)

    def block_c(self, data, n1x1, nd7_red, nd7_1, nd7_2, nq7_red, nq7_1, nq7_2, nq7_3, nq7_4,
                pool, proj, name):
        c = self.conv
        t1 = c(data, n1x1, name=f"{name}_conv")
        td = c(data, nd7_red, name=f"{name}_tower", suffix="_conv")
        td = c(td, nd7_1, (1, 7), pad=(0, 3), name=f"{name}_tower", suffix="_conv_1")
        td = c(td, nd7_2, (7, 1), pad=(3, 0), name=f"{name}_tower", suffix="_conv_2")
        tq = c(data, nq7_red, name=f"{name}_tower_1", suffix="_conv")
        tq = c(tq, nq7_1, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_1")
        tq = c(tq, nq7_2, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_2")
        tq = c(tq, nq7_3, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_3")
        tq = c(tq, nq7_4, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_4")
        pooled = self.pool(data, (3, 3), (1, 1), (1, 1), pool)
        cproj = c(pooled, proj, name=f"{name}_tower_2", suffix="_conv")
        return self.net.concatenate([t1, td, tq, cproj], axis=1)

    def block_d(self, data, n3x3_red, n3x3, nd7_red, nd7_1, nd7_2, nd7_3x3, pool, name):
        c = self.conv
        t3 = c(data, n3x3_red, name=f"{name}_tower", suffix="_conv")
        t3 = c(t3, n3x3, (3, 3), (2, 2), (0, 0), name=f"{name}_tower", suffix="_conv_1")
        td = c(data, nd7_red, name=f"{name}_tower_1", suffix="_conv")
        td = c(td, nd7_1, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_1")
        td = c(td, nd7_2, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_2")
        td = c(td, nd7_3x3, (3, 3), (2, 2), name=f"{name}_tower_1", suffix="_conv_3")
        pooled = self.pool(data, (3, 3), (2, 2), (0, 0), pool)
        return self.net.concatenate([t3, td, pooled], axis=1)

    def block_e(self, data, n1x1, nd3_red, nd3_1, nd3_2, n3x3_d3_red, n3x3, n3x3_d3_1, n3x3_d3_2,
                pool, proj, name):
        c = self.conv
        t1 = c(data, n1x1, name=f"{name}_conv")
        td = c(data, nd3_red, name=f"{name}_tower", suffix="_conv")
        td_a = c(td, nd3_1, (1, 3), pad=(0, 1), name=f"{name}_tower", suffix="_mixed_conv")
        td_b = c(td, nd3_2, (3, 1), pad=(1, 0), name=f"{name}_tower", suffix="_mixed_conv_1")
        t3 = c(data, n3x3_d3_red, name=f"{name}_tower_1", suffix="_conv")
        t3 = c(t3, n3x3, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_1")
        t3_a = c(t3, n3x3_d3_1, (1, 3), pad=(0, 1), name=f"{name}_tower_1", suffix="_mixed_conv")
        t3_b = c(t3, n3x3_d3_2, (3, 1), pad=(1, 0), name=f"{name}_tower_1", suffix="_mixed_conv_1")
        pooled = self.pool(data, (3, 3), (1, 1), (1, 1), pool)
        cproj = c(pooled, proj, name=f"{name}_tower_2", suffix="_conv")
        return self.net.concatenate([t1, td_a, td_b, t3_a, t3_b, cproj], axis=1)


def inception_v3(batch_size: int = 1, num_classes: int = 1000, image_shape=(3, 299, 299),
                 dtype: str = "float32", width: float = 1.0, seed: int = 0, small: bool = False):
    """Inception v3: ``(IRModule, params)``; ``width`` scales every tower's channels.

    ``small=True`` is the test configuration: 75x75 images, 10 classes, width 1/16.
    """
    if small:
        image_shape, num_classes, width = (3, 75, 75), 10, 1 / 16
    net = Net(seed, dtype)
    b = _Inception(net, width)
    data = net.input("data", (batch_size, *image_shape))
    conv = b.conv(data, 32, (3, 3), (2, 2), name="conv")
    conv_1 = b.conv(conv, 32, (3, 3), name="conv_1")
    conv_2 = b.conv(conv_1, 64, (3, 3), pad=(1, 1), name="conv_2")
    pool = b.pool(conv_2, (3, 3), (2, 2), (0, 0), "max")
    conv_3 = b.conv(pool, 80, (1, 1), name="conv_3")
    conv_4 = b.conv(conv_3, 192, (3, 3), name="conv_4")
    x = b.pool(conv_4, (3, 3), (2, 2), (0, 0), "max")
    x = b.block_a(x, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed")
    x = b.block_a(x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1")
    x = b.block_a(x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2")
    x = b.block_b(x, 384, 64, 96, 96, "max", "mixed_3")
    x = b.block_c(x, 192, 128, 128, 192, 128, 128, 128, 128, 192, "avg", 192, "mixed_4")
    x = b.block_c(x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_5")
    x = b.block_c(x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_6")
    x = b.block_c(x, 192, 192, 192, 192, 192, 192, 192, 192, 192, "avg", 192, "mixed_7")
    x = b.block_d(x, 192, 320, 192, 192, 192, 192, "max", "mixed_8")
    x = b.block_e(x, 320, 384, 384, 384, 448, 384, 384, 384, "avg", 192, "mixed_9")
    x = b.block_e(x, 320, 384, 384, 384, 448, 384, 384, 384, "max", 192, "mixed_10")
    side = net.shape(x)[2:]
    x = b.pool(x, side, (1, 1), (0, 0), "avg")
    flat = net.batch_flatten(x)
    weight = net.param("fc1_weight", (num_classes, net.shape(flat)[1]))
    fc1 = net.bias_add(net.dense(flat, weight, num_classes), net.param("fc2_bias", (num_classes,), "bias"))
    return net.module(net.unary("nn.softmax", fc1))
