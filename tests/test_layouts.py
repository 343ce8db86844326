"""Layout counts: the calls of ops that take layouts, by op and layouts, and what a rewrite changed
in them."""

import relaygraph as rg
from relaygraph.ops import layout_changes, layout_stats


def test_layout_stats_counts_calls_by_op_and_layouts():
    """Defaults filled in, a fused op counted as its anchor, ops without layouts left out."""
    x = rg.var("x", shape=(1, 4, 8, 8))
    w = rg.var("w", shape=(4, 4, 3, 3))
    b = rg.var("b", shape=(4,))
    plain = rg.op.nn.conv2d(x, w, padding=(1, 1))
    fused = rg.Call(rg.Op("fused.conv2d_bias_relu"), (plain, w, b),
                    rg.Attrs(padding=(1, 1), data_layout="NCHW", kernel_layout="OIHW"))
    up = rg.op.nn.conv2d_transpose(fused, rg.var("t", shape=(4, 2, 2, 4)), kernel_layout="IHWO")
    pooled = rg.op.nn.global_avg_pool2d(rg.op.exp(up))
    assert layout_stats(pooled) == {"nn.conv2d NCHW/OIHW": 2, "nn.conv2d_transpose NCHW/IHWO": 1,
                                    "nn.global_avg_pool2d NCHW": 1}
    assert layout_stats(rg.op.exp(x)) == {}


def test_layout_changes_keep_ops_whose_layouts_changed():
    """Channels-last convolutions are a layout change; convolutions that became Winograd ones
    (fewer calls, the same layouts) and a new op are changes of ops, left to the op counts."""
    before = {"nn.conv2d NCHW/OIHW": 27, "nn.conv2d_transpose NCHW/IOHW": 4, "nn.max_pool2d NCHW": 1}
    after = {"nn.conv2d NCHW/OIHW": 6, "nn.conv2d NHWC/HWIO": 21, "nn.conv2d_transpose NCHW/IOHW": 4,
             "nn.contrib_conv2d_winograd_without_weight_transform NCHW/OIHW": 3}
    assert layout_changes(before, after) == {"nn.conv2d NCHW/OIHW": (27, 6), "nn.conv2d NHWC/HWIO": (0, 21)}
    fewer = {"nn.conv2d NCHW/OIHW": 20, "nn.conv2d_transpose NCHW/IOHW": 4, "nn.max_pool2d NCHW": 1}
    assert layout_changes(before, fewer) == {}
    assert layout_changes(before, before) == {}
