"""Rewrite rules: the rule language (``.rules`` files in Relay syntax, ``.egg`` files in egglog's),
and the soundness checker. Rules are plain data; ``relaygraph.egraph.rule_compiler`` compiles them
to egglog.

``load_rules(path)`` reads a rule file or a directory of them and returns Rule objects (see
``relaygraph.rewrite.rule`` for the interface the e-graph bridge uses); ``check_rules`` (in
``relaygraph.rewrite.soundness``) evaluates both sides of every rule on random inputs.
"""

from .load import load_rules, parse_rules, rule_files
from .rule import AnalysisRule, EggRule, PythonRewrite, Rule

__all__ = ["load_rules", "parse_rules", "rule_files", "Rule", "EggRule", "AnalysisRule",
           "PythonRewrite"]
