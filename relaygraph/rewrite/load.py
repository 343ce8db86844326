"""Loading rule files: ``.rules`` (Relay syntax) and ``.egg`` (egglog), into Rule objects."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ..errors import RuleError
from ..ops.registry import REQUIRED, lookup
from ..validate import read_text
from .cond import Kinds, RuleSyntaxError, parse_expression
from .native import VarTerm
from .pattern import (
    AComputed,
    AVar,
    PatternError,
    PBinder,
    PCall,
    PIf,
    PLet,
    PProj,
    PSubst,
    PTuple,
    PVar,
    side_to_pattern,
    walk,
)
from .rule import AnalysisRule, Rule, root_names
from .sidetext import ANON, AnonNames, SideText, prepare_side
from .syntax import RuleText, SourceFile, parse_statement, read_statements

__all__ = ["load_rules", "parse_rules", "rule_files"]

_RESERVED = re.compile(r"root\d*")


def rule_files(paths) -> list[Path]:
    """The rule files named by ``paths`` (files, or directories of ``.rules``/``.egg`` files)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix in (".rules", ".egg"))
            if not found:
                raise RuleError(f"{p}: no .rules or .egg files in this directory")
            out += found
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such rule file or directory: {p}")
    return out


def load_rules(paths) -> list:
    """The rules of rule files (``.rules`` or ``.egg``) or directories of them, in order."""
    rules: list = []
    files = rule_files(paths)
    for f in files:
        text = read_text(f, RuleError, "rule file")
        if f.suffix == ".egg":
            from .egg import parse_egg

            rules += parse_egg(text, str(f), ruleset=f.stem)
        else:
            rules += parse_rules(text, str(f), ruleset=f.stem)
    if not rules:
        raise RuleError(f"{', '.join(map(str, files))}: no rules (only comments)")
    _check_unique(rules)
    return rules


def _check_unique(rules) -> None:
    names: dict[str, object] = {}
    for r in rules:
        if r.name in names:
            where = f" ({r.span.source_name}:{r.span.line})" if r.span else ""
            raise RuleError(f"rule {r.name}{where} is defined twice", r.span)
        names[r.name] = r


def parse_rules(text: str, source_name: str = "<string>", ruleset: str = "rules") -> list[Rule]:
    """The rules of ``.rules`` text; RuleError naming file:line:column and the rule if bad.

    Rules that use ``free``, ``once`` or ``subst`` are preceded by their ruleset's analysis
    (an AnalysisRule named ``<ruleset>-scoping``)."""
    src = SourceFile(source_name, text)
    rules: list[Rule] = []
    for stmt in read_statements(src):
        item = parse_statement(src, stmt, ruleset)
        if isinstance(item, str):
            ruleset = item
            continue
        made = _make_rules(src, item)
        needs = {r.ruleset for r in made if r.uses_scoping} - {
            r.ruleset for r in rules if isinstance(r, AnalysisRule)}
        rules += [AnalysisRule(rs, src.span(item.offset)) for rs in sorted(needs)]
        rules += made
    _check_unique(rules)
    return rules


_LET_BINDER = re.compile(r"\blet\s+\?([A-Za-z_][A-Za-z0-9_]*)")


def _make_rules(src: SourceFile, rt: RuleText) -> list[Rule]:
    anon = AnonNames()
    binders = frozenset(_LET_BINDER.findall(rt.lhs.text) + _LET_BINDER.findall(rt.rhs.text))
    sides = []
    for piece in (rt.lhs, rt.rhs):
        side = prepare_side(piece, anon)
        if side.errors:
            message, offset = side.errors[0]
            raise src.error(message, offset, rt.name)
        try:
            pattern = side_to_pattern(side, f"{src.name}#{rt.name}", binders)
        except PatternError as exc:
            raise src.error(str(exc), side.file_offset(exc.pos or 0), rt.name) from None
        sides.append((side, pattern))
    forward = _Direction(src, rt, rt.name, sides[0], sides[1]).make()
    rules = [forward]
    if rt.arrow == "<=>":
        backward = _Direction(src, rt, rt.name + "<=", sides[1], sides[0], reverse=True).make()
        if _signature(backward) != _signature(forward):
            rules.append(backward)
    return rules


def _signature(rule: Rule) -> str:
    """The rule with its variables renamed in order of appearance (to spot symmetry); a rule
    with a Python part is its own (its match relation is named after it)."""
    if rule.python_rewrite is not None:
        return rule.name
    names: dict[str, str] = {}
    parts = [_shape(p, names) for p in (*rule.lhs, *rule.rhs)]
    parts += [_shape(f, names) for f in rule.native_facts]
    parts += [_shape(v, names) for v in rule.native_values]
    return " ".join(parts)


_NAMED = (PVar, PBinder, AVar, VarTerm)  # their ``name`` is a pattern variable


def _shape(x, names: dict[str, str]) -> str:
    """A pattern or condition fact as text, pattern variables renamed (positions left out)."""
    if isinstance(x, (tuple, list)):
        return "(" + " ".join(_shape(v, names) for v in x) + ")"
    if not dataclasses.is_dataclass(x) or isinstance(x, type):
        return repr(x)
    out = []
    for f in dataclasses.fields(x):
        if not f.compare:
            continue
        value = getattr(x, f.name)
        renamed = (f.name == "name" and isinstance(x, _NAMED)) or f.name in ("binder", "var", "expr")
        if renamed and isinstance(value, str):
            value = names.setdefault(value, f"v{len(names)}")
        out.append(value if isinstance(value, str) else _shape(value, names))
    return f"{type(x).__name__}({' '.join(out)})"


class _Direction:
    """Checks and builds one direction of a rule."""

    def __init__(self, src: SourceFile, rt: RuleText, name: str, left, right, reverse=False) -> None:
        self.src, self.rt, self.name, self.reverse = src, rt, name, reverse
        (self.lside, self.lpat), (self.rside, self.rpat) = left, right
        self.lpiece, self.rpiece = (rt.rhs, rt.lhs) if reverse else (rt.lhs, rt.rhs)
        self.spreads: dict[str, list[str]] = {}

    def fail(self, message: str, side: SideText | None = None, pos: int = 0,
             var: str | None = None) -> RuleError:
        """A RuleError at a variable's first use, a position of a side, or the rule's start."""
        offset = self.rt.offset
        if side is not None:
            offset = side.file_offset(pos)
        if var is not None:
            pieces = (self.rpiece, self.lpiece) if side is self.rside else (self.lpiece, self.rpiece)
            for piece in pieces:
                m = re.search(r"\?" + re.escape(var) + r"\b", piece.text)
                if m:
                    offset = piece.offset + m.start()
                    break
        return self.src.error(message, offset, self.rt.name)

    def make(self) -> Rule:
        lhs, rhs = self.lpat, self.rpat
        multi = (isinstance(lhs, PTuple) and isinstance(rhs, PTuple) and len(lhs.fields) >= 2
                 and len(lhs.fields) == len(rhs.fields))
        lroots = lhs.fields if multi else (lhs,)
        rroots = rhs.fields if multi else (rhs,)
        kinds = self.kinds(lroots, multi)
        lroots = tuple(self.expand_spreads(p, left=True) for p in lroots)
        rroots = tuple(self.expand_spreads(p, left=False) for p in rroots)
        kinds = self.kinds(lroots, multi)
        self.check_right(rroots, kinds)
        cond = None
        if self.rt.cond is not None:
            try:
                cond = parse_expression(self.rt.cond, kinds, "condition")
            except RuleSyntaxError as exc:
                raise self.src.error(str(exc), exc.offset, self.rt.name) from None
        computed = []
        for piece in self.rside.computed:
            try:
                computed.append(parse_expression(piece, kinds, "computed attribute"))
            except RuleSyntaxError as exc:
                raise self.src.error(str(exc), exc.offset, self.rt.name) from None
        scoping = any(isinstance(n, PSubst) for p in rroots for n in walk(p)) or (
            cond is not None and cond.uses_scoping())
        rule = Rule(self.name, self.rt.ruleset, lroots, rroots, cond, computed, kinds,
                    text=self._statement(),
                    span=self.src.span(self.rt.offset), multi=multi, uses_scoping=scoping)
        if rule.python_rewrite is not None:
            self.check_python(rule)
        return rule

    def _statement(self) -> str:
        end = max(p.offset + len(p.text) for p in (self.rt.lhs, self.rt.rhs, self.rt.cond) if p)
        return " ".join(self.src.code[self.rt.offset:end].split())

    def kinds(self, roots, multi: bool) -> Kinds:
        classes, attrs, binders, sites = set(root_names(len(roots), multi)), set(), set(), {}
        for p in roots:
            for n in walk(p):
                if isinstance(n, PBinder):
                    binders.add(n.name)
                elif isinstance(n, PVar):
                    if _RESERVED.fullmatch(n.name):
                        raise self.fail(f"?{n.name} is reserved for the matched left side",
                                        var=n.name)
                    classes.add(n.name)
                elif isinstance(n, PLet):
                    binders.add(n.binder)
                elif isinstance(n, PSubst):
                    raise self.fail("subst(..) builds a right side; it cannot be matched",
                                    self.lside)
                elif isinstance(n, PCall):
                    for attr, spec in n.attrs:
                        if isinstance(spec, AComputed):
                            piece = self.lside.computed[spec.index]
                            hint = " (write => instead of <=>)" if self.reverse else ""
                            raise self.src.error(f"a computed attribute value cannot be matched"
                                                 f"{hint}", piece.offset, self.rt.name)
                        if isinstance(spec, AVar) and not spec.name.startswith("_"):
                            attrs.add(spec.name)
                            sites.setdefault(spec.name, (n.opdef, attr))
        both = classes & (attrs | binders)
        if both:
            v = sorted(both)[0]
            raise self.fail(f"?{v} is used both as an expression and as an attribute or let "
                            "variable", var=v)
        return Kinds(frozenset(classes), frozenset(attrs), frozenset(binders), sites)

    def expand_spreads(self, p, left: bool):
        """``**?a`` -> one attribute variable ``?a.<attr>`` per attribute it stands for."""
        def again(q):
            return self.expand_spreads(q, left)

        if isinstance(p, PCall):
            attrs = dict(p.attrs)
            if p.spread is not None:
                for k in self.spread_members(p, attrs, left):
                    attrs[k] = AVar(f"{p.spread}.{k}")
            ordered = tuple((k, attrs[k]) for k in p.opdef.attrs if k in attrs)
            return PCall(p.op, tuple(map(again, p.args)), ordered, None, p.key, p.pos)
        if isinstance(p, PTuple):
            return PTuple(tuple(map(again, p.fields)))
        if isinstance(p, PProj):
            return PProj(again(p.value), p.index)
        if isinstance(p, PLet):
            return PLet(p.binder, again(p.value), again(p.body))
        if isinstance(p, PIf):
            return PIf(again(p.cond), again(p.then), again(p.other))
        if isinstance(p, PSubst):
            return PSubst(again(p.body), p.binder, again(p.value))
        return p

    def spread_members(self, p: PCall, written: dict, left: bool) -> list[str]:
        op = p.opdef
        if left:
            members = [k for k in op.attrs if k not in written]
            if self.spreads.setdefault(p.spread, members) != members:
                raise self.fail(f"**?{p.spread} stands for different attributes in two places",
                                self.lside, p.pos)
            return members
        members = self.spreads.get(p.spread)
        if members is None:
            raise self.fail(f"**?{p.spread} is not bound on the left side", self.rside, p.pos)
        extra = [k for k in members if k not in op.attrs and k not in written]
        if extra:
            raise self.fail(f"**?{p.spread} has attribute(s) {', '.join(extra)} that {op.name} "
                            "does not have", self.rside, p.pos)
        return [k for k in members if k not in written]

    def check_right(self, roots, kinds: Kinds) -> None:
        for p in roots:
            for n in walk(p):
                if isinstance(n, PVar):
                    if n.name.startswith(ANON):
                        raise self.fail("?_ matches anything; the right side cannot use it",
                                        self.rside, 0)
                    if n.name not in kinds.classes or _RESERVED.fullmatch(n.name):
                        raise self.fail(f"?{n.name} appears on the right side but is not bound "
                                        "on the left side", self.rside, var=n.name)
                elif isinstance(n, (PLet, PBinder, PSubst)):
                    b = n.binder if not isinstance(n, PBinder) else n.name
                    if b not in kinds.binders:
                        raise self.fail(f"?{b}: a let on the right side must bind a variable "
                                        "that a let on the left side binds", self.rside, var=b)
                elif isinstance(n, PCall):
                    op = lookup(n.op)
                    given = dict(n.attrs)
                    for _, spec in n.attrs:
                        if isinstance(spec, AVar) and spec.name not in kinds.attrs:
                            raise self.fail(f"attribute variable ?{spec.name} is not bound on "
                                            "the left side", self.rside, n.pos, var=spec.name)
                    for attr, default in op.attrs.items():
                        if default is REQUIRED and attr not in given and attr not in op.py_defaults:
                            raise self.fail(f"{op.name} needs attribute {attr} on the right side",
                                            self.rside, n.pos)

    def check_python(self, rule: Rule) -> None:
        """A right side built in Python cannot read attribute values: refuse what would."""
        for e in [*rule.computed, *([rule.cond] if rule.residue else [])]:
            attrs = sorted(v for v in e.variables() if v in rule.kinds.attrs)
            if attrs:
                raise self.src.error(
                    f"?{attrs[0]}: attribute values are only known to egglog, so they can be "
                    "compared with literals or each other (==, !=) but not used in computed "
                    "attributes or other conditions", e.source.offset, self.rt.name)
        built = {id(n) for _, part in rule.python_rewrite.prebuilt for n in walk(part)}
        for p in rule.rhs:
            for n in walk(p):
                if id(n) in built:
                    continue
                if isinstance(n, PCall) and any(isinstance(s, AVar) for _, s in n.attrs) and \
                        any(isinstance(s, AComputed) for _, s in n.attrs):
                    raise self.fail(f"{n.op} mixes attribute variables and computed attributes",
                                    self.rside, n.pos)
                if isinstance(n, (PLet, PBinder, PSubst)):
                    raise self.fail("a let or subst(..) above a computed attribute is not "
                                    "supported", self.rside)
