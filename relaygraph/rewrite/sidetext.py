"""Turning one side of a rule into text the Relay parser reads, keeping a map back to the file.

The Relay parser knows nothing of pattern variables, so before parsing:

- ``?name`` becomes ``%__pv_name`` (declared with ``free_var``; ``?_`` gets a fresh name);
- an attribute bound to a variable, ``axis=?ax``, becomes ``axis="?pv:ax"``;
- a computed attribute, ``indices_or_sections=[shape(?w1)[0]]``, becomes ``"?cv:N"`` and its
  text is kept for the expression parser (``cond.py``);
- ``**?a`` (every attribute not written out) becomes ``__spread__="?sp:a"``;
- the builtin ``subst(`` becomes a call of the global ``@__subst``.

Every character of the new text remembers the file offset it came from, so a parse error is
reported where the user wrote the offending text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .syntax import Located

__all__ = ["SideText", "prepare_side", "prepare_expression", "PV_PREFIX", "ANON", "AnonNames"]

PV_PREFIX = "__pv_"
ANON = "_"
_TOKEN = re.compile(
    r'(?P<string>"(?:\\.|[^"\\\n])*")'
    r"|(?P<spread>\*\*\s*\?[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<pvar>\?[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)"
    r"|(?P<ws>\s+)"
    r"|(?P<other>.)", re.S)
_COMPUTED_HINT = re.compile(r"\?|\b(shape|rank|dtype|len)\s*\(")


@dataclass
class SideText:
    """The parser-ready text of a side and what the rewriting took out of it."""

    text: str = ""
    origin: list[int] = field(default_factory=list)  # file offset of each character of text
    variables: list[str] = field(default_factory=list)  # pattern variables, first use first
    computed: list[Located] = field(default_factory=list)  # computed attribute expressions
    errors: list[tuple[str, int]] = field(default_factory=list)  # (message, file offset)

    def emit(self, piece: str, offset: int, same_length: bool = False) -> None:
        """Append text that came from ``offset`` (character by character when ``same_length``)."""
        self.text += piece
        if same_length:
            self.origin.extend(range(offset, offset + len(piece)))
        else:
            self.origin.extend([offset] * len(piece))

    def file_offset(self, pos: int) -> int:
        """The file offset of position ``pos`` of the prepared text."""
        if not self.origin:
            return 0
        return self.origin[max(0, min(pos, len(self.origin) - 1))]


class AnonNames:
    """Fresh names for the anonymous pattern variables ``?_`` of one rule."""

    def __init__(self) -> None:
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"{ANON}{self.count}"


def prepare_side(side: Located, anon: AnonNames | None = None) -> SideText:
    """The Relay text of a rule side, with ``free_var`` declarations for its variables."""
    anon = anon or AnonNames()
    body = SideText()
    _rewrite(side, body, anon)
    out = SideText(variables=body.variables, computed=body.computed, errors=body.errors)
    for name in body.variables:
        out.emit(f"free_var %{PV_PREFIX}{name}; ", side.offset)
    out.emit("\n", side.offset)
    out.text += body.text
    out.origin.extend(body.origin)
    return out


def prepare_expression(piece: Located) -> SideText:
    """Condition or computed-attribute text with ``?name`` turned into Python names."""
    out = SideText()
    for m in _TOKEN.finditer(piece.text):
        at = piece.offset + m.start()
        if m.lastgroup == "pvar":
            name = m.group()[1:]
            out.emit(PV_PREFIX + name, at)
            if name not in out.variables:
                out.variables.append(name)
        else:
            out.emit(m.group(), at, same_length=True)
    return out


def _rewrite(side: Located, out: SideText, anon: AnonNames) -> None:
    text = side.text
    tokens = [(m.lastgroup, m.group(), m.start()) for m in _TOKEN.finditer(text)]
    stack: list[bool] = []  # for each open bracket: is it a call's argument list?
    prev = None  # the previous significant token: its text for punctuation, else its kind
    prev_text = ""
    i = 0
    while i < len(tokens):
        kind, tok, start = tokens[i]
        at = side.offset + start
        if kind == "ws":
            out.emit(tok, at, same_length=True)
            i += 1
            continue
        if kind == "other" and tok in "%@":
            out.errors.append((f"`{tok}` names are not allowed in rules: write pattern variables "
                               "as ?name", at))
        if stack and stack[-1] and prev in ("(", ",") and kind in ("name", "spread"):
            j = _attr_item(tokens, i, side, out, anon)
            if j is not None:
                i = j
                prev = "attr"
                continue
        if kind == "pvar":
            name = tok[1:]
            if name == ANON:
                name = anon.fresh()
            elif name.startswith("_"):
                out.errors.append((f"pattern variable names may not start with `_`: {tok}", at))
            out.emit(f"%{PV_PREFIX}{name}", at)
            if name not in out.variables:
                out.variables.append(name)
        elif kind == "name" and tok == "subst" and _next_is(tokens, i, "("):
            out.emit("@__subst", at)
        else:
            out.emit(tok, at, same_length=True)
        if kind == "other" and tok in "([{":
            stack.append(tok == "(" and prev is not None and _ends_operand(prev, prev_text))
        elif kind == "other" and tok in ")]}" and stack:
            stack.pop()
        prev = tok if kind == "other" else kind
        prev_text = tok
        i += 1


_KEYWORDS = {"if", "else", "let", "fn", "match", "ref", "ref_read", "ref_write", "free_var"}


def _ends_operand(prev: str, text: str) -> bool:
    # `f(`, `?x(`, `g)(`: a call; `,(` or `((` or `if (`: a tuple or a parenthesised expression.
    if prev == "name":
        return text not in _KEYWORDS
    return prev in ("pvar", ")")


def _next_is(tokens, i: int, what: str) -> bool:
    for kind, tok, _ in tokens[i + 1:]:
        if kind != "ws":
            return tok == what
    return False


def _attr_item(tokens, i: int, side: Located, out: SideText, anon: AnonNames) -> int | None:
    """Handle a ``name=value`` or ``**?a`` call argument; the index after it, or None."""
    kind, tok, start = tokens[i]
    at = side.offset + start
    if kind == "spread":
        name = tok[2:].strip()[1:]
        out.emit(f'__spread__="?sp:{name}"', at)
        return i + 1
    j = i + 1
    while j < len(tokens) and tokens[j][0] == "ws":
        j += 1
    if j >= len(tokens) or tokens[j][1] != "=" or (j + 1 < len(tokens) and tokens[j + 1][1] in "=>"):
        return None
    k = j + 1
    depth = 0
    end = k
    while end < len(tokens):
        t = tokens[end][1]
        if tokens[end][0] == "other":
            if t in "([{":
                depth += 1
            elif t in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif t == "," and depth == 0:
                break
        end += 1
    value_start = tokens[k][2] if k < len(tokens) else len(side.text)
    value_end = tokens[end][2] if end < len(tokens) else len(side.text)
    raw = side.text[value_start:value_end]
    value = raw.strip()
    value_at = side.offset + value_start + (len(raw) - len(raw.lstrip()))
    out.emit(side.text[start:value_start], at, same_length=True)
    if re.fullmatch(r"\?[A-Za-z_][A-Za-z0-9_]*", value):
        name = value[1:]
        if name.startswith("_") and name != ANON:
            out.errors.append((f"pattern variable names may not start with `_`: {value}", value_at))
        out.emit(f'"?pv:{name}"', value_at)
    elif _COMPUTED_HINT.search(value):
        out.computed.append(Located(value, value_at))
        out.emit(f'"?cv:{len(out.computed) - 1}"', value_at)
    else:
        out.emit(raw, side.offset + value_start, same_length=True)
        return end
    trailing = raw[len(raw.rstrip()):]
    out.emit(trailing, side.offset + value_end - len(trailing), same_length=True)
    return end
