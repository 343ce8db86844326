"""Rule objects: one direction of a rewrite as plain data, with a Python part if needed.

What a rule holds: ``name``, ``ruleset``, the patterns of its sides (``lhs``, ``rhs``), its
condition and computed attributes (``relaygraph.rewrite.cond``), its source (``text``,
``span``), and the split of its condition: ``native_facts`` (what the e-graph tests itself,
``relaygraph.rewrite.native``), ``native_values`` (the computed attributes the e-graph looks
up, when it can look up all of them) and ``residue`` (the conjuncts left to Python). The
e-graph's rule compiler (``relaygraph.egraph.rule_compiler``) turns rules into egglog.

``rule.python_rewrite`` is None when the e-graph does everything; else a ``PythonRewrite``
whose ``relation`` collects the matches (one column per name in ``variables``, each an
e-class) and whose ``apply(bindings, graph)`` returns ``(root class, new expression)`` pairs
to union.

A ``<=>`` rule gives two objects: ``name`` (left to right) and ``name<=`` (right to left); the
second is left out when it is the first with its variables renamed (``add(?a, ?b) <=> add(?b, ?a)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Span
from ..ir.expr import Expr, Var
from ..ir.types import Type, format_type
from .build import BuildEnv, BuildError, build
from .cond import UNKNOWN, EvalEnv, Expression, Kinds, evaluate
from .pattern import PVar, children, prebuilt_parts

__all__ = ["Rule", "PythonRewrite", "EggRule", "AnalysisRule", "root_names"]


def root_names(n: int, multi: bool) -> list[str]:
    """The names of the matched roots: ``root``, or ``root0``, ``root1``, ... for multi-patterns."""
    return [f"root{i}" for i in range(n)] if multi else ["root"]


@dataclass(eq=False)
class Rule:
    """One direction of a rule from a ``.rules`` file."""

    name: str
    ruleset: str
    lhs: tuple  # the roots' patterns
    rhs: tuple  # their replacements
    cond: Expression | None
    computed: list[Expression]
    kinds: Kinds
    text: str = ""  # the rule statement as written
    span: Span | None = None
    multi: bool = False
    uses_scoping: bool = False
    python_rewrite: PythonRewrite | None = field(default=None, init=False)
    native_facts: list = field(default_factory=list, init=False)
    native_values: list = field(default_factory=list, init=False)
    residue: list = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.cond is not None:
            self.native_facts, self.residue = self.cond.split()
        # computed attributes the e-graph can look up in a table: all of them, or Python does
        values = [e.native_value() for e in self.computed]
        self.native_values = values if all(v is not None for v in values) else []
        if self.residue or len(self.native_values) < len(self.computed):
            self.python_rewrite = PythonRewrite(self)

    @property
    def roots(self) -> list[str]:
        """The names the matched roots are bound to."""
        return root_names(len(self.lhs), self.multi)

    def __repr__(self) -> str:
        kind = "python" if self.python_rewrite is not None else "egglog"
        return f"<Rule {self.name} [{self.ruleset}, {kind}]>"


class PythonRewrite:
    """The Python half of a rule whose right side needs computed values or Python conditions.

    ``relation`` rows are matches: the e-classes bound to ``variables`` (the roots, the class
    variables the right side uses, and sub-terms egglog built because they use attribute
    variables), in that order. ``apply(bindings, graph)`` takes ``{variable: class handle}`` and
    a graph offering ``type_of(handle) -> Type``; it returns ``(root handle, expression)`` pairs
    whose leaves are the Vars in ``leaf_vars`` (named as the variables; ``leaves(bindings)``
    maps them to handles). A match whose condition fails, whose computed values are unknown
    (symbolic shapes) or whose new expression would change the type gives no pairs; so does a
    multi-pattern match whose roots' handles are not increasing (each set of roots is merged
    once, not once per order).
    """

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        safe = rule.name.replace("<=", "-rev")
        self.relation = f"rw/{rule.ruleset}/{safe}"
        self.prebuilt: list[tuple[str, object]] = []
        names: dict[object, str] = {}  # equal parts are built once
        self._prebuilt_ids: dict[int, str] = {}
        for p in rule.rhs:
            for part in prebuilt_parts(p):
                if part not in names:
                    names[part] = f"__b{len(names) + 1}"
                    self.prebuilt.append((names[part], part))
                self._prebuilt_ids[id(part)] = names[part]
        used = []
        for p in rule.rhs:
            stack = [p]
            while stack:  # the variables outside the parts egglog builds
                n = stack.pop()
                if id(n) in self._prebuilt_ids:
                    continue
                if isinstance(n, PVar) and n.name not in used:
                    used.append(n.name)
                stack.extend(reversed(children(n)))
        for e in [*rule.computed, *([rule.cond] if rule.cond is not None else [])]:
            for v in sorted(e.variables()):
                if v in rule.kinds.classes and v not in used:
                    used.append(v)
        roots = rule.roots
        self.typed = roots + [v for v in used if v not in roots]
        self.variables = self.typed + [name for name, _ in self.prebuilt]
        self.leaf_vars = {v: Var(v) for v in self.variables}

    def leaves(self, bindings: dict[str, int]) -> dict[Var, int]:
        """The class handle of each leaf Var of the expressions ``apply`` returns."""
        return {var: bindings[name] for name, var in self.leaf_vars.items() if name in bindings}

    def apply(self, bindings: dict[str, int], graph) -> list[tuple[int, Expr]]:
        """The (root class, new expression) pairs of one match (empty when it does not apply)."""
        return self.build(bindings, graph, check_types=True)

    def build(self, bindings: dict[str, int], graph, check_types: bool) -> list[tuple[int, Expr]]:
        """``apply``, optionally without comparing the new expressions' types with the roots'."""
        rule = self.rule
        handles = [bindings[r] for r in rule.roots]
        if handles != sorted(handles):
            return []  # a multi-pattern match is used once per set of roots, in handle order
        types: dict[str, Type | None] = {}

        def type_of(name: str):
            if name not in types:
                types[name] = graph.type_of(bindings[name]) if name in bindings else None
            return types[name]

        env = EvalEnv(type_of, _no_attr)
        if not all(evaluate(part, env) is True for part in rule.residue):
            return []
        values = []
        for e in rule.computed:
            v = e.evaluate(env)
            if not _concrete(v):
                return []
            values.append(v)
        prebuilt = {k: self.leaf_vars[name] for k, name in self._prebuilt_ids.items()}
        benv = BuildEnv(leaf=lambda n: self.leaf_vars[n], computed=values.__getitem__,
                        prebuilt=prebuilt)
        try:
            exprs = [build(p, benv) for p in rule.rhs]
        except BuildError:
            return []
        if check_types and not self.prebuilt and not _same_types(rule, exprs, self.leaf_vars,
                                                                 type_of):
            return []
        return [(bindings[r], e) for r, e in zip(rule.roots, exprs, strict=True)]


def _no_attr(name: str):
    raise AssertionError(f"attribute variable ?{name} reached Python")


def _concrete(v) -> bool:
    if v is UNKNOWN:
        return False
    if isinstance(v, tuple):
        return all(_concrete(x) for x in v)
    return isinstance(v, (int, float, str, bool)) or v is None


def _same_types(rule: Rule, exprs: list[Expr], leaf_vars: dict, type_of) -> bool:
    """Whether the new expressions, typed from the leaves' types, have the roots' types."""
    from ..ir.traversal import substitute
    from ..ty import infer_type_expr

    mapping = {}
    for name, var in leaf_vars.items():
        t = type_of(name)
        if t is None:
            return True  # an untyped leaf: nothing to compare against here
        mapping[var] = Var(name, t)
    for root, e in zip(rule.roots, exprs, strict=True):
        want = type_of(root)
        try:
            typed, checked = infer_type_expr(substitute(e, mapping), with_types=True)
            got = checked.type_of(typed)
        except Exception:  # noqa: BLE001 - a right side that does not type-check is not applied
            return False
        if want is not None and format_type(got) != format_type(want):
            return False
    return True


@dataclass(eq=False)
class EggRule:
    """One rule command from an ``.egg`` file (egglog's own language)."""

    name: str
    ruleset: str
    command: str  # the rule command, as written
    decls: list[str]  # the file's declarations (rulesets, sorts, functions, relations) up to it
    span: Span | None = None
    text: str = ""
    python_rewrite: None = None
    lhs: None = None

    def __repr__(self) -> str:
        return f"<EggRule {self.name} [{self.ruleset}]>"


@dataclass(eq=False)
class AnalysisRule:
    """The helper rules that compute what ``free``, ``once`` and ``subst`` read (free variables,
    single uses, explicit substitution; see ``relaygraph.egraph.scoping``), as one rule object.

    ``load_rules`` puts it before the first rule of a ruleset that needs it; a selection of
    rules that keeps such a rule must keep its analysis too (``name``: ``<ruleset>-scoping``).
    """

    ruleset: str
    span: Span | None = None
    text: str = "free variables, single uses and substitution (generated from the op table)"
    python_rewrite: None = None
    lhs: None = None

    @property
    def name(self) -> str:
        """``<ruleset>-scoping``."""
        return f"{self.ruleset}-scoping"

    def __repr__(self) -> str:
        return f"<AnalysisRule {self.name}>"
