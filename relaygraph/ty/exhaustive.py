"""Exhaustiveness of ``match``: is every value matched by some clause? (Maranget's usefulness
algorithm on the pattern matrix; it needs only the ADT definitions, not the types.)"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.adt import Constructor, PatternConstructor, PatternTuple, PatternVar, PatternWildcard

__all__ = ["missing_case"]


def _is_wild(p) -> bool:
    return isinstance(p, (PatternWildcard, PatternVar))


def missing_case(patterns: list, constructors_of: Callable[[Constructor], list | None]) -> str | None:
    """A value no pattern matches, as pattern text (``Cons(_, Nil)``), or None if exhaustive.

    ``constructors_of(c)`` lists every constructor of ``c``'s ADT (None when unknown, in which
    case a constructor column is treated as covering only the constructors that appear).
    """
    example = _missing([[p] for p in patterns], 1, constructors_of)
    return None if example is None else example[0]


def _specialize(rows: list, head, arity: int) -> list:
    out = []
    for row in rows:
        p, rest = row[0], row[1:]
        if _is_wild(p):
            out.append([PatternWildcard()] * arity + rest)
        elif isinstance(head, Constructor) and isinstance(p, PatternConstructor):
            if p.constructor is head:
                out.append(list(p.patterns) + rest)
        elif head == "tuple" and isinstance(p, PatternTuple):
            out.append(list(p.patterns) + rest)
    return out


def _missing(rows: list, ncols: int, constructors_of) -> list[str] | None:
    if not rows:
        return ["_"] * ncols
    if ncols == 0:
        return None
    heads = [r[0] for r in rows if not _is_wild(r[0])]
    if not heads:
        sub = _missing([r[1:] for r in rows], ncols - 1, constructors_of)
        return None if sub is None else ["_", *sub]
    tuples = [p for p in heads if isinstance(p, PatternTuple)]
    if tuples:
        arity = len(tuples[0].patterns)
        sub = _missing(_specialize(rows, "tuple", arity), arity + ncols - 1, constructors_of)
        if sub is None:
            return None
        return [f"({', '.join(sub[:arity])}{',' if arity == 1 else ''})", *sub[arity:]]
    seen = []
    for p in heads:
        if p.constructor not in seen:
            seen.append(p.constructor)
    every = constructors_of(seen[0]) or seen
    absent = [c for c in every if c not in seen]
    if absent:
        # some constructor appears in no clause head: only wildcard rows can cover it
        sub = _missing([r[1:] for r in rows if _is_wild(r[0])], ncols - 1, constructors_of)
        if sub is None:
            return None
        c = absent[0]
        args = f"({', '.join(['_'] * len(c.inputs))})" if c.inputs else ""
        return [f"{c.name_hint}{args}", *sub]
    for c in every:
        arity = len(c.inputs)
        sub = _missing(_specialize(rows, c, arity), arity + ncols - 1, constructors_of)
        if sub is not None:
            args = f"({', '.join(sub[:arity])})" if arity else ""
            return [f"{c.name_hint}{args}", *sub[arity:]]
    return None
