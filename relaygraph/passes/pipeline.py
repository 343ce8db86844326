"""Pass pipelines written as text: ``"FoldConstant,FuseOps(fuse-opt-level=0)"``."""

from __future__ import annotations

import re

from .infra import PassError, Sequential, get_pass

__all__ = ["parse_pipeline", "option_value", "tvm_pipeline", "named_pipeline", "TVM_BUILD_SEQUENCE"]

_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^()]*)\))?\s*(?:,|$)")


def option_value(text: str):
    """A literal option value from text: true/false, an int, a float, else the (unquoted) string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("\"'")


def parse_pipeline(text: str, opt_level: int = 0) -> Sequential:
    """A Sequential of the named passes, each with optional ``(key=value, ...)`` options."""
    passes, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise PassError(f"bad pass pipeline at column {pos + 1}: {text[pos:]!r} "
                            f"(expected Name or Name(option=value, ...))")
        options = {}
        for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
            if "=" not in part:
                raise PassError(f"pass {m.group(1)}: option {part!r} needs a value (name=value)")
            key, val = part.split("=", 1)
            options[key.strip()] = option_value(val.strip())
        passes.append(get_pass(m.group(1), **options))
        pos = m.end()
    if not passes:
        raise PassError("empty pass pipeline")
    return Sequential(passes, opt_level=opt_level, name="pipeline")


# -- TVM's build sequence -------------------------------------------------------------------------
# The Relay passes TVM v0.13's graph-executor build runs (relay/backend/utils.cc GetPassPrefix,
# then FuseOps), in its order, each with its own opt_level. Not reproduced, because they do
# nothing here: Legalize (target-specific), CanonicalizeCast (int8 casts), FlattenAtrousConv (no
# space_to_batch patterns), AlterOpLayout and SimplifyExprPostAlterOp (need a target's schedules),
# PlanDevices (one device); FastMath is opt_level 4.
TVM_BUILD_SEQUENCE = (
    "RemoveUnusedFunctions", "ToBasicBlockNormalForm", "SimplifyInference", "EliminateCommonSubexpr",
    "CombineParallelConv2D", "CombineParallelDense", "CombineParallelBatchMatmul", "FoldConstant",
    "FoldScaleAxis", "SimplifyExpr", "CanonicalizeOps", "FoldConstant", "FuseOps",
)


def tvm_pipeline(opt_level: int = 3):
    """TVM's build sequence as one pass, run at ``opt_level`` (its opt_level-3 build by default:
    the CombineParallel passes are opt_level 4 and so do not run)."""
    from .infra import PassContext, module_pass

    if isinstance(opt_level, bool) or not isinstance(opt_level, int) or opt_level < 0:
        raise PassError(f"tvm_pipeline: opt_level must be an int >= 0, got {opt_level!r}")
    seq = Sequential([get_pass(name) for name in TVM_BUILD_SEQUENCE], name=f"tvm-o{opt_level}")

    def run(mod, ctx):
        outer = PassContext.current()
        with PassContext(opt_level=opt_level, config=outer.config, required_pass=outer.required_pass,
                         disabled_pass=outer.disabled_pass):
            return seq(mod)

    return module_pass(run, opt_level=0, name=f"tvm-o{opt_level}")


NAMED_PIPELINES = {"tvm-o3": lambda: tvm_pipeline(3), "tvm-o4": lambda: tvm_pipeline(4)}


def named_pipeline(name: str):
    """A named pipeline (``tvm-o3``: TVM's opt_level-3 build; ``tvm-o4``: with CombineParallel*)."""
    try:
        return NAMED_PIPELINES[name]()
    except KeyError:
        raise PassError(f"unknown pipeline {name!r}; known: {', '.join(NAMED_PIPELINES)}") from None
