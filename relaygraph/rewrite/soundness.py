"""The soundness checker: both sides of every rule evaluated on random inputs must agree.

For each rule (each direction), a random instance makes the left side apply (types for its
variables, values for its attributes, the condition true; see ``instantiate.py``). The right
side must then type-check to the same type -- a rule that changes a type is refused with a
RuleError, since egglog would refuse to merge the two e-classes -- and both sides, run by the
interpreter on random inputs drawn from the ops' domains, must agree within tolerance. Several
trials use different seeds. A rule that no trial can instantiate is reported as such, never as
sound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import RuleError
from ..eval import evaluate
from ..ir.expr import Expr, Function, Tuple, Var
from ..ir.traversal import free_vars, substitute
from ..ir.types import format_type
from ..ops.domains import draw
from ..ops.registry import lookup
from ..ty import infer_type_expr
from .build import BuildError, build
from .instantiate import Instance, instantiate, leaf_roles
from .native import PositiveFact
from .pattern import PCall, walk
from .rule import AnalysisRule, EggRule, Rule

__all__ = ["CheckResult", "check_rule", "check_rules", "format_results", "rule_instance", "RTOL"]

RTOL = 1e-4
ATOL = 1e-5
_DOMAIN_ORDER = ("bool", "index", "positive", "nonzero", "unit", "small", "any")


@dataclass
class CheckResult:
    """The verdict on one rule: ``sound``, ``unsound`` (with a counterexample), ``refused`` (it
    changes a type), ``not instantiable`` or ``skipped`` (egglog rules)."""

    rule: str
    status: str
    detail: str = ""
    trials: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Sound, or not checked by evaluation (egglog rules)."""
        return self.status in ("sound", "skipped")


class _Mismatch(Exception):
    pass


class _Skip(Exception):
    pass


def check_rules(rules, trials: int = 3, seed: int = 0, tries: int = 300) -> list[CheckResult]:
    """Check every rule; a rule that changes a type is reported as ``refused``."""
    out = []
    for r in rules:
        try:
            out.append(check_rule(r, trials, seed, tries))
        except RuleError as exc:
            where = f"{r.span.source_name}:{r.span.line}" if getattr(r, "span", None) else ""
            out.append(CheckResult(r.name, "refused", exc.message, source=where))
    return out


def check_rule(rule: Rule | EggRule, trials: int = 3, seed: int = 0, tries: int = 300) -> CheckResult:
    """Check one rule; RuleError if its right side changes the type of what it replaces."""
    where = f"{rule.span.source_name}:{rule.span.line}" if rule.span else ""
    if isinstance(rule, (EggRule, AnalysisRule)):
        what = "written in egglog" if isinstance(rule, EggRule) else "a generated egglog analysis"
        return CheckResult(rule.name, "skipped", f"{what}: tested by running it in an e-graph, "
                           "not by evaluation", source=where)
    result = CheckResult(rule.name, "sound", source=where)
    done = 0
    for trial in range(trials):
        rng = np.random.default_rng([seed, trial, _stable_hash(rule.name)])
        # the trials after the first try edge cases first (windows wholly in padding, 1x1
        # images), then, if the left side cannot run on those, an ordinary instance
        for edges in ((True, False) if trial > 0 else (False,)):
            inst = instantiate(rule, rng, tries, edges=edges)
            if inst is None:
                continue
            rhs = _right_side(rule, inst)
            _check_types(rule, inst, rhs)
            try:
                with np.errstate(all="ignore"):
                    _compare(rule, inst, rhs, rng, result)
            except _Skip:
                continue
            except _Mismatch as exc:
                result.status, result.detail, result.trials = "unsound", str(exc), done + 1
                return result
            done += 1
            break
    result.trials = done
    if done == 0:
        result.status = "not instantiable"
        result.detail = (f"no types or attribute values found in {tries} tries under which the "
                         "left side type-checks and the condition holds")
    return result


def rule_instance(rule: Rule, seed: int = 0, trial: int = 0,
                  tries: int = 300) -> tuple[Instance, list[Expr]] | None:
    """A random instance of a rule and its right side built for it (the checker's first steps),
    or None when none is found; RuleError if the right side cannot be built."""
    rng = np.random.default_rng([seed, trial, _stable_hash(rule.name)])
    inst = instantiate(rule, rng, tries)
    if inst is None:
        return None
    return inst, _right_side(rule, inst)


def _stable_hash(text: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(text)) % (2 ** 31)


class _CheckGraph:
    """What a Python right side reads, for one instance: handles are names' positions."""

    def __init__(self, rule: Rule, inst: Instance) -> None:
        pr = rule.python_rewrite
        self.names = list(pr.variables)
        self.exprs: dict[str, Expr] = {}
        roots = dict(zip(rule.roots, inst.lhs, strict=True))
        env = inst.env()
        prebuilt = dict(pr.prebuilt)
        for name in self.names:
            if name in roots:
                self.exprs[name] = roots[name]
            elif name in prebuilt:
                self.exprs[name] = build(prebuilt[name], env)
            else:
                self.exprs[name] = inst.leaves[name]
        self.checked = infer_type_expr(Tuple(list(self.exprs.values())), with_types=True)[1]

    def bindings(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def type_of(self, handle: int):
        return self.checked.type_of(self.exprs[self.names[handle]])


def _right_side(rule: Rule, inst: Instance) -> list[Expr]:
    if rule.python_rewrite is None:
        env = inst.env()
        try:
            return [build(p, env) for p in rule.rhs]
        except BuildError as exc:
            raise RuleError(f"rule {rule.name}: the right side cannot be built "
                            f"({_describe(rule, inst)}): {exc}", rule.span) from None
    pr = rule.python_rewrite
    try:
        graph = _CheckGraph(rule, inst)
    except Exception as exc:  # noqa: BLE001 - a part egglog would build does not type-check
        raise RuleError(f"rule {rule.name}: the right side does not type-check where the left "
                        f"side does ({_describe(rule, inst)}): {exc}", rule.span) from None
    pairs = pr.build(graph.bindings(), graph, check_types=False)
    if not pairs:
        raise RuleError(f"rule {rule.name}: the Python right side gave nothing for a match "
                        f"({_describe(rule, inst)}): a computed value is unknown or does not fit")
    mapping = {pr.leaf_vars[n]: graph.exprs[n] for n in graph.names}
    return [substitute(e, mapping) for _, e in pairs]


def _check_types(rule: Rule, inst: Instance, rhs: list[Expr]) -> None:
    for name, var in inst.binders.items():
        if any(var in free_vars(e) for e in rhs):
            raise RuleError(f"rule {rule.name}: the right side uses ?{name} outside the let that "
                            "binds it", rule.span)
    try:
        checked = infer_type_expr(Tuple(rhs), with_types=True)[1]
    except Exception as exc:  # noqa: BLE001 - any type error on the right side refuses the rule
        raise RuleError(f"rule {rule.name}: the right side does not type-check where the left "
                        f"side does ({_describe(rule, inst)}): {exc}", rule.span) from None
    for i, (want, e) in enumerate(zip(inst.root_types, rhs, strict=True)):
        got = checked.type_of(e)
        if format_type(got) != format_type(want):
            which = f" (root {i})" if rule.multi else ""
            raise RuleError(f"rule {rule.name} changes type{which}: {format_type(want)} vs "
                            f"{format_type(got)} ({_describe(rule, inst)})", rule.span)


def _domains(rule: Rule) -> dict[str, str]:
    out = {}
    positive = {f.var for f in getattr(rule, "native_facts", ()) if isinstance(f, PositiveFact)}
    for v, occurrences in leaf_roles(rule.lhs).items():
        direct = [places[0] for places in occurrences if lookup(places[0][0]) is not None]
        found = [lookup(op).input_domain(i) for op, i, _ in direct] or ["any"]
        if v in positive:  # the condition holds only for values above zero
            found.append("positive")
        out[v] = min(found, key=lambda d: _DOMAIN_ORDER.index(d) if d in _DOMAIN_ORDER else 99)
    return out


_SIGNED = ("any", "nonzero", "small", "unit")


def _both_signs(value, domain: str, rng):
    """A float tensor of a signed domain with values of both signs: drawn at random, the few values
    of a small tensor are often all of one sign (3 values: a quarter of the time), and a rule wrong
    only for negative values (one that needs positive(?g), say) then passes several trials."""
    if (domain not in _SIGNED or not isinstance(value, np.ndarray) or value.dtype.kind != "f"
            or value.size < 2):
        return value
    flat = value.reshape(-1)
    for wrong in (flat > 0, flat < 0):
        if wrong.all():
            i = int(rng.integers(flat.size))
            flat[i] = -flat[i]
    return value


def _flatten(value) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in _flatten(v)]
    return [np.asarray(value)]


def _compare(rule: Rule, inst: Instance, rhs: list[Expr], rng, result: CheckResult) -> None:
    domains = _domains(rule)
    inputs = [_both_signs(draw(p.type_annotation, domains.get(p.name_hint, "any"), rng),
                          domains.get(p.name_hint, "any"), rng) for p in inst.params]
    try:
        left = _flatten(evaluate(Function(inst.params, Tuple(inst.lhs)), *inputs))
    except Exception:  # noqa: BLE001 - inputs the left side cannot take: not a counterexample
        raise _Skip() from None
    try:
        right = _flatten(evaluate(Function(inst.params, Tuple(rhs)), *inputs))
    except Exception as exc:  # noqa: BLE001 - the left side ran on these inputs, the right did not
        raise _Mismatch(f"{_describe(rule, inst)}\ninputs: {_summary(inst, inputs)}\n"
                        f"the right side fails where the left side runs: {exc}") from None
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise _Mismatch(f"output {i}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
        if a.dtype.kind in "fc":
            a64, b64 = a.astype("float64"), b.astype("float64")
            finite = np.abs(a64[np.isfinite(a64)])
            scale = max(1.0, float(finite.max()) if finite.size else 1.0)
            same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))  # equal infinities, both NaN
            diff = np.where(same, 0.0, np.abs(a64 - b64))
            diff = np.where(np.isnan(diff), np.inf, diff)
            rel = diff / np.maximum(np.abs(np.where(np.isfinite(a64), a64, 1.0)), 1e-12)
            bad = ~same & ~(diff <= ATOL * scale + RTOL * np.abs(np.where(np.isfinite(b64), b64, 0)))
        else:
            diff = np.abs(a.astype("float64") - b.astype("float64"))
            rel = diff / np.maximum(np.abs(a.astype("float64")), 1)
            bad = a != b
        if a.size:
            result.max_abs = max(result.max_abs, float(np.max(diff)))
            result.max_rel = max(result.max_rel, float(np.max(rel)))
        if np.any(bad):
            at = tuple(int(x) for x in np.argwhere(bad)[0])
            raise _Mismatch(
                f"{_describe(rule, inst)}\ninputs: {_summary(inst, inputs)}\n"
                f"output {i}: max abs error {float(np.max(diff)):.3g}, max rel error "
                f"{float(np.max(rel)):.3g}; at {list(at)}: left {a[at].item()!r} vs right {b[at].item()!r}")


def _describe(rule: Rule, inst: Instance) -> str:
    parts = [f"?{v}: {format_type(t)}" for v, t in inst.types.items()]
    parts += [f"?{k}={v!r}" for k, v in inst.attrs.items()]
    wild = [f"{k[1]}={v!r}" for k, v in inst.wild.items() if _not_default(rule, k, v)]
    if wild:
        parts.append("omitted attributes: " + ", ".join(wild))
    for v, e in inst.leaves.items():
        if not isinstance(e, Var):
            parts.append(f"?{v} also uses the let-bound variable")
    return ", ".join(parts) or "no variables"


def _summary(inst: Instance, inputs) -> str:
    out = []
    for p, x in zip(inst.params, inputs, strict=True):
        x = np.asarray(x)
        if x.size == 0:
            out.append(f"?{p.name_hint}: empty")
        elif x.dtype.kind == "b":
            out.append(f"?{p.name_hint}: {int(x.sum())}/{x.size} true")
        else:
            out.append(f"?{p.name_hint}: [{x.min():.3g}, {x.max():.3g}]")
    return ", ".join(out)


def format_results(results: list[CheckResult]) -> str:
    """A report: one line per rule, details for the rules that are not sound."""
    lines = []
    width = max((len(r.rule) for r in results), default=0)
    for r in results:
        line = f"{r.rule:<{width}}  {r.status}"
        if r.status == "sound":
            line += f" ({r.trials} trials, max abs error {r.max_abs:.2g}, max rel error {r.max_rel:.2g})"
        elif r.status == "skipped":
            line += f" ({r.detail})"
        if r.source:
            line += f"  [{r.source}]"
        lines.append(line)
        if r.detail and r.status not in ("sound", "skipped"):
            lines.extend("    " + d for d in r.detail.splitlines())
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no rules")
    return "\n".join(lines)



def _not_default(rule: Rule, key: tuple[int, str], value) -> bool:
    for p in rule.lhs:
        for n in walk(p):
            if isinstance(n, PCall) and n.key == key[0]:
                return lookup(n.op).attrs[key[1]] != value
    return False
