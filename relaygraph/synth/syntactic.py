"""Cheap derivability: rewriting enumerated terms (tuples, ``terms.py``) with the rules kept so
far, before any e-graph is built.

A candidate ``l = r`` is derivable when rewriting each side a few steps with the kept
unconditional rules reaches a common term. Every step is an application of a sound rule at
some position, so a common term is an equational proof; the search is bounded (steps and terms
per side), so a miss says nothing and the e-graph is asked later. Conditional rules are left to
the e-graph, which knows the types their conditions read.
"""

from __future__ import annotations

from .terms import AttrFun, AttrVar

__all__ = ["TermRewriter"]


class TermRewriter:
    """Unconditional rules over tuple terms, indexed by the op at the root of their left side."""

    def __init__(self, steps: int = 2, max_terms: int = 400) -> None:
        self.steps, self.max_terms = steps, max_terms
        self.by_op: dict[str, list[tuple[tuple, tuple]]] = {}
        self.count = 0

    def add(self, lhs: tuple, rhs: tuple) -> None:
        """Add the rule ``lhs => rhs`` (its left side an op call)."""
        if lhs[0] == "o":
            self.by_op.setdefault(lhs[1], []).append((lhs, rhs))
            self.count += 1

    def rewrites(self, term: tuple):
        """Every term one rule application away from ``term``."""
        if term[0] != "o":
            return
        for lhs, rhs in self.by_op.get(term[1], ()):
            binding = _match(lhs, term, {})
            if binding is not None:
                made = _build(rhs, binding)
                if made is not None:
                    yield made
        _, op, attrs, args = term
        for i, a in enumerate(args):
            for new in self.rewrites(a):
                yield ("o", op, attrs, (*args[:i], new, *args[i + 1:]))

    def reach(self, term: tuple) -> set[tuple]:
        """The terms within ``steps`` rewrites of ``term`` (at most about ``max_terms``)."""
        seen = {term}
        frontier = [term]
        for _ in range(self.steps):
            nxt = []
            for t in frontier:
                for new in self.rewrites(t):
                    if new not in seen:
                        seen.add(new)
                        nxt.append(new)
                        if len(seen) >= self.max_terms:
                            return seen
            frontier = nxt
            if not frontier:
                break
        return seen

    def joinable(self, left: tuple, right: tuple) -> bool:
        """Whether bounded rewriting of both sides meets (a proof of ``left = right``)."""
        if left == right:
            return True
        if not self.count:
            return False
        a = self.reach(left)
        if right in a:
            return True
        b = self.reach(right)
        return not a.isdisjoint(b)


def _match(pat: tuple, term: tuple, binding: dict) -> dict | None:
    """Bind the pattern's variables (term and attribute) to parts of ``term``, or None."""
    stack = [(pat, term)]
    while stack:
        p, t = stack.pop()
        kind = p[0]
        if kind == "v":
            bound = binding.get(p)
            if bound is None:
                binding[p] = t
            elif bound != t:
                return None
        elif kind == "l":
            if t != p:
                return None
        else:
            if t[0] != "o" or t[1] != p[1] or len(t[3]) != len(p[3]) or len(t[2]) != len(p[2]):
                return None
            for (pk, pv), (tk, tv) in zip(p[2], t[2], strict=True):
                if pk != tk:
                    return None
                if isinstance(pv, AttrVar):
                    key = ("attr", pv.name)
                    bound = binding.get(key)
                    if bound is None:
                        binding[key] = tv
                    elif bound != tv:
                        return None
                elif pv != tv:
                    return None
            stack.extend(zip(p[3], t[3], strict=True))
    return binding


def _attr(v, binding: dict):
    if isinstance(v, AttrVar):
        return binding.get(("attr", v.name))
    if isinstance(v, AttrFun):
        if v.args == ("root",):
            return v  # shape(?root): the same wherever it is built
        args = [binding.get(("attr", a)) for a in v.args]
        if not all(isinstance(a, AttrVar) for a in args):
            return None  # a computed value of computed values: not a term of the enumeration
        return AttrFun(v.name, tuple(a.name for a in args))
    return v


def _build(t: tuple, binding: dict) -> tuple | None:
    if t[0] == "v":
        return binding.get(t)
    if t[0] == "l":
        return t
    attrs = []
    for k, v in t[2]:
        got = _attr(v, binding)
        if got is None and v is not None:
            return None
        attrs.append((k, got))
    args = []
    for a in t[3]:
        got = _build(a, binding)
        if got is None:
            return None
        args.append(got)
    return ("o", t[1], tuple(attrs), tuple(args))
