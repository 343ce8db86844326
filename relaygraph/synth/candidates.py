"""Enumeration of terms and the candidate equalities their fingerprints suggest.

Terms are enumerated by op count. A term whose fingerprint (its values on every sample) equals
an earlier term's joins that term's class and is not used to build larger terms (Ruler's
pruning: its class already has a smaller representative). Terms above ``wide`` ops are a
binary op over two representatives with one op at their root, without literals (an
Enumo-style workload), which keeps the deeper layers small while still reaching
distributivity, linearity and ops that commute with a binary op.

Candidates: a term and the representative of its class (equal wherever either is typed);
then equalities that hold on part of the samples: where the left side types (the right side
may type more widely), or under a condition -- predicates of a small library (ranks, equal
ranks, equal shapes, dtype, ``identity_axes(?p)``, a variable with the type of the whole match)
under which it held on every sample where the left side types, having failed on some sample
outside it, the most general first (the checker refuses the ones that are too weak).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from ..ir.expr import Var
from ..ir.types import TensorType
from ..ops.builders import make_call
from ..ops.registry import lookup
from ..ty import infer_type_expr
from ..ty.dims import is_symbolic
from .samples import Samples
from .terms import (
    AttrFun,
    attr_choices,
    attr_variables,
    call,
    has_computed,
    lit,
    ops_of,
    size,
    var,
    variables,
)

__all__ = ["Candidate", "Predicate", "enumerate_terms", "find_candidates", "predicates", "literal_count",
           "reversible"]


@dataclass(frozen=True)
class Predicate:
    """A condition in the rule language and the samples where it holds."""

    text: str
    holds: frozenset[int]
    names: tuple[str, ...] = ()
    root: tuple | None = None  # the one left side it is about (a condition on ?root), if any


@dataclass
class Candidate:
    """A conjectured rule ``lhs => rhs [if cond]``, with the samples where it was seen to hold."""

    lhs: tuple
    rhs: tuple
    cond: Predicate | None
    held: frozenset[int]  # samples where both sides typed and agreed

    @property
    def key(self) -> tuple:
        """The order candidates are tried in: unconditional, small, without literals, with more
        variables (more general) first."""
        return (self.cond is not None, size(self.lhs) + size(self.rhs),
                literal_count(self.lhs) + literal_count(self.rhs), -len(variables(self.lhs)),
                -len(attr_variables(self.lhs, computed=False)), size(self.lhs),
                len(str(self.lhs)) + len(str(self.rhs)), str(self.lhs), str(self.rhs))


def enumerate_terms(ops: list[str], max_size: int, names, literals, wide: int,
                    samples: Samples) -> tuple[list[tuple], dict]:
    """(representatives in order, {term: representative} for every other term enumerated)."""
    leaves = [var(n) for n in names] + [lit(x) for x in literals]
    by_column: dict[tuple, tuple] = {}
    reps: list[tuple] = []
    reps_by_size: dict[int, list[tuple]] = {0: []}
    members: dict[tuple, tuple] = {}
    for leaf in leaves:
        col = samples.column(leaf)
        if col not in by_column:
            by_column[col] = leaf
            reps_by_size[0].append(leaf)
    choices = {o: attr_choices(o) for o in ops}
    seen: set[tuple] = set()
    for k in range(1, max_size + 1):
        made: list[tuple] = []
        if k <= wide:
            pool = {s: reps_by_size.get(s, []) for s in range(k)}
            for op in ops:
                arity = lookup(op).num_inputs
                for sizes in _compositions(k - 1, arity):
                    for args in product(*(pool[s] for s in sizes)):
                        if not any(variables(a) for a in args):
                            continue  # constants fold; no rule over them
                        if sum(literal_count(a) for a in args) > 1:
                            continue  # one literal per term: the rest is constant folding
                        _calls(op, args, choices[op], seen, made)
        else:
            for op, args in _deep_args(ops, k, reps_by_size):
                _calls(op, args, choices[op], seen, made)
        reps_by_size[k] = []
        for t in made:
            col = samples.column(t)
            if all(c is None for c in col):
                continue
            rep = by_column.get(col)
            if rep is None:
                by_column[col] = t
                reps_by_size[k].append(t)
            else:
                members[t] = rep
        reps += reps_by_size[k]
    return [*reps_by_size[0], *reps], members


def _calls(op: str, args: tuple, choices, seen: set, made: list) -> None:
    for attrs in choices:
        t = call(op, args, attrs)
        if t not in seen:
            seen.add(t)
            made.append(t)


def _deep_args(ops, k: int, reps_by_size: dict):
    """(op, arguments) of the terms above the wide layer (an Enumo-style workload): a binary op
    over two representatives with the same op at their root and no literals, such as
    ``add(multiply(?a, ?b), multiply(?a, ?c))``: where distributivity, linearity and ops
    commuting with a binary op show up."""
    by_root: dict[tuple[int, str], list[tuple]] = {}
    for s in range(1, k - 1):
        for t in reps_by_size.get(s, []):
            if t[0] == "o" and not _has_literal(t):
                by_root.setdefault((s, t[1]), []).append(t)
    for op in ops:
        if lookup(op).num_inputs != 2:
            continue
        for s in range(1, k - 1):
            for (size_x, root), xs in by_root.items():
                if size_x != s:
                    continue
                for x in xs:
                    for y in by_root.get((k - 1 - s, root), ()):
                        yield op, (x, y)


def _has_literal(t: tuple) -> bool:
    return literal_count(t) > 0


def literal_count(t: tuple) -> int:
    """Scalar literals in a term."""
    if t[0] == "l":
        return 1
    return sum(literal_count(a) for a in t[3]) if t[0] == "o" else 0


def _compositions(total: int, parts: int):
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def predicates(names, samples: Samples, kernels: bool = False) -> list[Predicate]:
    """The condition library over the variables: ranks, equal ranks, equal shapes, dtypes;
    with ``kernels``, a 1x1 convolution kernel (a float one too)."""
    out = []
    ss = samples.samples
    for n in names:
        for r in (0, 1, 2, 3):
            out.append(Predicate(f"rank(?{n}) == {r}",
                                 frozenset(i for i, s in enumerate(ss) if len(s.types[n].shape) == r), (n,)))
        out.append(Predicate(f'dtype(?{n}) == "float32"',
                             frozenset(i for i, s in enumerate(ss) if s.types[n].dtype == "float32"), (n,)))
        if kernels:
            one = frozenset(i for i, s in enumerate(ss) if len(s.types[n].shape) == 4
                            and tuple(s.types[n].shape[2:]) == (1, 1))
            text = f"rank(?{n}) == 4 and shape(?{n})[2] == 1 and shape(?{n})[3] == 1"
            out.append(Predicate(text, one, (n,)))
            out.append(Predicate(f'{text} and dtype(?{n}) == "float32"',
                                 frozenset(i for i in one if ss[i].types[n].dtype == "float32"), (n,)))
    for name in ("p", "q"):
        out.append(Predicate(f"identity_axes(?{name})", frozenset(
            i for i, s in enumerate(ss) if s.attrs.get(name) == tuple(range(len(s.attrs.get(name, ()))))),
            (name,)))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out.append(Predicate(f"rank(?{a}) == rank(?{b})", frozenset(
                j for j, s in enumerate(ss) if len(s.types[a].shape) == len(s.types[b].shape)), (a, b)))
            # a symbolic dimension never satisfies a comparison (the rule language's semantics)
            out.append(Predicate(f"shape(?{a}) == shape(?{b})", frozenset(
                j for j, s in enumerate(ss) if s.types[a].shape == s.types[b].shape
                and not any(is_symbolic(d) for d in s.types[a].shape)), (a, b)))
    return [p for p in out if p.holds]


def _orient(x: tuple, y: tuple, fixed: bool = False) -> tuple[tuple, tuple] | None:
    """(lhs, rhs) so that the right side needs nothing the left does not bind, bigger first
    (``fixed``: ``x`` must be the left side)."""
    bigger_first = (size(x), len(str(x))) >= (size(y), len(str(y)))
    orders = ((x, y),) if fixed else ((x, y), (y, x)) if bigger_first else ((y, x), (x, y))
    for lhs, rhs in orders:
        if has_computed(lhs):
            continue
        if not set(variables(rhs)) <= set(variables(lhs)):
            continue
        if not set(attr_variables(rhs)) <= set(attr_variables(lhs, computed=False)):
            continue
        if not _literals(rhs) <= _literals(lhs):
            continue  # the e-graph builds only constants the program has: a matched one
        return lhs, _root_shape(lhs, rhs)
    return None


def reversible(lhs: tuple, rhs: tuple) -> bool:
    """Whether ``rhs => lhs`` is a rule too: the right side computes no attribute and binds every
    variable and literal the left side has."""
    return (not has_computed(rhs) and not has_computed(lhs) and set(variables(rhs)) == set(variables(lhs))
            and set(attr_variables(rhs)) == set(attr_variables(lhs)) and _literals(rhs) == _literals(lhs))


ROOT_SHAPE = AttrFun("shape", ("root",))


def _root_shape(lhs: tuple, rhs: tuple) -> tuple:
    """A reshape at the right side's root, of a left side that is a reshape too, reshapes to the
    shape of the whole match (``newshape=shape(?root)``): the left side's drawn ``newshape``
    may be relative to its input (``0``, ``-1``, ``-4`` ...) and mean another shape there."""
    if rhs[0] == "o" and rhs[1] == "reshape" and lhs[0] == "o" and lhs[1] == "reshape":
        attrs = tuple((k, ROOT_SHAPE if k == "newshape" else v) for k, v in rhs[2])
        return ("o", "reshape", attrs, rhs[3])
    return rhs


def find_candidates(reps: list[tuple], members: dict, samples: Samples, names,
                    conditions: bool = True, max_cond_size: int = 2,
                    conditions_per_left: int = 12, conditions_per_pair: int = 3,
                    kernels: bool = False) -> list[Candidate]:
    """Candidate rules from the classes, then from partial agreement (see the module's text);
    ``kernels``: conditions on convolution kernels too."""
    out: list[Candidate] = []
    done: set[tuple] = set()
    for t, rep in members.items():
        pair = _orient(t, rep)
        if pair is not None and pair not in done:
            done.add(pair)
            out.append(Candidate(pair[0], pair[1], None, samples.typed(pair[0])))
    if not conditions:
        return out
    preds = predicates(names, samples, kernels)
    # left sides: the small terms, members of a class too (multiply(?a, 1f) is in the class of
    # add(?a, 0f), both typed on float32 samples only, and is ?a there)
    small = [t for t in reps if size(t) <= max_cond_size]
    small += [t for t in members if size(t) <= max_cond_size]
    cols = {t: samples.column(t) for t in (*reps, *small)}
    typed = {t: frozenset(i for i, c in enumerate(col) if c is not None) for t, col in cols.items()}
    by_typed: dict[frozenset, list[tuple]] = {}
    for t in reps:
        by_typed.setdefault(typed[t], []).append(t)
    cache: dict[frozenset, dict] = {}

    def groups_on(where: frozenset) -> dict:
        """The representatives typed wherever ``where`` holds, by their values there."""
        got = cache.get(where)
        if got is None:
            idx = sorted(where)
            got = cache[where] = {}
            for mask_t, ts in by_typed.items():
                if where <= mask_t:
                    for t in ts:
                        got.setdefault(tuple(cols[t][i] for i in idx), []).append(t)
        return got

    masks: dict[frozenset, list[tuple]] = {}
    for t in small:
        if t[0] == "o":
            masks.setdefault(typed[t], []).append(t)
    for mask, lefts in masks.items():
        restrictions = [(None, mask)]
        restrictions += sorted(((p, mask & p.holds) for p in preds
                                if len(mask & p.holds) >= 2 and mask & p.holds != mask),
                               key=lambda x: -len(x[1]))
        own = _own_predicates(lefts, mask, samples)
        found: dict[tuple, int] = {}
        conditioned: dict[tuple, int] = {}
        for pred, where in restrictions + own:
            idx = sorted(where)
            groups = groups_on(where)  # the right side may be larger than the small left side
            for left in lefts:
                if found.get(left, 0) >= conditions_per_left:
                    continue
                if pred is not None and not set(pred.names) <= set(variables(left)) | set(
                        attr_variables(left, computed=False)):
                    continue
                if pred is not None and pred.root is not None and pred.root != left:
                    continue
                key = tuple(cols[left][i] for i in idx)
                best = None
                for right in groups.get(key, ()):
                    if right == left:
                        continue
                    if pred is not None and _agree(cols[left], cols[right], mask):
                        continue  # equal without the condition: found unconditionally
                    pair = _orient(left, right, fixed=True)  # the condition is on the left side
                    if pair is None or pair in done or conditioned.get(pair, 0) >= conditions_per_pair:
                        continue
                    if best is None or (size(right), len(str(right))) < (size(best[1]), len(str(best[1]))):
                        best = pair
                if best is not None:
                    # the same equality under stronger conditions too: the checker may refuse
                    # the weaker one (on shapes the samples do not have)
                    found[left] = found.get(left, 0) + 1
                    if pred is None:
                        done.add(best)
                    else:
                        conditioned[best] = conditioned.get(best, 0) + 1
                    out.append(Candidate(best[0], best[1], pred, where))
                    if pred is not None and any(_mixed_dtypes(o) for o in ops_of(best[0])):
                        # the samples give every variable one dtype; an op that types inputs of
                        # two dtypes (nn.dense) may still need them equal (the checker decides)
                        out.append(Candidate(best[0], best[1], _same_dtypes(pred, best[0]), where))
    return out


_MIXED: dict[str, bool] = {}


def _mixed_dtypes(op: str) -> bool:
    """Whether the op's type relation accepts a float32 and an int32 input together."""
    got = _MIXED.get(op)
    if got is None:
        opdef = lookup(op)
        got = False
        if opdef.num_inputs == 2:
            try:
                infer_type_expr(make_call(op, Var("x", TensorType((2, 2), "float32")),
                                          Var("y", TensorType((2, 2), "int32"))))
                got = True
            except Exception:  # noqa: BLE001 - refused: the op needs one dtype
                got = False
        _MIXED[op] = got
    return got


def _same_dtypes(pred: Predicate, left: tuple) -> Predicate:
    names = variables(left)
    extra = " and ".join(f"dtype(?{a}) == dtype(?{b})" for a, b in zip(names, names[1:], strict=False))
    text = f"{pred.text} and {extra}" if extra else pred.text
    return Predicate(text, pred.holds, pred.names, pred.root)


def _own_predicates(lefts, mask: frozenset, samples: Samples) -> list[tuple[Predicate, frozenset]]:
    """Conditions on one left side: ``shape(?x) == shape(?root)`` (a variable has the type of the
    whole matched term), with the samples where they hold."""
    out = []
    for left in lefts:
        for n in variables(left):
            holds = frozenset(i for i in mask if samples.type_on(left, i) == samples.samples[i].types[n])
            if len(holds) >= 2 and holds != mask:
                out.append((Predicate(f"shape(?{n}) == shape(?root) and dtype(?{n}) == dtype(?root)",
                                      holds, (n,), left), holds))
    return out


def _literals(t: tuple) -> set[float]:
    if t[0] == "l":
        return {t[1]}
    return set().union(*(_literals(a) for a in t[3])) if t[0] == "o" else set()


def _agree(a: tuple, b: tuple, mask: frozenset) -> bool:
    return all(a[i] == b[i] for i in mask)
