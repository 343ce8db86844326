"""Derivations: does a rule set prove ``lhs == rhs`` within k iterations, and by which rules.

Both sides go into one e-graph; the rules run one iteration at a time (the saturation loop of
``relaygraph.egraph.saturation``) and after each iteration the two sides' classes are compared.
egglog exposes no proofs, so the chain is reconstructed from recorded rule applications: the
rules that fired up to the proving iteration are reduced greedily to a set that still proves the
equality, which is run once more to record, iteration by iteration, which of them applied.

Rules are proved on instances: concrete types for the variables (the e-graph is typed). A rule
of a file is derivable from the others when every instance tried is proved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..egraph.bridge import RelayEGraph
from ..egraph.encoding import OP_PREFIX
from ..egraph.rules import install_rules, prepare_rules
from ..egraph.saturation import Saturator
from ..errors import RelayError, RuleError
from ..ir.expr import Call, Expr, Op, Tuple
from ..ir.traversal import iter_post_order
from ..rewrite.pattern import PCall, walk
from ..rewrite.rule import AnalysisRule, EggRule, Rule
from ..rewrite.soundness import rule_instance

__all__ = ["Derivation", "prove", "proved_pairs", "rule_derivation", "redundant_rules", "format_derivation",
           "base_name"]


@dataclass
class Derivation:
    """Whether an equality was proved, and the rules applied per iteration (a minimal set)."""

    proved: bool
    iterations: int = 0  # iterations run (the proving one, when proved)
    steps: list[tuple[int, list[str]]] = field(default_factory=list)  # (iteration, rules applied)
    stop: str = ""  # why the search stopped when not proved
    nodes: int = 0

    @property
    def rules(self) -> list[str]:
        """The rules used, in the order they first applied."""
        out: list[str] = []
        for _, names in self.steps:
            out += [n for n in names if n not in out]
        return out


def base_name(name: str) -> str:
    """A rule's name without its direction (``x<=`` is rule ``x`` right to left)."""
    return name.removesuffix("<=")


def _runnable(rules) -> list:
    return [r for r in rules if isinstance(r, (Rule, EggRule, AnalysisRule))]


_EGG_OP = re.compile(re.escape(OP_PREFIX) + r"([A-Za-z0-9_.]+)")


def _pattern_ops(patterns) -> set[str]:
    return {n.op for p in patterns for n in walk(p) if isinstance(n, PCall)}


def relevant_rules(exprs, rules) -> list:
    """The rules that can ever match in an e-graph of ``exprs``: those whose left side calls only
    ops the expressions have, or that a relevant rule's right side makes (to a fixed point). The
    others are never installed, which is most of the cost of a small e-graph. Egglog text rules
    and analyses are always kept (the ops their text names count as made)."""
    have: set[str] = set()
    for e in exprs:
        for node in iter_post_order(e):
            if isinstance(node, Call) and isinstance(node.op, Op):
                have.add(node.op.name)
    keep = [False] * len(rules)
    needs: list[set[str] | None] = []
    for r in rules:
        if isinstance(r, Rule):
            needs.append(_pattern_ops(r.lhs))
        else:
            needs.append(None)
            if isinstance(r, EggRule):
                have |= set(_EGG_OP.findall(r.command))
    changed = True
    while changed:
        changed = False
        for i, r in enumerate(rules):
            if keep[i] or (needs[i] is not None and not needs[i] <= have):
                continue
            keep[i] = changed = True
            if isinstance(r, Rule):
                have |= _pattern_ops(r.rhs)
    return [r for r, k in zip(rules, keep, strict=True) if k]


def _attempt(lhs: list[Expr], rhs: list[Expr], rules, iterations: int, node_limit: int,
             strict: bool = False):
    """Run the rules on both sides; (proved at iteration or 0, per-iteration fired names, nodes)."""
    eg, hl, hr = load_pairs(lhs, rhs)
    if _same(eg, hl, hr):
        return 0, [], eg.sizes()[0]
    specs, python = prepare_rules(relevant_rules([*lhs, *rhs], rules))
    install_rules(eg, specs)
    fired: list[list[str]] = []
    last = [0]

    def check(stats) -> None:
        fired.append(sorted(n for n, c in stats.matches.items() if c))
        last[0] = stats.nodes
        if _same(eg, hl, hr):
            raise _Proved(stats.index)

    sat = Saturator(eg, specs, python, node_limit=node_limit, iter_limit=iterations,
                    time_limit=None, on_iteration=check, progress=False)
    try:
        report = sat.run()
    except _Proved as done:
        return done.index, fired, last[0]
    except RuleError as exc:  # a rule the e-graph refuses (it changes a type here): not a proof
        if strict:
            raise
        _REFUSALS.append(exc.message)
        return -4, fired, last[0]
    return _STOP_CODES.get(report.stop_reason, -3), fired, last[0]


_FANOUT = 8


def load_pairs(lhs: list[Expr], rhs: list[Expr]) -> tuple[RelayEGraph, list[int], list[int]]:
    """One e-graph holding every expression, loaded in one batch; (e-graph, handles of ``lhs``,
    handles of ``rhs``). The expressions hang off a tree of small tuples: one flat tuple of
    them all would make a cons list whose every cell has its own ever longer tuple type
    (quadratic in the number of expressions)."""
    level: list[Expr] = [*lhs, *rhs]
    while len(level) > 1:
        level = [Tuple(level[i:i + _FANOUT]) if len(level) - i > 1 else level[i]
                 for i in range(0, len(level), _FANOUT)]
    eg = RelayEGraph(level[0] if isinstance(level[0], Tuple) else Tuple(level))
    handles = eg.program_handles
    eg.materialize()
    return eg, [handles[e] for e in lhs], [handles[e] for e in rhs]


class _Proved(Exception):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


_STOP_CODES = {"saturated": -1, "node-limit": -2, "iter-limit": -3}
_REFUSALS: list[str] = []  # the last refusal, for the report


def _same(eg: RelayEGraph, hl: list[int], hr: list[int]) -> bool:
    snap = eg.snapshot()
    return all(snap.class_of[a] == snap.class_of[b] for a, b in zip(hl, hr, strict=True))


_STOPS = {-1: "saturated without proving it", -2: "node limit reached", -3: "iteration limit reached"}


def prove(lhs, rhs, rules, iterations: int = 5, node_limit: int = 20_000,
          minimize: bool = True, strict: bool = False) -> Derivation:
    """Whether ``rules`` prove ``lhs == rhs`` (expressions, or lists of them pairwise) within
    ``iterations``, and how: the rules applied per iteration of a minimal proving subset. A rule
    the e-graph refuses ends the search unproved (``strict``: its RuleError is raised)."""
    lhs = list(lhs) if isinstance(lhs, (list, tuple)) else [lhs]
    rhs = list(rhs) if isinstance(rhs, (list, tuple)) else [rhs]
    if len(lhs) != len(rhs) or not all(isinstance(e, Expr) for e in lhs + rhs):
        raise RelayError("prove: both sides must be Relay expressions (or equally long lists)")
    rules = _runnable(rules)
    at, fired, nodes = _attempt(lhs, rhs, rules, iterations, node_limit, strict)
    if at == 0:
        return Derivation(True, 0, [], "", nodes)
    if at < 0 or not rules:
        stop = _STOPS.get(at) or (f"a rule was refused: {_REFUSALS[-1]}" if _REFUSALS else "")
        _REFUSALS.clear()
        return Derivation(False, len(fired), [], stop, nodes)
    if not minimize:
        return Derivation(True, at, [(i + 1, f) for i, f in enumerate(fired) if f], "", nodes)
    used = {n for names in fired for n in names}
    keep = [r for r in rules if r.name in used or isinstance(r, AnalysisRule)]
    # drop the rules that fired least first: the ones that matter usually fire on the roots
    counts = {n: sum(n in f for f in fired) for n in used}
    for rule in sorted((r for r in keep if r.name in used), key=lambda r: counts[r.name]):
        trial = [r for r in keep if r is not rule]
        if _attempt(lhs, rhs, trial, at, node_limit)[0] > 0:
            keep = trial
    at2, fired2, nodes2 = _attempt(lhs, rhs, keep, at, node_limit)
    if at2 <= 0:  # cannot happen unless the rules are not deterministic; report the full run
        return Derivation(True, at, [(i + 1, f) for i, f in enumerate(fired) if f], "", nodes)
    return Derivation(True, at2, [(i + 1, f) for i, f in enumerate(fired2) if f], "", nodes2)


def rule_derivation(rule: Rule, rules, iterations: int = 5, trials: int = 2, seed: int = 0,
                    node_limit: int = 20_000, minimize: bool = True) -> Derivation | None:
    """Whether ``rules`` prove every one of ``trials`` random instances of ``rule`` (together, in
    one e-graph); their derivation (None when the rule has no instance to try)."""
    lhs: list[Expr] = []
    rhs: list[Expr] = []
    for trial in range(trials):
        try:
            found = rule_instance(rule, seed, trial)
        except RuleError:
            return None
        if found is None:
            continue
        inst, right = found
        if len(inst.lhs) != len(right):
            continue
        lhs += list(inst.lhs)
        rhs += list(right)
    if not lhs:
        return None
    return prove(lhs, rhs, rules, iterations, node_limit, minimize)


def redundant_rules(rules, iterations: int = 5, trials: int = 2, seed: int = 0,
                    node_limit: int = 20_000, only=None) -> list[tuple[Rule, Derivation]]:
    """The rules derivable from the others (both directions of a ``<=>`` rule are one rule:
    neither is used to derive the other), each with its derivation; ``only``: the names of the
    rules to check (all by default; the others still take part in derivations)."""
    rules = list(rules)
    wanted = None if only is None else {base_name(n) for n in only}
    out = []
    for rule in rules:
        if not isinstance(rule, Rule):
            continue  # egglog text and analyses are not instantiated
        if wanted is not None and base_name(rule.name) not in wanted:
            continue
        others = [r for r in rules if base_name(r.name) != base_name(rule.name)]
        d = rule_derivation(rule, others, iterations, trials, seed, node_limit)
        if d is not None and d.proved:
            out.append((rule, d))
    return out


def format_derivation(d: Derivation) -> str:
    """The rules applied, per iteration, in words."""
    if not d.proved:
        return f"not proved ({d.stop}, {d.iterations} iteration(s))"
    if not d.steps:
        return "equal as written"
    return "; ".join(f"iteration {i}: {', '.join(names)}" for i, names in d.steps)


def proved_pairs(pairs, rules, iterations: int = 3, node_limit: int = 60_000) -> list[bool]:
    """For many (lhs, rhs) expression pairs at once, in one e-graph: which ``rules`` prove
    within ``iterations`` (every merge is a consequence of the rules, so a pair that shares a
    class is derivable, possibly through terms of another pair)."""
    pairs = list(pairs)
    if not pairs:
        return []
    lhs = [p[0] for p in pairs]
    rhs = [p[1] for p in pairs]
    eg, hl, hr = load_pairs(lhs, rhs)
    rules = relevant_rules([*lhs, *rhs], _runnable(rules))
    if rules:
        specs, python = prepare_rules(rules)
        install_rules(eg, specs)
        Saturator(eg, specs, python, node_limit=node_limit, iter_limit=iterations,
                  time_limit=None, progress=False).run()
    snap = eg.snapshot()
    return [snap.class_of[a] == snap.class_of[b] for a, b in zip(hl, hr, strict=True)]
