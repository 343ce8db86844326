"""Rules -> egglog text in relaygraph's Relay encoding (``relaygraph.egraph.encoding``).

The one place rule objects of ``relaygraph.rewrite`` (plain data: patterns, conditions, names)
become egglog. ``compile_rule(rule)`` gives a ``CompiledRule``:

- ``declarations``: commands to run once before saturation (the ruleset, match relations,
  attribute tables, the let analyses' sorts). Several rules give some of the same commands:
  run each distinct command once, in first-seen order (``program`` does).
- ``commands``: the egglog ``rule`` command(s), with ``:ruleset`` and ``:name``.
- ``typed_in_actions``: compiled with ``typed_actions=True`` (as saturation compiles the rules of
  a run that all keep types), a rule whose right side keeps its left side's type by construction
  (``keeps_type``) types the classes it makes in its own actions: each new inner term's ``Ty``
  is unioned with its signature there, as the typing rules would do in a run of their own after
  the rules, and its root, whose type is the matched class's, is not typed again. Saturation then
  runs no typing rules. The commands name ``Sig:<ctor>`` (the bridge declares it with the
  constructor); plain egglog without the bridge's typing machinery takes the untyped commands.

A left side becomes query facts ``(= ?root <term>)``: a pattern variable is the egglog
variable ``?name`` (an e-class; attribute variables are ``String`` variables), an attribute
written out is its ``attr_key`` String, an omitted one is ``_``. A right side becomes a term
built in the rule's actions, omitted attributes taking the op's default. The native part of a
condition (``relaygraph.rewrite.native``) becomes query facts over the encoding's
``rank``/``dim``/``dtype`` functions, attribute Strings and the let analyses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..ops.registry import REQUIRED, lookup
from ..rewrite.attr_functions import MAX_RANK, compose_axes
from ..rewrite.native import (
    ArithTerm,
    AttrTerm,
    CmpFact,
    DimTerm,
    DtypeTerm,
    FunctionValue,
    IntTerm,
    LeafFact,
    NegTerm,
    NotFreeFact,
    OnceFact,
    PositiveFact,
    RankTerm,
    RelationFact,
    StrTerm,
    VarTerm,
)
from ..rewrite.pattern import (
    ALit,
    AVar,
    PBinder,
    PCall,
    PConst,
    PIf,
    PLet,
    PProj,
    PSubst,
    PTuple,
    PVar,
    canonical_attr_value,
    walk,
)
from ..rewrite.rule import AnalysisRule, EggRule, Rule
from .encoding import LEAF, POSITIVE, attr_key, const_key, op_constructor
from .scoping import scoping_declarations, scoping_rules

__all__ = ["CompiledRule", "compile_rule", "keeps_type", "program", "lhs_term", "rhs_term", "egg_list",
           "egg_str", "ATTR_TABLES"]

EGG_CMP = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True)
class CompiledRule:
    """A rule as egglog commands."""

    declarations: list[str]
    commands: list[str]
    typed_in_actions: bool = False


def egg_str(text: str) -> str:
    """An egglog string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def egg_list(items: list[str]) -> str:
    """A cons list of egglog terms."""
    out = "(RNil)"
    for item in reversed(items):
        out = f"(RCons {item} {out})"
    return out


# -- attribute functions: egglog tables over a finite domain --------------------------------------

def _compose_table() -> list[str]:
    out = ["(function axes-compose (String String) String :no-merge)"]
    for r in range(1, MAX_RANK + 1):
        perms = list(itertools.permutations(range(r)))
        for p in perms:
            for q in perms:
                out.append(f"(set (axes-compose {egg_str(attr_key(p))} {egg_str(attr_key(q))}) "
                           f"{egg_str(attr_key(compose_axes(p, q)))})")
    return out


def _identity_table() -> list[str]:
    out = ["(relation axes-identity (String))"]
    out += [f"(axes-identity {egg_str(attr_key(tuple(range(r))))})" for r in range(1, MAX_RANK + 1)]
    return out


# attribute function -> (egglog function or relation name, its table)
ATTR_TABLES = {"compose_axes": ("axes-compose", _compose_table),
               "identity_axes": ("axes-identity", _identity_table)}


# -- patterns -------------------------------------------------------------------------------------

def _var(name: str) -> str:
    return "_" if name.startswith("_") else "?" + name


def lhs_term(p) -> str:
    """The egglog query term of a left-side pattern."""
    if isinstance(p, PVar):
        return _var(p.name)
    if isinstance(p, PBinder):
        return f"(RVar ?{p.name})"
    if isinstance(p, PConst):
        return f"(RConst {egg_str(const_key(p.value))})"
    if isinstance(p, PTuple):
        return f"(RTuple {egg_list([lhs_term(f) for f in p.fields])})"
    if isinstance(p, PProj):
        return f"(RProj {lhs_term(p.value)} {p.index})"
    if isinstance(p, PLet):
        return f"(RLet ?{p.binder} {lhs_term(p.value)} {lhs_term(p.body)})"
    if isinstance(p, PIf):
        return f"(RIf {lhs_term(p.cond)} {lhs_term(p.then)} {lhs_term(p.other)})"
    if isinstance(p, PCall):
        op = lookup(p.op)
        parts = [lhs_term(a) for a in p.args]
        for name in op.attrs:
            spec = p.attr(name)
            if spec is None:
                parts.append("_")
            elif isinstance(spec, ALit):
                parts.append(egg_str(attr_key(spec.value)))
            elif isinstance(spec, AVar):
                parts.append(_var(spec.name))
            else:
                raise AssertionError("computed attributes are refused on the left side")
        return f"({op_constructor(op)}{''.join(' ' + x for x in parts)})"
    raise AssertionError(f"not a left-side pattern: {p!r}")


def _rhs_default_attrs(op) -> dict:
    """The values an omitted right-side attribute takes (REQUIRED ones: the Python default)."""
    full = {}
    for name, default in op.attrs.items():
        if default is REQUIRED:
            if name in op.py_defaults:
                full[name] = op.py_defaults[name]
        else:
            full[name] = default
    return full


def _default_key(op, name: str) -> str:
    return attr_key(canonical_attr_value(op, name, _rhs_default_attrs(op)[name]))


def rhs_term(p, prebuilt: dict | None = None, computed: dict | None = None) -> str:
    """The egglog term that builds a right-side pattern. ``prebuilt`` maps id(sub-pattern) to a
    name already bound in the actions; ``computed`` maps a computed attribute's index to the
    query variable holding its value."""
    return _Rhs(prebuilt or {}, computed or {}).term(p)


class _Rhs:
    def __init__(self, prebuilt: dict, computed: dict) -> None:
        self.prebuilt, self.computed = prebuilt, computed

    def term(self, p) -> str:
        t = self.term
        if id(p) in self.prebuilt:
            return self.prebuilt[id(p)]
        if isinstance(p, PVar):
            return "?" + p.name
        if isinstance(p, PBinder):
            return f"(RVar ?{p.name})"
        if isinstance(p, PConst):
            return f"(RConst {egg_str(const_key(p.value))})"
        if isinstance(p, PTuple):
            return f"(RTuple {egg_list([t(f) for f in p.fields])})"
        if isinstance(p, PProj):
            return f"(RProj {t(p.value)} {p.index})"
        if isinstance(p, PLet):
            return f"(RLet ?{p.binder} {t(p.value)} {t(p.body)})"
        if isinstance(p, PIf):
            return f"(RIf {t(p.cond)} {t(p.then)} {t(p.other)})"
        if isinstance(p, PSubst):
            return f"(Subst {t(p.body)} ?{p.binder} {t(p.value)})"
        if isinstance(p, PCall):
            return self.call(p)
        raise AssertionError(f"not a right-side pattern: {p!r}")

    def call(self, p: PCall) -> str:
        op = lookup(p.op)
        parts = [self.term(a) for a in p.args] + self.attr_parts(p)
        return f"({op_constructor(op)}{''.join(' ' + x for x in parts)})"

    def attr_parts(self, p: PCall) -> list[str]:
        """The call's attribute fields, in the op's order."""
        op = lookup(p.op)
        parts = []
        for name in op.attrs:
            spec = p.attr(name)
            if spec is None:
                parts.append(egg_str(_default_key(op, name)))
            elif isinstance(spec, ALit):
                parts.append(egg_str(attr_key(spec.value)))
            elif isinstance(spec, AVar):
                parts.append("?" + spec.name)
            elif spec.index in self.computed:
                parts.append(self.computed[spec.index])
            else:
                raise AssertionError("a computed attribute has no egglog term")
        return parts


# -- the native part of conditions ----------------------------------------------------------------

class _Facts:
    """Writes lowered condition facts as egglog query facts, with fresh variables in order."""

    def __init__(self) -> None:
        self.counter = 0
        self.out: list[str] = []

    def fresh(self) -> str:
        self.counter += 1
        return f"?__t{self.counter}"

    def fact(self, f) -> None:
        if isinstance(f, NotFreeFact):
            s = self.fresh()
            self.out += [f"(= {s} (fv ?{f.expr}))", f"(set-not-contains {s} ?{f.binder})"]
        elif isinstance(f, OnceFact):
            self.out.append(f"(once ?{f.binder} ?{f.expr})")
        elif isinstance(f, LeafFact):
            self.out.append(f"({LEAF} ?{f.var})")  # a class holding a variable or a constant
        elif isinstance(f, PositiveFact):  # a constant the bridge found positive when it loaded it
            s = self.fresh()
            self.out += [f"(= ?{f.var} (RConst {s}))", f"({POSITIVE} {s})"]
        elif isinstance(f, RelationFact):
            self.out.append(f"({ATTR_TABLES[f.func][0]} {self.args(f.args)})")
        elif isinstance(f, CmpFact):
            left = self.term(f.left)
            right = self.term(f.right)
            self.out.append(f"({EGG_CMP[f.op]} {left} {right})")
        else:
            raise AssertionError(f"not a condition fact: {f!r}")

    def value(self, v: FunctionValue) -> str:
        """The query variable holding an attribute function's value (its fact appended)."""
        args = self.args(v.args)
        out = self.fresh()
        self.out.append(f"(= {out} ({ATTR_TABLES[v.func][0]} {args}))")
        return out

    def args(self, args) -> str:
        return " ".join(self.term(a) for a in args)

    def term(self, t) -> str:
        if isinstance(t, VarTerm):
            return "?" + t.name
        if isinstance(t, StrTerm):
            return egg_str(t.value)
        if isinstance(t, AttrTerm):
            return egg_str(attr_key(t.value))
        if isinstance(t, DtypeTerm):
            return f"(dtype ?{t.var})"
        if isinstance(t, IntTerm):
            return str(t.value)
        if isinstance(t, NegTerm):
            return f"(- 0 {self.term(t.operand)})"
        if isinstance(t, ArithTerm):
            left = self.term(t.left)
            right = self.term(t.right)
            return f"({t.op} {left} {right})"
        if isinstance(t, RankTerm):
            return f"(rank ?{t.var})"
        if isinstance(t, DimTerm):
            v = "?" + t.var
            at = str(t.index) if t.index >= 0 else f"(+ (rank {v}) {t.index})"
            d = self.fresh()
            self.out.append(f"(= {d} (dim {v} {at}))")
            if t.index < 0:
                self.out.append(f"(>= (+ (rank {v}) {t.index}) 0)")
            self.out.append(f"(!= {d} -1)" if t.guard == "eq" else f"(>= {d} 0)")
            return d
        raise AssertionError(f"not a condition term: {t!r}")


# -- rules ----------------------------------------------------------------------------------------

def compile_rule(rule, typed_actions: bool = False) -> CompiledRule:
    """The egglog declarations and rule commands of a rule object of ``relaygraph.rewrite``;
    with ``typed_actions``, a rule that keeps types by construction (``keeps_type``) types the
    classes it makes in its actions (``typed_in_actions``)."""
    if isinstance(rule, Rule):
        typed = typed_actions and keeps_type(rule)
        return CompiledRule(_declarations(rule), _commands(rule, typed), typed)
    if isinstance(rule, EggRule):
        return CompiledRule(list(rule.decls), [rule.command])
    if isinstance(rule, AnalysisRule):
        return CompiledRule([f"(ruleset {rule.ruleset})", *scoping_declarations()],
                            scoping_rules(rule.ruleset))
    raise TypeError(f"compile_rule: not a rule of relaygraph.rewrite: {type(rule).__name__}")


def program(rules) -> list[str]:
    """Every command the rules need, each once: declarations first, then the rule commands."""
    compiled = [compile_rule(r) for r in rules]
    seen: dict[str, None] = {}
    for c in compiled:
        for d in c.declarations:
            seen.setdefault(d, None)
    for c in compiled:
        for command in c.commands:
            seen.setdefault(command, None)
    return list(seen)


def _declarations(rule: Rule) -> list[str]:
    out = [f"(ruleset {rule.ruleset})"]
    for e in [*rule.computed, *([rule.cond] if rule.cond is not None else [])]:
        for f in e.attr_functions():
            out += ATTR_TABLES[f.name][1]()
    if rule.uses_scoping:
        out += scoping_declarations()  # (the analysis itself: an AnalysisRule)
    if rule.python_rewrite is not None:
        cols = " ".join(["RExpr"] * len(rule.python_rewrite.variables))
        out.append(f"(relation {rule.python_rewrite.relation} ({cols}))")
    return out


# Leaf conditions from which a rule reads the leaf-class table rather than matching the leaf
# constructors. Measured with the default rule sets (saturation, one process): all leaves by
# constructor, BERT-base 18.1 s and ResNet-50 2.6 s (merge-dense-bias-split3 alone was 64
# commands); from three leaves, 5.9 s and 1.5 s; every leaf by the table, 4.4 s and 7.7 s (a rule
# with one leaf and a positive constant, batch-norm-relu-scale-into-conv2d, made ResNet-50's later
# iterations 4x slower: egglog's join order, presumably the two small tables joined first).
_LEAF_TABLE_FROM = 3


def keeps_type(rule) -> bool:
    """True when a rewrite by ``rule`` gives its matched class a term of the class's own type
    whatever the types of the rule's variables, so that no rewrite of it needs its root typed and
    checked.

    That holds for a rule with one root and no condition, computed attribute or Python half whose
    two sides are made of expression variables and calls (no attribute spread) of ops whose type
    is the broadcast of their operands' types in their one dtype (``broadcast_of_operands``: the
    elementwise arithmetic and the unary elementwise ops), over the same variables. A tree of such
    ops has the broadcast of its leaves' types, and broadcasting is associative, commutative and
    idempotent, so the type depends on the set of leaves alone: the two sides have the same. And
    when the left side is well typed its leaves broadcast together and share a dtype, so every
    inner term of the right side (a subset of them) is well typed too. add-commute, add-assoc and
    distributing a multiply over an add are such rules; a rule with a constant, a wildcard or a
    variable on one side only is not."""
    if not isinstance(rule, Rule) or len(rule.lhs) != 1 or rule.cond is not None or rule.computed \
            or rule.python_rewrite is not None or rule.uses_scoping:
        return False
    sides = []
    for side in (rule.lhs[0], rule.rhs[0]):
        names = set()
        for p in walk(side):
            if isinstance(p, PVar):
                if p.name.startswith("_"):
                    return False  # a wildcard: a leaf whose type the other side may not have
                names.add(p.name)
            elif not (isinstance(p, PCall) and p.spread is None
                      and lookup(p.op).extra.get("broadcast_of_operands")
                      and all(isinstance(spec, (ALit, AVar)) for _, spec in p.attrs)):
                return False
        sides.append(names)
    return sides[0] == sides[1]


def _typed_actions(root: str, rhs) -> list[str]:
    """Actions building ``rhs`` and unioning it with ``?root``, each new inner term let-bound and
    its ``Ty`` unioned with its signature (``Sig:<ctor>`` of its children's types and its
    attribute fields), as the constructor's typing rule does (``keeps_type`` rules only: the root
    joins the matched class, which has its type)."""
    names: dict[int, str] = {}
    build = _Rhs(names, {})
    actions = []
    made = 0  # inner terms let-bound so far
    for p in reversed(list(walk(rhs))):  # every node after its children
        if id(p) in names:
            continue
        if isinstance(p, PVar):
            names[id(p)] = "?" + p.name
            continue
        if p is rhs:
            break
        name, made = f"__t{made}", made + 1
        actions.append(f"(let {name} {build.call(p)})")
        sig = [f"(Ty {names[id(a)]})" for a in p.args] + build.attr_parts(p)
        actions.append(f"(union (Ty {name}) (Sig:{op_constructor(lookup(p.op))} {' '.join(sig)}))")
        names[id(p)] = name
    actions.append(f"(union ?{root} {build.term(rhs)})")
    return actions


def _commands(rule: Rule, typed: bool = False) -> list[str]:
    """The rule's egglog rule commands (one per kind of each leaf variable, for few leaves); with
    ``typed`` (a ``keeps_type`` rule), typing the classes it makes in its actions."""
    roots = rule.roots
    facts = [f"(= ?{r} {lhs_term(p)})" for r, p in zip(roots, rule.lhs, strict=True)]
    for i in range(len(roots)):
        for j in range(i + 1, len(roots)):
            facts.append(f"(!= ?{roots[i]} ?{roots[j]})")
    writer = _Facts()
    writer.out = facts
    for f in rule.native_facts:
        writer.fact(f)
    # computed attributes egglog can look up in a table become query variables
    computed_vars = {i: writer.value(v) for i, v in enumerate(rule.native_values)}
    # `leaf(?w)`: a rule with few leaf conditions matches each kind of leaf (a variable, a
    # constant) in a command of its own; with many, the commands multiply (2 ** leaves) and it
    # reads the leaf-class table instead (see _LEAF_TABLE_FROM)
    leaves = [f.var for f in rule.native_facts if isinstance(f, LeafFact)]
    if len(leaves) >= _LEAF_TABLE_FROM:
        leaves = []
    facts = [f for f in writer.out if not (leaves and f.startswith(f"({LEAF} "))]
    if typed:
        actions = _typed_actions(roots[0], rule.rhs[0])
    elif rule.python_rewrite is None:
        actions = [f"(union ?{r} {rhs_term(p, computed=computed_vars)})"
                   for r, p in zip(roots, rule.rhs, strict=True)]
    else:
        pr = rule.python_rewrite
        facts += [f"(tytext (Ty ?{v}))" for v in pr.typed]
        columns = ["?" + v for v in pr.typed] + [name for name, _ in pr.prebuilt]
        actions = [f"({pr.relation} {' '.join(columns)})"]
        actions[:0] = [f"(let {name} {rhs_term(p)})" for name, p in pr.prebuilt]
    out = []
    for i, kinds in enumerate(itertools.product(("RVar", "RConst"), repeat=len(leaves))):
        leaf_facts = [f"(= ?{v} ({k} ?__leaf{j}))"
                      for j, (v, k) in enumerate(zip(leaves, kinds, strict=True))]
        name = rule.name if i == 0 else f"{rule.name}/{i + 1}"
        out.append(f"(rule ({' '.join(facts + leaf_facts)}) ({' '.join(actions)}) "
                   f":ruleset {rule.ruleset} :name \"{name}\")")
    return out
