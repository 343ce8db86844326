"""``synthesize``: rewrite rules inferred from enumerated terms (Ruler/Enumo for tensor programs).

1. Enumerate well-typed terms over the ops and pattern variables (``candidates.py``), each
   fingerprinted by its values on samples of several shapes, dtypes and a symbolic dimension
   (``samples.py``), through the op table's type relations and the evaluator.
2. Candidate equalities from equal fingerprints, with conditions inferred from where they held.
3. Smallest candidates first: each must not be derivable from the rules already kept by
   bounded rewriting of its two sides (``syntactic.py``, no e-graph), and must pass the
   soundness checker (``relaygraph.rewrite.soundness``); after batches of rules kept (growing
   with the rule set), the remaining candidates derivable from them are dropped at once, their
   instances (each with variables of its own) saturated together in a few e-graphs
   (``derive.py``). Attributes every call of an op agrees on are then generalized to a rest
   variable when the checker allows. Last, rules derivable from the others are dropped.
4. The kept rules are written as a ``.rules`` file, each with the samples it held on.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import RelayError, RuleError
from ..ir.expr import Expr, Var, const
from ..ops.builders import make_call
from ..progress import resolve
from ..rewrite.load import parse_rules
from ..rewrite.soundness import check_rule
from .candidates import Candidate, enumerate_terms, find_candidates, literal_count, reversible
from .derive import prove, proved_pairs
from .samples import VAR_NAMES, Samples, attr_values, default_samples, input_domains, works_on_images
from .syntactic import TermRewriter
from .terms import (
    LITERALS,
    attr_variables,
    check_ops,
    count_terms,
    generalizable,
    ops_of,
    render,
    size,
    variables,
)

__all__ = ["synthesize", "SynthesisResult", "SynthRule", "MAX_TERMS"]

MAX_TERMS = 150_000


@dataclass
class SynthRule:
    """One synthesized rule: its name, statement, and the samples it held on."""

    name: str
    statement: str  # ``rule NAME : LHS => RHS [if COND]``
    comment: str
    lhs_size: int
    rhs_size: int
    order: tuple = ()  # smallest and most general first

    @property
    def text(self) -> str:
        """The rule with its comment, as the file has it."""
        return f"# {self.comment}\n{self.statement}"


@dataclass
class SynthesisResult:
    """The rules kept, and what the search did."""

    rules: list[SynthRule]
    ops: list[str]
    stats: dict = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # candidates the soundness checker refused
    derivable: dict[str, str] = field(default_factory=dict)  # candidate -> how it was found derivable
    command: str = ""  # the command line that wrote it, when the command line did

    @property
    def text(self) -> str:
        """The ``.rules`` file."""
        head = [f"# Rules synthesized over {', '.join(self.ops)} (relaygraph rules synthesize):",
                *([f"# written by: {self.command}"] if self.command else []),
                f"# {self.stats.get('terms', 0)} terms enumerated up to {self.stats.get('size')} ops, "
                f"{self.stats.get('candidates', 0)} candidate equalities, {len(self.rules)} kept "
                "(sound, and not derivable from the rules above them).",
                "# Each rule's comment names the samples (variable types) it was checked on.", ""]
        return "\n".join(head + [r.text for r in self.rules]) + "\n"

    def write(self, path) -> Path:
        """Write the ``.rules`` file; returns its path."""
        path = Path(path)
        path.write_text(self.text)
        return path

    def load(self) -> list:
        """The rules as rule objects."""
        return parse_rules(self.text, "<synthesized>", ruleset="synthesized")


def synthesize(ops, size: int = 2, *, variables_count: int = 3, literals=LITERALS, wide: int | None = None,
               iterations: int = 3, conditions: bool = True, trials: int = 3, draws: int = 2,
               seed: int = 0, max_terms: int = MAX_TERMS, prune_every: int = 4, minimize: bool = True,
               both_ways: bool = False, progress=True) -> SynthesisResult:
    """Synthesize sound rules over ``ops`` from terms of up to ``size`` ops (terms above ``wide``
    ops use two ops and variables only); RelayError for an op without a kernel or type relation,
    or when the enumeration could make more than ``max_terms`` terms. ``both_ways``: an
    unconditional equality of two terms of one size is written ``<=>`` when either side may be
    the left one (which way pays, the cost model decides: relu after a max-pool runs on fewer
    values, before it on more). ``progress``: a line per
    phase on stderr (as ``relaygraph.progress`` resolves it), or a function taking each line."""
    t0 = time.perf_counter()
    if isinstance(ops, str):
        ops = ops.split(",")
    ops = check_ops(ops)
    for name, value, lo in (("size", size, 1), ("variables", variables_count, 1),
                            ("iterations", iterations, 1), ("trials", trials, 1), ("draws", draws, 1),
                            ("max_terms", max_terms, 1), ("prune_every", prune_every, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < lo:
            raise RelayError(f"synthesize: {name} must be an integer >= {lo}, got {value!r}")
    if variables_count > len(VAR_NAMES):
        raise RelayError(f"synthesize: at most {len(VAR_NAMES)} variables")
    wide = size if wide is None else max(1, min(wide, size))
    literals = tuple(float(x) for x in literals)
    names = list(VAR_NAMES[:variables_count])
    bound = count_terms(ops, size, variables_count, literals, wide)
    if bound > max_terms:
        raise RelayError(
            f"synthesize: up to {bound} terms would be enumerated (limit {max_terms}); use fewer ops, "
            f"a smaller size, fewer variables or literals, a smaller wide layer (--wide), or raise "
            f"the limit (--max-terms)")
    say = progress if callable(progress) else _lines(resolve(progress))
    images = any(works_on_images(o) for o in ops)
    samples = Samples(default_samples(names, input_domains(ops, names), draws, seed, images,
                                      convs="nn.conv2d" in ops))
    reps, members = enumerate_terms(ops, size, names, literals, wide, samples)
    t1 = time.perf_counter()
    say(f"{len(reps) + len(members)} terms, {len(reps)} classes ({t1 - t0:.1f} s)")
    cands = sorted(find_candidates(reps, members, samples, names, conditions, kernels="nn.conv2d" in ops),
                   key=lambda c: c.key)
    t2 = time.perf_counter()
    say(f"{len(cands)} candidates ({t2 - t1:.1f} s)")
    selector = _Selector(samples, names, iterations, trials, seed, minimize, both_ways)
    kept = selector.select(cands, prune_every, say)
    t3 = time.perf_counter()
    stats = {"size": size, "wide": wide, "terms": len(reps) + len(members), "classes": len(reps),
             "bound": bound, "candidates": len(cands), "unsound": selector.unsound,
             "derived": selector.derived, "pruned": selector.pruned, "minimized": selector.minimized,
             "kept": len(kept),
             "evaluations": samples.evaluations, "seconds_enumerate": t1 - t0,
             "seconds_candidates": t2 - t1, "seconds_select": t3 - t2, "seconds": t3 - t0}
    kept.sort(key=lambda r: r.order)
    return SynthesisResult(kept, ops, stats, selector.rejected, selector.derivable)


def _generic(names, values: dict) -> int:
    """How generic a sample's attribute values are: distinct, and not identity permutations."""
    got = [values[n] for n in names]
    return len(set(got)) + sum(v != tuple(range(len(v))) for v in got)


def _lines(mode: str):
    if mode == "off":
        return lambda msg: None
    return lambda msg: print(f"synthesize: {msg}", file=sys.stderr, flush=True)


_ATTR_KINDS = (("p", "q"), ("s", "t"))  # attribute variables that take the same kind of value


def _renaming(c: Candidate) -> dict[str, str]:
    """Variables named in order of first occurrence: terms ``?a, ?b, ...``, and each kind of
    attribute variable (``?p, ?q`` permutations, ``?s, ?t`` shapes) likewise."""
    rename = {v: VAR_NAMES[i] for i, v in enumerate(variables(c.lhs))}
    seen = attr_variables(c.lhs, computed=False)
    for kind in _ATTR_KINDS:
        mine = [n for n in seen if n in kind]
        rename.update({n: kind[i] for i, n in enumerate(mine)})
    return rename


def _body(c: Candidate) -> str:
    """The candidate with its variables named in order (equal for candidates that differ only in
    the names of their variables)."""
    rename = _renaming(c)
    text = f"{render(c.lhs, rename)} => {render(c.rhs, rename)}"
    if c.cond is not None:
        text += " if " + re.sub(r"\?([a-z])\b", lambda m: "?" + rename.get(m.group(1), m.group(1)),
                                c.cond.text)
    return text


def _arrow(c: Candidate, both_ways: bool) -> str:
    """``<=>`` for an equality of two terms of one size that either side may start
    (``both_ways``), unconditional or under a condition on the variables alone (both sides bind
    them alike; not one on ``?root``), else ``=>``."""
    if (both_ways and (c.cond is None or c.cond.root is None) and size(c.lhs) == size(c.rhs)
            and reversible(c.lhs, c.rhs)):
        return "<=>"
    return "=>"


class _Selector:
    """Keeps candidates in order when sound and not derivable from the rules kept before."""

    def __init__(self, samples: Samples, names, iterations: int, trials: int, seed: int,
                 minimize: bool = True, both_ways: bool = False) -> None:
        self.both_ways = both_ways
        self.samples, self.names = samples, names
        self.iterations, self.trials, self.seed = iterations, trials, seed
        self.unsound = self.derived = self.pruned = 0
        self.rejected: list[str] = []
        self.rules: list = []  # rule objects of the kept rules
        self.counts: dict[str, int] = {}
        self._serial = 0  # instances get variables of their own (see _instance)
        self.seen: set[str] = set()
        self.candidate: dict[str, Candidate] = {}
        self.tested: dict[int, int] = {}  # candidate id -> rules version it was not derivable from
        self.version = 0  # changes whenever the kept rules do
        self.minimize = minimize
        self.minimized = 0
        self.dropped: set[str] = set()
        self.syntactic = TermRewriter()  # the kept unconditional rules, over enumerated terms
        self.alone = 60  # above this many rules, minimization starts with halves (_minimize_halves)
        self.derivable: dict[str, str] = {}  # candidate -> how it was found derivable

    def select(self, cands: list[Candidate], prune_every: int, say) -> list[SynthRule]:
        kept: list[SynthRule] = []
        pending = []
        for c in cands:  # one of each candidate up to the names of its variables
            body = _body(c)
            if body not in self.seen:
                self.seen.add(body)
                pending.append(c)
        say(f"{len(pending)} candidates up to renaming")
        since, every = 0, prune_every
        while pending:
            c = pending.pop(0)
            if self._joinable(c):  # derivable by rewriting with the kept rules: no e-graph needed
                self.derived += 1
                self.derivable[_body(c)] = "by rewriting with the rules kept before it"
                continue
            made = self._rule(c)
            if made is None:
                continue
            srule, objs = made
            if not self._sound(objs, srule):
                continue
            srule, objs = self._generalize(c, srule, objs)
            kept.append(srule)
            self.rules += objs
            self.version += 1
            self.candidate[srule.name] = c
            if c.cond is None:
                self.syntactic.add(c.lhs, c.rhs)
            since += 1
            if since >= every and pending:
                # Ruler's batches: the candidates left are checked against every rule kept so
                # far at once, in e-graphs of many candidates each; the batches grow with the
                # rule set, so the number of e-graphs built grows with its logarithm
                since, every = 0, max(prune_every, len(kept) // 3)
                before = len(pending)
                left = []
                for p in pending:
                    if self._joinable(p):
                        self.derivable[_body(p)] = "by rewriting with the rules kept before it"
                    else:
                        left.append(p)
                pending = self._prune(left)
                self.pruned += before - len(pending)
                say(f"{len(kept)} rules kept, {len(pending)} candidates left")
        kept = [r for r in kept if r.name not in self.dropped]
        return self._minimize(kept) if self.minimize else kept

    def _joinable(self, c: Candidate) -> bool:
        return self.syntactic.joinable(c.lhs, c.rhs)

    def _minimize(self, kept: list[SynthRule]) -> list[SynthRule]:
        """Drop kept rules derivable from the other rules kept (Ruler's last step): the largest
        first. Many rules are first halved: each half's rules are checked against the other
        half's, all in one e-graph (two e-graphs instead of one per rule); if still many, the
        rest is by rewriting only."""
        out = list(kept)
        if len(out) > self.alone:
            out = self._minimize_halves(out)
        each = len(out) <= self.alone  # an e-graph per rule; above that, rewriting only
        for srule in sorted(out, key=lambda r: r.order, reverse=True):
            if srule not in out:
                continue  # refused by the e-graph meanwhile
            others = [r for r in self.rules if r.name.removesuffix("<=") != srule.name]
            rewriter = TermRewriter()
            for r in out:
                c = self.candidate[r.name]
                if r is not srule and c.cond is None:
                    rewriter.add(c.lhs, c.rhs)
            if rewriter.joinable(self.candidate[srule.name].lhs, self.candidate[srule.name].rhs):
                self.derivable[_body(self.candidate[srule.name])] = "by rewriting with the other rules kept"
                out.remove(srule)
                self.rules = others
                self.version += 1
                self.minimized += 1
                continue
            inst = self._instance(self.candidate[srule.name]) if each else None
            if inst is None or not others:
                continue
            try:
                proved = prove(inst[0], inst[1], others, self.iterations, minimize=False, strict=True).proved
            except RelayError as exc:
                self._drop_culprit(exc)
                out = [r for r in out if r.name not in self.dropped]
                continue
            if proved:
                self.derivable[_body(self.candidate[srule.name])] = "in an e-graph of the other rules kept"
                out.remove(srule)
                self.rules = others
                self.version += 1
                self.minimized += 1
        return out

    def _minimize_halves(self, out: list[SynthRule], splits: int = 4) -> list[SynthRule]:
        # several splits (by bit k of the rule's rank): a rule whose derivation needs m other
        # rules is caught when they all fall in the other half, 1 in 2**m for each split
        for bit, half in ((b, h) for b in range(splits) for h in (0, 1)):
            ordered = sorted(out, key=lambda r: r.order)
            mine = [r for i, r in enumerate(ordered) if (i >> bit) & 1 == half]
            names = {r.name for r in ordered if r not in mine}
            rules = [r for r in self.rules if r.name.removesuffix("<=") in names]
            insts = [self._instance(self.candidate[r.name]) for r in mine]
            pairs = [p for p in insts if p is not None]
            for _ in range(3):  # a rule the e-graph refuses is dropped, and the half checked again
                try:
                    proved = iter(proved_pairs(pairs, rules, self.iterations))
                    break
                except RelayError as exc:
                    before = len(self.dropped)
                    self._drop_culprit(exc)
                    if len(self.dropped) == before:
                        proved = None
                        break
                    rules = [r for r in rules if r.name.removesuffix("<=") not in self.dropped]
            else:
                proved = None
            out = [r for r in out if r.name not in self.dropped]
            if proved is None:
                continue
            drop = set()
            for srule, inst in zip(mine, insts, strict=True):
                if inst is not None and next(proved):
                    drop.add(srule.name)
                    self.derivable[_body(self.candidate[srule.name])] = \
                        "in an e-graph of the other rules kept"
            out = [r for r in out if r.name not in drop]
            self.rules = [r for r in self.rules if r.name.removesuffix("<=") not in drop]
            self.minimized += len(drop)
            self.version += 1
        return out

    # -- rules ------------------------------------------------------------------------------------
    def _rule(self, c: Candidate):
        rename = _renaming(c)
        lhs, rhs = render(c.lhs, rename), render(c.rhs, rename)
        prefix = "-".join(sorted(o.removeprefix("nn.").replace("_", "-")
                                 for o in ops_of(c.lhs) | ops_of(c.rhs)))
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        name = f"{prefix}-{self.counts[prefix]}"
        statement = f"rule {name} : {lhs} {_arrow(c, self.both_ways)} {rhs}"
        if c.cond is not None:
            cond = re.sub(r"\?([a-z])\b", lambda m: "?" + rename.get(m.group(1), m.group(1)), c.cond.text)
            statement += f" if {cond}"
        where = sorted(c.held)[:4]
        shown = [f"{self.samples.samples[i].label} ({self.samples.samples[i].describe(variables(c.lhs))})"
                 for i in where]
        shown = [re.sub(r"\?([a-z])\b", lambda m: "?" + rename.get(m.group(1), m.group(1)), s)
                 for s in shown]
        more = f" and {len(c.held) - len(where)} more" if len(c.held) > len(where) else ""
        comment = f"checked on {'; '.join(shown)}{more}"
        try:
            objs = parse_rules(statement, "<synthesized>", ruleset="synthesized")
        except RelayError as exc:
            self.rejected.append(f"{statement}  (not a valid rule: {exc})")
            return None
        order = (size(c.lhs) + size(c.rhs), c.cond is not None, literal_count(c.lhs) + literal_count(c.rhs),
                 -len(variables(c.lhs)), statement)
        return SynthRule(name, statement, comment, size(c.lhs), size(c.rhs), order), objs

    def _sound(self, objs, srule: SynthRule, record: bool = True) -> bool:
        for r in objs:
            try:
                # the command line's check (seed 0), and more trials: a rule that changes a type
                # only for some broadcasting shapes would break saturation
                result = check_rule(r, trials=self.trials, seed=0)
                if result.status == "sound":
                    result = check_rule(r, trials=2 * self.trials, seed=1)
            except RuleError as exc:
                if record:
                    self.unsound += 1
                    self.rejected.append(f"{srule.statement}  (refused: {exc.message})")
                return False
            if result.status != "sound":
                if record:
                    self.unsound += 1
                    self.rejected.append(f"{srule.statement}  ({result.status})")
                return False
        return True

    def _generalize(self, c: Candidate, srule: SynthRule, objs):
        """The rule with the attributes every call of an op agrees on left to a rest variable
        (``nn.batch_matmul(?a, ?b, out_dtype="", **?m)``), when the checker finds that sound too."""
        free = generalizable(c.lhs, c.rhs)
        if not free:
            return srule, objs
        rename = _renaming(c)
        head, _, tail = srule.statement.partition(" : ")
        cond = tail.split(" if ", 1)[1] if " if " in tail else None
        arrow = _arrow(c, self.both_ways)
        statement = f"{head} : {render(c.lhs, rename, free)} {arrow} {render(c.rhs, rename, free)}"
        statement += f" if {cond}" if cond else ""
        try:
            general = parse_rules(statement, "<synthesized>", ruleset="synthesized")
        except RelayError:
            return srule, objs
        if not self._sound(general, srule, record=False):
            return srule, objs
        every = ", ".join(f"{op}'s {' and '.join(names)}" for op, names in free.items())
        return dataclasses.replace(srule, statement=statement,
                                   comment=f"{srule.comment}; then for every {every}"), general

    # -- derivability -----------------------------------------------------------------------------
    def _instance(self, c: Candidate) -> tuple[Expr, Expr] | None:
        # generic attribute values first: an instance whose permutations are equal or the
        # identity proves more than the rule says (transposing twice by one swap is the identity)
        # and inputs of higher rank: conditions on ranks hold on fewer of them
        names = attr_variables(c.lhs, computed=False)
        terms = variables(c.lhs)
        order = sorted(c.held, key=lambda i: (
            self.samples.samples[i].symbolic, -_generic(names, self.samples.samples[i].attrs),
            -sum(len(self.samples.samples[i].types[n].shape) for n in terms), i))
        for i in order:
            t = self.samples.type_on(c.lhs, i)
            shape = tuple(t.shape) if t is not None and all(isinstance(d, int) for d in t.shape) else None
            # variables of its own: in an e-graph of many candidates' instances, one candidate's
            # terms then cannot serve as lemmas for another's (a derivation uses only the terms
            # the rules build from its own sides, as when a rule is checked alone)
            self._serial += 1
            names = {n: Var(f"{n}{self._serial}", t) for n, t in self.samples.samples[i].types.items()}
            lhs, rhs = self._expr(c.lhs, i, names), self._expr(c.rhs, i, names, shape)
            if lhs is not None and rhs is not None:
                return lhs, rhs
        return None

    def _expr(self, term: tuple, i: int, names: dict[str, Var],
              root_shape: tuple | None = None) -> Expr | None:
        sample = self.samples.samples[i]
        memo: dict[tuple, Expr] = {}
        stack = [term]
        while stack:  # post-order, children first
            t = stack[-1]
            if t in memo:
                stack.pop()
                continue
            if t[0] == "v":
                memo[t] = names[t[1]]
            elif t[0] == "l":
                memo[t] = const(np.float32(t[1]))
            else:
                todo = [a for a in t[3] if a not in memo]
                if todo:
                    stack.extend(todo)
                    continue
                attrs = attr_values(t[2], sample.attrs, root_shape)
                if attrs is None:
                    return None
                memo[t] = make_call(t[1], *[memo[a] for a in t[3]], **dict(attrs))
            stack.pop()
        return memo[term]

    def _derivable(self, c: Candidate) -> bool:
        inst = self._instance(c)
        if inst is None:
            return False
        try:
            return prove(inst[0], inst[1], self.rules, self.iterations, minimize=False, strict=True).proved
        except RelayError as exc:
            self._drop_culprit(exc)
            return False

    def _drop_culprit(self, exc: RelayError) -> None:
        """A kept rule the e-graph refused (it changes a type on shapes the checker did not
        draw) is dropped, so that it does not block every later derivation."""
        m = re.search(r"rule (\S+) (unions terms|makes an ill-typed)", getattr(exc, "message", str(exc)))
        if m is None:
            return
        name = m.group(1).removesuffix("<=")
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.name.removesuffix("<=") != name]
        if len(self.rules) < before:
            self.version += 1
            self.dropped.add(name)
            c = self.candidate.get(name)
            text = f"rule {name} : {_body(c)}" if c is not None else f"rule {name}"
            self.rejected.append(f"{text}  (refused in the e-graph: {exc})")
            self.syntactic = TermRewriter()
            for kept_name, c in self.candidate.items():
                if kept_name not in self.dropped and c.cond is None:
                    self.syntactic.add(c.lhs, c.rhs)

    def _prune(self, pending: list[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        chunk = 600
        for start in range(0, len(pending), chunk):
            part = pending[start:start + chunk]
            insts = [self._instance(c) for c in part]
            pairs = [p for p in insts if p is not None]
            try:
                proved = iter(proved_pairs(pairs, self.rules, self.iterations))
            except RelayError as exc:
                self._drop_culprit(exc)
                out += part
                continue
            for c, inst in zip(part, insts, strict=True):
                if inst is None or not next(proved):
                    out.append(c)
                    self.tested[id(c)] = self.version  # not derivable from the rules as they are
                else:
                    self.derivable[_body(c)] = "in an e-graph of the rules kept before it"
        return out
