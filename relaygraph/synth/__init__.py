"""Rule-set authoring: synthesize rules from enumerated terms, find redundant rules, derive
equalities (``rg.rules``).

    result = rg.rules.synthesize(["add", "multiply"], size=2)    # relaygraph.synth.synthesize
    result.write("mine.rules")
    rg.rules.redundant(rg.load_rules("rules/"))                  # relaygraph.synth.derive
    rg.rules.derive(rules, lhs_expr, rhs_expr)
    rg.rules.explain(rg.optimize(mod, explain=True))             # relaygraph.synth.explain
"""

from __future__ import annotations

from ..rewrite import load_rules
from ..rewrite.soundness import check_rules
from .derive import Derivation, format_derivation, prove, redundant_rules, rule_derivation
from .explain import Explanation, explain
from .synthesize import MAX_TERMS, SynthesisResult, SynthRule, synthesize

derive = prove
redundant = redundant_rules

__all__ = ["synthesize", "SynthesisResult", "SynthRule", "MAX_TERMS", "Derivation", "prove", "derive",
           "redundant", "redundant_rules", "rule_derivation", "format_derivation", "load_rules",
           "check_rules", "explain", "Explanation"]
