"""Passes with TVM's semantics (``rg.transform``): the infrastructure and one module per pass.

Pipelines can be written as text, ``"ToANormalForm,DeadCodeElimination(inline-once=true)"``,
and run with ``parse_pipeline(text)``.
"""

from __future__ import annotations

from .anf import ToANormalForm, ToBasicBlockNormalForm, to_a_normal_form, to_basic_block_normal_form
from .annotate_target import (
    AnnotateTarget,
    annotate_target,
    register_target_op,
    target_ops,
    unregister_target_op,
)
from .canonicalize_ops import CanonicalizeOps, canonicalize_ops
from .combine_parallel import (
    CombineParallelBatchMatmul,
    CombineParallelConv2D,
    CombineParallelDense,
    CombineParallelOpBatch,
    combine_parallel,
)
from .cse import EliminateCommonSubexpr, eliminate_common_subexpr
from .dce import DeadCodeElimination, dead_code_elimination
from .fold_constant import FoldConstant, fold_constant
from .fold_scale_axis import BackwardFoldScaleAxis, FoldScaleAxis, ForwardFoldScaleAxis, fold_scale_axis
from .fuse_ops import FuseOps, fuse_ops
from .gnf import ToGraphNormalForm, to_graph_normal_form
from .infer import InferType
from .infra import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassError,
    PassInfo,
    PassInstrument,
    Sequential,
    function_pass,
    get_pass,
    list_passes,
    module_pass,
    register_config,
    register_pass,
)
from .inline import DefuseOps, Inline, RemoveUnusedFunctions, defuse_ops
from .instruments import PassPrintingInstrument, PassTimingInstrument
from .lambda_lift import LambdaLift
from .merge_compiler_regions import MergeCompilerRegions, merge_compiler_regions
from .merge_composite import MergeComposite, merge_composite
from .partition_graph import PartitionGraph, partition_graph
from .pipeline import TVM_BUILD_SEQUENCE, named_pipeline, parse_pipeline, tvm_pipeline
from .simplify_expr import SimplifyExpr, simplify_expr
from .simplify_inference import SimplifyInference, simplify_inference

register_pass("InferType", InferType)
register_pass("ToANormalForm", ToANormalForm)
register_pass("ToBasicBlockNormalForm", ToBasicBlockNormalForm)
register_pass("ToGraphNormalForm", ToGraphNormalForm)
register_pass("DeadCodeElimination", DeadCodeElimination, **{"inline-once": False})
register_pass("EliminateCommonSubexpr", EliminateCommonSubexpr)
register_pass("Inline", Inline)
register_pass("RemoveUnusedFunctions", RemoveUnusedFunctions, **{"entry-functions": ("main",)})
register_pass("DefuseOps", DefuseOps)
register_pass("LambdaLift", LambdaLift)
register_pass("FuseOps", FuseOps, **{"fuse-opt-level": -1})
register_pass("FoldConstant", FoldConstant)
register_pass("SimplifyExpr", SimplifyExpr)
register_pass("SimplifyInference", SimplifyInference)
register_pass("CanonicalizeOps", CanonicalizeOps)
register_pass("FoldScaleAxis", FoldScaleAxis)
register_pass("ForwardFoldScaleAxis", ForwardFoldScaleAxis)
register_pass("BackwardFoldScaleAxis", BackwardFoldScaleAxis)
register_pass("CombineParallelConv2D", CombineParallelConv2D, **{"min-num-branches": 3})
register_pass("CombineParallelDense", CombineParallelDense, **{"min-num-branches": 3, "to-batch": True})
register_pass("CombineParallelBatchMatmul", CombineParallelBatchMatmul, **{"min-num-branches": 3})
register_pass("AnnotateTarget", AnnotateTarget, **{"targets": (), "include-non-call-ops": True})
register_pass("MergeCompilerRegions", MergeCompilerRegions)
register_pass("PartitionGraph", PartitionGraph, **{"mod-name": "default", "bind-constants": True})

__all__ = [
    "AnnotateTarget", "MergeComposite", "MergeCompilerRegions", "PartitionGraph", "annotate_target",
    "merge_composite", "merge_compiler_regions", "partition_graph", "register_target_op", "target_ops",
    "unregister_target_op",
    "FoldConstant", "SimplifyExpr", "SimplifyInference", "fold_constant", "simplify_expr",
    "simplify_inference",
    "DeadCodeElimination", "DefuseOps", "EliminateCommonSubexpr", "FunctionPass", "FuseOps",
    "InferType", "Inline", "LambdaLift", "ModulePass", "Pass", "PassContext", "PassError",
    "PassInfo", "PassInstrument", "PassPrintingInstrument", "PassTimingInstrument",
    "RemoveUnusedFunctions", "Sequential", "ToANormalForm", "ToBasicBlockNormalForm",
    "ToGraphNormalForm", "dead_code_elimination", "defuse_ops", "eliminate_common_subexpr",
    "function_pass", "fuse_ops", "get_pass", "list_passes", "module_pass", "parse_pipeline",
    "register_config", "register_pass", "to_a_normal_form", "to_basic_block_normal_form",
    "to_graph_normal_form",
    "BackwardFoldScaleAxis", "CanonicalizeOps", "CombineParallelBatchMatmul", "CombineParallelConv2D",
    "CombineParallelDense", "CombineParallelOpBatch", "FoldScaleAxis", "ForwardFoldScaleAxis",
    "TVM_BUILD_SEQUENCE", "canonicalize_ops", "combine_parallel", "fold_scale_axis", "named_pipeline",
    "tvm_pipeline",
]
