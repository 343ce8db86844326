"""Explanations of an optimization: which rules made each changed op of the extracted program.

``rg.optimize(..., explain=True)`` keeps, per rewritten function, the e-graph, the extraction
graph, the choice and the expression it read back for each chosen class. For every class of the
extracted program whose chosen node differs from the original program's node in that class
(another op, other attributes, or other operand classes), the two local terms are cut out of
the e-graph: the extracted side down to the classes that hold original nodes, the original side
down to those same classes (or a few levels), each cut class becoming one typed variable on both
sides. egglog exposes no proofs, so the chain is found by replaying: the rules that fired during
the run are applied to the two local terms, one iteration at a time, recording which applied
(``relaygraph.synth.derive.prove``), and reduced to a minimal set. Identical local changes (the
same layer repeated) are explained once and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RelayError
from ..ir.expr import Call, Constant, Expr, Op, Var
from ..ir.traversal import post_order
from .derive import Derivation, format_derivation, prove

__all__ = ["Change", "Explanation", "explain"]

MAX_DEPTH = 6  # levels of the original term cut out below a changed class
MAX_CHANGES = 40  # distinct local changes explained (the rest are counted)


@dataclass
class Change:
    """One local change: the original term, the extracted term, and the rules between them."""

    function: str
    before: Expr
    after: Expr
    derivation: Derivation | None
    places: int = 1

    @property
    def ops_before(self) -> list[str]:
        return _ops(self.before)

    @property
    def ops_after(self) -> list[str]:
        return _ops(self.after)


@dataclass
class Explanation:
    """The changes of an optimization, each with its chain of rules."""

    changes: list[Change] = field(default_factory=list)
    unexplained: int = 0  # distinct changes past MAX_CHANGES

    def text(self) -> str:
        """What ``relaygraph optimize --explain`` prints."""
        if not self.changes:
            return "explanation: the extracted program is the original one (no op changed)"
        total = sum(c.places for c in self.changes)
        lines = [f"explanation: {total} changed op(s) of the result, {len(self.changes)} distinct local "
                 f"change(s); the rules that made each, per iteration, from the original program:"]
        for c in self.changes:
            where = f"@{c.function}" + (f", {c.places} places" if c.places > 1 else "")
            lines.append(f"- {' . '.join(c.ops_after)}  in place of  {' . '.join(c.ops_before)}  ({where})")
            lines.append(f"    was: {_one_line(c.before)}")
            lines.append(f"    now: {_one_line(c.after)}")
            how = format_derivation(c.derivation) if c.derivation is not None else "not replayed"
            lines.append(f"    rules: {how}")
        if self.unexplained:
            lines.append(f"... and {self.unexplained} more distinct change(s), not replayed")
        return "\n".join(lines)

    def to_json(self) -> list[dict]:
        return [{"function": c.function, "before": _one_line(c.before), "after": _one_line(c.after),
                 "places": c.places, "proved": None if c.derivation is None else c.derivation.proved,
                 "steps": [] if c.derivation is None else c.derivation.steps} for c in self.changes]


def _ops(e: Expr) -> list[str]:
    out = []
    for n in post_order(e):
        if isinstance(n, Call) and isinstance(n.op, Op) and n.op.name not in out:
            out.append(n.op.name)
    return list(reversed(out))


def _one_line(e: Expr, width: int = 160) -> str:
    """A local term as nested calls, ``%v`` for its variables (attributes left out)."""
    text: dict[Expr, str] = {}
    for n in post_order(e):
        if isinstance(n, Op):
            continue
        if isinstance(n, Var):
            text[n] = f"%{n.name_hint}"
        elif isinstance(n, Constant):
            text[n] = "const" if n.data.ndim else f"{n.data.item():g}"
        elif isinstance(n, Call):
            head = n.op.name if isinstance(n.op, Op) else text.get(n.op, "fn")
            text[n] = f"{head}({', '.join(text.get(a, '...') for a in n.args)})"
        else:
            kids = [text.get(c, "...") for c in n.children() if not isinstance(c, Op)]
            text[n] = f"{type(n).__name__}({', '.join(kids)})"
        if len(text[n]) > width:
            text[n] = text[n][:width - 3] + "..."
    return text[e]


class _Cutter:
    """Local terms of one extracted function, with cut classes as shared typed variables."""

    def __init__(self, egraph, graph, choice: dict[int, int]) -> None:
        self.egraph, self.graph, self.choice = egraph, graph, choice
        snap = egraph.snapshot()
        index = {name: k for k, name in enumerate(graph.class_ids)}
        self.class_of_handle: dict[int, int] = {}
        for h, cls in snap.class_of.items():
            k = index.get(f"c{snap.handle.get(cls, h)}")
            if k is not None:
                self.class_of_handle[h] = k
        self.original: dict[int, Expr] = {}  # class -> the original node named by its handle
        self.class_of_expr: dict[Expr, int] = {}
        for expr, h in egraph.program_handles.items():
            k = self.class_of_handle.get(h)
            if k is None:
                continue
            self.class_of_expr[expr] = k
            if graph.class_ids[k] == f"c{h}":
                self.original[k] = expr

    def changed(self, built: dict[int, Expr]) -> list[int]:
        """Classes whose chosen node is not the original node there, in the extracted program."""
        out = []
        for k, expr in built.items():
            orig = self.original.get(k)
            if orig is None or expr is orig or not isinstance(expr, Call) or not isinstance(expr.op, Op):
                continue
            kids = list(self.graph.child_classes[self.choice[k]])
            same_op = isinstance(orig, Call) and orig.op == expr.op and orig.attrs == expr.attrs
            orig_kids = [self.class_of_expr.get(a) for a in getattr(orig, "args", ())]
            if same_op and orig_kids == kids:
                continue  # only rebuilt over changed operands
            out.append(k)
        return out

    def cut(self, k: int) -> tuple[Expr, Expr]:
        """(original local term, extracted local term) at class ``k``."""
        names: dict[int, Var] = {}

        def var(c: int) -> Var:
            v = names.get(c)
            if v is None:
                h = int(self.graph.class_ids[c][1:]) if self.graph.class_ids[c].startswith("c") else None
                t = self.egraph.type_of(h) if h is not None else None
                v = names[c] = Var(f"v{len(names)}", t)
            return v

        # the extracted side: expand classes with no original node, stop at the others
        after = self._extracted(k, var)
        frontier = set(names)
        # the original side: expand until the frontier's classes (or leaves, or MAX_DEPTH)
        before = self._original(self.original[k], frontier, var)
        return before, after

    def _extracted(self, k: int, var) -> Expr:
        from ..egraph.readback import rebuild_node

        memo: dict[int, Expr] = {}
        cache: dict = {}
        stack = [(k, False, 0)]
        while stack:
            c, expanded, depth = stack.pop()
            if c in memo:
                continue
            if c != k and (c in self.original or depth > MAX_DEPTH):
                memo[c] = var(c)
                continue
            node = self.choice[c]
            kids = self.graph.child_classes[node]
            if not expanded:
                stack.append((c, True, depth))
                stack.extend((x, False, depth + 1) for x in reversed(kids) if x not in memo)
                continue
            memo[c] = rebuild_node(self.graph, node, [memo[x] for x in kids], self.egraph.tables, cache)
        return memo[k]

    def _original(self, root: Expr, frontier: set[int], var) -> Expr:
        memo: dict[Expr, Expr] = {}
        stack: list = [(root, False, 0)]
        while stack:  # children first; a cut node becomes its class's variable
            e, expanded, d = stack.pop()
            if e in memo:
                continue
            if e is not root and self._stop(e, frontier, d):
                c = self.class_of_expr.get(e)
                # a constant off the frontier stays itself: rules match literals (gelu's 0.5)
                keep = c is None or (isinstance(e, Constant) and c not in frontier)
                memo[e] = e if keep else var(c)
                continue
            kids = [ch for ch in e.children() if not isinstance(ch, Op)]
            if not expanded:
                stack.append((e, True, d))
                stack.extend((ch, False, d + 1) for ch in reversed(kids) if ch not in memo)
                continue
            memo[e] = e.with_children(tuple(memo.get(ch, ch) for ch in e.children()))
        return memo[root]

    def _stop(self, e: Expr, frontier: set[int], d: int) -> bool:
        c = self.class_of_expr.get(e)
        return (c in frontier or isinstance(e, (Var, Constant)) or d >= MAX_DEPTH
                or not isinstance(e, Call))


def explain(result, iterations: int | None = None, node_limit: int = 20_000) -> Explanation:
    """Explain an ``rg.optimize(..., explain=True)`` result: per changed op, the rules that made it."""
    kept = getattr(result, "explain_data", None)
    if not kept:
        raise RelayError("this optimize result keeps no e-graph to explain; run "
                         "rg.optimize(..., explain=True) (relaygraph optimize --explain)")
    out = Explanation()
    seen: dict[tuple[str, str], Change] = {}
    for name, (egraph, graph, choice, built, rules, report) in kept.items():
        cutter = _Cutter(egraph, graph, choice)
        fired = {n for n, c in report.matches.items() if c}
        used = [r for r in rules if getattr(r, "name", None) in fired]
        its = iterations or max(5, len(report.iterations))
        for k in cutter.changed(built):
            before, after = cutter.cut(k)
            key = (str(before), str(after))
            if key in seen:
                seen[key].places += 1
                continue
            if len(seen) >= MAX_CHANGES:
                out.unexplained += 1
                continue
            try:
                d = prove(before, after, used, iterations=its, node_limit=node_limit)
            except RelayError:
                d = None
            change = seen[key] = Change(name, before, after, d)
            out.changes.append(change)
    return out
