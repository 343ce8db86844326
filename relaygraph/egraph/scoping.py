"""Egglog helpers for rules about variables: free variables, single use, explicit substitution.

Generated from the op table (one rule per constructor), for the ruleset that uses them:

- ``(fv e)``: the set of variable keys free in ``e`` (``VarSet``). Merged by intersection: an
  e-class's value depends only on variables free in every one of its representations.
- ``(once k e)``: some representation of ``e`` uses the variable ``k`` exactly once.
- ``(Subst e k v)``: ``e`` with ``(RVar k)`` replaced by ``v``; rules push it down to the
  leaves and union it with the result. A Subst node is not Relay: it always ends up in a class
  with real terms, and readers and extractors skip it. Binders are unique in the encoding
  (a variable key names one Var object), so substitution cannot capture; a let that would
  capture (its variable free in ``v``) is left alone.
"""

from __future__ import annotations

from ..ops.registry import all_ops
from .encoding import op_constructor

__all__ = ["scoping_declarations", "scoping_rules"]

_SHAPES = {  # the expression inputs of the built-in constructors ("L" marks an RList)
    "RTuple": "L", "RProj": "E_", "RIf": "EEE", "RCall": "EL",
}


def _rule(ruleset: str, name: str, facts: list[str], actions: list[str]) -> str:
    return (f"(rule ({' '.join(facts)}) ({' '.join(actions)}) :ruleset {ruleset} "
            f":name \"scope:{name}@{ruleset}\")")


def _union(sets: list[str]) -> str:
    if not sets:
        return "(set-empty)"
    out = sets[-1]
    for s in reversed(sets[:-1]):
        out = f"(set-union {s} {out})"
    return out


def _constructors():
    """(name, kinds of the fields) for every constructor whose children are expressions:
    ``E`` an RExpr input, ``L`` an RList input, ``_`` a literal field."""
    out = [(name, shape) for name, shape in _SHAPES.items()]
    for op in all_ops():
        out.append((op_constructor(op), "E" * (op.num_inputs or 0) + "_" * len(op.attrs)))
    return out


def scoping_declarations() -> list[str]:
    """The sorts, functions, relations and constructors of the analyses."""
    return [
        "(sort VarSet (Set String))",
        "(function fv (RExpr) VarSet :merge (set-intersect old new))",
        "(function fvl (RList) VarSet :merge (set-intersect old new))",
        "(relation once (String RExpr))",
        "(relation oncel (String RList))",
        "(constructor Subst (RExpr String RExpr) RExpr)",
        "(constructor SubstL (RList String RExpr) RList)",
    ]


def scoping_rules(ruleset: str) -> list[str]:
    """The rules that compute the analyses and push substitutions down, in ``ruleset``."""
    r = ruleset
    rules = [
        _rule(r, "fv/RVar", ["(= e (RVar k))"], ["(set (fv e) (set-of k))"]),
        _rule(r, "fv/RConst", ["(= e (RConst k))"], ["(set (fv e) (set-empty))"]),
        _rule(r, "fv/RGlobal", ["(= e (RGlobal k))"], ["(set (fv e) (set-empty))"]),
        _rule(r, "fv/RNil", ["(= l (RNil))"], ["(set (fvl l) (set-empty))"]),
        _rule(r, "fv/RCons", ["(= l (RCons a t))", "(= s (fv a))", "(= u (fvl t))"],
              ["(set (fvl l) (set-union s u))"]),
        _rule(r, "fv/RLet", ["(= e (RLet k a b))", "(= s (fv a))", "(= u (fv b))"],
              ["(set (fv e) (set-union s (set-remove u k)))"]),
        _rule(r, "once/RVar", ["(= e (RVar k))"], ["(once k e)"]),
        _rule(r, "once/RCons-head", ["(= l (RCons a t))", "(once k a)", "(= u (fvl t))",
                                     "(set-not-contains u k)"], ["(oncel k l)"]),
        _rule(r, "once/RCons-tail", ["(= l (RCons a t))", "(oncel k t)", "(= s (fv a))",
                                     "(set-not-contains s k)"], ["(oncel k l)"]),
        _rule(r, "once/RLet-value", ["(= e (RLet y a b))", "(once k a)", "(= u (fv b))",
                                     "(set-not-contains u k)"], ["(once k e)"]),
        _rule(r, "once/RLet-body", ["(= e (RLet y a b))", "(once k b)", "(!= k y)", "(= s (fv a))",
                                    "(set-not-contains s k)"], ["(once k e)"]),
        _rule(r, "subst/free", ["(= e (Subst b k v))", "(= s (fv b))", "(set-not-contains s k)"],
              ["(union e b)"]),
        _rule(r, "subst/RVar", ["(= e (Subst (RVar k) k v))"], ["(union e v)"]),
        _rule(r, "subst/RNil", ["(= e (SubstL (RNil) k v))"], ["(union e (RNil))"]),
        _rule(r, "subst/RCons", ["(= e (SubstL (RCons a t) k v))"],
              ["(union e (RCons (Subst a k v) (SubstL t k v)))"]),
        _rule(r, "subst/RLet", ["(= e (Subst (RLet y a b) k v))", "(!= y k)", "(= s (fv v))",
                                "(set-not-contains s y)"],
              ["(union e (RLet y (Subst a k v) (Subst b k v)))"]),
        _rule(r, "subst/RLet-shadow", ["(= e (Subst (RLet k a b) k v))"],
              ["(union e (RLet k (Subst a k v) b))"]),
    ]
    for name, shape in _constructors():
        rules.extend(_generic_rules(r, name, shape))
    return rules


def _generic_rules(r: str, name: str, shape: str) -> list[str]:
    """fv, once and Subst rules of a constructor whose inputs are expressions and lists."""
    fields = [f"c{i}" for i in range(len(shape))]
    node = f"({name}{''.join(' ' + f for f in fields)})"
    kids = [(f, kind) for f, kind in zip(fields, shape, strict=True) if kind in "EL"]
    fv_of = {"E": "fv", "L": "fvl"}
    once_of = {"E": "once", "L": "oncel"}
    sets = [f"s{i}" for i in range(len(kids))]
    rules = [_rule(r, f"fv/{name}",
                   [f"(= e {node})"] + [f"(= {s} ({fv_of[kind]} {f}))" for s, (f, kind) in
                                        zip(sets, kids, strict=True)],
                   [f"(set (fv e) {_union(sets)})"])]
    for i, (f, kind) in enumerate(kids):
        others = []
        for j, (g, gkind) in enumerate(kids):
            if j != i:
                others += [f"(= {sets[j]} ({fv_of[gkind]} {g}))", f"(set-not-contains {sets[j]} k)"]
        rules.append(_rule(r, f"once/{name}/{i}", [f"(= e {node})", f"({once_of[kind]} k {f})"] + others,
                           ["(once k e)"]))
    if kids:
        pushed = " ".join(
            f if kind == "_" else (f"(Subst {f} k v)" if kind == "E" else f"(SubstL {f} k v)")
            for f, kind in zip(fields, shape, strict=True))
        rules.append(_rule(r, f"subst/{name}", [f"(= e (Subst {node} k v))"],
                           [f"(union e ({name} {pushed}))"]))
    return rules
