"""BYOC passes (AnnotateTarget, MergeCompilerRegions, PartitionGraph) on TVM's test programs,
with expected outputs as TVM prints them, and the chain on a zoo CNN checked by evaluation."""

from __future__ import annotations

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.ir.expr import Call, Function, Op, Var
from relaygraph.ir.types import TensorType
from relaygraph.passes.annotate_target import compiler_begin, compiler_end

T = rg.transform
HEAD = '#[version = "0.0.5"]\n'


def parse(text: str) -> rg.IRModule:
    return rg.parse(HEAD + text)


def assert_same(got: rg.IRModule, expected_text: str) -> None:
    want = rg.infer_type(parse(expected_text))
    assert rg.alpha_equal(got, want), f"got:\n{rg.astext(got)}\nexpected:\n{rg.astext(want)}"


@pytest.fixture
def targets():
    """Registers target ops for one test and forgets them afterwards."""
    made: list[str] = []

    def register(target, *ops, predicate=None):
        for op in ops:
            T.register_target_op(target, op, predicate)
        made.append(target)

    yield register
    for t in made:
        T.unregister_target_op(t)


def _random_args(mod: rg.IRModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    main = mod["main"]
    return [rng.standard_normal([int(d) for d in p.type_annotation.shape]).astype(
        p.type_annotation.dtype) for p in main.params]


def assert_same_value(before: rg.IRModule, after: rg.IRModule, seed: int = 0) -> None:
    args = _random_args(before, seed)
    want, got = rg.evaluate(before, *args), rg.evaluate(after, *args)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# -- the annotation ops ---------------------------------------------------------------------------
def test_annotation_ops_are_identity_on_any_type():
    mod = parse("""
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = (%x, %y);
  %1 = annotation.compiler_begin(%0, compiler="ccompiler");
  %2 = %1.1;
  annotation.compiler_end(%2, compiler="ccompiler")
}""")
    typed = rg.infer_type(mod)
    assert typed["main"].ret_type == TensorType((2, 3))
    x, y = _random_args(mod)
    np.testing.assert_array_equal(rg.evaluate(mod, x, y), y)
    assert rg.alpha_equal(rg.parse(rg.astext(mod)), mod)
    with pytest.raises(rg.NodeError, match="compiler"):
        rg.op.annotation.compiler_begin(Var("x"))


# -- AnnotateTarget -------------------------------------------------------------------------------
MULTIPLE_ENDS = """
def @main(%x: Tensor[(10, 10), float32]) {
  %0 = nn.relu(%x);
  %1 = abs(%0);
  %2 = abs(%0);
  add(%1, %2)
}"""


@pytest.mark.parametrize("non_call", [False, True])
def test_annotate_target_multiple_ends(targets, non_call):
    targets("test", "nn.relu")
    # abs(%0) twice is one node here (hash-consing), so TVM's two identical ends and begins
    # print as one of each
    got = T.AnnotateTarget("test", non_call)(parse(MULTIPLE_ENDS))
    assert_same(got, """
def @main(%x: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%x, compiler="test");
  %1 = nn.relu(%0);
  %2 = annotation.compiler_end(%1, compiler="test");
  %3 = annotation.compiler_begin(%2, compiler="default");
  %4 = abs(%3);
  %5 = annotation.compiler_end(%4, compiler="default");
  %6 = annotation.compiler_begin(%5, compiler="default");
  %7 = add(%6, %6);
  annotation.compiler_end(%7, compiler="default")
}""")


TUPLE = """
def @main(%x: Tensor[(10, 5), float32], %y: Tensor[(10, 5), float32]) {
  %0 = nn.relu(%x);
  %1 = nn.relu(%y);
  %2 = (%0, %1);
  concatenate(%2, axis=1)
}"""


def test_annotate_target_tuple_with_non_call_ops(targets):
    targets("test_tuple", "nn.relu", "concatenate")
    got = T.AnnotateTarget("test_tuple", True)(parse(TUPLE))
    assert_same(got, """
def @main(%x: Tensor[(10, 5), float32], %y: Tensor[(10, 5), float32]) {
  %0 = annotation.compiler_begin(%x, compiler="test_tuple");
  %1 = nn.relu(%0);
  %2 = annotation.compiler_end(%1, compiler="test_tuple");
  %3 = annotation.compiler_begin(%y, compiler="test_tuple");
  %4 = nn.relu(%3);
  %5 = annotation.compiler_end(%4, compiler="test_tuple");
  %6 = annotation.compiler_begin(%2, compiler="test_tuple");
  %7 = annotation.compiler_begin(%5, compiler="test_tuple");
  %8 = (%6, %7);
  %9 = annotation.compiler_end(%8, compiler="test_tuple");
  %10 = annotation.compiler_begin(%9, compiler="test_tuple");
  %11 = concatenate(%10, axis=1);
  annotation.compiler_end(%11, compiler="test_tuple")
}""")


def test_annotate_target_tuple_call_ops_only(targets):
    targets("test_tuple", "nn.relu", "concatenate")
    got = T.AnnotateTarget("test_tuple", False)(parse(TUPLE))
    assert_same(got, """
def @main(%x: Tensor[(10, 5), float32], %y: Tensor[(10, 5), float32]) {
  %0 = annotation.compiler_begin(%x, compiler="test_tuple");
  %1 = nn.relu(%0);
  %2 = annotation.compiler_end(%1, compiler="test_tuple");
  %3 = annotation.compiler_begin(%y, compiler="test_tuple");
  %4 = nn.relu(%3);
  %5 = annotation.compiler_end(%4, compiler="test_tuple");
  %6 = (%2, %5);
  %7 = annotation.compiler_begin(%6, compiler="test_tuple");
  %8 = concatenate(%7, axis=1);
  annotation.compiler_end(%8, compiler="test_tuple")
}""")


COMPOSITE = """
def @main(%a: Tensor[(10, 10), float32], %b: Tensor[(10, 10), float32]) {
  %1 = fn (%in_1: Tensor[(10, 10), float32], %in_2: Tensor[(10, 10), float32],
           Composite="test.add_relu") {
    %0 = add(%in_1, %in_2);
    nn.relu(%0)
  };
  %1(%a, %b)
}"""


def test_annotate_target_composite_function():
    # no op is registered for "test": the composite's name alone makes it supported
    got = T.AnnotateTarget("test")(parse(COMPOSITE))
    assert_same(got, """
def @main(%a: Tensor[(10, 10), float32], %b: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%a, compiler="test");
  %1 = annotation.compiler_begin(%b, compiler="test");
  %3 = fn (%in_1: Tensor[(10, 10), float32], %in_2: Tensor[(10, 10), float32],
           Composite="test.add_relu") {
    %2 = add(%in_1, %in_2);
    nn.relu(%2)
  };
  %4 = %3(%0, %1);
  annotation.compiler_end(%4, compiler="test")
}""")
    untouched = T.AnnotateTarget("other")(parse(COMPOSITE))
    assert "compiler=\"other\"" not in rg.astext(untouched)


def test_annotate_target_predicate_reads_types(targets):
    targets("test_types", "nn.relu",
            predicate=lambda call, type_of: type_of(call.args[0]).dtype == "float32")
    src = """
def @main(%x: Tensor[(10, 10), float32], %i: Tensor[(10, 10), int32]) {
  %0 = nn.relu(%x);
  %1 = nn.relu(%i);
  (%0, %1)
}"""
    got = T.AnnotateTarget("test_types", False)(parse(src))
    assert_same(got, """
def @main(%x: Tensor[(10, 10), float32], %i: Tensor[(10, 10), int32]) {
  %0 = annotation.compiler_begin(%x, compiler="test_types");
  %1 = nn.relu(%0);
  %2 = annotation.compiler_end(%1, compiler="test_types");
  %3 = annotation.compiler_begin(%i, compiler="default");
  %4 = nn.relu(%3);
  %5 = annotation.compiler_end(%4, compiler="default");
  (%2, %5)
}""")


@pytest.mark.parametrize("non_call", [False, True])
def test_annotate_target_runs_compose(targets, non_call):
    # TVM's test_multiple_runs: annotating for A then B equals annotating for [A, B]
    targets("A", "nn.relu")
    targets("B", "add")
    src = """
def @main(%x: Tensor[(10, 5), float32]) {
  %0 = nn.relu(%x);
  %1 = abs(%0);
  %2 = nn.relu(%0);
  add(%1, %2)
}"""
    once = T.AnnotateTarget(["A", "B"], non_call)(parse(src))
    twice = T.AnnotateTarget("B", non_call)(T.AnnotateTarget("A", non_call)(parse(src)))
    assert rg.alpha_equal(once, twice)
    again = T.AnnotateTarget(["A", "B"], non_call)(once)
    assert rg.alpha_equal(again, once)


@pytest.mark.parametrize("body", ["zeros(shape=[0], dtype=\"float32\")", "()"])
def test_annotate_target_leaves_inputs_alone(body):
    src = f"def @main() {{\n  {body}\n}}"
    got = T.AnnotateTarget("test_free_vars")(parse(src))
    assert rg.alpha_equal(got, rg.infer_type(parse(src)))


def test_target_registry_errors(targets):
    with pytest.raises(rg.RelayError, match="unknown operator 'nn.rleu'"):
        T.register_target_op("test_err", "nn.rleu")
    with pytest.raises(rg.RelayError, match="bad target name 'default'"):
        T.register_target_op("default", "add")
    targets("test_err", "add")
    with pytest.raises(rg.RelayError, match="already has a predicate for add"):
        T.register_target_op("test_err", "add")
    assert set(T.target_ops("test_err")) == {"add"}
    with pytest.raises(rg.RelayError, match="targets must be a name or a list"):
        T.AnnotateTarget(3)

    def broken(call):
        raise ZeroDivisionError("boom")

    T.register_target_op("test_err", "abs", broken)
    with pytest.raises(rg.RelayError, match="predicate for abs failed: ZeroDivisionError: boom"):
        T.AnnotateTarget("test_err")(parse("def @main(%x: Tensor[(2), float32]) { abs(%x) }"))


# -- MergeCompilerRegions -------------------------------------------------------------------------
DIAMOND = """
def @main(%data: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%data, compiler="test");
  %1 = abs(%0);
  %2 = annotation.compiler_end(%1, compiler="test");
  %3 = annotation.compiler_begin(%2, compiler="test");
  %4 = nn.relu(%3);
  %5 = annotation.compiler_end(%4, compiler="test");
  %6 = annotation.compiler_begin(%2, compiler="default");
  %7 = tanh(%6);
  %8 = annotation.compiler_end(%7, compiler="default");
  %9 = annotation.compiler_begin(%5, compiler="test");
  %10 = annotation.compiler_begin(%8, compiler="test");
  %11 = add(%9, %10);
  annotation.compiler_end(%11, compiler="test")
}"""

DIAMOND_MERGED = """
def @main(%data: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%data, compiler="test");
  %1 = abs(%0);
  %2 = nn.relu(%1);
  %3 = annotation.compiler_end(%2, compiler="test");
  %4 = annotation.compiler_end(%1, compiler="test");
  %5 = annotation.compiler_begin(%4, compiler="default");
  %6 = tanh(%5);
  %7 = annotation.compiler_end(%6, compiler="default");
  %8 = annotation.compiler_begin(%3, compiler="test");
  %9 = annotation.compiler_begin(%7, compiler="test");
  %10 = add(%8, %9);
  annotation.compiler_end(%10, compiler="test")
}"""


def test_merge_compiler_regions_diamond_keeps_the_graph_acyclic():
    # TVM's test_diamond_graph_fanouts: abs and relu merge, add stays apart (it waits on tanh)
    got = T.MergeCompilerRegions()(parse(DIAMOND))
    assert_same(got, DIAMOND_MERGED)
    assert_same_value(parse(DIAMOND), got)


RFC_EXAMPLE = """
def @main(%in_1: Tensor[(10, 10), float32], %in_2: Tensor[(10, 10), float32],
          %in_3: Tensor[(10, 10), float32], %in_4: Tensor[(10, 10), float32],
          %in_5: Tensor[(10, 10), float32], %in_6: Tensor[(10, 10), float32],
          %in_7: Tensor[(10, 10), float32], %in_8: Tensor[(10, 10), float32],
          %in_9: Tensor[(10, 10), float32], %in_10: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%in_1, compiler="test");
  %1 = annotation.compiler_begin(%in_2, compiler="test");
  %2 = add(%0, %1);
  %3 = annotation.compiler_end(%2, compiler="test");
  %4 = annotation.compiler_begin(%in_3, compiler="test");
  %5 = annotation.compiler_begin(%in_4, compiler="test");
  %6 = add(%4, %5);
  %7 = annotation.compiler_end(%6, compiler="test");
  %8 = annotation.compiler_begin(%3, compiler="test");
  %9 = annotation.compiler_begin(%7, compiler="test");
  %10 = add(%8, %9);
  %11 = annotation.compiler_end(%10, compiler="test");
  %12 = annotation.compiler_begin(%in_5, compiler="default");
  %13 = annotation.compiler_begin(%in_6, compiler="default");
  %14 = subtract(%12, %13);
  %15 = annotation.compiler_begin(%in_7, compiler="default");
  %16 = annotation.compiler_end(%14, compiler="default");
  %17 = annotation.compiler_begin(%16, compiler="default");
  %18 = subtract(%15, %17);
  %19 = annotation.compiler_end(%18, compiler="default");
  %20 = annotation.compiler_begin(%11, compiler="test");
  %21 = annotation.compiler_begin(%19, compiler="test");
  %22 = add(%20, %21);
  %23 = annotation.compiler_end(%22, compiler="test");
  %24 = annotation.compiler_begin(%in_8, compiler="default");
  %25 = annotation.compiler_begin(%23, compiler="default");
  %26 = subtract(%24, %25);
  %27 = annotation.compiler_begin(%in_9, compiler="test");
  %28 = annotation.compiler_begin(%23, compiler="test");
  %29 = add(%27, %28);
  %30 = annotation.compiler_end(%29, compiler="test");
  %31 = annotation.compiler_end(%26, compiler="default");
  %32 = annotation.compiler_begin(%31, compiler="test");
  %33 = annotation.compiler_begin(%30, compiler="test");
  %34 = add(%32, %33);
  %35 = annotation.compiler_end(%34, compiler="test");
  %36 = annotation.compiler_begin(%in_10, compiler="test");
  %37 = annotation.compiler_begin(%35, compiler="test");
  %38 = add(%36, %37);
  annotation.compiler_end(%38, compiler="test")
}"""


def test_merge_compiler_regions_rfc_example():
    # TVM's test_example_graph (the RFC's picture): merging stops where a default region
    # sits between two test regions
    got = T.MergeCompilerRegions()(parse(RFC_EXAMPLE))
    assert_same(got, """
def @main(%in_1: Tensor[(10, 10), float32], %in_2: Tensor[(10, 10), float32],
          %in_3: Tensor[(10, 10), float32], %in_4: Tensor[(10, 10), float32],
          %in_5: Tensor[(10, 10), float32], %in_6: Tensor[(10, 10), float32],
          %in_7: Tensor[(10, 10), float32], %in_8: Tensor[(10, 10), float32],
          %in_9: Tensor[(10, 10), float32], %in_10: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%in_1, compiler="test");
  %1 = annotation.compiler_begin(%in_2, compiler="test");
  %2 = add(%0, %1);
  %3 = annotation.compiler_begin(%in_3, compiler="test");
  %4 = annotation.compiler_begin(%in_4, compiler="test");
  %5 = add(%3, %4);
  %6 = add(%2, %5);
  %7 = annotation.compiler_begin(%in_5, compiler="default");
  %8 = annotation.compiler_begin(%in_6, compiler="default");
  %9 = subtract(%7, %8);
  %10 = annotation.compiler_begin(%in_7, compiler="default");
  %11 = subtract(%10, %9);
  %12 = annotation.compiler_end(%11, compiler="default");
  %13 = annotation.compiler_begin(%12, compiler="test");
  %14 = add(%6, %13);
  %15 = annotation.compiler_end(%14, compiler="test");
  %16 = annotation.compiler_begin(%in_8, compiler="default");
  %17 = annotation.compiler_begin(%15, compiler="default");
  %18 = subtract(%16, %17);
  %19 = annotation.compiler_end(%18, compiler="default");
  %20 = annotation.compiler_begin(%19, compiler="test");
  %21 = annotation.compiler_begin(%in_9, compiler="test");
  %22 = add(%21, %14);
  %23 = annotation.compiler_end(%22, compiler="test");
  %24 = annotation.compiler_begin(%23, compiler="test");
  %25 = add(%20, %24);
  %26 = annotation.compiler_begin(%in_10, compiler="test");
  %27 = add(%26, %25);
  annotation.compiler_end(%27, compiler="test")
}""")
    assert_same_value(parse(RFC_EXAMPLE), got)


def test_merge_compiler_regions_rejects_an_end_without_a_region():
    src = """
def @main(%x: Tensor[(2), float32]) {
  %0 = abs(%x);
  annotation.compiler_end(%0, compiler="test")
}"""
    with pytest.raises(rg.RelayError, match=r"compiler_end\(compiler='test'\) closes no region"):
        T.MergeCompilerRegions()(parse(src))


# -- PartitionGraph -------------------------------------------------------------------------------
def test_partition_graph_mixed_single_and_multiple_outputs():
    # TVM's test_mixed_single_multiple_outputs: region 0 has two outputs (a tuple and
    # projections), region 1 one; the default tanh stays in main
    src = parse(DIAMOND_MERGED)
    got = T.PartitionGraph()(src)
    assert_same(got, """
def @main(%data: Tensor[(10, 10), float32]) {
  %0 = @tvmgen_default_test_main_0(%data);
  %1 = %0.1;
  %2 = %0.0;
  %3 = tanh(%1);
  @tvmgen_default_test_main_1(%2, %3)
}

def @tvmgen_default_test_main_0(%test_0_i0: Tensor[(10, 10), float32], Compiler="test",
    Inline=1, Primitive=1, global_symbol="tvmgen_default_test_main_0") {
  %4 = abs(%test_0_i0);
  %5 = nn.relu(%4);
  (%5, %4)
}

def @tvmgen_default_test_main_1(%test_1_i0: Tensor[(10, 10), float32],
    %test_1_i1: Tensor[(10, 10), float32], Compiler="test", Inline=1, Primitive=1,
    global_symbol="tvmgen_default_test_main_1") {
  add(%test_1_i0, %test_1_i1)
}""")
    assert rg.alpha_equal(rg.parse(rg.astext(got)), got)  # the partitioned module reads back
    assert_same_value(src, got)


def test_partition_graph_multiple_outputs_of_batch_norm():
    # TVM's test_multiple_outputs
    src = parse("""
def @main(%data: Tensor[(1, 3, 16, 16), float32], %weight: Tensor[(16, 3, 3, 3), float32],
          %bn_gamma: Tensor[(16), float32], %bn_beta: Tensor[(16), float32],
          %bn_mean: Tensor[(16), float32], %bn_var: Tensor[(16), float32]) {
  %0 = annotation.compiler_begin(%data, compiler="test_target");
  %1 = annotation.compiler_begin(%weight, compiler="test_target");
  %2 = nn.conv2d(%0, %1, padding=[1, 1, 1, 1], channels=16, kernel_size=[3, 3]);
  %3 = annotation.compiler_begin(%bn_gamma, compiler="test_target");
  %4 = annotation.compiler_begin(%bn_beta, compiler="test_target");
  %5 = annotation.compiler_begin(%bn_mean, compiler="test_target");
  %6 = annotation.compiler_begin(%bn_var, compiler="test_target");
  %7 = nn.batch_norm(%2, %3, %4, %5, %6);
  %8 = %7.0;
  %9 = nn.relu(%8);
  %10 = annotation.compiler_end(%9, compiler="test_target");
  %11 = %7.1;
  %12 = annotation.compiler_end(%11, compiler="test_target");
  %13 = %7.2;
  %14 = annotation.compiler_end(%13, compiler="test_target");
  %15 = abs(%12);
  %16 = abs(%14);
  (%10, %15, %16)
}""")
    got = T.PartitionGraph()(src)
    assert_same(got, """
def @main(%data: Tensor[(1, 3, 16, 16), float32], %weight: Tensor[(16, 3, 3, 3), float32],
          %bn_gamma: Tensor[(16), float32], %bn_beta: Tensor[(16), float32],
          %bn_mean: Tensor[(16), float32], %bn_var: Tensor[(16), float32]) {
  %0 = @tvmgen_default_test_target_main_0(%data, %weight, %bn_gamma, %bn_beta, %bn_mean, %bn_var);
  %1 = %0.0;
  %2 = %0.1;
  %3 = %0.2;
  %4 = abs(%2);
  %5 = abs(%3);
  (%1, %4, %5)
}

def @tvmgen_default_test_target_main_0(%test_target_0_i0: Tensor[(1, 3, 16, 16), float32],
    %test_target_0_i1: Tensor[(16, 3, 3, 3), float32], %test_target_0_i2: Tensor[(16), float32],
    %test_target_0_i3: Tensor[(16), float32], %test_target_0_i4: Tensor[(16), float32],
    %test_target_0_i5: Tensor[(16), float32], Compiler="test_target", Inline=1, Primitive=1,
    global_symbol="tvmgen_default_test_target_main_0") {
  %6 = nn.conv2d(%test_target_0_i0, %test_target_0_i1, padding=[1, 1, 1, 1], channels=16,
                 kernel_size=[3, 3]);
  %7 = nn.batch_norm(%6, %test_target_0_i2, %test_target_0_i3, %test_target_0_i4,
                     %test_target_0_i5);
  %8 = %7.0;
  %9 = nn.relu(%8);
  %10 = %7.1;
  %11 = %7.2;
  (%9, %10, %11)
}""")
    args = _random_args(src, 1)
    args[5] = np.abs(args[5])  # a variance
    want, got_v = rg.evaluate(src, *args), rg.evaluate(got, *args)
    for w, g in zip(want, got_v, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_partition_graph_binds_constants_and_sanitizes_names():
    # TVM's test_constant_propagation, with a target name that needs TVM's SanitizeName
    ones = rg.const(np.ones((8, 8), "float32"))
    y = Var("y", TensorType((8, 8)))
    body = Call(Op("exp"), (compiler_end(compiler_begin(ones, "c-compiler+") + compiler_begin(
        y, "c-compiler+"), "c-compiler+"),))
    src = rg.IRModule.from_expr(Function([y], body))
    got = T.PartitionGraph(mod_name="mymod")(src)
    name = "tvmgen_mymod_c_compiler__main_0"
    gv = got.get_global_var(name)
    region = got[gv]
    assert dict(region.attrs.items) == {"Compiler": "c-compiler+", "Inline": 1, "Primitive": 1,
                                        "global_symbol": name}
    assert [p.name_hint for p in region.params] == ["c-compiler+_0_i1"]
    assert region.body.args[0] is ones  # the constant is bound into the region
    assert rg.astext(got["main"].body).count(f"@{name}(%y)") == 1
    assert_same_value(src, got)
    unbound = T.PartitionGraph(bind_constants=False)(src)
    assert len(unbound[unbound.get_global_var("tvmgen_default_c_compiler__main_0")].params) == 2


# -- MergeComposite -------------------------------------------------------------------------------
def conv_bias_relu_pattern():
    from relaygraph.dataflow_pattern import is_op, wildcard

    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    return is_op("nn.relu")(is_op("nn.bias_add")(conv, wildcard()))


def add_relu_pattern():
    from relaygraph.dataflow_pattern import is_op, wildcard

    return is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))


MULTIPLE_PATTERNS = """
def @main(%data: Tensor[(1, 8, 6, 6), float32], %kernel: Tensor[(4, 8, 1, 1), float32],
          %bias: Tensor[(4), float32], %a: Tensor[(1, 4, 6, 6), float32],
          %b: Tensor[(1, 4, 6, 6), float32]) {
  %0 = nn.conv2d(%data, %kernel, padding=[0, 0, 0, 0], kernel_size=[1, 1]);
  %1 = nn.bias_add(%0, %bias);
  %2 = nn.relu(%1);
  %3 = add(%2, %a);
  %4 = nn.relu(%3);
  multiply(%4, %b)
}"""


def test_merge_composite_conv2d_bias_relu_and_add_relu():
    # TVM's test_multiple_patterns (smaller shapes)
    table = [("conv2d_bias_relu", conv_bias_relu_pattern()), ("add_relu", add_relu_pattern())]
    src = parse(MULTIPLE_PATTERNS)
    got = T.MergeComposite(table)(src)
    assert_same(got, """
def @main(%data: Tensor[(1, 8, 6, 6), float32], %kernel: Tensor[(4, 8, 1, 1), float32],
          %bias: Tensor[(4), float32], %a: Tensor[(1, 4, 6, 6), float32],
          %b: Tensor[(1, 4, 6, 6), float32]) {
  %2 = fn (%FunctionVar_0_0, %FunctionVar_0_1, %FunctionVar_0_2, Composite="conv2d_bias_relu",
           PartitionedFromPattern="nn.conv2d_nn.bias_add_nn.relu_") {
    %0 = nn.conv2d(%FunctionVar_0_0, %FunctionVar_0_1, padding=[0, 0, 0, 0], kernel_size=[1, 1]);
    %1 = nn.bias_add(%0, %FunctionVar_0_2);
    nn.relu(%1)
  };
  %3 = %2(%data, %kernel, %bias);
  %5 = fn (%FunctionVar_0_01, %FunctionVar_0_11, Composite="add_relu",
           PartitionedFromPattern="add_nn.relu_") {
    %4 = add(%FunctionVar_0_01, %FunctionVar_0_11);
    nn.relu(%4)
  };
  %6 = %5(%3, %a);
  multiply(%6, %b)
}""")
    assert_same_value(src, got)


def test_merge_composite_check_vetoes_a_match():
    src = parse("""
def @main(%x: Tensor[(1, 10, 10, 10), float32], %w: Tensor[(10, 10, 3, 3), float32],
          %b: Tensor[(10), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, %b);
  nn.relu(%1)
}""")

    def layout_is(layout):
        return lambda extract: extract.args[0].args[0].attrs.get("data_layout", "NCHW") == layout

    vetoed = T.MergeComposite([("conv_bias_relu", conv_bias_relu_pattern(), layout_is("NHWC"))])
    assert rg.alpha_equal(vetoed(src), rg.infer_type(src))
    merged = T.MergeComposite([("conv_bias_relu", conv_bias_relu_pattern(), layout_is("NCHW"))])(src)
    assert rg.astext(merged).count('Composite="conv_bias_relu"') == 1


def test_merge_composite_rejects_a_bad_table():
    with pytest.raises(rg.RelayError, match=r"pattern_table\[0\] must be \(name, pattern\)"):
        T.MergeComposite([("only-a-name",)])
    with pytest.raises(rg.RelayError, match="pattern 'p' is a Call, not a dataflow pattern"):
        T.MergeComposite([("p", Call(Op("abs"), (Var("x"),)))])


# -- the whole chain ------------------------------------------------------------------------------
def test_byoc_chain_on_resnet18_evaluates_equal(targets):
    from relaygraph.dataflow_pattern import is_op, is_tuple_get_item, wildcard

    mod, params = rg.zoo.resnet(18, small=True)
    bn = is_op("nn.batch_norm")(wildcard(), wildcard(), wildcard(), wildcard(), wildcard())
    table = [("byoc.bn_relu", is_op("nn.relu")(is_tuple_get_item(bn, 0))),
             ("byoc.conv2d", is_op("nn.conv2d")(wildcard(), wildcard()))]
    targets("byoc", "add")  # max_pool2d, the first batch_norm and the head stay on the host
    chain = T.Sequential([T.MergeComposite(table), T.AnnotateTarget("byoc"),
                          T.MergeCompilerRegions(), T.PartitionGraph()])
    out = chain(mod)
    regions = [gv for gv, f in out if f.attrs.get("Compiler") == "byoc"]
    # the stem (conv0 and its bn+relu) and the trunk (every unit up to the last bn+relu),
    # split by the max_pool2d between them
    assert [gv.name_hint for gv in regions] == ["tvmgen_default_byoc_main_0",
                                                "tvmgen_default_byoc_main_6"]
    text = rg.astext(out)
    assert "annotation.compiler" not in text
    source_ops = [n.op.name for n in rg.ir.traversal.post_order(mod["main"])
                  if isinstance(n, Call) and isinstance(n.op, Op)]
    assert text.count('Composite="byoc.conv2d"') == source_ops.count("nn.conv2d")
    assert text.count('Composite="byoc.bn_relu"') == source_ops.count("nn.relu")
    assert rg.astext(out["main"]).count("@tvmgen_default_byoc_main_") == 2
    main_ops = {n.op.name for n in rg.ir.traversal.post_order(out["main"])
                if isinstance(n, Call) and isinstance(n.op, Op)}
    assert main_ops == {"nn.batch_norm", "nn.max_pool2d", "nn.global_avg_pool2d",
                        "nn.batch_flatten", "nn.dense", "nn.bias_add", "nn.softmax"}
    inputs = rg.zoo.example_inputs(mod, params)
    args = [inputs[p.name_hint] if p.name_hint in inputs else params[p.name_hint]
            for p in mod["main"].params]
    want = rg.evaluate(mod, *args)
    # calls of global functions run on the interpreter, Compiler functions as ordinary Relay
    got = rg.evaluate(out, *args, executor=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("depth", [10_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_byoc_passes_on_a_deep_chain(targets, depth):
    # far deeper than Python's recursion limit: every pass walks iteratively
    targets("deep", "nn.relu")
    x = Var("x", TensorType((4,)))
    e = x
    for i in range(depth):
        e = Call(Op("nn.relu" if i % (depth // 2) else "tanh"), (e,))
    mod = rg.IRModule.from_expr(Function([x], e))
    out = T.PartitionGraph()(T.MergeCompilerRegions()(T.AnnotateTarget("deep")(mod)))
    names = sorted(gv.name_hint for gv, _ in out)
    assert names == ["main", "tvmgen_default_deep_main_0", "tvmgen_default_deep_main_1"]
    arg = np.array([-1.0, 0.5, 2.0, -3.0], "float32")
    np.testing.assert_allclose(rg.evaluate(out, arg, executor=False),
                               np.maximum(np.tanh(np.maximum(np.tanh(arg), 0)), 0), rtol=1e-6)


@pytest.mark.parametrize("non_call", [False, True])
def test_annotate_target_ends_with_a_tuple_get_item(targets, non_call):
    # TVM's test_ends_with_tuple (with the projection)
    targets("clip", "clip")
    src = parse("""
def @main(%a: Tensor[(1, 16, 16, 4), uint8]) {
  %0 = clip(%a, a_min=0f, a_max=255f);
  %1 = clip(%0, a_min=0f, a_max=15f);
  %2 = clip(%0, a_min=16f, a_max=31f);
  %3 = (%2, %1);
  %3.1
}""")
    got = T.AnnotateTarget("clip", non_call)(src)
    if non_call:
        tail = """
  %6 = annotation.compiler_begin(%5, compiler="clip");
  %9 = annotation.compiler_begin(%8, compiler="clip");
  %10 = (%9, %6);
  %11 = annotation.compiler_end(%10, compiler="clip");
  %12 = annotation.compiler_begin(%11, compiler="clip");
  %13 = %12.1;
  annotation.compiler_end(%13, compiler="clip")"""
    else:
        tail = """
  %10 = (%8, %5);
  %10.1"""
    assert_same(got, """
def @main(%a: Tensor[(1, 16, 16, 4), uint8]) {
  %0 = annotation.compiler_begin(%a, compiler="clip");
  %1 = clip(%0, a_min=0f, a_max=255f);
  %2 = annotation.compiler_end(%1, compiler="clip");
  %3 = annotation.compiler_begin(%2, compiler="clip");
  %4 = clip(%3, a_min=0f, a_max=15f);
  %5 = annotation.compiler_end(%4, compiler="clip");
  %7 = clip(%3, a_min=16f, a_max=31f);
  %8 = annotation.compiler_end(%7, compiler="clip");""" + tail + "\n}")
    out = T.PartitionGraph()(T.MergeCompilerRegions()(got))
    assert_same_value(src, out)
