"""Equality saturation under limits: ``rg.saturate(egraph, rules, node_limit=..., iter_limit=...,
time_limit=...)``.

egglog has no node or time limit of its own, so saturation runs one iteration at a time and
checks between iterations: it stops when an iteration changes nothing (saturated), when the
e-graph has ``node_limit`` e-nodes or more, after ``iter_limit`` iterations, or when
``time_limit`` seconds have passed. A single iteration can explode and take minutes, and a
running egglog call cannot be interrupted, so with a time limit the e-graph lives in a worker
process that is killed when an iteration overruns (``relaygraph.egraph.worker``; the report
says which iteration's state survived). ``isolate=False`` runs in this process, where the
time limit is only checked between iterations.

Each iteration is one egglog call: the rules, then one run of the typing rules of the
constructors the rules can build (each new node's type is unioned with its signature; see
``relaygraph.egraph.backend``), then the print-size that counts the e-graph and shows new
signatures. Rules that keep types by construction (``rule_compiler.keeps_type``: add-commute,
add-assoc, ...) type the terms they make in their own actions, with the same signatures; when
every rule of a run does, no typing rules run after them. Only signatures egglog has never
seen go to Python, all of an iteration's at once (a rule that builds an ill-typed term, or
unions terms of different types, is named in a RuleError). Then the rules' Python halves run
on their new matches.
Explosive rules are throttled by a back-off scheduler (egg's): a rule whose matches in an
iteration exceed its limit is not applied and sits out ``ban_length`` iterations; each ban
doubles its limit and ban length.
egglog's own back-off scheduler does the counting (before anything is applied); its state
lasts one command, so the bans and doubled limits are kept here across iterations.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..errors import RelayError, RuleError
from ..ir.expr import Expr, Function
from ..ir.module import IRModule
from ..validate import limits
from .backend import EgglogError, typing_ruleset
from .batches import UnionTypeError
from .bridge import RelayEGraph
from .encoding import LEAF
from .rules import RuleSpec, install_rules, mentioned_constructors, prepare_rules
from .typer import NodeTypeError

__all__ = ["saturate", "SaturationReport", "IterationStats", "Saturator", "Overrun",
           "apply_python_rewrites", "progress_bar", "LIMITS", "report_limits", "record_iteration",
           "tally_matches"]


@dataclass
class IterationStats:
    """What one iteration did: sizes after it, time spent, matches per rule."""

    index: int
    nodes: int
    classes: int
    seconds: float
    egglog_seconds: float = 0.0  # the rules, and the typing rules run in the same egglog call
    typing_seconds: float = 0.0  # new signatures: typed in Python, sent back, their nodes typed
    python_seconds: float = 0.0
    new_signatures: int = 0
    matches: dict[str, int] = field(default_factory=dict)
    banned: list[str] = field(default_factory=list)


@dataclass
class SaturationReport:
    """Why saturation stopped, the e-graph's size per iteration, matches per rule, times."""

    stop_reason: str  # saturated, node-limit, iter-limit, time-limit, time-limit-hard
    iterations: list[IterationStats]
    matches: dict[str, int]
    seconds: float
    limits: dict
    mode: str  # in-process or worker
    initial_nodes: int = 0
    initial_classes: int = 0
    state_iteration: int = 0  # the iteration whose e-graph the RelayEGraph now holds
    notes: list[str] = field(default_factory=list)
    egraph: RelayEGraph | None = field(default=None, repr=False)
    # worker: seconds of ``seconds`` spent before saturation proper (start or reuse a process,
    # rebuild the e-graph there, first checkpoint); in-process: 0
    load_seconds: float = 0.0

    @property
    def nodes(self) -> int:
        """E-nodes of the state the e-graph holds."""
        done = [it for it in self.iterations if it.index == self.state_iteration]
        return done[0].nodes if done else self.initial_nodes

    @property
    def classes(self) -> int:
        """E-classes of the state the e-graph holds."""
        done = [it for it in self.iterations if it.index == self.state_iteration]
        return done[0].classes if done else self.initial_classes

    @property
    def stop_detail(self) -> str:
        """Why saturation stopped, in words; says when the e-graph overshot its node limit."""
        limit = self.limits.get("node_limit")
        if self.stop_reason == "node-limit" and limit is not None:
            # the limit is checked between iterations, so the last one can go well past it
            over = "" if self.nodes == limit else " after the iteration that crossed it"
            return f"node limit {limit} reached ({self.nodes} e-nodes{over})"
        return self.stop_reason

    def __str__(self) -> str:
        lines = [f"saturation: {self.stop_reason} after {len(self.iterations)} iteration(s), "
                 f"{self.seconds:.2f} s ({self.mode}); e-graph {self.nodes} e-nodes, {self.classes} "
                 f"e-classes (iteration {self.state_iteration}), from {self.initial_nodes} e-nodes",
                 f"{'iter':>5} {'e-nodes':>9} {'e-classes':>9} {'new sigs':>8} {'seconds':>8} {'egglog':>8} "
                 f"{'typing':>8} {'python':>8}  banned"]
        for it in self.iterations:
            lines.append(f"{it.index:>5} {it.nodes:>9} {it.classes:>9} {it.new_signatures:>8} "
                         f"{it.seconds:>8.3f} {it.egglog_seconds:>8.3f} {it.typing_seconds:>8.3f} "
                         f"{it.python_seconds:>8.3f}  {', '.join(it.banned)}")
        if self.matches:
            lines.append("matches per rule:")
            width = max(len(n) for n in self.matches)
            ranked = sorted(self.matches.items(), key=lambda kv: -kv[1])
            lines += [f"  {n:<{width}} {c:>9}" for n, c in ranked]
        lines += [f"note: {n}" for n in self.notes]
        if self.stop_detail != self.stop_reason:
            lines.append(f"note: {self.stop_detail}; the limit is checked between iterations")
        return "\n".join(lines)


class Saturator:
    """The saturation loop over one e-graph (used in this process and by the worker)."""

    def __init__(self, egraph: RelayEGraph, specs: list[RuleSpec], python: dict | None = None, *,
                 node_limit: int | None, iter_limit: int | None, time_limit: float | None,
                 scheduler: str | None = "backoff", match_limit: int = 1000, ban_length: int = 5,
                 apply_python=None, on_iteration=None, progress: bool | str = False) -> None:
        if scheduler not in (None, "backoff", "simple"):
            raise RelayError(f"unknown scheduler {scheduler!r}; use 'backoff' or 'simple'")
        self.egraph, self.specs, self.python = egraph, specs, python or {}
        self.node_limit, self.iter_limit, self.time_limit = node_limit, iter_limit, time_limit
        self.backoff = scheduler == "backoff"
        self.match_limit, self.ban_length = match_limit, ban_length
        self.apply_python = apply_python or self._apply_python_here
        self.on_iteration = on_iteration
        self.progress = progress
        self.rule_of = {n: s.name for s in specs for n in s.report_names}
        self.bans = {s.name: [0, 0] for s in specs}  # times banned, banned until iteration
        self.combined: dict[frozenset, str] = {}
        self.seen_matches: set = set()
        self.matches: dict[str, int] = {}
        self.python_specs = [s for s in specs if s.relation is not None]
        # Facts (rank, dtype, dims) are kept per class only while rules read them.
        self.facts = any(re.search(r"\((rank|dtype|dim) ", t) for s in specs
                         for t in (*s.declarations, *s.commands))
        self.typing = self._typing_step()
        if self.facts:
            egraph.set_class_facts()  # catch up on classes typed while no rule read facts

    def _typing_step(self) -> str:
        """The schedule step typing what the rules build: the typing rules of the constructors
        the rules name (no other constructor gets new nodes; install_rules declared them), in one
        run."""
        texts = [t for s in self.specs for t in (*s.declarations, *s.commands)]
        ctors = sorted(mentioned_constructors(texts))
        facts = " (run rg-class-facts)" if self.facts else ""
        if any(f"({LEAF} " in t for t in texts):  # a leaf a rule's right side made (a constant)
            facts += " (run rg-leaves)"
        if not ctors or self._typed_in_actions():
            return facts.strip()
        members = [typing_ruleset(c) for c in ctors]
        if len(members) == 1:
            return f"(run {members[0]}){facts}"
        return f"(run {self.egraph.combined_ruleset('rg-types', members)}){facts}"

    def _typed_in_actions(self) -> bool:
        """Every rule types the classes it makes in its own actions (``rule_compiler.keeps_type``)
        and none has a Python half: no typing rules need to run after them."""
        return not self.python_specs and all(s.typed_in_actions for s in self.specs if s.commands)

    # -- the loop -------------------------------------------------------------------------------
    def run(self, start: float | None = None) -> SaturationReport:
        """Saturate until a limit or a fixed point; the report of what happened.

        The time limit counts from ``start`` (default: now); ``report.seconds`` too.
        """
        start = time.perf_counter() if start is None else start
        nodes, classes = self._last_sizes = self.egraph.sizes()
        report = SaturationReport("iter-limit", [], self.matches, 0.0, self._limits(),
                                  "in-process", nodes, classes, 0, egraph=self.egraph)
        bar = progress_bar(self.iter_limit, self.progress, f"from {nodes} e-nodes, {classes} e-classes")
        try:
            index = 0
            while True:
                if self.iter_limit is not None and index >= self.iter_limit:
                    break
                if self.time_limit is not None and time.perf_counter() - start >= self.time_limit:
                    report.stop_reason = "time-limit"
                    break
                index += 1
                stats, changed = self.iteration(index)
                record_iteration(report, stats, bar)
                report.state_iteration = index
                if self.on_iteration is not None:
                    self.on_iteration(stats)
                if not changed and not self._fast_forward(index):
                    report.stop_reason = "saturated"
                    break
                if self.node_limit is not None and stats.nodes >= self.node_limit:
                    report.stop_reason = "node-limit"
                    break
            bar.done(stop_info(report))
        finally:
            bar.close()
        report.seconds = time.perf_counter() - start
        return report

    def iteration(self, index: int) -> tuple[IterationStats, bool]:
        """Run one iteration: rules, typing of new classes, Python rewrites; (stats, changed)."""
        egraph = self.egraph
        t0 = time.perf_counter()
        active = [s for s in self.specs if s.commands and self.bans[s.name][1] <= index]
        schedule, runs = self._schedule(active) if active else ("", 0)
        journal_mark = len(egraph.journal)
        try:
            # One egglog call runs the rules and then types what they made (the typing step).
            outputs = egraph.run_egglog(schedule) if active else []
        except EgglogError as exc:
            raise self._rule_error(exc, journal_mark, self._suspects(journal_mark, active)) from None
        applied, banned, changed = self._read_reports(outputs, runs)
        self._ban(banned, index)
        fired = [name for name, count in applied.items() if count and name in self.bans]
        t1 = time.perf_counter()
        try:
            new, problems = egraph.type_new_classes(typed=bool(active))
        except EgglogError as exc:
            raise self._rule_error(exc, journal_mark, fired) from None
        if problems:
            raise self._rule_error(problems, journal_mark, fired)
        t2 = time.perf_counter()
        added = self._python_phase() if self.python_specs else False
        t3 = time.perf_counter()
        sizes = egraph.sizes()
        changed = bool(changed or added or sizes != self._last_sizes)
        self._last_sizes = sizes
        for name, count in applied.items():
            self.matches[name] = self.matches.get(name, 0) + count
        stats = IterationStats(index, sizes[0], sizes[1], time.perf_counter() - t0, t1 - t0, t2 - t1,
                               t3 - t2, new, applied, sorted(banned))
        return stats, changed

    # -- scheduling -------------------------------------------------------------------------------
    def _schedule(self, active: list[RuleSpec], typing: bool = True) -> tuple[str, int]:
        """The run-schedule of one iteration of ``active`` (then the typing step); (text, rule runs)."""
        levels: dict[int, list[RuleSpec]] = {}
        for s in active:
            levels.setdefault(self.bans[s.name][0] if self.backoff else 0, []).append(s)
        parts = []
        for level, specs in sorted(levels.items()):
            ruleset = self._combined(specs)
            if self.backoff:
                parts.append(f"(let-scheduler bo{level} (back-off :match-limit {self.match_limit << level} "
                             f":ban-length 1))")
                parts.append(f"(run-with bo{level} {ruleset})")
            else:
                parts.append(f"(run {ruleset})")
        if typing and self.typing:
            parts.append(self.typing)
        # the iteration's sizes (new signatures, e-nodes) come back from the same egglog call
        return f"(run-schedule {' '.join(parts)}) (print-size)", len(levels)

    def _combined(self, specs: list[RuleSpec]) -> str:
        if len(specs) == 1:
            return specs[0].ruleset
        key = frozenset(s.ruleset for s in specs)
        name = self.combined.get(key)
        if name is None:
            name = self.combined[key] = self.egraph.combined_ruleset("rg-run", key)
        return name

    def _read_reports(self, outputs, runs: int) -> tuple[dict[str, int], set[str], bool]:
        """(applied matches per rule, rules the scheduler held back, whether the rules changed
        anything). The first ``runs`` iterations of the report are the rules'; typing's follow."""
        applied: dict[str, int] = {}
        searched: set[str] = set()
        changed = False
        applied_names: set[str] = set()
        rule_of = self.rule_of
        for out in outputs:
            report = getattr(out, "report", None)
            if report is None:
                continue
            for name, count in report.num_matches_per_rule.items():
                if not count or name not in rule_of:
                    continue
                rule = rule_of[name]
                applied[rule] = applied.get(rule, 0) + count
                applied_names.add(name)
            for it in report.iterations[:runs]:
                changed = changed or it.rule_set_report.changed
                for name, reports in it.rule_set_report.rule_reports.items():
                    if name in rule_of and any(r.num_matches for r in reports):
                        searched.add(name)
        banned = {rule_of[n] for n in searched - applied_names} if self.backoff else set()
        return applied, banned & set(self.bans), changed

    def _ban(self, banned: set[str], index: int) -> None:
        for name in banned:
            state = self.bans[name]
            state[1] = index + (self.ban_length << state[0])
            state[0] += 1

    def _fast_forward(self, index: int) -> bool:
        """Nothing changed: let banned rules run again now (True) or declare saturation (False)."""
        waiting = [s for s in self.bans.values() if s[1] > index]  # sat out this iteration
        for state in waiting:
            state[1] = index + 1
        return bool(waiting)

    # -- Python rewrites ---------------------------------------------------------------------------
    def _python_phase(self) -> bool:
        snap = self.egraph.snapshot()
        rows = {spec.name: snap.relation_rows(spec.relation) for spec in self.python_specs}
        unnamed = {v for table in rows.values() for row in table for v in row if v not in snap.handle}
        handles = self.egraph.ensure_handles(snap, unnamed) if unnamed else snap.handle
        pending: dict[str, list[dict[str, int]]] = {}
        for spec in self.python_specs:
            for row in rows[spec.name]:
                bound = tuple(handles.get(v) for v in row)
                if None in bound or (spec.name, bound) in self.seen_matches:
                    continue
                self.seen_matches.add((spec.name, bound))
                pending.setdefault(spec.name, []).append(dict(zip(spec.variables, bound, strict=True)))
        if not pending:
            return False
        return self.apply_python(pending)

    def _apply_python_here(self, pending: dict[str, list[dict[str, int]]]) -> bool:
        count = apply_python_rewrites(self.python, pending, self.egraph)
        self.egraph.flush()
        return count > 0

    # -- errors -------------------------------------------------------------------------------------
    def _rule_error(self, problem, journal_mark: int, suspects: list[str]) -> RuleError:
        """A RuleError naming the rule that made an ill-typed term or a type-changing union."""
        if isinstance(problem, EgglogError) and not problem.is_type_merge:
            names = ", ".join(suspects) or "no rule"
            return RuleError(f"egglog failed while running {names}: {problem.detail.strip() or problem}")
        what = ("unions terms of different types" if isinstance(problem, EgglogError)
                else f"makes an ill-typed term ({problem[0]})")
        culprit = suspects[0] if len(suspects) == 1 else self._probe(journal_mark, suspects)
        if culprit is None:
            who = f"one of the rules {', '.join(suspects)}" if suspects else "a rule"
            return RuleError(f"{who} {what}; refused")
        return RuleError(f"rule {culprit} {what}; refused")

    def _suspects(self, journal_mark: int, active: list[RuleSpec]) -> list[str]:
        """The rules that may have broken an iteration that failed: those that fired in it, found
        by running the iteration's rules again, without typing, on the e-graph as it was before."""
        names = [s.name for s in active]
        if len(names) < 2:
            return names
        trial = self.egraph.replay(journal_mark)
        try:
            schedule, runs = self._schedule(active, typing=False)
            outputs = trial.run_egglog(schedule)
        except EgglogError:
            return names  # the rules' own rebuild failed: any of them
        applied = self._read_reports(outputs, runs)[0]
        return [n for n in names if applied.get(n)] or names

    def _probe(self, journal_mark: int, suspects: list[str]) -> str | None:
        """Rebuild the e-graph before the failed iteration and run each suspect alone."""
        by_name = {s.name: s for s in self.specs}
        for name in suspects:
            trial = self.egraph.replay(journal_mark)
            try:
                trial.run_egglog(f"(run-schedule (run {by_name[name].ruleset}))")
                _, problems = trial.type_new_classes()
            except EgglogError as exc:
                if exc.is_type_merge:
                    return name
                continue
            if problems:
                return name
        return None

    def _limits(self) -> dict:
        return report_limits({"node_limit": self.node_limit, "iter_limit": self.iter_limit,
                              "time_limit": self.time_limit,
                              "scheduler": "backoff" if self.backoff else "simple",
                              "match_limit": self.match_limit, "ban_length": self.ban_length})


LIMITS = ("node_limit", "iter_limit", "time_limit", "scheduler", "match_limit", "ban_length")


def report_limits(options: dict) -> dict:
    """The limits a report lists, from saturation's options (the same in-process and in a worker)."""
    out = {k: options[k] for k in LIMITS}
    out["scheduler"] = out["scheduler"] or "simple"
    return out


def record_iteration(report: SaturationReport, stats: IterationStats, bar) -> None:
    """Add an iteration's statistics to the report and advance the progress bar."""
    report.iterations.append(stats)
    bar.step(iteration_info(stats))


def tally_matches(report: SaturationReport) -> None:
    """The report's matches per rule, summed from its iterations."""
    report.matches.clear()
    for stats in report.iterations:
        for name, count in stats.matches.items():
            report.matches[name] = report.matches.get(name, 0) + count


class Overrun(Exception):
    """The deadline passed while Python rewrites were being applied."""


def apply_python_rewrites(python: dict, pending: dict[str, list[dict[str, int]]], graph,
                          deadline: float | None = None) -> int:
    """Run Python rewrites on their matches against ``graph`` (add_expr, union, type_of);
    returns how many terms were added. Errors become RuleErrors naming the rule; past
    ``deadline`` (a ``time.perf_counter`` value) it raises Overrun."""
    count = 0
    for name, bindings_list in pending.items():
        rewrite = python[name]
        for i, bindings in enumerate(bindings_list):
            if deadline is not None and i % 64 == 0 and time.perf_counter() > deadline:
                raise Overrun(name)
            try:
                results = rewrite.apply(bindings, graph)
                for root, expr in results or ():
                    graph.union(root, graph.add_expr(expr, _leaves(rewrite, bindings, expr)))
                    count += 1
            except (NodeTypeError, UnionTypeError) as exc:
                raise RuleError(f"rule {name} makes an ill-typed term: {exc}; refused") from None
            except RuleError:
                raise
            except Exception as exc:
                what = f"{type(exc).__name__}: {exc}"
                raise RuleError(f"rule {name}: its Python rewrite failed: {what}") from exc
    return count


def _leaves(rewrite, bindings: dict[str, int], expr: Expr) -> dict:
    """The classes the leaf Vars of a Python rewrite's expression stand for."""
    leaves = getattr(rewrite, "leaves", None)
    if leaves is not None:
        return leaves(bindings)
    from ..ir.traversal import free_vars

    names = {v: v.name_hint.lstrip("?") for v in free_vars(expr)}
    return {v: bindings[n] for v, n in names.items() if n in bindings}


def progress_bar(total: int | None, progress, what: str = ""):
    """The progress of a saturation run: one step per iteration (``progress`` as
    ``relaygraph.progress.resolve`` takes it; ``what`` starts it)."""
    from ..progress import phase

    return phase("saturate", what, total=total, unit="iteration", progress=progress)


def iteration_info(stats: IterationStats) -> str:
    """The sizes a progress line gives after an iteration."""
    return f"{stats.nodes} e-nodes, {stats.classes} e-classes"


def stop_info(report: SaturationReport) -> str:
    """What the last progress line of a saturation run says."""
    return f"{len(report.iterations)} iterations, stopped: {report.stop_reason}"


def saturate(egraph: RelayEGraph | IRModule | Function | Expr, rules, *, node_limit: int | None = 50_000,
             iter_limit: int | None = 30, time_limit: float | None = 60.0, isolate: bool | None = None,
             scheduler: str | None = "backoff", match_limit: int = 1000, ban_length: int = 5,
             progress: bool | str = True) -> SaturationReport:
    """Run ``rules`` on ``egraph`` until saturated or a limit is reached; returns the report.

    ``egraph`` is a RelayEGraph (changed in place) or a program to load into a new one
    (``report.egraph``). ``rules`` are rule objects from ``relaygraph.rewrite`` or egglog text.
    ``isolate`` (default: whenever there is a time limit) runs the e-graph in a worker process
    so that the time limit is hard; in this process it is checked between iterations only. The
    time limit counts from the first iteration (not the worker's start and rebuilding the e-graph).
    ``progress``: a line or bar step per iteration (see ``relaygraph.progress``).
    """
    from ..progress import resolve

    limits(node_limit=node_limit, iter_limit=iter_limit, time_limit=time_limit)
    progress = resolve(progress)
    if not isinstance(egraph, RelayEGraph):
        egraph = RelayEGraph(egraph)
    specs, python = prepare_rules(rules)
    if isolate is None:
        isolate = time_limit is not None
    if not isolate:
        egraph.materialize()  # live now, so that a rule egglog refuses is reported as it is installed
    install_rules(egraph, specs)
    options = dict(node_limit=node_limit, iter_limit=iter_limit, time_limit=time_limit, scheduler=scheduler,
                   match_limit=match_limit, ban_length=ban_length, progress=progress)
    try:
        if isolate:
            from .worker import saturate_in_worker

            return saturate_in_worker(egraph, specs, python, options)
        return Saturator(egraph, specs, python, **options).run()
    except RuleError as exc:
        raise _located_refusal(exc, rules) from None


_REFUSED = re.compile(r"rule (\S+) (unions terms of different types|makes an ill-typed term)")


def _located_refusal(exc: RuleError, rules) -> RuleError:
    """A rule refused while saturating, told as ``rules check`` tells it: at the rule's file:line,
    with the type it had and the type it would get (found by the soundness checker's typing)."""
    m = _REFUSED.match(getattr(exc, "message", "") or "")
    if m is None or exc.span is not None or isinstance(rules, str):
        return exc
    rule = next((r for r in rules if getattr(r, "name", None) == m.group(1)), None)
    span = getattr(rule, "span", None)
    if rule is None or span is None:
        return exc
    from ..rewrite.soundness import check_rule

    try:
        check_rule(rule, trials=3)
    except RuleError as found:
        return RuleError(f"{found.message}; refused", span)
    except Exception:  # noqa: BLE001 - the checker could not tell the types: say where, at least
        pass
    return RuleError(exc.message, span)
