"""FuseOps against TVM: its counts on TVM's own dumps, its rules on every zoo model, and the
exact groups of ResNet-18."""

import json
import os
from collections import Counter
from pathlib import Path

import pytest

import relaygraph as rg
from relaygraph import transform as T
from relaygraph.ops import PatternKind, lookup
from relaygraph.text import parse_file

DATA = Path(__file__).parent / "data" / "tvm-text"
GOLDEN = Path(__file__).parent / "golden" / "passes" / "resnet18_fused_groups.txt"
FACTS = json.loads((DATA / "facts.json").read_text())


def fuse(mod, opt_level=2):
    with T.PassContext(opt_level=opt_level):
        return T.Sequential([T.InferType(), T.SimplifyInference(), T.InferType(),
                             T.FuseOps()])(mod)


def primitive_functions(mod):
    return [n for n in rg.post_order(mod["main"])
            if isinstance(n, rg.Function) and n.attrs.get("Primitive")]


def group_ops(func):
    return [n.op.name for n in rg.post_order(func.body)
            if isinstance(n, rg.Call) and isinstance(n.op, rg.Op)]


@pytest.mark.parametrize("name", sorted(FACTS))
def test_primitive_function_counts_match_tvm(name):
    fused = fuse(parse_file(DATA / name))
    assert len(primitive_functions(fused)) == \
        FACTS[name]["primitive_functions_after_SimplifyInference_FuseOps_opt2"]


def check_group_rules(func):
    kinds = [PatternKind(lookup(op).pattern) for op in group_ops(func)]
    anchors = kinds.count(PatternKind.OUT_ELEMWISE_FUSABLE)
    assert anchors <= 1, group_ops(func)
    if PatternKind.OPAQUE in kinds:
        assert len(kinds) == 1, group_ops(func)  # opaque ops are never fused with others
    if anchors:
        assert PatternKind.COMM_REDUCE not in kinds, group_ops(func)


ZOO = ["resnet-18", "resnet-50", "mobilenet", "vgg-11", "squeezenet-1.1", "inception-v3",
       "densenet-121", "dcgan", "lstm", "bert", "nasrnn", "vit-sima"]


@pytest.mark.parametrize("name", ZOO)
def test_fusion_rules_on_zoo_models(name):
    mod, _ = rg.zoo.get(name, small=True)
    fused = fuse(mod)
    groups = primitive_functions(fused)
    assert groups
    for func in groups:
        check_group_rules(func)
    # Every op call of the model ends up in exactly one group.
    ops_in = Counter(n.op.name for n in rg.post_order(T.InferType()(mod)["main"])
                     if isinstance(n, rg.Call) and isinstance(n.op, rg.Op))
    assert sum(len(group_ops(f)) for f in groups) >= sum(ops_in.values()) - \
        ops_in["nn.batch_norm"] - ops_in["nn.dropout"] - ops_in["nn.layer_norm"]


def test_conv_bias_relu_is_one_group():
    mod, _ = rg.zoo.get("vgg-11", small=True)
    signatures = {tuple(group_ops(f)) for f in primitive_functions(fuse(mod))}
    assert ("nn.conv2d", "nn.bias_add", "nn.relu") in signatures


def test_resnet18_groups_exactly():
    fused = fuse(parse_file(DATA / "resnet18.relay"))
    got = "\n".join(" ".join(group_ops(f)) for f in primitive_functions(fused)) + "\n"
    if os.environ.get("RELAYGRAPH_REGEN_GOLDEN"):
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()


def test_fuse_opt_level_0_makes_singleton_groups():
    fused = fuse(parse_file(DATA / "vgg11.relay"), opt_level=0)
    groups = primitive_functions(fused)
    assert len(groups) > 30 and all(len(group_ops(f)) == 1 for f in groups)


def test_max_depth_bounds_group_size():
    x = rg.var("x", rg.TensorType((4,), "float32"))
    h = x
    for _ in range(40):
        h = rg.Call(rg.Op("tanh"), (h,))
    mod = rg.IRModule.from_expr(rg.Function([x], h))
    with T.PassContext(opt_level=2, config={"relay.FuseOps.max_depth": 10}):
        fused = T.Sequential([T.InferType(), T.FuseOps()])(mod)
    sizes = [len(group_ops(f)) for f in primitive_functions(fused)]
    assert max(sizes) <= 10 and sum(sizes) == 40
