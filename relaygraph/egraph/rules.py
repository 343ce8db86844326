"""Rules as saturation sees them: egglog text in rulesets of their own, and their Python halves.

A rule is an object from ``relaygraph.rewrite`` (compiled by ``relaygraph.egraph.rule_compiler``),
an object of one's own offering ``.name``, ``.declarations()``, ``.commands()`` and
``.python_rewrite`` (None, or an object with ``relation``, ``variables`` and ``apply``), or plain
egglog text (declarations, and ``rewrite``,
``birewrite`` and ``rule`` commands, each becoming a rule of its own). Every rule's commands
are moved into a ruleset of their own (``rg-rule-<i>``) so that the scheduler can hold back
one rule without the others; egglog reports matches under the commands' ``:name``, which
``RuleSpec.report_names`` maps back to the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import RelayError, RuleError

__all__ = ["RuleSpec", "prepare_rules", "install_rules"]

_RULE_HEADS = ("rewrite", "birewrite", "rule")


@dataclass
class RuleSpec:
    """One rule ready to install: its own ruleset, declarations, commands, Python half."""

    name: str
    ruleset: str
    declarations: list[str]
    commands: list[str]
    relation: str | None = None  # the match relation of a Python rewrite
    variables: list[str] = field(default_factory=list)
    report_names: set[str] = field(default_factory=set)
    # the Relay constants its right side writes, until install_rules makes them known to the e-graph
    constants: list = field(default_factory=list)
    # its commands type the classes they make (rule_compiler.keeps_type; chosen by prepare_rules
    # when every rule's can): saturation runs no typing rules after them
    typed_in_actions: bool = False


def prepare_rules(rules) -> tuple[list[RuleSpec], dict[str, object]]:
    """RuleSpecs for rule objects and egglog text, and each Python rewrite by rule name."""
    from ..rewrite.pattern import PConst, walk
    from ..rewrite.rule import AnalysisRule, EggRule, Rule
    from .rule_compiler import compile_rule, keeps_type

    ours = (Rule, EggRule, AnalysisRule)
    if isinstance(rules, (str, *ours)) or hasattr(rules, "commands"):
        rules = [rules]
    specs: list[RuleSpec] = []
    python: dict[str, object] = {}
    typed: dict[int, object] = {}  # spec index -> its rule, when it keeps types (keeps_type)
    for rule in rules:
        if isinstance(rule, str):
            specs.extend(_text_rules(rule, len(specs)))
            continue
        if isinstance(rule, ours):
            compiled = compile_rule(rule)
            decls, commands = compiled.declarations, compiled.commands
            if keeps_type(rule):
                typed[len(specs)] = rule
        elif hasattr(rule, "commands") and hasattr(rule, "name"):
            decls, commands = list(rule.declarations()), list(rule.commands())
        else:
            raise RuleError(f"saturate: expected rule objects or egglog text, got {type(rule).__name__}")
        name = str(rule.name)
        spec = RuleSpec(name, f"rg-rule-{len(specs)}", decls, commands)
        if isinstance(rule, Rule):
            spec.constants = [p.value for side in rule.rhs for p in walk(side) if isinstance(p, PConst)]
        rewrite = getattr(rule, "python_rewrite", None)
        if rewrite is not None:
            spec.relation, spec.variables = rewrite.relation, list(rewrite.variables)
            python[name] = rewrite
        specs.append(spec)
    # Rules that keep types by construction type what they make in their own actions when all the
    # rules do (saturation then runs no typing rules); among others, which the typing rules run
    # after anyway, typing it in the actions too would only do that work twice.
    if typed and not python and all(i in typed for i, s in enumerate(specs) if s.commands):
        for i, rule in typed.items():
            specs[i].commands = compile_rule(rule, typed_actions=True).commands
            specs[i].typed_in_actions = True
    names = [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise RuleError(f"two rules are named {dup!r}; rule names must be unique")
    return specs, python


def _text_rules(text: str, first: int) -> list[RuleSpec]:
    from ..rewrite.egg import read_sexprs
    from ..rewrite.syntax import SourceFile

    commands = [(body, tokens[0] if tokens else "")
                for body, _, tokens in read_sexprs(SourceFile("<egglog text>", text))]
    decls = [c for c, head in commands if head not in _RULE_HEADS]
    bad = [c for c, head in commands if head in ("run", "run-schedule", "check", "extract", "push", "pop")]
    if bad:
        raise RuleError(f"egglog rule text may only declare and define rules; found {bad[0][:60]!r}")
    rules = [c for c, head in commands if head in _RULE_HEADS]
    out = []
    for i, command in enumerate(rules):
        name = _declared_name(command) or " ".join(command.split())
        out.append(RuleSpec(name, f"rg-rule-{first + i}", decls if i == 0 else [], [command]))
    if not rules and decls:
        out.append(RuleSpec(f"declarations-{first}", f"rg-rule-{first}", decls, []))
    return out


def _declared_name(command: str) -> str | None:
    marker = command.find(':name "')
    if marker < 0:
        return None
    start = marker + len(':name "')
    end = command.find('"', start)
    return command[start:end] if end > start else None


_CTOR_TOKEN = re.compile(r"\((r:[A-Za-z0-9_.]+|R[A-Z][A-Za-z]*)(?=[\s()])")


def mentioned_constructors(texts) -> set[str]:
    """The Relay constructors egglog text names (so their typing rules exist before it runs)."""
    from .backend import constructor_fields

    out: set[str] = set()
    for text in texts:
        for name in _CTOR_TOKEN.findall(text):
            try:
                constructor_fields(name)
            except RelayError:
                continue  # not one of ours (a sort, or an unknown op the rule compiler reports)
            out.add(name)
    if out & {"RTuple", "RCall"}:
        out.add("RCons")
    return out


def install_rules(egraph, specs: list[RuleSpec]) -> None:
    """Declare and define the rules in the e-graph (recorded in its journal), once each."""
    from .backend import EgglogError

    ctors = mentioned_constructors(t for s in specs for t in (*s.declarations, *s.commands))
    if ctors:
        egraph.declare_constructors(ctors)
    declared = egraph.declared
    for spec in specs:
        # A rule installed before in this e-graph (a cell run again) keeps its ruleset; any other
        # gets a ruleset of its own (rulesets are never shared, or an old rule would run again).
        rule_key = (spec.name, tuple(spec.declarations), tuple(spec.commands))
        done = egraph.installed.get(rule_key)
        if done is not None:
            spec.ruleset, spec.report_names = done[0], set(done[1])
            spec.constants = []  # known to the e-graph since the rule was first installed
            continue
        if any(k[0] == spec.name for k in egraph.installed):
            raise RuleError(f"rule {spec.name}: a different rule of that name was already run on this "
                            f"e-graph; rename the rule or load the program into a new e-graph")
        spec.ruleset = f"rg-rule-{len(egraph.installed)}"
        egraph.add_constants(spec.constants)
        spec.constants = []  # in the e-graph's journal now, which a worker rebuilds it from
        try:
            for decl in spec.declarations:
                key = " ".join(decl.split())
                if key not in declared:
                    egraph.record_egglog(decl)
                    declared.add(key)
            if spec.ruleset not in declared:
                egraph.record_egglog(f"(ruleset {spec.ruleset})")
                declared.add(spec.ruleset)
            for command in spec.commands:
                spec.report_names |= egraph.record_egglog(command, spec.ruleset, spec.name)
        except EgglogError as exc:
            detail = " ".join(exc.detail.split()) or str(exc)
            raise RuleError(f"rule {spec.name}: egglog refused it: {detail}") from None
        egraph.installed[rule_key] = (spec.ruleset, frozenset(spec.report_names))
